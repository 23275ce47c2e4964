//! [`execute`]: one resolved run from start to end. It starts the record sink, the host tools'
//! binding and MCP server and the embedded gateway, launches the agent from the registry,
//! drives it on the backend's driver, applies the host's verdict, and saves the session state a
//! later `--resume` needs.

use std::path::{Path, PathBuf};
use std::sync::PoisonError;
use std::time::Duration;

use anyhow::{Context, Result};
use sha2::{Digest, Sha256};
use switchyard_backend::driver::{Driver, RunItem, RunLimits};
use switchyard_backend::gemini::acp::AcpEvents;
use switchyard_backend::gemini::launch::{Protocol, Secret};
use switchyard_backend::gemini::run::HeadlessMapping;
use switchyard_backend::opencode::run::OpenCodeMapping;
use switchyard_backend::process::Line;
use switchyard_binding::{FinishSlot, HostBinding, McpServer, ToolRegistry};
use switchyard_events::verdict::{self, PromptVerdict, Verdict};
use switchyard_events::{Envelope, Event, HostConclusion, RunOutcome};
use switchyard_gateway::{Gateway, GatewayConfig, GatewayDeps};
use switchyard_records::model::{
    EventRecord, RawLineRecord, RawStream, RecordOp, RunRecord, RunState, RunSummary,
};
use switchyard_records::{Recorder, Redactor, ResumePoint};

use crate::gemini::copy_session_state;
use crate::home::random_token;
use crate::resolve::{HostTools, ResolvedRun, Target};

/// What the caller sees of a run while it goes: each canonical event as it is emitted, then
/// the outcome once the records are closed.
pub trait RunObserver {
    fn event(&mut self, envelope: &Envelope);
    fn finished(&mut self, _outcome: &RunOutcome) {}
}

/// A run that ended.
pub struct Executed {
    pub run_id: uuid::Uuid,
    pub outcome: RunOutcome,
}

/// How a caller other than `switchyard run` (a queue worker) drives a run.
#[derive(Debug, Default)]
pub struct ExecuteOptions {
    /// The run's id in the records (a fresh v7 when `None`).
    pub run_id: Option<uuid::Uuid>,
    /// Cancels the run (the same path as SIGINT) once it holds `true`. With one, the run leaves
    /// SIGINT and SIGTERM to the caller.
    pub cancel: Option<tokio::sync::watch::Receiver<bool>>,
}

/// Runs the guest of `resolved` to its end; SIGINT or SIGTERM cancels it.
pub async fn execute(
    resolved: ResolvedRun,
    entry: PathBuf,
    observer: &mut dyn RunObserver,
) -> Result<Executed> {
    execute_with(resolved, entry, observer, ExecuteOptions::default()).await
}

