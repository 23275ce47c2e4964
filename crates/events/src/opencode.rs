//! Normalizer: OpenCode 1.18.33's server-sent events (`GET /event` of `opencode serve`) →
//! canonical [`Event`]s, and the typed outcome of an OpenCode run.
//!
//! The backend hands over each event's JSON (`{id, type, properties}`) as received; it is read
//! with `switchyard_protocol::opencode`'s types (a known type without the fields read is
//! invalid, never defaulted). State is
//! kept by part id: `message.part.updated` repeats a whole part, `message.part.delta` carries
//! increments of a text or reasoning part. Parts of user messages are the prompt Switchyard
//! sent (the backend emits `user_message` itself). A tool part is announced as `tool_call` once
//! its input is known (`running`, or a final state) and ends as `tool_result` once. Each
//! `step-start` is a model turn; `step-finish` carries its tokens. Events of other sessions,
//! types no mapping exists for and shapes that cannot be read are kept as
//! [`Event::Unrecognized`] and counted; types with no canonical meaning for a run (transport,
//! plugins, catalogs, file watching, diffs, echoes of Switchyard's own replies) are listed in
//! [`WITHOUT_MEANING`].

use std::collections::{HashMap, HashSet};

use serde_json::Value;
use switchyard_protocol::opencode::{
    ErrorInfo, EventLine, MessageUpdated, PartDelta, PartKind, PartUpdated, ServerEvent,
    SessionStatus, Status, Tokens, ToolState, parse_event,
};

use crate::delivered::Delivered;
use crate::event::{
    AssistantDelta, ErrorReport, Event, Permission, PromptFinished, Thought, ToolCall, ToolError,
    ToolResult, ToolStatus, Unrecognized, Usage, UserMessage, Warning,
};
use crate::outcome::{ErrorKind, GuestExit, OutcomeStatus, RunError, RunOutcome};
use crate::tools::opencode_tool_category;
use crate::turns::Turns;

/// Event types that carry nothing a run's events describe.
pub const WITHOUT_MEANING: &[&str] = &[
    "server.connected",
    "server.heartbeat",
    "plugin.added",
    "catalog.updated",
    "integration.updated",
    "reference.updated",
    "project.updated",
    "session.created",
    "session.updated",
    "session.diff",
    "file.edited",
    "file.watcher.updated",
    "permission.replied",
    "question.replied",
    "question.rejected",
];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum TextKind {
    Text,
    Reasoning,
}

#[derive(Debug)]
struct TextPart {
    kind: TextKind,
    /// Characters (bytes) of the part's text already emitted.
    emitted: usize,
}

#[derive(Debug, Default)]
struct ToolPart {
    announced: bool,
    done: bool,
}

/// Stateful OpenCode → canonical mapping for one run (one session, any number of prompts).
#[derive(Debug, Default)]
pub struct OpenCodeNormalizer {
    session: Option<String>,
    turns: Turns,
    /// Ids of the user messages (their parts are Switchyard's own prompts).
    user_messages: HashSet<String>,
    text_parts: HashMap<String, TextPart>,
    /// By `callID`.
    tools: HashMap<String, ToolPart>,
    /// `step-finish` parts counted into the usage.
    steps_counted: HashSet<String>,
    /// Calls whose permission Switchyard rejected, with the policy's message.
    rejected: HashMap<String, String>,
    usage: Usage,
    /// The last assistant message's `finish` of the current prompt.
    finish: Option<String>,
    /// The assistant messages seen during the current prompt, and during earlier ones: an
    /// earlier prompt's message can still be updated after the next prompt was sent (its error
    /// arrives after the session went idle), and that is not the current prompt's.
    prompt_messages: HashSet<String>,
    earlier_messages: HashSet<String>,
    /// The current prompt's error (`session.error`).
    prompt_error: Option<(OutcomeStatus, RunError)>,
    prompts: u32,
    sent: u32,
    failure: Option<(OutcomeStatus, RunError)>,
    unrecognized: u64,
    /// What the gateway delivered, by delivered call id (as the backend looked it up).
    delivered: HashMap<String, Delivered>,
}

fn str_at<'a>(value: &'a Value, pointer: &str) -> Option<&'a str> {
    value.pointer(pointer).and_then(Value::as_str)
}

impl OpenCodeNormalizer {
    /// A normalizer for the events of `session` (the id `POST /session` answered).
    pub fn new(session: impl Into<String>) -> Self {
        Self {
            session: Some(session.into()),
            ..Self::default()
        }
    }

    /// Events kept as [`Event::Unrecognized`] so far.
    pub fn unrecognized(&self) -> u64 {
        self.unrecognized
    }

    /// Prompts answered so far.
    pub fn prompts_answered(&self) -> u32 {
        self.prompts
    }

