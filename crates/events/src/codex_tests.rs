use super::*;
use serde_json::json;

const T: &str = "thr_1";
const U: &str = "turn_1";

fn n(method: &str, params: Value) -> (String, Value) {
    (method.to_owned(), params)
}

fn started(item: Value) -> (String, Value) {
    n(
        "item/started",
        json!({"item": item, "threadId": T, "turnId": U, "startedAtMs": 1}),
    )
}

fn completed(item: Value) -> (String, Value) {
    n(
        "item/completed",
        json!({"item": item, "threadId": T, "turnId": U, "completedAtMs": 2}),
    )
}

fn delta(item: &str, text: &str) -> (String, Value) {
    n(
        "item/agentMessage/delta",
        json!({"threadId": T, "turnId": U, "itemId": item, "delta": text}),
    )
}

fn turn_completed(status: &str, error: Value) -> (String, Value) {
    n(
        "turn/completed",
        json!({"threadId": T, "turn": {"id": U, "items": [], "status": status, "error": error}}),
    )
}

fn usage(input: u64, output: u64) -> (String, Value) {
    let b = json!({"totalTokens": input + output, "inputTokens": input, "cachedInputTokens": 1,
        "outputTokens": output, "reasoningOutputTokens": 0});
    n(
        "thread/tokenUsage/updated",
        json!({"threadId": T, "turnId": U, "tokenUsage": {"total": b, "last": b}}),
    )
}

fn command(id: &str, status: &str, output: Option<&str>, exit: Option<i64>) -> Value {
    json!({"type": "commandExecution", "id": id, "command": "/bin/bash -lc 'cat a.txt'",
        "cwd": "/w", "commandActions": [], "status": status, "aggregatedOutput": output,
        "exitCode": exit})
}

fn agent(id: &str, text: &str) -> Value {
    json!({"type": "agentMessage", "id": id, "text": text})
}

fn run(normalizer: &mut CodexNormalizer, messages: &[(String, Value)]) -> Vec<Event> {
    messages
        .iter()
        .flat_map(|(m, p)| normalizer.notification(m, p))
        .collect()
}

fn kinds(events: &[Event]) -> Vec<&'static str> {
    events.iter().map(Event::kind).collect()
}

#[test]
fn a_shell_call_then_the_answer() {
    let mut c = CodexNormalizer::default();
    let mut events = c.thread(T, "m");
    events.push(c.prompt_sent("read a.txt"));
    c.delivered(
        "call_1",
        Some(Delivered {
            call_id: "call_1".into(),
            model_call_id: "up_1".into(),
            tool: "exec_command".into(),
            arguments: json!({"cmd": "cat a.txt"}),
            batch: 0,
        }),
    );
    events.extend(run(
        &mut c,
        &[
            // A resumed thread repeats the usage of an earlier run's turn: not this run's.
            n(
                "thread/tokenUsage/updated",
                json!({"threadId": T, "turnId": "earlier", "tokenUsage": {
                    "total": {"totalTokens": 9, "inputTokens": 9, "cachedInputTokens": 0,
                        "outputTokens": 0, "reasoningOutputTokens": 0},
                    "last": {"totalTokens": 9, "inputTokens": 9, "cachedInputTokens": 0,
                        "outputTokens": 0, "reasoningOutputTokens": 0}}}),
            ),
            n(
                "turn/started",
                json!({"threadId": T, "turn": {"id": U, "items": [], "status": "inProgress"}}),
            ),
            started(json!({"type": "userMessage", "id": "u1", "content": []})),
            started(command("call_1", "inProgress", None, None)),
            n(
                "item/commandExecution/outputDelta",
                json!({"threadId": T, "turnId": U, "itemId": "call_1", "delta": "x"}),
            ),
            completed(command("call_1", "completed", Some("secret-42\n"), Some(0))),
            usage(100, 10),
            started(agent("msg_1", "")),
            delta("msg_1", "The file says "),
            delta("msg_1", "secret"),
            completed(agent("msg_1", "The file says secret-42.")),
            usage(120, 8),
            n(
                "thread/status/changed",
                json!({"threadId": T, "status": {"type": "idle"}}),
            ),
            turn_completed("completed", Value::Null),
        ],
    ));
    assert_eq!(
        kinds(&events),
        [
            "session_started",
            "user_message",
            "tool_call",
            "tool_result",
            "assistant_delta",
            "assistant_delta",
            "assistant_delta",
            "assistant_message",
            "prompt_finished",
            "usage"
        ]
    );
    let Event::ToolCall(call) = &events[2] else {
        panic!()
    };
    assert_eq!(
        (
            call.call_id.as_str(),
            call.model_call_id.as_str(),
            call.tool_name.as_str()
        ),
        ("call_1", "up_1", "exec_command")
    );
    assert_eq!(call.category, crate::ToolCategory::Command);
    assert_eq!(call.arguments, json!({"cmd": "cat a.txt"}));
    assert_eq!((call.turn, events_turn(&events[4])), (0, 1));
    let Event::ToolResult(result) = &events[3] else {
        panic!()
    };
    assert_eq!(result.output.as_deref(), Some("secret-42\n"));
    let Event::AssistantDelta(rest) = &events[6] else {
        panic!()
    };
    assert_eq!(rest.text, "-42.");
    let Event::PromptFinished(finished) = &events[8] else {
        panic!()
    };
    assert_eq!(
        finished.final_text.as_deref(),
        Some("The file says secret-42.")
    );
    let Event::Usage(u) = &events[9] else {
        panic!()
    };
    assert_eq!(
        (u.input_tokens, u.output_tokens, u.tool_calls),
        (220, 18, 1)
    );
    let (end, outcome) = c.finish(1, GuestExit::default(), None);
    assert_eq!(outcome.status, OutcomeStatus::Succeeded, "{outcome:?}");
    assert_eq!(kinds(&end), ["run_finished"]);
}

