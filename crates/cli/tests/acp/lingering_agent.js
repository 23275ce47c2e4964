// A fake ACP agent that keeps running after its stdin ends, as Gemini CLI does while a stdio MCP
// server child is alive: Switchyard must close it after the last answer without calling the
// run a failure.
const readline = require("readline");
const out = (msg) => process.stdout.write(JSON.stringify(msg) + "\n");
setInterval(() => {}, 1000);
readline.createInterface({ input: process.stdin }).on("line", (line) => {
  const msg = JSON.parse(line);
  if (msg.method === undefined) return;
  const reply = (result) => out({ jsonrpc: "2.0", id: msg.id, result });
  switch (msg.method) {
    case "initialize":
      return reply({ protocolVersion: 1, authMethods: [{ id: "gateway", name: "AI API Gateway" }] });
    case "authenticate":
      return reply({});
    case "session/new":
      return reply({ sessionId: "lingering" });
    case "session/prompt":
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
