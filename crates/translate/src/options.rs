//! Knobs of a translation ([`TranslateOptions`], [`ResponseConfig`]) and the "decisions and notes"
//! reports it produces ([`TranslationReport`], [`ResponseReport`]) for the gateway to record.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// What to do with `generationConfig.thinkingConfig`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ThinkingMode {
    /// Not forwarded; recorded in [`TranslationReport::dropped_options`]. (Default.)
    #[default]
    Drop,
    /// Mapped to `reasoning_effort`: `thinkingLevel` MINIMAL/LOW/MEDIUM/HIGH -> the same lower-case
    /// word; else `thinkingBudget` 0 -> `minimal`, 1..=1024 -> `low`, 1025..=8192 -> `medium`,
    /// larger -> `high`, -1 (dynamic) -> not sent; `includeThoughts` alone -> not sent.
    ReasoningEffort,
}

/// A provider family whose OpenAI-compatible server has known quirks: a named set of the
/// individual [`ProviderOptions`] switches (each can still be set on its own).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum Profile {
    /// OpenAI's own API, and what its documentation promises. (Default.)
    #[default]
    #[serde(rename = "openai")]
    OpenAi,
    /// llama.cpp's `llama-server` and llama-cpp-python's server.
    #[serde(rename = "llama.cpp")]
    LlamaCpp,
    /// vLLM's OpenAI-compatible server.
    #[serde(rename = "vllm")]
    Vllm,
    /// Ollama's `/v1` endpoint.
    #[serde(rename = "ollama")]
    Ollama,
}

/// What an assistant turn that only calls tools sends as `content`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolCallContent {
    /// `null` (OpenAI's form). (Default.)
    #[default]
    Null,
    /// `""` (servers that refuse `null`, or whose chat template breaks without a string).
    Empty,
}

/// How a request for JSON with a schema (`responseSchema`) is sent.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum JsonSchemaMode {
    /// `response_format: {type: "json_schema", json_schema: {name, schema, strict: false}}`.
    /// (Default.)
    #[default]
    JsonSchema,
    /// `response_format: {type: "json_object", schema}` (llama.cpp's form).
    JsonObjectSchema,
    /// `response_format: {type: "json_object"}` and the schema in the system prompt.
    PromptOnly,
}

/// The largest output a request asks for when the guest sets no `maxOutputTokens` (Gemini CLI
/// never does): without one a local server generates until its context is full.
pub const DEFAULT_MAX_TOKENS: u32 = 8192;

