//! One guest request, end to end: route the model, check the call-id ledger, translate to Chat
//! Completions, call the upstream with retries, translate the answer back, record it.
//!
//! Streaming (`:streamGenerateContent`): the handler obtains a 2xx upstream response head
//! first (retrying 429/5xx/connect failures within the budget), so failures before that are real
//! HTTP errors for the guest. Then a pump task forwards each translated chunk as one
//! `data: <json>\r\n\r\n` frame as soon as it is produced. Function calls are delivered only
//! complete, at the end of the turn. A malformed or truncated call (or a reused call id) is
//! never delivered: the exchange is retried (`malformed_retries`), text the guest already has is
//! not repeated (the translator suppresses it), and when retries are used up the turn ends with
//! `finishReason: MALFORMED_FUNCTION_CALL` and no `functionCall`. An upstream failure after the
//! head was sent becomes a raw Google error chunk, which Gemini CLI turns into an API error.

use std::sync::Arc;

use axum::response::Response;
use bytes::Bytes;
use eventsource_stream::Eventsource;
use futures_util::StreamExt;
use switchyard_binding::Delivery;
use switchyard_records::model::ingress;
use switchyard_translate::google::{GenerateContentResponse, GoogleErrorBody};
use switchyard_translate::{
    CallLedger, ResponseConfig, StreamTranslator, TranslateOptions, TurnOutcome,
};
use tokio::sync::mpsc;

use crate::delivery::DeliverySlot;
use crate::dialect::{GuestApi, GuestFailure, Render, chat_error};
use crate::intake::GuestBody;
use crate::responses::{error_response, google_error_response, json_response, sse_body};
use crate::retry::RetryBudget;
use crate::routing::Route;
use crate::state::AppState;
use crate::trace::Trace;
use crate::translation::TranslationFailure;
use crate::upstream::{UpstreamError, UpstreamResponse, retryable_status};

/// Largest non-streamed upstream body read.
const MAX_COMPLETION_BODY: usize = 64 * 1024 * 1024;

/// Message marker Gemini CLI treats as a terminal quota error (no further retries by the guest).
const FAIL_FAST_MARKER: &str = "gateway retry limit: 0 remaining";

/// Who is asking, for what.
pub(crate) struct ExchangeContext {
    pub state: Arc<AppState>,
    pub guest_model: String,
    pub session: String,
    pub api: GuestApi,
}

/// [`upstream_failure_body`] in the guest's API's shape.
fn upstream_failure(
    state: &AppState,
    api: GuestApi,
    error: &UpstreamError,
    attempts: u32,
) -> GuestFailure {
    let google = upstream_failure_body(state, error, attempts);
    match api {
        GuestApi::Google => GuestFailure::Google(google),
        GuestApi::Chat => {
            let (status, mut body) = chat_failure(state, error, attempts, &google);
            state.guest_redactor.redact_value(&mut body);
            GuestFailure::Chat(status, body)
        }
    }
}

/// The status and OpenAI error body of a failure for a Chat guest (see `dialect`).
fn chat_failure(
    state: &AppState,
    error: &UpstreamError,
    attempts: u32,
    google: &GoogleErrorBody,
) -> (u16, serde_json::Value) {
    use switchyard_translate::chat_answer::{openai_error, upstream_error_to_openai};
    if let UpstreamError::Status { status, body, .. } = error
        && !error.retryable()
    {
        return (*status, upstream_error_to_openai(*status, body.as_bytes()));
    }
    let code = google.error.code;
    if (400..500).contains(&code) && !retryable_status(code) {
        // An error the upstream reported inside its response, with a client status.
        return (code, openai_error(code, &google.error.message, None));
    }
    if state.config.retries.guest_fail_fast {
        let message = format!(
            "switchyard gateway gave up on the upstream after {attempts} attempt(s) and \
             already spent its retry budget; the upstream's answer is in the run's records"
        );
        let status = crate::dialect::CHAT_FAIL_FAST_STATUS;
        (
            status,
            openai_error(status, &message, Some("upstream_failed")),
        )
    } else {
        (code, openai_error(code, &google.error.message, None))
    }
}

