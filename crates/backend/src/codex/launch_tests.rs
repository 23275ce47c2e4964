use super::*;

fn config(run_dir: &Path, workdir: &Path) -> CodexLaunchConfig {
    CodexLaunchConfig {
        binary: "/opt/codex".into(),
        workdir: workdir.to_owned(),
        run_dir: run_dir.to_owned(),
        gateway_url: "http://127.0.0.1:9/".into(),
        gateway_key: Secret::new("run-key-123"),
        model: "qwen \"coder\"".into(),
        mcp: Some((
            "http://127.0.0.1:8/mcp".into(),
            Secret::new("mcp-token-456"),
        )),
        host_env: vec![
            ("PATH".into(), "/usr/bin".into()),
            ("OPENAI_API_KEY".into(), "the-users-own".into()),
            ("CODEX_HOME".into(), "/root/.codex".into()),
            ("HOME".into(), "/root".into()),
        ],
        trust_workspace_config: false,
    }
}

fn env_map(launch: &PreparedCodex) -> std::collections::HashMap<String, String> {
    launch
        .env
        .iter()
        .map(|(k, v)| {
            (
                k.to_string_lossy().into_owned(),
                v.to_string_lossy().into_owned(),
            )
        })
        .collect()
}

fn parsed_config(launch: &PreparedCodex) -> toml::Table {
    let text = std::fs::read_to_string(launch.codex_home.join("config.toml")).unwrap();
    text.parse::<toml::Table>().unwrap()
}

#[test]
fn no_secret_in_argv_or_config_and_the_environment_is_the_runs_own() {
    let (run, work) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let launch = prepare(&config(run.path(), work.path())).unwrap();
    let argv: Vec<String> = launch
        .args
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    assert_eq!(argv, ["app-server"]);
    let toml_text = std::fs::read_to_string(launch.codex_home.join("config.toml")).unwrap();
    for secret in ["run-key-123", "mcp-token-456"] {
        assert!(!toml_text.contains(secret) && !argv.join(" ").contains(secret));
        assert!(!launch.settings.to_string().contains(secret));
    }
    let env = env_map(&launch);
    assert_eq!(env[KEY_ENV], "run-key-123");
    assert_eq!(env[MCP_TOKEN_ENV], "mcp-token-456");
    assert!(!env.contains_key("OPENAI_API_KEY"));
    let run_dir = launch.run_dir.to_string_lossy().into_owned();
    for key in ["HOME", "CODEX_HOME", "TMPDIR"] {
        assert!(env[key].starts_with(&run_dir), "{key}: {}", env[key]);
    }
    assert_eq!(env["PATH"], "/usr/bin");
    // Files holding the run's config are the owner's only.
    use std::os::unix::fs::PermissionsExt as _;
    let mode = std::fs::metadata(launch.codex_home.join("config.toml"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o077, 0);
}

#[test]
fn the_config_points_at_the_gateway_and_locks_codex_down() {
    let (run, work) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let launch = prepare(&config(run.path(), work.path())).unwrap();
    let c = parsed_config(&launch);
    assert_eq!(c["model"].as_str(), Some("qwen \"coder\""));
    assert_eq!(c["model_provider"].as_str(), Some(PROVIDER));
    assert_eq!(c["sandbox_mode"].as_str(), Some(SANDBOX));
    assert_eq!(c["approval_policy"].as_str(), Some(APPROVAL_POLICY));
    assert_eq!(c["web_search"].as_str(), Some("disabled"));
    assert_eq!(c["check_for_update_on_startup"].as_bool(), Some(false));
    assert_eq!(c["project_doc_max_bytes"].as_integer(), Some(32_768));
    assert_eq!(c["analytics"]["enabled"].as_bool(), Some(false));
    assert_eq!(c["agents"]["enabled"].as_bool(), Some(false));
    for feature in ["plugins", "apps", "goals", "unbounded_connection_retries"] {
        assert_eq!(c["features"][feature].as_bool(), Some(false), "{feature}");
    }
    let provider = &c["model_providers"][PROVIDER];
    assert_eq!(provider["base_url"].as_str(), Some("http://127.0.0.1:9/v1"));
    assert_eq!(provider["env_key"].as_str(), Some(KEY_ENV));
    assert_eq!(provider["wire_api"].as_str(), Some("responses"));
    assert_eq!(provider["request_max_retries"].as_integer(), Some(0));
    assert_eq!(provider["stream_max_retries"].as_integer(), Some(0));
    let mcp = &c["mcp_servers"][MCP_SERVER];
    assert_eq!(mcp["url"].as_str(), Some("http://127.0.0.1:8/mcp"));
    assert_eq!(mcp["bearer_token_env_var"].as_str(), Some(MCP_TOKEN_ENV));
    let workdir = launch.cwd.to_string_lossy().into_owned();
    assert_eq!(
        c["projects"][workdir.as_str()]["trust_level"].as_str(),
        Some("untrusted"),
        "stated, or Codex trusts a workspace-write project on its own"
    );
    let catalog_path = c["model_catalog_json"].as_str().unwrap();
    let catalog: Value =
        serde_json::from_str(&std::fs::read_to_string(catalog_path).unwrap()).unwrap();
    let models = catalog["models"].as_array().unwrap();
    assert_eq!(models.len(), 1);
    assert_eq!(models[0]["slug"], "qwen \"coder\"");
    assert_eq!(models[0]["apply_patch_tool_type"], "freeform");
}

#[test]
fn only_a_trusted_workspace_is_a_trusted_project() {
    let (run, work) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let mut trusted = config(run.path(), work.path());
    trusted.trust_workspace_config = true;
    trusted.mcp = None;
    let launch = prepare(&trusted).unwrap();
    let c = parsed_config(&launch);
    let workdir = launch.cwd.to_string_lossy().into_owned();
    assert_eq!(
        c["projects"][workdir.as_str()]["trust_level"].as_str(),
        Some("trusted")
    );
    assert!(!c.contains_key("mcp_servers"));
}

#[test]
fn the_workspace_and_the_run_directory_stay_apart() {
    let work = tempfile::tempdir().unwrap();
    let inside = work.path().join("run");
    assert!(prepare(&config(&inside, work.path())).is_err());
}

#[test]
fn the_workspace_codex_folder_is_reported() {
    let work = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(work.path().join(".codex")).unwrap();
    std::fs::write(
        work.path().join(".codex/config.toml"),
        "model_provider = \"evil\"",
    )
    .unwrap();
    let found = crate::workspace::scan(work.path(), WORKSPACE_FILES);
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].path, ".codex");
    assert_eq!(found[0].keys, ["config.toml"]);
}

