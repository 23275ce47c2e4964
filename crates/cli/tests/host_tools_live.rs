//! Live tests of host tools: the real `switchyard` binary runs the real, pinned Gemini CLI with
//! `--tools` (a command handler that logs what it ran) and `--finish-schema`, against a scripted
//! Chat Completions upstream on 127.0.0.1.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use serde_json::{Value, json};
use std::path::Path;
use std::process::Output;
use switchyard_testkit::chat_upstream::{ChatUpstream, RecordedRequest, Reply, Script};

mod common;
use common::{events, gemini_run, output_of, ran, tools_dir};

struct HostRun {
    output: Output,
    events: Vec<Value>,
    upstream: ChatUpstream,
    tools: tempfile::TempDir,
    _workspace: tempfile::TempDir,
}

async fn host_run(script: Script, finish: bool, extra: &[&str]) -> HostRun {
    let upstream = ChatUpstream::start(script).await.unwrap();
    let workspace = tempfile::tempdir().unwrap();
    let tools = tools_dir();
    let mut cmd = gemini_run(workspace.path(), &upstream.base_url(), "Record the nonce.");
    cmd.args(["--timeout", "120"])
        .arg("--tools")
        .arg(tools.path().join("tools.toml"))
        .args(extra);
    std::fs::copy(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/host_tools/forge.py"),
        workspace.path().join("forge.py"),
    )
    .unwrap();
    if finish {
        cmd.arg("--finish-schema")
            .arg(tools.path().join("finish.json"));
    }
    let output = output_of(cmd).await;
    let events = events(&output);
    HostRun {
        output,
        events,
        upstream,
        tools,
        _workspace: workspace,
    }
}

impl HostRun {
    fn stderr(&self) -> String {
        String::from_utf8_lossy(&self.output.stderr).into_owned()
    }
    /// Events and stderr, for failure messages.
    fn transcript(&self) -> String {
        let events: Vec<String> = self.events.iter().map(Value::to_string).collect();
        format!("events:\n{}\nstderr:\n{}", events.join("\n"), self.stderr())
    }
    fn of_type(&self, kind: &str) -> Vec<&Value> {
        self.events.iter().filter(|e| e["type"] == kind).collect()
    }
    fn finished(&self) -> &Value {
        let last = self.events.last().expect("events");
        assert_eq!(last["type"], "run_finished", "{}", self.stderr());
        last
    }
    fn requests(&self) -> Vec<RecordedRequest> {
        self.upstream.requests()
    }
}

fn no_tool_results(r: &RecordedRequest) -> bool {
    r.tool_messages().is_empty()
}

