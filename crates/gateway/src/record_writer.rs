//! Finishes exchange records off the request path and hands them to the [`Recorder`].
//!
//! Building an [`ExchangeRecord`] means turning the ~47 KB guest request and the ~47 KB upstream
//! request of every attempt into JSON values, assembling the upstream assistant message from the
//! raw upstream events and the guest response from the delivered chunks. None of that is needed
//! to answer the guest, so the exchange code only hands over cheap handles (reference-counted
//! [`Bytes`], the record skeleton, the delivered chunks) and one background thread does the rest,
//! in order, then queues the record with the recorder (whose own writer thread redacts and
//! stores it).
//!
//! * When the translation cache supplied the request's system prompt and tools, nothing is parsed:
//!   the exchange goes to the recorder as text pieces (slices of the guest body and the upstream
//!   body, with the cached parts as shared pieces it stores once; see
//!   `switchyard_records::document`). Only the small end-of-exchange parts are built here.
//! * Otherwise the guest request is parsed once per exchange: the begin write parses it into a
//!   slot shared with the exchange; the end write takes the value out of the slot (no copy) when
//!   the exchange no longer holds it.
//! * After a batch that did not fill up, the thread sleeps [`LINGER`] before taking the next: on
//!   a busy gateway writes gather (and the begin write of an exchange that ended meanwhile is
//!   skipped, see below) instead of the thread being woken for each one.
//! * The queue is bounded: when the recorder cannot keep up, exchanges wait (asynchronously, the
//!   runtime's worker threads are never blocked) for room, so nothing is dropped.
//! * At most a few hundred records wait in the recorder's queue; when the recorder falls behind,
//!   writes wait here instead, and the thread takes every queued write at once: a write
//!   that a later write of the same exchange in that batch replaces (an upsert of the whole
//!   record) is skipped: an exchange that already ended is stored once, with its final state,
//!   instead of being parsed, redacted and stored twice. With a writer that keeps up, every
//!   begin write is stored as before.
//! * [`RecordWriter::flush`] returns once every write queued before it reached the recorder.

use std::sync::mpsc::{SyncSender, sync_channel};
use std::sync::{Arc, OnceLock};

use bytes::Bytes;
use serde_json::Value;
use switchyard_records::model::{DeliveredCall, ExchangeRecord, RecordOp, Usage};
use switchyard_records::{ExchangeText, JsonText, Recorder};
use switchyard_translate::google::{GenerateContentResponse, Part};

use crate::translation::ChatBody;

/// Writes queued before producers have to wait (a write holds its guest body, except when the
/// cached system prompt and tools are most of it: then copies of the rest, ~1 KB for Gemini
/// CLI's first turns; this bounds the memory records can pin under overload).
const QUEUE: usize = 256;

/// Ops handed to the recorder that may still wait in its queue.
const OUTSTANDING: u64 = 256;

/// Longest wait for the recorder before handing over anyway (a stuck writer must not stop
/// recording altogether; the recorder's own queue then applies backpressure).
const STALL_LIMIT: std::time::Duration = std::time::Duration::from_secs(2);

/// How long the thread lets writes gather after a batch that did not fill up: waking it for
/// every write costs the request path more (on a 2-core machine) than the records' delay.
const LINGER: std::time::Duration = std::time::Duration::from_millis(10);

/// Most writes taken from the queue at once (and considered together for skipping).
const BATCH: usize = 256;

/// The guest request body and its parsed value (filled by the first write that needs it).
#[derive(Clone)]
pub(crate) struct GuestRequest {
    pub body: Bytes,
    pub parsed: Arc<OnceLock<Value>>,
    /// The body as record pieces, when its system instruction and tools came from the
    /// translation cache: then the exchange is recorded as text, never parsed here.
    pub text: Option<JsonText>,
}

