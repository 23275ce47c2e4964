//! Drives one OpenCode run: owns `opencode serve` as a managed process, waits for it within one
//! start-up budget (the readiness line, health, the event subscription), warms it up, opens a
//! session, sends the prompts in turn and maps the server-sent events to canonical events as
//! they arrive.
//!
//! - A prompt ends when the session goes idle after it was busy (an idle of an earlier prompt
//!   is not this one's end).
//! - `permission.asked` is answered from the host's policy (`once`, or `reject` with a
//!   message so the loop goes on); `question.asked` is rejected: nothing waits for a human.
//! - A dropped event stream is reopened (bounded) and the session's messages are read back,
//!   so what the stream missed is still reported.
//! - Cancel aborts the session, then stops the server's process group after a grace.
//! - Inactivity counts server-sent events (the server's heartbeat excluded), not stdout,
//!   which a server does not write to.

use std::sync::Arc;
use std::time::Duration;

use chrono::Utc;
use futures_util::StreamExt;
use serde_json::{Value, json};
use switchyard_events::event::{Permission, PermissionChoice, PermissionOutcome, RunStarted};
use switchyard_events::opencode::OpenCodeNormalizer;
use switchyard_events::{Envelope, ErrorKind, Event, OutcomeStatus, RunError, RunOutcome};
use tokio::sync::mpsc;

use super::launch::{PreparedServe, SERVER_USER};
use super::notes::{Note, apply};
use super::server::{ServerClient, ServerError};
use crate::gemini::run::{RunItem, RunLimits, RunReport, conclude_events, guest_exit, guest_spec};
use crate::permission::PermissionRuling;
use crate::process::{
    Limits, Line, ManagedProcess, ProcessEvent, SpawnError, StopReason, Watchdogs,
};

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

/// The host side of a run: the permission policy.
pub trait OpenCodeHost: Send + Sync + 'static {
    /// The call the gateway delivered under `call_id` (the id OpenCode names a call by).
    fn delivered(&self, _call_id: &str) -> Option<switchyard_events::Delivered> {
        None
    }

    /// Decides one `permission.asked`: OpenCode's permission name, the model call it belongs
    /// to (when OpenCode names one) and its metadata. `Err` says why it is refused (answered
    /// as a reject).
    fn permission(
        &self,
        permission: &str,
        call_id: Option<&str>,
        metadata: &Value,
    ) -> Result<PermissionRuling, String>;
}

/// Cancels a run: the session is aborted, and the server stopped after the plan's grace.
pub type OpenCodeCancel = crate::process::cancel::GracefulCancel;

/// A started run.
pub struct OpenCodeRun {
    process: ManagedProcess,
    started: RunStarted,
    plan: OpenCodePlan,
    host: Arc<dyn OpenCodeHost>,
    password: crate::secret::Secret,
    directory: String,
    inactivity: Option<Duration>,
    /// Longest event data kept in the raw record (the run's line cap).
    max_raw_event: usize,
    cancel: OpenCodeCancel,
    host_events: Option<mpsc::Receiver<Event>>,
    transcript: Option<mpsc::UnboundedSender<Note>>,
}

/// Maps notes to events (the only way the guest's events are made), keeping the transcript
/// when one is asked for.
struct Mapper {
    normalizer: OpenCodeNormalizer,
    transcript: Option<mpsc::UnboundedSender<Note>>,
    /// Call ids looked up already.
    looked_up: std::collections::HashSet<String>,
}

impl Mapper {
    /// One server-sent event's data: the call it names looked up first (once per call).
    fn event(&mut self, data: String, host: &dyn OpenCodeHost, out: &mut Emitter) {
        if let Ok(event) = serde_json::from_str::<Value>(&data)
            && let Some(call_id) = OpenCodeNormalizer::named_call(&event)
            && self.looked_up.insert(call_id.clone())
        {
            let call = host.delivered(&call_id).map(Box::new);
            self.note(Note::Delivered { call_id, call }, out);
        }
        self.note(Note::Event(data), out);
    }

