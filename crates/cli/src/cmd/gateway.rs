//! `switchyard gateway`: run the model gateway standalone (the same engine `switchyard run`
//! embeds) until Ctrl-C / SIGTERM, printing the environment that points a stock Gemini CLI at it.

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::Context;
use clap::Args;
use switchyard_gateway::{Gateway, GatewayConfig};

/// Serve Google GenerateContent on loopback and forward to an OpenAI-compatible upstream.
#[derive(Debug, Args)]
pub struct GatewayArgs {
    /// Address to listen on (loopback only unless --allow-non-loopback). Default 127.0.0.1:0.
    #[arg(long, value_name = "ADDR")]
    pub listen: Option<SocketAddr>,
    /// OpenAI-compatible base URL; `/chat/completions` is appended (e.g. http://127.0.0.1:8000/v1).
    #[arg(long, value_name = "URL")]
    pub upstream_url: Option<String>,
    /// Upstream model every guest model is routed to (unless an alias says otherwise).
    #[arg(long, value_name = "NAME")]
    pub upstream_model: Option<String>,
    /// Environment variable holding the upstream API key [default: SWITCHYARD_UPSTREAM_KEY].
    /// The key itself is never accepted on the command line.
    #[arg(long, value_name = "VAR")]
    pub upstream_key_env: Option<String>,
    /// Record every exchange into this directory (SQLite store), or into the PostgreSQL database
    /// of a `postgres://` URL (also from `SWITCHYARD_RECORDS`, so its password stays out of argv).
    #[arg(
        long,
        value_name = "DIR|URL",
        env = "SWITCHYARD_RECORDS",
        hide_env_values = true
    )]
    pub records: Option<PathBuf>,
    /// TOML config file with the same settings (+ aliases, retries, timeouts); flags win.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Require guests to send the value of this environment variable as their API key.
    /// Without it (and without `ingress_key` in the config file) the gateway makes up a random
    /// key at start and prints it in the environment lines.
    #[arg(long, value_name = "VAR")]
    pub ingress_key_env: Option<String>,
    /// Serve guests without any key (loopback only): any local process may then spend the
    /// provider key through the gateway.
    #[arg(long, conflicts_with = "ingress_key_env")]
    pub no_ingress_key: bool,
    /// Route a guest model name (or `prefix*`) to an upstream model: `--alias NAME=MODEL`.
    #[arg(long = "alias", value_name = "NAME=MODEL")]
    pub aliases: Vec<String>,
    /// Refuse guest model names that are neither an alias nor the upstream model.
    #[arg(long)]
    pub strict_models: bool,
    /// Send each tool-call turn's reasoning back upstream as `reasoning_content` (thinking
    /// models that require it, e.g. DeepSeek's); it travels through the guest in the call's
    /// `thoughtSignature`.
    #[arg(long)]
    pub echo_reasoning: bool,
    /// Allow listening on a non-loopback address.
    #[arg(long)]
    pub allow_non_loopback: bool,
    /// Send a trace per guest request (OpenTelemetry, OTLP/HTTP protobuf) to this collector;
    /// default: `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` or `OTEL_EXPORTER_OTLP_ENDPOINT`.
    #[arg(long, value_name = "URL")]
    pub otlp_endpoint: Option<String>,
    /// Put the model's answers on the `chat` spans.
    #[arg(long)]
    pub otlp_content: bool,
    /// Context policy: `identity` (default) or `sliding-window` (see the `[context]` section).
    #[arg(long, value_parser = switchyard_runner::parse_context_policy)]
    pub context_policy: Option<switchyard_translate::context::ContextPolicy>,
    /// Sliding window: the most input tokens a request may have.
    #[arg(long)]
    pub context_max_input_tokens: Option<u32>,
    /// Sliding window: once over the max, evict down to this many.
    #[arg(long)]
    pub context_target_input_tokens: Option<u32>,
    /// Sliding window: tool-result images always kept (default 6).
    #[arg(long)]
    pub context_min_recent_tool_images: Option<u32>,
    /// Sliding window: tool-result images are omitted this many at a time (default 2).
    #[arg(long)]
    pub context_image_eviction_batch_size: Option<u32>,
}

impl GatewayArgs {
    /// The effective config: file (if any), then flags; and the ingress key when it was made up
    /// here (so it may be printed).
    pub fn to_config(&self) -> anyhow::Result<(GatewayConfig, Option<String>)> {
        let mut config = match &self.config {
            Some(path) => GatewayConfig::from_toml_file(path)?,
            None => GatewayConfig::default(),
        };
        if let Some(listen) = self.listen {
            config.listen = listen;
        }
        if let Some(url) = &self.upstream_url {
            config.upstream_url = url.clone();
        }
        if let Some(model) = &self.upstream_model {
            config.upstream_model = model.clone();
        }
        if let Some(var) = &self.upstream_key_env {
            config.upstream_key_env = var.clone();
        }
        if let Some(dir) = &self.records {
            config.records_dir = Some(dir.clone());
        }
        if let Some(var) = &self.ingress_key_env {
            let key = std::env::var(var).with_context(|| {
                format!("--ingress-key-env: environment variable {var} is not set")
            })?;
            config.ingress_key = Some(key);
        }
        for alias in &self.aliases {
            let (name, model) = alias
                .split_once('=')
                .with_context(|| format!("--alias {alias:?}: expected NAME=MODEL"))?;
            config.aliases.insert(name.to_string(), model.to_string());
        }
        config.strict_models |= self.strict_models;
        config.translation.echo_reasoning |= self.echo_reasoning;
        config.allow_non_loopback |= self.allow_non_loopback;
        config.context = switchyard_runner::context_with_flags(
            Some(config.context.clone()),
            self.context_policy,
            self.context_max_input_tokens,
            self.context_target_input_tokens,
            self.context_min_recent_tool_images,
            self.context_image_eviction_batch_size,
        );
        let mut generated = None;
        if self.no_ingress_key {
            config.ingress_key = None;
        } else if config.ingress_key.is_none() {
            let key = generated_ingress_key();
            config.ingress_key = Some(key.clone());
            generated = Some(key);
        }
        config.validate()?;
        Ok((config, generated))
    }
}

