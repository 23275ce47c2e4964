//! Normalizer: Codex 0.171.0's `codex app-server` notifications (typed by
//! `switchyard_protocol::codex`) → canonical [`Event`]s, and the typed outcome of a Codex run.
//!
//! - the thread Switchyard started or resumed is the session (its `thread/start` or
//!   `thread/resume` answer; `thread/started` repeats it);
//! - `item/agentMessage/delta` → `assistant_delta`; an `agentMessage` item's completed text adds
//!   what its deltas did not carry; reasoning deltas (summary and raw text) → `thought`, likewise;
//! - a tool item's `item/started` (`commandExecution`, `fileChange`, `mcpToolCall`,
//!   `dynamicToolCall`, `imageView`, `webSearch`) → `tool_call`: the item id is the model's call
//!   id as the guest received it (through the gateway, the gateway's delivered id); its
//!   `item/completed` → `tool_result` (`declined` is a permission rejection);
//! - `thread/tokenUsage/updated` adds the `last` response's tokens (of turns started in this
//!   run: a resumed thread first repeats the usage of its last turn); `error` with `willRetry` is
//!   a warning, without it an error report (the turn's failure comes with `turn/completed`);
//! - `turn/completed` ends a prompt: `completed`, `interrupted` (cancelled), `failed` (typed by
//!   its `codexErrorInfo`); tool items still open then are closed as interrupted.
//!
//! Everything else is kept as [`Event::Unrecognized`] and counted, except the methods listed in
//! [`WITHOUT_MEANING`].

use std::collections::{HashMap, HashSet};

use serde_json::{Value, json};
use switchyard_protocol::codex::{
    self as wire, ItemCompletedNotification, ItemStartedNotification, KnownItem, Notification,
    ThreadItem, TurnError, TurnNotification,
};

use crate::delivered::Delivered;
use crate::event::{
    AssistantDelta, ErrorReport, Event, Permission, PermissionOutcome, PromptFinished,
    SessionStarted, Thought, ToolCall, ToolError, ToolResult, ToolStatus, Unrecognized, Usage,
    UserMessage, Warning,
};
use crate::outcome::{ErrorKind, GuestExit, OutcomeStatus, RunError, RunOutcome};
use crate::tools::codex_tool_category;
use crate::turns::Turns;

/// Notification methods that carry nothing a run's events describe (status flags, rate-limit
/// snapshots of a provider Switchyard does not use, the turn's diff (the file changes are
/// items), streamed command output (the completed item carries all of it)).
pub const WITHOUT_MEANING: &[&str] = &[
    "thread/status/changed",
    "account/rateLimits/updated",
    "turn/diff/updated",
    "turn/plan/updated",
    "serverRequest/resolved",
    "remoteControl/status/changed",
    "mcpServer/startupStatus/updated",
    "thread/goal/cleared",
    "thread/readState/changed",
    "item/commandExecution/outputDelta",
    "item/fileChange/outputDelta",
    "item/fileChange/patchUpdated",
    "item/reasoning/summaryPartAdded",
    "item/mcpToolCall/progress",
    "turn/moderationMetadata",
];

/// Stateful Codex → canonical mapping for one run (one thread, any number of prompts).
#[derive(Debug, Default)]
pub struct CodexNormalizer {
    session: Option<String>,
    turns: Turns,
    /// Tool names of the tool items started, by item id.
    tools: HashMap<String, String>,
    /// Tool items started and not completed (closed at `turn/completed`), in order.
    open: Vec<String>,
    results: HashSet<String>,
    /// Text bytes the deltas of each item carried.
    streamed: HashMap<String, usize>,
    /// Calls whose approval Switchyard refused, with the reason.
    rejected: HashMap<String, String>,
    delivered: HashMap<String, Delivered>,
    /// The model batch of the last tool item (when the gateway knew it): Codex may run a
    /// batch's calls one after another, so a result is not the end of the model turn.
    last_batch: Option<u64>,
    usage: Usage,
    /// The turns started in this run (a resumed thread first repeats its last usage, of a
    /// turn of an earlier run).
    started_turns: HashSet<String>,
    sent: u32,
    answered: u32,
    /// The last `error` of the current turn (the turn's own error wins).
    turn_error: Option<TurnError>,
    failure: Option<(OutcomeStatus, RunError)>,
    prompt_failures: Vec<Option<(OutcomeStatus, RunError)>>,
    unrecognized: u64,
}

