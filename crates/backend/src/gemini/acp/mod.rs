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
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v1::schema::{
    AuthenticateRequest, CancelNotification, ClientCapabilities, ContentBlock, HttpHeader,
    Implementation, InitializeRequest, LoadSessionRequest, McpServer, McpServerHttp,
    NewSessionRequest, PromptRequest, RequestPermissionRequest, TextContent,
};
use agent_client_protocol::v1::{ConnectionTo, Dispatch};
use agent_client_protocol::{Agent, Client, Lines, UntypedMessage};
use chrono::Utc;
use serde_json::{Value, json};
use switchyard_events::acp::{Delivered, RpcError};
use switchyard_events::event::{Permission, PermissionChoice, PermissionOutcome, RunStarted};
use switchyard_events::gemini::StderrSummary;
use switchyard_events::{Envelope, ErrorKind, Event, OutcomeStatus, RunError, RunOutcome};
use tokio::io::AsyncWriteExt;
use tokio::sync::{Notify, mpsc};

use super::launch::{PreparedLaunch, Secret};
use super::run::{RunItem, RunLimits, RunReport, guest_exit};
use crate::process::{
    Limits, Line, ManagedProcess, ProcessEvent, ProcessSpec, SpawnError, StopHandle, StopReason,
    Watchdogs,
};

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

/// A permission decision on a delivered call.
#[derive(Debug, Clone, PartialEq)]
pub struct PermissionRuling {
    pub model_call_id: String,
    pub tool: String,
    /// The exact arguments the gateway delivered.
    pub arguments: Value,
    pub allow: bool,
    /// The rule that decided.
    pub rule: String,
}

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
#[derive(Clone)]
pub struct AcpCancel {
    cancelled: Arc<AtomicBool>,
    wake: Arc<Notify>,
    stop: StopHandle,
    grace: Duration,
}

impl AcpCancel {
    pub fn cancel(&self) {
        if self.cancelled.swap(true, Ordering::AcqRel) {
            return;
        }
        self.wake.notify_one();
        let (stop, grace) = (self.stop.clone(), self.grace);
        tokio::spawn(async move {
            tokio::time::sleep(grace).await;
            stop.cancel();
        });
    }
}

type Notes = mpsc::UnboundedSender<Note>;

