//! Round trip: what producers record through a `Recorder` is what readers get back.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use switchyard_records::{
    ExchangeFilter, ExchangeStatus, RecordError, RecordStore, Recorder, Redactor, RunState,
    SqliteStore, StoreError, new_record_id, store_path,
};

#[test]
fn runs_events_raw_lines_and_exchanges_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let recorder = Recorder::open_dir(dir.path(), Redactor::default()).unwrap();
    let run_id = new_record_id();
    let run = sample_run(run_id);
    recorder.record_run(run.clone()).unwrap();
    for event in sample_events(run_id) {
        recorder.record_event(event).unwrap();
    }
    for line in sample_raw_lines(run_id) {
        recorder.record_raw_line(line).unwrap();
    }
    let exchange = sample_exchange(new_record_id(), Some(run_id), 1);
    recorder.record_exchange(begun(&exchange)).unwrap();
    recorder.flush().unwrap();

    let store = SqliteStore::open(store_path(dir.path())).unwrap();
    assert_eq!(store.run(run_id).unwrap().unwrap().state, RunState::Running);
    assert_eq!(
        store.exchange(exchange.id).unwrap().unwrap().status,
        ExchangeStatus::InFlight,
        "a live writer's exchange stays in flight"
    );

    recorder.record_exchange(exchange.clone()).unwrap();
    let unattributed = sample_exchange(new_record_id(), None, 2);
    recorder.record_exchange(unattributed.clone()).unwrap();
    recorder.record_run(ended(run.clone())).unwrap();
    recorder.close().unwrap();
    assert!(matches!(
        recorder.record_run(run.clone()),
        Err(RecordError::Closed)
    ));

    assert_eq!(store.runs().unwrap(), vec![ended(run)]);
    assert_eq!(store.events(run_id).unwrap(), sample_events(run_id));
    assert_eq!(store.raw_lines(run_id).unwrap(), sample_raw_lines(run_id));
    assert_eq!(
        store.raw_line_count(run_id).unwrap(),
        sample_raw_lines(run_id).len() as u64
    );
    assert_eq!(store.raw_line_count(uuid::Uuid::now_v7()).unwrap(), 0);
    assert_eq!(
        store.exchanges(ExchangeFilter::Run(run_id)).unwrap(),
        vec![exchange.clone()]
    );
    assert_eq!(
        store.exchanges(ExchangeFilter::Unattributed).unwrap(),
        vec![unattributed.clone()]
    );
    assert_eq!(
        store.exchanges(ExchangeFilter::All).unwrap(),
        vec![exchange, unattributed]
    );
    assert_eq!(store.integrity_check().unwrap(), "ok");
}

#[test]
fn run_prefixes_resolve_uniquely_or_fail_typed() {
    let dir = tempfile::tempdir().unwrap();
    let recorder = Recorder::open_dir(dir.path(), Redactor::default()).unwrap();
    let first = new_record_id();
    let second = new_record_id();
    recorder.record_run(sample_run(first)).unwrap();
    recorder.record_run(sample_run(second)).unwrap();
    recorder.close().unwrap();
    let store = SqliteStore::open(store_path(dir.path())).unwrap();

    assert_eq!(store.resolve_run(&first.to_string()).unwrap().id, first);
    let simple = second.simple().to_string();
    assert_eq!(store.resolve_run(&simple[..30]).unwrap().id, second);
    // v7 ids made in the same millisecond share their first 12 hex digits.
    assert!(matches!(
        store.resolve_run(&simple[..4]),
        Err(StoreError::AmbiguousRunPrefix { count: 2, .. })
    ));
    assert!(matches!(
        store.resolve_run("zz"),
        Err(StoreError::RunNotFound(_))
    ));
    assert!(matches!(
        store.resolve_run("%"),
        Err(StoreError::RunNotFound(_))
    ));
}

#[test]
fn disabled_recorder_accepts_every_op_even_after_close() {
    let recorder = Recorder::disabled();
    assert!(!recorder.is_enabled());
    recorder.record_run(sample_run(new_record_id())).unwrap();
    recorder.flush().unwrap();
    recorder.close().unwrap();
    // An enabled recorder answers `Closed` here; records off never fails a producer.
    recorder.record_run(sample_run(new_record_id())).unwrap();
    recorder.flush().unwrap();
}

#[test]
fn a_new_store_has_pages_that_hold_a_whole_exchange_record() {
    let dir = tempfile::tempdir().unwrap();
    let path = store_path(dir.path());
    let recorder = Recorder::open_sqlite(&path, Redactor::default()).unwrap();
    // About the size of a Gemini CLI exchange record (~4.6 KB).
    let mut exchange = sample_exchange(new_record_id(), None, 1);
    exchange.notes.push("n".repeat(3_000));
    recorder.record_exchange(exchange.clone()).unwrap();
    recorder.close().unwrap();

    let conn = rusqlite::Connection::open(&path).unwrap();
    let page_size: i64 = conn
        .query_row("PRAGMA page_size", [], |row| row.get(0))
        .unwrap();
    assert_eq!(page_size, 16 * 1024);
    let stored: i64 = conn
        .query_row(
            "SELECT length(record) FROM exchanges WHERE id = ?1",
            [exchange.id.to_string()],
            |row| row.get(0),
        )
        .unwrap();
    // A table row is kept whole in its leaf page up to page size - 35 bytes.
    assert!(
        stored > 4 * 1024 && stored < page_size - 35,
        "the exchange ({stored} bytes) would overflow a 4 KiB page but fits one page here"
    );
}

#[test]
fn a_small_queue_applies_backpressure_and_loses_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(store_path(dir.path())).unwrap();
    let recorder = Recorder::start(
        Box::new(store),
        Redactor::default(),
        switchyard_records::RecorderOptions {
            queue_capacity: 2,
            max_batch: 3,
            ..Default::default()
        },
    )
    .unwrap();
    let run_id = new_record_id();
    let threads: Vec<_> = (0..4u64)
        .map(|thread| {
            let recorder = recorder.clone();
            std::thread::spawn(move || {
                for i in 0..250u64 {
                    let mut event = sample_events(run_id)[0].clone();
                    event.seq = thread * 1000 + i;
                    recorder.record_event(event).unwrap();
                }
            })
        })
        .collect();
    threads.into_iter().for_each(|t| t.join().unwrap());
    recorder.close().unwrap();
    let stats = recorder.stats();
    assert_eq!(stats.written_ops, 1000);
    assert!(
        stats.batches >= 1000 / 3,
        "batches are bounded by max_batch: {stats:?}"
    );
    assert!(
        stats.writer_cpu > std::time::Duration::ZERO,
        "the writer's CPU is counted: {stats:?}"
    );
    let store = SqliteStore::open(store_path(dir.path())).unwrap();
    assert_eq!(store.events(run_id).unwrap().len(), 1000);
}

#[test]
fn stores_from_a_newer_schema_are_refused_and_missing_stores_are_not_created() {
    let dir = tempfile::tempdir().unwrap();
    let path = store_path(dir.path());
    assert!(matches!(
        SqliteStore::open_existing(&path),
        Err(StoreError::Missing(_))
    ));
    assert!(!path.exists());
    drop(SqliteStore::open(&path).unwrap());
    rusqlite::Connection::open(&path)
        .unwrap()
        .pragma_update(None, "user_version", 99)
        .unwrap();
    assert!(matches!(
        SqliteStore::open_existing(&path),
        Err(StoreError::UnsupportedSchema {
            found: 99,
            supported: switchyard_records::sqlite::SCHEMA_VERSION
        })
    ));
}
