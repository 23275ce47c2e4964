//! Collects the [`ExchangeRecord`] of one exchange while it runs and writes it (through the
//! [`RecordWriter`]) twice: as `InFlight` once the request is routed ([`Trace::started`]), so
//! that a long exchange is in the store while it runs and a crash leaves it marked incomplete,
//! and when it ends (`Ok` / `Error`; an exchange dropped before it ended, as `abandoned`). An
//! exchange that ends before the writer thread got to its in-flight write is stored once.
//!
//! The request path keeps the guest body and each attempt's upstream body as shared `Bytes`
//! and the raw upstream events as received; the recorder's writer thread parses and assembles
//! them (`record_writer`). With records off nothing is kept at all.
//!
//! With a context policy other than `identity`, `context` holds its decision and
//! `context_request` the request as the policy left it, when it changed anything.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use bytes::Bytes;
use chrono::Utc;
use serde_json::Value;
use switchyard_records::model::{
    ExchangeRecord, ExchangeStatus, TypedError, UpstreamAttempt, Usage,
};
use switchyard_translate::ResponseReport;
use switchyard_translate::turn::{TurnChunk, TurnUsage};
use uuid::Uuid;

use crate::ingress::RecordedAnswer;
use crate::record_writer::{PendingWrite, RecordWriter};
use crate::verdict::Verdicts;

/// The record of one exchange under construction, and where its end goes into the gateway's
/// verdict.
pub(crate) struct Trace {
    /// `None` when records are off or once it ended.
    active: Option<Active>,
    /// The gateway's verdict, when this is a main exchange (the agent's streamed turn).
    verdict: Option<Arc<Verdicts>>,
    /// The last upstream status seen.
    status: Option<u16>,
    /// Where the exchange's end is counted, as which ingress.
    measured: Option<(Arc<crate::metrics::Metrics>, String)>,
    started: std::time::Instant,
    model: String,
    attempts: u32,
    /// Why the request was refused before it went upstream, when a step said so.
    refusal: Option<(&'static str, String)>,
    /// The exchange's `chat` span, while it runs.
    span: Option<(
        std::sync::Arc<switchyard_telemetry::Telemetry>,
        switchyard_telemetry::Context,
    )>,
}

/// What a trace holds while records are on.
struct Active {
    writer: RecordWriter,
    record: ExchangeRecord,
    guest_body: Bytes,
    /// Upstream request body of each attempt (shared with the request that was sent).
    attempt_bodies: Vec<Bytes>,
    /// Set when the last write is queued (see [`PendingWrite::superseded`]).
    ended: Arc<AtomicBool>,
    /// How the guest's answer is recorded.
    recorded: RecordedAnswer,
    /// Raw upstream events kept per attempt, in bytes (`limits.max_recorded_stream_bytes`).
    raw_cap: usize,
    /// Of the current attempt: bytes kept, and events and bytes not kept past the cap.
    raw_kept: usize,
    raw_cut: (u64, u64),
}

impl Active {
    /// Notes the current attempt's cut, if it had one, and starts counting afresh.
    fn close_attempt(&mut self) {
        let (events, bytes) = std::mem::take(&mut self.raw_cut);
        self.raw_kept = 0;
        if events > 0 {
            let attempt = self.record.attempts.len();
            self.record.notes.push(format!(
                "raw events of attempt {attempt} cut at {} bytes \
                 (limits.max_recorded_stream_bytes): {events} later events ({bytes} bytes) \
                 not kept",
                self.raw_cap
            ));
        }
    }
}

impl Active {
    /// The record as it stands, as a write.
    fn snapshot(&self) -> PendingWrite {
        PendingWrite {
            record: self.record.clone(),
            guest_body: self.guest_body.clone(),
            attempt_bodies: self.attempt_bodies.clone(),
            delivered: None,
            recorded: self.recorded,
            superseded: Arc::clone(&self.ended),
        }
    }

