//! OpenAI Chat Completions wire types: the request we send upstream and the responses/chunks we read.
//!
//! Request types serialize only the fields that are set. Response types are lenient: fields we do not
//! model are kept in `extra` maps, and the response translator counts them by key in
//! [`crate::ResponseReport::unknown_upstream_fields`] (the raw bodies are the gateway's to record).

use serde::{Deserialize, Serialize};
use serde_json::{Map, Number, Value};

/// `POST /v1/chat/completions` body.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ChatRequest {
    /// Upstream model name.
    pub model: String,
    /// Conversation.
    pub messages: Vec<ChatMessage>,
    /// Function tools.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<ChatTool>,
    /// `"auto"`, `"none"`, `"required"` or `{"type":"function","function":{"name":..}}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_choice: Option<Value>,
    /// Sampling temperature.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f64>,
    /// Nucleus sampling.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub top_p: Option<f64>,
    /// Non-standard; only sent when the provider accepts it (vLLM, llama.cpp, Ollama).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub top_k: Option<Number>,
    /// Output token limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u32>,
    /// Stop sequences.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stop: Vec<String>,
    /// Seed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<i64>,
    /// Presence penalty.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub presence_penalty: Option<f64>,
    /// Frequency penalty.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub frequency_penalty: Option<f64>,
    /// Structured output.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_format: Option<ResponseFormat>,
    /// `minimal`/`low`/`medium`/`high` (only with [`crate::ThinkingMode::ReasoningEffort`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_effort: Option<String>,
    /// Stream the answer as SSE.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub stream: bool,
    /// `{"include_usage": true}` when streaming.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream_options: Option<StreamOptions>,
    /// Fields a guest that speaks this API set and the gateway forwards unchanged
    /// (`crate::chat_ingress::FORWARDED_FIELDS` that have no field here).
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `stream_options`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StreamOptions {
    /// Ask for a final usage chunk.
    pub include_usage: bool,
}

/// One chat message, tagged by `role`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "role", rename_all = "lowercase")]
pub enum ChatMessage {
    /// System prompt.
    System {
        /// Text.
        content: String,
        /// A participant name (Chat guests).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        name: Option<String>,
    },
    /// Developer instructions (OpenAI's newer name for system; servers that do not know the
    /// role get `system`: [`crate::ProviderOptions::developer_role`]).
    Developer {
        /// Text.
        content: String,
        /// A participant name.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        name: Option<String>,
    },
    /// User turn.
    User {
        /// Text or content parts (text and images).
        content: UserContent,
        /// A participant name (Chat guests).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        name: Option<String>,
    },
    /// Assistant turn (text and/or tool calls).
    Assistant {
        /// A participant name (Chat guests).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        name: Option<String>,
        /// Text; `null` when only tool calls.
        content: Option<String>,
        /// Tool calls.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        tool_calls: Vec<ToolCall>,
        /// The reasoning the upstream produced for this turn, sent back to upstreams that require
        /// it (see [`crate::reasoning`]).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reasoning_content: Option<String>,
    },
    /// Tool result.
    Tool {
        /// The `tool_calls[].id` this answers.
        tool_call_id: String,
        /// Result text (compact JSON of the Google `functionResponse.response`).
        content: String,
    },
}

/// User message content.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum UserContent {
    /// Plain text.
    Text(String),
    /// Mixed parts.
    Parts(Vec<ContentPart>),
}

/// A user content part.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ContentPart {
    /// Text.
    Text {
        /// The text.
        text: String,
    },
    /// Image as a data URL (a link only with `allow_remote_media`).
    ImageUrl {
        /// `{"url": "data:image/webp;base64,..."}`.
        image_url: ImageUrl,
    },
    /// A document (e.g. a PDF) for providers that take one (`file_parts`).
    File {
        /// The document.
        file: FileData,
    },
    /// Audio for providers that take it (`audio_parts`).
    InputAudio {
        /// The audio.
        input_audio: InputAudio,
    },
}

/// `file` object of a `file` part.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileData {
    /// A name for the document.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filename: Option<String>,
    /// `data:<mime>;base64,<data>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file_data: Option<String>,
    /// A provider's uploaded-file id (Chat guests only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file_id: Option<String>,
}

/// `input_audio` object of an `input_audio` part.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InputAudio {
    /// Standard base64.
    pub data: String,
    /// `wav` or `mp3`.
    pub format: String,
}

/// `image_url` object.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ImageUrl {
    /// Data URL.
    pub url: String,
    /// `auto`, `low` or `high` (Chat guests).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

/// An assistant tool call in a request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolCall {
    /// Call id (Google `functionCall.id`).
    pub id: String,
    /// Always `"function"`.
    #[serde(rename = "type")]
    pub kind: String,
    /// Name and arguments.
    pub function: FunctionCallSpec,
}

/// Name and JSON-string arguments.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FunctionCallSpec {
    /// Function name.
    pub name: String,
    /// Compact JSON object text.
    pub arguments: String,
}

/// A function tool.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChatTool {
    /// Always `"function"`.
    #[serde(rename = "type")]
    pub kind: String,
    /// The declaration.
    pub function: ChatFunction,
}

/// Function declaration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChatFunction {
    /// Name.
    pub name: String,
    /// Description.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Cleaned JSON Schema.
    pub parameters: Value,
    /// Strict schema adherence (Chat guests).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub strict: Option<bool>,
}

/// `response_format`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ResponseFormat {
    /// Plain text (the default; Chat guests may say so).
    Text,
    /// Free-form JSON, or (llama.cpp's form) JSON constrained by `schema`.
    JsonObject {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        schema: Option<Value>,
    },
    /// JSON constrained by a schema.
    JsonSchema {
        /// Name, schema, strictness.
        json_schema: JsonSchemaFormat,
    },
}