    /// The run failed outside a prompt (start-up, the event stream): its failure, unless a
    /// prompt failed first.
    pub fn fail(&mut self, status: OutcomeStatus, error: RunError) {
        if self.failure.is_none() {
            self.failure = Some((status, error));
        }
    }

    /// The prompt Switchyard sends.
    pub fn prompt_sent(&mut self, text: &str) -> Event {
        self.sent += 1;
        self.finish = None;
        self.prompt_error = None;
        self.earlier_messages.extend(self.prompt_messages.drain());
        Event::UserMessage(UserMessage {
            text: text.to_owned(),
        })
    }

    fn unrecognized_event(&mut self, reason: impl Into<String>, raw: &Value) -> Event {
        self.unrecognized += 1;
        Event::Unrecognized(Unrecognized {
            reason: reason.into(),
            event_type: str_at(raw, "/type").map(str::to_owned),
            raw: raw.clone(),
        })
    }

    /// Something the backend received that is not an event it can use (a line that is not
    /// JSON): kept and counted.
    pub fn unrecognized_payload(&mut self, reason: impl Into<String>, raw: Value) -> Event {
        self.unrecognized += 1;
        Event::Unrecognized(Unrecognized {
            reason: reason.into(),
            event_type: None,
            raw,
        })
    }

    /// The delivered call id an event names (a tool part's `callID`), for the backend to look
    /// up before the event is mapped.
    pub fn named_call(raw: &Value) -> Option<String> {
        match parse_event(raw.clone()) {
            EventLine::Event { event, .. } => match *event {
                ServerEvent::PartUpdated(PartUpdated {
                    part:
                        switchyard_protocol::opencode::Part {
                            kind: PartKind::Tool { call_id, .. },
                            ..
                        },
                    ..
                }) => Some(call_id),
                _ => None,
            },
            _ => None,
        }
    }

    /// What the gateway delivered under `call_id` (`None`: nothing).
    pub fn delivered(&mut self, call_id: &str, delivered: Option<Delivered>) {
        if let Some(delivered) = delivered {
            self.delivered.insert(call_id.to_owned(), delivered);
        }
    }

    /// Switchyard's answer to a `permission.asked`. A rejected call's result is an error of
    /// kind `permission_rejected`.
    pub fn permission(&mut self, permission: Permission) -> Event {
        let refused = matches!(
            permission.outcome,
            crate::event::PermissionOutcome::Rejected | crate::event::PermissionOutcome::Refused
        );
        if refused
            && let Some(id) = permission
                .call_id
                .as_ref()
                .or(permission.model_call_id.as_ref())
        {
            let why = permission
                .reason
                .clone()
                .unwrap_or_else(|| "rejected by the permission policy".to_owned());
            self.rejected.insert(id.clone(), why);
        }
        Event::Permission(Box::new(permission))
    }

    /// One server-sent event.
    pub fn event(&mut self, raw: &Value) -> Vec<Event> {
        let event = match parse_event(raw.clone()) {
            EventLine::Event { event, .. } => event,
            EventLine::UnknownType { type_name, .. } => {
                if WITHOUT_MEANING.contains(&type_name.as_str()) {
                    return Vec::new();
                }
                return vec![
                    self.unrecognized_event("an event type with no canonical mapping", raw),
                ];
            }
            EventLine::Invalid { reason, .. } => return vec![self.unrecognized_event(reason, raw)],
        };
        if let (Some(ours), Some(theirs)) = (&self.session, event.session_id())
            && ours != theirs
        {
            return vec![self.unrecognized_event("an event of another session", raw)];
        }
        match *event {
            ServerEvent::MessageUpdated(update) => self.message_updated(raw, update),
            ServerEvent::PartUpdated(update) => self.part_updated(raw, update),
            ServerEvent::PartDelta(delta) => self.part_delta(raw, delta),
            ServerEvent::SessionStatus(status) => self.status(raw, status),
            ServerEvent::SessionError(error) => self.session_error(&error.error),
            // The end of a prompt; the backend calls `prompt_done` once for it.
            ServerEvent::SessionIdle(_) => Vec::new(),
            // Answered by the backend, which reports what it answered.
            ServerEvent::PermissionAsked(_) | ServerEvent::QuestionAsked(_) => Vec::new(),
        }
    }

    fn message_updated(&mut self, raw: &Value, update: MessageUpdated) -> Vec<Event> {
        let info = update.info;
        match info.role.as_str() {
            "user" => {
                self.user_messages.insert(info.id);
            }
            "assistant" if self.earlier_messages.contains(&info.id) => {}
            "assistant" => {
                self.prompt_messages.insert(info.id);
                if let Some(finish) = info.finish {
                    self.finish = Some(finish);
                }
                if let Some(error) = &info.error
                    && self.prompt_error.is_none()
                {
                    self.prompt_error = Some(classify_error(error));
                }
            }
            _ => {
                return vec![self.unrecognized_event("a message of an unknown role", raw)];
            }
        }
        Vec::new()
    }

