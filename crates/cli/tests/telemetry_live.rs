//! The run's OpenTelemetry trace, received by an OTLP/HTTP receiver that decodes the protobuf:
//! a real Gemini CLI and a real OpenCode run with a tool call give `invoke_agent`, `chat` (client
//! spans whose context went upstream as `traceparent`) and `execute_tool` spans with the GenAI
//! attributes; a collector that is down costs the run nothing.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use serde_json::json;
use switchyard_testkit::chat_upstream::{ChatUpstream, Reply, Script};
use switchyard_testkit::otlp::{OtlpReceiver, ReceivedSpan};

mod common;
use common::{gemini_run, opencode_run, output_of, transcript};

fn script(tool: &str, args: String) -> Script {
    Script::new()
        .then_when(
            |r| r.wants_stream() && r.tool_messages().is_empty(),
            Reply::tool_calls_stream(&[("call_a", tool, &args)], 4),
        )
        .then_when(
            |r| r.wants_stream() && !r.tool_messages().is_empty(),
            Reply::text_stream(["It says alpha."]),
        )
}

fn named<'a>(spans: &'a [ReceivedSpan], prefix: &str) -> Vec<&'a ReceivedSpan> {
    spans
        .iter()
        .filter(|s| s.name.starts_with(prefix))
        .collect()
}

/// The trace of a run with one tool call, as the receiver got it.
fn check_trace(spans: &[ReceivedSpan], agent: &str, tool: &str, upstream: &ChatUpstream) {
    let runs = named(spans, "invoke_agent ");
    assert_eq!(runs.len(), 1, "{spans:#?}");
    let run = runs[0];
    assert_eq!(run.name, format!("invoke_agent {agent}"));
    assert_eq!(run.parent_span_id, "", "the run is the root");
    assert_eq!(run.attributes["gen_ai.operation.name"], "invoke_agent");
    assert_eq!(run.attributes["gen_ai.agent.name"], agent);
    assert_eq!(run.attributes["switchyard.outcome"], "succeeded");
    assert_eq!(run.service, "switchyard");
    let chats: Vec<&ReceivedSpan> = named(spans, "chat ")
        .into_iter()
        .filter(|s| s.attributes.contains_key("gen_ai.usage.input_tokens"))
        .collect();
    assert!(chats.len() >= 2, "{spans:#?}");
    for chat in &chats {
        assert_eq!(chat.trace_id, run.trace_id, "one trace");
        assert_eq!(chat.parent_span_id, run.span_id);
        assert_eq!(chat.kind, 3, "a client span");
        assert_eq!(chat.attributes["gen_ai.operation.name"], "chat");
        assert_eq!(chat.attributes["gen_ai.response.model"], "scripted-model");
        assert_eq!(chat.attributes["gen_ai.provider.name"], "openai");
        assert!(
            chat.attributes
                .contains_key("gen_ai.response.finish_reasons")
        );
        assert!(chat.attributes.contains_key("switchyard.ingress"));
        // No prompt or answer text leaves without --otlp-content.
        assert!(!chat.attributes.contains_key("gen_ai.output.text"));
    }
    let tools = named(spans, &format!("execute_tool {tool}"));
    assert_eq!(tools.len(), 1, "{spans:#?}");
    assert_eq!(tools[0].parent_span_id, run.span_id);
    assert_eq!(tools[0].attributes["gen_ai.tool.call.id"], "call_a");
    assert_eq!(tools[0].attributes["gen_ai.tool.name"], tool);
    // Every streamed upstream request carried its chat span's context.
    for request in upstream.requests().iter().filter(|r| r.wants_stream()) {
        let parent = request.header("traceparent").expect("traceparent upstream");
        assert!(
            parent.starts_with(&format!("00-{}-", run.trace_id)),
            "{parent}"
        );
        let span_id = parent.split('-').nth(2).unwrap();
        assert!(chats.iter().any(|c| c.span_id == span_id), "{parent}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gemini_cli_run_is_one_trace_with_its_chats_and_its_tool() {
    let receiver = OtlpReceiver::start().await.unwrap();
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("a.txt"), "alpha\n").unwrap();
    let args = json!({"file_path": "a.txt"}).to_string();
    let upstream = ChatUpstream::start(script("read_file", args))
        .await
        .unwrap();
    let mut cmd = gemini_run(ws.path(), &upstream.base_url(), "Read a.txt.");
    cmd.args(["--otlp-endpoint", receiver.url(), "--timeout", "90"]);
    let output = output_of(cmd).await;
    assert_eq!(output.status.code(), Some(0), "{}", transcript(&output));
    check_trace(&receiver.spans(), "gemini-cli", "read_file", &upstream);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_opencode_run_is_one_trace_with_its_permission_event() {
    let receiver = OtlpReceiver::start().await.unwrap();
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("a.txt"), "alpha\n").unwrap();
    let path = ws.path().canonicalize().unwrap().join("a.txt");
    let args = json!({"filePath": path}).to_string();
    let upstream = ChatUpstream::start(script("read", args)).await.unwrap();
    let mut cmd = opencode_run(ws.path(), &upstream.base_url(), "Read a.txt.");
    cmd.args(["--otlp-endpoint", receiver.url()]);
    let output = output_of(cmd).await;
    assert_eq!(output.status.code(), Some(0), "{}", transcript(&output));
    let spans = receiver.spans();
    check_trace(&spans, "opencode", "read", &upstream);
    let tool = named(&spans, "execute_tool read")[0];
    assert!(tool.events.iter().any(|e| e == "permission"), "{tool:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_collector_that_is_down_costs_the_run_nothing() {
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("a.txt"), "alpha\n").unwrap();
    let args = json!({"file_path": "a.txt"}).to_string();
    let upstream = ChatUpstream::start(script("read_file", args))
        .await
        .unwrap();
    let down = format!("http://127.0.0.1:{}", common::closed_port());
    let mut cmd = gemini_run(ws.path(), &upstream.base_url(), "Read a.txt.");
    cmd.args(["--otlp-endpoint", &down, "--timeout", "90"]);
    let started = std::time::Instant::now();
    let output = output_of(cmd).await;
    assert_eq!(output.status.code(), Some(0), "{}", transcript(&output));
    let events = common::events(&output);
    assert_eq!(events.last().unwrap()["final_text"], "It says alpha.");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("trace span(s) could not be sent"),
        "the loss is counted and said: {stderr}"
    );
    assert!(started.elapsed() < std::time::Duration::from_secs(60));
}
