//! The launch of one Claude Code run: a private run directory, the argv, and an environment
//! built from nothing (the host passes only [`crate::isolation::PASSTHROUGH_ENV`]).
//!
//! Every choice and its reason (facts from the reference brief for 2.1.332, §1, §5.7, §7):
//! - `CLAUDE_CONFIG_DIR`, `HOME` and `TMPDIR` are the run's own: the guest never reads or
//!   writes the user's `~/.claude*`, and its sockets and task files stay in the run;
//! - `CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1`: zero outside connections (telemetry, the
//!   MCP registry, the bootstrap probes);
//! - the gateway's URL and the per-run key go in `ANTHROPIC_BASE_URL` / `ANTHROPIC_API_KEY`
//!   and again in the `--settings` file's `env`, which beats a workspace
//!   `.claude/settings.json` that tries to redirect them;
//! - `--setting-sources user` (the run's own, empty config directory) unless the workspace is
//!   trusted: a workspace's settings can set `env`, hooks (commands) and permission rules;
//! - `--strict-mcp-config` with Switchyard's MCP file only: a workspace `.mcp.json` never
//!   starts; the file (0600, in the run directory) holds the MCP bearer token, never argv;
//! - not `--bare`: CLAUDE.md, skills and output styles work as for any user;
//! - `ENABLE_TOOL_SEARCH=false`: every tool inline (the gateway does not implement deferred
//!   tools); `CLAUDE_CODE_DISABLE_EXPERIMENTAL_BETAS=1`: no server-side context edits;
//! - `CLAUDE_CODE_MAX_RETRIES=0`: the gateway owns retries (its budget, its records);
//! - `--permission-prompt-tool stdio`: every permission prompt is a `can_use_tool` control
//!   request the host answers; `--input-format stream-json`: prompts and control on stdin;
//!   `--include-partial-messages`: text and thinking as they stream, not a block at a time.

use std::ffi::OsString;
use std::io;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::isolation::{passthrough_env, workspace_and_run_dir};
use crate::secret::Secret;

/// What Claude Code reads from its workspace that can start a program or redirect traffic
/// (reported; ignored through `--setting-sources user` and `--strict-mcp-config` unless
/// `--trust-workspace-config`).
pub const WORKSPACE_FILES: &[crate::workspace::WorkspaceFile] = {
    use crate::workspace::{Shape, WorkspaceFile};
    const JSON: Shape = Shape::Json {
        nested: &["env", "hooks", "permissions", "mcpServers", "apiKeyHelper"],
    };
    &[
        WorkspaceFile {
            path: ".claude/settings.json",
            shape: JSON,
        },
        WorkspaceFile {
            path: ".claude/settings.local.json",
            shape: JSON,
        },
        WorkspaceFile {
            path: ".mcp.json",
            shape: Shape::Json {
                nested: &["mcpServers"],
            },
        },
    ]
};

/// The run's private directories, below its run directory.
pub const CONFIG_DIR: &str = "config";

/// Everything a launch needs.
#[derive(Debug, Clone)]
pub struct ClaudeLaunchConfig {
    /// The sealed install's executable.
    pub binary: PathBuf,
    /// The workspace (must exist).
    pub workdir: PathBuf,
    /// A fresh directory for this run's private state (created if missing).
    pub run_dir: PathBuf,
    /// The gateway's base URL (its Messages ingress is `<base>/v1/messages`).
    pub gateway_url: String,
    /// The key the guest presents to the gateway.
    pub gateway_key: Secret,
    /// The model name the guest asks for (the gateway routes it).
    pub model: String,
    /// Switchyard's MCP server: its URL and bearer token.
    pub mcp: Option<(String, Secret)>,
    /// A session to resume (its id), with the same config directory and cwd.
    pub resume: Option<String>,
    /// Host environment to draw the pass-through variables from.
    pub host_env: Vec<(OsString, OsString)>,
    /// The workspace's settings and `.mcp.json` apply.
    pub trust_workspace_config: bool,
}

