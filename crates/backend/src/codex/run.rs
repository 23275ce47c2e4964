//! One Codex run on the neutral driver: the managed process is `codex app-server` with stdin
//! piped; the controller speaks its JSON-RPC over [`crate::jsonrpc::Pump`] and reports every
//! stdout line as a note.
//!
//! - `initialize` (client `switchyard`), `initialized`, then `thread/start` (cwd, approval
//!   policy, sandbox, model, provider, not ephemeral) or `thread/resume {threadId}` for a
//!   recorded thread; the thread is the session.
//! - One `turn/start` per prompt, in one thread; a prompt ends with its `turn/completed`, and
//!   the next one is sent then. After the last one stdin is closed and the server exits.
//! - Approvals (`item/commandExecution/requestApproval`, `item/fileChange/requestApproval`,
//!   `mcpServer/elicitation/request`) are answered from the host's policy, matched to the call
//!   the gateway delivered: the request's `itemId` is the delivered call id; an elicitation
//!   names no item, so it is matched to the open `mcpToolCall` item of that server, tool and
//!   arguments. Any other server request is answered with an error (refused).
//! - Cancel sends `turn/interrupt` (the server then ends the turn `interrupted`); the process
//!   group is stopped after the cancel grace.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use switchyard_events::codex::CodexNormalizer;
use switchyard_events::event::{Permission, PermissionChoice, PermissionOutcome, RunStarted};
use switchyard_events::gemini::{Normalized, StderrSummary};
use switchyard_events::tools::codex_tool_category;
use switchyard_events::values::same_value;
use switchyard_events::{
    Delivered, ErrorKind, Event, GuestExit, OutcomeStatus, RunError, RunOutcome,
};
use switchyard_protocol::codex::{
    self as wire, ApprovalDecision, ElicitationAction, KnownItem, Notification, ServerRequest,
    ThreadItem,
};
use tokio::sync::mpsc;

use super::launch::{APPROVAL_POLICY, PROVIDER, PreparedCodex, SANDBOX};
use crate::driver::{Controller, ControllerIo, Driver, Mapping, RunItem, RunLimits, guest_spec};
use crate::jsonrpc::{Incoming, JsonRpc, Pump, RpcError};
use crate::permission::{PermissionAsk, PermissionHost, PermissionRuling};
use crate::process::cancel::GracefulCancel;
use crate::process::{Line, ManagedProcess, SpawnError};

/// Notifications Switchyard asks the server not to send (provider rate-limit snapshots).
const OPT_OUT: &[&str] = &["account/rateLimits/updated"];

/// What a run does.
#[derive(Debug)]
pub struct CodexPlan {
    pub prompts: Vec<String>,
    /// More prompts, sent in turn after `prompts` until the channel closes.
    pub more_prompts: Option<mpsc::Receiver<String>>,
    /// A recorded thread to resume (its id), with the same `CODEX_HOME` contents.
    pub resume: Option<String>,
    /// After stdin is closed, how long the server has to exit on its own.
    pub close_grace: Duration,
    /// After an interrupt, how long the turn has before the group is stopped.
    pub cancel_grace: Duration,
}

/// One thing the run observed or did.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Note {
    /// The thread Switchyard started or resumed.
    Thread { thread_id: String, model: String },
    /// A prompt about to be sent (`turn/start`).
    PromptSent(String),
    /// A stdout line of the server's (a notification, or what is not JSON-RPC), as received.
    Line(String),
    /// A server request Switchyard does not serve (answered with an error), as received.
    Unserved(String),
    /// What the gateway delivered under a call id a line named.
    Delivered {
        call_id: String,
        call: Option<Box<Delivered>>,
    },
    /// Switchyard's answer to an approval request.
    Permission(Box<Permission>),
    /// The run failed outside a prompt.
    Failed(OutcomeStatus, RunError),
}

