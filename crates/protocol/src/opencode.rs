//! OpenCode 1.18.33's server-sent events (`GET /event` of `opencode serve`), as the types of
//! the fields Switchyard reads.
//!
//! [`parse_event`] never fails: an event is a known [`ServerEvent`] whose fields Switchyard
//! reads are all present with their types (others are kept in `extra`), an event of a type no
//! type here stands for ([`EventLine::UnknownType`]), or [`EventLine::Invalid`] with the reason
//! and the raw value. Nothing is defaulted: a field Switchyard needs that is missing makes the
//! event invalid, never an empty value.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// One event the mapping reads.
#[derive(Debug, Clone, PartialEq)]
pub enum ServerEvent {
    /// `message.updated`: a message's info (its role, its finish, its error).
    MessageUpdated(MessageUpdated),
    /// `message.part.updated`: a whole part.
    PartUpdated(PartUpdated),
    /// `message.part.delta`: an increment of a part's field.
    PartDelta(PartDelta),
    /// `session.status`.
    SessionStatus(SessionStatus),
    /// `session.idle`.
    SessionIdle(SessionRef),
    /// `session.error`.
    SessionError(SessionError),
    /// `permission.asked`.
    PermissionAsked(PermissionAsked),
    /// `question.asked`.
    QuestionAsked(QuestionAsked),
}

/// A server-sent event's data, classified.
#[derive(Debug, Clone, PartialEq)]
pub enum EventLine {
    /// A known event; `type_name` as received.
    Event {
        type_name: String,
        event: Box<ServerEvent>,
    },
    /// An object with a `type` no type here stands for (the mapping decides what it means).
    UnknownType { type_name: String, raw: Value },
    /// Not an event object, or a known type without the fields Switchyard reads.
    Invalid { reason: String, raw: Value },
}

/// `message.updated`'s `properties`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MessageUpdated {
    #[serde(rename = "sessionID")]
    pub session_id: String,
    pub info: MessageInfo,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// A message's `info`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MessageInfo {
    pub id: String,
    pub role: String,
    /// An assistant message's finish (`stop`, `tool-calls`, `length`, …), once it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finish: Option<String>,
    /// An assistant message's error (`{name, data}`), when it failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ErrorInfo>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// OpenCode's error object: `{name, data: {message, statusCode, …}}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ErrorInfo {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<ErrorData>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// An error's `data`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ErrorData {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    #[serde(
        default,
        rename = "statusCode",
        skip_serializing_if = "Option::is_none"
    )]
    pub status_code: Option<u64>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `message.part.updated`'s `properties`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PartUpdated {
    #[serde(rename = "sessionID")]
    pub session_id: String,
    pub part: Part,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// A message part: what every part has, and the kind.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Part {
    pub id: String,
    #[serde(rename = "messageID")]
    pub message_id: String,
    #[serde(flatten)]
    pub kind: PartKind,
}

/// A part's `type` and the fields of that type Switchyard reads.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "kebab-case")]
pub enum PartKind {
    Text {
        text: String,
    },
    Reasoning {
        text: String,
    },
    Tool {
        #[serde(rename = "callID")]
        call_id: String,
        tool: String,
        state: ToolState,
    },
    StepStart {},
    StepFinish {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        tokens: Option<Tokens>,
    },
    /// A part type with no canonical meaning here (kept by the mapping as unrecognized).
    #[serde(other)]
    Other,
}

/// A tool part's `state`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum ToolState {
    Pending {},
    Running {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        input: Option<Value>,
    },
    Completed {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        input: Option<Value>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        output: Option<String>,
    },
    Error {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        input: Option<Value>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        metadata: Option<ToolMetadata>,
    },
}

impl ToolState {
    /// The call's input, once the state has it.
    pub fn input(&self) -> Option<&Value> {
        match self {
            ToolState::Pending {} => None,
            ToolState::Running { input }
            | ToolState::Completed { input, .. }
            | ToolState::Error { input, .. } => input.as_ref(),
        }
    }
}

