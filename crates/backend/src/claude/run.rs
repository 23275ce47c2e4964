//! One Claude Code run on the neutral driver: the managed process reads stream-json on stdin;
//! the controller writes each prompt as a `user` message, answers the guest's control requests
//! and reports every stdout line as a note.
//!
//! - A prompt ends with its `result`; the next prompt is written then. After the last one stdin
//!   is closed and the guest exits on its own (a background subagent's later `result` still
//!   arrives before that).
//! - `can_use_tool` is answered from the host's policy, matched to the delivered call by its
//!   `tool_use_id` (the gateway's id); the guest's input must equal what was delivered (as
//!   values). Any other control request is answered with an error (refused by default).
//! - Cancel sends the `interrupt` control request (the guest then ends the turn with a
//!   `result`); the process group is stopped after the cancel grace.
//! - Only whole JSON lines are written: a line that is not JSON kills the guest.

use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use switchyard_events::claude::ClaudeNormalizer;
use switchyard_events::event::{Permission, PermissionChoice, PermissionOutcome, RunStarted};
use switchyard_events::gemini::{Normalized, StderrSummary};
use switchyard_events::tools::claude_tool_category;
use switchyard_events::values::same_value;
use switchyard_events::{Delivered, Event, GuestExit, OutcomeStatus, RunError, RunOutcome};
use tokio::sync::mpsc;

use super::launch::PreparedClaude;
use crate::driver::{Controller, ControllerIo, Driver, Mapping, RunItem, RunLimits, guest_spec};
use crate::jsonrpc::{Dialect, Incoming, Pump, RpcError};
use crate::permission::{PermissionAsk, PermissionHost, PermissionRuling};
use crate::process::cancel::GracefulCancel;
use crate::process::{Line, ManagedProcess, SpawnError};

/// What a run does.
#[derive(Debug)]
pub struct ClaudePlan {
    pub prompts: Vec<String>,
    /// More prompts, sent in turn after `prompts` until the channel closes.
    pub more_prompts: Option<mpsc::Receiver<String>>,
    /// After stdin is closed, how long the guest has to exit on its own.
    pub close_grace: Duration,
    /// After an interrupt, how long the guest has before its group is stopped.
    pub cancel_grace: Duration,
}

/// One thing the run observed or did.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Note {
    /// A prompt about to be written.
    PromptSent(String),
    /// A stdout line of the guest's (not a control message), as received.
    Line(String),
    /// What the gateway delivered under a call id a line named.
    Delivered {
        call_id: String,
        call: Option<Box<Delivered>>,
    },
    /// Switchyard's answer to a `can_use_tool` request.
    Permission(Box<Permission>),
    /// The run failed outside a prompt.
    Failed(OutcomeStatus, RunError),
}

