//! Live tests of `switchyard run --protocol acp`: the real `switchyard` binary drives the real,
//! pinned Gemini CLI 0.61.0 over ACP (`gemini --acp`) through the embedded gateway to a scripted
//! Chat Completions upstream on 127.0.0.1.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use serde_json::Value;
use std::path::Path;
use std::process::{Command, Output};
use switchyard_testkit::chat_upstream::{ChatUpstream, RecordedRequest, Reply, Script};

mod common;
use common::{events, gemini_run, last_user_text, of_kind, output_of, transcript};

/// The latest user text the upstream was sent.
fn acp_run(workdir: &Path, upstream: &ChatUpstream, prompts: &[&str]) -> Command {
    let mut cmd = gemini_run(workdir, &upstream.base_url(), prompts[0]);
    for p in &prompts[1..] {
        cmd.args(["--prompt", p]);
    }
    cmd.args(["--protocol", "acp", "--timeout", "120"]);
    cmd
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_prompts_in_one_session_each_get_their_answer() {
    let upstream = ChatUpstream::start(Script::always(Reply::Dynamic(std::sync::Arc::new(|r| {
        Reply::text_stream([format!("You said: {}", last_user_text(r).trim())])
    }))))
    .await
    .unwrap();
    let ws = tempfile::tempdir().unwrap();
    let output = output_of(acp_run(ws.path(), &upstream, &["alpha", "beta"])).await;
    let events = events(&output);
    assert_eq!(output.status.code(), Some(0), "{}", transcript(&output));
    let prompts = of_kind(&events, "prompt_finished");
    assert_eq!(prompts.len(), 2, "{}", transcript(&output));
    assert_eq!(prompts[0]["stop_reason"], "end_turn");
    assert!(
        prompts[0]["final_text"].as_str().unwrap().contains("alpha"),
        "{}",
        prompts[0]
    );
    assert!(prompts[1]["final_text"].as_str().unwrap().contains("beta"));
    let sessions = of_kind(&events, "session_started");
    assert_eq!(sessions.len(), 1, "one session for both prompts");
    let done = events.last().unwrap();
    assert_eq!(done["type"], "run_finished");
    assert_eq!(done["status"], "succeeded");
    assert_eq!(upstream.requests().len(), 2);
}

/// Answers from the tool result the upstream was sent last (the text after `key`).
fn answer_from_tool_result(key: &'static str) -> Reply {
    Reply::Dynamic(std::sync::Arc::new(move |r| {
        let messages = r.tool_messages();
        let content = messages
            .last()
            .and_then(|m| m["content"].as_str())
            .unwrap_or_default()
            .to_owned();
        let word: String = content
            .split(key)
            .nth(1)
            .unwrap_or("unknown")
            .chars()
            .take_while(|c| c.is_alphanumeric())
            .collect();
        Reply::text_stream([format!("The word is {word}.")])
    }))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_answer_depends_on_a_file_the_cli_read() {
    let upstream = ChatUpstream::start(
        Script::new()
            .then_when(
                |r| r.tool_messages().is_empty(),
                Reply::tool_calls_stream(
                    &[("call_read_1", "read_file", r#"{"file_path":"notes.txt"}"#)],
                    4,
                ),
            )
            .then_when(
                |r| !r.tool_messages().is_empty(),
                answer_from_tool_result("secret word is "),
            ),
    )
    .await
    .unwrap();
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("notes.txt"), "The secret word is wombat.\n").unwrap();
    let output = output_of(acp_run(ws.path(), &upstream, &["What is the word?"])).await;
    let events = events(&output);
    assert_eq!(output.status.code(), Some(0), "{}", transcript(&output));
    let call = of_kind(&events, "tool_call")[0];
    assert_eq!(call["tool_name"], "read_file");
    assert_eq!(call["model_call_id"], "call_read_1");
    assert_eq!(
        call["arguments"]["file_path"], "notes.txt",
        "the delivered arguments"
    );
    assert_eq!(of_kind(&events, "tool_result")[0]["status"], "success");
    assert!(
        of_kind(&events, "permission").is_empty(),
        "a read does not ask"
    );
    assert_eq!(events.last().unwrap()["final_text"], "The word is wombat.");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_policy_rejects_a_shell_call_and_allows_a_write_and_the_run_goes_on() {
    let tool_turns = |n: usize| move |r: &RecordedRequest| r.tool_messages().len() == n;
    let upstream = ChatUpstream::start(
        Script::new()
            .then_when(
                tool_turns(0),
                Reply::tool_calls_stream(
                    &[(
                        "call_shell_1",
                        "run_shell_command",
                        r#"{"command":"rm notes.txt","description":"remove"}"#,
                    )],
                    3,
                ),
            )
            .then_when(
                tool_turns(1),
                Reply::tool_calls_stream(
                    &[(
                        "call_write_1",
                        "write_file",
                        r#"{"file_path":"out.txt","content":"written through the policy\n"}"#,
                    )],
                    3,
                ),
            )
            .then_when(tool_turns(2), Reply::text_stream(["Done."])),
    )
    .await
    .unwrap();
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("notes.txt"), "keep me\n").unwrap();
    let policy = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(
        policy.path(),
        "[[rule]]\ncategory = \"file_write\"\ndecision = \"allow\"\n",
    )
    .unwrap();
    let records = tempfile::tempdir().unwrap();
    let mut cmd = acp_run(ws.path(), &upstream, &["Tidy up."]);
    cmd.arg("--permissions").arg(policy.path());
    cmd.arg("--records").arg(records.path());
    let output = output_of(cmd).await;
    let events = events(&output);
    assert_eq!(output.status.code(), Some(0), "{}", transcript(&output));
    // The rejected command never ran, and the model was told.
    assert!(ws.path().join("notes.txt").exists());
    let requests = upstream.requests();
    let shell_result = requests[1].tool_messages()[0]["content"].to_string();
    assert!(shell_result.contains("cancel"), "{shell_result}");
    // The allowed write happened.
    assert_eq!(
        std::fs::read_to_string(ws.path().join("out.txt")).unwrap(),
        "written through the policy\n"
    );
    let permissions = of_kind(&events, "permission");
    assert_eq!(permissions.len(), 2, "{}", transcript(&output));
    assert_eq!(permissions[0]["outcome"], "rejected");
    assert_eq!(permissions[0]["rule"], "default");
    assert_eq!(permissions[0]["model_call_id"], "call_shell_1");
    assert_eq!(permissions[0]["arguments"]["command"], "rm notes.txt");
    assert_eq!(permissions[0]["option_id"], "cancel");
    assert_eq!(permissions[1]["outcome"], "allowed");
    assert_eq!(permissions[1]["rule"], "rule 1");
    assert_eq!(permissions[1]["option_id"], "proceed_once");
    let results = of_kind(&events, "tool_result");
    assert_eq!(results[0]["error"]["kind"], "permission_rejected");
    assert_eq!(results[1]["status"], "success");
    assert_eq!(events.last().unwrap()["final_text"], "Done.");
    // The decisions are archived with the run.
    let run_id = events[0]["run_id"].as_str().unwrap();
    let show = Command::new(common::BIN)
        .args(["records", "--records"])
        .arg(records.path())
        .args(["show", run_id])
        .output()
        .unwrap();
    let shown = String::from_utf8_lossy(&show.stdout);
    assert!(
        shown.contains(
            "permission rejected run_shell_command [run_shell_command__call_shell_1] by default → cancel"
        ),
        "{shown}"
    );
    assert!(shown.contains("rm notes.txt"), "{shown}");
    let html = records.path().join("run.html");
    let status = Command::new(common::BIN)
        .args(["records", "--records"])
        .arg(records.path())
        .args(["show", run_id, "--html"])
        .arg(&html)
        .status()
        .unwrap();
    assert!(status.success());
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(
        page.contains(
            "Permission</span> permission allowed write_file [write_file__call_write_1] by rule 1"
        ),
        "the HTML timeline shows the decision"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_upstream_fails_fast_as_a_model_api_failure() {
    let port = common::closed_port();
    let ws = tempfile::tempdir().unwrap();
    let mut cmd = gemini_run(ws.path(), &format!("http://127.0.0.1:{port}"), "hello");
    cmd.args(["--protocol", "acp", "--timeout", "120"]);
    let started = std::time::Instant::now();
    let output = output_of(cmd).await;
    let events = events(&output);
    assert_eq!(output.status.code(), Some(4), "{}", transcript(&output));
    let done = events.last().unwrap();
    assert_eq!(done["error"]["kind"], "api", "{done}");
    let prompt = of_kind(&events, "prompt_finished")[0];
    assert_eq!(prompt["error"]["kind"], "api");
    assert!(
        started.elapsed() < std::time::Duration::from_secs(60),
        "it failed within the retry budget, not at the run's timeout"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigint_mid_turn_cancels_the_session_and_leaves_no_process() {
    let upstream = ChatUpstream::start(Script::always(Reply::Hang))
        .await
        .unwrap();
    let ws = tempfile::tempdir().unwrap();
    let child = acp_run(ws.path(), &upstream, &["hang"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while upstream.requests().is_empty() {
        assert!(std::time::Instant::now() < deadline, "no model call");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert!(!common::processes_in(ws.path()).is_empty());
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
    let done = events.last().unwrap();
    assert_eq!(done["status"], "cancelled", "{done}");
    // The guest answered the cancel itself (the prompt's own stop reason).
    let prompt = of_kind(&events, "prompt_finished");
    assert_eq!(prompt.len(), 1, "{}", transcript(&output));
    assert_eq!(prompt[0]["stop_reason"], "cancelled");
    let left = common::processes_in(ws.path());
    assert!(left.is_empty(), "processes left: {left:?}");
}

/// A sealed install whose entry point is the fake agent `tests/acp/<script>`.
fn fake_install(script: &str) -> tempfile::TempDir {
    use switchyard_backend::gemini::{PACKAGE, VERSION};
    let prefix = tempfile::tempdir().unwrap();
    let package = prefix.path().join("node_modules").join(PACKAGE);
    std::fs::create_dir_all(package.join("bundle")).unwrap();
    std::fs::write(
        package.join("package.json"),
        serde_json::json!({"name": PACKAGE, "version": VERSION, "bin": {"gemini": "bundle/gemini.js"}})
            .to_string(),
    )
    .unwrap();
    std::fs::copy(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/acp")
            .join(script),
        package.join("bundle/gemini.js"),
    )
    .unwrap();
    switchyard_backend::install::seal(prefix.path(), PACKAGE, VERSION).unwrap();
    prefix
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn permission_for_a_call_never_delivered_is_refused_and_recorded() {
    let upstream = ChatUpstream::start(Script::always(Reply::text_stream(["unused"])))
        .await
        .unwrap();
    let install = fake_install("forging_agent.js");
    let ws = tempfile::tempdir().unwrap();
    let mut cmd = common::gemini_run_with(install.path(), ws.path(), &upstream.base_url(), "go");
    cmd.args(["--protocol", "acp", "--timeout", "60"]);
    let output = output_of(cmd).await;
    let events = events(&output);
    assert_eq!(output.status.code(), Some(0), "{}", transcript(&output));
    let permissions = of_kind(&events, "permission");
    assert_eq!(permissions.len(), 2, "{}", transcript(&output));
    for p in &permissions {
        assert_eq!(p["outcome"], "refused", "{p}");
        assert!(p.get("option_id").is_none());
    }
    assert!(
        permissions[0]["reason"]
            .as_str()
            .unwrap()
            .contains("never made it"),
        "{}",
        permissions[0]
    );
    assert!(
        permissions[1]["reason"]
            .as_str()
            .unwrap()
            .contains("not the active session")
    );
    // The guest was answered with an error, not an option.
    assert_eq!(
        events.last().unwrap()["final_text"],
        "answers: -32602 -32602"
    );
    // What has no mapping is kept and counted.
    let unrecognized = of_kind(&events, "unrecognized");
    assert_eq!(unrecognized.len(), 2, "{}", transcript(&output));
    assert_eq!(events.last().unwrap()["unrecognized_lines"], 2);
}

/// Every user text the upstream was sent, in order.
fn user_texts(r: &RecordedRequest) -> String {
    r.json()["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|m| m["role"] == "user")
        .map(|m| m["content"].to_string())
        .collect::<Vec<_>>()
        .join("\n")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resume_continues_the_session_after_the_first_process_exited() {
    let upstream = ChatUpstream::start(Script::always(Reply::text_stream(["Noted."])))
        .await
        .unwrap();
    let ws = tempfile::tempdir().unwrap();
    let records = tempfile::tempdir().unwrap();
    let mut first = acp_run(ws.path(), &upstream, &["Remember the word pelican."]);
    first.arg("--records").arg(records.path());

    let output = output_of(first).await;
    assert_eq!(output.status.code(), Some(0), "{}", transcript(&output));
    let first_events = events(&output);
    let run_id = first_events[0]["run_id"].as_str().unwrap().to_owned();
    let session = of_kind(&first_events, "session_started")[0]["session_id"].clone();
    assert!(
        common::processes_in(ws.path()).is_empty(),
        "the first guest is gone"
    );

    let mut second = acp_run(ws.path(), &upstream, &["Which word?"]);
    second
        .arg("--records")
        .arg(records.path())
        .args(["--resume", &run_id]);
    let output = output_of(second).await;
    assert_eq!(output.status.code(), Some(0), "{}", transcript(&output));
    let events = events(&output);
    assert_eq!(
        of_kind(&events, "session_started")[0]["session_id"],
        session
    );
    // The upstream saw the first run's prompt in the second run's history.
    let requests = upstream.requests();
    let last = requests.last().unwrap();
    let history = user_texts(last);
    assert!(history.contains("pelican"), "{history}");
    assert!(history.contains("Which word?"), "{history}");

    // A session whose saved state is gone cannot be loaded: a typed outcome, exit 6.
    let second_id = events[0]["run_id"].as_str().unwrap().to_owned();
    std::fs::remove_dir_all(records.path().join("sessions").join(&second_id)).unwrap();
    let mut third = acp_run(ws.path(), &upstream, &["Again?"]);
    third
        .arg("--records")
        .arg(records.path())
        .args(["--resume", &second_id]);
    let output = output_of(third).await;
    assert_eq!(output.status.code(), Some(6), "{}", transcript(&output));
    let done = events_of(&output);
    assert_eq!(done["error"]["kind"], "resume", "{done}");
}

fn events_of(output: &Output) -> Value {
    events(output).last().cloned().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prompts_from_stdin_continue_the_session_until_it_ends() {
    let upstream = ChatUpstream::start(Script::always(Reply::Dynamic(std::sync::Arc::new(|r| {
        Reply::text_stream([format!("You said: {}", last_user_text(r).trim())])
    }))))
    .await
    .unwrap();
    let ws = tempfile::tempdir().unwrap();
    let mut cmd = acp_run(ws.path(), &upstream, &["alpha"]);
    cmd.arg("--prompts-stdin");
    let output = common::output_with_stdin(cmd, b"\"beta\"\n{\"prompt\": \"gamma\"}\n").await;
    assert_eq!(output.status.code(), Some(0), "{}", transcript(&output));
    let events = events(&output);
    let answers: Vec<&str> = of_kind(&events, "prompt_finished")
        .iter()
        .map(|p| p["final_text"].as_str().unwrap())
        .collect();
    assert_eq!(answers.len(), 3, "{}", transcript(&output));
    assert!(answers[0].ends_with("alpha"), "{answers:?}");
    assert_eq!(answers[1..], ["You said: beta", "You said: gamma"]);
    assert_eq!(of_kind(&events, "session_started").len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guest_that_stays_after_its_last_answer_is_closed_and_the_run_succeeds() {
    let upstream = ChatUpstream::start(Script::always(Reply::text_stream(["unused"])))
        .await
        .unwrap();
    let install = fake_install("lingering_agent.js");
    let ws = tempfile::tempdir().unwrap();
    let mut cmd = common::gemini_run_with(install.path(), ws.path(), &upstream.base_url(), "go");
    cmd.args(["--protocol", "acp", "--timeout", "60"]);
    let output = output_of(cmd).await;
    assert_eq!(output.status.code(), Some(0), "{}", transcript(&output));
    let done = events(&output).last().cloned().unwrap();
    assert_eq!(done["status"], "succeeded", "{done}");
    assert_eq!(done["final_text"], "done");
    // Switchyard stopped it (a signal), and said why: the session was over.
    assert_eq!(done["exit"]["stopped_by"], "closed", "{done}");
    assert!(common::processes_in(ws.path()).is_empty());
}
