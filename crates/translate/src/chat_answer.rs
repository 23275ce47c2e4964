//! The answer side of the Chat Completions ingress: the neutral turn the response translator
//! assembled ([`TurnChunk`]s, the same the other ingresses render, so assembly, validation,
//! retries and call identity are one implementation) rendered as `chat.completion.chunk`s or
//! one `chat.completion`, and errors in OpenAI's shape.
//!
//! * Text parts become `delta.content`, reasoning parts `delta.reasoning_content`, the complete
//!   calls of the final chunk one `delta.tool_calls` list (index, id, name, compact arguments).
//! * The finish reason: `tool_calls` when the turn has calls, else stop → `stop`, max tokens →
//!   `length`, safety → `content_filter`, anything else `stop`.
//! * Usage (`prompt_tokens`, `completion_tokens`, `total_tokens`, cached and reasoning details)
//!   goes in a last chunk with no choices when the guest asked for it
//!   (`stream_options.include_usage`), and always in a whole completion.

use serde_json::{Value, json};

use crate::turn::{Finish, TurnChunk, TurnPart, TurnUsage};

/// Renders one turn for a Chat Completions guest.
#[derive(Debug, Clone)]
pub struct ChatRenderer {
    id: String,
    created: u64,
    include_usage: bool,
    role_sent: bool,
}

impl ChatRenderer {
    /// A renderer for the turn `id` (`chatcmpl-…`), created at `created` (Unix seconds).
    pub fn new(id: impl Into<String>, created: u64, include_usage: bool) -> Self {
        Self {
            id: id.into(),
            created,
            include_usage,
            role_sent: false,
        }
    }

    /// The `chat.completion.chunk` JSON texts for one chunk of the turn (none for a chunk
    /// without content, finish reason or usage).
    pub fn chunks(&mut self, chunk: &TurnChunk) -> Vec<String> {
        let model = chunk.model.as_str();
        let parts = &chunk.parts;
        let finish = chunk.finish;
        let mut out = Vec::new();
        let mut delta = serde_json::Map::new();
        if !self.role_sent {
            delta.insert("role".into(), json!("assistant"));
        }
        let (text, reasoning) = texts(parts);
        if !text.is_empty() {
            delta.insert("content".into(), json!(text));
        }
        if !reasoning.is_empty() {
            delta.insert("reasoning_content".into(), json!(reasoning));
        }
        let calls = tool_calls(parts);
        let has_calls = !calls.is_empty();
        if has_calls {
            delta.insert("tool_calls".into(), Value::Array(calls));
        }
        let has_content = delta.len() > usize::from(!self.role_sent);
        if has_content || finish.is_some() {
            self.role_sent = true;
            let finish = finish.map(|f| finish_reason(f, has_calls));
            let choice = json!({"index": 0, "delta": delta, "finish_reason": finish});
            out.push(self.chunk_json(model, vec![choice], None));
        }
        if self.include_usage
            && let Some(usage) = &chunk.usage
        {
            out.push(self.chunk_json(model, Vec::new(), Some(usage_json(usage))));
        }
        out
    }

    /// One `chat.completion.chunk` of this turn.
    fn chunk_json(&self, model: &str, choices: Vec<Value>, usage: Option<Value>) -> String {
        let mut chunk = json!({
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": model,
            "choices": choices,
        });
        if let Some(usage) = usage {
            chunk["usage"] = usage;
        }
        chunk.to_string()
    }

    /// The whole turn as one `chat.completion` JSON text.
    pub fn completion(&self, chunk: &TurnChunk) -> String {
        completion_value(&self.id, self.created, chunk).to_string()
    }
}

