//! Standalone: a stock OpenCode (`opencode run`, the pinned install) configured with the
//! provider snippet `switchyard gateway` prints does a text turn and a tool turn through it.
//! The test only keeps OpenCode off the user's files and the network (private HOME, XDG
//! directories and TMPDIR, a seeded config directory, no models fetch).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::BufRead;
use std::path::Path;
use std::process::{Command, Stdio};

use serde_json::{Value, json};
use switchyard_testkit::chat_upstream::{
    ChatUpstream, RecordedRequest, Reply, Script, Step, Times,
};

mod common;

/// `switchyard gateway` in front of `upstream`; its child, the OpenCode snippet and the key.
#[allow(clippy::zombie_processes)] // the caller kills and waits for the child
fn gateway(upstream: &str) -> (std::process::Child, Value, String) {
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
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let mut key = None;
    loop {
        let line = lines.next().expect("the banner").unwrap();
        if let Some(value) = line.strip_prefix("export SWITCHYARD_API_KEY=") {
            key = Some(value.trim_matches('"').to_owned());
            continue;
        }
        if let Some(key) = &key
            && line.starts_with('{')
        {
            let snippet = serde_json::from_str(&line).unwrap();
            return (child, snippet, key.clone());
        }
    }
}

/// `opencode run PROMPT --format json` in `ws`, isolated under `home`.
fn opencode_run(ws: &Path, home: &Path, snippet: &Value, key: &str, prompt: &str) -> Vec<Value> {
    let config = home.join("config/opencode");
    std::fs::create_dir_all(config.join("node_modules")).unwrap();
    std::fs::write(
        config.join("package.json"),
        r#"{"dependencies":{"@opencode-ai/plugin":"1.18.33"}}"#,
    )
    .unwrap();
    std::fs::write(
        config.join("package-lock.json"),
        json!({"name": "opencode", "lockfileVersion": 3, "requires": true,
            "packages": {"": {"dependencies": {"@opencode-ai/plugin": "1.18.33"}}}})
        .to_string(),
    )
    .unwrap();
    let entry = common::sealed_opencode().join(switchyard_backend::opencode::ENTRY);
    let output = Command::new(entry)
        .args(["run", prompt, "--format", "json"])
        .current_dir(ws)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", home.join("home"))
        .env("XDG_CONFIG_HOME", home.join("config"))
        .env("XDG_DATA_HOME", home.join("data"))
        .env("XDG_STATE_HOME", home.join("state"))
        .env("XDG_CACHE_HOME", home.join("cache"))
        .env("TMPDIR", home.join("tmp"))
        .env("OPENCODE_DISABLE_MODELS_FETCH", "1")
        .env("OPENCODE_CONFIG_CONTENT", snippet.to_string())
        .env("SWITCHYARD_API_KEY", key)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "opencode run failed: {}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

fn text_of(events: &[Value]) -> String {
    events
        .iter()
        .filter(|e| e["type"] == "text")
        .filter_map(|e| e["part"]["text"].as_str())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stock_opencode_does_text_and_a_tool_turn_through_the_gateway() {
    let ws = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("note.txt"), "kumquat").unwrap();
    let path = ws.path().canonicalize().unwrap().join("note.txt");
    let args = json!({"filePath": path}).to_string();
    // A stock config keeps OpenCode's title agent: its requests offer no tools.
    let offers_tools = |r: &RecordedRequest| r.json().get("tools").is_some();
    let script = Script::new()
        .then_when(
            move |r| {
                offers_tools(r)
                    && r.tool_messages().is_empty()
                    && r.json().to_string().contains("Read note.txt")
            },
            Reply::tool_calls_stream(&[("call_note", "read", &args)], 6),
        )
        .then_when(
            |r| {
                r.tool_messages()
                    .iter()
                    .any(|m| m["content"].to_string().contains("kumquat"))
            },
            Reply::text_stream(["It says kumquat."]),
        )
        .then_when(
            move |r| offers_tools(r) && r.json().to_string().contains("Say hello"),
            Reply::text_stream(["Hello from the gateway."]),
        )
        .step(
            Step::once(Reply::text_stream(["A title"]))
                .when(move |r| !offers_tools(r))
                .times(Times::Always),
        );
    let upstream = ChatUpstream::start(script).await.unwrap();
    let (mut gateway, snippet, key) = gateway(&upstream.base_url());
    assert_eq!(snippet["model"], "switchyard/scripted-model");

    let tool_turn = {
        let (ws, home, snippet, key) = (
            ws.path().to_owned(),
            home.path().to_owned(),
            snippet.clone(),
            key.clone(),
        );
        tokio::task::spawn_blocking(move || {
            opencode_run(
                &ws,
                &home,
                &snippet,
                &key,
                "Read note.txt and tell me what it says.",
            )
        })
        .await
        .unwrap()
    };
    let tool = tool_turn
        .iter()
        .find(|e| e["type"] == "tool_use")
        .unwrap_or_else(|| panic!("no tool turn: {tool_turn:?}"));
    // The stock guest got the gateway's own id for the call, never the upstream's; the upstream
    // gets its own id back with the answer (below).
    let delivered = tool["part"]["callID"].as_str().unwrap().to_owned();
    assert!(
        delivered.starts_with("call_") && delivered != "call_note",
        "{delivered}"
    );
    assert_eq!(tool["part"]["state"]["status"], "completed");
    assert_eq!(text_of(&tool_turn), "It says kumquat.");

    let text_turn = {
        let (ws, home) = (ws.path().to_owned(), home.path().to_owned());
        tokio::task::spawn_blocking(move || opencode_run(&ws, &home, &snippet, &key, "Say hello."))
            .await
            .unwrap()
    };
    assert_eq!(text_of(&text_turn), "Hello from the gateway.");

    let requests = upstream.requests();
    assert_eq!(upstream.unmatched(), 0);
    assert!(
        requests.iter().any(|r| r
            .tool_messages()
            .iter()
            .any(|m| m["tool_call_id"] == "call_note")),
        "the upstream sees its own call id in the answer"
    );
    let agent_calls = requests.iter().filter(|r| offers_tools(r)).count();
    assert_eq!(agent_calls, 3, "tool turn (2 calls) and text turn");
    assert!(
        requests
            .iter()
            .all(|r| r.header("authorization") == Some("Bearer sk-standalone-key"))
    );
    assert!(
        requests
            .iter()
            .all(|r| r.json()["model"] == "scripted-model")
    );
    gateway.kill().unwrap();
    gateway.wait().unwrap();
}

/// OpenCode's other bundled provider, `@ai-sdk/openai`, speaks the Responses API: the same
/// snippet with that package goes through the gateway's Responses ingress.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stock_opencode_on_the_openai_responses_provider_does_a_tool_turn() {
    let ws = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("note.txt"), "kumquat").unwrap();
    let path = ws.path().canonicalize().unwrap().join("note.txt");
    let args = json!({"filePath": path}).to_string();
    let offers_tools = |r: &RecordedRequest| r.json().get("tools").is_some();
    let script = Script::new()
        .then_when(
            move |r| {
                offers_tools(r)
                    && r.tool_messages().is_empty()
                    && r.json().to_string().contains("Read note.txt")
            },
            Reply::tool_calls_stream(&[("call_note", "read", &args)], 6),
        )
        .then_when(
            |r| {
                r.tool_messages()
                    .iter()
                    .any(|m| m["content"].to_string().contains("kumquat"))
            },
            Reply::text_stream(["It says kumquat."]),
        )
        .step(
            Step::once(Reply::text_stream(["A title"]))
                .when(move |r| !offers_tools(r))
                .times(Times::Always),
        );
    let upstream = ChatUpstream::start(script).await.unwrap();
    let (mut gateway, mut snippet, key) = gateway(&upstream.base_url());
    snippet["provider"]["switchyard"]["npm"] = json!("@ai-sdk/openai");

    let tool_turn = {
        let (ws, home) = (ws.path().to_owned(), home.path().to_owned());
        tokio::task::spawn_blocking(move || {
            opencode_run(
                &ws,
                &home,
                &snippet,
                &key,
                "Read note.txt and tell me what it says.",
            )
        })
        .await
        .unwrap()
    };
    let tool = tool_turn
        .iter()
        .find(|e| e["type"] == "tool_use")
        .unwrap_or_else(|| panic!("no tool turn: {tool_turn:?}"));
    let delivered = tool["part"]["callID"].as_str().unwrap().to_owned();
    assert!(
        delivered.starts_with("call_") && delivered != "call_note",
        "{delivered}"
    );
    assert_eq!(tool["part"]["state"]["status"], "completed");
    assert_eq!(text_of(&tool_turn), "It says kumquat.");
    let requests = upstream.requests();
    assert_eq!(upstream.unmatched(), 0);
    assert!(
        requests.iter().any(|r| r
            .tool_messages()
            .iter()
            .any(|m| m["tool_call_id"] == "call_note")),
        "the upstream sees its own call id in the answer"
    );
    gateway.kill().unwrap();
    gateway.wait().unwrap();
}
