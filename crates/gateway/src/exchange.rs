//! One guest request, end to end, for any [`Ingress`]: route the model, let the ingress check
//! and prepare the request (the session's call ids checked, the upstream's own ids restored),
//! apply the upstream plan (the provider's switches), call the upstream with retries, assemble
//! the answer into the neutral model turn, give its calls the host tools' identities, render
//! it for the guest, record it.
//!
//! Streaming: the handler obtains a 2xx upstream response head first (retrying 429/5xx/connect
//! failures within the budget), so failures before that are real HTTP errors for the guest.
//! Then a pump task forwards each rendered chunk as soon as it is produced. Calls are delivered
//! only complete, at the end of the turn, each with the gateway's own id. A malformed or
//! truncated call is never delivered: the exchange is retried (`malformed_retries`), text the
//! guest already has is not repeated (the translator suppresses it), and when retries are used
//! up the ingress ends the turn its way (Google: `MALFORMED_FUNCTION_CALL` and no call; Chat: an
//! error). An upstream failure after the head was sent becomes the ingress's error as the
//! stream's last bytes.

use std::sync::Arc;

use axum::response::Response;
use bytes::Bytes;
use eventsource_stream::Eventsource;
use futures_util::StreamExt;
use switchyard_binding::Delivery;
use switchyard_records::model::ingress;
use switchyard_translate::turn::{Finish, TurnChunk, TurnPart};
use switchyard_translate::{CallLedger, ResponseConfig, StreamTranslator, TurnOutcome};
use tokio::sync::mpsc;

use crate::delivery::DeliverySlot;
use crate::ingress::{Ingress, Render};
use crate::intake::GuestBody;
use crate::responses::{error_response, json_response, sse_body};
use crate::retry::RetryBudget;
use crate::routing::Route;
use crate::state::AppState;
use crate::trace::Trace;
use crate::upstream::{UpstreamError, UpstreamResponse};

/// Largest non-streamed upstream body read.
const MAX_COMPLETION_BODY: usize = 64 * 1024 * 1024;

/// Who is asking, for what, through which ingress.
pub(crate) struct ExchangeContext<I> {
    pub state: Arc<AppState>,
    pub guest_model: String,
    pub session: String,
    pub api: I,
}

/// A fresh prefix for the ids the gateway gives one exchange's calls (80 random bits).
fn call_id_prefix() -> String {
    let random = uuid::Uuid::new_v4().simple().to_string();
    format!("call_{}", &random[..20])
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
        let traceparent = trace.traceparent();
        let result = tokio::select! {
            r = state.upstream.send(chat_body, traceparent.as_deref()) => r,
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
                let error_text = state
                    .guest_redactor
                    .redact_str(&error.to_string())
                    .into_owned();
                tracing::debug!(error = %error_text, ?wait, "retrying upstream");
                if !backoff(state, wait).await {
                    return Err((error, attempts));
                }
            }
        }
    }
}

/// [`connect`] while nothing has reached the guest yet: a failure ends the trace and becomes
/// the guest's HTTP error response.
async fn connect_or_error_response<I: Ingress>(
    state: &AppState,
    api: I,
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
            Err(api
                .upstream_failure(state, &error, attempts, budget.declined_wait())
                .response())
        }
    }
}

/// The upstream request of an exchange and how its answer is read.
struct Prepared {
    chat_body: Bytes,
    response_config: ResponseConfig,
    /// The upstream request streams (the plan may ask a streaming guest's answer unstreamed:
    /// `translation.stream_tools`).
    upstream_stream: bool,
    /// A Chat guest asked for a usage chunk.
    include_usage: bool,
}

