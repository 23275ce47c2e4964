//! Response translation: upstream Chat Completions (SSE chunks or one body) -> GenerateContent
//! chunks for the guest.
//!
//! * Text deltas are forwarded at once, one chunk each (unless the guest asked for JSON: then the
//!   text is buffered and sent once on the final chunk with ```json fences stripped).
//! * Reasoning deltas (`reasoning_content` / `reasoning`) become `thought: true` parts when
//!   [`ResponseConfig::forward_reasoning`] is set (never part of the guest's history).
//! * Tool-call fragments are assembled by `index` (fragments without index join the call with the
//!   same id, else the latest call) and delivered only on the final chunk, once the turn finished
//!   and each call has a name and arguments that parse as a JSON object (empty arguments become
//!   `{}`, noted). Anything else is a [`TurnOutcome::Malformed`]: no call is delivered.
//! * The final chunk always has a finishReason and usageMetadata (estimated and noted when the
//!   upstream sent no usage).
//!
//! ## Retries after a malformed call
//! The gateway retries the exchange with a fresh translator whose
//! [`ResponseConfig::already_forwarded_text`] is the text the guest already received. In that
//! attempt, upstream text is suppressed while it repeats the already-forwarded text; text beyond
//! it is forwarded. If the new text diverges from what the guest has, the rest of this attempt's
//! text is suppressed (noted as `retry_text_diverged`), so the guest's view stays one consistent
//! text followed by the retried attempt's calls.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use crate::error::UpstreamError;
use crate::google::{
    Candidate, Content, FinishReason, FunctionCall, GenerateContentResponse, Part, UsageMetadata,
};
use crate::openai::{ChatChunk, ChatCompletion, ChatDelta, ChatUsage, ToolCallDelta};
use crate::options::{ResponseConfig, ResponseReport};
use crate::tokens::estimate_text_tokens;

/// How a turn ended.
#[derive(Debug, Clone, PartialEq)]
pub enum TurnOutcome {
    /// The turn is complete: write `final_chunk`, register the delivered ids.
    Complete(CompletedTurn),
    /// A tool call was malformed or truncated and was not delivered: retry or give up.
    Malformed(MalformedTurn),
}

impl TurnOutcome {
    /// The chunk to write if the gateway does not retry.
    pub fn final_chunk(&self) -> &GenerateContentResponse {
        match self {
            TurnOutcome::Complete(t) => &t.final_chunk,
            TurnOutcome::Malformed(t) => &t.final_chunk,
        }
    }

    /// The report of this attempt.
    pub fn report(&self) -> &ResponseReport {
        match self {
            TurnOutcome::Complete(t) => &t.report,
            TurnOutcome::Malformed(t) => &t.report,
        }
    }
}

/// A complete turn.
#[derive(Debug, Clone, PartialEq)]
pub struct CompletedTurn {
    /// Last chunk: function calls (and, for non-streamed or JSON answers, the text), finishReason,
    /// usageMetadata, modelVersion, responseId.
    pub final_chunk: GenerateContentResponse,
    /// The delivered calls (ids always set), in call order.
    pub delivered_calls: Vec<FunctionCall>,
    /// Ids of `delivered_calls`, for [`crate::CallLedger::register_delivered`].
    pub delivered_call_ids: Vec<String>,
    /// Visible text the guest has received (including any previous attempts).
    pub forwarded_text: String,
    /// Decisions and notes.
    pub report: ResponseReport,
}

/// A turn whose tool call could not be delivered.
#[derive(Debug, Clone, PartialEq)]
pub struct MalformedTurn {
    /// What was wrong.
    pub reason: MalformedReason,
    /// Visible text the guest already received; pass it as
    /// [`ResponseConfig::already_forwarded_text`] to the retry's translator.
    pub forwarded_text: String,
    /// Give-up chunk: finishReason `MALFORMED_FUNCTION_CALL`, no functionCall part, usage.
    pub final_chunk: GenerateContentResponse,
    /// Decisions and notes.
    pub report: ResponseReport,
}

