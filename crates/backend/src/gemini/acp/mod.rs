//! Drives one Gemini CLI session over the Agent Client Protocol (`gemini --acp`).
//!
//! The guest is the same managed process as headless (isolated home, process group, limits),
//! with a stdin pipe, on the neutral driver. The controller feeds the guest's stdout lines to
//! the `agent-client-protocol` connection engine (its [`Lines`] transport); what the engine
//! writes goes to stdin and is recorded too. The controller runs the session: `initialize`, `authenticate` with the
//! `gateway` method (the gateway's URL and per-run key in `_meta`, so neither is in argv or the
//! environment), `session/new` with the host tools' MCP server (or `session/load` to resume),
//! then each prompt in turn. Permission requests are checked and decided by the run's
//! [`crate::permission::PermissionHost`];
//! everything the guest sends that has no mapping is kept as `unrecognized`.
//!
//! Client capabilities: no `fs`, no terminal. Gemini CLI's `read_file` reads the disk itself
//! whatever the client offers, and paths outside the workspace bypass the client, so serving
//! `fs/*` would add a second way to the disk without confining anything; writes are gated by the
//! permission policy instead. An `fs/*` request anyway is answered "method not found" and kept.

use std::io;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use agent_client_protocol::Lines;
use agent_client_protocol::schema::ProtocolVersion;
use serde_json::Value;
use switchyard_events::event::RunStarted;
use tokio::io::AsyncWriteExt;
use tokio::sync::mpsc;

use super::launch::{PreparedLaunch, Secret};
use crate::driver::{Controller, ControllerIo, Driver, RunItem, RunLimits};
use crate::permission::PermissionHost;
use crate::process::{Line, ManagedProcess, SpawnError};

/// The protocol version Gemini CLI 0.61.0 answers.
pub const PROTOCOL_VERSION: ProtocolVersion = ProtocolVersion::V1;

/// What one ACP session does.
#[derive(Debug)]
pub struct AcpPlan {
    /// Sent in order, each after the previous one's answer; a failed prompt ends the run.
    pub prompts: Vec<String>,
    /// More prompts, sent (after `prompts`) as they arrive, until the sender is dropped.
    pub more_prompts: Option<mpsc::Receiver<String>>,
    /// The session's working directory (the workspace).
    pub cwd: PathBuf,
    /// The GenerateContent endpoint and the key the guest presents to it.
    pub gateway_url: String,
    pub gateway_key: Secret,
    /// The host tools' MCP server: URL and bearer token.
    pub mcp: Option<(String, Secret)>,
    /// Resume this recorded session (`session/load`) instead of starting one.
    pub resume: Option<String>,
    /// How long `initialize` through `session/new` may take.
    pub startup_timeout: Duration,
    /// After `session/cancel`, how long the guest has to answer before its group is stopped.
    pub cancel_grace: Duration,
    /// After the last answer (stdin closed), how long the guest has to exit on its own.
    pub close_grace: Duration,
}

/// The name of the host tools' MCP server in `session/new` (no `_`: the CLI parses
/// `mcp_<server>_<tool>`).
pub const MCP_SERVER_NAME: &str = super::settings::HOST_MCP_SERVER;

pub use crate::permission::PermissionRuling;

/// Cancels an ACP session: `session/cancel`, open permission requests answered `cancelled`,
/// then, after the plan's grace, INT → TERM → KILL to the process group.
pub type AcpCancel = crate::process::cancel::GracefulCancel;

type Notes = mpsc::UnboundedSender<Note>;

pub mod notes;
mod session;
pub use notes::{AcpEvents, Note, replay};

/// Spawns the guest (a launch prepared with [`super::launch::Protocol::Acp`]): a driver ready
/// to drive the session.
pub fn acp(
    launch: &PreparedLaunch,
    limits: &RunLimits,
    started: RunStarted,
    plan: AcpPlan,
    host: Arc<dyn PermissionHost>,
) -> Result<Driver<AcpEvents>, SpawnError> {
    let spec = super::run::process_spec(launch, limits).with_stdin_pipe();
    let process = ManagedProcess::spawn(spec)?;
    let cancel = AcpCancel::new(process.stop_handle(), plan.cancel_grace);
    let expected = u32::try_from(plan.prompts.len()).unwrap_or(u32::MAX);
    let mapping = AcpEvents::new(started.model.clone().unwrap_or_default(), expected);
    Ok(Driver {
        process,
        started,
        mapping,
        controller: Box::new(AcpController { plan }),
        cancel,
        host,
        host_events: None,
        launch_events: Vec::new(),
        transcript: None,
    })
}

