//! `switchyard run`: one task, one guest, one typed outcome.
//!
//! Flow: resolve settings (TOML file, then flags) → verify the sealed guest install → start the
//! gateway in-process (or use `--guest-base-url` to point the guest at a GenerateContent
//! endpoint directly) → prepare the isolated launch → drive the guest, printing canonical
//! events → exit with a code per outcome class (see [`exit_code_for`]).

use super::{EXIT_CONFIG, which};
use anyhow::{Context, Result, bail};
use clap::ValueEnum;
use serde::Deserialize;
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use switchyard_backend::driver::{Driver, RunItem, RunLimits};
use switchyard_backend::gemini::acp::{AcpEvents, AcpPlan, acp};
use switchyard_backend::gemini::launch::{
    GUEST_MAX_ATTEMPTS, GeminiLaunchConfig, Protocol, Secret, prepare,
};
use switchyard_backend::gemini::run::{HeadlessMapping, headless};
use switchyard_backend::gemini::settings::ApprovalMode;
use switchyard_backend::opencode::run::OpenCodeMapping;
use switchyard_backend::process::Line;
use switchyard_binding::{
    BindingLimits, FinishSlot, FinishTool, HostBinding, McpServer, Policy, ToolRegistry, ToolsFile,
};
use switchyard_events::event::RunStarted;
use switchyard_events::{ErrorKind, Event, HostConclusion, OutcomeStatus, RunOutcome};
use switchyard_gateway::config::{RetryConfig, TimeoutConfig};
use switchyard_gateway::{Gateway, GatewayConfig, GatewayDeps};
use switchyard_records::model::{
    EventRecord, RawLineRecord, RawStream, RecordOp, RunRecord, RunState, RunSummary,
};
use switchyard_records::{Recorder, Redactor, ResumePoint};
use switchyard_translate::ProviderOptions;

/// Exit code: the run succeeded.
pub const EXIT_OK: u8 = 0;
/// The model's output was unusable, or the guest failed on its own (tool fatal, bad flags).
pub const EXIT_GUEST_FAILED: u8 = 3;
/// The model API / upstream failed.
pub const EXIT_UPSTREAM: u8 = 4;
/// The turn limit was reached.
pub const EXIT_TURN_LIMIT: u8 = 5;
/// The guest refused its setup (auth, settings, input, trust, sandbox).
pub const EXIT_GUEST_SETUP: u8 = 6;
/// Timed out (overall timeout or inactivity watchdog).
pub const EXIT_TIMEOUT: u8 = 7;
/// Cancelled by the host (Ctrl-C / SIGTERM to Switchyard).
pub const EXIT_CANCELLED: u8 = 8;
/// The guest ended without its final event, crashed, or exited with an undocumented code.
pub const EXIT_INCOMPLETE: u8 = 9;
/// The guest install is missing or does not match its sealed manifest.
pub const EXIT_INSTALL: u8 = 10;
/// The run had a finish schema and ended without a valid finish result.
pub const EXIT_NO_RESULT: u8 = 11;

/// Which guest to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Agent {
    GeminiCli,
    Opencode,
}

impl Agent {
    /// The name events and records use.
    pub fn name(self) -> &'static str {
        super::agents::spec(self).name
    }

    /// The pinned npm package and version.
    pub fn pin(self) -> (&'static str, &'static str) {
        super::agents::spec(self).pin()
    }
}

/// How events are printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum OutputMode {
    /// A readable live view: streamed text, tool lines, a final summary.
    #[default]
    Text,
    /// One canonical event (JSON) per line on stdout.
    Jsonl,
}

/// Approval mode flag values (mirrors the guest's).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ApprovalArg {
    Default,
    AutoEdit,
    Yolo,
    Plan,
}

impl From<ApprovalArg> for ApprovalMode {
    fn from(a: ApprovalArg) -> Self {
        match a {
            ApprovalArg::Default => ApprovalMode::Default,
            ApprovalArg::AutoEdit => ApprovalMode::AutoEdit,
            ApprovalArg::Yolo => ApprovalMode::Yolo,
            ApprovalArg::Plan => ApprovalMode::Plan,
        }
    }
}

/// `switchyard run` flags. Every flag can also be set in the `--config` TOML file (same names
/// with `_`); flags win.
#[derive(Debug, Clone, Default, clap::Args, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunArgs {
    /// TOML file with the same settings as the flags.
    #[arg(long)]
    #[serde(skip)]
    pub config: Option<PathBuf>,
    /// Check the configuration offline (files, URL, install seal, key variable) and exit.
    #[arg(long)]
    #[serde(skip)]
    pub validate_config: bool,
    /// Guest agent CLI.
    #[arg(long, value_enum)]
    pub agent: Option<Agent>,
    /// Workspace directory the agent works in.
    #[arg(long)]
    pub workdir: Option<PathBuf>,
    /// The task. Repeat it to send several prompts in one session (`--protocol acp`); in the
    /// config file a string or a list.
    #[arg(long)]
    #[serde(default, deserialize_with = "one_or_many")]
    pub prompt: Vec<String>,
    /// Read more prompts from stdin, one JSON line each (`"text"` or `{"prompt": "text"}`), sent
    /// in turn after the `--prompt`s until stdin ends (`--protocol acp`).
    #[arg(long)]
    #[serde(skip)]
    pub prompts_stdin: bool,
    /// How Switchyard drives the guest: `headless` (one prompt, stream-json) or `acp` (a session:
    /// several prompts, unattended permissions, cancel, resume).
    #[arg(long, value_enum)]
    pub protocol: Option<ProtocolArg>,
    /// The unattended permission policy (TOML) for `--protocol acp`.
    #[arg(long)]
    pub permissions: Option<PathBuf>,
    /// Continue the guest session of this recorded run (`--protocol acp`, same `--records` and
    /// `--workdir`): the run id or a unique prefix of it.
    #[arg(long)]
    #[serde(skip)]
    pub resume: Option<String>,
    /// OpenAI-compatible Chat Completions base URL (e.g. http://127.0.0.1:8000/v1).
    #[arg(long)]
    pub upstream_url: Option<String>,
    /// Model name at the upstream.
    #[arg(long)]
    pub upstream_model: Option<String>,
    /// Name of the environment variable holding the upstream API key (never pass keys in argv).
    #[arg(long)]
    pub upstream_key_env: Option<String>,
    /// Send each tool-call turn's reasoning back upstream as `reasoning_content` (thinking models
    /// that require it, e.g. DeepSeek's); it travels through the guest in the call's
    /// `thoughtSignature`. Overrides `echo_reasoning` in the config's `[translation]`.
    #[arg(long)]
    pub echo_reasoning: Option<bool>,
    /// What the upstream accepts and wants, as the gateway's `[translation]` section (config
    /// file only).
    #[arg(skip)]
    pub translation: Option<ProviderOptions>,
    /// The gateway's upstream timeouts, as its `[timeouts]` section (config file only).
    #[arg(skip)]
    pub timeouts: Option<TimeoutConfig>,
    /// The gateway's retry budget, as its `[retries]` section (config file only).
    #[arg(skip)]
    pub retries: Option<RetryConfig>,
    /// Directory of the record store (runs, events, model exchanges).
    #[arg(long)]
    pub records: Option<PathBuf>,
    /// Output format.
    #[arg(long, value_enum)]
    pub output: Option<OutputMode>,
    /// Maximum model turns (the guest's maxSessionTurns).
    #[arg(long)]
    pub max_turns: Option<u32>,
    /// Overall timeout in seconds.
    #[arg(long)]
    pub timeout: Option<u64>,
    /// Stop the guest when it prints nothing for this many seconds.
    #[arg(long)]
    pub inactivity_timeout: Option<u64>,
    /// A sealed Gemini CLI install (its prefix, or a file inside it).
    #[arg(long)]
    pub gemini_binary: Option<PathBuf>,
    /// A sealed OpenCode install (its prefix, or a file inside it).
    #[arg(long)]
    pub opencode_binary: Option<PathBuf>,
    /// The guest's approval mode (default: the guest's safest headless mode).
    #[arg(long, value_enum)]
    pub approval_mode: Option<ApprovalArg>,
    /// Keep the run's private directory (settings, telemetry, temp files) for inspection: under
    /// `DIR/runs/RUN_ID` with `--records DIR`, else in the system temp directory. Its files are the
    /// guest's own and are not redacted.
    #[arg(long)]
    pub keep_run_dir: Option<bool>,
    /// Point the guest at this GenerateContent endpoint directly, bypassing the gateway
    /// (testing and fixture capture only).
    #[arg(long, hide = true)]
    pub guest_base_url: Option<String>,
    /// Host tools: a TOML file of `[[tool]]` entries (name, description, input_schema, and a
    /// `command` or `url` handler), offered to the agent over authenticated MCP.
    #[arg(long)]
    pub tools: Option<PathBuf>,
    /// JSON Schema of the run's result: adds a `finish` host tool whose valid call is the
    /// run's structured result (and required for success).
    #[arg(long)]
    pub finish_schema: Option<PathBuf>,
    /// How long a host-tool callback waits for the guest to send the calls before it in its
    /// model batch, in milliseconds; a call not sent by then is abandoned (recorded, never
    /// run) and the later calls go ahead (default 10000).
    #[arg(long)]
    pub host_batch_wait_ms: Option<u64>,
}

