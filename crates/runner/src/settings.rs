//! A run's settings as the caller gives them: flags, or the same names in a TOML file
//! (`--config`), flags winning. Nothing here is checked yet; [`RunSettings::resolve`] does that.

use std::path::PathBuf;

use anyhow::{Context, Result};
use serde::Deserialize;
use switchyard_backend::gemini::settings::ApprovalMode;
use switchyard_gateway::config::{RetryConfig, TimeoutConfig};
use switchyard_translate::ProviderOptions;

/// Which guest to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
#[serde(rename_all = "kebab-case")]
pub enum Agent {
    GeminiCli,
    Opencode,
    ClaudeCode,
    Codex,
}

impl Agent {
    /// Every agent, in the registry's order.
    pub const ALL: [Agent; 4] = [
        Agent::GeminiCli,
        Agent::Opencode,
        Agent::ClaudeCode,
        Agent::Codex,
    ];

    /// The name events and records use.
    pub fn name(self) -> &'static str {
        crate::agents::spec(self).name
    }

    /// The pinned npm package and version.
    pub fn pin(self) -> (&'static str, &'static str) {
        crate::agents::spec(self).pin()
    }
}

/// How events are printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
#[serde(rename_all = "kebab-case")]
pub enum OutputMode {
    /// A readable live view: streamed text, tool lines, a final summary.
    #[default]
    Text,
    /// One canonical event (JSON) per line on stdout.
    Jsonl,
}