/// A prepared launch.
#[derive(Debug, Clone)]
pub struct PreparedClaude {
    pub program: PathBuf,
    pub args: Vec<OsString>,
    pub env: Vec<(OsString, OsString)>,
    pub cwd: PathBuf,
    pub run_dir: PathBuf,
    /// The settings document passed (secrets masked), for the records.
    pub settings: Value,
}

/// Writes `contents` to `path`, readable by the owner only.
fn private_file(path: &Path, contents: &str) -> io::Result<()> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)?;
    file.write_all(contents.as_bytes())
}

/// The variables the guest must see whatever the workspace says (repeated in `--settings`).
fn pinned_env(config: &ClaudeLaunchConfig) -> Vec<(&'static str, String)> {
    vec![
        ("ANTHROPIC_BASE_URL", config.gateway_url.clone()),
        ("ANTHROPIC_API_KEY", config.gateway_key.expose().to_owned()),
        ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1".to_owned()),
        ("ENABLE_TOOL_SEARCH", "false".to_owned()),
        ("CLAUDE_CODE_DISABLE_EXPERIMENTAL_BETAS", "1".to_owned()),
        ("CLAUDE_CODE_MAX_RETRIES", "0".to_owned()),
        ("DISABLE_AUTOUPDATER", "1".to_owned()),
    ]
}

/// Creates the run directory and returns the launch.
pub fn prepare(config: &ClaudeLaunchConfig) -> io::Result<PreparedClaude> {
    let (workdir, run_dir) = workspace_and_run_dir(&config.workdir, &config.run_dir)?;
    let dir = |name: &str| -> io::Result<PathBuf> {
        let path = run_dir.join(name);
        std::fs::create_dir_all(&path)?;
        Ok(path)
    };
    let home = dir("home")?;
    let config_dir = dir(CONFIG_DIR)?;
    let tmp = dir("tmp")?;
    let pinned = pinned_env(config);
    let mut env = passthrough_env(&config.host_env);
    for (key, path) in [
        ("HOME", &home),
        ("CLAUDE_CONFIG_DIR", &config_dir),
        ("TMPDIR", &tmp),
    ] {
        env.push((key.into(), path.as_os_str().to_owned()));
    }
    for (key, value) in &pinned {
        env.push((OsString::from(key), OsString::from(value)));
    }
    env.push(("TERM".into(), "dumb".into()));
    env.push(("NO_COLOR".into(), "1".into()));

    let settings = json!({
        "env": pinned.iter().map(|(k, v)| (k.to_string(), json!(v))).collect::<serde_json::Map<_, _>>(),
    });
    let settings_file = run_dir.join("settings.json");
    private_file(&settings_file, &settings.to_string())?;
    let mut servers = serde_json::Map::new();
    if let Some((url, token)) = &config.mcp {
        servers.insert(
            "switchyard".into(),
            json!({"type": "http", "url": url,
                "headers": {"Authorization": format!("Bearer {}", token.expose())}}),
        );
    }
    let mcp_file = run_dir.join("mcp.json");
    private_file(&mcp_file, &json!({"mcpServers": servers}).to_string())?;

    let mut args: Vec<OsString> = [
        "-p",
        "--input-format",
        "stream-json",
        "--output-format",
        "stream-json",
        "--verbose",
        "--include-partial-messages",
        "--permission-prompt-tool",
        "stdio",
        "--strict-mcp-config",
        "--model",
    ]
    .into_iter()
    .map(OsString::from)
    .collect();
    args.push(config.model.clone().into());
    args.push("--mcp-config".into());
    args.push(mcp_file.into_os_string());
    args.push("--settings".into());
    args.push(settings_file.into_os_string());
    if !config.trust_workspace_config {
        args.push("--setting-sources".into());
        args.push("user".into());
    }
    if let Some(session) = &config.resume {
        args.push("--resume".into());
        args.push(session.into());
    }
    let mut shown = settings;
    shown["env"]["ANTHROPIC_API_KEY"] = json!("<per-run key>");
    Ok(PreparedClaude {
        program: config.binary.clone(),
        args,
        env,
        cwd: workdir,
        run_dir,
        settings: shown,
    })
}

#[cfg(test)]
#[path = "launch_tests.rs"]
mod tests;
