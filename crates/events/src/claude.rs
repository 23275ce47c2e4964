//! Normalizer: Claude Code 2.1.332's stream-json output (`--output-format stream-json
//! --verbose`, one JSON object per stdout line) → canonical [`Event`]s, and the typed outcome
//! of a Claude Code run.
//!
//! - `system/init` starts the session (it repeats at every turn in stream-json input mode:
//!   only the first one is an event);
//! - `stream_event` (`--include-partial-messages`) wraps the Messages stream: `text_delta` →
//!   `assistant_delta`, `thinking_delta` → `thought`, as they arrive;
//! - `assistant` carries one complete content block per line: `text` → `assistant_delta` (only
//!   what the block's stream events did not carry already), `thinking` → `thought` (likewise),
//!   `tool_use` → `tool_call` (its id is the gateway's delivered id);
//! - `user` carries tool results (`tool_result` blocks) → `tool_result`;
//! - `result` ends a prompt. Success is `is_error: false` with `terminal_reason` `completed`,
//!   never the `subtype` (API failures arrive as `subtype: success`). A `-p` run can emit
//!   more than one `result` per prompt (background subagents): each one after the first is
//!   the same prompt's later end, and the last one decides;
//! - `system/api_retry` is a warning; the control protocol's lines are the controller's.
//!
//! Everything else is kept as [`Event::Unrecognized`] and counted, except the types listed in
//! [`WITHOUT_MEANING`].

use std::collections::{HashMap, HashSet};

use serde_json::Value;

use crate::delivered::Delivered;
use crate::event::{
    AssistantDelta, Event, Permission, PermissionOutcome, PromptFinished, SessionStarted, Thought,
    ToolCall, ToolError, ToolResult, ToolStatus, Unrecognized, Usage, UserMessage, Warning,
};
use crate::outcome::{ErrorKind, GuestExit, OutcomeStatus, RunError, RunOutcome};
use crate::tools::claude_tool_category;
use crate::turns::Turns;

/// `type` or `type/subtype` values that carry nothing a run's events describe.
pub const WITHOUT_MEANING: &[&str] = &[
    "system/status",
    "system/thinking_tokens",
    "system/ui_invalidate",
    "system/background_tasks_changed",
    "rate_limit_event",
];

/// The content block a stream has open: its message, its type, and the bytes of its text its
/// deltas carried.
#[derive(Debug)]
struct OpenBlock {
    message: String,
    kind: String,
    emitted: usize,
}

/// Stateful Claude Code → canonical mapping for one run (one session, any number of prompts).
#[derive(Debug, Default)]
pub struct ClaudeNormalizer {
    session: Option<String>,
    open: Option<OpenBlock>,
    turns: Turns,
    /// Tool names by call id.
    tools: HashMap<String, String>,
    results: HashSet<String>,
    /// Calls whose permission Switchyard rejected, with the reason.
    rejected: HashMap<String, String>,
    delivered: HashMap<String, Delivered>,
    usage: Usage,
    sent: u32,
    /// Prompts whose first `result` came.
    answered: u32,
    failure: Option<(OutcomeStatus, RunError)>,
    /// The outcome of each answered prompt's last `result`.
    prompt_failures: Vec<Option<(OutcomeStatus, RunError)>>,
    unrecognized: u64,
}

fn str_at<'a>(value: &'a Value, pointer: &str) -> Option<&'a str> {
    value.pointer(pointer).and_then(Value::as_str)
}

fn u64_at(value: &Value, pointer: &str) -> u64 {
    value.pointer(pointer).and_then(Value::as_u64).unwrap_or(0)
}

impl ClaudeNormalizer {
    /// Lines kept as [`Event::Unrecognized`] so far.
    pub fn unrecognized(&self) -> u64 {
        self.unrecognized
    }

    /// The run failed outside a prompt: its failure, unless a prompt failed first.
    pub fn fail(&mut self, status: OutcomeStatus, error: RunError) {
        if self.failure.is_none() {
            self.failure = Some((status, error));
        }
    }

    /// The prompt Switchyard sends.
    pub fn prompt_sent(&mut self, text: &str) -> Event {
        self.sent += 1;
        Event::UserMessage(UserMessage {
            text: text.to_owned(),
        })
    }

