//! Exports of a record store: `jsonl` (everything, one object per line) and `sft` (OpenAI chat
//! fine-tuning examples built from upstream requests and assembled upstream responses, each one
//! validated before it is written).

use std::borrow::Cow;
use std::io::Write;

use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Map, Value, json};
use thiserror::Error;
use uuid::Uuid;

use crate::error::StoreError;
use crate::model::{ExchangeRecord, ExchangeStatus};
use crate::redact::{REDACTED, Redactor};
use crate::store::{ExchangeFilter, RecordStore};

/// Why an export failed as a whole.
#[derive(Debug, Error)]
pub enum ExportError {
    /// Reading the store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// Writing the output failed.
    #[error("writing the export failed: {0}")]
    Write(#[from] std::io::Error),
    /// Serializing a record failed.
    #[error("serializing a record failed: {0}")]
    Serialize(#[from] serde_json::Error),
}

/// Counts of one export.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ExportStats {
    /// Lines written.
    pub written: u64,
    /// Candidates not written (SFT only; each is reported with a reason).
    pub rejected: u64,
    /// SFT examples not written on their own because a later exchange of the same run
    /// continues them ([`SftMode::Conversations`]).
    pub folded: u64,
}

/// What one SFT example covers.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum SftMode {
    /// One example per conversation: an exchange whose messages (its request and its answer)
    /// are a prefix of a later exchange of the same run, with the same tools, is not exported
    /// on its own, so that early turns are not weighted once per later turn.
    #[default]
    Conversations,
    /// One example per completed exchange.
    PerExchange,
}

/// Writes every run with its events, raw lines and exchanges, then exchanges without a run, as
/// JSON lines `{"record": "run"|"event"|"raw_line"|"exchange", "data": {...}}`.
pub fn export_jsonl(
    store: &dyn RecordStore,
    out: &mut dyn Write,
) -> Result<ExportStats, ExportError> {
    let mut stats = ExportStats::default();
    let mut line = |kind: &str, data: Value, out: &mut dyn Write| -> Result<(), ExportError> {
        serde_json::to_writer(&mut *out, &json!({"record": kind, "data": data}))?;
        out.write_all(b"\n")?;
        stats.written += 1;
        Ok(())
    };
    for run in store.runs()? {
        line("run", serde_json::to_value(&run)?, out)?;
        for event in store.events(run.id)? {
            line("event", serde_json::to_value(&event)?, out)?;
        }
        for raw in store.raw_lines(run.id)? {
            line("raw_line", serde_json::to_value(&raw)?, out)?;
        }
        for exchange in store.exchanges(ExchangeFilter::Run(run.id))? {
            line("exchange", serde_json::to_value(&exchange)?, out)?;
        }
    }
    for exchange in store.exchanges(ExchangeFilter::Unattributed)? {
        line("exchange", serde_json::to_value(&exchange)?, out)?;
    }
    out.flush()?;
    Ok(stats)
}

/// Why one exchange did not become an SFT example.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum SftInvalid {
    /// The exchange did not complete (`in_flight`, `error`, `incomplete`).
    #[error("exchange status is {0}, not ok")]
    NotCompleted(&'static str),
    /// No upstream attempt, or the last one has no `messages` array.
    #[error("the last upstream request has no messages array")]
    NoRequestMessages,
    /// No assembled upstream assistant message.
    #[error("no assembled upstream message")]
    NoUpstreamMessage,
    /// A message is not an object or has an unknown role.
    #[error("message {index} has an unsupported role {role:?}")]
    BadRole {
        /// Position in `messages`.
        index: usize,
        /// The role found.
        role: String,
    },
    /// The final (target) message is empty.
    #[error("the assistant message has neither content nor tool calls")]
    EmptyAssistant,
    /// A tool call lacks an id.
    #[error("a tool call in message {index} has no id")]
    ToolCallWithoutId {
        /// Position in `messages`.
        index: usize,
    },
    /// Two tool calls share an id.
    #[error("tool call id {0:?} is used twice")]
    DuplicateToolCallId(String),
    /// A tool call's arguments are not a JSON object encoded as a string.
    #[error("tool call {id:?} has malformed arguments")]
    MalformedArguments {
        /// The call id.
        id: String,
    },
    /// An earlier assistant tool call has no tool message answering it.
    #[error("tool call {0:?} has no result")]
    ToolCallWithoutResult(String),
    /// A tool message answers no pending tool call.
    #[error("tool result in message {index} answers unknown tool call {id:?}")]
    ToolResultWithoutCall {
        /// Position in `messages`.
        index: usize,
        /// The `tool_call_id` it carries.
        id: String,
    },
    /// The example contains the redaction marker (the training text would be damaged).
    #[error("the example contains the redaction marker")]
    ContainsRedactedMarker,
    /// The example contains something shaped like a credential.
    #[error("the example contains something shaped like a credential")]
    ContainsSecret,
}

