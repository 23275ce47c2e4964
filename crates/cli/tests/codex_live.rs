//! Live tests of `switchyard run --agent codex`: the real `switchyard` binary owns the real,
//! pinned Codex (`codex app-server`, the native binary), whose model calls go through the
//! embedded gateway's Responses ingress to a scripted Chat Completions upstream on 127.0.0.1.
//! Records (and so the run directory with its `CODEX_HOME`) live outside /tmp: Codex refuses
//! to create its helper links under a temporary directory.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use serde_json::{Value, json};
use switchyard_testkit::chat_upstream::{ChatUpstream, RecordedRequest, Reply, Script};

mod common;
use common::{events, of_kind, output_of, tools_dir, transcript};

fn first_turn(r: &RecordedRequest) -> bool {
    r.tool_messages().is_empty()
}

fn after_tool(r: &RecordedRequest) -> bool {
    !r.tool_messages().is_empty()
}

/// A directory for records outside /tmp (below the workspace's `.cache/`), removed on drop.
fn records_dir() -> tempfile::TempDir {
    let base = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../.cache/codex-live");
    std::fs::create_dir_all(&base).unwrap();
    tempfile::tempdir_in(base).unwrap()
}

/// `switchyard run --agent codex` on `workdir` with `prompt`, printing JSONL events.
fn codex_run(workdir: &Path, upstream: &str, prompt: &str, records: &Path) -> Command {
    let mut cmd = Command::new(common::BIN);
    cmd.args(["run", "--agent", "codex", "--prompt", prompt])
        .arg("--workdir")
        .arg(workdir)
        .args([
            "--upstream-url",
            &format!("{upstream}/v1"),
            "--upstream-model",
            "scripted-model",
        ])
        .arg("--codex-binary")
        .arg(common::sealed_codex())
        .arg("--records")
        .arg(records)
        .args(["--output", "jsonl", "--timeout", "120"])
        .env("SWITCHYARD_UPSTREAM_KEY", "sk-live-test-key")
        .stdin(Stdio::null());
    cmd
}

struct Run {
    output: Output,
    events: Vec<Value>,
    upstream: ChatUpstream,
}

impl Run {
    fn finished(&self) -> &Value {
        let last = self.events.last().expect("events");
        assert_eq!(last["type"], "run_finished", "{}", transcript(&self.output));
        last
    }
    fn of(&self, kind: &str) -> Vec<&Value> {
        of_kind(&self.events, kind)
    }
    fn transcript(&self) -> String {
        transcript(&self.output)
    }
}

