//! Typed errors of request translation ([`TranslateError`], always a 400 for the guest) and of
//! reading upstream responses ([`UpstreamError`]).

use crate::google::GoogleErrorBody;

/// Why a guest request cannot be translated. Every variant is the guest's fault: answer HTTP 400
/// `INVALID_ARGUMENT` with [`TranslateError::to_google_error`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TranslateError {
    /// The body is not valid JSON or does not fit the GenerateContent shape.
    #[error("invalid request body: {0}")]
    InvalidBody(String),
    /// A field Switchyard does not know; nothing is silently dropped.
    #[error("unknown field `{path}`: Switchyard cannot translate it to Chat Completions")]
    UnknownField {
        /// JSON path, e.g. `generationConfig.seedling`.
        path: String,
    },
    /// A Google built-in tool (googleSearch, urlContext, codeExecution, ...).
    #[error(
        "unsupported tool {tool} at `{path}`: only functionDeclarations can be sent to a Chat Completions upstream"
    )]
    UnsupportedTool {
        /// JSON path.
        path: String,
        /// Tool key, e.g. `googleSearch`.
        tool: String,
    },
    /// A known Google feature that has no Chat Completions counterpart.
    #[error("unsupported {feature} at `{path}`: no Chat Completions counterpart")]
    Unsupported {
        /// JSON path.
        path: String,
        /// What it is, e.g. `fileData part`.
        feature: String,
    },
    /// `inlineData.data` is not valid base64.
    #[error("invalid base64 in `{path}`")]
    InvalidBase64 {
        /// JSON path.
        path: String,
    },
    /// A field has a value we cannot translate.
    #[error("invalid value for `{path}`: {reason}")]
    InvalidValue {
        /// JSON path.
        path: String,
        /// What is wrong.
        reason: String,
    },
    /// More stop sequences than Chat Completions allows.
    #[error("`generationConfig.stopSequences` has {count} entries; at most {max} are supported")]
    TooManyStopSequences {
        /// Given.
        count: usize,
        /// Allowed.
        max: usize,
    },
    /// `candidateCount` other than 1.
    #[error("`generationConfig.candidateCount` is {0}; only 1 is supported")]
    CandidateCount(u32),
    /// A functionResponse whose id matches no call of the preceding model turn.
    #[error(
        "functionResponse at `{path}` (id {id:?}, name {name:?}) matches no functionCall of the preceding model turn"
    )]
    UnmatchedFunctionResponse {
        /// JSON path.
        path: String,
        /// Its id.
        id: Option<String>,
        /// Its name.
        name: String,
    },
    /// A functionCall that is never answered although the conversation continues.
    #[error("functionCall {id:?} at `{path}` has no functionResponse in the following user turn")]
    MissingFunctionResponse {
        /// JSON path of the call.
        path: String,
        /// Call id.
        id: String,
    },
    /// The same functionCall id twice in the history (or answered twice).
    #[error("functionCall id {id:?} is used twice (second at `{path}`)")]
    DuplicateCallId {
        /// Second occurrence.
        path: String,
        /// The id.
        id: String,
    },
}

impl TranslateError {
    /// HTTP status for the guest (always 400).
    pub fn http_status(&self) -> u16 {
        400
    }

    /// Google-shaped 400 `INVALID_ARGUMENT` body.
    pub fn to_google_error(&self) -> GoogleErrorBody {
        crate::google_errors::google_error(400, &self.to_string(), None)
    }
}

/// Why an upstream Chat Completions response cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UpstreamError {
    /// A `data:` payload (or body) that is not the expected JSON.
    #[error("upstream sent invalid JSON ({reason}): {excerpt}")]
    InvalidJson {
        /// Parser message.
        reason: String,
        /// First 200 characters of the payload.
        excerpt: String,
    },
    /// The upstream reported an error inside the stream or body.
    #[error("upstream error: {message}")]
    Reported {
        /// Upstream message.
        message: String,
        /// Upstream numeric code, when it gave one.
        code: Option<u16>,
        /// The raw error object (compact JSON).
        raw: String,
    },
    /// Data arrived after `[DONE]`.
    #[error("upstream sent data after [DONE]")]
    DataAfterDone,
}

impl UpstreamError {
    /// Google-shaped error for the guest (502 `UNAVAILABLE` unless the upstream gave a code).
    pub fn to_google_error(&self) -> GoogleErrorBody {
        let code = match self {
            UpstreamError::Reported { code: Some(c), .. } if (400..600).contains(c) => *c,
            _ => 502,
        };
        crate::google_errors::google_error(code, &self.to_string(), None)
    }
}

/// A value a guest sent that its field does not take, at `path`.
pub(crate) fn invalid(path: impl Into<String>, reason: impl Into<String>) -> TranslateError {
    TranslateError::InvalidValue {
        path: path.into(),
        reason: reason.into(),
    }
}

/// A feature of the guest's API the gateway does not serve, at `path`.
pub(crate) fn unsupported(path: impl Into<String>, feature: impl Into<String>) -> TranslateError {
    TranslateError::Unsupported {
        path: path.into(),
        feature: feature.into(),
    }
}

/// Refuses the first field no type names (`extra`), by its path under `path`.
pub(crate) fn unknown(
    extra: &serde_json::Map<String, serde_json::Value>,
    path: &str,
) -> Result<(), TranslateError> {
    match extra.keys().next() {
        Some(key) => Err(TranslateError::UnknownField {
            path: format!("{path}{key}"),
        }),
        None => Ok(()),
    }
}
