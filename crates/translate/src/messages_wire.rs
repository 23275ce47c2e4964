//! Anthropic Messages request types as Claude Code 2.1.332 sends them (`POST /v1/messages`):
//! plain serde types, every unmodeled field kept in an `extra` map for the ingress
//! (`crate::messages_ingress`) to refuse by name.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Number, Value};

/// A guest's Messages request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GuestMessagesRequest {
    /// The model the guest asked for (routed by the gateway).
    pub model: String,
    /// The conversation.
    pub messages: Vec<GuestTurn>,
    /// The system prompt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system: Option<GuestContent>,
    /// Declared tools.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<Vec<GuestTool>>,
    /// `{type: auto|any|tool|none, name?, disable_parallel_tool_use?}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_choice: Option<Value>,
    /// Output token limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u32>,
    /// Stream the answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream: Option<bool>,
    /// Sampling temperature.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f64>,
    /// Nucleus sampling.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub top_p: Option<f64>,
    /// Top-k sampling.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub top_k: Option<Number>,
    /// Stop sequences.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_sequences: Option<Vec<String>>,
    /// `{type: enabled|adaptive|disabled, budget_tokens?, display?}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thinking: Option<Value>,
    /// `{effort?, format?}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_config: Option<Value>,
    /// `{edits: [...]}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_management: Option<Value>,
    /// `{user_id}`: never forwarded (it names the guest's device and session).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Value>,
    /// Anthropic's own safety classifier context: no provider counterpart.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub safeguards: Option<Value>,
    /// Nothing else is known.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// One turn of `messages`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GuestTurn {
    /// `user`, `assistant` or `system`.
    pub role: String,
    /// Text or blocks.
    pub content: GuestContent,
    /// A system turn's per-turn control (`{effort}`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_config: Option<Value>,
    /// Nothing else is known.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// Content: a string or blocks.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum GuestContent {
    /// Plain text.
    Text(String),
    /// Blocks.
    Blocks(Vec<GuestBlock>),
}

/// A content block; which fields a `type` may carry is checked in [`crate::messages_ingress::prepare_messages_request`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GuestBlock {
    /// `text`, `image`, `tool_use`, `tool_result` or `thinking`.
    #[serde(rename = "type")]
    pub kind: String,
    /// A `text` block's text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// A `tool_use` block's id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// A `tool_use` block's tool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// A `tool_use` block's arguments.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input: Option<Value>,
    /// The call a `tool_result` answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_use_id: Option<String>,
    /// A `tool_result`'s content.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<GuestContent>,
    /// A `tool_result` that reports a failure.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub is_error: Option<bool>,
    /// An `image` source.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<GuestSource>,
    /// A `thinking` block's text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thinking: Option<String>,
    /// A `thinking` block's signature.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature: Option<String>,
    /// A prompt-caching breakpoint (no provider counterpart; the answer does not depend on it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_control: Option<Value>,
    /// Nothing else is known.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// An `image` source.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GuestSource {
    /// `base64`.
    #[serde(rename = "type")]
    pub kind: String,
    /// The MIME type.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub media_type: Option<String>,
    /// Base64.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<String>,
    /// Nothing else is known.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// A declared tool.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GuestTool {
    /// Name.
    pub name: String,
    /// Description.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// JSON Schema of the input.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_schema: Option<Value>,
    /// `custom` (a function) or a server tool's versioned type.
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// A tool loaded only when the model searches for it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub defer_loading: Option<bool>,
    /// A prompt-caching breakpoint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_control: Option<Value>,
    /// Strict schema adherence.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub strict: Option<bool>,
    /// Nothing else is known.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}
