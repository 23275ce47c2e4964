use serde_json::{Value, json};

use super::*;
use crate::google::{FinishReason, GenerateContentResponse};
use crate::turn::ToolCall;

/// A turn chunk written as the GenerateContent chunk it renders as (`google_answer`).
fn chunk(body: Value) -> TurnChunk {
    let google: GenerateContentResponse = serde_json::from_value(body).unwrap();
    let parts = google
        .parts()
        .iter()
        .map(|p| match (&p.text, p.thought, &p.function_call) {
            (Some(t), Some(true), _) => TurnPart::reasoning(t.clone()),
            (Some(t), _, _) => TurnPart::text(t.clone()),
            (None, _, Some(c)) => TurnPart::Call(ToolCall {
                id: c.id.clone().unwrap(),
                upstream_id: None,
                kind: crate::turn::CallKind::Function,
                namespace: None,
                name: c.name.clone(),
                arguments: c.args.clone().unwrap_or(json!({})),
                signature: p.thought_signature.clone(),
            }),
            other => panic!("no turn part for {other:?}"),
        })
        .collect();
    TurnChunk {
        model: google.model_version.clone().unwrap_or_default(),
        response_id: google.response_id.clone().unwrap_or_default(),
        parts,
        finish: google.finish_reason().map(|f| match f {
            FinishReason::Stop => Finish::Stop,
            FinishReason::MaxTokens => Finish::MaxTokens,
            FinishReason::Safety => Finish::Safety,
            FinishReason::MalformedFunctionCall => Finish::MalformedCall,
            FinishReason::Other => Finish::Other,
        }),
        usage: google.usage_metadata.as_ref().map(|u| TurnUsage {
            input: u.prompt_token_count,
            output: u.candidates_token_count,
            total: u.total_token_count,
            cached: u.cached_content_token_count,
            reasoning: u.thoughts_token_count,
        }),
    }
}

fn parse(texts: &[String]) -> Vec<Value> {
    texts
        .iter()
        .map(|t| serde_json::from_str(t).unwrap())
        .collect()
}

fn final_chunk_with_calls() -> TurnChunk {
    chunk(json!({
        "candidates": [{"content": {"role": "model", "parts": [
            {"functionCall": {"id": "call_a", "name": "read", "args": {"path": "a"}}},
            {"functionCall": {"id": "call_b", "name": "read", "args": {"path": "a"}}}
        ]}, "finishReason": "STOP", "index": 0}],
        "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 4, "totalTokenCount": 14,
            "cachedContentTokenCount": 2},
        "modelVersion": "qwen3", "responseId": "r"
    }))
}

#[test]
fn a_streamed_turn_renders_role_once_text_reasoning_calls_finish_and_usage() {
    let mut renderer = ChatRenderer::new("chatcmpl-1", 7, true);
    let text = chunk(
        json!({"candidates": [{"content": {"role": "model", "parts": [
        {"text": "thinking", "thought": true}, {"text": "Hi"}]}, "index": 0}],
        "modelVersion": "qwen3"}),
    );
    let first = parse(&renderer.chunks(&text));
    assert_eq!(first.len(), 1);
    assert_eq!(
        first[0]["choices"][0],
        json!({"index": 0, "delta": {"role": "assistant", "content": "Hi",
            "reasoning_content": "thinking"}, "finish_reason": null})
    );
    assert_eq!(first[0]["object"], "chat.completion.chunk");
    assert_eq!(first[0]["model"], "qwen3");
    let last = parse(&renderer.chunks(&final_chunk_with_calls()));
    assert_eq!(
        last.len(),
        2,
        "the calls with the finish reason, then usage"
    );
    let choice = &last[0]["choices"][0];
    assert!(choice["delta"].get("role").is_none(), "role only once");
    assert_eq!(choice["finish_reason"], "tool_calls");
    let calls = choice["delta"]["tool_calls"].as_array().unwrap();
    assert_eq!(calls.len(), 2, "identical calls stay two calls");
    assert_eq!(
        calls[1],
        json!({"index": 1, "id": "call_b", "type": "function",
            "function": {"name": "read", "arguments": "{\"path\":\"a\"}"}})
    );
    assert_eq!(last[1]["choices"], json!([]));
    assert_eq!(
        last[1]["usage"],
        json!({"prompt_tokens": 10, "completion_tokens": 4, "total_tokens": 14,
            "prompt_tokens_details": {"cached_tokens": 2}})
    );
}

#[test]
fn usage_is_sent_only_when_asked_and_empty_chunks_render_nothing() {
    let mut renderer = ChatRenderer::new("c", 0, false);
    let empty = chunk(
        json!({"candidates": [{"content": {"role": "model", "parts": []},
        "index": 0}]}),
    );
    assert!(renderer.chunks(&empty).is_empty());
    let rendered = parse(&renderer.chunks(&final_chunk_with_calls()));
    assert_eq!(rendered.len(), 1);
    assert_eq!(rendered[0]["choices"][0]["delta"]["role"], "assistant");
}

#[test]
fn finish_reasons_map_back() {
    for (google, chat) in [
        ("STOP", "stop"),
        ("MAX_TOKENS", "length"),
        ("SAFETY", "content_filter"),
        ("OTHER", "stop"),
    ] {
        let c = chunk(
            json!({"candidates": [{"content": {"role": "model", "parts": [
            {"text": "x"}]}, "finishReason": google, "index": 0}]}),
        );
        let value: Value =
            serde_json::from_str(&ChatRenderer::new("c", 0, false).completion(&c)).unwrap();
        assert_eq!(value["choices"][0]["finish_reason"], chat, "{google}");
    }
}

#[test]
fn a_whole_completion_has_the_message_and_usage() {
    let value: Value = serde_json::from_str(
        &ChatRenderer::new("chatcmpl-9", 3, false).completion(&final_chunk_with_calls()),
    )
    .unwrap();
    assert_eq!(value["object"], "chat.completion");
    let message = &value["choices"][0]["message"];
    assert_eq!(message["role"], "assistant");
    assert_eq!(message["content"], Value::Null);
    assert_eq!(message["tool_calls"][0]["id"], "call_a");
    assert_eq!(value["choices"][0]["finish_reason"], "tool_calls");
    assert_eq!(value["usage"]["total_tokens"], 14);
}

#[test]
fn upstream_errors_keep_their_openai_shape_or_become_one() {
    let shaped = upstream_error_to_openai(
        400,
        br#"{"error":{"message":"context too long","type":"invalid_request_error","code":"context_length_exceeded"}}"#,
    );
    assert_eq!(
        shaped,
        json!({"error": {"message": "context too long", "type": "invalid_request_error",
            "param": null, "code": "context_length_exceeded"}})
    );
    let plain = upstream_error_to_openai(503, b"busy");
    assert_eq!(plain["error"]["type"], "server_error");
    assert_eq!(
        plain["error"]["message"],
        "upstream answered HTTP 503: busy"
    );
    assert_eq!(
        openai_error(429, "slow down", None)["error"]["type"],
        "rate_limit_error"
    );
}