/// Run the gateway until interrupted.
pub async fn run(args: GatewayArgs) -> anyhow::Result<()> {
    let (config, generated_key) = args.to_config()?;
    if std::env::var(&config.upstream_key_env)
        .unwrap_or_default()
        .is_empty()
    {
        eprintln!(
            "note: {} is not set; requests go upstream without an Authorization header",
            config.upstream_key_env
        );
    }
    let records_dir = config.records_dir.clone();
    // PostgreSQL records are opened here, so that an error names the URL with its password
    // hidden (the gateway's own message would show the value whole); the gateway adds its
    // secrets to this recorder's redactor as to its own.
    let recorder = match records_dir
        .as_deref()
        .map(switchyard_records::StoreSpec::from_path)
        .transpose()?
    {
        Some(spec) if spec.is_postgres() => Some(
            switchyard_records::Recorder::open(&spec, switchyard_records::Redactor::default())
                .with_context(|| format!("cannot open records in {spec}"))?,
        ),
        _ => None,
    };
    let model = config.upstream_model.clone();
    let telemetry =
        switchyard_telemetry::Telemetry::start(&switchyard_telemetry::TelemetryConfig::from_env(
            args.otlp_endpoint.as_deref(),
            args.otlp_content,
            "switchyard-gateway",
        ))
        .unwrap_or_else(|e| {
            eprintln!("switchyard gateway: traces off: {e}");
            None
        });
    // Standalone, each guest request is a trace of its own.
    let handle = Gateway::start_with(
        config,
        switchyard_gateway::GatewayDeps {
            telemetry: telemetry.clone().map(|t| (t, None)),
            recorder,
            ..switchyard_gateway::GatewayDeps::default()
        },
    )
    .await?;
    // A key the user chose is named by its variable; a made-up one is printed, as the user
    // needs it to point a guest here and it is worth nothing once the gateway stops.
    let hint = match &args.ingress_key_env {
        Some(var) => Some(format!("${var}")),
        None => generated_key,
    };
    let catalog = match write_codex_catalog(&model) {
        Ok(path) => Some(path.to_string_lossy().into_owned()),
        Err(e) => {
            eprintln!("switchyard gateway: no Codex catalog, so no Codex section: {e:#}");
            None
        }
    };
    print!(
        "{}",
        handle.banner_with_codex(hint.as_deref(), &model, catalog.as_deref())
    );
    use std::io::Write;
    std::io::stdout().flush().ok();
    if let Some(dir) = records_dir {
        eprintln!(
            "recording every exchange in {dir}; browse them with \
             `switchyard records --records {dir} exchanges`, totals with \
             `switchyard records --records {dir} usage`",
            dir = switchyard_records::display_records(&dir)
        );
    }
    wait_for_signal().await?;
    eprintln!("switchyard gateway: shutting down");
    handle.shutdown().await?;
    if let Some(telemetry) = telemetry {
        // The exporter's last send blocks (bounded by its timeout): off the runtime.
        let _ = tokio::task::spawn_blocking(move || telemetry.shutdown()).await;
    }
    Ok(())
}

/// Writes the Codex model catalog for `model` (see `switchyard_gateway::codex`) under
/// Switchyard's data directory, where a stock Codex's `config.toml` can keep naming it after
/// this gateway stops; returns its path.
fn write_codex_catalog(model: &str) -> anyhow::Result<std::path::PathBuf> {
    use anyhow::Context as _;
    let dir = switchyard_runner::home::switchyard_home().join("codex");
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    // One file per model; any other character of its name becomes `_`.
    let name: String = model
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '-') {
                c
            } else {
                '_'
            }
        })
        .collect();
    let path = dir.join(format!("catalog-{name}.json"));
    let catalog = switchyard_protocol::codex_catalog::model_catalog(
        model,
        switchyard_protocol::codex_catalog::DEFAULT_CONTEXT_WINDOW,
    );
    std::fs::write(&path, serde_json::to_vec_pretty(&catalog)?)
        .with_context(|| format!("writing {}", path.display()))?;
    Ok(path)
}

/// A random per-start ingress key (128 bits from the OS's generator, via UUID v4).
fn generated_ingress_key() -> String {
    format!("sy-{}", uuid::Uuid::new_v4().simple())
}

async fn wait_for_signal() -> anyhow::Result<()> {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    tokio::select! {
        r = tokio::signal::ctrl_c() => r?,
        _ = term.recv() => {}
    }
    Ok(())
}
