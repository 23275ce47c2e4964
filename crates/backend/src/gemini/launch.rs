//! Builds an isolated Gemini CLI launch: private home, temp dir, settings, trusted-folders
//! file, an environment built from an allowlist (never inherited wholesale), and an argv that
//! carries no secret.
//!
//! Run directory layout (`run_dir`):
//! ```text
//! home/.gemini/settings.json        user settings (GEMINI_CLI_HOME=home, HOME=home)
//! home/.gemini/trustedFolders.json  trusts exactly the workspace
//! system-settings.json              same settings at system precedence (here, or in the first
//! system-defaults.json              {} (keeps /etc/gemini-cli out)   root-only folder Gemini
//!                                   CLI accepts: see `system_settings`)
//! tmp/                              TMPDIR (the CLI's error reports land here)
//! telemetry.json                    local OpenTelemetry output
//! policy.toml                       no rule: `--policy`/`--admin-policy` (the workspace's never apply)
//! ```

use super::settings::{ApprovalMode, SettingsInput, settings_json, trusted_folders_json};
use std::ffi::OsString;
use std::io;
use std::path::{Path, PathBuf};

pub use crate::isolation::PASSTHROUGH_ENV;
use crate::isolation::{passthrough_env, workspace_and_run_dir};

/// `general.maxAttempts` Switchyard gives the guest: one retry of its own. The gateway retries
/// upstream failures itself (within its budget), so guest retries are kept to a minimum and the
/// two never multiply into minutes (see the gateway's "Retry and timeout budget" docs).
pub const GUEST_MAX_ATTEMPTS: u32 = 2;

pub use crate::secret::Secret;

/// How Switchyard drives the CLI.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Protocol {
    /// `--prompt … --output-format stream-json`: one prompt per process, read from stdout.
    #[default]
    Headless,
    /// `--acp`: JSON-RPC over stdio; the gateway's address and key travel in `authenticate`,
    /// the host tools' MCP server in `session/new`, so neither is in the environment.
    Acp,
}

/// What a Gemini CLI run needs.
#[derive(Debug, Clone)]
pub struct GeminiLaunchConfig {
    /// The `node` executable.
    pub node: PathBuf,
    /// `bundle/gemini.js` of a verified install.
    pub entry: PathBuf,
    /// The workspace the agent works in (must exist).
    pub workdir: PathBuf,
    /// A fresh directory for this run's private state (created if missing).
    pub run_dir: PathBuf,
    pub prompt: String,
    /// Model name the CLI requests.
    pub model: String,
    /// The GenerateContent endpoint (Switchyard's gateway), e.g. `http://127.0.0.1:4100`.
    pub base_url: String,
    /// The key the CLI presents to `base_url` (a per-run token, not the provider key).
    pub api_key: Secret,
    pub approval_mode: ApprovalMode,
    pub max_turns: Option<u32>,
    /// `general.maxAttempts`; normally [`GUEST_MAX_ATTEMPTS`].
    pub max_attempts: u32,
    /// Host environment to draw [`PASSTHROUGH_ENV`] from (normally `std::env::vars_os()`).
    pub host_env: Vec<(OsString, OsString)>,
    /// The host tools' MCP server (URL and bearer token), if the run has host tools (headless:
    /// in the settings; ACP: given to `session/new` instead).
    pub host_mcp: Option<(String, Secret)>,
    pub protocol: Protocol,
    /// The workspace's own settings, `.env` and agents apply (`--trust-workspace-config`).
    pub trust_workspace_config: bool,
}

/// A prepared launch: hand these to the process manager.
#[derive(Debug, Clone)]
pub struct PreparedLaunch {
    pub program: PathBuf,
    pub args: Vec<OsString>,
    /// The complete child environment.
    pub env: Vec<(OsString, OsString)>,
    pub cwd: PathBuf,
    pub run_dir: PathBuf,
    pub telemetry_file: PathBuf,
    /// The settings document that was written (for the settings digest).
    pub settings: serde_json::Value,
    /// Where the system-precedence settings are, when Gemini CLI will load them from there
    /// (see [`super::system_settings`]); `None`: it will not, and a workspace's own settings
    /// outrank Switchyard's.
    pub system_settings_dir: Option<PathBuf>,
}