/// The failure for a turn whose calls cannot be delivered, for a Chat guest (a Google guest
/// gets the turn with `MALFORMED_FUNCTION_CALL`).
fn malformed_failure(state: &AppState, reason: &str, attempts: u32) -> GuestFailure {
    use switchyard_translate::chat_answer::openai_error;
    let status = if state.config.retries.guest_fail_fast {
        crate::dialect::CHAT_FAIL_FAST_STATUS
    } else {
        502
    };
    let message = format!(
        "the model's tool call could not be delivered ({reason}) after {attempts} attempt(s) \
         by switchyard gateway"
    );
    GuestFailure::Chat(
        status,
        openai_error(status, &message, Some("malformed_tool_call")),
    )
}

/// What the guest gets when the upstream cannot be reached successfully, with every secret the
/// gateway knows (the provider key, the ingress key) redacted: provider error text can quote
/// them, and what the guest sees reaches the model. Every failure the guest is given passes here,
/// so it is also where the run's last provider error is remembered (the host contract's outcome).
fn upstream_failure_body(
    state: &AppState,
    error: &UpstreamError,
    attempts: u32,
) -> GoogleErrorBody {
    let mut body = unredacted_failure_body(state, error, attempts);
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

/// Send the upstream request until a 2xx head arrives or the budget says stop.
async fn connect(
    state: &AppState,
    chat_body: &Bytes,
    budget: &mut RetryBudget,
    trace: &mut Trace,
) -> Result<UpstreamResponse, (UpstreamError, u32)> {
    let mut attempts = 0;
    loop {
        attempts += 1;
        trace.attempt_started(chat_body);
        let result = tokio::select! {
            r = state.upstream.send(chat_body) => r,
            _ = state.cancel.cancelled() => Err(UpstreamError::Connect("gateway shutting down".into())),
        };
        match result {
            Ok(response) => {
                trace.attempt_head(response.status());
                return Ok(response);
            }
            Err(error) => {
                if let Some(status) = error.status() {
                    trace.attempt_head(status);
                }
                trace.attempt_failed(error.kind(), &error.to_string());
                let wait = if error.retryable() && !state.cancel.is_cancelled() {
                    budget.next_transient(error.retry_after())
                } else {
                    None
                };
                let Some(wait) = wait else {
                    return Err((error, attempts));
                };
                tracing::debug!(%error, ?wait, "retrying upstream");
                if !backoff(state, wait).await {
                    return Err((error, attempts));
                }
            }
        }
    }
}

/// [`connect`] while nothing has reached the guest yet: a failure ends the trace and becomes
/// the guest's HTTP error response.
async fn connect_or_error_response(
    state: &AppState,
    api: GuestApi,
    chat_body: &Bytes,
    budget: &mut RetryBudget,
    trace: &mut Trace,
) -> Result<UpstreamResponse, Response> {
    match connect(state, chat_body, budget, trace).await {
        Ok(response) => Ok(response),
        Err((error, attempts)) => {
            trace
                .finish_error(Vec::new(), error.kind(), &error.to_string())
                .await;
            Err(upstream_failure(state, api, &error, attempts).response())
        }
    }
}

/// Route, ledger check and translation shared by both generate methods.
struct Prepared {
    chat_body: Bytes,
    response_config: ResponseConfig,
    /// The upstream request streams (a streaming guest request with tools goes upstream
    /// unstreamed when `translation.stream_tools` is off).
    upstream_stream: bool,
    /// A Chat guest asked for a usage chunk.
    include_usage: bool,
}

async fn prepare(
    ctx: &ExchangeContext,
    body: &[u8],
    stream: bool,
    trace: &mut Trace,
) -> Result<Prepared, Box<Response>> {
    let state = &ctx.state;
    let upstream_model = match state.router.route(&ctx.guest_model) {
        Route::Upstream(m) => m,
        Route::Refused => {
            let message = format!(
                "model {:?} is not routed by this switchyard gateway (strict_models = true); \
                 add it to [aliases] or use {:?}",
                ctx.guest_model, state.config.upstream_model
            );
            return Err(Box::new(match ctx.api {
                GuestApi::Google => error_response(404, &message),
                GuestApi::Chat => chat_error(404, &message),
            }));
        }
    };
    trace.route(state.upstream.url(), &upstream_model);
    let strip = state
        .binding
        .as_ref()
        .map(|_| switchyard_binding::IDENTITY_ARG);
    let translated = match ctx.api {
        GuestApi::Google => translate_google(ctx, body, stream, &upstream_model, strip).await?,
        GuestApi::Chat => prepare_chat(ctx, body, &upstream_model, strip).await?,
    };
    trace.note(|| {
        format!(
            "translation: {}",
            serde_json::to_string(&translated.report).unwrap_or_default()
        )
    });
    let response_config = ResponseConfig {
        model_version: upstream_model.clone(),
        response_id: uuid::Uuid::now_v7().simple().to_string(),
        synthetic_id_prefix: format!("call_{}", uuid::Uuid::now_v7().simple()),
        json_response: translated.json_response,
        // A Chat guest's API carries reasoning itself (`reasoning_content`).
        forward_reasoning: match ctx.api {
            GuestApi::Google => state.config.translation.forward_reasoning,
            GuestApi::Chat => true,
        },
        carry_reasoning: ctx.api == GuestApi::Google && state.config.translation.echo_reasoning,
        prompt_token_estimate: Some(translated.prompt_token_estimate),
        already_forwarded_text: None,
    };
    Ok(Prepared {
        chat_body: translated.body,
        response_config,
        upstream_stream: translated.upstream_stream,
        include_usage: translated.include_usage,
    })
}

/// What either API's request preparation hands on.
struct Translation {
    body: Bytes,
    report: switchyard_translate::TranslationReport,
    json_response: bool,
    prompt_token_estimate: u32,
    upstream_stream: bool,
    include_usage: bool,
}

/// A GenerateContent request translated, its images converted, its call ids checked.
async fn translate_google(
    ctx: &ExchangeContext,
    body: &[u8],
    stream: bool,
    upstream_model: &str,
    strip: Option<&str>,
) -> Result<Translation, Box<Response>> {
    let state = &ctx.state;
    let options = TranslateOptions {
        provider: state.config.translation.clone(),
        convert_on_miss: false,
        ..TranslateOptions::new(upstream_model.to_string(), stream)
    };
    let translate = || {
        state
            .translator
            .translate(body, &options, strip)
            .map_err(|failure| {
                Box::new(match failure {
                    TranslationFailure::Guest(e) => google_error_response(&e.to_google_error()),
                    TranslationFailure::Serialize(e) => error_response(500, &e.to_string()),
                })
            })
    };
    let mut translated = translate()?;
    if !translated.unconverted_pngs.is_empty() {
        // New images: converted off the runtime, then the request is translated with them.
        let pngs = std::mem::take(&mut translated.unconverted_pngs);
        let cache = state.translator.images();
        let max_pixels = state.config.translation.max_image_pixels;
        state.images.convert_into(cache, pngs, max_pixels).await;
        translated = translate()?;
    }
    let checked = state.sessions.with(
        &ctx.session,
        || {
            // First request of a session: its history (a resumed session) is accepted as is.
            let mut ledger = CallLedger::new();
            ledger.adopt_history(&translated.request);
            ledger
        },
        |ledger| ledger.check_request(&translated.request),
    );
    if let Err(e) = checked {
        return Err(Box::new(error_response(400, &e.to_string())));
    }
    Ok(Translation {
        body: translated.body,
        report: translated.report,
        json_response: translated.json_response,
        prompt_token_estimate: translated.prompt_token_estimate,
        upstream_stream: translated.stream,
        include_usage: false,
    })
}

/// A Chat Completions request checked and prepared, its images converted, its call ids
/// checked.
async fn prepare_chat(
    ctx: &ExchangeContext,
    body: &[u8],
    upstream_model: &str,
    strip: Option<&str>,
) -> Result<Translation, Box<Response>> {
    use switchyard_translate::chat_ingress::{
        ChatIngressOptions, parse_chat_request, prepare_chat_request,
    };
    let state = &ctx.state;
    let options = ChatIngressOptions {
        upstream_model: upstream_model.to_string(),
        provider: state.config.translation.clone(),
        strip,
        convert_on_miss: false,
    };
    let refused = |e: switchyard_translate::TranslateError| {
        Box::new(chat_error(e.http_status(), &e.to_string()))
    };
    let cache = state.translator.images();
    let prepare =
        || parse_chat_request(body).and_then(|r| prepare_chat_request(r, &options, Some(cache)));
    let mut prepared = prepare().map_err(refused)?;
    if !prepared.unconverted_pngs.is_empty() {
        let pngs = std::mem::take(&mut prepared.unconverted_pngs);
        let max_pixels = state.config.translation.max_image_pixels;
        state.images.convert_into(cache, pngs, max_pixels).await;
        prepared = prepare().map_err(refused)?;
    }
    let answers = prepared
        .tool_result_ids
        .iter()
        .map(|(id, path)| (id.as_str(), path.as_str()));
    let checked = state.sessions.with(
        &ctx.session,
        || {
            let mut ledger = CallLedger::new();
            ledger.adopt_ids(prepared.history_call_ids.iter().map(String::as_str));
            ledger
        },
        |ledger| ledger.check_answers(answers),
    );
    if let Err(e) = checked {
        return Err(Box::new(chat_error(400, &e.to_string())));
    }
    Ok(Translation {
        body: Bytes::from(prepared.body),
        report: prepared.report,
        json_response: false,
        prompt_token_estimate: prepared.prompt_token_estimate,
        upstream_stream: prepared.upstream_stream,
        include_usage: prepared.include_usage,
    })
}

/// Accepts a completed turn: its host-tool calls get their identities and are entered in the
/// run's binding, and its call ids are checked against the session ledger and registered. On
/// an error nothing stays entered (the returned delivery is dropped, which revokes it).
fn accept_turn(
    state: &AppState,
    session: &str,
    chunk: &mut GenerateContentResponse,
    ids: &[String],
) -> Result<Option<Delivery>, String> {
    let delivery = match &state.binding {
        Some(binding) => {
            crate::delivery::stamp(binding, session, chunk).map_err(|e| e.to_string())?
        }
        None => None,
    };
    state
        .sessions
        .with(session, CallLedger::new, |ledger| {
            ledger.register_delivered(ids)
        })
        .map_err(|e| e.to_string())?;
    Ok(delivery)
}

/// Starts an exchange's record and translates the guest request. A refused request is recorded
/// as failed and its Google-shaped error response returned; an accepted one is recorded as in
/// flight.
async fn begin(
    ctx: &ExchangeContext,
    body: &Bytes,
    ingress_api: &'static str,
    stream: bool,
) -> Result<(Trace, Prepared), Response> {
    let state = &ctx.state;
    let mut trace = Trace::begin(
        state.records.as_ref(),
        state.run_id,
        ingress_api,
        &ctx.guest_model,
        body,
    );
    match prepare(ctx, body, stream, &mut trace).await {
        Ok(prepared) => {
            trace.started().await;
            Ok((trace, prepared))
        }
        Err(response) => {
            trace
                .finish_error(
                    Vec::new(),
                    "guest_request",
                    "request refused before translation",
                )
                .await;
            Err(*response)
        }
    }
}

/// Waits `wait` before a retry; returns early with `false` when the gateway shuts down, so no
/// backoff delays shutdown.
async fn backoff(state: &AppState, wait: std::time::Duration) -> bool {
    tokio::select! {
        _ = tokio::time::sleep(wait) => true,
        _ = state.cancel.cancelled() => false,
    }
}

/// `:streamGenerateContent`, or a streamed `chat/completions`.
pub(crate) async fn stream(ctx: ExchangeContext, guest: GuestBody) -> Response {
    let state = ctx.state.clone();
    let ingress_api = match ctx.api {
        GuestApi::Google => ingress::STREAM_GENERATE_CONTENT,
        GuestApi::Chat => ingress::CHAT_COMPLETIONS,
    };
    let begun = begin(&ctx, &guest.bytes, ingress_api, true).await;
    drop(guest);
    let (mut trace, prepared) = match begun {
        Ok(begun) => begun,
        Err(response) => return response,
    };
    if !prepared.upstream_stream {
        let _in_flight = state.in_flight.clone();
        return complete(&ctx, trace, &prepared, Shape::Sse).await;
    }
    let mut budget = RetryBudget::new(&state.config.retries);
    let connected = connect_or_error_response(
        &state,
        ctx.api,
        &prepared.chat_body,
        &mut budget,
        &mut trace,
    )
    .await;
    let response = match connected {
        Ok(r) => r,
        Err(response) => return response,
    };
    let (tx, rx) = mpsc::channel(32);
    let delivery = DeliverySlot::default();
    // The pump starts from one boxed struct: an async fn keeps its arguments apart from the
    // locals they move into, for as long as it runs (here: the whole stream).
    let render = Render::new(
        ctx.api,
        &prepared.response_config.response_id,
        prepared.include_usage,
    );
    tokio::spawn(pump(Box::new(Pump {
        ctx,
        render,
        prepared,
        response,
        budget,
        trace,
        tx,
        delivery: delivery.clone(),
        _in_flight: state.in_flight.clone(),
    })));
    sse_body(rx, delivery)
}

/// How one upstream stream attempt ended.
enum AttemptEnd {
    Outcome(Box<TurnOutcome>),
    Failed(UpstreamError),
    GuestGone,
    Cancelled,
}

/// What a stream's pump starts with.
struct Pump {
    ctx: ExchangeContext,
    render: Render,
    prepared: Prepared,
    response: UpstreamResponse,
    budget: RetryBudget,
    trace: Trace,
    tx: mpsc::Sender<Bytes>,
    /// Where the final chunk's host-tool calls wait for the body's end.
    delivery: DeliverySlot,
    /// Held until the stream ends, so a shutdown waits for it.
    _in_flight: mpsc::Sender<()>,
}

async fn pump(start: Box<Pump>) {
    let Pump {
        ctx,
        mut render,
        prepared,
        mut response,
        mut budget,
        mut trace,
        tx,
        delivery,
        _in_flight,
    } = *start;
    let state = ctx.state.clone();
    let mut delivered: Vec<GenerateContentResponse> = Vec::new();
    let mut config = prepared.response_config.clone();
    loop {
        let end = stream_attempt(
            &state,
            &mut render,
            response,
            config.clone(),
            &tx,
            &mut trace,
            &mut delivered,
        )
        .await;
        let retry_reason = match end {
            AttemptEnd::GuestGone => {
                trace
                    .finish_error(
                        delivered,
                        "guest_disconnected",
                        "the guest closed the stream",
                    )
                    .await;
                return;
            }
            AttemptEnd::Cancelled => {
                trace
                    .finish_error(delivered, "interrupted", "gateway shut down mid-stream")
                    .await;
                return;
            }
            AttemptEnd::Failed(error) => {
                let nothing_sent = delivered.is_empty();
                let wait = (nothing_sent && error.retryable())
                    .then(|| budget.next_transient(error.retry_after()))
                    .flatten();
                match wait {
                    Some(wait) => {
                        // On shutdown the next attempt fails at once ("gateway shutting down").
                        backoff(&state, wait).await;
                        format!("retrying after stream failure: {error}")
                    }
                    None => {
                        let failure =
                            upstream_failure(&state, ctx.api, &error, budget.retries() + 1);
                        let _ = tx.send(failure.stream_bytes()).await;
                        trace
                            .finish_error(delivered, error.kind(), &error.to_string())
                            .await;
                        return;
                    }
                }
            }
            AttemptEnd::Outcome(outcome) => match *outcome {
                TurnOutcome::Complete(mut turn) => {
                    let ids = std::mem::take(&mut turn.delivered_call_ids);
                    match accept_turn(&state, &ctx.session, &mut turn.final_chunk, &ids) {
                        Ok(host_calls) => {
                            if let Some(host_calls) = host_calls {
                                delivery.put(host_calls);
                            }
                            for frame in render.last_frames(&turn.final_chunk) {
                                let _ = tx.send(frame).await;
                            }
                            delivered.push(turn.final_chunk);
                            trace.finish_ok(delivered).await;
                            return;
                        }
                        Err(reason) if budget.next_malformed() => {
                            config.already_forwarded_text = Some(forwarded_text(&delivered));
                            format!("retrying: {reason}")
                        }
                        Err(reason) => {
                            let last = malformed_final_chunk(&config, &turn.final_chunk);
                            let attempts = budget.retries() + 1;
                            let mut end = Undeliverable {
                                render: &mut render,
                                tx: &tx,
                                delivered: &mut delivered,
                            };
                            end.send(&state, ctx.api, last, &reason, attempts).await;
                            trace
                                .finish_error(delivered, "reused_call_id", &reason)
                                .await;
                            return;
                        }
                    }
                }
                TurnOutcome::Malformed(turn) => {
                    let reason = format!("{:?}", turn.reason);
                    if budget.next_malformed() {
                        config.already_forwarded_text = Some(turn.forwarded_text.clone());
                        format!("retrying malformed tool call: {reason}")
                    } else {
                        let attempts = budget.retries() + 1;
                        let mut end = Undeliverable {
                            render: &mut render,
                            tx: &tx,
                            delivered: &mut delivered,
                        };
                        let message = turn.reason.to_string();
                        end.send(&state, ctx.api, turn.final_chunk, &message, attempts)
                            .await;
                        trace
                            .finish_error(delivered, "malformed_function_call", &reason)
                            .await;
                        return;
                    }
                }
            },
        };
        tracing::debug!(%retry_reason, "stream exchange retried");
        trace.note(|| retry_reason.clone());
        response = match connect(&state, &prepared.chat_body, &mut budget, &mut trace).await {
            Ok(r) => r,
            Err((error, attempts)) => {
                let failure = upstream_failure(&state, ctx.api, &error, attempts);
                let _ = tx.send(failure.stream_bytes()).await;
                trace
                    .finish_error(delivered, error.kind(), &error.to_string())
                    .await;
                return;
            }
        };
    }
}

/// Where a stream whose turn's calls cannot be delivered ends.
struct Undeliverable<'a> {
    render: &'a mut Render,
    tx: &'a mpsc::Sender<Bytes>,
    delivered: &'a mut Vec<GenerateContentResponse>,
}

