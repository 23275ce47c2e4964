//! Live tests of `switchyard run --agent claude-code`: the real `switchyard` binary owns the
//! real, pinned Claude Code (`claude -p` on stream-json), whose model calls go through the
//! embedded gateway's Messages ingress to a scripted Chat Completions upstream on 127.0.0.1.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::process::Output;

use serde_json::{Value, json};
use switchyard_testkit::chat_upstream::{ChatUpstream, RecordedRequest, Reply, Script};

mod common;
use common::{claude_run, events, of_kind, output_of, tools_dir, transcript};

fn first_turn(r: &RecordedRequest) -> bool {
    r.tool_messages().is_empty()
}

/// The request's last message is a tool result (or the user message after the results).
fn after_tool(r: &RecordedRequest) -> bool {
    !r.tool_messages().is_empty()
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

async fn run(script: Script, ws: &Path, prompt: &str, extra: &[&str]) -> Run {
    let upstream = ChatUpstream::start(script).await.unwrap();
    let mut cmd = claude_run(ws, &upstream.base_url(), prompt);
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
    let ws = tempfile::tempdir().unwrap();
    let r = run(
        Script::always(Reply::text_stream(["Hello ", "from Claude Code."])),
        ws.path(),
        "Say hello.",
        &[],
    )
    .await;
    assert_eq!(r.output.status.code(), Some(0), "{}", r.transcript());
    let done = r.finished();
    assert_eq!(done["status"], "succeeded");
    assert_eq!(done["final_text"], "Hello from Claude Code.");
    assert_eq!(r.of("session_started").len(), 1);
    assert_eq!(r.of("prompt_finished").len(), 1);
    // Claude Code's own system prompt and tools reached the upstream, inline.
    let first = r.upstream.requests()[0].json();
    assert_eq!(first["messages"][0]["role"], "system");
    assert!(first.to_string().contains("Say hello."));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_answer_depends_on_a_tool_result() {
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("note.txt"), "kumquat\n").unwrap();
    let path = ws.path().canonicalize().unwrap().join("note.txt");
    let args = json!({"file_path": path}).to_string();
    let script = Script::new()
        .then_when(
            first_turn,
            Reply::tool_calls_stream(&[("up_read", "Read", &args)], 6),
        )
        .then_when(
            |r| {
                r.tool_messages()
                    .iter()
                    .any(|m| m["content"].to_string().contains("kumquat"))
            },
            Reply::text_stream(["It says kumquat."]),
        );
    let r = run(script, ws.path(), "Read note.txt.", &[]).await;
    assert_eq!(r.output.status.code(), Some(0), "{}", r.transcript());
    let call = r.of("tool_call");
    assert_eq!(call.len(), 1, "{}", r.transcript());
    assert_eq!(call[0]["tool_name"], "Read");
    assert_eq!(call[0]["model_call_id"], "up_read");
    assert_eq!(call[0]["category"]["kind"], "file_read");
    let result = r.of("tool_result");
    assert_eq!(result[0]["status"], "success", "{}", r.transcript());
    assert_eq!(result[0]["call_id"], call[0]["call_id"]);
    assert_eq!(r.finished()["final_text"], "It says kumquat.");
    assert_eq!(r.upstream.unmatched(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shell_call_rejected_by_the_policy_fails_and_the_run_goes_on() {
    let ws = tempfile::tempdir().unwrap();
    let args = json!({"command": "touch pwned", "description": "make a file"}).to_string();
    let script = Script::new()
        .then_when(
            first_turn,
            Reply::tool_calls_stream(&[("up_sh", "Bash", &args)], 6),
        )
        .then_when(after_tool, Reply::text_stream(["I may not run that."]));
    let r = run(script, ws.path(), "Make a file.", &[]).await;
    assert_eq!(r.output.status.code(), Some(0), "{}", r.transcript());
    let permission = r.of("permission");
    assert_eq!(permission.len(), 1, "{}", r.transcript());
    assert_eq!(permission[0]["outcome"], "rejected");
    assert_eq!(permission[0]["tool"], "Bash");
    assert_eq!(permission[0]["arguments"]["command"], "touch pwned");
    let result = r.of("tool_result");
    assert_eq!(result[0]["status"], "error");
    assert_eq!(result[0]["error"]["kind"], "permission_rejected");
    assert!(!ws.path().join("pwned").exists(), "the command never ran");
    let requests = r.upstream.requests();
    assert_eq!(requests.len(), 2, "{}", r.transcript());
    let feedback = requests[1].tool_messages()[0]["content"].to_string();
    assert!(feedback.contains("permission policy"), "{feedback}");
    assert_eq!(r.finished()["final_text"], "I may not run that.");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_upstream_fails_fast_without_guest_retries() {
    let port = common::closed_port();
    let ws = tempfile::tempdir().unwrap();
    let records = tempfile::tempdir().unwrap();
    let started = std::time::Instant::now();
    let mut cmd = claude_run(ws.path(), &format!("http://127.0.0.1:{port}"), "hello");
    cmd.arg("--records").arg(records.path());
    let output = output_of(cmd).await;
    let events = events(&output);
    assert_eq!(output.status.code(), Some(4), "{}", transcript(&output));
    let done = events.last().unwrap();
    assert_eq!(done["status"], "failed");
    assert_eq!(done["error"]["kind"], "api", "{done}");
    // Claude Code took the gateway's answer as final: one exchange, not minutes of retries.
    let listing = std::process::Command::new(common::BIN)
        .args(["records", "--records"])
        .arg(records.path())
        .arg("exchanges")
        .output()
        .unwrap();
    let exchanges = String::from_utf8_lossy(&listing.stdout)
        .lines()
        .filter(|l| l.contains("anthropic.messages"))
        .count();
    assert_eq!(exchanges, 1, "{}", String::from_utf8_lossy(&listing.stdout));
    assert!(started.elapsed() < std::time::Duration::from_secs(60));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_workspace_settings_file_cannot_redirect_the_model_traffic() {
    let ws = tempfile::tempdir().unwrap();
    let trap = common::closed_port();
    std::fs::create_dir_all(ws.path().join(".claude")).unwrap();
    std::fs::write(
        ws.path().join(".claude/settings.json"),
        json!({"env": {"ANTHROPIC_BASE_URL": format!("http://127.0.0.1:{trap}"),
            "ANTHROPIC_API_KEY": "stolen"}})
        .to_string(),
    )
    .unwrap();
    let r = run(
        Script::always(Reply::text_stream(["Still here."])),
        ws.path(),
        "Hi.",
        &[],
    )
    .await;
    assert_eq!(r.output.status.code(), Some(0), "{}", r.transcript());
    assert_eq!(r.finished()["final_text"], "Still here.");
    let ignored = r.of("workspace_config_ignored");
    assert_eq!(ignored.len(), 1, "{}", r.transcript());
    assert_eq!(ignored[0]["path"], ".claude/settings.json");
    assert_eq!(r.upstream.requests().len(), 1);
}

const RECORD: &str = "mcp__switchyard__record";
const FINISH: &str = "mcp__switchyard__finish";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn host_tools_run_once_per_call_and_finish_is_the_result() {
    let ws = tempfile::tempdir().unwrap();
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
    let tools_file = tools
        .path()
        .join("tools.toml")
        .to_string_lossy()
        .into_owned();
    let finish = tools
        .path()
        .join("finish.json")
        .to_string_lossy()
        .into_owned();
    let r = run(
        script,
        ws.path(),
        "Record the nonce twice, then finish.",
        &["--tools", &tools_file, "--finish-schema", &finish],
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
    // Claude Code names each callback by the gateway's `tool_use` id (`_meta`): the calls it
    // received carry the model's arguments exactly, no identity added.
    let calls = r.of("tool_call");
    assert_eq!(calls.len(), 3, "{}", r.transcript());
    assert!(
        calls
            .iter()
            .all(|c| c["arguments"].get("_switchyard_call").is_none()),
        "{}",
        r.transcript()
    );
    for request in r.upstream.requests() {
        let body = request.json().to_string();
        assert!(!body.contains("_switchyard_call"), "{body:.300}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigint_mid_turn_interrupts_and_leaves_no_process() {
    let upstream = ChatUpstream::start(Script::always(Reply::Hang))
        .await
        .unwrap();
    let ws = tempfile::tempdir().unwrap();
    let child = claude_run(ws.path(), &upstream.base_url(), "hang")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
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
async fn parallel_and_identical_calls_stay_distinct_in_one_turn() {
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("a.txt"), "alpha").unwrap();
    std::fs::write(ws.path().join("b.txt"), "beta").unwrap();
    let dir = ws.path().canonicalize().unwrap();
    let a = json!({"file_path": dir.join("a.txt")}).to_string();
    let b = json!({"file_path": dir.join("b.txt")}).to_string();
    let script = Script::new()
        .then_when(
            first_turn,
            Reply::tool_calls_stream(
                &[
                    ("call_a1", "Read", &a),
                    ("call_a2", "Read", &a),
                    ("call_b", "Read", &b),
                ],
                5,
            ),
        )
        .then_when(after_tool, Reply::text_stream(["read three"]));
    let r = run(script, ws.path(), "Read them.", &[]).await;
    assert_eq!(r.output.status.code(), Some(0), "{}", r.transcript());
    let calls = r.of("tool_call");
    // Claude Code reports each call as it starts it (its read-only tools run concurrently),
    // not always in the model's order.
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
    assert!(
        results.iter().all(|t| t["status"] == "success"),
        "{}",
        r.transcript()
    );
    // The upstream gets one answer per call, each under its own id, in the model's order.
    let requests = r.upstream.requests();
    let answered: Vec<String> = requests[1]
        .tool_messages()
        .iter()
        .map(|m| m["tool_call_id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(answered, ["call_a1", "call_a2", "call_b"]);
    assert_eq!(r.finished()["final_text"], "read three");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_png_read_by_claude_code_reaches_the_upstream_as_lossless_webp() {
    use base64::Engine as _;
    let ws = tempfile::tempdir().unwrap();
    let pixels: Vec<u8> = (0..32 * 32 * 3).map(|i| (i * 13 % 251) as u8).collect();
    let png = switchyard_testkit::fixtures::rgb_png(32, 32, &pixels).unwrap();
    std::fs::write(ws.path().join("pic.png"), png).unwrap();
    let args = json!({"file_path": ws.path().canonicalize().unwrap().join("pic.png")}).to_string();
    let script = Script::new()
        .then_when(
            first_turn,
            Reply::tool_calls_stream(&[("call_img", "Read", &args)], 9),
        )
        .then_when(after_tool, Reply::text_stream(["a gradient"]));
    let r = run(script, ws.path(), "Look at pic.png.", &[]).await;
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
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_recorded_session_resumes_with_its_history() {
    let ws = tempfile::tempdir().unwrap();
    let records = tempfile::tempdir().unwrap();
    let records_arg = records.path().to_string_lossy().into_owned();
    let first = run(
        Script::always(Reply::text_stream(["Noted: kumquat."])),
        ws.path(),
        "Remember the word kumquat.",
        &["--records", &records_arg],
    )
    .await;
    assert_eq!(
        first.output.status.code(),
        Some(0),
        "{}",
        first.transcript()
    );
    let run_id = first.events[0]["run_id"].as_str().unwrap().to_owned();
    let session = first.of("session_started")[0]["session_id"].clone();
    let script = Script::new().then_when(
        |r| r.json().to_string().contains("Noted: kumquat."),
        Reply::text_stream(["The word was kumquat."]),
    );
    let second = run(
        script,
        ws.path(),
        "Which word?",
        &["--records", &records_arg, "--resume", &run_id],
    )
    .await;
    assert_eq!(
        second.output.status.code(),
        Some(0),
        "{}",
        second.transcript()
    );
    assert_eq!(second.of("session_started")[0]["session_id"], session);
    assert_eq!(second.finished()["final_text"], "The word was kumquat.");
    // The upstream saw the earlier turn, then the new prompt.
    let body = second.upstream.requests()[0].json().to_string();
    let earlier = body.find("Remember the word kumquat.").unwrap();
    let now = body.find("Which word?").unwrap();
    assert!(earlier < now, "{body:.400}");
}