    fn part_updated(&mut self, raw: &Value, update: PartUpdated) -> Vec<Event> {
        let part = update.part;
        if self.user_messages.contains(&part.message_id) {
            // The prompt as OpenCode stored it (Switchyard already emitted `user_message`).
            return Vec::new();
        }
        let id = part.id;
        match part.kind {
            PartKind::Text { text } => self.whole_text(id, TextKind::Text, &text),
            PartKind::Reasoning { text } => self.whole_text(id, TextKind::Reasoning, &text),
            PartKind::Tool {
                call_id,
                tool,
                state,
            } => self.tool_part(&call_id, &tool, &state),
            PartKind::StepStart {} => {
                // A new model step: after a tool round, a new turn.
                self.turns.awaiting_next_turn = self.turns.saw_model_output();
                Vec::new()
            }
            PartKind::StepFinish { tokens } => {
                if self.steps_counted.insert(id) {
                    self.add_tokens(tokens.as_ref());
                }
                Vec::new()
            }
            PartKind::Other => {
                vec![self.unrecognized_event("a part type with no canonical mapping", raw)]
            }
        }
    }

    /// A whole text or reasoning part: anything past what the deltas carried (a missed delta,
    /// or a part read back after a reconnect) is emitted now.
    fn whole_text(&mut self, id: String, kind: TextKind, text: &str) -> Vec<Event> {
        let state = self
            .text_parts
            .entry(id)
            .or_insert(TextPart { kind, emitted: 0 });
        let rest = text.get(state.emitted..).unwrap_or_default().to_owned();
        state.emitted = state.emitted.max(text.len());
        self.text(kind, &rest)
    }

    fn part_delta(&mut self, raw: &Value, delta: PartDelta) -> Vec<Event> {
        if delta.field != "text" {
            return vec![self.unrecognized_event("a delta of a field other than text", raw)];
        }
        let Some(state) = self.text_parts.get_mut(&delta.part_id) else {
            return vec![self.unrecognized_event("a delta of a part never announced", raw)];
        };
        state.emitted += delta.delta.len();
        let kind = state.kind;
        self.text(kind, &delta.delta)
    }

    fn text(&mut self, kind: TextKind, text: &str) -> Vec<Event> {
        if text.is_empty() {
            return Vec::new();
        }
        self.turns.begin_model_output();
        match kind {
            TextKind::Text => {
                self.turns.push_text(text);
                vec![Event::AssistantDelta(AssistantDelta {
                    text: text.to_owned(),
                    turn: self.turns.turn,
                })]
            }
            TextKind::Reasoning => vec![Event::Thought(Thought {
                text: text.to_owned(),
                turn: self.turns.turn,
            })],
        }
    }

    fn tool_part(&mut self, call_id: &str, tool: &str, state: &ToolState) -> Vec<Event> {
        let mut out = Vec::new();
        let entry = self.tools.entry(call_id.to_owned()).or_default();
        if !matches!(state, ToolState::Pending {}) && !entry.announced {
            entry.announced = true;
            // Calls of one step are one turn: only a new step starts the next turn.
            self.turns.tool_call(&mut out);
            self.usage.tool_calls += 1;
            let model_call_id = match self.delivered.get(call_id) {
                Some(d) if d.tool == tool => d.model_call_id.clone(),
                _ => call_id.to_owned(),
            };
            out.push(Event::ToolCall(ToolCall {
                call_id: call_id.to_owned(),
                model_call_id,
                tool_name: tool.to_owned(),
                category: opencode_tool_category(tool),
                arguments: state.input().cloned().unwrap_or(Value::Null),
                turn: self.turns.turn,
            }));
        }
        let entry = self.tools.entry(call_id.to_owned()).or_default();
        let end = match state {
            ToolState::Completed { output, .. } => {
                Some((ToolStatus::Success, output.clone(), None))
            }
            ToolState::Error {
                error, metadata, ..
            } => {
                let kind = if self.rejected.contains_key(call_id) {
                    "permission_rejected"
                } else if metadata.as_ref().and_then(|m| m.interrupted) == Some(true) {
                    "interrupted"
                } else {
                    "failed"
                };
                let error = ToolError {
                    kind: kind.to_owned(),
                    message: error.clone().unwrap_or_default(),
                };
                Some((ToolStatus::Error, None, Some(error)))
            }
            ToolState::Pending {} | ToolState::Running { .. } => None,
        };
        if let Some((status, output, error)) = end
            && !entry.done
        {
            entry.done = true;
            out.push(Event::ToolResult(ToolResult {
                call_id: call_id.to_owned(),
                tool_name: Some(tool.to_owned()),
                status,
                output,
                error,
                content: Vec::new(),
            }));
        }
        out
    }

