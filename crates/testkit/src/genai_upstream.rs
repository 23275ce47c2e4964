//! A scripted Google GenerateContent endpoint on 127.0.0.1, for driving the real Gemini CLI
//! directly (without the gateway): used by the fixture capture tool and backend tests.
//!
//! Each [`GenaiScenario`] answers `:streamGenerateContent` from the request's state (how many
//! function-response turns it already holds), and auxiliary `:generateContent` calls with fixed
//! JSON. Every request is recorded.

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// What the endpoint answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GenaiScenario {
    /// Two text chunks, `STOP`.
    Text,
    /// Turn 0: text then `list_directory(".")`; turn 1: text.
    ToolOk,
    /// Turn 0: `read_file` outside the workspace (the CLI refuses); turn 1: text.
    ToolFail,
    /// Turn 0: two parallel calls with ids `call_A`, `call_B`; turn 1: text.
    ToolParallel,
    /// Every generate call fails with this HTTP status (Google error body).
    HttpError(u16),
    /// A stream with `STOP` and no parts (the CLI calls it an invalid stream).
    Empty,
    /// Always the same `list_directory` call (loop detection / turn limit).
    Loop,
    /// Turn 0: `google_web_search` (the guest then calls the model with the built-in
    /// `googleSearch` tool); turn 1: text.
    WebSearch,
    /// Turn 0: a thought part, visible text with a `thoughtSignature`, and a `list_directory`
    /// call with another signature; turn 1: text.
    Thought,
    /// Turn 0: `write_file("b.txt")` (asks permission over ACP); turn 1: `run_shell_command`
    /// (asks too); turn 2: text.
    WriteAndShell,
    /// Turn 0: `read_file("quarterly.pdf")` (the guest answers with the PDF as `inlineData`);
    /// turn 1: text.
    ReadPdf,
    /// One text chunk, then the stream stays open forever.
    HangAfterFirstChunk,
    /// Never answers at all (headers are not sent).
    HangBeforeHeaders,
}

/// One request the endpoint received.
#[derive(Debug, Clone)]
pub struct GenaiRequest {
    pub path: String,
    pub headers: Vec<(String, String)>,
    pub body: Value,
}

struct Shared {
    scenario: GenaiScenario,
    requests: Mutex<Vec<GenaiRequest>>,
}

