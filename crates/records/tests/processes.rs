//! Real processes against one store: a writer killed with SIGKILL mid-stream, several processes
//! writing at once, and a live writer's in-flight rows surviving another process's recovery.
//!
//! The child processes are this test binary re-invoked on the ignored `child_*` helpers below
//! (selected with `--ignored --exact`), configured through environment variables.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::*;
use serde_json::json;
use switchyard_records::{
    ExchangeFilter, ExchangeStatus, RecordStore, Recorder, Redactor, RunState, SqliteStore,
    new_record_id, store_path,
};
use uuid::Uuid;

const CHILD_DIR: &str = "SWITCHYARD_RECORDS_TEST_DIR";
const CHILD_COUNT: &str = "SWITCHYARD_RECORDS_TEST_COUNT";
const WATCHDOG: Duration = Duration::from_secs(60);

fn spawn_child(helper: &str, dir: &std::path::Path, count: u64) -> Child {
    Command::new(std::env::current_exe().unwrap())
        .args([
            helper,
            "--exact",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_DIR, dir)
        .env(CHILD_COUNT, count.to_string())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap()
}

/// Reads the child's stdout for lines carrying `@@<tag> ` markers (libtest may print its own
/// text in front of them on the same line).
struct Markers {
    reader: BufReader<std::process::ChildStdout>,
}

impl Markers {
    fn of(child: &mut Child) -> Self {
        Markers {
            reader: BufReader::new(child.stdout.take().unwrap()),
        }
    }

    /// The payloads of the next `count` lines marked `@@<tag> `.
    fn next(&mut self, tag: &str, count: usize) -> Vec<String> {
        let marker = format!("@@{tag} ");
        let deadline = Instant::now() + WATCHDOG;
        let mut found = Vec::new();
        let mut line = String::new();
        while found.len() < count {
            assert!(
                Instant::now() < deadline,
                "child did not report {count} {tag} lines in time"
            );
            line.clear();
            if self.reader.read_line(&mut line).unwrap() == 0 {
                panic!("child stdout closed after {} {tag} lines", found.len());
            }
            if let Some((_, rest)) = line.trim_end().split_once(&marker) {
                found.push(rest.to_owned());
            }
        }
        found
    }
}

fn child_env() -> Option<(std::path::PathBuf, u64)> {
    let dir = std::env::var_os(CHILD_DIR)?;
    let count = std::env::var(CHILD_COUNT).ok()?.parse().ok()?;
    Some((dir.into(), count))
}

/// Child: one run and one exchange left in flight forever, then completed exchanges in a loop
/// (each reported as `done <id>` once flushed), with unflushed events between them, until killed.
#[test]
#[ignore = "helper process started by sigkill_during_writes_leaves_a_consistent_store"]
fn child_writes_until_killed() {
    let (dir, _) = child_env().expect("child env");
    let recorder = Recorder::open_dir(&dir, Redactor::default()).unwrap();
    let run_id = new_record_id();
    recorder.record_run(sample_run(run_id)).unwrap();
    let stuck = sample_exchange(new_record_id(), Some(run_id), 0);
    recorder.record_exchange(begun(&stuck)).unwrap();
    recorder.flush().unwrap();
    println!("@@run {run_id}");
    println!("@@stuck {}", stuck.id);
    for n in 1.. {
        let exchange = sample_exchange(new_record_id(), Some(run_id), n);
        recorder.record_exchange(begun(&exchange)).unwrap();
        for seq in 0..50 {
            let mut event = sample_events(run_id)[0].clone();
            event.seq = n * 100 + seq;
            event.event = json!({"type": "assistant_delta", "text": "x".repeat(200), "turn": n});
            recorder.record_event(event).unwrap();
        }
        recorder.record_exchange(exchange.clone()).unwrap();
        recorder.flush().unwrap();
        println!("@@done {} {n}", exchange.id);
    }
}

#[test]
fn sigkill_during_writes_leaves_a_consistent_store() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = spawn_child("child_writes_until_killed", dir.path(), 0);
    let mut markers = Markers::of(&mut child);
    let run_id: Uuid = markers.next("run", 1)[0].parse().unwrap();
    let stuck: Uuid = markers.next("stuck", 1)[0].parse().unwrap();
    let done = markers.next("done", 20);
    child.kill().unwrap(); // SIGKILL on Unix: no destructor, no flush, no lock release by us
    child.wait().unwrap();

    let store = SqliteStore::open(store_path(dir.path())).unwrap();
    assert_eq!(store.integrity_check().unwrap(), "ok");
    for entry in &done {
        let (id, n) = entry.split_once(' ').unwrap();
        let id: Uuid = id.parse().unwrap();
        let stored = store
            .exchange(id)
            .unwrap()
            .expect("completed exchange kept");
        assert_eq!(
            stored,
            sample_exchange(id, Some(run_id), n.parse().unwrap()),
            "completed exchange intact"
        );
    }
    let stuck = store.exchange(stuck).unwrap().unwrap();
    assert_eq!(stuck.status, ExchangeStatus::Incomplete);
    assert_eq!(
        stuck.error.as_ref().map(|e| e.kind.as_str()),
        Some("interrupted")
    );
    assert_eq!(
        store.run(run_id).unwrap().unwrap().state,
        RunState::Incomplete
    );
    let exchanges = store.exchanges(ExchangeFilter::Run(run_id)).unwrap();
    assert!(exchanges.len() > done.len());
    assert!(
        exchanges
            .iter()
            .all(|e| e.status != ExchangeStatus::InFlight),
        "no exchange of the dead writer stays in flight"
    );
    // The dead writer's lock file was cleaned up; only ours remains.
    let locks = std::fs::read_dir(dir.path().join("switchyard.sqlite3.writers"))
        .unwrap()
        .count();
    assert_eq!(locks, 1);
}

