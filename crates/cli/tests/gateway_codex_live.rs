//! Standalone: a stock Codex (`codex exec`, the pinned install's native binary) given the
//! `config.toml` lines `switchyard gateway` prints does a text turn and an `apply_patch` turn
//! that really edits a file, through the gateway's Responses ingress to a scripted Chat
//! Completions upstream. The test only keeps Codex off the user's files (private CODEX_HOME and
//! HOME, outside /tmp as Codex asks).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::BufRead;
use std::path::Path;
use std::process::{Command, Stdio};

use serde_json::{Value, json};
use switchyard_testkit::chat_upstream::{ChatUpstream, RecordedRequest, Reply, Script};

mod common;

/// `switchyard gateway` in front of `upstream`; its child, the `export` of its Codex section
/// and the `config.toml` lines.
#[allow(clippy::zombie_processes)] // the caller kills and waits for the child
fn gateway(upstream: &str, data: &Path) -> (std::process::Child, (String, String), String) {
    let mut child = Command::new(common::BIN)
        .args([
            "gateway",
            "--listen",
            "127.0.0.1:0",
            "--upstream-model",
            "scripted-model",
        ])
        .arg("--upstream-url")
        .arg(format!("{upstream}/v1"))
        .env("SWITCHYARD_UPSTREAM_KEY", "sk-standalone-key")
        .env("SWITCHYARD_HOME", data)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let mut export = None;
    let mut config = String::new();
    let mut in_codex = false;
    loop {
        let line = lines.next().expect("the banner").unwrap();
        if line.contains("stock Codex") {
            in_codex = true;
            continue;
        }
        if !in_codex {
            continue;
        }
        if line.starts_with("# end of the Codex config") {
            return (child, export.expect("an export line"), config);
        }
        if let Some(pair) = line.strip_prefix("export ") {
            let (name, value) = pair.split_once('=').unwrap();
            export = Some((name.to_owned(), value.trim_matches('"').to_owned()));
        } else {
            config.push_str(&line);
            config.push('\n');
        }
    }
}

/// `codex exec --json PROMPT` in `ws` with `codex_home`, stdin closed; its exit code and
/// stdout events (stderr last, as a string, for failure messages).
fn codex(ws: &Path, codex_home: &Path, key: &(String, String), prompt: &str) -> (i32, Vec<Value>) {
    let entry = common::sealed_codex().join(switchyard_testkit::guest::CODEX_ENTRY);
    let output = Command::new(entry)
        .args([
            "exec",
            "--json",
            "--skip-git-repo-check",
            "-s",
            "workspace-write",
        ])
        .arg(prompt)
        .current_dir(ws)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", codex_home)
        .env("CODEX_HOME", codex_home)
        .env(&key.0, &key.1)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let mut events: Vec<Value> = String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    events.push(Value::String(
        String::from_utf8_lossy(&output.stderr).into_owned(),
    ));
    (output.status.code().unwrap_or(-1), events)
}

fn last_message(events: &[Value]) -> Option<&str> {
    events
        .iter()
        .rev()
        .find(|e| e["type"] == "item.completed" && e["item"]["type"] == "agent_message")
        .and_then(|e| e["item"]["text"].as_str())
}

const PATCH: &str =
    "*** Begin Patch\n*** Add File: hello.txt\n+hello from the gateway\n*** End Patch\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stock_codex_does_text_and_an_apply_patch_turn_through_the_gateway() {
    let scratch = tempfile::Builder::new()
        .prefix("codex-standalone")
        .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
        .unwrap();
    let ws = scratch.path().join("work");
    let codex_home = scratch.path().join("home");
    let data = scratch.path().join("data");
    for dir in [&ws, &codex_home, &data] {
        std::fs::create_dir_all(dir).unwrap();
    }
    let patch_args = json!({"input": PATCH}).to_string();
    let script = Script::new()
        .then_when(
            |r: &RecordedRequest| {
                r.tool_messages().is_empty() && r.json().to_string().contains("Create hello.txt")
            },
            Reply::tool_calls_stream(&[("upstream_patch", "apply_patch", &patch_args)], 8),
        )
        .then_when(
            |r| {
                r.tool_messages()
                    .iter()
                    .any(|m| m["content"].to_string().contains("hello.txt"))
            },
            Reply::text_stream(["Created ", "hello.txt."]),
        )
        .then_when(
            |r| r.json().to_string().contains("Say hello"),
            Reply::text_stream(["Hello from ", "the gateway."]),
        );
    let upstream = ChatUpstream::start(script).await.unwrap();
    let (mut gateway, key, config) = gateway(&upstream.base_url(), &data);
    assert_eq!(key.0, "SWITCHYARD_API_KEY");
    assert!(config.contains("wire_api = \"responses\""), "{config}");
    std::fs::write(codex_home.join("config.toml"), &config).unwrap();

    let run = |prompt: &'static str| {
        let (ws, home, key) = (ws.clone(), codex_home.clone(), key.clone());
        tokio::task::spawn_blocking(move || codex(&ws, &home, &key, prompt))
    };
    let (code, events) = run("Say hello.").await.unwrap();
    assert_eq!(code, 0, "{events:#?}");
    assert_eq!(
        last_message(&events),
        Some("Hello from the gateway."),
        "{events:#?}"
    );

    let (code, events) = run("Create hello.txt with apply_patch.").await.unwrap();
    assert_eq!(code, 0, "{events:#?}");
    assert_eq!(
        std::fs::read_to_string(ws.join("hello.txt")).unwrap(),
        "hello from the gateway\n",
        "{events:#?}"
    );
    let change = events
        .iter()
        .find(|e| e["type"] == "item.completed" && e["item"]["type"] == "file_change")
        .unwrap_or_else(|| panic!("no file_change: {events:#?}"));
    assert_eq!(change["item"]["status"], "completed", "{change}");
    assert_eq!(last_message(&events), Some("Created hello.txt."));

    assert_eq!(upstream.unmatched(), 0);
    let requests = upstream.requests();
    for request in &requests {
        let body = request.json();
        assert_eq!(body["model"], "scripted-model");
        assert_eq!(
            request.header("authorization"),
            Some("Bearer sk-standalone-key")
        );
        // apply_patch was offered as a function with one string argument.
        let patch_tool = body["tools"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["function"]["name"] == "apply_patch")
            .unwrap_or_else(|| panic!("no apply_patch tool: {body}"));
        assert_eq!(
            patch_tool["function"]["parameters"]["required"],
            json!(["input"])
        );
    }
    // The patch's output went back under the upstream's own call id.
    assert!(
        requests.iter().any(|r| r
            .tool_messages()
            .iter()
            .any(|m| m["tool_call_id"] == "upstream_patch")),
        "the upstream sees its own call id in the answer"
    );
    gateway.kill().unwrap();
    gateway.wait().unwrap();
}
