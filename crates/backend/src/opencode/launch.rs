//! Builds an isolated `opencode serve` launch.
//!
//! Run directory layout (`run_dir`):
//! ```text
//! home/                      HOME (`~/.opencode`, `~/.claude` lookups land here)
//! config/opencode/           XDG_CONFIG_HOME: seeded so OpenCode installs nothing from npm
//!   package.json, package-lock.json, node_modules/
//! data/ state/ cache/        XDG_DATA_HOME (sessions' SQLite), XDG_STATE_HOME, XDG_CACHE_HOME
//! tmp/                       TMPDIR (Bun extracts a native library here once per process)
//! ```
//!
//! The environment is built from an allowlist, never inherited wholesale; argv carries no
//! secret. The config document travels in `OPENCODE_CONFIG_CONTENT` and names secrets only
//! as `{env:…}` references (OpenCode substitutes them), so the document holds none: the server
//! password, the gateway key and the host tools' MCP token are separate variables.
//!
//! Every setting of [`config_document`], and why:
//! - `enabled_providers: ["switchyard"]` and the gateway's provider snippet: one provider,
//!   `@ai-sdk/openai-compatible` (bundled with OpenCode, nothing fetched), at the gateway's
//!   Chat Completions ingress with the per-run key, its model taking images: every model call
//!   goes through the gateway;
//! - `model` and `small_model` both the run's model: no other model is ever asked for;
//! - `agent.title.disable`, `agent.summary.disable`: no extra model calls the host did not ask
//!   for (the session also gets a title at creation, which skips title generation);
//! - `compaction: {auto: false, prune: false}`: no automatic summarisation (an overflow is a
//!   typed `ContextOverflowError`, not a silently rewritten history);
//! - `snapshot: false`: no per-step git snapshots of the workspace;
//! - `autoupdate: false`, `share: "disabled"`, `lsp: false`, `formatter: false`: no update
//!   check, no upload, no language-server or formatter downloads;
//! - `permission: {"*": "ask", "question": "deny"}`: every tool call asks, and Switchyard
//!   answers each from the run's policy; `question` would wait for a human forever, so the
//!   tool is not offered; without `rg` on PATH, `grep` is denied too (OpenCode would try to
//!   download ripgrep);
//! - `mcp.switchyard`: the host tools' MCP server (remote, bearer header, `oauth: false`,
//!   since a static token needs no OAuth discovery); its tools reach the model as
//!   `switchyard_<tool>`.
//!
//! Variables set besides: `OPENCODE_DISABLE_MODELS_FETCH` (no catalog download),
//! `OPENCODE_DISABLE_PROJECT_CONFIG` (a workspace's `opencode.json` or `.opencode/` cannot
//! change the run, nor make OpenCode install into it), `OPENCODE_DISABLE_AUTOCOMPACT`,
//! `OPENCODE_DISABLE_DEFAULT_PLUGINS`, `OPENCODE_DISABLE_CLAUDE_CODE`,
//! `OPENCODE_DISABLE_EXTERNAL_SKILLS`, `OPENCODE_DISABLE_LSP_DOWNLOAD`,
//! `OPENCODE_DISABLE_AUTOUPDATE`, `OPENCODE_DISABLE_SHARE`, `OPENCODE_PURE` (no external
//! plugins), and `OPENCODE_SERVER_PASSWORD` (HTTP Basic auth: the server hands provider keys
//! out through `/config`, so it never runs unsecured). A managed config in
//! `/etc/opencode/` would still apply last; Switchyard cannot keep it out (it warns when one
//! exists).

use std::ffi::OsString;
use std::io;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use switchyard_events::tools::OPENCODE_HOST_SERVER;

use crate::secret::Secret;

pub use crate::isolation::PASSTHROUGH_ENV;
use crate::isolation::{passthrough_env, workspace_and_run_dir};

/// The provider id of the gateway in the config (the gateway's snippet names it so).
pub const PROVIDER: &str = "switchyard";

/// The variable holding the gateway key (referenced as `{env:…}` by the provider).
pub const GATEWAY_KEY_ENV: &str = "SWITCHYARD_API_KEY";

