//! Normalizer: Gemini CLI's ACP traffic (`session/update` notifications, permission requests,
//! `session/prompt` answers) → canonical [`Event`]s, and the typed outcome of an ACP run.
//!
//! The backend hands over the raw JSON-RPC `params`; they are read with the
//! `agent-client-protocol-schema` types. An update those types cannot read, or a kind no mapping
//! exists for, becomes [`Event::Unrecognized`] and is counted, never dropped. Tool names come
//! from the gateway's delivered calls when the backend has them (ACP carries only a display
//! title), else from the `toolCallId` (`<name>__<id>`). The guest runs the calls of one model
//! response one after another; the gateway's batch numbers keep them in one turn, and without
//! them (no gateway) each tool round counts as a turn.

use std::collections::HashMap;

use agent_client_protocol_schema::v1::{
    ContentBlock, SessionNotification, SessionUpdate, StopReason, ToolCallStatus,
};
use serde_json::Value;

use crate::event::{
    AssistantDelta, Event, ModelUsage, PromptFinished, Thought, ToolCall, ToolError, ToolResult,
    ToolStatus, Unrecognized, Usage, UserMessage,
};
use crate::outcome::{ErrorKind, GuestExit, OutcomeStatus, RunError, RunOutcome};
use crate::tools::gemini_tool_category;
use crate::turns::Turns;

pub use crate::delivered::Delivered;

/// The gateway's delivered call of a model call id.
pub type CallLookup<'a> = &'a dyn Fn(&str) -> Option<Delivered>;

/// A JSON-RPC error answer.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RpcError {
    pub code: i64,
    pub message: String,
}

/// Stateful ACP → canonical mapping for one run (one session, any number of prompts).
#[derive(Debug, Default)]
pub struct AcpNormalizer {
    turns: Turns,
    /// toolCallId → (name, whether a `tool_result` was emitted).
    tools: HashMap<String, (String, bool)>,
    /// The model batch of the last tool call (when the gateway knew it): the guest runs a
    /// batch's calls one after another, so a result is not the end of the turn.
    last_batch: Option<u64>,
    prompts: u32,
    /// Prompts sent so far.
    sent: u32,
    /// The first failed prompt's error; later prompts are not sent.
    failure: Option<(OutcomeStatus, RunError)>,
    usage: Usage,
    unrecognized: u64,
}

impl AcpNormalizer {
    pub fn new() -> Self {
        Self::default()
    }

    /// Updates kept as [`Event::Unrecognized`] so far.
    pub fn unrecognized(&self) -> u64 {
        self.unrecognized
    }

    /// Prompts answered so far.
    pub fn prompts_answered(&self) -> u32 {
        self.prompts
    }

    /// The session could not be set up (or its connection failed): the run's failure, unless
    /// a prompt failed first.
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

    /// Something the guest sent that the backend could not use: kept and counted.
    pub fn unrecognized_message(
        &mut self,
        reason: String,
        method: Option<String>,
        raw: Value,
    ) -> Event {
        self.unrecognized += 1;
        Event::Unrecognized(Unrecognized {
            reason,
            event_type: method,
            raw,
        })
    }

    /// The call's name, model call id and (when delivered) what the gateway delivered.
    fn resolve(tool_call_id: &str, lookup: CallLookup<'_>) -> (String, String, Option<Delivered>) {
        for (at, _) in tool_call_id.match_indices("__") {
            let (name, id) = (&tool_call_id[..at], &tool_call_id[at + 2..]);
            if let Some(delivered) = lookup(id)
                && delivered.tool == name
            {
                return (
                    name.to_owned(),
                    delivered.model_call_id.clone(),
                    Some(delivered),
                );
            }
        }
        match tool_call_id.split_once("__") {
            Some((name, id)) => (name.to_owned(), id.to_owned(), None),
            None => (tool_call_id.to_owned(), tool_call_id.to_owned(), None),
        }
    }

