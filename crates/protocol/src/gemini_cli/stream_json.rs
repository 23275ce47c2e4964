//! `--output-format stream-json`: one JSON object per stdout line.
//!
//! [`parse_line`] never fails: a line is either a known [`StreamEvent`], an object with an
//! unknown `type` ([`StreamLine::UnknownType`]), or [`StreamLine::Invalid`] with the reason and
//! the raw text. Unknown fields inside known events are kept in each struct's `extra` map.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::collections::BTreeMap;

/// One known stream-json event. The `type` tag and `timestamp` are common to all.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum StreamEvent {
    /// First line: the session and the configured model.
    Init(InitEvent),
    /// User prompt (once, after `init`) or one streamed assistant text chunk.
    Message(MessageEvent),
    /// The model asked for a tool call.
    ToolUse(ToolUseEvent),
    /// The outcome of a tool call, paired by `tool_id`.
    ToolResult(ToolResultEvent),
    /// A non-fatal warning or a surfaced runtime error.
    Error(ErrorEvent),
    /// Terminal event with aggregated usage.
    Result(ResultEvent),
}

impl StreamEvent {
    /// The wire `type` string of this event.
    pub fn type_name(&self) -> &'static str {
        match self {
            StreamEvent::Init(_) => "init",
            StreamEvent::Message(_) => "message",
            StreamEvent::ToolUse(_) => "tool_use",
            StreamEvent::ToolResult(_) => "tool_result",
            StreamEvent::Error(_) => "error",
            StreamEvent::Result(_) => "result",
        }
    }

    /// The event's ISO-8601 `timestamp`, as the CLI wrote it.
    pub fn timestamp(&self) -> &str {
        match self {
            StreamEvent::Init(e) => &e.timestamp,
            StreamEvent::Message(e) => &e.timestamp,
            StreamEvent::ToolUse(e) => &e.timestamp,
            StreamEvent::ToolResult(e) => &e.timestamp,
            StreamEvent::Error(e) => &e.timestamp,
            StreamEvent::Result(e) => &e.timestamp,
        }
    }
}

/// `{"type":"init","timestamp","session_id","model"}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InitEvent {
    pub timestamp: String,
    /// The CLI session id (a UUID, or the `--session-id` value verbatim).
    pub session_id: String,
    /// The configured model (`-m` value or `"auto"`), not the routed one.
    pub model: String,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// Author of a [`MessageEvent`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    User,
    Assistant,
}

/// `{"type":"message","timestamp","role","content","delta"?}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MessageEvent {
    pub timestamp: String,
    pub role: Role,
    /// The prompt (user), or one streamed text chunk (assistant, ANSI-stripped by the CLI).
    pub content: String,
    /// `true` on streamed assistant chunks; absent on the user message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delta: Option<bool>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `{"type":"tool_use","timestamp","tool_name","tool_id","parameters"}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolUseEvent {
    pub timestamp: String,
    pub tool_name: String,
    /// `"<tool_name>__<model call id or synthesized id>"`; pairs with [`ToolResultEvent::tool_id`].
    pub tool_id: String,
    /// The model's arguments, verbatim.
    pub parameters: Value,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `success` or `error`, as in `tool_result.status` and `result.status`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    Success,
    Error,
}

/// `{"type","message"}` error detail used by `tool_result` and `result`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ErrorDetail {
    /// For tools a ToolErrorType such as `invalid_tool_params`; for results e.g. `unknown`,
    /// `FatalTurnLimitedError`.
    #[serde(rename = "type")]
    pub kind: String,
    pub message: String,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `{"type":"tool_result","timestamp","tool_id","status","output"?,"error"?}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolResultEvent {
    pub timestamp: String,
    pub tool_id: String,
    pub status: Status,
    /// Present only when the tool's display result is a string (absent for `list_directory`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ErrorDetail>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// Severity of an [`ErrorEvent`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    Warning,
    Error,
}

/// `{"type":"error","timestamp","severity","message"}`: non-fatal; the stream continues or a
/// `result` follows.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ErrorEvent {
    pub timestamp: String,
    pub severity: Severity,
    pub message: String,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `{"type":"result","timestamp","status","error"?,"stats"}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResultEvent {
    pub timestamp: String,
    pub status: Status,
    /// Absent for invalid-stream failures (empty response, safety), which exit 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ErrorDetail>,
    pub stats: Stats,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// Usage summed over every API response of the process (main, auxiliary and subagent calls).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Stats {
    /// Σ `totalTokenCount`.
    pub total_tokens: u64,
    /// Σ `promptTokenCount` (includes cached tokens).
    pub input_tokens: u64,
    /// Σ `candidatesTokenCount`.
    pub output_tokens: u64,
    /// Σ `cachedContentTokenCount`.
    pub cached: u64,
    /// `max(0, input_tokens - cached)`.
    pub input: u64,
    /// Wall time since run start; 0 in error results.
    pub duration_ms: u64,
    /// All tool calls, including failed ones.
    pub tool_calls: u64,
    /// Per model: keyed by the response `modelVersion`, else the requested model.
    #[serde(default)]
    pub models: BTreeMap<String, ModelStats>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// Per-model slice of [`Stats`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelStats {
    pub total_tokens: u64,
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub cached: u64,
    pub input: u64,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// One stdout line, classified. Nothing is dropped: every variant keeps the raw data.
#[derive(Debug, Clone, PartialEq)]
pub enum StreamLine {
    /// A known event. `raw` is the line's JSON value as printed.
    Event { event: Box<StreamEvent>, raw: Value },
    /// A JSON object whose `type` is not one this version knows.
    UnknownType { event_type: String, raw: Value },
    /// Not JSON, not an object, no string `type`, or a known type with an unexpected shape.
    Invalid { reason: InvalidLine, raw: String },
}

/// Why a line was [`StreamLine::Invalid`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InvalidLine {
    #[error("line is not JSON: {0}")]
    NotJson(String),
    #[error("line is JSON but not an object")]
    NotAnObject,
    #[error("object has no string \"type\" field")]
    MissingType,
    #[error("\"{event_type}\" event has an unexpected shape: {error}")]
    BadShape { event_type: String, error: String },
}