    /// The record as the exchange ended, with what was delivered, as the last write.
    fn into_last_write(
        self,
        delivered: Vec<TurnChunk>,
        error: Option<TypedError>,
    ) -> (RecordWriter, PendingWrite) {
        let Active {
            writer,
            mut record,
            guest_body,
            attempt_bodies,
            ended,
            recorded,
            ..
        } = self;
        ended.store(true, Ordering::Release);
        record.delivered_at = Some(Utc::now());
        record.status = if error.is_some() {
            ExchangeStatus::Error
        } else {
            ExchangeStatus::Ok
        };
        record.error = error;
        let write = PendingWrite {
            record,
            guest_body,
            attempt_bodies,
            delivered: Some(delivered),
            recorded,
            superseded: ended,
        };
        (writer, write)
    }
}

impl Trace {
    pub fn begin(
        writer: Option<&RecordWriter>,
        run_id: Option<Uuid>,
        ingress_api: &str,
        guest_model: &str,
        guest_body: &Bytes,
        recorded: RecordedAnswer,
    ) -> Self {
        Self {
            active: writer.map(|writer| Active {
                writer: writer.clone(),
                record: ExchangeRecord::begin(run_id, ingress_api, guest_model, Value::Null),
                guest_body: guest_body.clone(),
                attempt_bodies: Vec::new(),
                ended: Arc::default(),
                recorded,
                raw_cap: usize::MAX,
                raw_kept: 0,
                raw_cut: (0, 0),
            }),
            verdict: None,
            status: None,
            measured: None,
            started: std::time::Instant::now(),
            model: guest_model.to_owned(),
            attempts: 0,
            refusal: None,
            span: None,
        }
    }

    /// Opens the exchange's `chat {model}` client span (GenAI conventions), under the run's
    /// span when there is one.
    pub fn traced(
        mut self,
        telemetry: Option<&(
            std::sync::Arc<switchyard_telemetry::Telemetry>,
            Option<switchyard_telemetry::Context>,
        )>,
        guest_model: &str,
        provider: &str,
    ) -> Self {
        use switchyard_telemetry::{KeyValue, SpanKind, TraceContextExt as _, Tracer as _};
        let Some((telemetry, parent)) = telemetry else {
            return self;
        };
        let tracer = telemetry.tracer();
        let parent = parent.clone().unwrap_or_default();
        let span = tracer
            .span_builder(format!("chat {guest_model}"))
            .with_kind(SpanKind::Client)
            .with_attributes(vec![
                KeyValue::new("gen_ai.operation.name", "chat"),
                KeyValue::new("gen_ai.request.model", guest_model.to_owned()),
                KeyValue::new("gen_ai.provider.name", provider.to_owned()),
            ])
            .start_with_context(tracer, &parent);
        self.span = Some((telemetry.clone(), parent.with_span(span)));
        self
    }

    /// The `traceparent` of the exchange's span, for the upstream request.
    pub fn traceparent(&self) -> Option<String> {
        self.span
            .as_ref()
            .and_then(|(_, context)| switchyard_telemetry::traceparent(context))
    }

    /// The request is refused before it goes upstream, as `kind` (the record's typed error).
    pub fn refused_as(&mut self, kind: &'static str, message: String) {
        self.refusal = Some((kind, message));
    }

    /// What [`Trace::refused_as`] said, if anything.
    pub fn refusal(&mut self) -> Option<(&'static str, String)> {
        self.refusal.take()
    }

    /// Counts this exchange's end in `metrics`, as ingress `ingress`.
    pub fn measured(mut self, metrics: Arc<crate::metrics::Metrics>, ingress: &str) -> Self {
        self.measured = Some((metrics, ingress.to_owned()));
        self
    }

    /// Keeps at most `bytes` of raw upstream events per attempt.
    pub fn raw_events_capped(mut self, bytes: usize) -> Self {
        if let Some(active) = &mut self.active {
            active.raw_cap = bytes;
        }
        self
    }

    /// Counts this exchange's end in the gateway's verdict (a main exchange).
    pub fn counted_in(mut self, verdict: Arc<Verdicts>) -> Self {
        self.verdict = Some(verdict);
        self
    }

    /// Runs `change` on the record while the exchange runs with records on.
    fn record(&mut self, change: impl FnOnce(&mut ExchangeRecord)) {
        if let Some(active) = &mut self.active {
            change(&mut active.record);
        }
    }

    /// Writes the record as it stands, in flight.
    pub async fn started(&mut self) {
        if let Some(active) = &self.active {
            let (writer, write) = (active.writer.clone(), active.snapshot());
            writer.write(write).await;
        }
    }

