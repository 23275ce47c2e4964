//! OpenAI Responses (`POST /v1/responses`), what Codex speaks: the request checked and typed by
//! `switchyard_translate::responses_ingress`, the answer rendered by
//! `switchyard_translate::responses_answer` as `event: <type>` / `data: <json>` frames (or one
//! `response`), and OpenAI-shaped errors.
//!
//! Statuses are chosen against Codex's retries (0.171.0; `../shared/reference` BRIEF §9.5): it
//! retries 5xx and transport errors (`request_max_retries`, inside `stream_max_retries`), a 429
//! only when it carries `retry-after`, and no other 4xx. So, as on the Chat ingress:
//! - under `retries.guest_fail_fast` a failure the gateway gave up on is 424, which Codex does
//!   not retry (the gateway already spent its budget);
//! - an upstream `Retry-After` longer than the gateway's budget is passed on as 429 with the
//!   header, for Codex to wait out;
//! - an upstream's own refusal keeps its status and OpenAI error.
//!
//! A failure after the stream started is a `response.failed` event. Codex retries those unless
//! the code is one it treats as final: under fail-fast the code is `invalid_prompt` (Codex then
//! reports the message, which says the gateway gave up), else `server_error`.

use bytes::Bytes;
use serde_json::Value;
use switchyard_records::model::ingress;
use switchyard_translate::TranslateError;
use switchyard_translate::chat_answer::openai_error;
use switchyard_translate::responses_answer::{ResponsesRenderer, failed_event, response_value};
use switchyard_translate::responses_ingress::{
    PreparedResponses, ResponsesIngressOptions, parse_responses_request, prepare_responses_request,
};
use switchyard_translate::turn::TurnChunk;

use super::chat::{FAIL_FAST_STATUS, chat_failure};
use super::checked::{Translated, translate_checked};
use super::{
    GuestFailure, Ingress, NamedEvents, NamedRender, Prepared, RecordedAnswer, Refused, named_event,
};
use crate::exchange::ExchangeContext;
use crate::intake::BodyPermit;
use crate::state::AppState;
use crate::upstream::UpstreamError;

/// The Responses ingress.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Responses;

impl Ingress for Responses {
    type Render = NamedRender<ResponsesRenderer>;

    fn record_name(self, _stream: bool) -> &'static str {
        ingress::RESPONSES
    }

    fn error(self, status: u16, message: &str) -> axum::response::Response {
        responses_error(status, message)
    }

    async fn prepare(
        self,
        ctx: &ExchangeContext<Self>,
        body: &Bytes,
        _stream: bool,
        upstream_model: &str,
        strip: Option<&'static str>,
        permit: BodyPermit,
    ) -> Result<Prepared, Refused> {
        translate_checked(ctx, body, upstream_model, strip, permit, translate)
            .await
            .map(Translated::into_prepared)
    }

    fn reasoning(self, _state: &AppState) -> (bool, bool) {
        // The guest's API carries reasoning itself (reasoning items, kept in its history and
        // sent back), as Chat's `reasoning_content` does.
        (true, false)
    }

    fn render(self, response_id: &str, _include_usage: bool) -> Self::Render {
        NamedRender(ResponsesRenderer::new(
            format!("resp_{response_id}"),
            unix_now(),
        ))
    }

    fn upstream_failure(
        self,
        state: &AppState,
        error: &UpstreamError,
        attempts: u32,
        declined_wait: Option<std::time::Duration>,
    ) -> GuestFailure {
        let google = super::google::failure_body(state, error, attempts, declined_wait);
        let declined_wait = declined_wait.filter(|_| error.retryable());
        let (status, mut body) = chat_failure(
            state,
            error,
            attempts,
            declined_wait.is_some(),
            google.error.code,
            &google.error.message,
        );
        state.guest_redactor.redact_value(&mut body);
        GuestFailure {
            retry_after: declined_wait,
            ..failure(state, status, &body)
        }
    }

    fn undeliverable(self, state: &AppState, reason: &str, attempts: u32) -> Option<GuestFailure> {
        let status = if state.config.retries.guest_fail_fast {
            FAIL_FAST_STATUS
        } else {
            502
        };
        let message = format!(
            "the model's tool call could not be delivered ({reason}) after {attempts} \
             attempt(s) by switchyard gateway"
        );
        Some(failure(
            state,
            status,
            &openai_error(status, &message, Some("malformed_tool_call")),
        ))
    }

    fn stamps_identity(self) -> bool {
        // Codex's MCP `tools/call` carries the model's call id in `_meta.callId` (the
        // gateway's delivered id): the call names the callback, and the arguments reach the
        // guest exactly as the model wrote them.
        false
    }

    fn recorded(self) -> RecordedAnswer {
        // What a Responses guest received, as the one `response` it amounts to.
        |turn, created| {
            Some(response_value(
                &format!("resp_{}", turn.response_id),
                created,
                turn,
            ))
        }
    }
}

fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// A Responses guest's body translated for `upstream_model` (PNGs the cache does not hold are
/// left for [`translate_checked`] to convert).
fn translate(
    state: &AppState,
    body: &[u8],
    upstream_model: String,
    strip: Option<&'static str>,
) -> Result<PreparedResponses, TranslateError> {
    let options = ResponsesIngressOptions {
        upstream_model,
        provider: state.config.translation.clone(),
        strip,
        convert_on_miss: false,
    };
    parse_responses_request(body)
        .and_then(|r| prepare_responses_request(r, &options, Some(state.translator.images())))
}

impl NamedEvents for ResponsesRenderer {
    fn named_events(&mut self, chunk: &TurnChunk) -> Vec<(&'static str, String)> {
        self.events(chunk)
    }

    fn whole_body(&self, chunk: &TurnChunk) -> String {
        self.response(chunk)
    }
}

/// An OpenAI error body as a failure; mid-stream a `response.failed` event whose code Codex
/// retries only without fail-fast (see the module docs).
fn failure(state: &AppState, status: u16, body: &Value) -> GuestFailure {
    let message = body
        .pointer("/error/message")
        .and_then(Value::as_str)
        .unwrap_or("switchyard gateway: the upstream failed");
    let code = if state.config.retries.guest_fail_fast {
        "invalid_prompt"
    } else {
        "server_error"
    };
    let json = body.to_string();
    GuestFailure {
        status,
        stream: named_event(
            "response.failed",
            &failed_event("resp_failed", code, message),
        ),
        body: json,
        retry_after: None,
        no_retry: false,
    }
}

/// An OpenAI-shaped error response with a message of ours.
pub(crate) fn responses_error(status: u16, message: &str) -> axum::response::Response {
    super::json_error(status, openai_error(status, message, None).to_string())
}
