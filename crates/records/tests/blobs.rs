//! Content-addressed deduplication: the system prompt, tool declarations and history entries
//! every exchange of a session repeats are stored once in the `blobs` table, and every read gives
//! back exactly what was recorded.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use serde_json::json;
use switchyard_records::sqlite::SCHEMA_VERSION;
use switchyard_records::{
    ExchangeFilter, RecordOp, RecordSink, RecordStore, Recorder, Redactor, SqliteStore, StoreError,
    new_record_id, store_path,
};

fn blob_count(path: &std::path::Path) -> i64 {
    rusqlite::Connection::open(path)
        .unwrap()
        .query_row("SELECT count(*) FROM blobs", [], |row| row.get(0))
        .unwrap()
}

/// Bytes the database occupies as its readers see it (main file plus committed WAL pages).
fn database_bytes(store: &SqliteStore) -> i64 {
    let conn = rusqlite::Connection::open(store.path()).unwrap();
    let pages: i64 = conn
        .query_row("PRAGMA page_count", [], |row| row.get(0))
        .unwrap();
    let page_size: i64 = conn
        .query_row("PRAGMA page_size", [], |row| row.get(0))
        .unwrap();
    pages * page_size
}

fn upsert(exchange: &switchyard_records::ExchangeRecord) -> RecordOp {
    RecordOp::UpsertExchange(Box::new(exchange.clone()))
}

