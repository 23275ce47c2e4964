//! The guest's API of one exchange (Google GenerateContent or OpenAI Chat Completions): how the
//! translated turn's chunks are framed for it, and how failures are shaped. Everything between
//! (routing, upstream attempts, retries, assembly and validation, call identity, records) is
//! shared by both.
//!
//! Chat Completions guests get OpenAI-shaped errors. With `retries.guest_fail_fast` a failure
//! the gateway gave up on is answered with 424 and a message that OpenCode does not classify
//! as retryable (its retry rule: 408/409/429/5xx, or a message or body naming a status such as
//! 503, "rate limit", "server_error", "connection refused", "timeout"…), so the gateway's
//! retries and the guest's do not multiply; the upstream's own error is in the run's records
//! and provider error. Without fail-fast the status (429 or 503) and message are passed on.

use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use serde_json::Value;
use switchyard_translate::chat_answer::{ChatRenderer, openai_error};
use switchyard_translate::google::{GenerateContentResponse, GoogleErrorBody};

/// Which API the guest speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum GuestApi {
    Google,
    Chat,
}

/// Status of a failure the gateway gave up on, for a Chat guest under fail-fast.
pub(crate) const CHAT_FAIL_FAST_STATUS: u16 = 424;

/// A failure for the guest, in its API's shape.
pub(crate) enum GuestFailure {
    Google(GoogleErrorBody),
    /// HTTP status and the OpenAI error body.
    Chat(u16, Value),
}

impl GuestFailure {
    /// The error as an HTTP response (nothing was sent yet).
    pub fn response(&self) -> Response {
        match self {
            GuestFailure::Google(body) => crate::responses::google_error_response(body),
            GuestFailure::Chat(status, body) => chat_error_response(*status, body),
        }
    }

    /// The error as the last bytes of a stream already under way: Gemini CLI reads a raw
    /// Google error JSON; a Chat guest an SSE `data:` event with the error object.
    pub fn stream_bytes(&self) -> Bytes {
        match self {
            GuestFailure::Google(body) => Bytes::from(body.to_json_line()),
            GuestFailure::Chat(_, body) => sse_event(&body.to_string()),
        }
    }
}

/// An OpenAI-shaped error response.
pub(crate) fn chat_error_response(status: u16, body: &Value) -> Response {
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response()
}

/// An OpenAI-shaped error response with a message of ours.
pub(crate) fn chat_error(status: u16, message: &str) -> Response {
    chat_error_response(status, &openai_error(status, message, None))
}

fn sse_event(json: &str) -> Bytes {
    let mut out = Vec::with_capacity(json.len() + 8);
    out.extend_from_slice(b"data: ");
    out.extend_from_slice(json.as_bytes());
    out.extend_from_slice(b"\n\n");
    Bytes::from(out)
}

/// Frames one exchange's chunks for its guest.
pub(crate) enum Render {
    Google,
    Chat(ChatRenderer),
}

impl Render {
    pub fn new(api: GuestApi, response_id: &str, include_usage: bool) -> Self {
        match api {
            GuestApi::Google => Render::Google,
            GuestApi::Chat => {
                let created = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_secs());
                Render::Chat(ChatRenderer::new(
                    format!("chatcmpl-{response_id}"),
                    created,
                    include_usage,
                ))
            }
        }
    }

    /// The SSE frames of one chunk.
    pub fn frames(&mut self, chunk: &GenerateContentResponse) -> Vec<Bytes> {
        match self {
            Render::Google => {
                let json = chunk.to_json_line();
                let mut out = Vec::with_capacity(json.len() + 10);
                out.extend_from_slice(b"data: ");
                out.extend_from_slice(json.as_bytes());
                out.extend_from_slice(b"\r\n\r\n");
                vec![Bytes::from(out)]
            }
            Render::Chat(renderer) => renderer
                .chunks(chunk)
                .iter()
                .map(|json| sse_event(json))
                .collect(),
        }
    }

    /// The frames of a turn's last chunk, with the stream's end marker (`[DONE]` for Chat).
    pub fn last_frames(&mut self, chunk: &GenerateContentResponse) -> Vec<Bytes> {
        let mut frames = self.frames(chunk);
        if let Render::Chat(_) = self {
            frames.push(Bytes::from_static(b"data: [DONE]\n\n"));
        }
        frames
    }

    /// A whole answer as one JSON body.
    pub fn whole(&self, chunk: &GenerateContentResponse) -> String {
        match self {
            Render::Google => chunk.to_json_line(),
            Render::Chat(renderer) => renderer.completion(chunk),
        }
    }
}