impl Undeliverable<'_> {
    /// A Google guest gets `last` (finishReason `MALFORMED_FUNCTION_CALL`, no calls); a Chat
    /// guest an error event.
    async fn send(
        &mut self,
        state: &AppState,
        api: GuestApi,
        last: GenerateContentResponse,
        reason: &str,
        attempts: u32,
    ) {
        match api {
            GuestApi::Google => {
                for frame in self.render.last_frames(&last) {
                    let _ = self.tx.send(frame).await;
                }
                self.delivered.push(last);
            }
            GuestApi::Chat => {
                let failure = malformed_failure(state, reason, attempts);
                let _ = self.tx.send(failure.stream_bytes()).await;
            }
        }
    }
}

/// The visible text the guest already received in this exchange.
fn forwarded_text(delivered: &[GenerateContentResponse]) -> String {
    delivered
        .iter()
        .flat_map(|c| c.parts())
        .filter(|p| p.thought != Some(true))
        .filter_map(|p| p.text.as_deref())
        .collect()
}

/// The final chunk of a turn whose calls cannot be delivered: finishReason
/// MALFORMED_FUNCTION_CALL, text kept, function calls removed.
fn malformed_final_chunk(
    config: &ResponseConfig,
    complete: &GenerateContentResponse,
) -> GenerateContentResponse {
    let mut chunk = complete.clone();
    chunk.model_version = Some(config.model_version.clone());
    for candidate in &mut chunk.candidates {
        candidate
            .content
            .parts
            .retain(|p| p.function_call.is_none());
        candidate.finish_reason =
            Some(switchyard_translate::google::FinishReason::MalformedFunctionCall);
    }
    chunk
}