/// The events `note` maps to.
pub fn apply(normalizer: &mut CodexNormalizer, note: &Note) -> Vec<Event> {
    match note {
        Note::Thread { thread_id, model } => normalizer.thread(thread_id, model),
        Note::PromptSent(text) => vec![normalizer.prompt_sent(text)],
        Note::Line(text) => match serde_json::from_str::<Value>(text) {
            Ok(message) => match (
                message.get("method").and_then(Value::as_str),
                message.get("id"),
            ) {
                (Some(method), None) => {
                    normalizer.notification(method, message.get("params").unwrap_or(&Value::Null))
                }
                // An answer to a request of Switchyard's (read by the controller).
                (None, Some(_))
                    if message.get("result").is_some() || message.get("error").is_some() =>
                {
                    Vec::new()
                }
                _ => {
                    vec![normalizer.unrecognized_text(text, "a message that is not a notification")]
                }
            },
            Err(_) => vec![normalizer.unrecognized_text(text, "a stdout line that is not JSON")],
        },
        Note::Unserved(text) => {
            let message: Value = serde_json::from_str(text).unwrap_or(Value::Null);
            vec![
                normalizer.unserved_request(
                    message
                        .get("method")
                        .and_then(Value::as_str)
                        .unwrap_or_default(),
                    &message,
                ),
            ]
        }
        Note::Delivered { call_id, call } => {
            normalizer.delivered(call_id, call.as_deref().cloned());
            Vec::new()
        }
        Note::Permission(permission) => vec![normalizer.permission((**permission).clone())],
        Note::Failed(status, error) => {
            normalizer.fail(*status, error.clone());
            Vec::new()
        }
    }
}

/// The events and outcome a note transcript maps to, `run_finished` included (its `exit` and
/// `fallback_message` as the run saw them): recorded runs replay through it.
pub fn replay(
    notes: impl IntoIterator<Item = Note>,
    expected_prompts: u32,
    exit: GuestExit,
    fallback_message: Option<&str>,
) -> (Vec<Event>, RunOutcome) {
    let mut normalizer = CodexNormalizer::default();
    let mut events = Vec::new();
    for note in notes {
        events.extend(apply(&mut normalizer, &note));
    }
    let (end, outcome) = normalizer.finish(expected_prompts, exit, fallback_message);
    events.extend(end);
    (events, outcome)
}

/// Codex's notes → canonical events and outcome.
pub struct CodexMapping {
    normalizer: CodexNormalizer,
    expected_prompts: u32,
}

impl Mapping for CodexMapping {
    type Note = Note;

    fn calls_named(&self, note: &Note) -> Vec<String> {
        let Note::Line(text) = note else {
            return Vec::new();
        };
        let Ok(message) = serde_json::from_str::<Value>(text) else {
            return Vec::new();
        };
        match message.get("method").and_then(Value::as_str) {
            Some(method) => {
                CodexNormalizer::named_calls(method, message.get("params").unwrap_or(&Value::Null))
            }
            None => Vec::new(),
        }
    }

    fn delivered_note(&self, call_id: String, call: Option<Delivered>) -> Note {
        Note::Delivered {
            call_id,
            call: call.map(Box::new),
        }
    }

    fn note(&mut self, note: Note) -> Vec<Normalized> {
        crate::driver::untimed(apply(&mut self.normalizer, &note))
    }

    fn unrecognized(&self) -> u64 {
        self.normalizer.unrecognized()
    }

    fn finish(
        &mut self,
        exit: GuestExit,
        _stderr: &StderrSummary,
        stderr_tail: &str,
    ) -> (Vec<Event>, RunOutcome) {
        let hint = stderr_tail
            .lines()
            .rev()
            .find(|l| !l.trim().is_empty())
            .map(str::to_owned);
        std::mem::take(&mut self.normalizer).finish(self.expected_prompts, exit, hint.as_deref())
    }
}