/// Why a tool call is malformed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MalformedReason {
    /// Arguments are not valid JSON.
    #[error("tool call {index} ({name}): arguments are not valid JSON: {error}")]
    InvalidArguments {
        /// Upstream index.
        index: u32,
        /// Function name.
        name: String,
        /// Parser message.
        error: String,
    },
    /// Arguments are JSON but not an object.
    #[error("tool call {index} ({name}): arguments are not a JSON object")]
    NotAnObject {
        /// Upstream index.
        index: u32,
        /// Function name.
        name: String,
    },
    /// A later fragment of the call named another id or function than its first fragment.
    #[error("tool call {index}: its fragments name different values of `{field}`")]
    ConflictingFragments {
        /// Upstream index.
        index: u32,
        /// `id` or `name`.
        field: &'static str,
    },
    /// No function name.
    #[error("tool call {index} has no function name")]
    MissingName {
        /// Upstream index.
        index: u32,
    },
    /// The stream ended (no finish_reason, no `[DONE]`) while a call was open.
    #[error("stream ended in the middle of tool call {index}")]
    StreamEndedMidCall {
        /// Upstream index.
        index: u32,
    },
    /// finish_reason `length` while a call was open.
    #[error("output limit reached in the middle of tool call {index}")]
    TruncatedByLength {
        /// Upstream index.
        index: u32,
    },
    /// Two calls of one turn carry the same id.
    #[error("two tool calls of one turn carry the id {id:?}")]
    DuplicateId {
        /// The id.
        id: String,
    },
}

/// Maps an upstream finish_reason: `stop`/`tool_calls`/`function_call` (and the non-standard
/// `eos`, `end_turn`, `stop_sequence`) -> STOP, `length`/`max_tokens` -> MAX_TOKENS,
/// `content_filter` -> SAFETY, missing -> STOP (the translator notes it), anything else -> OTHER.
pub fn map_finish_reason(reason: Option<&str>) -> FinishReason {
    match reason {
        None => FinishReason::Stop,
        Some("stop" | "tool_calls" | "function_call" | "eos" | "end_turn" | "stop_sequence") => {
            FinishReason::Stop
        }
        Some("length" | "max_tokens") => FinishReason::MaxTokens,
        Some("content_filter") => FinishReason::Safety,
        Some(_) => FinishReason::Other,
    }
}

/// Maps upstream usage: prompt_tokens -> promptTokenCount, completion_tokens ->
/// candidatesTokenCount, total_tokens -> totalTokenCount (prompt + completion when 0),
/// cached_tokens -> cachedContentTokenCount, reasoning_tokens -> thoughtsTokenCount.
pub fn map_usage(usage: &ChatUsage) -> UsageMetadata {
    let total = if usage.total_tokens == 0 {
        usage.prompt_tokens.saturating_add(usage.completion_tokens)
    } else {
        usage.total_tokens
    };
    UsageMetadata {
        prompt_token_count: usage.prompt_tokens,
        candidates_token_count: usage.completion_tokens,
        total_token_count: total,
        cached_content_token_count: usage
            .prompt_tokens_details
            .as_ref()
            .and_then(|d| d.cached_tokens),
        thoughts_token_count: usage
            .completion_tokens_details
            .as_ref()
            .and_then(|d| d.reasoning_tokens),
    }
}

/// Removes one surrounding Markdown code fence (```json ... ``` or ``` ... ```); `None` if the
/// (trimmed) text is not fenced.
pub fn strip_json_fences(text: &str) -> Option<&str> {
    let trimmed = text.trim();
    let rest = trimmed.strip_prefix("```")?;
    let newline = rest.find('\n')?;
    let lang = rest[..newline].trim();
    if !(lang.is_empty() || lang.eq_ignore_ascii_case("json")) {
        return None;
    }
    let body = rest[newline + 1..].trim_end().strip_suffix("```")?;
    Some(body.trim())
}

