//! The launch of one Codex run: a private run directory with its own `CODEX_HOME` (a generated
//! `config.toml` and model catalog), the argv of `codex app-server`, and an environment built
//! from nothing (the host passes only [`crate::isolation::PASSTHROUGH_ENV`]).
//!
//! Every choice and its reason (facts from the reference brief for 0.171.0, §2–§5, §8, §9.5):
//! - `CODEX_HOME`, `HOME` and `TMPDIR` are the run's own: config, sessions, sqlite state and
//!   skills never touch the user's `~/.codex`. `CODEX_HOME` is the run directory's `codex-home`
//!   (Codex refuses to create its helper links under `/tmp`; a run directory there costs only
//!   the shell-side `apply_patch` alias, and [`PreparedCodex::warnings`] says so);
//! - model traffic: provider `switchyard` (`wire_api = "responses"`, Codex posts to
//!   `{base_url}/responses`) at the gateway's `<base>/v1`, its key read from
//!   [`KEY_ENV`] (never argv; sent as `Authorization: Bearer`), no WebSocket attempt;
//! - retries: `request_max_retries = 0` and `stream_max_retries = 0`. The gateway owns retries
//!   (its budget, its records, `Retry-After`); Codex's two loops multiply (a 5xx costs
//!   (request+1)×(stream+1) guest requests, each of which the gateway would retry again).
//!   `features.unbounded_connection_retries = false`: a gateway that is gone fails the turn
//!   after one reconnect instead of retrying forever. `stream_idle_timeout_ms` is longer than
//!   any gateway deadline so the gateway's timeouts decide;
//! - zero outside traffic: `[analytics] enabled = false`, `[features] plugins = false, apps =
//!   false`, `check_for_update_on_startup = false`; `web_search = "disabled"`, `[agents]
//!   enabled = false` and `goals = false` drop tools the gateway cannot serve or Switchyard
//!   does not run (server-side search, sub-agent threads, goal bookkeeping);
//! - `model_catalog_json`: one entry for the run's model (freeform `apply_patch`, which
//!   only exists with catalog metadata; context window [`CONTEXT_WINDOW`]);
//! - `project_doc_max_bytes = 32768` (Codex's own default, stated): a workspace's `AGENTS.md`
//!   is the task's instructions, as `CLAUDE.md` and `GEMINI.md` are for the other agents; it
//!   starts no program and redirects no traffic, and the bound keeps a hostile one from filling
//!   the context;
//! - sandbox `workspace-write` (bundled bubblewrap + seccomp: the workspace writable, the rest
//!   read-only, no network for commands) with approval policy `on-request`: a command that asks
//!   to run outside the sandbox (`require_escalated`), a patch outside the workspace and an MCP
//!   tool call become approval requests the host's permission policy answers;
//! - Switchyard's MCP server is `[mcp_servers.switchyard]` (Streamable HTTP) with its token in
//!   [`MCP_TOKEN_ENV`] (`bearer_token_env_var`; Codex refuses inline tokens). Its tools keep
//!   Codex's default approval (ask): their calls are decided by the same policy as every other
//!   call (the run's own host tools are allowed by default) and the binding still admits only
//!   delivered calls;
//! - hostile workspace: `<workspace>/.codex/` (config, hooks, skills) is the project layer,
//!   which Codex ignores unless the project is trusted. The app-server records a project as
//!   trusted on its own (in `CODEX_HOME/config.toml`) when a thread runs `workspace-write`
//!   there and the config says nothing, and then starts the MCP servers of its
//!   `.codex/config.toml` (checked with 0.171.0); so the config always says: `trust_level =
//!   "untrusted"` for the workspace and its repository root, `"trusted"` only with
//!   `--trust-workspace-config` (even then Codex refuses `model_provider(s)` from it). The system layer `/etc/codex/*.toml` still
//!   applies: every key above is set in the run's `config.toml`, which beats it key by key,
//!   and a system file present is reported in [`PreparedCodex::warnings`];
//! - the native binary runs directly (no Node launcher): one process, signals reach Codex.

use std::ffi::OsString;
use std::io;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::isolation::{passthrough_env, workspace_and_run_dir};
use crate::secret::Secret;