/// Spawns `codex app-server` (stdin piped): a driver ready to drive the run.
pub fn codex(
    launch: &PreparedCodex,
    limits: &RunLimits,
    started: RunStarted,
    plan: CodexPlan,
    host: Arc<dyn PermissionHost>,
) -> Result<Driver<CodexMapping>, SpawnError> {
    let spec = guest_spec(
        &launch.program,
        &launch.args,
        &launch.env,
        &launch.cwd,
        limits,
    )
    .with_stdin_pipe();
    let process = ManagedProcess::spawn(spec)?;
    let cancel = GracefulCancel::new(process.stop_handle(), plan.cancel_grace);
    let mapping = CodexMapping {
        normalizer: CodexNormalizer::default(),
        expected_prompts: u32::try_from(plan.prompts.len()).unwrap_or(u32::MAX),
    };
    let controller = CodexController {
        plan,
        cwd: launch.cwd.to_string_lossy().into_owned(),
        model: launch.model.clone(),
        mount_points: launch.mount_points.clone(),
    };
    Ok(Driver {
        process,
        started,
        mapping,
        controller: Box::new(controller),
        cancel,
        host,
        host_events: None,
        launch_events: launch
            .warnings
            .iter()
            .map(|message| {
                Event::Warning(switchyard_events::event::Warning {
                    message: message.clone(),
                    derived: true,
                })
            })
            .collect(),
        transcript: None,
    })
}

struct CodexController {
    plan: CodexPlan,
    cwd: String,
    model: String,
    mount_points: Vec<std::path::PathBuf>,
}

impl Controller for CodexController {
    type Note = Note;

    fn run(
        self: Box<Self>,
        io: ControllerIo<Note>,
    ) -> futures_util::future::BoxFuture<'static, ()> {
        Box::pin(session(*self, io))
    }
}

/// A stdin line as the raw record keeps it.
fn stdin_line(seq: u64, text: &str) -> RunItem {
    RunItem::RawStdin(Line {
        seq,
        kept_bytes: text.len(),
        text: text.to_owned(),
        dropped_bytes: 0,
        truncated: false,
        invalid_utf8: false,
        terminated: true,
    })
}

fn failed(kind: ErrorKind, message: impl Into<String>) -> Note {
    let status = match kind {
        ErrorKind::Cancelled => OutcomeStatus::Cancelled,
        _ => OutcomeStatus::Failed,
    };
    Note::Failed(status, RunError::new(kind, message))
}

/// An MCP tool item that started and has not completed (elicitations name none).
#[derive(Debug)]
struct OpenMcp {
    item_id: String,
    server: String,
    tool: String,
    arguments: Value,
    asked: bool,
}

/// The session's state while lines arrive.
struct Session {
    io: ControllerIo<Note>,
    pump: Pump<JsonRpc>,
    thread_id: Option<String>,
    turn_id: Option<String>,
    /// The running turn ended (`turn/completed`).
    turn_done: bool,
    /// Cancel asked, the interrupt not sent yet (no turn id known).
    interrupt_pending: bool,
    interrupted: bool,
    mcp: Vec<OpenMcp>,
}

impl Session {
    /// Sends a request and handles the server's lines until its answer (`None`: the server's
    /// stdout ended first).
    async fn call(&mut self, method: &str, params: Value) -> Option<Result<Value, RpcError>> {
        let pump = self.pump.clone();
        let method = method.to_owned();
        let answer = async move { pump.request(&method, params).await };
        tokio::pin!(answer);
        loop {
            tokio::select! {
                biased;
                result = &mut answer => return Some(result),
                line = self.io.stdout.recv() => {
                    let line = line?;
                    self.on_line(&line).await;
                }
            }
        }
    }

    /// Sends `turn/interrupt` for the running turn without waiting for its answer.
    fn interrupt(&mut self) {
        let (Some(thread_id), Some(turn_id)) = (&self.thread_id, &self.turn_id) else {
            self.interrupt_pending = true;
            return;
        };
        self.interrupt_pending = false;
        self.interrupted = true;
        let params = json!({"threadId": thread_id, "turnId": turn_id});
        let pump = self.pump.clone();
        // The answer comes on stdout, which the session reads.
        tokio::spawn(async move { pump.request(wire::method::TURN_INTERRUPT, params).await });
    }