/// An exchange that was not exported, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SftRejection {
    /// The exchange.
    pub exchange_id: Uuid,
    /// The reason.
    pub reason: SftInvalid,
}

/// Builds and validates the SFT example of one exchange:
/// `{"messages": <last attempt's request messages> + [<assembled upstream message>], "tools": ...}`.
/// The assembled message is [`ExchangeRecord::upstream_message`], or, when the producer did not
/// store one, [`assemble_chat_message`] of the last attempt's raw events.
pub fn sft_example(exchange: &ExchangeRecord) -> Result<Value, SftInvalid> {
    if exchange.status != ExchangeStatus::Ok {
        return Err(SftInvalid::NotCompleted(exchange.status.as_str()));
    }
    let attempt = exchange
        .attempts
        .last()
        .ok_or(SftInvalid::NoRequestMessages)?;
    let request = &attempt.request;
    let mut messages = request
        .get("messages")
        .and_then(Value::as_array)
        .filter(|messages| !messages.is_empty())
        .ok_or(SftInvalid::NoRequestMessages)?
        .clone();
    let assembled;
    let upstream = match &exchange.upstream_message {
        Some(message) => message,
        None => {
            assembled =
                assemble_chat_message(&attempt.raw_events).ok_or(SftInvalid::NoUpstreamMessage)?;
            &assembled
        }
    };
    messages.push(assistant_message(upstream));
    let mut example = Map::new();
    example.insert("messages".into(), Value::Array(messages));
    if let Some(tools) = request.get("tools").filter(|tools| tools.is_array()) {
        example.insert("tools".into(), tools.clone());
    }
    let example = Value::Object(example);
    validate_sft_example(&example)?;
    Ok(example)
}

/// Rebuilds the assistant message from an attempt's raw OpenAI Chat Completions events for a
/// training example: [`assemble_upstream_message`], but `None` if any event is not JSON (except
/// `[DONE]`) or the message has neither content nor tool calls: an unreadable stream never
/// becomes a training target.
pub fn assemble_chat_message(raw_events: &[String]) -> Option<Value> {
    let unreadable = raw_events.iter().any(|raw| {
        raw.trim() != "[DONE]" && serde_json::from_str::<serde::de::IgnoredAny>(raw).is_err()
    });
    if unreadable {
        return None;
    }
    let message = assemble_upstream_message(raw_events)?;
    let has_content = message.get("content").is_some_and(Value::is_string);
    let has_calls = message
        .get("tool_calls")
        .and_then(Value::as_array)
        .is_some_and(|c| !c.is_empty());
    (has_content || has_calls).then_some(message)
}

/// The upstream assistant message of one attempt, as an OpenAI chat message: `role`, `content`
/// (text or `null`), `reasoning_content` when the upstream sent reasoning, and `tool_calls`
/// (`id`, `type`, `function.name`, `function.arguments` as the upstream sent them). Built from a
/// non-streamed body (`choices[0].message`, kept whole) or from stream chunks (`choices[0].delta`
/// merged; tool-call fragments joined by `index`, or by id when there is none). Events that are
/// not JSON are skipped (the raw events stay in the attempt). `None` when the upstream produced
/// no message.
pub fn assemble_upstream_message(raw_events: &[String]) -> Option<Value> {
    let mut message = MessageBuilder::default();
    for raw in raw_events {
        if raw.trim() == "[DONE]" {
            continue;
        }
        // Typed and borrowing when every field has the expected type (the common case, no JSON
        // tree built); any other shape takes the general path, which reads it the same way the
        // typed path would have and skips what it cannot use.
        let step = match serde_json::from_str::<ChunkView<'_>>(raw) {
            Ok(chunk) => message.apply_typed(chunk),
            Err(_) => match serde_json::from_str::<Value>(raw) {
                Ok(event) => message.apply_value(&event),
                Err(_) => continue,
            },
        };
        if let Some(whole) = step {
            return Some(whole);
        }
    }
    message.finish()
}

