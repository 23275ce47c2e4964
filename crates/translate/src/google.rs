//! Google GenerateContent wire types: the shapes the guest (Gemini CLI) sends and expects.
//!
//! Every request-side struct carries a `#[serde(flatten)] extra` map. Fields that Switchyard does not
//! model land there, and the request translator turns any non-empty `extra` into
//! [`crate::TranslateError::UnknownField`] naming the JSON path, so nothing is silently dropped.
//! Response-side structs (what we send to the guest) serialize to single-line camelCase JSON.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Number, Value};

/// Fields present in the JSON that the typed model does not know (checked by the translator).
pub type Extra = Map<String, Value>;

/// Body of `POST /v1beta/models/{model}:generateContent` and `:streamGenerateContent`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GenerateContentRequest {
    /// The conversation, oldest first.
    #[serde(default)]
    pub contents: Vec<Content>,
    /// System prompt (text parts only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system_instruction: Option<Content>,
    /// Tool declarations (`functionDeclarations`; built-in Google tools are refused).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<Vec<Tool>>,
    /// Function-calling mode and allowed names.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_config: Option<ToolConfig>,
    /// Sampling and output options.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generation_config: Option<GenerationConfig>,
    /// Known; not forwarded to Chat Completions providers (recorded in the report).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub safety_settings: Option<Value>,
    /// Known; Google context caching cannot be honoured by a Chat provider (typed error).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached_content: Option<Value>,
    /// Known; billing labels, not forwarded (recorded in the report).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub labels: Option<Value>,
    /// Anything else (rejected as unknown).
    #[serde(flatten)]
    pub extra: Extra,
}

/// One turn: a role and its parts.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Content {
    /// `user`, `model` (or `function`, treated like `user`); absent means `user`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
    /// The parts, in order.
    #[serde(default)]
    pub parts: Vec<Part>,
    /// Unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// One part of a [`Content`]. Exactly one payload field is expected to be set.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Part {
    /// Plain text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// `true` marks a thought (reasoning) part.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thought: Option<bool>,
    /// Opaque Gemini reasoning signature; never sent upstream.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thought_signature: Option<String>,
    /// A tool call made by the model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub function_call: Option<FunctionCall>,
    /// The result of a tool call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub function_response: Option<FunctionResponse>,
    /// Inline media (base64).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inline_data: Option<Blob>,
    /// Known; file URIs cannot be fetched by Chat providers (typed error).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file_data: Option<Value>,
    /// Known; code execution is a Google built-in (typed error).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub executable_code: Option<Value>,
    /// Known; code execution is a Google built-in (typed error).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code_execution_result: Option<Value>,
    /// Known; video clipping has no Chat counterpart (typed error).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub video_metadata: Option<Value>,
    /// Unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}

impl Part {
    /// A plain text part.
    pub fn text(text: impl Into<String>) -> Self {
        Part {
            text: Some(text.into()),
            ..Part::default()
        }
    }

    /// A thought part (`thought: true`).
    pub fn thought_text(text: impl Into<String>) -> Self {
        Part {
            text: Some(text.into()),
            thought: Some(true),
            ..Part::default()
        }
    }

    /// A function-call part.
    pub fn function_call(call: FunctionCall) -> Self {
        Part {
            function_call: Some(call),
            ..Part::default()
        }
    }
}

