use serde_json::{Value, json};

use super::*;
use crate::event::PermissionChoice;

fn exit0() -> GuestExit {
    GuestExit {
        code: Some(0),
        ..GuestExit::default()
    }
}

fn lines(n: &mut ClaudeNormalizer, lines: &[Value]) -> Vec<Event> {
    lines.iter().flat_map(|l| n.line(l)).collect()
}

fn init() -> Value {
    json!({"type": "system", "subtype": "init", "session_id": "s-1", "model": "qwen"})
}

fn result_ok(text: &str) -> Value {
    json!({"type": "result", "subtype": "success", "is_error": false, "result": text,
        "terminal_reason": "completed", "stop_reason": "end_turn", "duration_ms": 5,
        "usage": {"input_tokens": 10, "cache_read_input_tokens": 4, "output_tokens": 3}})
}

#[test]
fn a_tool_turn_maps_to_call_result_and_answer() {
    let mut n = ClaudeNormalizer::default();
    let mut events = vec![n.prompt_sent("read it")];
    n.delivered(
        "call_1",
        Some(Delivered {
            call_id: "call_1".into(),
            model_call_id: "up_1".into(),
            tool: "Read".into(),
            arguments: json!({"file_path": "/w/a"}),
            batch: 0,
        }),
    );
    events.extend(lines(
        &mut n,
        &[
            init(),
            json!({"type": "assistant", "message": {"content": [
                {"type": "tool_use", "id": "call_1", "name": "Read", "input": {"file_path": "/w/a"}}]}}),
            json!({"type": "user", "message": {"content": [
                {"type": "tool_result", "tool_use_id": "call_1", "content": "kumquat", "is_error": false}]}}),
            init(),
            json!({"type": "assistant", "message": {"content": [{"type": "text", "text": "It says kumquat."}]}}),
            result_ok("It says kumquat."),
        ],
    ));
    let (end, outcome) = n.finish(1, exit0(), None);
    events.extend(end);
    let kinds: Vec<&str> = events.iter().map(Event::kind).collect();
    assert_eq!(
        kinds,
        [
            "user_message",
            "session_started",
            "tool_call",
            "tool_result",
            "assistant_delta",
            "assistant_message",
            "prompt_finished",
            "usage",
            "run_finished"
        ]
    );
    let Event::ToolCall(call) = &events[2] else {
        panic!()
    };
    assert_eq!((call.model_call_id.as_str(), call.turn), ("up_1", 0));
    assert_eq!(call.category, crate::tools::ToolCategory::FileRead);
    let Event::AssistantDelta(delta) = &events[4] else {
        panic!()
    };
    assert_eq!(delta.turn, 1);
    let Event::Usage(usage) = &events[7] else {
        panic!()
    };
    assert_eq!(
        (usage.input_tokens, usage.cached_tokens, usage.output_tokens),
        (14, 4, 3)
    );
    assert_eq!(outcome.status, OutcomeStatus::Succeeded);
    let Event::RunFinished(finished) = &events[8] else {
        panic!()
    };
    assert_eq!(finished.final_text.as_deref(), Some("It says kumquat."));
}

#[test]
fn an_api_error_reported_as_success_is_a_failure() {
    let mut n = ClaudeNormalizer::default();
    n.prompt_sent("hi");
    let events = lines(
        &mut n,
        &[
            init(),
            json!({"type": "assistant", "message": {"model": "<synthetic>", "content": [
                {"type": "text", "text": "API Error: 529 overloaded"}]}, "error": "server_error"}),
            json!({"type": "result", "subtype": "success", "is_error": true,
                "result": "API Error: 529 overloaded", "terminal_reason": "api_error",
                "api_error_status": 529}),
        ],
    );
    let Some(Event::PromptFinished(finished)) = events
        .iter()
        .find(|e| matches!(e, Event::PromptFinished(_)))
    else {
        panic!("{events:?}")
    };
    let error = finished.error.as_ref().unwrap();
    assert_eq!(
        error.kind,
        ErrorKind::Api {
            http_status: Some(529)
        }
    );
    let (_, outcome) = n.finish(1, exit0(), None);
    assert_eq!(outcome.status, OutcomeStatus::Failed);
}

