use super::*;

#[test]
fn every_agent_has_one_entry_and_its_own_name() {
    for agent in Agent::ALL {
        let entries: Vec<&AgentSpec> = REGISTRY.iter().filter(|s| s.agent == agent).collect();
        assert_eq!(entries.len(), 1, "{agent:?}");
        assert_eq!(spec(agent).name, agent.name());
        assert_eq!(
            serde_json::from_value::<Agent>(spec(agent).name.into()).ok(),
            Some(agent),
            "the name is the --agent value"
        );
    }
}

#[test]
fn unsupported_flags_are_refused_with_the_flag_named() {
    let opencode = spec(Agent::Opencode);
    let with = |f: fn(&mut RunSettings)| {
        let mut a = RunSettings::default();
        f(&mut a);
        opencode.check_flags(&a).map_err(|e| e.to_string())
    };
    assert!(with(|_| {}).is_ok());
    for (set, flag) in [
        (
            (|a: &mut RunSettings| a.resume = Some("r".into())) as fn(&mut RunSettings),
            "--resume",
        ),
        (|a| a.max_turns = Some(3), "--max-turns"),
        (|a| a.gemini_binary = Some("/x".into()), "--gemini-binary"),
        (
            |a| a.guest_base_url = Some("http://x".into()),
            "--guest-base-url",
        ),
    ] {
        let error = with(set).unwrap_err();
        assert!(
            error.contains(flag) && error.contains("opencode"),
            "{error}"
        );
    }
    let a = RunSettings {
        opencode_binary: Some("/x".into()),
        ..RunSettings::default()
    };
    assert!(spec(Agent::GeminiCli).check_flags(&a).is_err());
}

#[test]
fn codex_is_registered_with_its_own_flag_and_state() {
    let codex = spec(Agent::Codex);
    assert_eq!(codex.name, "codex");
    assert_eq!(codex.pin(), ("@openai/codex", "0.171.0"));
    assert_eq!(codex.host_tool_prefix, "mcp__switchyard__");
    assert_eq!(codex.binary_flag, "--codex-binary");
    assert_eq!(codex.session_state, Some("codex-home/sessions"));
    assert!(codex.caps.resume && !codex.caps.protocols);
    let a = RunSettings {
        codex_binary: Some("/x".into()),
        ..RunSettings::default()
    };
    assert!(codex.check_flags(&a).is_ok());
    let error = spec(Agent::ClaudeCode)
        .check_flags(&a)
        .unwrap_err()
        .to_string();
    assert!(error.contains("--codex-binary"), "{error}");
    let a = RunSettings {
        max_turns: Some(2),
        ..RunSettings::default()
    };
    assert!(codex.check_flags(&a).is_err());
}
