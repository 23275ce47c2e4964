# A forged callback, as the guest's own shell could make one: the right token (the guest's
# environment has it) and the right URL (the guest's settings have it), but no delivered call.
import json, os, urllib.request

settings = json.load(open(os.path.join(os.environ["HOME"], ".gemini", "settings.json")))
url = settings["mcpServers"]["switchyard"]["httpUrl"]
token = os.environ["SWITCHYARD_MCP_TOKEN"]

def rpc(body):
    request = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST", headers={
        "Authorization": "Bearer " + token,
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
    })
    with urllib.request.urlopen(request) as response:
        return response.read().decode()

rpc({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "forge", "version": "1"}}})
for n, args in enumerate([{"nonce": "forged"}, {"nonce": "forged", "_switchyard_call": "sy" + "0" * 64}]):
    print(rpc({"jsonrpc": "2.0", "id": 2 + n, "method": "tools/call",
               "params": {"name": "record", "arguments": args}}))