    /// What the gateway delivered under `call_id` (`None`: nothing).
    pub fn delivered(&mut self, call_id: &str, delivered: Option<Delivered>) {
        if let Some(delivered) = delivered {
            self.delivered.insert(call_id.to_owned(), delivered);
        }
    }

    /// Switchyard's answer to a `can_use_tool` request: a refused call's result is an error of
    /// kind `permission_rejected`.
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

    /// The call ids a line names (its `tool_use` blocks), for the backend to look up first.
    pub fn named_calls(line: &Value) -> Vec<String> {
        if line.get("type").and_then(Value::as_str) != Some("assistant") {
            return Vec::new();
        }
        blocks(line)
            .iter()
            .filter(|b| str_at(b, "/type") == Some("tool_use"))
            .filter_map(|b| str_at(b, "/id").map(str::to_owned))
            .collect()
    }

    fn unrecognized_line(&mut self, reason: impl Into<String>, raw: &Value) -> Event {
        self.unrecognized += 1;
        Event::Unrecognized(Unrecognized {
            reason: reason.into(),
            event_type: str_at(raw, "/type").map(str::to_owned),
            raw: raw.clone(),
        })
    }

    /// A stdout line that is not JSON: kept and counted.
    pub fn unrecognized_text(&mut self, text: &str) -> Event {
        self.unrecognized += 1;
        Event::Unrecognized(Unrecognized {
            reason: "a stdout line that is not JSON".to_owned(),
            event_type: None,
            raw: Value::String(text.to_owned()),
        })
    }

    /// One stdout message.
    pub fn line(&mut self, raw: &Value) -> Vec<Event> {
        let kind = str_at(raw, "/type").unwrap_or_default();
        let subtype = str_at(raw, "/subtype");
        let name = match subtype {
            Some(sub) => format!("{kind}/{sub}"),
            None => kind.to_owned(),
        };
        if WITHOUT_MEANING.contains(&name.as_str()) {
            return Vec::new();
        }
        match (kind, subtype) {
            ("system", Some("init")) => self.init(raw),
            ("system", Some("api_retry")) => vec![Event::Warning(Warning {
                message: format!(
                    "the guest retries the model call (attempt {} of {}, status {}): {}",
                    u64_at(raw, "/attempt"),
                    u64_at(raw, "/max_retries"),
                    raw.get("error_status").unwrap_or(&Value::Null),
                    str_at(raw, "/error").unwrap_or_default()
                ),
                derived: false,
            })],
            ("stream_event", _) => self.stream_event(raw),
            ("assistant", _) => self.assistant(raw),
            ("user", _) => self.user(raw),
            ("result", _) => self.result(raw),
            _ => vec![self.unrecognized_line("a message type with no canonical mapping", raw)],
        }
    }

    fn init(&mut self, raw: &Value) -> Vec<Event> {
        let (Some(session), Some(model)) = (str_at(raw, "/session_id"), str_at(raw, "/model"))
        else {
            return vec![self.unrecognized_line("an init without session_id or model", raw)];
        };
        if self.session.is_some() {
            // Repeated at every turn of a stream-json session.
            return Vec::new();
        }
        self.session = Some(session.to_owned());
        vec![Event::SessionStarted(SessionStarted {
            session_id: session.to_owned(),
            model: model.to_owned(),
        })]
    }

    fn stream_event(&mut self, raw: &Value) -> Vec<Event> {
        let Some(event) = raw.get("event") else {
            return vec![self.unrecognized_line("a stream_event without its event", raw)];
        };
        match str_at(event, "/type").unwrap_or_default() {
            "content_block_start" => {
                self.open = Some(OpenBlock {
                    message: str_at(raw, "/api_message_id")
                        .unwrap_or_default()
                        .to_owned(),
                    kind: str_at(event, "/content_block/type")
                        .unwrap_or_default()
                        .to_owned(),
                    emitted: 0,
                });
                Vec::new()
            }
            "content_block_delta" => {
                let delta = event.get("delta").unwrap_or(&Value::Null);
                let (kind, text) = match str_at(delta, "/type") {
                    Some("text_delta") => ("text", str_at(delta, "/text")),
                    Some("thinking_delta") => ("thinking", str_at(delta, "/thinking")),
                    Some("input_json_delta" | "signature_delta") => return Vec::new(),
                    _ => {
                        return vec![
                            self.unrecognized_line("a delta with no canonical mapping", raw),
                        ];
                    }
                };
                let text = text.unwrap_or_default();
                match &mut self.open {
                    Some(open) if open.kind == kind => open.emitted += text.len(),
                    _ => {
                        return vec![
                            self.unrecognized_line("a delta of a block never started", raw),
                        ];
                    }
                }
                self.block_text(kind, text)
            }
            "content_block_stop" => {
                self.open = None;
                Vec::new()
            }
            "message_start" | "message_delta" | "message_stop" | "ping" => Vec::new(),
            _ => vec![self.unrecognized_line("a stream event with no canonical mapping", raw)],
        }
    }