/// Child: writes `count` complete exchanges (own run), then closes and exits.
#[test]
#[ignore = "helper process started by concurrent_processes_write_one_store"]
fn child_writes_count_exchanges() {
    let (dir, count) = child_env().expect("child env");
    let recorder = Recorder::open_dir(&dir, Redactor::default()).unwrap();
    let run_id = new_record_id();
    recorder.record_run(sample_run(run_id)).unwrap();
    for n in 0..count {
        let exchange = sample_exchange(new_record_id(), Some(run_id), n);
        recorder.record_exchange(begun(&exchange)).unwrap();
        recorder.record_exchange(exchange).unwrap();
        if n % 10 == 0 {
            recorder.flush().unwrap();
        }
    }
    recorder.record_run(ended(sample_run(run_id))).unwrap();
    recorder.close().unwrap();
    println!("@@run {run_id}");
}

#[test]
fn concurrent_processes_write_one_store() {
    const PER_WRITER: u64 = 150;
    let dir = tempfile::tempdir().unwrap();
    let mut children: Vec<Child> = (0..2)
        .map(|_| spawn_child("child_writes_count_exchanges", dir.path(), PER_WRITER))
        .collect();
    // This process writes at the same time, through two recorders of its own.
    let local: Vec<_> = (0..2)
        .map(|_| {
            let recorder = Recorder::open_dir(dir.path(), Redactor::default()).unwrap();
            let run_id = new_record_id();
            std::thread::spawn(move || {
                recorder.record_run(sample_run(run_id)).unwrap();
                for n in 0..PER_WRITER {
                    recorder
                        .record_exchange(sample_exchange(new_record_id(), Some(run_id), n))
                        .unwrap();
                }
                recorder.record_run(ended(sample_run(run_id))).unwrap();
                recorder.close().unwrap();
                run_id
            })
        })
        .collect();
    let mut run_ids: Vec<Uuid> = local.into_iter().map(|t| t.join().unwrap()).collect();
    for child in &mut children {
        let mut markers = Markers::of(child);
        run_ids.push(markers.next("run", 1)[0].parse().unwrap());
        assert!(child.wait().unwrap().success());
    }

    let store = SqliteStore::open(store_path(dir.path())).unwrap();
    assert_eq!(store.integrity_check().unwrap(), "ok");
    assert_eq!(store.runs().unwrap().len(), 4);
    for run_id in run_ids {
        assert_eq!(store.run(run_id).unwrap().unwrap().state, RunState::Ended);
        let exchanges = store.exchanges(ExchangeFilter::Run(run_id)).unwrap();
        assert_eq!(exchanges.len() as u64, PER_WRITER);
        assert!(exchanges.iter().all(|e| e.status == ExchangeStatus::Ok));
    }
}