/// `functionCall`: name, arguments object and the call id.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FunctionCall {
    /// Call id; the upstream `tool_calls[].id` on the way out, echoed back by the guest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// Function name.
    #[serde(default)]
    pub name: String,
    /// Arguments (a JSON object).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub args: Option<Value>,
    /// Unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// `functionResponse`: the tool result for a call id.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FunctionResponse {
    /// Id of the call this answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// Function name.
    #[serde(default)]
    pub name: String,
    /// Result object, conventionally `{"output": ...}` or `{"error": ...}`.
    #[serde(default)]
    pub response: Value,
    /// Media returned by the tool (e.g. a screenshot).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parts: Option<Vec<FunctionResponsePart>>,
    /// Known; streaming function responses are not supported (must be absent or false).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub will_continue: Option<bool>,
    /// Known; only meaningful for the Live API (recorded, not forwarded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scheduling: Option<Value>,
    /// Unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// A media part inside a `functionResponse`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FunctionResponsePart {
    /// Inline media.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inline_data: Option<Blob>,
    /// Known; refused like [`Part::file_data`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file_data: Option<Value>,
    /// Unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// `inlineData`: base64 bytes with a MIME type.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Blob {
    /// e.g. `image/png`.
    #[serde(default)]
    pub mime_type: String,
    /// Standard base64.
    #[serde(default)]
    pub data: String,
    /// Optional label (ignored).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub display_name: Option<String>,
    /// Unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// One element of `tools`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Tool {
    /// Function declarations (the only kind translated).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub function_declarations: Option<Vec<FunctionDeclaration>>,
    /// Known Google built-in tools; each is refused with [`crate::TranslateError::UnsupportedTool`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub google_search: Option<Value>,
    /// Google built-in (refused).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub google_search_retrieval: Option<Value>,
    /// Google built-in (refused).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url_context: Option<Value>,
    /// Google built-in (refused).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code_execution: Option<Value>,
    /// Google built-in (refused).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub google_maps: Option<Value>,
    /// Google built-in (refused).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub computer_use: Option<Value>,
    /// Google built-in (refused).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file_search: Option<Value>,
    /// Google built-in (refused).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retrieval: Option<Value>,
    /// Unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// A function the model may call.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FunctionDeclaration {
    /// Function name.
    #[serde(default)]
    pub name: String,
    /// Description shown to the model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// OpenAPI-style schema (upper-case types, `nullable`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parameters: Option<Value>,
    /// JSON Schema (what Gemini CLI sends).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parameters_json_schema: Option<Value>,
    /// Known; result schema has no Chat counterpart (recorded as dropped).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response: Option<Value>,
    /// Known; result schema has no Chat counterpart (recorded as dropped).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_json_schema: Option<Value>,
    /// Known; Live-API scheduling hint (recorded as dropped).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub behavior: Option<Value>,
    /// Unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// `toolConfig`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolConfig {
    /// Mode and allowed names.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub function_calling_config: Option<FunctionCallingConfig>,
    /// Known; location hints for Google built-ins (recorded as dropped).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retrieval_config: Option<Value>,
    /// Unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// `toolConfig.functionCallingConfig`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FunctionCallingConfig {
    /// `AUTO`, `ANY`, `NONE` or `VALIDATED` (case-insensitive).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
    /// Restricts which functions may be called.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allowed_function_names: Option<Vec<String>>,
    /// Unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// `generationConfig`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GenerationConfig {
    /// -> `temperature`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f64>,
    /// -> `top_p`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub top_p: Option<f64>,
    /// -> `top_k` only with [`crate::ProviderOptions::forward_top_k`], else dropped and recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub top_k: Option<Number>,
    /// -> `max_tokens`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_output_tokens: Option<u32>,
    /// -> `stop` (at most [`crate::ProviderOptions::max_stop_sequences`], else a typed error).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_sequences: Option<Vec<String>>,
    /// Must be 1 when present.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub candidate_count: Option<u32>,
    /// `text/plain` or `application/json`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_mime_type: Option<String>,
    /// OpenAPI-style output schema -> `response_format.json_schema`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_schema: Option<Value>,
    /// JSON-Schema output schema -> `response_format.json_schema`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_json_schema: Option<Value>,
    /// Reasoning controls (see [`crate::ThinkingMode`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thinking_config: Option<ThinkingConfig>,
    /// -> `seed`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<i64>,
    /// -> `presence_penalty`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub presence_penalty: Option<f64>,
    /// -> `frequency_penalty`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub frequency_penalty: Option<f64>,
    /// Only `["TEXT"]` is accepted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_modalities: Option<Vec<String>>,
    /// Unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// `generationConfig.thinkingConfig`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ThinkingConfig {
    /// Whether thoughts are streamed back.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub include_thoughts: Option<bool>,
    /// Token budget (0 = off, -1 = dynamic).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thinking_budget: Option<i64>,
    /// `MINIMAL`, `LOW`, `MEDIUM`, `HIGH`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thinking_level: Option<String>,
    /// Unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// One streamed chunk (or the whole non-streamed answer) sent to the guest.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GenerateContentResponse {
    /// Always exactly one candidate (index 0).
    pub candidates: Vec<Candidate>,
    /// Present on the last chunk of a turn.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage_metadata: Option<UsageMetadata>,
    /// Upstream model name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model_version: Option<String>,
    /// Response id (same on every chunk of one turn).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_id: Option<String>,
}