/// The fields of a Chat Completions chunk (or non-streamed body) [`assemble_upstream_message`]
/// reads, borrowed from the event text.
#[derive(Deserialize)]
struct ChunkView<'a> {
    #[serde(borrow, default)]
    choices: Vec<ChoiceView<'a>>,
}

#[derive(Deserialize)]
struct ChoiceView<'a> {
    #[serde(borrow, default)]
    message: Option<&'a RawValue>,
    /// Raw: read as [`DeltaView`] only when it has that shape. `null` counts as absent.
    #[serde(borrow, default)]
    delta: Option<&'a RawValue>,
}

#[derive(Deserialize, Default)]
struct DeltaView<'a> {
    #[serde(borrow, default)]
    content: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    reasoning_content: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    reasoning: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    tool_calls: Option<Vec<FragmentView<'a>>>,
}

#[derive(Deserialize, Default)]
struct FragmentView<'a> {
    #[serde(default)]
    index: Option<u64>,
    #[serde(borrow, default)]
    id: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    function: Option<FunctionView<'a>>,
}

#[derive(Deserialize, Default)]
struct FunctionView<'a> {
    #[serde(borrow, default)]
    name: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    arguments: Option<Cow<'a, str>>,
}

/// The assistant message being assembled from stream deltas.
#[derive(Default)]
struct MessageBuilder {
    content: Option<String>,
    reasoning: Option<String>,
    calls: Vec<Map<String, Value>>,
    last_index: Option<usize>,
    seen_choice: bool,
}