async fn stream_attempt(
    state: &AppState,
    render: &mut Render,
    response: UpstreamResponse,
    config: ResponseConfig,
    tx: &mpsc::Sender<Bytes>,
    trace: &mut Trace,
    delivered: &mut Vec<GenerateContentResponse>,
) -> AttemptEnd {
    let mut translator = StreamTranslator::new(config);
    let body = state.upstream.body_stream(response);
    let mut events =
        crate::upstream::bounded_events(body, crate::upstream::MAX_SSE_EVENT).eventsource();
    loop {
        let next = tokio::select! {
            next = events.next() => next,
            _ = state.cancel.cancelled() => return AttemptEnd::Cancelled,
            _ = tx.closed() => return AttemptEnd::GuestGone,
        };
        match next {
            None => break,
            Some(Err(eventsource_stream::EventStreamError::Transport(e))) => {
                return AttemptEnd::Failed(e);
            }
            Some(Err(e)) => return AttemptEnd::Failed(UpstreamError::Invalid(e.to_string())),
            Some(Ok(event)) => {
                let translated = translator.push(&event.data);
                trace.attempt_event(event.data);
                match translated {
                    Ok(chunks) => {
                        let forwarded = !chunks.is_empty();
                        for chunk in chunks {
                            for frame in render.frames(&chunk) {
                                if tx.send(frame).await.is_err() {
                                    return AttemptEnd::GuestGone;
                                }
                            }
                            delivered.push(chunk);
                        }
                        if forwarded {
                            // Let the guest's connection write what was just sent before the
                            // next upstream event is translated: the rest of the upstream
                            // response often arrives with this event, and would otherwise be
                            // processed first (the frame waiting meanwhile).
                            tokio::task::yield_now().await;
                        }
                    }
                    Err(e) => return AttemptEnd::Failed(UpstreamError::Payload(e)),
                }
                if translator.is_done() {
                    break;
                }
            }
        }
    }
    if let Some(why) = translator.unfinished() {
        // A 200 whose stream carried nothing, or stopped short: the upstream failed after its
        // head (e.g. a local server that overflowed its context), not an empty answer.
        return AttemptEnd::Failed(UpstreamError::Unfinished(why));
    }
    let outcome = translator.finish();
    trace.response_report(outcome.report());
    AttemptEnd::Outcome(Box::new(outcome))
}

