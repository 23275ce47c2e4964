//! Canonical events: one model for every backend.
//!
//! Each field's doc says where it comes from: `Source:` names the upstream field (for Gemini CLI:
//! a stream-json field, and after `ACP:` the Agent Client Protocol field; after `OpenCode:` and
//! `Claude Code:` those guests' fields), `Derived:` says Switchyard computed it. Backends added
//! later map their own wire fields into the same variants and document their sources here.

use crate::outcome::{OutcomeStatus, RunError};
use crate::tools::ToolCategory;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;

/// An event with its place in the run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Envelope {
    /// Derived: 0-based position in the run's event sequence, without gaps.
    pub seq: u64,
    /// Derived: when Switchyard produced the event (UTC).
    pub at: DateTime<Utc>,
    /// Source: the guest's own `timestamp` field, verbatim, when the event came from a guest line.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub guest_timestamp: Option<String>,
    #[serde(flatten)]
    pub event: Event,
}

/// The canonical events.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Event {
    RunStarted(RunStarted),
    SessionStarted(SessionStarted),
    UserMessage(UserMessage),
    AssistantDelta(AssistantDelta),
    AssistantMessage(AssistantMessage),
    Thought(Thought),
    ToolCall(ToolCall),
    ToolResult(ToolResult),
    HostCall(HostCall),
    HostResult(HostResult),
    Permission(Box<Permission>),
    PromptFinished(PromptFinished),
    Warning(Warning),
    WorkspaceConfigIgnored(WorkspaceConfigIgnored),
    Error(ErrorReport),
    Usage(Usage),
    Unrecognized(Unrecognized),
    RunFinished(RunFinished),
}

impl Event {
    /// The `type` tag of this event.
    pub fn kind(&self) -> &'static str {
        match self {
            Event::RunStarted(_) => "run_started",
            Event::SessionStarted(_) => "session_started",
            Event::UserMessage(_) => "user_message",
            Event::AssistantDelta(_) => "assistant_delta",
            Event::AssistantMessage(_) => "assistant_message",
            Event::Thought(_) => "thought",
            Event::ToolCall(_) => "tool_call",
            Event::ToolResult(_) => "tool_result",
            Event::HostCall(_) => "host_call",
            Event::HostResult(_) => "host_result",
            Event::Permission(_) => "permission",
            Event::PromptFinished(_) => "prompt_finished",
            Event::Warning(_) => "warning",
            Event::WorkspaceConfigIgnored(_) => "workspace_config_ignored",
            Event::Error(_) => "error",
            Event::Usage(_) => "usage",
            Event::Unrecognized(_) => "unrecognized",
            Event::RunFinished(_) => "run_finished",
        }
    }
}

/// Derived: Switchyard started the guest.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunStarted {
    /// Derived: the run id Switchyard assigned.
    pub run_id: String,
    /// Derived: backend name, e.g. `gemini-cli`.
    pub agent: String,
    /// Derived: the pinned guest version (from the sealed install's manifest).
    pub agent_version: String,
    /// Derived: the guest's working directory.
    pub workdir: String,
    /// Derived: the model the run asked for (the upstream model name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
}

/// The guest opened its session.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionStarted {
    /// Source: stream-json `init.session_id`; ACP: the `session/new` answer's `sessionId` (or
    /// the `--resume`d session's); OpenCode: the `POST /session` answer's `id`; Claude Code:
    /// the first `system/init`'s `session_id`; Codex: the `thread/start` (or `thread/resume`)
    /// answer's `thread.id`.
    pub session_id: String,
    /// Source: stream-json `init.model` (the configured model, not the routed one); Claude
    /// Code: `system/init.model`; Codex: the `thread/start` answer's `model`; ACP and OpenCode:
    /// Derived, the model the run asked for.
    pub model: String,
}

/// The prompt as the guest received it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UserMessage {
    /// Source: stream-json `message.content` with `role:"user"`; ACP: Derived, the text
    /// Switchyard sent in `session/prompt`; OpenCode: Derived, the text sent in `prompt_async`;
    /// Claude Code: Derived, the text of the `user` line written to its stdin; Codex: Derived,
    /// the text of the `turn/start` input.
    pub text: String,
}

/// One streamed chunk of assistant text.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AssistantDelta {
    /// Source: stream-json `message.content` with `role:"assistant"`, `delta:true`; ACP:
    /// `agent_message_chunk.content.text`; OpenCode: `message.part.delta.delta` of a `text`
    /// part, or the part of a `message.part.updated` text the deltas had not carried; Claude
    /// Code: `stream_event` `text_delta.text`, or the part of an `assistant` line's `text`
    /// block its deltas had not carried; Codex: `item/agentMessage/delta.delta`, or the part of
    /// a completed `agentMessage` item's `text` its deltas had not carried.
    pub text: String,
    /// Derived: 0-based model turn (a turn ends when tool results go back to the model).
    pub turn: u32,
}

