//! Google GenerateContent (`:streamGenerateContent`, `:generateContent`), what Gemini CLI
//! speaks: the request translated by `switchyard_translate::request`, the answer rendered by
//! `switchyard_translate::google_answer` as one `data: <json>\r\n\r\n` frame per chunk, and
//! Google-shaped errors.
//!
//! A turn whose calls cannot be delivered is delivered with `finishReason:
//! MALFORMED_FUNCTION_CALL` and no call. When the gateway gives up on a retryable failure under
//! `retries.guest_fail_fast` it answers 429 or 503 with `limit: 0` in the message, which Gemini
//! CLI treats as a terminal quota error (so its retries and the gateway's do not multiply),
//! except when the upstream asked for a `Retry-After` longer than the retry budget: that is
//! passed on (status, `RetryInfo`, header) for the guest to decide.

use bytes::Bytes;
use switchyard_records::model::ingress;
use switchyard_translate::google::GoogleErrorBody;
use switchyard_translate::google_answer::to_google;
use switchyard_translate::turn::TurnChunk;
use switchyard_translate::{CallLedger, TranslateOptions};

use std::collections::HashMap;
use std::sync::Arc;

use super::{GuestFailure, Ingress, Prepared, RecordedAnswer, Refused, Render, parse_work};
use crate::exchange::ExchangeContext;
use crate::intake::BodyPermit;
use crate::sessions::adopt_and_map;
use crate::state::AppState;
use crate::translation::TranslationFailure;
use crate::upstream::{UpstreamError, retryable_status};

/// Message marker Gemini CLI treats as a terminal quota error (no further retries by the guest).
const FAIL_FAST_MARKER: &str = "gateway retry limit: 0 remaining";

/// The GenerateContent ingress.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Google;

impl Ingress for Google {
    type Render = GoogleRender;

    fn record_name(self, stream: bool) -> &'static str {
        if stream {
            ingress::STREAM_GENERATE_CONTENT
        } else {
            ingress::GENERATE_CONTENT
        }
    }

    fn error(self, status: u16, message: &str) -> axum::response::Response {
        crate::responses::error_response(status, message)
    }

    async fn prepare(
        self,
        ctx: &ExchangeContext<Self>,
        body: &Bytes,
        stream: bool,
        upstream_model: &str,
        strip: Option<&'static str>,
        permit: BodyPermit,
    ) -> Result<Prepared, Refused> {
        let state = &ctx.state;
        let options = TranslateOptions {
            provider: state.config.translation.clone(),
            convert_on_miss: false,
            ..TranslateOptions::new(upstream_model.to_string(), stream)
        };
        let first = {
            let (state, body) = (Arc::clone(state), body.clone());
            let (session, options) = (ctx.session.clone(), options.clone());
            parse_work(body.len(), move || {
                let mut request = state.translator.parse(&body, strip).map_err(refused)?;
                // Should this be the first request of its session: its history (a resumed
                // session) is accepted as is.
                let mut first = CallLedger::new();
                first.adopt_history(&request);
                let checked = state.sessions.with(
                    &session,
                    || first,
                    |ledger| {
                        let upstream = adopt_and_map(
                            &state.call_ids,
                            &session,
                            ledger,
                            history_ids(&request).iter().map(String::as_str),
                        );
                        ledger.check_request(&request)?;
                        restore_upstream_ids(&upstream, &mut request);
                        Ok::<_, switchyard_translate::LedgerError>(())
                    },
                );
                if let Err(e) = checked {
                    return Err(Box::new(Google.error(400, &e.to_string())));
                }
                let translated = state
                    .translator
                    .translate_parsed(&request, &options)
                    .map_err(refused)?;
                Ok((request, translated))
            })
            .await
            .ok_or_else(shutting_down)??
        };
        let (request, mut translated) = first;
        if !translated.unconverted_pngs.is_empty() {
            // New images: converted off the runtime, then the request is translated with them.
            // The body is parsed: its budget charge is not held across the conversion.
            drop(permit);
            let pngs = std::mem::take(&mut translated.unconverted_pngs);
            let cache = state.translator.images();
            let max_pixels = state.config.translation.max_image_pixels;
            state.images.convert_into(cache, pngs, max_pixels).await;
            let state = Arc::clone(state);
            let again = parse_work(body.len(), move || {
                let translated = state.translator.translate_parsed(&request, &options);
                (request, translated)
            })
            .await
            .ok_or_else(shutting_down)?;
            return prepared(again.0, again.1.map_err(refused)?);
        }
        prepared(request, translated)
    }

    fn reasoning(self, state: &AppState) -> (bool, bool) {
        let translation = &state.config.translation;
        (translation.forward_reasoning, translation.echo_reasoning)
    }

    fn render(self, _response_id: &str, _include_usage: bool) -> GoogleRender {
        GoogleRender
    }

    fn upstream_failure(
        self,
        state: &AppState,
        error: &UpstreamError,
        attempts: u32,
        declined_wait: Option<std::time::Duration>,
    ) -> GuestFailure {
        GuestFailure {
            retry_after: declined_wait.filter(|_| error.retryable()),
            ..failure(failure_body(state, error, attempts, declined_wait))
        }
    }

    fn undeliverable(self, _: &AppState, _: &str, _: u32) -> Option<GuestFailure> {
        None
    }

    fn recorded(self) -> RecordedAnswer {
        |turn, _| serde_json::to_value(to_google(turn)).ok()
    }
}

/// A translation failure as the guest's error.
fn refused(failure: TranslationFailure) -> Refused {
    Box::new(match failure {
        TranslationFailure::Guest(e) => {
            crate::responses::google_error_response(&e.to_google_error())
        }
        TranslationFailure::Serialize(e) => Google.error(500, &e.to_string()),
    })
}