/// What the upstream accepts and wants: the translation knobs that depend on the provider, not
/// on the request (the gateway's `[translation]` config section). `profile` picks the defaults of
/// the other switches; a switch set next to it wins.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "ProviderOptionsToml")]
pub struct ProviderOptions {
    /// The profile the other switches started from.
    pub profile: Profile,
    /// Forward `topK` as `top_k` (vLLM, llama.cpp, Ollama accept it); else dropped and recorded.
    pub forward_top_k: bool,
    /// `thinkingConfig` handling.
    pub thinking: ThinkingMode,
    /// Re-encode PNG images as lossless WebP (exact, pixel-identical).
    pub reencode_png: bool,
    /// Pixel budget of a PNG conversion (width × height, read from the header before
    /// decoding): larger images pass unchanged.
    pub max_image_pixels: u64,
    /// Maximum `stopSequences` accepted (more is a typed error). OpenAI allows 4.
    pub max_stop_sequences: usize,
    /// Send the reasoning a model turn carries in a `thoughtSignature` of ours back as that
    /// assistant message's `reasoning_content` (see [`crate::reasoning`]).
    pub echo_reasoning: bool,
    /// Show the upstream's reasoning to the guest as `thought: true` parts (display only: the
    /// guest keeps none of them in its history). Sets [`ResponseConfig::forward_reasoning`].
    pub forward_reasoning: bool,
    /// The upstream accepts `tool_choice: "required"` (some serve only `none`/`auto`, e.g. some
    /// Qwen deployments). When false, `toolConfig` mode `ANY` becomes `auto`, noted in
    /// [`TranslationReport::mapped_options`]: the model may then answer without a call.
    pub tool_choice_required: bool,
    /// `content` of an assistant turn that only calls tools.
    pub tool_call_content: ToolCallContent,
    /// How a JSON-schema request is sent.
    pub json_schema: JsonSchemaMode,
    /// `max_tokens` when the guest sets no `maxOutputTokens` (0: none).
    pub default_max_tokens: u32,
    /// Stream from the upstream when tools are offered. When false, such a request is built
    /// without streaming ([`crate::openai::ChatRequest::stream`] says which it is) and the
    /// gateway still streams the answer to the guest (servers whose streams with tools break, or
    /// carry no usage).
    pub stream_tools: bool,
    /// The upstream knows the `developer` role (OpenAI's). When false, a Chat guest's
    /// developer message goes up as `system`, noted (local servers' chat templates know
    /// `system` only).
    pub developer_role: bool,
    /// MIME types of attachments the upstream takes as a Chat `file` part (OpenAI's takes
    /// `application/pdf`); other non-image attachments become text or a placeholder (see
    /// [`crate::attachment`]).
    pub file_parts: Vec<String>,
    /// The upstream takes WAV and MP3 as `input_audio` parts (audio models only).
    pub audio_parts: bool,
    /// Remote media links (a Chat guest's image URL, a Google `fileData` URI) go to the provider,
    /// which fetches them. Off: the model sees a placeholder, so no guest makes the provider
    /// fetch a URL of its choosing.
    pub allow_remote_media: bool,
}

impl Profile {
    /// The switches of this profile.
    pub fn options(self) -> ProviderOptions {
        let openai = ProviderOptions {
            profile: self,
            forward_top_k: false,
            thinking: ThinkingMode::Drop,
            reencode_png: true,
            max_image_pixels: crate::image::DEFAULT_MAX_IMAGE_PIXELS,
            max_stop_sequences: 4,
            echo_reasoning: false,
            forward_reasoning: false,
            tool_choice_required: true,
            tool_call_content: ToolCallContent::Null,
            json_schema: JsonSchemaMode::JsonSchema,
            default_max_tokens: DEFAULT_MAX_TOKENS,
            stream_tools: true,
            developer_role: true,
            file_parts: vec!["application/pdf".to_owned()],
            audio_parts: false,
            allow_remote_media: false,
        };
        let local = ProviderOptions {
            file_parts: Vec::new(),
            ..openai.clone()
        };
        match self {
            Profile::OpenAi => openai,
            Profile::LlamaCpp => ProviderOptions {
                forward_top_k: true,
                tool_choice_required: false,
                tool_call_content: ToolCallContent::Empty,
                json_schema: JsonSchemaMode::JsonObjectSchema,
                stream_tools: false,
                max_stop_sequences: 16,
                developer_role: false,
                ..local
            },
            Profile::Vllm => ProviderOptions {
                forward_top_k: true,
                max_stop_sequences: 16,
                developer_role: false,
                ..local
            },
            Profile::Ollama => ProviderOptions {
                tool_choice_required: false,
                tool_call_content: ToolCallContent::Empty,
                max_stop_sequences: 16,
                developer_role: false,
                ..local
            },
        }
    }
}

impl Default for ProviderOptions {
    /// The `openai` profile.
    fn default() -> Self {
        Profile::OpenAi.options()
    }
}

/// The `[translation]` section as written: a profile and any switches set on their own.
#[derive(Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
struct ProviderOptionsToml {
    profile: Profile,
    forward_top_k: Option<bool>,
    thinking: Option<ThinkingMode>,
    reencode_png: Option<bool>,
    max_image_pixels: Option<u64>,
    max_stop_sequences: Option<usize>,
    echo_reasoning: Option<bool>,
    forward_reasoning: Option<bool>,
    tool_choice_required: Option<bool>,
    tool_call_content: Option<ToolCallContent>,
    json_schema: Option<JsonSchemaMode>,
    default_max_tokens: Option<u32>,
    stream_tools: Option<bool>,
    developer_role: Option<bool>,
    file_parts: Option<Vec<String>>,
    audio_parts: Option<bool>,
    allow_remote_media: Option<bool>,
}

