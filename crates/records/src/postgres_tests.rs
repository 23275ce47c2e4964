//! Unit tests of the PostgreSQL store's pure parts; the store against a real server is in
//! `tests/postgres.rs`.

use super::*;

#[test]
fn writer_keys_are_stable_and_distinct() {
    let a = Uuid::now_v7().to_string();
    let b = Uuid::now_v7().to_string();
    assert_eq!(writer_key(&a), writer_key(&a));
    assert_ne!(writer_key(&a), writer_key(&b));
}

#[test]
fn index_columns_never_hold_nul() {
    assert_eq!(column_text("a\0b"), "a\u{FFFD}b");
    assert_eq!(column_text("plain"), "plain");
}

#[test]
fn migrations_are_ordered_and_end_at_the_schema_version() {
    let versions: Vec<i64> = MIGRATIONS.iter().map(|(version, _)| *version).collect();
    let expected: Vec<i64> = (1..=SCHEMA_VERSION).collect();
    assert_eq!(versions, expected);
}

#[test]
fn summaries_never_select_whole_records() {
    let sql = summary_query("TRUE", true, "10");
    assert!(sql.contains("ORDER BY id DESC LIMIT 10"), "{sql}");
    assert!(!sql.contains("SELECT record FROM"), "{sql}");
}

#[test]
fn an_unreachable_server_is_unavailable_not_a_backend_error() {
    // Port 1 on loopback: nothing listens; the connect fails at once.
    let url = PgUrl::parse("postgres://nobody:pw@127.0.0.1:1/none?connect_timeout=2").unwrap();
    let error = PgStore::open(&url).unwrap_err();
    assert!(error.is_unavailable(), "{error}");
    assert!(!error.to_string().contains("pw@"), "{error}");
}