    fn status(&mut self, raw: &Value, status: SessionStatus) -> Vec<Event> {
        match status.status {
            Status::Busy {} | Status::Idle {} => Vec::new(),
            Status::Retry { attempt, message } => vec![Event::Warning(Warning {
                message: format!(
                    "the guest retries the model call (attempt {}): {}",
                    attempt.unwrap_or(0),
                    message.unwrap_or_default()
                ),
                derived: false,
            })],
            Status::Other => {
                vec![self.unrecognized_event("a session status with no canonical mapping", raw)]
            }
        }
    }

    fn session_error(&mut self, error: &ErrorInfo) -> Vec<Event> {
        let classified = classify_error(error);
        let message = classified.1.message.clone();
        if self.prompt_error.is_none() {
            self.prompt_error = Some(classified);
        }
        vec![Event::Error(ErrorReport { message })]
    }

    fn add_tokens(&mut self, tokens: Option<&Tokens>) {
        let Some(tokens) = tokens else { return };
        let cache_read = tokens.cache.as_ref().map_or(0, |c| c.read);
        self.usage.input_tokens += tokens.input + cache_read;
        self.usage.cached_tokens += cache_read;
        self.usage.output_tokens += tokens.output;
        self.usage.total_tokens += tokens.input + cache_read + tokens.output;
    }

    /// The session went idle after a prompt: the prompt's end.
    pub fn prompt_done(&mut self) -> Vec<Event> {
        let mut out = Vec::new();
        self.turns.flush_text(&mut out);
        let index = self.prompts;
        self.prompts += 1;
        let error = match self.prompt_error.take() {
            Some(error) => Some(error),
            None => match self.finish.as_deref() {
                Some("stop" | "tool-calls") => None,
                Some("length") => Some((
                    OutcomeStatus::Failed,
                    RunError::new(ErrorKind::ModelOutput, "the model hit its output limit"),
                )),
                Some(other) => Some((
                    OutcomeStatus::Failed,
                    RunError::new(
                        ErrorKind::ModelOutput,
                        format!("the last model step finished with {other:?}"),
                    ),
                )),
                None => Some((
                    OutcomeStatus::Incomplete,
                    RunError::new(
                        ErrorKind::GuestFailure,
                        "the session went idle without an assistant answer",
                    ),
                )),
            },
        };
        if self.failure.is_none() {
            self.failure.clone_from(&error);
        }
        out.push(Event::PromptFinished(PromptFinished {
            prompt: index,
            stop_reason: self.finish.take(),
            error: error.map(|(_, e)| e),
            final_text: self.turns.final_text(),
        }));
        out.push(Event::Usage(self.usage.clone()));
        self.turns.awaiting_next_turn = self.turns.saw_model_output();
        out
    }

    /// Closes the run (see [`crate::acp::classify_acp`], which decides alike).
    pub fn finish(
        mut self,
        expected_prompts: u32,
        exit: GuestExit,
        fallback_message: Option<&str>,
    ) -> (Vec<Event>, RunOutcome) {
        let mut out = Vec::new();
        self.turns.flush_text(&mut out);
        let outcome = crate::acp::classify_acp(
            self.failure.clone(),
            self.prompts >= expected_prompts.max(self.sent).max(1),
            exit,
            fallback_message,
        );
        out.push(self.turns.run_finished(&outcome, self.unrecognized));
        (out, outcome)
    }
}

/// A `session.error` / message `error` (`{name, data}`) as a typed failure.
fn classify_error(error: &ErrorInfo) -> (OutcomeStatus, RunError) {
    let name = error.name.as_str();
    let message = error
        .data
        .as_ref()
        .and_then(|d| d.message.clone())
        .unwrap_or_else(|| serde_json::to_string(error).unwrap_or_default());
    let kind = match name {
        "APIError" => ErrorKind::Api {
            http_status: error
                .data
                .as_ref()
                .and_then(|d| d.status_code)
                .and_then(|s| u16::try_from(s).ok()),
        },
        "MessageAbortedError" => {
            return (
                OutcomeStatus::Cancelled,
                RunError::new(ErrorKind::Cancelled, message),
            );
        }
        "ProviderAuthError" => ErrorKind::Auth,
        "ContextOverflowError"
        | "MessageOutputLengthError"
        | "ContentFilterError"
        | "StructuredOutputError" => ErrorKind::ModelOutput,
        _ => ErrorKind::GuestFailure,
    };
    (
        OutcomeStatus::Failed,
        RunError::new(kind, format!("{name}: {message}")),
    )
}

#[cfg(test)]
#[path = "opencode_tests.rs"]
mod tests;
