//! Hands exchange records to the [`Recorder`], built on its writer thread.
//!
//! Building an [`ExchangeRecord`] means parsing the guest and upstream request bodies into JSON
//! values, merging the delivered chunks and assembling the upstream assistant message from the
//! raw upstream events. None of that is needed to answer the guest, so an exchange hands over its
//! record skeleton and the shared bodies ([`PendingWrite`]) and the recorder's writer thread
//! builds ([`PendingWrite::build`]), redacts and stores it.
//!
//! Writes waiting to be built hold their bodies, raw upstream events and delivered text. At most
//! [`PINNED_BUDGET_KIB`] of them wait:
//! beyond it an exchange waits (asynchronously) for room, and again when the recorder's queue is
//! full, so memory stays bounded and nothing is dropped. The gateway's shutdown flushes the
//! recorder: every write queued before it is then stored.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use bytes::Bytes;
use serde_json::Value;
use switchyard_records::Recorder;
use switchyard_records::model::{DeliveredCall, ExchangeRecord, RecordOp, Usage};
use switchyard_translate::turn::{TurnChunk, TurnPart};

use crate::ingress::RecordedAnswer;
use tokio::sync::Semaphore;

/// KiB of bodies that writes handed to the recorder and not built yet may hold before producers
/// have to wait (a write counts at least 1 KiB; one larger than the budget takes all of it).
const PINNED_BUDGET_KIB: u32 = 64 * 1024;

/// One write of an exchange: the record without its large JSON parts, and what they are built
/// from.
pub(crate) struct PendingWrite {
    /// `guest_request` and the attempts' `request` are `Null` here; they are filled from
    /// `guest_body` and `attempt_bodies`.
    pub record: ExchangeRecord,
    pub guest_body: Bytes,
    /// The upstream request body of each attempt, by attempt index.
    pub attempt_bodies: Vec<Bytes>,
    /// What the guest received, when the exchange ended (`None` for an in-flight write).
    pub delivered: Option<Vec<TurnChunk>>,
    /// The guest's answer in its own API's shape (the ingress's).
    pub recorded: RecordedAnswer,
    /// Set once the exchange's last write is queued: an in-flight write not built by then is
    /// not built at all (the last write replaces it), so a short exchange is built and stored
    /// once.
    pub superseded: Arc<AtomicBool>,
}

impl PendingWrite {
    /// KiB this write keeps alive (bodies, raw upstream events, delivered text), at least 1.
    fn pinned_kib(&self) -> u32 {
        let raw: usize = self
            .record
            .attempts
            .iter()
            .flat_map(|a| a.raw_events.iter().map(String::len))
            .sum();
        let delivered: usize = self
            .delivered
            .iter()
            .flatten()
            .map(TurnChunk::answer_bytes)
            .sum();
        let bytes = self.guest_body.len()
            + self.attempt_bodies.iter().map(Bytes::len).sum::<usize>()
            + raw
            + delivered;
        u32::try_from(bytes.div_ceil(1024).max(1)).unwrap_or(u32::MAX)
    }

    /// The exchange record: bodies parsed (a body that is not JSON is kept as a string),
    /// delivered calls, usage, the merged guest response and the upstream message filled in.
    pub fn build(self) -> ExchangeRecord {
        let PendingWrite {
            mut record,
            guest_body,
            attempt_bodies,
            delivered,
            recorded,
            superseded: _,
        } = self;
        record.billed = record
            .attempts
            .iter()
            .filter_map(|a| a.usage)
            .fold(Usage::default(), Usage::plus);
        record.guest_request = json_or_text(&guest_body);
        for (attempt, body) in record.attempts.iter_mut().zip(&attempt_bodies) {
            attempt.request = json_or_text(body);
        }
        if let Some(delivered) = delivered {
            record.function_calls = delivered
                .iter()
                .flat_map(|chunk| chunk.parts.iter())
                .filter_map(call_of)
                .collect();
            if let Some(u) = delivered.iter().rev().find_map(|c| c.usage.as_ref()) {
                record.usage = Usage {
                    input: u64::from(u.input),
                    cached: u64::from(u.cached.unwrap_or(0)),
                    output: u64::from(u.output),
                    reasoning: u64::from(u.reasoning.unwrap_or(0)),
                    // Set by the trace from the response translation's report.
                    estimated: record.usage.estimated,
                };
            }
            let created = u64::try_from(record.received_at.timestamp()).unwrap_or(0);
            record.guest_response = switchyard_translate::turn::merge(delivered)
                .and_then(|merged| recorded(&merged, created));
            record.upstream_message = record
                .attempts
                .iter()
                .rev()
                .find(|a| a.error.is_none() && !a.raw_events.is_empty())
                .and_then(|a| switchyard_records::export::assemble_upstream_message(&a.raw_events));
        }
        record
    }
}

