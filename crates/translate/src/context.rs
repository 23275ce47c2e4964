//! Context policies: what of a guest's history goes upstream, decided on the neutral upstream
//! request (the Chat request every ingress builds), so it serves every ingress and every agent.
//! The guest keeps its complete history; only the request sent upstream changes.
//!
//! - [`ContextPolicy::Identity`] (the default) sends everything.
//! - [`ContextPolicy::SlidingWindow`], when the request's tokens exceed `max_input_tokens`:
//!   1. every call id and result is checked first (each tool result answers a call of the
//!      assistant message before it, each call is answered once), or the request is refused;
//!   2. images in tool results are replaced, oldest first, by an omission notice the model sees,
//!      in whole batches of `image_eviction_batch_size`, keeping at least
//!      `min_recent_tool_images` (a minimum of 6 and batches of 2 keep 6 or 7);
//!   3. whole blocks are evicted, oldest first, until the request is within
//!      `target_input_tokens`: a block is a tool batch (the assistant message with its calls,
//!      their results, and the message carrying the results' images) or an assistant answer
//!      without calls. Never evicted: system messages, standalone user inputs (every prompt),
//!      tool declarations and settings, the latest block (the results the model is answering),
//!      and an answer whose removal would put two user messages side by side;
//!   4. if what is left still exceeds `max_input_tokens`, the request is refused
//!      ([`ContextError::OverBudget`]): an over-budget request is never sent.
//!
//! Tokens are counted per message by the caller's counter (the provider's tokenizer, or
//! [`estimate_message`]: JSON bytes / 4 for text, a patch count for images), and the tools once.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::openai::{ChatMessage, ChatRequest, ContentPart, UserContent};

/// Which policy applies.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ContextPolicy {
    /// Everything goes upstream. (Default.)
    #[default]
    Identity,
    /// Oldest blocks evicted past a budget (see the module docs).
    SlidingWindow,
}

/// How a request's tokens are counted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Tokenizer {
    /// [`estimate_message`]: JSON bytes / 4, images by patches. (Default.)
    #[default]
    Estimate,
    /// llama.cpp's `llama-server`: `POST /tokenize {"content"}` → `{"tokens": [...]}`.
    #[serde(rename = "llama.cpp")]
    LlamaCpp,
    /// llama-cpp-python's server: `POST /extras/tokenize/count {"input"}` → `{"count"}`.
    LlamaCppPython,
    /// vLLM: `POST /tokenize {"model", "prompt"}` → `{"count"}`.
    Vllm,
}

/// The budgets of [`ContextPolicy::SlidingWindow`] (the `[context]` config section).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ContextConfig {
    pub policy: ContextPolicy,
    /// Who counts tokens: the provider's tokenizer endpoint, or the estimate.
    pub tokenizer: Tokenizer,
    /// The tokenizer's base URL (default: the upstream URL without its `/v1`).
    pub tokenizer_url: Option<String>,
    /// The request may not exceed this many input tokens.
    pub max_input_tokens: u32,
    /// Once over the max, evict down to this many.
    pub target_input_tokens: u32,
    /// Tool-result images always kept.
    pub min_recent_tool_images: u32,
    /// Tool-result images are omitted this many at a time.
    pub image_eviction_batch_size: u32,
}

impl Default for ContextConfig {
    fn default() -> Self {
        Self {
            policy: ContextPolicy::Identity,
            tokenizer: Tokenizer::Estimate,
            tokenizer_url: None,
            max_input_tokens: 0,
            target_input_tokens: 0,
            min_recent_tool_images: 6,
            image_eviction_batch_size: 2,
        }
    }
}

impl ContextConfig {
    /// The settings' own consistency (a window needs a max, and a target within it).
    pub fn validate(&self) -> Result<(), String> {
        if self.policy == ContextPolicy::Identity {
            return Ok(());
        }
        if self.max_input_tokens == 0 {
            return Err(
                "sliding-window needs max_input_tokens (--context-max-input-tokens)".into(),
            );
        }
        if self.target_input_tokens == 0 || self.target_input_tokens > self.max_input_tokens {
            return Err(format!(
                "target_input_tokens must be 1..={} (the max); it is {}",
                self.max_input_tokens, self.target_input_tokens
            ));
        }
        if self.image_eviction_batch_size == 0 {
            return Err("image_eviction_batch_size must be at least 1".into());
        }
        Ok(())
    }
}

/// Why a request is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ContextError {
    #[error("context policy: {0}")]
    Malformed(String),
    #[error(
        "context policy: the request needs {tokens} input tokens after evicting everything \
         evictable (what is left is protected: system messages, prompts, tools, the latest \
         results); the model's budget is {max}"
    )]
    OverBudget { tokens: u32, max: u32 },
}