/// The variable holding the host tools' MCP token (referenced by the MCP header).
pub const MCP_TOKEN_ENV: &str = "SWITCHYARD_MCP_TOKEN";

/// The Basic-auth user name of the server.
pub const SERVER_USER: &str = "opencode";

/// The config of a managed OpenCode that applies after everything else (Linux).
pub const MANAGED_CONFIG_DIR: &str = "/etc/opencode";

/// What the config document is built from.
#[derive(Debug, Clone)]
pub struct ConfigInput {
    /// The gateway's provider snippet (its `provider`, `model` and `small_model` members, as
    /// the gateway prints it for a stock OpenCode), with the key read from
    /// [`GATEWAY_KEY_ENV`].
    pub provider: Value,
    /// The host tools' MCP endpoint, if the run has host tools.
    pub mcp_url: Option<String>,
    /// `rg` is on PATH (else `grep` is denied).
    pub ripgrep: bool,
}

/// The config document (see the module docs for each setting).
pub fn config_document(input: &ConfigInput) -> Value {
    let mut permission = json!({"*": "ask", "question": "deny"});
    if !input.ripgrep {
        permission["grep"] = json!("deny");
    }
    let mut config = json!({
        "$schema": "https://opencode.ai/config.json",
        "autoupdate": false,
        "share": "disabled",
        "snapshot": false,
        "lsp": false,
        "formatter": false,
        "enabled_providers": [PROVIDER],
        "agent": {"title": {"disable": true}, "summary": {"disable": true}},
        "compaction": {"auto": false, "prune": false},
        "permission": permission,
    });
    for key in ["provider", "model", "small_model"] {
        if let Some(value) = input.provider.get(key) {
            config[key] = value.clone();
        }
    }
    if let Some(url) = &input.mcp_url {
        config["mcp"] = json!({OPENCODE_HOST_SERVER: {
            "type": "remote",
            "url": url,
            "headers": {"Authorization": format!("Bearer {{env:{MCP_TOKEN_ENV}}}")},
            "oauth": false,
            "enabled": true,
        }});
    }
    config
}

/// What an OpenCode run needs.
#[derive(Debug, Clone)]
pub struct OpenCodeLaunchConfig {
    /// `bin/opencode.exe` of a verified install.
    pub binary: PathBuf,
    /// The workspace the agent works in (must exist).
    pub workdir: PathBuf,
    /// A fresh directory for this run's private state (created if missing).
    pub run_dir: PathBuf,
    /// The config document ([`config_document`]).
    pub config: Value,
    /// The server's Basic-auth password.
    pub password: Secret,
    /// The key the guest presents to the gateway.
    pub gateway_key: Secret,
    /// The host tools' MCP token, when the run has host tools.
    pub mcp_token: Option<Secret>,
    /// Host environment to draw [`PASSTHROUGH_ENV`] from (normally `std::env::vars_os()`).
    pub host_env: Vec<(OsString, OsString)>,
    /// The workspace's `opencode.json[c]` and `.opencode/` apply (`--trust-workspace-config`).
    pub trust_workspace_config: bool,
}

/// What OpenCode reads from its workspace that can start a program or redirect traffic
/// (reported; ignored through `OPENCODE_DISABLE_PROJECT_CONFIG` unless
/// `--trust-workspace-config`).
pub const WORKSPACE_FILES: &[crate::workspace::WorkspaceFile] = {
    use crate::workspace::{Shape, WorkspaceFile};
    const JSON: Shape = Shape::Json {
        nested: &["provider", "mcp", "plugin"],
    };
    &[
        WorkspaceFile {
            path: "opencode.json",
            shape: JSON,
        },
        WorkspaceFile {
            path: "opencode.jsonc",
            shape: JSON,
        },
        WorkspaceFile {
            path: ".opencode",
            shape: Shape::Folder,
        },
    ]
};

/// A prepared launch: hand these to the process manager.
#[derive(Debug, Clone)]
pub struct PreparedServe {
    pub program: PathBuf,
    pub args: Vec<OsString>,
    /// The complete child environment.
    pub env: Vec<(OsString, OsString)>,
    pub cwd: PathBuf,
    pub run_dir: PathBuf,
    /// The config document passed (no secrets in it).
    pub config: Value,
    pub password: Secret,
}

