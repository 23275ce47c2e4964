//! `switchyard records --records postgres://…` prints exactly what it prints for a SQLite
//! records directory holding the same records (written through the same `Recorder` API to
//! both): list, show (text and HTML), exchanges with each filter, exchange, usage, export.
//! Against a real PostgreSQL (a throwaway cluster from `switchyard-testkit`, or
//! `SWITCHYARD_TEST_POSTGRES`); skipped with a message when there is none and none is required.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::{Command, Output};

use chrono::{TimeZone, Utc};
use serde_json::json;
use switchyard_records::model::{
    DeliveredCall, EventRecord, ExchangeRecord, ExchangeStatus, RawLineRecord, RawStream,
    RunRecord, RunState, UpstreamAttempt, Usage,
};
use switchyard_records::{Recorder, Redactor, StoreSpec, ingress, new_record_id};
use switchyard_testkit::postgres::{TestDatabase, skip_message};
use uuid::Uuid;

const BIN: &str = env!("CARGO_BIN_EXE_switchyard");

fn records(store: &str, args: &[&str]) -> Output {
    Command::new(BIN)
        .arg("records")
        .arg("--records")
        .arg(store)
        .args(args)
        .env_remove("SWITCHYARD_RECORDS")
        .output()
        .unwrap()
}

fn at(second: i64) -> chrono::DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 11, 29, 12, 0, 0).unwrap() + chrono::Duration::seconds(second)
}