/// The variable holding the gateway key (the provider's `env_key`).
pub const KEY_ENV: &str = "SWITCHYARD_GATEWAY_KEY";
/// The variable holding the MCP server's bearer token.
pub const MCP_TOKEN_ENV: &str = "SWITCHYARD_MCP_TOKEN";
/// The run directory's `CODEX_HOME`.
pub const CODEX_HOME_DIR: &str = "codex-home";
/// What `--resume` keeps of a run (relative to the run directory): the thread rollouts below
/// `CODEX_HOME/sessions`. Not the state databases: they name the rollouts by absolute paths
/// in the earlier run's directory, which is gone; without them Codex finds a thread by its
/// rollout file.
pub const SESSION_STATE: &str = "codex-home/sessions";
/// The provider id in the generated config.
pub const PROVIDER: &str = "switchyard";
/// The MCP server name of the host tools (Codex names their tools `mcp__switchyard__<t>`).
pub const MCP_SERVER: &str = "switchyard";
/// The sandbox of every turn.
pub const SANDBOX: &str = "workspace-write";
/// The approval policy of every turn.
pub const APPROVAL_POLICY: &str = "on-request";
/// The context window the catalog gives the run's model (Codex reports 95 % of it).
pub const CONTEXT_WINDOW: u64 = switchyard_protocol::codex_catalog::DEFAULT_CONTEXT_WINDOW;
/// `AGENTS.md` bytes Codex reads.
pub const PROJECT_DOC_MAX_BYTES: u64 = 32_768;
/// Longer than any gateway deadline: the gateway's timeouts decide.
pub const STREAM_IDLE_TIMEOUT_MS: u64 = 600_000;
/// The system configuration files Codex reads whatever `CODEX_HOME` says.
pub const SYSTEM_FILES: &[&str] = &[
    "/etc/codex/config.toml",
    "/etc/codex/requirements.toml",
    "/etc/codex/managed_config.toml",
];

/// What Codex reads from its workspace that can start a program or redirect traffic
/// (reported; ignored unless `--trust-workspace-config`).
pub const WORKSPACE_FILES: &[crate::workspace::WorkspaceFile] =
    &[crate::workspace::WorkspaceFile {
        path: ".codex",
        shape: crate::workspace::Shape::Folder,
    }];

/// Everything a launch needs.
#[derive(Debug, Clone)]
pub struct CodexLaunchConfig {
    /// The sealed install's native executable.
    pub binary: PathBuf,
    /// The workspace (must exist).
    pub workdir: PathBuf,
    /// A fresh directory for this run's private state (created if missing).
    pub run_dir: PathBuf,
    /// The gateway's base URL (its Responses ingress is `<base>/v1/responses`).
    pub gateway_url: String,
    /// The key the guest presents to the gateway.
    pub gateway_key: Secret,
    /// The model name the guest asks for (the gateway routes it).
    pub model: String,
    /// Switchyard's MCP server: its URL and bearer token.
    pub mcp: Option<(String, Secret)>,
    /// Host environment to draw the pass-through variables from.
    pub host_env: Vec<(OsString, OsString)>,
    /// The workspace's `.codex/` applies (the project is trusted).
    pub trust_workspace_config: bool,
}

/// A prepared launch.
#[derive(Debug, Clone)]
pub struct PreparedCodex {
    pub program: PathBuf,
    pub args: Vec<OsString>,
    pub env: Vec<(OsString, OsString)>,
    pub cwd: PathBuf,
    pub run_dir: PathBuf,
    /// The run's `CODEX_HOME`.
    pub codex_home: PathBuf,
    pub model: String,
    /// The generated `config.toml` (it holds no secret), for the records.
    pub settings: Value,
    /// What the launch could not fully isolate, for the run's events.
    pub warnings: Vec<String>,
    /// The [`SANDBOX_MOUNT_POINTS`] the workspace did not have at launch: removed after the run
    /// when the sandbox left them behind empty.
    pub mount_points: Vec<PathBuf>,
}

/// What the sandbox creates in the workspace as empty mount points of the paths it keeps
/// read-only, when they are missing (seen with 0.171.0); a command interrupted in the sandbox
/// leaves them behind (an empty `.git` would even hide an enclosing repository).
pub const SANDBOX_MOUNT_POINTS: &[&str] = &[".agents", ".aws", ".codex", ".git"];

/// Removes the `mount_points` that are empty folders (never anything with content).
pub fn remove_empty_mount_points(mount_points: &[PathBuf]) {
    for path in mount_points {
        let empty = std::fs::symlink_metadata(path).is_ok_and(|m| m.is_dir())
            && std::fs::read_dir(path).is_ok_and(|mut entries| entries.next().is_none());
        if empty {
            let _ = std::fs::remove_dir(path);
        }
    }
}

