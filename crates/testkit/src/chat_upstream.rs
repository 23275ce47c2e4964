//! A scripted OpenAI Chat Completions upstream on `127.0.0.1:0`.
//!
//! Tests, the benchmark and demos start a [`ChatUpstream`] with a [`Script`]: an ordered list of
//! [`Step`]s. Each incoming request consumes the first remaining step whose predicate matches
//! (steps without a predicate match anything) and is answered with that step's [`Reply`]:
//! streamed chunks (with optional per-chunk delays and [`Gate`]s), a non-streamed JSON
//! completion, an HTTP error with an optional `Retry-After`, a hang that never answers, or raw
//! bytes. Every request is recorded (method, path, headers, raw body) for assertions.
//!
//! The server answers every path, so the base URL can be used as `…/v1` (the gateway appends
//! `/chat/completions`). A request that matches no step gets a `500` whose body says so, and is
//! counted in [`ChatUpstream::unmatched`].
//!
//! Zero-delay mode for benchmarks: `Script::always(reply)` with a pre-built reply and
//! `Script::record_bodies(false)`, so answering costs little more than writing pre-serialized
//! bytes.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::IntoResponse;
use axum::response::Response;
use axum::serve::ListenerExt;
use serde_json::{Value, json};
use tokio::sync::Notify;
use tokio::task::JoinHandle;

/// Decides whether a step answers a request.
pub type Predicate = Arc<dyn Fn(&RecordedRequest) -> bool + Send + Sync>;

/// Builds a reply from the request (for answers that depend on what the client sent).
pub type ReplyFn = Arc<dyn Fn(&RecordedRequest) -> Reply + Send + Sync>;

/// One request as the upstream received it.
#[derive(Debug, Clone)]
pub struct RecordedRequest {
    pub method: String,
    /// Path and query, e.g. `/v1/chat/completions`.
    pub path: String,
    /// Header names lower-cased, in arrival order.
    pub headers: Vec<(String, String)>,
    /// Raw body bytes (empty when the script was built with `record_bodies(false)`).
    pub body: Bytes,
}

impl RecordedRequest {
    /// The first header with this (case-insensitive) name.
    pub fn header(&self, name: &str) -> Option<&str> {
        let name = name.to_ascii_lowercase();
        self.headers
            .iter()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| v.as_str())
    }

    /// The body parsed as JSON (`Value::Null` when it is not JSON).
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or(Value::Null)
    }

    /// Whether the request body asks for a streamed answer (`"stream": true`).
    pub fn wants_stream(&self) -> bool {
        self.json().get("stream").and_then(Value::as_bool) == Some(true)
    }

    /// The `messages` with role `tool`, in order.
    pub fn tool_messages(&self) -> Vec<Value> {
        self.json()
            .get("messages")
            .and_then(Value::as_array)
            .map(|m| {
                m.iter()
                    .filter(|m| m.get("role").and_then(Value::as_str) == Some("tool"))
                    .cloned()
                    .collect()
            })
            .unwrap_or_default()
    }
}

/// A latch a test opens to let a held stream event go out (see [`StreamEvent::after_gate`]).
///
/// Opening before the stream reaches the event is fine: the permit is kept.
#[derive(Debug, Clone, Default)]
pub struct Gate(Arc<Notify>);

impl Gate {
    pub fn new() -> Self {
        Self::default()
    }
    /// Let the waiting (or next) event through.
    pub fn open(&self) {
        self.0.notify_one();
    }
    async fn wait(&self) {
        self.0.notified().await;
    }
}

/// One SSE `data:` event of a streamed reply.
#[derive(Debug, Clone)]
pub struct StreamEvent {
    /// The payload after `data: ` (usually one JSON chunk; sent verbatim).
    pub data: Bytes,
    /// Wait this long before sending.
    pub delay: Duration,
    /// Wait for this gate to open before sending (after the delay).
    pub gate: Option<Gate>,
}

impl StreamEvent {
    /// An event carrying this JSON chunk, sent immediately.
    pub fn json(chunk: Value) -> Self {
        Self::raw(chunk.to_string())
    }
    /// An event carrying this exact payload (may be invalid JSON on purpose).
    pub fn raw(data: impl Into<String>) -> Self {
        Self {
            data: Bytes::from(data.into()),
            delay: Duration::ZERO,
            gate: None,
        }
    }
    pub fn after(mut self, delay: Duration) -> Self {
        self.delay = delay;
        self
    }
    pub fn after_gate(mut self, gate: &Gate) -> Self {
        self.gate = Some(gate.clone());
        self
    }
}