/// What a block is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BlockKind {
    System,
    /// A standalone user input (a prompt): protected.
    Prompt,
    /// An assistant message with calls, their results, and the message with their images.
    ToolBatch,
    /// An assistant answer without calls.
    Answer,
}

/// One block of the history: messages `start..end` of the request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Block {
    pub kind: BlockKind,
    pub start: usize,
    pub end: usize,
    /// The calls of a tool batch.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub calls: Vec<String>,
}

/// What the policy did to one request, for the records.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContextDecision {
    pub policy: ContextPolicy,
    /// `tokenizer` or `estimate` (bytes / 4, images by patches).
    pub counted_by: String,
    pub tokens_before: u32,
    pub tokens_after: u32,
    pub max_input_tokens: u32,
    pub target_input_tokens: u32,
    /// Evicted blocks, oldest first, with their tokens (message indexes of the original
    /// request).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub evicted: Vec<EvictedBlock>,
    /// Tool-result images replaced by a notice.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub images_omitted: Vec<OmittedImage>,
}

/// A block the policy removed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EvictedBlock {
    pub kind: BlockKind,
    pub start: usize,
    pub end: usize,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub calls: Vec<String>,
    pub tokens: u32,
}

/// An image the policy replaced.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OmittedImage {
    /// The message and part of the original request.
    pub message: usize,
    pub part: usize,
    pub tokens: u32,
}

impl ContextDecision {
    /// Whether the request changed.
    pub fn changed(&self) -> bool {
        !self.evicted.is_empty() || !self.images_omitted.is_empty()
    }
}

/// What the model reads in place of an omitted image.
pub const OMITTED_IMAGE: &str =
    "[image omitted by Switchyard's context policy to fit the model's context window]";

/// The estimated tokens of [`OMITTED_IMAGE`].
fn notice_tokens() -> u32 {
    u32::try_from(OMITTED_IMAGE.len().div_ceil(4)).unwrap_or(u32::MAX)
}

/// The line the Google and Messages translations put before a tool result's images.
fn is_tool_media_label(text: &str) -> bool {
    (text.starts_with("Images returned by function call ")
        || text.starts_with("Attachments returned by function call "))
        && text.ends_with("):")
}

/// A user message that only carries tool results' media (each group after its label).
fn is_tool_media(message: &ChatMessage) -> bool {
    match message {
        ChatMessage::User {
            content: UserContent::Parts(parts),
            ..
        } => {
            matches!(parts.first(), Some(ContentPart::Text { text }) if is_tool_media_label(text))
                && parts.iter().all(|p| match p {
                    ContentPart::Text { text } => {
                        is_tool_media_label(text) || text == OMITTED_IMAGE
                    }
                    _ => true,
                })
        }
        _ => false,
    }
}

/// The request's blocks, its batches checked (see the module docs).
pub fn blocks(messages: &[ChatMessage]) -> Result<Vec<Block>, ContextError> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < messages.len() {
        match &messages[i] {
            ChatMessage::System { .. } | ChatMessage::Developer { .. } => {
                out.push(block(BlockKind::System, i, i + 1));
                i += 1;
            }
            ChatMessage::User { .. } => {
                out.push(block(BlockKind::Prompt, i, i + 1));
                i += 1;
            }
            ChatMessage::Tool { tool_call_id, .. } => {
                return Err(ContextError::Malformed(format!(
                    "messages[{i}] answers call {tool_call_id:?}, which no assistant message \
                     before it made"
                )));
            }
            ChatMessage::Assistant { tool_calls, .. } if tool_calls.is_empty() => {
                out.push(block(BlockKind::Answer, i, i + 1));
                i += 1;
            }
            ChatMessage::Assistant { tool_calls, .. } => {
                let calls: Vec<String> = tool_calls.iter().map(|c| c.id.clone()).collect();
                let mut pending = calls.clone();
                if let Some(dup) = calls
                    .iter()
                    .enumerate()
                    .find_map(|(n, id)| calls[..n].contains(id).then_some(id))
                {
                    return Err(ContextError::Malformed(format!(
                        "messages[{i}] makes call {dup:?} twice"
                    )));
                }
                let start = i;
                i += 1;
                while let Some(ChatMessage::Tool { tool_call_id, .. }) = messages.get(i) {
                    let Some(at) = pending.iter().position(|id| id == tool_call_id) else {
                        return Err(ContextError::Malformed(format!(
                            "messages[{i}] answers call {tool_call_id:?}, which is not one of \
                             messages[{start}]'s pending calls"
                        )));
                    };
                    pending.remove(at);
                    i += 1;
                }
                if !pending.is_empty() && i < messages.len() {
                    return Err(ContextError::Malformed(format!(
                        "messages[{start}]'s calls {pending:?} have no results"
                    )));
                }
                if messages.get(i).is_some_and(is_tool_media) {
                    i += 1;
                }
                out.push(Block {
                    kind: BlockKind::ToolBatch,
                    start,
                    end: i,
                    calls,
                });
            }
        }
    }
    Ok(out)
}