/// One write of an exchange: the record without its large JSON parts, and what they are built
/// from.
pub(crate) struct PendingWrite {
    /// `guest_request` and the attempts' `request` are `Null` here; they are filled from
    /// `guest` and `attempt_bodies`.
    pub record: Box<ExchangeRecord>,
    pub guest: GuestRequest,
    /// The upstream request body of each attempt, by attempt index.
    pub attempt_bodies: Vec<ChatBody>,
    /// What the guest received, when the exchange ended (`None` for the begin write).
    pub delivered: Option<Vec<GenerateContentResponse>>,
}

enum Job {
    Write(PendingWrite),
    Flush(SyncSender<()>),
}

/// Handle to the background thread (clone freely).
#[derive(Clone)]
pub(crate) struct RecordWriter {
    sender: tokio::sync::mpsc::Sender<Job>,
}

impl RecordWriter {
    /// Starts the thread; it ends when every handle is dropped.
    pub fn start(recorder: Recorder) -> std::io::Result<Self> {
        let (sender, receiver) = tokio::sync::mpsc::channel(QUEUE);
        std::thread::Builder::new()
            .name("switchyard-gateway-records".into())
            .spawn(move || {
                switchyard_records::background::lower_this_threads_priority();
                run(recorder, receiver)
            })?;
        Ok(Self { sender })
    }

    /// Queues one write (waits for room when the queue is full).
    pub async fn write(&self, write: PendingWrite) {
        if self.sender.send(Job::Write(write)).await.is_err() {
            tracing::warn!("cannot record exchange: the record writer stopped");
        }
    }

    /// Waits until every write queued before this call was handed to the recorder. Blocking:
    /// call it outside the async runtime (e.g. in `spawn_blocking`).
    pub fn flush(&self) {
        let (done, wait) = sync_channel(1);
        if self.sender.blocking_send(Job::Flush(done)).is_ok() {
            let _ = wait.recv();
        }
    }
}

fn run(recorder: Recorder, mut jobs: tokio::sync::mpsc::Receiver<Job>) {
    let mut batch = Vec::with_capacity(BATCH);
    let mut handed: u64 = 0;
    while let Some(first) = jobs.blocking_recv() {
        batch.push(first);
        // While the recorder is busy, writes pile up here, where replaced ones can be skipped.
        wait_for_recorder(&recorder, handed);
        while batch.len() < BATCH {
            match jobs.try_recv() {
                Ok(job) => batch.push(job),
                Err(_) => break,
            }
        }
        let full = batch.len() >= BATCH;
        for job in without_replaced_writes(std::mem::take(&mut batch)) {
            match job {
                Job::Write(write) => {
                    if let Err(e) = recorder.record(build(write)) {
                        tracing::warn!(error = %e, "cannot record exchange");
                    }
                    handed += 1;
                }
                Job::Flush(done) => {
                    let _ = done.send(());
                }
            }
        }
        if !full {
            // Let writes gather instead of being woken for each one.
            std::thread::sleep(LINGER);
        }
    }
}

/// Waits (bounded) until at most [`OUTSTANDING`] of the `handed` ops are still queued in the
/// recorder. The recorder's own queue holds thousands of ops; letting it fill with ~100 KB
/// exchange records costs hundreds of MB and defeats the skipping of replaced writes here.
fn wait_for_recorder(recorder: &Recorder, handed: u64) {
    let started = std::time::Instant::now();
    loop {
        let stats = recorder.stats();
        // Other producers' ops count as done too: this is a soft bound.
        let done = stats.written_ops + stats.failed_ops;
        if handed.saturating_sub(done) <= OUTSTANDING || started.elapsed() > STALL_LIMIT {
            return;
        }
        std::thread::sleep(std::time::Duration::from_micros(200));
    }
}

/// `batch` without the writes that a later write of the same exchange replaces before the next
/// flush (so a flush still covers everything queued before it).
fn without_replaced_writes(batch: Vec<Job>) -> Vec<Job> {
    let mut later: std::collections::HashSet<uuid::Uuid> = std::collections::HashSet::new();
    let mut kept: Vec<Job> = Vec::with_capacity(batch.len());
    for job in batch.into_iter().rev() {
        match &job {
            Job::Flush(_) => later.clear(),
            Job::Write(write) => {
                if !later.insert(write.record.id) {
                    continue;
                }
            }
        }
        kept.push(job);
    }
    kept.reverse();
    kept
}

