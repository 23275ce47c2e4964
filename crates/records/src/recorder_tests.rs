use std::sync::{Arc, Mutex};

use chrono::Utc;
use uuid::Uuid;

use super::*;
use crate::model::EventRecord;

/// A sink that keeps applied ops in memory; refuses any batch containing an event with
/// `seq == 13`. With a `gate`, each `apply` first waits until the test lets it through.
#[derive(Clone, Default)]
struct PickyStore {
    applied: Arc<Mutex<Vec<RecordOp>>>,
    gate: Option<Arc<Mutex<()>>>,
}

impl RecordSink for PickyStore {
    fn apply(&mut self, ops: &[RecordOp]) -> Result<(), StoreError> {
        let _open = self.gate.as_ref().map(|gate| gate.lock().unwrap());
        if ops
            .iter()
            .any(|op| matches!(op, RecordOp::Event(e) if e.seq == 13))
        {
            return Err(StoreError::Backend {
                context: "test",
                message: "seq 13 refused".into(),
            });
        }
        self.applied.lock().unwrap().extend_from_slice(ops);
        Ok(())
    }
}

fn picky_recorder(
    store: PickyStore,
    redactor: Redactor,
    options: RecorderOptions,
) -> (Recorder, Arc<Mutex<Vec<RecordOp>>>) {
    let applied = Arc::clone(&store.applied);
    let recorder = Recorder::start(Box::new(store), redactor, options).unwrap();
    (recorder, applied)
}

fn event(seq: u64, text: &str) -> EventRecord {
    EventRecord {
        run_id: Uuid::nil(),
        seq,
        at: Utc::now(),
        kind: "user_message".into(),
        event: serde_json::json!({"type": "user_message", "text": text}),
    }
}

fn seqs(applied: &[RecordOp]) -> Vec<u64> {
    applied
        .iter()
        .filter_map(|op| match op {
            RecordOp::Event(e) => Some(e.seq),
            _ => None,
        })
        .collect()
}

#[test]
fn recorder_is_send_and_sync() {
    fn assert_send_sync<T: Send + Sync + Clone>() {}
    assert_send_sync::<Recorder>();
}

#[test]
fn one_bad_op_fails_alone_and_is_reported_by_flush() {
    let (recorder, applied) = picky_recorder(
        PickyStore::default(),
        Redactor::new(["secret-token-123"]),
        RecorderOptions {
            queue_capacity: 64,
            max_batch: 64,
            ..Default::default()
        },
    );
    for seq in 10..16 {
        recorder
            .record_event(event(seq, "uses secret-token-123"))
            .unwrap();
    }
    match recorder.flush() {
        Err(RecordError::WriteFailed {
            failed_ops: 1,
            last_error,
        }) => assert!(last_error.contains("seq 13 refused"), "{last_error}"),
        other => panic!("expected one failed op, got {other:?}"),
    }
    recorder.flush().expect("failures are reported once");
    recorder.close().unwrap();
    let applied = applied.lock().unwrap();
    assert_eq!(seqs(&applied), [10, 11, 12, 14, 15]);
    assert!(
        applied
            .iter()
            .all(|op| matches!(op, RecordOp::Event(e) if e.event["text"] == "uses [REDACTED]"))
    );
    let stats = recorder.stats();
    assert_eq!((stats.written_ops, stats.failed_ops), (5, 1));
}

#[tokio::test(flavor = "current_thread")]
#[expect(
    clippy::await_holding_lock,
    reason = "the gate is held on purpose while the producer fills the queue"
)]
async fn a_full_queue_makes_producers_wait_without_blocking_the_runtime() {
    let gate = Arc::new(Mutex::new(()));
    let store = PickyStore {
        gate: Some(Arc::clone(&gate)),
        ..PickyStore::default()
    };
    let options = RecorderOptions {
        queue_capacity: 2,
        max_batch: 1,
        ..Default::default()
    };
    let (recorder, applied) = picky_recorder(store, Redactor::default(), options);
    let held = gate.lock().unwrap();
    // The writer takes one op and waits at the gate; two more fill the queue.
    let producer = tokio::spawn({
        let recorder = recorder.clone();
        async move {
            for seq in 0..10 {
                recorder
                    .record(RecordOp::Event(event(seq, "x")))
                    .await
                    .unwrap();
            }
        }
    });
    // One runtime thread: had the producer blocked it, this task would never run.
    let mut ticks = 0;
    for _ in 0..20 {
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        ticks += 1;
    }
    assert_eq!(ticks, 20);
    assert!(!producer.is_finished(), "the producer waits for room");
    assert!(applied.lock().unwrap().is_empty());
    drop(held);
    producer.await.unwrap();
    recorder.flush_async().await.unwrap();
    assert_eq!(seqs(&applied.lock().unwrap()), (0..10).collect::<Vec<_>>());
}