impl From<ProviderOptionsToml> for ProviderOptions {
    fn from(t: ProviderOptionsToml) -> Self {
        let base = t.profile.options();
        ProviderOptions {
            profile: t.profile,
            forward_top_k: t.forward_top_k.unwrap_or(base.forward_top_k),
            thinking: t.thinking.unwrap_or(base.thinking),
            reencode_png: t.reencode_png.unwrap_or(base.reencode_png),
            max_image_pixels: t.max_image_pixels.unwrap_or(base.max_image_pixels),
            max_stop_sequences: t.max_stop_sequences.unwrap_or(base.max_stop_sequences),
            echo_reasoning: t.echo_reasoning.unwrap_or(base.echo_reasoning),
            forward_reasoning: t.forward_reasoning.unwrap_or(base.forward_reasoning),
            tool_choice_required: t.tool_choice_required.unwrap_or(base.tool_choice_required),
            tool_call_content: t.tool_call_content.unwrap_or(base.tool_call_content),
            json_schema: t.json_schema.unwrap_or(base.json_schema),
            default_max_tokens: t.default_max_tokens.unwrap_or(base.default_max_tokens),
            stream_tools: t.stream_tools.unwrap_or(base.stream_tools),
            developer_role: t.developer_role.unwrap_or(base.developer_role),
            file_parts: t.file_parts.unwrap_or(base.file_parts),
            audio_parts: t.audio_parts.unwrap_or(base.audio_parts),
            allow_remote_media: t.allow_remote_media.unwrap_or(base.allow_remote_media),
        }
    }
}

/// Options for [`crate::translate_request`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TranslateOptions {
    /// Model name sent upstream.
    pub upstream_model: String,
    /// Build a streaming request (`stream: true` + `stream_options.include_usage`).
    pub stream: bool,
    /// What the upstream accepts.
    pub provider: ProviderOptions,
    /// With a conversion cache, convert a PNG the cache does not hold during the translation.
    /// When false, such a PNG passes unchanged this time and its bytes are handed back in
    /// [`crate::TranslatedRequest::unconverted_pngs`], for the caller to convert off its
    /// request threads and translate again.
    pub convert_on_miss: bool,
}

impl TranslateOptions {
    /// Options for an upstream model, with the default [`ProviderOptions`].
    pub fn new(upstream_model: impl Into<String>, stream: bool) -> Self {
        TranslateOptions {
            upstream_model: upstream_model.into(),
            stream,
            provider: ProviderOptions::default(),
            convert_on_miss: true,
        }
    }
}

/// A tool schema that the cleaner changed (the original stays in the guest request body).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SchemaChange {
    /// Tool name, or `responseSchema`.
    pub target: String,
    /// JSON pointers of removed keys.
    pub dropped_keys: Vec<String>,
    /// `$ref`s that could not be inlined and were kept.
    pub unresolved_refs: Vec<String>,
    /// Number of type names lower-cased / `nullable` rewrites.
    pub rewrites: u32,
}