#[derive(Debug, Default, Clone)]
struct PendingCall {
    id: Option<String>,
    name: String,
    arguments: String,
    /// A later fragment named another id or function than the first one.
    conflict: Option<MalformedReason>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum TextMode {
    /// Forward text deltas as they arrive.
    Stream,
    /// Keep text for the final chunk (non-streamed bodies and JSON answers).
    Collect,
}

/// Translator for one upstream attempt (streamed or not). See the module docs.
#[derive(Debug)]
pub struct StreamTranslator {
    cfg: ResponseConfig,
    mode: TextMode,
    done: bool,
    upstream_id: Option<String>,
    upstream_model: Option<String>,
    finish_reason: Option<String>,
    usage: Option<ChatUsage>,
    calls: BTreeMap<u32, PendingCall>,
    last_index: Option<u32>,
    /// Visible text received in this attempt.
    received_text: String,
    /// Visible text the guest has (previous attempts + forwarded now).
    forwarded_text: String,
    prior_len: usize,
    collected_thoughts: String,
    /// All reasoning of this attempt, when it is carried ([`ResponseConfig::carry_reasoning`]).
    carried_reasoning: String,
    /// JSON chunks received in this attempt.
    chunks: u64,
    report: ResponseReport,
}

impl StreamTranslator {
    /// A translator for one streamed attempt.
    pub fn new(cfg: ResponseConfig) -> Self {
        let mode = if cfg.json_response {
            TextMode::Collect
        } else {
            TextMode::Stream
        };
        let forwarded_text = cfg.already_forwarded_text.clone().unwrap_or_default();
        StreamTranslator {
            prior_len: forwarded_text.len(),
            forwarded_text,
            cfg,
            mode,
            done: false,
            upstream_id: None,
            upstream_model: None,
            finish_reason: None,
            usage: None,
            calls: BTreeMap::new(),
            last_index: None,
            received_text: String::new(),
            collected_thoughts: String::new(),
            carried_reasoning: String::new(),
            chunks: 0,
            report: ResponseReport::default(),
        }
    }

    /// Why this attempt's stream cannot count as an answer, if it cannot: it carried no chunk
    /// at all, or it stopped before its end (no `finish_reason`, no `[DONE]`).
    pub fn unfinished(&self) -> Option<&'static str> {
        if self.chunks == 0 {
            Some("the stream ended without a single chunk")
        } else if !self.done && self.finish_reason.is_none() {
            Some("the stream ended before its end (no finish_reason, no [DONE])")
        } else {
            None
        }
    }

    /// `[DONE]` was received.
    pub fn is_done(&self) -> bool {
        self.done
    }

    /// Visible text the guest has so far (previous attempts included).
    pub fn forwarded_text(&self) -> &str {
        &self.forwarded_text
    }

    /// Feeds one SSE `data:` payload (JSON chunk, `[DONE]`, or empty keep-alive) and returns the
    /// chunks to forward now. An upstream error object in the stream is [`UpstreamError::Reported`];
    /// payloads after `[DONE]` are ignored and counted under `"<after [DONE]>"`.
    pub fn push(&mut self, data: &str) -> Result<Vec<GenerateContentResponse>, UpstreamError> {
        let data = data.trim();
        if data.is_empty() {
            return Ok(Vec::new());
        }
        if self.done {
            *self
                .report
                .unknown_upstream_fields
                .entry("<after [DONE]>".into())
                .or_default() += 1;
            return Ok(Vec::new());
        }
        if data == "[DONE]" {
            self.done = true;
            return Ok(Vec::new());
        }
        let chunk: ChatChunk = serde_json::from_str(data).map_err(|e| invalid_json(e, data))?;
        if let Some(error) = &chunk.error {
            return Err(reported_error(error));
        }
        self.chunks += 1;
        self.count_unknown("", &chunk.extra);
        if self.upstream_id.is_none() {
            self.upstream_id = chunk.id.clone();
        }
        if self.upstream_model.is_none() {
            self.upstream_model = chunk.model.clone();
        }
        if chunk.usage.is_some() {
            self.usage = chunk.usage.clone();
        }
        let mut out = Vec::new();
        for choice in &chunk.choices {
            if choice.index != 0 {
                self.report.ignored_choices += 1;
                continue;
            }
            self.count_unknown("choices[].", &choice.extra);
            out.extend(self.apply_delta(&choice.delta));
            if let Some(reason) = &choice.finish_reason {
                self.finish_reason = Some(reason.clone());
            }
        }
        Ok(out)
    }

    fn count_unknown(&mut self, prefix: &str, extra: &Map<String, Value>) {
        for key in extra.keys() {
            *self
                .report
                .unknown_upstream_fields
                .entry(format!("{prefix}{key}"))
                .or_default() += 1;
        }
    }