/// `--protocol` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProtocolArg {
    Headless,
    Acp,
}

/// A string or a list of strings (the config file's `prompt`).
fn one_or_many<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum OneOrMany {
        One(String),
        Many(Vec<String>),
    }
    Ok(match OneOrMany::deserialize(d)? {
        OneOrMany::One(s) => vec![s],
        OneOrMany::Many(v) => v,
    })
}

/// Fully resolved settings of one run.
#[derive(Debug)]
pub struct ResolvedRun {
    pub agent: Agent,
    pub workdir: PathBuf,
    /// One for headless; any number for ACP.
    pub prompts: Vec<String>,
    /// `--prompts-stdin`: more prompts arrive on stdin.
    pub prompts_stdin: bool,
    pub protocol: Protocol,
    /// ACP's permission policy (the safe defaults when no file was given).
    pub permissions: Policy,
    /// `--resume`: the recorded session to continue, and where its saved state is.
    pub resume: Option<(ResumePoint, PathBuf)>,
    pub target: Target,
    pub records: Option<PathBuf>,
    pub output: OutputMode,
    pub max_turns: Option<u32>,
    pub timeout: Option<Duration>,
    pub inactivity: Option<Duration>,
    /// The sealed install of the run's agent.
    pub guest_prefix: PathBuf,
    pub approval_mode: ApprovalMode,
    pub keep_run_dir: bool,
    /// The host tools of `--tools` and `--finish-schema`, loaded and checked once.
    pub host_tools: Option<HostTools>,
    /// How the binding waits for the calls of a batch.
    pub binding_limits: BindingLimits,
}

/// The host tools of a run: the registry, and where a finish result lands when the run has a
/// finish schema.
#[derive(Debug)]
pub struct HostTools {
    pub registry: ToolRegistry,
    pub finish: Option<FinishSlot>,
}

/// Loads `--tools` and `--finish-schema`; `None` when the run has neither.
fn host_tools(tools: Option<&Path>, finish_schema: Option<&Path>) -> Result<Option<HostTools>> {
    if tools.is_none() && finish_schema.is_none() {
        return Ok(None);
    }
    let mut registry = match tools {
        Some(path) => ToolsFile::load(path)?.registry,
        None => ToolRegistry::new(),
    };
    let slot = match finish_schema {
        Some(path) => {
            let (finish, slot) = FinishTool::from_file(path)?;
            registry
                .add(std::sync::Arc::new(finish))
                .with_context(|| format!("--finish-schema {}", path.display()))?;
            Some(slot)
        }
        None => None,
    };
    Ok(Some(HostTools {
        registry,
        finish: slot,
    }))
}

/// Where the guest's model traffic goes.
#[derive(Debug, Clone)]
pub enum Target {
    /// Through the embedded gateway to an OpenAI-compatible upstream.
    Gateway {
        upstream_url: String,
        upstream_model: String,
        key_env: String,
        /// The gateway's `[translation]` section.
        translation: ProviderOptions,
        /// Its `[timeouts]` and `[retries]` sections.
        timeouts: TimeoutConfig,
        retries: RetryConfig,
    },
    /// Straight to a GenerateContent endpoint (tests, capture).
    Direct { base_url: String, model: String },
}

/// Default name of the variable holding the upstream key.
pub const DEFAULT_KEY_ENV: &str = "SWITCHYARD_UPSTREAM_KEY";

impl RunArgs {
    /// Flags over the config file.
    fn merged(self) -> Result<RunArgs> {
        let Some(path) = self.config.clone() else {
            return Ok(self);
        };
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("reading {}", path.display()))?;
        let file: RunArgs =
            toml::from_str(&text).with_context(|| format!("parsing {}", path.display()))?;
        let prompt = if self.prompt.is_empty() {
            file.prompt
        } else {
            self.prompt
        };
        macro_rules! pick { ($($f:ident),*) => { RunArgs { $($f: self.$f.or(file.$f),)* prompt, config: self.config, validate_config: self.validate_config, resume: self.resume, prompts_stdin: self.prompts_stdin } } }
        Ok(pick!(
            agent,
            workdir,
            protocol,
            permissions,
            upstream_url,
            upstream_model,
            upstream_key_env,
            echo_reasoning,
            translation,
            timeouts,
            retries,
            records,
            output,
            max_turns,
            timeout,
            inactivity_timeout,
            gemini_binary,
            opencode_binary,
            approval_mode,
            keep_run_dir,
            guest_base_url,
            tools,
            finish_schema,
            host_batch_wait_ms
        ))
    }

    /// Checks and resolves everything that can be checked without running the guest.
    pub fn resolve(self) -> Result<ResolvedRun> {
        let a = self.merged()?;
        let agent = a.agent.unwrap_or(Agent::GeminiCli);
        let spec = super::agents::spec(agent);
        spec.check_flags(&a)?;
        let guest_prefix = spec.install(&a)?;
        let workdir = a.workdir.context("--workdir is required")?;
        if !workdir.is_dir() {
            bail!("--workdir {} is not a directory", workdir.display());
        }
        let prompts = a.prompt;
        if prompts.is_empty() && !a.prompts_stdin {
            bail!("--prompt is required");
        }
        if prompts.iter().any(|p| p.trim().is_empty()) {
            bail!("--prompt is empty");
        }
        let protocol = match a.protocol {
            Some(ProtocolArg::Acp) => Protocol::Acp,
            Some(ProtocolArg::Headless) | None if !spec.caps.protocols => {
                // An agent driven one way only runs a session, like ACP: several prompts, a
                // policy.
                Protocol::Acp
            }
            Some(ProtocolArg::Headless) | None => Protocol::Headless,
        };
        if protocol == Protocol::Headless && prompts.len() > 1 {
            bail!("several prompts need --protocol acp (headless runs one prompt per process)");
        }
        if protocol == Protocol::Headless && a.prompts_stdin {
            bail!("--prompts-stdin needs --protocol acp");
        }
        if protocol == Protocol::Headless && a.permissions.is_some() {
            bail!("--permissions needs --protocol acp (headless has no permission channel)");
        }
        let permissions = match &a.permissions {
            Some(path) => Policy::load(path)?,
            None => Policy::default(),
        };
        let resume = match &a.resume {
            None => None,
            Some(run) => Some(resume_point(run, protocol, a.records.as_deref(), &workdir)?),
        };
        let model = a.upstream_model.context("--upstream-model is required")?;
        // Host tools need the gateway: it delivers their calls with their identities.
        if (a.tools.is_some() || a.finish_schema.is_some()) && a.guest_base_url.is_some() {
            bail!("--tools and --finish-schema need the gateway (not --guest-base-url)");
        }
        let host_tools = host_tools(a.tools.as_deref(), a.finish_schema.as_deref())?;
        let target = match a.guest_base_url {
            Some(base_url) => {
                check_loopback_url(&base_url)?;
                Target::Direct { base_url, model }
            }
            None => {
                let upstream_url = a.upstream_url.context("--upstream-url is required")?;
                check_http_url(&upstream_url)?;
                let key_env = a
                    .upstream_key_env
                    .unwrap_or_else(|| DEFAULT_KEY_ENV.to_owned());
                if key_env.is_empty()
                    || !key_env
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || c == '_')
                {
                    bail!("--upstream-key-env must name an environment variable, got {key_env:?}");
                }
                let mut translation = a.translation.unwrap_or_default();
                if let Some(echo) = a.echo_reasoning {
                    translation.echo_reasoning = echo;
                }
                Target::Gateway {
                    upstream_url,
                    upstream_model: model,
                    key_env,
                    translation,
                    timeouts: a.timeouts.unwrap_or_default(),
                    retries: a.retries.unwrap_or_default(),
                }
            }
        };
        // The guest runs in the workspace: every path handed to it must be absolute.
        let guest_prefix =
            std::path::absolute(&guest_prefix).context("resolving the install path")?;
        Ok(ResolvedRun {
            agent,
            workdir,
            prompts,
            prompts_stdin: a.prompts_stdin,
            protocol,
            permissions,
            resume,
            target,
            records: a.records,
            output: a.output.unwrap_or_default(),
            max_turns: a.max_turns,
            timeout: a.timeout.map(Duration::from_secs),
            inactivity: a.inactivity_timeout.map(Duration::from_secs),
            guest_prefix,
            approval_mode: a.approval_mode.map(Into::into).unwrap_or_default(),
            keep_run_dir: a.keep_run_dir.unwrap_or(false),
            host_tools,
            binding_limits: BindingLimits {
                batch_wait: a.host_batch_wait_ms.map_or(
                    switchyard_binding::DEFAULT_BATCH_WAIT,
                    Duration::from_millis,
                ),
                ..BindingLimits::default()
            },
        })
    }
}