/// What happens after the last event of a streamed reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreamEnd {
    /// Send `data: [DONE]` and close.
    Done,
    /// Close without `[DONE]` (a truncated stream).
    Close,
    /// Keep the connection open and send nothing more (an idle stream).
    Hang,
}

/// A streamed (`text/event-stream`) reply.
#[derive(Debug, Clone)]
pub struct StreamReply {
    pub events: Vec<StreamEvent>,
    pub end: StreamEnd,
}

impl StreamReply {
    pub fn new(events: Vec<StreamEvent>) -> Self {
        Self {
            events,
            end: StreamEnd::Done,
        }
    }
    pub fn ending(mut self, end: StreamEnd) -> Self {
        self.end = end;
        self
    }
    /// Delay every event by `delay`.
    pub fn each_after(mut self, delay: Duration) -> Self {
        for e in &mut self.events {
            e.delay = delay;
        }
        self
    }
}

/// How a step answers.
#[derive(Clone)]
pub enum Reply {
    /// `200 text/event-stream` with these events.
    Stream(StreamReply),
    /// A JSON body (a non-streamed completion, or any JSON with any status).
    Json { status: u16, body: Value },
    /// An HTTP error with a body and optional `Retry-After` header value.
    Error {
        status: u16,
        body: String,
        retry_after: Option<String>,
    },
    /// Never answer (until the client goes away or the server stops).
    Hang,
    /// Exact bytes with a content type.
    Raw {
        status: u16,
        content_type: String,
        body: Bytes,
    },
    /// Decide from the request.
    Dynamic(ReplyFn),
    /// `200 text/event-stream` repeating this event without end (until the client goes away),
    /// like a model that never stops; see [`ChatUpstream::endless_bytes`].
    Endless(Value),
}

impl std::fmt::Debug for Reply {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Reply::Stream(s) => write!(f, "Stream({} events, {:?})", s.events.len(), s.end),
            Reply::Json { status, .. } => write!(f, "Json({status})"),
            Reply::Error { status, .. } => write!(f, "Error({status})"),
            Reply::Hang => write!(f, "Hang"),
            Reply::Raw { status, .. } => write!(f, "Raw({status})"),
            Reply::Dynamic(_) => write!(f, "Dynamic"),
            Reply::Endless(_) => write!(f, "Endless"),
        }
    }
}

/// Builders for Chat Completions chunks and replies.
pub mod chunk {
    use super::*;

    const MODEL: &str = "scripted-model";

    fn envelope(delta: Value, finish: Value) -> Value {
        json!({
            "id": "chatcmpl-scripted",
            "object": "chat.completion.chunk",
            "created": 1_700_000_000,
            "model": MODEL,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]
        })
    }

    /// The opening chunk (`role: assistant`).
    pub fn role() -> Value {
        envelope(json!({"role": "assistant", "content": ""}), Value::Null)
    }
    /// A text delta.
    pub fn text(text: &str) -> Value {
        envelope(json!({"content": text}), Value::Null)
    }
    /// A reasoning delta (`reasoning_content`, as DeepSeek and vLLM send it).
    pub fn reasoning(text: &str) -> Value {
        envelope(json!({"reasoning_content": text}), Value::Null)
    }
    /// A tool-call delta. `id` and `name` normally come only on the first delta of an index.
    pub fn tool_call(index: u32, id: Option<&str>, name: Option<&str>, arguments: &str) -> Value {
        let mut call = json!({"index": index, "function": {"arguments": arguments}});
        if let Some(id) = id {
            call["id"] = json!(id);
            call["type"] = json!("function");
        }
        if let Some(name) = name {
            call["function"]["name"] = json!(name);
        }
        envelope(json!({"tool_calls": [call]}), Value::Null)
    }
    /// A chunk carrying only a finish reason (`stop`, `tool_calls`, `length`, ...).
    pub fn finish(reason: &str) -> Value {
        envelope(json!({}), json!(reason))
    }
    /// The trailing usage chunk (`stream_options.include_usage`): empty `choices`.
    pub fn usage(prompt: u64, completion: u64) -> Value {
        json!({
            "id": "chatcmpl-scripted",
            "object": "chat.completion.chunk",
            "created": 1_700_000_000,
            "model": MODEL,
            "choices": [],
            "usage": {"prompt_tokens": prompt, "completion_tokens": completion,
                      "total_tokens": prompt + completion}
        })
    }
    /// A complete non-streamed completion with text.
    pub fn completion_text(text: &str) -> Value {
        json!({
            "id": "chatcmpl-scripted",
            "object": "chat.completion",
            "created": 1_700_000_000,
            "model": MODEL,
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": text}}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
        })
    }
    /// A complete non-streamed completion with tool calls `(id, name, arguments_json)`.
    pub fn completion_tool_calls(calls: &[(&str, &str, &str)]) -> Value {
        let calls: Vec<Value> = calls
            .iter()
            .map(|(id, name, args)| {
                json!({"id": id, "type": "function", "function": {"name": name, "arguments": args}})
            })
            .collect();
        json!({
            "id": "chatcmpl-scripted",
            "object": "chat.completion",
            "created": 1_700_000_000,
            "model": MODEL,
            "choices": [{"index": 0, "finish_reason": "tool_calls",
                         "message": {"role": "assistant", "content": null, "tool_calls": calls}}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
        })
    }
}