/// The events `note` maps to.
pub fn apply(normalizer: &mut ClaudeNormalizer, note: &Note) -> Vec<Event> {
    match note {
        Note::PromptSent(text) => vec![normalizer.prompt_sent(text)],
        Note::Line(text) => match serde_json::from_str::<Value>(text) {
            Ok(line) => normalizer.line(&line),
            Err(_) => vec![normalizer.unrecognized_text(text)],
        },
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
/// `fallback_message` as the run saw them): the fixtures of `switchyard-dev capture --agent
/// claude-code` replay through it.
pub fn replay(
    notes: impl IntoIterator<Item = Note>,
    expected_prompts: u32,
    exit: GuestExit,
    fallback_message: Option<&str>,
) -> (Vec<Event>, RunOutcome) {
    let mut normalizer = ClaudeNormalizer::default();
    let mut events = Vec::new();
    for note in notes {
        events.extend(apply(&mut normalizer, &note));
    }
    let (end, outcome) = normalizer.finish(expected_prompts, exit, fallback_message);
    events.extend(end);
    (events, outcome)
}

/// Claude Code's notes → canonical events and outcome.
pub struct ClaudeMapping {
    normalizer: ClaudeNormalizer,
    expected_prompts: u32,
}

impl Mapping for ClaudeMapping {
    type Note = Note;

    fn calls_named(&self, note: &Note) -> Vec<String> {
        match note {
            Note::Line(text) => serde_json::from_str::<Value>(text)
                .map(|line| ClaudeNormalizer::named_calls(&line))
                .unwrap_or_default(),
            _ => Vec::new(),
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

/// The stream-json control protocol as a [`Dialect`]: our requests are `control_request`s
/// with a `request_id`, our answers `control_response`s; every other line of the guest's is a
/// "notification" named by its `type`.
#[derive(Debug, Clone, Copy)]
pub struct StreamJson;

impl Dialect for StreamJson {
    fn id(&self, n: u64) -> Value {
        json!(format!("switchyard-{n}"))
    }

    fn request(&self, id: &Value, method: &str, params: Value) -> Value {
        let mut request = match params {
            Value::Object(map) => map,
            _ => serde_json::Map::new(),
        };
        request.insert("subtype".into(), json!(method));
        json!({"type": "control_request", "request_id": id, "request": request})
    }

    fn notification(&self, method: &str, params: Value) -> Value {
        let mut message = match params {
            Value::Object(map) => map,
            _ => serde_json::Map::new(),
        };
        message.insert("type".into(), json!(method));
        Value::Object(message)
    }

    fn response(&self, id: &Value, result: Result<Value, RpcError>) -> Value {
        let response = match result {
            Ok(response) => json!({"subtype": "success", "request_id": id, "response": response}),
            Err(RpcError::Answered { message, .. }) => {
                json!({"subtype": "error", "request_id": id, "error": message})
            }
            Err(RpcError::Closed) => {
                json!({"subtype": "error", "request_id": id, "error": "closed"})
            }
        };
        json!({"type": "control_response", "response": response})
    }

    fn classify(&self, message: Value) -> Incoming {
        let kind = message
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or_default();
        match kind {
            "control_response" => {
                let response = message.get("response").cloned().unwrap_or(Value::Null);
                let id = response
                    .get("request_id")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned();
                let result = match response.get("subtype").and_then(Value::as_str) {
                    Some("success") => Ok(response.get("response").cloned().unwrap_or(Value::Null)),
                    _ => Err(RpcError::Answered {
                        code: 0,
                        message: response
                            .get("error")
                            .and_then(Value::as_str)
                            .unwrap_or("error")
                            .to_owned(),
                        data: None,
                    }),
                };
                Incoming::Response { id, result }
            }
            "control_request" => {
                let params = message.get("request").cloned().unwrap_or(Value::Null);
                let method = params
                    .get("subtype")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned();
                match message.get("request_id") {
                    Some(id) if !id.is_null() => Incoming::Request {
                        id: id.clone(),
                        method,
                        params,
                    },
                    _ => Incoming::Other(message),
                }
            }
            "" => Incoming::Other(message),
            other => Incoming::Notification {
                method: other.to_owned(),
                params: message,
            },
        }
    }
}

/// Spawns `claude -p` (stdin piped): a driver ready to drive the run.
pub fn claude(
    launch: &PreparedClaude,
    limits: &RunLimits,
    started: RunStarted,
    plan: ClaudePlan,
    host: Arc<dyn PermissionHost>,
) -> Result<Driver<ClaudeMapping>, SpawnError> {
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
    let mapping = ClaudeMapping {
        normalizer: ClaudeNormalizer::default(),
        expected_prompts: u32::try_from(plan.prompts.len()).unwrap_or(u32::MAX),
    };
    Ok(Driver {
        process,
        started,
        mapping,
        controller: Box::new(ClaudeController { plan }),
        cancel,
        host,
        host_events: None,
        launch_events: Vec::new(),
        transcript: None,
    })
}

struct ClaudeController {
    plan: ClaudePlan,
}

impl Controller for ClaudeController {
    type Note = Note;

    fn run(
        self: Box<Self>,
        io: ControllerIo<Note>,
    ) -> futures_util::future::BoxFuture<'static, ()> {
        Box::pin(session(self.plan, io))
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

async fn session(mut plan: ClaudePlan, mut io: ControllerIo<Note>) {
    let Some(stdin) = io.stdin.take() else {
        io.note(Note::Failed(
            OutcomeStatus::Failed,
            RunError::new(
                switchyard_events::ErrorKind::GuestFailure,
                "the guest's stdin is not piped",
            ),
        ));
        io.done(Duration::ZERO);
        return;
    };
    let raw = io.reports.clone();
    let seq = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let pump = Pump::new(StreamJson, stdin, move |line: &str| {
        let n = seq.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let _ = raw.send(crate::driver::Report::Raw(stdin_line(n, line)));
    });
    let stop = io.cancel.stop_handle().clone();
    let mut prompts: std::collections::VecDeque<String> = plan.prompts.drain(..).collect();
    let mut more = plan.more_prompts.take();
    let mut interrupted = false;
    let mut pump = Some(pump);
    'prompts: loop {
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
        let (Some(prompt), Some(writer)) = (prompt, &pump) else {
            break;
        };
        if io.cancel.is_cancelled() {
            break;
        }
        io.note(Note::PromptSent(prompt.clone()));
        stop.resume_inactivity();
        let message = json!({"message": {"role": "user", "content": prompt},
            "parent_tool_use_id": null, "session_id": ""});
        if writer.notify("user", message).await.is_err() {
            break;
        }
        loop {
            let cancel = io.cancel.clone();
            tokio::select! {
                biased;
                line = io.stdout.recv() => {
                    let Some(line) = line else { break 'prompts };
                    let Some(writer) = &pump else { break 'prompts };
                    if on_line(&io, writer, &line).await {
                        break;
                    }
                }
                () = cancel.notified(), if !interrupted => {
                    interrupted = true;
                    let writer = writer.clone();
                    // The answer comes on stdout, which this loop reads.
                    tokio::spawn(async move { writer.request("interrupt", json!({})).await });
                }
            }
        }
        if interrupted {
            break;
        }
    }
    // Closing stdin lets the guest finish (a background subagent included) and exit.
    if let Some(writer) = pump.take() {
        writer.close();
    }
    drain(&mut io, plan.close_grace).await;
}

/// After the last prompt: the guest's remaining lines until it exits (bounded by `grace`).
async fn drain(io: &mut ControllerIo<Note>, grace: Duration) {
    let deadline = tokio::time::Instant::now() + grace;
    io.done(grace);
    while let Ok(Some(line)) = tokio::time::timeout_at(deadline, io.stdout.recv()).await {
        io.note(Note::Line(line.text));
    }
}

/// One stdout line; true when it ends the prompt (its `result`).
async fn on_line(io: &ControllerIo<Note>, pump: &Pump<StreamJson>, line: &Line) -> bool {
    if line.truncated {
        io.note(Note::Line(line.text.clone()));
        return false;
    }
    match pump.receive(&line.text) {
        Incoming::Response { .. } => false,
        Incoming::Request { id, method, params } => {
            let answer = match method.as_str() {
                "can_use_tool" => {
                    if let Some(call) = params.get("tool_use_id").and_then(Value::as_str) {
                        crate::permission::await_confirmed(io.host.as_ref(), call).await;
                    }
                    let (permission, answer) = decide(io.host.as_ref(), &id, &params);
                    io.note(Note::Permission(Box::new(permission)));
                    Ok(answer)
                }
                other => Err(RpcError::Answered {
                    code: 0,
                    message: format!("Switchyard does not serve control request {other:?}"),
                    data: None,
                }),
            };
            let _ = pump.respond(&id, answer).await;
            false
        }
        Incoming::Notification { method, .. } => {
            io.cancel.stop_handle().touch();
            io.note(Note::Line(line.text.clone()));
            method == "result"
        }
        Incoming::Other(_) => {
            io.note(Note::Line(line.text.clone()));
            false
        }
    }
}

/// A host-tool call's input without the private identity the gateway added to it (the
/// delivered arguments are the model's own).
fn without_identity(input: &Value) -> Value {
    let mut input = input.clone();
    if let Value::Object(object) = &mut input {
        object.remove(switchyard_events::delivered::IDENTITY_ARG);
    }
    input
}

/// The host's answer to a `can_use_tool` request, and the permission event.
fn decide(host: &dyn PermissionHost, id: &Value, params: &Value) -> (Permission, Value) {
    let tool = params
        .get("tool_name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let call_id = params.get("tool_use_id").and_then(Value::as_str);
    let input = params.get("input").cloned().unwrap_or(Value::Null);
    let delivered = call_id.and_then(|id| host.delivered(id));
    let ruling: Result<PermissionRuling, String> = match (&delivered, call_id) {
        (_, None) => Err("the request names no model call".to_owned()),
        (Some(call), Some(_)) if call.tool != tool => Err(format!(
            "the request names tool {tool:?}, the delivered call is {:?}",
            call.tool
        )),
        (Some(call), Some(_)) if !same_value(&call.arguments, &without_identity(&input)) => {
            Err("the guest's input differs from the delivered call's arguments".to_owned())
        }
        (_, Some(named)) => host.permission(&PermissionAsk {
            named: named.to_owned(),
            call_id: delivered.as_ref().map(|c| c.call_id.clone()),
            tool: tool.to_owned(),
            category: claude_tool_category(tool),
            own: true,
            details: params.clone(),
        }),
    };
    let (allow, message) = match &ruling {
        Ok(r) if r.allow => (true, String::new()),
        Ok(r) => (
            false,
            format!(
                "Switchyard's permission policy rejected this call ({}); do not retry it",
                r.rule
            ),
        ),
        Err(why) => (
            false,
            format!("Switchyard refused this permission request: {why}"),
        ),
    };
    let answer = if allow {
        json!({"behavior": "allow", "updatedInput": input})
    } else {
        json!({"behavior": "deny", "message": message})
    };
    let options = ["allow", "deny"]
        .map(|o| PermissionChoice {
            option_id: o.to_owned(),
            kind: o.to_owned(),
            name: o.to_owned(),
        })
        .to_vec();
    let outcome = match &ruling {
        Err(_) => PermissionOutcome::Refused,
        Ok(r) if r.allow => PermissionOutcome::Allowed,
        Ok(_) => PermissionOutcome::Rejected,
    };
    let reason = ruling.as_ref().err().cloned();
    let ruling = ruling.ok();
    let permission = Permission {
        tool_call_id: id.as_str().map_or_else(|| id.to_string(), str::to_owned),
        model_call_id: ruling
            .as_ref()
            .map(|r| r.model_call_id.clone())
            .or_else(|| delivered.as_ref().map(|d| d.model_call_id.clone())),
        call_id: call_id.map(str::to_owned),
        tool: Some(tool.to_owned()),
        arguments: ruling.as_ref().map(|r| r.arguments.clone()),
        options,
        outcome,
        rule: ruling.as_ref().map(|r| r.rule.clone()),
        option_id: Some(if allow { "allow" } else { "deny" }.to_owned()),
        reason,
    };
    (permission, answer)
}

#[cfg(test)]
#[path = "run_tests.rs"]
mod tests;
