//! Gateway settings: what the `switchyard gateway` flags and the TOML config file set.
//!
//! Every field has a default except the upstream URL and model. A TOML file uses the same names
//! (see `README.md` in this crate for a full example); command-line flags override the file.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use switchyard_translate::ProviderOptions;

/// Default environment variable holding the upstream API key.
pub const DEFAULT_UPSTREAM_KEY_ENV: &str = "SWITCHYARD_UPSTREAM_KEY";

/// Why a configuration cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read config file {path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("invalid config file {path}: {source}")]
    Parse {
        path: String,
        source: Box<toml::de::Error>,
    },
    #[error(
        "refusing to listen on non-loopback address {0}: the gateway spends the provider key for \
         whoever reaches it; set allow_non_loopback = true (flag --allow-non-loopback) and an \
         ingress key to do it anyway"
    )]
    NonLoopback(SocketAddr),
    #[error(
        "refusing to listen on non-loopback address {0} without an ingress key: nobody off this \
         machine may use the gateway unauthenticated (set ingress_key, flag --ingress-key-env)"
    )]
    NonLoopbackWithoutKey(SocketAddr),
    #[error("upstream_url is required (flag --upstream-url)")]
    MissingUpstreamUrl,
    #[error("upstream_model is required (flag --upstream-model)")]
    MissingUpstreamModel,
    #[error("upstream_url {url:?} is not an http(s) URL")]
    BadUpstreamUrl { url: String },
    #[error("invalid alias pattern {0:?}: '*' is only allowed once, at the end")]
    BadAlias(String),
    #[error("allowed_origins entry {0:?} is not an origin (http(s)://host[:port], nothing more)")]
    BadOrigin(String),
    #[error("ingress_key must not be empty")]
    EmptyIngressKey,
    #[error(
        "limits.max_request_bytes, buffered_request_bytes, max_connections, max_answer_bytes, \
         max_answer_ms and max_recorded_stream_bytes must be at least 1"
    )]
    ZeroLimit,
    #[error("[context]: {0}")]
    Context(String),
}

/// Everything the gateway needs to run.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct GatewayConfig {
    /// Address to listen on; port 0 picks a free port.
    pub listen: SocketAddr,
    /// Allow a non-loopback `listen` address.
    pub allow_non_loopback: bool,
    /// OpenAI-compatible base URL; `/chat/completions` is appended (e.g. `http://host:8000/v1`).
    pub upstream_url: String,
    /// Upstream model every guest model is routed to unless an alias says otherwise.
    pub upstream_model: String,
    /// Name of the environment variable holding the upstream API key (sent as
    /// `Authorization: Bearer`). Unset or empty variable: no Authorization header.
    pub upstream_key_env: String,
    /// Directory of the record store; `None` = records off.
    pub records_dir: Option<PathBuf>,
    /// When set, every guest request must carry `x-goog-api-key: <ingress_key>`.
    pub ingress_key: Option<String>,
    /// Host names (besides loopback addresses, `localhost` and the listen address) that a
    /// request's `Host` and `Origin` may name, e.g. this machine's name when listening off
    /// loopback. Anything else is refused (403): DNS rebinding and cross-site requests.
    pub allowed_hosts: Vec<String>,
    /// Origins (`scheme://host[:port]`) a request's `Origin` may be besides the gateway's own
    /// (`http`, a host above, the listen port), e.g. a reverse proxy's `https://gateway.example`.
    /// Matched exactly: scheme, host and port.
    pub allowed_origins: Vec<String>,
    /// Guest model name (or `prefix*` pattern) -> upstream model. Exact names win over patterns;
    /// among patterns the longest prefix wins.
    pub aliases: BTreeMap<String, String>,
    /// What the upstream accepts (`top_k`, `reasoning_effort`, stop sequences, PNG re-encoding)
    /// and wants (`echo_reasoning`: each tool-call turn's reasoning sent back as
    /// `reasoning_content`, for thinking models that reject a tool-call turn without it, such as
    /// DeepSeek's; the reasoning travels through the guest in the first call's
    /// `thoughtSignature`, which Gemini CLI sends back verbatim; see
    /// `switchyard_translate::reasoning`). The `[translation]` section.
    pub translation: ProviderOptions,
    /// Refuse guest model names that are neither an alias nor `upstream_model` (404).
    pub strict_models: bool,
    pub retries: RetryConfig,
    pub timeouts: TimeoutConfig,
    pub limits: LimitConfig,
    /// Serve `GET /metrics` without the ingress key (when one is set).
    pub metrics_public: bool,
    /// What of a guest's history goes upstream (the `[context]` section; see
    /// `switchyard_translate::context`).
    pub context: switchyard_translate::context::ContextConfig,
}