/// `:generateContent` (auxiliary calls), or an unstreamed `chat/completions`: one
/// non-streamed upstream completion.
pub(crate) async fn generate(ctx: ExchangeContext, guest: GuestBody) -> Response {
    let state = ctx.state.clone();
    let _in_flight = state.in_flight.clone();
    let ingress_api = match ctx.api {
        GuestApi::Google => ingress::GENERATE_CONTENT,
        GuestApi::Chat => ingress::CHAT_COMPLETIONS,
    };
    let begun = begin(&ctx, &guest.bytes, ingress_api, false).await;
    drop(guest);
    let (trace, prepared) = match begun {
        Ok(begun) => begun,
        Err(response) => return response,
    };
    complete(&ctx, trace, &prepared, Shape::Json).await
}

/// How a whole answer goes to the guest.
#[derive(Clone, Copy)]
enum Shape {
    /// `:generateContent`: one JSON body.
    Json,
    /// `:streamGenerateContent` answered from an unstreamed upstream call: one SSE frame.
    Sse,
}

/// The unstreamed upstream attempts of an exchange, until it ends; the answer in `shape`.
async fn complete(
    ctx: &ExchangeContext,
    mut trace: Trace,
    prepared: &Prepared,
    shape: Shape,
) -> Response {
    let state = &ctx.state;
    let api = ctx.api;
    let mut budget = RetryBudget::new(&state.config.retries);
    let config = &prepared.response_config;
    let mut render = Render::new(api, &config.response_id, prepared.include_usage);
    loop {
        let response = match connect_or_error_response(
            state,
            api,
            &prepared.chat_body,
            &mut budget,
            &mut trace,
        )
        .await
        {
            Ok(r) => r,
            Err(response) => return response,
        };
        let read = tokio::select! {
            r = state.upstream.read_body(response, MAX_COMPLETION_BODY) => r,
            _ = state.cancel.cancelled() => Err(UpstreamError::Connect("gateway shutting down".into())),
        };
        let bytes = match read {
            Ok(b) => b,
            Err(error) => {
                trace.attempt_failed(error.kind(), &error.to_string());
                if error.retryable()
                    && let Some(wait) = budget.next_transient(None)
                {
                    backoff(state, wait).await;
                    continue;
                }
                trace
                    .finish_error(Vec::new(), error.kind(), &error.to_string())
                    .await;
                return upstream_failure(state, api, &error, budget.retries() + 1).response();
            }
        };
        trace.attempt_body(&bytes);
        let outcome = match switchyard_translate::translate_completion(&bytes, config.clone()) {
            Ok(o) => o,
            Err(e) => {
                let error = UpstreamError::Payload(e);
                trace
                    .finish_error(Vec::new(), error.kind(), &error.to_string())
                    .await;
                return upstream_failure(state, api, &error, budget.retries() + 1).response();
            }
        };
        trace.response_report(outcome.report());
        match outcome {
            TurnOutcome::Complete(mut turn) => {
                let ids = std::mem::take(&mut turn.delivered_call_ids);
                match accept_turn(state, &ctx.session, &mut turn.final_chunk, &ids) {
                    Ok(host_calls) => {
                        let response =
                            answer(&mut trace, &mut render, turn.final_chunk, None, shape).await;
                        return match host_calls {
                            Some(host_calls) => confirming(response, host_calls),
                            None => response,
                        };
                    }
                    Err(reason) if budget.next_malformed() => {
                        trace.note(|| format!("retrying: {reason}"));
                    }
                    Err(reason) => {
                        let last = malformed_final_chunk(config, &turn.final_chunk);
                        let error = ("reused_call_id", reason.as_str());
                        let attempts = budget.retries() + 1;
                        return undeliverable(
                            state,
                            &mut trace,
                            &mut render,
                            last,
                            error,
                            shape,
                            attempts,
                        )
                        .await;
                    }
                }
            }
            TurnOutcome::Malformed(turn) => {
                let reason = format!("{:?}", turn.reason);
                if budget.next_malformed() {
                    trace.note(|| format!("retrying malformed tool call: {reason}"));
                } else {
                    let message = turn.reason.to_string();
                    let error = ("malformed_function_call", message.as_str());
                    let attempts = budget.retries() + 1;
                    return undeliverable(
                        state,
                        &mut trace,
                        &mut render,
                        turn.final_chunk,
                        error,
                        shape,
                        attempts,
                    )
                    .await;
                }
            }
        }
    }
}

