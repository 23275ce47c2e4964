//! The REAL Gemini CLI 0.61.0 pointed at the gateway, the gateway pointed at the scripted Chat
//! Completions upstream: text, a tool whose result the answer depends on, parallel and identical
//! calls paired by id, a tool-call turn's reasoning echoed back upstream, malformed-call recovery,
//! 429-then-ok, a dead upstream, and a PNG that reaches the upstream as pixel-identical lossless
//! WebP.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};

use base64::Engine;
use common::*;
use serde_json::{Value, json};
use switchyard_gateway::GatewayHandle;
use switchyard_testkit::chat_upstream::{RecordedRequest, Reply, Script};

const GUEST_MODEL: &str = "gemini-2.5-flash";

struct CliRun {
    exit_code: Option<i32>,
    events: Vec<Value>,
    stderr: String,
    elapsed: Duration,
}

impl CliRun {
    fn assistant_text(&self) -> String {
        self.events
            .iter()
            .filter(|e| e["type"] == "message" && e["role"] == "assistant")
            .filter_map(|e| e["content"].as_str())
            .collect()
    }
    fn of_type(&self, kind: &str) -> Vec<&Value> {
        self.events.iter().filter(|e| e["type"] == kind).collect()
    }
    fn result(&self) -> &Value {
        self.of_type("result")
            .last()
            .copied()
            .unwrap_or_else(|| panic!("no result event; stderr:\n{}", self.stderr))
    }
}

/// A temp home + workspace for one CLI run.
struct Sandbox {
    _dir: tempfile::TempDir,
    home: PathBuf,
    tmp: PathBuf,
    workspace: PathBuf,
}

impl Sandbox {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("home");
        let tmp = dir.path().join("tmp");
        let workspace = dir.path().join("ws");
        for d in [&home.join(".gemini"), &tmp, &workspace] {
            std::fs::create_dir_all(d).unwrap();
        }
        std::fs::write(
            home.join(".gemini/settings.json"),
            json!({
                "security": {"auth": {"selectedType": "gemini-api-key"}},
                "privacy": {"usageStatisticsEnabled": false},
                "general": {"maxAttempts": 2},
                "model": {"disableLoopDetection": true}
            })
            .to_string(),
        )
        .unwrap();
        Self {
            _dir: dir,
            home,
            tmp,
            workspace,
        }
    }

    fn file(&self, name: &str, contents: &[u8]) -> PathBuf {
        let path = self.workspace.join(name);
        std::fs::write(&path, contents).unwrap();
        path
    }

    async fn run(&self, gateway: &GatewayHandle, prompt: &str) -> CliRun {
        let entry =
            switchyard_testkit::guest::gemini_entry_in(&switchyard_testkit::guest::gemini_prefix());
        let started = Instant::now();
        let mut command = tokio::process::Command::new("node");
        command
            .arg(&entry)
            .args([
                "-p",
                prompt,
                "--output-format",
                "stream-json",
                "--skip-trust",
                "-y",
                "-m",
                GUEST_MODEL,
            ])
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("HOME", &self.home)
            .env("TMPDIR", &self.tmp)
            .env("GEMINI_CLI_HOME", &self.home)
            .env("GEMINI_CLI_NO_RELAUNCH", "true")
            .current_dir(&self.workspace)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        for (k, v) in gateway.guest_env() {
            command.env(k, v);
        }
        let child = command.spawn().expect("node runs");
        let output = tokio::time::timeout(Duration::from_secs(120), child.wait_with_output())
            .await
            .expect("Gemini CLI finished within 120 s")
            .expect("wait for Gemini CLI");
        let stdout = String::from_utf8_lossy(&output.stdout);
        let events = stdout
            .lines()
            .map(|l| {
                serde_json::from_str(l)
                    .unwrap_or_else(|e| panic!("stdout line is not JSON ({e}): {l}"))
            })
            .collect();
        CliRun {
            exit_code: output.status.code(),
            events,
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
            elapsed: started.elapsed(),
        }
    }
}

fn has_tool_results(req: &RecordedRequest) -> bool {
    !req.tool_messages().is_empty()
}

/// Main-loop requests only (streaming), in order.
fn main_requests(requests: &[RecordedRequest]) -> Vec<RecordedRequest> {
    requests
        .iter()
        .filter(|r| r.wants_stream())
        .cloned()
        .collect()
}

fn assert_success(run: &CliRun) {
    assert_eq!(run.result()["status"], "success", "stderr:\n{}", run.stderr);
    assert_eq!(run.exit_code, Some(0), "stderr:\n{}", run.stderr);
}

