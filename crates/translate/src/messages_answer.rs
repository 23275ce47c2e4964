//! The answer side of the Anthropic Messages ingress: the neutral turn rendered as Messages
//! server-sent events or one `message` object, and errors in Anthropic's shape.
//!
//! * A stream opens with `message_start` (usage: the gateway's prompt estimate, marked as such
//!   nowhere else, and 0 output tokens; the real counts follow in `message_delta`) and `ping`.
//! * Text parts go in a `text` block (`text_delta`), reasoning parts in a `thinking` block
//!   (`thinking_delta`, closed with a `signature_delta` of [`THINKING_SIGNATURE`], so the guest
//!   keeps the block and the request side knows it is the gateway's), each complete call in a
//!   `tool_use` block with its input as one `input_json_delta`. A block is closed
//!   (`content_block_stop`) before the next opens.
//! * The end: `message_delta` with `stop_reason` (`tool_use` when the turn has calls, else
//!   `end_turn`, `max_tokens` or `refusal`) and the usage (`input_tokens` without the cached
//!   ones, `cache_read_input_tokens`, `output_tokens`), then `message_stop`.

use serde_json::{Value, json};

use crate::messages_ingress::THINKING_SIGNATURE;
use crate::turn::{Finish, TurnChunk, TurnPart, TurnUsage};

/// The kind of the block a stream has open.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Open {
    Text,
    Thinking,
}

/// Renders one turn for a Messages guest.
#[derive(Debug, Clone)]
pub struct MessagesRenderer {
    id: String,
    input_estimate: u32,
    started: bool,
    open: Option<Open>,
    next_index: u32,
    has_calls: bool,
}

/// One server-sent event: its name and JSON data.
pub type MessagesEvent = (&'static str, String);

impl MessagesRenderer {
    /// A renderer for the message `id` (`msg_…`); `input_estimate` is what `message_start`
    /// reports as input tokens before the upstream's count is known.
    pub fn new(id: impl Into<String>, input_estimate: u32) -> Self {
        Self {
            id: id.into(),
            input_estimate,
            started: false,
            open: None,
            next_index: 0,
            has_calls: false,
        }
    }

    /// The events of one chunk of the turn.
    pub fn events(&mut self, chunk: &TurnChunk) -> Vec<MessagesEvent> {
        let mut out = Vec::new();
        if !self.started {
            self.started = true;
            let start = json!({"type": "message_start", "message": {
                "id": self.id,
                "type": "message",
                "role": "assistant",
                "model": chunk.model,
                "content": [],
                "stop_reason": null,
                "stop_sequence": null,
                "usage": {"input_tokens": self.input_estimate, "output_tokens": 0},
            }});
            out.push(("message_start", start.to_string()));
            out.push(("ping", json!({"type": "ping"}).to_string()));
        }
        for part in &chunk.parts {
            match part {
                TurnPart::Text { text } if !text.is_empty() => {
                    self.open_block(Open::Text, &mut out);
                    out.push(self.delta(json!({"type": "text_delta", "text": text})));
                }
                TurnPart::Reasoning { text } if !text.is_empty() => {
                    self.open_block(Open::Thinking, &mut out);
                    out.push(self.delta(json!({"type": "thinking_delta", "thinking": text})));
                }
                TurnPart::Text { .. } | TurnPart::Reasoning { .. } => {}
                TurnPart::Call(call) => {
                    self.close_block(&mut out);
                    self.has_calls = true;
                    let index = self.next_index;
                    self.next_index += 1;
                    let block =
                        json!({"type": "tool_use", "id": call.id, "name": call.name, "input": {}});
                    out.push(block_start(index, block));
                    let delta = json!({"type": "input_json_delta", "partial_json": call.arguments.to_string()});
                    out.push(block_delta(index, delta));
                    out.push(block_stop(index));
                }
            }
        }
        if let Some(finish) = chunk.finish {
            self.close_block(&mut out);
            let delta = json!({"type": "message_delta",
                "delta": {"stop_reason": stop_reason(finish, self.has_calls), "stop_sequence": null},
                "usage": usage_json(chunk.usage.as_ref(), None)});
            out.push(("message_delta", delta.to_string()));
            out.push(("message_stop", json!({"type": "message_stop"}).to_string()));
        }
        out
    }

    fn open_block(&mut self, kind: Open, out: &mut Vec<MessagesEvent>) {
        if self.open == Some(kind) {
            return;
        }
        self.close_block(out);
        let block = match kind {
            Open::Text => json!({"type": "text", "text": ""}),
            Open::Thinking => json!({"type": "thinking", "thinking": "", "signature": ""}),
        };
        out.push(block_start(self.next_index, block));
        self.open = Some(kind);
    }

    fn close_block(&mut self, out: &mut Vec<MessagesEvent>) {
        let Some(kind) = self.open.take() else {
            return;
        };
        let index = self.next_index;
        if kind == Open::Thinking {
            let delta = json!({"type": "signature_delta", "signature": THINKING_SIGNATURE});
            out.push(block_delta(index, delta));
        }
        out.push(block_stop(index));
        self.next_index += 1;
    }

    fn delta(&self, delta: Value) -> MessagesEvent {
        block_delta(self.next_index, delta)
    }

    /// The whole turn as one `message` JSON text.
    pub fn message(&self, chunk: &TurnChunk) -> String {
        message_value(&self.id, chunk, self.input_estimate).to_string()
    }
}

fn block_start(index: u32, block: Value) -> MessagesEvent {
    let event = json!({"type": "content_block_start", "index": index, "content_block": block});
    ("content_block_start", event.to_string())
}

fn block_delta(index: u32, delta: Value) -> MessagesEvent {
    let event = json!({"type": "content_block_delta", "index": index, "delta": delta});
    ("content_block_delta", event.to_string())
}

fn block_stop(index: u32) -> MessagesEvent {
    let event = json!({"type": "content_block_stop", "index": index});
    ("content_block_stop", event.to_string())
}

/// The whole turn `chunk` as a Messages `message` object (`input_estimate`: the input tokens
/// when the turn has no usage).
pub fn message_value(id: &str, chunk: &TurnChunk, input_estimate: u32) -> Value {
    let mut content = Vec::new();
    let mut has_calls = false;
    for part in &chunk.parts {
        match part {
            TurnPart::Text { text } => match content.last_mut() {
                Some(Value::Object(last)) if last.get("type") == Some(&json!("text")) => {
                    let joined = format!("{}{text}", last["text"].as_str().unwrap_or_default());
                    last.insert("text".into(), json!(joined));
                }
                _ => content.push(json!({"type": "text", "text": text})),
            },
            TurnPart::Reasoning { text } => match content.last_mut() {
                Some(Value::Object(last)) if last.get("type") == Some(&json!("thinking")) => {
                    let joined = format!("{}{text}", last["thinking"].as_str().unwrap_or_default());
                    last.insert("thinking".into(), json!(joined));
                }
                _ => content.push(
                    json!({"type": "thinking", "thinking": text, "signature": THINKING_SIGNATURE}),
                ),
            },
            TurnPart::Call(call) => {
                has_calls = true;
                content.push(json!({"type": "tool_use", "id": call.id, "name": call.name,
                    "input": call.arguments}));
            }
        }
    }
    json!({
        "id": id,
        "type": "message",
        "role": "assistant",
        "model": chunk.model,
        "content": content,
        "stop_reason": stop_reason(chunk.finish.unwrap_or(Finish::Stop), has_calls),
        "stop_sequence": null,
        "usage": usage_json(chunk.usage.as_ref(), Some(input_estimate)),
    })
}

fn stop_reason(finish: Finish, has_calls: bool) -> &'static str {
    match finish {
        _ if has_calls => "tool_use",
        Finish::MaxTokens => "max_tokens",
        Finish::Safety => "refusal",
        Finish::Stop | Finish::MalformedCall | Finish::Other => "end_turn",
    }
}