/// The session `--resume RUN` continues: the run's resume point in the record store, checked
/// against this run's protocol and workspace.
fn resume_point(
    run: &str,
    protocol: Protocol,
    records: Option<&Path>,
    workdir: &Path,
) -> Result<(ResumePoint, PathBuf)> {
    use switchyard_records::{RecordStore, SqliteStore};
    if protocol != Protocol::Acp {
        bail!("--resume needs --protocol acp");
    }
    let records = records.context("--resume needs --records (where the run was recorded)")?;
    let store = SqliteStore::open_existing(switchyard_records::store_path(records))
        .with_context(|| format!("opening the records in {}", records.display()))?;
    let record = store.resolve_run(run)?;
    let point = record.resume.with_context(|| {
        format!(
            "run {} has no session to resume (not an ACP run, or no prompt of it was answered)",
            record.id
        )
    })?;
    let here = std::fs::canonicalize(workdir)?;
    if Path::new(&point.workdir) != here {
        bail!(
            "run {} worked in {}; --resume needs the same --workdir",
            record.id,
            point.workdir
        );
    }
    let state = records.join(&point.state_dir);
    Ok((point, state))
}

fn check_http_url(url: &str) -> Result<()> {
    let rest = url
        .strip_prefix("http://")
        .or_else(|| url.strip_prefix("https://"))
        .with_context(|| format!("{url:?} is not an http(s) URL"))?;
    if rest.is_empty() || rest.starts_with('/') {
        bail!("{url:?} has no host");
    }
    Ok(())
}

fn check_loopback_url(url: &str) -> Result<()> {
    check_http_url(url)?;
    // authority = everything up to the first '/'; host = authority without its port.
    let rest = url
        .trim_start_matches("http://")
        .trim_start_matches("https://");
    let authority = rest.split('/').next().unwrap_or_default();
    let host = match authority.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or_default(),
        None => authority
            .rsplit_once(':')
            .map_or(authority, |(host, _port)| host),
    };
    let loopback = host == "localhost"
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback());
    if !loopback {
        bail!("{url:?} is not a loopback address");
    }
    Ok(())
}

/// Accepts a sealed prefix or any path inside one (e.g. `.../bundle/gemini.js`) and returns the
/// prefix: the nearest ancestor holding `switchyard-manifest.json`.
pub fn find_sealed_prefix(path: &Path) -> Result<PathBuf> {
    let start = std::fs::canonicalize(path)
        .with_context(|| format!("--gemini-binary {}", path.display()))?;
    start
        .ancestors()
        .find(|p| p.join(switchyard_backend::install::MANIFEST_FILE).is_file())
        .map(Path::to_path_buf)
        .with_context(|| {
            format!(
                "{} is not inside a sealed install (no switchyard-manifest.json found); \
            create one with `switchyard install gemini-cli --prefix DIR`",
                path.display()
            )
        })
}

/// Maps an outcome to the process exit code (documented in the README).
pub fn exit_code_for(outcome: &RunOutcome) -> u8 {
    match outcome.status {
        OutcomeStatus::Succeeded => EXIT_OK,
        OutcomeStatus::Cancelled => EXIT_CANCELLED,
        OutcomeStatus::TimedOut => EXIT_TIMEOUT,
        OutcomeStatus::Incomplete => EXIT_INCOMPLETE,
        OutcomeStatus::Failed => match outcome.error.as_ref().map(|e| &e.kind) {
            Some(ErrorKind::Api { .. }) => EXIT_UPSTREAM,
            Some(ErrorKind::TurnLimit) => EXIT_TURN_LIMIT,
            Some(
                ErrorKind::Auth
                | ErrorKind::Config
                | ErrorKind::Input
                | ErrorKind::UntrustedWorkspace
                | ErrorKind::Sandbox
                | ErrorKind::Resume,
            ) => EXIT_GUEST_SETUP,
            Some(
                ErrorKind::Crashed { .. }
                | ErrorKind::MissingResult { .. }
                | ErrorKind::UnexpectedExit { .. },
            ) => EXIT_INCOMPLETE,
            Some(ErrorKind::Timeout | ErrorKind::Inactivity) => EXIT_TIMEOUT,
            Some(ErrorKind::Cancelled) => EXIT_CANCELLED,
            Some(ErrorKind::NoFinish) => EXIT_NO_RESULT,
            Some(ErrorKind::ModelOutput | ErrorKind::FatalTool | ErrorKind::GuestFailure)
            | None => EXIT_GUEST_FAILED,
        },
    }
}

/// A fresh random token (hex of two v4 UUIDs: 244 random bits).
pub fn random_token() -> String {
    format!(
        "{}{}",
        uuid::Uuid::new_v4().simple(),
        uuid::Uuid::new_v4().simple()
    )
}