const RECORD: &str = "mcp_switchyard_record";
const FINISH: &str = "mcp_switchyard_finish";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_identical_calls_run_twice_with_their_own_model_ids() {
    identical_calls(&[]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_acp_two_identical_calls_run_twice_with_their_own_model_ids() {
    identical_calls(ACP).await;
}

/// `--protocol acp`: the MCP server is given to `session/new`, and the policy allows the run's
/// own host tools when the guest asks.
const ACP: &[&str] = &["--protocol", "acp"];

async fn identical_calls(extra: &[&str]) {
    let script = Script::new()
        .then_when(
            no_tool_results,
            Reply::tool_calls_stream(
                &[
                    ("call_rec_a", RECORD, r#"{"nonce":"n-123"}"#),
                    ("call_rec_b", RECORD, r#"{"nonce":"n-123"}"#),
                ],
                7,
            ),
        )
        .then(Reply::text_stream(["Recorded twice."]));
    let run = host_run(script, false, extra).await;
    assert_eq!(run.output.status.code(), Some(0), "{}", run.stderr());
    // The host tool ran twice, with the model's arguments only.
    assert_eq!(
        ran(run.tools.path()),
        [json!({"nonce": "n-123"}), json!({"nonce": "n-123"})],
        "{}",
        run.transcript()
    );
    // Gemini CLI sends both callbacks at once, so they are admitted in either order; each
    // claimed its own model call, and they returned in the model's order.
    let mut admitted: Vec<&str> = run
        .of_type("host_call")
        .iter()
        .filter(|e| e["decision"] == "admitted")
        .map(|e| e["model_call_id"].as_str().unwrap())
        .collect();
    admitted.sort_unstable();
    assert_eq!(admitted, ["call_rec_a", "call_rec_b"]);
    let returned: Vec<&str> = run
        .of_type("host_result")
        .iter()
        .map(|e| e["model_call_id"].as_str().unwrap())
        .collect();
    assert_eq!(returned, ["call_rec_a", "call_rec_b"]);
    // The model never sees the identity: not in the declared schema, not in the history.
    let requests = run.requests();
    let first = requests[0].json();
    let declared = first["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["function"]["name"] == RECORD)
        .expect("the host tool is offered to the model");
    assert!(
        !declared.to_string().contains("_switchyard_call"),
        "{declared}"
    );
    let last = requests.last().unwrap().json();
    assert!(!last.to_string().contains("_switchyard_call"), "{last}");
    assert!(last.to_string().contains("recorded n-123"), "{last}");
}

fn host_calls<'a>(run: &'a HostRun, decision: &str) -> Vec<&'a Value> {
    run.of_type("host_call")
        .into_iter()
        .filter(|e| e["decision"] == decision)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parallel_calls_run_in_the_model_order() {
    parallel_calls(&[]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_acp_parallel_calls_run_in_the_model_order() {
    parallel_calls(ACP).await;
}

async fn parallel_calls(extra: &[&str]) {
    let script = Script::new()
        .then_when(
            no_tool_results,
            Reply::tool_calls_stream(
                &[
                    ("call_first", RECORD, r#"{"nonce":"first"}"#),
                    ("call_second", RECORD, r#"{"nonce":"second"}"#),
                    ("call_third", RECORD, r#"{"nonce":"third"}"#),
                ],
                4,
            ),
        )
        .then(Reply::text_stream(["Done."]));
    let run = host_run(script, false, extra).await;
    assert_eq!(run.output.status.code(), Some(0), "{}", run.transcript());
    let nonces: Vec<Value> = ran(run.tools.path())
        .into_iter()
        .map(|v| v["nonce"].clone())
        .collect();
    assert_eq!(nonces, ["first", "second", "third"], "{}", run.transcript());
    // One model response: one turn, though the guest runs the calls one after another.
    let turns: Vec<&Value> = run
        .of_type("tool_call")
        .iter()
        .map(|e| &e["turn"])
        .collect();
    assert_eq!(turns, [0, 0, 0], "{}", run.transcript());
    // Gemini CLI sends the three callbacks at once; they ran (and returned) in model order.
    let returned: Vec<&Value> = run
        .of_type("host_result")
        .iter()
        .map(|e| &e["model_call_id"])
        .collect();
    assert_eq!(returned, ["call_first", "call_second", "call_third"]);
    let mut positions: Vec<(String, u64)> = host_calls(&run, "admitted")
        .iter()
        .map(|e| {
            (
                e["model_call_id"].as_str().unwrap().to_owned(),
                e["position"].as_u64().unwrap(),
            )
        })
        .collect();
    positions.sort();
    assert_eq!(
        positions,
        [
            ("call_first".to_owned(), 0),
            ("call_second".to_owned(), 1),
            ("call_third".to_owned(), 2)
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_malformed_call_never_reaches_the_host_tool() {
    let script = Script::new()
        .then_when(
            no_tool_results,
            Reply::tool_calls_stream(&[("call_bad", RECORD, r#"{"nonce":5}"#)], 3),
        )
        .then(Reply::text_stream(["Could not record."]));
    let run = host_run(script, false, &[]).await;
    assert_eq!(run.output.status.code(), Some(0), "{}", run.transcript());
    assert!(ran(run.tools.path()).is_empty(), "{}", run.transcript());
    let results = run.of_type("tool_result");
    assert_eq!(results.len(), 1, "{}", run.transcript());
    assert_eq!(results[0]["status"], "error");
    // The model was told why.
    let told = run.requests().last().unwrap().json().to_string();
    assert!(told.contains("nonce"), "{told}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forged_callback_from_the_guest_shell_is_refused_and_recorded() {
    let script = Script::new()
        .then_when(
            no_tool_results,
            Reply::tool_calls_stream(
                &[(
                    "call_shell",
                    "run_shell_command",
                    r#"{"command":"python3 forge.py","description":"forge"}"#,
                )],
                9,
            ),
        )
        .then(Reply::text_stream(["Tried."]));
    let run = host_run(script, false, &["--approval-mode", "yolo"]).await;
    let offered: Vec<String> = run.requests()[0].json()["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].to_string())
        .collect();
    assert_eq!(run.output.status.code(), Some(0), "{}", run.transcript());
    assert!(
        offered.iter().any(|n| n.contains("run_shell_command")),
        "{offered:?} {}",
        run.stderr()
    );
    assert!(ran(run.tools.path()).is_empty(), "{}", run.transcript());
    let refused: Vec<&Value> = host_calls(&run, "refused");
    let reasons: Vec<&Value> = refused.iter().map(|e| &e["reason"]).collect();
    assert_eq!(
        reasons,
        ["missing_identity", "not_delivered"],
        "{}",
        run.transcript()
    );
    assert!(host_calls(&run, "admitted").is_empty());
    // The shell saw MCP errors, not results.
    let shell_output = run.requests().last().unwrap().tool_messages()[0]["content"].to_string();
    assert!(
        shell_output.contains("switchyard refused this callback"),
        "{shell_output}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn finish_is_the_result_a_bad_one_is_explained_and_a_second_refused() {
    let script = Script::new()
        .then(Reply::tool_calls_stream(
            &[("call_f1", FINISH, r#"{"colour":"purple"}"#)],
            5,
        ))
        .then(Reply::tool_calls_stream(
            &[("call_f2", FINISH, r#"{"colour":"red"}"#)],
            5,
        ))
        .then(Reply::tool_calls_stream(
            &[("call_f3", FINISH, r#"{"colour":"blue"}"#)],
            5,
        ))
        .then(Reply::text_stream(["Finished."]));
    let run = host_run(script, true, &[]).await;
    assert_eq!(run.output.status.code(), Some(0), "{}", run.transcript());
    let finished = run.finished();
    assert_eq!(finished["status"], "succeeded");
    assert_eq!(
        finished["result"],
        json!({"colour": "red"}),
        "{}",
        run.transcript()
    );
    let requests = run.requests();
    assert_eq!(requests.len(), 4, "{}", run.transcript());
    let told_bad = requests[1].tool_messages()[0]["content"].to_string();
    // The guest checks the schema it was given before calling; the model is told either way.
    assert!(told_bad.contains("allowed values"), "{told_bad}");
    let told_second = requests[3].tool_messages().last().unwrap()["content"].to_string();
    assert!(
        told_second.contains("second finish is refused"),
        "{told_second}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_finish_call_the_run_has_no_result_and_fails() {
    let run = host_run(
        Script::new().then(Reply::text_stream(["All done."])),
        true,
        &[],
    )
    .await;
    assert_eq!(run.output.status.code(), Some(11), "{}", run.transcript());
    let finished = run.finished();
    assert_eq!(finished["status"], "failed");
    assert_eq!(finished["error"]["kind"], "no_finish");
    assert!(finished.get("result").is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_truncated_call_is_never_delivered_so_nothing_can_claim_it() {
    // Every answer is a host-tool call whose arguments are cut off mid-JSON.
    let script = Script::always(Reply::malformed_tool_call_stream("call_cut", RECORD));
    let run = host_run(script, false, &["--max-turns", "3"]).await;
    assert!(ran(run.tools.path()).is_empty(), "{}", run.transcript());
    assert!(run.of_type("host_call").is_empty(), "{}", run.transcript());
    assert!(
        run.of_type("tool_call").is_empty(),
        "the guest never received the call: {}",
        run.transcript()
    );
    assert_ne!(run.finished()["status"], "succeeded");
}