/// Decisions taken while translating one guest request.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct TranslationReport {
    /// `thought: true` parts removed from the history.
    #[serde(skip_serializing_if = "is_default")]
    pub dropped_thought_parts: u32,
    /// `thoughtSignature`s removed (not sent upstream).
    #[serde(skip_serializing_if = "is_default")]
    pub stripped_signatures: u32,
    /// Of which were the `skip_thought_signature_validator` sentinel.
    #[serde(skip_serializing_if = "is_default")]
    pub stripped_skip_validator_signatures: u32,
    /// Assistant messages given back the reasoning their turn's signature carried
    /// ([`ProviderOptions::echo_reasoning`]).
    #[serde(skip_serializing_if = "is_default")]
    pub echoed_reasoning_turns: u32,
    /// Images forwarded upstream.
    #[serde(skip_serializing_if = "is_default")]
    pub images_forwarded: u32,
    /// What became of each non-image attachment and remote link, as `path: what -> how`
    /// (inlined as text, a file or audio part, a link, or a placeholder).
    #[serde(skip_serializing_if = "is_default")]
    pub attachments: Vec<String>,
    /// PNGs re-encoded as lossless WebP.
    #[serde(skip_serializing_if = "is_default")]
    pub images_reencoded: u32,
    /// Sum of decoded input bytes of re-encoded PNGs.
    #[serde(skip_serializing_if = "is_default")]
    pub reencoded_bytes_before: u64,
    /// Sum of WebP output bytes.
    #[serde(skip_serializing_if = "is_default")]
    pub reencoded_bytes_after: u64,
    /// PNG conversions (re-encoded or passed through) taken from the conversion cache instead
    /// of being computed again (see [`crate::image_cache`]).
    #[serde(skip_serializing_if = "is_default")]
    pub reencodings_remembered: u32,
    /// PNGs forwarded unchanged and why (e.g. 16-bit), as `path: reason`.
    #[serde(skip_serializing_if = "is_default")]
    pub png_passthrough: Vec<String>,
    /// Known options not forwarded, as `path=value` (e.g. `generationConfig.topK=64`).
    #[serde(skip_serializing_if = "is_default")]
    pub dropped_options: Vec<String>,
    /// Options mapped in a non-obvious way (e.g. `thinkingLevel=HIGH -> reasoning_effort=high`).
    #[serde(skip_serializing_if = "is_default")]
    pub mapped_options: Vec<String>,
    /// Tool / response schemas changed by cleaning.
    #[serde(skip_serializing_if = "is_default")]
    pub schema_changes: Vec<SchemaChange>,
    /// functionResponses without id paired with a call by name (first unanswered call).
    #[serde(skip_serializing_if = "is_default")]
    pub responses_paired_by_name: u32,
    /// Ids synthesized for history functionCalls without id.
    #[serde(skip_serializing_if = "is_default")]
    pub synthesized_history_ids: u32,
    /// Other notes, human readable.
    #[serde(skip_serializing_if = "is_default")]
    pub notes: Vec<String>,
}

/// Configuration of a response translation ([`crate::StreamTranslator`], [`crate::translate_completion`]).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResponseConfig {
    /// `modelVersion` on every chunk (the upstream model name).
    pub model_version: String,
    /// `responseId` on every chunk.
    pub response_id: String,
    /// Prefix of synthesized call ids: a tool call without upstream id gets `"{prefix}_{index}"`
    /// (index = the upstream tool-call index). Make it unique per exchange (e.g. `call_<exchange uuid>`).
    pub synthetic_id_prefix: String,
    /// Give every call the id `"{synthetic_id_prefix}_{position}"` (position in the turn), the
    /// upstream's own id kept as [`crate::turn::ToolCall::upstream_id`]: the gateway's ids are
    /// unique in a run however the upstream numbers its calls (local servers restart at
    /// `call_0` every turn). Off: the upstream's id is the call's id.
    #[serde(default)]
    pub mint_call_ids: bool,
    /// Guest asked for `application/json`: text is buffered and sent once, ```json fences stripped.
    pub json_response: bool,
    /// Forward upstream `reasoning_content`/`reasoning` as `thought: true` parts.
    pub forward_reasoning: bool,
    /// Carry the turn's reasoning to the guest in the first delivered call's
    /// `thoughtSignature`, so a request translated with
    /// [`ProviderOptions::echo_reasoning`] sends it back (see [`crate::reasoning`]).
    #[serde(default)]
    pub carry_reasoning: bool,
    /// Prompt-token estimate used when the upstream sends no usage (see [`crate::estimate_request_tokens`]).
    pub prompt_token_estimate: Option<u32>,
    /// Retry of an attempt that ended malformed: the visible text already forwarded to the guest.
    /// See [`crate::StreamTranslator`] for the suppression rule.
    pub already_forwarded_text: Option<String>,
    /// Upstream functions that stand for a guest's custom or namespaced tools: their calls are
    /// delivered in that shape (a custom call's arguments must be `{"input": text}`).
    #[serde(default, skip_serializing_if = "crate::turn::CallShapes::is_empty")]
    pub call_shapes: crate::turn::CallShapes,
}

