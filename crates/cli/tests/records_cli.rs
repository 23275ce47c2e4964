//! `switchyard records` on a store written through the records crate: exchanges that belong to
//! no run (a standalone `switchyard gateway`) are listed and shown, and a reader that closes
//! the pipe early ends the output quietly.

use std::io::Read;
use std::path::Path;
use std::process::{Command, Output, Stdio};

use serde_json::json;
use switchyard_records::model::{ExchangeRecord, ExchangeStatus, RunRecord};
use switchyard_records::{RecordOp, RecordStore, SqliteStore, ingress, new_record_id, store_path};
use uuid::Uuid;

const BIN: &str = env!("CARGO_BIN_EXE_switchyard");

fn records(dir: &Path, args: &[&str]) -> Output {
    let output = Command::new(BIN)
        .arg("records")
        .arg("--records")
        .arg(dir)
        .args(args)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "switchyard records {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

fn exchange(run_id: Option<Uuid>, prompt: &str) -> ExchangeRecord {
    let mut exchange = ExchangeRecord::begin(
        run_id,
        ingress::GENERATE_CONTENT,
        "gemini-2.5-flash",
        json!({"contents": [{"role": "user", "parts": [{"text": prompt}]}]}),
    );
    exchange.upstream_model = "qwen-test".into();
    exchange.status = ExchangeStatus::Ok;
    exchange.delivered_at = Some(exchange.received_at + chrono::Duration::milliseconds(250));
    exchange
}

/// A store with one run (one exchange) and two exchanges of no run; returns them in that order.
fn store(dir: &Path) -> (Uuid, Vec<ExchangeRecord>) {
    let mut store = SqliteStore::open(store_path(dir)).unwrap();
    let run_id = new_record_id();
    let run = RunRecord {
        argv: vec!["gemini".into()],
        workdir: "/tmp/work".into(),
        upstream_model: Some("qwen-test".into()),
        ..RunRecord::begin(run_id, "gemini-cli", "0.61.0")
    };
    // Big enough that `records exchange` writes more than a pipe holds.
    let long_prompt = "many words ".repeat(20_000);
    let exchanges = vec![
        exchange(Some(run_id), "in a run"),
        exchange(None, "standalone one"),
        exchange(None, &long_prompt),
    ];
    let mut ops = vec![RecordOp::UpsertRun(Box::new(run))];
    ops.extend(
        exchanges
            .iter()
            .map(|e| RecordOp::UpsertExchange(Box::new(e.clone()))),
    );
    store.apply(&ops).unwrap();
    (run_id, exchanges)
}

fn stdout(output: &Output) -> String {
    String::from_utf8(output.stdout.clone()).unwrap()
}

#[test]
fn exchanges_of_no_run_are_listed_and_shown() {
    let dir = tempfile::tempdir().unwrap();
    let (run_id, exchanges) = store(dir.path());

    let list = records(dir.path(), &["list"]);
    assert!(stdout(&list).contains(&run_id.to_string()));
    assert!(
        String::from_utf8_lossy(&list.stderr).contains("2 model exchanges belong to no run"),
        "list points at the exchanges it does not show: {}",
        String::from_utf8_lossy(&list.stderr)
    );

    let unattributed = stdout(&records(dir.path(), &["exchanges", "--unattributed"]));
    let rows: Vec<&str> = unattributed.lines().skip(1).collect();
    assert_eq!(rows.len(), 2, "{unattributed}");
    assert!(rows[0].starts_with(&exchanges[1].id.to_string()));
    assert!(rows[1].starts_with(&exchanges[2].id.to_string()));
    assert!(rows[0].contains("gemini-2.5-flash -> qwen-test") && rows[0].contains("0.250s"));

    let run_prefix = &run_id.simple().to_string()[..20];
    let of_run = stdout(&records(dir.path(), &["exchanges", "--run", run_prefix]));
    assert_eq!(of_run.lines().count(), 2, "{of_run}");
    assert!(of_run.contains(&exchanges[0].id.to_string()));

    let newest = records(dir.path(), &["exchanges", "--limit", "1"]);
    assert_eq!(stdout(&newest).lines().count(), 2);
    assert!(stdout(&newest).contains(&exchanges[2].id.to_string()));
    assert!(String::from_utf8_lossy(&newest.stderr).contains("newest 1 of 3"));

    let shown = stdout(&records(
        dir.path(),
        &["exchange", &exchanges[1].id.to_string()],
    ));
    assert!(shown.contains("recorded outside a run"));

    // `show` is for runs; given an exchange it says where that is shown.
    let wrong = Command::new(BIN)
        .arg("records")
        .arg("--records")
        .arg(dir.path())
        .args(["show", &exchanges[1].id.to_string()])
        .output()
        .unwrap();
    assert!(!wrong.status.success());
    assert!(
        String::from_utf8_lossy(&wrong.stderr).contains("is a model exchange, not a run"),
        "{}",
        String::from_utf8_lossy(&wrong.stderr)
    );
    assert!(
        shown.contains("\"standalone one\""),
        "the whole record: {shown}"
    );
}

#[test]
fn a_reader_that_stops_early_ends_the_output_quietly() {
    let dir = tempfile::tempdir().unwrap();
    let (_, exchanges) = store(dir.path());
    let mut child = Command::new(BIN)
        .arg("records")
        .arg("--records")
        .arg(dir.path())
        .args(["exchange", &exchanges[2].id.to_string()])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Read a little, then close: the ~220 KB record cannot fit in the pipe, so the writer
    // meets the closed end.
    let mut pipe = child.stdout.take().unwrap();
    let mut first = [0u8; 16];
    pipe.read_exact(&mut first).unwrap();
    drop(pipe);
    let output = child.wait_with_output().unwrap();
    assert!(
        output.status.success(),
        "exit {:?}: {}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        output.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
}