/// Route, the ingress's preparation, the upstream plan.
async fn prepare<I: Ingress>(
    ctx: &ExchangeContext<I>,
    guest: GuestBody,
    stream: bool,
    trace: &mut Trace,
) -> Result<Prepared, Box<Response>> {
    let GuestBody {
        bytes: body,
        permit,
    } = guest;
    let state = &ctx.state;
    let api = ctx.api;
    let upstream_model = match state.router.route(&ctx.guest_model) {
        Route::Upstream(m) => m,
        Route::Refused => {
            let message = format!(
                "model {:?} is not routed by this switchyard gateway (strict_models = true); \
                 add it to [aliases] or use {:?}",
                ctx.guest_model, state.config.upstream_model
            );
            return Err(Box::new(api.error(404, &message)));
        }
    };
    trace.route(state.upstream.url(), &upstream_model);
    let strip = state
        .binding
        .as_ref()
        .map(|_| switchyard_binding::IDENTITY_ARG);
    let mut prepared = api
        .prepare(ctx, &body, stream, &upstream_model, strip, permit)
        .await?;
    let context = &state.config.context;
    if context.policy != switchyard_translate::context::ContextPolicy::Identity {
        let decided = state
            .token_counts
            .apply(
                context,
                &state.upstream,
                &state.config.upstream_url,
                &mut prepared.chat,
            )
            .await;
        match decided {
            Ok(decision) => {
                let after = decision.changed().then_some(&prepared.chat);
                trace.context(&decision, after);
            }
            Err(e) => {
                // Never an over-budget request upstream: the guest is told why, in its shape.
                trace.refused_as("context_budget", e.to_string());
                return Err(Box::new(api.error(400, &e.to_string())));
            }
        }
    }
    // The plan and the upstream body, where a body of this size belongs (`parse_work`).
    let translation = state.config.translation.clone();
    let planned = crate::ingress::parse_work(body.len(), move || {
        let mut prepared = prepared;
        let schemas = prepared.schemas;
        let planned = switchyard_translate::plan::apply(
            &mut prepared.chat,
            &translation,
            &mut prepared.report,
            schemas,
        )
        .map(|()| serde_json::to_vec(&prepared.chat));
        (prepared, planned)
    })
    .await;
    let Some((prepared, planned)) = planned else {
        return Err(Box::new(api.error(503, "the gateway is shutting down")));
    };
    let chat_body = match planned {
        Ok(Ok(body)) => Bytes::from(body),
        Ok(Err(e)) => return Err(Box::new(api.error(500, &e.to_string()))),
        Err(e) => return Err(Box::new(api.error(e.http_status(), &e.to_string()))),
    };
    trace.note(|| {
        format!(
            "translation: {}",
            serde_json::to_string(&prepared.report).unwrap_or_default()
        )
    });
    let (forward_reasoning, carry_reasoning) = api.reasoning(state);
    let response_config = ResponseConfig {
        model_version: upstream_model.clone(),
        response_id: uuid::Uuid::now_v7().simple().to_string(),
        synthetic_id_prefix: call_id_prefix(),
        mint_call_ids: true,
        json_response: prepared.json_response,
        forward_reasoning,
        carry_reasoning,
        prompt_token_estimate: Some(prepared.prompt_token_estimate),
        already_forwarded_text: None,
        call_shapes: prepared.call_shapes,
    };
    Ok(Prepared {
        chat_body,
        response_config,
        upstream_stream: prepared.chat.stream,
        include_usage: prepared.include_usage,
    })
}

/// Accepts a completed turn: its host-tool calls get their identities and are entered in the
/// run's binding, and its calls are registered in the session's ledger (with the upstream ids
/// they stand for). On an error nothing stays entered (the returned delivery is dropped, which
/// revokes it).
fn accept_turn<I: Ingress>(
    state: &AppState,
    session: &str,
    chunk: &mut TurnChunk,
    api: I,
) -> Result<Option<Delivery>, String> {
    seal_ids(state, session, chunk);
    let delivery = match &state.binding {
        Some(binding) => crate::delivery::stamp(binding, session, chunk, api.stamps_identity())
            .map_err(|e| e.to_string())?,
        None => None,
    };
    let calls: Vec<_> = chunk.calls().cloned().collect();
    state
        .sessions
        .with(session, CallLedger::new, |ledger| {
            ledger.register_turn(&calls)
        })
        .map_err(|e| e.to_string())?;
    Ok(delivery)
}

/// Gives the turn's calls their sealed ids (see `call_ids`), each carrying its upstream id when
/// that id is unique in the turn (a repeated one is never given back).
fn seal_ids(state: &AppState, session: &str, chunk: &mut TurnChunk) {
    let mut in_turn: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
    for upstream in chunk.calls().filter_map(|c| c.upstream_id.clone()) {
        *in_turn.entry(upstream).or_default() += 1;
    }
    for call in chunk.calls_mut() {
        let unique = call
            .upstream_id
            .as_deref()
            .filter(|u| in_turn.get(*u) == Some(&1));
        call.id = state.call_ids.seal(session, unique);
    }
}