impl MessageBuilder {
    /// Applies one typed event; `Some` is a whole non-streamed message, which ends assembly.
    fn apply_typed(&mut self, chunk: ChunkView<'_>) -> Option<Value> {
        let choice = chunk.choices.into_iter().next()?; // none: a usage-only chunk
        if let Some(message) = choice.message {
            return serde_json::from_str(message.get()).ok();
        }
        let delta = choice.delta?;
        self.seen_choice = true;
        // A delta that is not an object of the expected shape is read by the general path.
        let delta = match serde_json::from_str::<DeltaView<'_>>(delta.get()) {
            Ok(delta) => delta,
            Err(_) => {
                let value: Value = serde_json::from_str(delta.get()).ok()?;
                self.apply_delta_value(&value);
                return None;
            }
        };
        self.apply_delta(delta);
        None
    }

    /// Applies one event of any shape, reading only the fields of the expected types.
    fn apply_value(&mut self, event: &Value) -> Option<Value> {
        let choice = event.pointer("/choices/0")?;
        // `null` counts as absent, as in the typed path.
        let field = |name: &str| choice.get(name).filter(|v| !v.is_null());
        if let Some(message) = field("message") {
            return Some(message.clone());
        }
        let delta = field("delta")?;
        self.seen_choice = true;
        self.apply_delta_value(delta);
        None
    }

    fn apply_delta_value(&mut self, delta: &Value) {
        fn text<'v>(v: &'v Value, key: &str) -> Option<Cow<'v, str>> {
            v.get(key).and_then(Value::as_str).map(Cow::Borrowed)
        }
        let fragments = delta
            .get("tool_calls")
            .and_then(Value::as_array)
            .map(|fragments| {
                fragments
                    .iter()
                    .map(|fragment| FragmentView {
                        index: fragment.get("index").and_then(Value::as_u64),
                        id: text(fragment, "id"),
                        function: fragment.get("function").map(|f| FunctionView {
                            name: text(f, "name"),
                            arguments: text(f, "arguments"),
                        }),
                    })
                    .collect()
            });
        self.apply_delta(DeltaView {
            content: text(delta, "content"),
            reasoning_content: text(delta, "reasoning_content"),
            reasoning: text(delta, "reasoning"),
            tool_calls: fragments,
        });
    }

    fn apply_delta(&mut self, delta: DeltaView<'_>) {
        if let Some(text) = delta.content {
            self.content.get_or_insert_with(String::new).push_str(&text);
        }
        for text in [delta.reasoning_content, delta.reasoning]
            .into_iter()
            .flatten()
        {
            self.reasoning
                .get_or_insert_with(String::new)
                .push_str(&text);
        }
        for fragment in delta.tool_calls.into_iter().flatten() {
            // Without an `index`, the same rule as the gateway's stream translator: the call with
            // this id, a new call for a new id, else the call the previous fragment went to.
            let id = fragment.id.as_deref().filter(|id| !id.is_empty());
            let index = match (fragment.index, id) {
                (Some(i), _) => i as usize,
                (None, Some(id)) => self
                    .calls
                    .iter()
                    .position(|c| c.get("id").and_then(Value::as_str) == Some(id))
                    .unwrap_or(self.calls.len()),
                (None, None) => self.last_index.unwrap_or(0),
            };
            self.last_index = Some(index);
            while self.calls.len() <= index {
                self.calls.push(Map::from_iter([
                    ("id".to_owned(), json!("")),
                    ("type".to_owned(), json!("function")),
                    ("function".to_owned(), json!({"name": "", "arguments": ""})),
                ]));
            }
            let call = &mut self.calls[index];
            if let Some(id) = &fragment.id {
                call.insert("id".into(), json!(id));
            }
            let function = fragment.function.unwrap_or_default();
            for (field, piece) in [("name", function.name), ("arguments", function.arguments)] {
                if let Some(piece) = piece
                    && let Some(Value::String(text)) =
                        call.get_mut("function").and_then(|f| f.get_mut(field))
                {
                    text.push_str(&piece);
                }
            }
        }
    }

    fn finish(self) -> Option<Value> {
        if !self.seen_choice {
            return None;
        }
        let mut message = Map::new();
        message.insert("role".into(), json!("assistant"));
        message.insert(
            "content".into(),
            self.content.map_or(Value::Null, Value::String),
        );
        if let Some(reasoning) = self.reasoning {
            message.insert("reasoning_content".into(), Value::String(reasoning));
        }
        if !self.calls.is_empty() {
            message.insert(
                "tool_calls".into(),
                Value::Array(self.calls.into_iter().map(Value::Object).collect()),
            );
        }
        Some(Value::Object(message))
    }
}

/// Keeps the fine-tuning fields of an assembled assistant message; tool-call arguments given as
/// objects are encoded as strings.
fn assistant_message(upstream: &Value) -> Value {
    let mut message = Map::new();
    message.insert("role".into(), json!("assistant"));
    let content = upstream.get("content").cloned().unwrap_or(Value::Null);
    message.insert("content".into(), content);
    if let Some(calls) = upstream.get("tool_calls").and_then(Value::as_array)
        && !calls.is_empty()
    {
        let calls = calls
            .iter()
            .map(|call| {
                let mut call = call.clone();
                if let Some(arguments) = call.pointer_mut("/function/arguments")
                    && arguments.is_object()
                {
                    *arguments = Value::String(arguments.to_string());
                }
                if let Some(object) = call.as_object_mut() {
                    object.entry("type").or_insert_with(|| json!("function"));
                    object.remove("index");
                }
                call
            })
            .collect();
        message.insert("tool_calls".into(), Value::Array(calls));
    }
    Value::Object(message)
}