/// All assistant text of one model turn, emitted when the turn's text ends (before its tool
/// calls, or before the run ends).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AssistantMessage {
    /// Derived: concatenation of the turn's [`AssistantDelta`] texts.
    pub text: String,
    /// Derived: 0-based model turn.
    pub turn: u32,
}

/// One streamed chunk of the model's reasoning (ACP only; headless stream-json has none).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Thought {
    /// Source: ACP `agent_thought_chunk.content.text` (Gemini CLI writes
    /// `**<subject>**\n<description>`); OpenCode: the deltas (and rest) of a `reasoning` part;
    /// Claude Code: `thinking_delta.thinking` (and the rest of a `thinking` block); Codex:
    /// `item/reasoning/summaryTextDelta` and `textDelta` `delta`, or a completed `reasoning`
    /// item's `summary` and `content` joined when no delta carried them.
    pub text: String,
    /// Derived: 0-based model turn.
    pub turn: u32,
}

/// The model asked for a tool call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    /// Source: stream-json `tool_use.tool_id` (`<name>__<id>`); ACP: `tool_call.toolCallId`, or
    /// the permission request's `toolCall.toolCallId` (a call that asks has no `tool_call`);
    /// OpenCode: the tool part's `callID`; Claude Code: the `assistant` line's `tool_use.id`;
    /// Codex: the tool item's `id` (`item/started`; the model's call id as delivered). Each
    /// carries the id the gateway delivered the call with (its own, unique in the run).
    /// Pairs with [`ToolResult::call_id`].
    pub call_id: String,
    /// Derived: the model's own id of the call (the upstream's `tool_calls[].id`), from the
    /// gateway's record of the delivered call (see [`crate::Delivered`]); without it, the
    /// delivered id (`call_id` without the `<name>__` prefix), or the CLI's synthesized
    /// `<name>_<epochMs>_<n>`.
    pub model_call_id: String,
    /// Source: stream-json `tool_use.tool_name`; ACP: Derived from `call_id`, checked against
    /// the gateway's delivered call; OpenCode: the tool part's `tool`; Claude Code:
    /// `tool_use.name`; Codex: Derived, the delivered call's name, else the item type's tool
    /// (`commandExecution` → `exec_command`, `fileChange` → `apply_patch`, `mcpToolCall` →
    /// `mcp__<server>__<tool>`, `imageView` → `view_image`, `webSearch` → `web_search`).
    pub tool_name: String,
    /// Derived: exact-whitelist category of `tool_name`.
    pub category: ToolCategory,
    /// Source: stream-json `tool_use.parameters`, verbatim; ACP: Derived, the arguments the
    /// gateway delivered (`null` without the gateway: ACP does not carry them); OpenCode: the
    /// tool part's `state.input` once it runs; Claude Code: `tool_use.input`, verbatim; Codex:
    /// Derived, the delivered call's arguments, else what the item shows (`command` and `cwd`,
    /// `changes`, an MCP call's `arguments`).
    pub arguments: Value,
    /// Derived: 0-based model turn.
    pub turn: u32,
}

/// `success` or `error`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolStatus {
    Success,
    Error,
}

/// The outcome of a tool call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolResult {
    /// Source: stream-json `tool_result.tool_id`; ACP: `tool_call_update.toolCallId`; OpenCode:
    /// the tool part's `callID`; Claude Code: the `user` line's `tool_result.tool_use_id`;
    /// Codex: the completed tool item's `id`.
    pub call_id: String,
    /// Derived: the tool name of the matching [`ToolCall`]; `None` if no call had this id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_name: Option<String>,
    /// Source: stream-json `tool_result.status`; ACP: `status` `completed` or `failed`;
    /// OpenCode: `state.status` `completed` or `error`; Claude Code: `tool_result.is_error`;
    /// Codex: the item's `status` (`completed` is success; `failed`, `declined`, or no
    /// `item/completed` before `turn/completed` is an error).
    pub status: ToolStatus,
    /// Source: stream-json `tool_result.output` (only present for string displays; the headless
    /// transport is lossy here); ACP: the text items of `content`, joined; OpenCode:
    /// `state.output`; Codex: `aggregatedOutput` of a command, the changed paths of a file
    /// change, the text blocks of an MCP `result.content`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<String>,
    /// Source: stream-json `tool_result.error.{type,message}`; for ACP, Derived from a failed
    /// `tool_call_update`'s text (kind `failed`) or from a rejected permission (kind
    /// `permission_rejected`); OpenCode: `state.error` as the message, the kind Derived
    /// (`permission_rejected`, `interrupted` for `metadata.interrupted`, else `failed`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ToolError>,
    /// Source: ACP `tool_call_update.content`, verbatim (text, `diff` with `path`, `oldText`,
    /// `newText`); empty for headless runs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub content: Vec<Value>,
}