    /// One stdout line.
    async fn on_line(&mut self, line: &Line) {
        if line.truncated {
            self.io.note(Note::Line(line.text.clone()));
            return;
        }
        match self.pump.receive(&line.text) {
            Incoming::Response { .. } => {}
            Incoming::Request { id, method, params } => {
                self.io.cancel.stop_handle().touch();
                if let Some(item) = params.get("itemId").and_then(Value::as_str) {
                    self.await_delivered(item).await;
                }
                let answer = self.request(&method, &params, &id, &line.text);
                let _ = self.pump.respond(&id, answer).await;
            }
            Incoming::Notification { method, params } => {
                self.io.cancel.stop_handle().touch();
                // The mapping looks a tool item's call up once, when it is noted.
                if let Some(call) = CodexNormalizer::named_calls(&method, &params).first() {
                    self.await_delivered(call).await;
                }
                self.track(&method, &params);
                self.io.note(Note::Line(line.text.clone()));
            }
            Incoming::Other(_) => self.io.note(Note::Line(line.text.clone())),
        }
    }

    /// Waits until the gateway confirms it delivered `call_id` (Codex acts on a call as soon as
    /// its `response.output_item.done` arrives, before the answer's last frame is handed over).
    async fn await_delivered(&self, call_id: &str) {
        crate::permission::await_confirmed(self.io.host.as_ref(), call_id).await;
    }

    /// What a notification tells the controller itself: the turn, the open MCP calls.
    fn track(&mut self, method: &str, params: &Value) {
        match wire::parse_notification(method, params) {
            Notification::TurnStarted(n) if self.turn_id.is_none() => {
                self.turn_id = Some(n.turn.id.clone());
                if self.interrupt_pending {
                    self.interrupt();
                }
            }
            Notification::TurnCompleted(n) if Some(&n.turn.id) == self.turn_id.as_ref() => {
                self.turn_done = true;
                // An interrupted or failed turn sends no `item/completed` for its open items:
                // none of them may take a later turn's elicitation.
                self.mcp.clear();
            }
            Notification::ItemStarted(n) => {
                if let ThreadItem::Known(item) = &n.item
                    && let KnownItem::McpToolCall(call) = item.as_ref()
                {
                    self.mcp.push(OpenMcp {
                        item_id: call.id.clone(),
                        server: call.server.clone(),
                        tool: call.tool.clone(),
                        arguments: call.arguments.clone(),
                        asked: false,
                    });
                }
            }
            Notification::ItemCompleted(n) => {
                if let Some(id) = n.item.id() {
                    self.mcp.retain(|open| open.item_id != id);
                }
            }
            _ => {}
        }
    }

    /// The answer to a server request (and its note).
    fn request(
        &mut self,
        method: &str,
        params: &Value,
        id: &Value,
        line: &str,
    ) -> Result<Value, RpcError> {
        let cancelling = self.io.cancel.is_cancelled();
        let (ask, decision_kind) = match wire::parse_server_request(method, params) {
            ServerRequest::CommandApproval(p) => (Ok(p.item_id.clone()), Kind::Approval),
            ServerRequest::FileChangeApproval(p) => (Ok(p.item_id.clone()), Kind::Approval),
            ServerRequest::Elicitation(p) => {
                let meta = p.meta.clone().unwrap_or(Value::Null);
                let tool = meta.get("tool_name").and_then(Value::as_str);
                let arguments = meta.get("tool_params").cloned().unwrap_or(Value::Null);
                let open = self.mcp.iter_mut().find(|open| {
                    !open.asked
                        && open.server == p.server_name
                        && Some(open.tool.as_str()) == tool
                        && same_value(&open.arguments, &arguments)
                });
                let named = match open {
                    Some(open) => {
                        open.asked = true;
                        Ok(open.item_id.clone())
                    }
                    None => Err(format!(
                        "the elicitation of server {:?} names no open MCP tool call",
                        p.server_name
                    )),
                };
                (named, Kind::Elicitation)
            }
            ServerRequest::Unknown { .. } | ServerRequest::Invalid { .. } => {
                self.io.note(Note::Unserved(line.to_owned()));
                return Err(RpcError::Answered {
                    code: -32601,
                    message: format!("Switchyard does not serve server request {method:?}"),
                    data: None,
                });
            }
        };
        let (permission, answer) = decide(
            self.io.host.as_ref(),
            id,
            ask,
            params,
            decision_kind,
            cancelling,
        );
        self.io.note(Note::Permission(Box::new(permission)));
        Ok(answer)
    }
}