async fn run(script: Script, ws: &Path, prompt: &str, records: &Path, extra: &[&str]) -> Run {
    let upstream = ChatUpstream::start(script).await.unwrap();
    let mut cmd = codex_run(ws, &upstream.base_url(), prompt, records);
    cmd.args(extra);
    let output = output_of(cmd).await;
    let events = events(&output);
    Run {
        output,
        events,
        upstream,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_text_answer_succeeds_with_its_final_text() {
    let (ws, records) = (tempfile::tempdir().unwrap(), records_dir());
    let r = run(
        Script::always(Reply::text_stream(["Hello ", "from Codex."])),
        ws.path(),
        "Say hello.",
        records.path(),
        &[],
    )
    .await;
    assert_eq!(r.output.status.code(), Some(0), "{}", r.transcript());
    let done = r.finished();
    assert_eq!(done["status"], "succeeded");
    assert_eq!(done["final_text"], "Hello from Codex.");
    assert_eq!(r.of("session_started").len(), 1);
    assert_eq!(r.of("prompt_finished").len(), 1);
    assert_eq!(done["unrecognized_lines"], 0, "{}", r.transcript());
    // Codex's own instructions and the prompt reached the upstream.
    let first = r.upstream.requests()[0].json();
    assert!(first.to_string().contains("Say hello."));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_answer_depends_on_a_shell_call() {
    let (ws, records) = (tempfile::tempdir().unwrap(), records_dir());
    std::fs::write(ws.path().join("note.txt"), "kumquat\n").unwrap();
    let args = json!({"cmd": "cat note.txt"}).to_string();
    let script = Script::new()
        .then_when(
            first_turn,
            Reply::tool_calls_stream(&[("up_cat", "exec_command", &args)], 6),
        )
        .then_when(
            |r| {
                r.tool_messages()
                    .iter()
                    .any(|m| m["content"].to_string().contains("kumquat"))
            },
            Reply::text_stream(["It says kumquat."]),
        );
    let r = run(script, ws.path(), "Read note.txt.", records.path(), &[]).await;
    assert_eq!(r.output.status.code(), Some(0), "{}", r.transcript());
    let call = r.of("tool_call");
    assert_eq!(call.len(), 1, "{}", r.transcript());
    assert_eq!(call[0]["tool_name"], "exec_command");
    assert_eq!(call[0]["model_call_id"], "up_cat");
    assert_eq!(call[0]["category"]["kind"], "command");
    assert_eq!(call[0]["arguments"]["cmd"], "cat note.txt");
    let result = r.of("tool_result");
    assert_eq!(result[0]["status"], "success", "{}", r.transcript());
    assert_eq!(result[0]["call_id"], call[0]["call_id"]);
    assert!(result[0]["output"].as_str().unwrap().contains("kumquat"));
    assert_eq!(r.finished()["final_text"], "It says kumquat.");
    assert_eq!(r.upstream.unmatched(), 0);
    // The sandboxed command left nothing in the workspace.
    let mut left: Vec<String> = std::fs::read_dir(ws.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    left.sort();
    assert_eq!(left, ["note.txt"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apply_patch_edits_a_file() {
    let (ws, records) = (tempfile::tempdir().unwrap(), records_dir());
    std::fs::write(ws.path().join("hello.txt"), "old line\n").unwrap();
    let patch =
        "*** Begin Patch\n*** Update File: hello.txt\n@@\n-old line\n+new line\n*** End Patch\n";
    let args = json!({"input": patch}).to_string();
    let script = Script::new()
        .then_when(
            first_turn,
            Reply::tool_calls_stream(&[("up_patch", "apply_patch", &args)], 5),
        )
        .then_when(after_tool, Reply::text_stream(["Patched."]));
    let r = run(script, ws.path(), "Fix hello.txt.", records.path(), &[]).await;
    assert_eq!(r.output.status.code(), Some(0), "{}", r.transcript());
    assert_eq!(
        std::fs::read_to_string(ws.path().join("hello.txt")).unwrap(),
        "new line\n"
    );
    let call = r.of("tool_call");
    assert_eq!(call[0]["tool_name"], "apply_patch", "{}", r.transcript());
    assert_eq!(call[0]["category"]["kind"], "file_write");
    assert_eq!(r.of("tool_result")[0]["status"], "success");
    assert_eq!(r.finished()["final_text"], "Patched.");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_escalated_command_is_declined_by_the_policy_and_the_run_goes_on() {
    let (ws, records) = (tempfile::tempdir().unwrap(), records_dir());
    let outside = records.path().join("pwned");
    let args = json!({"cmd": format!("touch {}", outside.display()),
        "sandbox_permissions": "require_escalated",
        "justification": "write outside the workspace"})
    .to_string();
    let script = Script::new()
        .then_when(
            first_turn,
            Reply::tool_calls_stream(&[("up_esc", "exec_command", &args)], 6),
        )
        .then_when(after_tool, Reply::text_stream(["I may not run that."]));
    let r = run(script, ws.path(), "Make a file.", records.path(), &[]).await;
    assert_eq!(r.output.status.code(), Some(0), "{}", r.transcript());
    let permission = r.of("permission");
    assert_eq!(permission.len(), 1, "{}", r.transcript());
    assert_eq!(permission[0]["outcome"], "rejected");
    assert_eq!(permission[0]["tool"], "exec_command");
    assert_eq!(permission[0]["model_call_id"], "up_esc");
    let result = r.of("tool_result");
    assert_eq!(result[0]["status"], "error");
    assert_eq!(result[0]["error"]["kind"], "permission_rejected");
    assert!(!outside.exists(), "the command never ran");
    assert_eq!(r.upstream.requests().len(), 2, "{}", r.transcript());
    assert_eq!(r.finished()["final_text"], "I may not run that.");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigint_mid_turn_interrupts_and_leaves_no_process() {
    let upstream = ChatUpstream::start(Script::always(Reply::Hang))
        .await
        .unwrap();
    let (ws, records) = (tempfile::tempdir().unwrap(), records_dir());
    let child = codex_run(ws.path(), &upstream.base_url(), "hang", records.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while upstream.requests().is_empty() {
        assert!(std::time::Instant::now() < deadline, "no model call");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert!(
        !common::processes_in(ws.path()).is_empty(),
        "the guest runs in the workspace"
    );
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGINT,
    )
    .unwrap();
    let output = tokio::task::spawn_blocking(move || child.wait_with_output().unwrap())
        .await
        .unwrap();
    let events = events(&output);
    assert_eq!(output.status.code(), Some(8), "{}", transcript(&output));
    assert_eq!(events.last().unwrap()["status"], "cancelled");
    let left = common::processes_in(ws.path());
    assert!(left.is_empty(), "processes left: {left:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_recorded_thread_resumes_with_its_history() {
    let (ws, records) = (tempfile::tempdir().unwrap(), records_dir());
    let first = run(
        Script::always(Reply::text_stream(["Noted: kumquat."])),
        ws.path(),
        "Remember the word kumquat.",
        records.path(),
        &[],
    )
    .await;
    assert_eq!(
        first.output.status.code(),
        Some(0),
        "{}",
        first.transcript()
    );
    let run_id = first.events[0]["run_id"].as_str().unwrap().to_owned();
    let thread = first.of("session_started")[0]["session_id"].clone();
    let script = Script::new().then_when(
        |r| r.json().to_string().contains("Noted: kumquat."),
        Reply::text_stream(["The word was kumquat."]),
    );
    let second = run(
        script,
        ws.path(),
        "Which word?",
        records.path(),
        &["--resume", &run_id],
    )
    .await;
    assert_eq!(
        second.output.status.code(),
        Some(0),
        "{}",
        second.transcript()
    );
    assert_eq!(second.of("session_started")[0]["session_id"], thread);
    assert_eq!(second.finished()["final_text"], "The word was kumquat.");
    let body = second.upstream.requests()[0].json().to_string();
    let earlier = body.find("Remember the word kumquat.").unwrap();
    let now = body.find("Which word?").unwrap();
    assert!(earlier < now, "{body:.400}");
}

const RECORD: &str = "mcp__switchyard__record";
const FINISH: &str = "mcp__switchyard__finish";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn host_tools_run_once_per_call_and_finish_is_the_result() {
    let (ws, records) = (tempfile::tempdir().unwrap(), records_dir());
    let tools = tools_dir();
    let script = Script::new()
        .then_when(
            first_turn,
            Reply::tool_calls_stream(
                &[
                    ("call_rec_a", RECORD, r#"{"nonce":"n-7"}"#),
                    ("call_rec_b", RECORD, r#"{"nonce":"n-7"}"#),
                ],
                5,
            ),
        )
        .then_when(
            |r| r.tool_messages().len() == 2,
            Reply::tool_calls_stream(&[("call_fin", FINISH, r#"{"colour":"green"}"#)], 5),
        )
        .then_when(after_tool, Reply::text_stream(["Done."]));
    let path = |name: &str| tools.path().join(name).to_string_lossy().into_owned();
    let r = run(
        script,
        ws.path(),
        "Record the nonce twice, then finish.",
        records.path(),
        &[
            "--tools",
            &path("tools.toml"),
            "--finish-schema",
            &path("finish.json"),
        ],
    )
    .await;
    assert_eq!(r.output.status.code(), Some(0), "{}", r.transcript());
    let ran: Vec<Value> = std::fs::read_to_string(tools.path().join("ran.log"))
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(
        ran,
        [json!({"nonce": "n-7"}), json!({"nonce": "n-7"})],
        "{}",
        r.transcript()
    );
    let mut admitted: Vec<&str> = r
        .of("host_call")
        .iter()
        .filter(|e| e["decision"] == "admitted")
        .map(|e| e["model_call_id"].as_str().unwrap())
        .collect();
    admitted.sort_unstable();
    assert_eq!(admitted, ["call_fin", "call_rec_a", "call_rec_b"]);
    assert_eq!(r.finished()["result"], json!({"colour": "green"}));
    // Each MCP call was approved by the policy (the run's own host tools) on its delivered call.
    let permissions = r.of("permission");
    assert_eq!(permissions.len(), 3, "{}", r.transcript());
    assert!(
        permissions.iter().all(|p| p["outcome"] == "allowed"),
        "{}",
        r.transcript()
    );
    let calls = r.of("tool_call");
    assert_eq!(calls.len(), 3, "{}", r.transcript());
    assert!(calls.iter().all(|c| c["category"]["kind"] == "mcp"));
    for request in r.upstream.requests() {
        let body = request.json().to_string();
        assert!(!body.contains("_switchyard_call"), "{body:.300}");
    }
}

/// A workspace whose `.codex/config.toml` redirects the model traffic to a trap and declares
/// an MCP server that writes a marker: the run succeeds through the gateway, nothing of it
/// runs, the trap gets no request, and the run says what it found.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hostile_workspace_config_is_ignored() {
    let (ws, records) = (tempfile::tempdir().unwrap(), records_dir());
    let markers = tempfile::tempdir().unwrap();
    let trap = ChatUpstream::start(Script::always(Reply::text_stream(["trapped"])))
        .await
        .unwrap();
    let hostile = switchyard_testkit::hostile_workspace::HostileWorkspace::write(
        ws.path(),
        markers.path(),
        &trap.base_url(),
    )
    .unwrap();
    let r = run(
        Script::always(Reply::text_stream(["Still here."])),
        ws.path(),
        "Hi.",
        records.path(),
        &[],
    )
    .await;
    assert_eq!(r.output.status.code(), Some(0), "{}", r.transcript());
    assert_eq!(r.finished()["final_text"], "Still here.");
    assert!(trap.requests().is_empty(), "{}", r.transcript());
    assert_eq!(hostile.markers_written(), Vec::<String>::new());
    let ignored: Vec<&Value> = r
        .of("workspace_config_ignored")
        .into_iter()
        .filter(|e| e["path"] == ".codex")
        .collect();
    assert_eq!(ignored.len(), 1, "{}", r.transcript());
    assert_eq!(ignored[0]["keys"], json!(["config.toml"]));
    assert_eq!(r.upstream.requests().len(), 1);
}

/// SIGINT while a command runs in the sandbox: the turn is interrupted, the command is gone,
/// and the empty mount points the sandbox made in the workspace are gone too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigint_mid_command_leaves_no_process_and_a_clean_workspace() {
    let args = json!({"cmd": "sleep 30", "yield_time_ms": 30000}).to_string();
    let script = Script::new()
        .then_when(
            first_turn,
            Reply::tool_calls_stream(&[("up_sleep", "exec_command", &args)], 6),
        )
        .then(Reply::text_stream(["woke"]));
    let upstream = ChatUpstream::start(script).await.unwrap();
    let (ws, records) = (tempfile::tempdir().unwrap(), records_dir());
    let child = codex_run(ws.path(), &upstream.base_url(), "sleep", records.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while upstream.requests().is_empty() {
        assert!(std::time::Instant::now() < deadline, "no model call");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    // The command starts in the sandbox.
    tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGINT,
    )
    .unwrap();
    let output = tokio::task::spawn_blocking(move || child.wait_with_output().unwrap())
        .await
        .unwrap();
    let events = events(&output);
    assert_eq!(output.status.code(), Some(8), "{}", transcript(&output));
    let calls = of_kind(&events, "tool_call");
    assert_eq!(calls.len(), 1, "{}", transcript(&output));
    let results = of_kind(&events, "tool_result");
    assert_eq!(results[0]["error"]["kind"], "interrupted");
    let left = common::processes_in(ws.path());
    assert!(left.is_empty(), "processes left: {left:?}");
    let entries: Vec<String> = std::fs::read_dir(ws.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(entries.is_empty(), "left in the workspace: {entries:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parallel_and_identical_calls_stay_distinct_in_one_turn() {
    let (ws, records) = (tempfile::tempdir().unwrap(), records_dir());
    let echo = |word: &str| json!({"cmd": format!("echo {word}")}).to_string();
    let (a, b) = (echo("A"), echo("B"));
    let script = Script::new()
        .then_when(
            first_turn,
            Reply::tool_calls_stream(
                &[
                    ("call_a1", "exec_command", &a),
                    ("call_a2", "exec_command", &a),
                    ("call_b", "exec_command", &b),
                ],
                5,
            ),
        )
        .then_when(after_tool, Reply::text_stream(["ran three"]));
    let r = run(script, ws.path(), "Run them.", records.path(), &[]).await;
    assert_eq!(r.output.status.code(), Some(0), "{}", r.transcript());
    let calls = r.of("tool_call");
    let mut ids: Vec<&str> = calls
        .iter()
        .map(|c| c["model_call_id"].as_str().unwrap())
        .collect();
    ids.sort_unstable();
    assert_eq!(ids, ["call_a1", "call_a2", "call_b"], "{}", r.transcript());
    let delivered: std::collections::HashSet<&str> = calls
        .iter()
        .map(|c| c["call_id"].as_str().unwrap())
        .collect();
    assert_eq!(delivered.len(), 3, "each call its own delivered id");
    assert!(calls.iter().all(|c| c["turn"] == 0), "one model turn");
    let results = r.of("tool_result");
    assert_eq!(results.len(), 3);
    assert!(results.iter().all(|t| t["status"] == "success"));
    // The upstream gets one answer per call, each under its own id.
    let mut answered: Vec<String> = r.upstream.requests()[1]
        .tool_messages()
        .iter()
        .map(|m| m["tool_call_id"].as_str().unwrap().to_owned())
        .collect();
    answered.sort_unstable();
    assert_eq!(answered, ["call_a1", "call_a2", "call_b"]);
    assert_eq!(r.finished()["final_text"], "ran three");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_png_viewed_with_view_image_reaches_the_upstream_as_lossless_webp() {
    use base64::Engine as _;
    let (ws, records) = (tempfile::tempdir().unwrap(), records_dir());
    let pixels: Vec<u8> = (0..32 * 32 * 3).map(|i| (i * 13 % 251) as u8).collect();
    let png = switchyard_testkit::fixtures::rgb_png(32, 32, &pixels).unwrap();
    std::fs::write(ws.path().join("pic.png"), png).unwrap();
    let args = json!({"path": ws.path().canonicalize().unwrap().join("pic.png")}).to_string();
    let script = Script::new()
        .then_when(
            first_turn,
            Reply::tool_calls_stream(&[("call_img", "view_image", &args)], 9),
        )
        .then_when(after_tool, Reply::text_stream(["a gradient"]));
    let r = run(script, ws.path(), "Look at pic.png.", records.path(), &[]).await;
    assert_eq!(r.output.status.code(), Some(0), "{}", r.transcript());
    let second = r.upstream.requests()[1].json();
    let url = second["messages"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|m| m["content"].as_array().cloned().unwrap_or_default())
        .find_map(|p| p["image_url"]["url"].as_str().map(str::to_owned))
        .unwrap_or_else(|| panic!("no image upstream: {second}"));
    let data = url
        .strip_prefix("data:image/webp;base64,")
        .unwrap_or_else(|| panic!("not WebP: {url:.60}"));
    let webp = base64::engine::general_purpose::STANDARD
        .decode(data)
        .unwrap();
    let decoded = switchyard_translate::image::decode_webp(&webp).unwrap();
    assert_eq!(decoded.data, pixels, "lossless");
    assert_eq!(r.finished()["final_text"], "a gradient");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_upstream_fails_fast_without_guest_retries() {
    let port = common::closed_port();
    let (ws, records) = (tempfile::tempdir().unwrap(), records_dir());
    let started = std::time::Instant::now();
    let cmd = codex_run(
        ws.path(),
        &format!("http://127.0.0.1:{port}"),
        "hello",
        records.path(),
    );
    let output = output_of(cmd).await;
    let events = events(&output);
    assert_eq!(output.status.code(), Some(4), "{}", transcript(&output));
    let done = events.last().unwrap();
    assert_eq!(done["status"], "failed");
    assert_eq!(done["error"]["kind"], "api", "{done}");
    // Codex took the gateway's answer as final: one exchange, not its own retries on top.
    let listing = Command::new(common::BIN)
        .args(["records", "--records"])
        .arg(records.path())
        .arg("exchanges")
        .output()
        .unwrap();
    let exchanges = String::from_utf8_lossy(&listing.stdout)
        .lines()
        .filter(|l| l.contains("openai.responses"))
        .count();
    assert_eq!(exchanges, 1, "{}", String::from_utf8_lossy(&listing.stdout));
    assert!(started.elapsed() < std::time::Duration::from_secs(60));
}
