//! One OpenCode run on the neutral driver: `opencode serve` is the managed process; the
//! controller waits for it within one start-up budget (the readiness line, health, the event
//! subscription), warms it up, opens a session, sends the prompts in turn and reports each
//! server-sent event as a note.
//!
//! - A prompt ends when the session goes idle after it was busy (an idle of an earlier prompt
//!   is not this one's end).
//! - `permission.asked` is answered from the host's policy (`once`, or `reject` with a
//!   message so the loop goes on); `question.asked` is rejected: nothing waits for a human.
//! - A dropped event stream is reopened (bounded) and the session's messages are read back,
//!   so what the stream missed is still reported.
//! - Cancel aborts the session, then stops the server's process group after a grace.
//! - Inactivity counts server-sent events (the server's heartbeat excluded), and stops while
//!   the host owes the next prompt.

use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use serde_json::{Value, json};
use switchyard_events::event::{Permission, PermissionChoice, PermissionOutcome, RunStarted};
use switchyard_events::gemini::{Normalized, StderrSummary};
use switchyard_events::opencode::OpenCodeNormalizer;
use switchyard_events::tools::opencode_tool_category;
use switchyard_events::{
    Delivered, ErrorKind, Event, GuestExit, OutcomeStatus, RunError, RunOutcome, ToolCategory,
};
use tokio::sync::mpsc;

use super::launch::{PreparedServe, SERVER_USER};
use super::notes::{Note, apply};
use super::server::{ServerClient, ServerError};
use crate::driver::{Controller, ControllerIo, Driver, Mapping, RunItem, RunLimits, guest_spec};
use crate::permission::{PermissionAsk, PermissionHost, PermissionRuling};
use crate::process::cancel::GracefulCancel;
use crate::process::{Limits, Line, ManagedProcess, SpawnError};

/// The line `opencode serve` prints once it listens.
pub const READY_PREFIX: &str = "opencode server listening on ";

/// How often the event stream may be reopened in one run.
const MAX_RECONNECTS: u32 = 3;

/// What a run does.
#[derive(Debug)]
pub struct OpenCodePlan {
    pub prompts: Vec<String>,
    /// More prompts, sent in turn after `prompts` until the channel closes.
    pub more_prompts: Option<mpsc::Receiver<String>>,
    /// The provider and model of every prompt.
    pub provider: String,
    pub model: String,
    /// The session's title (a title given at creation skips OpenCode's title generation).
    pub title: String,
    /// One budget for the readiness line, health and the event subscription.
    pub startup_timeout: Duration,
    /// After an abort, how long the session has to go idle before the server is stopped.
    pub cancel_grace: Duration,
}

/// Cancels a run: the session is aborted, and the server stopped after the plan's grace.
pub type OpenCodeCancel = GracefulCancel;

/// OpenCode's notes → canonical events and outcome.
pub struct OpenCodeMapping {
    normalizer: OpenCodeNormalizer,
    expected_prompts: u32,
}

impl Mapping for OpenCodeMapping {
    type Note = Note;

    fn calls_named(&self, note: &Note) -> Vec<String> {
        match note {
            Note::Event(data) => serde_json::from_str::<Value>(data)
                .ok()
                .and_then(|event| OpenCodeNormalizer::named_call(&event))
                .into_iter()
                .collect(),
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
        let hint = last_stderr_line(stderr_tail);
        std::mem::take(&mut self.normalizer).finish(self.expected_prompts, exit, hint.as_deref())
    }
}

/// Spawns `opencode serve`: a driver ready to drive the run.
pub fn opencode(
    launch: &PreparedServe,
    limits: &RunLimits,
    started: RunStarted,
    plan: OpenCodePlan,
    host: Arc<dyn PermissionHost>,
) -> Result<Driver<OpenCodeMapping>, SpawnError> {
    let spec = guest_spec(
        &launch.program,
        &launch.args,
        &launch.env,
        &launch.cwd,
        limits,
    );
    let process = ManagedProcess::spawn(spec)?;
    let cancel = OpenCodeCancel::new(process.stop_handle(), plan.cancel_grace);
    let mapping = OpenCodeMapping {
        normalizer: OpenCodeNormalizer::default(),
        expected_prompts: u32::try_from(plan.prompts.len()).unwrap_or(u32::MAX),
    };
    let controller = OpenCodeController {
        plan,
        password: launch.password.clone(),
        directory: launch.cwd.to_string_lossy().into_owned(),
        max_raw_event: limits
            .max_line_bytes
            .unwrap_or(Limits::default().max_line_bytes),
    };
    Ok(Driver {
        process,
        started,
        mapping,
        controller: Box::new(controller),
        cancel,
        host,
        host_events: None,
        launch_events: Vec::new(),
        transcript: None,
    })
}

/// The run's HTTP and event-stream side.
struct OpenCodeController {
    plan: OpenCodePlan,
    password: crate::secret::Secret,
    directory: String,
    /// Longest event data kept in the raw record (the run's line cap).
    max_raw_event: usize,
}

impl Controller for OpenCodeController {
    type Note = Note;