/// Which answer shape a request takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// `{decision: accept|decline|cancel}`.
    Approval,
    /// `{action: accept|decline|cancel}`.
    Elicitation,
}

/// A delivered call's arguments without the private identity the gateway may add to host-tool
/// calls (the guest's are the model's own).
fn without_identity(arguments: &Value) -> Value {
    let mut arguments = arguments.clone();
    if let Value::Object(object) = &mut arguments {
        object.remove(switchyard_events::delivered::IDENTITY_ARG);
    }
    arguments
}

/// The host's answer to an approval request (`named`: the item id it names, or why it names
/// none), and the permission event.
fn decide(
    host: &dyn PermissionHost,
    id: &Value,
    named: Result<String, String>,
    params: &Value,
    kind: Kind,
    cancelling: bool,
) -> (Permission, Value) {
    let delivered = named.as_ref().ok().and_then(|item| host.delivered(item));
    let ruling: Result<PermissionRuling, String> = match (&named, &delivered) {
        _ if cancelling => Err("the run is being cancelled".to_owned()),
        (Err(why), _) => Err(why.clone()),
        (Ok(item), None) => Err(format!("item {item:?} is not a call the gateway delivered")),
        (Ok(item), Some(call)) => {
            if kind == Kind::Elicitation {
                let shown = params
                    .pointer("/_meta/tool_params")
                    .cloned()
                    .unwrap_or(Value::Null);
                if !same_value(&without_identity(&call.arguments), &shown) {
                    return refusal(
                        id,
                        item,
                        Some(call),
                        kind,
                        "the guest's arguments differ from the delivered call's",
                    );
                }
            }
            host.permission(&PermissionAsk {
                named: item.clone(),
                call_id: Some(call.call_id.clone()),
                tool: call.tool.clone(),
                category: codex_tool_category(&call.tool),
                own: true,
                details: params.clone(),
            })
        }
    };
    let item = named.as_deref().ok().unwrap_or_default();
    match ruling {
        Ok(ruling) => {
            let allow = ruling.allow;
            let (option, answer) = answer(kind, allow);
            let permission = Permission {
                tool_call_id: id_text(id),
                model_call_id: Some(ruling.model_call_id.clone()),
                call_id: Some(item.to_owned()),
                tool: Some(ruling.tool.clone()),
                arguments: Some(ruling.arguments.clone()),
                options: options(kind),
                outcome: if allow {
                    PermissionOutcome::Allowed
                } else {
                    PermissionOutcome::Rejected
                },
                rule: Some(ruling.rule),
                option_id: Some(option.to_owned()),
                reason: None,
            };
            (permission, answer)
        }
        Err(why) if cancelling => {
            let answer = match kind {
                Kind::Approval => json!({"decision": ApprovalDecision::Cancel}),
                Kind::Elicitation => json!({"action": ElicitationAction::Cancel}),
            };
            let mut permission = refusal(id, item, delivered.as_ref(), kind, &why).0;
            permission.outcome = PermissionOutcome::Cancelled;
            permission.option_id = Some("cancel".to_owned());
            (permission, answer)
        }
        Err(why) => refusal(id, item, delivered.as_ref(), kind, &why),
    }
}