    pub fn route(&mut self, upstream_url: &str, upstream_model: &str) {
        upstream_model.clone_into(&mut self.model);
        self.record(|r| {
            r.upstream_url = upstream_url.to_string();
            r.upstream_model = upstream_model.to_string();
        });
    }

    /// The context policy's decision, and the request it left when it changed it.
    pub fn context(
        &mut self,
        decision: &switchyard_translate::context::ContextDecision,
        after: Option<&switchyard_translate::openai::ChatRequest>,
    ) {
        self.record(|r| {
            r.context = Some(switchyard_translate::context::decision_value(decision));
            r.context_request = after.and_then(|chat| serde_json::to_value(chat).ok());
        });
    }

    /// Adds a note; `note` runs only when records are on.
    pub fn note(&mut self, note: impl FnOnce() -> String) {
        self.record(|r| r.notes.push(note()));
    }

    pub fn attempt_started(&mut self, chat_body: &Bytes) {
        self.attempts += 1;
        if let Some(active) = &mut self.active {
            active.close_attempt();
            active.attempt_bodies.push(chat_body.clone());
            let r = &mut active.record;
            r.attempts.push(UpstreamAttempt {
                request: Value::Null,
                status: None,
                raw_events: Vec::new(),
                error: None,
                started_at: Utc::now(),
                first_byte_at: None,
                last_byte_at: None,
                usage: None,
            });
            r.retries = u32::try_from(r.attempts.len().saturating_sub(1)).unwrap_or(u32::MAX);
        }
    }

    pub fn attempt_head(&mut self, status: u16) {
        self.status = Some(status);
        self.record(|r| {
            let now = Utc::now();
            r.first_byte_at = Some(now);
            if let Some(a) = r.attempts.last_mut() {
                a.status = Some(status);
                a.first_byte_at = Some(now);
            }
        });
    }

    /// One raw upstream event (taken, not copied); past the attempt's cap only counted.
    pub fn attempt_event(&mut self, data: String) {
        let Some(active) = &mut self.active else {
            return;
        };
        let now = Utc::now();
        let r = &mut active.record;
        r.last_byte_at = Some(now);
        if let Some(a) = r.attempts.last_mut() {
            a.last_byte_at = Some(now);
            // Once cut, the attempt's record keeps nothing later (no gaps).
            if active.raw_cut.0 > 0 || active.raw_kept.saturating_add(data.len()) > active.raw_cap {
                active.raw_cut.0 += 1;
                active.raw_cut.1 += data.len() as u64;
            } else {
                active.raw_kept += data.len();
                a.raw_events.push(data);
            }
        }
    }

    /// A whole (non-streamed) upstream response body, kept as one raw event.
    pub fn attempt_body(&mut self, body: &[u8]) {
        if self.active.is_some() {
            self.attempt_event(String::from_utf8_lossy(body).into_owned());
        }
    }

    /// What the response translator decided for the current attempt (upstream fields it does
    /// not model, with counts; synthesized ids or finish reason; reasoning not forwarded; ...),
    /// as a note; the fields themselves are in the attempt's raw events.
    pub fn response_report(&mut self, report: &ResponseReport) {
        self.record(|r| {
            let attempt = r.attempts.len();
            r.usage.estimated = report.usage_estimated;
            let report = serde_json::to_string(report).unwrap_or_default();
            r.notes.push(format!(
                "response translation (attempt {attempt}): {report}"
            ));
        });
    }

    /// What the current attempt cost (reported, or `estimated`): it is billed with the
    /// exchange whether or not its answer reached the guest.
    pub fn attempt_usage(&mut self, usage: &TurnUsage, estimated: bool) {
        self.record(|r| {
            if let Some(a) = r.attempts.last_mut() {
                a.usage = Some(Usage {
                    input: u64::from(usage.input),
                    cached: u64::from(usage.cached.unwrap_or(0)),
                    output: u64::from(usage.output),
                    reasoning: u64::from(usage.reasoning.unwrap_or(0)),
                    estimated,
                });
            }
        });
    }

    pub fn attempt_failed(&mut self, kind: &str, message: &str) {
        self.record(|r| {
            if let Some(a) = r.attempts.last_mut() {
                a.error = Some(typed_error(kind, message));
            }
        });
    }

