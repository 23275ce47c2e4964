//! Shapes as OpenCode 1.18.33 sends them (`fixtures/opencode/1.18.33/`, the reference BRIEF).

use serde_json::{Value, json};

use super::*;
use crate::event::PermissionOutcome;

const SES: &str = "ses_1";

fn ev(kind: &str, properties: Value) -> Value {
    json!({"id": "evt_x", "type": kind, "properties": properties})
}

fn part(part: Value) -> Value {
    ev(
        "message.part.updated",
        json!({"sessionID": SES, "part": part, "time": 1}),
    )
}

fn assistant(id: &str, finish: Option<&str>) -> Value {
    let mut info = json!({"id": id, "role": "assistant", "sessionID": SES});
    if let Some(f) = finish {
        info["finish"] = json!(f);
    }
    ev("message.updated", json!({"sessionID": SES, "info": info}))
}

fn tool(call: &str, status: &str, state: Value) -> Value {
    let mut state = state;
    state["status"] = json!(status);
    part(
        json!({"id": format!("prt_{call}"), "messageID": "msg_a1", "sessionID": SES,
        "type": "tool", "tool": "bash", "callID": call, "state": state}),
    )
}

fn feed(n: &mut OpenCodeNormalizer, events: &[Value]) -> Vec<Event> {
    events.iter().flat_map(|e| n.event(e)).collect()
}

fn kinds(events: &[Event]) -> Vec<&'static str> {
    events.iter().map(Event::kind).collect()
}

/// A prompt whose first step runs bash, and whose second step answers with text.
fn bash_then_text() -> Vec<Value> {
    vec![
        ev("server.connected", json!({})),
        ev(
            "message.updated",
            json!({"sessionID": SES, "info": {"id": "msg_u", "role": "user", "sessionID": SES}}),
        ),
        part(
            json!({"id": "prt_u", "messageID": "msg_u", "sessionID": SES, "type": "text",
            "text": "list the files"}),
        ),
        ev(
            "session.status",
            json!({"sessionID": SES, "status": {"type": "busy"}}),
        ),
        assistant("msg_a1", None),
        part(
            json!({"id": "prt_s1", "messageID": "msg_a1", "sessionID": SES, "type": "step-start"}),
        ),
        tool("call_2", "pending", json!({"input": {}, "raw": ""})),
        tool(
            "call_2",
            "running",
            json!({"input": {"command": "ls"}, "time": {"start": 1}}),
        ),
        tool(
            "call_2",
            "completed",
            json!({"input": {"command": "ls"}, "output": "hello.txt\n", "title": "ls",
                "metadata": {}, "time": {"start": 1, "end": 2}}),
        ),
        part(
            json!({"id": "prt_f1", "messageID": "msg_a1", "sessionID": SES,
            "type": "step-finish", "reason": "tool-calls",
            "tokens": {"total": 110, "input": 100, "output": 10, "reasoning": 0,
                "cache": {"write": 0, "read": 0}}, "cost": 0}),
        ),
        assistant("msg_a1", Some("tool-calls")),
        assistant("msg_a2", None),
        part(
            json!({"id": "prt_s2", "messageID": "msg_a2", "sessionID": SES, "type": "step-start"}),
        ),
        part(
            json!({"id": "prt_t", "messageID": "msg_a2", "sessionID": SES, "type": "text",
            "text": "", "time": {"start": 1}}),
        ),
        ev(
            "message.part.delta",
            json!({"sessionID": SES, "messageID": "msg_a2", "partID": "prt_t", "field": "text",
                "delta": "One "}),
        ),
        ev(
            "message.part.delta",
            json!({"sessionID": SES, "messageID": "msg_a2", "partID": "prt_t", "field": "text",
                "delta": "file."}),
        ),
        part(
            json!({"id": "prt_t", "messageID": "msg_a2", "sessionID": SES, "type": "text",
            "text": "One file.", "time": {"start": 1, "end": 2}}),
        ),
        part(
            json!({"id": "prt_f2", "messageID": "msg_a2", "sessionID": SES,
            "type": "step-finish", "reason": "stop",
            "tokens": {"total": 60, "input": 50, "output": 10, "reasoning": 0,
                "cache": {"write": 0, "read": 20}}, "cost": 0}),
        ),
        assistant("msg_a2", Some("stop")),
        ev(
            "session.status",
            json!({"sessionID": SES, "status": {"type": "idle"}}),
        ),
        ev("session.idle", json!({"sessionID": SES})),
    ]
}

