//! Replays of what real OpenAI-compatible servers sent and accepted, captured with
//! `switchyard-dev capture-upstream` into `fixtures/upstreams/<server>-<version>/` (see each
//! `manifest.json`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};

use serde_json::{Value, json};
use switchyard_translate::{
    ProviderOptions, ResponseConfig, StreamTranslator, TranslateOptions, TurnOutcome,
    parse_request, translate_request,
};

fn case(server: &str, name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/upstreams")
        .join(server)
        .join(name)
}

const LLAMA: &str = "llama-cpp-python-0.3.36";

fn status(server: &str, name: &str) -> u64 {
    let meta: Value =
        serde_json::from_slice(&std::fs::read(case(server, name).join("response.json")).unwrap())
            .unwrap();
    meta["status"].as_u64().unwrap()
}

fn request(server: &str, name: &str) -> Value {
    serde_json::from_slice(&std::fs::read(case(server, name).join("request.json")).unwrap())
        .unwrap()
}

/// The SSE `data:` payloads of a captured stream, through the stream translator.
fn replay(server: &str, name: &str) -> (StreamTranslator, Vec<String>) {
    let text = std::fs::read_to_string(case(server, name).join("response.txt")).unwrap();
    let payloads: Vec<String> = text
        .lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .map(|d| d.trim().to_owned())
        .collect();
    let mut translator = StreamTranslator::new(ResponseConfig {
        prompt_token_estimate: Some(10),
        ..ResponseConfig::default()
    });
    for payload in &payloads {
        translator.push(payload).unwrap();
    }
    (translator, payloads)
}

fn profile(section: &str) -> TranslateOptions {
    TranslateOptions {
        provider: toml::from_str::<ProviderOptions>(section).unwrap(),
        ..TranslateOptions::new("model", false)
    }
}

#[test]
fn a_forced_call_whose_id_and_name_repeat_in_every_chunk_is_one_call() {
    let (translator, payloads) = replay(LLAMA, "stream_tools_named");
    assert!(payloads.len() > 5, "the fixture streams the call in pieces");
    assert_eq!(translator.unfinished(), None);
    let TurnOutcome::Complete(turn) = translator.finish() else {
        panic!("malformed")
    };
    assert_eq!(turn.delivered_calls.len(), 1);
    let call = &turn.delivered_calls[0];
    assert_eq!(call.name, "read_file");
    assert!(call.id.starts_with("call__0_read_file_"));
    assert!(call.arguments.is_object());
    // The legacy function_call next to tool_calls is counted, not appended.
    assert!(
        turn.report
            .unknown_upstream_fields
            .keys()
            .any(|k| k.contains("function_call (next to tool_calls, ignored)")),
        "{:?}",
        turn.report.unknown_upstream_fields
    );
}

#[test]
fn a_stream_that_ignores_include_usage_gets_estimated_usage() {
    let request = request(LLAMA, "stream_text");
    assert_eq!(request["stream_options"]["include_usage"], true);
    let (translator, _) = replay(LLAMA, "stream_text");
    let TurnOutcome::Complete(turn) = translator.finish() else {
        panic!("malformed")
    };
    assert!(
        turn.report.usage_estimated,
        "the server sent no usage chunk"
    );
}

/// A Gemini CLI history with a tool-call turn, translated with `section`.
fn tool_turn_with(section: &str) -> Value {
    let history = json!({"contents": [
        {"role": "user", "parts": [{"text": "Read notes.txt"}]},
        {"role": "model", "parts": [{"functionCall": {"id": "call_1", "name": "read_file",
            "args": {"file_path": "notes.txt"}}}]},
        {"role": "user", "parts": [{"functionResponse": {"id": "call_1", "name": "read_file",
            "response": {"output": "secret"}}}]}
    ]});
    let translated = translate_request(
        &parse_request(history.to_string().as_bytes()).unwrap(),
        &profile(section),
    )
    .unwrap();
    serde_json::to_value(&translated.chat.messages).unwrap()[1].clone()
}

#[test]
fn the_llama_cpp_profile_sends_the_tool_turn_the_server_accepted() {
    // The server refused content null (HTTP 500) and accepted "" (HTTP 200).
    assert_eq!(status(LLAMA, "tool_turn_content_null"), 500);
    assert_eq!(status(LLAMA, "tool_turn_content_empty"), 200);
    let refused = &request(LLAMA, "tool_turn_content_null")["messages"][1];
    let accepted = &request(LLAMA, "tool_turn_content_empty")["messages"][1];
    assert_eq!(tool_turn_with("")["content"], refused["content"]);
    let llama = tool_turn_with("profile = \"llama.cpp\"");
    assert_eq!(llama["content"], accepted["content"]);
    assert_eq!(llama["tool_calls"][0]["function"]["name"], "read_file");
}

#[test]
fn the_llama_cpp_profile_sends_the_json_schema_form_the_server_accepted() {
    assert_eq!(status(LLAMA, "json_schema"), 500);
    assert_eq!(status(LLAMA, "json_object_schema"), 200);
    let accepted = request(LLAMA, "json_object_schema")["response_format"].clone();
    let refused = request(LLAMA, "json_schema")["response_format"].clone();
    let body = |section: &str| {
        let request = json!({"contents": [{"role": "user", "parts": [{"text": "Rate this."}]}],
            "generationConfig": {"responseMimeType": "application/json",
                "responseJsonSchema": accepted["schema"]}});
        let translated = translate_request(
            &parse_request(request.to_string().as_bytes()).unwrap(),
            &profile(section),
        )
        .unwrap();
        serde_json::to_value(&translated.chat.response_format).unwrap()
    };
    assert_eq!(body("")["type"], refused["type"]);
    assert_eq!(body("profile = \"llama.cpp\""), accepted);
}

#[test]
fn a_context_overflow_is_a_200_with_an_empty_body_and_counts_as_unfinished() {
    assert_eq!(status(LLAMA, "stream_context_overflow"), 200);
    let (translator, payloads) = replay(LLAMA, "stream_context_overflow");
    assert!(payloads.is_empty());
    assert_eq!(
        translator.unfinished(),
        Some("the stream ended without a single chunk")
    );
}
