//! Hands exchange records to the [`Recorder`], which builds them on its writer thread.
//!
//! Building an [`ExchangeRecord`] means assembling the upstream assistant message from the raw
//! upstream events and (when the translation cache did not supply the request's system prompt and
//! tools) turning the ~47 KB guest request and upstream request into JSON values. None of that is
//! needed to answer the guest, so the exchange code only hands over cheap handles
//! (reference-counted [`Bytes`], the record skeleton) as a [`DeferredExchange`]; the recorder's
//! writer thread builds it ([`build`]), redacts and stores it, in order, in one place.
//!
//! The delivered chunks are the exception: the request's thread reduces them to a [`Delivery`]
//! (calls, usage, the merged response as JSON text) when the exchange ends. Each chunk is a
//! handful of small allocations, and the writer thread freeing memory the request threads
//! allocated contends for their allocator's locks: in `switchyard bench gateway`, reducing them
//! there raised records-on throughput by ~9 % (3 alternating runs each).
//!
//! * When the translation cache supplied the request's system prompt and tools, nothing is parsed:
//!   the exchange goes to the store as text pieces (slices of the guest body and the upstream
//!   body, with the cached parts as shared pieces it stores once; see
//!   `switchyard_records::document`). Only the small end-of-exchange parts are built.
//! * Otherwise the guest request is parsed once per exchange: an in-flight write parses it into
//!   a slot shared with the exchange; the end write takes the value out of the slot (no copy)
//!   when the exchange no longer holds it.
//! * An exchange is written twice only when it outlasts `trace::BEGIN_RECORD_DELAY` (once in
//!   flight, once ended); the recorder also skips a write that a later write of the same
//!   exchange in the same batch replaces.
//! * Writes waiting to be built hold their bodies (the guest body itself, unless the cached
//!   system prompt and tools are most of it: then copies of the rest, ~1 KB for Gemini CLI's
//!   first turns; each attempt's upstream body, less the shared cached parts). At most
//!   [`PINNED_BUDGET_KIB`] of them wait: this bounds the memory records can pin under overload.
//!   Beyond it exchanges wait (asynchronously: the runtime's worker threads are never blocked)
//!   for room, and again when the recorder's own queue is full, so nothing is dropped.
//! * The recorder hands back the parts of each stored exchange that the request threads
//!   allocated (the record skeleton, the request texts: dozens of blocks), and each write frees
//!   a few of them, on its own request thread ([`Recorder::hand_back_spent`],
//!   [`Recorder::free_spent`]): freed on the writer thread, they went back to the request
//!   threads' allocator arenas under lock and made those threads' `malloc` slower. In
//!   `switchyard bench gateway` (7 alternating pairs, 6 s throughput series) the records on/off
//!   req/s ratio at c=16 went from 0.65 to 0.72 (unary) and from 0.69 to 0.77 (stream). A write
//!   frees at most a few exchanges' parts: freeing all that a batch handed back (up to 512
//!   exchanges) took 4-19 ms, a stall of the runtime worker it ran on and a tail-latency spike
//!   for every exchange on it. What no write takes back, the recorder frees once it is idle.
//! * The gateway's shutdown flushes the recorder: every write queued before it is then stored.

use std::sync::{Arc, OnceLock};

use bytes::Bytes;
use serde_json::Value;
use switchyard_records::model::{DeliveredCall, ExchangeRecord, RecordOp, Usage};
use switchyard_records::{DeferredExchange, ExchangeText, JsonText, Queued, Recorder};
use switchyard_translate::google::{GenerateContentResponse, Part};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::translation::ChatBody;

/// KiB of bodies that writes handed to the recorder and not built yet may hold before producers
/// have to wait (a write counts at least 1 KiB; one larger than the budget takes all of it).
const PINNED_BUDGET_KIB: u32 = 64 * 1024;

/// How long a producer waits before offering a write again when the recorder's queue is full.
const FULL_QUEUE_RETRY: std::time::Duration = std::time::Duration::from_millis(1);

/// The guest request body and its parsed value (filled by the first write that needs it).
#[derive(Clone)]
pub(crate) struct GuestRequest {
    pub body: Bytes,
    pub parsed: Arc<OnceLock<Value>>,
    /// The body as record pieces, when its system instruction and tools came from the
    /// translation cache: then the exchange is recorded as text, never parsed.
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
    /// What the guest received, when the exchange ended (`None` for an in-flight write).
    pub delivered: Option<Delivery>,
}