    /// Text or thinking of the current turn.
    fn block_text(&mut self, kind: &str, text: &str) -> Vec<Event> {
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

    /// What of a whole block's text its stream events did not carry.
    fn rest_of<'t>(&mut self, message: Option<&str>, kind: &str, text: &'t str) -> &'t str {
        match &mut self.open {
            Some(open) if Some(open.message.as_str()) == message && open.kind == kind => {
                let rest = text.get(open.emitted..).unwrap_or_default();
                open.emitted = open.emitted.max(text.len());
                rest
            }
            _ => text,
        }
    }

    fn assistant(&mut self, raw: &Value) -> Vec<Event> {
        let Some(content) = raw.pointer("/message/content").and_then(Value::as_array) else {
            return vec![self.unrecognized_line("an assistant message without content", raw)];
        };
        let message = str_at(raw, "/message/id");
        let mut out = Vec::new();
        for block in content {
            match str_at(block, "/type") {
                Some(kind @ ("text" | "thinking")) => {
                    let text = str_at(block, &format!("/{kind}")).unwrap_or_default();
                    let rest = self.rest_of(message, kind, text);
                    out.extend(self.block_text(kind, rest));
                }
                Some("tool_use") => {
                    let (Some(id), Some(name)) = (str_at(block, "/id"), str_at(block, "/name"))
                    else {
                        out.push(self.unrecognized_line("a tool_use without id or name", raw));
                        continue;
                    };
                    if self.tools.contains_key(id) {
                        continue;
                    }
                    self.tools.insert(id.to_owned(), name.to_owned());
                    self.turns.tool_call(&mut out);
                    self.usage.tool_calls += 1;
                    let model_call_id = match self.delivered.get(id) {
                        Some(d) if d.tool == name => d.model_call_id.clone(),
                        _ => id.to_owned(),
                    };
                    out.push(Event::ToolCall(ToolCall {
                        call_id: id.to_owned(),
                        model_call_id,
                        tool_name: name.to_owned(),
                        category: claude_tool_category(name),
                        arguments: block.get("input").cloned().unwrap_or(Value::Null),
                        turn: self.turns.turn,
                    }));
                }
                _ => out.push(self.unrecognized_line("an assistant block with no mapping", raw)),
            }
        }
        out
    }

    fn user(&mut self, raw: &Value) -> Vec<Event> {
        let content = raw.pointer("/message/content");
        let Some(blocks) = content.and_then(Value::as_array) else {
            // The guest's echo of a prompt (`--replay-user-messages`) or a plain text turn.
            return vec![self.unrecognized_line("a user message without tool results", raw)];
        };
        let mut out = Vec::new();
        for block in blocks {
            if str_at(block, "/type") != Some("tool_result") {
                // `[Request interrupted by user]` and other text the guest adds.
                continue;
            }
            let Some(id) = str_at(block, "/tool_use_id") else {
                out.push(self.unrecognized_line("a tool_result without tool_use_id", raw));
                continue;
            };
            if !self.results.insert(id.to_owned()) {
                continue;
            }
            let text = result_text(block.get("content"));
            let failed = block.get("is_error").and_then(Value::as_bool) == Some(true);
            let (status, output, error) = if failed {
                let kind = if self.rejected.contains_key(id) {
                    "permission_rejected"
                } else {
                    "failed"
                };
                let error = ToolError {
                    kind: kind.to_owned(),
                    message: text,
                };
                (ToolStatus::Error, None, Some(error))
            } else {
                (ToolStatus::Success, Some(text), None)
            };
            out.push(Event::ToolResult(ToolResult {
                call_id: id.to_owned(),
                tool_name: self.tools.get(id).cloned(),
                status,
                output,
                error,
                content: Vec::new(),
            }));
            self.turns.awaiting_next_turn = self.turns.saw_model_output();
        }
        out
    }

    fn result(&mut self, raw: &Value) -> Vec<Event> {
        let Some(is_error) = raw.get("is_error").and_then(Value::as_bool) else {
            return vec![self.unrecognized_line("a result without is_error", raw)];
        };
        let mut out = Vec::new();
        self.turns.flush_text(&mut out);
        let terminal = str_at(raw, "/terminal_reason");
        let failure = match (is_error, terminal) {
            (false, Some("completed") | None) => None,
            (_, Some(reason @ ("aborted_streaming" | "aborted_tools"))) => Some((
                OutcomeStatus::Cancelled,
                RunError::new(ErrorKind::Cancelled, format!("the turn was {reason}")),
            )),
            (_, reason) => Some(classify_result(raw, reason)),
        };
        // A later result of the same prompt (a background subagent's turn) replaces its end.
        let later = self.answered > 0 && self.prompt_failures.len() as u32 >= self.sent;
        if later {
            if let Some(last) = self.prompt_failures.last_mut() {
                *last = failure.clone();
            }
        } else {
            self.answered += 1;
            self.prompt_failures.push(failure.clone());
        }
        self.add_usage(raw);
        out.push(Event::PromptFinished(PromptFinished {
            prompt: self.answered.saturating_sub(1),
            stop_reason: str_at(raw, "/stop_reason").or(terminal).map(str::to_owned),
            error: failure.map(|(_, e)| e),
            final_text: self.turns.final_text(),
        }));
        out.push(Event::Usage(self.usage.clone()));
        self.turns.awaiting_next_turn = self.turns.saw_model_output();
        out
    }

    fn add_usage(&mut self, raw: &Value) {
        let cached = u64_at(raw, "/usage/cache_read_input_tokens");
        let input = u64_at(raw, "/usage/input_tokens")
            + cached
            + u64_at(raw, "/usage/cache_creation_input_tokens");
        let output = u64_at(raw, "/usage/output_tokens");
        self.usage.input_tokens += input;
        self.usage.cached_tokens += cached;
        self.usage.output_tokens += output;
        self.usage.total_tokens += input + output;
        self.usage.duration_ms += u64_at(raw, "/duration_ms");
    }

    /// Closes the run: the first failed prompt's failure, else success once every prompt was
    /// answered.
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

