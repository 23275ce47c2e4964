//! OpenAI Chat Completions (`POST /v1/chat/completions`), what OpenCode speaks: the request
//! checked and typed by `switchyard_translate::chat_ingress`, the answer rendered by
//! `switchyard_translate::chat_answer` as `chat.completion.chunk`s and `[DONE]` (or one
//! `chat.completion`), and OpenAI-shaped errors.
//!
//! With `retries.guest_fail_fast` a failure the gateway gave up on is answered with 424 and a
//! message that OpenCode does not classify as retryable (its retry rule: 408/409/429/5xx, or a
//! message or body naming a status such as 503, "rate limit", "server_error", "connection
//! refused", "timeout"…), so the gateway's retries and the guest's do not multiply; the
//! upstream's own error is in the run's records and provider error. Without fail-fast, or when
//! the upstream asked for a `Retry-After` longer than the retry budget, the status (429 or 503)
//! and message are passed on (with the `Retry-After` header). A turn whose calls cannot be delivered is an
//! error `malformed_tool_call`, never a call.

use bytes::Bytes;
use serde_json::Value;
use switchyard_records::model::ingress;
use switchyard_translate::TranslateError;
use switchyard_translate::chat_answer::{
    ChatRenderer, completion_value, openai_error, upstream_error_to_openai,
};
use switchyard_translate::chat_ingress::{
    ChatIngressOptions, PreparedChat, parse_chat_request, prepare_chat_request,
};
use switchyard_translate::turn::TurnChunk;

use super::checked::{Translated, translate_checked};
use super::{GuestFailure, Ingress, Prepared, RecordedAnswer, Refused, Render};
use crate::exchange::ExchangeContext;
use crate::intake::BodyPermit;
use crate::state::AppState;
use crate::upstream::{UpstreamError, retryable_status};

/// Status of a failure the gateway gave up on, under fail-fast.
pub(crate) const FAIL_FAST_STATUS: u16 = 424;

/// The Chat Completions ingress.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Chat;

impl Ingress for Chat {
    type Render = ChatRender;

    fn record_name(self, _stream: bool) -> &'static str {
        ingress::CHAT_COMPLETIONS
    }

    fn error(self, status: u16, message: &str) -> axum::response::Response {
        chat_error(status, message)
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
        // The guest's API carries reasoning itself (`reasoning_content`).
        (true, false)
    }

    fn render(self, response_id: &str, include_usage: bool) -> ChatRender {
        let created = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        ChatRender(ChatRenderer::new(
            format!("chatcmpl-{response_id}"),
            created,
            include_usage,
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
            ..failure(status, &body)
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
            status,
            &openai_error(status, &message, Some("malformed_tool_call")),
        ))
    }

    fn recorded(self) -> RecordedAnswer {
        // What a Chat guest received, as the one `chat.completion` it amounts to.
        |turn, created| {
            Some(completion_value(
                &format!("chatcmpl-{}", turn.response_id),
                created,
                turn,
            ))
        }
    }
}

/// A Chat guest's body translated for `upstream_model` (PNGs the cache does not hold are left
/// for [`translate_checked`] to convert).
fn translate(
    state: &AppState,
    body: &[u8],
    upstream_model: String,
    strip: Option<&'static str>,
) -> Result<PreparedChat, TranslateError> {
    let options = ChatIngressOptions {
        upstream_model,
        provider: state.config.translation.clone(),
        strip,
        convert_on_miss: false,
    };
    parse_chat_request(body)
        .and_then(|r| prepare_chat_request(r, &options, Some(state.translator.images())))
}

/// Chat Completions framing: `data: <chunk>\n\n` per chunk, `data: [DONE]` at the end.
pub(crate) struct ChatRender(ChatRenderer);

impl Render for ChatRender {
    fn frames(&mut self, chunk: &TurnChunk) -> Vec<Bytes> {
        self.0
            .chunks(chunk)
            .iter()
            .map(|json| super::sse_event(json, b"\n\n"))
            .collect()
    }

    fn end(&mut self) -> Vec<Bytes> {
        vec![Bytes::from_static(b"data: [DONE]\n\n")]
    }

    fn whole(&self, chunk: &TurnChunk) -> String {
        self.0.completion(chunk)
    }
}

/// An OpenAI error body as a failure (mid-stream: an SSE `data:` event with the error).
fn failure(status: u16, body: &Value) -> GuestFailure {
    let json = body.to_string();
    GuestFailure {
        status,
        stream: super::sse_event(&json, b"\n\n"),
        body: json,
        retry_after: None,
        no_retry: false,
    }
}

/// An OpenAI-shaped error response with a message of ours.
pub(crate) fn chat_error(status: u16, message: &str) -> axum::response::Response {
    super::json_error(status, openai_error(status, message, None).to_string())
}

/// The status and OpenAI error body of a failure the gateway gave up on (`google_status` and
/// `google_message`: the same failure as the GenerateContent ingress would answer it).
pub(crate) fn chat_failure(
    state: &AppState,
    error: &UpstreamError,
    attempts: u32,
    handed_back: bool,
    google_status: u16,
    google_message: &str,
) -> (u16, Value) {
    if let UpstreamError::Status { status, body, .. } = error
        && !error.retryable()
    {
        return (*status, upstream_error_to_openai(*status, body.as_bytes()));
    }
    if (400..500).contains(&google_status) && !retryable_status(google_status) {
        // An error the upstream reported inside its response, with a client status.
        return (
            google_status,
            openai_error(google_status, google_message, None),
        );
    }
    if let UpstreamError::AnswerLimit(_) = error {
        // The model's own output was cut: the guest is told which bound, and a status it does
        // not retry (asking again would get another endless answer).
        let status = FAIL_FAST_STATUS;
        return (
            status,
            openai_error(status, &error.to_string(), Some("answer_limit")),
        );
    }
    if handed_back {
        // The upstream's own delay, longer than the retry budget: the guest decides.
        let code = (google_status == 429).then_some("rate_limit_exceeded");
        return (
            google_status,
            openai_error(google_status, google_message, code),
        );
    }
    if state.config.retries.guest_fail_fast {
        let message = format!(
            "switchyard gateway gave up on the upstream after {attempts} attempt(s) and \
             already spent its retry budget; the upstream's answer is in the run's records"
        );
        (
            FAIL_FAST_STATUS,
            openai_error(FAIL_FAST_STATUS, &message, Some("upstream_failed")),
        )
    } else {
        (
            google_status,
            openai_error(google_status, google_message, None),
        )
    }
}