#[tokio::test]
async fn built_writes_run_on_the_writer_thread_in_order_and_are_redacted() {
    let (recorder, applied) = picky_recorder(
        PickyStore::default(),
        Redactor::new(["built-secret-456"]),
        RecorderOptions::default(),
    );
    let built_on = Arc::new(Mutex::new(None));
    recorder
        .record(RecordOp::Event(event(1, "before")))
        .await
        .unwrap();
    let on = Arc::clone(&built_on);
    recorder
        .record_built(move || {
            *on.lock().unwrap() = Some(std::thread::current().name().map(str::to_owned));
            Some(RecordOp::Event(event(2, "built with built-secret-456")))
        })
        .await
        .unwrap();
    recorder
        .record_built(|| panic!("a producer's bug"))
        .await
        .unwrap();
    recorder.record_built(|| None).await.unwrap();
    recorder
        .record(RecordOp::Event(event(3, "after")))
        .await
        .unwrap();
    let flushed = recorder.flush_async().await;
    assert!(
        matches!(flushed, Err(RecordError::WriteFailed { failed_ops: 1, .. })),
        "the panicking build fails alone: {flushed:?}"
    );
    let applied = applied.lock().unwrap();
    assert_eq!(seqs(&applied), [1, 2, 3]);
    assert!(
        matches!(&applied[1], RecordOp::Event(e) if e.event["text"] == "built with [REDACTED]")
    );
    assert_eq!(
        *built_on.lock().unwrap(),
        Some(Some("switchyard-records-writer".to_owned()))
    );
}

#[test]
fn a_closed_recorder_refuses_later_ops_and_a_disabled_one_takes_everything() {
    let (recorder, _) = picky_recorder(
        PickyStore::default(),
        Redactor::default(),
        RecorderOptions::default(),
    );
    recorder.close().unwrap();
    recorder.close().unwrap();
    assert!(matches!(
        recorder.record_event(event(1, "late")),
        Err(RecordError::Closed)
    ));
    let off = Recorder::disabled();
    assert!(!off.is_enabled());
    off.record_event(event(1, "dropped")).unwrap();
    off.flush().unwrap();
    assert_eq!(off.stats(), RecorderStats::default());
}

#[test]
fn dropping_the_last_handle_stores_what_was_queued() {
    let (recorder, applied) = picky_recorder(
        PickyStore::default(),
        Redactor::default(),
        RecorderOptions::default(),
    );
    let clone = recorder.clone();
    recorder.record_event(event(1, "a")).unwrap();
    clone.record_event(event(2, "b")).unwrap();
    drop(recorder);
    drop(clone);
    assert_eq!(seqs(&applied.lock().unwrap()), [1, 2]);
}

/// A sink that is unavailable for its first `outages` calls (or forever with `u32::MAX`).
struct FlakyStore {
    outages: u32,
    calls: Arc<Mutex<u32>>,
    applied: Arc<Mutex<Vec<RecordOp>>>,
}

impl RecordSink for FlakyStore {
    fn apply(&mut self, ops: &[RecordOp]) -> Result<(), StoreError> {
        let mut calls = self.calls.lock().unwrap();
        *calls += 1;
        if *calls <= self.outages {
            return Err(StoreError::Unavailable {
                context: "test",
                message: "server gone".into(),
            });
        }
        self.applied.lock().unwrap().extend_from_slice(ops);
        Ok(())
    }
}

type Held<T> = Arc<Mutex<T>>;

fn flaky_recorder(outages: u32) -> (Recorder, Held<u32>, Held<Vec<RecordOp>>) {
    let calls = Arc::new(Mutex::new(0));
    let applied = Arc::new(Mutex::new(Vec::new()));
    let store = FlakyStore {
        outages,
        calls: Arc::clone(&calls),
        applied: Arc::clone(&applied),
    };
    let options = RecorderOptions {
        queue_capacity: 64,
        max_batch: 64,
        unavailable_retries: 3,
        retry_backoff: Duration::from_millis(1),
    };
    let recorder = Recorder::start(Box::new(store), Redactor::default(), options).unwrap();
    (recorder, calls, applied)
}

#[test]
fn an_outage_shorter_than_the_retries_loses_nothing() {
    let (recorder, calls, applied) = flaky_recorder(3);
    for seq in 0..10 {
        recorder.record_event(event(seq, "x")).unwrap();
    }
    recorder.flush().unwrap();
    assert_eq!(seqs(&applied.lock().unwrap()), (0..10).collect::<Vec<_>>());
    assert!(*calls.lock().unwrap() >= 4);
    assert_eq!(recorder.stats().failed_ops, 0);
}

#[test]
fn an_outage_past_the_retries_counts_every_lost_op() {
    let (recorder, _calls, applied) = flaky_recorder(u32::MAX);
    recorder.flush().unwrap();
    for seq in 0..7 {
        recorder.record_event(event(seq, "x")).unwrap();
    }
    match recorder.flush() {
        Err(RecordError::StoreUnavailable {
            failed_ops,
            last_error,
        }) => {
            assert_eq!(failed_ops, 7);
            assert!(last_error.contains("server gone"), "{last_error}");
        }
        other => panic!("expected StoreUnavailable, got {other:?}"),
    }
    assert_eq!(recorder.stats().failed_ops, 7);
    assert!(applied.lock().unwrap().is_empty());
}
