use super::*;
use serde_json::json;

fn update(update: Value) -> Value {
    json!({"sessionId": "s1", "update": update})
}

fn no_lookup(_: &str) -> Option<Delivered> {
    None
}

#[test]
fn chunks_tools_and_the_prompt_answer_become_canonical_events() {
    let mut n = AcpNormalizer::new();
    let delivered = |id: &str| {
        (id == "c1").then(|| Delivered {
            call_id: "c1".to_owned(),
            model_call_id: "model-c1".to_owned(),
            tool: "read_file".to_owned(),
            arguments: json!({"file_path": "notes.txt"}),
            batch: 0,
        })
    };
    let mut events = Vec::new();
    for u in [
        json!({"sessionUpdate": "available_commands_update", "availableCommands": []}),
        json!({"sessionUpdate": "agent_thought_chunk",
               "content": {"type": "text", "text": "**Planning**\nread it"}}),
        json!({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "Let me look."}}),
        json!({"sessionUpdate": "tool_call", "toolCallId": "read_file__c1", "status": "in_progress",
               "title": "notes.txt", "content": [], "locations": [{"path": "/w/notes.txt"}], "kind": "read"}),
        json!({"sessionUpdate": "tool_call_update", "toolCallId": "read_file__c1", "status": "completed",
               "content": [{"type": "content", "content": {"type": "text", "text": "secret: plum"}}]}),
        json!({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "plum"}}),
    ] {
        events.extend(n.update(&update(u), &delivered));
    }
    events.extend(n.prompt_answered(Ok(&json!({"stopReason": "end_turn", "_meta": {"quota": {
        "token_count": {"input_tokens": 100, "output_tokens": 20},
        "model_usage": [{"model": "m", "token_count": {"input_tokens": 100, "output_tokens": 20}}]}}}))));
    let kinds: Vec<&str> = events.iter().map(Event::kind).collect();
    assert_eq!(
        kinds,
        [
            "thought",
            "assistant_delta",
            "assistant_message",
            "tool_call",
            "tool_result",
            "assistant_delta",
            "assistant_message",
            "prompt_finished",
            "usage"
        ]
    );
    let Event::ToolCall(call) = &events[3] else {
        panic!()
    };
    assert_eq!(call.tool_name, "read_file");
    assert_eq!(
        call.model_call_id, "model-c1",
        "the model's own id, from the gateway"
    );
    assert_eq!(
        call.arguments,
        json!({"file_path": "notes.txt"}),
        "from the gateway"
    );
    let Event::ToolResult(result) = &events[4] else {
        panic!()
    };
    assert_eq!(result.output.as_deref(), Some("secret: plum"));
    assert_eq!(result.content.len(), 1);
    let Event::AssistantDelta(second) = &events[5] else {
        panic!()
    };
    assert_eq!(second.turn, 1);
    let Event::PromptFinished(p) = &events[7] else {
        panic!()
    };
    assert_eq!((p.prompt, p.stop_reason.as_deref()), (0, Some("end_turn")));
    assert_eq!(p.final_text.as_deref(), Some("plum"));
    let Event::Usage(u) = &events[8] else {
        panic!()
    };
    assert_eq!(
        (u.input_tokens, u.output_tokens, u.tool_calls),
        (100, 20, 1)
    );
    assert_eq!(u.by_model["m"].input_tokens, 100);
    let exit = GuestExit {
        code: Some(0),
        ..GuestExit::default()
    };
    let (closing, outcome) = n.finish(1, exit, None);
    assert_eq!(outcome.status, OutcomeStatus::Succeeded);
    let Some(Event::RunFinished(f)) = closing.last() else {
        panic!()
    };
    assert_eq!((f.turns, f.final_text.as_deref()), (2, Some("plum")));
}