impl Reply {
    /// A streamed text answer: role chunk, one chunk per piece, `finish_reason: stop`, usage.
    pub fn text_stream<S: AsRef<str>>(pieces: impl IntoIterator<Item = S>) -> Self {
        let mut events = vec![StreamEvent::json(chunk::role())];
        events.extend(
            pieces
                .into_iter()
                .map(|p| StreamEvent::json(chunk::text(p.as_ref()))),
        );
        events.push(StreamEvent::json(chunk::finish("stop")));
        events.push(StreamEvent::json(chunk::usage(12, 7)));
        Reply::Stream(StreamReply::new(events))
    }

    /// A streamed answer with tool calls `(id, name, arguments_json)`; each call's arguments are
    /// split into pieces of `split` bytes (at char boundaries) across chunks, as providers do.
    pub fn tool_calls_stream(calls: &[(&str, &str, &str)], split: usize) -> Self {
        let mut events = vec![StreamEvent::json(chunk::role())];
        for (index, (id, name, args)) in calls.iter().enumerate() {
            let index = index as u32;
            let pieces = split_at_chars(args, split.max(1));
            events.push(StreamEvent::json(chunk::tool_call(
                index,
                Some(id),
                Some(name),
                "",
            )));
            for piece in pieces {
                events.push(StreamEvent::json(chunk::tool_call(
                    index, None, None, &piece,
                )));
            }
        }
        events.push(StreamEvent::json(chunk::finish("tool_calls")));
        events.push(StreamEvent::json(chunk::usage(20, 9)));
        Reply::Stream(StreamReply::new(events))
    }

    /// A streamed answer whose tool calls `(id, name, arguments_json)` each come whole, in a
    /// chunk of their own, all at `index: 0` (as some local servers send parallel calls).
    pub fn tool_calls_whole_at_index_zero(calls: &[(&str, &str, &str)]) -> Self {
        let mut events = vec![StreamEvent::json(chunk::role())];
        for (id, name, args) in calls {
            events.push(StreamEvent::json(chunk::tool_call(
                0,
                Some(id),
                Some(name),
                args,
            )));
        }
        events.push(StreamEvent::json(chunk::finish("tool_calls")));
        events.push(StreamEvent::json(chunk::usage(20, 9)));
        Reply::Stream(StreamReply::new(events))
    }

    /// A 200 stream that ends at once with `[DONE]` and no chunk: no answer at all.
    pub fn empty_stream() -> Self {
        Reply::Stream(StreamReply::new(Vec::new()))
    }

    /// A streamed tool call whose arguments are truncated JSON (never valid).
    pub fn malformed_tool_call_stream(id: &str, name: &str) -> Self {
        let events = vec![
            StreamEvent::json(chunk::role()),
            StreamEvent::json(chunk::tool_call(0, Some(id), Some(name), "{\"file_pa")),
            StreamEvent::json(chunk::tool_call(0, None, None, "th\": \"/tm")),
            StreamEvent::json(chunk::finish("tool_calls")),
            StreamEvent::json(chunk::usage(20, 3)),
        ];
        Reply::Stream(StreamReply::new(events))
    }

    /// A non-streamed completion with text.
    pub fn completion_text(text: &str) -> Self {
        Reply::Json {
            status: 200,
            body: chunk::completion_text(text),
        }
    }

