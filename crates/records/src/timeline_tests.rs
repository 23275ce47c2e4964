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
