//! Live tests of `switchyard run`: the real `switchyard` binary drives the real, pinned Gemini
//! CLI 0.61.0 through the embedded gateway to a scripted Chat Completions upstream on 127.0.0.1.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use serde_json::Value;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};
use switchyard_testkit::chat_upstream::{ChatUpstream, Reply, Script};

mod common;
use common::{BIN, events, gemini_run, output_of, processes_in, sealed_prefix};

fn run_cmd(workdir: &Path, upstream: &str, extra: &[&str]) -> Command {
    let mut cmd = gemini_run(workdir, upstream, "What is the secret word in notes.txt?");
    cmd.args(extra);
    cmd
}

/// Asserts the exit code, showing switchyard's stderr when it differs.
fn assert_exit(output: &Output, code: i32) {
    assert_eq!(
        output.status.code(),
        Some(code),
        "stderr: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}

fn finished(events: &[Value]) -> &Value {
    let last = events.last().expect("at least one event");
    assert_eq!(last["type"], "run_finished", "last event: {last}");
    last
}

fn workspace_with_notes() -> tempfile::TempDir {
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(
        ws.path().join("notes.txt"),
        "Meeting notes.\nThe secret word is quokka.\n",
    )
    .unwrap();
    ws
}

/// The answer depends on the tool result the CLI sent back: only a real round trip through
/// read_file can produce it.
fn file_dependent_script() -> Script {
    Script::new()
        .then_when(
            |r| r.tool_messages().is_empty(),
            Reply::tool_calls_stream(
                &[("call_live_1", "read_file", r#"{"file_path":"notes.txt"}"#)],
                5,
            ),
        )
        .then_when(
            |r| !r.tool_messages().is_empty(),
            Reply::Dynamic(std::sync::Arc::new(|r| {
                let content = r.tool_messages()[0]["content"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned();
                let word = content.split("secret word is ").nth(1).map(|s| {
                    s.chars()
                        .take_while(|c| c.is_alphanumeric())
                        .collect::<String>()
                });
                Reply::text_stream([format!(
                    "The word is {}.",
                    word.unwrap_or_else(|| "unknown".into())
                )])
            })),
        )
}

/// A finished `switchyard run --records` of the file-dependent task.
struct FileRun {
    upstream: ChatUpstream,
    records: tempfile::TempDir,
    output: Output,
    _workspace: tempfile::TempDir,
}

async fn run_file_task() -> FileRun {
    let upstream = ChatUpstream::start(file_dependent_script()).await.unwrap();
    let workspace = workspace_with_notes();
    let records = tempfile::tempdir().unwrap();
    let mut cmd = run_cmd(
        workspace.path(),
        &upstream.base_url(),
        &["--timeout", "120"],
    );
    cmd.arg("--records").arg(records.path());
    let output = output_of(cmd).await;
    FileRun {
        upstream,
        records,
        output,
        _workspace: workspace,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn answer_depends_on_a_file_the_cli_read() {
    let FileRun {
        upstream,
        records,
        output,
        ..
    } = run_file_task().await;
    assert_exit(&output, 0);
    let events = events(&output);
    let kinds: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(kinds.first(), Some(&"run_started"));
    let call = events
        .iter()
        .find(|e| e["type"] == "tool_call")
        .expect("a tool call event");
    assert_eq!(call["tool_name"], "read_file");
    assert_eq!(
        call["model_call_id"], "call_live_1",
        "the upstream's id reaches the guest unchanged"
    );
    assert_eq!(call["category"]["kind"], "file_read");
    let done = finished(&events);
    assert_eq!(done["status"], "succeeded");
    assert_eq!(done["final_text"], "The word is quokka.");
    // The upstream saw the tool result paired with its own call id, and the provider key.
    let requests = upstream.requests();
    assert_eq!(requests.len(), 2, "one request per model turn");
    let tool = &requests[1].tool_messages()[0];
    assert_eq!(tool["tool_call_id"], "call_live_1");
    assert_eq!(
        requests[0].header("authorization"),
        Some("Bearer sk-live-test-key")
    );
    // Sequence numbers are gapless.
    for (i, e) in events.iter().enumerate() {
        assert_eq!(e["seq"], i as u64);
    }
    // The upstream key is never written to the record store.
    for entry in std::fs::read_dir(records.path()).unwrap() {
        let path = entry.unwrap().path();
        if path.is_file() {
            let bytes = std::fs::read(&path).unwrap();
            assert!(
                !bytes.windows(16).any(|w| w == b"sk-live-test-key"),
                "key found in {}",
                path.display()
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hung_upstream_is_ended_by_the_watchdog() {
    let upstream = ChatUpstream::start(Script::always(Reply::Hang))
        .await
        .unwrap();
    let ws = workspace_with_notes();
    let cmd = run_cmd(
        ws.path(),
        &upstream.base_url(),
        &["--inactivity-timeout", "4", "--timeout", "90"],
    );
    let output = output_of(cmd).await;
    assert_exit(&output, 7);
    let events = events(&output);
    let done = finished(&events);
    assert_eq!(done["status"], "timed_out");
    assert_eq!(done["error"]["kind"], "inactivity");
}

#[test]
fn tampered_install_is_refused_and_an_intact_copy_is_accepted() {
    let copy = tempfile::tempdir().unwrap();
    let prefix = copy.path().join("gemini");
    let status = Command::new("cp")
        .arg("-a")
        .arg(sealed_prefix())
        .arg(&prefix)
        .status()
        .unwrap();
    assert!(status.success());
    let ws = workspace_with_notes();
    let validate = |prefix: &Path| {
        Command::new(BIN)
            .args([
                "run",
                "--validate-config",
                "--prompt",
                "x",
                "--upstream-url",
                "http://127.0.0.1:9/v1",
            ])
            .args(["--upstream-model", "m"])
            .arg("--workdir")
            .arg(ws.path())
            .arg("--gemini-binary")
            .arg(prefix)
            .output()
            .unwrap()
    };
    let intact = validate(&prefix);
    assert_exit(&intact, 0);
    let bundle = prefix.join("node_modules/@google/gemini-cli/bundle/gemini.js");
    let mut text = std::fs::read(&bundle).unwrap();
    text.extend_from_slice(b"\n// tampered\n");
    std::fs::write(&bundle, text).unwrap();
    let tampered = validate(&prefix);
    let stderr = String::from_utf8_lossy(&tampered.stderr);
    assert_eq!(tampered.status.code(), Some(10), "{stderr}");
    assert!(
        stderr.contains("bundle/gemini.js") && stderr.contains("modified"),
        "{stderr}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_of_switchyard_leaves_no_guest_and_an_incomplete_exchange() {
    use switchyard_records::{ExchangeFilter, ExchangeStatus, RecordStore, SqliteStore};
    let upstream = ChatUpstream::start(Script::always(Reply::Hang))
        .await
        .unwrap();
    let ws = workspace_with_notes();
    let records = tempfile::tempdir().unwrap();
    let records_dir = records.path().to_str().unwrap();
    let mut child = run_cmd(
        ws.path(),
        &upstream.base_url(),
        &["--timeout", "120", "--records", records_dir],
    )
    .stdout(Stdio::null())
    .stderr(Stdio::null())
    .spawn()
    .unwrap();
    // Wait until the guest is running in the workspace and has asked the model.
    let deadline = Instant::now() + Duration::from_secs(60);
    while upstream.requests().is_empty() {
        assert!(
            Instant::now() < deadline,
            "the guest never called the upstream"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // The hung exchange is in the store while it runs (written once it outlasts the gateway's
    // begin-record delay).
    let store_path = switchyard_records::store_path(records.path());
    let in_flight = |store: &SqliteStore| {
        store
            .exchanges(ExchangeFilter::All)
            .unwrap_or_default()
            .into_iter()
            .filter(|e| e.status == ExchangeStatus::InFlight)
            .count()
    };
    loop {
        if let Ok(store) = SqliteStore::open_existing(&store_path)
            && in_flight(&store) > 0
        {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the hung exchange never reached the store"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let guests = processes_in(ws.path());
    assert!(
        !guests.is_empty(),
        "no guest process found in the workspace"
    );
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    child.wait().unwrap();
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let left = processes_in(ws.path());
        if left.is_empty() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "guest processes survived SIGKILL of switchyard: {left:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Opening the store after the crash marks what was in flight as incomplete.
    let store = SqliteStore::open(&store_path).unwrap();
    let exchanges = store.exchanges(ExchangeFilter::All).unwrap();
    assert_eq!(in_flight(&store), 0, "{exchanges:?}");
    let cut_off: Vec<_> = exchanges
        .iter()
        .filter(|e| e.status == ExchangeStatus::Incomplete)
        .collect();
    assert_eq!(cut_off.len(), 1, "the hung exchange: {exchanges:?}");
    assert_eq!(
        cut_off[0].error.as_ref().map(|e| e.kind.as_str()),
        Some("interrupted")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn records_match_what_the_upstream_saw() {
    use switchyard_records::{ExchangeFilter, RecordStore, SqliteStore};
    let FileRun {
        upstream,
        records,
        output,
        ..
    } = run_file_task().await;
    assert_exit(&output, 0);
    let printed = events(&output);

    let store = SqliteStore::open_existing(switchyard_records::store_path(records.path())).unwrap();
    let runs = store.runs().unwrap();
    assert_eq!(runs.len(), 1);
    let run = &runs[0];
    // The guest's own unredacted run directory is not left beside the records.
    assert!(
        !records
            .path()
            .join("runs")
            .join(run.id.to_string())
            .exists(),
        "run directory left in the records directory"
    );
    assert_eq!(run.agent, "gemini-cli");
    assert!(run.ended_at.is_some());
    assert_eq!(run.outcome.as_ref().unwrap()["status"], "succeeded");
    assert_eq!(run.summary.tool_calls, 1);

    // Every canonical event printed is stored, in order, identical.
    let stored: Vec<Value> = store
        .events(run.id)
        .unwrap()
        .into_iter()
        .map(|e| e.event)
        .collect();
    assert_eq!(stored, printed);
    // Raw guest stdout lines are kept too.
    assert!(
        store
            .raw_lines(run.id)
            .unwrap()
            .iter()
            .any(|l| l.line.contains("\"type\":\"init\""))
    );

    // Each exchange's upstream request is byte for byte what the scripted upstream received.
    let exchanges = store.exchanges(ExchangeFilter::Run(run.id)).unwrap();
    let seen = upstream.requests();
    assert_eq!(exchanges.len(), seen.len());
    for (exchange, request) in exchanges.iter().zip(&seen) {
        let attempt = exchange.attempts.last().expect("an upstream attempt");
        assert_eq!(
            serde_json::to_vec(&attempt.request).unwrap(),
            request.body.to_vec()
        );
        assert_eq!(attempt.status, Some(200));
        assert!(
            !attempt.raw_events.is_empty(),
            "raw upstream stream events are stored"
        );
    }
    // Every guest request reads back whole (system prompt and tools are stored once, as
    // blobs).
    for exchange in &exchanges {
        let guest = &exchange.guest_request;
        assert!(guest["systemInstruction"]["parts"].is_array(), "{guest}");
        assert!(
            guest["tools"][0]["functionDeclarations"].is_array(),
            "{guest}"
        );
        assert_eq!(
            guest["systemInstruction"],
            exchanges[0].guest_request["systemInstruction"]
        );
    }
    let first = &exchanges[0];
    assert_eq!(first.ingress_api, "google.streamGenerateContent");
    assert!(
        first
            .guest_request
            .to_string()
            .contains("What is the secret word in notes.txt?")
    );
    assert_eq!(first.function_calls.len(), 1);
    assert_eq!(first.function_calls[0].id, "call_live_1");
    assert_eq!(first.function_calls[0].name, "read_file");
    assert_eq!(
        first.function_calls[0].arguments,
        serde_json::json!({"file_path": "notes.txt"})
    );
    assert!(first.delivered_at.is_some());

    // Gemini CLI's own tool_result event for read_file carries no output; the timeline shows
    // the file text the guest sent the model in the next request.
    let view = switchyard_records::timeline::RunView::load(&store, &run.id.to_string()).unwrap();
    let sent = view.tool_results_sent();
    let result = view
        .events
        .iter()
        .find(|e| e.kind == "tool_result")
        .expect("a tool_result event");
    assert_eq!(result.event["output"], "", "{}", result.event);
    let call_id = result.event["call_id"].as_str().unwrap();
    assert!(
        sent[call_id]
            .to_string()
            .contains("The secret word is quokka."),
        "{sent:?}"
    );
    let timeline = switchyard_records::timeline::render_timeline(&view);
    assert!(
        timeline.contains(
            "sent to the model: {\"output\":\"Meeting notes.\\nThe secret word is quokka.\\n\"}"
        ),
        "{timeline}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_runs_share_one_record_store() {
    use switchyard_records::{ExchangeFilter, RecordStore, SqliteStore};
    let records = tempfile::tempdir().unwrap();
    let mut children = Vec::new();
    let mut keep = Vec::new();
    for _ in 0..2 {
        let upstream = ChatUpstream::start(file_dependent_script()).await.unwrap();
        let ws = workspace_with_notes();
        let mut cmd = run_cmd(ws.path(), &upstream.base_url(), &["--timeout", "120"]);
        cmd.arg("--records")
            .arg(records.path())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        children.push(cmd.spawn().unwrap());
        keep.push((upstream, ws));
    }
    let outputs = tokio::task::spawn_blocking(move || {
        children
            .into_iter()
            .map(|c| c.wait_with_output().unwrap())
            .collect::<Vec<_>>()
    })
    .await
    .unwrap();
    for output in &outputs {
        assert_exit(output, 0);
    }
    let store = SqliteStore::open_existing(switchyard_records::store_path(records.path())).unwrap();
    let runs = store.runs().unwrap();
    assert_eq!(runs.len(), 2);
    for (run, output) in runs.iter().zip(&outputs) {
        let printed = events(output);
        let id = printed[0]["run_id"].as_str().unwrap().to_owned();
        let run = runs.iter().find(|r| r.id.to_string() == id).unwrap_or(run);
        let stored: Vec<Value> = store
            .events(run.id)
            .unwrap()
            .into_iter()
            .map(|e| e.event)
            .collect();
        assert_eq!(stored, printed, "events of run {id}");
        assert_eq!(
            store.exchanges(ExchangeFilter::Run(run.id)).unwrap().len(),
            2
        );
    }
}

/// `switchyard run` of the notes task against `script`.
async fn run_notes_task(script: Script) -> (ChatUpstream, Output) {
    let upstream = ChatUpstream::start(script).await.unwrap();
    let ws = workspace_with_notes();
    let output = output_of(run_cmd(
        ws.path(),
        &upstream.base_url(),
        &["--timeout", "120"],
    ))
    .await;
    (upstream, output)
}

/// A streamed call the way llama.cpp's server sends one: the id and the whole name repeated in
/// every fragment of the arguments.
fn repeating_tool_call(id: &str, name: &str, arguments: &str) -> Reply {
    use switchyard_testkit::chat_upstream::{StreamEvent, StreamReply, chunk};
    let mut events = vec![StreamEvent::json(chunk::role())];
    let pieces: Vec<String> = arguments
        .chars()
        .collect::<Vec<_>>()
        .chunks(4)
        .map(|c| c.iter().collect())
        .collect();
    for piece in pieces {
        events.push(StreamEvent::json(chunk::tool_call(
            0,
            Some(id),
            Some(name),
            &piece,
        )));
    }
    events.push(StreamEvent::json(chunk::finish("tool_calls")));
    Reply::Stream(StreamReply::new(events))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_whose_name_repeats_in_every_fragment_reaches_the_tool_once_named() {
    let script = Script::new()
        .then_when(
            |r| r.tool_messages().is_empty(),
            repeating_tool_call("call_rep_1", "read_file", r#"{"file_path":"notes.txt"}"#),
        )
        .then(Reply::text_stream(["Read it."]));
    let (upstream, output) = run_notes_task(script).await;
    assert_exit(&output, 0);
    let events = events(&output);
    let call = events.iter().find(|e| e["type"] == "tool_call").unwrap();
    assert_eq!(call["tool_name"], "read_file");
    let result = events.iter().find(|e| e["type"] == "tool_result").unwrap();
    assert_eq!(result["status"], "success", "{result}");
    let sent = &upstream.requests()[1].tool_messages()[0];
    assert!(sent["content"].to_string().contains("quokka"), "{sent}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_empty_200_stream_is_a_model_api_failure() {
    use switchyard_testkit::chat_upstream::{StreamEnd, StreamReply};
    let empty = Reply::Stream(StreamReply::new(Vec::new()).ending(StreamEnd::Close));
    let (upstream, output) = run_notes_task(Script::always(empty)).await;
    assert_exit(&output, 4);
    let events = events(&output);
    let done = finished(&events);
    assert_eq!(done["error"]["kind"], "api", "{done}");
    // The gateway retried the empty stream within its budget before giving up.
    assert!(upstream.requests().len() >= 2);
}
