//! Settings to a checked run: every setting that can be checked without starting the guest is
//! checked here (files, URLs, the key variable's name, flags the agent cannot honour, the
//! resumed session), and [`verify_install`] checks the sealed install against its manifest.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use switchyard_backend::gemini::launch::Protocol;
use switchyard_backend::gemini::settings::ApprovalMode;
use switchyard_binding::{BindingLimits, FinishSlot, FinishTool, Policy, ToolRegistry, ToolsFile};
use switchyard_gateway::config::{RetryConfig, TimeoutConfig};
use switchyard_records::ResumePoint;
use switchyard_translate::ProviderOptions;

use crate::settings::{Agent, OutputMode, ProtocolArg, RunSettings};

#[derive(Debug)]
pub struct ResolvedRun {
    pub agent: Agent,
    /// Where the run's trace goes (off without an endpoint).
    pub telemetry: switchyard_telemetry::TelemetryConfig,
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
    /// The workspace's own agent configuration applies (`--trust-workspace-config`).
    pub trust_workspace_config: bool,
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
#[allow(clippy::large_enum_variant)] // one per run: its size costs nothing
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
        /// Its `[context]` section.
        context: switchyard_translate::context::ContextConfig,
    },
    /// Straight to a GenerateContent endpoint (tests, capture).
    Direct { base_url: String, model: String },
}

/// Default name of the variable holding the upstream key.
pub const DEFAULT_KEY_ENV: &str = "SWITCHYARD_UPSTREAM_KEY";

impl RunSettings {
    /// Checks and resolves everything that can be checked without running the guest.
    pub fn resolve(self) -> Result<ResolvedRun> {
        let a = self.merged()?;
        let agent = a.agent.unwrap_or(Agent::GeminiCli);
        let spec = crate::agents::spec(agent);
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
                let context = crate::settings::context_with_flags(
                    a.context.clone(),
                    a.context_policy,
                    a.context_max_input_tokens,
                    a.context_target_input_tokens,
                    a.context_min_recent_tool_images,
                    a.context_image_eviction_batch_size,
                );
                if let Err(e) = context.validate() {
                    bail!("[context]: {e}");
                }
                Target::Gateway {
                    upstream_url,
                    upstream_model: model,
                    key_env,
                    translation,
                    timeouts: a.timeouts.unwrap_or_default(),
                    retries: a.retries.unwrap_or_default(),
                    context,
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
            telemetry: switchyard_telemetry::TelemetryConfig::from_env(
                a.otlp_endpoint.as_deref(),
                a.otlp_content.unwrap_or(false),
                "switchyard",
            ),
            records: a.records,
            output: a.output.unwrap_or_default(),
            max_turns: a.max_turns,
            timeout: a.timeout.map(Duration::from_secs),
            inactivity: a.inactivity_timeout.map(Duration::from_secs),
            guest_prefix,
            approval_mode: a.approval_mode.map(Into::into).unwrap_or_default(),
            keep_run_dir: a.keep_run_dir.unwrap_or(false),
            trust_workspace_config: a.trust_workspace_config.unwrap_or(false),
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
    use switchyard_records::StoreSpec;
    if protocol != Protocol::Acp {
        bail!("--resume needs --protocol acp");
    }
    let records = records.context("--resume needs --records (where the run was recorded)")?;
    let spec = StoreSpec::from_path(records)?;
    let store = spec
        .open_existing()
        .with_context(|| format!("opening the records in {spec}"))?;
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
    let state = spec
        .dir()
        .context("--resume needs --records to be a directory (the session state is kept there)")?
        .join(&point.state_dir);
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

/// The run's install did not verify against its sealed manifest.
#[derive(Debug)]
pub struct InstallRefused {
    pub agent: Agent,
    pub prefix: PathBuf,
    pub error: Box<switchyard_backend::install::InstallError>,
}

impl std::fmt::Display for InstallRefused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "refusing the {} install at {}: {}",
            self.agent.name(),
            self.prefix.display(),
            self.error
        )
    }
}

impl std::error::Error for InstallRefused {}

/// Verifies the run's sealed install; its entry point is what [`crate::execute`] starts.
pub fn verify_install(resolved: &ResolvedRun) -> Result<PathBuf, InstallRefused> {
    let (package, version) = resolved.agent.pin();
    switchyard_backend::install::verify(&resolved.guest_prefix, package, version)
        .and_then(|install| match resolved.agent {
            // Codex's entry is the platform's native binary, not the package's Node launcher.
            Agent::Codex => switchyard_backend::codex::native_entry(&resolved.guest_prefix),
            _ => Ok(install.entry),
        })
        .map_err(|error| InstallRefused {
            agent: resolved.agent,
            prefix: resolved.guest_prefix.clone(),
            error: Box::new(error),
        })
}

#[cfg(test)]
#[path = "resolve_tests.rs"]
mod tests;