/// The ACP session on the guest's stdio.
struct AcpController {
    plan: AcpPlan,
}

impl Controller for AcpController {
    type Note = Note;

    fn run(
        self: Box<Self>,
        io: ControllerIo<Note>,
    ) -> futures_util::future::BoxFuture<'static, ()> {
        Box::pin(self.session(io))
    }
}

impl AcpController {
    async fn session(self, io: ControllerIo<Note>) {
        let ControllerIo {
            mut stdout,
            stdin,
            reports,
            cancel,
            host,
        } = io;
        let Some(stdin) = stdin else {
            let _ = reports.send(crate::driver::Report::Note(Note::Failed(
                switchyard_events::OutcomeStatus::Failed,
                switchyard_events::RunError::new(
                    switchyard_events::ErrorKind::GuestFailure,
                    "the guest's stdin is not piped",
                ),
            )));
            return;
        };
        let close_grace = self.plan.close_grace;
        let (incoming_tx, mut incoming_rx) = mpsc::channel::<io::Result<String>>(256);
        let incoming = futures_util::stream::poll_fn(move |cx| incoming_rx.poll_recv(cx));
        let (notes_tx, mut notes) = mpsc::unbounded_channel::<Note>();
        let sent = notes_tx.clone();
        let raw = reports.clone();
        let stdin_seq = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let outgoing = futures_util::sink::unfold(stdin, move |mut stdin, line: String| {
            let (sent, raw, stdin_seq) = (sent.clone(), raw.clone(), stdin_seq.clone());
            async move {
                stdin.write_all(line.as_bytes()).await?;
                stdin.write_all(b"\n").await?;
                stdin.flush().await?;
                let seq = stdin_seq.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let _ = raw.send(crate::driver::Report::Raw(RunItem::RawStdin(Line {
                    seq,
                    kept_bytes: line.len(),
                    text: line.clone(),
                    dropped_bytes: 0,
                    truncated: false,
                    invalid_utf8: false,
                    terminated: true,
                })));
                let _ = sent.send(Note::Sent(line));
                Ok::<_, io::Error>(stdin)
            }
        });
        let engine = tokio::spawn(session::control(
            Lines::new(Box::pin(outgoing), incoming),
            self.plan,
            host,
            cancel,
            notes_tx,
        ));
        // The guest's lines to the engine; the engine's notes to the driver.
        let mut incoming_tx = Some(incoming_tx);
        let mut stdout_open = true;
        loop {
            tokio::select! {
                line = stdout.recv(), if stdout_open => match line {
                    Some(line) => {
                        let whole_json = !line.truncated
                            && serde_json::from_str::<serde::de::IgnoredAny>(&line.text).is_ok();
                        if !whole_json {
                            // Kept, and not handed to the engine, which would answer the guest
                            // with a parse error it never asked for.
                            let _ = reports.send(crate::driver::Report::Note(Note::Unrecognized(
                                "a stdout line that is not one whole JSON-RPC message".into(),
                                None,
                                Value::String(line.text),
                            )));
                        } else if let Some(tx) = &incoming_tx
                            && tx.send(Ok(line.text)).await.is_err()
                        {
                            incoming_tx = None;
                        }
                    }
                    None => {
                        // The guest is gone: the engine's transport ends.
                        stdout_open = false;
                        incoming_tx = None;
                    }
                },
                note = notes.recv() => match note {
                    Some(Note::Done) => {
                        // The session is over: EOF on stdin, and a bound for the guest to go.
                        let _ = reports.send(crate::driver::Report::Done {
                            close_after: close_grace,
                        });
                    }
                    Some(note) => {
                        let _ = reports.send(crate::driver::Report::Note(note));
                    }
                    None => break,
                },
            }
        }
        let _ = engine.await;
    }
}