#[test]
fn unknown_and_unreadable_updates_are_kept_and_counted() {
    let mut n = AcpNormalizer::new();
    let odd = n.update(
        &update(json!({"sessionUpdate": "something_new", "x": 1})),
        &no_lookup,
    );
    let broken = n.update(&json!({"update": 3}), &no_lookup);
    for events in [&odd, &broken] {
        assert!(
            matches!(events.as_slice(), [Event::Unrecognized(_)]),
            "{events:?}"
        );
    }
    assert_eq!(n.unrecognized(), 2);
    let (closing, _) = n.finish(0, GuestExit::default(), None);
    let Some(Event::RunFinished(f)) = closing.last() else {
        panic!()
    };
    assert_eq!(f.unrecognized_lines, 2);
}

#[test]
fn prompt_errors_and_stop_reasons_are_typed() {
    let exit = GuestExit {
        code: Some(0),
        ..GuestExit::default()
    };
    let outcome_of = |answer: Result<Value, RpcError>| {
        let mut n = AcpNormalizer::new();
        let events = n.prompt_answered(answer.as_ref());
        let Some(Event::PromptFinished(p)) = events.first() else {
            panic!()
        };
        assert_eq!(p.prompt, 0);
        n.finish(1, exit, None).1
    };
    let api = outcome_of(Err(RpcError {
        code: 400,
        message: r#"{"error":{"code":400,"message":"bad request body"}}"#.into(),
    }));
    let error = api.error.unwrap();
    assert_eq!(
        error.kind,
        ErrorKind::Api {
            http_status: Some(400)
        }
    );
    assert_eq!(error.message, "bad request body");
    let turns = outcome_of(Ok(json!({"stopReason": "max_turn_requests"})));
    assert_eq!(turns.error.unwrap().kind, ErrorKind::TurnLimit);
    let cancelled = outcome_of(Ok(json!({"stopReason": "cancelled"})));
    assert_eq!(cancelled.status, OutcomeStatus::Cancelled);
    let internal = outcome_of(Err(RpcError {
        code: -32603,
        message: "boom".into(),
    }));
    assert_eq!(internal.error.unwrap().kind, ErrorKind::GuestFailure);
    // A guest that goes away before answering is incomplete.
    let gone = AcpNormalizer::new()
        .finish(2, exit, Some("stderr says why"))
        .1;
    assert_eq!(gone.status, OutcomeStatus::Incomplete);
    assert_eq!(gone.error.unwrap().message, "stderr says why");
}

#[test]
fn a_rejected_call_gets_a_derived_failure_once() {
    let mut n = AcpNormalizer::new();
    let call = n.tool_call("run_shell_command__c7", &no_lookup);
    assert!(matches!(call.as_slice(), [Event::ToolCall(c)] if c.tool_name == "run_shell_command"));
    assert!(n.tool_call("run_shell_command__c7", &no_lookup).is_empty());
    let rejected = n.tool_rejected("run_shell_command__c7", "rejected by rule 1");
    let [Event::ToolResult(r)] = rejected.as_slice() else {
        panic!()
    };
    assert_eq!(r.error.as_ref().unwrap().kind, "permission_rejected");
    assert!(n.tool_rejected("run_shell_command__c7", "again").is_empty());
}

#[test]
fn the_calls_of_one_model_batch_are_one_turn() {
    let mut n = AcpNormalizer::new();
    let batch_of = |id: &str| {
        let batch = if id == "c3" { 1 } else { 0 };
        Some(Delivered {
            call_id: id.into(),
            model_call_id: id.into(),
            tool: "mcp_switchyard_record".into(),
            arguments: json!({}),
            batch,
        })
    };
    let mut turns = Vec::new();
    for id in ["c1", "c2", "c3"] {
        let tool_call_id = format!("mcp_switchyard_record__{id}");
        for e in n.tool_call(&tool_call_id, &batch_of) {
            if let Event::ToolCall(c) = e {
                turns.push(c.turn);
            }
        }
        let done = json!({"sessionUpdate": "tool_call_update", "toolCallId": tool_call_id,
            "status": "completed", "content": []});
        n.update(&update(done), &batch_of);
    }
    assert_eq!(
        turns,
        [0, 0, 1],
        "c1 and c2 came in one response, c3 in the next"
    );
}
