//! What the live tests of `switchyard` share.
#![allow(clippy::unwrap_used, clippy::expect_used, dead_code)]

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use switchyard_backend::gemini::{PACKAGE, VERSION};

/// The pinned install, sealed (sealing is idempotent and atomic, so parallel tests are fine).
pub fn sealed_prefix() -> PathBuf {
    let prefix = switchyard_testkit::guest::gemini_prefix();
    if switchyard_backend::install::verify(&prefix, PACKAGE, VERSION).is_err() {
        switchyard_backend::install::seal(&prefix, PACKAGE, VERSION)
            .expect("seal the test install");
    }
    prefix
}

pub const BIN: &str = env!("CARGO_BIN_EXE_switchyard");

/// `switchyard run --agent gemini-cli` on `workdir` with `prompt`, through the embedded gateway to
/// the scripted upstream at `upstream` (its base URL), printing JSONL events.
pub fn gemini_run(workdir: &Path, upstream: &str, prompt: &str) -> Command {
    gemini_run_with(&sealed_prefix(), workdir, upstream, prompt)
}

/// [`gemini_run`] with the sealed install at `prefix`.
pub fn gemini_run_with(prefix: &Path, workdir: &Path, upstream: &str, prompt: &str) -> Command {
    let mut cmd = Command::new(BIN);
    cmd.args(["run", "--agent", "gemini-cli", "--prompt", prompt])
        .arg("--workdir")
        .arg(workdir)
        .args([
            "--upstream-url",
            &format!("{upstream}/v1"),
            "--upstream-model",
            "scripted-model",
        ])
        .arg("--gemini-binary")
        .arg(prefix)
        .args(["--output", "jsonl"])
        .env("SWITCHYARD_UPSTREAM_KEY", "sk-live-test-key")
        .stdin(Stdio::null());
    cmd
}

/// Runs `cmd` to completion off the async runtime.
pub async fn output_of(mut cmd: Command) -> Output {
    tokio::task::spawn_blocking(move || cmd.output().unwrap())
        .await
        .unwrap()
}

/// The JSONL events on `output`'s stdout.
pub fn events(output: &Output) -> Vec<Value> {
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(|l| {
            serde_json::from_str(l).unwrap_or_else(|e| panic!("stdout line is not JSON ({e}): {l}"))
        })
        .collect()
}

/// Pids of processes whose working directory is `dir`.
pub fn processes_in(dir: &Path) -> Vec<i32> {
    let dir = std::fs::canonicalize(dir).unwrap();
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| std::fs::read_link(format!("/proc/{pid}/cwd")).is_ok_and(|cwd| cwd == dir))
        .collect()
}

/// The pinned OpenCode install, sealed (idempotent, like [`sealed_prefix`]).
pub fn sealed_opencode() -> PathBuf {
    use switchyard_backend::opencode::{PACKAGE, VERSION};
    let prefix = switchyard_testkit::guest::opencode_prefix();
    if switchyard_backend::install::verify(&prefix, PACKAGE, VERSION).is_err() {
        switchyard_backend::install::seal(&prefix, PACKAGE, VERSION)
            .expect("seal the test install");
    }
    prefix
}

/// The pinned Claude Code install, sealed (idempotent, like [`sealed_prefix`]).
pub fn sealed_claude_code() -> PathBuf {
    const PACKAGE: &str = "@anthropic-ai/claude-code";
    let version = switchyard_testkit::guest::CLAUDE_CODE_VERSION;
    let prefix = switchyard_testkit::guest::claude_code_prefix();
    if switchyard_backend::install::verify(&prefix, PACKAGE, version).is_err() {
        switchyard_backend::install::seal(&prefix, PACKAGE, version)
            .expect("seal the test install");
    }
    prefix
}

/// The pinned Codex install, sealed (idempotent, like [`sealed_prefix`]).
pub fn sealed_codex() -> PathBuf {
    const PACKAGE: &str = "@openai/codex";
    let version = switchyard_testkit::guest::CODEX_VERSION;
    let prefix = switchyard_testkit::guest::codex_prefix();
    if switchyard_backend::install::verify(&prefix, PACKAGE, version).is_err() {
        switchyard_backend::install::seal(&prefix, PACKAGE, version)
            .expect("seal the test install");
    }
    prefix
}

/// `switchyard run --agent opencode` on `workdir` with `prompt`, through the embedded gateway
/// to the scripted upstream at `upstream` (its base URL), printing JSONL events.
pub fn opencode_run(workdir: &Path, upstream: &str, prompt: &str) -> Command {
    opencode_run_within(workdir, upstream, prompt, 120)
}