/// What the guest received, reduced on the request's own thread to what the record keeps: the
/// delivered calls, the usage and the merged response as JSON text. The delivered chunks (a
/// handful of allocations each, hundreds of chunks for a long answer) are freed where they were
/// made; only this goes to the recorder's thread.
pub(crate) struct Delivery {
    function_calls: Vec<DeliveredCall>,
    usage: Option<Usage>,
    /// The chunks merged into one response ([`merge_chunks`]), serialized.
    guest_response: Option<String>,
}

impl Delivery {
    /// Reduces the chunks delivered in one exchange (one chunk is serialized as it is, or kept
    /// as `sent`, the JSON text it was sent to the guest as; several are merged first).
    pub fn of(delivered: crate::trace::Delivered<'_>, sent: Option<&str>) -> Self {
        let function_calls = delivered
            .iter()
            .flat_map(|chunk| chunk.parts())
            .filter_map(call_of)
            .collect();
        let usage = delivered
            .iter()
            .rev()
            .find_map(|c| c.usage_metadata.as_ref())
            .map(|u| Usage {
                input: u64::from(u.prompt_token_count),
                cached: u64::from(u.cached_content_token_count.unwrap_or(0)),
                output: u64::from(u.candidates_token_count),
                reasoning: u64::from(u.thoughts_token_count.unwrap_or(0)),
            });
        // Written straight from the typed response: no JSON tree built.
        let guest_response = match (&*delivered, sent) {
            ([_], Some(sent)) => Some(sent.to_owned()),
            ([one], None) => serde_json::to_string(one).ok(),
            _ => merge_chunks(delivered.into_owned()).and_then(|r| serde_json::to_string(&r).ok()),
        };
        Delivery {
            function_calls,
            usage,
            guest_response,
        }
    }
}

impl PendingWrite {
    /// KiB of bodies this write keeps alive (shared cached parts are not counted: the
    /// translation cache holds them anyway), at least 1.
    fn pinned_kib(&self) -> u32 {
        let guest = match &self.guest.text {
            Some(text) => text.text_len().max(self.guest.body.len()),
            None => self.guest.body.len(),
        };
        let attempts: usize = self
            .attempt_bodies
            .iter()
            .map(|b| b.text().text_len())
            .sum();
        let kib = (guest + attempts).div_ceil(1024).max(1);
        u32::try_from(kib).unwrap_or(u32::MAX)
    }
}

/// A [`PendingWrite`] on its way to the recorder, holding its share of [`PINNED_BUDGET_KIB`]
/// until it is built.
struct Deferred {
    write: PendingWrite,
    _room: OwnedSemaphorePermit,
}

impl DeferredExchange for Deferred {
    fn exchange_id(&self) -> uuid::Uuid {
        self.write.record.id
    }

    fn build(self: Box<Self>) -> RecordOp {
        // The room is given back when `self` is dropped, once the op is built.
        build(self.write)
    }
}

/// Handle for queuing exchange writes (clone freely).
#[derive(Clone)]
pub(crate) struct RecordWriter {
    recorder: Recorder,
    /// KiB of [`PINNED_BUDGET_KIB`] not held by queued writes.
    room: Arc<Semaphore>,
}

impl RecordWriter {
    /// A writer to `recorder`, which from now on hands back what it stored (see the module
    /// docs): each [`RecordWriter::write`] frees it.
    pub fn new(recorder: Recorder) -> Self {
        recorder.hand_back_spent();
        Self {
            recorder,
            room: Arc::new(Semaphore::new(PINNED_BUDGET_KIB as usize)),
        }
    }

