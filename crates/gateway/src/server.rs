//! The server: `Gateway::start(config)` binds, serves the routes of `routes.rs` behind the
//! Host/Origin guard (`guard.rs`) and returns a [`GatewayHandle`] (`local_addr`, guest env
//! lines, `shutdown`). Each connection is served by hyper's HTTP/1.1 server, with a header-read
//! timeout (also the idle keep-alive bound), a write timeout and a cap on open connections.
//!
//! Shutdown: stop accepting, cancel every in-flight exchange (dropping its upstream request),
//! wait (bounded by `timeouts.shutdown_ms`) for exchanges to finish writing their records, then
//! flush the recorder.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::routing::post;
use switchyard_records::{Recorder, Redactor};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use crate::config::{ConfigError, GatewayConfig};
use crate::guard::HostGuard;
use crate::images::ImageConverter;
use crate::intake::{BodyBudget, Intake};
use crate::record_writer::RecordWriter;
use crate::routing::ModelRouter;
use crate::sessions::{MAX_SESSIONS, Sessions};
use crate::state::AppState;
use crate::translation::RequestTranslator;
use crate::upstream::UpstreamClient;

/// Placeholder key printed for guests when no ingress key is configured.
pub const PLACEHOLDER_GUEST_KEY: &str = "switchyard-gateway";

/// The provider id of the gateway in an OpenCode config.
pub const OPENCODE_PROVIDER: &str = "switchyard";

/// The environment variable the OpenCode snippet reads the ingress key from.
pub const OPENCODE_KEY_ENV: &str = "SWITCHYARD_API_KEY";

/// Why the gateway could not start or stop cleanly.
#[derive(Debug, thiserror::Error)]
pub enum GatewayError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("cannot build the upstream HTTP client: {0}")]
    Client(#[from] crate::upstream::ClientError),
    #[error("cannot open records in {dir}: {source}")]
    Records {
        dir: String,
        source: switchyard_records::RecordError,
    },
    #[error("records flush failed at shutdown: {0}")]
    Flush(switchyard_records::RecordError),
}

/// What the embedding program supplies besides the config.
#[derive(Debug, Clone, Default)]
pub struct GatewayDeps {
    /// Record sink; `None` = open `config.records_dir` (or records off when that is unset).
    pub recorder: Option<Recorder>,
    /// Upstream API key; `None` = read the env var named by `config.upstream_key_env`.
    pub upstream_key: Option<String>,
    /// Run the exchanges belong to (recorded on every exchange).
    pub run_id: Option<Uuid>,
    /// The run's host tools (see [`switchyard_binding::HostBinding`]).
    pub binding: Option<switchyard_binding::HostBinding>,
    /// Where `chat` spans go, and the span they belong to (the run's; none: each guest
    /// request is a trace of its own).
    pub telemetry: Option<(
        std::sync::Arc<switchyard_telemetry::Telemetry>,
        Option<switchyard_telemetry::Context>,
    )>,
}

/// Entry point.
pub struct Gateway;

impl Gateway {
    /// Start with the config alone (key from the environment, records from `records_dir`).
    pub async fn start(config: GatewayConfig) -> Result<GatewayHandle, GatewayError> {
        Self::start_with(config, GatewayDeps::default()).await
    }