/// A request refused (answered `decline`).
fn refusal(
    id: &Value,
    item: &str,
    delivered: Option<&Delivered>,
    kind: Kind,
    why: &str,
) -> (Permission, Value) {
    let (option, answer) = answer(kind, false);
    let permission = Permission {
        tool_call_id: id_text(id),
        model_call_id: delivered.map(|d| d.model_call_id.clone()),
        call_id: (!item.is_empty()).then(|| item.to_owned()),
        tool: delivered.map(|d| d.tool.clone()),
        arguments: None,
        options: options(kind),
        outcome: PermissionOutcome::Refused,
        rule: None,
        option_id: Some(option.to_owned()),
        reason: Some(format!("Switchyard refused this approval request: {why}")),
    };
    (permission, answer)
}

fn answer(kind: Kind, allow: bool) -> (&'static str, Value) {
    match (kind, allow) {
        (Kind::Approval, true) => ("accept", json!({"decision": ApprovalDecision::Accept})),
        (Kind::Approval, false) => ("decline", json!({"decision": ApprovalDecision::Decline})),
        (Kind::Elicitation, true) => (
            "accept",
            json!({"action": ElicitationAction::Accept, "content": {}}),
        ),
        (Kind::Elicitation, false) => ("decline", json!({"action": ElicitationAction::Decline})),
    }
}

fn options(kind: Kind) -> Vec<PermissionChoice> {
    let _ = kind;
    ["accept", "decline", "cancel"]
        .map(|o| PermissionChoice {
            option_id: o.to_owned(),
            kind: o.to_owned(),
            name: o.to_owned(),
        })
        .to_vec()
}

fn id_text(id: &Value) -> String {
    id.as_str().map_or_else(|| id.to_string(), str::to_owned)
}

async fn session(controller: CodexController, mut io: ControllerIo<Note>) {
    let CodexController {
        mut plan,
        cwd,
        model,
        mount_points,
    } = controller;
    let Some(stdin) = io.stdin.take() else {
        io.note(failed(
            ErrorKind::GuestFailure,
            "the guest's stdin is not piped",
        ));
        io.done(Duration::ZERO);
        return;
    };
    let raw = io.reports.clone();
    let seq = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let pump = Pump::new(
        JsonRpc {
            version_field: false,
        },
        stdin,
        move |line: &str| {
            let n = seq.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let _ = raw.send(crate::driver::Report::Raw(stdin_line(n, line)));
        },
    );
    let mut s = Session {
        io,
        pump,
        thread_id: None,
        turn_id: None,
        turn_done: false,
        interrupt_pending: false,
        interrupted: false,
        mcp: Vec::new(),
    };
    if s.handshake(&mut plan, &cwd, &model).await {
        s.prompts(&mut plan).await;
    }
    let Session { mut io, pump, .. } = s;
    // stdin closes once the last clone of the pump is gone: the server exits on EOF. Closing
    // it first fails any request still waiting for an answer (a `turn/interrupt` whose answer
    // never came), so no task keeps a clone.
    pump.close();
    drop(pump);
    drain(&mut io, plan.close_grace).await;
    super::launch::remove_empty_mount_points(&mount_points);
}