/// Creates the run directory (seeded config directory included) and returns the launch.
pub fn prepare(config: &OpenCodeLaunchConfig) -> io::Result<PreparedServe> {
    let (workdir, run_dir) = workspace_and_run_dir(&config.workdir, &config.run_dir)?;
    let dir = |name: &str| -> io::Result<PathBuf> {
        let path = run_dir.join(name);
        std::fs::create_dir_all(&path)?;
        Ok(path)
    };
    let home = dir("home")?;
    let xdg_config = dir("config")?;
    let data = dir("data")?;
    let state = dir("state")?;
    let cache = dir("cache")?;
    let tmp = dir("tmp")?;
    seed_config_dir(&xdg_config.join("opencode"))?;

    let mut env = passthrough_env(&config.host_env);
    for (key, path) in [
        ("HOME", &home),
        ("XDG_CONFIG_HOME", &xdg_config),
        ("XDG_DATA_HOME", &data),
        ("XDG_STATE_HOME", &state),
        ("XDG_CACHE_HOME", &cache),
        ("TMPDIR", &tmp),
    ] {
        env.push((key.into(), path.as_os_str().to_owned()));
    }
    if !config.trust_workspace_config {
        env.push(("OPENCODE_DISABLE_PROJECT_CONFIG".into(), "1".into()));
    }
    for key in [
        "OPENCODE_DISABLE_MODELS_FETCH",
        "OPENCODE_DISABLE_AUTOCOMPACT",
        "OPENCODE_DISABLE_DEFAULT_PLUGINS",
        "OPENCODE_DISABLE_CLAUDE_CODE",
        "OPENCODE_DISABLE_EXTERNAL_SKILLS",
        "OPENCODE_DISABLE_LSP_DOWNLOAD",
        "OPENCODE_DISABLE_AUTOUPDATE",
        "OPENCODE_DISABLE_SHARE",
        "OPENCODE_PURE",
    ] {
        env.push((key.into(), "1".into()));
    }
    env.push(("TERM".into(), "dumb".into()));
    env.push(("NO_COLOR".into(), "1".into()));
    env.push(("OPENCODE_SERVER_USERNAME".into(), SERVER_USER.into()));
    env.push((
        "OPENCODE_SERVER_PASSWORD".into(),
        config.password.expose().into(),
    ));
    env.push((GATEWAY_KEY_ENV.into(), config.gateway_key.expose().into()));
    if let Some(token) = &config.mcp_token {
        env.push((MCP_TOKEN_ENV.into(), token.expose().into()));
    }
    env.push((
        "OPENCODE_CONFIG_CONTENT".into(),
        config.config.to_string().into(),
    ));
    let args: Vec<OsString> = ["serve", "--hostname", "127.0.0.1", "--port", "0"]
        .into_iter()
        .map(OsString::from)
        .collect();
    Ok(PreparedServe {
        program: config.binary.clone(),
        args,
        env,
        cwd: workdir,
        run_dir,
        config: config.config.clone(),
        password: config.password.clone(),
    })
}

/// Seeds OpenCode's config directory so that its start-up finds `@opencode-ai/plugin`
/// installed and runs no npm install (verified: only loopback connections then).
fn seed_config_dir(dir: &Path) -> io::Result<()> {
    std::fs::create_dir_all(dir.join("node_modules"))?;
    let dependency = format!(
        "{{\"dependencies\":{{\"@opencode-ai/plugin\":\"{}\"}}}}",
        super::VERSION
    );
    std::fs::write(dir.join("package.json"), dependency)?;
    let lock = json!({
        "name": "opencode",
        "lockfileVersion": 3,
        "requires": true,
        "packages": {"": {"dependencies": {"@opencode-ai/plugin": super::VERSION}}},
    });
    std::fs::write(dir.join("package-lock.json"), lock.to_string())
}

#[cfg(test)]
#[path = "launch_tests.rs"]
mod tests;
