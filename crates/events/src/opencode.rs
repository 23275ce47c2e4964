//! Normalizer: OpenCode 1.18.33's server-sent events (`GET /event` of `opencode serve`) →
//! canonical [`Event`]s, and the typed outcome of an OpenCode run.
//!
//! The backend hands over each event's JSON (`{id, type, properties}`) as received. State is
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
enum PartKind {
    Text,
    Reasoning,
}

#[derive(Debug)]
struct TextPart {
    kind: PartKind,
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
        (str_at(raw, "/type") == Some("message.part.updated"))
            .then(|| str_at(raw, "/properties/part/callID").map(str::to_owned))
            .flatten()
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
        let Some(kind) = str_at(raw, "/type") else {
            return vec![self.unrecognized_event("an event without a type", raw)];
        };
        let properties = raw.get("properties").unwrap_or(&Value::Null);
        if let (Some(ours), Some(theirs)) = (&self.session, str_at(properties, "/sessionID"))
            && ours != theirs
        {
            return vec![self.unrecognized_event("an event of another session", raw)];
        }
        match kind {
            "message.updated" => self.message_updated(raw, properties),
            "message.part.updated" => self.part_updated(raw, properties),
            "message.part.delta" => self.part_delta(raw, properties),
            "session.status" => self.status(raw, properties),
            "session.error" => self.session_error(properties),
            // The end of a prompt; the backend calls `prompt_done` once for it.
            "session.idle" => Vec::new(),
            // Answered by the backend, which reports what it answered.
            "permission.asked" | "question.asked" => Vec::new(),
            kind if WITHOUT_MEANING.contains(&kind) => Vec::new(),
            _ => vec![self.unrecognized_event("an event type with no canonical mapping", raw)],
        }
    }

    fn message_updated(&mut self, raw: &Value, properties: &Value) -> Vec<Event> {
        let info = properties.get("info").unwrap_or(&Value::Null);
        let (Some(id), Some(role)) = (str_at(info, "/id"), str_at(info, "/role")) else {
            return vec![self.unrecognized_event("message.updated without id and role", raw)];
        };
        match role {
            "user" => {
                self.user_messages.insert(id.to_owned());
            }
            "assistant" => {
                if let Some(finish) = str_at(info, "/finish") {
                    self.finish = Some(finish.to_owned());
                }
                if let Some(error) = info.get("error").filter(|e| !e.is_null())
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

    fn part_updated(&mut self, raw: &Value, properties: &Value) -> Vec<Event> {
        let part = properties.get("part").unwrap_or(&Value::Null);
        let (Some(id), Some(kind)) = (str_at(part, "/id"), str_at(part, "/type")) else {
            return vec![self.unrecognized_event("a part without id and type", raw)];
        };
        if str_at(part, "/messageID").is_some_and(|m| self.user_messages.contains(m)) {
            // The prompt as OpenCode stored it (Switchyard already emitted `user_message`).
            return Vec::new();
        }
        match kind {
            "text" | "reasoning" => {
                let kind = if kind == "text" {
                    PartKind::Text
                } else {
                    PartKind::Reasoning
                };
                let text = str_at(part, "/text").unwrap_or_default();
                let state = self
                    .text_parts
                    .entry(id.to_owned())
                    .or_insert(TextPart { kind, emitted: 0 });
                // The whole part: anything past what the deltas carried (a missed delta, or a
                // part read back after a reconnect) is emitted now.
                let rest = text.get(state.emitted..).unwrap_or_default().to_owned();
                state.emitted = state.emitted.max(text.len());
                self.text(kind, &rest)
            }
            "tool" => self.tool_part(raw, part),
            "step-start" => {
                // A new model step: after a tool round, a new turn.
                self.turns.awaiting_next_turn = self.turns.saw_model_output();
                Vec::new()
            }
            "step-finish" => {
                if self.steps_counted.insert(id.to_owned()) {
                    self.add_tokens(part.get("tokens"));
                }
                Vec::new()
            }
            _ => vec![self.unrecognized_event("a part type with no canonical mapping", raw)],
        }
    }

    fn part_delta(&mut self, raw: &Value, properties: &Value) -> Vec<Event> {
        let (Some(id), Some(delta)) = (str_at(properties, "/partID"), str_at(properties, "/delta"))
        else {
            return vec![self.unrecognized_event("a delta without partID and delta", raw)];
        };
        if str_at(properties, "/field") != Some("text") {
            return vec![self.unrecognized_event("a delta of a field other than text", raw)];
        }
        let Some(state) = self.text_parts.get_mut(id) else {
            return vec![self.unrecognized_event("a delta of a part never announced", raw)];
        };
        state.emitted += delta.len();
        let kind = state.kind;
        self.text(kind, delta)
    }

    fn text(&mut self, kind: PartKind, text: &str) -> Vec<Event> {
        if text.is_empty() {
            return Vec::new();
        }
        self.turns.begin_model_output();
        match kind {
            PartKind::Text => {
                self.turns.push_text(text);
                vec![Event::AssistantDelta(AssistantDelta {
                    text: text.to_owned(),
                    turn: self.turns.turn,
                })]
            }
            PartKind::Reasoning => vec![Event::Thought(Thought {
                text: text.to_owned(),
                turn: self.turns.turn,
            })],
        }
    }

    fn tool_part(&mut self, raw: &Value, part: &Value) -> Vec<Event> {
        let (Some(call_id), Some(tool), Some(status)) = (
            str_at(part, "/callID"),
            str_at(part, "/tool"),
            str_at(part, "/state/status"),
        ) else {
            return vec![
                self.unrecognized_event("a tool part without callID, tool and state", raw),
            ];
        };
        let mut out = Vec::new();
        if !matches!(status, "pending" | "running" | "completed" | "error") {
            return vec![self.unrecognized_event("a tool state with no canonical mapping", raw)];
        }
        let state = part.get("state").unwrap_or(&Value::Null);
        let entry = self.tools.entry(call_id.to_owned()).or_default();
        if status != "pending" && !entry.announced {
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
                arguments: state.get("input").cloned().unwrap_or(Value::Null),
                turn: self.turns.turn,
            }));
        }
        let entry = self.tools.entry(call_id.to_owned()).or_default();
        if matches!(status, "completed" | "error") && !entry.done {
            entry.done = true;
            let (status, output, error) = if status == "completed" {
                let output = str_at(state, "/output").map(str::to_owned);
                (ToolStatus::Success, output, None)
            } else {
                let message = str_at(state, "/error").unwrap_or_default().to_owned();
                let kind = if self.rejected.contains_key(call_id) {
                    "permission_rejected"
                } else if state.pointer("/metadata/interrupted") == Some(&Value::Bool(true)) {
                    "interrupted"
                } else {
                    "failed"
                };
                let error = ToolError {
                    kind: kind.to_owned(),
                    message,
                };
                (ToolStatus::Error, None, Some(error))
            };
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

    fn status(&mut self, raw: &Value, properties: &Value) -> Vec<Event> {
        match str_at(properties, "/status/type") {
            Some("busy" | "idle") => Vec::new(),
            Some("retry") => {
                let attempt = properties
                    .pointer("/status/attempt")
                    .and_then(Value::as_u64)
                    .unwrap_or(0);
                let message = str_at(properties, "/status/message").unwrap_or_default();
                vec![Event::Warning(Warning {
                    message: format!(
                        "the guest retries the model call (attempt {attempt}): {message}"
                    ),
                    derived: false,
                })]
            }
            _ => vec![self.unrecognized_event("a session status with no canonical mapping", raw)],
        }
    }

    fn session_error(&mut self, properties: &Value) -> Vec<Event> {
        let error = properties.get("error").unwrap_or(&Value::Null);
        let classified = classify_error(error);
        let message = classified.1.message.clone();
        if self.prompt_error.is_none() {
            self.prompt_error = Some(classified);
        }
        vec![Event::Error(ErrorReport { message })]
    }

    fn add_tokens(&mut self, tokens: Option<&Value>) {
        let Some(tokens) = tokens else { return };
        let count = |pointer: &str| tokens.pointer(pointer).and_then(Value::as_u64).unwrap_or(0);
        let cache_read = count("/cache/read");
        let input = count("/input");
        let output = count("/output");
        self.usage.input_tokens += input + cache_read;
        self.usage.cached_tokens += cache_read;
        self.usage.output_tokens += output;
        self.usage.total_tokens += input + cache_read + output;
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
fn classify_error(error: &Value) -> (OutcomeStatus, RunError) {
    let name = str_at(error, "/name").unwrap_or("UnknownError");
    let message = str_at(error, "/data/message")
        .map(str::to_owned)
        .unwrap_or_else(|| error.to_string());
    let kind = match name {
        "APIError" => ErrorKind::Api {
            http_status: error
                .pointer("/data/statusCode")
                .and_then(Value::as_u64)
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