/// A failed tool state's `metadata`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolMetadata {
    /// The call was interrupted (an abort).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interrupted: Option<bool>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// A step's `tokens`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tokens {
    pub input: u64,
    pub output: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache: Option<CacheTokens>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `tokens.cache`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CacheTokens {
    pub read: u64,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `message.part.delta`'s `properties`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PartDelta {
    #[serde(rename = "sessionID")]
    pub session_id: String,
    #[serde(rename = "partID")]
    pub part_id: String,
    /// The part's field the delta extends (`text`).
    pub field: String,
    pub delta: String,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `session.status`'s `properties`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionStatus {
    #[serde(rename = "sessionID")]
    pub session_id: String,
    pub status: Status,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// A session's status.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Status {
    Busy {},
    Idle {},
    Retry {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        attempt: Option<u64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        message: Option<String>,
    },
    #[serde(other)]
    Other,
}

/// Properties that only name a session.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionRef {
    #[serde(rename = "sessionID")]
    pub session_id: String,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `session.error`'s `properties` (a session error may name no session).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionError {
    #[serde(default, rename = "sessionID", skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    pub error: ErrorInfo,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `permission.asked`'s `properties`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PermissionAsked {
    #[serde(rename = "sessionID")]
    pub session_id: String,
    /// The request's id (`per_…`), which the reply names.
    pub id: String,
    /// OpenCode's permission (`bash`, `edit`, `external_directory`, a tool's name, …).
    pub permission: String,
    /// The model call it belongs to, when it belongs to one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<PermissionTool>,
    #[serde(default, skip_serializing_if = "Value::is_null")]
    pub metadata: Value,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `permission.asked`'s `tool`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PermissionTool {
    #[serde(rename = "callID")]
    pub call_id: String,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `question.asked`'s `properties`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct QuestionAsked {
    #[serde(rename = "sessionID")]
    pub session_id: String,
    pub id: String,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl ServerEvent {
    /// The session the event belongs to, when it names one.
    pub fn session_id(&self) -> Option<&str> {
        match self {
            ServerEvent::MessageUpdated(e) => Some(&e.session_id),
            ServerEvent::PartUpdated(e) => Some(&e.session_id),
            ServerEvent::PartDelta(e) => Some(&e.session_id),
            ServerEvent::SessionStatus(e) => Some(&e.session_id),
            ServerEvent::SessionIdle(e) => Some(&e.session_id),
            ServerEvent::SessionError(e) => e.session_id.as_deref(),
            ServerEvent::PermissionAsked(e) => Some(&e.session_id),
            ServerEvent::QuestionAsked(e) => Some(&e.session_id),
        }
    }
}

fn typed<T: serde::de::DeserializeOwned>(
    properties: &Value,
    wrap: fn(T) -> ServerEvent,
) -> Result<ServerEvent, String> {
    T::deserialize(properties)
        .map(wrap)
        .map_err(|e| e.to_string())
}

/// Classifies one event's data (see the module docs).
pub fn parse_event(raw: Value) -> EventLine {
    let Some(type_name) = raw.get("type").and_then(Value::as_str).map(str::to_owned) else {
        return EventLine::Invalid {
            reason: "an event without a type".to_owned(),
            raw,
        };
    };
    let properties = raw.get("properties").unwrap_or(&Value::Null);
    let event = match type_name.as_str() {
        "message.updated" => typed(properties, ServerEvent::MessageUpdated),
        "message.part.updated" => typed(properties, ServerEvent::PartUpdated),
        "message.part.delta" => typed(properties, ServerEvent::PartDelta),
        "session.status" => typed(properties, ServerEvent::SessionStatus),
        "session.idle" => typed(properties, ServerEvent::SessionIdle),
        "session.error" => typed(properties, ServerEvent::SessionError),
        "permission.asked" => typed(properties, ServerEvent::PermissionAsked),
        "question.asked" => typed(properties, ServerEvent::QuestionAsked),
        _ => return EventLine::UnknownType { type_name, raw },
    };
    match event {
        Ok(event) => EventLine::Event {
            type_name,
            event: Box::new(event),
        },
        Err(reason) => EventLine::Invalid {
            reason: format!("{type_name} without the fields Switchyard reads: {reason}"),
            raw,
        },
    }
}

#[cfg(test)]
#[path = "opencode_tests.rs"]
mod tests;