/// Resolves `args` and verifies the sealed guest install: the settings and the guest's entry
/// point, or the exit code after the reason was printed.
pub fn checked(args: RunArgs) -> std::result::Result<(ResolvedRun, PathBuf), u8> {
    let resolved = match args.resolve() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("switchyard: invalid configuration: {e:#}");
            return Err(EXIT_CONFIG);
        }
    };
    let (package, version) = resolved.agent.pin();
    let install =
        match switchyard_backend::install::verify(&resolved.guest_prefix, package, version) {
            Ok(v) => v,
            Err(e) => {
                eprintln!(
                    "switchyard: refusing the {} install at {}: {e}",
                    resolved.agent.name(),
                    resolved.guest_prefix.display()
                );
                return Err(EXIT_INSTALL);
            }
        };
    if let Target::Gateway { key_env, .. } = &resolved.target
        && std::env::var_os(key_env).is_none()
    {
        eprintln!(
            "switchyard: note: {key_env} is not set; the upstream will be called without a key"
        );
    }
    Ok((resolved, install.entry))
}

/// Entry point.
pub async fn run(args: RunArgs) -> Result<u8> {
    let validate_only = args.validate_config;
    let (resolved, entry) = match checked(args) {
        Ok(checked) => checked,
        Err(code) => return Ok(code),
    };
    if validate_only {
        eprintln!(
            "switchyard: configuration is valid (guest {} verified)",
            entry.display()
        );
        return Ok(EXIT_OK);
    }
    let executed = execute(resolved, entry).await?;
    Ok(exit_code_for(&executed.outcome))
}

/// A run that ended.
pub struct Executed {
    pub run_id: uuid::Uuid,
    pub outcome: RunOutcome,
}

/// Runs the guest of `resolved` to its end.
pub async fn execute(mut resolved: ResolvedRun, entry: PathBuf) -> Result<Executed> {
    let run_id = uuid::Uuid::now_v7();
    let run_dir = match &resolved.records {
        Some(records) => records.join("runs").join(run_id.to_string()),
        None => std::env::temp_dir()
            .join("switchyard-runs")
            .join(run_id.to_string()),
    };
    let guest_token = random_token();
    let upstream_key = match &resolved.target {
        Target::Gateway { key_env, .. } => std::env::var(key_env).ok().filter(|k| !k.is_empty()),
        Target::Direct { .. } => None,
    };
    // One record sink for the run, its events and the gateway's exchanges; secrets redacted.
    let recorder = match &resolved.records {
        Some(dir) => {
            let redactor = Redactor::new(upstream_key.iter().cloned().chain([guest_token.clone()]));
            Recorder::open_dir(dir, redactor)
                .with_context(|| format!("opening records in {}", dir.display()))?
        }
        None => Recorder::disabled(),
    };
    // Host tools: the binding the gateway feeds, served to the guest over MCP. A run through
    // the gateway has a binding even without host tools: its delivered-call table names each
    // call by the model's own id in the events, and permission requests are checked against it.
    let host = match resolved.host_tools.take() {
        Some(tools) => Some(tools),
        None if matches!(resolved.target, Target::Gateway { .. }) => Some(HostTools {
            registry: ToolRegistry::new(),
            finish: None,
        }),
        None => None,
    };
    let host = match host {
        Some(HostTools { registry, finish }) => {
            let serve = registry.tools().next().is_some();
            let prefix = super::agents::spec(resolved.agent).host_tool_prefix;
            let (binding, events) = HostBinding::new(registry, prefix, resolved.binding_limits);
            let token = random_token();
            recorder.add_secret(token.clone());
            let server = match serve {
                true => Some(
                    McpServer::start(binding.clone(), &token)
                        .await
                        .context("starting the host tools' MCP server")?,
                ),
                false => None,
            };
            Some(HostSide {
                binding,
                events,
                finish,
                server,
                token,
            })
        }
        None => None,
    };
    let (base_url, model, gateway) = match &resolved.target {
        Target::Direct { base_url, model } => (base_url.clone(), model.clone(), None),
        Target::Gateway {
            upstream_url,
            upstream_model,
            key_env,
            translation,
            timeouts,
            retries,
        } => {
            let mut config = GatewayConfig::new(upstream_url.clone(), upstream_model.clone());
            config.upstream_key_env = key_env.clone();
            config.translation = translation.clone();
            config.timeouts = timeouts.clone();
            config.retries = retries.clone();
            config.ingress_key = Some(guest_token.clone());
            let handle = Gateway::start_with(
                config,
                GatewayDeps {
                    recorder: Some(recorder.clone()),
                    upstream_key: upstream_key.clone(),
                    run_id: Some(run_id),
                    binding: host.as_ref().map(|h| h.binding.clone()),
                },
            )
            .await
            .context("starting the embedded gateway")?;
            (handle.base_url(), upstream_model.clone(), Some(handle))
        }
    };
    let host_mcp = host.as_ref().and_then(HostSide::mcp);
    let limits = RunLimits {
        timeout: resolved.timeout,
        inactivity: resolved.inactivity,
        ..Default::default()
    };
    let (host_binding, finish_slot, mcp_server, host_events) = match host {
        Some(h) => (Some(h.binding), h.finish, h.server, Some(h.events)),
        None => (None, None, None, None),
    };
    let start = Start {
        resolved: &resolved,
        entry,
        run_id,
        run_dir: &run_dir,
        model: &model,
        guest_token: &guest_token,
        host_mcp: host_mcp.clone(),
        limits: &limits,
        binding: host_binding.clone(),
        host_events,
    };
    let endpoint = super::agents::Endpoint {
        base_url: &base_url,
        gateway: gateway.as_ref(),
    };
    let launched = (super::agents::spec(resolved.agent).launch)(start, &endpoint)?;
    let Launched {
        runner,
        cwd,
        argv,
        settings,
    } = launched;
    let mut run_record = RunRecord {
        argv,
        settings_digest: hex::encode(Sha256::digest(settings.to_string().as_bytes())),
        workdir: cwd.to_string_lossy().into_owned(),
        upstream_model: Some(model),
        ..RunRecord::begin(run_id, resolved.agent.name(), resolved.agent.pin().1)
    };
    record(&recorder, RecordOp::UpsertRun(Box::new(run_record.clone()))).await;
    let cancel = runner.cancel();
    let close_on_cancel = host_binding.clone();
    let signals = tokio::spawn(async move {
        use tokio::signal::unix::{SignalKind, signal};
        let (Ok(mut int), Ok(mut term)) = (
            signal(SignalKind::interrupt()),
            signal(SignalKind::terminate()),
        ) else {
            return;
        };
        tokio::select! { _ = int.recv() => {}, _ = term.recv() => {} }
        // Cancellation closes admission at once, before the guest is stopped.
        if let Some(binding) = close_on_cancel {
            binding.close();
        }
        cancel();
    });
    let mut printer = super::view::Printer::new(resolved.output);
    let mut summary = RunSummary::default();
    let mut raw_lines = RawLineBudget::default();
    let mut session = SessionTrack::default();
    let conclude = async |outcome: RunOutcome| {
        // The host's own evidence first: what its gateway saw of the model traffic.
        let outcome = match &gateway {
            Some(gateway) => switchyard_events::verdict::apply(outcome, &gateway.verdict()),
            None => outcome,
        };
        let Some(binding) = &host_binding else {
            return outcome;
        };
        // The guest is gone: no callback may start, the admitted ones finish (an incomplete
        // cleanup is a warning event of the run, and part of its outcome).
        binding.close();
        let drained = binding.drain(CLEANUP_DRAIN).await;
        let host = HostConclusion {
            finish_required: finish_slot.is_some(),
            result: finish_slot.as_ref().and_then(FinishSlot::result),
            provider_error: gateway.as_ref().and_then(|g| g.provider_error()),
        };
        let mut outcome = switchyard_events::conclude(outcome, &host);
        outcome.incomplete_cleanup = drained.incomplete;
        outcome
    };
    let sink = async |item| match item {
        RunItem::Event(envelope) => {
            printer.event(&envelope);
            summarize(&mut summary, &envelope.event);
            session.observe(&envelope.event);
            if !recorder.is_enabled() {
                return;
            }
            let value = serde_json::to_value(&envelope).unwrap_or_default();
            record(
                &recorder,
                RecordOp::Event(EventRecord {
                    run_id,
                    seq: envelope.seq,
                    at: envelope.at,
                    kind: envelope.event.kind().into(),
                    event: value,
                }),
            )
            .await;
        }
        RunItem::RawStdout(line) => {
            record_raw_line(&recorder, &mut raw_lines, run_id, RawStream::Stdout, line).await;
        }
        RunItem::RawStderr(line) => {
            record_raw_line(&recorder, &mut raw_lines, run_id, RawStream::Stderr, line).await;
        }
        RunItem::RawStdin(line) => {
            record_raw_line(&recorder, &mut raw_lines, run_id, RawStream::Stdin, line).await;
        }
        RunItem::RawEvent(line) => {
            record_raw_line(&recorder, &mut raw_lines, run_id, RawStream::Events, line).await;
        }
    };
    let report = match runner {
        Runner::Headless(run) => run.drive(sink, conclude).await,
        Runner::Acp(run) => run.drive(sink, conclude).await,
        Runner::OpenCode(run) => run.drive(sink, conclude).await,
    };
    signals.abort();
    if let Some(server) = mcp_server {
        server.shutdown().await;
    }
    if let Some(gateway) = gateway
        && let Err(e) = gateway.shutdown().await
    {
        eprintln!("switchyard: gateway shutdown: {e}");
    }
    run_record.ended_at = Some(chrono::Utc::now());
    run_record.outcome = serde_json::to_value(&report.outcome).ok();
    run_record.state = RunState::Ended;
    run_record.summary = summary;
    run_record.raw_lines_dropped = raw_lines.dropped;
    run_record.raw_lines_truncated = raw_lines.truncated;
    // A session with a committed turn can be resumed later: keep the guest's session state
    // with the records (the run directory itself goes).
    if let (Some(records), Some(session_id), Protocol::Acp, Some(guest_state)) = (
        &resolved.records,
        session.committed(),
        resolved.protocol,
        super::agents::spec(resolved.agent).session_state,
    ) {
        let state_dir = format!("sessions/{run_id}");
        match copy_session_state(&run_dir.join(guest_state), &records.join(&state_dir)) {
            Ok(()) => {
                run_record.resume = Some(ResumePoint {
                    protocol: "acp".into(),
                    session_id,
                    workdir: cwd.to_string_lossy().into_owned(),
                    state_dir,
                });
            }
            Err(e) => eprintln!("switchyard: keeping the session state for --resume: {e}"),
        }
    }
    record(&recorder, RecordOp::UpsertRun(Box::new(run_record))).await;
    if let Err(e) = recorder.close_async().await {
        eprintln!("switchyard: records: {e}");
    }
    printer.summary(&report.outcome);
    // The run directory holds the guest's own unredacted files (telemetry, settings, temp
    // files): it goes unless asked for, also when records are kept next to it.
    if !resolved.keep_run_dir {
        let _ = std::fs::remove_dir_all(&run_dir);
    }
    Ok(Executed {
        run_id,
        outcome: report.outcome,
    })
}