#[test]
fn the_repository_around_the_workspace_is_untrusted_too() {
    let (run, repo) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    std::fs::create_dir_all(repo.path().join(".git")).unwrap();
    let work = repo.path().join("sub");
    std::fs::create_dir_all(&work).unwrap();
    let launch = prepare(&config(run.path(), &work)).unwrap();
    let c = parsed_config(&launch);
    let root = repo.path().canonicalize().unwrap();
    let projects = c["projects"].as_table().unwrap();
    assert_eq!(projects.len(), 2, "{projects:?}");
    assert_eq!(
        projects[root.to_string_lossy().as_ref()]["trust_level"].as_str(),
        Some("untrusted")
    );
}

#[test]
fn only_mount_points_missing_at_launch_are_cleaned_and_only_when_empty() {
    let (run, work) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    std::fs::create_dir(work.path().join(".git")).unwrap();
    let launch = prepare(&config(run.path(), work.path())).unwrap();
    let names: Vec<String> = launch
        .mount_points
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, [".agents", ".aws", ".codex"]);
    std::fs::create_dir(work.path().join(".agents")).unwrap();
    std::fs::create_dir(work.path().join(".aws")).unwrap();
    std::fs::write(work.path().join(".aws/credentials"), "mine").unwrap();
    remove_empty_mount_points(&launch.mount_points);
    assert!(!work.path().join(".agents").exists());
    assert!(work.path().join(".aws/credentials").exists());
    assert!(work.path().join(".git").exists());
}