/// A tool's typed error.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolError {
    /// Source: `error.type` (Gemini ToolErrorType, e.g. `invalid_tool_params`).
    pub kind: String,
    /// Source: `error.message`.
    pub message: String,
}

/// Whether a host-tool callback was let through.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HostDecision {
    Admitted,
    Refused,
    /// A repeated callback of a call that already ran (the guest retried after losing the
    /// answer): answered with the result the tool returned, without running it again.
    Repeated,
}

/// Derived: the binding's decision on one MCP `tools/call` of a host tool.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HostCall {
    /// Derived: the MCP call's tool name (the host tool's own name).
    pub tool: String,
    pub decision: HostDecision,
    /// Derived: the model's id of the delivered call it claimed (admitted), or that its
    /// identity named (the upstream's id; the gateway's when the upstream gave none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model_call_id: Option<String>,
    /// Derived: the id that call was delivered with (the gateway's own, unique in the run).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call_id: Option<String>,
    /// Derived: the model batch (0-based, per run) and position in it of the claimed call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batch: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub position: Option<usize>,
    /// Derived: the callback's arguments, the private identity removed.
    pub arguments: Value,
    /// Derived: why it was refused (`not_delivered`, `already_claimed`, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Derived: the refusal as the guest was told it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// What became of a guest's permission request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PermissionOutcome {
    /// The policy allowed the call: the allow option was selected.
    Allowed,
    /// The policy rejected the call: the reject option was selected; the guest reports the
    /// failure to the model and the run goes on.
    Rejected,
    /// The run was being cancelled: answered `cancelled`.
    Cancelled,
    /// Not a request for a pending delivered call of the active session, or no unique option
    /// of the decided kind: answered with a JSON-RPC error.
    Refused,
}

/// One option a permission request offered.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PermissionChoice {
    /// Source: `options[].optionId`.
    pub option_id: String,
    /// Source: `options[].kind` (`allow_once`, `allow_always`, `reject_once`, ...).
    pub kind: String,
    /// Source: `options[].name`.
    pub name: String,
}

/// Derived: the unattended policy's answer to one ACP `session/request_permission` or
/// OpenCode `permission.asked`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Permission {
    /// Source: ACP `toolCall.toolCallId` (`<name>__<model call id>`); OpenCode: the request's
    /// `id` (`per_…`); Claude Code: the `can_use_tool` control request's `request_id`; Codex:
    /// the approval request's JSON-RPC `id`.
    pub tool_call_id: String,
    /// Derived: the model's own id of the delivered call it named (absent when refused as not
    /// delivered).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model_call_id: Option<String>,
    /// Derived: the id that call was delivered with (the gateway's own).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call_id: Option<String>,
    /// Derived: the delivered call's function name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    /// Derived: the delivered call's exact arguments (what the policy decided on).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arguments: Option<Value>,
    /// Source: ACP `options`; Claude Code: Derived, its two behaviours (`allow`, `deny`);
    /// OpenCode: Derived, its three replies (`once`, `always`,
    /// `reject`).
    pub options: Vec<PermissionChoice>,
    pub outcome: PermissionOutcome,
    /// Derived: the policy rule that decided (`rule 2`, `default: file read`, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rule: Option<String>,
    /// Derived: the `optionId` answered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub option_id: Option<String>,
    /// Derived: why the request was refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// One prompt of a session ended (ACP: the `session/prompt` answer).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PromptFinished {
    /// Derived: 0-based index of the prompt in the run.
    pub prompt: u32,
    /// Source: the result's `stopReason` (`end_turn`, `cancelled`, `max_turn_requests`,
    /// `max_tokens`, `refusal`); absent when the prompt failed with a JSON-RPC error; OpenCode:
    /// the last assistant message's `finish` (`stop`, `tool-calls`, `length`, …); Claude Code:
    /// the `result`'s `stop_reason`, else its `terminal_reason`; Codex: `turn/completed`'s
    /// `turn.status` (`completed`, `interrupted`, `failed`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_reason: Option<String>,
    /// Derived: the typed failure (a JSON-RPC error whose code is an HTTP status is the model
    /// API's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<RunError>,
    /// Derived: the assistant text of the prompt's last model turn.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub final_text: Option<String>,
}

/// One image a host tool returned (its bytes are not repeated in the event).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostImage {
    pub mime_type: String,
    /// Derived: length of the base64 data.
    pub base64_len: usize,
}

/// Derived: what an admitted host tool returned to the guest.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HostResult {
    pub tool: String,
    /// Derived: the model's id of the call (see [`HostCall::model_call_id`]).
    pub model_call_id: String,
    /// Derived: the id the call was delivered with (the gateway's own).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call_id: Option<String>,
    pub status: ToolStatus,
    /// Derived: the text returned (the tool's text, or its error message).
    pub text: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub images: Vec<HostImage>,
}

