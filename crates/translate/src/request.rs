//! Request translation: GenerateContent body -> Chat Completions request.
use crate::error::TranslateError;
use crate::google::GenerateContentRequest;
use crate::openai::ChatRequest;
use crate::options::{TranslateOptions, TranslationReport};

/// A translated request plus the decisions taken.
#[derive(Debug, Clone, PartialEq)]
pub struct TranslatedRequest {
    /// Body to POST upstream.
    pub chat: ChatRequest,
    /// Decisions and notes.
    pub report: TranslationReport,
    /// The guest asked for `application/json` (set [`crate::ResponseConfig::json_response`]).
    pub json_response: bool,
}

/// Parses a guest body.
pub fn parse_request(body: &[u8]) -> Result<GenerateContentRequest, TranslateError> {
    serde_json::from_slice(body).map_err(|e| TranslateError::InvalidBody(e.to_string()))
}

/// Whether the guest asked for a JSON answer.
pub fn is_json_response(req: &GenerateContentRequest) -> bool {
    req.generation_config
        .as_ref()
        .and_then(|g| g.response_mime_type.as_deref())
        .is_some_and(|m| m.eq_ignore_ascii_case("application/json"))
}

/// Translates a guest request.
pub fn translate_request(
    req: &GenerateContentRequest,
    opts: &TranslateOptions,
) -> Result<TranslatedRequest, TranslateError> {
    let _ = (req, opts);
    todo!()
}