/// Ends a `:generateContent` exchange with its whole response `chunk` (and `error`, kind and
/// message, when it failed).
async fn answer(
    trace: &mut Trace,
    render: &mut Render,
    chunk: GenerateContentResponse,
    error: Option<(&str, &str)>,
    shape: Shape,
) -> Response {
    let sent = match shape {
        Shape::Json => render.whole(&chunk),
        Shape::Sse => render
            .last_frames(&chunk)
            .iter()
            .map(|frame| String::from_utf8_lossy(frame).into_owned())
            .collect(),
    };
    let delivered = vec![chunk];
    match error {
        None => trace.finish_ok(delivered).await,
        Some((kind, message)) => trace.finish_error(delivered, kind, message).await,
    }
    match shape {
        Shape::Json => json_response(sent),
        Shape::Sse => crate::responses::sse_whole(sent),
    }
}

/// Ends an unstreamed exchange whose turn's calls cannot be delivered: a Google guest gets
/// `last` (finishReason `MALFORMED_FUNCTION_CALL`), a Chat guest an error response.
async fn undeliverable(
    state: &AppState,
    trace: &mut Trace,
    render: &mut Render,
    last: GenerateContentResponse,
    error: (&str, &str),
    shape: Shape,
    attempts: u32,
) -> Response {
    match render {
        Render::Google => answer(trace, render, last, Some(error), shape).await,
        Render::Chat(_) => {
            trace.finish_error(Vec::new(), error.0, error.1).await;
            malformed_failure(state, error.1, attempts).response()
        }
    }
}

