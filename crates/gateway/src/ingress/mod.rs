//! The guest APIs the gateway serves, one [`Ingress`] each: how a guest request is checked and
//! prepared for the upstream, how the neutral model turn is framed for the guest (streamed or
//! whole), how failures are shaped and which status each gets. Everything between (routing, the
//! upstream plan, attempts and retries, assembly and validation, the gateway's call ids, host
//! tools, records) is shared (`exchange`), so a new guest API is one module here and a route.
//!
//! - [`google`]: Google GenerateContent (Gemini CLI);
//! - [`chat`]: OpenAI Chat Completions (OpenCode);
//! - [`messages`]: Anthropic Messages (Claude Code);
//! - [`responses`]: OpenAI Responses (Codex).

use std::future::Future;

use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use serde_json::Value;
use switchyard_translate::TranslationReport;

use crate::intake::BodyPermit;
use switchyard_translate::openai::ChatRequest;
use switchyard_translate::turn::TurnChunk;

use crate::exchange::ExchangeContext;
use crate::state::AppState;
use crate::upstream::UpstreamError;

pub(crate) mod chat;
mod checked;
pub(crate) mod google;
pub(crate) mod messages;
pub(crate) mod responses;

/// A guest request made ready for the upstream.
pub(crate) struct Prepared {
    /// The upstream request, before the upstream plan (the provider's switches) is applied.
    pub chat: ChatRequest,
    pub report: TranslationReport,
    /// The guest asked for a JSON answer (text buffered, fences stripped).
    pub json_response: bool,
    pub prompt_token_estimate: u32,
    /// A Chat guest asked for a usage chunk.
    pub include_usage: bool,
    /// Whether the ingress cleaned the tool schemas already.
    pub schemas: switchyard_translate::plan::Schemas,
    /// Upstream functions that stand for the guest's custom and namespaced tools.
    pub call_shapes: switchyard_translate::turn::CallShapes,
}

/// What an ingress answers when a request is refused before it reaches the upstream.
pub(crate) type Refused = Box<Response>;

/// One guest API.
pub(crate) trait Ingress: Copy + Send + Sync + 'static {
    /// How its frames are written.
    type Render: Render;

    /// The record's name of the exchange (`switchyard_records::model::ingress`).
    fn record_name(self, stream: bool) -> &'static str;

    /// A refusal of the gateway's own (routing, the ledger, a bad request), in the guest's
    /// shape.
    fn error(self, status: u16, message: &str) -> Response;

    /// Checks `body` and prepares it for `upstream_model`: the private call identity `strip`
    /// removed, new PNGs converted, the session's call ids checked and the upstream's own ids
    /// restored in the history.
    fn prepare(
        self,
        ctx: &ExchangeContext<Self>,
        body: &Bytes,
        stream: bool,
        upstream_model: &str,
        strip: Option<&'static str>,
        permit: BodyPermit,
    ) -> impl Future<Output = Result<Prepared, Refused>> + Send;

    /// Reasoning shown to the guest, and reasoning carried through it in a call's signature.
    fn reasoning(self, state: &AppState) -> (bool, bool);

    /// The framing of one answer.
    fn render(self, response_id: &str, include_usage: bool) -> Self::Render;

    /// What the guest gets when the gateway gives up on the upstream (its message already
    /// redacted: see `exchange::redacted_failure`).
    fn upstream_failure(
        self,
        state: &AppState,
        error: &UpstreamError,
        attempts: u32,
        declined_wait: Option<std::time::Duration>,
    ) -> GuestFailure;

    /// A turn whose calls cannot be delivered: `None` to deliver the turn itself (its finish
    /// says why), else the failure to answer.
    fn undeliverable(self, state: &AppState, reason: &str, attempts: u32) -> Option<GuestFailure>;

    /// The answer the guest received, as recorded (`guest_response`): the merged turn in the
    /// guest's shape.
    fn recorded(self) -> RecordedAnswer;

    /// Whether host-tool calls carry the private identity in their arguments; `false` for a
    /// guest whose MCP callbacks name the delivered call id themselves.
    fn stamps_identity(self) -> bool {
        true
    }
}

/// Renders a merged turn as its guest received it, for the record; the second argument is the
/// exchange's start (Unix seconds).
pub(crate) type RecordedAnswer = fn(&TurnChunk, u64) -> Option<Value>;