    /// Text as a stream or as a JSON completion, whichever the request asks for.
    pub fn text(text: &str) -> Self {
        let text = text.to_string();
        Reply::Dynamic(Arc::new(move |req| {
            if req.wants_stream() {
                Reply::text_stream([text.as_str()])
            } else {
                Reply::completion_text(&text)
            }
        }))
    }

    /// An HTTP error in OpenAI's error shape.
    pub fn error(status: u16, message: &str) -> Self {
        Reply::Error {
            status,
            body: json!({"error": {"message": message, "type": "scripted_error", "code": status}})
                .to_string(),
            retry_after: None,
        }
    }

    /// An HTTP error with a `Retry-After` header (seconds or an HTTP date, verbatim).
    pub fn error_retry_after(status: u16, message: &str, retry_after: &str) -> Self {
        match Reply::error(status, message) {
            Reply::Error { status, body, .. } => Reply::Error {
                status,
                body,
                retry_after: Some(retry_after.to_string()),
            },
            _ => unreachable!("Reply::error builds an Error"),
        }
    }
}

fn split_at_chars(s: &str, size: usize) -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    for c in s.chars() {
        current.push(c);
        if current.len() >= size {
            out.push(std::mem::take(&mut current));
        }
    }
    if !current.is_empty() || out.is_empty() {
        out.push(current);
    }
    out
}

/// How many requests a step answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Times {
    /// This many, then the step is used up.
    Count(usize),
    /// Every matching request, forever.
    Always,
}

/// One entry of a [`Script`].
#[derive(Clone)]
pub struct Step {
    pub when: Option<Predicate>,
    pub reply: Reply,
    pub times: Times,
}

impl Step {
    pub fn once(reply: Reply) -> Self {
        Self {
            when: None,
            reply,
            times: Times::Count(1),
        }
    }
    pub fn when(
        mut self,
        predicate: impl Fn(&RecordedRequest) -> bool + Send + Sync + 'static,
    ) -> Self {
        self.when = Some(Arc::new(predicate));
        self
    }
    pub fn times(mut self, times: Times) -> Self {
        self.times = times;
        self
    }
}

/// The ordered answers of a [`ChatUpstream`].
#[derive(Clone)]
pub struct Script {
    steps: Vec<Step>,
    record_bodies: bool,
    log_requests: bool,
}

impl Default for Script {
    fn default() -> Self {
        Self::new()
    }
}

impl Script {
    pub fn new() -> Self {
        Self {
            steps: Vec::new(),
            record_bodies: true,
            log_requests: true,
        }
    }
    /// A script answering every request with `reply` (the zero-delay benchmark mode).
    pub fn always(reply: Reply) -> Self {
        Self::new().step(Step::once(reply).times(Times::Always))
    }
    /// Answer the next request with `reply`.
    pub fn then(self, reply: Reply) -> Self {
        self.step(Step::once(reply))
    }
    /// Answer the next request for which `predicate` holds with `reply`.
    pub fn then_when(
        self,
        predicate: impl Fn(&RecordedRequest) -> bool + Send + Sync + 'static,
        reply: Reply,
    ) -> Self {
        self.step(Step::once(reply).when(predicate))
    }
    pub fn step(mut self, step: Step) -> Self {
        self.steps.push(step);
        self
    }
    /// Keep (true, default) or drop (false) request bodies in the request log.
    pub fn record_bodies(mut self, keep: bool) -> Self {
        self.record_bodies = keep;
        self
    }
    /// Keep (true, default) or skip (false) the request log entirely (long benchmarks: the log
    /// would otherwise grow with every request). Skipped requests are still counted.
    pub fn log_requests(mut self, keep: bool) -> Self {
        self.log_requests = keep;
        self
    }
}

struct StepState {
    step: Step,
    remaining: Option<usize>,
}

struct Shared {
    steps: Mutex<VecDeque<StepState>>,
    record_bodies: bool,
    log_requests: bool,
    requests_seen: AtomicUsize,
    requests: Mutex<Vec<RecordedRequest>>,
    request_arrived: Notify,
    unmatched: AtomicUsize,
    hangs_cancelled: AtomicUsize,
    hang_cancelled: Notify,
    /// Bytes sent by [`Reply::Endless`] answers.
    endless_bytes: std::sync::atomic::AtomicU64,
}

impl Shared {
    fn take_reply(&self, req: &RecordedRequest) -> Option<Reply> {
        let mut steps = self
            .steps
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let pos = steps
            .iter()
            .position(|s| s.step.when.as_ref().is_none_or(|p| p(req)))?;
        let reply = steps[pos].step.reply.clone();
        if let Some(remaining) = steps[pos].remaining.as_mut() {
            *remaining -= 1;
            if *remaining == 0 {
                steps.remove(pos);
            }
        }
        Some(reply)
    }
}

