//! The context policy's counting, the gateway's side of `switchyard_translate::context`: each
//! message of the neutral request is counted once (cached by its content's hash, so a history
//! repeated in every request is counted once per message), by the provider's tokenizer
//! endpoint when `[context] tokenizer` names one, else by the estimate; images always by the
//! estimate (no tokenizer endpoint counts them). A tokenizer that fails counts nothing: those
//! messages are estimated, and the decision says so.

use std::sync::Mutex;
use std::time::Duration;

use hashlink::LruCache;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use switchyard_translate::context::{
    self, ContextConfig, ContextDecision, ContextError, Tokenizer, estimate_image,
    estimate_message, estimate_tools,
};
use switchyard_translate::openai::{ChatMessage, ChatRequest, ContentPart, UserContent};

use crate::upstream::UpstreamClient;

/// Counts kept (messages).
const CACHED_COUNTS: usize = 16_384;
/// How long one tokenizer call may take.
const TOKENIZER_TIMEOUT: Duration = Duration::from_secs(10);

/// Token counts of messages seen, by the hash of their JSON.
pub(crate) struct TokenCounts {
    cache: Mutex<LruCache<[u8; 32], u32>>,
}

impl Default for TokenCounts {
    fn default() -> Self {
        Self {
            cache: Mutex::new(LruCache::new(CACHED_COUNTS)),
        }
    }
}

fn key(message: &ChatMessage) -> [u8; 32] {
    let json = serde_json::to_vec(message).unwrap_or_default();
    Sha256::digest(json).into()
}

/// The text a tokenizer counts of `message` (its images are counted apart).
fn text_of(message: &ChatMessage) -> String {
    match message {
        ChatMessage::System { content, .. }
        | ChatMessage::Developer { content, .. }
        | ChatMessage::Tool { content, .. } => content.clone(),
        ChatMessage::User { content, .. } => match content {
            UserContent::Text(text) => text.clone(),
            UserContent::Parts(parts) => parts
                .iter()
                .filter_map(|p| match p {
                    ContentPart::Text { text } => Some(text.as_str()),
                    _ => None,
                })
                .collect::<Vec<_>>()
                .join("\n"),
        },
        ChatMessage::Assistant {
            content,
            tool_calls,
            ..
        } => {
            let mut text = content.clone().unwrap_or_default();
            for call in tool_calls {
                text.push('\n');
                text.push_str(&call.function.name);
                text.push_str(&call.function.arguments);
            }
            text
        }
    }
}

/// Image tokens of `message` (estimated).
fn image_tokens(message: &ChatMessage) -> u32 {
    match message {
        ChatMessage::User {
            content: UserContent::Parts(parts),
            ..
        } => parts
            .iter()
            .filter_map(|p| match p {
                ContentPart::ImageUrl { image_url } => Some(estimate_image(&image_url.url)),
                _ => None,
            })
            .fold(0u32, u32::saturating_add),
        _ => 0,
    }
}

/// The tokenizer's endpoint and request body for `text`, and how its answer is read.
fn tokenizer_call(
    tokenizer: Tokenizer,
    base: &str,
    model: &str,
    text: &str,
) -> Option<(String, Value)> {
    let base = base.trim_end_matches('/');
    match tokenizer {
        Tokenizer::Estimate => None,
        Tokenizer::LlamaCpp => Some((
            format!("{base}/tokenize"),
            json!({"content": text, "add_special": false}),
        )),
        Tokenizer::LlamaCppPython => Some((
            format!("{base}/extras/tokenize/count"),
            json!({"input": text}),
        )),
        Tokenizer::Vllm => Some((
            format!("{base}/tokenize"),
            json!({"model": model, "prompt": text, "add_special_tokens": false}),
        )),
    }
}

/// The count in a tokenizer's answer (`count`, or the length of `tokens`).
fn count_of(answer: &Value) -> Option<u32> {
    answer
        .get("count")
        .and_then(Value::as_u64)
        .or_else(|| {
            answer
                .get("tokens")
                .and_then(Value::as_array)
                .map(|t| t.len() as u64)
        })
        .and_then(|n| u32::try_from(n).ok())
}