impl GenerateContentResponse {
    /// Single-line JSON, ready for `data: <json>\r\n\r\n`.
    pub fn to_json_line(&self) -> String {
        // Serializing these plain structs cannot fail (no maps with non-string keys).
        serde_json::to_string(self).unwrap_or_else(|e| {
            format!(r#"{{"error":{{"code":500,"message":"serialize: {e}","status":"INTERNAL"}}}}"#)
        })
    }

    /// The parts of candidate 0 (empty if none).
    pub fn parts(&self) -> &[Part] {
        self.candidates
            .first()
            .map(|c| c.content.parts.as_slice())
            .unwrap_or(&[])
    }

    /// The finish reason of candidate 0.
    pub fn finish_reason(&self) -> Option<FinishReason> {
        self.candidates.first().and_then(|c| c.finish_reason)
    }
}

/// A response candidate.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Candidate {
    /// Role `model` and the parts of this chunk.
    pub content: Content,
    /// Set on the last chunk of a turn.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finish_reason: Option<FinishReason>,
    /// Always 0.
    pub index: u32,
}

/// Google finish reasons that the translator produces.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum FinishReason {
    /// Natural end (also after tool calls).
    Stop,
    /// Output token limit hit.
    MaxTokens,
    /// Content filter.
    Safety,
    /// Tool call could not be assembled into a valid call.
    MalformedFunctionCall,
    /// Anything else.
    Other,
}

/// `usageMetadata` on the final chunk.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UsageMetadata {
    /// `usage.prompt_tokens`.
    pub prompt_token_count: u32,
    /// `usage.completion_tokens`.
    pub candidates_token_count: u32,
    /// `usage.total_tokens`.
    pub total_token_count: u32,
    /// `usage.prompt_tokens_details.cached_tokens`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached_content_token_count: Option<u32>,
    /// `usage.completion_tokens_details.reasoning_tokens`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thoughts_token_count: Option<u32>,
}

/// Body of `POST /v1beta/models/{model}:countTokens`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CountTokensRequest {
    /// Contents to count.
    #[serde(default)]
    pub contents: Vec<Content>,
    /// Alternative form: a whole generate request (its system prompt and tools count too).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generate_content_request: Option<GenerateContentRequest>,
    /// Unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// Answer of `:countTokens`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CountTokensResponse {
    /// Estimated token count.
    pub total_tokens: u32,
}

/// Google error envelope `{"error":{"code","message","status","details"}}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GoogleErrorBody {
    /// The error.
    pub error: GoogleError,
}

impl GoogleErrorBody {
    /// Single-line JSON.
    pub fn to_json_line(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }
}

/// Inner Google error.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GoogleError {
    /// HTTP status code.
    pub code: u16,
    /// Human-readable message.
    pub message: String,
    /// google.rpc status name, e.g. `RESOURCE_EXHAUSTED`.
    pub status: String,
    /// google.rpc details, e.g. `RetryInfo`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub details: Vec<Value>,
}
