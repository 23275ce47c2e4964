//! Codex 0.171.0's `codex app-server` wire (JSON-RPC 2.0 without the `jsonrpc` member, one
//! JSON object per line on stdio), as the types of what Switchyard sends and reads: the
//! handshake, threads and turns, the notifications of a turn, and the three approval requests
//! the server sends the client. The exact contract is the JSON Schema the pinned binary
//! generates (`codex app-server generate-json-schema`); the copy these types are tested
//! against lives in `fixtures/codex/0.171.0/app-server-schema/`.
//!
//! Every object keeps the fields no type here names in `extra` ([`Extra`]); [`parse_notification`]
//! and [`parse_server_request`] never fail: a method no type stands for is kept as `Unknown`,
//! a known method whose params do not fit as `Invalid` with the reason. Nothing here says what
//! a message means (that is `switchyard-events::codex`).

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// Client → server requests and notifications Switchyard sends.
pub mod method {
    pub const INITIALIZE: &str = "initialize";
    pub const INITIALIZED: &str = "initialized";
    pub const THREAD_START: &str = "thread/start";
    pub const THREAD_RESUME: &str = "thread/resume";
    pub const TURN_START: &str = "turn/start";
    pub const TURN_INTERRUPT: &str = "turn/interrupt";
    // Server → client notifications.
    pub const THREAD_STARTED: &str = "thread/started";
    pub const TURN_STARTED: &str = "turn/started";
    pub const TURN_COMPLETED: &str = "turn/completed";
    pub const ITEM_STARTED: &str = "item/started";
    pub const ITEM_COMPLETED: &str = "item/completed";
    pub const AGENT_MESSAGE_DELTA: &str = "item/agentMessage/delta";
    pub const REASONING_SUMMARY_DELTA: &str = "item/reasoning/summaryTextDelta";
    pub const REASONING_TEXT_DELTA: &str = "item/reasoning/textDelta";
    pub const COMMAND_OUTPUT_DELTA: &str = "item/commandExecution/outputDelta";
    pub const TOKEN_USAGE_UPDATED: &str = "thread/tokenUsage/updated";
    pub const ERROR: &str = "error";
    // Server → client requests.
    pub const COMMAND_APPROVAL: &str = "item/commandExecution/requestApproval";
    pub const FILE_CHANGE_APPROVAL: &str = "item/fileChange/requestApproval";
    pub const MCP_ELICITATION: &str = "mcpServer/elicitation/request";
}

/// The fields of an object no type here names, kept as received.
pub trait Extra {
    fn extra(&self) -> &Map<String, Value>;
}

macro_rules! extra {
    ($($t:ty),* $(,)?) => {
        $(impl Extra for $t {
            fn extra(&self) -> &Map<String, Value> {
                &self.extra
            }
        })*
    };
}

// ---------------------------------------------------------------------------------------------
// Handshake.

/// `initialize` params.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InitializeParams {
    pub client_info: ClientInfo,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capabilities: Option<InitializeCapabilities>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// Who the client is: `name` becomes Codex's HTTP `originator` header.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClientInfo {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    pub version: String,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `initialize.capabilities`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InitializeCapabilities {
    #[serde(default)]
    pub experimental_api: bool,
    /// Notification methods the server must not send.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub opt_out_notification_methods: Option<Vec<String>>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `initialize` result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InitializeResponse {
    pub user_agent: String,
    pub codex_home: String,
    pub platform_family: String,
    pub platform_os: String,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

// ---------------------------------------------------------------------------------------------
// Threads and turns.

