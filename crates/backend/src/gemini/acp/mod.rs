//! Drives one Gemini CLI session over the Agent Client Protocol (`gemini --acp`).
//!
//! The guest is the same managed process as headless (isolated home, process group, limits),
//! with a stdin pipe. Its stdout lines are recorded raw and fed to the `agent-client-protocol`
//! connection engine (its [`Lines`] transport); what the engine writes goes to stdin and is
//! recorded too. A controller task runs the session: `initialize`, `authenticate` with the
//! `gateway` method (the gateway's URL and per-run key in `_meta`, so neither is in argv or the
//! environment), `session/new` with the host tools' MCP server (or `session/load` to resume),
//! then each prompt in turn. Permission requests are checked and decided by the [`AcpHost`];
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
use chrono::Utc;
use serde_json::Value;
use switchyard_events::acp::Delivered;
use switchyard_events::event::RunStarted;
use switchyard_events::gemini::StderrSummary;
use switchyard_events::{Envelope, Event, RunOutcome};
use tokio::io::AsyncWriteExt;
use tokio::sync::mpsc;

use super::launch::{PreparedLaunch, Secret};
use super::run::{RunItem, RunLimits, RunReport, guest_exit};
use crate::process::{Line, ManagedProcess, ProcessEvent, SpawnError, StopReason};

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

/// The host side of an ACP session: what the gateway delivered, and the permission policy.
pub trait AcpHost: Send + Sync + 'static {
    /// The delivered call `model_call_id`, as the gateway sent it.
    fn delivered(&self, model_call_id: &str) -> Option<Delivered>;
    /// Decides the call a permission request names (`<tool>__<model call id>`), once; `Err`
    /// says why it is not a pending delivered call.
    fn permission(&self, tool_call_id: &str) -> Result<PermissionRuling, String>;
}

/// Cancels an ACP session: `session/cancel`, open permission requests answered `cancelled`,
/// then, after the plan's grace, INT → TERM → KILL to the process group.
pub type AcpCancel = crate::process::cancel::GracefulCancel;

type Notes = mpsc::UnboundedSender<Note>;

pub mod notes;
mod session;
pub use notes::{AcpEvents, Note, replay};

/// A started ACP session.
pub struct AcpRun {
    process: ManagedProcess,
    stdin: tokio::process::ChildStdin,
    started: RunStarted,
    plan: AcpPlan,
    host: Arc<dyn AcpHost>,
    host_events: Option<mpsc::Receiver<Event>>,
    cancel: AcpCancel,
    transcript: Option<mpsc::UnboundedSender<Note>>,
}

impl AcpRun {
    /// Spawns the guest (a launch prepared with [`super::launch::Protocol::Acp`]).
    pub fn start(
        launch: &PreparedLaunch,
        limits: &RunLimits,
        started: RunStarted,
        plan: AcpPlan,
        host: Arc<dyn AcpHost>,
    ) -> Result<Self, SpawnError> {
        let spec = super::run::process_spec(launch, limits).with_stdin_pipe();
        let mut process = ManagedProcess::spawn(spec)?;
        let Some(stdin) = process.take_stdin() else {
            return Err(SpawnError::Spawner(io::Error::other(
                "the guest's stdin is not piped",
            )));
        };
        let cancel = AcpCancel::new(process.stop_handle(), plan.cancel_grace);
        Ok(Self {
            process,
            stdin,
            started,
            plan,
            host,
            host_events: None,
            cancel,
            transcript: None,
        })
    }

    /// Merges the host-tool binding's events into the run's sequence.
    pub fn with_host_events(mut self, events: mpsc::Receiver<Event>) -> Self {
        self.host_events = Some(events);
        self
    }

    /// Sends every [`Note`] of the session to `transcript` as it is mapped (fixture capture:
    /// [`replay`] maps the same notes to the same events).
    pub fn with_transcript(mut self, transcript: mpsc::UnboundedSender<Note>) -> Self {
        self.transcript = Some(transcript);
        self
    }

    /// The session's cancel (see [`AcpCancel`]).
    pub fn cancel_handle(&self) -> AcpCancel {
        self.cancel.clone()
    }

    pub fn pid(&self) -> u32 {
        self.process.pid()
    }

