//! `run --output text` on a terminal: one status line on stderr updates in place (agent, turn,
//! tokens, tool calls, elapsed time, the last tool), under a real pseudo-terminal (`script`
//! from util-linux), with the real Gemini CLI; without a terminal the output stays plain lines.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::json;
use switchyard_testkit::chat_upstream::{
    ChatUpstream, Reply, Script, StreamEvent, StreamReply, chunk,
};

mod common;

/// The tool turn, then an answer that takes a second and a half (the line redraws meanwhile).
fn script() -> Script {
    let args = json!({"file_path": "a.txt"}).to_string();
    Script::new()
        .then_when(
            |r| r.tool_messages().is_empty() && r.wants_stream(),
            Reply::tool_calls_stream(&[("call_a", "read_file", &args)], 4),
        )
        .then_when(
            |r| !r.tool_messages().is_empty(),
            Reply::Stream(StreamReply::new(vec![
                StreamEvent::json(chunk::role()),
                StreamEvent::json(chunk::text("It says alpha.")).after(Duration::from_millis(1500)),
                StreamEvent::json(chunk::finish("stop")),
                StreamEvent::json(chunk::usage(120, 9)),
            ])),
        )
}

fn run_command(ws: &std::path::Path, upstream: &str) -> Command {
    let mut cmd = Command::new(common::BIN);
    cmd.args(["run", "--agent", "gemini-cli", "--prompt", "Read a.txt."])
        .arg("--workdir")
        .arg(ws)
        .args(["--upstream-url", &format!("{upstream}/v1")])
        .args(["--upstream-model", "scripted-model"])
        .arg("--gemini-binary")
        .arg(common::sealed_prefix())
        .args(["--output", "text", "--timeout", "90"])
        .env("SWITCHYARD_UPSTREAM_KEY", "sk-live-test-key")
        .stdin(Stdio::null());
    cmd
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_status_line_updates_in_place_on_a_terminal_and_not_without_one() {
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("a.txt"), "alpha\n").unwrap();
    let upstream = ChatUpstream::start(script()).await.unwrap();
    // Under a pseudo-terminal: `script` runs the command with its stdio on a pty and copies
    // what the terminal got to its stdout.
    let cmd = run_command(ws.path(), &upstream.base_url());
    let line: Vec<String> = std::iter::once(cmd.get_program())
        .chain(cmd.get_args())
        .map(|a| format!("'{}'", a.to_string_lossy().replace('\'', "'\\''")))
        .collect();
    let mut pty = Command::new("script");
    pty.args(["-qfec", &line.join(" "), "/dev/null"])
        .env("SWITCHYARD_UPSTREAM_KEY", "sk-live-test-key")
        .stdin(Stdio::null());
    let output = tokio::task::spawn_blocking(move || pty.output().unwrap())
        .await
        .unwrap();
    let screen = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(output.status.success(), "{screen}");
    assert!(screen.contains("It says alpha."), "{screen}");
    // The line was drawn, redrawn in place (carriage returns), with what it reports.
    let drawn: Vec<&str> = screen
        .split(['\r', '\n'])
        .filter(|l| l.contains("[switchyard]") && l.contains(" · turn "))
        .collect();
    assert!(drawn.len() >= 2, "{screen:?}");
    assert!(
        drawn.iter().any(|l| l.contains("gemini-cli")
            && l.contains("1 tool calls")
            && l.contains("last read_file")),
        "{drawn:#?}"
    );
    assert!(screen.contains('\r'), "updated in place");

    // Without a terminal: plain lines, no status line.
    let upstream = ChatUpstream::start(script()).await.unwrap();
    let output = common::output_of(run_command(ws.path(), &upstream.base_url())).await;
    let stderr = String::from_utf8_lossy(&output.stderr);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{stderr}");
    assert!(stdout.contains("→ read_file"), "{stdout}");
    assert!(!stderr.contains(" · turn "), "{stderr}");
    assert!(!stderr.contains('\r') && !stdout.contains('\r'), "{stderr}");
}