/// `body` as a JSON value, or as a string when it is not JSON (a guest's bad request).
fn json_or_text(body: &[u8]) -> Value {
    if body.is_empty() {
        return Value::Null;
    }
    serde_json::from_slice(body)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(body).into_owned()))
}

/// Handle for queuing exchange writes (clone freely).
#[derive(Clone)]
pub(crate) struct RecordWriter {
    recorder: Recorder,
    /// KiB of [`PINNED_BUDGET_KIB`] not held by queued writes.
    room: Arc<Semaphore>,
}

impl RecordWriter {
    /// The recorder behind it.
    pub fn recorder(&self) -> &Recorder {
        &self.recorder
    }

    pub fn new(recorder: Recorder) -> Self {
        Self {
            recorder,
            room: Arc::new(Semaphore::new(PINNED_BUDGET_KIB as usize)),
        }
    }

    /// Queues one write from code that cannot wait (a drop): the waiting runs as a task of
    /// the current runtime. Outside a runtime the write is lost, with a warning.
    pub fn write_detached(&self, write: PendingWrite) {
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                let writer = self.clone();
                runtime.spawn(async move { writer.write(write).await });
            }
            Err(_) => tracing::warn!("exchange record lost: no runtime to queue it on"),
        }
    }

    /// Queues one write (waits for room in the budget, and in the recorder's queue).
    pub async fn write(&self, write: PendingWrite) {
        let kib = write.pinned_kib().min(PINNED_BUDGET_KIB);
        let Ok(room) = Arc::clone(&self.room).acquire_many_owned(kib).await else {
            return; // never closed
        };
        let queued = self
            .recorder
            .record_built(move || {
                let in_flight = write.delivered.is_none();
                if in_flight && write.superseded.load(Ordering::Acquire) {
                    return None;
                }
                let record = write.build();
                // The room is given back once the write is built.
                drop(room);
                Some(RecordOp::UpsertExchange(Box::new(record)))
            })
            .await;
        if let Err(e) = queued {
            tracing::warn!(error = %e, "cannot record exchange");
        }
    }
}

