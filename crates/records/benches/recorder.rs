//! Recorder cost: how long `record` takes on the producer's (hot) path, and how many records per
//! second the writer thread commits to SQLite (batched transactions, WAL, redaction included).
//!
//! `writer_throughput` also records exchanges the size of Gemini CLI's real first request (~47 KB
//! guest request, the same text as the upstream request) two ways: as parsed values (`gemini`) and
//! as text pieces with the system instruction and tools shared (`gemini_text`, what the gateway
//! hands over on a translation-cache hit), so the two paths compare in one run.
//! `prepare_gemini_text` times the writer's part of the text path alone (screening, skeleton
//! redaction, assembling the stored JSON), without SQLite.
//!
//! Run: `cargo bench -p switchyard-records --bench recorder`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../tests/common/mod.rs"]
mod common;

use bytes::Bytes;
use divan::Bencher;
use divan::counter::ItemsCount;
use serde_json::value::RawValue;
use switchyard_records::{
    ExchangeText, JsonText, RecordOp, RecordSink, Recorder, RecorderOptions, Redactor, SharedJson,
    SqliteStore, StoreError, new_record_id, store_path,
};

/// The first request Gemini CLI 0.61.0 sent in a captured run (the gateway's benchmark data).
const GEMINI_REQUEST: &[u8] =
    include_bytes!("../../gateway/benches/data/gemini-cli-0.61.0-first-request.json");

fn main() {
    divan::main();
}

/// A sink that keeps nothing, so `record` is measured without the writer ever pushing back.
struct DiscardingStore;

impl RecordSink for DiscardingStore {
    fn apply(&mut self, _ops: &[RecordOp]) -> Result<(), StoreError> {
        Ok(())
    }
}

fn event_op(seq: u64) -> RecordOp {
    let mut event = common::sample_events(new_record_id())[1].clone();
    event.seq = seq;
    RecordOp::Event(event)
}

fn exchange_op() -> RecordOp {
    RecordOp::UpsertExchange(Box::new(common::sample_exchange(
        new_record_id(),
        Some(new_record_id()),
        1,
    )))
}

/// The Gemini CLI request as text pieces, `systemInstruction` and `tools` shared.
fn gemini_text(system: &SharedJson, tools: &SharedJson) -> JsonText {
    let body = Bytes::from_static(GEMINI_REQUEST);
    let fields: std::collections::BTreeMap<&str, &RawValue> =
        serde_json::from_slice(GEMINI_REQUEST).unwrap();
    let offset = |raw: &RawValue| raw.get().as_ptr() as usize - GEMINI_REQUEST.as_ptr() as usize;
    let mut places = [
        (offset(fields["systemInstruction"]), system),
        (offset(fields["tools"]), tools),
    ];
    places.sort_by_key(|(at, _)| *at);
    let mut text = JsonText::default();
    let mut at = 0;
    for (start, shared) in places {
        text.push_text(body.slice(at..start));
        text.push_shared(shared.clone());
        at = start + shared.text().len();
    }
    text.push_text(body.slice(at..));
    text
}

/// One exchange the size of a Gemini CLI request, as values or as text pieces.
fn gemini_exchange_op(as_text: bool, shared: &(SharedJson, SharedJson)) -> RecordOp {
    let mut exchange = common::sample_exchange(new_record_id(), Some(new_record_id()), 1);
    exchange.attempts.truncate(1);
    if !as_text {
        let request: serde_json::Value = serde_json::from_slice(GEMINI_REQUEST).unwrap();
        exchange.guest_request = request.clone();
        exchange.attempts[0].request = request;
        return RecordOp::UpsertExchange(Box::new(exchange));
    }
    let text = gemini_text(&shared.0, &shared.1);
    RecordOp::UpsertExchangeText(Box::new(ExchangeText {
        record: exchange,
        guest_request: text.clone(),
        attempt_requests: vec![text],
        guest_response: None,
    }))
}

