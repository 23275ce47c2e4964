use serde_json::json;

use super::*;

#[test]
fn the_control_dialect_reads_and_writes_claude_codes_lines() {
    let d = StreamJson;
    let request = d.request(&d.id(3), "interrupt", json!({}));
    assert_eq!(
        request,
        json!({"type": "control_request", "request_id": "switchyard-3",
            "request": {"subtype": "interrupt"}})
    );
    let user = d.notification(
        "user",
        json!({"message": {"role": "user", "content": "hi"}}),
    );
    assert_eq!(user["type"], "user");
    let answer = d.response(&json!("r-1"), Ok(json!({"behavior": "allow"})));
    assert_eq!(
        answer,
        json!({"type": "control_response", "response": {"subtype": "success",
            "request_id": "r-1", "response": {"behavior": "allow"}}})
    );
    let asked = d.classify(json!({"type": "control_request", "request_id": "r-2",
        "request": {"subtype": "can_use_tool", "tool_name": "Bash"}}));
    assert!(
        matches!(&asked, Incoming::Request { method, .. } if method == "can_use_tool"),
        "{asked:?}"
    );
    let answered = d.classify(json!({"type": "control_response",
        "response": {"subtype": "error", "request_id": "switchyard-3", "error": "no"}}));
    assert!(
        matches!(&answered, Incoming::Response { id, result: Err(_) } if id == "switchyard-3"),
        "{answered:?}"
    );
    let result = d.classify(json!({"type": "result", "is_error": false}));
    assert!(matches!(&result, Incoming::Notification { method, .. } if method == "result"));
    assert!(matches!(d.classify(json!([1])), Incoming::Other(_)));
}

struct Host(Option<Delivered>, bool);

impl PermissionHost for Host {
    fn delivered(&self, _: &str) -> Option<Delivered> {
        self.0.clone()
    }

    fn permission(&self, ask: &PermissionAsk) -> Result<PermissionRuling, String> {
        let call = self.0.clone().ok_or("not delivered")?;
        Ok(PermissionRuling {
            call_id: call.call_id,
            model_call_id: call.model_call_id,
            tool: ask.tool.clone(),
            arguments: call.arguments,
            allow: self.1,
            rule: "rule 1".into(),
        })
    }
}

fn delivered() -> Delivered {
    Delivered {
        call_id: "call_1".into(),
        model_call_id: "up_1".into(),
        tool: "Bash".into(),
        arguments: json!({"command": "touch x", "timeout": 1}),
        batch: 0,
    }
}

#[test]
fn a_permission_is_decided_on_the_delivered_call_only() {
    let params = |input: Value| {
        json!({"subtype": "can_use_tool", "tool_name": "Bash", "tool_use_id": "call_1",
            "input": input})
    };
    let (allowed, answer) = decide(
        &Host(Some(delivered()), true),
        &json!("r"),
        &params(json!({"command": "touch x", "timeout": 1.0})),
    );
    assert_eq!(allowed.outcome, PermissionOutcome::Allowed);
    assert_eq!(allowed.model_call_id.as_deref(), Some("up_1"));
    assert_eq!(answer["behavior"], "allow");
    let (rejected, answer) = decide(
        &Host(Some(delivered()), false),
        &json!("r"),
        &params(json!({"command": "touch x", "timeout": 1})),
    );
    assert_eq!(rejected.outcome, PermissionOutcome::Rejected);
    assert_eq!(answer["behavior"], "deny");
    assert!(answer["message"].as_str().unwrap().contains("rule 1"));
    // The guest asks for something else than what the model called: refused.
    let (changed, answer) = decide(
        &Host(Some(delivered()), true),
        &json!("r"),
        &params(json!({"command": "rm -rf /"})),
    );
    assert_eq!(changed.outcome, PermissionOutcome::Refused);
    assert_eq!(answer["behavior"], "deny");
    let (unknown, _) = decide(&Host(None, true), &json!("r"), &params(json!({})));
    assert_eq!(unknown.outcome, PermissionOutcome::Refused);
}