fn events_turn(event: &Event) -> u32 {
    match event {
        Event::AssistantDelta(d) => d.turn,
        _ => u32::MAX,
    }
}

#[test]
fn without_a_delivered_call_the_item_names_the_call() {
    let mut c = CodexNormalizer::default();
    let events = run(
        &mut c,
        &[
            started(
                json!({"type": "fileChange", "id": "call_p", "status": "inProgress",
                "changes": [{"path": "/w/n.txt", "kind": {"type": "add"}, "diff": "hi\n"}]}),
            ),
            completed(
                json!({"type": "fileChange", "id": "call_p", "status": "completed",
                "changes": [{"path": "/w/n.txt", "kind": {"type": "add"}, "diff": "hi\n"}]}),
            ),
            started(
                json!({"type": "mcpToolCall", "id": "call_m", "server": "switchyard",
                "tool": "record", "status": "inProgress", "arguments": {"n": 1}}),
            ),
            completed(
                json!({"type": "mcpToolCall", "id": "call_m", "server": "switchyard",
                "tool": "record", "status": "completed", "arguments": {"n": 1},
                "result": {"content": [{"type": "text", "text": "ok"}]}}),
            ),
        ],
    );
    let calls: Vec<_> = events
        .iter()
        .filter_map(|e| match e {
            Event::ToolCall(c) => Some((
                c.tool_name.clone(),
                c.category.name(),
                c.model_call_id.clone(),
            )),
            _ => None,
        })
        .collect();
    assert_eq!(
        calls,
        [
            ("apply_patch".to_owned(), "file_write", "call_p".to_owned()),
            (
                "mcp__switchyard__record".to_owned(),
                "mcp",
                "call_m".to_owned()
            )
        ]
    );
    let outputs: Vec<_> = events
        .iter()
        .filter_map(|e| match e {
            Event::ToolResult(r) => r.output.clone(),
            _ => None,
        })
        .collect();
    assert_eq!(outputs, ["/w/n.txt", "ok"]);
    assert_eq!(
        CodexNormalizer::named_calls(
            "item/started",
            &started(command("call_9", "inProgress", None, None)).1
        ),
        ["call_9"]
    );
    assert!(CodexNormalizer::named_calls("item/started", &started(agent("msg", "")).1).is_empty());
}

#[test]
fn a_declined_command_is_a_permission_rejection_and_the_run_goes_on() {
    let mut c = CodexNormalizer::default();
    c.prompt_sent("p");
    let permission = c.permission(Permission {
        tool_call_id: "0".into(),
        model_call_id: Some("call_x".into()),
        call_id: Some("call_x".into()),
        tool: Some("exec_command".into()),
        arguments: None,
        options: Vec::new(),
        outcome: PermissionOutcome::Rejected,
        rule: Some("rule 1".into()),
        option_id: Some("decline".into()),
        reason: None,
    });
    assert_eq!(permission.kind(), "permission");
    let events = run(
        &mut c,
        &[
            started(command("call_x", "inProgress", None, None)),
            completed(command("call_x", "declined", None, None)),
            completed(agent("msg_2", "It was declined.")),
            turn_completed("completed", Value::Null),
        ],
    );
    let Event::ToolResult(result) = &events[1] else {
        panic!("{events:?}")
    };
    assert_eq!(result.status, ToolStatus::Error);
    assert_eq!(result.error.as_ref().unwrap().kind, "permission_rejected");
    let (_, outcome) = c.finish(1, GuestExit::default(), None);
    assert_eq!(outcome.status, OutcomeStatus::Succeeded);
}

