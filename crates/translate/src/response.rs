//! Response translation: Chat Completions stream / body -> GenerateContent chunks.
use crate::error::UpstreamError;
use crate::google::{FinishReason, FunctionCall, GenerateContentResponse, UsageMetadata};
use crate::openai::ChatUsage;
use crate::options::{ResponseConfig, ResponseReport};

/// Translator for one upstream attempt.
#[derive(Debug)]
pub struct StreamTranslator {
    cfg: ResponseConfig,
}

impl StreamTranslator {
    /// New translator.
    pub fn new(cfg: ResponseConfig) -> Self {
        StreamTranslator { cfg }
    }
    /// Feeds one `data:` payload.
    pub fn push(&mut self, data: &str) -> Result<Vec<GenerateContentResponse>, UpstreamError> {
        let _ = (data, &self.cfg);
        todo!()
    }
    /// `[DONE]` seen.
    pub fn is_done(&self) -> bool {
        todo!()
    }
    /// Ends the turn.
    pub fn finish(self) -> TurnOutcome {
        todo!()
    }
}

/// How a turn ended.
#[derive(Debug, Clone, PartialEq)]
pub enum TurnOutcome {
    /// Complete.
    Complete(CompletedTurn),
    /// Malformed call.
    Malformed(MalformedTurn),
}

/// A complete turn.
#[derive(Debug, Clone, PartialEq)]
pub struct CompletedTurn {
    /// Last chunk.
    pub final_chunk: GenerateContentResponse,
    /// Delivered calls.
    pub delivered_calls: Vec<FunctionCall>,
    /// Report.
    pub report: ResponseReport,
}

/// A malformed turn.
#[derive(Debug, Clone, PartialEq)]
pub struct MalformedTurn {
    /// Why.
    pub reason: MalformedReason,
    /// Text forwarded.
    pub forwarded_text: String,
    /// Give-up chunk.
    pub final_chunk: GenerateContentResponse,
    /// Report.
    pub report: ResponseReport,
}

/// Why a call is malformed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MalformedReason {
    /// Bad JSON.
    InvalidArguments {
        /// Index.
        index: u32,
    },
}

/// Non-streamed.
pub fn translate_completion(
    body: &[u8],
    cfg: ResponseConfig,
) -> Result<TurnOutcome, UpstreamError> {
    let _ = (body, cfg);
    todo!()
}

/// finish map.
pub fn map_finish_reason(reason: Option<&str>) -> FinishReason {
    let _ = reason;
    todo!()
}

/// usage map.
pub fn map_usage(usage: &ChatUsage) -> UsageMetadata {
    let _ = usage;
    todo!()
}

/// fences.
pub fn strip_json_fences(text: &str) -> Option<&str> {
    let _ = text;
    todo!()
}