fn call_of(part: &TurnPart) -> Option<DeliveredCall> {
    let TurnPart::Call(call) = part else {
        return None;
    };
    Some(DeliveredCall {
        id: call.upstream_id.clone().unwrap_or_else(|| call.id.clone()),
        delivered_id: call.upstream_id.is_some().then(|| call.id.clone()),
        name: call.qualified_name(),
        arguments: call.arguments.clone(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pending(guest_body: Bytes, attempt_bodies: Vec<Bytes>) -> PendingWrite {
        PendingWrite {
            record: ExchangeRecord::begin(None, "x", "m", Value::Null),
            guest_body,
            attempt_bodies,
            delivered: None,
            recorded: |turn, _| {
                serde_json::to_value(switchyard_translate::google_answer::to_google(turn)).ok()
            },
            superseded: Arc::default(),
        }
    }

    #[test]
    fn a_write_counts_the_bodies_it_keeps_alive() {
        let whole = pending(
            Bytes::from(vec![b' '; 1024 * 1024]),
            vec![Bytes::from(vec![b' '; 512 * 1024])],
        );
        assert_eq!(whole.pinned_kib(), 1024 + 512);
        assert_eq!(
            pending(Bytes::new(), Vec::new()).pinned_kib(),
            1,
            "at least 1 KiB"
        );
    }

    #[tokio::test]
    async fn room_comes_back_once_a_write_is_built() {
        let dir = tempfile::tempdir().unwrap();
        let recorder =
            Recorder::open_dir(dir.path(), switchyard_records::Redactor::default()).unwrap();
        let writer = RecordWriter::new(recorder.clone());
        let body = Bytes::from(vec![b' '; 4 * 1024 * 1024]);
        // Far more than the budget in total: each write must give its room back once built, or
        // a later one would wait forever.
        for _ in 0..(PINNED_BUDGET_KIB / 4096) * 3 {
            within(writer.write(pending(body.clone(), Vec::new()))).await;
        }
        recorder.flush_async().await.unwrap();
        assert_eq!(writer.room.available_permits(), PINNED_BUDGET_KIB as usize);
        // A write larger than the whole budget takes all of it, and does not wait forever.
        let huge = Bytes::from(vec![b' '; (PINNED_BUDGET_KIB as usize + 1) * 1024]);
        within(writer.write(pending(huge, Vec::new()))).await;
        recorder.close_async().await.unwrap();
    }

    async fn within<T>(f: impl std::future::Future<Output = T>) -> T {
        tokio::time::timeout(std::time::Duration::from_secs(30), f)
            .await
            .expect("room for the write")
    }

    #[test]
    fn a_build_parses_bodies_and_keeps_calls_usage_and_the_merged_response() {
        let chunk = |v: Value| serde_json::from_value::<TurnChunk>(v).unwrap();
        let text = chunk(json!({"model": "m", "response_id": "r",
            "parts": [{"kind": "text", "text": "a"}]}));
        let last = chunk(json!({"model": "m", "response_id": "r",
            "parts": [{"kind": "call", "id": "c1", "upstream_id": "u1", "name": "ls",
                "arguments": {"dir": "."}}],
            "finish": "stop",
            "usage": {"input": 5, "output": 2, "total": 7, "cached": 1, "reasoning": 3}}));
        let mut write = pending(
            Bytes::from_static(br#"{"contents":[]}"#),
            vec![Bytes::from_static(b"not json")],
        );
        write
            .record
            .attempts
            .push(switchyard_records::model::UpstreamAttempt {
                request: Value::Null,
                status: Some(200),
                raw_events: vec![r#"{"choices":[{"index":0,"delta":{"content":"a"}}]}"#.into()],
                error: None,
                started_at: chrono::Utc::now(),
                first_byte_at: None,
                last_byte_at: None,
                usage: None,
            });
        write.delivered = Some(vec![text, last]);
        let record = write.build();
        assert_eq!(record.guest_request, json!({"contents": []}));
        assert_eq!(
            record.attempts[0].request,
            json!("not json"),
            "kept as text"
        );
        assert_eq!(record.function_calls.len(), 1);
        assert_eq!(record.function_calls[0].id, "u1", "the model's own id");
        assert_eq!(record.function_calls[0].delivered_id.as_deref(), Some("c1"));
        assert_eq!(record.function_calls[0].arguments, json!({"dir": "."}));
        let u = record.usage;
        assert_eq!((u.input, u.cached, u.output, u.reasoning), (5, 1, 2, 3));
        let merged = record.guest_response.unwrap();
        assert_eq!(
            merged["candidates"][0]["content"]["parts"][0],
            json!({"text": "a"})
        );
        assert_eq!(
            merged["candidates"][0]["content"]["parts"][1]["functionCall"]["id"], "c1",
            "the guest's own id, as it received it"
        );
        assert_eq!(record.upstream_message.unwrap()["content"], "a");
    }
}