#[test]
fn an_interrupted_turn_closes_its_open_calls_and_is_cancelled() {
    let mut c = CodexNormalizer::default();
    c.prompt_sent("p");
    let events = run(
        &mut c,
        &[
            started(command("call_long", "inProgress", None, None)),
            turn_completed("interrupted", Value::Null),
        ],
    );
    assert_eq!(
        kinds(&events),
        ["tool_call", "tool_result", "prompt_finished", "usage"]
    );
    let Event::ToolResult(result) = &events[1] else {
        panic!()
    };
    assert_eq!(result.error.as_ref().unwrap().kind, "interrupted");
    let (_, outcome) = c.finish(1, GuestExit::default(), None);
    assert_eq!(outcome.status, OutcomeStatus::Cancelled);
}

#[test]
fn failed_turns_are_typed_by_their_error_info() {
    let mut c = CodexNormalizer::default();
    c.prompt_sent("p");
    let events = run(
        &mut c,
        &[
            n(
                "error",
                json!({"error": {"message": "Reconnecting... 1/1",
                "codexErrorInfo": {"responseStreamDisconnected": {"httpStatusCode": null}}},
                "willRetry": true, "threadId": T, "turnId": U}),
            ),
            n(
                "error",
                json!({"error": {"message": "high demand", "codexErrorInfo":
                "internalServerError"}, "willRetry": false, "threadId": T, "turnId": U}),
            ),
            turn_completed(
                "failed",
                json!({"message": "high demand", "codexErrorInfo": "internalServerError"}),
            ),
        ],
    );
    assert_eq!(
        kinds(&events),
        ["warning", "error", "prompt_finished", "usage"]
    );
    let (_, outcome) = c.finish(1, GuestExit::default(), None);
    assert_eq!(outcome.status, OutcomeStatus::Failed);
    assert_eq!(
        outcome.error.unwrap().kind,
        ErrorKind::Api {
            http_status: Some(500)
        }
    );
    let status = |info: Value| {
        classify_turn_error(
            Some(&TurnError {
                message: "m".into(),
                codex_error_info: Some(info),
                additional_details: None,
                extra: serde_json::Map::new(),
            }),
            "failed",
        )
        .1
        .kind
    };
    assert_eq!(status(json!("unauthorized")), ErrorKind::Auth);
    assert_eq!(
        status(json!({"responseTooManyFailedAttempts": {"httpStatusCode": 429}})),
        ErrorKind::Api {
            http_status: Some(429)
        }
    );
    assert_eq!(status(json!("somethingNew")), ErrorKind::GuestFailure);
}

#[test]
fn a_prompt_without_turn_completed_is_incomplete() {
    let mut c = CodexNormalizer::default();
    c.prompt_sent("p");
    run(&mut c, &[completed(agent("m", "half"))]);
    let (_, outcome) = c.finish(1, GuestExit::default(), None);
    assert_eq!(outcome.status, OutcomeStatus::Incomplete);
}

#[test]
fn unknown_methods_items_and_shapes_are_kept_and_counted() {
    let mut c = CodexNormalizer::default();
    let events = run(
        &mut c,
        &[
            n("thread/hologram", json!({"x": 1})),
            started(json!({"type": "hologram", "id": "h"})),
            n("item/agentMessage/delta", json!({"delta": 5})),
            n("account/rateLimits/updated", json!({})),
            n(
                "configWarning",
                json!({"summary": "no bubblewrap on PATH", "details": null}),
            ),
        ],
    );
    assert_eq!(
        kinds(&events),
        ["unrecognized", "unrecognized", "unrecognized", "warning"]
    );
    assert_eq!(c.unrecognized(), 3);
    c.unrecognized_text("not json", "a line that is not JSON");
    assert_eq!(c.unrecognized(), 4);
}

#[test]
fn reasoning_is_a_thought_once() {
    let mut c = CodexNormalizer::default();
    let events = run(
        &mut c,
        &[
            n(
                "item/reasoning/summaryTextDelta",
                json!({"threadId": T, "turnId": U,
                "itemId": "rs", "delta": "plan", "summaryIndex": 0}),
            ),
            completed(json!({"type": "reasoning", "id": "rs", "summary": ["plan"], "content": []})),
            completed(
                json!({"type": "reasoning", "id": "rs2", "summary": ["whole"], "content": []}),
            ),
        ],
    );
    let thoughts: Vec<_> = events
        .iter()
        .filter_map(|e| match e {
            Event::Thought(t) => Some(t.text.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(thoughts, ["plan", "whole"]);
}