    fn apply_delta(&mut self, delta: &ChatDelta) -> Vec<GenerateContentResponse> {
        self.count_unknown("choices[].delta.", &delta.extra);
        if delta.function_call.is_some() {
            // Next to `tool_calls` it only repeats them; alone it is a shape no server here
            // was seen to send, so it is counted like any unknown field, never guessed at.
            let key = if delta.tool_calls.is_some() {
                "choices[].delta.function_call (next to tool_calls, ignored)"
            } else {
                "choices[].delta.function_call"
            };
            *self
                .report
                .unknown_upstream_fields
                .entry(key.into())
                .or_default() += 1;
        }
        let mut out = Vec::new();
        for reasoning in [&delta.reasoning_content, &delta.reasoning]
            .into_iter()
            .flatten()
        {
            if reasoning.is_empty() {
                continue;
            }
            if self.cfg.carry_reasoning {
                self.carried_reasoning.push_str(reasoning);
            }
            if !self.cfg.forward_reasoning {
                self.report.dropped_reasoning_chars += reasoning.chars().count() as u64;
            } else if self.mode == TextMode::Collect {
                self.collected_thoughts.push_str(reasoning);
            } else {
                self.report.reasoning_parts += 1;
                out.push(self.chunk(vec![Part::thought_text(reasoning.clone())]));
            }
        }
        for text in [&delta.content, &delta.refusal].into_iter().flatten() {
            if text.is_empty() {
                continue;
            }
            if let Some(visible) = self.accept_text(text) {
                out.push(self.chunk(vec![Part::text(visible)]));
            }
        }
        for call in delta.tool_calls.iter().flatten() {
            self.apply_tool_delta(call);
        }
        out
    }

    /// Records upstream text; returns the part to forward now (stream mode only).
    fn accept_text(&mut self, text: &str) -> Option<String> {
        let before = self.received_text.len();
        self.received_text.push_str(text);
        if self.mode == TextMode::Collect {
            return None;
        }
        if self.report.retry_text_diverged {
            self.report.suppressed_text_chars += text.chars().count() as u64;
            return None;
        }
        if before >= self.prior_len {
            // Past everything the guest already has (always the case on a first attempt).
            self.forwarded_text.push_str(text);
            return Some(text.to_string());
        }
        // Still inside the text a previous attempt forwarded: `forwarded_text` is exactly it.
        let prior = &self.forwarded_text[..self.prior_len];
        let received = self.received_text.as_str();
        let consistent = if received.len() <= prior.len() {
            prior.starts_with(received)
        } else {
            received.starts_with(prior)
        };
        if !consistent {
            self.report.retry_text_diverged = true;
            self.report.suppressed_text_chars += text.chars().count() as u64;
            return None;
        }
        if received.len() <= self.prior_len {
            self.report.suppressed_text_chars += text.chars().count() as u64;
            return None;
        }
        let fresh = received[self.prior_len..].to_string();
        self.report.suppressed_text_chars += (text.chars().count() - fresh.chars().count()) as u64;
        self.forwarded_text.push_str(&fresh);
        Some(fresh)
    }

    fn apply_tool_delta(&mut self, delta: &ToolCallDelta) {
        self.count_unknown("choices[].delta.tool_calls[].", &delta.extra);
        let id = delta.id.as_deref().filter(|s| !s.is_empty());
        let index = match delta.index {
            Some(i) => i,
            None => match id {
                Some(id) => self
                    .calls
                    .iter()
                    .find(|(_, c)| c.id.as_deref() == Some(id))
                    .map(|(i, _)| *i)
                    .unwrap_or_else(|| self.calls.keys().next_back().map_or(0, |i| i + 1)),
                None => self.last_index.unwrap_or(0),
            },
        };
        self.last_index = Some(index);
        let call = self.calls.entry(index).or_default();
        // The id and the name come whole, once; servers such as llama.cpp's repeat them in every
        // fragment. A repeat is ignored, a different value makes the call malformed.
        if let Some(id) = id {
            match &call.id {
                None => call.id = Some(id.to_string()),
                Some(first) if first != id => {
                    call.conflict
                        .get_or_insert(MalformedReason::ConflictingFragments {
                            index,
                            field: "id",
                        });
                }
                Some(_) => {}
            }
        }
        if let Some(function) = &delta.function {
            if let Some(name) = function.name.as_deref().filter(|n| !n.is_empty()) {
                if call.name.is_empty() {
                    call.name = name.to_owned();
                } else if call.name != name {
                    call.conflict
                        .get_or_insert(MalformedReason::ConflictingFragments {
                            index,
                            field: "name",
                        });
                }
            }
            if let Some(args) = &function.arguments {
                call.arguments.push_str(args);
            }
        }
    }