impl Default for GatewayConfig {
    fn default() -> Self {
        Self {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            allow_non_loopback: false,
            upstream_url: String::new(),
            upstream_model: String::new(),
            upstream_key_env: DEFAULT_UPSTREAM_KEY_ENV.to_string(),
            records_dir: None,
            ingress_key: None,
            allowed_hosts: Vec::new(),
            allowed_origins: Vec::new(),
            aliases: BTreeMap::new(),
            translation: ProviderOptions::default(),
            strict_models: false,
            retries: RetryConfig::default(),
            timeouts: TimeoutConfig::default(),
            limits: LimitConfig::default(),
            metrics_public: false,
            context: switchyard_translate::context::ContextConfig::default(),
        }
    }
}

/// Upstream retry policy. See the crate docs for the budget and how it combines with the
/// guest's own retries.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RetryConfig {
    /// Most upstream attempts per exchange for retryable failures (429, 5xx, connect errors,
    /// timeouts before the first byte). 1 = no retries.
    pub upstream_attempts: u32,
    /// Extra attempts when the upstream produced a malformed or truncated tool call (or a
    /// reused call id) before anything was delivered to the guest.
    pub malformed_retries: u32,
    /// First backoff; doubles per retry.
    pub initial_backoff_ms: u64,
    /// Cap on a single backoff wait. An upstream `Retry-After` is waited as asked when it fits
    /// `budget_ms`; otherwise the guest gets the upstream's 429 with it.
    pub max_backoff_ms: u64,
    /// No retry starts later than this after the exchange began.
    pub budget_ms: u64,
    /// After the gateway gives up on a retryable upstream failure, answer so that the guest
    /// does not retry again (`limit: 0` quota wording, which Gemini CLI treats as terminal).
    /// `false` passes a retryable status with `RetryInfo` to the guest instead.
    pub guest_fail_fast: bool,
}

impl Default for RetryConfig {
    fn default() -> Self {
        Self {
            upstream_attempts: 3,
            malformed_retries: 2,
            initial_backoff_ms: 250,
            max_backoff_ms: 4_000,
            budget_ms: 10_000,
            guest_fail_fast: true,
        }
    }
}

/// Upstream timeouts and the shutdown bound.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TimeoutConfig {
    /// TCP/TLS connect.
    pub connect_ms: u64,
    /// From sending the request to the response head.
    pub first_byte_ms: u64,
    /// Longest wait from the response head to the first chunk of its body (a local server may
    /// read a long prompt only after sending its head).
    pub first_token_ms: u64,
    /// Longest silence between two chunks of a streamed (or any) response body.
    pub idle_ms: u64,
    /// How long `shutdown` waits for in-flight exchanges to end after cancelling them.
    pub shutdown_ms: u64,
    /// Longest pause of a guest while sending its request body (then 408 and the body's
    /// reservation of `limits.buffered_request_bytes` is freed).
    pub guest_body_idle_ms: u64,
    /// Longest time a guest may take to send a whole request body, however steadily it
    /// trickles (then 408), so that no guest holds the body budget for ever.
    pub guest_body_ms: u64,
    /// Longest wait for a complete request head: on a new connection, and between requests on
    /// a kept-alive one (so it is also the idle keep-alive timeout). The connection is closed.
    pub guest_head_ms: u64,
    /// Longest time a write to a guest may stay blocked (a guest that stopped reading); the
    /// connection is then closed and the exchange ends as `guest_disconnected`.
    pub guest_write_ms: u64,
}

impl Default for TimeoutConfig {
    fn default() -> Self {
        Self {
            connect_ms: 5_000,
            first_byte_ms: 120_000,
            first_token_ms: 120_000,
            idle_ms: 120_000,
            shutdown_ms: 3_000,
            guest_body_idle_ms: 30_000,
            guest_body_ms: 120_000,
            guest_head_ms: 20_000,
            guest_write_ms: 30_000,
        }
    }
}

impl TimeoutConfig {
    pub fn first_token(&self) -> Duration {
        Duration::from_millis(self.first_token_ms)
    }
    pub fn connect(&self) -> Duration {
        Duration::from_millis(self.connect_ms)
    }
    pub fn first_byte(&self) -> Duration {
        Duration::from_millis(self.first_byte_ms)
    }
    pub fn idle(&self) -> Duration {
        Duration::from_millis(self.idle_ms)
    }
    pub fn shutdown(&self) -> Duration {
        Duration::from_millis(self.shutdown_ms)
    }
    pub fn guest_body_idle(&self) -> Duration {
        Duration::from_millis(self.guest_body_idle_ms)
    }
    pub fn guest_body(&self) -> Duration {
        Duration::from_millis(self.guest_body_ms)
    }
    pub fn guest_head(&self) -> Duration {
        Duration::from_millis(self.guest_head_ms)
    }
    pub fn guest_write(&self) -> Duration {
        Duration::from_millis(self.guest_write_ms)
    }
}

