//! `switchyard install opencode` and `claude-code`: the real pinned packages installed by the real
//! binary (from npm's cache, which `scripts/install-guests.sh` filled), sealed, verified, and
//! refused once one of its files changes or when it is verified as another guest.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::Write;
use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_switchyard");

fn install(args: &[&str]) -> (Option<i32>, String) {
    let out = Command::new(BIN)
        .arg("install")
        .args(args)
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code(), text)
}

#[test]
fn opencode_installs_sealed_and_a_changed_file_is_refused() {
    switchyard_testkit::guest::opencode_prefix();
    let dir = tempfile::tempdir().unwrap();
    let prefix = dir.path().join("opencode");
    let prefix_arg = prefix.to_str().unwrap();
    let (code, text) = install(&["opencode", "--prefix", prefix_arg, "--offline"]);
    assert_eq!(code, Some(0), "{text}");
    assert!(
        text.contains("installed and sealed opencode-ai@1.18.33"),
        "{text}"
    );
    let entry = prefix.join("node_modules/opencode-ai/bin/opencode.exe");
    let version = Command::new(&entry).arg("--version").output().unwrap();
    assert_eq!(String::from_utf8_lossy(&version.stdout).trim(), "1.18.33");
    let (code, text) = install(&["opencode", "--prefix", prefix_arg, "--verify"]);
    assert_eq!(code, Some(0), "{text}");
    // The same files are not a Gemini CLI install.
    let (code, text) = install(&["gemini-cli", "--prefix", prefix_arg, "--verify"]);
    assert_eq!(code, Some(10), "{text}");
    // One changed byte anywhere is refused.
    let script = prefix.join("node_modules/opencode-ai/postinstall.mjs");
    std::fs::OpenOptions::new()
        .append(true)
        .open(&script)
        .unwrap()
        .write_all(b"\n")
        .unwrap();
    let (code, text) = install(&["opencode", "--prefix", prefix_arg, "--verify"]);
    assert_eq!(code, Some(10), "{text}");
    assert!(text.contains("postinstall.mjs"), "{text}");
}

/// Claude Code's npm package links a native binary at install: the sealed install runs it, and
/// a change to that binary is refused like any other file's.
#[test]
fn claude_code_installs_sealed_with_its_native_binary() {
    switchyard_testkit::guest::claude_code_prefix();
    let dir = tempfile::tempdir().unwrap();
    let prefix = dir.path().join("claude-code");
    let prefix_arg = prefix.to_str().unwrap();
    let (code, text) = install(&["claude-code", "--prefix", prefix_arg, "--offline"]);
    assert_eq!(code, Some(0), "{text}");
    assert!(
        text.contains("installed and sealed @anthropic-ai/claude-code@2.1.332"),
        "{text}"
    );
    let entry = prefix.join(switchyard_testkit::guest::CLAUDE_CODE_ENTRY);
    let version = Command::new(&entry).arg("--version").output().unwrap();
    assert_eq!(
        String::from_utf8_lossy(&version.stdout).trim(),
        "2.1.332 (Claude Code)"
    );
    let (code, text) = install(&["claude-code", "--prefix", prefix_arg, "--verify"]);
    assert_eq!(code, Some(0), "{text}");
    std::fs::OpenOptions::new()
        .append(true)
        .open(&entry)
        .unwrap()
        .write_all(b"\0")
        .unwrap();
    let (code, text) = install(&["claude-code", "--prefix", prefix_arg, "--verify"]);
    assert_eq!(code, Some(10), "{text}");
    // `bin/claude.exe` is a hard link of the platform package's binary: the change is found
    // under either name.
    assert!(
        text.contains("/claude") && text.contains("modified"),
        "{text}"
    );
}