    /// A tool call the guest announced (by `tool_call`, or by asking permission for it).
    pub fn tool_call(&mut self, tool_call_id: &str, lookup: CallLookup<'_>) -> Vec<Event> {
        let mut out = Vec::new();
        if self.tools.contains_key(tool_call_id) {
            return out;
        }
        let (name, model_call_id, delivered) = Self::resolve(tool_call_id, lookup);
        let batch = delivered.as_ref().map(|d| d.batch);
        if batch.is_some() && batch == self.last_batch {
            // The next call of the same model batch: the same turn.
            self.turns.awaiting_next_turn = false;
        }
        self.last_batch = batch;
        self.turns.tool_call(&mut out);
        self.usage.tool_calls += 1;
        let arguments = delivered.map_or(Value::Null, |d| d.arguments);
        self.tools
            .insert(tool_call_id.to_owned(), (name.clone(), false));
        out.push(Event::ToolCall(ToolCall {
            call_id: tool_call_id.to_owned(),
            model_call_id,
            category: gemini_tool_category(&name),
            tool_name: name,
            arguments,
            turn: self.turns.turn,
        }));
        out
    }

    fn tool_result(
        &mut self,
        tool_call_id: &str,
        status: ToolStatus,
        error: Option<ToolError>,
        content: Vec<Value>,
    ) -> Vec<Event> {
        let tool_name = match self.tools.get_mut(tool_call_id) {
            Some((name, done)) => {
                if *done {
                    return Vec::new();
                }
                *done = true;
                Some(name.clone())
            }
            None => None,
        };
        self.turns.awaiting_next_turn = true;
        let output = content
            .iter()
            .filter_map(|c| c.pointer("/content/text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n");
        vec![Event::ToolResult(ToolResult {
            call_id: tool_call_id.to_owned(),
            tool_name,
            status,
            output: (!output.is_empty() && status == ToolStatus::Success).then_some(output),
            error,
            content,
        })]
    }

    /// A call the policy rejected: the guest sends no update for it, so the result is derived.
    pub fn tool_rejected(&mut self, tool_call_id: &str, message: &str) -> Vec<Event> {
        self.tool_result(
            tool_call_id,
            ToolStatus::Error,
            Some(ToolError {
                kind: "permission_rejected".into(),
                message: message.to_owned(),
            }),
            Vec::new(),
        )
    }

    /// One `session/update` notification's params.
    pub fn update(&mut self, params: &Value, lookup: CallLookup<'_>) -> Vec<Event> {
        let notification: SessionNotification = match serde_json::from_value(params.clone()) {
            Ok(n) => n,
            Err(e) => {
                return vec![self.unrecognized_message(
                    format!("session/update the ACP types cannot read: {e}"),
                    Some("session/update".into()),
                    params.clone(),
                )];
            }
        };
        let raw_update = params.get("update").cloned().unwrap_or(Value::Null);
        let mut out = Vec::new();
        match notification.update {
            SessionUpdate::AgentMessageChunk(chunk) => match chunk.content {
                ContentBlock::Text(text) => {
                    self.turns.begin_model_output();
                    self.turns.push_text(&text.text);
                    out.push(Event::AssistantDelta(AssistantDelta {
                        text: text.text,
                        turn: self.turns.turn,
                    }));
                }
                _ => out.push(self.unmapped(&raw_update, "agent_message_chunk without text")),
            },
            SessionUpdate::AgentThoughtChunk(chunk) => match chunk.content {
                ContentBlock::Text(text) => {
                    self.turns.begin_model_output();
                    out.push(Event::Thought(Thought {
                        text: text.text,
                        turn: self.turns.turn,
                    }));
                }
                _ => out.push(self.unmapped(&raw_update, "agent_thought_chunk without text")),
            },
            SessionUpdate::ToolCall(call) => {
                out.extend(self.tool_call(&call.tool_call_id.0, lookup));
                if let Some(events) =
                    self.finished_tool(&call.tool_call_id.0, call.status, &raw_update)
                {
                    out.extend(events);
                }
            }
            SessionUpdate::ToolCallUpdate(update) => {
                let id = update.tool_call_id.0.to_string();
                out.extend(self.tool_call(&id, lookup));
                if let Some(status) = update.fields.status
                    && let Some(events) = self.finished_tool(&id, status, &raw_update)
                {
                    out.extend(events);
                }
            }
            // The slash commands the guest offers: no canonical meaning for a run.
            SessionUpdate::AvailableCommandsUpdate(_) => {}
            SessionUpdate::UserMessageChunk(_)
            | SessionUpdate::Plan(_)
            | SessionUpdate::CurrentModeUpdate(_)
            | SessionUpdate::ConfigOptionUpdate(_)
            | SessionUpdate::SessionInfoUpdate(_)
            | SessionUpdate::UsageUpdate(_)
            | SessionUpdate::Notice(_)
            | SessionUpdate::CompactionUpdate(_)
            | SessionUpdate::CompactionSummaryChunk(_) => {
                out.push(self.unmapped(&raw_update, "an update kind with no canonical mapping"));
            }
            _ => {
                out.push(self.unmapped(&raw_update, "an update kind these ACP types do not know"));
            }
        }
        out
    }

    fn unmapped(&mut self, raw_update: &Value, why: &str) -> Event {
        let kind = raw_update
            .get("sessionUpdate")
            .and_then(Value::as_str)
            .map(str::to_owned);
        self.unrecognized_message(format!("session/update: {why}"), kind, raw_update.clone())
    }

    fn finished_tool(
        &mut self,
        id: &str,
        status: ToolCallStatus,
        raw_update: &Value,
    ) -> Option<Vec<Event>> {
        let content = raw_update
            .get("content")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        match status {
            ToolCallStatus::Completed => {
                Some(self.tool_result(id, ToolStatus::Success, None, content))
            }
            ToolCallStatus::Failed => {
                let message = content
                    .iter()
                    .filter_map(|c| c.pointer("/content/text").and_then(Value::as_str))
                    .collect::<Vec<_>>()
                    .join("\n");
                let error = ToolError {
                    kind: "failed".into(),
                    message,
                };
                Some(self.tool_result(id, ToolStatus::Error, Some(error), content))
            }
            // Still running (or a status these types add later): no result yet.
            _ => None,
        }
    }

    /// The answer to one `session/prompt`: its result (params of a JSON-RPC result) or error.
    pub fn prompt_answered(&mut self, answer: Result<&Value, &RpcError>) -> Vec<Event> {
        let mut out = Vec::new();
        self.turns.flush_text(&mut out);
        let index = self.prompts;
        self.prompts += 1;
        let (stop_reason, error) = match answer {
            Ok(result) => {
                self.add_usage(result.pointer("/_meta/quota"));
                let reason = result.get("stopReason").cloned();
                let parsed = reason
                    .clone()
                    .and_then(|r| serde_json::from_value::<StopReason>(r).ok());
                let name = reason.as_ref().and_then(Value::as_str).map(str::to_owned);
                let failure = match parsed {
                    Some(StopReason::EndTurn) => None,
                    Some(StopReason::Cancelled) => Some((
                        OutcomeStatus::Cancelled,
                        RunError::new(ErrorKind::Cancelled, "the prompt was cancelled"),
                    )),
                    Some(StopReason::MaxTurnRequests) => Some((
                        OutcomeStatus::Failed,
                        RunError::new(ErrorKind::TurnLimit, "the guest's turn limit was reached"),
                    )),
                    Some(StopReason::MaxTokens) => Some((
                        OutcomeStatus::Failed,
                        RunError::new(
                            ErrorKind::ModelOutput,
                            "the context window would overflow (max_tokens)",
                        ),
                    )),
                    Some(StopReason::Refusal) => Some((
                        OutcomeStatus::Failed,
                        RunError::new(ErrorKind::ModelOutput, "the model refused"),
                    )),
                    _ => Some((
                        OutcomeStatus::Incomplete,
                        RunError::new(
                            ErrorKind::GuestFailure,
                            format!("the prompt answer has no known stopReason: {result}"),
                        ),
                    )),
                };
                (name, failure)
            }
            Err(e) => {
                let kind = match u16::try_from(e.code) {
                    Ok(status @ 100..=599) => ErrorKind::Api {
                        http_status: Some(status),
                    },
                    _ => ErrorKind::GuestFailure,
                };
                let message = api_message(&e.message);
                (
                    None,
                    Some((OutcomeStatus::Failed, RunError::new(kind, message))),
                )
            }
        };
        if self.failure.is_none() {
            self.failure.clone_from(&error);
        }
        out.push(Event::PromptFinished(PromptFinished {
            prompt: index,
            stop_reason,
            error: error.map(|(_, e)| e),
            final_text: self.turns.final_text(),
        }));
        out.push(Event::Usage(self.usage.clone()));
        // The next prompt starts a new model turn.
        self.turns.awaiting_next_turn = self.turns.saw_model_output();
        out
    }

    fn add_usage(&mut self, quota: Option<&Value>) {
        let Some(quota) = quota else { return };
        let count = |v: Option<&Value>, key: &str| {
            v.and_then(|c| c.get(key))
                .and_then(Value::as_u64)
                .unwrap_or(0)
        };
        let total = quota.get("token_count");
        let (input, output) = (count(total, "input_tokens"), count(total, "output_tokens"));
        self.usage.input_tokens += input;
        self.usage.output_tokens += output;
        self.usage.total_tokens += input + output;
        for m in quota
            .get("model_usage")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let Some(model) = m.get("model").and_then(Value::as_str) else {
                continue;
            };
            let c = m.get("token_count");
            let entry: &mut ModelUsage = self.usage.by_model.entry(model.to_owned()).or_default();
            let (i, o) = (count(c, "input_tokens"), count(c, "output_tokens"));
            entry.input_tokens += i;
            entry.output_tokens += o;
            entry.total_tokens += i + o;
        }
    }

