//! Collects the [`ExchangeRecord`] of one exchange while it runs and writes it (through the
//! [`RecordWriter`]) when it ends (`Ok` / `Error`), and also as `InFlight` when it is still
//! running [`BEGIN_RECORD_DELAY`] after it began ([`BeginWatch`]): a long exchange (a model
//! thinking for seconds, a hung upstream) is in the store while it runs, so a crash leaves it
//! marked incomplete; a short one is handed over, built and stored once. Measured with
//! `switchyard bench gateway` against writing every exchange as it began (3 alternating runs
//! each): the records writer's CPU per exchange 21.6–23.5 µs instead of 26.4–29.1 µs to
//! prepare it, records' added CPU per exchange 70–87 µs instead of 69–101 µs (unary) and
//! 82–109 µs instead of 98–137 µs (streamed). The cost: a crash within the delay loses an
//! exchange that would have been left as incomplete.
//!
//! The request path only keeps cheap handles: the guest body (or, when the translation cache
//! supplied a system prompt and tools that are most of it, copies of the few bytes around them)
//! and each attempt's upstream body are shared `Bytes`, the raw upstream events are kept as
//! received. When the exchange ends, what was delivered is reduced here to a [`Delivery`] (see
//! `record_writer`); JSON parsing, assembling the upstream message, redaction and storing happen
//! on the recorder's writer thread. With records off nothing is kept at all.
//!
//! `context_request` stays `None`: the gateway applies no context policy, so the request sent
//! upstream is the translation of the guest request as received (see each attempt's `request`).

use std::borrow::Cow;
use std::future::Future;
use std::ops::Range;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::Duration;

use bytes::Bytes;
use chrono::Utc;
use futures_util::future::Either;
use serde_json::Value;
use switchyard_records::model::{ExchangeRecord, ExchangeStatus, TypedError, UpstreamAttempt};
use switchyard_records::{JsonText, SharedJson};
use switchyard_translate::ResponseReport;
use switchyard_translate::google::GenerateContentResponse;
use uuid::Uuid;

use crate::record_writer::{Delivery, GuestRequest, PendingWrite, RecordWriter};
use crate::translation::ChatBody;

/// What the guest received in an exchange, as [`Trace::finish_ok`] / [`Trace::finish_error`]
/// take it.
pub(crate) type Delivered<'a> = Cow<'a, [GenerateContentResponse]>;

/// How long an exchange runs before its record is written as in flight.
pub(crate) const BEGIN_RECORD_DELAY: Duration = Duration::from_millis(10);

/// The record of one exchange under construction (`None` inside when records are off).
pub(crate) struct Trace(Option<Arc<Shared>>);

/// A trace's state, shared with its [`BeginWatch`].
struct Shared {
    /// `None` once the exchange ended (its last write is queued).
    active: Mutex<Option<Active>>,
    /// When the exchange began.
    started: tokio::time::Instant,
    /// True once a watch's delay ran out (the in-flight write, if the exchange still ran, is
    /// queued then): a later watch does not arm again.
    begun: AtomicBool,
}

/// What a trace holds while records are on.
struct Active {
    writer: RecordWriter,
    record: Box<ExchangeRecord>,
    guest: GuestRequest,
    /// Upstream request body of each attempt (shared with the request that was sent).
    attempt_bodies: Vec<ChatBody>,
}

impl Active {
    /// The record as it stands, as a write.
    fn snapshot(&self) -> PendingWrite {
        PendingWrite {
            record: self.record.clone(),
            guest: self.guest.clone(),
            attempt_bodies: self.attempt_bodies.clone(),
            delivered: None,
        }
    }