/// The `type` strings this version knows.
pub const KNOWN_TYPES: [&str; 6] = [
    "init",
    "message",
    "tool_use",
    "tool_result",
    "error",
    "result",
];

/// Classifies one stdout line (without its trailing newline). Never panics, never fails.
pub fn parse_line(line: &str) -> StreamLine {
    let value: Value = match serde_json::from_str(line) {
        Ok(v) => v,
        Err(e) => {
            return StreamLine::Invalid {
                reason: InvalidLine::NotJson(e.to_string()),
                raw: line.to_owned(),
            };
        }
    };
    let Some(obj) = value.as_object() else {
        return StreamLine::Invalid {
            reason: InvalidLine::NotAnObject,
            raw: line.to_owned(),
        };
    };
    let Some(event_type) = obj.get("type").and_then(Value::as_str) else {
        return StreamLine::Invalid {
            reason: InvalidLine::MissingType,
            raw: line.to_owned(),
        };
    };
    if !KNOWN_TYPES.contains(&event_type) {
        return StreamLine::UnknownType {
            event_type: event_type.to_owned(),
            raw: value,
        };
    }
    match StreamEvent::deserialize(&value) {
        Ok(event) => StreamLine::Event {
            event: Box::new(event),
            raw: value,
        },
        Err(e) => StreamLine::Invalid {
            reason: InvalidLine::BadShape {
                event_type: event_type.to_owned(),
                error: e.to_string(),
            },
            raw: line.to_owned(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_tool_result_with_error_and_keeps_unknown_fields() {
        let line = r#"{"type":"tool_result","timestamp":"t","tool_id":"read_file__x","status":"error","output":"o","error":{"type":"invalid_tool_params","message":"m"},"future":1}"#;
        let StreamLine::Event { event, .. } = parse_line(line) else {
            panic!("not an event: {:?}", parse_line(line));
        };
        let StreamEvent::ToolResult(r) = *event else {
            panic!("not a tool_result: {event:?}");
        };
        assert_eq!(r.status, Status::Error);
        assert_eq!(r.error.as_ref().unwrap().kind, "invalid_tool_params");
        assert_eq!(r.extra.get("future"), Some(&Value::from(1)));
    }

    #[test]
    fn unknown_type_is_kept_with_its_raw_value() {
        let line = r#"{"type":"thought","timestamp":"t","text":"x"}"#;
        match parse_line(line) {
            StreamLine::UnknownType { event_type, raw } => {
                assert_eq!(event_type, "thought");
                assert_eq!(raw["text"], "x");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn known_type_with_wrong_shape_is_invalid_not_dropped() {
        let line = r#"{"type":"result","timestamp":"t","status":"success"}"#;
        match parse_line(line) {
            StreamLine::Invalid {
                reason: InvalidLine::BadShape { event_type, .. },
                raw,
            } => {
                assert_eq!(event_type, "result");
                assert_eq!(raw, line);
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn non_json_non_object_and_untyped_lines_are_invalid() {
        assert!(matches!(
            parse_line("{not json"),
            StreamLine::Invalid {
                reason: InvalidLine::NotJson(_),
                ..
            }
        ));
        assert!(matches!(
            parse_line("[1]"),
            StreamLine::Invalid {
                reason: InvalidLine::NotAnObject,
                ..
            }
        ));
        assert!(matches!(
            parse_line(r#"{"a":1}"#),
            StreamLine::Invalid {
                reason: InvalidLine::MissingType,
                ..
            }
        ));
    }

    #[test]
    fn event_round_trips_through_serde() {
        let line =
            r#"{"type":"message","timestamp":"t","role":"assistant","content":"hi","delta":true}"#;
        let StreamLine::Event { event, raw } = parse_line(line) else {
            panic!()
        };
        assert_eq!(serde_json::to_value(&*event).unwrap(), raw);
    }
}
