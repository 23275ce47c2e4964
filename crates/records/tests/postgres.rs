//! The PostgreSQL store against a real server (a throwaway cluster from `switchyard-testkit`, or
//! `SWITCHYARD_TEST_POSTGRES`): the same ops give the same answers as the SQLite store from every
//! read; blobs are stored once; concurrent openers migrate once; secrets (and the URL's password)
//! never reach a row; a server that stops under a writing recorder is a typed error that counts
//! every op it lost.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use common::*;
use serde_json::json;
use switchyard_records::{
    EventRecord, ExchangeFilter, PgStore, PgUrl, RawLineRecord, RawStream, RecordError, RecordOp,
    RecordSink, RecordStore, Recorder, RecorderOptions, Redactor, SqliteStore, StoreSpec,
    new_record_id, store_path,
};
use switchyard_testkit::postgres::{TestDatabase, skip_message};
use uuid::Uuid;

/// A fresh database, or `None` (with a message) when there is no PostgreSQL to test against.
fn database(test: &str) -> Option<TestDatabase> {
    match TestDatabase::create() {
        Ok(Some(db)) => Some(db),
        Ok(None) => {
            skip_message(test);
            None
        }
        Err(error) => panic!("{test}: {error}"),
    }
}

fn pg_url(url: &str) -> PgUrl {
    PgUrl::parse(url).unwrap()
}

/// A plain client on `url` for looking at the rows directly (on its own thread: the client
/// runs a runtime of its own).
fn query_i64(url: &str, sql: &str, param: Option<String>) -> i64 {
    let (url, sql) = (url.to_owned(), sql.to_owned());
    std::thread::spawn(move || {
        let mut client = postgres::Client::connect(&url, postgres::NoTls).unwrap();
        let row = match &param {
            Some(p) => client.query_one(sql.as_str(), &[p]).unwrap(),
            None => client.query_one(sql.as_str(), &[]).unwrap(),
        };
        row.get::<_, i64>(0)
    })
    .join()
    .unwrap()
}