#[test]
fn an_interrupt_cancels_and_a_rejected_call_fails_as_such() {
    let mut n = ClaudeNormalizer::default();
    n.prompt_sent("go");
    lines(
        &mut n,
        &[json!({"type": "assistant", "message": {"content": [
            {"type": "tool_use", "id": "c1", "name": "Bash", "input": {"command": "rm -rf x"}}]}})],
    );
    n.permission(Permission {
        tool_call_id: "req-1".into(),
        model_call_id: Some("c1".into()),
        call_id: Some("c1".into()),
        tool: Some("Bash".into()),
        arguments: None,
        options: vec![PermissionChoice {
            option_id: "deny".into(),
            kind: "deny".into(),
            name: "deny".into(),
        }],
        outcome: PermissionOutcome::Rejected,
        rule: Some("rule 1".into()),
        option_id: Some("deny".into()),
        reason: None,
    });
    let events = lines(
        &mut n,
        &[
            json!({"type": "user", "message": {"content": [
                {"type": "tool_result", "tool_use_id": "c1", "content": "denied", "is_error": true}]}}),
            json!({"type": "result", "subtype": "error_during_execution", "is_error": true,
                "terminal_reason": "aborted_streaming"}),
        ],
    );
    let Event::ToolResult(result) = &events[0] else {
        panic!("{events:?}")
    };
    assert_eq!(result.error.as_ref().unwrap().kind, "permission_rejected");
    let (_, outcome) = n.finish(1, exit0(), None);
    assert_eq!(outcome.status, OutcomeStatus::Cancelled);
}

#[test]
fn unknown_lines_are_kept_and_counted_and_repeated_inits_are_quiet() {
    let mut n = ClaudeNormalizer::default();
    let events = lines(
        &mut n,
        &[
            init(),
            init(),
            json!({"type": "system", "subtype": "status", "status": "requesting"}),
            json!({"type": "prompt_suggestion", "suggestion": "x"}),
            json!({"type": "result"}),
        ],
    );
    let kinds: Vec<&str> = events.iter().map(Event::kind).collect();
    assert_eq!(kinds, ["session_started", "unrecognized", "unrecognized"]);
    assert_eq!(n.unrecognized(), 2);
    assert_eq!(n.unrecognized_text("garbage").kind(), "unrecognized");
    assert_eq!(n.unrecognized(), 3);
}

#[test]
fn partial_messages_stream_text_and_the_whole_block_adds_only_the_rest() {
    let mut n = ClaudeNormalizer::default();
    n.prompt_sent("hi");
    let se =
        |event: Value| json!({"type": "stream_event", "api_message_id": "msg_1", "event": event});
    let events = lines(
        &mut n,
        &[
            init(),
            se(json!({"type": "message_start", "message": {}})),
            se(json!({"type": "content_block_start", "index": 0,
                "content_block": {"type": "text", "text": ""}})),
            se(json!({"type": "content_block_delta", "index": 0,
                "delta": {"type": "text_delta", "text": "Runni"}})),
            se(json!({"type": "content_block_delta", "index": 0,
                "delta": {"type": "text_delta", "text": "ng"}})),
            // The whole block comes before its stop, with one more character than the deltas.
            json!({"type": "assistant", "message": {"id": "msg_1",
                "content": [{"type": "text", "text": "Running."}]}}),
            se(json!({"type": "content_block_stop", "index": 0})),
            se(json!({"type": "content_block_start", "index": 1,
                "content_block": {"type": "tool_use", "id": "c1", "name": "Bash", "input": {}}})),
            se(json!({"type": "content_block_delta", "index": 1,
                "delta": {"type": "input_json_delta", "partial_json": "{}"}})),
            json!({"type": "assistant", "message": {"id": "msg_1",
                "content": [{"type": "tool_use", "id": "c1", "name": "Bash", "input": {"command": "ls"}}]}}),
            se(json!({"type": "content_block_stop", "index": 1})),
            se(json!({"type": "message_stop"})),
            se(json!({"type": "brand_new_event"})),
        ],
    );
    let deltas: Vec<&str> = events
        .iter()
        .filter_map(|e| match e {
            Event::AssistantDelta(d) => Some(d.text.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(deltas, ["Runni", "ng", "."]);
    let kinds: Vec<&str> = events.iter().map(Event::kind).collect();
    assert_eq!(
        kinds,
        [
            "session_started",
            "assistant_delta",
            "assistant_delta",
            "assistant_delta",
            "assistant_message",
            "tool_call",
            "unrecognized"
        ]
    );
    let Event::AssistantMessage(message) = &events[4] else {
        panic!()
    };
    assert_eq!(message.text, "Running.");
}