/// `response_format.json_schema`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JsonSchemaFormat {
    /// Always `"response"`.
    pub name: String,
    /// Cleaned schema.
    pub schema: Value,
    /// Always `false` (strict mode needs `additionalProperties:false` everywhere).
    pub strict: bool,
}

/// One streamed `chat.completion.chunk`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ChatChunk {
    /// Upstream response id.
    #[serde(default)]
    pub id: Option<String>,
    /// Model that answered.
    #[serde(default)]
    pub model: Option<String>,
    /// Choices (we use index 0).
    #[serde(default)]
    pub choices: Vec<ChunkChoice>,
    /// Usage (usually on the last chunk, with empty choices).
    #[serde(default)]
    pub usage: Option<ChatUsage>,
    /// `chat.completion.chunk`.
    #[serde(default)]
    pub object: Option<String>,
    /// Unix time.
    #[serde(default)]
    pub created: Option<Value>,
    /// Fingerprint.
    #[serde(default)]
    pub system_fingerprint: Option<Value>,
    /// Mid-stream error object, when the upstream reports one in a data line.
    #[serde(default)]
    pub error: Option<Value>,
    /// Unmodelled fields (counted).
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// A streamed choice.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ChunkChoice {
    /// Choice index.
    #[serde(default)]
    pub index: u32,
    /// The delta.
    #[serde(default)]
    pub delta: ChatDelta,
    /// Set on the last choice chunk.
    #[serde(default)]
    pub finish_reason: Option<String>,
    /// Log probabilities (ignored).
    #[serde(default)]
    pub logprobs: Option<Value>,
    /// Unmodelled fields (counted).
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// A streamed delta (also used for a whole non-streamed message).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ChatDelta {
    /// `assistant`.
    #[serde(default)]
    pub role: Option<String>,
    /// Visible text.
    #[serde(default)]
    pub content: Option<String>,
    /// Reasoning text (DeepSeek, vLLM, llama.cpp).
    #[serde(default)]
    pub reasoning_content: Option<String>,
    /// Reasoning text (OpenRouter, Ollama).
    #[serde(default)]
    pub reasoning: Option<String>,
    /// Refusal text (treated as visible text).
    #[serde(default)]
    pub refusal: Option<String>,
    /// Tool-call fragments.
    #[serde(default)]
    pub tool_calls: Option<Vec<ToolCallDelta>>,
    /// The legacy (pre-tools) function-call fragment. llama-cpp-python sends it next to
    /// `tool_calls`, repeating the first call's fragment; it is then ignored (and counted).
    #[serde(default)]
    pub function_call: Option<FunctionDelta>,
    /// Unmodelled fields (counted).
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// A tool-call fragment.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ToolCallDelta {
    /// Position of the call in this turn; fragments with the same index belong together.
    #[serde(default)]
    pub index: Option<u32>,
    /// Call id (usually only on the first fragment).
    #[serde(default)]
    pub id: Option<String>,
    /// `function`.
    #[serde(default, rename = "type")]
    pub kind: Option<String>,
    /// Name and argument fragments.
    #[serde(default)]
    pub function: Option<FunctionDelta>,
    /// Unmodelled fields (counted).
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// Name / arguments fragment.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct FunctionDelta {
    /// Name (fragments are concatenated).
    #[serde(default)]
    pub name: Option<String>,
    /// Argument text fragment.
    #[serde(default)]
    pub arguments: Option<String>,
}

/// `usage`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ChatUsage {
    /// Prompt tokens.
    #[serde(default)]
    pub prompt_tokens: u32,
    /// Completion tokens (including reasoning).
    #[serde(default)]
    pub completion_tokens: u32,
    /// Total.
    #[serde(default)]
    pub total_tokens: u32,
    /// Cached prompt tokens.
    #[serde(default)]
    pub prompt_tokens_details: Option<PromptTokensDetails>,
    /// Reasoning tokens.
    #[serde(default)]
    pub completion_tokens_details: Option<CompletionTokensDetails>,
}

/// `usage.prompt_tokens_details`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PromptTokensDetails {
    /// Cached tokens.
    #[serde(default)]
    pub cached_tokens: Option<u32>,
}

/// `usage.completion_tokens_details`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CompletionTokensDetails {
    /// Reasoning tokens.
    #[serde(default)]
    pub reasoning_tokens: Option<u32>,
}

/// Non-streamed `chat.completion`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ChatCompletion {
    /// Upstream id.
    #[serde(default)]
    pub id: Option<String>,
    /// Model.
    #[serde(default)]
    pub model: Option<String>,
    /// Choices.
    #[serde(default)]
    pub choices: Vec<CompletionChoice>,
    /// Usage.
    #[serde(default)]
    pub usage: Option<ChatUsage>,
    /// `chat.completion`.
    #[serde(default)]
    pub object: Option<String>,
    /// Unix time.
    #[serde(default)]
    pub created: Option<Value>,
    /// Fingerprint.
    #[serde(default)]
    pub system_fingerprint: Option<Value>,
    /// Unmodelled fields (counted).
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// A non-streamed choice.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CompletionChoice {
    /// Index.
    #[serde(default)]
    pub index: u32,
    /// The message (same shape as a delta, with whole tool calls).
    #[serde(default)]
    pub message: ChatDelta,
    /// Finish reason.
    #[serde(default)]
    pub finish_reason: Option<String>,
    /// Unmodelled fields (counted).
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}
