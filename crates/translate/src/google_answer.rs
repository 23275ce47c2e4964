//! The answer side of the GenerateContent ingress: a neutral [`TurnChunk`] rendered as the
//! `GenerateContentResponse` chunk Gemini CLI reads.
//!
//! * Text parts become `text` parts, reasoning parts `thought: true` parts, calls
//!   `functionCall` parts (`id` = the gateway's call id, `args` = the arguments) with the call's
//!   signature as the part's `thoughtSignature`.
//! * One candidate (index 0, role `model`); the finish reason and `usageMetadata` on the last
//!   chunk; `modelVersion` and `responseId` on every chunk.

use crate::google::{
    Candidate, Content, FinishReason, FunctionCall, GenerateContentResponse, Part, UsageMetadata,
};
use crate::turn::{Finish, TurnChunk, TurnPart, TurnUsage};

/// `chunk` as a GenerateContent response chunk.
pub fn to_google(chunk: &TurnChunk) -> GenerateContentResponse {
    let parts = chunk.parts.iter().map(part).collect();
    GenerateContentResponse {
        candidates: vec![Candidate {
            content: Content {
                role: Some("model".into()),
                parts,
                ..Content::default()
            },
            finish_reason: chunk.finish.map(finish_reason),
            index: 0,
        }],
        usage_metadata: chunk.usage.as_ref().map(usage_metadata),
        model_version: Some(chunk.model.clone()),
        response_id: Some(chunk.response_id.clone()),
    }
}

fn part(part: &TurnPart) -> Part {
    match part {
        TurnPart::Text { text } => Part::text(text.clone()),
        TurnPart::Reasoning { text } => Part::thought_text(text.clone()),
        TurnPart::Call(call) => Part {
            thought_signature: call.signature.clone(),
            ..Part::function_call(FunctionCall {
                id: Some(call.id.clone()),
                name: call.name.clone(),
                args: Some(call.arguments.clone()),
                ..FunctionCall::default()
            })
        },
    }
}

/// The Google finish reason of a neutral one.
pub fn finish_reason(finish: Finish) -> FinishReason {
    match finish {
        Finish::Stop => FinishReason::Stop,
        Finish::MaxTokens => FinishReason::MaxTokens,
        Finish::Safety => FinishReason::Safety,
        Finish::MalformedCall => FinishReason::MalformedFunctionCall,
        Finish::Other => FinishReason::Other,
    }
}

/// Google's `usageMetadata` of a turn's usage.
pub fn usage_metadata(usage: &TurnUsage) -> UsageMetadata {
    UsageMetadata {
        prompt_token_count: usage.input,
        candidates_token_count: usage.output,
        total_token_count: usage.total,
        cached_content_token_count: usage.cached,
        thoughts_token_count: usage.reasoning,
    }
}