/// Decisions taken while translating one upstream response.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ResponseReport {
    /// Upstream `finish_reason` as received (`None` if missing).
    #[serde(skip_serializing_if = "is_default")]
    pub upstream_finish_reason: Option<String>,
    /// No finish_reason came; STOP was synthesized.
    #[serde(skip_serializing_if = "is_default")]
    pub synthesized_finish_reason: bool,
    /// Call ids synthesized because the upstream gave none.
    #[serde(skip_serializing_if = "is_default")]
    pub synthesized_call_ids: Vec<String>,
    /// Calls whose argument text was empty and became `{}`.
    #[serde(skip_serializing_if = "is_default")]
    pub empty_arguments_as_empty_object: u32,
    /// The upstream sent no usage; counts were estimated (bytes / 4).
    #[serde(skip_serializing_if = "is_default")]
    pub usage_estimated: bool,
    /// ```json fences removed from a JSON answer.
    #[serde(skip_serializing_if = "is_default")]
    pub fences_stripped: bool,
    /// Upstream keys we do not model, by name, with counts (kept in the raw record).
    #[serde(skip_serializing_if = "is_default")]
    pub unknown_upstream_fields: BTreeMap<String, u32>,
    /// Choices other than index 0 (ignored).
    #[serde(skip_serializing_if = "is_default")]
    pub ignored_choices: u32,
    /// Reasoning deltas forwarded as thought parts.
    #[serde(skip_serializing_if = "is_default")]
    pub reasoning_parts: u32,
    /// Reasoning deltas not forwarded (forward_reasoning off).
    #[serde(skip_serializing_if = "is_default")]
    pub dropped_reasoning_chars: u64,
    /// Characters of reasoning carried in a call's `thoughtSignature`
    /// ([`ResponseConfig::carry_reasoning`]).
    #[serde(skip_serializing_if = "is_default")]
    pub carried_reasoning_chars: u64,
    /// Retry: characters of upstream text not forwarded because the guest already had them.
    #[serde(skip_serializing_if = "is_default")]
    pub suppressed_text_chars: u64,
    /// Retry: the new attempt's text differed from what the guest already had; the rest of its text
    /// was suppressed so the guest's view stays one consistent text.
    #[serde(skip_serializing_if = "is_default")]
    pub retry_text_diverged: bool,
    /// Tool calls discarded because the turn ended with content_filter (not delivered).
    #[serde(skip_serializing_if = "is_default")]
    pub calls_discarded_on_safety: u32,
}

/// Reports are recorded with every exchange: fields at their default (nothing happened) are left
/// out, so a report lists only what the translation did.
fn is_default<T: Default + PartialEq>(value: &T) -> bool {
    *value == T::default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reports_list_only_what_happened_and_read_back_whole() {
        assert_eq!(
            serde_json::to_string(&TranslationReport::default()).unwrap(),
            "{}"
        );
        assert_eq!(
            serde_json::to_string(&ResponseReport::default()).unwrap(),
            "{}"
        );
        let report = ResponseReport {
            upstream_finish_reason: Some("stop".into()),
            unknown_upstream_fields: BTreeMap::from([("x_vendor".to_string(), 2)]),
            ..ResponseReport::default()
        };
        let json = serde_json::to_string(&report).unwrap();
        assert_eq!(
            json,
            r#"{"upstream_finish_reason":"stop","unknown_upstream_fields":{"x_vendor":2}}"#
        );
        assert_eq!(
            serde_json::from_str::<ResponseReport>(&json).unwrap(),
            report
        );
    }
}