    /// Runs the session to its end, like [`super::run::GeminiRun::drive_concluding`].
    pub async fn drive_concluding(
        mut self,
        mut sink: impl AsyncFnMut(RunItem),
        conclude: impl AsyncFnOnce(RunOutcome) -> RunOutcome,
    ) -> RunReport {
        let (incoming_tx, mut incoming_rx) = mpsc::channel::<io::Result<String>>(256);
        let (notes_tx, mut notes) = mpsc::unbounded_channel::<Note>();
        let incoming = futures_util::stream::poll_fn(move |cx| incoming_rx.poll_recv(cx));
        let sent = notes_tx.clone();
        let outgoing = futures_util::sink::unfold(self.stdin, move |mut stdin, line: String| {
            let sent = sent.clone();
            async move {
                stdin.write_all(line.as_bytes()).await?;
                stdin.write_all(b"\n").await?;
                stdin.flush().await?;
                let _ = sent.send(Note::Sent(line));
                Ok::<_, io::Error>(stdin)
            }
        });
        let expected = u32::try_from(self.plan.prompts.len()).unwrap_or(u32::MAX);
        let close_grace = self.plan.close_grace;
        let controller = tokio::spawn(session::control(
            Lines::new(Box::pin(outgoing), incoming),
            self.plan,
            self.host.clone(),
            self.cancel.clone(),
            notes_tx,
        ));
        let host = self.host.clone();
        let mut state = Loop {
            seq: 0,
            items: Vec::new(),
            events: AcpEvents::new(
                self.started.model.clone().unwrap_or_default(),
                Box::new(move |id| host.delivered(id)),
            ),
            stdin_seq: 0,
            transcript: self.transcript.take(),
        };
        state.emit(Event::RunStarted(self.started.clone()));
        let mut stderr_summary = StderrSummary::default();
        let mut incoming_tx = Some(incoming_tx);
        let mut notes_open = true;
        let stop = self.process.stop_handle();
        let outcome = loop {
            for item in state.items.drain(..) {
                sink(item).await;
            }
            tokio::select! {
                biased;
                event = self.process.next_event() => match event {
                    Some(ProcessEvent::Stdout(line)) => {
                        let text = line.text.clone();
                        let truncated = line.truncated;
                        state.items.push(RunItem::RawStdout(line));
                        let whole_json = !truncated
                            && serde_json::from_str::<serde::de::IgnoredAny>(&text).is_ok();
                        if !whole_json {
                            // Kept, and not handed to the engine, which would answer the guest
                            // with a parse error it never asked for.
                            state.note(Note::Unrecognized(
                                "a stdout line that is not one whole JSON-RPC message".into(),
                                None,
                                Value::String(text),
                            ));
                        } else if let Some(tx) = &incoming_tx
                            && tx.send(Ok(text)).await.is_err()
                        {
                            incoming_tx = None;
                        }
                    }
                    Some(ProcessEvent::Stderr(line)) => {
                        stderr_summary.push(&line.text);
                        state.items.push(RunItem::RawStderr(line));
                    }
                    Some(ProcessEvent::Finished(outcome)) => break outcome,
                    None => break crate::process::Outcome::supervisor_lost(),
                },
                note = notes.recv(), if notes_open => match note {
                    Some(Note::Done) => {
                        // The session is over: EOF on stdin, and a bound for the guest to go.
                        if !self.cancel.is_cancelled() {
                            let (stop, grace) = (stop.clone(), close_grace);
                            tokio::spawn(async move {
                                tokio::time::sleep(grace).await;
                                stop.stop(StopReason::Closed);
                            });
                        }
                    }
                    Some(note) => state.note(note),
                    None => notes_open = false,
                },
                host_event = recv_host(&mut self.host_events) => match host_event {
                    Some(event) => state.emit(event),
                    None => self.host_events = None,
                },
            }
        };
        // The guest is gone: its pipe closed, so the engine ends; drain what it reported.
        drop(incoming_tx);
        let _ = tokio::time::timeout(Duration::from_secs(5), controller).await;
        while let Ok(note) = notes.try_recv() {
            if !matches!(note, Note::Done) {
                state.note(note);
            }
        }
        let exit = guest_exit(&outcome.termination, outcome.exit);
        let hint = stderr_summary.message();
        let unrecognized = state.events.unrecognized();
        let (mut events, run_outcome) = state.events.finish(expected, exit, hint.as_deref());
        let run_outcome = conclude(run_outcome).await;
        if let Some(mut host) = self.host_events.take() {
            host.close();
            while let Some(event) = host.recv().await {
                state.emit(event);
            }
        }
        let final_text = super::run::conclude_events(&mut events, &run_outcome);
        for event in events {
            state.emit(event);
        }
        for item in state.items.drain(..) {
            sink(item).await;
        }
        RunReport {
            outcome: run_outcome,
            final_text,
            events: state.seq,
            unrecognized_lines: unrecognized,
            stdout: outcome.stdout,
            stderr_tail: outcome.stderr_tail,
            duration: outcome.duration,
        }
    }
}

async fn recv_host(events: &mut Option<mpsc::Receiver<Event>>) -> Option<Event> {
    match events {
        Some(rx) => rx.recv().await,
        None => std::future::pending().await,
    }
}

/// The run loop's state: the event sequence, the raw stdin lines and the note mapping.
struct Loop {
    seq: u64,
    items: Vec<RunItem>,
    events: AcpEvents,
    stdin_seq: u64,
    /// Every note, for a caller that keeps the transcript ([`AcpRun::with_transcript`]).
    transcript: Option<mpsc::UnboundedSender<Note>>,
}

impl Loop {
    fn emit(&mut self, event: Event) {
        self.items.push(RunItem::Event(Box::new(Envelope {
            seq: self.seq,
            at: Utc::now(),
            guest_timestamp: None,
            event,
        })));
        self.seq += 1;
    }

    fn note(&mut self, note: Note) {
        if let Some(transcript) = &self.transcript {
            let _ = transcript.send(note.clone());
        }
        if let Note::Sent(line) = &note {
            self.items.push(RunItem::RawStdin(Line {
                seq: self.stdin_seq,
                kept_bytes: line.len(),
                text: line.clone(),
                dropped_bytes: 0,
                truncated: false,
                invalid_utf8: false,
                terminated: true,
            }));
            self.stdin_seq += 1;
        }
        for event in self.events.note(note) {
            self.emit(event);
        }
    }
}