#[test]
fn a_tool_round_then_text_maps_to_calls_turns_text_and_usage() {
    let mut n = OpenCodeNormalizer::new(SES);
    let mut events = vec![n.prompt_sent("list the files")];
    events.extend(feed(&mut n, &bash_then_text()));
    events.extend(n.prompt_done());
    assert_eq!(
        kinds(&events),
        [
            "user_message",
            "tool_call",
            "tool_result",
            "assistant_delta",
            "assistant_delta",
            "assistant_message",
            "prompt_finished",
            "usage"
        ]
    );
    let Event::ToolCall(call) = &events[1] else {
        unreachable!()
    };
    assert_eq!(call.model_call_id, "call_2");
    assert_eq!(call.arguments, json!({"command": "ls"}));
    assert_eq!(call.category, crate::ToolCategory::Command);
    assert_eq!(call.turn, 0);
    let Event::ToolResult(result) = &events[2] else {
        unreachable!()
    };
    assert_eq!(result.output.as_deref(), Some("hello.txt\n"));
    let Event::AssistantMessage(message) = &events[5] else {
        unreachable!()
    };
    assert_eq!((message.text.as_str(), message.turn), ("One file.", 1));
    let Event::PromptFinished(finished) = &events[6] else {
        unreachable!()
    };
    assert_eq!(finished.stop_reason.as_deref(), Some("stop"));
    assert!(finished.error.is_none());
    assert_eq!(finished.final_text.as_deref(), Some("One file."));
    let Event::Usage(usage) = &events[7] else {
        unreachable!()
    };
    assert_eq!(
        (usage.input_tokens, usage.cached_tokens, usage.output_tokens),
        (170, 20, 20)
    );
    assert_eq!(usage.tool_calls, 1);
    let (end, outcome) = n.finish(1, GuestExit::default(), None);
    assert_eq!(outcome.status, OutcomeStatus::Succeeded);
    assert_eq!(kinds(&end), ["run_finished"]);
}

