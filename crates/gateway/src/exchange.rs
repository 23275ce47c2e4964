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
            Err(google_error_response(&upstream_failure_body(
                state, &error, attempts,
            )))
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
            return Err(Box::new(error_response(
                404,
                &format!(
                    "model {:?} is not routed by this switchyard gateway (strict_models = true); \
                     add it to [aliases] or use {:?}",
                    ctx.guest_model, state.config.upstream_model
                ),
            )));
        }
    };
    trace.route(state.upstream.url(), &upstream_model);
    let options = TranslateOptions {
        provider: state.config.translation.clone(),
        convert_on_miss: false,
        ..TranslateOptions::new(upstream_model.clone(), stream)
    };
    let strip = state
        .binding
        .as_ref()
        .map(|_| switchyard_binding::IDENTITY_ARG);
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
    trace.note(|| {
        format!(
            "translation: {}",
            serde_json::to_string(&translated.report).unwrap_or_default()
        )
    });
    let chat_body = translated.body;
    let response_config = ResponseConfig {
        model_version: upstream_model.clone(),
        response_id: uuid::Uuid::now_v7().simple().to_string(),
        synthetic_id_prefix: format!("call_{}", uuid::Uuid::now_v7().simple()),
        json_response: translated.json_response,
        forward_reasoning: state.config.translation.forward_reasoning,
        carry_reasoning: state.config.translation.echo_reasoning,
        prompt_token_estimate: Some(translated.prompt_token_estimate),
        already_forwarded_text: None,
    };
    Ok(Prepared {
        chat_body,
        response_config,
        upstream_stream: translated.stream,
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

fn frame(chunk: &GenerateContentResponse) -> Bytes {
    let json = chunk.to_json_line();
    let mut out = Vec::with_capacity(json.len() + 10);
    out.extend_from_slice(b"data: ");
    out.extend_from_slice(json.as_bytes());
    out.extend_from_slice(b"\r\n\r\n");
    Bytes::from(out)
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

/// `:streamGenerateContent`.
pub(crate) async fn stream_generate(ctx: ExchangeContext, guest: GuestBody) -> Response {
    let state = ctx.state.clone();
    let begun = begin(&ctx, &guest.bytes, ingress::STREAM_GENERATE_CONTENT, true).await;
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
    let connected =
        connect_or_error_response(&state, &prepared.chat_body, &mut budget, &mut trace).await;
    let response = match connected {
        Ok(r) => r,
        Err(response) => return response,
    };
    let (tx, rx) = mpsc::channel(32);
    let delivery = DeliverySlot::default();
    // The pump starts from one boxed struct: an async fn keeps its arguments apart from the
    // locals they move into, for as long as it runs (here: the whole stream).
    tokio::spawn(pump(Box::new(Pump {
        ctx,
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
                        let body = upstream_failure_body(&state, &error, budget.retries() + 1);
                        let _ = tx.send(Bytes::from(body.to_json_line())).await;
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
                            let _ = tx.send(frame(&turn.final_chunk)).await;
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
                            let _ = tx.send(frame(&last)).await;
                            delivered.push(last);
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
                        let _ = tx.send(frame(&turn.final_chunk)).await;
                        delivered.push(turn.final_chunk);
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
                let body = upstream_failure_body(&state, &error, attempts);
                let _ = tx.send(Bytes::from(body.to_json_line())).await;
                trace
                    .finish_error(delivered, error.kind(), &error.to_string())
                    .await;
                return;
            }
        };
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
                            if tx.send(frame(&chunk)).await.is_err() {
                                return AttemptEnd::GuestGone;
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

/// `:generateContent` (auxiliary calls): one non-streamed upstream completion.
pub(crate) async fn generate(ctx: ExchangeContext, guest: GuestBody) -> Response {
    let state = ctx.state.clone();
    let _in_flight = state.in_flight.clone();
    let begun = begin(&ctx, &guest.bytes, ingress::GENERATE_CONTENT, false).await;
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
    let mut budget = RetryBudget::new(&state.config.retries);
    let config = &prepared.response_config;
    loop {
        let response =
            match connect_or_error_response(state, &prepared.chat_body, &mut budget, &mut trace)
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
                return google_error_response(&upstream_failure_body(
                    state,
                    &error,
                    budget.retries() + 1,
                ));
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
                return google_error_response(&upstream_failure_body(
                    state,
                    &error,
                    budget.retries() + 1,
                ));
            }
        };
        trace.response_report(outcome.report());
        match outcome {
            TurnOutcome::Complete(mut turn) => {
                let ids = std::mem::take(&mut turn.delivered_call_ids);
                match accept_turn(state, &ctx.session, &mut turn.final_chunk, &ids) {
                    Ok(host_calls) => {
                        let response = answer(&mut trace, turn.final_chunk, None, shape).await;
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
                        return answer(&mut trace, last, Some(("reused_call_id", &reason)), shape)
                            .await;
                    }
                }
            }
            TurnOutcome::Malformed(turn) => {
                let reason = format!("{:?}", turn.reason);
                if budget.next_malformed() {
                    trace.note(|| format!("retrying malformed tool call: {reason}"));
                } else {
                    let error = Some(("malformed_function_call", reason.as_str()));
                    return answer(&mut trace, turn.final_chunk, error, shape).await;
                }
            }
        }
    }
}

/// Ends a `:generateContent` exchange with its whole response `chunk` (and `error`, kind and
/// message, when it failed).
async fn answer(
    trace: &mut Trace,
    chunk: GenerateContentResponse,
    error: Option<(&str, &str)>,
    shape: Shape,
) -> Response {
    let sent = match shape {
        Shape::Json => chunk.to_json_line(),
        Shape::Sse => String::from_utf8_lossy(&frame(&chunk)).into_owned(),
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