/// [`execute`] with a given run id, or cancelled by its caller instead of by signals. The
/// future is not `Send` (a worker runs several on a `LocalSet`).
pub async fn execute_with(
    mut resolved: ResolvedRun,
    entry: PathBuf,
    observer: &mut dyn RunObserver,
    options: ExecuteOptions,
) -> Result<Executed> {
    let run_id = options.run_id.unwrap_or_else(uuid::Uuid::now_v7);
    // Beside the records when they are a directory (PostgreSQL records have none).
    let records_dir = resolved
        .records
        .as_deref()
        .and_then(switchyard_records::local_records_dir);
    let run_dir = match records_dir {
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
            Recorder::open_dir(dir, redactor).with_context(|| {
                format!(
                    "opening records in {}",
                    switchyard_records::display_records(dir)
                )
            })?
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
            let prefix = crate::agents::spec(resolved.agent).host_tool_prefix;
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
    // Tracing never fails a run: without an exporter it runs untraced, and says so.
    let telemetry =
        switchyard_telemetry::Telemetry::start(&resolved.telemetry).unwrap_or_else(|e| {
            eprintln!("switchyard: traces off: {e}");
            None
        });
    let spans = telemetry.clone().map(|t| {
        crate::spans::RunSpans::start(
            t,
            resolved.agent.name(),
            resolved.agent.pin().1,
            &run_id.to_string(),
        )
    });
    let (base_url, model, gateway) = match &resolved.target {
        Target::Direct { base_url, model } => (base_url.clone(), model.clone(), None),
        Target::Gateway {
            upstream_url,
            upstream_model,
            key_env,
            translation,
            timeouts,
            retries,
            context,
        } => {
            let mut config = GatewayConfig::new(upstream_url.clone(), upstream_model.clone());
            config.context = context.clone();
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
                    telemetry: telemetry
                        .clone()
                        .map(|t| (t, spans.as_ref().map(crate::spans::RunSpans::context))),
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
    let endpoint = crate::agents::Endpoint {
        base_url: &base_url,
        gateway: gateway.as_ref(),
    };
    let launched = (crate::agents::spec(resolved.agent).launch)(start, &endpoint)?;
    let Launched {
        runner,
        cwd,
        argv,
        settings,
        other_dirs,
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
    let cancelled_by = options.cancel;
    let signals = tokio::spawn(async move {
        use tokio::signal::unix::{SignalKind, signal};
        if let Some(mut cancelled) = cancelled_by {
            // The caller's to say; a caller gone without saying so cancels nothing.
            if cancelled.wait_for(|yes| *yes).await.is_err() {
                return;
            }
        } else {
            let (Ok(mut int), Ok(mut term)) = (
                signal(SignalKind::interrupt()),
                signal(SignalKind::terminate()),
            ) else {
                return;
            };
            tokio::select! { _ = int.recv() => {}, _ = term.recv() => {} }
        }
        // Cancellation closes admission at once, before the guest is stopped.
        if let Some(binding) = close_on_cancel {
            binding.close();
        }
        cancel();
    });
    let mut summary = RunSummary::default();
    let mut raw_lines = RawLineBudget::default();
    let mut session = SessionTrack::default();
    let prompts = std::sync::Mutex::new(PromptJudge::default());
    let spans = std::sync::Mutex::new(spans);
    let conclude = async |outcome: RunOutcome| {
        // The host's own evidence first: what its gateway saw of the model traffic.
        let outcome = match &gateway {
            Some(gateway) => {
                let prompts = prompts.lock().unwrap_or_else(PoisonError::into_inner);
                verdict::apply_prompts(outcome, &prompts.judged, &gateway.verdict())
            }
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
            observer.event(&envelope);
            if let Some(spans) = spans
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .as_mut()
            {
                spans.event(&envelope.event);
            }
            summarize(&mut summary, &envelope.event);
            session.observe(&envelope.event);
            if let Some(gateway) = &gateway {
                prompts
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .observe(&envelope.event, || gateway.verdict());
            }
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
        Runner::Claude(run) => run.drive(sink, conclude).await,
        Runner::Codex(run) => run.drive(sink, conclude).await,
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
    // After the gateway: its last `chat` spans have ended.
    if let Some(spans) = spans.into_inner().unwrap_or_else(PoisonError::into_inner) {
        // The exporter's last send blocks (bounded by its timeout): off the runtime.
        let outcome = report.outcome.clone();
        let _ = tokio::task::spawn_blocking(move || spans.finish(&outcome)).await;
    }
    run_record.ended_at = Some(chrono::Utc::now());
    run_record.outcome = serde_json::to_value(&report.outcome).ok();
    run_record.state = RunState::Ended;
    run_record.summary = summary;
    run_record.raw_lines_dropped = raw_lines.dropped;
    run_record.raw_lines_truncated = raw_lines.truncated;
    // A session with a committed turn can be resumed later: keep the guest's session state
    // with the records (the run directory itself goes). PostgreSQL records keep none yet.
    if let (Some(records), Some(session_id), Protocol::Acp, Some(guest_state)) = (
        records_dir,
        session.committed(),
        resolved.protocol,
        crate::agents::spec(resolved.agent).session_state,
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
    observer.finished(&report.outcome);
    // The run directory holds the guest's own unredacted files (telemetry, settings, temp
    // files): it goes unless asked for, also when records are kept next to it.
    if !resolved.keep_run_dir {
        let _ = std::fs::remove_dir_all(&run_dir);
        for dir in &other_dirs {
            let _ = std::fs::remove_dir_all(dir);
        }
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
    /// Private folders of the run outside its run directory, removed with it.
    pub other_dirs: Vec<PathBuf>,
}

/// The `workspace_config_ignored` events of a launch: the agent's configuration files found in
/// the workspace, which its launch neutralised (none when the host trusts the workspace's
/// configuration).
pub(crate) fn workspace_events(
    resolved: &ResolvedRun,
    workdir: &Path,
    files: &[switchyard_backend::workspace::WorkspaceFile],
) -> Vec<Event> {
    if resolved.trust_workspace_config {
        return Vec::new();
    }
    switchyard_backend::workspace::scan(workdir, files)
        .into_iter()
        .map(Event::WorkspaceConfigIgnored)
        .collect()
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

/// The guest being driven.
pub(crate) enum Runner {
    Headless(Box<Driver<HeadlessMapping>>),
    Acp(Box<Driver<AcpEvents>>),
    OpenCode(Box<Driver<OpenCodeMapping>>),
    Claude(Box<Driver<switchyard_backend::claude::run::ClaudeMapping>>),
    Codex(Box<Driver<switchyard_backend::codex::run::CodexMapping>>),
}

impl Runner {
    /// What SIGINT/SIGTERM to Switchyard does.
    fn cancel(&self) -> Box<dyn FnOnce() + Send> {
        let cancel = match self {
            Runner::Headless(run) => run.cancel.clone(),
            Runner::Acp(run) => run.cancel.clone(),
            Runner::OpenCode(run) => run.cancel.clone(),
            Runner::Claude(run) => run.cancel.clone(),
            Runner::Codex(run) => run.cancel.clone(),
        };
        Box::new(move || cancel.cancel())
    }
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
                // `end_turn` (ACP, Claude Code) or Codex's `completed` turn.
                self.committed |=
                    matches!(p.stop_reason.as_deref(), Some("end_turn" | "completed"));
            }
            _ => {}
        }
    }

    /// The session id, once a prompt of it was answered normally.
    fn committed(&self) -> Option<String> {
        self.session_id.clone().filter(|_| self.committed)
    }
}

/// Each prompt of a session, judged by the main exchanges the gateway saw end while it ran:
/// from its `user_message` (the prompt sent) to its `prompt_finished`.
#[derive(Debug, Default)]
struct PromptJudge {
    /// The gateway's verdict when the running prompt was sent.
    before: Option<Verdict>,
    judged: Vec<PromptVerdict>,
}

impl PromptJudge {
    fn observe(&mut self, event: &Event, now: impl FnOnce() -> Verdict) {
        match event {
            Event::UserMessage(_) => self.before = Some(now()),
            Event::PromptFinished(p) => {
                let before = self.before.take().unwrap_or_default();
                self.judged.push(PromptVerdict {
                    prompt: p.prompt,
                    guest_failed: p.error.is_some(),
                    verdict: now().since(&before),
                });
            }
            _ => {}
        }
    }
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
#[path = "execute_tests.rs"]
mod tests;