/// What an agent's launch hands back to [`execute`].
pub(crate) struct Launched {
    pub runner: Runner,
    /// The workspace, canonical.
    pub cwd: PathBuf,
    /// The guest's argv (no secrets), for the run record.
    pub argv: Vec<String>,
    /// The guest's settings document, for the run record's digest.
    pub settings: serde_json::Value,
}

/// What launching any agent needs from [`execute`].
pub(crate) struct Start<'a> {
    pub resolved: &'a ResolvedRun,
    /// The verified install's entry point.
    pub entry: PathBuf,
    pub run_id: uuid::Uuid,
    pub run_dir: &'a Path,
    pub model: &'a str,
    pub guest_token: &'a str,
    pub host_mcp: Option<(String, Secret)>,
    pub limits: &'a RunLimits,
    pub binding: Option<HostBinding>,
    pub host_events: Option<tokio::sync::mpsc::Receiver<Event>>,
}

/// Prepares and starts Gemini CLI, headless or over ACP, its model calls going to `base_url`.
pub(crate) fn launch_gemini(start: Start<'_>, base_url: &str) -> Result<Launched> {
    let Start {
        resolved,
        entry,
        run_id,
        run_dir,
        model,
        guest_token,
        host_mcp,
        limits,
        binding,
        host_events,
    } = start;
    let node = which("node").context("`node` (Node.js >= 20) must be on PATH to run Gemini CLI")?;
    let launch = prepare(&GeminiLaunchConfig {
        node,
        entry,
        workdir: resolved.workdir.clone(),
        run_dir: run_dir.to_path_buf(),
        prompt: resolved.prompts.first().cloned().unwrap_or_default(),
        model: model.to_owned(),
        base_url: base_url.to_owned(),
        api_key: Secret::new(guest_token),
        approval_mode: resolved.approval_mode,
        max_turns: resolved.max_turns,
        max_attempts: GUEST_MAX_ATTEMPTS,
        host_env: std::env::vars_os().collect(),
        host_mcp: host_mcp.clone(),
        protocol: resolved.protocol,
    })
    .with_context(|| format!("preparing the run directory {}", run_dir.display()))?;
    if let Some((point, state)) = &resolved.resume {
        if state.is_dir() {
            restore_session_state(state, &run_dir.join("home/.gemini"), &point.session_id)
                .with_context(|| format!("restoring the session state from {}", state.display()))?;
        } else {
            // The guest's `session/load` fails then: the run's typed outcome says so.
            eprintln!(
                "switchyard: the saved state of session {} is missing ({})",
                point.session_id,
                state.display()
            );
        }
    }
    let started = RunStarted {
        run_id: run_id.to_string(),
        agent: Agent::GeminiCli.name().into(),
        agent_version: switchyard_backend::gemini::VERSION.into(),
        workdir: launch.cwd.to_string_lossy().into_owned(),
        model: Some(model.to_owned()),
    };
    let host = Arc::new(super::host::PolicyHost {
        binding,
        policy: resolved.permissions.clone(),
    });
    let runner = match resolved.protocol {
        Protocol::Headless => {
            let mut run = headless(&launch, limits, started, host)?;
            run.host_events = host_events;
            Runner::Headless(Box::new(run))
        }
        Protocol::Acp => {
            let plan = AcpPlan {
                prompts: resolved.prompts.clone(),
                more_prompts: resolved.prompts_stdin.then(stdin_prompts),
                cwd: launch.cwd.clone(),
                gateway_url: base_url.to_owned(),
                gateway_key: Secret::new(guest_token),
                mcp: host_mcp,
                resume: resolved.resume.as_ref().map(|(p, _)| p.session_id.clone()),
                startup_timeout: ACP_STARTUP,
                cancel_grace: ACP_CANCEL_GRACE,
                close_grace: ACP_CLOSE_GRACE,
            };
            let mut run = acp(&launch, limits, started, plan, host)?;
            run.host_events = host_events;
            Runner::Acp(Box::new(run))
        }
    };
    Ok(Launched {
        runner,
        argv: launch
            .args
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect(),
        cwd: launch.cwd,
        settings: launch.settings,
    })
}

/// How long an ACP guest may take from `initialize` to an open session (a cold start of the CLI
/// takes about 2 s).
const ACP_STARTUP: Duration = Duration::from_secs(60);
/// After `session/cancel`, how long the ACP guest has to answer before its group is stopped.
const ACP_CANCEL_GRACE: Duration = Duration::from_secs(5);
/// After its last answer and stdin's end, how long the ACP guest has to exit on its own.
const ACP_CLOSE_GRACE: Duration = Duration::from_secs(5);