    /// The record as the exchange ended, with what was delivered, as the last write.
    fn into_last_write(
        self,
        delivered: Delivered<'_>,
        sent: Option<&str>,
        error: Option<TypedError>,
    ) -> (RecordWriter, PendingWrite) {
        let Active {
            writer,
            mut record,
            guest,
            attempt_bodies,
        } = self;
        record.delivered_at = Some(Utc::now());
        record.status = if error.is_some() {
            ExchangeStatus::Error
        } else {
            ExchangeStatus::Ok
        };
        record.error = error;
        let write = PendingWrite {
            record,
            guest,
            attempt_bodies,
            delivered: Some(Delivery::of(delivered, sent)),
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
    ) -> Self {
        Self(writer.map(|writer| {
            Arc::new(Shared {
                active: Mutex::new(Some(Active {
                    writer: writer.clone(),
                    record: Box::new(ExchangeRecord::begin(
                        run_id,
                        ingress_api,
                        guest_model,
                        Value::Null,
                    )),
                    guest: GuestRequest {
                        body: guest_body.clone(),
                        parsed: Arc::new(OnceLock::new()),
                        text: None,
                    },
                    attempt_bodies: Vec::new(),
                })),
                started: tokio::time::Instant::now(),
                begun: AtomicBool::new(false),
            })
        }))
    }

    /// Runs `change` on the trace's state while the exchange runs with records on.
    fn with<R>(&mut self, change: impl FnOnce(&mut Active) -> R) -> Option<R> {
        let shared = self.0.as_ref()?;
        let mut active = shared.active.lock().unwrap_or_else(PoisonError::into_inner);
        active.as_mut().map(change)
    }

    /// Runs `change` on the record while the exchange runs with records on.
    fn record(&mut self, change: impl FnOnce(&mut ExchangeRecord)) {
        self.with(|active| change(&mut active.record));
    }

    /// The watch that writes this exchange's record as in flight if it runs long.
    pub fn begin_watch(&self) -> BeginWatch {
        BeginWatch(self.0.clone())
    }

    /// The guest body holds these shared values (from the translation cache) at these ranges, in
    /// order: record it as text pieces instead of parsing it.
    pub fn guest_shared(&mut self, shared: &[(Range<usize>, SharedJson)]) {
        if shared.is_empty() {
            return;
        }
        self.with(|active| Self::keep_guest_pieces(active, shared));
    }

    fn keep_guest_pieces(active: &mut Active, shared: &[(Range<usize>, SharedJson)]) {
        let body = &active.guest.body;
        let shared_bytes: usize = shared.iter().map(|(range, _)| range.len()).sum();
        // Mostly shared (Gemini CLI's early turns: ~1 KB of 47 KB): the record takes copies of
        // the few bytes around the shared parts, so the body is freed by the request's thread
        // once translated instead of being pinned by a queued record and freed by a record
        // thread. Mostly the guest's own history: slices (a copy would cost a memcpy of nearly
        // the whole body and free almost nothing).
        let copy = shared_bytes.saturating_mul(2) >= body.len();
        let piece = |range: Range<usize>| {
            if copy {
                Bytes::copy_from_slice(&body[range])
            } else {
                body.slice(range)
            }
        };
        let mut text = JsonText::default();
        let mut at = 0;
        for (range, value) in shared {
            if range.start < at || range.end > body.len() {
                return;
            }
            text.push_text(piece(at..range.start));
            text.push_shared(value.clone());
            at = range.end;
        }
        text.push_text(piece(at..body.len()));
        active.guest.text = Some(text);
        if copy {
            // The text path never reads the body itself.
            active.guest.body = Bytes::new();
        }
    }

    pub fn route(&mut self, upstream_url: &str, upstream_model: &str) {
        self.record(|r| {
            r.upstream_url = upstream_url.to_string();
            r.upstream_model = upstream_model.to_string();
        });
    }

    /// Adds a note; `note` runs only when records are on.
    pub fn note(&mut self, note: impl FnOnce() -> String) {
        self.record(|r| r.notes.push(note()));
    }

    pub fn attempt_started(&mut self, chat_body: &ChatBody) {
        self.with(|active| {
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
            });
            r.retries = r.attempts.len().saturating_sub(1) as u32;
        });
    }

    pub fn attempt_head(&mut self, status: u16) {
        self.record(|r| {
            let now = Utc::now();
            r.first_byte_at = Some(now);
            if let Some(a) = r.attempts.last_mut() {
                a.status = Some(status);
                a.first_byte_at = Some(now);
            }
        });
    }

    /// One raw upstream event (taken, not copied).
    pub fn attempt_event(&mut self, data: String) {
        self.record(|r| {
            let now = Utc::now();
            r.last_byte_at = Some(now);
            if let Some(a) = r.attempts.last_mut() {
                a.raw_events.push(data);
                a.last_byte_at = Some(now);
            }
        });
    }

    /// A whole (non-streamed) upstream response body, kept as one raw event.
    pub fn attempt_body(&mut self, body: &[u8]) {
        if self.0.is_some() {
            self.attempt_event(String::from_utf8_lossy(body).into_owned());
        }
    }

    /// What the response translator decided for the current attempt (upstream fields it does
    /// not model, with counts; synthesized ids or finish reason; reasoning not forwarded; ...),
    /// as a note; the fields themselves are in the attempt's raw events.
    pub fn response_report(&mut self, report: &ResponseReport) {
        self.record(|r| {
            let attempt = r.attempts.len();
            let report = serde_json::to_string(report).unwrap_or_default();
            r.notes.push(format!(
                "response translation (attempt {attempt}): {report}"
            ));
        });
    }

    pub fn attempt_failed(&mut self, kind: &str, message: &str) {
        self.record(|r| {
            if let Some(a) = r.attempts.last_mut() {
                a.error = Some(typed_error(kind, message));
            }
        });
    }

    /// Ends the exchange successfully with what the guest received (owned when the caller is
    /// done with it, so records take it without a copy).
    pub async fn finish_ok(&mut self, delivered: Delivered<'_>) {
        self.finish(delivered, None, None).await;
    }

    /// Ends the exchange with a typed error (and whatever was delivered before it).
    pub async fn finish_error(&mut self, delivered: Delivered<'_>, kind: &str, message: &str) {
        self.finish(delivered, None, Some(typed_error(kind, message)))
            .await;
    }

    /// Ends the exchange whose whole response was `chunk`, sent to the guest as the JSON text
    /// `sent`: the record keeps that text (no second serialization). `error` (kind, message)
    /// as for [`Trace::finish_error`].
    pub async fn finish_sent(
        &mut self,
        chunk: &GenerateContentResponse,
        sent: &str,
        error: Option<(&str, &str)>,
    ) {
        let error = error.map(|(kind, message)| typed_error(kind, message));
        self.finish(
            Cow::Borrowed(std::slice::from_ref(chunk)),
            Some(sent),
            error,
        )
        .await;
    }

    /// The last write: reduces what was delivered to a [`Delivery`] here and hands the record
    /// over (no copy); the upstream message is assembled on the recorder's thread. Later calls
    /// do nothing.
    async fn finish(
        &mut self,
        delivered: Delivered<'_>,
        sent: Option<&str>,
        error: Option<TypedError>,
    ) {
        if let Some(active) = self.take_active() {
            let (writer, write) = active.into_last_write(delivered, sent, error);
            writer.write(write).await;
        }
    }

    /// Takes the record out of the trace (`None` when records are off or the exchange already
    /// ended).
    fn take_active(&mut self) -> Option<Active> {
        self.0
            .as_ref()?
            .active
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
    }
}