#[tokio::test]
async fn cli_text_answer() {
    let script = Script::new().then_when(
        |r| r.wants_stream(),
        Reply::text_stream(["Hello from ", "the upstream."]),
    );
    let (upstream, gw) = start(script, |_| {}).await;
    let sandbox = Sandbox::new();
    let run = sandbox.run(&gw, "Say hello").await;
    assert_success(&run);
    assert_eq!(run.assistant_text(), "Hello from the upstream.");
    let sent = upstream.requests();
    assert_eq!(sent.len(), 1, "unexpected extra upstream calls");
    let body = sent[0].json();
    let messages = body["messages"].as_array().unwrap();
    assert_eq!(messages[0]["role"], "system");
    assert!(
        messages
            .iter()
            .any(|m| m["role"] == "user" && m.to_string().contains("Say hello"))
    );
    assert!(
        body["tools"]
            .as_array()
            .is_some_and(|t| t.iter().any(|t| t["function"]["name"] == "read_file"))
    );
    gw.shutdown().await.unwrap();
}

#[tokio::test]
async fn cli_tool_result_drives_the_final_answer() {
    let sandbox = Sandbox::new();
    let secret = sandbox.file("secret.txt", b"The secret word is PELICAN42.\n");
    let args = json!({"file_path": secret.to_str().unwrap()}).to_string();
    let script = Script::new()
        .then_when(
            |r| r.wants_stream() && !has_tool_results(r),
            Reply::tool_calls_stream(&[("call_read_1", "read_file", &args)], 7),
        )
        .then_when(
            |r| r.wants_stream() && has_tool_results(r),
            Reply::Dynamic(std::sync::Arc::new(|r: &RecordedRequest| {
                let tool = &r.tool_messages()[0];
                let word = if tool["tool_call_id"] == "call_read_1"
                    && tool["content"].as_str().unwrap_or("").contains("PELICAN42")
                {
                    "PELICAN42"
                } else {
                    "UNKNOWN"
                };
                Reply::text_stream([format!("The word is {word}.")])
            })),
        );
    let (upstream, gw) = start(script, |_| {}).await;
    let run = sandbox
        .run(&gw, "What is the secret word in secret.txt?")
        .await;
    assert_success(&run);
    assert!(
        run.assistant_text().contains("The word is PELICAN42."),
        "{}",
        run.assistant_text()
    );
    let tool_uses = run.of_type("tool_use");
    assert_eq!(tool_uses.len(), 1);
    assert_eq!(tool_uses[0]["tool_name"], "read_file");
    assert_eq!(run.of_type("tool_result")[0]["status"], "success");
    assert_eq!(main_requests(&upstream.requests()).len(), 2);
    gw.shutdown().await.unwrap();
}

