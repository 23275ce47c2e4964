//! The product binary holds the product only: no scripted upstream, no benchmark, no developers'
//! command (those are `switchyard-dev`'s), and `validate` needs a real upstream.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_switchyard");

#[test]
fn the_binary_links_neither_the_testkit_nor_the_benchmarks() {
    let binary = std::fs::read(BIN).unwrap();
    let names = [
        "switchyard_runner",
        "switchyard_testkit",
        "switchyard_bench",
    ];
    let found: std::collections::BTreeSet<&str> = aho_corasick::AhoCorasick::new(names)
        .unwrap()
        .find_iter(&binary)
        .map(|m| names[m.pattern().as_usize()])
        .collect();
    // Control: the crates it does link name themselves in its symbols.
    assert!(found.contains("switchyard_runner"), "no symbols to look in");
    assert_eq!(found.len(), 1, "{found:?}");
}

#[test]
fn the_developers_commands_are_not_there() {
    let help = Command::new(BIN).arg("--help").output().unwrap();
    let help = String::from_utf8_lossy(&help.stdout);
    assert!(help.contains("validate"), "{help}");
    for dev in ["demo", "bench", "capture"] {
        let refused = Command::new(BIN).arg(dev).output().unwrap();
        assert_eq!(refused.status.code(), Some(2), "{dev}");
        assert!(!help.contains(&format!("  {dev}")), "{dev} in:\n{help}");
    }
}

#[test]
fn validate_without_an_upstream_points_at_the_offline_check() {
    let out = tempfile::tempdir().unwrap();
    let output = Command::new(BIN)
        .args(["validate", "--agent", "gemini-cli", "--output"])
        .arg(out.path())
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("--upstream-url"), "{stderr}");
    assert!(stderr.contains("switchyard-dev validate"), "{stderr}");
    assert!(!out.path().join("validation.json").exists());
}