/// `thread/start` params (every field optional on the wire).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ThreadStartParams {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    /// `untrusted`, `on-request`, `never`, or `{granular: …}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval_policy: Option<Value>,
    /// `read-only`, `workspace-write` or `danger-full-access`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model_provider: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ephemeral: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_instructions: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub developer_instructions: Option<String>,
    /// Config overrides (`-c`-style keys).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config: Option<Map<String, Value>>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `thread/resume` params.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ThreadResumeParams {
    pub thread_id: String,
    /// Overrides the thread's stored cwd.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval_policy: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model_provider: Option<String>,
    /// Leave the stored turns out of the answer (they can be large).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exclude_turns: Option<bool>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `thread/start` and `thread/resume` result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ThreadResponse {
    pub thread: Thread,
    pub model: String,
    pub model_provider: String,
    pub cwd: String,
    pub approval_policy: Value,
    pub approvals_reviewer: Value,
    pub sandbox: Value,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// A thread (a Codex session).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Thread {
    pub id: String,
    pub session_id: String,
    pub cwd: String,
    pub model_provider: String,
    pub ephemeral: bool,
    pub cli_version: String,
    pub created_at: Value,
    pub updated_at: Value,
    pub preview: String,
    pub project_id: Value,
    pub source: Value,
    pub status: Value,
    pub turns: Value,
    /// The rollout file (`$CODEX_HOME/sessions/…`); `null` for an ephemeral thread.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// One input item of a turn.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum UserInput {
    Text {
        text: String,
        /// UI spans inside `text` (none for Switchyard's prompts).
        #[serde(default)]
        text_elements: Vec<Value>,
    },
}

