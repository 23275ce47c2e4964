//! The host tools' MCP server over real HTTP: bearer authentication, the tool list the guest
//! sees, and admission of `tools/call` by the delivered-call ledger.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use switchyard_binding::{
    BindingLimits, HostBinding, HostTool, IDENTITY_ARG, McpServer, OfferedCall, ToolFuture,
    ToolOutput, ToolRegistry,
};

struct Logged {
    schema: Value,
    log: Arc<Mutex<Vec<Value>>>,
}

impl HostTool for Logged {
    fn name(&self) -> &str {
        "record"
    }
    fn description(&self) -> &str {
        "Record an observation."
    }
    fn input_schema(&self) -> &Value {
        &self.schema
    }
    fn call(&self, arguments: Value) -> ToolFuture<'_> {
        self.log.lock().unwrap().push(arguments);
        Box::pin(std::future::ready(Ok(ToolOutput {
            text: "recorded".into(),
            images: Vec::new(),
        })))
    }
}

const TOKEN: &str = "test-token-0123456789";

struct Server {
    binding: HostBinding,
    server: McpServer,
    log: Arc<Mutex<Vec<Value>>>,
    client: reqwest::Client,
    session: Option<String>,
    events: tokio::sync::mpsc::Receiver<switchyard_events::Event>,
}

async fn server() -> Server {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let log = Arc::new(Mutex::new(Vec::new()));
    let mut registry = ToolRegistry::new();
    registry
        .add(Arc::new(Logged {
            schema: json!({"type": "object", "properties": {"nonce": {"type": "string"}},
                           "required": ["nonce"]}),
            log: log.clone(),
        }))
        .unwrap();
    let (binding, events) = HostBinding::new(registry, "mcp_sy_", BindingLimits::default());
    let server = McpServer::start(binding.clone(), TOKEN).await.unwrap();
    Server {
        binding,
        server,
        log,
        client: reqwest::Client::new(),
        session: None,
        events,
    }
}

impl Server {
    async fn post(&self, token: Option<&str>, body: Value) -> reqwest::Response {
        let mut request = self
            .client
            .post(self.server.url())
            .header("accept", "application/json, text/event-stream")
            .json(&body);
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        if let Some(session) = &self.session {
            request = request.header("mcp-session-id", session);
        }
        request.send().await.unwrap()
    }

    /// The JSON-RPC answer of `body` (SSE or JSON).
    async fn rpc(&mut self, body: Value) -> Value {
        let response = self.post(Some(TOKEN), body).await;
        assert!(response.status().is_success(), "{}", response.status());
        if let Some(session) = response.headers().get("mcp-session-id") {
            self.session = Some(session.to_str().unwrap().to_owned());
        }
        let text = response.text().await.unwrap();
        let json = text
            .lines()
            .filter_map(|l| l.strip_prefix("data:"))
            .map(str::trim)
            .find(|d| !d.is_empty())
            .unwrap_or(&text)
            .to_owned();
        serde_json::from_str(&json).unwrap_or_else(|e| panic!("{e}: {text}"))
    }

    async fn initialized(&mut self) -> Value {
        let init = self
            .rpc(
                json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": "2025-06-18", "capabilities": {},
                "clientInfo": {"name": "test", "version": "1"}}}),
            )
            .await;
        let response = self
            .post(
                Some(TOKEN),
                json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
            )
            .await;
        assert!(response.status().is_success());
        init
    }

    async fn call(&mut self, id: u64, arguments: Value) -> Value {
        self.rpc(json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": "record", "arguments": arguments}}))
            .await
    }
}

#[tokio::test]
async fn a_missing_or_wrong_token_gets_401() {
    let s = server().await;
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}});
    for token in [None, Some("wrong"), Some("test-token-012345678")] {
        let response = s.post(token, init.clone()).await;
        assert_eq!(response.status(), 401, "token {token:?}");
    }
}

#[tokio::test]
async fn the_guest_sees_the_tools_with_the_optional_identity() {
    let mut s = server().await;
    let init = s.initialized().await;
    assert!(
        init["result"]["capabilities"]["tools"].is_object(),
        "{init}"
    );
    let list = s
        .rpc(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}))
        .await;
    let tools = list["result"]["tools"].as_array().unwrap();
    assert_eq!(tools.len(), 1, "{list}");
    assert_eq!(tools[0]["name"], "record");
    let schema = &tools[0]["inputSchema"];
    assert_eq!(schema["properties"][IDENTITY_ARG]["type"], "string");
    assert_eq!(schema["required"], json!(["nonce"]));
}

#[tokio::test]
async fn a_forged_callback_is_refused_and_a_delivered_one_runs_once_and_a_repeat_is_answered() {
    let mut s = server().await;
    s.initialized().await;
    // The right token, but no delivered call (e.g. the guest's own shell tool).
    let forged = s.call(2, json!({"nonce": "n"})).await;
    assert!(
        forged["error"]["message"]
            .as_str()
            .unwrap()
            .contains("no call identity"),
        "{forged}"
    );
    let delivery = s
        .binding
        .offer(
            "session",
            vec![OfferedCall {
                call_id: "call_1".into(),
                model_call_id: "call_1".into(),
                tool: "record".into(),
                arguments: json!({"nonce": "n"}),
            }],
        )
        .unwrap();
    let identity = delivery.identities()[0].clone();
    delivery.confirm();
    let ok = s
        .call(3, json!({"nonce": "n", IDENTITY_ARG: identity.clone()}))
        .await;
    assert_eq!(ok["result"]["content"][0]["text"], "recorded", "{ok}");
    assert_ne!(ok["result"]["isError"], true);
    // A guest retrying the same call gets the same answer; the tool does not run again.
    let repeated = s
        .call(4, json!({"nonce": "n", IDENTITY_ARG: identity.clone()}))
        .await;
    assert_eq!(repeated["result"], ok["result"], "{repeated}");
    // The same identity with other arguments is no repeat.
    let other = s
        .call(5, json!({"nonce": "other", IDENTITY_ARG: identity}))
        .await;
    assert!(
        other["error"]["message"]
            .as_str()
            .unwrap()
            .contains("not a call of record with these"),
        "{other}"
    );
    assert_eq!(*s.log.lock().unwrap(), [json!({"nonce": "n"})]);
    // Every decision is an event: refused, admitted (+ its result), repeated, refused.
    let mut decisions = Vec::new();
    while let Ok(event) = s.events.try_recv() {
        if let switchyard_events::Event::HostCall(call) = event {
            decisions.push((call.decision, call.reason));
        }
    }
    use switchyard_events::event::HostDecision::{Admitted, Refused, Repeated};
    assert_eq!(
        decisions,
        [
            (Refused, Some("missing_identity".into())),
            (Admitted, None),
            (Repeated, Some("repeated".into())),
            (Refused, Some("wrong_identity".into()))
        ]
    );
}