    /// Waits until every write queued so far (and every write already waiting for room) is
    /// stored: takes the whole budget back (a write's room returns once it is built; the
    /// semaphore is fair, so writes already waiting go first), then flushes the recorder. (For
    /// the benchmark: a series must pay for the records it caused.)
    #[cfg(any(test, feature = "bench"))]
    pub async fn settle(&self) -> Result<(), switchyard_records::RecordError> {
        if let Ok(all) = self.room.acquire_many(PINNED_BUDGET_KIB).await {
            drop(all);
        }
        let recorder = self.recorder.clone();
        tokio::task::spawn_blocking(move || recorder.flush())
            .await
            .unwrap_or(Err(switchyard_records::RecordError::Closed))
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

    /// Queues one write (waits for room in the budget, and in the recorder's queue), after
    /// freeing some of what the recorder handed back from earlier writes.
    pub async fn write(&self, write: PendingWrite) {
        let kib = write.pinned_kib().min(PINNED_BUDGET_KIB);
        let Ok(room) = Arc::clone(&self.room).acquire_many_owned(kib).await else {
            return; // never closed
        };
        self.recorder.free_spent();
        let mut deferred: Box<dyn DeferredExchange> = Box::new(Deferred { write, _room: room });
        loop {
            match self.recorder.try_record_deferred(deferred) {
                Ok(Queued::Yes) => return,
                Ok(Queued::Full(back)) => {
                    deferred = back;
                    tokio::time::sleep(FULL_QUEUE_RETRY).await;
                }
                Err(e) => {
                    tracing::warn!(error = %e, "cannot record exchange");
                    return;
                }
            }
        }
    }
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
    let guest_response = delivered.and_then(|delivery| finish(&mut record, delivery));
    let GuestRequest { body, parsed, text } = guest;
    if let Some(guest_request) = text {
        return RecordOp::UpsertExchangeText(Box::new(ExchangeText {
            record: *record,
            guest_request,
            attempt_requests: attempt_bodies
                .into_iter()
                .map(ChatBody::into_text)
                .collect(),
            guest_response,
        }));
    }
    record.guest_response = guest_response.map(switchyard_records::document::guest_response_value);
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

/// The end-of-exchange parts: delivered calls, usage and upstream message go into `record`; the
/// guest response text is returned.
fn finish(record: &mut ExchangeRecord, delivery: Delivery) -> Option<String> {
    record.function_calls = delivery.function_calls;
    if let Some(usage) = delivery.usage {
        record.usage = usage;
    }
    if record.upstream_message.is_none() {
        record.upstream_message = record
            .attempts
            .iter()
            .rev()
            .find(|a| a.error.is_none() && !a.raw_events.is_empty())
            .and_then(|a| switchyard_records::export::assemble_upstream_message(&a.raw_events));
    }
    delivery.guest_response
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
pub(crate) fn merge_chunks(
    mut chunks: Vec<GenerateContentResponse>,
) -> Option<GenerateContentResponse> {
    if chunks.len() <= 1 {
        return chunks.pop();
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
    let usage_metadata = chunks.iter().rev().find_map(|c| c.usage_metadata.clone());
    let model_version = chunks.iter().rev().find_map(|c| c.model_version.clone());
    let response_id = chunks.iter().rev().find_map(|c| c.response_id.clone());
    let finish_reason = chunks.iter().rev().find_map(|c| c.finish_reason());
    // Only needed (and cloned) when the last chunk has no candidate.
    let earlier_candidate = chunks
        .last()
        .is_some_and(|last| last.candidates.is_empty())
        .then(|| {
            chunks
                .iter()
                .rev()
                .find_map(|c| c.candidates.first().cloned())
        })
        .flatten();
    let mut merged = chunks.pop()?;
    merged.usage_metadata = usage_metadata;
    merged.model_version = model_version;
    merged.response_id = response_id;
    match merged.candidates.first_mut() {
        Some(candidate) => {
            candidate.content.parts = parts;
            candidate.finish_reason = finish_reason;
        }
        None => {
            let mut candidate = earlier_candidate.unwrap_or_default();
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

    fn pending(guest: GuestRequest, attempt_bodies: Vec<ChatBody>) -> PendingWrite {
        PendingWrite {
            record: Box::new(ExchangeRecord::begin(None, "x", "m", Value::Null)),
            guest,
            attempt_bodies,
            delivered: None,
        }
    }

    fn guest_body(body: Bytes) -> GuestRequest {
        GuestRequest {
            body,
            parsed: Arc::new(OnceLock::new()),
            text: None,
        }
    }

    #[test]
    fn a_write_counts_the_bodies_it_keeps_alive_but_not_shared_parts() {
        let mib = Bytes::from(vec![b' '; 1024 * 1024]);
        let whole = pending(
            guest_body(mib.clone()),
            vec![ChatBody::single(vec![b' '; 512 * 1024])],
        );
        assert_eq!(whole.pinned_kib(), 1024 + 512);
        // A cache hit: the guest body was replaced by copies of the few bytes around the shared
        // system prompt and tools, and the upstream body shares them too.
        let mut text = JsonText::default();
        text.push_text(Bytes::from_static(b"{\"contents\":[],\"tools\":"));
        text.push_shared(switchyard_records::SharedJson::new(mib));
        text.push_text(Bytes::from_static(b"}"));
        let mut guest = guest_body(Bytes::new());
        guest.text = Some(text);
        assert_eq!(pending(guest, Vec::new()).pinned_kib(), 1, "at least 1 KiB");
    }

    #[tokio::test]
    async fn room_comes_back_once_a_write_is_taken() {
        use futures_util::FutureExt;
        let writer = RecordWriter::new(Recorder::disabled());
        let body = Bytes::from(vec![b' '; 4 * 1024 * 1024]);
        // Far more than the budget in total: each write must give its room back (a disabled
        // recorder drops a write at once) or a later one would wait forever.
        for _ in 0..(PINNED_BUDGET_KIB / 4096) * 3 {
            writer
                .write(pending(guest_body(body.clone()), Vec::new()))
                .now_or_never()
                .expect("room for the write");
        }
        assert_eq!(writer.room.available_permits(), PINNED_BUDGET_KIB as usize);
        // A write larger than the whole budget takes all of it, and does not wait forever.
        let huge = Bytes::from(vec![b' '; (PINNED_BUDGET_KIB as usize + 1) * 1024]);
        writer
            .write(pending(guest_body(huge), Vec::new()))
            .now_or_never()
            .expect("a write larger than the budget still goes");
    }

    /// A sink writing into a SQLite store, whose writes wait while the test holds its gate, and
    /// are slow.
    struct GatedStore {
        inner: switchyard_records::SqliteStore,
        gate: Arc<std::sync::Mutex<()>>,
    }

    impl switchyard_records::RecordSink for GatedStore {
        fn apply(&mut self, ops: &[RecordOp]) -> Result<(), switchyard_records::StoreError> {
            let _open = self.gate.lock().unwrap();
            // Slow enough that reading the store right after the last write was built would
            // miss it: settling must wait for the store, not only for the builds.
            std::thread::sleep(std::time::Duration::from_millis(20));
            self.inner.apply(ops)
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    #[expect(
        clippy::await_holding_lock,
        reason = "the gate is held on purpose while the writes are handed over"
    )]
    async fn settle_returns_once_every_write_handed_over_is_stored() {
        use switchyard_records::{ExchangeFilter, RecordStore, RecorderOptions, Redactor};
        let dir = tempfile::tempdir().unwrap();
        let path = switchyard_records::store_path(dir.path());
        let gate = Arc::new(std::sync::Mutex::new(()));
        let store = GatedStore {
            inner: switchyard_records::SqliteStore::open(&path).unwrap(),
            gate: Arc::clone(&gate),
        };
        // A small queue, so that some writes wait in the gateway for room in it.
        let options = RecorderOptions {
            queue_capacity: 8,
            ..RecorderOptions::default()
        };
        let recorder = Recorder::start(Box::new(store), Redactor::default(), options).unwrap();
        let writer = RecordWriter::new(recorder);
        let body = Bytes::from_static(br#"{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}"#);
        let held = gate.lock().unwrap();
        let mut ids = Vec::new();
        let mut writes = Vec::new();
        for _ in 0..100 {
            let write = pending(guest_body(body.clone()), Vec::new());
            ids.push(write.record.id);
            let writer = writer.clone();
            let mut handing_over = Box::pin(async move { writer.write(write).await });
            // One poll takes the write's room (there is plenty) and queues it or, once the
            // recorder's queue is full, leaves it waiting for room there: handed over either way.
            if futures_util::poll!(&mut handing_over).is_pending() {
                writes.push(tokio::spawn(handing_over));
            }
        }
        assert!(
            !writes.is_empty(),
            "some writes wait for the recorder's queue"
        );
        let settled = tokio::spawn({
            let writer = writer.clone();
            async move { writer.settle().await }
        });
        // Nothing can be stored while the gate is held, so settling cannot have finished.
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        assert!(!settled.is_finished(), "settled before anything was stored");
        drop(held);
        settled.await.unwrap().unwrap();
        let stored: Vec<_> = switchyard_records::SqliteStore::open(&path)
            .unwrap()
            .exchanges(ExchangeFilter::All)
            .unwrap()
            .into_iter()
            .map(|exchange| exchange.id)
            .collect();
        ids.sort();
        assert_eq!(
            stored, ids,
            "every write handed over before settling is stored"
        );
        for write in writes {
            write.await.unwrap();
        }
        assert_eq!(writer.room.available_permits(), PINNED_BUDGET_KIB as usize);
    }

    #[tokio::test]
    async fn each_write_frees_the_parts_the_recorder_handed_back_from_earlier_ones() {
        let dir = tempfile::tempdir().unwrap();
        let recorder =
            Recorder::open_dir(dir.path(), switchyard_records::Redactor::default()).unwrap();
        let writer = RecordWriter::new(recorder.clone());
        let text_write = || {
            let mut guest = guest_body(Bytes::new());
            guest.text = Some(JsonText::whole(Bytes::from_static(br#"{"contents":[]}"#)));
            pending(guest, Vec::new())
        };
        writer.write(text_write()).await;
        writer.settle().await.unwrap();
        writer.write(text_write()).await;
        writer.settle().await.unwrap();
        assert_eq!(recorder.stats().exchanges_as_text, 2);
        // The second write freed what the first one's record handed back; its own parts wait
        // for the next write.
        assert_eq!(recorder.free_spent(), 1);
    }

    #[test]
    fn a_delivery_keeps_calls_usage_and_the_merged_response_as_text() {
        let chunk = |v: Value| serde_json::from_value::<GenerateContentResponse>(v).unwrap();
        let only = chunk(json!({
            "candidates":[{"content":{"role":"model","parts":[
                {"functionCall":{"id":"c1","name":"ls","args":{"dir":"."}}}]},
                "finishReason":"STOP","index":0}],
            "usageMetadata":{"promptTokenCount":5,"candidatesTokenCount":2,"totalTokenCount":7,
                "cachedContentTokenCount":1,"thoughtsTokenCount":3}
        }));
        let one = std::slice::from_ref(&only);
        let delivery = Delivery::of(std::borrow::Cow::Borrowed(one), None);
        assert_eq!(
            delivery.guest_response.as_deref(),
            Some(serde_json::to_string(&only).unwrap().as_str()),
            "one chunk is the response as it is"
        );
        // Given the text it was sent as, that text is kept, byte for byte (calls and usage still
        // come from the chunk).
        let sent = format!("{}\n", only.to_json_line());
        let as_sent = Delivery::of(std::borrow::Cow::Borrowed(one), Some(&sent));
        assert_eq!(as_sent.guest_response.as_deref(), Some(sent.as_str()));
        assert_eq!(as_sent.function_calls.len(), 1);
        assert_eq!(delivery.function_calls.len(), 1);
        assert_eq!(delivery.function_calls[0].id, "c1");
        assert_eq!(delivery.function_calls[0].arguments, json!({"dir": "."}));
        let usage = delivery.usage.unwrap();
        assert_eq!(
            (usage.input, usage.cached, usage.output, usage.reasoning),
            (5, 1, 2, 3)
        );
        let text = chunk(
            json!({"candidates":[{"content":{"role":"model","parts":[{"text":"a"}]},"index":0}]}),
        );
        let two = Delivery::of(std::borrow::Cow::Owned(vec![text, only.clone()]), None);
        let merged: Value = serde_json::from_str(two.guest_response.as_deref().unwrap()).unwrap();
        assert_eq!(
            merged["candidates"][0]["content"]["parts"][0],
            json!({"text": "a"}),
            "several chunks are merged"
        );
        let nothing = Delivery::of(std::borrow::Cow::Owned(Vec::new()), None);
        assert!(nothing.guest_response.is_none() && nothing.usage.is_none());
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
        let merged = serde_json::to_value(merge_chunks(chunks.to_vec()).unwrap()).unwrap();
        assert_eq!(
            merged["candidates"][0]["content"]["parts"],
            json!([{"text":"a","thought":true},{"text":"bc"},{"functionCall":{"id":"c1","name":"ls","args":{}}}])
        );
        assert_eq!(merged["candidates"][0]["finishReason"], "STOP");
        assert_eq!(merged["usageMetadata"]["promptTokenCount"], 3);
        assert_eq!(merged["modelVersion"], "m");
        assert!(merge_chunks(Vec::new()).is_none());
        // A last chunk without a candidate (usage only): the earlier candidate carries the parts.
        let usage_last = [
            chunk(
                json!({"candidates":[{"content":{"role":"model","parts":[{"text":"x"}]},"index":0}]}),
            ),
            chunk(
                json!({"candidates":[],"usageMetadata":{"promptTokenCount":1,"candidatesTokenCount":1,"totalTokenCount":2}}),
            ),
        ];
        let merged = serde_json::to_value(merge_chunks(usage_last.to_vec()).unwrap()).unwrap();
        assert_eq!(
            merged["candidates"][0]["content"],
            json!({"role":"model","parts":[{"text":"x"}]})
        );
        assert_eq!(merged["usageMetadata"]["totalTokenCount"], 2);
    }
}