/// A running endpoint. Dropping it stops the server.
pub struct GenaiUpstream {
    addr: SocketAddr,
    shared: Arc<Shared>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for GenaiUpstream {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl GenaiUpstream {
    /// Starts on an ephemeral loopback port.
    pub async fn start(scenario: GenaiScenario) -> std::io::Result<Self> {
        let shared = Arc::new(Shared {
            scenario,
            requests: Mutex::new(Vec::new()),
        });
        let app = Router::new().fallback(handle).with_state(shared.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Ok(GenaiUpstream { addr, shared, task })
    }

    /// `http://127.0.0.1:<port>` (what `GOOGLE_GEMINI_BASE_URL` should be).
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Requests received so far.
    pub fn requests(&self) -> Vec<GenaiRequest> {
        self.shared
            .requests
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }
}

const MODEL_VERSION: &str = "scripted-genai-001";

fn usage() -> Value {
    json!({"promptTokenCount": 100, "candidatesTokenCount": 20, "totalTokenCount": 130,
           "cachedContentTokenCount": 10, "thoughtsTokenCount": 0})
}

fn function_response_turns(body: &Value) -> usize {
    body["contents"]
        .as_array()
        .map(|cs| {
            cs.iter()
                .filter(|c| {
                    c["parts"]
                        .as_array()
                        .is_some_and(|ps| ps.iter().any(|p| p.get("functionResponse").is_some()))
                })
                .count()
        })
        .unwrap_or(0)
}

fn call(name: &str, args: Value, id: Option<&str>) -> Value {
    let mut fc = json!({"name": name, "args": args});
    if let Some(id) = id {
        fc["id"] = Value::from(id);
    }
    json!({"functionCall": fc})
}

/// The chunks (each a list of parts) of a main-loop answer, and its finish reason.
fn main_turn(scenario: GenaiScenario, turn: usize) -> (Vec<Vec<Value>>, &'static str) {
    let text = |t: &str| json!({"text": t});
    let done = (vec![vec![text("Done. ")], vec![text("All good.")]], "STOP");
    match (scenario, turn) {
        (GenaiScenario::Text, _) => (
            vec![vec![text("Hello ")], vec![text("from the scripted model.")]],
            "STOP",
        ),
        (GenaiScenario::ToolOk, 0) => (
            vec![
                vec![text("Let me look.")],
                vec![call("list_directory", json!({"dir_path": "."}), None)],
            ],
            "STOP",
        ),
        (GenaiScenario::ToolFail, 0) => (
            vec![vec![call(
                "read_file",
                json!({"file_path": "/nonexistent/nope.txt"}),
                None,
            )]],
            "STOP",
        ),
        (GenaiScenario::ToolParallel, 0) => (
            vec![vec![
                call("list_directory", json!({"dir_path": "."}), Some("call_A")),
                call("read_file", json!({"file_path": "a.txt"}), Some("call_B")),
            ]],
            "STOP",
        ),
        (GenaiScenario::ReadPdf, 0) => (
            vec![vec![call(
                "read_file",
                json!({"file_path": "quarterly.pdf"}),
                None,
            )]],
            "STOP",
        ),
        (GenaiScenario::WebSearch, 0) => (
            vec![vec![call(
                "google_web_search",
                json!({"query": "rust async traits"}),
                None,
            )]],
            "STOP",
        ),
        (GenaiScenario::Thought, 0) => (
            vec![
                vec![json!({"text": "**Planning**\nList the directory first.", "thought": true})],
                vec![json!({"text": "Looking around.", "thoughtSignature": "SIG_ON_TEXT"})],
                vec![{
                    let mut part = call("list_directory", json!({"dir_path": "."}), None);
                    part["thoughtSignature"] = Value::from("SIG_ON_CALL");
                    part
                }],
            ],
            "STOP",
        ),
        (GenaiScenario::WriteAndShell, 0) => (
            vec![vec![call(
                "write_file",
                json!({"file_path": "b.txt", "content": "new file\n"}),
                Some("call_write"),
            )]],
            "STOP",
        ),
        (GenaiScenario::WriteAndShell, 1) => (
            vec![vec![call(
                "run_shell_command",
                json!({"command": "touch made_by_shell.txt", "description": "touch"}),
                Some("call_shell"),
            )]],
            "STOP",
        ),
        (GenaiScenario::Empty, _) => (vec![vec![]], "STOP"),
        (GenaiScenario::Loop, _) => (
            vec![vec![call("list_directory", json!({"dir_path": "."}), None)]],
            "STOP",
        ),
        _ => done,
    }
}

fn google_error(status: u16) -> Response {
    let (name, message) = match status {
        400 => ("INVALID_ARGUMENT", "Request contains an invalid argument."),
        401 => ("UNAUTHENTICATED", "API key not valid."),
        403 => ("PERMISSION_DENIED", "Permission denied."),
        404 => ("NOT_FOUND", "Model not found."),
        429 => (
            "RESOURCE_EXHAUSTED",
            "Resource has been exhausted (e.g. check quota).",
        ),
        _ => ("INTERNAL", "Internal error encountered."),
    };
    let body = json!({"error": {"code": status, "message": message, "status": name}});
    (
        StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
        [("content-type", "application/json")],
        body.to_string(),
    )
        .into_response()
}

fn sse_event(value: &Value) -> Bytes {
    Bytes::from(format!("data: {value}\r\n\r\n"))
}

async fn handle(
    State(shared): State<Arc<Shared>>,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let body: Value = serde_json::from_slice(&body)
        .unwrap_or_else(|_| json!({"_raw": String::from_utf8_lossy(&body)}));
    let path = uri.path().to_owned();
    shared
        .requests
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .push(GenaiRequest {
            path: uri.to_string(),
            headers: headers
                .iter()
                .map(|(k, v)| {
                    (
                        k.as_str().to_owned(),
                        String::from_utf8_lossy(v.as_bytes()).into_owned(),
                    )
                })
                .collect(),
            body: body.clone(),
        });
    if path.ends_with(":countTokens") {
        return axum::Json(json!({"totalTokens": 42})).into_response();
    }
    match shared.scenario {
        GenaiScenario::HttpError(status) => return google_error(status),
        GenaiScenario::HangBeforeHeaders => {
            std::future::pending::<()>().await;
        }
        _ => {}
    }
    if path.ends_with(":streamGenerateContent") {
        let turn = function_response_turns(&body);
        let scenario = shared.scenario;
        let stream = async_stream(scenario, turn);
        return (
            [(axum::http::header::CONTENT_TYPE, "text/event-stream")],
            Body::from_stream(stream),
        )
            .into_response();
    }
    // Auxiliary generateContent: fixed JSON text that satisfies every helper's schema.
    let text = json!({"next_speaker": "user", "reasoning": "scripted", "model_choice": "flash",
                      "complexity_reasoning": "simple", "complexity_score": 10})
    .to_string();
    axum::Json(json!({
        "candidates": [{"content": {"role": "model", "parts": [{"text": text}]}, "finishReason": "STOP", "index": 0}],
        "usageMetadata": {"promptTokenCount": 5, "candidatesTokenCount": 3, "totalTokenCount": 8},
        "modelVersion": MODEL_VERSION
    }))
    .into_response()
}

fn async_stream(
    scenario: GenaiScenario,
    turn: usize,
) -> impl futures_util::Stream<Item = Result<Bytes, std::io::Error>> {
    let (chunks, finish) = main_turn(scenario, turn);
    let hang = scenario == GenaiScenario::HangAfterFirstChunk;
    let count = chunks.len();
    let events: Vec<Bytes> = chunks
        .into_iter()
        .enumerate()
        .map(|(i, parts)| {
            let last = i + 1 == count;
            let mut candidate = json!({"content": {"role": "model", "parts": parts}, "index": 0});
            let mut chunk =
                json!({"modelVersion": MODEL_VERSION, "responseId": format!("resp-{turn}-{i}")});
            if last {
                candidate["finishReason"] = Value::from(finish);
                chunk["usageMetadata"] = usage();
            }
            chunk["candidates"] = json!([candidate]);
            sse_event(&chunk)
        })
        .collect();
    futures_util::stream::unfold(
        (events.into_iter(), hang, 0usize),
        |(mut it, hang, n)| async move {
            if hang && n == 1 {
                std::future::pending::<()>().await;
            }
            let item = it.next()?;
            // A small pause between chunks keeps them separate network writes, as real servers do.
            tokio::time::sleep(Duration::from_millis(5)).await;
            Some((Ok(item), (it, hang, n + 1)))
        },
    )
}