/// Checks one example: roles, a non-empty final assistant message, tool-call ids unique and
/// answered by tool messages (except the final message's calls, which are the training target),
/// arguments that are JSON objects, and no redaction marker or credential-shaped text.
pub fn validate_sft_example(example: &Value) -> Result<(), SftInvalid> {
    let messages = example
        .get("messages")
        .and_then(Value::as_array)
        .filter(|messages| !messages.is_empty())
        .ok_or(SftInvalid::NoRequestMessages)?;
    let last = messages.len() - 1;
    let mut seen_ids: Vec<String> = Vec::new();
    let mut pending: Vec<String> = Vec::new();
    for (index, message) in messages.iter().enumerate() {
        let role = message.get("role").and_then(Value::as_str).unwrap_or("");
        match role {
            "system" | "developer" | "user" => {
                if let Some(id) = pending.first() {
                    return Err(SftInvalid::ToolCallWithoutResult(id.clone()));
                }
            }
            "assistant" => {
                if let Some(id) = pending.first() {
                    return Err(SftInvalid::ToolCallWithoutResult(id.clone()));
                }
                let calls = message
                    .get("tool_calls")
                    .and_then(Value::as_array)
                    .map(Vec::as_slice)
                    .unwrap_or_default();
                let has_content = message.get("content").is_some_and(|content| match content {
                    Value::String(text) => !text.is_empty(),
                    Value::Array(parts) => !parts.is_empty(),
                    _ => false,
                });
                if index == last && !has_content && calls.is_empty() {
                    return Err(SftInvalid::EmptyAssistant);
                }
                for call in calls {
                    let id = call
                        .get("id")
                        .and_then(Value::as_str)
                        .filter(|id| !id.is_empty())
                        .ok_or(SftInvalid::ToolCallWithoutId { index })?;
                    if seen_ids.iter().any(|seen| seen == id) {
                        return Err(SftInvalid::DuplicateToolCallId(id.to_owned()));
                    }
                    let arguments_ok = call
                        .pointer("/function/arguments")
                        .and_then(Value::as_str)
                        .and_then(|text| serde_json::from_str::<Value>(text).ok())
                        .is_some_and(|arguments| arguments.is_object());
                    let named = call
                        .pointer("/function/name")
                        .and_then(Value::as_str)
                        .is_some_and(|name| !name.is_empty());
                    if !arguments_ok || !named {
                        return Err(SftInvalid::MalformedArguments { id: id.to_owned() });
                    }
                    seen_ids.push(id.to_owned());
                    if index != last {
                        pending.push(id.to_owned());
                    }
                }
            }
            "tool" => {
                let id = message
                    .get("tool_call_id")
                    .and_then(Value::as_str)
                    .unwrap_or("");
                match pending.iter().position(|pending| pending == id) {
                    Some(at) => {
                        pending.remove(at);
                    }
                    None => {
                        return Err(SftInvalid::ToolResultWithoutCall {
                            index,
                            id: id.to_owned(),
                        });
                    }
                }
            }
            other => {
                return Err(SftInvalid::BadRole {
                    index,
                    role: other.to_owned(),
                });
            }
        }
        if index == last && role != "assistant" {
            return Err(SftInvalid::BadRole {
                index,
                role: role.to_owned(),
            });
        }
    }
    if let Some(id) = pending.first() {
        return Err(SftInvalid::ToolCallWithoutResult(id.clone()));
    }
    let text = example.to_string();
    if text.contains(REDACTED) {
        return Err(SftInvalid::ContainsRedactedMarker);
    }
    if Redactor::default().finds_secret(&text) {
        return Err(SftInvalid::ContainsSecret);
    }
    Ok(())
}

/// Writes validated SFT examples, in store order: one per conversation or one per completed
/// exchange (`mode`). Every exchange that had an upstream request but could not be exported is
/// passed to `rejected` with its reason. `countTokens` exchanges (no upstream message, no
/// attempts) are skipped silently.
pub fn export_sft(
    store: &dyn RecordStore,
    out: &mut dyn Write,
    mode: SftMode,
    rejected: &mut dyn FnMut(&SftRejection),
) -> Result<ExportStats, ExportError> {
    let mut stats = ExportStats::default();
    let mut examples: Vec<(Option<Uuid>, Value)> = Vec::new();
    for exchange in store.exchanges(ExchangeFilter::All)? {
        if exchange.attempts.is_empty() && exchange.upstream_message.is_none() {
            continue;
        }
        match sft_example(&exchange) {
            Ok(example) => examples.push((exchange.run_id, example)),
            Err(reason) => {
                stats.rejected += 1;
                rejected(&SftRejection {
                    exchange_id: exchange.id,
                    reason,
                });
            }
        }
    }
    let continued = match mode {
        SftMode::PerExchange => vec![false; examples.len()],
        SftMode::Conversations => crate::conversations::continued_later(&examples),
    };
    for ((_, example), continued) in examples.iter().zip(continued) {
        if continued {
            stats.folded += 1;
            continue;
        }
        serde_json::to_writer(&mut *out, example)?;
        out.write_all(b"\n")?;
        stats.written += 1;
    }
    out.flush()?;
    Ok(stats)
}