/// Fills in the large parts of the record: as text pieces when the guest request has shared
/// pieces (nothing parsed), else as parsed values.
fn build(write: PendingWrite) -> RecordOp {
    let PendingWrite {
        mut record,
        guest,
        attempt_bodies,
        delivered,
    } = write;
    if let Some(delivered) = &delivered {
        finish(&mut record, delivered);
    }
    let GuestRequest { body, parsed, text } = guest;
    if let Some(guest_request) = text {
        return RecordOp::UpsertExchangeText(Box::new(ExchangeText {
            record: *record,
            guest_request,
            attempt_requests: attempt_bodies.iter().map(|b| b.text().clone()).collect(),
        }));
    }
    parsed.get_or_init(|| JsonText::whole(body).to_value());
    record.guest_request = match Arc::try_unwrap(parsed) {
        Ok(slot) => slot.into_inner().unwrap_or(Value::Null),
        Err(shared) => shared.get().cloned().unwrap_or(Value::Null),
    };
    for (attempt, body) in record.attempts.iter_mut().zip(&attempt_bodies) {
        if attempt.request.is_null() {
            attempt.request = body.text().to_value();
        }
    }
    RecordOp::UpsertExchange(record)
}

/// The end-of-exchange parts: delivered calls, usage, guest response, upstream message.
fn finish(record: &mut ExchangeRecord, delivered: &[GenerateContentResponse]) {
    record.function_calls = delivered
        .iter()
        .flat_map(|chunk| chunk.parts())
        .filter_map(call_of)
        .collect();
    if let Some(u) = delivered
        .iter()
        .rev()
        .find_map(|c| c.usage_metadata.as_ref())
    {
        record.usage = Usage {
            input: u64::from(u.prompt_token_count),
            cached: u64::from(u.cached_content_token_count.unwrap_or(0)),
            output: u64::from(u.candidates_token_count),
            reasoning: u64::from(u.thoughts_token_count.unwrap_or(0)),
        };
    }
    record.guest_response =
        merge_chunks(delivered).map(|merged| serde_json::to_value(merged).unwrap_or(Value::Null));
    if record.upstream_message.is_none() {
        record.upstream_message = record
            .attempts
            .iter()
            .rev()
            .find(|a| a.error.is_none() && !a.raw_events.is_empty())
            .and_then(|a| switchyard_records::export::assemble_upstream_message(&a.raw_events));
    }
}

fn call_of(part: &Part) -> Option<DeliveredCall> {
    let call = part.function_call.as_ref()?;
    Some(DeliveredCall {
        id: call.id.clone().unwrap_or_default(),
        name: call.name.clone(),
        arguments: call.args.clone().unwrap_or(Value::Null),
    })
}

/// True for a part that carries only text (and maybe the thought flag). Every field is named, so
/// a new one is a compile error here; nothing is cloned (this runs for every delivered chunk).
fn text_only(part: &Part) -> bool {
    let Part {
        text,
        thought: _,
        thought_signature,
        function_call,
        function_response,
        inline_data,
        file_data,
        executable_code,
        code_execution_result,
        video_metadata,
        extra,
    } = part;
    text.is_some()
        && thought_signature.is_none()
        && function_call.is_none()
        && function_response.is_none()
        && inline_data.is_none()
        && file_data.is_none()
        && executable_code.is_none()
        && code_execution_result.is_none()
        && video_metadata.is_none()
        && extra.is_empty()
}

