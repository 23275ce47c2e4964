use super::*;

fn config(root: &Path) -> OpenCodeLaunchConfig {
    let ws = root.join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    let provider = json!({"provider": {PROVIDER: {"npm": "@ai-sdk/openai-compatible",
        "options": {"baseURL": "http://127.0.0.1:1/v1", "apiKey": "{env:SWITCHYARD_API_KEY}"},
        "models": {"m": {"name": "m"}}}}, "model": "switchyard/m", "small_model": "switchyard/m"});
    OpenCodeLaunchConfig {
        trust_workspace_config: false,
        binary: "/opt/opencode.exe".into(),
        workdir: ws,
        run_dir: root.join("run"),
        config: config_document(&ConfigInput {
            provider,
            mcp_url: Some("http://127.0.0.1:2/mcp".into()),
            ripgrep: false,
        }),
        password: Secret::new("server-password"),
        gateway_key: Secret::new("gateway-key"),
        mcp_token: Some(Secret::new("mcp-token")),
        host_env: vec![
            ("PATH".into(), "/usr/bin".into()),
            ("HOME".into(), "/root".into()),
            ("OPENAI_API_KEY".into(), "leak".into()),
            ("XDG_CONFIG_HOME".into(), "/root/.config".into()),
        ],
    }
}

fn get(launch: &PreparedServe, key: &str) -> Option<String> {
    let values: Vec<_> = launch
        .env
        .iter()
        .filter(|(k, _)| k == key)
        .map(|(_, v)| v.to_string_lossy().into_owned())
        .collect();
    assert!(values.len() <= 1, "{key} set twice");
    values.into_iter().next()
}

#[test]
fn the_environment_is_an_allowlist_and_every_directory_is_private() {
    let dir = tempfile::tempdir().unwrap();
    let launch = prepare(&config(dir.path())).unwrap();
    assert_eq!(get(&launch, "PATH").as_deref(), Some("/usr/bin"));
    assert_eq!(get(&launch, "OPENAI_API_KEY"), None);
    for key in [
        "HOME",
        "XDG_CONFIG_HOME",
        "XDG_DATA_HOME",
        "XDG_STATE_HOME",
        "XDG_CACHE_HOME",
        "TMPDIR",
    ] {
        let value = get(&launch, key).unwrap();
        assert!(
            Path::new(&value).starts_with(&launch.run_dir),
            "{key}={value}"
        );
        assert!(Path::new(&value).is_dir(), "{key}");
    }
    assert_eq!(
        get(&launch, "OPENCODE_DISABLE_MODELS_FETCH").as_deref(),
        Some("1")
    );
    assert_eq!(
        get(&launch, "OPENCODE_DISABLE_PROJECT_CONFIG").as_deref(),
        Some("1")
    );
    let trusted = prepare(&OpenCodeLaunchConfig {
        trust_workspace_config: true,
        run_dir: dir.path().join("trusted-run"),
        ..config(dir.path())
    })
    .unwrap();
    assert_eq!(get(&trusted, "OPENCODE_DISABLE_PROJECT_CONFIG"), None);
    let seed = launch.run_dir.join("config/opencode");
    assert!(seed.join("node_modules").is_dir());
    let lock: Value =
        serde_json::from_slice(&std::fs::read(seed.join("package-lock.json")).unwrap()).unwrap();
    assert_eq!(
        lock["packages"][""]["dependencies"]["@opencode-ai/plugin"],
        crate::opencode::VERSION
    );
    assert_eq!(
        launch.args,
        ["serve", "--hostname", "127.0.0.1", "--port", "0"].map(OsString::from)
    );
}

#[test]
fn secrets_travel_only_in_their_own_variables() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path());
    let launch = prepare(&cfg).unwrap();
    let config_text = get(&launch, "OPENCODE_CONFIG_CONTENT").unwrap();
    for secret in ["server-password", "gateway-key", "mcp-token"] {
        assert!(!config_text.contains(secret), "{secret} in the config");
        assert!(
            launch
                .args
                .iter()
                .all(|a| !a.to_string_lossy().contains(secret)),
            "{secret} in argv"
        );
        assert!(!format!("{cfg:?}").contains(secret), "{secret} in Debug");
    }
    assert_eq!(
        get(&launch, "OPENCODE_SERVER_PASSWORD").as_deref(),
        Some("server-password")
    );
    assert_eq!(
        get(&launch, GATEWAY_KEY_ENV).as_deref(),
        Some("gateway-key")
    );
    assert_eq!(get(&launch, MCP_TOKEN_ENV).as_deref(), Some("mcp-token"));
}

#[test]
fn the_config_asks_for_every_tool_and_offers_no_question() {
    let dir = tempfile::tempdir().unwrap();
    let launch = prepare(&config(dir.path())).unwrap();
    let config = &launch.config;
    assert_eq!(
        config["permission"],
        json!({"*": "ask", "question": "deny", "grep": "deny"})
    );
    assert_eq!(config["enabled_providers"], json!([PROVIDER]));
    assert_eq!(config["model"], "switchyard/m");
    assert_eq!(config["agent"]["title"]["disable"], true);
    assert_eq!(config["compaction"], json!({"auto": false, "prune": false}));
    assert_eq!(config["snapshot"], false);
    let mcp = &config["mcp"][OPENCODE_HOST_SERVER];
    assert_eq!(mcp["oauth"], false);
    assert_eq!(
        mcp["headers"]["Authorization"],
        "Bearer {env:SWITCHYARD_MCP_TOKEN}"
    );
}

#[test]
fn a_run_dir_inside_the_workspace_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = config(dir.path());
    cfg.run_dir = cfg.workdir.join("run");
    assert_eq!(
        prepare(&cfg).unwrap_err().kind(),
        io::ErrorKind::InvalidInput
    );
}