/// The content blocks of an `assistant` or `user` line.
fn blocks(line: &Value) -> Vec<Value> {
    line.pointer("/message/content")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default()
}

/// A `tool_result`'s content as text (a string, or its text blocks joined).
fn result_text(content: Option<&Value>) -> String {
    match content {
        Some(Value::String(text)) => text.clone(),
        Some(Value::Array(blocks)) => blocks
            .iter()
            .filter_map(|b| str_at(b, "/text"))
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

/// A failed `result` as a typed failure.
fn classify_result(raw: &Value, terminal: Option<&str>) -> (OutcomeStatus, RunError) {
    let message = raw
        .get("errors")
        .and_then(Value::as_array)
        .and_then(|e| e.first())
        .and_then(Value::as_str)
        .or_else(|| str_at(raw, "/result"))
        .unwrap_or("the guest reported an error")
        .to_owned();
    let status = raw
        .get("api_error_status")
        .and_then(Value::as_u64)
        .and_then(|s| u16::try_from(s).ok());
    let kind = match terminal {
        Some("api_error") => match status {
            Some(401 | 403) => ErrorKind::Auth,
            http_status => ErrorKind::Api { http_status },
        },
        Some("max_turns") => ErrorKind::TurnLimit,
        Some("image_error") => ErrorKind::Input,
        _ if str_at(raw, "/subtype") == Some("error_max_turns") => ErrorKind::TurnLimit,
        _ if status.is_some() => ErrorKind::Api {
            http_status: status,
        },
        _ => ErrorKind::GuestFailure,
    };
    (OutcomeStatus::Failed, RunError::new(kind, message))
}

#[cfg(test)]
#[path = "claude_tests.rs"]
mod tests;