impl Drop for Trace {
    /// An exchange dropped before it ended is stored as ended with an `abandoned` error instead
    /// of being lost (or left in flight): the server drops a request's future when its guest
    /// closes the connection while the gateway waits on the upstream.
    fn drop(&mut self) {
        if let Some(active) = self.take_active() {
            let abandoned = typed_error(
                "abandoned",
                "the exchange was dropped before it ended (its guest connection closed)",
            );
            let (writer, write) = active.into_last_write(Cow::Borrowed(&[]), None, Some(abandoned));
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

/// Writes an exchange's record as in flight when the exchange is still running
/// [`BEGIN_RECORD_DELAY`] after it began ([`BeginWatch::run`]).
pub(crate) struct BeginWatch(Option<Arc<Shared>>);

impl BeginWatch {
    /// Runs `exchange` (the code that owns the trace and ends it). If it has not ended when the
    /// delay is up, the record as it stands is queued first, once per exchange, and `exchange`
    /// goes on. Both happen on this task, in order: the in-flight write is always queued before
    /// the exchange's last write.
    ///
    /// With records off, or once the in-flight record was written (a stream's pump after a
    /// slow connect), this is `exchange` itself. Otherwise `exchange` is boxed: an `async fn`
    /// would keep it twice (the argument and the pinned local, in separate slots), and a
    /// stream's task would grow by a whole pump state.
    pub fn run<F: Future>(self, exchange: F) -> Either<F, impl Future<Output = F::Output>> {
        let Some(shared) = self
            .0
            .filter(|shared| !shared.begun.load(Ordering::Acquire))
        else {
            return Either::Left(exchange);
        };
        let mut exchange = Box::pin(exchange);
        Either::Right(async move {
            tokio::select! {
                biased;
                output = &mut exchange => return output,
                () = tokio::time::sleep_until(shared.started + BEGIN_RECORD_DELAY) => {}
            }
            let pending = if shared.begun.swap(true, Ordering::AcqRel) {
                None
            } else {
                let active = shared.active.lock().unwrap_or_else(PoisonError::into_inner);
                active
                    .as_ref()
                    .map(|active| (active.writer.clone(), active.snapshot()))
            };
            if let Some((writer, write)) = pending {
                writer.write(write).await;
            }
            exchange.await
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use switchyard_records::model::RecordOp;
    use switchyard_records::{RecordSink, Recorder, RecorderOptions, Redactor, StoreError};

    /// A sink that keeps the status of every exchange write it applies, in order.
    struct StatusLog(Arc<Mutex<Vec<ExchangeStatus>>>);

    impl RecordSink for StatusLog {
        fn apply(&mut self, ops: &[RecordOp]) -> Result<(), StoreError> {
            let mut log = self.0.lock().unwrap();
            for op in ops {
                log.push(match op {
                    RecordOp::UpsertExchange(record) => record.status,
                    RecordOp::UpsertExchangeText(text) => text.record.status,
                    RecordOp::UpsertExchangeDocument(document) => document.record().status,
                    other => panic!("not an exchange write: {other:?}"),
                });
            }
            Ok(())
        }
    }

    /// A recorder over a [`StatusLog`], its writer handle, a trace of one exchange with records
    /// on, and the log.
    fn logged_trace() -> (Recorder, Trace, Arc<Mutex<Vec<ExchangeStatus>>>) {
        let log = Arc::new(Mutex::new(Vec::new()));
        let recorder = Recorder::start(
            Box::new(StatusLog(Arc::clone(&log))),
            Redactor::default(),
            RecorderOptions::default(),
        )
        .unwrap();
        let writer = RecordWriter::new(recorder.clone());
        let trace = Trace::begin(Some(&writer), None, "ingress", "model", &Bytes::new());
        (recorder, trace, log)
    }

    /// Runs one exchange under its begin watch: it takes `runs_for` (virtual time), the
    /// recorder is flushed just before it ends (so an in-flight write, if any, is stored on
    /// its own), then it ends. Returns the statuses the store saw.
    async fn statuses_of_an_exchange_taking(runs_for: Duration) -> Vec<ExchangeStatus> {
        let (recorder, mut trace, log) = logged_trace();
        let watch = trace.begin_watch();
        watch
            .run(async {
                tokio::time::sleep(runs_for).await;
                recorder.flush().unwrap();
                trace.finish_ok(Cow::Borrowed(&[])).await;
            })
            .await;
        recorder.close().unwrap();
        log.lock().unwrap().clone()
    }

    #[tokio::test(start_paused = true)]
    async fn an_exchange_dropped_before_it_ends_is_stored_as_abandoned() {
        let (recorder, trace, log) = logged_trace();
        let watch = trace.begin_watch();
        // The guest goes away while the exchange waits: its future is dropped mid-wait.
        let waiting = watch.run(async move {
            let _trace = trace;
            std::future::pending::<()>().await;
        });
        let _ = tokio::time::timeout(BEGIN_RECORD_DELAY / 2, waiting).await;
        // The last write is queued by a task of its own.
        tokio::task::yield_now().await;
        recorder.close().unwrap();
        assert_eq!(*log.lock().unwrap(), [ExchangeStatus::Error]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_short_exchange_is_stored_once_when_it_ends() {
        assert_eq!(
            statuses_of_an_exchange_taking(BEGIN_RECORD_DELAY / 2).await,
            [ExchangeStatus::Ok]
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_long_exchange_is_stored_in_flight_first() {
        assert_eq!(
            statuses_of_an_exchange_taking(BEGIN_RECORD_DELAY * 3).await,
            [ExchangeStatus::InFlight, ExchangeStatus::Ok]
        );
    }

    /// The guest request pieces a trace with records on keeps.
    fn guest_text(trace: &mut Trace) -> JsonText {
        trace
            .with(|active| active.guest.text.clone())
            .expect("records are on")
            .expect("recorded as text")
    }

    #[test]
    fn a_cache_hit_record_keeps_copies_of_its_pieces_not_the_guest_body() {
        let writer = RecordWriter::new(Recorder::disabled());
        // Like Gemini CLI's early turns: the shared tools are most of the body.
        let tools_json = format!("[{}]", vec!["2"; 100].join(","));
        let body = Bytes::from(format!(r#"{{"contents":[1],"tools":{tools_json},"x":4}}"#));
        let start = body.len() - tools_json.len() - r#","x":4}"#.len();
        let tools = start..start + tools_json.len();
        assert_eq!(&body[tools.clone()], tools_json.as_bytes());
        let mut trace = Trace::begin(Some(&writer), None, "ingress", "model", &body);
        trace.guest_shared(&[(tools, SharedJson::new(Bytes::from(tools_json.clone())))]);
        assert!(
            body.is_unique(),
            "the trace still holds the guest body: a queued record would pin it"
        );
        assert_eq!(
            guest_text(&mut trace).to_bytes(),
            body,
            "the pieces still make up the body"
        );
    }

    #[test]
    fn a_record_of_mostly_own_history_shares_the_guest_body() {
        let writer = RecordWriter::new(Recorder::disabled());
        let body = Bytes::from(br#"{"contents":["a long history ...."],"tools":[2]}"#.to_vec());
        let tools = body.len() - br#"[2]}"#.len()..body.len() - 1;
        assert_eq!(&body[tools.clone()], b"[2]");
        let mut trace = Trace::begin(Some(&writer), None, "ingress", "model", &body);
        trace.guest_shared(&[(tools, SharedJson::new(Bytes::from_static(b"[2]")))]);
        assert!(!body.is_unique(), "slices of the body, not copies");
        assert_eq!(guest_text(&mut trace).to_bytes(), body);
    }
}
