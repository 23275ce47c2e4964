//! Gemini CLI normally relaunches itself: `gemini.js` spawns a second node process and the
//! parent ignores SIGINT/SIGTERM. Switchyard sets `GEMINI_CLI_NO_RELAUNCH=true`, but the
//! process-group handling must not depend on it: with the relaunch left on, SIGKILL of the
//! supervising process still takes the real CLI's parent *and* its relaunched child down.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod process_support;

use std::process::Command;
use std::time::{Duration, Instant};
use switchyard_backend::gemini::launch::{GeminiLaunchConfig, Secret, prepare};
use switchyard_backend::gemini::settings::ApprovalMode;
use switchyard_testkit::genai_upstream::{GenaiScenario, GenaiUpstream};

/// Pids of the live (non-zombie) members of process group `pgid`.
fn group_members(pgid: i32) -> Vec<i32> {
    process_support::live_group_members(pgid)
        .into_iter()
        .map(|stat| stat.pid)
        .collect()
}

fn node_members(pgid: i32) -> usize {
    group_members(pgid)
        .into_iter()
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|c| String::from_utf8_lossy(&c).contains("gemini.js"))
        })
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_of_the_supervisor_kills_the_relaunched_cli_too() {
    let prefix = switchyard_testkit::guest::gemini_prefix();
    let upstream = GenaiUpstream::start(GenaiScenario::HangBeforeHeaders)
        .await
        .unwrap();
    let root = tempfile::tempdir().unwrap();
    let ws = root.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    let node = std::env::split_paths(&std::env::var_os("PATH").unwrap())
        .map(|d| d.join("node"))
        .find(|p| p.is_file())
        .expect("node on PATH");
    let launch = prepare(&GeminiLaunchConfig {
        trust_workspace_config: false,
        node: node.clone(),
        entry: switchyard_testkit::guest::gemini_entry_in(&prefix),
        workdir: ws,
        run_dir: root.path().join("run"),
        prompt: "hello".into(),
        model: "gemini-2.5-flash".into(),
        base_url: upstream.base_url(),
        api_key: Secret::new("test-key"),
        approval_mode: ApprovalMode::Default,
        max_turns: None,
        max_attempts: 1,
        host_env: std::env::vars_os().collect(),
        host_mcp: None,
        protocol: Default::default(),
    })
    .unwrap();
    // Keep the CLI's relaunch wrapper on for this test.
    let env_args: Vec<String> = launch
        .env
        .iter()
        .filter(|(k, _)| k != "GEMINI_CLI_NO_RELAUNCH")
        .map(|(k, v)| format!("{}={}", k.to_string_lossy(), v.to_string_lossy()))
        .collect();
    let pid_file = root.path().join("guest.pid");
    let mut supervisor = Command::new(env!("CARGO_BIN_EXE_sy-test-supervisor"))
        .arg(&pid_file)
        .arg("guard")
        .arg("/usr/bin/env")
        .arg("-C")
        .arg(&launch.cwd)
        .args(&env_args)
        .arg(&node)
        .args(&launch.args)
        .spawn()
        .unwrap();

    let deadline = Instant::now() + Duration::from_secs(60);
    let pgid = loop {
        if let Ok(text) = std::fs::read_to_string(&pid_file) {
            break text.trim().parse::<i32>().unwrap();
        }
        assert!(Instant::now() < deadline, "the guest never started");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    // Wait until the relaunched child is up and has called the model.
    while upstream.requests().is_empty() || node_members(pgid) < 2 {
        assert!(
            Instant::now() < deadline,
            "expected the CLI parent and its relaunched child; group has {:?}",
            group_members(pgid)
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(
        node_members(pgid),
        2,
        "parent + relaunched child in the guest's group"
    );

    supervisor.kill().unwrap();
    supervisor.wait().unwrap();
    let deadline = Instant::now() + Duration::from_secs(15);
    while !group_members(pgid).is_empty() {
        assert!(
            Instant::now() < deadline,
            "processes of the guest group survived: {:?}",
            group_members(pgid)
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    launch.remove_system_settings();
}