fn usage_json(usage: Option<&TurnUsage>, input_estimate: Option<u32>) -> Value {
    let Some(usage) = usage else {
        return json!({"input_tokens": input_estimate.unwrap_or(0), "output_tokens": 0});
    };
    let cached = usage.cached.unwrap_or(0);
    let mut value = json!({
        "input_tokens": usage.input.saturating_sub(cached),
        "output_tokens": usage.output,
    });
    if usage.cached.is_some() {
        value["cache_read_input_tokens"] = json!(cached);
    }
    value
}

/// Anthropic's error `type` for an HTTP status.
pub fn anthropic_error_type(status: u16) -> &'static str {
    match status {
        401 => "authentication_error",
        403 => "permission_error",
        404 => "not_found_error",
        413 => "request_too_large",
        429 => "rate_limit_error",
        529 => "overloaded_error",
        400..=499 => "invalid_request_error",
        _ => "api_error",
    }
}

/// An Anthropic error body: `{"type": "error", "error": {"type", "message"}}`.
pub fn anthropic_error(status: u16, message: &str) -> Value {
    json!({"type": "error", "error": {"type": anthropic_error_type(status), "message": message}})
}

/// The message of an upstream's error body: its OpenAI-shaped `error.message` when it sent
/// one, else the body's first 2,000 characters.
pub fn upstream_error_message(status: u16, body: &[u8]) -> String {
    if let Ok(value) = serde_json::from_slice::<Value>(body)
        && let Some(message) = value.pointer("/error/message").and_then(Value::as_str)
    {
        return format!("upstream answered HTTP {status}: {message}");
    }
    let text: String = String::from_utf8_lossy(body).chars().take(2000).collect();
    format!("upstream answered HTTP {status}: {text}")
}

#[cfg(test)]
#[path = "messages_answer_tests.rs"]
mod tests;
