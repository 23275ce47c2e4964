//! Anthropic Messages (`POST /v1/messages`, Claude Code also sends `?beta=true`): the request
//! checked and typed by `switchyard_translate::messages_ingress`, the answer rendered by
//! `switchyard_translate::messages_answer` as `event: <name>` / `data: <json>` frames (or one
//! `message`), and Anthropic-shaped errors.
//!
//! Statuses are chosen against Claude Code's retries (verified with the pinned 2.1.332): it
//! retries 429, 5xx and 401 about ten times over three minutes, 529 three times over a few
//! seconds, and nothing that carries `x-should-retry: false`. So:
//! - a failure the gateway gave up on under `retries.guest_fail_fast` is 529 with
//!   `x-should-retry: false` (one attempt; the gateway already spent its budget);
//! - without fail-fast it is 529 alone: the guest's few quick retries, not minutes of them;
//! - an upstream `Retry-After` longer than the gateway's budget is passed on as 429 with the
//!   header, for the guest to wait out;
//! - an upstream's own refusal (a 4xx it will not change its mind on) keeps its status, with
//!   `x-should-retry: false` so a provider's 401 is not retried for minutes;
//! - a turn whose calls cannot be delivered, and an answer past the gateway's bounds, are
//!   errors with `x-should-retry: false` under fail-fast.
//!
//! A failure after the stream started is an `event: error` frame; Claude Code retries those
//! itself (three streamed attempts and one unstreamed), which no header can change.

use bytes::Bytes;
use serde_json::Value;
use switchyard_records::model::ingress;
use switchyard_translate::TranslateError;
use switchyard_translate::messages_answer::{
    MessagesRenderer, anthropic_error, message_value, upstream_error_message,
};
use switchyard_translate::messages_ingress::{
    MessagesIngressOptions, PreparedMessages, parse_messages_request, prepare_messages_request,
};
use switchyard_translate::turn::TurnChunk;

use super::checked::{Translated, translate_checked};
use super::{
    GuestFailure, Ingress, NamedEvents, NamedRender, Prepared, RecordedAnswer, Refused, named_event,
};
use crate::exchange::ExchangeContext;
use crate::intake::BodyPermit;
use crate::state::AppState;
use crate::upstream::{UpstreamError, retryable_status};

/// Anthropic's "overloaded": what Claude Code retries only briefly.
pub(crate) const OVERLOADED: u16 = 529;

/// The Messages ingress.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Messages;

impl Ingress for Messages {
    type Render = NamedRender<MessagesRenderer>;

    fn record_name(self, _stream: bool) -> &'static str {
        ingress::MESSAGES
    }

    fn error(self, status: u16, message: &str) -> axum::response::Response {
        messages_error(status, message)
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
        // The guest's API carries reasoning itself (thinking blocks, kept in its history with
        // their signature and sent back), as Chat's `reasoning_content` does.
        (true, false)
    }

    fn render(self, response_id: &str, _include_usage: bool) -> Self::Render {
        NamedRender(MessagesRenderer::new(format!("msg_{response_id}"), 0))
    }

    fn upstream_failure(
        self,
        state: &AppState,
        error: &UpstreamError,
        attempts: u32,
        declined_wait: Option<std::time::Duration>,
    ) -> GuestFailure {
        // Also the run's provider error, redacted: the same words on every ingress.
        let google = super::google::failure_body(state, error, attempts, declined_wait);
        let fail_fast = state.config.retries.guest_fail_fast;
        let declined_wait = declined_wait.filter(|_| error.retryable());
        let (status, message, no_retry) = match error {
            UpstreamError::Status { status, body, .. } if !error.retryable() => {
                let mut message = upstream_error_message(*status, body.as_bytes());
                state.guest_redactor.redact_string(&mut message);
                (*status, message, true)
            }
            _ if (400..500).contains(&google.error.code)
                && !retryable_status(google.error.code) =>
            {
                (google.error.code, google.error.message.clone(), true)
            }
            UpstreamError::AnswerLimit(_) => (424, google.error.message.clone(), true),
            _ if declined_wait.is_some() => (429, google.error.message.clone(), false),
            _ => (OVERLOADED, google.error.message.clone(), fail_fast),
        };
        GuestFailure {
            retry_after: declined_wait,
            no_retry,
            ..failure(status, &anthropic_error(status, &message))
        }
    }

    fn undeliverable(self, state: &AppState, reason: &str, attempts: u32) -> Option<GuestFailure> {
        let message = format!(
            "the model's tool call could not be delivered ({reason}) after {attempts} \
             attempt(s) by switchyard gateway"
        );
        Some(GuestFailure {
            no_retry: state.config.retries.guest_fail_fast,
            ..failure(OVERLOADED, &anthropic_error(OVERLOADED, &message))
        })
    }

    fn stamps_identity(self) -> bool {
        // Claude Code's `tools/call` carries the `tool_use` id in
        // `_meta["claudecode/toolUseId"]`: the delivered call id names the callback, and the
        // model's arguments reach the guest exactly as the model wrote them.
        false
    }

    fn recorded(self) -> RecordedAnswer {
        // What a Messages guest received, as the one `message` it amounts to.
        |turn, _created| Some(message_value(&format!("msg_{}", turn.response_id), turn, 0))
    }
}

/// A Messages guest's body translated for `upstream_model` (PNGs the cache does not hold are
/// left for [`translate_checked`] to convert).
fn translate(
    state: &AppState,
    body: &[u8],
    upstream_model: String,
    strip: Option<&'static str>,
) -> Result<PreparedMessages, TranslateError> {
    let options = MessagesIngressOptions {
        upstream_model,
        provider: state.config.translation.clone(),
        strip,
        convert_on_miss: false,
    };
    parse_messages_request(body)
        .and_then(|r| prepare_messages_request(r, &options, Some(state.translator.images())))
}

impl NamedEvents for MessagesRenderer {
    fn named_events(&mut self, chunk: &TurnChunk) -> Vec<(&'static str, String)> {
        self.events(chunk)
    }

    fn whole_body(&self, chunk: &TurnChunk) -> String {
        self.message(chunk)
    }
}

/// An Anthropic error body as a failure (mid-stream: an `event: error` frame).
fn failure(status: u16, body: &Value) -> GuestFailure {
    let json = body.to_string();
    GuestFailure {
        status,
        stream: named_event("error", &json),
        body: json,
        retry_after: None,
        no_retry: false,
    }
}

/// An Anthropic-shaped error response with a message of ours.
pub(crate) fn messages_error(status: u16, message: &str) -> axum::response::Response {
    super::json_error(status, anthropic_error(status, message).to_string())
}