#[cfg(test)]
mod assemble_tests {
    use super::*;

    #[test]
    fn stream_chunks_assemble_into_one_chat_message() {
        let events = [
            r#"{"choices":[{"index":0,"delta":{"role":"assistant","reasoning_content":"think"}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"content":"Hel"}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"content":"lo"}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c1","type":"function","function":{"name":"glob","arguments":"{\"pat"}}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"tern\":\"*\"}"}}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"c2","function":{"name":"ls","arguments":"{}"}}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}"#,
            r#"{"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":2}}"#,
            "[DONE]",
        ]
        .map(String::from);
        assert_eq!(
            assemble_upstream_message(&events).unwrap(),
            json!({
                "role": "assistant",
                "content": "Hello",
                "reasoning_content": "think",
                "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "glob", "arguments": "{\"pattern\":\"*\"}"}},
                    {"id": "c2", "type": "function", "function": {"name": "ls", "arguments": "{}"}}
                ]
            })
        );
    }

    #[test]
    fn a_unary_body_keeps_its_message_and_nothing_is_no_message() {
        let body = r#"{"choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}]}"#;
        assert_eq!(
            assemble_upstream_message(&[body.to_string()]).unwrap(),
            json!({"role": "assistant", "content": "hi"})
        );
        assert_eq!(assemble_upstream_message(&["[DONE]".to_string()]), None);
    }

    #[test]
    fn fragments_without_an_index_join_calls_by_id_like_the_gateway() {
        let events = [
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"id":"a","function":{"name":"ls","arguments":"{"}}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"function":{"arguments":"}"}}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"id":"b","function":{"name":"glob","arguments":"{}"}}]}}]}"#,
        ]
        .map(String::from);
        let message = assemble_upstream_message(&events).unwrap();
        assert_eq!(
            message["tool_calls"],
            json!([
                {"id": "a", "type": "function", "function": {"name": "ls", "arguments": "{}"}},
                {"id": "b", "type": "function", "function": {"name": "glob", "arguments": "{}"}}
            ])
        );
    }

    #[test]
    fn fields_of_unexpected_types_are_skipped_and_the_rest_of_the_event_is_read() {
        // `content` as an array does not fit the typed reading: the general path still takes
        // the event's reasoning and tool call.
        let odd = r#"{"choices":[{"delta":{"content":["x"],"reasoning":"r","tool_calls":[{"index":0,"id":"c1","function":{"name":"ls","arguments":"{}"}}]}}]}"#;
        let typed = r#"{"choices":[{"delta":{"content":"done","reasoning_content":"s"}}]}"#;
        let message = assemble_upstream_message(&[odd, typed].map(String::from)).unwrap();
        assert_eq!(
            message,
            json!({
                "role": "assistant",
                "content": "done",
                "reasoning_content": "rs",
                "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "ls", "arguments": "{}"}}]
            })
        );
        // An index that is not a number counts as absent (the previous fragment's call), in
        // both readings.
        let string_index = r#"{"choices":[{"delta":{"tool_calls":[{"index":"0","function":{"arguments":"x"}}]}}]}"#;
        let message = assemble_upstream_message(&[odd, string_index].map(String::from)).unwrap();
        assert_eq!(message["tool_calls"][0]["function"]["arguments"], "{}x");
    }

    #[test]
    fn null_message_and_delta_count_as_absent() {
        let null_delta = r#"{"choices":[{"delta":null}]}"#.to_string();
        assert_eq!(
            assemble_upstream_message(std::slice::from_ref(&null_delta)),
            None
        );
        let null_message = r#"{"choices":[{"message":null,"delta":{"content":"a"}}]}"#;
        assert_eq!(
            assemble_upstream_message(&[null_message.to_string(), null_delta]).unwrap(),
            json!({"role": "assistant", "content": "a"})
        );
    }
}