/// The shared system instruction and tools of [`GEMINI_REQUEST`].
fn gemini_shared() -> (SharedJson, SharedJson) {
    let fields: std::collections::BTreeMap<&str, &RawValue> =
        serde_json::from_slice(GEMINI_REQUEST).unwrap();
    let shared =
        |name: &str| SharedJson::new(Bytes::copy_from_slice(fields[name].get().as_bytes()));
    (shared("systemInstruction"), shared("tools"))
}

/// A recorder whose writer discards everything (see [`DiscardingStore`]).
fn discarding_recorder() -> Recorder {
    Recorder::start(
        Box::new(DiscardingStore),
        Redactor::new(["bench-secret-key"]),
        RecorderOptions::default(),
    )
    .unwrap()
}

/// Producer-side cost of `record` for one event (queue never full).
#[divan::bench]
fn enqueue_event(bencher: Bencher) {
    let recorder = discarding_recorder();
    bencher
        .with_inputs(|| event_op(0))
        .bench_local_values(|op| recorder.record(op).unwrap());
    recorder.close().unwrap();
}

/// Producer-side cost of `record` for one full exchange (queue never full).
#[divan::bench]
fn enqueue_exchange(bencher: Bencher) {
    let recorder = discarding_recorder();
    bencher
        .with_inputs(exchange_op)
        .bench_local_values(|op| recorder.record(op).unwrap());
    recorder.close().unwrap();
}

const BATCH: usize = 2_000;

/// Writer throughput into SQLite: `BATCH` ops recorded then flushed (redaction included).
#[divan::bench(args = ["event", "exchange", "gemini", "gemini_text"], sample_count = 10, sample_size = 1)]
fn writer_throughput(bencher: Bencher, kind: &str) {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(store_path(dir.path())).unwrap();
    let recorder = Recorder::start(
        Box::new(store),
        Redactor::new(["bench-secret-key"]),
        RecorderOptions::default(),
    )
    .unwrap();
    let mut seq = 0u64;
    let shared = gemini_shared();
    bencher
        .counter(ItemsCount::new(BATCH))
        .with_inputs(|| {
            (0..BATCH)
                .map(|_| {
                    seq += 1;
                    match kind {
                        "event" => event_op(seq),
                        "gemini" => gemini_exchange_op(false, &shared),
                        "gemini_text" => gemini_exchange_op(true, &shared),
                        _ => exchange_op(),
                    }
                })
                .collect::<Vec<_>>()
        })
        .bench_local_values(|ops| {
            for op in ops {
                recorder.record(op).unwrap();
            }
            recorder.flush().unwrap();
        });
    recorder.close().unwrap();
}

/// Writer-side cost of turning one Gemini-sized exchange handed over as text (a translation-cache
/// hit) into the op the store writes: screening, skeleton redaction, assembling the stored JSON.
#[divan::bench]
fn prepare_gemini_text(bencher: Bencher) {
    let shared = gemini_shared();
    let redactor = Redactor::new(["bench-secret-key"]);
    let mut blobs = switchyard_records::document::SharedBlobs::default();
    bencher
        .with_inputs(|| match gemini_exchange_op(true, &shared) {
            RecordOp::UpsertExchangeText(text) => *text,
            _ => unreachable!("as_text gives text"),
        })
        .bench_local_values(|text| {
            switchyard_records::document::prepare(text, &redactor, &mut blobs)
        });
}

/// The redaction screen over the whole Gemini CLI request text (~47 KB of JSON): bytes per
/// second of the one pass that decides whether text can be stored as it is.
#[divan::bench]
fn screen_gemini_request(bencher: Bencher) {
    let redactor = Redactor::new(["bench-secret-key"]);
    bencher
        .counter(divan::counter::BytesCount::new(GEMINI_REQUEST.len()))
        .bench_local(|| redactor.screen_json_text(divan::black_box(GEMINI_REQUEST)));
}