/// A TOML basic string (JSON's escapes are TOML's).
fn toml_str(value: &str) -> String {
    Value::String(value.to_owned()).to_string()
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

/// The model catalog: one entry for `model` (see `switchyard_protocol::codex_catalog`).
pub fn catalog(model: &str) -> Value {
    switchyard_protocol::codex_catalog::model_catalog(model, CONTEXT_WINDOW)
}

/// The run's `config.toml`.
pub fn config_toml(config: &CodexLaunchConfig, workdir: &Path, catalog_file: &Path) -> String {
    let base_url = format!("{}/v1", config.gateway_url.trim_end_matches('/'));
    let mut toml = format!(
        "# Generated by Switchyard for one run; see switchyard_backend::codex::launch.\n\
         model = {model}\n\
         model_provider = {PROVIDER:?}\n\
         model_catalog_json = {catalog}\n\
         approval_policy = {APPROVAL_POLICY:?}\n\
         sandbox_mode = {SANDBOX:?}\n\
         check_for_update_on_startup = false\n\
         web_search = \"disabled\"\n\
         project_doc_max_bytes = {PROJECT_DOC_MAX_BYTES}\n\
         \n\
         [analytics]\n\
         enabled = false\n\
         \n\
         [agents]\n\
         enabled = false\n\
         \n\
         [features]\n\
         plugins = false\n\
         apps = false\n\
         goals = false\n\
         unbounded_connection_retries = false\n\
         \n\
         [model_providers.{PROVIDER}]\n\
         name = \"Switchyard gateway\"\n\
         base_url = {base_url}\n\
         env_key = {KEY_ENV:?}\n\
         wire_api = \"responses\"\n\
         requires_openai_auth = false\n\
         supports_websockets = false\n\
         request_max_retries = 0\n\
         stream_max_retries = 0\n\
         stream_idle_timeout_ms = {STREAM_IDLE_TIMEOUT_MS}\n",
        model = toml_str(&config.model),
        catalog = toml_str(&catalog_file.to_string_lossy()),
        base_url = toml_str(&base_url),
    );
    if let Some((url, _)) = &config.mcp {
        toml.push_str(&format!(
            "\n[mcp_servers.{MCP_SERVER}]\nurl = {url}\nbearer_token_env_var = {MCP_TOKEN_ENV:?}\n",
            url = toml_str(url),
        ));
    }
    // Stated either way: without an entry, a thread that runs `workspace-write` makes the
    // app-server record the project as trusted and load its `.codex/config.toml`.
    let (level, projects) = if config.trust_workspace_config {
        ("trusted", vec![workdir.to_path_buf()])
    } else {
        let mut projects = vec![workdir.to_path_buf()];
        projects.extend(git_root(workdir).filter(|root| root != workdir));
        ("untrusted", projects)
    };
    for project in projects {
        toml.push_str(&format!(
            "\n[projects.{path}]\ntrust_level = {level:?}\n",
            path = toml_str(&project.to_string_lossy()),
        ));
    }
    toml
}

/// The repository root above `dir` (the nearest ancestor with a `.git`), which Codex may take
/// as the project instead of `dir`.
fn git_root(dir: &Path) -> Option<PathBuf> {
    dir.ancestors()
        .find(|d| d.join(".git").exists())
        .map(Path::to_path_buf)
}

/// Creates the run directory and returns the launch.
pub fn prepare(config: &CodexLaunchConfig) -> io::Result<PreparedCodex> {
    let (workdir, run_dir) = workspace_and_run_dir(&config.workdir, &config.run_dir)?;
    let dir = |name: &str| -> io::Result<PathBuf> {
        let path = run_dir.join(name);
        std::fs::create_dir_all(&path)?;
        Ok(path)
    };
    let home = dir("home")?;
    let codex_home = dir(CODEX_HOME_DIR)?;
    let tmp = dir("tmp")?;
    let catalog_file = run_dir.join("catalog.json");
    private_file(&catalog_file, &catalog(&config.model).to_string())?;
    let toml = config_toml(config, &workdir, &catalog_file);
    private_file(&codex_home.join("config.toml"), &toml)?;

    let mut env = passthrough_env(&config.host_env);
    for (key, path) in [
        ("HOME", &home),
        ("CODEX_HOME", &codex_home),
        ("TMPDIR", &tmp),
    ] {
        env.push((key.into(), path.as_os_str().to_owned()));
    }
    env.push((KEY_ENV.into(), config.gateway_key.expose().into()));
    if let Some((_, token)) = &config.mcp {
        env.push((MCP_TOKEN_ENV.into(), token.expose().into()));
    }
    env.push(("TERM".into(), "dumb".into()));
    env.push(("NO_COLOR".into(), "1".into()));

    let mut warnings = Vec::new();
    if codex_home.starts_with("/tmp") {
        warnings.push(format!(
            "CODEX_HOME {} is under /tmp: Codex creates no apply_patch helper there (keep \
             records outside /tmp)",
            codex_home.display()
        ));
    }
    for file in SYSTEM_FILES {
        if Path::new(file).exists() {
            warnings.push(format!(
                "{file} exists: Codex applies it under the run's own config.toml (every key \
                 Switchyard sets wins; anything else it adds, such as MCP servers, applies)"
            ));
        }
    }
    Ok(PreparedCodex {
        program: config.binary.clone(),
        args: vec!["app-server".into()],
        env,
        run_dir,
        codex_home,
        model: config.model.clone(),
        settings: json!({"config.toml": toml}),
        warnings,
        mount_points: SANDBOX_MOUNT_POINTS
            .iter()
            .map(|name| workdir.join(name))
            .filter(|path| std::fs::symlink_metadata(path).is_err())
            .collect(),
        cwd: workdir,
    })
}

#[cfg(test)]
#[path = "launch_tests.rs"]
mod tests;
