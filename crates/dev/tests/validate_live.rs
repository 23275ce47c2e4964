//! `switchyard-dev validate` offline: the real, pinned Gemini CLI (headless and over ACP),
//! OpenCode and Claude Code against the scripted model pass every check, and a scripted model broken on purpose fails with a report
//! that names the broken check.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use serde_json::Value;
use std::process::{Command, Stdio};

mod common;

const BIN: &str = env!("CARGO_BIN_EXE_switchyard-dev");

fn validate(extra: &[&str]) -> (Option<i32>, Value, String) {
    validate_in(&tempfile::tempdir().unwrap(), extra)
}

fn validate_in(out: &tempfile::TempDir, extra: &[&str]) -> (Option<i32>, Value, String) {
    let mut cmd = Command::new(BIN);
    if extra.contains(&"opencode") {
        cmd.args(["validate", "--timeout", "120"])
            .arg("--opencode-binary")
            .arg(common::sealed_opencode());
    } else if extra.contains(&"claude-code") {
        cmd.args(["validate", "--timeout", "120"])
            .arg("--claude-binary")
            .arg(common::sealed_claude_code());
    } else if extra.contains(&"codex") {
        cmd.args(["validate", "--timeout", "120"])
            .arg("--codex-binary")
            .arg(common::sealed_codex());
    } else {
        cmd.args(["validate", "--agent", "gemini-cli", "--timeout", "120"])
            .arg("--gemini-binary")
            .arg(common::sealed_prefix());
    }
    let output = cmd
        .arg("--output")
        .arg(out.path())
        .args(extra)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    let report = std::fs::read(out.path().join("validation.json"))
        .map(|b| serde_json::from_slice(&b).unwrap())
        .unwrap_or_else(|e| panic!("no validation.json ({e}): {stderr}"));
    (output.status.code(), report, stderr)
}

fn check<'a>(report: &'a Value, name: &str) -> &'a Value {
    report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["check"] == name)
        .unwrap_or_else(|| panic!("no check {name}: {report}"))
}

#[test]
fn the_fixture_passes_offline_with_its_evidence() {
    passes_offline(&[]);
}

#[test]
fn over_acp_the_fixture_passes_offline_with_its_evidence() {
    passes_offline(&["--protocol", "acp"]);
}

#[test]
fn with_opencode_the_fixture_passes_offline_with_its_evidence() {
    passes_offline(&["--agent", "opencode"]);
}

#[test]
fn with_claude_code_the_fixture_passes_offline_with_its_evidence() {
    passes_offline(&["--agent", "claude-code"]);
}

#[test]
fn with_codex_the_fixture_passes_offline_with_its_evidence() {
    passes_offline(&["--agent", "codex"]);
}

fn passes_offline(extra: &[&str]) {
    let out = tempfile::tempdir().unwrap();
    let (code, report, stderr) = validate_in(&out, extra);
    assert_eq!(code, Some(0), "{report:#}\n{stderr}");
    assert_eq!(report["passed"], true);
    let ids = &check(&report, "distinct_claimed_ids")["evidence"]["claimed_record_ids"];
    assert_eq!(ids.as_array().unwrap().len(), 2);
    assert_ne!(ids[0], ids[1]);
    let images = check(&report, "image_in_upstream_requests")["evidence"]["images"]
        .as_array()
        .unwrap()
        .clone();
    assert!(images.iter().any(|i| i["mime_type"] == "image/webp"));
    assert_eq!(
        check(&report, "finish_result")["evidence"]["result"]["colour"],
        report["fixture"]["colour"]
    );
    // The records show every admission, result and the finish result.
    let shown = Command::new(BIN)
        .args(["records", "--records"])
        .arg(out.path().join("records"))
        .args(["show", report["run_id"].as_str().unwrap()])
        .output()
        .unwrap();
    let shown = String::from_utf8_lossy(&shown.stdout);
    for line in [
        "host call observe admitted [call_observe]",
        "host call record admitted [call_record_1] batch 1 #0",
        "host call record admitted [call_record_2] batch 1 #1",
        "host result observe [call_observe] success +1 image(s)",
        "host result finish [call_finish] success",
        "run finished: succeeded",
    ] {
        assert!(shown.contains(line), "{line:?} not in:\n{shown}");
    }
    assert!(shown.contains(&format!(
        "result {{\"colour\":\"{}\"}}",
        report["fixture"]["colour"].as_str().unwrap()
    )));
}

#[test]
fn a_model_that_records_once_fails_with_a_clear_report() {
    let (code, report, stderr) = validate(&["--scripted-fault", "record-once"]);
    assert_eq!(code, Some(12), "{report:#}\n{stderr}");
    assert_eq!(report["passed"], false);
    let distinct = check(&report, "distinct_claimed_ids");
    assert_eq!(distinct["passed"], false);
    assert_eq!(
        distinct["evidence"]["claimed_record_ids"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
    assert!(stderr.contains("FAIL distinct_claimed_ids"), "{stderr}");
    // It says why, in the report and on stderr.
    let why = distinct["why"].as_str().unwrap();
    assert!(why.contains("1 record call(s) were claimed"), "{why}");
    assert!(stderr.contains(why), "{stderr}");
    assert!(check(&report, "finish_result").get("why").is_none());
    // The checks that do not depend on the fault still pass.
    assert_eq!(check(&report, "finish_result")["passed"], true);
}

#[test]
fn a_wrong_colour_fails_the_finish_check() {
    let (code, report, _) = validate(&["--scripted-fault", "wrong-colour"]);
    assert_eq!(code, Some(12));
    assert_eq!(check(&report, "finish_result")["passed"], false);
    assert_eq!(check(&report, "distinct_claimed_ids")["passed"], true);
}