/// The tool a tool item stands for, as the model named it: Codex's built-in tool of that item
/// type, or `mcp__<server>__<tool>`. `None`: not a tool item.
pub fn item_tool(item: &KnownItem) -> Option<String> {
    Some(match item {
        KnownItem::CommandExecution(_) => "exec_command".to_owned(),
        KnownItem::FileChange(_) => "apply_patch".to_owned(),
        KnownItem::McpToolCall(i) => format!("mcp__{}__{}", i.server, i.tool),
        KnownItem::DynamicToolCall(i) => i.tool.clone(),
        KnownItem::ImageView(_) => "view_image".to_owned(),
        KnownItem::WebSearch(_) => "web_search".to_owned(),
        KnownItem::UserMessage(_)
        | KnownItem::AgentMessage(_)
        | KnownItem::Reasoning(_)
        | KnownItem::ContextCompaction(_) => return None,
    })
}

/// What the item says of its call's arguments (used when the gateway delivered none).
fn item_arguments(item: &KnownItem) -> Value {
    match item {
        KnownItem::CommandExecution(i) => json!({"command": i.command, "cwd": i.cwd}),
        KnownItem::FileChange(i) => json!({"changes": i.changes}),
        KnownItem::McpToolCall(i) => i.arguments.clone(),
        KnownItem::DynamicToolCall(i) => i.arguments.clone(),
        KnownItem::ImageView(i) => json!({"path": i.path}),
        KnownItem::WebSearch(i) => json!({"query": i.query}),
        _ => Value::Null,
    }
}