    /// Start with explicit dependencies (used by `switchyard run`).
    pub async fn start_with(
        config: GatewayConfig,
        deps: GatewayDeps,
    ) -> Result<GatewayHandle, GatewayError> {
        config.validate()?;
        let upstream_key = deps
            .upstream_key
            .or_else(|| std::env::var(&config.upstream_key_env).ok())
            .filter(|k| !k.is_empty());
        // The secrets the gateway knows, kept out of records and out of what the guest sees:
        // the keys, and credentials written into the upstream URL.
        let url_secrets = url_credentials(&config.upstream_url);
        let guest_redactor = Redactor::new(
            upstream_key
                .iter()
                .chain(config.ingress_key.iter())
                .chain(url_secrets.iter())
                .cloned(),
        );
        let recorder = match (deps.recorder, &config.records_dir) {
            (Some(r), _) => r,
            (None, Some(dir)) => {
                Recorder::open_dir(dir, guest_redactor.clone()).map_err(|source| {
                    GatewayError::Records {
                        dir: switchyard_records::display_records(dir),
                        source,
                    }
                })?
            }
            (None, None) => Recorder::disabled(),
        };
        for secret in upstream_key
            .iter()
            .chain(config.ingress_key.iter())
            .chain(url_secrets.iter())
        {
            recorder.add_secret(secret.clone());
        }
        let upstream = UpstreamClient::new(&config, upstream_key)?;
        let records = recorder
            .is_enabled()
            .then(|| RecordWriter::new(recorder.clone()));
        let listener = bind(config.listen).map_err(|source| GatewayError::Bind {
            addr: config.listen,
            source,
        })?;
        let local_addr = listener.local_addr().map_err(|source| GatewayError::Bind {
            addr: config.listen,
            source,
        })?;
        let cancel = CancellationToken::new();
        let (in_flight, in_flight_done) = mpsc::channel(1);
        let intake = Intake {
            budget: BodyBudget::new(config.limits.buffered_request_bytes),
            own: config.limits.connection_body_bytes,
            max_body: config.limits.max_request_bytes,
            stall: config.timeouts.guest_body_idle(),
            deadline: config.timeouts.guest_body(),
        };
        let call_ids = crate::call_ids::CallIds::new(config.ingress_key.as_deref());
        let state = Arc::new(AppState {
            router: ModelRouter::new(
                &config.upstream_model,
                &config.aliases,
                config.strict_models,
            ),
            config,
            upstream,
            translator: RequestTranslator::new(),
            images: ImageConverter::new(),
            intake,
            records,
            run_id: deps.run_id,
            sessions: Sessions::new(MAX_SESSIONS),
            call_ids,
            token_counts: crate::context::TokenCounts::default(),
            metrics: Arc::default(),
            telemetry: deps.telemetry,
            verdicts: Arc::new(crate::verdict::Verdicts::new(guest_redactor.clone())),
            guest_redactor,
            binding: deps.binding,
            provider_error: std::sync::Mutex::new(None),
            cancel: cancel.clone(),
            in_flight,
        });
        let guard = Arc::new(HostGuard::new(
            local_addr,
            &state.config.allowed_hosts,
            &state.config.allowed_origins,
        ));
        let app = Router::new()
            .route("/{version}/models/{*rest}", post(crate::routes::models))
            .route(
                "/v1/chat/completions",
                post(crate::routes::chat_completions),
            )
            .route("/chat/completions", post(crate::routes::chat_completions))
            .route("/v1/messages", post(crate::routes::messages))
            .route("/v1/responses", post(crate::routes::responses))
            .route("/health", axum::routing::get(crate::routes::health))
            .route("/ready", axum::routing::get(crate::routes::ready))
            .route("/metrics", axum::routing::get(crate::routes::metrics))
            .fallback(crate::routes::not_found)
            .with_state(state.clone())
            .layer(axum::middleware::from_fn_with_state(
                guard,
                crate::guard::check,
            ))
            .layer(axum::middleware::from_fn_with_state(
                state.metrics.clone(),
                crate::routes::count_status,
            ));
        let bounds = ConnectionBounds {
            head: state.config.timeouts.guest_head(),
            write: state.config.timeouts.guest_write(),
            max_open: state.config.limits.max_connections,
        };
        let server = tokio::spawn(serve(listener, app, cancel.clone(), bounds));
        tracing::info!(%local_addr, upstream = %state.upstream.url(), "gateway listening");
        Ok(GatewayHandle {
            local_addr,
            ingress_key: state.config.ingress_key.clone(),
            shutdown_bound: state.config.timeouts.shutdown(),
            cancel,
            server,
            state: Some(state),
            in_flight_done,
            recorder,
        })
    }
}