    /// Closes the run. `expected_prompts` is how many prompts the run meant to send at least
    /// (one, at least, and every prompt sent); fewer answers without a failure means the guest
    /// went away mid-run.
    pub fn finish(
        mut self,
        expected_prompts: u32,
        exit: GuestExit,
        fallback_message: Option<&str>,
    ) -> (Vec<Event>, RunOutcome) {
        let mut out = Vec::new();
        self.turns.flush_text(&mut out);
        let outcome = classify_acp(
            self.failure.clone(),
            self.prompts >= expected_prompts.max(self.sent).max(1),
            exit,
            fallback_message,
        );
        out.push(self.turns.run_finished(&outcome, self.unrecognized));
        (out, outcome)
    }
}

/// Gemini CLI puts the model API's whole error body in the message
/// (`{"error":{"code":400,"message":…}}`); the inner message is what a host wants.
fn api_message(message: &str) -> String {
    serde_json::from_str::<Value>(message)
        .ok()
        .and_then(|v| {
            v.pointer("/error/message")
                .and_then(Value::as_str)
                .map(str::to_owned)
        })
        .unwrap_or_else(|| message.to_owned())
}

/// An ACP run's outcome: Switchyard's stop or a crash first, then the first failed prompt, then
/// whether every prompt was answered.
pub fn classify_acp(
    failure: Option<(OutcomeStatus, RunError)>,
    all_answered: bool,
    exit: GuestExit,
    fallback_message: Option<&str>,
) -> RunOutcome {
    if let Some(stopped) = crate::outcome::stopped_or_crashed(exit) {
        return stopped;
    }
    let (status, error) = match failure {
        Some((status, error)) => (status, Some(error)),
        None if all_answered => (OutcomeStatus::Succeeded, None),
        None => (
            OutcomeStatus::Incomplete,
            Some(RunError::new(
                ErrorKind::MissingResult { code: exit.code },
                fallback_message.map_or_else(
                    || "the guest ended before answering every prompt".to_owned(),
                    str::to_owned,
                ),
            )),
        ),
    };
    RunOutcome {
        status,
        error,
        exit,
        result: None,
        incomplete_cleanup: Vec::new(),
    }
}

#[cfg(test)]
#[path = "acp_tests.rs"]
mod tests;
