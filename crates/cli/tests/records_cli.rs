//! `switchyard records` on a store written through the records crate: exchanges that belong to
//! no run (a standalone `switchyard gateway`) are listed and shown, and a reader that closes
//! the pipe early ends the output quietly.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::Read;
use std::path::Path;
use std::process::{Command, Output, Stdio};

use serde_json::json;
use switchyard_records::model::{ExchangeRecord, ExchangeStatus, RunRecord};
use switchyard_records::{RecordOp, RecordSink, SqliteStore, ingress, new_record_id, store_path};
use uuid::Uuid;

const BIN: &str = env!("CARGO_BIN_EXE_switchyard");

/// `switchyard records --records DIR ARGS...`, not started yet.
fn records_command(dir: &Path, args: &[&str]) -> Command {
    let mut command = Command::new(BIN);
    command.arg("records").arg("--records").arg(dir).args(args);
    command
}

/// Runs `switchyard records`, which must succeed.
fn records(dir: &Path, args: &[&str]) -> Output {
    let output = records_command(dir, args).output().unwrap();
    assert!(
        output.status.success(),
        "switchyard records {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

/// Runs `switchyard records`, which must fail; returns what it said on stderr.
fn refused(dir: &Path, args: &[&str]) -> String {
    let output = records_command(dir, args).output().unwrap();
    assert!(
        !output.status.success(),
        "switchyard records {args:?} succeeded"
    );
    String::from_utf8(output.stderr).unwrap()
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
    let wrong = refused(dir.path(), &["show", &exchanges[1].id.to_string()]);
    assert!(wrong.contains("is a model exchange, not a run"), "{wrong}");
    assert!(
        shown.contains("\"standalone one\""),
        "the whole record: {shown}"
    );
}

#[test]
fn a_reader_that_stops_early_ends_the_output_quietly() {
    let dir = tempfile::tempdir().unwrap();
    let (_, exchanges) = store(dir.path());
    let mut child = records_command(dir.path(), &["exchange", &exchanges[2].id.to_string()])
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

#[test]
fn usage_totals_tokens_failures_and_latency_by_upstream_model_and_run() {
    let dir = tempfile::tempdir().unwrap();
    let (run_id, mut exchanges) = store(dir.path());
    // The run's exchange used tokens; the first standalone one failed on another model.
    exchanges[0].usage = switchyard_records::Usage {
        input: 1200,
        cached: 200,
        output: 34,
        reasoning: 5,
        estimated: false,
    };
    exchanges[1].upstream_model = "llama-test".into();
    // Its upstream reported no usage: the gateway's estimate, shown apart.
    exchanges[1].usage = switchyard_records::Usage {
        input: 50,
        output: 5,
        estimated: true,
        ..Default::default()
    };
    exchanges[1].status = ExchangeStatus::Error;
    exchanges[1].retries = 2;
    exchanges[2].usage.input = 800;
    // What every attempt cost: the qwen exchange's retried attempts cost 100/10 more.
    for exchange in &mut exchanges {
        exchange.billed = exchange.usage;
    }
    exchanges[0].billed.input += 100;
    exchanges[0].billed.output += 10;
    // A second apart, so a window can fall between them.
    let base = exchanges[0].received_at;
    for (seconds, exchange) in (0..).zip(exchanges.iter_mut()) {
        exchange.received_at = base + chrono::Duration::seconds(seconds);
        exchange.delivered_at = Some(exchange.received_at + chrono::Duration::milliseconds(250));
    }
    let mut store = SqliteStore::open(store_path(dir.path())).unwrap();
    let ops: Vec<RecordOp> = exchanges
        .iter()
        .map(|e| RecordOp::UpsertExchange(Box::new(e.clone())))
        .collect();
    store.apply(&ops).unwrap();

    let table = stdout(&records(dir.path(), &["usage"]));
    let lines: Vec<Vec<&str>> = table
        .lines()
        .map(|line| line.split_whitespace().collect())
        .collect();
    assert_eq!(lines.len(), 4, "{table}");
    // group, exchanges, ok, failed, retries, in, cached, out, reasoning, estimated in/out,
    // billed in/out, estimated billed in/out, calls, latency
    assert_eq!(
        lines[1],
        [
            "llama-test",
            "1",
            "0",
            "1",
            "2",
            "0",
            "0",
            "0",
            "0",
            "50/5",
            "0/0",
            "50/5",
            "0",
            "0.250s/0.250s"
        ]
    );
    assert_eq!(
        lines[2],
        [
            "qwen-test",
            "2",
            "2",
            "0",
            "0",
            "2000",
            "200",
            "34",
            "5",
            "0/0",
            "2100/44",
            "0/0",
            "0",
            "0.250s/0.250s"
        ]
    );
    assert_eq!(lines[3][..6], ["total", "3", "2", "1", "2", "2000"]);

    let by_run: serde_json::Value =
        serde_json::from_slice(&records(dir.path(), &["usage", "--by", "run", "--json"]).stdout)
            .unwrap();
    assert_eq!(by_run["grouped_by"], "run");
    let groups: Vec<(&str, u64)> = by_run["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|row| {
            (
                row["group"].as_str().unwrap(),
                row["usage"]["input"].as_u64().unwrap(),
            )
        })
        .collect();
    let run = run_id.to_string();
    assert_eq!(groups, [("-", 800), (run.as_str(), 1200)]);

    // A window that ends before the exchanges were received counts none of them.
    let before = stdout(&records(dir.path(), &["usage", "--until", "2000-01-01"]));
    assert_eq!(before.lines().count(), 2, "header and total only: {before}");
    assert!(before.lines().last().unwrap().starts_with("total ") && before.contains(" 0 "));
    let since = exchanges[1].received_at.to_rfc3339();
    let later = stdout(&records(dir.path(), &["usage", "--since", &since]));
    assert_eq!(
        later.lines().last().unwrap().split_whitespace().nth(1),
        Some("2"),
        "received at or after the second exchange: {later}"
    );
    let bad = refused(dir.path(), &["usage", "--since", "last week"]);
    assert!(bad.contains("YYYY-MM-DD"), "{bad}");

    let standalone = stdout(&records(dir.path(), &["usage", "--unattributed"]));
    assert!(
        standalone.lines().last().unwrap().split_whitespace().nth(1) == Some("2"),
        "only the two exchanges of no run: {standalone}"
    );
}