/// What bounds a guest connection (from `[timeouts]` and `[limits]`).
#[derive(Debug, Clone, Copy)]
struct ConnectionBounds {
    head: std::time::Duration,
    write: std::time::Duration,
    max_open: usize,
}

/// The accept loop: each connection is served by hyper's HTTP/1.1 server (with `TCP_NODELAY`,
/// a header-read timeout that also closes idle kept-alive connections, and a write timeout), at
/// most `max_open` at once. On `stop`: stop accepting; connections between requests close,
/// those in an exchange finish it and then close; returns once every connection is closed.
async fn serve(
    listener: tokio::net::TcpListener,
    app: Router,
    stop: CancellationToken,
    bounds: ConnectionBounds,
) -> std::io::Result<()> {
    // Each connection task holds a receiver; `closed()` resolves when all are gone.
    let (all_closed, open) = tokio::sync::watch::channel(());
    let slots = Arc::new(tokio::sync::Semaphore::new(bounds.max_open));
    loop {
        // Past the cap, further guests wait in the kernel's accept queue.
        let slot = tokio::select! {
            slot = slots.clone().acquire_owned() => match slot {
                Ok(slot) => slot,
                Err(_) => break,
            },
            _ = stop.cancelled() => break,
        };
        let tcp = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((tcp, _)) => tcp,
                Err(e) => {
                    // E.g. too many open files: wait a little instead of spinning.
                    tracing::warn!(error = %e, "cannot accept a connection");
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                    continue;
                }
            },
            _ = stop.cancelled() => break,
        };
        // Frames must leave at once: without TCP_NODELAY a small SSE write waits for the
        // delayed ACK of the previous one (~40 ms).
        if let Err(e) = tcp.set_nodelay(true) {
            tracing::debug!(error = %e, "cannot set TCP_NODELAY");
        }
        let (app, stop, open) = (app.clone(), stop.clone(), open.clone());
        tokio::spawn(async move {
            serve_connection(tcp, app, stop, bounds).await;
            drop((slot, open));
        });
    }
    drop(open);
    drop(listener);
    all_closed.closed().await;
    Ok(())
}

/// One guest connection until it closes, or until `stop` once its current exchange is done.
async fn serve_connection(
    tcp: tokio::net::TcpStream,
    app: Router,
    stop: CancellationToken,
    bounds: ConnectionBounds,
) {
    let mut io = tokio_io_timeout::TimeoutStream::new(tcp);
    io.set_write_timeout(Some(bounds.write));
    let io = hyper_util::rt::TokioIo::new(Box::pin(io));
    let service = hyper_util::service::TowerToHyperService::new(app);
    let connection = hyper::server::conn::http1::Builder::new()
        .timer(hyper_util::rt::TokioTimer::new())
        .header_read_timeout(bounds.head)
        // hyper's read buffer grows to fit what arrives and keeps that size for the
        // connection's life: capped, a 47 KB body is read in pieces instead of pinning ~64 KiB
        // per open stream. A request head must fit (16 KiB).
        .max_buf_size(MAX_CONNECTION_BUFFER)
        .serve_connection(io, service);
    tokio::pin!(connection);
    let ended = tokio::select! {
        ended = connection.as_mut() => ended,
        _ = stop.cancelled() => {
            connection.as_mut().graceful_shutdown();
            connection.await
        }
    };
    if let Err(e) = ended {
        tracing::debug!(error = %e, "guest connection ended with an error");
    }
}

/// Largest read buffer a guest connection keeps (the request head must fit).
const MAX_CONNECTION_BUFFER: usize = 16 * 1024;

/// Listen with a deep accept queue: a guest host may open many streams at once.
fn bind(addr: SocketAddr) -> std::io::Result<tokio::net::TcpListener> {
    let socket = if addr.is_ipv4() {
        tokio::net::TcpSocket::new_v4()?
    } else {
        tokio::net::TcpSocket::new_v6()?
    };
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(LISTEN_BACKLOG)
}

/// Accept queue length requested from the kernel (capped by `net.core.somaxconn`).
const LISTEN_BACKLOG: u32 = 4096;