fn block(kind: BlockKind, start: usize, end: usize) -> Block {
    Block {
        kind,
        start,
        end,
        calls: Vec::new(),
    }
}

/// An estimate of one message's tokens: its JSON bytes / 4, each image counted by
/// [`estimate_image`] instead of its bytes.
pub fn estimate_message(message: &ChatMessage) -> u32 {
    let mut images = 0u32;
    let mut image_bytes = 0usize;
    if let ChatMessage::User {
        content: UserContent::Parts(parts),
        ..
    } = message
    {
        for part in parts {
            if let ContentPart::ImageUrl { image_url } = part {
                images = images.saturating_add(estimate_image(&image_url.url));
                image_bytes += image_url.url.len();
            }
        }
    }
    let json = serde_json::to_string(message).map_or(0, |s| s.len());
    let text = u32::try_from(json.saturating_sub(image_bytes).div_ceil(4)).unwrap_or(u32::MAX);
    text.saturating_add(images)
}

/// Tokens of an image estimated from its pixel size, read from the PNG or WebP header of a
/// data URL: one per 28×28 patch (Qwen2-VL's count after merging), plus 2; 1,024 when the size
/// cannot be read (a link, another format).
pub fn estimate_image(url: &str) -> u32 {
    const UNKNOWN: u32 = 1024;
    let Some((w, h)) = data_url_dimensions(url) else {
        return UNKNOWN;
    };
    let patches = u64::from(w.div_ceil(28)) * u64::from(h.div_ceil(28));
    u32::try_from(patches.saturating_add(2)).unwrap_or(u32::MAX)
}

/// Width and height from the first bytes of a base64 PNG or WebP data URL.
fn data_url_dimensions(url: &str) -> Option<(u32, u32)> {
    use base64::Engine as _;
    let data = url.split_once(";base64,")?.1;
    // 40 base64 characters are 30 bytes: every header read here fits.
    let head = data.get(..40)?;
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(head)
        .ok()?;
    let be32 = |at: usize| -> Option<u32> {
        Some(u32::from_be_bytes(bytes.get(at..at + 4)?.try_into().ok()?))
    };
    if bytes.starts_with(b"\x89PNG\r\n\x1a\n") {
        return Some((be32(16)?, be32(20)?));
    }
    if bytes.get(..4) != Some(b"RIFF") || bytes.get(8..12) != Some(b"WEBP") {
        return None;
    }
    let le24 = |at: usize| -> Option<u32> {
        let b = bytes.get(at..at + 3)?;
        Some(u32::from(b[0]) | u32::from(b[1]) << 8 | u32::from(b[2]) << 16)
    };
    match bytes.get(12..16)? {
        b"VP8X" => Some((le24(24)? + 1, le24(27)? + 1)),
        b"VP8L" => {
            let b = bytes.get(21..25)?;
            let bits = u32::from_le_bytes(b.try_into().ok()?);
            Some(((bits & 0x3fff) + 1, ((bits >> 14) & 0x3fff) + 1))
        }
        b"VP8 " => {
            let w = u16::from_le_bytes(bytes.get(26..28)?.try_into().ok()?) & 0x3fff;
            let h = u16::from_le_bytes(bytes.get(28..30)?.try_into().ok()?) & 0x3fff;
            Some((u32::from(w), u32::from(h)))
        }
        _ => None,
    }
}

/// Tokens of the request's tool declarations (estimated: JSON bytes / 4).
pub fn estimate_tools(chat: &ChatRequest) -> u32 {
    if chat.tools.is_empty() {
        return 0;
    }
    let json = serde_json::to_string(&chat.tools).map_or(0, |s| s.len());
    u32::try_from(json.div_ceil(4)).unwrap_or(u32::MAX)
}

