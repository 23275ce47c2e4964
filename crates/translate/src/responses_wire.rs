//! OpenAI Responses request types as Codex 0.171.0 sends them (`POST /v1/responses`): plain
//! serde types, every unmodeled field kept in an `extra` map for the ingress
//! (`crate::responses_ingress`) to refuse by name.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// A guest's Responses request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GuestResponsesRequest {
    /// The model the guest asked for (routed by the gateway).
    pub model: String,
    /// The conversation: a string (one user message) or items.
    pub input: GuestInput,
    /// The system prompt (Codex sends its instructions as developer messages instead).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instructions: Option<String>,
    /// Declared tools.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<Vec<GuestResponsesTool>>,
    /// `auto`, `none`, `required` or `{type, name}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_choice: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parallel_tool_calls: Option<bool>,
    /// Stream the answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream: Option<bool>,
    /// Output token limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_output_tokens: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub top_p: Option<f64>,
    /// `{effort?, summary?}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning: Option<Value>,
    /// `{format?, verbosity?}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<Value>,
    /// Whether the provider keeps the response (the gateway keeps no response state).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub store: Option<bool>,
    /// Extra output the guest asks for (`reasoning.encrypted_content`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub include: Option<Vec<String>>,
    /// The provider's prompt-cache key (Codex: its thread id).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_cache_key: Option<String>,
    /// Codex's own metadata (installation id, absolute paths, git commit): never forwarded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_metadata: Option<Value>,
    /// Never forwarded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Value>,
    /// A stored earlier response: the gateway keeps none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub previous_response_id: Option<String>,
    /// Nothing else is known.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `input`: a user message's text, or the items of the conversation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum GuestInput {
    Text(String),
    Items(Vec<GuestItem>),
}

/// One input item, any `type` (`message` when absent): the fields of every type Codex sends,
/// the rest in `extra`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct GuestItem {
    /// `message`, `function_call`, `function_call_output`, `custom_tool_call`,
    /// `custom_tool_call_output`, `reasoning`; absent on a plain `{role, content}` message.
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// The item's own id (Codex sends one even with `store: false`; never forwarded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    /// A message's role: `user`, `assistant`, `developer` or `system`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
    /// A message's content (a reasoning item's raw content, `null` from Codex).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<GuestContent>,
    /// The call a call or output item names.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The namespace of a namespaced function's call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// A function call's arguments (JSON text).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arguments: Option<String>,
    /// A custom tool call's input (free text).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input: Option<String>,
    /// A call's output: text, or content items.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<GuestContent>,
    /// A reasoning item's summary parts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<Vec<GuestPart>>,
    /// A reasoning item's opaque blob.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub encrypted_content: Option<String>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// Text, or content parts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum GuestContent {
    Text(String),
    Parts(Vec<GuestPart>),
}

/// One content part: `input_text`, `output_text`, `summary_text`, `input_image`, `input_file`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GuestPart {
    #[serde(rename = "type")]
    pub kind: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// An image's data URL or link.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_url: Option<String>,
    /// `auto`, `low`, `high`, `original` (not forwarded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// A file's data URL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file_data: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filename: Option<String>,
    /// An `output_text`'s annotations (dropped) and log probabilities (dropped).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub logprobs: Option<Value>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// One declared tool: `function`, `custom`, `namespace`, or a server tool.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GuestResponsesTool {
    #[serde(rename = "type")]
    pub kind: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// A function's JSON Schema.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parameters: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub strict: Option<bool>,
    /// A custom tool's input format: `{type: text}` or `{type: grammar, syntax, definition}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub format: Option<Value>,
    /// A namespace's functions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<Vec<GuestResponsesTool>>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}