fn exchange(run_id: Option<Uuid>, n: i64, status: ExchangeStatus) -> ExchangeRecord {
    let prompt = format!("question {n} {}", "context ".repeat(60));
    let mut exchange = ExchangeRecord::begin(
        run_id,
        ingress::GENERATE_CONTENT,
        "gemini-2.5-flash",
        json!({
            "systemInstruction": {"parts": [{"text": "You are a careful agent. ".repeat(20)}]},
            "contents": [{"role": "user", "parts": [{"text": prompt}]}],
        }),
    );
    exchange.received_at = at(n);
    exchange.upstream_model = "qwen-test".into();
    exchange.upstream_url = "http://127.0.0.1:9/v1".into();
    let request = json!({
        "model": "qwen-test",
        "messages": [
            {"role": "system", "content": "You are a careful agent. ".repeat(20)},
            {"role": "user", "content": prompt},
        ],
    });
    let usage = Usage {
        input: 100 + n as u64,
        cached: 10,
        output: 20,
        reasoning: 2,
        estimated: false,
    };
    exchange.attempts.push(UpstreamAttempt {
        request,
        status: Some(200),
        raw_events: vec![
            format!(r#"{{"choices":[{{"delta":{{"content":"answer {n}"}}}}]}}"#),
            "[DONE]".into(),
        ],
        error: None,
        started_at: at(n),
        first_byte_at: Some(at(n + 1)),
        last_byte_at: Some(at(n + 2)),
        usage: Some(usage),
    });
    exchange.upstream_message =
        Some(json!({"role": "assistant", "content": format!("answer {n}")}));
    exchange.guest_response = Some(
        json!({"candidates": [{"content": {"role": "model", "parts": [{"text": format!("answer {n}")}]}}]}),
    );
    exchange.status = status;
    exchange.first_byte_at = Some(at(n + 1));
    exchange.last_byte_at = Some(at(n + 2));
    exchange.delivered_at = Some(at(n + 2));
    exchange.usage = usage;
    exchange.billed = usage;
    if n == 3 {
        exchange.function_calls.push(DeliveredCall {
            id: "call_1".into(),
            delivered_id: None,
            name: "read_file".into(),
            arguments: json!({"path": "a.txt"}),
        });
    }
    exchange
}

/// Writes one ended run (events, raw lines, three exchanges) and two exchanges of no run.
fn write(recorder: &Recorder, run_id: Uuid, exchanges: &[ExchangeRecord]) {
    let mut run = RunRecord {
        argv: vec!["gemini".into(), "-p".into(), "list files".into()],
        workdir: "/tmp/work".into(),
        upstream_model: Some("qwen-test".into()),
        started_at: at(0),
        ..RunRecord::begin(run_id, "gemini-cli", "0.61.0")
    };
    recorder.record_run(run.clone()).unwrap();
    let events = [
        json!({"type": "user_message", "text": "list the files"}),
        json!({"type": "tool_call", "call_id": "c1", "model_call_id": "call_1", "tool_name": "read_file", "category": "read", "arguments": {"path": "a.txt"}, "turn": 1}),
        json!({"type": "tool_result", "call_id": "c1", "tool_name": "read_file", "status": "success", "output": "hello"}),
        json!({"type": "assistant_message", "text": "The file says hello", "turn": 2}),
    ];
    for (seq, event) in events.into_iter().enumerate() {
        recorder
            .record_event(EventRecord {
                run_id,
                seq: seq as u64,
                at: at(seq as i64 + 1),
                kind: event["type"].as_str().unwrap().to_owned(),
                event,
            })
            .unwrap();
    }
    for (seq, line) in [r#"{"type":"init"}"#, r#"{"type":"result"}"#]
        .iter()
        .enumerate()
    {
        recorder
            .record_raw_line(RawLineRecord {
                run_id,
                stream: RawStream::Stdout,
                seq: seq as u64,
                line: (*line).to_owned(),
            })
            .unwrap();
    }
    for exchange in exchanges {
        recorder.record_exchange(exchange.clone()).unwrap();
    }
    run.ended_at = Some(at(30));
    run.state = RunState::Ended;
    run.outcome = Some(json!({"status": "succeeded", "exit": {"code": 0}}));
    recorder.record_run(run).unwrap();
    recorder.close().unwrap();
}

#[test]
fn records_commands_print_the_same_for_postgres_and_sqlite() {
    let test = "records_commands_print_the_same_for_postgres_and_sqlite";
    let db = match TestDatabase::create() {
        Ok(Some(db)) => db,
        Ok(None) => return skip_message(test),
        Err(error) => panic!("{test}: {error}"),
    };
    let dir = tempfile::tempdir().unwrap();
    let sqlite = dir.path().join("records");
    let run_id = new_record_id();
    let exchanges = vec![
        exchange(Some(run_id), 1, ExchangeStatus::Ok),
        exchange(Some(run_id), 3, ExchangeStatus::Ok),
        exchange(Some(run_id), 5, ExchangeStatus::Error),
        exchange(None, 7, ExchangeStatus::Ok),
        exchange(None, 9, ExchangeStatus::Ok),
    ];
    write(
        &Recorder::open_dir(&sqlite, Redactor::default()).unwrap(),
        run_id,
        &exchanges,
    );
    let pg = StoreSpec::parse(db.url()).unwrap();
    write(
        &Recorder::open(&pg, Redactor::default()).unwrap(),
        run_id,
        &exchanges,
    );

    let run = run_id.to_string();
    let exchange_prefix = exchanges[1].id.simple().to_string()[..24].to_owned();
    let html = |name: &str| dir.path().join(name).display().to_string();
    let (sqlite_html, pg_html) = (html("sqlite.html"), html("pg.html"));
    let commands: Vec<Vec<&str>> = vec![
        vec!["list"],
        vec!["show", &run[..13]],
        vec!["exchanges"],
        vec!["exchanges", "--run", &run],
        vec!["exchanges", "--unattributed"],
        vec!["exchanges", "--limit", "2"],
        vec!["exchange", &exchange_prefix],
        vec!["exchange", "ffff"],
        vec!["usage"],
        vec!["usage", "--by", "run", "--json"],
        vec!["usage", "--by", "day", "--since", "2026-11-29"],
        vec!["export", "--format", "jsonl"],
        vec!["export", "--format", "sft"],
        vec!["export", "--format", "sft", "--per-exchange"],
    ];
    let sqlite_dir = sqlite.display().to_string();
    for args in &commands {
        let from_sqlite = records(&sqlite_dir, args);
        let from_pg = records(db.url(), args);
        assert_eq!(
            from_sqlite.status,
            from_pg.status,
            "records {args:?}: {}",
            String::from_utf8_lossy(&from_pg.stderr)
        );
        assert_eq!(
            String::from_utf8_lossy(&from_sqlite.stdout),
            String::from_utf8_lossy(&from_pg.stdout),
            "records {args:?}"
        );
        assert_eq!(
            String::from_utf8_lossy(&from_sqlite.stderr),
            String::from_utf8_lossy(&from_pg.stderr),
            "records {args:?}"
        );
    }
    // The commands did show something.
    let list = String::from_utf8(records(db.url(), &["list"]).stdout).unwrap();
    assert!(list.contains(&run), "{list}");
    let shown =
        String::from_utf8(records(db.url(), &["exchange", &exchange_prefix]).stdout).unwrap();
    assert!(shown.contains("answer 3"), "{shown}");

    assert!(
        records(&sqlite_dir, &["show", &run, "--html", &sqlite_html])
            .status
            .success()
    );
    assert!(
        records(db.url(), &["show", &run, "--html", &pg_html])
            .status
            .success()
    );
    assert_eq!(
        std::fs::read_to_string(&sqlite_html).unwrap(),
        std::fs::read_to_string(&pg_html).unwrap()
    );
}

#[test]
fn a_postgres_url_with_a_password_is_never_printed() {
    let secret = "pw-never-printed-77";
    // Nothing listens on port 1: opening fails, and the message must not carry the password.
    let url = format!("postgres://someone:{secret}@127.0.0.1:1/records?connect_timeout=2");
    let output = records(&url, &["list"]);
    assert!(!output.status.success());
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(!said.contains(secret), "{said}");
    assert!(said.contains("someone:****@127.0.0.1:1"), "{said}");
}