/// Applies `config` to `chat`: `counts[i]` is message `i`'s tokens, `tools` the declarations'.
/// The request is changed in place only when the decision says so.
pub fn apply(
    chat: &mut ChatRequest,
    config: &ContextConfig,
    counts: &[u32],
    tools: u32,
    counted_by: &str,
) -> Result<ContextDecision, ContextError> {
    let total = |counts: &[u32]| counts.iter().fold(tools, |a, c| a.saturating_add(*c));
    let mut decision = ContextDecision {
        policy: config.policy,
        counted_by: counted_by.to_owned(),
        tokens_before: total(counts),
        tokens_after: total(counts),
        max_input_tokens: config.max_input_tokens,
        target_input_tokens: config.target_input_tokens,
        ..ContextDecision::default()
    };
    if config.policy == ContextPolicy::Identity {
        return Ok(decision);
    }
    let blocks = blocks(&chat.messages)?;
    if decision.tokens_before <= config.max_input_tokens {
        return Ok(decision);
    }
    let mut counts = counts.to_vec();
    counts.resize(chat.messages.len(), 0);
    omit_images(chat, config, &blocks, &mut counts, &mut decision);
    let mut evict = vec![false; blocks.len()];
    let last = blocks.len().saturating_sub(1);
    for (b, block) in blocks.iter().enumerate() {
        if total(&counts) <= config.target_input_tokens {
            break;
        }
        let evictable = match block.kind {
            BlockKind::System | BlockKind::Prompt => false,
            _ if b == last => false,
            BlockKind::ToolBatch => true,
            // Two user messages side by side break some chat templates.
            BlockKind::Answer => {
                let before = b
                    .checked_sub(1)
                    .and_then(|p| kept_kind(&blocks, &evict, p, -1));
                let after = kept_kind(&blocks, &evict, b + 1, 1);
                !(before == Some(BlockKind::Prompt) && after == Some(BlockKind::Prompt))
            }
        };
        if !evictable {
            continue;
        }
        let tokens = counts[block.start..block.end].iter().sum();
        for count in &mut counts[block.start..block.end] {
            *count = 0;
        }
        evict[b] = true;
        decision.evicted.push(EvictedBlock {
            kind: block.kind,
            start: block.start,
            end: block.end,
            calls: block.calls.clone(),
            tokens,
        });
    }
    decision.tokens_after = total(&counts);
    if decision.tokens_after > config.max_input_tokens {
        return Err(ContextError::OverBudget {
            tokens: decision.tokens_after,
            max: config.max_input_tokens,
        });
    }
    let mut index = 0;
    chat.messages.retain(|_| {
        let keep = !blocks
            .iter()
            .zip(&evict)
            .any(|(b, e)| *e && (b.start..b.end).contains(&index));
        index += 1;
        keep
    });
    Ok(decision)
}

/// The kind of the nearest block from `at` in direction `step` that is not evicted.
fn kept_kind(blocks: &[Block], evict: &[bool], at: usize, step: isize) -> Option<BlockKind> {
    let mut i = at as isize;
    while i >= 0 && (i as usize) < blocks.len() {
        if !evict[i as usize] {
            return Some(blocks[i as usize].kind);
        }
        i += step;
    }
    None
}

/// Step 2: the oldest tool-result images replaced, in whole batches, down to the minimum.
fn omit_images(
    chat: &mut ChatRequest,
    config: &ContextConfig,
    blocks: &[Block],
    counts: &mut [u32],
    decision: &mut ContextDecision,
) {
    let mut eligible: Vec<(usize, usize)> = Vec::new();
    for block in blocks.iter().filter(|b| b.kind == BlockKind::ToolBatch) {
        let at = block.end - 1;
        if let ChatMessage::User {
            content: UserContent::Parts(parts),
            ..
        } = &chat.messages[at]
            && is_tool_media(&chat.messages[at])
        {
            for (p, part) in parts.iter().enumerate() {
                // An image smaller than its notice is not worth omitting.
                if let ContentPart::ImageUrl { image_url } = part
                    && estimate_image(&image_url.url) > notice_tokens()
                {
                    eligible.push((at, p));
                }
            }
        }
    }
    let min = config.min_recent_tool_images as usize;
    let batch = config.image_eviction_batch_size.max(1) as usize;
    let omit = eligible.len().saturating_sub(min) / batch * batch;
    for &(message, part) in &eligible[..omit] {
        let ChatMessage::User {
            content: UserContent::Parts(parts),
            ..
        } = &mut chat.messages[message]
        else {
            continue;
        };
        let ContentPart::ImageUrl { image_url } = &parts[part] else {
            continue;
        };
        let tokens = estimate_image(&image_url.url);
        parts[part] = ContentPart::Text {
            text: OMITTED_IMAGE.to_owned(),
        };
        counts[message] = counts[message]
            .saturating_sub(tokens)
            .saturating_add(notice_tokens());
        decision.images_omitted.push(OmittedImage {
            message,
            part,
            tokens,
        });
    }
}

/// The decision as the records keep it.
pub fn decision_value(decision: &ContextDecision) -> Value {
    serde_json::to_value(decision).unwrap_or(Value::Null)
}

#[cfg(test)]
#[path = "context_tests.rs"]
mod tests;
