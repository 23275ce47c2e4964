use super::*;

fn config(run_dir: &Path, workdir: &Path) -> ClaudeLaunchConfig {
    ClaudeLaunchConfig {
        binary: "/opt/claude.exe".into(),
        workdir: workdir.to_owned(),
        run_dir: run_dir.to_owned(),
        gateway_url: "http://127.0.0.1:9".into(),
        gateway_key: Secret::new("run-key-123"),
        model: "qwen".into(),
        mcp: Some((
            "http://127.0.0.1:8/mcp".into(),
            Secret::new("mcp-token-456"),
        )),
        resume: None,
        host_env: vec![
            ("PATH".into(), "/usr/bin".into()),
            ("ANTHROPIC_API_KEY".into(), "the-users-own".into()),
            ("HOME".into(), "/root".into()),
        ],
        trust_workspace_config: false,
    }
}

#[test]
fn no_secret_in_argv_and_the_environment_is_the_runs_own() {
    let (run, work) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let launch = prepare(&config(run.path(), work.path())).unwrap();
    let argv: Vec<String> = launch
        .args
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let joined = argv.join(" ");
    assert!(
        !joined.contains("run-key-123") && !joined.contains("mcp-token-456"),
        "{joined}"
    );
    for flag in [
        "--strict-mcp-config",
        "--permission-prompt-tool",
        "--setting-sources",
    ] {
        assert!(argv.iter().any(|a| a == flag), "{flag}: {joined}");
    }
    let env: std::collections::HashMap<String, String> = launch
        .env
        .iter()
        .map(|(k, v)| {
            (
                k.to_string_lossy().into_owned(),
                v.to_string_lossy().into_owned(),
            )
        })
        .collect();
    assert_eq!(env["ANTHROPIC_API_KEY"], "run-key-123");
    assert_eq!(env["CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC"], "1");
    assert_eq!(env["ENABLE_TOOL_SEARCH"], "false");
    assert!(env["HOME"].starts_with(&launch.run_dir.to_string_lossy().into_owned()));
    assert!(env["CLAUDE_CONFIG_DIR"].starts_with(&launch.run_dir.to_string_lossy().into_owned()));
    // The settings file repeats what a workspace could override; the record masks the key.
    let written: Value = serde_json::from_str(
        &std::fs::read_to_string(launch.run_dir.join("settings.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(written["env"]["ANTHROPIC_BASE_URL"], "http://127.0.0.1:9");
    assert_eq!(written["env"]["ANTHROPIC_API_KEY"], "run-key-123");
    assert_eq!(launch.settings["env"]["ANTHROPIC_API_KEY"], "<per-run key>");
    use std::os::unix::fs::PermissionsExt as _;
    for file in ["settings.json", "mcp.json"] {
        let mode = std::fs::metadata(launch.run_dir.join(file))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o077, 0, "{file}");
    }
    let mcp = std::fs::read_to_string(launch.run_dir.join("mcp.json")).unwrap();
    assert!(mcp.contains("Bearer mcp-token-456"), "{mcp}");
}

#[test]
fn a_trusted_workspace_keeps_its_sources_and_resume_names_the_session() {
    let (run, work) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let mut config = config(run.path(), work.path());
    config.trust_workspace_config = true;
    config.resume = Some("sess-1".into());
    let launch = prepare(&config).unwrap();
    let argv: Vec<String> = launch
        .args
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    assert!(!argv.iter().any(|a| a == "--setting-sources"), "{argv:?}");
    let at = argv.iter().position(|a| a == "--resume").unwrap();
    assert_eq!(argv[at + 1], "sess-1");
}