/// The answer while the gateway shuts down (the blocking pool is gone).
fn shutting_down() -> Refused {
    Box::new(Google.error(503, "the gateway is shutting down"))
}

/// The ingress's preparation of a translated request.
fn prepared(
    request: switchyard_translate::google::GenerateContentRequest,
    translated: switchyard_translate::TranslatedRequest,
) -> Result<Prepared, Refused> {
    Ok(Prepared {
        chat: translated.chat,
        report: translated.report,
        json_response: translated.json_response,
        prompt_token_estimate: switchyard_translate::estimate_request_tokens(&request),
        include_usage: false,
        schemas: switchyard_translate::plan::Schemas::Clean,
        call_shapes: Default::default(),
    })
}

/// The call ids a GenerateContent history names (calls and responses), in order.
fn history_ids(request: &switchyard_translate::google::GenerateContentRequest) -> Vec<String> {
    request
        .contents
        .iter()
        .flat_map(|c| c.parts.iter())
        .flat_map(|part| {
            [
                part.function_call.as_ref().and_then(|c| c.id.clone()),
                part.function_response.as_ref().and_then(|r| r.id.clone()),
            ]
        })
        .flatten()
        .collect()
}

/// The delivered ids of a GenerateContent history put back to the upstream's own (`upstream`:
/// see `sessions::adopt_and_map`).
fn restore_upstream_ids(
    upstream: &HashMap<String, String>,
    request: &mut switchyard_translate::google::GenerateContentRequest,
) {
    for part in request.contents.iter_mut().flat_map(|c| c.parts.iter_mut()) {
        let ids = [
            part.function_call.as_mut().and_then(|c| c.id.as_mut()),
            part.function_response.as_mut().and_then(|r| r.id.as_mut()),
        ];
        for id in ids.into_iter().flatten() {
            if let Some(restored) = upstream.get(id.as_str()) {
                id.clone_from(restored);
            }
        }
    }
}

/// GenerateContent framing: one `data: <json>\r\n\r\n` frame per chunk, no end marker.
pub(crate) struct GoogleRender;

impl Render for GoogleRender {
    fn frames(&mut self, chunk: &TurnChunk) -> Vec<Bytes> {
        vec![super::sse_event(
            &to_google(chunk).to_json_line(),
            b"\r\n\r\n",
        )]
    }

    fn end(&mut self) -> Vec<Bytes> {
        Vec::new()
    }

    fn whole(&self, chunk: &TurnChunk) -> String {
        to_google(chunk).to_json_line()
    }
}

/// A Google error body as a failure (Gemini CLI reads a raw error JSON mid-stream).
pub(crate) fn failure(body: GoogleErrorBody) -> GuestFailure {
    let json = body.to_json_line();
    GuestFailure {
        status: body.error.code,
        stream: Bytes::from(json.clone()),
        body: json,
        retry_after: None,
        no_retry: false,
    }
}

/// What the guest gets when the upstream cannot be reached successfully, with every secret the
/// gateway knows (the provider key, the ingress key) redacted: provider error text can quote
/// them, and what the guest sees reaches the model. Every failure a guest is given passes here,
/// so it is also where the run's last provider error is remembered (the host contract's
/// outcome).
pub(crate) fn failure_body(
    state: &AppState,
    error: &UpstreamError,
    attempts: u32,
    declined_wait: Option<std::time::Duration>,
) -> GoogleErrorBody {
    let mut body = unredacted_failure_body(state, error, attempts, declined_wait);
    state.guest_redactor.redact_string(&mut body.error.message);
    *state
        .provider_error
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner) =
        Some((error.status(), body.error.message.clone()));
    for detail in &mut body.error.details {
        state.guest_redactor.redact_value(detail);
    }
    body
}

fn unredacted_failure_body(
    state: &AppState,
    error: &UpstreamError,
    attempts: u32,
    declined_wait: Option<std::time::Duration>,
) -> GoogleErrorBody {
    if let UpstreamError::Status {
        status,
        body,
        retry_after,
    } = error
        && !error.retryable()
    {
        return switchyard_translate::upstream_error_to_google(
            *status,
            body.as_bytes(),
            *retry_after,
        );
    }
    // An error the upstream reported in the response with a status the guest does not retry
    // (e.g. 400 for a too long context) is passed on as such; anything else is answered like
    // any other failure the gateway gave up on.
    if let UpstreamError::Payload(payload) = error
        && error
            .status()
            .is_some_and(|status| (400..500).contains(&status) && !retryable_status(status))
    {
        return payload.to_google_error();
    }
    let status = match error.status() {
        Some(429) => 429,
        _ => 503,
    };
    if let Some(wait) = declined_wait {
        // Never shortened and retried: the guest decides whether to wait that long.
        let message = format!(
            "upstream failed after {attempts} attempt(s) by the gateway ({error}) and asks to \
             retry after {}s, longer than the gateway's retry budget",
            wait.as_secs_f64().ceil()
        );
        return switchyard_translate::google_error(status, &message, Some(wait));
    }
    if state.config.retries.guest_fail_fast {
        let message = format!(
            "upstream failed after {attempts} attempt(s) by the gateway ({error}); the gateway \
             already spent its retry budget, {FAIL_FAST_MARKER}"
        );
        switchyard_translate::google_error(status, &message, error.retry_after())
    } else {
        let message = format!("upstream failed after {attempts} attempt(s): {error}");
        switchyard_translate::google_error(status, &message, error.retry_after())
    }
}