#[test]
fn a_whole_part_after_missed_deltas_emits_only_the_rest() {
    let mut n = OpenCodeNormalizer::new(SES);
    let text = |t: &str| {
        part(
            json!({"id": "prt_t", "messageID": "msg_a", "sessionID": SES, "type": "text",
            "text": t}),
        )
    };
    let delta = ev(
        "message.part.delta",
        json!({"sessionID": SES, "partID": "prt_t", "field": "text", "delta": "Hel"}),
    );
    let events = feed(&mut n, &[text(""), delta, text("Hello"), text("Hello")]);
    let texts: Vec<&str> = events
        .iter()
        .filter_map(|e| match e {
            Event::AssistantDelta(d) => Some(d.text.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(texts, ["Hel", "lo"]);
}

#[test]
fn unknown_foreign_and_unreadable_events_are_kept_and_counted() {
    let mut n = OpenCodeNormalizer::new(SES);
    let events = feed(
        &mut n,
        &[
            ev("todo.updated", json!({"sessionID": SES, "todos": []})),
            ev("session.idle", json!({"sessionID": "ses_other"})),
            json!({"properties": {}}),
            ev(
                "message.part.delta",
                json!({"sessionID": SES, "partID": "prt_never", "field": "text", "delta": "x"}),
            ),
            part(json!({"id": "prt_p", "messageID": "m", "sessionID": SES, "type": "patch"})),
            ev("plugin.added", json!({"id": "p"})),
        ],
    );
    assert_eq!(kinds(&events), ["unrecognized"; 5]);
    assert_eq!(n.unrecognized(), 5);
}

#[test]
fn a_rejected_call_fails_as_permission_rejected_and_the_prompt_goes_on() {
    let mut n = OpenCodeNormalizer::new(SES);
    let permission = n.permission(Permission {
        tool_call_id: "per_1".into(),
        // The model's own id differs: the tool part names the call by the delivered id.
        model_call_id: Some("upstream_9".into()),
        call_id: Some("call_9".into()),
        tool: Some("bash".into()),
        arguments: Some(json!({"command": "rm -rf /"})),
        options: Vec::new(),
        outcome: PermissionOutcome::Rejected,
        rule: Some("default".into()),
        option_id: Some("reject".into()),
        reason: None,
    });
    assert_eq!(permission.kind(), "permission");
    let events = feed(
        &mut n,
        &[tool(
            "call_9",
            "error",
            json!({"input": {"command": "rm -rf /"}, "error": "The user rejected permission \
                to use this specific tool call with the following feedback: no",
                "time": {"start": 1, "end": 2}}),
        )],
    );
    let Event::ToolResult(result) = &events[1] else {
        panic!("{events:?}")
    };
    assert_eq!(result.status, ToolStatus::Error);
    assert_eq!(
        result.error.as_ref().map(|e| e.kind.as_str()),
        Some("permission_rejected")
    );
}

#[test]
fn session_errors_type_the_prompt_and_the_run() {
    for (error, status, kind) in [
        (
            json!({"name": "APIError", "data": {"message": "bad", "statusCode": 400,
                "isRetryable": false}}),
            OutcomeStatus::Failed,
            ErrorKind::Api {
                http_status: Some(400),
            },
        ),
        (
            json!({"name": "MessageAbortedError", "data": {"message": "Aborted"}}),
            OutcomeStatus::Cancelled,
            ErrorKind::Cancelled,
        ),
        (
            json!({"name": "ContextOverflowError", "data": {"message": "too long"}}),
            OutcomeStatus::Failed,
            ErrorKind::ModelOutput,
        ),
    ] {
        let mut n = OpenCodeNormalizer::new(SES);
        n.prompt_sent("hi");
        let events = feed(
            &mut n,
            &[ev(
                "session.error",
                json!({"sessionID": SES, "error": error}),
            )],
        );
        assert_eq!(kinds(&events), ["error"]);
        let done = n.prompt_done();
        let Event::PromptFinished(finished) = &done[0] else {
            unreachable!()
        };
        assert_eq!(finished.error.as_ref().map(|e| e.kind.clone()), Some(kind));
        let (_, outcome) = n.finish(1, GuestExit::default(), None);
        assert_eq!(outcome.status, status);
    }
}

#[test]
fn an_idle_session_without_an_answer_is_incomplete() {
    let mut n = OpenCodeNormalizer::new(SES);
    n.prompt_sent("hi");
    n.prompt_done();
    let (_, outcome) = n.finish(1, GuestExit::default(), None);
    assert_eq!(outcome.status, OutcomeStatus::Incomplete);
}

#[test]
fn a_retry_status_is_a_warning() {
    let mut n = OpenCodeNormalizer::new(SES);
    let events = feed(
        &mut n,
        &[ev(
            "session.status",
            json!({"sessionID": SES, "status": {"type": "retry", "attempt": 2,
                "message": "Provider is overloaded", "next": 5}}),
        )],
    );
    let Event::Warning(warning) = &events[0] else {
        panic!("{events:?}")
    };
    assert!(warning.message.contains("attempt 2"));
}

/// As `fixtures/opencode/1.18.33/error_then_text` shows: the failed first prompt's assistant
/// message gets its error after the session went idle, when the second prompt is already sent.
#[test]
fn a_late_update_of_an_earlier_prompts_message_is_not_the_current_prompts() {
    let mut n = OpenCodeNormalizer::new(SES);
    n.prompt_sent("first");
    feed(&mut n, &[assistant("msg_a1", None)]);
    n.prompt_done();
    n.prompt_sent("second");
    let mut failed = assistant("msg_a1", None);
    failed["properties"]["info"]["error"] =
        json!({"name": "APIError", "data": {"message": "scripted failure 400", "statusCode": 400}});
    let events = feed(&mut n, &[failed, assistant("msg_a2", Some("stop"))]);
    assert!(events.is_empty(), "{events:?}");
    let done = n.prompt_done();
    let Event::PromptFinished(second) = &done[0] else {
        unreachable!()
    };
    assert_eq!(second.error, None);
    assert_eq!(second.stop_reason.as_deref(), Some("stop"));
    // The same error on the current prompt's own message is that prompt's.
    n.prompt_sent("third");
    let mut own = assistant("msg_a3", None);
    own["properties"]["info"]["error"] = json!({"name": "APIError", "data": {"message": "x"}});
    feed(&mut n, &[own]);
    let Event::PromptFinished(third) = &n.prompt_done()[0] else {
        unreachable!()
    };
    assert!(third.error.is_some());
}