impl PreparedLaunch {
    /// Removes the system settings' folder when it is not inside the run directory (call it
    /// when the run is over, as the run directory itself is removed).
    pub fn remove_system_settings(&self) {
        if let Some(dir) = self
            .system_settings_dir
            .as_ref()
            .filter(|dir| !dir.starts_with(&self.run_dir))
        {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

/// Creates the run directory and files, and returns the launch.
pub fn prepare(config: &GeminiLaunchConfig) -> io::Result<PreparedLaunch> {
    let (workdir, run_dir) = workspace_and_run_dir(&config.workdir, &config.run_dir)?;
    let home = run_dir.join("home");
    let gemini_dir = home.join(".gemini");
    let tmp = run_dir.join("tmp");
    std::fs::create_dir_all(&gemini_dir)?;
    std::fs::create_dir_all(&tmp)?;
    let telemetry_file = run_dir.join("telemetry.json");
    let settings = settings_json(&SettingsInput {
        model: &config.model,
        max_turns: config.max_turns,
        max_attempts: config.max_attempts,
        telemetry_file: &telemetry_file,
        host_mcp_url: match config.protocol {
            Protocol::Headless => config.host_mcp.as_ref().map(|(url, _)| url.as_str()),
            Protocol::Acp => None,
        },
        auth: match config.protocol {
            Protocol::Headless => Some("gemini-api-key"),
            // `authenticate` selects the `gateway` method (and writes it to the user settings).
            Protocol::Acp => None,
        },
        trust_workspace_config: config.trust_workspace_config,
    });
    let pretty = |v: &serde_json::Value| serde_json::to_vec_pretty(v).map_err(io::Error::other);
    write_private(&gemini_dir.join("settings.json"), &pretty(&settings)?)?;
    let trusted_path = gemini_dir.join("trustedFolders.json");
    write_private(&trusted_path, &pretty(&trusted_folders_json(&workdir))?)?;
    let placed = super::system_settings::place(
        &super::system_settings::candidates(&run_dir),
        &[
            ("system-settings.json", &pretty(&settings)?),
            ("system-defaults.json", b"{}"),
        ],
    )?;
    let system_dir = placed.clone().unwrap_or_else(|| run_dir.clone());
    let system_settings = system_dir.join("system-settings.json");
    let system_defaults = system_dir.join("system-defaults.json");

    let mut env = passthrough_env(&config.host_env);
    let mut set = |k: &str, v: &Path| env.push((k.into(), v.as_os_str().to_owned()));
    set("HOME", &home);
    set("GEMINI_CLI_HOME", &home);
    set("TMPDIR", &tmp);
    set("GEMINI_CLI_SYSTEM_SETTINGS_PATH", &system_settings);
    set("GEMINI_CLI_SYSTEM_DEFAULTS_PATH", &system_defaults);
    set("GEMINI_CLI_TRUSTED_FOLDERS_PATH", &trusted_path);
    for (k, v) in [
        // One process instead of the relaunch wrapper, so signals reach the real CLI.
        ("GEMINI_CLI_NO_RELAUNCH", "true"),
        ("TERM", "dumb"),
        ("NO_COLOR", "1"),
    ] {
        env.push((k.into(), v.into()));
    }
    if !config.trust_workspace_config {
        for (k, v) in super::settings::PINNED_ENV {
            env.retain(|(name, _)| name.as_os_str() != *k);
            env.push(((*k).into(), (*v).into()));
        }
    }
    let mut args: Vec<OsString> = vec![config.entry.clone().into()];
    match config.protocol {
        Protocol::Headless => {
            env.push((
                "GOOGLE_GEMINI_BASE_URL".into(),
                config.base_url.clone().into(),
            ));
            env.push(("GEMINI_API_KEY".into(), config.api_key.expose().into()));
            if let Some((_, token)) = &config.host_mcp {
                env.push((
                    super::settings::HOST_MCP_TOKEN_ENV.into(),
                    token.expose().into(),
                ));
            }
            args.extend([
                "--prompt".into(),
                config.prompt.clone().into(),
                "--output-format".into(),
                "stream-json".into(),
            ]);
        }
        Protocol::Acp => args.push("--acp".into()),
    }
    args.extend([
        "--model".into(),
        config.model.clone().into(),
        "--approval-mode".into(),
        config.approval_mode.as_flag().into(),
    ]);
    if !config.trust_workspace_config {
        // Beats every settings scope's `mcp.allowed` (see `settings::neutralise_workspace`).
        args.extend([
            "--allowed-mcp-server-names".into(),
            super::settings::HOST_MCP_SERVER.into(),
        ]);
        // Flags replace the settings' `policyPaths` and `adminPolicyPaths` (which the CLI
        // unions across scopes, so a workspace's could let the model run any shell command
        // unasked): Switchyard's own, which has no rule.
        let policy = run_dir.join("policy.toml");
        write_private(
            &policy,
            b"# Switchyard: no policy of the workspace's applies.\n",
        )?;
        args.extend([
            "--policy".into(),
            policy.clone().into(),
            "--admin-policy".into(),
            policy.into(),
        ]);
    }
    Ok(PreparedLaunch {
        program: config.node.clone(),
        args,
        env,
        cwd: workdir,
        run_dir,
        telemetry_file,
        settings,
        system_settings_dir: placed,
    })
}

pub(super) fn write_private(path: &Path, bytes: &[u8]) -> io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)?;
    f.write_all(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Removes a test launch's system settings folder (outside its temporary run dir).
    struct Cleanup(PreparedLaunch);

    impl Drop for Cleanup {
        fn drop(&mut self) {
            self.0.remove_system_settings();
        }
    }

    fn config(root: &Path) -> GeminiLaunchConfig {
        let ws = root.join("ws");
        std::fs::create_dir_all(&ws).unwrap();
        GeminiLaunchConfig {
            trust_workspace_config: false,
            node: "node".into(),
            entry: "/opt/gemini.js".into(),
            workdir: ws,
            run_dir: root.join("run"),
            prompt: "hello".into(),
            model: "m".into(),
            base_url: "http://127.0.0.1:1".into(),
            api_key: Secret::new("sk-very-secret"),
            approval_mode: ApprovalMode::Default,
            max_turns: None,
            max_attempts: GUEST_MAX_ATTEMPTS,
            host_env: vec![
                ("PATH".into(), "/usr/bin".into()),
                ("HOME".into(), "/root".into()),
                ("OPENAI_API_KEY".into(), "leak".into()),
                ("GEMINI_API_KEY".into(), "host-key".into()),
            ],
            host_mcp: None,
            protocol: Protocol::Headless,
        }
    }

    #[test]
    fn the_workspace_is_neutralised_unless_trusted() {
        let dir = tempfile::tempdir().unwrap();
        let mut cfg = config(dir.path());
        cfg.host_env
            .push(("HTTPS_PROXY".into(), "http://host-proxy".into()));
        for trusted in [false, true] {
            cfg.trust_workspace_config = trusted;
            cfg.run_dir = dir.path().join(format!("run-{trusted}"));
            let launch = prepare(&cfg).unwrap();
            let _cleanup = Cleanup(launch.clone());
            let args: Vec<String> = launch
                .args
                .iter()
                .map(|a| a.to_string_lossy().into_owned())
                .collect();
            let allowed = args
                .windows(2)
                .any(|w| w[0] == "--allowed-mcp-server-names" && w[1] == "switchyard");
            assert_eq!(allowed, !trusted, "{args:?}");
            assert_eq!(
                args.iter().any(|a| a == "--policy") && args.iter().any(|a| a == "--admin-policy"),
                !trusted,
                "{args:?}"
            );
            let proxy: Vec<_> = launch
                .env
                .iter()
                .filter(|(k, _)| k == "HTTPS_PROXY")
                .map(|(_, v)| v.clone())
                .collect();
            if trusted {
                assert!(proxy.iter().all(|v| !v.is_empty()), "{proxy:?}");
            } else {
                assert_eq!(proxy, [OsString::new()], "pinned empty, once");
            }
            assert_eq!(
                launch.settings["hooksConfig"]["enabled"].as_bool(),
                (!trusted).then_some(false)
            );
            assert_eq!(
                launch.settings["tools"]["discoveryCommand"].as_str(),
                (!trusted).then_some("")
            );
        }
    }

    #[test]
    fn environment_is_an_allowlist_and_home_is_private() {
        let dir = tempfile::tempdir().unwrap();
        let launch = prepare(&config(dir.path())).unwrap();
        let _cleanup = Cleanup(launch.clone());
        let get = |k: &str| {
            let v: Vec<_> = launch
                .env
                .iter()
                .filter(|(n, _)| n == k)
                .map(|(_, v)| v.clone())
                .collect();
            assert!(v.len() <= 1, "{k} set twice");
            v.into_iter().next()
        };
        assert_eq!(get("PATH"), Some("/usr/bin".into()));
        assert_eq!(get("OPENAI_API_KEY"), None);
        assert_eq!(get("GEMINI_API_KEY"), Some("sk-very-secret".into()));
        let home = get("HOME").unwrap();
        assert!(Path::new(&home).starts_with(&launch.run_dir));
        assert_eq!(get("GEMINI_CLI_HOME"), Some(home.clone()));
        assert!(Path::new(&home).join(".gemini/settings.json").is_file());
    }

    #[test]
    fn secret_is_not_in_argv_or_debug() {
        let dir = tempfile::tempdir().unwrap();
        let cfg = config(dir.path());
        let launch = prepare(&cfg).unwrap();
        let _cleanup = Cleanup(launch.clone());
        assert!(
            launch
                .args
                .iter()
                .all(|a| !a.to_string_lossy().contains("sk-very-secret"))
        );
        assert!(!format!("{cfg:?}").contains("sk-very-secret"));
    }

    #[test]
    fn acp_keeps_the_gateway_and_the_mcp_token_out_of_the_environment() {
        let dir = tempfile::tempdir().unwrap();
        let mut cfg = config(dir.path());
        cfg.protocol = Protocol::Acp;
        cfg.host_mcp = Some(("http://127.0.0.1:9/mcp".into(), Secret::new("mcp-token")));
        let launch = prepare(&cfg).unwrap();
        let _cleanup = Cleanup(launch.clone());
        for (k, v) in &launch.env {
            assert!(
                k != "GEMINI_API_KEY" && k != "GOOGLE_GEMINI_BASE_URL",
                "{k:?}"
            );
            assert!(!v.to_string_lossy().contains("mcp-token"));
        }
        assert!(launch.args.iter().any(|a| a == "--acp"));
        assert!(!launch.args.iter().any(|a| a == "--prompt"));
        assert!(
            launch
                .settings
                .pointer("/security/auth/selectedType")
                .is_none()
        );
        // The real server comes in `session/new`; the settings hold only a placeholder by its
        // name, so that no workspace server can take the name (and no URL or token is here).
        let servers = launch.settings["mcpServers"].as_object().unwrap();
        assert_eq!(servers.len(), 1);
        assert!(
            servers["switchyard"]["httpUrl"]
                .as_str()
                .unwrap()
                .starts_with("http://127.0.0.1:1/")
        );
        assert!(!launch.settings.to_string().contains("127.0.0.1:9"));
    }

    #[test]
    fn run_dir_inside_workspace_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let mut cfg = config(dir.path());
        cfg.run_dir = cfg.workdir.join("run");
        assert_eq!(
            prepare(&cfg).unwrap_err().kind(),
            io::ErrorKind::InvalidInput
        );
    }
}