/// [`opencode_run`] with `--timeout SECS`.
pub fn opencode_run_within(workdir: &Path, upstream: &str, prompt: &str, secs: u64) -> Command {
    let mut cmd = Command::new(BIN);
    cmd.args(["run", "--agent", "opencode", "--prompt", prompt])
        .arg("--workdir")
        .arg(workdir)
        .args([
            "--upstream-url",
            &format!("{upstream}/v1"),
            "--upstream-model",
            "scripted-model",
        ])
        .arg("--opencode-binary")
        .arg(sealed_opencode())
        .args(["--output", "jsonl", "--timeout", &secs.to_string()])
        .env("SWITCHYARD_UPSTREAM_KEY", "sk-live-test-key")
        .stdin(Stdio::null());
    cmd
}

/// `switchyard run --agent claude-code` on `workdir` with `prompt`, through the embedded
/// gateway to the scripted upstream at `upstream` (its base URL), printing JSONL events.
pub fn claude_run(workdir: &Path, upstream: &str, prompt: &str) -> Command {
    let mut cmd = Command::new(BIN);
    cmd.args(["run", "--agent", "claude-code", "--prompt", prompt])
        .arg("--workdir")
        .arg(workdir)
        .args([
            "--upstream-url",
            &format!("{upstream}/v1"),
            "--upstream-model",
            "scripted-model",
        ])
        .arg("--claude-binary")
        .arg(sealed_claude_code())
        .args(["--output", "jsonl", "--timeout", "120"])
        .env("SWITCHYARD_UPSTREAM_KEY", "sk-live-test-key")
        .stdin(Stdio::null());
    cmd
}

/// `switchyard run --agent codex` on `workdir` with `prompt`, through the embedded gateway to the
/// scripted upstream at `upstream`, printing JSONL events. Its run directory (and so
/// `CODEX_HOME`) goes below the workspace's `.cache/` (TMPDIR), not /tmp, where Codex refuses
/// to make its helper links.
pub fn codex_run(workdir: &Path, upstream: &str, prompt: &str) -> Command {
    let tmp = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../.cache/codex-tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    let mut cmd = Command::new(BIN);
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
        .arg(sealed_codex())
        .args(["--output", "jsonl", "--timeout", "120"])
        .env("SWITCHYARD_UPSTREAM_KEY", "sk-live-test-key")
        .env("TMPDIR", tmp)
        .stdin(Stdio::null());
    cmd
}

/// Events and stderr of a finished run, for failure messages.
pub fn transcript(output: &Output) -> String {
    format!(
        "stdout:\n{}\nstderr:\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// The events of `kind`.
pub fn of_kind<'a>(events: &'a [Value], kind: &str) -> Vec<&'a Value> {
    events.iter().filter(|e| e["type"] == kind).collect()
}

/// A loopback port nothing listens on (bound, then released).
pub fn closed_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The host-tool files of `tests/host_tools` in a fresh folder (the handler logs each call it
/// runs to `ran.log` there).
pub fn tools_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/host_tools");
    for file in ["record.py", "tools.toml", "finish.json"] {
        std::fs::copy(source.join(file), dir.path().join(file)).unwrap();
    }
    dir
}

/// The text of a Chat Completions request's last user message (a string, or its text parts).
pub fn last_user_text(r: &switchyard_testkit::chat_upstream::RecordedRequest) -> String {
    let body = r.json();
    let last = body["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .rev()
        .find(|m| m["role"] == "user");
    match last.map(|m| &m["content"]) {
        Some(Value::String(text)) => text.clone(),
        Some(Value::Array(parts)) => parts.iter().filter_map(|p| p["text"].as_str()).collect(),
        _ => String::new(),
    }
}

/// Runs `cmd` with `input` written to its stdin (then closed), to completion.
pub async fn output_with_stdin(cmd: Command, input: &'static [u8]) -> Output {
    output_with_stdin_after(cmd, std::time::Duration::ZERO, input).await
}

/// [`output_with_stdin`], the input written `gap` after the start.
pub async fn output_with_stdin_after(
    mut cmd: Command,
    gap: std::time::Duration,
    input: &'static [u8],
) -> Output {
    tokio::task::spawn_blocking(move || {
        use std::io::Write;
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        std::thread::sleep(gap);
        stdin.write_all(input).unwrap();
        drop(stdin);
        child.wait_with_output().unwrap()
    })
    .await
    .unwrap()
}

/// The calls the test host tool ran (its `ran.log` in the tools folder), in order.
pub fn ran(tools: &Path) -> Vec<Value> {
    std::fs::read_to_string(tools.join("ran.log"))
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}