/// A running gateway.
pub struct GatewayHandle {
    local_addr: SocketAddr,
    ingress_key: Option<String>,
    shutdown_bound: std::time::Duration,
    cancel: CancellationToken,
    server: tokio::task::JoinHandle<std::io::Result<()>>,
    state: Option<Arc<AppState>>,
    in_flight_done: mpsc::Receiver<()>,
    recorder: Recorder,
}

impl GatewayHandle {
    /// The last provider failure the gateway passed on to the guest, if any (HTTP status when
    /// there was one, redacted message).
    pub fn provider_error(&self) -> Option<(Option<u16>, String)> {
        let state = self.state.as_ref()?;
        state
            .provider_error
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// How the gateway's main exchanges ended so far: the host's own evidence for the run's
    /// outcome (see `switchyard_events::verdict`).
    pub fn verdict(&self) -> switchyard_events::verdict::Verdict {
        self.state
            .as_ref()
            .map(|state| state.verdicts.snapshot())
            .unwrap_or_default()
    }

    /// The bound address (useful with port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// `http://<local_addr>`, the value for `GOOGLE_GEMINI_BASE_URL`.
    pub fn base_url(&self) -> String {
        format!("http://{}", self.local_addr)
    }

    /// Environment a stock Gemini CLI needs to talk to this gateway. `GEMINI_API_KEY` is the
    /// ingress key when one is configured (the guest must send it), else a placeholder.
    pub fn guest_env(&self) -> Vec<(String, String)> {
        vec![
            ("GOOGLE_GEMINI_BASE_URL".into(), self.base_url()),
            (
                "GEMINI_API_KEY".into(),
                self.ingress_key
                    .clone()
                    .unwrap_or_else(|| PLACEHOLDER_GUEST_KEY.to_string()),
            ),
        ]
    }

    /// The user settings a stock Gemini CLI needs (`~/.gemini/settings.json`).
    pub fn guest_settings() -> serde_json::Value {
        serde_json::json!({
            "security": {"auth": {"selectedType": "gemini-api-key"}},
            "general": {"maxAttempts": 2}
        })
    }

    /// The OpenCode config (its `provider`, `model` and `small_model` members) that points a
    /// stock OpenCode at this gateway's Chat Completions ingress: provider `switchyard`
    /// (`@ai-sdk/openai-compatible`, bundled with OpenCode), model `model`, the key read from
    /// the environment variable `key_env` (OpenCode's `{env:…}` substitution), so no secret is
    /// written into the config.
    pub fn opencode_provider(&self, model: &str, key_env: &str) -> serde_json::Value {
        serde_json::json!({
            "provider": {OPENCODE_PROVIDER: {
                "npm": "@ai-sdk/openai-compatible",
                "name": "Switchyard gateway",
                "options": {
                    "baseURL": format!("{}/v1", self.base_url()),
                    "apiKey": format!("{{env:{key_env}}}"),
                },
                "models": {model: {
                    "name": model,
                    "tool_call": true,
                    // Without these OpenCode replaces an image a tool read with an error
                    // text ("this model does not support image input").
                    "attachment": true,
                    "modalities": {"input": ["text", "image"], "output": ["text"]},
                    "limit": {"context": 128000, "output": 8192},
                }},
            }},
            "model": format!("{OPENCODE_PROVIDER}/{model}"),
            "small_model": format!("{OPENCODE_PROVIDER}/{model}"),
        })
    }

    /// Human-readable start banner. With an ingress key, the key itself is not printed: the
    /// line names `ingress_key_hint` instead (e.g. the env var the key came from). `model` is
    /// the model name the OpenCode snippet uses.
    pub fn banner(&self, ingress_key_hint: Option<&str>, model: &str) -> String {
        self.banner_with_codex(ingress_key_hint, model, None)
    }

    /// [`Self::banner`], and with `codex_catalog` (the path of a catalog file for `model`,
    /// see [`crate::codex::codex_catalog`]) the `config.toml` of a stock Codex, last.
    pub fn banner_with_codex(
        &self,
        ingress_key_hint: Option<&str>,
        model: &str,
        codex_catalog: Option<&str>,
    ) -> String {
        let key = match (&self.ingress_key, ingress_key_hint) {
            (None, _) => PLACEHOLDER_GUEST_KEY.to_string(),
            (Some(_), Some(hint)) => format!("\"{hint}\""),
            (Some(_), None) => "<the configured ingress_key>".to_string(),
        };
        format!(
            "switchyard gateway listening on {addr}\n\
             # point a stock Gemini CLI at it:\n\
             export GOOGLE_GEMINI_BASE_URL={base}\n\
             export GEMINI_API_KEY={key}\n\
             # and in $GEMINI_CLI_HOME/.gemini/settings.json (or ~/.gemini/settings.json):\n\
             {settings}\n\
             # point a stock OpenCode at it (merge into opencode.json, or pass as\n\
             # OPENCODE_CONFIG_CONTENT):\n\
             export {OPENCODE_KEY_ENV}={key}\n\
             {opencode}\n\
             # point a stock Claude Code at it (no outside traffic, every tool inline):\n\
             export ANTHROPIC_BASE_URL={base}\n\
             export ANTHROPIC_API_KEY={key}\n\
             export CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 ENABLE_TOOL_SEARCH=false\n{codex}",
            addr = self.local_addr,
            base = self.base_url(),
            settings = Self::guest_settings(),
            opencode = self.opencode_provider(model, OPENCODE_KEY_ENV),
            codex = codex_catalog.map_or_else(String::new, |catalog| {
                format!(
                    "# point a stock Codex at it ($CODEX_HOME/config.toml, CODEX_HOME outside \
                     /tmp):\n\
                     export {env}={key}\n{config}# end of the Codex config\n",
                    env = crate::codex::CODEX_KEY_ENV,
                    config = crate::codex::codex_config(
                        &self.base_url(),
                        model,
                        crate::codex::CODEX_KEY_ENV,
                        catalog
                    ),
                )
            }),
        )
    }

    /// Stop accepting, cancel in-flight upstream requests, wait (bounded) for exchanges to end,
    /// flush records. Returns within about `timeouts.shutdown_ms`.
    pub async fn shutdown(mut self) -> Result<(), GatewayError> {
        self.cancel.cancel();
        // Our own sender copy must go, or the wait below never ends.
        self.state.take();
        let deadline = tokio::time::Instant::now() + self.shutdown_bound;
        // Connections close once their exchanges end (they observe the cancellation); the
        // server task then drops the router's state, and the last exchange task its guard.
        if tokio::time::timeout_at(deadline, &mut self.server)
            .await
            .is_err()
        {
            self.server.abort();
            tracing::warn!("gateway connections did not close in time; aborted");
        }
        if tokio::time::timeout_at(deadline, self.in_flight_done.recv())
            .await
            .is_err()
        {
            tracing::warn!("some exchanges were still finishing at shutdown");
        }
        let recorder = self.recorder.clone();
        recorder.flush_async().await.map_err(GatewayError::Flush)
    }
}
/// The user name and password written into `url` (`http://user:pass@host/…`), as written and
/// decoded: secrets like the key.
fn url_credentials(url: &str) -> Vec<String> {
    let Ok(url) = url::Url::parse(url) else {
        return Vec::new();
    };
    let mut secrets = Vec::new();
    // The password always; a user name only when it looks like a token (a short one such as
    // `api` would blank that word everywhere).
    let user = Some(url.username()).filter(|u| u.len() >= 8);
    for raw in [user.unwrap_or_default(), url.password().unwrap_or_default()] {
        if raw.is_empty() {
            continue;
        }
        let decoded = percent_encoding::percent_decode_str(raw)
            .decode_utf8_lossy()
            .into_owned();
        secrets.push(raw.to_owned());
        if decoded != raw {
            secrets.push(decoded);
        }
    }
    secrets
}
