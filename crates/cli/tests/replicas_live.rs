//! Two `switchyard gateway` replicas behind nginx round-robin (Debian's package), sharing one
//! ingress key and one PostgreSQL records store, serve a real Gemini CLI session: the tool call
//! one replica delivered is answered through the other, which verifies the sealed call id and
//! gives the upstream its own id back, and both replicas' exchanges are in the one store.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::BufRead;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::json;
use switchyard_testkit::chat_upstream::{ChatUpstream, RecordedRequest, Reply, Script};
use switchyard_testkit::nginx::Nginx;
use switchyard_testkit::postgres::{TestDatabase, skip_message};

mod common;

const KEY: &str = "replica-shared-ingress-key";

/// A `switchyard gateway` replica; its child and listen address.
fn replica(upstream: &str, records: &str) -> (Child, String) {
    let mut child = Command::new(common::BIN)
        .args([
            "gateway",
            "--listen",
            "127.0.0.1:0",
            "--upstream-model",
            "scripted-model",
            "--ingress-key-env",
            "REPLICA_KEY",
            "--records",
            records,
        ])
        .arg("--upstream-url")
        .arg(format!("{upstream}/v1"))
        .env("REPLICA_KEY", KEY)
        .env("SWITCHYARD_UPSTREAM_KEY", "sk-replica-upstream")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let first = lines.next().expect("the banner").unwrap();
    let addr = first
        .strip_prefix("switchyard gateway listening on ")
        .unwrap_or_else(|| panic!("banner: {first}"))
        .trim()
        .to_owned();
    // Keep reading the banner so the replica never blocks on a full pipe.
    std::thread::spawn(move || for _ in lines {});
    (child, addr)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gemini_cli_session_moves_between_replicas_behind_nginx() {
    let Some(db) = TestDatabase::create().unwrap() else {
        skip_message("a_gemini_cli_session_moves_between_replicas_behind_nginx");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (home, tmp, ws) = (
        dir.path().join("home"),
        dir.path().join("tmp"),
        dir.path().join("ws"),
    );
    for d in [&home.join(".gemini"), &tmp, &ws] {
        std::fs::create_dir_all(d).unwrap();
    }
    std::fs::write(
        home.join(".gemini/settings.json"),
        json!({"security": {"auth": {"selectedType": "gemini-api-key"}},
            "privacy": {"usageStatisticsEnabled": false}, "general": {"maxAttempts": 1},
            "model": {"disableLoopDetection": true}})
        .to_string(),
    )
    .unwrap();
    let secret = ws.join("secret.txt");
    std::fs::write(&secret, "The secret word is PELICAN42.\n").unwrap();
    let args = json!({"file_path": secret}).to_string();
    let script = Script::new()
        .then_when(
            |r: &RecordedRequest| r.wants_stream() && r.tool_messages().is_empty(),
            Reply::tool_calls_stream(&[("call_read_1", "read_file", &args)], 7),
        )
        .then_when(
            |r| {
                r.tool_messages().iter().any(|m| {
                    m["tool_call_id"] == "call_read_1"
                        && m["content"].to_string().contains("PELICAN42")
                })
            },
            Reply::text_stream(["The word is PELICAN42."]),
        );
    let upstream = ChatUpstream::start(script).await.unwrap();
    let (mut a, a_addr) = replica(&upstream.base_url(), db.url());
    let (mut b, b_addr) = replica(&upstream.base_url(), db.url());
    let Some(nginx) = Nginx::start(&[a_addr.clone(), b_addr.clone()]).unwrap() else {
        eprintln!(
            "a_gemini_cli_session_moves_between_replicas_behind_nginx: skipped: no nginx; \
             install Debian's `nginx-light` or set SWITCHYARD_REQUIRE_NGINX=1 to make this an error"
        );
        for child in [&mut a, &mut b] {
            let _ = child.kill();
            let _ = child.wait();
        }
        return;
    };

    let entry =
        switchyard_testkit::guest::gemini_entry_in(&switchyard_testkit::guest::gemini_prefix());
    let output = tokio::time::timeout(
        Duration::from_secs(120),
        tokio::process::Command::new("node")
            .arg(&entry)
            .args(["-p", "What is the secret word in secret.txt?"])
            .args(["--output-format", "stream-json", "--skip-trust", "-y"])
            .args(["-m", "gemini-2.5-flash"])
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("HOME", &home)
            .env("TMPDIR", &tmp)
            .env("GEMINI_CLI_HOME", &home)
            .env("GEMINI_CLI_NO_RELAUNCH", "true")
            .env("GOOGLE_GEMINI_BASE_URL", nginx.base_url())
            .env("GEMINI_API_KEY", KEY)
            .current_dir(&ws)
            .stdin(Stdio::null())
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("Gemini CLI finished within 120 s")
    .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(
        output.status.code(),
        Some(0),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(stdout.contains("PELICAN42"), "{stdout}");
    assert_eq!(
        upstream.unmatched(),
        0,
        "the upstream saw its own call id back"
    );

    // The session's two model turns were served by different replicas.
    let log = nginx.access_log();
    let turns: Vec<&str> = log
        .iter()
        .filter(|l| l.contains("streamGenerateContent"))
        .map(|l| l.split(' ').next().unwrap_or_default())
        .collect();
    assert_eq!(turns.len(), 2, "{log:#?}");
    assert_ne!(
        turns[0], turns[1],
        "round-robin moved the session: {log:#?}"
    );
    assert!(
        [&a_addr, &b_addr]
            .iter()
            .all(|addr| turns.contains(&addr.as_str()))
    );

    // Both replicas recorded into the one store.
    for child in [&mut a, &mut b] {
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(i32::try_from(child.id()).unwrap()),
            nix::sys::signal::Signal::SIGTERM,
        )
        .unwrap();
        child.wait().unwrap();
    }
    let listed = Command::new(common::BIN)
        .args(["records", "--records", db.url(), "exchanges"])
        .output()
        .unwrap();
    let listing = String::from_utf8_lossy(&listed.stdout);
    assert!(listed.status.success(), "{listing}");
    let exchanges = listing
        .lines()
        .filter(|l| l.contains("google.streamGenerateContent"))
        .count();
    assert_eq!(exchanges, 2, "{listing}");
}