/// The guest being driven.
pub(crate) enum Runner {
    Headless(Box<Driver<HeadlessMapping>>),
    Acp(Box<Driver<AcpEvents>>),
    OpenCode(Box<Driver<OpenCodeMapping>>),
}

impl Runner {
    /// What SIGINT/SIGTERM to Switchyard does.
    fn cancel(&self) -> Box<dyn FnOnce() + Send> {
        let cancel = match self {
            Runner::Headless(run) => run.cancel.clone(),
            Runner::Acp(run) => run.cancel.clone(),
            Runner::OpenCode(run) => run.cancel.clone(),
        };
        Box::new(move || cancel.cancel())
    }
}

/// Longest prompt line `--prompts-stdin` reads.
const MAX_PROMPT_LINE: usize = 1024 * 1024;

/// Prompts from stdin, one JSON line each, as they arrive. A line that is not a prompt, or is
/// longer than [`MAX_PROMPT_LINE`], ends the input with a message (the prompts before it stand).
pub(crate) fn stdin_prompts() -> tokio::sync::mpsc::Receiver<String> {
    use std::io::{BufRead, Read};
    let (tx, rx) = tokio::sync::mpsc::channel(16);
    std::thread::spawn(move || {
        let stdin = std::io::stdin();
        let mut input = stdin.lock();
        loop {
            let mut line = Vec::new();
            let limit = u64::try_from(MAX_PROMPT_LINE).unwrap_or(u64::MAX) + 1;
            match (&mut input).take(limit).read_until(b'\n', &mut line) {
                Ok(0) => return,
                Ok(_) if line.len() > MAX_PROMPT_LINE => {
                    eprintln!(
                        "switchyard: a stdin prompt line is longer than {MAX_PROMPT_LINE} bytes; no more prompts are read"
                    );
                    return;
                }
                Ok(_) => {}
                Err(e) => {
                    eprintln!("switchyard: reading prompts from stdin: {e}");
                    return;
                }
            }
            let text = String::from_utf8_lossy(&line);
            if text.trim().is_empty() {
                continue;
            }
            let Some(prompt) = parse_prompt_line(&text) else {
                eprintln!(
                    "switchyard: a stdin line is not a prompt (a JSON string or {{\"prompt\": \"…\"}}); no more prompts are read"
                );
                return;
            };
            if tx.blocking_send(prompt).is_err() {
                return;
            }
        }
    });
    rx
}

/// One `--prompts-stdin` line: a JSON string, or an object with a non-empty `prompt` string.
fn parse_prompt_line(line: &str) -> Option<String> {
    let prompt = match serde_json::from_str::<serde_json::Value>(line).ok()? {
        serde_json::Value::String(s) => s,
        serde_json::Value::Object(o) => o.get("prompt")?.as_str()?.to_owned(),
        _ => return None,
    };
    (!prompt.trim().is_empty()).then_some(prompt)
}

/// The guest session of a run, as its events tell it.
#[derive(Debug, Default)]
struct SessionTrack {
    session_id: Option<String>,
    committed: bool,
}

impl SessionTrack {
    fn observe(&mut self, event: &Event) {
        match event {
            Event::SessionStarted(s) => self.session_id = Some(s.session_id.clone()),
            Event::PromptFinished(p) => {
                self.committed |= p.stop_reason.as_deref() == Some("end_turn");
            }
            _ => {}
        }
    }

    /// The session id, once a prompt of it was answered normally.
    fn committed(&self) -> Option<String> {
        self.session_id.clone().filter(|_| self.committed)
    }
}

/// The guest's files Switchyard writes itself for every run (never carried between runs).
const GENERATED_STATE: &[&str] = &["settings.json", "trustedFolders.json"];

/// Copies the guest's state directory (`home/.gemini`: its chats, projects map, history)
/// from `from` into `to`, except the files Switchyard generates; symlinks are not followed.
fn copy_session_state(from: &Path, to: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let name = entry.file_name();
        if GENERATED_STATE.iter().any(|g| name == *g) {
            continue;
        }
        let kind = entry.file_type()?;
        let target = to.join(&name);
        if kind.is_dir() {
            copy_session_state(&entry.path(), &target)?;
        } else if kind.is_file() {
            std::fs::copy(entry.path(), &target)?;
        }
    }
    Ok(())
}

/// Puts a saved session state into a new run's `home/.gemini`, so `session/load` finds it.
///
/// Gemini CLI 0.61.0 starts a loaded session's recording as a new session with the same id, in
/// `chats/session-<current UTC minute>-<id8>.jsonl`. When that is the very file the session was
/// saved in (a resume within the same minute), its opening `$set` replaces the saved messages
/// and the load finds no resumable session. So the resumed session's files are renamed to
/// earlier minutes, which the new recording can never be named after.
fn restore_session_state(state: &Path, gemini_dir: &Path, session_id: &str) -> std::io::Result<()> {
    copy_session_state(state, gemini_dir)?;
    let short: String = session_id.chars().take(8).collect();
    let suffix = format!("-{short}.jsonl");
    let Ok(projects) = std::fs::read_dir(gemini_dir.join("tmp")) else {
        return Ok(());
    };
    for project in projects {
        let chats = project?.path().join("chats");
        let Ok(entries) = std::fs::read_dir(&chats) else {
            continue;
        };
        let mut files: Vec<String> = entries
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .filter(|name| name.starts_with("session-") && name.ends_with(&suffix))
            .collect();
        files.sort();
        let now = chrono::Utc::now();
        let count = files.len();
        for (i, name) in files.iter().enumerate() {
            let at = i64::try_from(count - i)
                .ok()
                .and_then(chrono::TimeDelta::try_minutes)
                .and_then(|back| now.checked_sub_signed(back))
                .ok_or_else(|| std::io::Error::other("too many saved session files"))?;
            let renamed = format!("session-{}{suffix}", at.format("%Y-%m-%dT%H-%M"));
            std::fs::rename(chats.join(name), chats.join(renamed))?;
        }
    }
    Ok(())
}

/// How long cleanup waits for admitted host calls to return once the guest has exited.
const CLEANUP_DRAIN: Duration = Duration::from_secs(30);

/// The host-tool side of a run.
struct HostSide {
    binding: HostBinding,
    events: tokio::sync::mpsc::Receiver<Event>,
    finish: Option<FinishSlot>,
    /// Serving the host tools, when the run has any.
    server: Option<McpServer>,
    token: String,
}

impl HostSide {
    /// The MCP server's URL and bearer token, when it serves host tools.
    fn mcp(&self) -> Option<(String, Secret)> {
        self.server
            .as_ref()
            .map(|server| (server.url(), Secret::new(self.token.clone())))
    }
}

/// Most raw guest lines (stdout and stderr together) one run stores.
const MAX_RAW_LINES: u64 = 200_000;
/// Most raw guest text (bytes, stdout and stderr together) one run stores.
const MAX_RAW_BYTES: u64 = 64 * 1024 * 1024;

/// The run's budget for stored raw lines: a guest that prints without end cannot fill the store.
/// Lines past it are counted, not stored.
#[derive(Debug)]
struct RawLineBudget {
    lines_left: u64,
    bytes_left: u64,
    dropped: u64,
    /// Lines the guest printed longer than the line cap (stored cut short).
    truncated: u64,
}

impl Default for RawLineBudget {
    fn default() -> Self {
        Self {
            lines_left: MAX_RAW_LINES,
            bytes_left: MAX_RAW_BYTES,
            dropped: 0,
            truncated: 0,
        }
    }
}

