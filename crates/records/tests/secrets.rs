//! Secrets never reach the store: the database files themselves (main file, WAL, shared memory)
//! are scanned byte by byte after recording values that carried the secrets.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use serde_json::json;
use switchyard_records::{
    ExchangeFilter, RawLineRecord, RawStream, RecordStore, Recorder, Redactor, SqliteStore,
    TypedError, new_record_id, store_path,
};

const UPSTREAM_KEY: &str = "AIzaSyTEST-upstream-key-0123456789";
const RUN_TOKEN: &str = "sy-run-token-abcdef123456";
/// Never registered with the redactor: only the generic `Bearer` pattern can catch it.
const UNREGISTERED: &str = "unregistered-token-xyz987";

fn scan_files(dir: &std::path::Path) -> Vec<(String, Vec<u8>)> {
    std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .filter(|entry| entry.file_type().unwrap().is_file())
        .map(|entry| {
            (
                entry.file_name().to_string_lossy().into_owned(),
                std::fs::read(entry.path()).unwrap(),
            )
        })
        .collect()
}

fn contains(haystack: &[u8], needle: &str) -> bool {
    haystack
        .windows(needle.len())
        .any(|window| window == needle.as_bytes())
}

fn assert_no_secret_in_files(dir: &std::path::Path) {
    let files = scan_files(dir);
    assert!(
        files.iter().any(|(name, _)| name.ends_with("-wal")),
        "WAL file present: {:?}",
        files.iter().map(|f| &f.0).collect::<Vec<_>>()
    );
    for (name, bytes) in &files {
        for secret in [UPSTREAM_KEY, RUN_TOKEN, UNREGISTERED] {
            assert!(!contains(bytes, secret), "{secret} found in {name}");
        }
    }
    assert!(
        files
            .iter()
            .any(|(_, bytes)| contains(bytes, "[REDACTED]") && contains(bytes, "request number 1")),
        "the redacted records were written"
    );
}

#[test]
fn secrets_never_reach_the_database_files() {
    let dir = tempfile::tempdir().unwrap();
    let recorder = Recorder::open_dir(dir.path(), Redactor::new([UPSTREAM_KEY])).unwrap();
    recorder.add_secret(RUN_TOKEN); // per-run token minted after the recorder started
    let run_id = new_record_id();
    let mut run = sample_run(run_id);
    run.argv.push(format!("--token={RUN_TOKEN}"));
    recorder.record_run(run).unwrap();
    let mut event = sample_events(run_id)[0].clone();
    event.event = json!({"type": "user_message", "text": format!("my key is {UPSTREAM_KEY}")});
    recorder.record_event(event).unwrap();
    recorder
        .record_raw_line(RawLineRecord {
            run_id,
            stream: RawStream::Stderr,
            seq: 0,
            line: format!("debug: Authorization: Bearer {UNREGISTERED}"),
        })
        .unwrap();
    let mut exchange = sample_exchange(new_record_id(), Some(run_id), 1);
    exchange.upstream_url =
        format!("https://example.invalid/v1beta/models/m:generateContent?key={UPSTREAM_KEY}");
    exchange.guest_request["headers"] =
        json!({"x-goog-api-key": UPSTREAM_KEY, "authorization": format!("Bearer {RUN_TOKEN}")});
    exchange.attempts[0]
        .raw_events
        .push(format!("{{\"echo\":\"Bearer {UNREGISTERED}\"}}"));
    exchange.attempts[0].error = Some(TypedError {
        kind: "upstream_status".into(),
        message: format!("401 for key {UPSTREAM_KEY}"),
    });
    exchange
        .notes
        .push(format!("x-goog-api-key: {UPSTREAM_KEY}"));
    // Secrets inside the system prompts, which the store moves into the deduplicated blobs table.
    let guest_prompt = big_system_prompt(4, &format!("The key is {UPSTREAM_KEY}."));
    exchange.guest_request["systemInstruction"] = json!({"parts": [{"text": guest_prompt}]});
    let upstream_prompt = big_system_prompt(4, &format!("The run token is {RUN_TOKEN}."));
    exchange.attempts[0].request["messages"][0] =
        json!({"role": "system", "content": upstream_prompt});
    recorder.record_exchange(exchange.clone()).unwrap();
    recorder.flush().unwrap();

    // While the writer is open the records live in the WAL.
    assert_no_secret_in_files(dir.path());

    recorder.close().unwrap();
    let store = SqliteStore::open(store_path(dir.path())).unwrap();
    let stored = store
        .exchanges(ExchangeFilter::Run(run_id))
        .unwrap()
        .remove(0);
    assert_eq!(
        stored.guest_request["headers"],
        json!({"x-goog-api-key": "[REDACTED]", "authorization": "[REDACTED]"})
    );
    assert_eq!(
        stored.upstream_url,
        "https://example.invalid/v1beta/models/m:generateContent?key=[REDACTED]"
    );
    assert_eq!(stored.notes.last().unwrap(), "x-goog-api-key: [REDACTED]");
    let blobs: i64 = rusqlite::Connection::open(store.path())
        .unwrap()
        .query_row("SELECT count(*) FROM blobs", [], |row| row.get(0))
        .unwrap();
    assert_eq!(blobs, 2, "both system prompts were stored as blobs");
    assert_eq!(
        stored.guest_request["systemInstruction"]["parts"][0]["text"],
        json!(guest_prompt.replace(UPSTREAM_KEY, "[REDACTED]"))
    );
    assert_eq!(
        stored.attempts[0].request["messages"][0]["content"],
        json!(upstream_prompt.replace(RUN_TOKEN, "[REDACTED]"))
    );
    assert_eq!(
        store.raw_lines(run_id).unwrap()[0].line,
        "debug: Authorization: [REDACTED]"
    );
    store.checkpoint().unwrap();
    assert_no_secret_in_files(dir.path());
}