/// Bounds on what guests may make the gateway buffer.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LimitConfig {
    /// Largest guest request body (413 beyond it). History with images can be large.
    pub max_request_bytes: usize,
    /// Bytes of each guest request body read on its connection's own bound, without waiting
    /// for anyone (an ordinary first turn of Gemini CLI is ~47 KB).
    pub connection_body_bytes: usize,
    /// Bytes of guest request bodies past their own bound buffered at once, over all
    /// connections, charged as they arrive (a body larger than this is read alone); the others
    /// wait in the kernel. Bounds the gateway's memory when many guests send at once.
    pub buffered_request_bytes: u32,
    /// Guest connections open at once; further ones wait in the kernel's accept queue until
    /// one closes. Bounds file descriptors and per-connection memory.
    pub max_connections: usize,
    /// Largest answer, in bytes of text, reasoning and call names and arguments together: past
    /// it the answer ends with an error in the guest's shape (`answer_limit`).
    pub max_answer_bytes: usize,
    /// Most tool calls in one answer.
    pub max_answer_tool_calls: usize,
    /// Longest an answer may take, from the request to its end (every attempt included).
    pub max_answer_ms: u64,
    /// Raw upstream events kept for the records per attempt, in bytes; later ones are dropped
    /// and the cut is noted in the record.
    pub max_recorded_stream_bytes: usize,
}

impl LimitConfig {
    pub fn max_answer(&self) -> Duration {
        Duration::from_millis(self.max_answer_ms)
    }
}

impl Default for LimitConfig {
    fn default() -> Self {
        Self {
            max_request_bytes: 256 * 1024 * 1024,
            connection_body_bytes: 64 * 1024,
            buffered_request_bytes: 1024 * 1024,
            max_connections: 4_096,
            max_answer_bytes: 4 * 1024 * 1024,
            max_answer_tool_calls: 256,
            max_answer_ms: 60 * 60 * 1000,
            max_recorded_stream_bytes: 8 * 1024 * 1024,
        }
    }
}

impl GatewayConfig {
    /// A config routing everything to `upstream_model` at `upstream_url`, defaults elsewhere.
    pub fn new(upstream_url: impl Into<String>, upstream_model: impl Into<String>) -> Self {
        Self {
            upstream_url: upstream_url.into(),
            upstream_model: upstream_model.into(),
            ..Self::default()
        }
    }