impl Session {
    /// `initialize`, `initialized`, and the thread; false when the run cannot go on.
    async fn handshake(&mut self, plan: &mut CodexPlan, cwd: &str, model: &str) -> bool {
        let init = json!({
            "clientInfo": {"name": "switchyard", "title": "Switchyard",
                "version": env!("CARGO_PKG_VERSION")},
            "capabilities": {"experimentalApi": false, "optOutNotificationMethods": OPT_OUT},
        });
        match self.call(wire::method::INITIALIZE, init).await {
            Some(Ok(_)) => {}
            Some(Err(e)) => {
                self.io
                    .note(failed(ErrorKind::GuestFailure, format!("initialize: {e}")));
                return false;
            }
            None => return false,
        }
        if self
            .pump
            .notify(wire::method::INITIALIZED, Value::Null)
            .await
            .is_err()
        {
            return false;
        }
        let (method, params, kind) = match &plan.resume {
            Some(thread_id) => (
                wire::method::THREAD_RESUME,
                json!({"threadId": thread_id, "cwd": cwd, "approvalPolicy": APPROVAL_POLICY,
                    "sandbox": SANDBOX, "model": model, "modelProvider": PROVIDER,
                    "excludeTurns": true}),
                ErrorKind::Resume,
            ),
            None => (
                wire::method::THREAD_START,
                json!({"cwd": cwd, "approvalPolicy": APPROVAL_POLICY, "sandbox": SANDBOX,
                    "model": model, "modelProvider": PROVIDER, "ephemeral": false}),
                ErrorKind::GuestFailure,
            ),
        };
        let answer = match self.call(method, params).await {
            Some(Ok(answer)) => answer,
            Some(Err(e)) => {
                self.io.note(failed(kind, format!("{method}: {e}")));
                return false;
            }
            None => return false,
        };
        let thread_id = answer.pointer("/thread/id").and_then(Value::as_str);
        let Some(thread_id) = thread_id else {
            self.io.note(failed(
                ErrorKind::GuestFailure,
                format!("{method} answered without a thread id"),
            ));
            return false;
        };
        self.thread_id = Some(thread_id.to_owned());
        self.io.note(Note::Thread {
            thread_id: thread_id.to_owned(),
            model: answer
                .get("model")
                .and_then(Value::as_str)
                .unwrap_or(model)
                .to_owned(),
        });
        true
    }

    /// One turn per prompt, each to its `turn/completed`.
    async fn prompts(&mut self, plan: &mut CodexPlan) {
        let stop = self.io.cancel.stop_handle().clone();
        let mut prompts: VecDeque<String> = plan.prompts.drain(..).collect();
        let mut more = plan.more_prompts.take();
        loop {
            let prompt = match prompts.pop_front() {
                Some(p) => Some(p),
                None => match &mut more {
                    Some(rx) => {
                        stop.pause_inactivity();
                        rx.recv().await
                    }
                    None => None,
                },
            };
            let Some(prompt) = prompt else { break };
            if self.io.cancel.is_cancelled() {
                break;
            }
            stop.resume_inactivity();
            self.io.note(Note::PromptSent(prompt.clone()));
            self.turn_id = None;
            self.turn_done = false;
            let Some(thread_id) = self.thread_id.clone() else {
                break;
            };
            let params = json!({"threadId": thread_id,
                "input": [{"type": "text", "text": prompt, "text_elements": []}]});
            match self.call(wire::method::TURN_START, params).await {
                Some(Ok(answer)) => {
                    if self.turn_id.is_none() {
                        self.turn_id = answer
                            .pointer("/turn/id")
                            .and_then(Value::as_str)
                            .map(str::to_owned);
                    }
                }
                Some(Err(e)) => {
                    self.io
                        .note(failed(ErrorKind::GuestFailure, format!("turn/start: {e}")));
                    break;
                }
                None => break,
            }
            if self.interrupt_pending {
                self.interrupt();
            }
            if !self.until_turn_completed().await {
                break;
            }
            if self.interrupted {
                break;
            }
        }
    }

    /// Reads lines until the running turn completes (false: the server's stdout ended).
    async fn until_turn_completed(&mut self) -> bool {
        while !self.turn_done {
            let cancel = self.io.cancel.clone();
            tokio::select! {
                biased;
                line = self.io.stdout.recv() => {
                    let Some(line) = line else { return false };
                    self.on_line(&line).await;
                }
                () = cancel.notified(), if !self.interrupted && !self.interrupt_pending => {
                    self.interrupt();
                }
            }
        }
        true
    }
}

/// After the last prompt: the server's remaining lines until it exits (bounded by `grace`).
async fn drain(io: &mut ControllerIo<Note>, grace: Duration) {
    let deadline = tokio::time::Instant::now() + grace;
    io.done(grace);
    while let Ok(Some(line)) = tokio::time::timeout_at(deadline, io.stdout.recv()).await {
        io.note(Note::Line(line.text));
    }
}

#[cfg(test)]
#[path = "run_tests.rs"]
mod tests;