/// The text of an MCP result's `content` (its text blocks joined), else its JSON.
fn mcp_text(result: Option<&Value>) -> String {
    let Some(result) = result else {
        return String::new();
    };
    match result.get("content").and_then(Value::as_array) {
        Some(blocks) => blocks
            .iter()
            .filter_map(|b| b.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n"),
        None => result.to_string(),
    }
}

impl CodexNormalizer {
    /// Messages kept as [`Event::Unrecognized`] so far.
    pub fn unrecognized(&self) -> u64 {
        self.unrecognized
    }

    /// The run failed outside a prompt: its failure, unless a prompt failed first.
    pub fn fail(&mut self, status: OutcomeStatus, error: RunError) {
        if self.failure.is_none() {
            self.failure = Some((status, error));
        }
    }

    /// The prompt Switchyard sends (`turn/start`).
    pub fn prompt_sent(&mut self, text: &str) -> Event {
        self.sent += 1;
        Event::UserMessage(UserMessage {
            text: text.to_owned(),
        })
    }

    /// The thread Switchyard started or resumed: the session (once).
    pub fn thread(&mut self, thread_id: &str, model: &str) -> Vec<Event> {
        if self.session.is_some() {
            return Vec::new();
        }
        self.session = Some(thread_id.to_owned());
        vec![Event::SessionStarted(SessionStarted {
            session_id: thread_id.to_owned(),
            model: model.to_owned(),
        })]
    }

    /// What the gateway delivered under `call_id` (`None`: nothing).
    pub fn delivered(&mut self, call_id: &str, delivered: Option<Delivered>) {
        if let Some(delivered) = delivered {
            self.delivered.insert(call_id.to_owned(), delivered);
        }
    }

    /// Switchyard's answer to an approval request: a refused call's result is an error of kind
    /// `permission_rejected`.
    pub fn permission(&mut self, permission: Permission) -> Event {
        if matches!(
            permission.outcome,
            PermissionOutcome::Rejected | PermissionOutcome::Refused
        ) && let Some(id) = &permission.call_id
        {
            let why = permission
                .reason
                .clone()
                .unwrap_or_else(|| "rejected by the permission policy".to_owned());
            self.rejected.insert(id.clone(), why);
        }
        Event::Permission(Box::new(permission))
    }

    /// The call ids a notification names (a tool item's id), for the backend to look up
    /// first.
    pub fn named_calls(method: &str, params: &Value) -> Vec<String> {
        if method != wire::method::ITEM_STARTED {
            return Vec::new();
        }
        match wire::parse_notification(method, params) {
            Notification::ItemStarted(n) => match &n.item {
                ThreadItem::Known(item) if item_tool(item).is_some() => {
                    vec![item.id().to_owned()]
                }
                _ => Vec::new(),
            },
            _ => Vec::new(),
        }
    }

    fn unrecognized_message(
        &mut self,
        reason: impl Into<String>,
        method: &str,
        raw: &Value,
    ) -> Event {
        self.unrecognized += 1;
        Event::Unrecognized(Unrecognized {
            reason: reason.into(),
            event_type: Some(method.to_owned()),
            raw: raw.clone(),
        })
    }

    /// A stdout line that is not a JSON-RPC message: kept and counted.
    pub fn unrecognized_text(&mut self, text: &str, reason: &str) -> Event {
        self.unrecognized += 1;
        Event::Unrecognized(Unrecognized {
            reason: reason.to_owned(),
            event_type: None,
            raw: serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.to_owned())),
        })
    }

    /// A server request Switchyard does not serve (answered with an error by the backend).
    pub fn unserved_request(&mut self, method: &str, params: &Value) -> Event {
        self.unrecognized_message(
            "a server request Switchyard does not serve (answered with an error)",
            method,
            params,
        )
    }

    /// One server notification.
    pub fn notification(&mut self, method: &str, params: &Value) -> Vec<Event> {
        if WITHOUT_MEANING.contains(&method) {
            return Vec::new();
        }
        match wire::parse_notification(method, params) {
            Notification::ThreadStarted(n) => {
                let model = n
                    .thread
                    .extra
                    .get("model")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned();
                self.thread(&n.thread.id, &model)
            }
            Notification::TurnStarted(n) => {
                self.started_turns.insert(n.turn.id.clone());
                self.turn_error = None;
                Vec::new()
            }
            Notification::TurnCompleted(n) => self.turn_completed(&n),
            Notification::ItemStarted(n) => self.item_started(&n, params),
            Notification::ItemCompleted(n) => self.item_completed(&n, params),
            Notification::AgentMessageDelta(d) => {
                *self.streamed.entry(d.item_id.clone()).or_default() += d.delta.len();
                self.text("text", &d.delta)
            }
            Notification::ReasoningSummaryDelta(d) => {
                *self.streamed.entry(d.item_id.clone()).or_default() += d.delta.len();
                self.text("thinking", &d.delta)
            }
            Notification::ReasoningTextDelta(d) => {
                *self.streamed.entry(d.item_id.clone()).or_default() += d.delta.len();
                self.text("thinking", &d.delta)
            }
            Notification::CommandOutputDelta(_) => Vec::new(),
            Notification::TokenUsage(n) if !self.started_turns.contains(&n.turn_id) => Vec::new(),
            Notification::TokenUsage(n) => {
                let last = &n.token_usage.last;
                self.usage.input_tokens = self.usage.input_tokens.saturating_add(last.input_tokens);
                self.usage.cached_tokens = self
                    .usage
                    .cached_tokens
                    .saturating_add(last.cached_input_tokens);
                self.usage.output_tokens =
                    self.usage.output_tokens.saturating_add(last.output_tokens);
                self.usage.total_tokens = self.usage.total_tokens.saturating_add(last.total_tokens);
                Vec::new()
            }
            Notification::Error(n) => {
                if n.will_retry {
                    vec![Event::Warning(Warning {
                        message: format!("the guest retries the model call: {}", n.error.message),
                        derived: false,
                    })]
                } else {
                    let message = n.error.message.clone();
                    self.turn_error = Some(n.error);
                    vec![Event::Error(ErrorReport { message })]
                }
            }
            Notification::Unknown { method, params } => match method.as_str() {
                "configWarning" | "deprecationNotice" => {
                    let message = ["summary", "message", "details"]
                        .iter()
                        .find_map(|k| params.get(*k).and_then(Value::as_str))
                        .map_or_else(|| params.to_string(), str::to_owned);
                    vec![Event::Warning(Warning {
                        message,
                        derived: false,
                    })]
                }
                _ => vec![self.unrecognized_message(
                    "a notification with no canonical mapping",
                    &method,
                    &params,
                )],
            },
            Notification::Invalid { method, reason, .. } => vec![self.unrecognized_message(
                format!("a notification whose params do not fit its type: {reason}"),
                &method,
                params,
            )],
        }
    }

    /// Text or reasoning of the current model turn.
    fn text(&mut self, kind: &str, text: &str) -> Vec<Event> {
        if text.is_empty() {
            return Vec::new();
        }
        self.turns.begin_model_output();
        if kind == "thinking" {
            return vec![Event::Thought(Thought {
                text: text.to_owned(),
                turn: self.turns.turn,
            })];
        }
        self.turns.push_text(text);
        vec![Event::AssistantDelta(AssistantDelta {
            text: text.to_owned(),
            turn: self.turns.turn,
        })]
    }

    /// What of an item's whole text its deltas did not carry.
    fn rest<'t>(&mut self, id: &str, text: &'t str) -> &'t str {
        let streamed = self.streamed.remove(id).unwrap_or(0);
        text.get(streamed..).unwrap_or_default()
    }

    fn item_started(&mut self, n: &ItemStartedNotification, raw: &Value) -> Vec<Event> {
        let item = match &n.item {
            ThreadItem::Known(item) => item,
            ThreadItem::Other(_) => {
                return vec![self.unrecognized_message(
                    "an item type with no canonical mapping",
                    wire::method::ITEM_STARTED,
                    raw,
                )];
            }
        };
        let Some(item_tool) = item_tool(item) else {
            // Messages and reasoning start empty; their text comes as deltas.
            return Vec::new();
        };
        let id = item.id();
        if self.tools.contains_key(id) {
            return Vec::new();
        }
        let delivered = self.delivered.get(id);
        let batch = delivered.map(|d| d.batch);
        if batch.is_some() && batch == self.last_batch {
            // The next call of the same model batch: the same turn.
            self.turns.awaiting_next_turn = false;
        }
        self.last_batch = batch;
        // The delivered call names the tool as the model called it; without one, the item
        // type's tool.
        let tool = delivered.map_or(item_tool, |d| d.tool.clone());
        let model_call_id = delivered.map_or_else(|| id.to_owned(), |d| d.model_call_id.clone());
        let arguments = delivered.map_or_else(|| item_arguments(item), |d| d.arguments.clone());
        self.tools.insert(id.to_owned(), tool.clone());
        self.open.push(id.to_owned());
        let mut out = Vec::new();
        self.turns.tool_call(&mut out);
        self.usage.tool_calls += 1;
        out.push(Event::ToolCall(ToolCall {
            call_id: id.to_owned(),
            model_call_id,
            category: codex_tool_category(&tool),
            tool_name: tool,
            arguments,
            turn: self.turns.turn,
        }));
        out
    }

    fn item_completed(&mut self, n: &ItemCompletedNotification, raw: &Value) -> Vec<Event> {
        let item = match &n.item {
            ThreadItem::Known(item) => item,
            ThreadItem::Other(_) => {
                return vec![self.unrecognized_message(
                    "an item type with no canonical mapping",
                    wire::method::ITEM_COMPLETED,
                    raw,
                )];
            }
        };
        match item.as_ref() {
            KnownItem::AgentMessage(m) => {
                let rest = self.rest(&m.id, &m.text).to_owned();
                self.text("text", &rest)
            }
            KnownItem::Reasoning(r) => {
                let whole = r
                    .summary
                    .iter()
                    .chain(r.content.iter())
                    .cloned()
                    .collect::<Vec<_>>()
                    .join("\n");
                let streamed = self.streamed.remove(&r.id).unwrap_or(0);
                if streamed == 0 {
                    self.text("thinking", &whole)
                } else {
                    Vec::new()
                }
            }
            KnownItem::UserMessage(_) => Vec::new(),
            KnownItem::ContextCompaction(_) => vec![Event::Warning(Warning {
                message: "the guest compacted the thread's context".to_owned(),
                derived: true,
            })],
            tool_item => self.tool_completed(tool_item),
        }
    }

    fn tool_completed(&mut self, item: &KnownItem) -> Vec<Event> {
        let id = item.id().to_owned();
        if !self.results.insert(id.clone()) {
            return Vec::new();
        }
        self.open.retain(|open| open != &id);
        let (status, text) = match item {
            KnownItem::CommandExecution(c) => {
                let mut text = c.aggregated_output.clone().unwrap_or_default();
                if c.status == "failed" && text.is_empty() {
                    text = c.exit_code.map_or_else(
                        || "the command failed".to_owned(),
                        |code| format!("exit code {code}"),
                    );
                }
                (c.status.as_str(), text)
            }
            KnownItem::FileChange(f) => (
                f.status.as_str(),
                f.changes
                    .iter()
                    .map(|c| c.path.as_str())
                    .collect::<Vec<_>>()
                    .join("\n"),
            ),
            KnownItem::McpToolCall(m) => {
                let text = match (&m.error, m.status.as_str()) {
                    (Some(error), "failed") => error
                        .get("message")
                        .and_then(Value::as_str)
                        .map_or_else(|| error.to_string(), str::to_owned),
                    _ => mcp_text(m.result.as_ref()),
                };
                (m.status.as_str(), text)
            }
            KnownItem::DynamicToolCall(d) => (d.status.as_str(), String::new()),
            _ => ("completed", String::new()),
        };
        let (status, output, error) = match status {
            "completed" => (ToolStatus::Success, Some(text), None),
            "declined" => {
                let message = self
                    .rejected
                    .get(&id)
                    .cloned()
                    .unwrap_or_else(|| "declined".to_owned());
                let error = ToolError {
                    kind: "permission_rejected".to_owned(),
                    message,
                };
                (ToolStatus::Error, None, Some(error))
            }
            _ => {
                let kind = if self.rejected.contains_key(&id) {
                    "permission_rejected"
                } else {
                    "failed"
                };
                let error = ToolError {
                    kind: kind.to_owned(),
                    message: text,
                };
                (ToolStatus::Error, None, Some(error))
            }
        };
        let event = Event::ToolResult(ToolResult {
            tool_name: self.tools.get(&id).cloned(),
            call_id: id,
            status,
            output,
            error,
            content: Vec::new(),
        });
        self.turns.awaiting_next_turn = self.turns.saw_model_output();
        vec![event]
    }

    fn turn_completed(&mut self, n: &TurnNotification) -> Vec<Event> {
        let mut out = Vec::new();
        // Items a cancelled or failed turn left open get no `item/completed`.
        for id in std::mem::take(&mut self.open) {
            if self.results.insert(id.clone()) {
                out.push(Event::ToolResult(ToolResult {
                    tool_name: self.tools.get(&id).cloned(),
                    call_id: id,
                    status: ToolStatus::Error,
                    output: None,
                    error: Some(ToolError {
                        kind: "interrupted".to_owned(),
                        message: format!("the turn ended {} before the call did", n.turn.status),
                    }),
                    content: Vec::new(),
                }));
            }
        }
        self.turns.flush_text(&mut out);
        let failure = match n.turn.status.as_str() {
            "completed" => None,
            "interrupted" => Some((
                OutcomeStatus::Cancelled,
                RunError::new(ErrorKind::Cancelled, "the turn was interrupted"),
            )),
            _ => {
                let error = n.turn.error.clone().or_else(|| self.turn_error.take());
                Some(classify_turn_error(error.as_ref(), &n.turn.status))
            }
        };
        self.turn_error = None;
        self.answered += 1;
        self.prompt_failures.push(failure.clone());
        out.push(Event::PromptFinished(PromptFinished {
            prompt: self.answered.saturating_sub(1),
            stop_reason: Some(n.turn.status.clone()),
            error: failure.map(|(_, e)| e),
            final_text: self.turns.final_text(),
        }));
        out.push(Event::Usage(self.usage.clone()));
        self.turns.awaiting_next_turn = self.turns.saw_model_output();
        out
    }

    /// Closes the run: the first failed prompt's failure, else success once every prompt was
    /// answered (a prompt without `turn/completed` is a failure).
    pub fn finish(
        mut self,
        expected_prompts: u32,
        exit: GuestExit,
        fallback_message: Option<&str>,
    ) -> (Vec<Event>, RunOutcome) {
        let mut out = Vec::new();
        self.turns.flush_text(&mut out);
        let failure = self
            .prompt_failures
            .iter()
            .flatten()
            .next()
            .cloned()
            .or(self.failure.clone());
        let outcome = crate::acp::classify_acp(
            failure,
            self.answered >= expected_prompts.max(self.sent).max(1),
            exit,
            fallback_message,
        );
        out.push(self.turns.run_finished(&outcome, self.unrecognized));
        (out, outcome)
    }
}