/// The tokenizer's base URL: the configured one, else the upstream's without its `/v1`.
fn tokenizer_base(config: &ContextConfig, upstream_url: &str) -> String {
    config.tokenizer_url.clone().unwrap_or_else(|| {
        let url = upstream_url.trim_end_matches('/');
        url.strip_suffix("/v1").unwrap_or(url).to_owned()
    })
}

impl TokenCounts {
    /// The count of every message of `chat` (cached, else the tokenizer, else the estimate),
    /// and how they were counted.
    async fn counts(
        &self,
        config: &ContextConfig,
        upstream: &UpstreamClient,
        upstream_url: &str,
        chat: &ChatRequest,
    ) -> (Vec<u32>, String) {
        let keys: Vec<[u8; 32]> = chat.messages.iter().map(key).collect();
        let mut counts: Vec<Option<u32>> = {
            let mut cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
            keys.iter().map(|k| cache.get(k).copied()).collect()
        };
        let mut failed: Vec<String> = Vec::new();
        if config.tokenizer != Tokenizer::Estimate {
            let base = tokenizer_base(config, upstream_url);
            let asks = chat
                .messages
                .iter()
                .enumerate()
                .filter(|(i, _)| counts[*i].is_none())
                .filter_map(|(i, m)| {
                    tokenizer_call(config.tokenizer, &base, &chat.model, &text_of(m))
                        .map(|(url, body)| (i, url, body))
                });
            let answers = futures_util::future::join_all(asks.map(|(i, url, body)| async move {
                (i, upstream.post_json(&url, &body, TOKENIZER_TIMEOUT).await)
            }))
            .await;
            for (i, answer) in answers {
                match answer.as_ref().ok().and_then(count_of) {
                    Some(n) => {
                        counts[i] = Some(n.saturating_add(image_tokens(&chat.messages[i])));
                    }
                    None => failed.push(match answer {
                        Err(e) => e,
                        Ok(v) => format!("an answer without a count: {v:.100}"),
                    }),
                }
            }
        }
        let counted_by = match (config.tokenizer, failed.first()) {
            (Tokenizer::Estimate, _) => "estimate".to_owned(),
            (_, None) => "tokenizer".to_owned(),
            (_, Some(why)) => format!(
                "tokenizer, {} message(s) estimated (the tokenizer failed: {why})",
                failed.len()
            ),
        };
        let counts: Vec<u32> = counts
            .into_iter()
            .zip(&chat.messages)
            .map(|(c, m)| c.unwrap_or_else(|| estimate_message(m)))
            .collect();
        // Only what a tokenizer counted is kept: an estimate is cheap to redo, and a later
        // request should ask the tokenizer again.
        if config.tokenizer != Tokenizer::Estimate && failed.is_empty() {
            let mut cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
            for (k, c) in keys.into_iter().zip(&counts) {
                cache.insert(k, *c);
            }
        }
        (counts, counted_by)
    }

    /// Applies the policy to `chat` (see `switchyard_translate::context`).
    pub(crate) async fn apply(
        &self,
        config: &ContextConfig,
        upstream: &UpstreamClient,
        upstream_url: &str,
        chat: &mut ChatRequest,
    ) -> Result<ContextDecision, ContextError> {
        let (counts, counted_by) = self.counts(config, upstream, upstream_url, chat).await;
        let tools = estimate_tools(chat);
        context::apply(chat, config, &counts, tools, &counted_by)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokenizer_answers_are_read_by_count_or_tokens() {
        assert_eq!(count_of(&json!({"count": 7})), Some(7));
        assert_eq!(count_of(&json!({"tokens": [1, 2, 3]})), Some(3));
        assert_eq!(count_of(&json!({"detail": "Not Found"})), None);
        let config = ContextConfig::default();
        assert_eq!(
            tokenizer_base(&config, "http://127.0.0.1:8000/v1/"),
            "http://127.0.0.1:8000"
        );
        let (url, body) = tokenizer_call(Tokenizer::LlamaCppPython, "http://h", "m", "hi").unwrap();
        assert_eq!(url, "http://h/extras/tokenize/count");
        assert_eq!(body, json!({"input": "hi"}));
        let (url, body) = tokenizer_call(Tokenizer::Vllm, "http://h/", "m", "hi").unwrap();
        assert_eq!(url, "http://h/tokenize");
        assert_eq!(body["model"], "m");
    }
}
