// A fake ACP agent that keeps running after its stdin ends, as Gemini CLI does while a stdio MCP
// server child is alive: Switchyard must close it after the last answer without calling the
// run a failure.
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

setInterval(() => {}, 1000);
readline.createInterface({ input: process.stdin }).on("line", async (line) => {
  const msg = JSON.parse(line);
  if (msg.method === undefined) return;
  const reply = (result) => out({ jsonrpc: "2.0", id: msg.id, result });
  switch (msg.method) {
    case "initialize":
      return reply({ protocolVersion: 1, authMethods: [{ id: "gateway", name: "AI API Gateway" }] });
    case "authenticate":
      authenticated(msg.params);
      return reply({});
    case "session/new":
      return reply({ sessionId: "lingering" });
    case "session/prompt":
      await askModel("go");
      out({
        jsonrpc: "2.0",
        method: "session/update",
        params: {
          sessionId: "lingering",
          update: { sessionUpdate: "agent_message_chunk", content: { type: "text", text: "done" } },
        },
      });
      return reply({ stopReason: "end_turn" });
    default:
      out({ jsonrpc: "2.0", id: msg.id, error: { code: -32601, message: "Method not found" } });
  }
});