/// The HTTP status a `codexErrorInfo` object carries (`{<variant>: {httpStatusCode}}`).
fn http_status(info: &Value) -> Option<u16> {
    info.as_object()?
        .values()
        .find_map(|v| v.get("httpStatusCode").and_then(Value::as_u64))
        .and_then(|s| u16::try_from(s).ok())
}

/// A failed turn as a typed failure, by its `codexErrorInfo`.
pub fn classify_turn_error(error: Option<&TurnError>, status: &str) -> (OutcomeStatus, RunError) {
    let Some(error) = error else {
        return (
            OutcomeStatus::Failed,
            RunError::new(
                ErrorKind::GuestFailure,
                format!("the turn ended {status} without an error"),
            ),
        );
    };
    let info = error.codex_error_info.clone().unwrap_or(Value::Null);
    let kind = match info.as_str() {
        Some("unauthorized") => ErrorKind::Auth,
        Some("badRequest" | "modelNotFound" | "contextWindowExceeded") => ErrorKind::Api {
            http_status: Some(match info.as_str() {
                Some("modelNotFound") => 404,
                _ => 400,
            }),
        },
        Some("rateLimitExceeded" | "usageLimitExceeded") => ErrorKind::Api {
            http_status: Some(429),
        },
        Some("internalServerError") => ErrorKind::Api {
            http_status: Some(500),
        },
        Some("serverOverloaded") => ErrorKind::Api {
            http_status: Some(503),
        },
        Some("sandboxError") => ErrorKind::Sandbox,
        Some(
            "cyberPolicy" | "bioPolicy" | "misalignmentPolicyViolation" | "inferenceHookDenied",
        ) => ErrorKind::ModelOutput,
        Some(_) => ErrorKind::GuestFailure,
        None if info.is_object() => ErrorKind::Api {
            http_status: http_status(&info),
        },
        None => ErrorKind::GuestFailure,
    };
    (
        OutcomeStatus::Failed,
        RunError::new(kind, error.message.clone()),
    )
}

#[cfg(test)]
#[path = "codex_tests.rs"]
mod tests;
