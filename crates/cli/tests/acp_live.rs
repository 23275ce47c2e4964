//! Live tests of `switchyard run --protocol acp`: the real `switchyard` binary drives the real,
//! pinned Gemini CLI 0.61.0 over ACP (`gemini --acp`) through the embedded gateway to a scripted
//! Chat Completions upstream on 127.0.0.1.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use serde_json::Value;
use std::path::Path;
use std::process::{Command, Output};
use switchyard_testkit::chat_upstream::{ChatUpstream, RecordedRequest, Reply, Script};

mod common;
use common::{events, gemini_run, output_of};

/// The latest user text the upstream was sent.
fn last_user_text(r: &RecordedRequest) -> String {
    r.json()["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|m| m["role"] == "user")
        .filter_map(|m| m["content"].as_str().map(str::to_owned))
        .last()
        .unwrap_or_default()
}

fn acp_run(workdir: &Path, upstream: &ChatUpstream, prompts: &[&str]) -> Command {
    let mut cmd = gemini_run(workdir, &upstream.base_url(), prompts[0]);
    for p in &prompts[1..] {
        cmd.args(["--prompt", p]);
    }
    cmd.args(["--protocol", "acp", "--timeout", "120"]);
    cmd
}

fn transcript(output: &Output) -> String {
    format!(
        "stdout:\n{}\nstderr:\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

fn of_type<'a>(events: &'a [Value], kind: &str) -> Vec<&'a Value> {
    events.iter().filter(|e| e["type"] == kind).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_prompts_in_one_session_each_get_their_answer() {
    let upstream = ChatUpstream::start(Script::always(Reply::Dynamic(std::sync::Arc::new(
        |r| Reply::text_stream([format!("You said: {}", last_user_text(r).trim())]),
    ))))
    .await
    .unwrap();
    let ws = tempfile::tempdir().unwrap();
    let output = output_of(acp_run(ws.path(), &upstream, &["alpha", "beta"])).await;
    let events = events(&output);
    if std::env::var_os("ACP_DEBUG").is_some() { eprintln!("{}", transcript(&output)); }
    assert_eq!(output.status.code(), Some(0), "{}", transcript(&output));
    let prompts = of_type(&events, "prompt_finished");
    assert_eq!(prompts.len(), 2, "{}", transcript(&output));
    assert_eq!(prompts[0]["stop_reason"], "end_turn");
    assert!(
        prompts[0]["final_text"].as_str().unwrap().contains("alpha"),
        "{}",
        prompts[0]
    );
    assert!(prompts[1]["final_text"].as_str().unwrap().contains("beta"));
    let sessions = of_type(&events, "session_started");
    assert_eq!(sessions.len(), 1, "one session for both prompts");
    let done = events.last().unwrap();
    assert_eq!(done["type"], "run_finished");
    assert_eq!(done["status"], "succeeded");
    assert_eq!(upstream.requests().len(), 2);
}
