//! Live tests of `switchyard run --agent opencode`: the real `switchyard` binary owns the real,
//! pinned `opencode serve`, whose model calls go through the embedded gateway's Chat
//! Completions ingress to a scripted upstream on 127.0.0.1.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::process::Output;

use serde_json::{Value, json};
use switchyard_testkit::chat_upstream::{ChatUpstream, RecordedRequest, Reply, Script};

mod common;
use common::{events, last_user_text, of_kind, opencode_run, output_of, tools_dir, transcript};

/// The request's last message is a tool result.
fn after_tool(r: &RecordedRequest) -> bool {
    r.json()["messages"]
        .as_array()
        .and_then(|m| m.last())
        .is_some_and(|m| {
            m["role"] == "tool" || m["role"] == "user" && !r.tool_messages().is_empty()
        })
}

fn first_turn(r: &RecordedRequest) -> bool {
    r.tool_messages().is_empty()
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
    let mut cmd = opencode_run(ws, &upstream.base_url(), prompt);
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
        Script::new().then(Reply::text_stream(["Hello", " from OpenCode"])),
        ws.path(),
        "Say hello.",
        &[],
    )
    .await;
    assert_eq!(r.output.status.code(), Some(0), "{}", r.transcript());
    let done = r.finished();
    assert_eq!(done["status"], "succeeded");
    assert_eq!(done["final_text"], "Hello from OpenCode");
    let started = r.of("session_started");
    assert!(
        started[0]["session_id"]
            .as_str()
            .unwrap()
            .starts_with("ses_")
    );
    assert_eq!(r.of("user_message")[0]["text"], "Say hello.");
    // One model call (no title, no summary), through the gateway, with OpenCode's tools.
    let requests = r.upstream.requests();
    assert_eq!(requests.len(), 1, "{}", r.transcript());
    let body = requests[0].json();
    assert_eq!(body["model"], "scripted-model");
    assert_eq!(body["messages"][0]["role"], "system");
    let tools: Vec<&str> = body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert!(
        tools.contains(&"bash") && tools.contains(&"read"),
        "{tools:?}"
    );
    assert!(
        !tools.contains(&"question"),
        "question is denied: {tools:?}"
    );
    assert_eq!(
        requests[0].header("authorization"),
        Some("Bearer sk-live-test-key")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_answer_depends_on_a_tool_result() {
    let ws = tempfile::tempdir().unwrap();
    let nonce = format!("nonce-{}", uuid::Uuid::new_v4().simple());
    std::fs::write(ws.path().join("secret.txt"), &nonce).unwrap();
    let path = ws.path().canonicalize().unwrap().join("secret.txt");
    let args = json!({"filePath": path}).to_string();
    let expected = nonce.clone();
    let script = Script::new()
        .then_when(
            first_turn,
            Reply::tool_calls_stream(&[("call_read_1", "read", &args)], 7),
        )
        .then_when(
            move |r| {
                r.tool_messages().iter().any(|m| {
                    m["content"]
                        .as_str()
                        .unwrap_or_default()
                        .contains(&expected)
                })
            },
            Reply::text_stream(["The secret is ", &nonce]),
        );
    let r = run(script, ws.path(), "What is in secret.txt?", &[]).await;
    assert_eq!(r.output.status.code(), Some(0), "{}", r.transcript());
    let call = r.of("tool_call");
    assert_eq!(call.len(), 1);
    assert_eq!(call[0]["model_call_id"], "call_read_1");
    assert_eq!(call[0]["tool_name"], "read");
    assert_eq!(call[0]["category"]["kind"], "file_read");
    let permission = r.of("permission");
    assert_eq!(permission[0]["outcome"], "allowed", "{}", r.transcript());
    assert_eq!(permission[0]["rule"], "default: file read");
    let result = r.of("tool_result");
    assert_eq!(result[0]["status"], "success");
    assert!(result[0]["output"].as_str().unwrap().contains(&nonce));
    assert_eq!(r.finished()["final_text"], format!("The secret is {nonce}"));
    assert_eq!(r.upstream.requests().len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parallel_and_identical_calls_stay_distinct_in_one_turn() {
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("a.txt"), "alpha").unwrap();
    std::fs::write(ws.path().join("b.txt"), "beta").unwrap();
    let dir = ws.path().canonicalize().unwrap();
    let a = json!({"filePath": dir.join("a.txt")}).to_string();
    let b = json!({"filePath": dir.join("b.txt")}).to_string();
    let script = Script::new()
        .then_when(
            first_turn,
            Reply::tool_calls_stream(
                &[
                    ("call_a1", "read", &a),
                    ("call_a2", "read", &a),
                    ("call_b", "read", &b),
                ],
                5,
            ),
        )
        .then_when(after_tool, Reply::text_stream(["read three"]));
    let r = run(script, ws.path(), "Read them.", &[]).await;
    assert_eq!(r.output.status.code(), Some(0), "{}", r.transcript());
    let calls = r.of("tool_call");
    let ids: Vec<&str> = calls
        .iter()
        .map(|c| c["model_call_id"].as_str().unwrap())
        .collect();
    let mut sorted = ids.clone();
    sorted.sort_unstable();
    assert_eq!(
        sorted,
        ["call_a1", "call_a2", "call_b"],
        "{}",
        r.transcript()
    );
    assert!(calls.iter().all(|c| c["turn"] == 0), "one model turn");
    let results = r.of("tool_result");
    assert_eq!(results.len(), 3);
    assert!(results.iter().all(|t| t["status"] == "success"));
    // The upstream gets one answer per call, each with its own id.
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
async fn an_image_read_by_a_native_tool_reaches_the_upstream_as_lossless_webp() {
    use base64::Engine as _;
    let ws = tempfile::tempdir().unwrap();
    let pixels: Vec<u8> = (0..32 * 32 * 3).map(|i| (i * 13 % 251) as u8).collect();
    let png = switchyard_testkit::fixtures::rgb_png(32, 32, &pixels).unwrap();
    std::fs::write(ws.path().join("pic.png"), png).unwrap();
    let args = json!({"filePath": ws.path().canonicalize().unwrap().join("pic.png")}).to_string();
    let script = Script::new()
        .then_when(
            first_turn,
            Reply::tool_calls_stream(&[("call_img", "read", &args)], 9),
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
async fn a_dead_upstream_fails_fast_without_guest_retries() {
    let port = common::closed_port();
    let ws = tempfile::tempdir().unwrap();
    let records = tempfile::tempdir().unwrap();
    let mut cmd = opencode_run(ws.path(), &format!("http://127.0.0.1:{port}"), "hello");
    cmd.arg("--records").arg(records.path());
    let output = output_of(cmd).await;
    let events = events(&output);
    assert_eq!(output.status.code(), Some(4), "{}", transcript(&output));
    let done = events.last().unwrap();
    assert_eq!(done["status"], "failed");
    assert_eq!(done["error"]["kind"], "api", "{done}");
    // OpenCode took the gateway's answer as final: one exchange, not five retries.
    let listing = std::process::Command::new(common::BIN)
        .args(["records", "--records"])
        .arg(records.path())
        .arg("exchanges")
        .output()
        .unwrap();
    let exchanges = String::from_utf8_lossy(&listing.stdout)
        .lines()
        .filter(|l| l.contains("openai.chatCompletions"))
        .count();
    assert_eq!(exchanges, 1, "{}", String::from_utf8_lossy(&listing.stdout));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigint_mid_turn_aborts_and_leaves_no_process() {
    let upstream = ChatUpstream::start(Script::always(Reply::Hang))
        .await
        .unwrap();
    let ws = tempfile::tempdir().unwrap();
    let child = opencode_run(ws.path(), &upstream.base_url(), "hang")
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
        "the server runs in the workspace"
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
async fn a_shell_call_rejected_by_the_policy_fails_and_the_run_goes_on() {
    let ws = tempfile::tempdir().unwrap();
    let args = json!({"command": "touch pwned", "description": "make a file"}).to_string();
    let script = Script::new()
        .then_when(
            first_turn,
            Reply::tool_calls_stream(&[("call_sh", "bash", &args)], 6),
        )
        .then_when(after_tool, Reply::text_stream(["I may not run that."]));
    let r = run(script, ws.path(), "Make a file.", &[]).await;
    assert_eq!(r.output.status.code(), Some(0), "{}", r.transcript());
    let permission = r.of("permission");
    assert_eq!(permission.len(), 1, "{}", r.transcript());
    assert_eq!(permission[0]["outcome"], "rejected");
    assert_eq!(permission[0]["tool"], "bash");
    assert_eq!(permission[0]["arguments"]["command"], "touch pwned");
    let result = r.of("tool_result");
    assert_eq!(result[0]["status"], "error");
    assert_eq!(result[0]["error"]["kind"], "permission_rejected");
    assert!(!ws.path().join("pwned").exists(), "the command never ran");
    // The loop went on: the model got the rejection and answered.
    let requests = r.upstream.requests();
    assert_eq!(requests.len(), 2, "{}", r.transcript());
    let feedback = requests[1].tool_messages()[0]["content"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(feedback.contains("permission policy"), "{feedback}");
    assert_eq!(r.finished()["final_text"], "I may not run that.");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_policy_rule_allows_a_shell_command() {
    let ws = tempfile::tempdir().unwrap();
    let policy = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(
        policy.path(),
        "[[rule]]\ncommand_prefix = \"touch\"\ndecision = \"allow\"\n",
    )
    .unwrap();
    let args = json!({"command": "touch made", "description": "make a file"}).to_string();
    let script = Script::new()
        .then_when(
            first_turn,
            Reply::tool_calls_stream(&[("call_sh", "bash", &args)], 6),
        )
        .then_when(after_tool, Reply::text_stream(["made"]));
    let policy_path = policy.path().to_string_lossy().into_owned();
    let r = run(
        script,
        ws.path(),
        "Make a file.",
        &["--permissions", &policy_path],
    )
    .await;
    assert_eq!(r.output.status.code(), Some(0), "{}", r.transcript());
    assert_eq!(r.of("permission")[0]["outcome"], "allowed");
    assert_eq!(r.of("permission")[0]["rule"], "rule 1");
    assert!(ws.path().join("made").exists());
}

const RECORD: &str = "switchyard_record";
const FINISH: &str = "switchyard_finish";

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
    let permissions = r.of("permission");
    assert!(
        permissions
            .iter()
            .all(|p| p["outcome"] == "allowed" && p["rule"] == "default: host tool"),
        "{}",
        r.transcript()
    );
    let done = r.finished();
    assert_eq!(done["result"], json!({"colour": "green"}));
    // The model never sees the identity the gateway adds to host-tool calls.
    for request in r.upstream.requests() {
        let body = request.json().to_string();
        assert!(!body.contains("_switchyard_call"), "{body:.300}");
    }
    let last = r.upstream.requests().last().unwrap().json().to_string();
    assert!(last.contains("recorded n-7"), "{last:.300}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_finish_call_the_run_has_no_result() {
    let ws = tempfile::tempdir().unwrap();
    let tools = tools_dir();
    let finish = tools
        .path()
        .join("finish.json")
        .to_string_lossy()
        .into_owned();
    let r = run(
        Script::new().then(Reply::text_stream(["I will not finish."])),
        ws.path(),
        "Finish.",
        &["--finish-schema", &finish],
    )
    .await;
    assert_eq!(r.output.status.code(), Some(11), "{}", r.transcript());
    assert_eq!(r.finished()["error"]["kind"], "no_finish");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_run_timeout_stops_a_hanging_turn_with_its_own_exit_code() {
    let upstream = ChatUpstream::start(Script::always(Reply::Hang))
        .await
        .unwrap();
    let ws = tempfile::tempdir().unwrap();
    let cmd = common::opencode_run_within(ws.path(), &upstream.base_url(), "hang", 15);
    let output = output_of(cmd).await;
    let events = events(&output);
    assert_eq!(output.status.code(), Some(7), "{}", transcript(&output));
    assert_eq!(events.last().unwrap()["status"], "timed_out");
    let left = common::processes_in(ws.path());
    assert!(left.is_empty(), "processes left: {left:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prompts_from_stdin_continue_the_session_until_it_ends() {
    let upstream = ChatUpstream::start(Script::always(Reply::Dynamic(std::sync::Arc::new(|r| {
        Reply::text_stream([format!("You said: {}", last_user_text(r).trim())])
    }))))
    .await
    .unwrap();
    let ws = tempfile::tempdir().unwrap();
    let mut cmd = opencode_run(ws.path(), &upstream.base_url(), "alpha");
    cmd.arg("--prompts-stdin");
    let output = common::output_with_stdin(cmd, b"\"beta\"\n{\"prompt\": \"gamma\"}\n").await;
    assert_eq!(output.status.code(), Some(0), "{}", transcript(&output));
    let events = events(&output);
    let answers: Vec<&str> = of_kind(&events, "prompt_finished")
        .iter()
        .map(|p| p["final_text"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(
        answers,
        ["You said: alpha", "You said: beta", "You said: gamma"],
        "{}",
        transcript(&output)
    );
    assert_eq!(of_kind(&events, "session_started").len(), 1);
}