/// Approval mode flag values (mirrors the guest's).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
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
#[derive(Debug, Clone, Default, Deserialize)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
#[serde(deny_unknown_fields)]
pub struct RunSettings {
    /// TOML file with the same settings as the flags.
    #[cfg_attr(feature = "clap", arg(long))]
    #[serde(skip)]
    pub config: Option<PathBuf>,
    /// Guest agent CLI.
    #[cfg_attr(feature = "clap", arg(long, value_enum))]
    pub agent: Option<Agent>,
    /// Workspace directory the agent works in.
    #[cfg_attr(feature = "clap", arg(long))]
    pub workdir: Option<PathBuf>,
    /// The task. Repeat it to send several prompts in one session (`--protocol acp`); in the
    /// config file a string or a list.
    #[cfg_attr(feature = "clap", arg(long))]
    #[serde(default, deserialize_with = "one_or_many")]
    pub prompt: Vec<String>,
    /// Read more prompts from stdin, one JSON line each (`"text"` or `{"prompt": "text"}`), sent
    /// in turn after the `--prompt`s until stdin ends (`--protocol acp`).
    #[cfg_attr(feature = "clap", arg(long))]
    #[serde(skip)]
    pub prompts_stdin: bool,
    /// How Switchyard drives the guest: `headless` (one prompt, stream-json) or `acp` (a session:
    /// several prompts, unattended permissions, cancel, resume).
    #[cfg_attr(feature = "clap", arg(long, value_enum))]
    pub protocol: Option<ProtocolArg>,
    /// The unattended permission policy (TOML) for `--protocol acp`.
    #[cfg_attr(feature = "clap", arg(long))]
    pub permissions: Option<PathBuf>,
    /// Continue the guest session of this recorded run (`--protocol acp`, same `--records` and
    /// `--workdir`): the run id or a unique prefix of it.
    #[cfg_attr(feature = "clap", arg(long))]
    #[serde(skip)]
    pub resume: Option<String>,
    /// OpenAI-compatible Chat Completions base URL (e.g. http://127.0.0.1:8000/v1).
    #[cfg_attr(feature = "clap", arg(long))]
    pub upstream_url: Option<String>,
    /// Model name at the upstream.
    #[cfg_attr(feature = "clap", arg(long))]
    pub upstream_model: Option<String>,
    /// Name of the environment variable holding the upstream API key (never pass keys in argv).
    #[cfg_attr(feature = "clap", arg(long))]
    pub upstream_key_env: Option<String>,
    /// Send each tool-call turn's reasoning back upstream as `reasoning_content` (thinking models
    /// that require it, e.g. DeepSeek's); it travels through the guest in the call's
    /// `thoughtSignature`. Overrides `echo_reasoning` in the config's `[translation]`.
    #[cfg_attr(feature = "clap", arg(long))]
    pub echo_reasoning: Option<bool>,
    /// What the upstream accepts and wants, as the gateway's `[translation]` section (config
    /// file only).
    #[cfg_attr(feature = "clap", arg(skip))]
    pub translation: Option<ProviderOptions>,
    /// What of the guest's history goes upstream, as the gateway's `[context]` section (the
    /// `--context-*` flags override its keys).
    #[cfg_attr(feature = "clap", arg(skip))]
    pub context: Option<switchyard_translate::context::ContextConfig>,
    /// Context policy: `identity` (default: everything goes upstream) or `sliding-window`.
    #[cfg_attr(feature = "clap", arg(long, value_parser = parse_context_policy))]
    pub context_policy: Option<switchyard_translate::context::ContextPolicy>,
    /// Sliding window: the most input tokens a request may have.
    #[cfg_attr(feature = "clap", arg(long))]
    pub context_max_input_tokens: Option<u32>,
    /// Sliding window: once over the max, evict down to this many.
    #[cfg_attr(feature = "clap", arg(long))]
    pub context_target_input_tokens: Option<u32>,
    /// Sliding window: tool-result images always kept (default 6).
    #[cfg_attr(feature = "clap", arg(long))]
    pub context_min_recent_tool_images: Option<u32>,
    /// Sliding window: tool-result images are omitted this many at a time (default 2).
    #[cfg_attr(feature = "clap", arg(long))]
    pub context_image_eviction_batch_size: Option<u32>,
    /// Send the run's trace (OpenTelemetry, OTLP/HTTP protobuf) to this collector (a base URL
    /// or its `/v1/traces`); default: `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` or
    /// `OTEL_EXPORTER_OTLP_ENDPOINT`, else no traces.
    #[cfg_attr(feature = "clap", arg(long))]
    pub otlp_endpoint: Option<String>,
    /// Put the model's answers on the trace's `chat` spans (off: no prompt or completion text
    /// leaves Switchyard).
    #[cfg_attr(
        feature = "clap",
        arg(long, num_args = 0..=1, default_missing_value = "true")
    )]
    pub otlp_content: Option<bool>,
    /// The gateway's upstream timeouts, as its `[timeouts]` section (config file only).
    #[cfg_attr(feature = "clap", arg(skip))]
    pub timeouts: Option<TimeoutConfig>,
    /// The gateway's retry budget, as its `[retries]` section (config file only).
    #[cfg_attr(feature = "clap", arg(skip))]
    pub retries: Option<RetryConfig>,
    /// Directory of the record store (runs, events, model exchanges), or the `postgres://` URL
    /// of a PostgreSQL database holding it.
    #[cfg_attr(feature = "clap", arg(long, value_name = "DIR|URL"))]
    pub records: Option<PathBuf>,
    /// Output format.
    #[cfg_attr(feature = "clap", arg(long, value_enum))]
    pub output: Option<OutputMode>,
    /// Maximum model turns (the guest's maxSessionTurns).
    #[cfg_attr(feature = "clap", arg(long))]
    pub max_turns: Option<u32>,
    /// Overall timeout in seconds.
    #[cfg_attr(feature = "clap", arg(long))]
    pub timeout: Option<u64>,
    /// Stop the guest when it prints nothing for this many seconds.
    #[cfg_attr(feature = "clap", arg(long))]
    pub inactivity_timeout: Option<u64>,
    /// A sealed Gemini CLI install (its prefix, or a file inside it).
    #[cfg_attr(feature = "clap", arg(long))]
    pub gemini_binary: Option<PathBuf>,
    /// A sealed OpenCode install (its prefix, or a file inside it).
    #[cfg_attr(feature = "clap", arg(long))]
    pub opencode_binary: Option<PathBuf>,
    /// A sealed Claude Code install (its prefix, or a file inside it).
    #[cfg_attr(feature = "clap", arg(long))]
    pub claude_binary: Option<PathBuf>,
    /// A sealed Codex install (its prefix, or a file inside it).
    #[cfg_attr(feature = "clap", arg(long))]
    pub codex_binary: Option<PathBuf>,
    /// The guest's approval mode (default: the guest's safest headless mode).
    #[cfg_attr(feature = "clap", arg(long, value_enum))]
    pub approval_mode: Option<ApprovalArg>,
    /// Keep the run's private directory (settings, telemetry, temp files) for inspection: under
    /// `DIR/runs/RUN_ID` with `--records DIR`, else in the system temp directory. Its files are the
    /// guest's own and are not redacted.
    #[cfg_attr(feature = "clap", arg(long))]
    pub keep_run_dir: Option<bool>,
    /// DANGEROUS: let the workspace's own agent configuration (Gemini CLI's
    /// `.gemini/settings.json` MCP servers, hooks, discovery commands, agents and `.env`;
    /// OpenCode's `opencode.json` and `.opencode/`) start programs and redirect traffic. Off by
    /// default: a workspace the host did not write never runs code of its own at launch.
    #[cfg_attr(
        feature = "clap",
        arg(long, num_args = 0..=1, default_missing_value = "true")
    )]
    pub trust_workspace_config: Option<bool>,
    /// Point the guest at this GenerateContent endpoint directly, bypassing the gateway
    /// (testing and fixture capture only).
    #[cfg_attr(feature = "clap", arg(long, hide = true))]
    pub guest_base_url: Option<String>,
    /// Host tools: a TOML file of `[[tool]]` entries (name, description, input_schema, and a
    /// `command` or `url` handler), offered to the agent over authenticated MCP.
    #[cfg_attr(feature = "clap", arg(long))]
    pub tools: Option<PathBuf>,
    /// JSON Schema of the run's result: adds a `finish` host tool whose valid call is the
    /// run's structured result (and required for success).
    #[cfg_attr(feature = "clap", arg(long))]
    pub finish_schema: Option<PathBuf>,
    /// How long a host-tool callback waits for the guest to send the calls before it in its
    /// model batch, in milliseconds; a call not sent by then is abandoned (recorded, never
    /// run) and the later calls go ahead (default 10000).
    #[cfg_attr(feature = "clap", arg(long))]
    pub host_batch_wait_ms: Option<u64>,
}