/// A non-fatal warning.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Warning {
    /// Source: stream-json `error.message` with `severity:"warning"`, or Derived (then `derived`
    /// is true), e.g. stdout lines that overflowed the line cap.
    pub message: String,
    /// Derived: true when Switchyard produced the warning itself.
    #[serde(default)]
    pub derived: bool,
}

/// Derived: at launch, Switchyard found a configuration file of the agent's in the workspace
/// and neutralised it (no program it names starts, no traffic goes where it says), because the
/// host did not opt in with `--trust-workspace-config`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkspaceConfigIgnored {
    /// Derived: the file or folder, relative to the workspace (e.g. `.gemini/settings.json`).
    pub path: String,
    /// Derived: what it sets that was neutralised: settings keys (`mcpServers.evil`,
    /// `hooks.SessionStart`), variable names of an `.env` file (never their values), or entries
    /// of a folder.
    pub keys: Vec<String>,
}

/// A runtime error the guest surfaced; the run may still continue or finish.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ErrorReport {
    /// Source: stream-json `error.message` with `severity:"error"`; OpenCode: Derived from
    /// `session.error` (`<name>: <data.message>`); Codex: an `error` notification's
    /// `error.message` when `willRetry` is false (with `willRetry`, a [`Warning`]).
    pub message: String,
}

/// Token usage reported by the guest for the whole run (ACP: the run so far, summed over the
/// prompt results' `_meta.quota`, emitted after each prompt).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Usage {
    /// Source: `result.stats.input_tokens` (prompt tokens, cached included); ACP:
    /// `_meta.quota.token_count.input_tokens`; OpenCode: the sum of `step-finish` parts'
    /// `tokens.input + tokens.cache.read`; Claude Code: the sum of `result.usage`'s
    /// `input_tokens + cache_read_input_tokens + cache_creation_input_tokens`; Codex: the sum
    /// of `thread/tokenUsage/updated`'s `tokenUsage.last.inputTokens`.
    pub input_tokens: u64,
    /// Source: `result.stats.cached`; OpenCode: `step-finish` `tokens.cache.read`; Claude Code:
    /// `result.usage.cache_read_input_tokens`; Codex: the sum of `last.cachedInputTokens`.
    pub cached_tokens: u64,
    /// Source: `result.stats.output_tokens`; ACP: `_meta.quota.token_count.output_tokens`;
    /// OpenCode: `step-finish` `tokens.output`; Claude Code: `result.usage.output_tokens`;
    /// Codex: the sum of `last.outputTokens`.
    pub output_tokens: u64,
    /// Source: `result.stats.total_tokens`; Codex: the sum of `last.totalTokens`.
    pub total_tokens: u64,
    /// Source: `result.stats.tool_calls`; ACP: Derived, the tool calls seen.
    pub tool_calls: u64,
    /// Source: `result.stats.duration_ms` (0 in the guest's error results); Claude Code: the sum
    /// of `result.duration_ms`.
    pub duration_ms: u64,
    /// Source: `result.stats.models.<name>.{input_tokens, cached, output_tokens, total_tokens}`;
    /// ACP: `_meta.quota.model_usage[].{model, token_count}`.
    #[serde(default)]
    pub by_model: BTreeMap<String, ModelUsage>,
}

/// One model's share of [`Usage`].
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ModelUsage {
    pub input_tokens: u64,
    pub cached_tokens: u64,
    pub output_tokens: u64,
    pub total_tokens: u64,
}

/// A guest line Switchyard could not map: kept verbatim and counted, never fatal.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Unrecognized {
    /// Derived: why it was not mapped (unknown type, not JSON, unexpected shape).
    pub reason: String,
    /// Source: the line's `type`, if it had one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event_type: Option<String>,
    /// Source: the raw line (JSON value when it parsed, else a string).
    pub raw: Value,
}

/// The run ended. Always the last event.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunFinished {
    /// Derived: see [`crate::outcome`] for the rules.
    pub status: OutcomeStatus,
    /// Derived: typed error when `status` is not `succeeded`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<RunError>,
    /// Derived: the assistant text of the last model turn (the run's answer).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub final_text: Option<String>,
    /// Derived: number of model turns seen.
    pub turns: u32,
    /// Derived: the run's structured result: the arguments of its valid `finish` call, when the
    /// run had a finish schema.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<Value>,
    /// Derived: guest lines that were kept as [`Unrecognized`].
    pub unrecognized_lines: u64,
    /// Source: the guest process exit (code or signal) and whether Switchyard stopped it.
    pub exit: crate::outcome::GuestExit,
}