#[test]
fn exchanges_sharing_a_prompt_and_tools_store_them_once_and_read_back_equal() {
    let dir = tempfile::tempdir().unwrap();
    let path = store_path(dir.path());
    let run_id = new_record_id();
    let prompt = big_system_prompt(23, "Be concise.");
    let first = session_exchange(new_record_id(), Some(run_id), 1, &prompt);
    let second = session_exchange(new_record_id(), Some(run_id), 2, &prompt);
    assert!(serde_json::to_string(&first).unwrap().len() > 80_000);

    let mut store = SqliteStore::open(&path).unwrap();
    let empty = database_bytes(&store);
    store.apply(&[upsert(&first)]).unwrap();
    let after_first = database_bytes(&store);
    store.apply(&[upsert(&second)]).unwrap();
    let after_second = database_bytes(&store);
    let first_growth = after_first - empty;
    let second_growth = after_second - after_first;
    assert!(
        second_growth * 8 < first_growth,
        "the second exchange adds {second_growth} bytes, the first {first_growth}"
    );

    // guest systemInstruction, guest tools, upstream system message, upstream tools; the context
    // request repeats the guest request's blobs.
    assert_eq!(blob_count(&path), 4);
    let rows: Vec<String> = rusqlite::Connection::open(&path)
        .unwrap()
        .prepare("SELECT record FROM exchanges")
        .unwrap()
        .query_map([], |row| row.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    for row in &rows {
        assert!(row.len() < 4_000, "stored row is {} bytes", row.len());
        assert_eq!(row.matches(r#"{"$blob":"sha256:"#).count(), 6, "{row}");
        assert!(!row.contains("Rule 1:"));
    }

    assert_eq!(store.exchange(first.id).unwrap().unwrap(), first);
    assert_eq!(
        store.exchanges(ExchangeFilter::Run(run_id)).unwrap(),
        vec![first.clone(), second.clone()]
    );
    drop(store);
    let reopened = SqliteStore::open(&path).unwrap();
    assert_eq!(
        reopened.exchanges(ExchangeFilter::All).unwrap(),
        vec![first, second]
    );
}

#[test]
fn a_growing_history_costs_each_turn_its_new_entries_only() {
    let dir = tempfile::tempdir().unwrap();
    let path = store_path(dir.path());
    let prompt = big_system_prompt(8, "History.");
    let mut store = SqliteStore::open(&path).unwrap();
    // Each turn resends the history and adds a ~6 KB tool result to it (guest and upstream).
    let mut growth = Vec::new();
    let mut written = Vec::new();
    for turn in 0..8 {
        let mut exchange = session_exchange(new_record_id(), None, turn, &prompt);
        let result = format!("file {turn}: {}", "lorem ipsum ".repeat(500));
        for earlier in 0..=turn {
            let text = if earlier == turn {
                result.clone()
            } else {
                format!("file {earlier}: {}", "lorem ipsum ".repeat(500))
            };
            exchange.guest_request["contents"]
                .as_array_mut()
                .unwrap()
                .push(json!({"role": "user", "parts": [{"text": text}]}));
            exchange.attempts[0].request["messages"]
                .as_array_mut()
                .unwrap()
                .push(json!({"role": "user", "content": text}));
        }
        exchange.context_request = Some(exchange.attempts[0].request.clone());
        let before = database_bytes(&store);
        store.apply(&[upsert(&exchange)]).unwrap();
        growth.push(database_bytes(&store) - before);
        written.push(exchange);
    }
    // Without deduplication turns 5 to 8 would store their whole history three times (guest,
    // context and upstream request): 3 × 6 KB × (5 + 6 + 7 + 8) ≈ 470 KB. With it, each stores its
    // new entry twice and markers for the rest.
    let last_four: i64 = growth[4..].iter().sum();
    assert!(last_four < 160 * 1024, "bytes added per turn: {growth:?}");
    // Four shared values plus two entries per turn (its guest and its upstream form).
    assert_eq!(blob_count(&path), 4 + 2 * 8);
    assert_eq!(store.exchanges(ExchangeFilter::All).unwrap(), written);
}

#[test]
fn exchanges_recorded_through_a_recorder_share_blobs_across_batches_and_stores() {
    let dir = tempfile::tempdir().unwrap();
    let prompt = big_system_prompt(8, "Shared.");
    let mut written = Vec::new();
    for round in 0..2 {
        // Two recorder instances: the second does not know the blobs the first wrote.
        let recorder = Recorder::open_dir(dir.path(), Redactor::default()).unwrap();
        for n in 0..3 {
            let exchange = session_exchange(new_record_id(), None, round * 10 + n, &prompt);
            recorder.record_exchange(exchange.clone()).unwrap();
            if n == 1 {
                recorder.flush().unwrap();
            }
            written.push(exchange);
        }
        recorder.close().unwrap();
    }
    let path = store_path(dir.path());
    assert_eq!(blob_count(&path), 4);
    let store = SqliteStore::open(&path).unwrap();
    assert_eq!(store.exchanges(ExchangeFilter::All).unwrap(), written);
    assert_eq!(
        store.exchanges(ExchangeFilter::Unattributed).unwrap(),
        written
    );
}

#[test]
fn small_values_stay_inline_and_marker_lookalikes_survive() {
    let dir = tempfile::tempdir().unwrap();
    let path = store_path(dir.path());
    let mut exchange = sample_exchange(new_record_id(), None, 1);
    // A user value shaped like a marker outside the blob places is left alone...
    exchange.guest_request["contents"][0]["parts"]
        .as_array_mut()
        .unwrap()
        .push(json!({"$blob": "sha256:not-a-real-blob"}));
    exchange.upstream_message = Some(json!({"$blob": "sha256:also-not"}));
    // ...and one at a blob place (below the size threshold) still reads back as written.
    exchange.guest_request["tools"] = json!({"$blob": "sha256:user-value"});
    let mut store = SqliteStore::open(&path).unwrap();
    store.apply(&[upsert(&exchange)]).unwrap();
    assert_eq!(store.exchange(exchange.id).unwrap().unwrap(), exchange);
    // Only the look-alike at a blob place became a blob; the small system message stayed inline.
    assert_eq!(blob_count(&path), 1);
}

#[test]
fn a_missing_blob_is_a_typed_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = store_path(dir.path());
    let exchange = session_exchange(new_record_id(), None, 1, &big_system_prompt(4, "x"));
    let mut store = SqliteStore::open(&path).unwrap();
    store.apply(&[upsert(&exchange)]).unwrap();
    rusqlite::Connection::open(&path)
        .unwrap()
        .execute(
            "DELETE FROM blobs WHERE body LIKE '%\"role\":\"system\"%'",
            [],
        )
        .unwrap();
    let error = store.exchange(exchange.id).unwrap_err();
    let StoreError::MissingBlob {
        hash,
        exchange: exchange_id,
    } = &error
    else {
        panic!("expected MissingBlob, got {error:?}");
    };
    assert!(
        hash.starts_with("sha256:") && hash.len() == 7 + 64,
        "{hash}"
    );
    assert_eq!(exchange_id, &exchange.id.to_string());
    assert!(matches!(
        store.exchanges(ExchangeFilter::All),
        Err(StoreError::MissingBlob { .. })
    ));
}

#[test]
fn a_version_1_store_opens_migrates_and_keeps_its_rows() {
    let dir = tempfile::tempdir().unwrap();
    let path = store_path(dir.path());
    let prompt = big_system_prompt(4, "Old store.");
    let old = session_exchange(new_record_id(), None, 1, &prompt);
    drop(SqliteStore::open(&path).unwrap());
    {
        // Turn the fresh store into a version 1 store holding a v1 row (everything inline).
        let conn = rusqlite::Connection::open(&path).unwrap();
        conn.execute_batch("DROP TABLE blobs; PRAGMA user_version = 1;")
            .unwrap();
        conn.execute(
            "INSERT INTO exchanges (id, run_id, writer_id, status, ingress_api, upstream_model, received_at, record)
             VALUES (?1, NULL, 'old-writer', 'ok', 'google.streamGenerateContent', 'gpt-test', '2026-11-29T12:00:01.123Z', ?2)",
            rusqlite::params![old.id.to_string(), serde_json::to_string(&old).unwrap()],
        )
        .unwrap();
    }

    let mut store = SqliteStore::open_existing(&path).unwrap();
    let version: i64 = rusqlite::Connection::open(&path)
        .unwrap()
        .query_row("PRAGMA user_version", [], |row| row.get(0))
        .unwrap();
    assert_eq!(version, SCHEMA_VERSION);
    assert_eq!(store.exchange(old.id).unwrap().unwrap(), old);

    let new = session_exchange(new_record_id(), None, 2, &prompt);
    store.apply(&[upsert(&new)]).unwrap();
    assert_eq!(blob_count(&path), 4);
    assert_eq!(
        store.exchanges(ExchangeFilter::All).unwrap(),
        vec![old, new]
    );
}