impl RawLineBudget {
    /// True (and charged) when `line` fits what is left; once one line does not, none after it
    /// is stored either (so the stored lines are a prefix of each stream, never a sample).
    fn admit(&mut self, line: &str) -> bool {
        let bytes = line.len() as u64;
        if self.dropped == 0 && self.lines_left > 0 && bytes <= self.bytes_left {
            self.lines_left -= 1;
            self.bytes_left -= bytes;
            true
        } else {
            self.dropped += 1;
            false
        }
    }
}

/// Stores one raw guest line when records are on and the run's budget admits it.
async fn record_raw_line(
    recorder: &Recorder,
    budget: &mut RawLineBudget,
    run_id: uuid::Uuid,
    stream: RawStream,
    line: Line,
) {
    budget.truncated += u64::from(line.truncated);
    if recorder.is_enabled() && budget.admit(&line.text) {
        record(
            recorder,
            RecordOp::RawLine(RawLineRecord {
                run_id,
                stream,
                seq: line.seq,
                line: line.text,
            }),
        )
        .await;
    }
}

/// Records one operation; a full queue waits (asynchronously: backpressure), a failed store is
/// reported once.
async fn record(recorder: &Recorder, op: RecordOp) {
    if let Err(e) = recorder.record(op).await {
        tracing::warn!("records: {e}");
    }
}