/// The ops of a small but varied store: two runs, their events and raw lines (NUL and
/// non-ASCII included), exchanges of both runs and unattributed ones, a session sharing a big
/// prompt (blobs), one still in flight, one begun then finished in a later batch.
fn corpus() -> (Vec<Vec<RecordOp>>, Vec<Uuid>, Vec<Uuid>) {
    let run_a = new_record_id();
    let run_b = new_record_id();
    let mut first = vec![
        RecordOp::UpsertRun(Box::new(sample_run(run_a))),
        RecordOp::UpsertRun(Box::new(sample_run(run_b))),
    ];
    for run in [run_a, run_b] {
        first.extend(sample_events(run).into_iter().map(RecordOp::Event));
        first.extend(sample_raw_lines(run).into_iter().map(RecordOp::RawLine));
    }
    for (seq, (stream, line)) in [
        (RawStream::Stderr, "warn: a\0b ünïcödé 🚂"),
        (RawStream::Stdin, r#"{"jsonrpc":"2.0"}"#),
        (RawStream::Events, "data: {}"),
    ]
    .into_iter()
    .enumerate()
    {
        first.push(RecordOp::RawLine(RawLineRecord {
            run_id: run_a,
            stream,
            seq: 100 + seq as u64,
            line: line.to_owned(),
        }));
    }
    first.push(RecordOp::Event(EventRecord {
        run_id: run_b,
        seq: 99,
        at: at(9),
        kind: "assistant_message".into(),
        event: json!({"type": "assistant_message", "text": "nul \u{0} inside"}),
    }));
    let prompt = big_system_prompt(8, "Parity.");
    let mut exchanges = Vec::new();
    let mut second = Vec::new();
    for n in 1..=3 {
        let exchange = session_exchange(new_record_id(), Some(run_a), n, &prompt);
        second.push(RecordOp::UpsertExchange(Box::new(exchange.clone())));
        exchanges.push(exchange.id);
    }
    let mut odd = sample_exchange(new_record_id(), Some(run_b), 7);
    odd.requested_model = "model\u{0}with-nul".into();
    odd.upstream_model = "upstream\u{0}nul".into();
    odd.status = switchyard_records::ExchangeStatus::Error;
    odd.error = Some(switchyard_records::TypedError {
        kind: "upstream_status".into(),
        message: "HTTP 500".into(),
    });
    odd.retries = 2;
    odd.function_calls.clear();
    second.push(RecordOp::UpsertExchange(Box::new(odd.clone())));
    exchanges.push(odd.id);
    let unattributed: Vec<_> = (10..12)
        .map(|n| sample_exchange(new_record_id(), None, n))
        .collect();
    let in_flight = begun(&sample_exchange(new_record_id(), Some(run_b), 20));
    let finished_later = sample_exchange(new_record_id(), Some(run_b), 21);
    for exchange in unattributed.iter().chain([&in_flight]) {
        second.push(RecordOp::UpsertExchange(Box::new(exchange.clone())));
        exchanges.push(exchange.id);
    }
    second.push(RecordOp::UpsertExchange(Box::new(begun(&finished_later))));
    exchanges.push(finished_later.id);
    let third = vec![
        RecordOp::UpsertExchange(Box::new(finished_later)),
        RecordOp::UpsertRun(Box::new(ended(sample_run(run_a)))),
    ];
    (vec![first, second, third], vec![run_a, run_b], exchanges)
}

/// Every read of `RecordStore`, rendered (errors by their message) for comparison.
fn answers(store: &dyn RecordStore, runs: &[Uuid], exchanges: &[Uuid]) -> Vec<String> {
    let mut out = Vec::new();
    let mut push = |label: &str, text: String| out.push(format!("{label}: {text}"));
    push("runs", format!("{:?}", store.runs()));
    for run in runs.iter().chain([&Uuid::nil()]) {
        push("run", format!("{:?}", store.run(*run)));
        push("events", format!("{:?}", store.events(*run)));
        push("raw_lines", format!("{:?}", store.raw_lines(*run)));
        push(
            "raw_line_count",
            format!("{:?}", store.raw_line_count(*run)),
        );
        let simple = run.simple().to_string();
        for prefix in [&simple[..], &simple[..20], &simple[..1], "zz", ""] {
            let resolved = store.resolve_run(prefix).map_err(|e| e.to_string());
            push("resolve_run", format!("{prefix} {resolved:?}"));
        }
    }
    let filters = runs.iter().map(|run| ExchangeFilter::Run(*run)).chain([
        ExchangeFilter::All,
        ExchangeFilter::Unattributed,
        ExchangeFilter::Run(Uuid::nil()),
    ]);
    for filter in filters {
        push("exchanges", format!("{:?}", store.exchanges(filter)));
        for limit in [None, Some(0), Some(2), Some(100)] {
            push(
                "exchange_summaries",
                format!("{limit:?} {:?}", store.exchange_summaries(filter, limit)),
            );
        }
        let mut visited = Vec::new();
        let result = store.for_each_exchange_summary(filter, &mut |s| visited.push(s));
        push("for_each", format!("{result:?} {visited:?}"));
        push(
            "exchange_count",
            format!("{:?}", store.exchange_count(filter)),
        );
    }
    for id in exchanges.iter().chain([&Uuid::nil()]) {
        push("exchange", format!("{:?}", store.exchange(*id)));
        let hyphenated = id.hyphenated().to_string();
        for prefix in [
            hyphenated.clone(),
            hyphenated[..18].to_ascii_uppercase(),
            id.simple().to_string()[..3].to_owned(),
        ] {
            let resolved = store.resolve_exchange(&prefix).map_err(|e| e.to_string());
            push("resolve_exchange", format!("{prefix} {resolved:?}"));
        }
    }
    out
}

#[test]
fn the_same_ops_give_the_same_answers_as_sqlite() {
    let Some(db) = database("the_same_ops_give_the_same_answers_as_sqlite") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let mut sqlite = SqliteStore::open(store_path(dir.path())).unwrap();
    let mut pg = PgStore::open(&pg_url(db.url())).unwrap();
    let (batches, runs, exchanges) = corpus();
    for batch in &batches {
        sqlite.apply(batch).unwrap();
        pg.apply(batch).unwrap();
    }
    let expected = answers(&sqlite, &runs, &exchanges);
    let got = answers(&pg, &runs, &exchanges);
    assert_eq!(expected.len(), got.len());
    for (expected, got) in expected.iter().zip(&got) {
        assert_eq!(expected, got);
    }
    // The reads are not trivially empty.
    assert_eq!(pg.exchange_count(ExchangeFilter::All).unwrap(), 8);
    assert_eq!(pg.raw_line_count(runs[0]).unwrap(), 6);

    // Blobs: each shared sub-value once, exactly as many as SQLite keeps.
    let sqlite_blobs: i64 = rusqlite::Connection::open(store_path(dir.path()))
        .unwrap()
        .query_row("SELECT count(*) FROM blobs", [], |row| row.get(0))
        .unwrap();
    let counts = pg.table_counts().unwrap();
    let pg_blobs = counts.iter().find(|(t, _)| t == "blobs").unwrap().1;
    assert_eq!(pg_blobs, sqlite_blobs);
    assert_eq!(
        query_i64(db.url(), "SELECT count(DISTINCT hash) FROM blobs", None),
        pg_blobs
    );
    // The three session exchanges share the system prompt and both tool sets: 4 blobs, not 12.
    assert_eq!(pg_blobs, 4, "{counts:?}");
    // A second writer of the same session adds no blob.
    let mut again = PgStore::open(&pg_url(db.url())).unwrap();
    let more = session_exchange(
        new_record_id(),
        Some(runs[0]),
        4,
        &big_system_prompt(8, "Parity."),
    );
    again
        .apply(&[RecordOp::UpsertExchange(Box::new(more))])
        .unwrap();
    assert_eq!(query_i64(db.url(), "SELECT count(*) FROM blobs", None), 4);
}

#[test]
fn concurrent_openers_migrate_once_and_reopening_changes_nothing() {
    let Some(db) = database("concurrent_openers_migrate_once_and_reopening_changes_nothing") else {
        return;
    };
    let url = pg_url(db.url());
    let openers: Vec<_> = (0..4)
        .map(|_| {
            let url = url.clone();
            std::thread::spawn(move || PgStore::open(&url).map(|store| store.schema_version()))
        })
        .collect();
    for opener in openers {
        let version = opener.join().unwrap().unwrap().unwrap();
        assert_eq!(version, switchyard_records::postgres::SCHEMA_VERSION);
    }
    let one_row = "SELECT count(*) FROM schema_version";
    assert_eq!(
        query_i64(db.url(), one_row, None),
        switchyard_records::postgres::SCHEMA_VERSION
    );
    drop(PgStore::open(&url).unwrap());
    drop(PgStore::open_existing(&url).unwrap());
    assert_eq!(
        query_i64(db.url(), one_row, None),
        switchyard_records::postgres::SCHEMA_VERSION
    );
    // A database without the schema is missing for readers, and they do not create it.
    let empty = pg_url(&db.another().unwrap());
    let error = PgStore::open_existing(&empty).unwrap_err();
    assert!(
        matches!(error, switchyard_records::StoreError::Missing(_)),
        "{error}"
    );
    assert_eq!(
        query_i64(
            empty.expose(),
            "SELECT count(*) FROM pg_tables WHERE tablename = 'runs'",
            None
        ),
        0
    );
}

#[test]
fn a_newer_schema_is_refused() {
    let Some(db) = database("a_newer_schema_is_refused") else {
        return;
    };
    let url = pg_url(db.url());
    drop(PgStore::open(&url).unwrap());
    query_i64(
        db.url(),
        "WITH i AS (INSERT INTO schema_version (version) VALUES (99) RETURNING version) SELECT version FROM i",
        None,
    );
    let error = PgStore::open(&url).unwrap_err();
    assert!(
        matches!(
            error,
            switchyard_records::StoreError::UnsupportedSchema { found: 99, .. }
        ),
        "{error}"
    );
}

#[test]
fn dead_writers_rows_are_recovered_and_live_ones_left_alone() {
    let Some(db) = database("dead_writers_rows_are_recovered_and_live_ones_left_alone") else {
        return;
    };
    let url = pg_url(db.url());
    let dead_run = new_record_id();
    let live_run = new_record_id();
    let mut dead = PgStore::open(&url).unwrap();
    dead.apply(&[
        RecordOp::UpsertRun(Box::new(sample_run(dead_run))),
        RecordOp::UpsertExchange(Box::new(begun(&sample_exchange(
            new_record_id(),
            Some(dead_run),
            1,
        )))),
    ])
    .unwrap();
    let mut live = PgStore::open(&url).unwrap();
    live.apply(&[
        RecordOp::UpsertRun(Box::new(sample_run(live_run))),
        RecordOp::UpsertExchange(Box::new(begun(&sample_exchange(
            new_record_id(),
            Some(live_run),
            2,
        )))),
    ])
    .unwrap();
    // Its connection closes: its lock goes with it.
    drop(dead);
    let mut reader = PgStore::open(&url).unwrap();
    let report = reader.recover().unwrap();
    // `open` already recovered: a second pass finds nothing new.
    assert_eq!(report.dead_writers, 0);
    let state = |id| reader.run(id).unwrap().unwrap().state;
    assert_eq!(state(dead_run), switchyard_records::RunState::Incomplete);
    assert_eq!(state(live_run), switchyard_records::RunState::Running);
    let statuses: Vec<_> = reader
        .exchanges(ExchangeFilter::All)
        .unwrap()
        .into_iter()
        .map(|e| (e.run_id, e.status))
        .collect();
    assert!(statuses.contains(&(
        Some(dead_run),
        switchyard_records::ExchangeStatus::Incomplete
    )));
    assert!(statuses.contains(&(Some(live_run), switchyard_records::ExchangeStatus::InFlight)));
    drop(live);
}

const SECRET: &str = "sk-live-0123456789-very-secret";
const URL_PASSWORD: &str = "url-password-4242";

#[test]
fn secrets_never_reach_a_row() {
    let Some(db) = database("secrets_never_reach_a_row") else {
        return;
    };
    // Trust auth ignores the password, so it can ride along in the URL.
    let with_password =
        db.url()
            .replacen("://postgres@", &format!("://postgres:{URL_PASSWORD}@"), 1);
    let spec = StoreSpec::parse(&with_password).unwrap();
    assert!(!spec.to_string().contains(URL_PASSWORD));
    // As a run's recorder: the database password is not among the secrets it redacts, so it
    // must never be in what the store is given at all.
    let recorder = Recorder::open(&spec, Redactor::new([SECRET])).unwrap();
    let run_id = new_record_id();
    let mut run = sample_run(run_id);
    run.argv.push(format!("--key={SECRET}"));
    recorder.record_run(run).unwrap();
    recorder
        .record_event(EventRecord {
            run_id,
            seq: 0,
            at: at(1),
            kind: "user_message".into(),
            event: json!({"type": "user_message", "text": format!("my key is {SECRET}")}),
        })
        .unwrap();
    recorder
        .record_raw_line(RawLineRecord {
            run_id,
            stream: RawStream::Stdout,
            seq: 0,
            line: format!("Authorization: Bearer {SECRET}"),
        })
        .unwrap();
    let mut exchange = session_exchange(
        new_record_id(),
        Some(run_id),
        1,
        &big_system_prompt(2, &format!("the key {SECRET}")),
    );
    exchange.upstream_url = format!("http://user:{SECRET}@127.0.0.1:9/v1");
    exchange.attempts[0]
        .raw_events
        .push(format!(r#"{{"echo":"{SECRET}"}}"#));
    recorder.record_exchange(exchange).unwrap();
    recorder.close().unwrap();

    let columns: Vec<(String, String, String)> = {
        let url = db.url().to_owned();
        std::thread::spawn(move || {
            let mut client = postgres::Client::connect(&url, postgres::NoTls).unwrap();
            client
                .query(
                    "SELECT table_name::text, column_name::text, data_type::text
                     FROM information_schema.columns WHERE table_schema = 'public'",
                    &[],
                )
                .unwrap()
                .iter()
                .map(|row| (row.get(0), row.get(1), row.get(2)))
                .collect()
        })
        .join()
        .unwrap()
    };
    assert!(columns.len() > 20, "{columns:?}");
    let mut rows_seen = 0;
    for (table, column, data_type) in &columns {
        let text = if data_type == "bytea" {
            format!("convert_from({column}, 'UTF8')")
        } else {
            format!("{column}::text")
        };
        for needle in [SECRET, URL_PASSWORD] {
            let hits = query_i64(
                db.url(),
                &format!("SELECT count(*) FROM {table} WHERE strpos({text}, $1) > 0"),
                Some(needle.to_owned()),
            );
            assert_eq!(hits, 0, "{needle} in {table}.{column}");
        }
        rows_seen += query_i64(db.url(), &format!("SELECT count(*) FROM {table}"), None);
    }
    assert!(rows_seen > 0);
    // The redaction marker did land where the secret was.
    assert_eq!(
        query_i64(
            db.url(),
            "SELECT count(*) FROM raw_lines WHERE strpos(convert_from(line, 'UTF8'), $1) > 0",
            Some(switchyard_records::REDACTED.to_owned())
        ),
        1
    );
}

#[test]
fn a_server_that_stops_under_the_recorder_is_a_typed_error_counting_every_lost_op() {
    let test = "a_server_that_stops_under_the_recorder_is_a_typed_error_counting_every_lost_op";
    let Some(db) = database(test) else {
        return;
    };
    let Some(cluster) = db.cluster() else {
        eprintln!("{test}: skipped: the server is SWITCHYARD_TEST_POSTGRES's, not ours to stop");
        return;
    };
    let url = pg_url(db.url());
    let store = PgStore::open(&url).unwrap();
    let recorder = Recorder::start(
        Box::new(store),
        Redactor::default(),
        RecorderOptions {
            queue_capacity: 64,
            max_batch: 16,
            unavailable_retries: 2,
            retry_backoff: Duration::from_millis(20),
        },
    )
    .unwrap();
    let run_id = new_record_id();
    let event = |seq: u64| EventRecord {
        run_id,
        seq,
        at: at(1),
        kind: "user_message".into(),
        event: json!({"type": "user_message", "text": format!("event {seq}")}),
    };
    for seq in 0..200 {
        recorder.record_event(event(seq)).unwrap();
    }
    recorder.flush().unwrap();
    // The server goes away while the recorder keeps writing.
    let stopped = std::thread::scope(|scope| {
        let stop = scope.spawn(|| cluster.stop_server());
        for seq in 200..600 {
            recorder.record_event(event(seq)).unwrap();
        }
        stop.join().unwrap()
    });
    stopped.unwrap();
    for seq in 600..650 {
        recorder.record_event(event(seq)).unwrap();
    }
    let error = recorder.flush().unwrap_err();
    let RecordError::StoreUnavailable {
        failed_ops,
        last_error,
    } = &error
    else {
        panic!("expected StoreUnavailable, got {error:?}");
    };
    assert!(*failed_ops >= 50, "{error}");
    let stats = recorder.stats();
    assert_eq!(stats.written_ops + stats.failed_ops, 650, "{stats:?}");
    assert_eq!(stats.failed_ops, *failed_ops);
    assert!(!last_error.is_empty());

    // The server comes back: the recorder's store connects again and writes on.
    cluster.start_server().unwrap();
    for seq in 650..660 {
        recorder.record_event(event(seq)).unwrap();
    }
    recorder.flush().unwrap();
    recorder.close().unwrap();
    let stored = query_i64(
        db.url(),
        "SELECT count(*) FROM events WHERE run_id = $1",
        Some(run_id.to_string()),
    ) as u64;
    let stats = recorder.stats();
    assert_eq!(stats.written_ops + stats.failed_ops, 660, "{stats:?}");
    // Nothing dropped silently: every op is stored or counted as lost. (An op counted lost can
    // still be stored when the server committed a batch whose answer it never sent.)
    assert!(stored >= stats.written_ops, "{stored} < {stats:?}");
    assert!(stored + stats.failed_ops >= 660, "{stored} {stats:?}");
}