/// Child: begins one exchange, reports `ready <run> <exchange>`, waits for a line on stdin,
/// then completes it and exits.
#[test]
#[ignore = "helper process started by recovery_leaves_live_writers_alone"]
fn child_holds_an_exchange_in_flight() {
    let (dir, _) = child_env().expect("child env");
    let recorder = Recorder::open_dir(&dir, Redactor::default()).unwrap();
    let run_id = new_record_id();
    let exchange = sample_exchange(new_record_id(), Some(run_id), 7);
    recorder.record_run(sample_run(run_id)).unwrap();
    recorder.record_exchange(begun(&exchange)).unwrap();
    recorder.flush().unwrap();
    println!("@@ready {run_id} {}", exchange.id);
    let mut line = String::new();
    std::io::stdin().read_line(&mut line).unwrap();
    recorder.record_exchange(exchange).unwrap();
    recorder.record_run(ended(sample_run(run_id))).unwrap();
    recorder.close().unwrap();
}

#[test]
fn recovery_leaves_live_writers_alone() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = spawn_child("child_holds_an_exchange_in_flight", dir.path(), 0);
    let mut markers = Markers::of(&mut child);
    let ready = markers.next("ready", 1).remove(0);
    let (run_id, exchange_id) = ready.split_once(' ').unwrap();
    let (run_id, exchange_id): (Uuid, Uuid) =
        (run_id.parse().unwrap(), exchange_id.parse().unwrap());

    let mut store = SqliteStore::open(store_path(dir.path())).unwrap();
    assert_eq!(store.recover().unwrap().exchanges_marked_incomplete, 0);
    assert_eq!(
        store.exchange(exchange_id).unwrap().unwrap().status,
        ExchangeStatus::InFlight
    );
    assert_eq!(store.run(run_id).unwrap().unwrap().state, RunState::Running);

    child.stdin.as_mut().unwrap().write_all(b"go\n").unwrap();
    assert!(child.wait().unwrap().success());
    drop(markers);
    assert_eq!(
        store.exchange(exchange_id).unwrap().unwrap().status,
        ExchangeStatus::Ok
    );
    assert_eq!(store.run(run_id).unwrap().unwrap().state, RunState::Ended);
}

/// Writers that create the same new store at the same moment all open it: switching a new
/// database to WAL can answer "database is locked" without SQLite waiting, so the store retries
/// (without that, about 1 in 40 opens here failed).
#[test]
fn writers_creating_one_new_store_at_once_all_open_it() {
    const WRITERS: usize = 4;
    for _ in 0..100 {
        let dir = tempfile::tempdir().unwrap();
        let path = store_path(dir.path());
        let start = std::sync::Arc::new(std::sync::Barrier::new(WRITERS));
        let openers: Vec<_> = (0..WRITERS)
            .map(|_| {
                let (path, start) = (path.clone(), start.clone());
                std::thread::spawn(move || {
                    start.wait();
                    SqliteStore::open(&path).map(drop)
                })
            })
            .collect();
        for opener in openers {
            if let Err(e) = opener.join().unwrap() {
                panic!("a concurrent first open failed: {e}");
            }
        }
    }
}