/// `response` with a body that confirms `host_calls` once it was handed over whole.
fn confirming(response: Response, host_calls: Delivery) -> Response {
    let slot = DeliverySlot::default();
    slot.put(host_calls);
    let (parts, body) = response.into_parts();
    Response::from_parts(parts, crate::responses::confirming_body(body, slot))
}

/// `:countTokens`: a local estimate, never an upstream call.
pub(crate) async fn count_tokens(ctx: ExchangeContext, guest: GuestBody) -> Response {
    let GuestBody {
        bytes: body,
        permit: _permit,
    } = guest;
    let state = &ctx.state;
    if let Route::Refused = state.router.route(&ctx.guest_model) {
        return error_response(
            404,
            &format!("model {:?} is not routed by this gateway", ctx.guest_model),
        );
    }
    let request: switchyard_translate::google::CountTokensRequest =
        match serde_json::from_slice(&body) {
            Ok(r) => r,
            Err(e) => return error_response(400, &format!("invalid countTokens body: {e}")),
        };
    let answer = switchyard_translate::count_tokens(&request);
    let mut trace = Trace::begin(
        state.records.as_ref(),
        state.run_id,
        ingress::COUNT_TOKENS,
        &ctx.guest_model,
        &body,
    );
    trace.note(|| format!("local estimate: {} tokens", answer.total_tokens));
    trace.finish_ok(Vec::new()).await;
    json_response(serde_json::to_string(&answer).unwrap_or_default())
}