    /// Ends the exchange successfully with what the guest received.
    pub async fn finish_ok(&mut self, delivered: Vec<TurnChunk>) {
        self.finish(delivered, None).await;
    }

    /// Ends the exchange with a typed error (and whatever was delivered before it).
    pub async fn finish_error(&mut self, delivered: Vec<TurnChunk>, kind: &str, message: &str) {
        self.finish(delivered, Some(typed_error(kind, message)))
            .await;
    }

    /// The last write (later calls do nothing).
    async fn finish(&mut self, delivered: Vec<TurnChunk>, error: Option<TypedError>) {
        if let Some(verdict) = self.verdict.take() {
            verdict.ended(&delivered, error.as_ref(), self.status);
        }
        if let Some((telemetry, context)) = self.span.take() {
            self.end_span(&telemetry, &context, &delivered, error.as_ref());
        }
        if let Some((metrics, ingress)) = self.measured.take() {
            let outcome = error.as_ref().map_or("ok", |e| e.kind.as_str());
            let usage = delivered.iter().rev().find_map(|c| c.usage);
            metrics.exchange_ended(
                &self.model,
                &ingress,
                outcome,
                self.started.elapsed(),
                usage.as_ref(),
                self.attempts.saturating_sub(1),
            );
        }
        if let Some(mut active) = self.active.take() {
            active.close_attempt();
            let (writer, write) = active.into_last_write(delivered, error);
            writer.write(write).await;
        }
    }
}

impl Trace {
    /// The `chat` span's last attributes (usage, finish reasons, retries, the routed model,
    /// the answer's text with `--otlp-content`), then its end.
    fn end_span(
        &self,
        telemetry: &switchyard_telemetry::Telemetry,
        context: &switchyard_telemetry::Context,
        delivered: &[TurnChunk],
        error: Option<&TypedError>,
    ) {
        use switchyard_telemetry::{KeyValue, Status, TraceContextExt as _};
        let span = context.span();
        let ingress = self
            .measured
            .as_ref()
            .map(|(_, ingress)| ingress.clone())
            .unwrap_or_default();
        span.set_attribute(KeyValue::new("gen_ai.response.model", self.model.clone()));
        span.set_attribute(KeyValue::new("switchyard.ingress", ingress));
        span.set_attribute(KeyValue::new(
            "switchyard.retries",
            i64::from(self.attempts.saturating_sub(1)),
        ));
        if let Some(usage) = delivered.iter().rev().find_map(|c| c.usage) {
            span.set_attribute(KeyValue::new(
                "gen_ai.usage.input_tokens",
                i64::from(usage.input),
            ));
            span.set_attribute(KeyValue::new(
                "gen_ai.usage.output_tokens",
                i64::from(usage.output),
            ));
        }
        if let Some(finish) = delivered.iter().rev().find_map(|c| c.finish) {
            let reason = serde_json::to_value(finish)
                .ok()
                .and_then(|v| v.as_str().map(str::to_owned))
                .unwrap_or_default();
            span.set_attribute(KeyValue::new(
                "gen_ai.response.finish_reasons",
                opentelemetry_array(vec![reason]),
            ));
        }
        if telemetry.content {
            let text: String = delivered.iter().map(TurnChunk::text).collect();
            let text: String = text.chars().take(8192).collect();
            span.set_attribute(KeyValue::new("gen_ai.output.text", text));
        }
        if let Some(error) = error {
            span.set_attribute(KeyValue::new("error.type", error.kind.clone()));
            span.set_status(Status::error(error.kind.clone()));
        }
        span.end();
    }
}

/// A string array attribute value.
fn opentelemetry_array(values: Vec<String>) -> switchyard_telemetry::Value {
    switchyard_telemetry::Value::Array(switchyard_telemetry::Array::String(
        values.into_iter().map(Into::into).collect(),
    ))
}

impl Drop for Trace {
    /// An exchange dropped before it ended is stored as ended with an `abandoned` error instead
    /// of being left in flight: the server drops a request's future when its guest closes the
    /// connection while the gateway waits on the upstream.
    fn drop(&mut self) {
        let abandoned = || {
            typed_error(
                "abandoned",
                "the exchange was dropped before it ended (its guest connection closed)",
            )
        };
        if let Some(verdict) = self.verdict.take() {
            verdict.ended(&[], Some(&abandoned()), self.status);
        }
        if let Some(mut active) = self.active.take() {
            active.close_attempt();
            let (writer, write) = active.into_last_write(Vec::new(), Some(abandoned()));
            writer.write_detached(write);
        }
    }
}

fn typed_error(kind: &str, message: &str) -> TypedError {
    TypedError {
        kind: kind.to_owned(),
        message: message.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::*;
    use switchyard_records::model::RecordOp;
    use switchyard_records::{RecordSink, Recorder, RecorderOptions, Redactor, StoreError};

    /// A sink that keeps the status of every exchange write it applies, in order; each apply
    /// first waits while the test holds the gate.
    struct StatusLog(Arc<Mutex<Vec<ExchangeStatus>>>, Arc<Mutex<()>>);

    impl RecordSink for StatusLog {
        fn apply(&mut self, ops: &[RecordOp]) -> Result<(), StoreError> {
            let _open = self.1.lock().unwrap();
            let mut log = self.0.lock().unwrap();
            for op in ops {
                match op {
                    RecordOp::UpsertExchange(record) => log.push(record.status),
                    other => panic!("not an exchange write: {other:?}"),
                }
            }
            Ok(())
        }
    }

    type Log = Arc<Mutex<Vec<ExchangeStatus>>>;

    fn logged_trace() -> (Recorder, Trace, Log, Arc<Mutex<()>>) {
        let log = Arc::new(Mutex::new(Vec::new()));
        let gate = Arc::new(Mutex::new(()));
        let recorder = Recorder::start(
            Box::new(StatusLog(Arc::clone(&log), Arc::clone(&gate))),
            Redactor::default(),
            RecorderOptions::default(),
        )
        .unwrap();
        let writer = RecordWriter::new(recorder.clone());
        let trace = Trace::begin(
            Some(&writer),
            None,
            "ingress",
            "model",
            &Bytes::new(),
            |_, _| None,
        );
        (recorder, trace, log, gate)
    }

    #[tokio::test]
    async fn an_exchange_is_stored_in_flight_then_ended() {
        let (recorder, mut trace, log, _gate) = logged_trace();
        trace.started().await;
        // The in-flight write is built and stored before the exchange ends.
        recorder.flush_async().await.unwrap();
        trace.finish_ok(Vec::new()).await;
        trace.finish_ok(Vec::new()).await;
        recorder.flush_async().await.unwrap();
        assert_eq!(
            *log.lock().unwrap(),
            [ExchangeStatus::InFlight, ExchangeStatus::Ok],
            "the second finish does nothing"
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    #[expect(
        clippy::await_holding_lock,
        reason = "the gate is held on purpose while the writes are queued"
    )]
    async fn an_exchange_that_ends_before_its_in_flight_write_is_built_is_stored_once() {
        let (recorder, mut trace, log, gate) = logged_trace();
        let held = gate.lock().unwrap();
        // The writer takes an earlier write and waits at the gate; the exchange begins and
        // ends meanwhile.
        let mut other = Trace::begin(
            Some(&RecordWriter::new(recorder.clone())),
            None,
            "ingress",
            "model",
            &Bytes::new(),
            |_, _| None,
        );
        other.finish_ok(Vec::new()).await;
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        trace.started().await;
        trace.finish_ok(Vec::new()).await;
        drop(held);
        recorder.flush_async().await.unwrap();
        assert_eq!(
            *log.lock().unwrap(),
            [ExchangeStatus::Ok, ExchangeStatus::Ok]
        );
    }

    #[tokio::test]
    async fn an_exchange_dropped_before_it_ends_is_stored_as_abandoned() {
        let (recorder, mut trace, log, _gate) = logged_trace();
        trace.started().await;
        recorder.flush_async().await.unwrap();
        drop(trace);
        // The last write is queued by a task of its own.
        for _ in 0..100 {
            tokio::task::yield_now().await;
        }
        recorder.flush_async().await.unwrap();
        assert_eq!(
            *log.lock().unwrap(),
            [ExchangeStatus::InFlight, ExchangeStatus::Error]
        );
    }
}
