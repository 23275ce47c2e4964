//! Response translation: upstream Chat Completions (SSE chunks or one body) -> the neutral model
//! turn ([`crate::turn`]) that each ingress renders for its guest.
//!
//! * Text deltas are forwarded at once, one chunk each (unless the guest asked for JSON: then the
//!   text is buffered and sent once on the final chunk with ```json fences stripped).
//! * Reasoning deltas (`reasoning_content` / `reasoning`) become reasoning parts when
//!   [`ResponseConfig::forward_reasoning`] is set (never part of the guest's history).
//! * Tool-call fragments are assembled by `index` (fragments without index join the call with the
//!   same id, else the latest call). A fragment that brings a new id to an index whose call is
//!   already complete (a name and arguments that parse as a JSON object) starts the next call:
//!   servers that send each parallel call whole at `index: 0` are read as the calls they are.
//!   Calls are delivered only on the final chunk, once the turn finished and each call has a
//!   name and arguments that parse as a JSON object (empty arguments become `{}`, noted).
//!   Anything else is a [`TurnOutcome::Malformed`]: no call is delivered.
//! * With [`ResponseConfig::mint_call_ids`] every call gets the gateway's own id, the upstream's
//!   kept beside it.
//! * The final chunk always has a finish reason and usage (estimated and noted when the
//!   upstream sent no usage).
//!
//! ## Retries after a malformed call
//! The gateway retries the exchange with a fresh translator whose
//! [`ResponseConfig::already_forwarded_text`] is the text the guest already received. In that
//! attempt, upstream text is suppressed while it repeats the already-forwarded text; text beyond
//! it is forwarded. If the new text diverges from what the guest has, the rest of this attempt's
//! text is suppressed (noted as `retry_text_diverged`), so the guest's view stays one consistent
//! text followed by the retried attempt's calls.

use std::collections::HashMap;

use serde_json::{Map, Value};

use crate::error::UpstreamError;
use crate::openai::{ChatChunk, ChatCompletion, ChatDelta, ChatUsage, ToolCallDelta};
use crate::options::{ResponseConfig, ResponseReport};
use crate::tokens::estimate_text_tokens;
use crate::turn::{CUSTOM_INPUT_ARG, CallKind, Finish, ToolCall, TurnChunk, TurnPart, TurnUsage};

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
    pub fn final_chunk(&self) -> &TurnChunk {
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
    /// Last chunk: the calls (and, for non-streamed or JSON answers, the text), the finish
    /// reason and the usage.
    pub final_chunk: TurnChunk,
    /// The delivered calls, in call order.
    pub delivered_calls: Vec<ToolCall>,
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
    /// Give-up chunk: finish [`Finish::MalformedCall`], no call, usage.
    pub final_chunk: TurnChunk,
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
    /// A custom tool's call whose arguments are not `{"input": text}`.
    #[error("tool call {index} ({name}): a custom tool takes one string argument `input`")]
    CustomInput {
        /// Upstream index.
        index: u32,
        /// Function name.
        name: String,
    },
    /// Two calls of one turn carry the same id.
    #[error("two tool calls of one turn carry the id {id:?}")]
    DuplicateId {
        /// The id.
        id: String,
    },
}

/// Maps an upstream finish_reason: `stop`/`tool_calls`/`function_call` (and the non-standard
/// `eos`, `end_turn`, `stop_sequence`) -> stop, `length`/`max_tokens` -> max tokens,
/// `content_filter` -> safety, missing -> stop (the translator notes it), anything else -> other.
pub fn map_finish_reason(reason: Option<&str>) -> Finish {
    match reason {
        None => Finish::Stop,
        Some("stop" | "tool_calls" | "function_call" | "eos" | "end_turn" | "stop_sequence") => {
            Finish::Stop
        }
        Some("length" | "max_tokens") => Finish::MaxTokens,
        Some("content_filter") => Finish::Safety,
        Some(_) => Finish::Other,
    }
}