    fn run(
        self: Box<Self>,
        io: ControllerIo<Note>,
    ) -> futures_util::future::BoxFuture<'static, ()> {
        Box::pin(async move {
            let mut session = Session {
                io,
                plan: self.plan,
                raw_events: 0,
                max_raw_event: self.max_raw_event,
            };
            match session.run(&self.password, &self.directory).await {
                Ok(()) | Err(Halt::Gone) => {}
                Err(Halt::Failed(status, error)) => session.io.note(Note::Failed(status, error)),
            }
            // Every prompt answered, or a failure: the server's work is done.
            session.io.done(Duration::ZERO);
        })
    }
}

/// Why the session stopped before its prompts were done.
enum Halt {
    /// The server process ended (its stdout closed).
    Gone,
    /// A failure of the run (start-up, the event stream); the server is stopped.
    Failed(OutcomeStatus, RunError),
}

fn setup_failure(message: String) -> Halt {
    Halt::Failed(
        OutcomeStatus::Failed,
        RunError::new(ErrorKind::GuestFailure, message),
    )
}

/// The state of the prompt being answered.
#[derive(Default)]
struct PromptState {
    busy: bool,
    done: bool,
}

struct Session {
    io: ControllerIo<Note>,
    plan: OpenCodePlan,
    raw_events: u64,
    max_raw_event: usize,
}

impl Session {
    fn warn(&self, message: String) {
        self.io.note(Note::Warning(message));
    }

    fn raw_event(&mut self, data: &str) {
        let kept = data.len().min(self.max_raw_event);
        let mut end = kept;
        while !data.is_char_boundary(end) {
            end -= 1;
        }
        self.io.raw(RunItem::RawEvent(Line {
            seq: self.raw_events,
            text: data[..end].to_owned(),
            kept_bytes: end,
            dropped_bytes: (data.len() - end) as u64,
            truncated: end < data.len(),
            invalid_utf8: false,
            terminated: true,
        }));
        self.raw_events += 1;
    }