/// With `echo_reasoning`, the reasoning of a tool-call turn reaches the guest in the call's
/// `thoughtSignature`, Gemini CLI keeps it in its history, and the next upstream request gives it
/// back as that assistant message's `reasoning_content` (what DeepSeek's thinking models require).
#[tokio::test]
async fn cli_reasoning_of_a_tool_call_turn_comes_back_upstream() {
    use switchyard_testkit::chat_upstream::{StreamEvent, StreamReply, chunk};
    let sandbox = Sandbox::new();
    let notes = sandbox.file("notes.txt", b"The answer is 42.\n");
    let args = json!({"file_path": notes.to_str().unwrap()}).to_string();
    let reasoning = [
        "The user wants the answer; ",
        "I must read \"notes.txt\" first.\n",
    ];
    let first_turn = Reply::Stream(StreamReply::new(vec![
        StreamEvent::json(chunk::role()),
        StreamEvent::json(chunk::reasoning(reasoning[0])),
        StreamEvent::json(chunk::reasoning(reasoning[1])),
        StreamEvent::json(chunk::tool_call(
            0,
            Some("call_r1"),
            Some("read_file"),
            &args,
        )),
        StreamEvent::json(chunk::finish("tool_calls")),
        StreamEvent::json(chunk::usage(20, 9)),
    ]));
    let script = Script::new()
        .then_when(|r| r.wants_stream() && !has_tool_results(r), first_turn)
        .then_when(
            |r| r.wants_stream() && has_tool_results(r),
            Reply::text_stream(["It is 42."]),
        );
    let (upstream, gw) = start(script, |config| config.translation.echo_reasoning = true).await;
    let run = sandbox.run(&gw, "What is the answer in notes.txt?").await;
    assert_success(&run);
    assert_eq!(run.assistant_text(), "It is 42.");
    let main = main_requests(&upstream.requests());
    assert_eq!(main.len(), 2);
    let second = main[1].json();
    let assistant = second["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "assistant")
        .expect("the tool-call turn is in the history")
        .clone();
    assert_eq!(assistant["tool_calls"][0]["id"], "call_r1");
    assert_eq!(assistant["reasoning_content"], reasoning.concat());
    // The signature itself never goes upstream.
    assert!(!second.to_string().contains("switchyard-reasoning-v1"));
    gw.shutdown().await.unwrap();
}

#[tokio::test]
async fn cli_parallel_and_identical_calls_are_paired_by_id() {
    let sandbox = Sandbox::new();
    let a = sandbox.file("a.txt", b"alpha contents\n");
    let b = sandbox.file("b.txt", b"bravo contents\n");
    let args_a = json!({"file_path": a.to_str().unwrap()}).to_string();
    let args_b = json!({"file_path": b.to_str().unwrap()}).to_string();
    let script = Script::new()
        .then_when(
            |r| r.wants_stream() && !has_tool_results(r),
            // Two different parallel calls, and p1/p3 identical apart from their ids.
            Reply::tool_calls_stream(
                &[
                    ("call_p1", "read_file", &args_a),
                    ("call_p2", "read_file", &args_b),
                    ("call_p3", "read_file", &args_a),
                ],
                5,
            ),
        )
        .then_when(
            |r| r.wants_stream() && has_tool_results(r),
            Reply::text_stream(["Read all three."]),
        );
    let (upstream, gw) = start(script, |_| {}).await;
    let run = sandbox.run(&gw, "Read a.txt and b.txt").await;
    assert_success(&run);
    assert_eq!(run.of_type("tool_use").len(), 3);
    let main = main_requests(&upstream.requests());
    assert_eq!(main.len(), 2);
    let tools = main[1].tool_messages();
    let ids: Vec<&str> = tools
        .iter()
        .map(|t| t["tool_call_id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["call_p1", "call_p2", "call_p3"]);
    let content = |i: usize| tools[i]["content"].as_str().unwrap().to_string();
    assert!(
        content(0).contains("alpha")
            && content(1).contains("bravo")
            && content(2).contains("alpha")
    );
    // The assistant message in the history carries the same ids, in order.
    let body = main[1].json();
    let assistant = body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["tool_calls"].is_array())
        .unwrap()
        .clone();
    let issued: Vec<&str> = assistant["tool_calls"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["id"].as_str().unwrap())
        .collect();
    assert_eq!(issued, ["call_p1", "call_p2", "call_p3"]);
    gw.shutdown().await.unwrap();
}

#[tokio::test]
async fn cli_malformed_call_is_recovered_and_the_tool_runs_once() {
    let sandbox = Sandbox::new();
    let note = sandbox.file("note.txt", b"note body\n");
    let args = json!({"file_path": note.to_str().unwrap()}).to_string();
    let script = Script::new()
        .then_when(
            |r| r.wants_stream() && !has_tool_results(r),
            Reply::malformed_tool_call_stream("call_broken", "read_file"),
        )
        .then_when(
            |r| r.wants_stream() && !has_tool_results(r),
            Reply::tool_calls_stream(&[("call_fixed", "read_file", &args)], 4),
        )
        .then_when(
            |r| r.wants_stream() && has_tool_results(r),
            Reply::text_stream(["Recovered."]),
        );
    let (upstream, gw) = start(script, |_| {}).await;
    let run = sandbox.run(&gw, "Read note.txt").await;
    assert_success(&run);
    let uses = run.of_type("tool_use");
    assert_eq!(uses.len(), 1, "the tool ran exactly once");
    // The guest ran the call under the gateway's id; the upstream gets its own id back.
    let tool_id = uses[0]["tool_id"].as_str().unwrap();
    assert!(
        tool_id.starts_with("read_file__call_") && tool_id != "read_file__call_fixed",
        "{tool_id}"
    );
    assert_eq!(run.assistant_text(), "Recovered.");
    let main = main_requests(&upstream.requests());
    assert_eq!(
        main.len(),
        3,
        "malformed attempt, retried attempt, final turn"
    );
    assert_eq!(main[2].tool_messages()[0]["tool_call_id"], "call_fixed");
    gw.shutdown().await.unwrap();
}

#[tokio::test]
async fn cli_rate_limit_then_ok() {
    let script = Script::new()
        .then(Reply::error_retry_after(429, "Too many requests", "1"))
        .then_when(|r| r.wants_stream(), Reply::text_stream(["Made it."]));
    let (upstream, gw) = start(script, |_| {}).await;
    let sandbox = Sandbox::new();
    let run = sandbox.run(&gw, "hello").await;
    assert_success(&run);
    assert_eq!(run.assistant_text(), "Made it.");
    assert_eq!(
        upstream.requests().len(),
        2,
        "one 429, one success; the CLI never saw the 429"
    );
    gw.shutdown().await.unwrap();
}

#[tokio::test]
async fn cli_dead_upstream_fails_the_run_within_a_minute() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let config = switchyard_gateway::GatewayConfig::new(format!("http://127.0.0.1:{port}/v1"), "m");
    let gw = switchyard_gateway::Gateway::start(config).await.unwrap();
    let sandbox = Sandbox::new();
    let run = sandbox.run(&gw, "hello").await;
    assert!(
        run.elapsed < Duration::from_secs(60),
        "took {:?}",
        run.elapsed
    );
    assert_ne!(run.exit_code, Some(0), "stderr:\n{}", run.stderr);
    if let Some(result) = run.of_type("result").last() {
        assert_eq!(result["status"], "error");
    }
    assert!(
        run.stderr.contains("limit: 0")
            || run
                .events
                .iter()
                .any(|e| e.to_string().contains("limit: 0")),
        "the gateway's terminal error reached the CLI; stderr:\n{}",
        run.stderr
    );
    gw.shutdown().await.unwrap();
}

fn test_png(width: u32, height: u32) -> (Vec<u8>, Vec<u8>) {
    let mut rgba = Vec::new();
    for y in 0..height {
        for x in 0..width {
            rgba.extend_from_slice(&[
                (x * 7) as u8,
                (y * 13) as u8,
                ((x ^ y) * 5) as u8,
                if (x + y) % 5 == 0 {
                    0
                } else {
                    200 + (x % 50) as u8
                },
            ]);
        }
    }
    let mut png_bytes = Vec::new();
    {
        let mut encoder = png::Encoder::new(&mut png_bytes, width, height);
        encoder.set_color(png::ColorType::Rgba);
        encoder.set_depth(png::BitDepth::Eight);
        let mut writer = encoder.write_header().unwrap();
        writer.write_image_data(&rgba).unwrap();
    }
    (png_bytes, rgba)
}

fn find_data_urls(value: &Value, out: &mut Vec<String>) {
    match value {
        Value::String(s) if s.starts_with("data:image/") => out.push(s.clone()),
        Value::Array(a) => a.iter().for_each(|v| find_data_urls(v, out)),
        Value::Object(o) => o.values().for_each(|v| find_data_urls(v, out)),
        _ => {}
    }
}

#[tokio::test]
async fn cli_png_reaches_the_upstream_as_lossless_webp() {
    let sandbox = Sandbox::new();
    let (png_bytes, rgba) = test_png(37, 23);
    let image = sandbox.file("picture.png", &png_bytes);
    let args = json!({"file_path": image.to_str().unwrap()}).to_string();
    let script = Script::new()
        .then_when(
            |r| r.wants_stream() && !has_tool_results(r),
            Reply::tool_calls_stream(&[("call_img", "read_file", &args)], 6),
        )
        .then_when(
            |r| r.wants_stream() && has_tool_results(r),
            Reply::text_stream(["A picture."]),
        );
    let (upstream, gw) = start(script, |_| {}).await;
    let run = sandbox.run(&gw, "Look at picture.png").await;
    assert_success(&run);
    let main = main_requests(&upstream.requests());
    assert_eq!(main.len(), 2);
    let mut urls = Vec::new();
    find_data_urls(&main[1].json(), &mut urls);
    assert_eq!(urls.len(), 1, "one image upstream: {urls:?}");
    let b64 = urls[0]
        .strip_prefix("data:image/webp;base64,")
        .unwrap_or_else(|| panic!("not WebP: {}", &urls[0][..40]));
    let webp = base64::engine::general_purpose::STANDARD
        .decode(b64)
        .unwrap();
    let mut decoder = image_webp::WebPDecoder::new(std::io::Cursor::new(&webp)).unwrap();
    assert_eq!(decoder.dimensions(), (37, 23));
    assert!(decoder.has_alpha());
    let mut decoded = vec![0; decoder.output_buffer_size().unwrap()];
    decoder.read_image(&mut decoded).unwrap();
    assert!(decoded == rgba, "WebP pixels differ from the PNG");
    gw.shutdown().await.unwrap();
}
