//! The figures `switchyard bench gateway` builds its records cost report from: the bytes the
//! recorder counts as stored per exchange are the bytes the store holds, and the insert floor
//! writes rows of the size it is given.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use bytes::Bytes;
use serde_json::Value;
use switchyard_records::{
    ExchangeRecord, ExchangeText, JsonText, Recorder, Redactor, SqliteStore, store_path,
};

/// Sum of the stored record texts' lengths and their number, read straight from the database.
fn stored_record_bytes(dir: &std::path::Path) -> (u64, u64) {
    let conn = rusqlite::Connection::open(store_path(dir)).unwrap();
    conn.query_row(
        "SELECT coalesce(sum(length(record)), 0), count(*) FROM exchanges",
        [],
        |row| Ok((row.get::<_, i64>(0)? as u64, row.get::<_, i64>(1)? as u64)),
    )
    .unwrap()
}

#[test]
fn counted_exchange_bytes_are_the_stored_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let recorder = Recorder::open_dir(dir.path(), Redactor::default()).unwrap();
    for n in 0..25 {
        let guest =
            format!(r#"{{"contents":[{{"role":"user","parts":[{{"text":"turn {n}"}}]}}]}}"#);
        recorder
            .record_exchange_text(ExchangeText {
                record: ExchangeRecord::begin(None, "google", "gemini-2.5-flash", Value::Null),
                guest_request: JsonText::whole(Bytes::from(guest)),
                attempt_requests: vec![JsonText::whole(Bytes::from_static(br#"{"messages":[]}"#))],
                guest_response: None,
            })
            .unwrap();
    }
    recorder.flush().unwrap();
    let stats = recorder.stats();
    recorder.close().unwrap();
    assert_eq!(stats.exchanges_as_text, 25);
    let (bytes, rows) = stored_record_bytes(dir.path());
    assert_eq!(rows, 25);
    assert!(
        bytes > 25 * 100,
        "whole records, not just their requests: {bytes}"
    );
    assert_eq!(stats.exchange_text_bytes, bytes);
}

#[test]
fn the_insert_floor_writes_rows_of_the_given_size() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = SqliteStore::open(store_path(dir.path())).unwrap();
    store.insert_floor(3_000, 70, 16).unwrap();
    drop(store);
    assert_eq!(stored_record_bytes(dir.path()), (70 * 3_000, 70));
}