pub mod notes;
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
        let mut process_limits = Limits::default();
        if let Some(max) = limits.max_line_bytes {
            process_limits.max_line_bytes = max;
        }
        let spec = ProcessSpec::new(&launch.program, &launch.cwd)
            .args(launch.args.iter().cloned())
            .limits(process_limits)
            .watchdogs(Watchdogs {
                overall_timeout: limits.timeout,
                inactivity_timeout: limits.inactivity,
            })
            .stop_policy(limits.stop_policy.clone())
            .with_stdin_pipe();
        let spec = launch.env.iter().fold(spec, |spec, (k, v)| spec.env(k, v));
        let mut process = ManagedProcess::spawn(spec)?;
        let Some(stdin) = process.take_stdin() else {
            return Err(SpawnError::Spawner(io::Error::other(
                "the guest's stdin is not piped",
            )));
        };
        let cancel = AcpCancel {
            cancelled: Arc::new(AtomicBool::new(false)),
            wake: Arc::new(Notify::new()),
            stop: process.stop_handle(),
            grace: plan.cancel_grace,
        };
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
        let controller = tokio::spawn(control(
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
                        if truncated || serde_json::from_str::<Value>(&text).is_err() {
                            state.note(Note::Unrecognized(
                                "a stdout line that is not one whole JSON-RPC message".into(),
                                None,
                                Value::String(text.clone()),
                            ));
                        }
                        if let Some(tx) = &incoming_tx && tx.send(Ok(text)).await.is_err() {
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
                        if !self.cancel.cancelled.load(Ordering::Acquire) {
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
        let events = std::mem::replace(
            &mut state.events,
            AcpEvents::new(String::new(), Box::new(|_| None)),
        );
        let (mut events, run_outcome) = events.finish(expected, exit, hint.as_deref());
        let run_outcome = conclude(run_outcome).await;
        if let Some(mut host) = self.host_events.take() {
            host.close();
            while let Some(event) = host.recv().await {
                state.emit(event);
            }
        }
        let mut final_text = None;
        for event in &mut events {
            if let Event::RunFinished(f) = event {
                f.status = run_outcome.status;
                f.error.clone_from(&run_outcome.error);
                f.result.clone_from(&run_outcome.result);
                final_text = f.final_text.clone();
            }
        }
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
        self.items.push(RunItem::Event(Envelope {
            seq: self.seq,
            at: Utc::now(),
            guest_timestamp: None,
            event,
        }));
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

/// The session's controller: handshake, prompts, cancel.
async fn control(
    transport: Lines<
        std::pin::Pin<Box<dyn futures_util::Sink<String, Error = io::Error> + Send>>,
        impl futures_util::Stream<Item = io::Result<String>> + Send + 'static,
    >,
    plan: AcpPlan,
    host: Arc<dyn AcpHost>,
    cancel: AcpCancel,
    notes: Notes,
) {
    let session = Arc::new(std::sync::Mutex::new(None::<String>));
    let handler = Handler {
        notes: notes.clone(),
        host,
        cancelled: cancel.cancelled.clone(),
        session: session.clone(),
    };
    let done = notes.clone();
    let result = Client
        .v1()
        .on_receive_dispatch(
            async move |message: Dispatch, _cx| handler.dispatch(message),
            agent_client_protocol::on_receive_dispatch!(),
        )
        .connect_with(transport, async move |cx: ConnectionTo<Agent>| {
            run_session(&cx, plan, &cancel, &notes, &session).await;
            let _ = notes.send(Note::Done);
            Ok(())
        })
        .await;
    if let Err(e) = result {
        let _ = done.send(Note::Failed(
            OutcomeStatus::Incomplete,
            RunError::new(
                ErrorKind::GuestFailure,
                format!("the ACP connection failed: {}", e.message),
            ),
        ));
    }
    let _ = done.send(Note::Done);
}

fn failed(notes: &Notes, kind: ErrorKind, message: String) {
    let _ = notes.send(Note::Failed(
        OutcomeStatus::Failed,
        RunError::new(kind, message),
    ));
}

/// A JSON-RPC error's message with its data, if any.
fn rpc_text(e: &agent_client_protocol::Error) -> String {
    match &e.data {
        Some(data) if !data.is_null() => format!("{} ({data})", e.message),
        _ => e.message.clone(),
    }
}

/// Whether an error came from the guest (an answer) rather than from the connection ending.
fn from_guest(e: &agent_client_protocol::Error) -> bool {
    !agent_client_protocol::is_connection_terminated(e)
        && !agent_client_protocol::is_incoming_transport_closed(e)
}

async fn run_session(
    cx: &ConnectionTo<Agent>,
    plan: AcpPlan,
    cancel: &AcpCancel,
    notes: &Notes,
    session: &std::sync::Mutex<Option<String>>,
) {
    let setup = tokio::time::timeout(plan.startup_timeout, start_session(cx, &plan)).await;
    let session_id = match setup {
        Ok(Ok(id)) => id,
        Ok(Err((kind, message))) => return failed(notes, kind, message),
        Err(_) => {
            return failed(
                notes,
                ErrorKind::GuestFailure,
                format!(
                    "the guest did not open its session within {:?}",
                    plan.startup_timeout
                ),
            );
        }
    };
    *session
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(session_id.clone());
    let _ = notes.send(Note::SessionStarted(session_id.clone()));
    let mut more = plan.more_prompts;
    let mut fixed = plan.prompts.into_iter();
    loop {
        let prompt = match fixed.next() {
            Some(prompt) => prompt,
            None => match &mut more {
                Some(rx) => tokio::select! {
                    next = rx.recv() => match next {
                        Some(prompt) => prompt,
                        None => return,
                    },
                    () = cancel.wake.notified() => return,
                },
                None => return,
            },
        };
        let prompt = &prompt;
        if cancel.cancelled.load(Ordering::Acquire) {
            return;
        }
        let _ = notes.send(Note::PromptSent(prompt.clone()));
        let request = PromptRequest::new(
            session_id.clone(),
            vec![ContentBlock::Text(TextContent::new(prompt.clone()))],
        );
        let answer = cx.send_request(request).block_task();
        tokio::pin!(answer);
        let answer = tokio::select! {
            answer = &mut answer => answer,
            () = cancel.wake.notified() => {
                let _ = cx.send_notification(CancelNotification::new(session_id.clone()));
                answer.await
            }
        };
        let answered = match answer {
            Ok(response) => Ok(serde_json::to_value(&response).unwrap_or(Value::Null)),
            Err(e) if from_guest(&e) => Err(RpcError {
                code: i64::from(i32::from(e.code)),
                message: e.message,
            }),
            // The guest went away: no answer (the outcome says the run is incomplete).
            Err(_) => return,
        };
        let ok = answered
            .as_ref()
            .is_ok_and(|v| v.get("stopReason").and_then(Value::as_str) == Some("end_turn"));
        let _ = notes.send(Note::PromptAnswered(answered));
        if !ok {
            return;
        }
    }
}

/// `initialize`, `authenticate`, then `session/new` or `session/load`: the session id.
async fn start_session(
    cx: &ConnectionTo<Agent>,
    plan: &AcpPlan,
) -> Result<String, (ErrorKind, String)> {
    let setup_error = |step: &str, e: agent_client_protocol::Error| {
        (
            ErrorKind::GuestFailure,
            format!("{step} failed: {}", e.message),
        )
    };
    let init = cx
        .send_request(
            InitializeRequest::new(PROTOCOL_VERSION)
                .client_capabilities(ClientCapabilities::new())
                .client_info(Implementation::new("switchyard", env!("CARGO_PKG_VERSION"))),
        )
        .block_task()
        .await
        .map_err(|e| setup_error("initialize", e))?;
    if init.protocol_version != PROTOCOL_VERSION {
        return Err((
            ErrorKind::GuestFailure,
            format!(
                "the guest answered protocol version {:?}; Switchyard speaks {:?}",
                init.protocol_version, PROTOCOL_VERSION
            ),
        ));
    }
    if !init
        .auth_methods
        .iter()
        .any(|m| m.id().0.as_ref() == "gateway")
    {
        return Err((
            ErrorKind::Auth,
            "the guest offers no `gateway` authentication method".into(),
        ));
    }
    let meta = json!({
        "gateway": { "baseUrl": plan.gateway_url, "headers": {} },
        "api-key": plan.gateway_key.expose(),
    });
    let meta = meta.as_object().cloned().unwrap_or_default();
    cx.send_request(AuthenticateRequest::new("gateway").meta(meta))
        .block_task()
        .await
        .map_err(|e| {
            (
                ErrorKind::Auth,
                format!("authenticate failed: {}", rpc_text(&e)),
            )
        })?;
    let servers: Vec<McpServer> =
        plan.mcp
            .iter()
            .map(|(url, token)| {
                McpServer::Http(
                    McpServerHttp::new(MCP_SERVER_NAME, url.clone()).headers(vec![
                        HttpHeader::new("Authorization", format!("Bearer {}", token.expose())),
                    ]),
                )
            })
            .collect();
    match &plan.resume {
        None => {
            let created = cx
                .send_request(NewSessionRequest::new(plan.cwd.clone()).mcp_servers(servers))
                .block_task()
                .await
                .map_err(|e| setup_error("session/new", e))?;
            Ok(created.session_id.0.to_string())
        }
        Some(id) => {
            cx.send_request(
                LoadSessionRequest::new(id.clone(), plan.cwd.clone()).mcp_servers(servers),
            )
            .block_task()
            .await
            .map_err(|e| {
                (
                    ErrorKind::Resume,
                    format!("session/load of {id} failed: {}", rpc_text(&e)),
                )
            })?;
            Ok(id.clone())
        }
    }
}

/// Answers what the guest asks and forwards what it says.
struct Handler {
    notes: Notes,
    host: Arc<dyn AcpHost>,
    cancelled: Arc<AtomicBool>,
    session: Arc<std::sync::Mutex<Option<String>>>,
}

impl Handler {
    fn dispatch(&self, message: Dispatch) -> Result<(), agent_client_protocol::Error> {
        match message {
            Dispatch::Notification(n) => {
                if n.method == "session/update" {
                    let _ = self.notes.send(Note::Update(n.params));
                } else {
                    self.unrecognized("a notification with no mapping", &n);
                }
                Ok(())
            }
            Dispatch::Request(request, responder) => {
                if request.method == "session/request_permission" {
                    return match self.permission(&request.params) {
                        Ok(answer) => responder.respond(answer),
                        Err(error) => responder.respond_with_error(error),
                    };
                }
                self.unrecognized("a request Switchyard does not serve", &request);
                responder.respond_with_error(agent_client_protocol::Error::method_not_found())
            }
            Dispatch::Response(result, router) => router.route_with_result(result),
        }
    }

    fn unrecognized(&self, why: &str, message: &UntypedMessage) {
        let _ = self.notes.send(Note::Unrecognized(
            format!("{why}: {}", message.method),
            Some(message.method.clone()),
            message.params.clone(),
        ));
    }

    /// Decides one `session/request_permission`; the answer, or the error to answer with.
    fn permission(&self, params: &Value) -> Result<Value, agent_client_protocol::Error> {
        let refuse = |tool_call_id: String, options, reason: String| {
            let _ = self.notes.send(Note::Permission(Box::new(Permission {
                tool_call_id,
                model_call_id: None,
                tool: None,
                arguments: None,
                options,
                outcome: PermissionOutcome::Refused,
                rule: None,
                option_id: None,
                reason: Some(reason.clone()),
            })));
            Err(agent_client_protocol::Error::invalid_params().data(Value::String(reason)))
        };
        let request: RequestPermissionRequest = match serde_json::from_value(params.clone()) {
            Ok(r) => r,
            Err(e) => {
                let id = params
                    .pointer("/toolCall/toolCallId")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned();
                return refuse(
                    id,
                    Vec::new(),
                    format!("unreadable permission request: {e}"),
                );
            }
        };
        let tool_call_id = request.tool_call.tool_call_id.0.to_string();
        let options: Vec<PermissionChoice> = request
            .options
            .iter()
            .map(|o| PermissionChoice {
                option_id: o.option_id.0.to_string(),
                kind: serde_json::to_value(o.kind)
                    .ok()
                    .and_then(|k| k.as_str().map(str::to_owned))
                    .unwrap_or_default(),
                name: o.name.clone(),
            })
            .collect();
        let active = self
            .session
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        if active.as_deref() != Some(request.session_id.0.as_ref()) {
            return refuse(
                tool_call_id,
                options,
                format!("session {} is not the active session", request.session_id.0),
            );
        }
        let _ = self.notes.send(Note::PermissionAsked(tool_call_id.clone()));
        if self.cancelled.load(Ordering::Acquire) {
            let _ = self.notes.send(Note::Permission(Box::new(Permission {
                tool_call_id,
                model_call_id: None,
                tool: None,
                arguments: None,
                options,
                outcome: PermissionOutcome::Cancelled,
                rule: None,
                option_id: None,
                reason: None,
            })));
            return Ok(json!({"outcome": {"outcome": "cancelled"}}));
        }
        let ruling = match self.host.permission(&tool_call_id) {
            Ok(ruling) => ruling,
            Err(reason) => return refuse(tool_call_id, options, reason),
        };
        let kind = if ruling.allow {
            "allow_once"
        } else {
            "reject_once"
        };
        let matching: Vec<&PermissionChoice> = options.iter().filter(|o| o.kind == kind).collect();
        let [chosen] = matching.as_slice() else {
            let reason = format!(
                "{} options of kind {kind}: the policy's choice is not unique",
                matching.len()
            );
            return refuse(tool_call_id, options, reason);
        };
        let option_id = chosen.option_id.clone();
        let _ = self.notes.send(Note::Permission(Box::new(Permission {
            tool_call_id,
            model_call_id: Some(ruling.model_call_id),
            tool: Some(ruling.tool),
            arguments: (!ruling.arguments.is_null()).then_some(ruling.arguments),
            options,
            outcome: if ruling.allow {
                PermissionOutcome::Allowed
            } else {
                PermissionOutcome::Rejected
            },
            rule: Some(ruling.rule),
            option_id: Some(option_id.clone()),
            reason: None,
        })));
        Ok(json!({"outcome": {"outcome": "selected", "optionId": option_id}}))
    }
}