/// `--protocol` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
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

impl RunSettings {
    /// Flags over the config file.
    pub(crate) fn merged(self) -> Result<RunSettings> {
        let Some(path) = self.config.clone() else {
            return Ok(self);
        };
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("reading {}", path.display()))?;
        let file: RunSettings =
            toml::from_str(&text).with_context(|| format!("parsing {}", path.display()))?;
        let prompt = if self.prompt.is_empty() {
            file.prompt
        } else {
            self.prompt
        };
        macro_rules! pick { ($($f:ident),*) => { RunSettings { $($f: self.$f.or(file.$f),)* prompt, config: self.config, resume: self.resume, prompts_stdin: self.prompts_stdin } } }
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
            context,
            context_policy,
            context_max_input_tokens,
            context_target_input_tokens,
            context_min_recent_tool_images,
            context_image_eviction_batch_size,
            otlp_endpoint,
            otlp_content,
            timeouts,
            retries,
            records,
            output,
            max_turns,
            timeout,
            inactivity_timeout,
            gemini_binary,
            opencode_binary,
            claude_binary,
            codex_binary,
            approval_mode,
            keep_run_dir,
            trust_workspace_config,
            guest_base_url,
            tools,
            finish_schema,
            host_batch_wait_ms
        ))
    }
}

/// `--context-policy` values.
pub fn parse_context_policy(
    value: &str,
) -> Result<switchyard_translate::context::ContextPolicy, String> {
    use switchyard_translate::context::ContextPolicy;
    match value {
        "identity" => Ok(ContextPolicy::Identity),
        "sliding-window" | "sliding_window" => Ok(ContextPolicy::SlidingWindow),
        other => Err(format!(
            "{other:?} is not a context policy (identity, sliding-window)"
        )),
    }
}

/// The `[context]` section with the `--context-*` flags over it.
pub fn context_with_flags(
    section: Option<switchyard_translate::context::ContextConfig>,
    policy: Option<switchyard_translate::context::ContextPolicy>,
    max: Option<u32>,
    target: Option<u32>,
    min_images: Option<u32>,
    image_batch: Option<u32>,
) -> switchyard_translate::context::ContextConfig {
    let mut context = section.unwrap_or_default();
    if let Some(policy) = policy {
        context.policy = policy;
    }
    if let Some(max) = max {
        context.max_input_tokens = max;
    }
    if let Some(target) = target {
        context.target_input_tokens = target;
    }
    if let Some(min) = min_images {
        context.min_recent_tool_images = min;
    }
    if let Some(batch) = image_batch {
        context.image_eviction_batch_size = batch;
    }
    context
}
