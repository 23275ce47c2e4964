// A fake ACP agent for the one thing the real Gemini CLI never does: ask permission for calls
// nobody delivered. It answers the handshake like Gemini CLI 0.61.0, and on a prompt asks
// permission for a call the gateway never delivered and for a session that is not the active
// one, then reports the answers it got as its message. It also prints a line that is not JSON
// and a notification with no mapping, which must be kept.
const readline = require("readline");
const out = (msg) => process.stdout.write(JSON.stringify(msg) + "\n");
// Like a real agent, it asks the model (through the gateway it was given in `authenticate`)
// before it answers a prompt: the host only believes an answer its gateway delivered.
const http = require("http");
let gateway = null;
const askModel = (text) =>
  new Promise((resolve) => {
    if (!gateway) return resolve("");
    const url = new URL(`${gateway.baseUrl}/v1beta/models/scripted-model:streamGenerateContent?alt=sse`);
    const body = JSON.stringify({ contents: [{ role: "user", parts: [{ text }] }] });
    const req = http.request(
      url,
      { method: "POST", headers: { "content-type": "application/json", "x-goog-api-key": gateway.key } },
      (res) => {
        let data = "";
        res.on("data", (chunk) => (data += chunk));
        res.on("end", () => resolve(data));
      },
    );
    req.on("error", () => resolve(""));
    req.end(body);
  });
const authenticated = (params) => {
  const meta = (params && params._meta) || {};
  if (meta.gateway) gateway = { baseUrl: meta.gateway.baseUrl, key: meta["api-key"] };
};

const pending = new Map();
let nextId = 0;
const ask = (method, params) =>
  new Promise((resolve) => {
    const id = nextId++;
    pending.set(id, resolve);
    out({ jsonrpc: "2.0", id, method, params });
  });
const options = [
  { optionId: "proceed_once", name: "Allow", kind: "allow_once" },
  { optionId: "cancel", name: "Reject", kind: "reject_once" },
];
const permission = (sessionId, toolCallId) =>
  ask("session/request_permission", {
    sessionId,
    options,
    toolCall: { toolCallId, status: "pending", title: "forged", content: [], kind: "execute" },
  });
readline.createInterface({ input: process.stdin }).on("line", async (line) => {
  const msg = JSON.parse(line);
  if (msg.method === undefined) {
    // An answer to one of our requests.
    const resolve = pending.get(msg.id);
    if (resolve) resolve(msg);
    return;
  }
  const reply = (result) => out({ jsonrpc: "2.0", id: msg.id, result });
  switch (msg.method) {
    case "initialize":
      return reply({
        protocolVersion: 1,
        authMethods: [{ id: "gateway", name: "AI API Gateway" }],
        agentCapabilities: { loadSession: true },
      });
    case "authenticate":
      authenticated(msg.params);
      return reply({});
    case "session/new":
      return reply({ sessionId: "fake-session" });
    case "session/prompt": {
      process.stdout.write("this line is not JSON\n");
      out({ jsonrpc: "2.0", method: "_fake/hello", params: { n: 1 } });
      const undelivered = await permission("fake-session", "run_shell_command__never_delivered");
      const elsewhere = await permission("other-session", "run_shell_command__never_delivered");
      const text = `answers: ${undelivered.error?.code} ${elsewhere.error?.code}`;
      await askModel(text);
      out({
        jsonrpc: "2.0",
        method: "session/update",
        params: {
          sessionId: "fake-session",
          update: { sessionUpdate: "agent_message_chunk", content: { type: "text", text } },
        },
      });
      return reply({ stopReason: "end_turn" });
    }
    default:
      out({ jsonrpc: "2.0", id: msg.id, error: { code: -32601, message: "Method not found" } });
  }
});