/// Starts an exchange's record and prepares the guest request. A refused request is recorded
/// as failed and the ingress's error response returned; an accepted one is recorded as in
/// flight.
async fn begin<I: Ingress>(
    ctx: &ExchangeContext<I>,
    guest: GuestBody,
    stream: bool,
) -> Result<(Trace, Prepared), Response> {
    let state = &ctx.state;
    let mut trace = Trace::begin(
        state.records.as_ref(),
        state.run_id,
        ctx.api.record_name(stream),
        &ctx.guest_model,
        &guest.bytes,
        ctx.api.recorded(),
    )
    .raw_events_capped(state.config.limits.max_recorded_stream_bytes)
    .measured(state.metrics.clone(), ctx.api.record_name(stream))
    .traced(
        state.telemetry.as_ref(),
        &ctx.guest_model,
        // The provider family the upstream is configured as (`openai`, `vllm`, …).
        &serde_json::to_value(state.config.translation.profile)
            .ok()
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_default(),
    );
    if stream {
        // The agent's own turns are streamed; auxiliary calls (Gemini CLI's next-speaker
        // check) are not, and do not decide the run.
        trace = trace.counted_in(state.verdicts.clone());
    }
    // The body's budget charge goes with it: dropped once it is translated, before the record
    // of the exchange is started (the recorder may wait).
    match prepare(ctx, guest, stream, &mut trace).await {
        Ok(prepared) => {
            trace.started().await;
            Ok((trace, prepared))
        }
        Err(response) => {
            let (kind, message) = trace.refusal().unwrap_or_else(|| {
                (
                    "guest_request",
                    "request refused before translation".to_owned(),
                )
            });
            trace.finish_error(Vec::new(), kind, &message).await;
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

/// A streamed exchange (`:streamGenerateContent`, a streamed `chat/completions`).
pub(crate) async fn stream<I: Ingress>(ctx: ExchangeContext<I>, guest: GuestBody) -> Response {
    let state = ctx.state.clone();
    let begun = begin(&ctx, guest, true).await;
    let (mut trace, prepared) = match begun {
        Ok(begun) => begun,
        Err(response) => return response,
    };
    if !prepared.upstream_stream {
        let _in_flight = state.in_flight.clone();
        return complete(&ctx, trace, &prepared, Shape::Sse).await;
    }
    // The answer's time bound runs from here, the first attempt's connection included.
    let deadline = tokio::time::Instant::now() + state.config.limits.max_answer();
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
    let render = ctx.api.render(
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
        deadline,
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
struct Pump<I: Ingress> {
    ctx: ExchangeContext<I>,
    render: I::Render,
    prepared: Prepared,
    response: UpstreamResponse,
    budget: RetryBudget,
    trace: Trace,
    tx: mpsc::Sender<Bytes>,
    /// Where the final chunk's host-tool calls wait for the body's end.
    delivery: DeliverySlot,
    /// Held until the stream ends, so a shutdown waits for it.
    _in_flight: mpsc::Sender<()>,
    /// When the answer must have ended (`limits.max_answer_ms` from the request).
    deadline: tokio::time::Instant,
}

async fn pump<I: Ingress>(start: Box<Pump<I>>) {
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
        deadline,
    } = *start;
    let _open = ctx.state.metrics.stream_opened();
    let state = ctx.state.clone();
    let api = ctx.api;
    let mut delivered: Vec<TurnChunk> = Vec::new();
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
            deadline,
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
                        let failure = api.upstream_failure(
                            &state,
                            &error,
                            budget.retries() + 1,
                            budget.declined_wait(),
                        );
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
                    match accept_turn(&state, &ctx.session, &mut turn.final_chunk, ctx.api) {
                        Ok(host_calls) => {
                            if let Some(host_calls) = host_calls {
                                delivery.put(host_calls);
                            }
                            let mut frames = render.frames(&turn.final_chunk);
                            frames.extend(render.end());
                            for frame in frames {
                                let _ = tx.send(frame).await;
                            }
                            // The body ends (and confirms the delivery) as soon as the
                            // connection took the last frame, not after the record is queued:
                            // a guest that closes the stream at its end (Codex, once it has
                            // `response.completed`) must not see its calls revoked.
                            drop(tx);
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
                            end.send(&state, api, last, &reason, attempts).await;
                            trace
                                .finish_error(delivered, "undeliverable_turn", &reason)
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
                        end.send(&state, api, turn.final_chunk, &message, attempts)
                            .await;
                        trace
                            .finish_error(delivered, "malformed_function_call", &reason)
                            .await;
                        return;
                    }
                }
            },
        };
        tracing::debug!(
            retry_reason = %state.guest_redactor.redact_str(&retry_reason),
            "stream exchange retried"
        );
        trace.note(|| retry_reason.clone());
        response = match connect(&state, &prepared.chat_body, &mut budget, &mut trace).await {
            Ok(r) => r,
            Err((error, attempts)) => {
                let failure =
                    api.upstream_failure(&state, &error, attempts, budget.declined_wait());
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
struct Undeliverable<'a, R> {
    render: &'a mut R,
    tx: &'a mpsc::Sender<Bytes>,
    delivered: &'a mut Vec<TurnChunk>,
}

impl<R: Render> Undeliverable<'_, R> {
    /// The ingress's failure, or (Google) `last`: finish `MalformedCall`, no calls.
    async fn send<I: Ingress>(
        &mut self,
        state: &AppState,
        api: I,
        last: TurnChunk,
        reason: &str,
        attempts: u32,
    ) {
        match api.undeliverable(state, reason, attempts) {
            Some(failure) => {
                let _ = self.tx.send(failure.stream_bytes()).await;
            }
            None => {
                let mut frames = self.render.frames(&last);
                frames.extend(self.render.end());
                for frame in frames {
                    let _ = self.tx.send(frame).await;
                }
                self.delivered.push(last);
            }
        }
    }
}

/// The visible text the guest already received in this exchange.
fn forwarded_text(delivered: &[TurnChunk]) -> String {
    delivered.iter().map(TurnChunk::text).collect()
}

/// The bound of `[limits]` an answer of `bytes` (text, reasoning, call names and arguments) and
/// `calls` passed, if any.
fn past_answer_limits(
    limits: &crate::config::LimitConfig,
    bytes: usize,
    calls: usize,
) -> Option<UpstreamError> {
    if bytes > limits.max_answer_bytes {
        return Some(UpstreamError::AnswerLimit(format!(
            "it passed limits.max_answer_bytes ({} bytes of text, reasoning and arguments)",
            limits.max_answer_bytes
        )));
    }
    if calls > limits.max_answer_tool_calls {
        return Some(UpstreamError::AnswerLimit(format!(
            "it passed limits.max_answer_tool_calls ({} calls)",
            limits.max_answer_tool_calls
        )));
    }
    None
}

/// Keeps what reached the guest: a chunk of text or reasoning only is appended to the last one
/// kept (a stream of small deltas is not kept as as many chunks; the record merges them anyway).
fn keep_delivered(delivered: &mut Vec<TurnChunk>, chunk: TurnChunk) {
    let plain = |c: &TurnChunk| {
        c.finish.is_none()
            && c.usage.is_none()
            && c.parts.iter().all(|p| !matches!(p, TurnPart::Call(_)))
    };
    match delivered.last_mut() {
        Some(last) if plain(last) && plain(&chunk) => {
            for part in chunk.parts {
                match (last.parts.last_mut(), part) {
                    (Some(TurnPart::Text { text }), TurnPart::Text { text: more })
                    | (Some(TurnPart::Reasoning { text }), TurnPart::Reasoning { text: more }) => {
                        text.push_str(&more);
                    }
                    (_, part) => last.parts.push(part),
                }
            }
        }
        _ => delivered.push(chunk),
    }
}

/// The final chunk of a turn whose calls cannot be delivered: finish `MalformedCall`, text
/// kept, calls removed.
fn malformed_final_chunk(config: &ResponseConfig, complete: &TurnChunk) -> TurnChunk {
    let mut chunk = complete.clone();
    chunk.model.clone_from(&config.model_version);
    chunk.parts.retain(|p| !matches!(p, TurnPart::Call(_)));
    chunk.finish = Some(Finish::MalformedCall);
    chunk
}

/// One streamed attempt, billed however it ends (see [`Trace::attempt_usage`]).
#[allow(clippy::too_many_arguments)]
async fn stream_attempt<R: Render>(
    state: &AppState,
    render: &mut R,
    response: UpstreamResponse,
    config: ResponseConfig,
    tx: &mpsc::Sender<Bytes>,
    trace: &mut Trace,
    delivered: &mut Vec<TurnChunk>,
    deadline: tokio::time::Instant,
) -> AttemptEnd {
    let mut translator = StreamTranslator::new(config);
    let cut_short = stream_events(
        state,
        render,
        response,
        &mut translator,
        tx,
        trace,
        delivered,
        deadline,
    )
    .await;
    let end = match cut_short {
        Some(end) => end,
        // A 200 whose stream carried nothing, or stopped short: the upstream failed after its
        // head (e.g. a local server that overflowed its context), not an empty answer.
        None => match translator.unfinished() {
            Some(why) => AttemptEnd::Failed(UpstreamError::Unfinished(why)),
            None => {
                let outcome = translator.finish();
                trace.response_report(outcome.report());
                if let Some(usage) = &outcome.final_chunk().usage {
                    trace.attempt_usage(usage, outcome.report().usage_estimated);
                }
                return AttemptEnd::Outcome(Box::new(outcome));
            }
        },
    };
    if let Some((usage, estimated)) = translator.usage_so_far() {
        trace.attempt_usage(&usage, estimated);
    }
    end
}

/// The events of a streamed attempt into `translator`, forwarded as they come; `Some` when the
/// attempt ended before its stream did.
#[allow(clippy::too_many_arguments)]
async fn stream_events<R: Render>(
    state: &AppState,
    render: &mut R,
    response: UpstreamResponse,
    translator: &mut StreamTranslator,
    tx: &mpsc::Sender<Bytes>,
    trace: &mut Trace,
    delivered: &mut Vec<TurnChunk>,
    deadline: tokio::time::Instant,
) -> Option<AttemptEnd> {
    let body = state.upstream.body_stream(response);
    let mut events =
        crate::upstream::bounded_events(body, crate::upstream::MAX_SSE_EVENT).eventsource();
    let limits = &state.config.limits;
    loop {
        let next = tokio::select! {
            next = events.next() => next,
            _ = state.cancel.cancelled() => return Some(AttemptEnd::Cancelled),
            _ = tx.closed() => return Some(AttemptEnd::GuestGone),
            _ = tokio::time::sleep_until(deadline) => {
                return Some(AttemptEnd::Failed(UpstreamError::AnswerLimit(format!(
                    "it took longer than limits.max_answer_ms ({} ms)",
                    limits.max_answer_ms
                ))));
            }
        };
        match next {
            None => break,
            Some(Err(eventsource_stream::EventStreamError::Transport(e))) => {
                return Some(AttemptEnd::Failed(e));
            }
            Some(Err(e)) => {
                return Some(AttemptEnd::Failed(UpstreamError::Invalid(e.to_string())));
            }
            Some(Ok(event)) => {
                let translated = translator.push(&event.data);
                trace.attempt_event(event.data);
                if let Some(limit) =
                    past_answer_limits(limits, translator.answer_bytes(), translator.call_count())
                {
                    return Some(AttemptEnd::Failed(limit));
                }
                match translated {
                    Ok(chunks) => {
                        let forwarded = !chunks.is_empty();
                        for chunk in chunks {
                            for frame in render.frames(&chunk) {
                                if tx.send(frame).await.is_err() {
                                    return Some(AttemptEnd::GuestGone);
                                }
                            }
                            keep_delivered(delivered, chunk);
                        }
                        if forwarded {
                            // Let the guest's connection write what was just sent before the
                            // next upstream event is translated: the rest of the upstream
                            // response often arrives with this event, and would otherwise be
                            // processed first (the frame waiting meanwhile).
                            tokio::task::yield_now().await;
                        }
                    }
                    Err(e) => return Some(AttemptEnd::Failed(UpstreamError::Payload(e))),
                }
                if translator.is_done() {
                    break;
                }
            }
        }
    }
    None
}

/// A unary exchange (`:generateContent`, an unstreamed `chat/completions`): one non-streamed
/// upstream completion.
pub(crate) async fn generate<I: Ingress>(ctx: ExchangeContext<I>, guest: GuestBody) -> Response {
    let state = ctx.state.clone();
    let _in_flight = state.in_flight.clone();
    let begun = begin(&ctx, guest, false).await;
    let (trace, prepared) = match begun {
        Ok(begun) => begun,
        Err(response) => return response,
    };
    complete(&ctx, trace, &prepared, Shape::Json).await
}

/// How a whole answer goes to the guest.
#[derive(Clone, Copy)]
enum Shape {
    /// A unary request: one JSON body.
    Json,
    /// A streamed request answered from an unstreamed upstream call: the frames at once.
    Sse,
}

/// The unstreamed upstream attempts of an exchange, until it ends; the answer in `shape`.
async fn complete<I: Ingress>(
    ctx: &ExchangeContext<I>,
    mut trace: Trace,
    prepared: &Prepared,
    shape: Shape,
) -> Response {
    let state = &ctx.state;
    let api = ctx.api;
    let mut budget = RetryBudget::new(&state.config.retries);
    let config = &prepared.response_config;
    let mut render = api.render(&config.response_id, prepared.include_usage);
    let deadline = tokio::time::Instant::now() + state.config.limits.max_answer();
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
            _ = tokio::time::sleep_until(deadline) => Err(UpstreamError::AnswerLimit(format!(
                "it took longer than limits.max_answer_ms ({} ms)",
                state.config.limits.max_answer_ms
            ))),
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
                return api
                    .upstream_failure(state, &error, budget.retries() + 1, budget.declined_wait())
                    .response();
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
                return api
                    .upstream_failure(state, &error, budget.retries() + 1, budget.declined_wait())
                    .response();
            }
        };
        trace.response_report(outcome.report());
        if let Some(usage) = &outcome.final_chunk().usage {
            trace.attempt_usage(usage, outcome.report().usage_estimated);
        }
        let last = outcome.final_chunk();
        let (bytes, calls) = (last.answer_bytes(), last.calls().count());
        if let Some(error) = past_answer_limits(&state.config.limits, bytes, calls) {
            trace
                .finish_error(Vec::new(), error.kind(), &error.to_string())
                .await;
            return api
                .upstream_failure(state, &error, budget.retries() + 1, None)
                .response();
        }
        match outcome {
            TurnOutcome::Complete(mut turn) => {
                match accept_turn(state, &ctx.session, &mut turn.final_chunk, ctx.api) {
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
                        let error = ("undeliverable_turn", reason.as_str());
                        let attempts = budget.retries() + 1;
                        return undeliverable(
                            ctx,
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
                        ctx,
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

/// Ends a unary exchange with its whole answer `chunk` (and `error`, kind and message, when it
/// failed).
async fn answer<R: Render>(
    trace: &mut Trace,
    render: &mut R,
    chunk: TurnChunk,
    error: Option<(&str, &str)>,
    shape: Shape,
) -> Response {
    let sent = match shape {
        Shape::Json => render.whole(&chunk),
        Shape::Sse => {
            let mut frames = render.frames(&chunk);
            frames.extend(render.end());
            frames
                .iter()
                .map(|frame| String::from_utf8_lossy(frame).into_owned())
                .collect()
        }
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

/// Ends an unstreamed exchange whose turn's calls cannot be delivered: the ingress's failure,
/// or (Google) `last` with finish `MalformedCall`.
async fn undeliverable<I: Ingress>(
    ctx: &ExchangeContext<I>,
    trace: &mut Trace,
    render: &mut I::Render,
    last: TurnChunk,
    error: (&str, &str),
    shape: Shape,
    attempts: u32,
) -> Response {
    match ctx.api.undeliverable(&ctx.state, error.1, attempts) {
        None => answer(trace, render, last, Some(error), shape).await,
        Some(failure) => {
            trace.finish_error(Vec::new(), error.0, error.1).await;
            failure.response()
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
pub(crate) async fn count_tokens<I: Ingress>(
    ctx: ExchangeContext<I>,
    guest: GuestBody,
) -> Response {
    let GuestBody {
        bytes: body,
        permit,
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
    // Parsed: the budget charge is not held while the recorder waits.
    drop(permit);
    let answer = switchyard_translate::count_tokens(&request);
    let mut trace = Trace::begin(
        state.records.as_ref(),
        state.run_id,
        ingress::COUNT_TOKENS,
        &ctx.guest_model,
        &body,
        ctx.api.recorded(),
    );
    trace.note(|| format!("local estimate: {} tokens", answer.total_tokens));
    trace.finish_ok(Vec::new()).await;
    json_response(serde_json::to_string(&answer).unwrap_or_default())
}