    fn chunk(&self, parts: Vec<Part>) -> GenerateContentResponse {
        GenerateContentResponse {
            candidates: vec![Candidate {
                content: Content {
                    role: Some("model".into()),
                    parts,
                    ..Content::default()
                },
                finish_reason: None,
                index: 0,
            }],
            usage_metadata: None,
            model_version: Some(self.model_version()),
            response_id: Some(self.response_id()),
        }
    }

    fn model_version(&self) -> String {
        if !self.cfg.model_version.is_empty() {
            self.cfg.model_version.clone()
        } else {
            self.upstream_model
                .clone()
                .unwrap_or_else(|| "unknown".into())
        }
    }

    fn response_id(&self) -> String {
        if !self.cfg.response_id.is_empty() {
            self.cfg.response_id.clone()
        } else {
            self.upstream_id
                .clone()
                .unwrap_or_else(|| "response".into())
        }
    }

    fn usage_metadata(&mut self) -> UsageMetadata {
        match &self.usage {
            Some(usage) => map_usage(usage),
            None => {
                self.report.usage_estimated = true;
                let prompt = self.cfg.prompt_token_estimate.unwrap_or(0);
                let args: usize = self.calls.values().map(|c| c.arguments.len()).sum();
                let completion = estimate_text_tokens(&self.received_text)
                    .saturating_add(u32::try_from(args.div_ceil(4)).unwrap_or(u32::MAX));
                UsageMetadata {
                    prompt_token_count: prompt,
                    candidates_token_count: completion,
                    total_token_count: prompt.saturating_add(completion),
                    cached_content_token_count: None,
                    thoughts_token_count: None,
                }
            }
        }
    }

    /// Validates the assembled calls, in index order.
    fn assemble_calls(&mut self) -> Result<Vec<FunctionCall>, MalformedReason> {
        let finish = self.finish_reason.as_deref();
        let calls = std::mem::take(&mut self.calls);
        let mut out: Vec<FunctionCall> = Vec::with_capacity(calls.len());
        for (index, call) in calls {
            if finish == Some("length") {
                return Err(MalformedReason::TruncatedByLength { index });
            }
            if finish.is_none() && !self.done {
                return Err(MalformedReason::StreamEndedMidCall { index });
            }
            if let Some(conflict) = call.conflict {
                return Err(conflict);
            }
            let name = call.name.trim().to_string();
            if name.is_empty() {
                return Err(MalformedReason::MissingName { index });
            }
            let args = if call.arguments.trim().is_empty() {
                self.report.empty_arguments_as_empty_object += 1;
                Value::Object(Map::new())
            } else {
                match serde_json::from_str::<Value>(&call.arguments) {
                    Ok(v @ Value::Object(_)) => v,
                    Ok(_) => return Err(MalformedReason::NotAnObject { index, name }),
                    Err(e) => {
                        return Err(MalformedReason::InvalidArguments {
                            index,
                            name,
                            error: e.to_string(),
                        });
                    }
                }
            };
            let id = match call.id {
                Some(id) => id,
                None => {
                    let id = format!("{}_{index}", self.synthetic_prefix());
                    self.report.synthesized_call_ids.push(id.clone());
                    id
                }
            };
            if out.iter().any(|c| c.id.as_deref() == Some(id.as_str())) {
                return Err(MalformedReason::DuplicateId { id });
            }
            out.push(FunctionCall {
                id: Some(id),
                name,
                args: Some(args),
                ..FunctionCall::default()
            });
        }
        Ok(out)
    }

    fn synthetic_prefix(&self) -> String {
        if !self.cfg.synthetic_id_prefix.is_empty() {
            self.cfg.synthetic_id_prefix.clone()
        } else {
            format!("call_{}", self.response_id())
        }
    }

