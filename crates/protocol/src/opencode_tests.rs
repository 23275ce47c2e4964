use serde_json::json;

use super::*;

fn parse(value: Value) -> EventLine {
    parse_event(value)
}

#[test]
fn the_events_switchyard_reads_are_typed() {
    let tool = json!({"type": "message.part.updated", "properties": {"sessionID": "ses_1",
        "part": {"id": "prt_1", "messageID": "msg_1", "sessionID": "ses_1", "type": "tool",
            "tool": "read", "callID": "call_a1",
            "state": {"status": "running", "input": {"filePath": "/a.txt"}, "time": {"start": 1}}},
        "time": 2}});
    let EventLine::Event { type_name, event } = parse(tool) else {
        panic!("a tool part");
    };
    assert_eq!(type_name, "message.part.updated");
    let ServerEvent::PartUpdated(update) = *event else {
        panic!("a part update");
    };
    assert_eq!(update.part.id, "prt_1");
    let PartKind::Tool {
        call_id,
        tool,
        state,
    } = update.part.kind
    else {
        panic!("a tool part");
    };
    assert_eq!((call_id.as_str(), tool.as_str()), ("call_a1", "read"));
    assert_eq!(state.input(), Some(&json!({"filePath": "/a.txt"})));

    let finish = json!({"type": "message.part.updated", "properties": {"sessionID": "s",
        "part": {"id": "p", "messageID": "m", "type": "step-finish", "reason": "stop",
            "tokens": {"total": 39, "input": 30, "output": 9, "reasoning": 0,
                "cache": {"write": 0, "read": 4}}}}});
    let EventLine::Event { event, .. } = parse(finish) else {
        panic!("a step finish");
    };
    let ServerEvent::PartUpdated(PartUpdated {
        part:
            Part {
                kind:
                    PartKind::StepFinish {
                        tokens: Some(tokens),
                    },
                ..
            },
        ..
    }) = *event
    else {
        panic!("tokens");
    };
    assert_eq!(
        (tokens.input, tokens.output, tokens.cache.map(|c| c.read)),
        (30, 9, Some(4))
    );

    let error = json!({"type": "session.error", "properties": {"sessionID": "s",
        "error": {"name": "APIError", "data": {"message": "scripted failure 400",
            "statusCode": 400, "isRetryable": false}}}});
    let EventLine::Event { event, .. } = parse(error) else {
        panic!("an error");
    };
    let ServerEvent::SessionError(error) = *event else {
        panic!("a session error");
    };
    assert_eq!(error.error.name, "APIError");
    assert_eq!(error.error.data.and_then(|d| d.status_code), Some(400));
}

#[test]
fn a_missing_field_makes_the_event_invalid_and_an_unknown_type_is_kept() {
    // A tool part without its callID is no call: never one with an empty id.
    let no_call = json!({"type": "message.part.updated", "properties": {"sessionID": "s",
        "part": {"id": "p", "messageID": "m", "type": "tool", "tool": "read",
            "state": {"status": "running", "input": {}}}}});
    assert!(
        matches!(parse(no_call), EventLine::Invalid { reason, .. } if reason.contains("callID"))
    );
    let no_tokens = json!({"type": "message.part.updated", "properties": {"sessionID": "s",
        "part": {"id": "p", "messageID": "m", "type": "step-finish", "tokens": {"input": 3}}}});
    assert!(matches!(parse(no_tokens), EventLine::Invalid { .. }));
    assert!(matches!(
        parse(json!({"properties": {}})),
        EventLine::Invalid { .. }
    ));
    assert!(matches!(
        parse(json!({"type": "session.diff", "properties": {"diff": []}})),
        EventLine::UnknownType { type_name, .. } if type_name == "session.diff"
    ));
    // A part type of no meaning here, or a status of no meaning, is still read as such.
    let file = json!({"type": "message.part.updated", "properties": {"sessionID": "s",
        "part": {"id": "p", "messageID": "m", "type": "file", "url": "x"}}});
    assert!(matches!(
        parse(file),
        EventLine::Event { event, .. } if matches!(*event, ServerEvent::PartUpdated(PartUpdated { part: Part { kind: PartKind::Other, .. }, .. }))
    ));
}
