//! Live tests of host tools: the real `switchyard` binary runs the real, pinned Gemini CLI with
//! `--tools` (a command handler that logs what it ran) and `--finish-schema`, against a scripted
//! Chat Completions upstream on 127.0.0.1.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use switchyard_backend::gemini::{PACKAGE, VERSION};
use switchyard_testkit::chat_upstream::{ChatUpstream, RecordedRequest, Reply, Script};

const BIN: &str = env!("CARGO_BIN_EXE_switchyard");

fn sealed_prefix() -> PathBuf {
    let prefix = switchyard_testkit::guest::gemini_prefix();
    if switchyard_backend::install::verify(&prefix, PACKAGE, VERSION).is_err() {
        switchyard_backend::install::seal(&prefix, PACKAGE, VERSION)
            .expect("seal the test install");
    }
    prefix
}

/// A folder with the tools file, its handler and the finish schema; the handler logs every
/// call it runs to `ran.log` there.
fn tools_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/host_tools");
    for file in ["record.py", "tools.toml", "finish.json"] {
        std::fs::copy(source.join(file), dir.path().join(file)).unwrap();
    }
    dir
}

fn ran(tools: &Path) -> Vec<Value> {
    std::fs::read_to_string(tools.join("ran.log"))
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

struct HostRun {
    output: Output,
    events: Vec<Value>,
    upstream: ChatUpstream,
    tools: tempfile::TempDir,
    _workspace: tempfile::TempDir,
}

async fn host_run(script: Script, finish: bool) -> HostRun {
    let upstream = ChatUpstream::start(script).await.unwrap();
    let workspace = tempfile::tempdir().unwrap();
    let tools = tools_dir();
    let mut cmd = Command::new(BIN);
    cmd.args([
        "run",
        "--agent",
        "gemini-cli",
        "--prompt",
        "Record the nonce.",
    ])
    .arg("--workdir")
    .arg(workspace.path())
    .args([
        "--upstream-url",
        &format!("{}/v1", upstream.base_url()),
        "--upstream-model",
        "scripted-model",
    ])
    .arg("--gemini-binary")
    .arg(sealed_prefix())
    .args(["--output", "jsonl", "--timeout", "120"])
    .arg("--tools")
    .arg(tools.path().join("tools.toml"))
    .env("SWITCHYARD_UPSTREAM_KEY", "sk-live-test-key")
    .stdin(Stdio::null());
    if finish {
        cmd.arg("--finish-schema")
            .arg(tools.path().join("finish.json"));
    }
    let output = tokio::task::spawn_blocking(move || cmd.output().unwrap())
        .await
        .unwrap();
    let events = String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect();
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
    let run = host_run(script, false).await;
    assert_eq!(run.output.status.code(), Some(0), "{}", run.stderr());
    // The host tool ran twice, with the model's arguments only.
    assert_eq!(
        ran(run.tools.path()),
        [json!({"nonce": "n-123"}), json!({"nonce": "n-123"})],
        "{}",
        run.transcript()
    );
    let admitted: Vec<&str> = run
        .of_type("host_call")
        .iter()
        .filter(|e| e["decision"] == "admitted")
        .map(|e| e["model_call_id"].as_str().unwrap())
        .collect();
    assert_eq!(admitted, ["call_rec_a", "call_rec_b"]);
    assert_eq!(run.of_type("host_result").len(), 2);
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