    fn note(&mut self, note: Note, out: &mut Emitter) {
        let events = apply(&mut self.normalizer, &note);
        if let Some(transcript) = &self.transcript {
            let _ = transcript.send(note);
        }
        out.events(events);
    }

    fn warn(&mut self, message: String, out: &mut Emitter) {
        self.note(Note::Warning(message), out);
    }
}

/// Why the run stopped before its prompts were done.
enum Halt {
    /// The server process ended.
    Exited(crate::process::Outcome),
    /// A failure of the run (start-up, the event stream); the server is stopped.
    Failed(OutcomeStatus, RunError),
}

/// Emits envelopes in order.
struct Emitter {
    seq: u64,
    items: Vec<RunItem>,
    raw_events: u64,
}

impl Emitter {
    fn event(&mut self, event: Event) {
        self.items.push(RunItem::Event(Box::new(Envelope {
            seq: self.seq,
            at: Utc::now(),
            guest_timestamp: None,
            event,
        })));
        self.seq += 1;
    }

    fn events(&mut self, events: impl IntoIterator<Item = Event>) {
        for event in events {
            self.event(event);
        }
    }

    fn raw_event(&mut self, data: &str, max: usize) {
        let kept = data.len().min(max);
        let mut end = kept;
        while !data.is_char_boundary(end) {
            end -= 1;
        }
        self.items.push(RunItem::RawEvent(Line {
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
}

/// The state of the prompt being answered.
#[derive(Default)]
struct PromptState {
    busy: bool,
    done: bool,
}

impl OpenCodeRun {
    /// Spawns `opencode serve`.
    pub fn start(
        launch: &PreparedServe,
        limits: &RunLimits,
        started: RunStarted,
        plan: OpenCodePlan,
        host: Arc<dyn OpenCodeHost>,
    ) -> Result<Self, SpawnError> {
        let spec = guest_spec(
            &launch.program,
            &launch.args,
            &launch.env,
            &launch.cwd,
            limits,
        )
        .watchdogs(Watchdogs {
            overall_timeout: limits.timeout,
            // The server's stdout is quiet by design: inactivity is measured on events.
            inactivity_timeout: None,
        });
        let process = ManagedProcess::spawn(spec)?;
        let cancel = OpenCodeCancel::new(process.stop_handle(), plan.cancel_grace);
        Ok(Self {
            process,
            started,
            plan,
            host,
            password: launch.password.clone(),
            directory: launch.cwd.to_string_lossy().into_owned(),
            inactivity: limits.inactivity,
            max_raw_event: limits
                .max_line_bytes
                .unwrap_or(Limits::default().max_line_bytes),
            cancel,
            host_events: None,
            transcript: None,
        })
    }

    /// Sends every [`Note`] of the run to `transcript` (fixture capture).
    pub fn with_transcript(mut self, transcript: mpsc::UnboundedSender<Note>) -> Self {
        self.transcript = Some(transcript);
        self
    }

    /// Merges `events` (the host-tool binding's decisions) into the run's event sequence.
    pub fn with_host_events(mut self, events: mpsc::Receiver<Event>) -> Self {
        self.host_events = Some(events);
        self
    }

    /// What SIGINT/SIGTERM to Switchyard does.
    pub fn cancel_handle(&self) -> OpenCodeCancel {
        self.cancel.clone()
    }

    /// Pid of the server (its process-group id).
    pub fn pid(&self) -> u32 {
        self.process.pid()
    }

    /// Runs to the end, calling `sink` for every event and raw line in order; `conclude`
    /// is applied to the outcome once the server is gone, before `run_finished`.
    pub async fn drive_concluding(
        mut self,
        mut sink: impl AsyncFnMut(RunItem),
        conclude: impl AsyncFnOnce(RunOutcome) -> RunOutcome,
    ) -> RunReport {
        let mut out = Emitter {
            seq: 0,
            items: Vec::new(),
            raw_events: 0,
        };
        out.event(Event::RunStarted(self.started.clone()));
        let mut mapper = Mapper {
            normalizer: OpenCodeNormalizer::default(),
            transcript: self.transcript.take(),
            looked_up: std::collections::HashSet::new(),
        };
        let halt = self.session(&mut out, &mut mapper, &mut sink).await;
        let process_outcome = match halt {
            Halt::Exited(outcome) => outcome,
            Halt::Failed(status, error) => {
                mapper.note(Note::Failed(status, error), &mut out);
                self.process.stop(StopReason::Closed);
                self.finish_process(&mut out).await
            }
        };
        let exit = guest_exit(&process_outcome.termination, process_outcome.exit);
        let expected = u32::try_from(self.plan.prompts.len()).unwrap_or(u32::MAX);
        let normalizer = mapper.normalizer;
        let unrecognized = normalizer.unrecognized();
        let hint = last_stderr_line(&process_outcome.stderr_tail);
        let (mut events, run_outcome) = normalizer.finish(expected, exit, hint.as_deref());
        let run_outcome = conclude(run_outcome).await;
        if let Some(mut host) = self.host_events.take() {
            host.close();
            while let Some(event) = host.recv().await {
                out.event(event);
            }
        }
        let final_text = conclude_events(&mut events, &run_outcome);
        out.events(events);
        for item in out.items.drain(..) {
            sink(item).await;
        }
        RunReport {
            outcome: run_outcome,
            final_text,
            events: out.seq,
            unrecognized_lines: unrecognized,
            stdout: process_outcome.stdout,
            stderr_tail: process_outcome.stderr_tail,
            duration: process_outcome.duration,
        }
    }

    /// Reads the process until it ends (its lines recorded).
    async fn finish_process(&mut self, out: &mut Emitter) -> crate::process::Outcome {
        loop {
            match self.process.next_event().await {
                Some(ProcessEvent::Stdout(line)) => out.items.push(RunItem::RawStdout(line)),
                Some(ProcessEvent::Stderr(line)) => out.items.push(RunItem::RawStderr(line)),
                Some(ProcessEvent::Finished(outcome)) => return outcome,
                None => return crate::process::Outcome::supervisor_lost(),
            }
        }
    }

    /// The whole session: start-up, prompts, close. Ends with the process gone or a failure.
    async fn session(
        &mut self,
        out: &mut Emitter,
        m: &mut Mapper,
        sink: &mut impl AsyncFnMut(RunItem),
    ) -> Halt {
        let deadline = tokio::time::Instant::now() + self.plan.startup_timeout;
        let base = match self.ready_line(out, deadline).await {
            Ok(base) => base,
            Err(halt) => return halt,
        };
        let client = match ServerClient::new(&base, SERVER_USER, &self.password, &self.directory) {
            Ok(c) => c,
            Err(e) => return setup_failure(format!("{e}")),
        };
        while !client.healthy().await {
            if tokio::time::Instant::now() >= deadline {
                return setup_failure("opencode serve never reported healthy".to_owned());
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let (events_tx, mut events) = mpsc::channel::<Result<String, ServerError>>(256);
        if let Err(e) = subscribe(&client, events_tx.clone(), &mut events, deadline).await {
            return setup_failure(e);
        }
        // Loads the project instance and its plugins now, so the first prompt is not cold.
        for path in ["/config", "/agent", "/provider", "/mcp"] {
            if let Err(e) = client.get(path).await {
                m.warn(format!("warm-up {path}: {e}"), out);
            }
        }
        let session = match client.create_session(&self.plan.title).await {
            Ok(id) => id,
            Err(e) => return setup_failure(format!("creating the session: {e}")),
        };
        m.note(
            Note::SessionStarted {
                id: session.clone(),
                model: self.plan.model.clone(),
            },
            out,
        );
        let mut prompts: std::collections::VecDeque<String> =
            self.plan.prompts.iter().cloned().collect();
        let mut more = self.plan.more_prompts.take();
        let mut reconnects = 0;
        let mut last_activity;
        loop {
            for item in out.items.drain(..) {
                sink(item).await;
            }
            let prompt = match prompts.pop_front() {
                Some(p) => Some(p),
                None => match &mut more {
                    Some(rx) => match self.next_prompt(rx, out).await {
                        Ok(p) => p,
                        Err(halt) => return halt,
                    },
                    None => None,
                },
            };
            let Some(prompt) = prompt else { break };
            if self.cancel.is_cancelled() {
                break;
            }
            m.note(Note::PromptSent(prompt.clone()), out);
            // The clock of this prompt starts when it is sent (the wait for it is the host's).
            last_activity = tokio::time::Instant::now();
            if let Err(e) = client
                .prompt(&session, &prompt, &self.plan.provider, &self.plan.model)
                .await
            {
                return setup_failure(format!("sending the prompt: {e}"));
            }
            let mut state = PromptState::default();
            let mut aborted = false;
            while !state.done {
                for item in out.items.drain(..) {
                    sink(item).await;
                }
                if self.cancel.is_cancelled() && !aborted {
                    aborted = true;
                    if let Err(e) = client.abort(&session).await {
                        m.warn(format!("aborting the session: {e}"), out);
                    }
                }
                let inactivity = async {
                    match self.inactivity {
                        Some(limit) => tokio::time::sleep_until(last_activity + limit).await,
                        None => std::future::pending().await,
                    }
                };
                tokio::select! {
                    biased;
                    event = self.process.next_event() => match event {
                        Some(ProcessEvent::Stdout(line)) => out.items.push(RunItem::RawStdout(line)),
                        Some(ProcessEvent::Stderr(line)) => out.items.push(RunItem::RawStderr(line)),
                        Some(ProcessEvent::Finished(outcome)) => return Halt::Exited(outcome),
                        None => return Halt::Exited(crate::process::Outcome::supervisor_lost()),
                    },
                    () = self.cancel.notified(), if !aborted => {}
                    host_event = recv_host(&mut self.host_events) => match host_event {
                        Some(event) => out.event(event),
                        None => self.host_events = None,
                    },
                    data = events.recv() => match data {
                        Some(Ok(data)) => {
                            if !data.contains("\"server.heartbeat\"") {
                                last_activity = tokio::time::Instant::now();
                            }
                            out.raw_event(&data, self.max_raw_event);
                            self.on_event(&client, &session, data, m, out, &mut state).await;
                        }
                        Some(Err(e)) => {
                            // The stream broke: reopen it and read back what it missed.
                            reconnects += 1;
                            if reconnects > MAX_RECONNECTS {
                                return setup_failure(format!("the event stream kept failing: {e}"));
                            }
                                                        m.warn(format!("event stream lost ({e}); reconnecting"), out);
                            let deadline = tokio::time::Instant::now() + self.plan.startup_timeout;
                            if let Err(e) = subscribe(&client, events_tx.clone(), &mut events, deadline).await {
                                return setup_failure(e);
                            }
                            self.resync(&client, &session, m, out, &mut state).await;
                        }
                        None => return setup_failure("the event stream ended".to_owned()),
                    },
                    () = inactivity => {
                        self.process.stop(StopReason::Inactivity);
                        return Halt::Exited(self.finish_process(out).await);
                    }
                }
            }
            m.note(Note::PromptDone, out);
            if aborted {
                break;
            }
        }
        for item in out.items.drain(..) {
            sink(item).await;
        }
        // Every prompt answered: the server's work is done.
        self.process.stop(StopReason::Closed);
        Halt::Exited(self.finish_process(out).await)
    }

    /// The next prompt from `more`, while the server stays watched: `None` when the channel
    /// closes or the run is cancelled; the halt when the server ends meanwhile.
    async fn next_prompt(
        &mut self,
        more: &mut mpsc::Receiver<String>,
        out: &mut Emitter,
    ) -> Result<Option<String>, Halt> {
        loop {
            tokio::select! {
                prompt = more.recv() => return Ok(prompt),
                () = self.cancel.notified() => return Ok(None),
                event = self.process.next_event() => match event {
                    Some(ProcessEvent::Stdout(line)) => out.items.push(RunItem::RawStdout(line)),
                    Some(ProcessEvent::Stderr(line)) => out.items.push(RunItem::RawStderr(line)),
                    Some(ProcessEvent::Finished(outcome)) => return Err(Halt::Exited(outcome)),
                    None => return Err(Halt::Exited(crate::process::Outcome::supervisor_lost())),
                },
            }
        }
    }

    /// Waits for the readiness line; returns the server's base URL.
    async fn ready_line(
        &mut self,
        out: &mut Emitter,
        deadline: tokio::time::Instant,
    ) -> Result<String, Halt> {
        loop {
            let event = tokio::select! {
                e = self.process.next_event() => e,
                () = tokio::time::sleep_until(deadline) => {
                    return Err(setup_failure(
                        "opencode serve did not print its address in time".to_owned(),
                    ));
                }
            };
            match event {
                Some(ProcessEvent::Stdout(line)) => {
                    let base = line
                        .text
                        .trim()
                        .strip_prefix(READY_PREFIX)
                        .filter(|url| url.starts_with("http://127.0.0.1:"))
                        .map(str::to_owned);
                    out.items.push(RunItem::RawStdout(line));
                    if let Some(base) = base {
                        return Ok(base);
                    }
                }
                Some(ProcessEvent::Stderr(line)) => out.items.push(RunItem::RawStderr(line)),
                Some(ProcessEvent::Finished(outcome)) => return Err(Halt::Exited(outcome)),
                None => return Err(Halt::Exited(crate::process::Outcome::supervisor_lost())),
            }
        }
    }

    /// One server-sent event: permission and question requests answered, the rest mapped.
    async fn on_event(
        &self,
        client: &ServerClient,
        session: &str,
        data: String,
        m: &mut Mapper,
        out: &mut Emitter,
        state: &mut PromptState,
    ) {
        let Ok(event) = serde_json::from_str::<Value>(&data) else {
            m.event(data, self.host.as_ref(), out);
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
                m.note(Note::Event(data.clone()), out);
                let permission = self.answer_permission(client, properties).await;
                m.note(Note::Permission(Box::new(permission)), out);
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
                m.note(Note::Event(data.clone()), out);
                m.warn(message, out);
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
        m.event(data, self.host.as_ref(), out);
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
        let ruling = self.host.permission(name, call_id, metadata);
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
    async fn resync(
        &self,
        client: &ServerClient,
        session: &str,
        m: &mut Mapper,
        out: &mut Emitter,
        state: &mut PromptState,
    ) {
        match client.messages(session).await {
            Ok(Value::Array(messages)) => {
                for message in &messages {
                    let Some(info) = message.get("info") else {
                        continue;
                    };
                    let updated = json!({"type": "message.updated",
                        "properties": {"sessionID": session, "info": info}});
                    m.note(Note::Event(updated.to_string()), out);
                    for part in message
                        .get("parts")
                        .and_then(Value::as_array)
                        .into_iter()
                        .flatten()
                    {
                        let updated = json!({"type": "message.part.updated",
                            "properties": {"sessionID": session, "part": part}});
                        m.event(updated.to_string(), self.host.as_ref(), out);
                    }
                }
            }
            Ok(other) => m.warn(
                format!(
                    "the session's messages are not a list: {}",
                    other.to_string().chars().take(200).collect::<String>()
                ),
                out,
            ),
            Err(e) => m.warn(format!("reading the session back: {e}"), out),
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

async fn recv_host(host: &mut Option<mpsc::Receiver<Event>>) -> Option<Event> {
    match host {
        Some(rx) => rx.recv().await,
        None => std::future::pending().await,
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

fn setup_failure(message: String) -> Halt {
    Halt::Failed(
        OutcomeStatus::Failed,
        RunError::new(ErrorKind::GuestFailure, message),
    )
}

fn last_stderr_line(tail: &str) -> Option<String> {
    tail.lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .map(|l| l.chars().take(500).collect())
}