/// Maps upstream usage: prompt_tokens -> input, completion_tokens -> output, total_tokens ->
/// total (prompt + completion when 0), cached_tokens -> cached, reasoning_tokens -> reasoning.
pub fn map_usage(usage: &ChatUsage) -> TurnUsage {
    let total = if usage.total_tokens == 0 {
        usage.prompt_tokens.saturating_add(usage.completion_tokens)
    } else {
        usage.total_tokens
    };
    TurnUsage {
        input: usage.prompt_tokens,
        output: usage.completion_tokens,
        total,
        cached: usage
            .prompt_tokens_details
            .as_ref()
            .and_then(|d| d.cached_tokens),
        reasoning: usage
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
    /// The upstream's index of the call.
    index: u32,
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
    /// The calls, in the order they began.
    calls: Vec<PendingCall>,
    /// The call each upstream index stands for now (a later call may reuse an index).
    by_index: HashMap<u32, usize>,
    /// The call the latest fragment went to.
    last_call: Option<usize>,
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
    /// Bytes of text, reasoning and call names and arguments received in this attempt.
    answer_bytes: usize,
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
            calls: Vec::new(),
            by_index: HashMap::new(),
            last_call: None,
            received_text: String::new(),
            collected_thoughts: String::new(),
            carried_reasoning: String::new(),
            chunks: 0,
            answer_bytes: 0,
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

    /// Bytes of the answer received in this attempt: text, reasoning, call names and arguments
    /// (what a bound on an answer's size counts).
    pub fn answer_bytes(&self) -> usize {
        self.answer_bytes
    }

    /// Calls begun in this attempt.
    pub fn call_count(&self) -> usize {
        self.calls.len()
    }

    /// Visible text the guest has so far (previous attempts included).
    pub fn forwarded_text(&self) -> &str {
        &self.forwarded_text
    }

    /// Feeds one SSE `data:` payload (JSON chunk, `[DONE]`, or empty keep-alive) and returns the
    /// chunks to forward now. An upstream error object in the stream is [`UpstreamError::Reported`];
    /// payloads after `[DONE]` are ignored and counted under `"<after [DONE]>"`.
    pub fn push(&mut self, data: &str) -> Result<Vec<TurnChunk>, UpstreamError> {
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

    fn apply_delta(&mut self, delta: &ChatDelta) -> Vec<TurnChunk> {
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
            self.answer_bytes = self.answer_bytes.saturating_add(reasoning.len());
            if self.cfg.carry_reasoning {
                self.carried_reasoning.push_str(reasoning);
            }
            if !self.cfg.forward_reasoning {
                self.report.dropped_reasoning_chars += reasoning.chars().count() as u64;
            } else if self.mode == TextMode::Collect {
                self.collected_thoughts.push_str(reasoning);
            } else {
                self.report.reasoning_parts += 1;
                out.push(self.chunk(vec![TurnPart::reasoning(reasoning.clone())]));
            }
        }
        for text in [&delta.content, &delta.refusal].into_iter().flatten() {
            if text.is_empty() {
                continue;
            }
            self.answer_bytes = self.answer_bytes.saturating_add(text.len());
            if let Some(visible) = self.accept_text(text) {
                out.push(self.chunk(vec![TurnPart::text(visible)]));
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
        let slot = match delta.index {
            Some(index) => match self.by_index.get(&index).copied() {
                // A new id at an index whose call is complete: the next call, sent whole at
                // the same index.
                Some(slot) if id.is_some_and(|id| self.calls[slot].begins_another(id)) => {
                    self.open_call(index)
                }
                Some(slot) => slot,
                None => self.open_call(index),
            },
            None => match id {
                Some(id) => match self.calls.iter().position(|c| c.id.as_deref() == Some(id)) {
                    Some(slot) => slot,
                    None => {
                        let next = self.calls.iter().map(|c| c.index + 1).max().unwrap_or(0);
                        self.open_call(next)
                    }
                },
                None => match self.last_call {
                    Some(slot) => slot,
                    None => self.open_call(0),
                },
            },
        };
        self.last_call = Some(slot);
        let call = &mut self.calls[slot];
        let index = call.index;
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
            // A name counts once (llama.cpp repeats it in every fragment).
            let new_name = call.name.is_empty();
            let fragment = function
                .name
                .as_ref()
                .filter(|_| new_name)
                .map_or(0, String::len)
                + function.arguments.as_ref().map_or(0, String::len);
            self.answer_bytes = self.answer_bytes.saturating_add(fragment);
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

    /// Starts a call at upstream index `index`; its slot.
    fn open_call(&mut self, index: u32) -> usize {
        self.calls.push(PendingCall {
            index,
            ..PendingCall::default()
        });
        let slot = self.calls.len() - 1;
        self.by_index.insert(index, slot);
        slot
    }

    fn chunk(&self, parts: Vec<TurnPart>) -> TurnChunk {
        TurnChunk {
            parts,
            ..TurnChunk::new(self.model_version(), self.response_id())
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

    fn usage(&mut self) -> TurnUsage {
        let (usage, estimated) = self.usage_now();
        self.report.usage_estimated |= estimated;
        usage
    }

    /// The usage of this attempt so far, for billing an attempt that ends before its turn
    /// does: what the upstream reported, else (once it sent anything) the estimate, `true`
    /// meaning estimated; `None` when nothing came.
    pub fn usage_so_far(&self) -> Option<(TurnUsage, bool)> {
        (self.usage.is_some() || self.chunks > 0).then(|| self.usage_now())
    }

    /// The reported usage, else the estimate (`true`).
    fn usage_now(&self) -> (TurnUsage, bool) {
        match &self.usage {
            Some(usage) => (map_usage(usage), false),
            None => {
                let prompt = self.cfg.prompt_token_estimate.unwrap_or(0);
                let args: usize = self.calls.iter().map(|c| c.arguments.len()).sum();
                let completion = estimate_text_tokens(&self.received_text)
                    .saturating_add(u32::try_from(args.div_ceil(4)).unwrap_or(u32::MAX));
                let usage = TurnUsage {
                    input: prompt,
                    output: completion,
                    total: prompt.saturating_add(completion),
                    cached: None,
                    reasoning: None,
                };
                (usage, true)
            }
        }
    }

    /// Validates the assembled calls, in the order they began.
    fn assemble_calls(&mut self) -> Result<Vec<ToolCall>, MalformedReason> {
        let finish = self.finish_reason.as_deref();
        let calls = std::mem::take(&mut self.calls);
        let mut out: Vec<ToolCall> = Vec::with_capacity(calls.len());
        for (position, call) in calls.into_iter().enumerate() {
            let index = call.index;
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
            let minted = || format!("{}_{position}", self.synthetic_prefix());
            let id = match (&call.id, self.cfg.mint_call_ids) {
                (_, true) => minted(),
                (Some(id), false) => id.clone(),
                (None, false) => format!("{}_{index}", self.synthetic_prefix()),
            };
            if call.id.is_none() {
                self.report.synthesized_call_ids.push(id.clone());
            }
            if out.iter().any(|c| c.id == id) {
                return Err(MalformedReason::DuplicateId { id });
            }
            let (kind, namespace, name, arguments) = match self.cfg.call_shapes.get(&name) {
                None => (CallKind::Function, None, name, args),
                Some(shape) => match (shape.kind, args) {
                    (CallKind::Custom, Value::Object(mut object)) => {
                        match (object.remove(CUSTOM_INPUT_ARG), object.is_empty()) {
                            (Some(input @ Value::String(_)), true) => {
                                (CallKind::Custom, None, shape.name.clone(), input)
                            }
                            _ => return Err(MalformedReason::CustomInput { index, name }),
                        }
                    }
                    (CallKind::Custom, _) => {
                        return Err(MalformedReason::CustomInput { index, name });
                    }
                    (CallKind::Function, args) => (
                        CallKind::Function,
                        shape.namespace.clone(),
                        shape.name.clone(),
                        args,
                    ),
                },
            };
            out.push(ToolCall {
                id,
                upstream_id: call.id,
                kind,
                namespace,
                name,
                arguments,
                signature: None,
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
        let usage = self.usage();
        let mut forwarded_text = std::mem::take(&mut self.forwarded_text);

        if self.finish_reason.as_deref() == Some("content_filter") && !self.calls.is_empty() {
            self.report.calls_discarded_on_safety = self.calls.len() as u32;
            self.calls.clear();
        }
        let mut calls = match self.assemble_calls() {
            Ok(calls) => calls,
            Err(reason) => {
                let mut final_chunk = self.chunk(Vec::new());
                final_chunk.finish = Some(Finish::MalformedCall);
                final_chunk.usage = Some(usage);
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
                parts.push(TurnPart::reasoning(std::mem::take(
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
                parts.push(TurnPart::text(text));
            }
        }
        if let Some(first) = calls.first_mut()
            && !self.carried_reasoning.is_empty()
        {
            self.report.carried_reasoning_chars = self.carried_reasoning.chars().count() as u64;
            first.signature = Some(crate::reasoning::reasoning_signature(
                &self.carried_reasoning,
            ));
        }
        parts.extend(calls.iter().cloned().map(TurnPart::Call));
        let mut final_chunk = self.chunk(parts);
        final_chunk.finish = Some(finish);
        final_chunk.usage = Some(usage);
        TurnOutcome::Complete(CompletedTurn {
            final_chunk,
            delivered_call_ids: calls.iter().map(|c| c.id.clone()).collect(),
            delivered_calls: calls,
            forwarded_text,
            report: self.report,
        })
    }
}

impl PendingCall {
    /// A fragment with `id` starts another call instead of continuing this one: this call has
    /// another id, a name and arguments that are a whole JSON object.
    fn begins_another(&self, id: &str) -> bool {
        self.id.as_deref().is_some_and(|own| own != id)
            && !self.name.is_empty()
            && matches!(
                serde_json::from_str::<Value>(&self.arguments),
                Ok(Value::Object(_))
            )
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