/// Folds an event into the run's summary counters.
fn summarize(summary: &mut RunSummary, event: &Event) {
    match event {
        Event::ToolCall(_) => summary.tool_calls += 1,
        Event::Usage(u) => {
            summary.input_tokens = u.input_tokens;
            summary.output_tokens = u.output_tokens;
            summary.cached_tokens = u.cached_tokens;
        }
        Event::RunFinished(f) => summary.turns = f.turns,
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use switchyard_events::{GuestExit, RunError};

    #[test]
    fn a_stdin_prompt_line_is_a_string_or_an_object_with_a_prompt() {
        assert_eq!(parse_prompt_line("\"next\"\n").as_deref(), Some("next"));
        assert_eq!(
            parse_prompt_line(r#"{"prompt": "go on", "x": 1}"#).as_deref(),
            Some("go on")
        );
        for bad in [
            "plain text",
            "{\"text\": \"x\"}",
            "\"  \"",
            "3",
            "{\"prompt\": 3}",
        ] {
            assert_eq!(parse_prompt_line(bad), None, "{bad}");
        }
    }

    #[test]
    fn the_raw_line_budget_stores_a_prefix_and_counts_the_rest() {
        let mut budget = RawLineBudget {
            lines_left: 3,
            bytes_left: 10,
            ..RawLineBudget::default()
        };
        assert!(budget.admit("abcd"));
        assert!(budget.admit("efgh"));
        // 2 bytes left: this line does not fit, and nothing after it is stored.
        assert!(!budget.admit("ijk"));
        assert!(!budget.admit("l"));
        assert_eq!(budget.dropped, 2);

        let mut by_count = RawLineBudget {
            lines_left: 2,
            bytes_left: 1_000,
            ..RawLineBudget::default()
        };
        assert!(by_count.admit("a") && by_count.admit("b"));
        assert!(!by_count.admit("c"));
        assert_eq!(by_count.dropped, 1);
        let default = RawLineBudget::default();
        assert_eq!(
            (default.lines_left, default.bytes_left),
            (MAX_RAW_LINES, MAX_RAW_BYTES)
        );
    }

    fn write_config(dir: &Path, text: &str) -> PathBuf {
        let path = dir.join("run.toml");
        std::fs::write(&path, text).unwrap();
        path
    }

    #[test]
    fn config_file_fills_in_and_flags_win() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().display().to_string();
        let config = write_config(
            dir.path(),
            &format!(
                "workdir = \"{ws}\"\nprompt = \"from file\"\nupstream_url = \"http://127.0.0.1:8000/v1\"\n\
                 upstream_model = \"file-model\"\nmax_turns = 3\noutput = \"jsonl\"\napproval_mode = \"yolo\"\n\
                 [translation]\nprofile = \"llama.cpp\"\necho_reasoning = true\n\
                 [timeouts]\nfirst_token_ms = 300000\n[retries]\nupstream_attempts = 5\n"
            ),
        );
        let args = RunArgs {
            config: Some(config),
            prompt: vec!["from flag".into()],
            echo_reasoning: Some(false),
            ..Default::default()
        };
        let r = args.resolve().unwrap();
        assert_eq!(r.prompts, ["from flag"]);
        assert_eq!(r.max_turns, Some(3));
        assert_eq!(r.output, OutputMode::Jsonl);
        assert_eq!(r.approval_mode, ApprovalMode::Yolo);
        let Target::Gateway {
            upstream_model,
            key_env,
            translation,
            timeouts,
            retries,
            ..
        } = r.target
        else {
            panic!("gateway target")
        };
        assert_eq!(upstream_model, "file-model");
        assert_eq!(key_env, DEFAULT_KEY_ENV);
        assert!(
            translation.forward_top_k,
            "the llama.cpp profile forwards top_k"
        );
        assert_eq!(translation.profile, switchyard_translate::Profile::LlamaCpp);
        assert!(!translation.echo_reasoning, "the flag wins over the file");
        assert_eq!(timeouts.first_token_ms, 300_000);
        assert_eq!(timeouts.idle_ms, TimeoutConfig::default().idle_ms);
        assert_eq!(retries.upstream_attempts, 5);
    }

    #[test]
    fn unknown_config_keys_such_as_a_literal_key_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let bad = write_config(dir.path(), "upstream_key = \"sk-should-not-be-here\"\n");
        let err = RunArgs {
            config: Some(bad),
            ..Default::default()
        }
        .resolve()
        .unwrap_err();
        assert!(format!("{err:#}").contains("upstream_key"), "{err:#}");
    }

    #[test]
    fn missing_or_bad_settings_are_clear_errors() {
        let dir = tempfile::tempdir().unwrap();
        let base = || RunArgs {
            workdir: Some(dir.path().to_path_buf()),
            prompt: vec!["p".into()],
            upstream_url: Some("http://127.0.0.1:1/v1".into()),
            upstream_model: Some("m".into()),
            ..Default::default()
        };
        assert!(base().resolve().is_ok());
        let e = RunArgs {
            workdir: None,
            ..base()
        }
        .resolve()
        .unwrap_err();
        assert!(e.to_string().contains("--workdir"));
        let e = RunArgs {
            upstream_url: Some("ftp://x".into()),
            ..base()
        }
        .resolve()
        .unwrap_err();
        assert!(e.to_string().contains("not an http(s) URL"));
        let e = RunArgs {
            upstream_key_env: Some("sk-123 456".into()),
            ..base()
        }
        .resolve()
        .unwrap_err();
        assert!(e.to_string().contains("must name an environment variable"));
        let e = RunArgs {
            guest_base_url: Some("http://10.0.0.1:80".into()),
            ..base()
        }
        .resolve()
        .unwrap_err();
        assert!(e.to_string().contains("loopback"));
        let e = RunArgs {
            prompt: vec!["  ".into()],
            ..base()
        }
        .resolve()
        .unwrap_err();
        assert!(e.to_string().contains("empty"));
    }

    #[test]
    fn session_flags_need_acp_and_resume_needs_a_recorded_session() {
        let dir = tempfile::tempdir().unwrap();
        let base = || RunArgs {
            workdir: Some(dir.path().to_path_buf()),
            prompt: vec!["p".into()],
            upstream_url: Some("http://127.0.0.1:1/v1".into()),
            upstream_model: Some("m".into()),
            ..Default::default()
        };
        let acp = || RunArgs {
            protocol: Some(ProtocolArg::Acp),
            ..base()
        };
        let refused = |args: RunArgs| format!("{:#}", args.resolve().unwrap_err());
        let two = RunArgs {
            prompt: vec!["a".into(), "b".into()],
            ..base()
        };
        assert!(refused(two).contains("several prompts need --protocol acp"));
        let stdin = RunArgs {
            prompts_stdin: true,
            ..base()
        };
        assert!(refused(stdin).contains("--prompts-stdin needs --protocol acp"));
        let policy = dir.path().join("p.toml");
        std::fs::write(
            &policy,
            "[[rule]]\ncategory = \"shell\"\ndecision = \"allow\"\n",
        )
        .unwrap();
        let headless_policy = RunArgs {
            permissions: Some(policy.clone()),
            ..base()
        };
        assert!(refused(headless_policy).contains("--permissions needs --protocol acp"));
        let bad_policy = RunArgs {
            permissions: Some(policy),
            ..acp()
        };
        assert!(refused(bad_policy).contains("unknown category"));
        // Prompts may come from stdin alone.
        let only_stdin = RunArgs {
            prompt: Vec::new(),
            prompts_stdin: true,
            ..acp()
        };
        assert!(only_stdin.resolve().unwrap().prompts.is_empty());
        let resume = |records: Option<PathBuf>, protocol| RunArgs {
            resume: Some("0123".into()),
            records,
            protocol,
            ..base()
        };
        assert!(
            refused(resume(None, Some(ProtocolArg::Headless)))
                .contains("--resume needs --protocol acp")
        );
        assert!(refused(resume(None, Some(ProtocolArg::Acp))).contains("--resume needs --records"));
        // A store without that run.
        let records = tempfile::tempdir().unwrap();
        switchyard_records::SqliteStore::open(switchyard_records::store_path(records.path()))
            .unwrap();
        let missing = refused(resume(
            Some(records.path().to_path_buf()),
            Some(ProtocolArg::Acp),
        ));
        assert!(missing.contains("0123"), "{missing}");
    }

    #[test]
    fn restored_session_files_never_bear_the_current_minute() {
        let saved = tempfile::tempdir().unwrap();
        let chats = saved.path().join("tmp/ws/chats");
        std::fs::create_dir_all(&chats).unwrap();
        let now = chrono::Utc::now().format("%Y-%m-%dT%H-%M").to_string();
        for name in [
            format!("session-{now}-abcdef12.jsonl"),
            "session-2026-01-01T00-00-abcdef12.jsonl".to_owned(),
            format!("session-{now}-99999999.jsonl"),
        ] {
            std::fs::write(chats.join(name), "{}").unwrap();
        }
        std::fs::write(saved.path().join("settings.json"), "{}").unwrap();
        let home = tempfile::tempdir().unwrap();
        restore_session_state(saved.path(), home.path(), "abcdef12-0000").unwrap();
        let mut names: Vec<String> = std::fs::read_dir(home.path().join("tmp/ws/chats"))
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        assert_eq!(names.len(), 3);
        let resumed: Vec<&String> = names
            .iter()
            .filter(|n| n.ends_with("-abcdef12.jsonl"))
            .collect();
        assert_eq!(resumed.len(), 2, "{names:?}");
        for name in resumed {
            // A minute can change during the test; the current one is never an earlier one.
            let later = chrono::Utc::now().format("%Y-%m-%dT%H-%M").to_string();
            assert!(!name.contains(&now) && !name.contains(&later), "{name}");
        }
        // Another session's file is left as it was; Switchyard's own files are not carried over.
        assert!(names.contains(&format!("session-{now}-99999999.jsonl")));
        assert!(!home.path().join("settings.json").exists());
    }

    #[test]
    fn a_bad_tools_file_or_finish_schema_is_a_clear_configuration_error() {
        let dir = tempfile::tempdir().unwrap();
        let base = |tools: Option<PathBuf>, finish: Option<PathBuf>| RunArgs {
            workdir: Some(dir.path().to_path_buf()),
            prompt: vec!["p".into()],
            upstream_url: Some("http://127.0.0.1:1/v1".into()),
            upstream_model: Some("m".into()),
            tools,
            finish_schema: finish,
            ..Default::default()
        };
        let tools = dir.path().join("tools.toml");
        std::fs::write(
            &tools,
            "[[tool]]\nname = \"record\"\ndescription = \"d\"\ninput_schema = { type = \"object\" }\n",
        )
        .unwrap();
        let e = base(Some(tools.clone()), None).resolve().unwrap_err();
        assert!(format!("{e:#}").contains("command or url"), "{e:#}");
        let schema = dir.path().join("finish.json");
        std::fs::write(&schema, "{\"type\": \"object\"").unwrap();
        let e = base(None, Some(schema.clone())).resolve().unwrap_err();
        assert!(format!("{e:#}").contains("not JSON"), "{e:#}");
        std::fs::write(&schema, "{\"type\": \"string\"}").unwrap();
        let e = base(None, Some(schema.clone())).resolve().unwrap_err();
        assert!(format!("{e:#}").contains("object"), "{e:#}");
        std::fs::write(&schema, "{\"type\": \"object\"}").unwrap();
        assert!(base(None, Some(schema.clone())).resolve().is_ok());
        let e = RunArgs {
            guest_base_url: Some("http://127.0.0.1:9".into()),
            ..base(None, Some(schema))
        }
        .resolve()
        .unwrap_err();
        assert!(e.to_string().contains("need the gateway"), "{e:#}");
    }

    #[test]
    fn only_real_loopback_hosts_pass_the_loopback_check() {
        for ok in [
            "http://127.0.0.1:80",
            "http://localhost:9/v1",
            "http://[::1]:8080",
            "http://127.3.4.5",
        ] {
            assert!(check_loopback_url(ok).is_ok(), "{ok}");
        }
        for bad in [
            "http://127.0.0.1.evil.example:80",
            "http://localhost.example",
            "http://[::2]:1",
            "http://10.0.0.1",
        ] {
            assert!(check_loopback_url(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn every_outcome_class_has_its_exit_code() {
        let failed = |kind| RunOutcome {
            status: OutcomeStatus::Failed,
            error: Some(RunError::new(kind, "m")),
            exit: GuestExit::default(),
            result: None,
            incomplete_cleanup: Vec::new(),
        };
        assert_eq!(
            exit_code_for(&RunOutcome {
                status: OutcomeStatus::Succeeded,
                error: None,
                exit: GuestExit::default(),
                result: None,
                incomplete_cleanup: Vec::new(),
            }),
            0
        );
        assert_eq!(
            exit_code_for(&failed(ErrorKind::ModelOutput)),
            EXIT_GUEST_FAILED
        );
        assert_eq!(
            exit_code_for(&failed(ErrorKind::Api {
                http_status: Some(429)
            })),
            EXIT_UPSTREAM
        );
        assert_eq!(
            exit_code_for(&failed(ErrorKind::TurnLimit)),
            EXIT_TURN_LIMIT
        );
        assert_eq!(exit_code_for(&failed(ErrorKind::Auth)), EXIT_GUEST_SETUP);
        assert_eq!(
            exit_code_for(&failed(ErrorKind::Crashed { signal: 9 })),
            EXIT_INCOMPLETE
        );
        assert_eq!(exit_code_for(&failed(ErrorKind::NoFinish)), EXIT_NO_RESULT);
        let with_status = |status| RunOutcome {
            status,
            error: None,
            exit: GuestExit::default(),
            result: None,
            incomplete_cleanup: Vec::new(),
        };
        assert_eq!(
            exit_code_for(&with_status(OutcomeStatus::Cancelled)),
            EXIT_CANCELLED
        );
        assert_eq!(
            exit_code_for(&with_status(OutcomeStatus::TimedOut)),
            EXIT_TIMEOUT
        );
        assert_eq!(
            exit_code_for(&with_status(OutcomeStatus::Incomplete)),
            EXIT_INCOMPLETE
        );
    }
}
