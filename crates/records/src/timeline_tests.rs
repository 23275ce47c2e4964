use super::*;

#[test]
fn a_workspace_config_finding_is_shown_with_its_keys() {
    let event = EventRecord {
        run_id: uuid::Uuid::nil(),
        seq: 1,
        at: chrono::Utc::now(),
        kind: "workspace_config_ignored".into(),
        event: serde_json::json!({
            "type": "workspace_config_ignored",
            "path": ".gemini/settings.json",
            "keys": ["mcpServers.evil", "hooks.SessionStart"]
        }),
    };
    assert_eq!(
        describe_event(&event),
        "workspace config ignored: .gemini/settings.json (mcpServers.evil, hooks.SessionStart)"
    );
}

#[test]
fn the_context_decision_is_one_line_naming_what_went() {
    let mut exchange = ExchangeRecord::begin(None, "openai.chatCompletions", "m", Value::Null);
    assert_eq!(context_text(&exchange), None);
    exchange.context = Some(serde_json::json!({
        "policy": "sliding-window", "counted_by": "estimate",
        "tokens_before": 52301, "tokens_after": 28900,
        "max_input_tokens": 40000, "target_input_tokens": 30000,
        "evicted": [{"kind": "tool_batch", "start": 2, "end": 4, "calls": ["call_0"], "tokens": 4100},
                    {"kind": "answer", "start": 5, "end": 6, "tokens": 20}],
        "images_omitted": [{"message": 3, "part": 1, "tokens": 102}],
    }));
    let line = context_text(&exchange).unwrap();
    assert_eq!(
        line,
        "context sliding-window 52301 -> 28900 tokens (max 40000, target 30000; estimate; \
         evicted 2 block(s) [call_0, answer], 1 image(s) omitted)"
    );
    assert!(describe_exchange(&exchange).contains(&line));
}
