//! Recorder cost: how long `record` takes on the producer's (hot) path, and how many records per
//! second the writer thread commits to SQLite (batched transactions, WAL, redaction included).
//!
//! Run: `cargo bench -p switchyard-records --bench recorder`.

#[path = "../tests/common/mod.rs"]
mod common;

use divan::Bencher;
use divan::counter::ItemsCount;
use switchyard_records::{
    EventRecord, ExchangeRecord, RecordOp, RecordStore, Recorder, RecorderOptions, Redactor,
    SqliteStore, StoreError, new_record_id, store_path,
};

fn main() {
    divan::main();
}

/// A store that keeps nothing, so `record` is measured without the writer ever pushing back.
struct DiscardingStore;

impl RecordStore for DiscardingStore {
    fn apply(&mut self, _ops: &[RecordOp]) -> Result<(), StoreError> {
        Ok(())
    }
    fn recover(&mut self) -> Result<switchyard_records::RecoveryReport, StoreError> {
        Ok(Default::default())
    }
    fn runs(&self) -> Result<Vec<switchyard_records::RunRecord>, StoreError> {
        Ok(Vec::new())
    }
    fn run(&self, _id: uuid::Uuid) -> Result<Option<switchyard_records::RunRecord>, StoreError> {
        Ok(None)
    }
    fn resolve_run(&self, id: &str) -> Result<switchyard_records::RunRecord, StoreError> {
        Err(StoreError::RunNotFound(id.into()))
    }
    fn events(&self, _id: uuid::Uuid) -> Result<Vec<EventRecord>, StoreError> {
        Ok(Vec::new())
    }
    fn raw_lines(
        &self,
        _id: uuid::Uuid,
    ) -> Result<Vec<switchyard_records::RawLineRecord>, StoreError> {
        Ok(Vec::new())
    }
    fn exchanges(
        &self,
        _filter: switchyard_records::ExchangeFilter,
    ) -> Result<Vec<ExchangeRecord>, StoreError> {
        Ok(Vec::new())
    }
    fn exchange(&self, _id: uuid::Uuid) -> Result<Option<ExchangeRecord>, StoreError> {
        Ok(None)
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
#[divan::bench(args = ["event", "exchange"], sample_count = 10, sample_size = 1)]
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
    bencher
        .counter(ItemsCount::new(BATCH))
        .with_inputs(|| {
            (0..BATCH)
                .map(|_| {
                    seq += 1;
                    if kind == "event" {
                        event_op(seq)
                    } else {
                        exchange_op()
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