    /// The whole session: start-up, prompts. Ends when the prompts are done, the server is
    /// gone, or the run failed.
    async fn run(&mut self, password: &crate::secret::Secret, directory: &str) -> Result<(), Halt> {
        // Start-up has its own budget; the inactivity clock starts with the first prompt.
        let stop = self.io.cancel.stop_handle().clone();
        stop.pause_inactivity();
        let deadline = tokio::time::Instant::now() + self.plan.startup_timeout;
        let base = self.ready_line(deadline).await?;
        let client = ServerClient::new(&base, SERVER_USER, password, directory)
            .map_err(|e| setup_failure(format!("{e}")))?;
        while !client.healthy().await {
            if tokio::time::Instant::now() >= deadline {
                return Err(setup_failure(
                    "opencode serve never reported healthy".to_owned(),
                ));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let (events_tx, mut events) = mpsc::channel::<Result<String, ServerError>>(256);
        subscribe(&client, events_tx.clone(), &mut events, deadline)
            .await
            .map_err(setup_failure)?;
        // Loads the project instance and its plugins now, so the first prompt is not cold.
        for path in ["/config", "/agent", "/provider", "/mcp"] {
            if let Err(e) = client.get(path).await {
                self.warn(format!("warm-up {path}: {e}"));
            }
        }
        let session = client
            .create_session(&self.plan.title)
            .await
            .map_err(|e| setup_failure(format!("creating the session: {e}")))?;
        self.io.note(Note::SessionStarted {
            id: session.clone(),
            model: self.plan.model.clone(),
        });
        let mut prompts: std::collections::VecDeque<String> =
            self.plan.prompts.iter().cloned().collect();
        let mut more = self.plan.more_prompts.take();
        let mut reconnects = 0;
        loop {
            let prompt = match prompts.pop_front() {
                Some(p) => Some(p),
                None => match &mut more {
                    Some(rx) => {
                        // The host owes the next prompt: the server's silence is no inactivity.
                        stop.pause_inactivity();
                        self.next_prompt(rx).await?
                    }
                    None => None,
                },
            };
            let Some(prompt) = prompt else { break };
            if self.io.cancel.is_cancelled() {
                break;
            }
            self.io.note(Note::PromptSent(prompt.clone()));
            // The prompt's clock starts now.
            stop.resume_inactivity();
            client
                .prompt(&session, &prompt, &self.plan.provider, &self.plan.model)
                .await
                .map_err(|e| setup_failure(format!("sending the prompt: {e}")))?;
            let mut state = PromptState::default();
            let mut aborted = false;
            while !state.done {
                if self.io.cancel.is_cancelled() && !aborted {
                    aborted = true;
                    if let Err(e) = client.abort(&session).await {
                        self.warn(format!("aborting the session: {e}"));
                    }
                }
                let cancel = self.io.cancel.clone();
                tokio::select! {
                    biased;
                    line = self.io.stdout.recv() => {
                        if line.is_none() {
                            return Err(Halt::Gone);
                        }
                    }
                    () = cancel.notified(), if !aborted => {}
                    data = events.recv() => match data {
                        Some(Ok(data)) => {
                            if !data.contains("\"server.heartbeat\"") {
                                stop.touch();
                            }
                            self.raw_event(&data);
                            self.on_event(&client, &session, data, &mut state).await;
                        }
                        Some(Err(e)) => {
                            // The stream broke: reopen it and read back what it missed.
                            reconnects += 1;
                            if reconnects > MAX_RECONNECTS {
                                return Err(setup_failure(format!(
                                    "the event stream kept failing: {e}"
                                )));
                            }
                            self.warn(format!("event stream lost ({e}); reconnecting"));
                            let deadline =
                                tokio::time::Instant::now() + self.plan.startup_timeout;
                            subscribe(&client, events_tx.clone(), &mut events, deadline)
                                .await
                                .map_err(setup_failure)?;
                            self.resync(&client, &session, &mut state).await;
                        }
                        None => return Err(setup_failure("the event stream ended".to_owned())),
                    },
                }
            }
            self.io.note(Note::PromptDone);
            if aborted {
                break;
            }
        }
        Ok(())
    }

    /// The next prompt from `more`, while the server stays watched: `None` when the channel
    /// closes or the run is cancelled; `Gone` when the server ends meanwhile.
    async fn next_prompt(
        &mut self,
        more: &mut mpsc::Receiver<String>,
    ) -> Result<Option<String>, Halt> {
        let cancel = self.io.cancel.clone();
        loop {
            tokio::select! {
                prompt = more.recv() => return Ok(prompt),
                () = cancel.notified() => return Ok(None),
                line = self.io.stdout.recv() => {
                    if line.is_none() {
                        return Err(Halt::Gone);
                    }
                }
            }
        }
    }

    /// Waits for the readiness line; returns the server's base URL.
    async fn ready_line(&mut self, deadline: tokio::time::Instant) -> Result<String, Halt> {
        loop {
            let line = tokio::select! {
                line = self.io.stdout.recv() => line,
                () = tokio::time::sleep_until(deadline) => {
                    return Err(setup_failure(
                        "opencode serve did not print its address in time".to_owned(),
                    ));
                }
            };
            let Some(line) = line else {
                return Err(Halt::Gone);
            };
            let base = line
                .text
                .trim()
                .strip_prefix(READY_PREFIX)
                .filter(|url| url.starts_with("http://127.0.0.1:"))
                .map(str::to_owned);
            if let Some(base) = base {
                return Ok(base);
            }
        }
    }

    /// One server-sent event: permission and question requests answered, the rest mapped.
    async fn on_event(
        &mut self,
        client: &ServerClient,
        session: &str,
        data: String,
        state: &mut PromptState,
    ) {
        let Ok(event) = serde_json::from_str::<Value>(&data) else {
            self.io.note(Note::Event(data));
            return;
        };
        let kind = event
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let properties = event.get("properties").unwrap_or(&Value::Null);
        let ours = properties.get("sessionID").and_then(Value::as_str) == Some(session);
        match kind {
            "permission.asked" if ours => {
                // The request as received first, then the answer it got.
                self.io.note(Note::Event(data.clone()));
                let permission = self.answer_permission(client, properties).await;
                self.io.note(Note::Permission(Box::new(permission)));
                return;
            }
            "question.asked" if ours => {
                let id = properties
                    .get("id")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                let message = match client.reject_question(id).await {
                    Ok(()) => {
                        format!("question {id} rejected: an unattended run answers no questions")
                    }
                    Err(e) => format!("rejecting question {id}: {e}"),
                };
                self.io.note(Note::Event(data.clone()));
                self.warn(message);
                return;
            }
            "session.status" if ours => {
                match properties.pointer("/status/type").and_then(Value::as_str) {
                    Some("busy" | "retry") => state.busy = true,
                    Some("idle") if state.busy => state.done = true,
                    _ => {}
                }
            }
            "session.idle" if ours && state.busy => state.done = true,
            _ => {}
        }
        self.io.note(Note::Event(data));
    }

    /// The request of a `permission.asked`: OpenCode names the model call it belongs to and
    /// its permission. A permission that is the call's own (`bash` for bash, `edit` for the
    /// file-writing tools, the tool's name otherwise) is decided as that tool; any other
    /// (`external_directory`, `doom_loop`) as a tool of that name, which only an explicit rule
    /// allows. Each (call, permission) is decided once.
    fn ask(&self, permission: &str, call_id: Option<&str>, details: &Value) -> PermissionAsk {
        let delivered = call_id.and_then(|id| self.io.host.delivered(id));
        let own = delivered.as_ref().is_some_and(|call| {
            permission == call.tool
                || (permission == "edit"
                    && opencode_tool_category(&call.tool) == ToolCategory::FileWrite)
        });
        let (tool, category) = match (&delivered, own) {
            (Some(call), true) => (call.tool.clone(), opencode_tool_category(&call.tool)),
            _ => (permission.to_owned(), ToolCategory::Unknown),
        };
        PermissionAsk {
            named: call_id.unwrap_or_default().to_owned(),
            call_id: delivered.map(|call| call.call_id),
            tool,
            category,
            own,
            details: details.clone(),
        }
    }

    async fn answer_permission(&self, client: &ServerClient, properties: &Value) -> Permission {
        let id = properties
            .get("id")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let name = properties
            .get("permission")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let call_id = properties.pointer("/tool/callID").and_then(Value::as_str);
        let metadata = properties.get("metadata").unwrap_or(&Value::Null);
        if let Some(call) = call_id {
            crate::permission::await_confirmed(self.io.host.as_ref(), call).await;
        }
        let ruling: Result<PermissionRuling, String> = match call_id {
            None => Err("the request names no model call".to_owned()),
            Some(_) => self.io.host.permission(&self.ask(name, call_id, metadata)),
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
        let replied = client.reply_permission(id, allow, &message).await;
        let options = ["once", "always", "reject"]
            .map(|o| PermissionChoice {
                option_id: o.to_owned(),
                kind: o.to_owned(),
                name: o.to_owned(),
            })
            .to_vec();
        let outcome = match (&ruling, &replied) {
            (_, Err(_)) | (Err(_), _) => PermissionOutcome::Refused,
            (Ok(r), Ok(())) if r.allow => PermissionOutcome::Allowed,
            (Ok(_), Ok(())) => PermissionOutcome::Rejected,
        };
        let reason = match (&ruling, &replied) {
            (_, Err(e)) => Some(format!("the reply failed: {e}")),
            (Err(why), _) => Some(why.clone()),
            (Ok(_), _) => None,
        };
        let ruling = ruling.ok();
        Permission {
            tool_call_id: id.to_owned(),
            model_call_id: ruling
                .as_ref()
                .map(|r| r.model_call_id.clone())
                .or_else(|| call_id.map(str::to_owned)),
            call_id: call_id.map(str::to_owned),
            tool: ruling.as_ref().map(|r| r.tool.clone()),
            arguments: ruling.as_ref().map(|r| r.arguments.clone()),
            options,
            outcome,
            rule: ruling.as_ref().map(|r| r.rule.clone()),
            option_id: Some(if allow { "once" } else { "reject" }.to_owned()),
            reason,
        }
    }

    /// After a reconnect: the session's messages read back and fed as whole parts (what was
    /// already reported is not repeated), and whether the session is idle now.
    async fn resync(&self, client: &ServerClient, session: &str, state: &mut PromptState) {
        match client.messages(session).await {
            Ok(Value::Array(messages)) => {
                for message in &messages {
                    let Some(info) = message.get("info") else {
                        continue;
                    };
                    let updated = json!({"type": "message.updated",
                        "properties": {"sessionID": session, "info": info}});
                    self.io.note(Note::Event(updated.to_string()));
                    for part in message
                        .get("parts")
                        .and_then(Value::as_array)
                        .into_iter()
                        .flatten()
                    {
                        let updated = json!({"type": "message.part.updated",
                            "properties": {"sessionID": session, "part": part}});
                        self.io.note(Note::Event(updated.to_string()));
                    }
                }
            }
            Ok(other) => self.warn(format!(
                "the session's messages are not a list: {}",
                other.to_string().chars().take(200).collect::<String>()
            )),
            Err(e) => self.warn(format!("reading the session back: {e}")),
        }
        if let Ok(status) = client.get("/session/status").await {
            let idle = status
                .pointer(&format!("/{session}/type"))
                .and_then(Value::as_str)
                .is_none_or(|t| t == "idle");
            if idle {
                state.done = true;
            }
        }
    }
}

/// Opens the event stream and waits for its `server.connected`; the data then flows into `tx`.
async fn subscribe(
    client: &ServerClient,
    tx: mpsc::Sender<Result<String, ServerError>>,
    rx: &mut mpsc::Receiver<Result<String, ServerError>>,
    deadline: tokio::time::Instant,
) -> Result<(), String> {
    let stream = tokio::time::timeout_at(deadline, client.events())
        .await
        .map_err(|_| "the event stream did not open in time".to_owned())?
        .map_err(|e| format!("opening the event stream: {e}"))?;
    tokio::spawn(async move {
        let mut stream = std::pin::pin!(stream);
        while let Some(item) = stream.next().await {
            let failed = item.is_err();
            if tx.send(item).await.is_err() || failed {
                return;
            }
        }
        let _ = tx
            .send(Err(ServerError::Connect("the event stream ended".into())))
            .await;
    });
    // The first event of a subscription is `server.connected`.
    match tokio::time::timeout_at(deadline, rx.recv()).await {
        Ok(Some(Ok(data))) if data.contains("\"server.connected\"") => Ok(()),
        Ok(Some(Ok(data))) => Err(format!("the event stream began with {data:.200}")),
        Ok(Some(Err(e))) => Err(e.to_string()),
        Ok(None) => Err("the event stream closed".to_owned()),
        Err(_) => Err("the event stream sent nothing in time".to_owned()),
    }
}

fn last_stderr_line(tail: &str) -> Option<String> {
    tail.lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .map(|l| l.chars().take(500).collect())
}