    /// Parse a TOML config file.
    pub fn from_toml_file(path: &std::path::Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.display().to_string(),
            source,
        })?;
        Self::from_toml_str(&text).map_err(|e| match e {
            ConfigError::Parse { source, .. } => ConfigError::Parse {
                path: path.display().to_string(),
                source,
            },
            other => other,
        })
    }

    /// Parse TOML text.
    pub fn from_toml_str(text: &str) -> Result<Self, ConfigError> {
        toml::from_str(text).map_err(|source| ConfigError::Parse {
            path: "<string>".into(),
            source: Box::new(source),
        })
    }

    /// Check the settings that can be checked without I/O.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if !self.listen.ip().is_loopback() {
            if !self.allow_non_loopback {
                return Err(ConfigError::NonLoopback(self.listen));
            }
            if self.ingress_key.is_none() {
                return Err(ConfigError::NonLoopbackWithoutKey(self.listen));
            }
        }
        if self.upstream_url.is_empty() {
            return Err(ConfigError::MissingUpstreamUrl);
        }
        if !(self.upstream_url.starts_with("http://") || self.upstream_url.starts_with("https://"))
        {
            return Err(ConfigError::BadUpstreamUrl {
                url: self.upstream_url.clone(),
            });
        }
        if self.upstream_model.is_empty() {
            return Err(ConfigError::MissingUpstreamModel);
        }
        for pattern in self.aliases.keys() {
            let stars = pattern.matches('*').count();
            if stars > 1 || (stars == 1 && !pattern.ends_with('*')) {
                return Err(ConfigError::BadAlias(pattern.clone()));
            }
        }
        if self.ingress_key.as_deref() == Some("") {
            return Err(ConfigError::EmptyIngressKey);
        }
        if let Some(bad) = self
            .allowed_origins
            .iter()
            .find(|o| crate::guard::parse_origin(o).is_none())
        {
            return Err(ConfigError::BadOrigin(bad.clone()));
        }
        self.context.validate().map_err(ConfigError::Context)?;
        let limits = &self.limits;
        if limits.buffered_request_bytes == 0
            || limits.max_request_bytes == 0
            || limits.max_connections == 0
            || limits.max_answer_bytes == 0
            || limits.max_answer_ms == 0
            || limits.max_recorded_stream_bytes == 0
        {
            return Err(ConfigError::ZeroLimit);
        }
        Ok(())
    }

    /// The upstream chat completions endpoint.
    pub fn chat_completions_url(&self) -> String {
        format!(
            "{}/chat/completions",
            self.upstream_url.trim_end_matches('/')
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use switchyard_translate::ThinkingMode;

    #[test]
    fn the_readme_example_is_a_valid_config() {
        let readme = include_str!("../README.md");
        let example = readme
            .split("```toml\n")
            .nth(1)
            .and_then(|rest| rest.split("```").next())
            .expect("README.md has a toml example");
        let cfg = GatewayConfig::from_toml_str(example).unwrap();
        cfg.validate().unwrap();
        assert_eq!(cfg.translation, ProviderOptions::default());
        assert_eq!(cfg.upstream_model, "qwen3-coder");
    }

    #[test]
    fn toml_round_trip_with_aliases_retries_and_timeouts() {
        let cfg = GatewayConfig::from_toml_str(
            r#"
            listen = "127.0.0.1:8123"
            upstream_url = "http://127.0.0.1:9000/v1"
            upstream_model = "qwen"
            strict_models = true
            [translation]
            forward_top_k = true
            thinking = "reasoning_effort"
            max_stop_sequences = 5
            echo_reasoning = true
            [aliases]
            "gemini-3-flash-preview" = "small"
            "gemini-2.5-*" = "big"
            [retries]
            malformed_retries = 1
            [timeouts]
            idle_ms = 500
            [limits]
            buffered_request_bytes = 65536
            "#,
        )
        .unwrap();
        cfg.validate().unwrap();
        assert_eq!(cfg.listen.port(), 8123);
        let translation = &cfg.translation;
        assert!(translation.forward_top_k && translation.echo_reasoning);
        assert_eq!(translation.thinking, ThinkingMode::ReasoningEffort);
        assert_eq!(translation.max_stop_sequences, 5);
        assert!(translation.reencode_png, "unset keys keep their defaults");
        assert_eq!(cfg.aliases["gemini-2.5-*"], "big");
        assert_eq!(cfg.retries.malformed_retries, 1);
        assert_eq!(cfg.retries.upstream_attempts, 3, "unset keys keep defaults");
        assert_eq!(cfg.timeouts.idle_ms, 500);
        assert_eq!(cfg.limits.buffered_request_bytes, 65536);
        assert_eq!(cfg.limits.max_request_bytes, 256 * 1024 * 1024);
        assert_eq!(
            cfg.chat_completions_url(),
            "http://127.0.0.1:9000/v1/chat/completions"
        );
    }

    #[test]
    fn unknown_keys_are_rejected() {
        let err = GatewayConfig::from_toml_str("upstream_modle = \"x\"").unwrap_err();
        assert!(err.to_string().contains("upstream_modle"), "{err}");
    }

    #[test]
    fn non_loopback_needs_explicit_opt_in() {
        let mut cfg = GatewayConfig::new("http://127.0.0.1:1/v1", "m");
        cfg.listen = "0.0.0.0:8080".parse().unwrap();
        assert!(matches!(cfg.validate(), Err(ConfigError::NonLoopback(_))));
        cfg.allow_non_loopback = true;
        assert!(matches!(
            cfg.validate(),
            Err(ConfigError::NonLoopbackWithoutKey(_))
        ));
        cfg.ingress_key = Some("a-long-ingress-key".into());
        cfg.validate().unwrap();
        cfg.ingress_key = None;
        cfg.listen = "[::1]:0".parse().unwrap();
        cfg.allow_non_loopback = false;
        cfg.validate().unwrap();
    }

    #[test]
    fn alias_patterns_only_allow_a_trailing_star() {
        let mut cfg = GatewayConfig::new("http://127.0.0.1:1/v1", "m");
        cfg.aliases.insert("gem*ini".into(), "x".into());
        assert!(matches!(cfg.validate(), Err(ConfigError::BadAlias(_))));
    }

    #[test]
    fn zero_body_limits_are_refused() {
        let mut cfg = GatewayConfig::new("http://127.0.0.1:1/v1", "m");
        cfg.limits.buffered_request_bytes = 0;
        assert!(matches!(cfg.validate(), Err(ConfigError::ZeroLimit)));
        cfg.limits.buffered_request_bytes = 1;
        cfg.limits.max_request_bytes = 0;
        assert!(matches!(cfg.validate(), Err(ConfigError::ZeroLimit)));
    }
}