/// A running scripted Chat Completions server. Stops when dropped or [`ChatUpstream::stop`]ped.
pub struct ChatUpstream {
    addr: SocketAddr,
    shared: Arc<Shared>,
    task: Option<JoinHandle<()>>,
}

impl ChatUpstream {
    /// Bind `127.0.0.1:0` and serve `script`.
    pub async fn start(script: Script) -> std::io::Result<Self> {
        let steps = script
            .steps
            .into_iter()
            .map(|step| StepState {
                remaining: match step.times {
                    Times::Count(n) => Some(n),
                    Times::Always => None,
                },
                step,
            })
            .filter(|s| s.remaining != Some(0))
            .collect();
        let shared = Arc::new(Shared {
            steps: Mutex::new(steps),
            record_bodies: script.record_bodies,
            log_requests: script.log_requests,
            requests_seen: AtomicUsize::new(0),
            requests: Mutex::new(Vec::new()),
            request_arrived: Notify::new(),
            unmatched: AtomicUsize::new(0),
            endless_bytes: std::sync::atomic::AtomicU64::new(0),
            hangs_cancelled: AtomicUsize::new(0),
            hang_cancelled: Notify::new(),
        });
        // A deep accept queue: benchmarks open a thousand streams at once.
        let socket = tokio::net::TcpSocket::new_v4()?;
        socket.bind(SocketAddr::from(([127, 0, 0, 1], 0)))?;
        let listener = socket.listen(4096)?;
        let addr = listener.local_addr()?;
        let listener = listener.tap_io(|tcp| {
            let _ = tcp.set_nodelay(true);
        });
        let app = axum::Router::new()
            .fallback(answer)
            .with_state(shared.clone());
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Ok(Self {
            addr,
            shared,
            task: Some(task),
        })
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:<port>/v1`, the OpenAI-style base URL.
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// Bytes the [`Reply::Endless`] answers have handed to the connection so far.
    pub fn endless_bytes(&self) -> u64 {
        self.shared.endless_bytes.load(Ordering::Relaxed)
    }

    /// Every request received so far, in arrival order.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.shared
            .requests
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// Wait until at least `n` requests have arrived; returns them all.
    pub async fn wait_for_requests(&self, n: usize) -> Vec<RecordedRequest> {
        loop {
            let notified = self.shared.request_arrived.notified();
            if self.requests_seen() >= n {
                return self.requests();
            }
            notified.await;
        }
    }

    /// How many requests arrived (also counted when the log is off).
    pub fn requests_seen(&self) -> usize {
        self.shared.requests_seen.load(Ordering::SeqCst)
    }

    /// Requests that matched no step (answered with a 500).
    pub fn unmatched(&self) -> usize {
        self.shared.unmatched.load(Ordering::SeqCst)
    }

    /// How many `Hang` replies (or hanging stream ends) ended because the client went away.
    pub fn hangs_cancelled(&self) -> usize {
        self.shared.hangs_cancelled.load(Ordering::SeqCst)
    }

    /// Wait until at least `n` hangs were abandoned by their client.
    pub async fn wait_for_cancelled_hangs(&self, n: usize) {
        loop {
            let notified = self.shared.hang_cancelled.notified();
            if self.hangs_cancelled() >= n {
                return;
            }
            notified.await;
        }
    }

    /// Steps not used up yet (an `Always` step is never used up).
    pub fn remaining_steps(&self) -> usize {
        self.shared
            .steps
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .len()
    }

    /// Stop serving at once (open and hanging streams are cut) and wait for the server task.
    pub async fn stop(mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
            let _ = task.await;
        }
    }
}

impl Drop for ChatUpstream {
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

/// Counts a hang as cancelled when its future is dropped (the client went away).
struct HangGuard(Arc<Shared>);

impl Drop for HangGuard {
    fn drop(&mut self) {
        self.0.hangs_cancelled.fetch_add(1, Ordering::SeqCst);
        self.0.hang_cancelled.notify_waiters();
    }
}

async fn answer(State(shared): State<Arc<Shared>>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let body = axum::body::to_bytes(body, usize::MAX)
        .await
        .unwrap_or_default();
    let recorded = RecordedRequest {
        method: parts.method.to_string(),
        path: parts
            .uri
            .path_and_query()
            .map(|p| p.to_string())
            .unwrap_or_default(),
        headers: parts
            .headers
            .iter()
            .map(|(k, v)| {
                (
                    k.as_str().to_string(),
                    String::from_utf8_lossy(v.as_bytes()).into_owned(),
                )
            })
            .collect(),
        body,
    };
    let reply = shared.take_reply(&recorded);
    shared.requests_seen.fetch_add(1, Ordering::SeqCst);
    if shared.log_requests {
        let mut logged = recorded.clone();
        if !shared.record_bodies {
            logged.body = Bytes::new();
        }
        shared
            .requests
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(logged);
    }
    shared.request_arrived.notify_waiters();

    let mut reply = match reply {
        Some(reply) => reply,
        None => {
            shared.unmatched.fetch_add(1, Ordering::SeqCst);
            Reply::error(500, "scripted upstream: no step matches this request")
        }
    };
    while let Reply::Dynamic(f) = reply {
        reply = f(&recorded);
    }
    render(shared, reply).await
}

fn status(code: u16) -> StatusCode {
    StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
}

async fn render(shared: Arc<Shared>, reply: Reply) -> Response {
    match reply {
        Reply::Json { status: code, body } => (
            status(code),
            [(header::CONTENT_TYPE, "application/json")],
            body.to_string(),
        )
            .into_response(),
        Reply::Error {
            status: code,
            body,
            retry_after,
        } => {
            let mut response = (
                status(code),
                [(header::CONTENT_TYPE, "application/json")],
                body,
            )
                .into_response();
            if let Some(value) = retry_after.and_then(|v| HeaderValue::from_str(&v).ok()) {
                response.headers_mut().insert(header::RETRY_AFTER, value);
            }
            response
        }
        Reply::Raw {
            status: code,
            content_type,
            body,
        } => {
            let mut response = (status(code), Body::from(body)).into_response();
            if let Ok(value) = HeaderValue::from_str(&content_type) {
                response.headers_mut().insert(header::CONTENT_TYPE, value);
            }
            response
        }
        Reply::Hang => {
            let _guard = HangGuard(shared);
            std::future::pending::<Response>().await
        }
        Reply::Stream(stream) => stream_response(shared, stream),
        Reply::Endless(event) => {
            let frame = Bytes::from(format!("data: {event}\n\n"));
            let body = futures_util::stream::repeat_with(move || {
                shared
                    .endless_bytes
                    .fetch_add(frame.len() as u64, Ordering::Relaxed);
                Ok::<_, std::convert::Infallible>(frame.clone())
            });
            (
                StatusCode::OK,
                [(header::CONTENT_TYPE, "text/event-stream")],
                Body::from_stream(body),
            )
                .into_response()
        }
        Reply::Dynamic(_) => unreachable!("dynamic replies are resolved before rendering"),
    }
}

enum Cursor {
    Event(usize),
    Finished,
}

fn stream_response(shared: Arc<Shared>, reply: StreamReply) -> Response {
    let StreamReply { events, end } = reply;
    let events = Arc::new(events);
    let body = futures_util::stream::unfold(Cursor::Event(0), move |cursor| {
        let events = events.clone();
        let shared = shared.clone();
        async move {
            match cursor {
                Cursor::Event(i) if i < events.len() => {
                    let event = &events[i];
                    if !event.delay.is_zero() {
                        tokio::time::sleep(event.delay).await;
                    }
                    if let Some(gate) = &event.gate {
                        gate.wait().await;
                    }
                    let mut frame = Vec::with_capacity(event.data.len() + 8);
                    frame.extend_from_slice(b"data: ");
                    frame.extend_from_slice(&event.data);
                    frame.extend_from_slice(b"\n\n");
                    Some((
                        Ok::<_, std::convert::Infallible>(Bytes::from(frame)),
                        Cursor::Event(i + 1),
                    ))
                }
                Cursor::Event(_) => match end {
                    StreamEnd::Done => Some((
                        Ok(Bytes::from_static(b"data: [DONE]\n\n")),
                        Cursor::Finished,
                    )),
                    StreamEnd::Close => None,
                    StreamEnd::Hang => {
                        let _guard = HangGuard(shared);
                        std::future::pending::<()>().await;
                        None
                    }
                },
                Cursor::Finished => None,
            }
        }
    });
    (
        StatusCode::OK,
        [
            (header::CONTENT_TYPE, "text/event-stream"),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        Body::from_stream(body),
    )
        .into_response()
}
