//! Standalone: a stock Claude Code (`claude -p`, the pinned install) given the environment
//! `switchyard gateway` prints does a tool turn and a text turn through the gateway's Messages
//! ingress, to a scripted Chat Completions upstream. The test only keeps Claude Code off the
//! user's files (private config directory, HOME and TMPDIR).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::BufRead;
use std::path::Path;
use std::process::{Command, Stdio};

use serde_json::{Value, json};
use switchyard_testkit::chat_upstream::{ChatUpstream, RecordedRequest, Reply, Script};

mod common;

/// `switchyard gateway` in front of `upstream`; its child and the `export` lines of its
/// Claude Code section.
#[allow(clippy::zombie_processes)] // the caller kills and waits for the child
fn gateway(upstream: &str, extra: &[&str]) -> (std::process::Child, Vec<(String, String)>) {
    let mut child = Command::new(common::BIN)
        .args([
            "gateway",
            "--listen",
            "127.0.0.1:0",
            "--upstream-model",
            "scripted-model",
        ])
        .args(extra)
        .arg("--upstream-url")
        .arg(format!("{upstream}/v1"))
        .env("SWITCHYARD_UPSTREAM_KEY", "sk-standalone-key")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let mut env = Vec::new();
    let mut in_claude = false;
    loop {
        let line = lines.next().expect("the banner").unwrap();
        if line.contains("stock Claude Code") {
            in_claude = true;
            continue;
        }
        if !in_claude {
            continue;
        }
        let Some(exports) = line.strip_prefix("export ") else {
            break;
        };
        for pair in exports.split_whitespace() {
            let (name, value) = pair.split_once('=').unwrap();
            env.push((name.to_owned(), value.trim_matches('"').to_owned()));
        }
        if env.iter().any(|(n, _)| n == "ENABLE_TOOL_SEARCH") {
            return (child, env);
        }
    }
    panic!("no Claude Code section in the banner: {env:?}");
}

/// `claude -p PROMPT --output-format stream-json --verbose` in `ws`, isolated under `home`.
fn claude(ws: &Path, home: &Path, env: &[(String, String)], prompt: &str) -> (i32, Vec<Value>) {
    let entry = common::sealed_claude_code().join(switchyard_testkit::guest::CLAUDE_CODE_ENTRY);
    std::fs::create_dir_all(home.join("tmp")).unwrap();
    let output = Command::new(entry)
        .args(["-p", prompt, "--output-format", "stream-json", "--verbose"])
        .args(["--model", "scripted-model"])
        .current_dir(ws)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", home)
        .env("CLAUDE_CONFIG_DIR", home)
        .env("TMPDIR", home.join("tmp"))
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let events = String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    (output.status.code().unwrap_or(-1), events)
}

fn result(events: &[Value]) -> &Value {
    events
        .iter()
        .rev()
        .find(|e| e["type"] == "result")
        .unwrap_or_else(|| panic!("no result: {events:?}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stock_claude_code_does_a_tool_turn_and_text_through_the_gateway() {
    let ws = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("note.txt"), "kumquat\n").unwrap();
    let path = ws.path().canonicalize().unwrap().join("note.txt");
    let args = json!({"file_path": path}).to_string();
    let script = Script::new()
        .then_when(
            |r: &RecordedRequest| {
                r.tool_messages().is_empty() && r.json().to_string().contains("Read note.txt")
            },
            Reply::tool_calls_stream(&[("upstream_read", "Read", &args)], 6),
        )
        .then_when(
            |r| {
                r.tool_messages()
                    .iter()
                    .any(|m| m["content"].to_string().contains("kumquat"))
            },
            Reply::text_stream(["It says ", "kumquat."]),
        )
        .then_when(
            |r| r.json().to_string().contains("Say hello"),
            Reply::text_stream(["Hello from the gateway."]),
        );
    let upstream = ChatUpstream::start(script).await.unwrap();
    let (mut gateway, env) = gateway(&upstream.base_url(), &[]);
    let names: Vec<&str> = env.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        [
            "ANTHROPIC_BASE_URL",
            "ANTHROPIC_API_KEY",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC",
            "ENABLE_TOOL_SEARCH"
        ]
    );

    let run = |prompt: &'static str| {
        let (ws, home, env) = (ws.path().to_owned(), home.path().to_owned(), env.clone());
        tokio::task::spawn_blocking(move || claude(&ws, &home, &env, prompt))
    };
    let (code, events) = run("Read note.txt and tell me what it says.")
        .await
        .unwrap();
    assert_eq!(code, 0, "{events:#?}");
    let result_event = result(&events);
    assert_eq!(result_event["is_error"], false, "{result_event}");
    assert_eq!(result_event["result"], "It says kumquat.");
    // The guest got the gateway's id for the call, and the tool ran with it.
    let tool_use = events
        .iter()
        .filter(|e| e["type"] == "assistant")
        .flat_map(|e| {
            e["message"]["content"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .find(|b| b["type"] == "tool_use")
        .unwrap_or_else(|| panic!("no tool_use: {events:#?}"));
    let delivered = tool_use["id"].as_str().unwrap().to_owned();
    assert!(
        delivered.starts_with("call_") && delivered != "upstream_read",
        "{delivered}"
    );
    assert_eq!(tool_use["name"], "Read");
    let answered = events.iter().any(|e| {
        e["type"] == "user"
            && e["message"]["content"][0]["tool_use_id"] == delivered.as_str()
            && e["message"]["content"][0]["is_error"] != true
    });
    assert!(answered, "{events:#?}");

    let (code, events) = run("Say hello.").await.unwrap();
    assert_eq!(code, 0, "{events:#?}");
    assert_eq!(result(&events)["result"], "Hello from the gateway.");

    let requests = upstream.requests();
    assert_eq!(upstream.unmatched(), 0);
    assert!(
        requests.iter().any(|r| r
            .tool_messages()
            .iter()
            .any(|m| m["tool_call_id"] == "upstream_read")),
        "the upstream sees its own call id in the answer"
    );
    for request in &requests {
        let body = request.json();
        assert_eq!(body["model"], "scripted-model");
        assert_eq!(
            request.header("authorization"),
            Some("Bearer sk-standalone-key")
        );
        // Claude Code's system prompt arrived, and its inline tools.
        assert_eq!(body["messages"][0]["role"], "system", "{body}");
        let tools: Vec<&str> = body["tools"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|t| t["function"]["name"].as_str())
            .collect();
        assert!(
            tools.contains(&"Read") && tools.contains(&"Bash"),
            "{tools:?}"
        );
    }
    gateway.kill().unwrap();
    gateway.wait().unwrap();
}
