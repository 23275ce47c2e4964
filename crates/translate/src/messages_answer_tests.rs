use serde_json::{Value, json};

use super::*;
use crate::turn::{CallKind, ToolCall};

fn call(id: &str, name: &str, arguments: Value) -> TurnPart {
    TurnPart::Call(ToolCall {
        id: id.into(),
        upstream_id: None,
        kind: CallKind::Function,
        namespace: None,
        name: name.into(),
        arguments,
        signature: None,
    })
}

fn chunk(parts: Vec<TurnPart>) -> TurnChunk {
    TurnChunk {
        parts,
        ..TurnChunk::new("qwen", "r1")
    }
}

fn names_and_data(events: &[MessagesEvent]) -> Vec<(&'static str, Value)> {
    events
        .iter()
        .map(|(name, data)| (*name, serde_json::from_str(data).unwrap()))
        .collect()
}

#[test]
fn a_stream_is_the_exact_messages_sequence() {
    let mut renderer = MessagesRenderer::new("msg_r1", 1200);
    let mut events = renderer.events(&chunk(vec![TurnPart::reasoning("hmm")]));
    events.extend(renderer.events(&chunk(vec![TurnPart::text("Hel")])));
    events.extend(renderer.events(&chunk(vec![TurnPart::text("lo")])));
    let mut last = chunk(vec![
        call("call_1", "Bash", json!({"command": "echo 1"})),
        call("call_2", "Bash", json!({"command": "echo 1"})),
    ]);
    last.finish = Some(Finish::Stop);
    last.usage = Some(TurnUsage {
        input: 1000,
        output: 20,
        total: 1020,
        cached: Some(600),
        reasoning: None,
    });
    events.extend(renderer.events(&last));
    let events = names_and_data(&events);
    let names: Vec<&str> = events.iter().map(|(n, _)| *n).collect();
    assert_eq!(
        names,
        [
            "message_start",
            "ping",
            "content_block_start",
            "content_block_delta",
            "content_block_delta",
            "content_block_stop",
            "content_block_start",
            "content_block_delta",
            "content_block_delta",
            "content_block_stop",
            "content_block_start",
            "content_block_delta",
            "content_block_stop",
            "content_block_start",
            "content_block_delta",
            "content_block_stop",
            "message_delta",
            "message_stop",
        ]
    );
    for (name, data) in &events {
        assert_eq!(data["type"], *name, "{data}");
    }
    let start = &events[0].1["message"];
    assert_eq!(start["id"], "msg_r1");
    assert_eq!(start["model"], "qwen");
    assert_eq!(start["usage"]["input_tokens"], 1200);
    assert_eq!(events[2].1["content_block"]["type"], "thinking");
    assert_eq!(
        events[3].1["delta"],
        json!({"type": "thinking_delta", "thinking": "hmm"})
    );
    assert_eq!(
        events[4].1["delta"],
        json!({"type": "signature_delta", "signature": THINKING_SIGNATURE})
    );
    assert_eq!(events[6].1["index"], 1);
    assert_eq!(events[8].1["delta"]["text"], "lo");
    assert_eq!(
        events[10].1["content_block"],
        json!({"type": "tool_use", "id": "call_1", "name": "Bash", "input": {}})
    );
    assert_eq!(
        events[11].1["delta"],
        json!({"type": "input_json_delta", "partial_json": r#"{"command":"echo 1"}"#})
    );
    assert_eq!(events[13].1["content_block"]["id"], "call_2");
    assert_eq!(events[13].1["index"], 3);
    assert_eq!(
        events[16].1,
        json!({"type": "message_delta",
            "delta": {"stop_reason": "tool_use", "stop_sequence": null},
            "usage": {"input_tokens": 400, "cache_read_input_tokens": 600, "output_tokens": 20}})
    );
}

#[test]
fn a_whole_message_has_the_same_blocks_and_stop_reasons() {
    let mut turn = chunk(vec![
        TurnPart::text("a"),
        TurnPart::text("b"),
        call("call_1", "Read", json!({"file_path": "x"})),
    ]);
    turn.finish = Some(Finish::Stop);
    let message = message_value("msg_1", &turn, 7);
    assert_eq!(
        message["content"],
        json!([
            {"type": "text", "text": "ab"},
            {"type": "tool_use", "id": "call_1", "name": "Read", "input": {"file_path": "x"}},
        ])
    );
    assert_eq!(message["stop_reason"], "tool_use");
    assert_eq!(
        message["usage"],
        json!({"input_tokens": 7, "output_tokens": 0})
    );
    let mut cut = chunk(vec![TurnPart::text("a")]);
    cut.finish = Some(Finish::MaxTokens);
    assert_eq!(message_value("m", &cut, 0)["stop_reason"], "max_tokens");
    cut.finish = Some(Finish::Safety);
    assert_eq!(message_value("m", &cut, 0)["stop_reason"], "refusal");
}

#[test]
fn errors_have_anthropics_shape_and_types() {
    assert_eq!(
        anthropic_error(529, "busy"),
        json!({"type": "error", "error": {"type": "overloaded_error", "message": "busy"}})
    );
    for (status, kind) in [
        (400, "invalid_request_error"),
        (401, "authentication_error"),
        (404, "not_found_error"),
        (413, "request_too_large"),
        (429, "rate_limit_error"),
        (424, "invalid_request_error"),
        (500, "api_error"),
    ] {
        assert_eq!(anthropic_error_type(status), kind, "{status}");
    }
    assert_eq!(
        upstream_error_message(401, br#"{"error":{"message":"bad key"}}"#),
        "upstream answered HTTP 401: bad key"
    );
    assert_eq!(
        upstream_error_message(502, b"gateway down"),
        "upstream answered HTTP 502: gateway down"
    );
}