/// The GenerateContent response the guest received, as one response: the chunks' parts in
/// order (adjacent text parts of the same kind joined), the last chunk's finish reason, usage,
/// model version and response id. `None` when nothing was delivered.
pub(crate) fn merge_chunks(chunks: &[GenerateContentResponse]) -> Option<GenerateContentResponse> {
    let (last, _) = chunks.split_last()?;
    if chunks.len() == 1 {
        return Some(last.clone());
    }
    let mut parts: Vec<Part> = Vec::new();
    for part in chunks.iter().flat_map(|c| c.parts()) {
        match parts.last_mut() {
            Some(previous)
                if text_only(previous) && text_only(part) && previous.thought == part.thought =>
            {
                if let (Some(joined), Some(more)) = (&mut previous.text, &part.text) {
                    joined.push_str(more);
                }
            }
            _ => parts.push(part.clone()),
        }
    }
    let mut merged = last.clone();
    merged.usage_metadata = chunks.iter().rev().find_map(|c| c.usage_metadata.clone());
    merged.model_version = chunks.iter().rev().find_map(|c| c.model_version.clone());
    merged.response_id = chunks.iter().rev().find_map(|c| c.response_id.clone());
    match merged.candidates.first_mut() {
        Some(candidate) => {
            candidate.content.parts = parts;
            candidate.finish_reason = chunks.iter().rev().find_map(|c| c.finish_reason());
        }
        None => {
            let mut candidate = chunks
                .iter()
                .rev()
                .find_map(|c| c.candidates.first().cloned())
                .unwrap_or_default();
            candidate.content.parts = parts;
            merged.candidates.push(candidate);
        }
    }
    Some(merged)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn write_of(record: &ExchangeRecord, status: &str) -> Job {
        let mut record = Box::new(record.clone());
        record.notes.push(status.into());
        Job::Write(PendingWrite {
            record,
            guest: GuestRequest {
                body: Bytes::from_static(b"{}"),
                parsed: Arc::new(OnceLock::new()),
                text: None,
            },
            attempt_bodies: Vec::new(),
            delivered: None,
        })
    }

    fn notes(jobs: &[Job]) -> Vec<String> {
        jobs.iter()
            .map(|job| match job {
                Job::Write(w) => w.record.notes.join(""),
                Job::Flush(_) => "flush".into(),
            })
            .collect()
    }

    #[test]
    fn only_writes_replaced_before_the_next_flush_are_skipped() {
        let a = ExchangeRecord::begin(None, "x", "m", Value::Null);
        let b = ExchangeRecord::begin(None, "x", "m", Value::Null);
        let (done, _wait) = sync_channel(1);
        let batch = vec![
            write_of(&a, "a-begin"),
            write_of(&b, "b-begin"),
            write_of(&a, "a-end"),
            Job::Flush(done),
            write_of(&b, "b-end"),
        ];
        assert_eq!(
            notes(&without_replaced_writes(batch)),
            ["b-begin", "a-end", "flush", "b-end"]
        );
    }

    #[test]
    fn merged_chunks_join_adjacent_text_and_keep_the_last_metadata() {
        let chunk = |v: Value| serde_json::from_value::<GenerateContentResponse>(v).unwrap();
        let chunks = [
            chunk(
                json!({"candidates":[{"content":{"role":"model","parts":[{"text":"a","thought":true}]},"index":0}]}),
            ),
            chunk(
                json!({"candidates":[{"content":{"role":"model","parts":[{"text":"b"}]},"index":0}]}),
            ),
            chunk(
                json!({"candidates":[{"content":{"role":"model","parts":[{"text":"c"}]},"index":0}]}),
            ),
            chunk(
                json!({"candidates":[{"content":{"role":"model","parts":[{"functionCall":{"id":"c1","name":"ls","args":{}}}]},"finishReason":"STOP","index":0}],
                "usageMetadata":{"promptTokenCount":3,"candidatesTokenCount":2,"totalTokenCount":5},"modelVersion":"m"}),
            ),
        ];
        let merged = serde_json::to_value(merge_chunks(&chunks).unwrap()).unwrap();
        assert_eq!(
            merged["candidates"][0]["content"]["parts"],
            json!([{"text":"a","thought":true},{"text":"bc"},{"functionCall":{"id":"c1","name":"ls","args":{}}}])
        );
        assert_eq!(merged["candidates"][0]["finishReason"], "STOP");
        assert_eq!(merged["usageMetadata"]["promptTokenCount"], 3);
        assert_eq!(merged["modelVersion"], "m");
        assert!(merge_chunks(&[]).is_none());
    }
}