/// The framing of one answer for its guest.
pub(crate) trait Render: Send + 'static {
    /// The SSE frames of one chunk of a streamed answer.
    fn frames(&mut self, chunk: &TurnChunk) -> Vec<Bytes>;
    /// The frames that end a stream after its last chunk (e.g. `[DONE]`).
    fn end(&mut self) -> Vec<Bytes>;
    /// A whole answer as one JSON body.
    fn whole(&self, chunk: &TurnChunk) -> String;
}

/// A renderer whose frames are named SSE events (`event: <name>` / `data: <json>`): Messages
/// and Responses.
pub(crate) trait NamedEvents: Send + 'static {
    /// The events of one chunk of a streamed answer, named.
    fn named_events(&mut self, chunk: &TurnChunk) -> Vec<(&'static str, String)>;
    /// A whole answer as one JSON body.
    fn whole_body(&self, chunk: &TurnChunk) -> String;
}

/// The framing of a [`NamedEvents`] renderer: one `event:`/`data:` frame per event, nothing
/// after the last.
pub(crate) struct NamedRender<T>(pub T);

impl<T: NamedEvents> Render for NamedRender<T> {
    fn frames(&mut self, chunk: &TurnChunk) -> Vec<Bytes> {
        self.0
            .named_events(chunk)
            .iter()
            .map(|(name, json)| named_event(name, json))
            .collect()
    }

    fn end(&mut self) -> Vec<Bytes> {
        Vec::new()
    }

    fn whole(&self, chunk: &TurnChunk) -> String {
        self.0.whole_body(chunk)
    }
}

/// One named SSE event.
pub(crate) fn named_event(name: &str, json: &str) -> Bytes {
    Bytes::from(format!("event: {name}\ndata: {json}\n\n"))
}

/// Bodies from this size on are parsed and translated on the blocking pool, not on the async
/// workers that serve every other guest (a 47 KB first turn takes ~0.3 ms; a long history with
/// images, up to `limits.max_request_bytes`, takes whole seconds).
pub(crate) const BLOCKING_PARSE_BYTES: usize = 1024 * 1024;

/// Runs `work` (parsing or translating a body of `size` bytes) where it belongs: inline for a
/// small body, on the blocking pool for a large one. `None` when the runtime is shutting down;
/// a panic in `work` is resumed here, as if it ran inline.
pub(crate) async fn parse_work<T: Send + 'static>(
    size: usize,
    work: impl FnOnce() -> T + Send + 'static,
) -> Option<T> {
    if size < BLOCKING_PARSE_BYTES {
        return Some(work());
    }
    match tokio::task::spawn_blocking(work).await {
        Ok(done) => Some(done),
        Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
        Err(_) => None,
    }
}

/// A failure for the guest, in its API's shape.
pub(crate) struct GuestFailure {
    pub status: u16,
    /// The JSON error body.
    pub body: String,
    /// The same error as the last bytes of a stream already under way.
    pub stream: Bytes,
    /// The upstream's `Retry-After` the gateway did not wait, passed on as the header.
    pub retry_after: Option<std::time::Duration>,
    /// Sent with `x-should-retry: false` (Anthropic clients then do not retry).
    pub no_retry: bool,
}

impl GuestFailure {
    /// The error as an HTTP response (nothing was sent yet).
    pub fn response(&self) -> Response {
        let mut response = json_error(self.status, self.body.clone());
        if let Some(wait) = self.retry_after {
            let secs = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, header::HeaderValue::from(secs));
        }
        if self.no_retry {
            response.headers_mut().insert(
                header::HeaderName::from_static("x-should-retry"),
                header::HeaderValue::from_static("false"),
            );
        }
        response
    }

    /// The error as the last bytes of a stream already under way.
    pub fn stream_bytes(&self) -> Bytes {
        self.stream.clone()
    }
}

/// A JSON error response.
pub(crate) fn json_error(status: u16, body: String) -> Response {
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    (
        status,
        [(header::CONTENT_TYPE, "application/json; charset=utf-8")],
        body,
    )
        .into_response()
}

/// One SSE `data:` event.
pub(crate) fn sse_event(json: &str, line_end: &[u8]) -> Bytes {
    let mut out = Vec::with_capacity(json.len() + 10);
    out.extend_from_slice(b"data: ");
    out.extend_from_slice(json.as_bytes());
    out.extend_from_slice(line_end);
    Bytes::from(out)
}

#[cfg(test)]
#[path = "mod_tests.rs"]
mod tests;