/// The whole turn `chunk` as a `chat.completion` object.
pub fn completion_value(id: &str, created: u64, chunk: &TurnChunk) -> Value {
    let parts = &chunk.parts;
    let (text, reasoning) = texts(parts);
    let calls = tool_calls(parts);
    let finish = finish_reason(chunk.finish.unwrap_or(Finish::Stop), !calls.is_empty());
    let mut message = serde_json::Map::new();
    message.insert("role".into(), json!("assistant"));
    message.insert(
        "content".into(),
        if text.is_empty() && !calls.is_empty() {
            Value::Null
        } else {
            json!(text)
        },
    );
    if !reasoning.is_empty() {
        message.insert("reasoning_content".into(), json!(reasoning));
    }
    if !calls.is_empty() {
        message.insert("tool_calls".into(), Value::Array(calls));
    }
    let mut completion = json!({
        "id": id,
        "object": "chat.completion",
        "created": created,
        "model": chunk.model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
    });
    if let Some(usage) = &chunk.usage {
        completion["usage"] = usage_json(usage);
    }
    completion
}

fn texts(parts: &[TurnPart]) -> (String, String) {
    let mut text = String::new();
    let mut reasoning = String::new();
    for part in parts {
        match part {
            TurnPart::Text { text: t } => text.push_str(t),
            TurnPart::Reasoning { text: t } => reasoning.push_str(t),
            TurnPart::Call(_) => {}
        }
    }
    (text, reasoning)
}

fn tool_calls(parts: &[TurnPart]) -> Vec<Value> {
    parts
        .iter()
        .filter_map(|p| match p {
            TurnPart::Call(call) => Some(call),
            _ => None,
        })
        .enumerate()
        .map(|(index, call)| {
            json!({
                "index": index,
                "id": call.id,
                "type": "function",
                "function": {"name": call.name, "arguments": call.arguments.to_string()},
            })
        })
        .collect()
}

fn finish_reason(reason: Finish, has_calls: bool) -> &'static str {
    match reason {
        _ if has_calls => "tool_calls",
        Finish::MaxTokens => "length",
        Finish::Safety => "content_filter",
        Finish::Stop | Finish::MalformedCall | Finish::Other => "stop",
    }
}

fn usage_json(usage: &TurnUsage) -> Value {
    let mut value = json!({
        "prompt_tokens": usage.input,
        "completion_tokens": usage.output,
        "total_tokens": usage.total,
    });
    if let Some(cached) = usage.cached {
        value["prompt_tokens_details"] = json!({"cached_tokens": cached});
    }
    if let Some(reasoning) = usage.reasoning {
        value["completion_tokens_details"] = json!({"reasoning_tokens": reasoning});
    }
    value
}

/// OpenAI's error `type` for an HTTP status.
pub fn openai_error_type(status: u16) -> &'static str {
    match status {
        401 => "authentication_error",
        403 => "permission_error",
        429 => "rate_limit_error",
        // Failed Dependency: what the gateway answers when it gave up on the upstream.
        424 => "upstream_error",
        400..=499 => "invalid_request_error",
        _ => "server_error",
    }
}

/// An OpenAI error body: `{"error": {"message", "type", "param": null, "code"}}`.
pub fn openai_error(status: u16, message: &str, code: Option<&str>) -> Value {
    json!({"error": {
        "message": message,
        "type": openai_error_type(status),
        "param": null,
        "code": code,
    }})
}

/// The error body for an upstream HTTP error: the upstream's own OpenAI-shaped error when it
/// sent one (message, type, code kept), else its body text as the message.
pub fn upstream_error_to_openai(status: u16, body: &[u8]) -> Value {
    if let Ok(value) = serde_json::from_slice::<Value>(body)
        && let Some(error) = value.get("error").filter(|e| e.is_object())
    {
        let message = error
            .get("message")
            .and_then(Value::as_str)
            .unwrap_or("upstream error");
        let mut out = openai_error(status, message, None);
        for key in ["type", "code", "param"] {
            if let Some(v) = error.get(key).filter(|v| !v.is_null()) {
                out["error"][key] = v.clone();
            }
        }
        return out;
    }
    let text = String::from_utf8_lossy(body);
    let message: String = text.chars().take(2000).collect();
    openai_error(
        status,
        &format!("upstream answered HTTP {status}: {message}"),
        None,
    )
}

#[cfg(test)]
#[path = "chat_answer_tests.rs"]
mod tests;
