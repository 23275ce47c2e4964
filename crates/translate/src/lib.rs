//! # switchyard-translate
//!
//! Pure protocol crate (no I/O): Google GenerateContent wire types ([`google`]), OpenAI Chat
//! Completions wire types ([`openai`]) and the translation between them, used by the gateway.
//!
//! ## Request direction (guest -> upstream)
//! * [`parse_request`] + [`translate_request`] turn a `:generateContent` / `:streamGenerateContent`
//!   body into a [`openai::ChatRequest`] plus a [`TranslationReport`] (decisions and notes to record).
//!   Any field we do not model is a [`TranslateError::UnknownField`]; every error maps to HTTP 400 via
//!   [`TranslateError::to_google_error`].
//! * Ordering: a user Content with `functionResponse` parts becomes the tool messages first (in the
//!   call order of the preceding assistant message), then one user message holding tool-result
//!   images (labelled with the call id) and the user's own text/images.
//! * `functionResponse.response` becomes the tool message content as **compact JSON of the whole
//!   response object** (e.g. `{"output":"hello"}`).
//! * Thought parts are dropped and `thoughtSignature`s are never sent upstream (counted in the
//!   report); with [`ProviderOptions::echo_reasoning`], the reasoning a signature of ours carries
//!   ([`reasoning`]) goes back as the assistant message's `reasoning_content`.
//! * PNG images are re-encoded as lossless, exact WebP ([`image`]); 16-bit PNGs pass unchanged (noted).
//!   [`translate_request_with`] takes a [`ConversionCache`] that remembers conversions across
//!   requests (an image stays in every later request's history).
//! * Tool schemas are cleaned by [`schema::clean_schema`] (allow-list documented there).
//!
//! ## Response direction (upstream -> guest)
//! * [`StreamTranslator`]: feed every SSE `data:` payload (including `[DONE]`) to
//!   [`StreamTranslator::push`]; render the returned [`turn::TurnChunk`]s for the guest;
//!   at `[DONE]` or end of stream call [`StreamTranslator::finish`] which yields a [`TurnOutcome`]:
//!   * [`TurnOutcome::Complete`]: write `final_chunk` (complete function calls, finishReason,
//!     usageMetadata), then register `delivered_call_ids` in the session's [`CallLedger`].
//!   * [`TurnOutcome::Malformed`]: a tool call was invalid or truncated and was **not** delivered. Retry
//!     the upstream exchange (bounded) with a new translator whose
//!     [`ResponseConfig::already_forwarded_text`] is the `forwarded_text` of this outcome, or give up
//!     by writing its `final_chunk` (finishReason `MALFORMED_FUNCTION_CALL`, no functionCall part).
//! * [`translate_completion`] does the same for a non-streamed `chat.completion` body.
//! * With [`ResponseConfig::carry_reasoning`], a turn's reasoning rides in the first delivered
//!   call's `thoughtSignature` ([`reasoning`]), for upstreams that need it back.
//!
//! ## Call identity
//! With [`ResponseConfig::mint_call_ids`] (the gateway's setting) every call gets
//! `"{ResponseConfig::synthetic_id_prefix}_{position}"` and keeps the upstream's `tool_calls[].id`
//! as [`turn::ToolCall::upstream_id`]; without it the upstream id is the call's id and a call
//! without one gets `"{prefix}_{index}"`. [`CallLedger`] (one per session, kept by the gateway)
//! rejects reused ids, checks that a request's tool results answer delivered ids, and remembers
//! the upstream id each delivered id stands for.
//!
//! ## The neutral turn and the upstream plan
//! [`turn`] is the model turn every ingress renders ([`google_answer`], [`chat_answer`]);
//! [`plan`] applies the provider's switches to every ingress's upstream request.
//!
//! ## Chat Completions guests
//! A guest that speaks Chat Completions itself (OpenCode) is served by the same response
//! translation: [`chat_ingress`] checks and prepares its request for the upstream,
//! [`StreamTranslator`] assembles and validates the upstream's answer exactly as for Google
//! guests, and [`chat_answer`] renders that turn back as Chat Completions chunks.
//!
//! ## Messages guests
//! Claude Code speaks Anthropic's Messages API: [`messages_wire`] types its request,
//! [`messages_ingress`] checks and prepares it for the upstream, and [`messages_answer`] renders
//! the same neutral turn as Messages events.
//!
//! ## Responses guests
//! Codex speaks OpenAI's Responses API: [`responses_wire`] types its request,
//! [`responses_ingress`] checks and prepares it (custom and namespaced tools flattened to
//! functions, [`turn::CallShapes`] to map the calls back), and [`responses_answer`] renders the
//! neutral turn as Responses events.
//!
//! ## Context policies
//! [`context`] decides what of a long history goes upstream (the sliding window), on the neutral
//! request of every ingress.
//!
//! ## Other
//! * [`count_tokens`] / [`estimate_request_tokens`]: local estimate (method in [`tokens`]).
//! * [`google_errors`]: Google error bodies from upstream HTTP errors, with `RetryInfo`.

pub mod attachment;
pub mod chat_answer;
pub mod chat_ingress;
pub mod context;
pub mod error;
pub mod google;
pub mod google_answer;
pub mod google_errors;
pub mod image;
pub mod image_cache;
pub mod ledger;
pub mod messages_answer;
pub mod messages_ingress;
pub mod messages_wire;
pub mod openai;
pub mod options;
pub mod plan;
mod png_pass;
pub mod private_argument;
pub mod reasoning;
pub mod request;
pub mod response;
pub mod responses_answer;
pub mod responses_ingress;
pub mod responses_wire;
pub mod schema;
pub mod tokens;
pub mod turn;

pub use error::{TranslateError, UpstreamError};
pub use google_errors::{
    google_error, google_status_for_http, parse_retry_after, upstream_error_to_google,
};
pub use image_cache::{ConversionCache, ImageKey};
pub use ledger::{CallLedger, LedgerError};
pub use options::{
    DEFAULT_MAX_TOKENS, JsonSchemaMode, Profile, ProviderOptions, ResponseConfig, ResponseReport,
    SchemaChange, ThinkingMode, ToolCallContent, TranslateOptions, TranslationReport,
};
pub use private_argument::strip_private_argument;
pub use request::{
    TranslatedRequest, is_json_response, parse_request, translate_request, translate_request_with,
};
pub use response::{
    CompletedTurn, MalformedReason, MalformedTurn, StreamTranslator, TurnOutcome,
    map_finish_reason, map_usage, strip_json_fences, translate_completion,
};
pub use tokens::{count_tokens, estimate_request_tokens};