    /// Ends the attempt (after `[DONE]` or when the stream closed) and returns the outcome.
    pub fn finish(mut self) -> TurnOutcome {
        self.report.upstream_finish_reason = self.finish_reason.clone();
        let usage = self.usage_metadata();
        let mut forwarded_text = std::mem::take(&mut self.forwarded_text);

        if self.finish_reason.as_deref() == Some("content_filter") && !self.calls.is_empty() {
            self.report.calls_discarded_on_safety = self.calls.len() as u32;
            self.calls.clear();
        }
        let calls = match self.assemble_calls() {
            Ok(calls) => calls,
            Err(reason) => {
                let mut final_chunk = self.chunk(Vec::new());
                final_chunk.candidates[0].finish_reason = Some(FinishReason::MalformedFunctionCall);
                final_chunk.usage_metadata = Some(usage);
                return TurnOutcome::Malformed(MalformedTurn {
                    reason,
                    forwarded_text,
                    final_chunk,
                    report: self.report,
                });
            }
        };
        if self.finish_reason.is_none() {
            self.report.synthesized_finish_reason = true;
        }
        let finish = map_finish_reason(self.finish_reason.as_deref());

        let mut parts = Vec::new();
        if self.mode == TextMode::Collect {
            if !self.collected_thoughts.is_empty() {
                self.report.reasoning_parts += 1;
                parts.push(Part::thought_text(std::mem::take(
                    &mut self.collected_thoughts,
                )));
            }
            let mut text = self.received_text.clone();
            if self.cfg.json_response
                && let Some(inner) = strip_json_fences(&text)
            {
                self.report.fences_stripped = true;
                text = inner.to_string();
            }
            if !text.is_empty() {
                forwarded_text.push_str(&text);
                parts.push(Part::text(text));
            }
        }
        let first_call = parts.len();
        parts.extend(calls.iter().cloned().map(Part::function_call));
        if let Some(part) = parts.get_mut(first_call)
            && !self.carried_reasoning.is_empty()
        {
            self.report.carried_reasoning_chars = self.carried_reasoning.chars().count() as u64;
            part.thought_signature = Some(crate::reasoning::reasoning_signature(
                &self.carried_reasoning,
            ));
        }
        let mut final_chunk = self.chunk(parts);
        final_chunk.candidates[0].finish_reason = Some(finish);
        final_chunk.usage_metadata = Some(usage);
        TurnOutcome::Complete(CompletedTurn {
            final_chunk,
            delivered_call_ids: calls.iter().filter_map(|c| c.id.clone()).collect(),
            delivered_calls: calls,
            forwarded_text,
            report: self.report,
        })
    }
}

/// Translates a non-streamed `chat.completion` body into one complete GenerateContent response
/// (text, thought text, calls, finishReason, usage in one chunk), with the same call validation
/// as streaming.
pub fn translate_completion(
    body: &[u8],
    cfg: ResponseConfig,
) -> Result<TurnOutcome, UpstreamError> {
    // One parse for the usual body; errors and malformed bodies take the slow path below.
    let completion: ChatCompletion = match serde_json::from_slice::<ChatCompletion>(body) {
        Ok(completion) if completion.extra.get("error").is_none_or(Value::is_null) => completion,
        _ => {
            let text = String::from_utf8_lossy(body);
            let value: Value = serde_json::from_str(&text).map_err(|e| invalid_json(e, &text))?;
            if let Some(error) = value.get("error").filter(|e| !e.is_null()) {
                return Err(reported_error(error));
            }
            serde_json::from_value(value).map_err(|e| invalid_json(e, &text))?
        }
    };
    let mut tr = StreamTranslator::new(cfg);
    tr.mode = TextMode::Collect;
    tr.done = true;
    tr.count_unknown("", &completion.extra);
    tr.upstream_id = completion.id.clone();
    tr.upstream_model = completion.model.clone();
    tr.usage = completion.usage.clone();
    for choice in &completion.choices {
        if choice.index != 0 {
            tr.report.ignored_choices += 1;
            continue;
        }
        tr.count_unknown("choices[].", &choice.extra);
        let mut message = choice.message.clone();
        if let Some(calls) = message.tool_calls.as_mut() {
            for (position, call) in calls.iter_mut().enumerate() {
                call.index.get_or_insert(position as u32);
            }
        }
        tr.apply_delta(&message);
        tr.finish_reason = choice.finish_reason.clone();
    }
    Ok(tr.finish())
}

fn invalid_json(e: serde_json::Error, data: &str) -> UpstreamError {
    UpstreamError::InvalidJson {
        reason: e.to_string(),
        excerpt: data.chars().take(200).collect(),
    }
}

fn reported_error(error: &Value) -> UpstreamError {
    let message = error
        .get("message")
        .and_then(Value::as_str)
        .or_else(|| error.as_str())
        .unwrap_or("upstream error")
        .to_string();
    let code = error
        .get("code")
        .and_then(|c| {
            c.as_u64()
                .or_else(|| c.as_str().and_then(|s| s.parse().ok()))
        })
        .and_then(|c| u16::try_from(c).ok());
    UpstreamError::Reported {
        message,
        code,
        raw: error.to_string(),
    }
}