/// `turn/start` params.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TurnStartParams {
    pub thread_id: String,
    pub input: Vec<UserInput>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `turn/start` result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TurnStartResponse {
    pub turn: Turn,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `turn/interrupt` params (its result is `{}`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TurnInterruptParams {
    pub thread_id: String,
    pub turn_id: String,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// A turn: one prompt and everything the agent did for it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Turn {
    pub id: String,
    /// `inProgress`, `completed`, `interrupted` or `failed`.
    pub status: String,
    pub items: Vec<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<TurnError>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// A turn's (or an `error` notification's) error.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TurnError {
    pub message: String,
    /// `"other"`, `"internalServerError"`, `{"responseStreamDisconnected": {…}}`, ….
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub codex_error_info: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub additional_details: Option<String>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

// ---------------------------------------------------------------------------------------------
// Notifications.

/// `thread/started`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ThreadStartedNotification {
    pub thread: Thread,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `turn/started` and `turn/completed`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TurnNotification {
    pub thread_id: String,
    pub turn: Turn,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `item/started`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ItemStartedNotification {
    pub item: ThreadItem,
    pub thread_id: String,
    pub turn_id: String,
    pub started_at_ms: i64,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `item/completed`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ItemCompletedNotification {
    pub item: ThreadItem,
    pub thread_id: String,
    pub turn_id: String,
    pub completed_at_ms: i64,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `item/agentMessage/delta` and `item/commandExecution/outputDelta`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeltaNotification {
    pub thread_id: String,
    pub turn_id: String,
    pub item_id: String,
    pub delta: String,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `item/reasoning/summaryTextDelta`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReasoningSummaryDeltaNotification {
    pub thread_id: String,
    pub turn_id: String,
    pub item_id: String,
    pub delta: String,
    pub summary_index: i64,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `item/reasoning/textDelta`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReasoningTextDeltaNotification {
    pub thread_id: String,
    pub turn_id: String,
    pub item_id: String,
    pub delta: String,
    pub content_index: i64,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `thread/tokenUsage/updated`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TokenUsageNotification {
    pub thread_id: String,
    pub turn_id: String,
    pub token_usage: ThreadTokenUsage,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// The thread's usage: `total` (the thread so far) and `last` (the last model response).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ThreadTokenUsage {
    pub total: TokenUsageBreakdown,
    pub last: TokenUsageBreakdown,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model_context_window: Option<i64>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// Token counts.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TokenUsageBreakdown {
    pub total_tokens: u64,
    pub input_tokens: u64,
    pub cached_input_tokens: u64,
    pub output_tokens: u64,
    pub reasoning_output_tokens: u64,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `error`: a retry notice (`willRetry: true`) or the turn's final error.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ErrorNotification {
    pub error: TurnError,
    pub will_retry: bool,
    pub thread_id: String,
    pub turn_id: String,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

// ---------------------------------------------------------------------------------------------
// Thread items.

/// An item of a turn: a known type, or any other object (kept).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum ThreadItem {
    Known(Box<KnownItem>),
    /// A type no variant of [`KnownItem`] stands for, or a known type whose fields do not fit.
    Other(Value),
}

impl ThreadItem {
    /// The item's `id`, whatever its type.
    pub fn id(&self) -> Option<&str> {
        match self {
            ThreadItem::Known(item) => Some(item.id()),
            ThreadItem::Other(raw) => raw.get("id").and_then(Value::as_str),
        }
    }

    /// The item's `type`.
    pub fn kind(&self) -> Option<&str> {
        match self {
            ThreadItem::Known(item) => Some(item.kind()),
            ThreadItem::Other(raw) => raw.get("type").and_then(Value::as_str),
        }
    }
}

/// The item types Switchyard reads.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum KnownItem {
    UserMessage(UserMessageItem),
    AgentMessage(AgentMessageItem),
    Reasoning(ReasoningItem),
    CommandExecution(CommandExecutionItem),
    FileChange(FileChangeItem),
    McpToolCall(McpToolCallItem),
    DynamicToolCall(DynamicToolCallItem),
    WebSearch(WebSearchItem),
    ImageView(ImageViewItem),
    ContextCompaction(ContextCompactionItem),
}

impl KnownItem {
    pub fn id(&self) -> &str {
        match self {
            KnownItem::UserMessage(i) => &i.id,
            KnownItem::AgentMessage(i) => &i.id,
            KnownItem::Reasoning(i) => &i.id,
            KnownItem::CommandExecution(i) => &i.id,
            KnownItem::FileChange(i) => &i.id,
            KnownItem::McpToolCall(i) => &i.id,
            KnownItem::DynamicToolCall(i) => &i.id,
            KnownItem::WebSearch(i) => &i.id,
            KnownItem::ImageView(i) => &i.id,
            KnownItem::ContextCompaction(i) => &i.id,
        }
    }

    pub fn kind(&self) -> &'static str {
        match self {
            KnownItem::UserMessage(_) => "userMessage",
            KnownItem::AgentMessage(_) => "agentMessage",
            KnownItem::Reasoning(_) => "reasoning",
            KnownItem::CommandExecution(_) => "commandExecution",
            KnownItem::FileChange(_) => "fileChange",
            KnownItem::McpToolCall(_) => "mcpToolCall",
            KnownItem::DynamicToolCall(_) => "dynamicToolCall",
            KnownItem::WebSearch(_) => "webSearch",
            KnownItem::ImageView(_) => "imageView",
            KnownItem::ContextCompaction(_) => "contextCompaction",
        }
    }
}

/// `userMessage`: the prompt as the thread recorded it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UserMessageItem {
    pub id: String,
    pub content: Vec<Value>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `agentMessage`: assistant text (its id is the Responses output item's).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentMessageItem {
    pub id: String,
    pub text: String,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `reasoning`: the summary parts and the raw reasoning text parts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReasoningItem {
    pub id: String,
    #[serde(default)]
    pub summary: Vec<String>,
    #[serde(default)]
    pub content: Vec<String>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `commandExecution` (the `exec_command` tool; its id is the model's call id).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CommandExecutionItem {
    pub id: String,
    /// The shell line as run (`/bin/bash -lc '…'`).
    pub command: String,
    pub cwd: String,
    pub command_actions: Vec<Value>,
    /// `inProgress`, `completed`, `failed` or `declined`.
    pub status: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub aggregated_output: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<i64>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `fileChange` (the `apply_patch` tool; its id is the model's call id).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FileChangeItem {
    pub id: String,
    pub changes: Vec<FileUpdateChange>,
    /// `inProgress`, `completed`, `failed` or `declined`.
    pub status: String,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// One file of a `fileChange`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FileUpdateChange {
    pub path: String,
    /// `{type: add|delete|update, move_path?}`.
    pub kind: Value,
    pub diff: String,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `mcpToolCall` (its id is the model's call id).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct McpToolCallItem {
    pub id: String,
    pub server: String,
    pub tool: String,
    /// `inProgress`, `completed` or `failed`.
    pub status: String,
    pub arguments: Value,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<Value>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `dynamicToolCall` (experimental client-executed tools; Switchyard declares none).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DynamicToolCallItem {
    pub id: String,
    pub tool: String,
    pub arguments: Value,
    pub status: String,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `webSearch`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WebSearchItem {
    pub id: String,
    pub query: String,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `imageView` (the `view_image` tool).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ImageViewItem {
    pub id: String,
    pub path: String,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `contextCompaction`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ContextCompactionItem {
    pub id: String,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

// ---------------------------------------------------------------------------------------------
// Server requests and their answers.

/// `item/commandExecution/requestApproval` params.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CommandApprovalParams {
    pub thread_id: String,
    pub turn_id: String,
    /// The item (= the model's call id).
    pub item_id: String,
    pub started_at_ms: i64,
    /// The model's justification.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    /// Set for a sub-command approval (`null` for the shell call itself).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval_id: Option<String>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `item/fileChange/requestApproval` params.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FileChangeApprovalParams {
    pub thread_id: String,
    pub turn_id: String,
    pub item_id: String,
    pub started_at_ms: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grant_root: Option<String>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// The decisions Switchyard gives (the wire also has amendment objects, never sent).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum ApprovalDecision {
    Accept,
    AcceptForSession,
    /// Refused; the turn goes on.
    Decline,
    /// Refused; the turn is interrupted too.
    Cancel,
}

/// The answer to either approval request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ApprovalResponse {
    pub decision: ApprovalDecision,
}

/// `mcpServer/elicitation/request` params (the MCP tool approval is `mode: "form"` with
/// `_meta.codex_approval_kind: "mcp_tool_call"`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ElicitationParams {
    pub thread_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn_id: Option<String>,
    pub server_name: String,
    pub mode: String,
    pub message: String,
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requested_schema: Option<Value>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `accept`, `decline` or `cancel`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum ElicitationAction {
    Accept,
    Decline,
    Cancel,
}

/// The answer to an elicitation (a `{decision}` answer is read as a rejection).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ElicitationResponse {
    pub action: ElicitationAction,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<Value>,
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Value>,
}

extra!(
    InitializeParams,
    ClientInfo,
    InitializeCapabilities,
    InitializeResponse,
    ThreadStartParams,
    ThreadResumeParams,
    ThreadResponse,
    Thread,
    TurnStartParams,
    TurnStartResponse,
    TurnInterruptParams,
    Turn,
    TurnError,
    ThreadStartedNotification,
    TurnNotification,
    ItemStartedNotification,
    ItemCompletedNotification,
    DeltaNotification,
    ReasoningSummaryDeltaNotification,
    ReasoningTextDeltaNotification,
    TokenUsageNotification,
    ThreadTokenUsage,
    TokenUsageBreakdown,
    ErrorNotification,
    UserMessageItem,
    AgentMessageItem,
    ReasoningItem,
    CommandExecutionItem,
    FileChangeItem,
    FileUpdateChange,
    McpToolCallItem,
    DynamicToolCallItem,
    WebSearchItem,
    ImageViewItem,
    ContextCompactionItem,
    CommandApprovalParams,
    FileChangeApprovalParams,
    ElicitationParams,
);

// ---------------------------------------------------------------------------------------------
// Classification.

/// A server notification, typed by its method.
#[derive(Debug, Clone, PartialEq)]
pub enum Notification {
    ThreadStarted(Box<ThreadStartedNotification>),
    TurnStarted(Box<TurnNotification>),
    TurnCompleted(Box<TurnNotification>),
    ItemStarted(Box<ItemStartedNotification>),
    ItemCompleted(Box<ItemCompletedNotification>),
    AgentMessageDelta(DeltaNotification),
    ReasoningSummaryDelta(ReasoningSummaryDeltaNotification),
    ReasoningTextDelta(ReasoningTextDeltaNotification),
    CommandOutputDelta(DeltaNotification),
    TokenUsage(Box<TokenUsageNotification>),
    Error(Box<ErrorNotification>),
    /// A method no variant stands for.
    Unknown {
        method: String,
        params: Value,
    },
    /// A known method whose params do not fit its type.
    Invalid {
        method: String,
        reason: String,
        params: Value,
    },
}

fn typed<T: serde::de::DeserializeOwned>(
    method: &str,
    params: &Value,
    wrap: impl FnOnce(T) -> Notification,
) -> Notification {
    match serde_json::from_value::<T>(params.clone()) {
        Ok(value) => wrap(value),
        Err(e) => Notification::Invalid {
            method: method.to_owned(),
            reason: e.to_string(),
            params: params.clone(),
        },
    }
}

/// Types a notification by its method; never fails.
pub fn parse_notification(method: &str, params: &Value) -> Notification {
    use Notification as N;
    match method {
        method::THREAD_STARTED => typed(method, params, |n| N::ThreadStarted(Box::new(n))),
        method::TURN_STARTED => typed(method, params, |n| N::TurnStarted(Box::new(n))),
        method::TURN_COMPLETED => typed(method, params, |n| N::TurnCompleted(Box::new(n))),
        method::ITEM_STARTED => typed(method, params, |n| N::ItemStarted(Box::new(n))),
        method::ITEM_COMPLETED => typed(method, params, |n| N::ItemCompleted(Box::new(n))),
        method::AGENT_MESSAGE_DELTA => typed(method, params, N::AgentMessageDelta),
        method::REASONING_SUMMARY_DELTA => typed(method, params, N::ReasoningSummaryDelta),
        method::REASONING_TEXT_DELTA => typed(method, params, N::ReasoningTextDelta),
        method::COMMAND_OUTPUT_DELTA => typed(method, params, N::CommandOutputDelta),
        method::TOKEN_USAGE_UPDATED => typed(method, params, |n| N::TokenUsage(Box::new(n))),
        method::ERROR => typed(method, params, |n| N::Error(Box::new(n))),
        other => N::Unknown {
            method: other.to_owned(),
            params: params.clone(),
        },
    }
}

/// A server → client request, typed by its method.
#[derive(Debug, Clone, PartialEq)]
pub enum ServerRequest {
    CommandApproval(Box<CommandApprovalParams>),
    FileChangeApproval(Box<FileChangeApprovalParams>),
    Elicitation(Box<ElicitationParams>),
    /// Another method (`item/tool/requestUserInput`, `item/permissions/requestApproval`, …).
    Unknown {
        method: String,
        params: Value,
    },
    /// A known method whose params do not fit its type.
    Invalid {
        method: String,
        reason: String,
        params: Value,
    },
}

/// Types a server request by its method; never fails.
pub fn parse_server_request(method: &str, params: &Value) -> ServerRequest {
    fn req<T: serde::de::DeserializeOwned>(
        method: &str,
        params: &Value,
        wrap: impl FnOnce(Box<T>) -> ServerRequest,
    ) -> ServerRequest {
        match serde_json::from_value::<T>(params.clone()) {
            Ok(value) => wrap(Box::new(value)),
            Err(e) => ServerRequest::Invalid {
                method: method.to_owned(),
                reason: e.to_string(),
                params: params.clone(),
            },
        }
    }
    match method {
        method::COMMAND_APPROVAL => req(method, params, ServerRequest::CommandApproval),
        method::FILE_CHANGE_APPROVAL => req(method, params, ServerRequest::FileChangeApproval),
        method::MCP_ELICITATION => req(method, params, ServerRequest::Elicitation),
        other => ServerRequest::Unknown {
            method: other.to_owned(),
            params: params.clone(),
        },
    }
}

#[cfg(test)]
#[path = "codex_tests.rs"]
mod tests;
