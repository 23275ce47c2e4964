//! The answer side of the OpenAI Responses ingress: the neutral turn rendered as Responses
//! server-sent events or one `response` object, and errors in OpenAI's shape.
//!
//! * A stream opens with `response.created` and `response.in_progress`.
//! * Text parts go in a `message` item (`output_text.delta`), reasoning parts in a `reasoning`
//!   item as its summary (`reasoning_summary_text.delta`; the id starts with
//!   [`REASONING_ID_PREFIX`], so the request side knows it is the gateway's), each complete call
//!   in a `function_call` item (its namespace kept) or, for a custom tool, a `custom_tool_call`
//!   with its input. The call's `call_id` is the gateway's delivered id.
//! * Every item ends with `response.output_item.done`: Codex builds its items from those and
//!   drops a message that never got one.
//! * The end is `response.completed` with every item and the usage. An answer cut by the
//!   output limit is `status: "incomplete"` with `incomplete_details` but still
//!   `response.completed`: Codex treats `response.incomplete` as a broken stream and retries
//!   it, which would show the guest the same text twice.

use serde_json::{Value, json};

use crate::responses_ingress::REASONING_ID_PREFIX;
use crate::turn::{CallKind, Finish, ToolCall, TurnChunk, TurnPart, TurnUsage};

/// One server-sent event: its name (the event's `type`) and JSON data.
pub type ResponsesEvent = (&'static str, String);

/// The item a stream has open.
#[derive(Debug, Clone)]
struct OpenItem {
    kind: Open,
    id: String,
    index: u32,
    text: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Open {
    Message,
    Reasoning,
}

/// Renders one turn for a Responses guest.
#[derive(Debug, Clone)]
pub struct ResponsesRenderer {
    id: String,
    created_at: u64,
    model: Option<String>,
    sequence: u64,
    open: Option<OpenItem>,
    /// The completed items, in order (for `response.completed`).
    items: Vec<Value>,
}

impl ResponsesRenderer {
    /// A renderer for the response `id` (`resp_…`) created at `created_at` (Unix seconds).
    pub fn new(id: impl Into<String>, created_at: u64) -> Self {
        Self {
            id: id.into(),
            created_at,
            model: None,
            sequence: 0,
            open: None,
            items: Vec::new(),
        }
    }

    fn event(&mut self, kind: &'static str, mut data: Value) -> ResponsesEvent {
        data["type"] = json!(kind);
        data["sequence_number"] = json!(self.sequence);
        self.sequence += 1;
        (kind, data.to_string())
    }

    fn item_id(&self, prefix: &str) -> String {
        format!(
            "{prefix}_{}_{}",
            self.id.trim_start_matches("resp_"),
            self.items.len()
        )
    }

    /// The events of one chunk of the turn.
    pub fn events(&mut self, chunk: &TurnChunk) -> Vec<ResponsesEvent> {
        let mut out = Vec::new();
        if self.model.is_none() {
            self.model = Some(chunk.model.clone());
            let response = self.response_value("in_progress", Vec::new(), None, None);
            out.push(self.event("response.created", json!({"response": response})));
            let response = self.response_value("in_progress", Vec::new(), None, None);
            out.push(self.event("response.in_progress", json!({"response": response})));
        }
        for part in &chunk.parts {
            match part {
                TurnPart::Text { text } if !text.is_empty() => {
                    self.open_item(Open::Message, &mut out);
                    self.text_delta(text, &mut out);
                }
                TurnPart::Reasoning { text } if !text.is_empty() => {
                    self.open_item(Open::Reasoning, &mut out);
                    self.text_delta(text, &mut out);
                }
                TurnPart::Text { .. } | TurnPart::Reasoning { .. } => {}
                TurnPart::Call(call) => {
                    self.close_item(&mut out);
                    self.call(call, &mut out);
                }
            }
        }
        if let Some(finish) = chunk.finish {
            self.close_item(&mut out);
            let (status, incomplete) = status(finish);
            let output = self.items.clone();
            let response = self.response_value(status, output, chunk.usage.as_ref(), incomplete);
            out.push(self.event("response.completed", json!({"response": response})));
        }
        out
    }

    fn open_item(&mut self, kind: Open, out: &mut Vec<ResponsesEvent>) {
        if self.open.as_ref().is_some_and(|o| o.kind == kind) {
            return;
        }
        self.close_item(out);
        let index = u32::try_from(self.items.len()).unwrap_or(u32::MAX);
        let (id, item) = match kind {
            Open::Message => {
                let id = self.item_id("msg");
                let item = json!({"id": id, "type": "message", "status": "in_progress",
                    "role": "assistant", "content": []});
                (id, item)
            }
            Open::Reasoning => {
                let id = self.item_id(REASONING_ID_PREFIX);
                (
                    id.clone(),
                    json!({"id": id, "type": "reasoning", "summary": []}),
                )
            }
        };
        out.push(self.event(
            "response.output_item.added",
            json!({"output_index": index, "item": item}),
        ));
        match kind {
            Open::Message => out.push(self.event(
                "response.content_part.added",
                json!({"item_id": id, "output_index": index, "content_index": 0,
                    "part": {"type": "output_text", "text": "", "annotations": []}}),
            )),
            Open::Reasoning => out.push(self.event(
                "response.reasoning_summary_part.added",
                json!({"item_id": id, "output_index": index, "summary_index": 0,
                    "part": {"type": "summary_text", "text": ""}}),
            )),
        }
        self.open = Some(OpenItem {
            kind,
            id,
            index,
            text: String::new(),
        });
    }

    fn text_delta(&mut self, text: &str, out: &mut Vec<ResponsesEvent>) {
        let Some(open) = self.open.as_mut() else {
            return;
        };
        open.text.push_str(text);
        let (id, index, kind) = (open.id.clone(), open.index, open.kind);
        let event = match kind {
            Open::Message => self.event(
                "response.output_text.delta",
                json!({"item_id": id, "output_index": index, "content_index": 0, "delta": text}),
            ),
            Open::Reasoning => self.event(
                "response.reasoning_summary_text.delta",
                json!({"item_id": id, "output_index": index, "summary_index": 0, "delta": text}),
            ),
        };
        out.push(event);
    }

    fn close_item(&mut self, out: &mut Vec<ResponsesEvent>) {
        let Some(OpenItem {
            kind,
            id,
            index,
            text,
        }) = self.open.take()
        else {
            return;
        };
        let item = match kind {
            Open::Message => {
                out.push(self.event(
                    "response.output_text.done",
                    json!({"item_id": id, "output_index": index, "content_index": 0, "text": text}),
                ));
                let part = json!({"type": "output_text", "text": text, "annotations": []});
                out.push(self.event(
                    "response.content_part.done",
                    json!({"item_id": id, "output_index": index, "content_index": 0,
                        "part": part}),
                ));
                message_item(&id, &text)
            }
            Open::Reasoning => {
                out.push(self.event(
                    "response.reasoning_summary_text.done",
                    json!({"item_id": id, "output_index": index, "summary_index": 0,
                        "text": text}),
                ));
                let part = json!({"type": "summary_text", "text": text});
                out.push(self.event(
                    "response.reasoning_summary_part.done",
                    json!({"item_id": id, "output_index": index, "summary_index": 0,
                        "part": part}),
                ));
                reasoning_item(&id, &text)
            }
        };
        out.push(self.event(
            "response.output_item.done",
            json!({"output_index": index, "item": item}),
        ));
        self.items.push(item);
    }

    fn call(&mut self, call: &ToolCall, out: &mut Vec<ResponsesEvent>) {
        let index = u32::try_from(self.items.len()).unwrap_or(u32::MAX);
        let prefix = match call.kind {
            CallKind::Function => "fc",
            CallKind::Custom => "ctc",
        };
        let id = self.item_id(prefix);
        let done = call_item(&id, call);
        let mut added = done.clone();
        added["status"] = json!("in_progress");
        match call.kind {
            CallKind::Function => added["arguments"] = json!(""),
            CallKind::Custom => added["input"] = json!(""),
        }
        out.push(self.event(
            "response.output_item.added",
            json!({"output_index": index, "item": added}),
        ));
        match call.kind {
            CallKind::Function => {
                let arguments = call.arguments.to_string();
                out.push(self.event(
                    "response.function_call_arguments.delta",
                    json!({"item_id": id, "output_index": index, "delta": arguments}),
                ));
                out.push(self.event(
                    "response.function_call_arguments.done",
                    json!({"item_id": id, "output_index": index, "arguments": arguments}),
                ));
            }
            CallKind::Custom => {
                let input = call.arguments.as_str().unwrap_or_default().to_owned();
                out.push(self.event(
                    "response.custom_tool_call_input.delta",
                    json!({"item_id": id, "output_index": index, "delta": input}),
                ));
                out.push(self.event(
                    "response.custom_tool_call_input.done",
                    json!({"item_id": id, "output_index": index, "input": input}),
                ));
            }
        }
        out.push(self.event(
            "response.output_item.done",
            json!({"output_index": index, "item": done}),
        ));
        self.items.push(done);
    }

    fn response_value(
        &self,
        status: &str,
        output: Vec<Value>,
        usage: Option<&TurnUsage>,
        incomplete: Option<&str>,
    ) -> Value {
        json!({
            "id": self.id,
            "object": "response",
            "created_at": self.created_at,
            "status": status,
            "model": self.model,
            "output": output,
            "usage": usage.map(usage_json),
            "incomplete_details": incomplete.map(|reason| json!({"reason": reason})),
            "error": null,
        })
    }

    /// The whole turn as one `response` JSON text.
    pub fn response(&self, chunk: &TurnChunk) -> String {
        response_value(&self.id, self.created_at, chunk).to_string()
    }
}

fn message_item(id: &str, text: &str) -> Value {
    json!({"id": id, "type": "message", "status": "completed", "role": "assistant",
        "content": [{"type": "output_text", "text": text, "annotations": []}]})
}

fn reasoning_item(id: &str, text: &str) -> Value {
    json!({"id": id, "type": "reasoning", "summary": [{"type": "summary_text", "text": text}]})
}

fn call_item(id: &str, call: &ToolCall) -> Value {
    match call.kind {
        CallKind::Function => {
            let mut item = json!({"id": id, "type": "function_call", "status": "completed",
                "call_id": call.id, "name": call.name, "arguments": call.arguments.to_string()});
            if let Some(namespace) = &call.namespace {
                item["namespace"] = json!(namespace);
            }
            item
        }
        CallKind::Custom => json!({"id": id, "type": "custom_tool_call", "status": "completed",
            "call_id": call.id, "name": call.name,
            "input": call.arguments.as_str().unwrap_or_default()}),
    }
}

/// The status of a finished response and why it is incomplete.
fn status(finish: Finish) -> (&'static str, Option<&'static str>) {
    match finish {
        Finish::MaxTokens => ("incomplete", Some("max_output_tokens")),
        Finish::Safety => ("incomplete", Some("content_filter")),
        Finish::Stop | Finish::MalformedCall | Finish::Other => ("completed", None),
    }
}

fn usage_json(usage: &TurnUsage) -> Value {
    json!({
        "input_tokens": usage.input,
        "input_tokens_details": {"cached_tokens": usage.cached.unwrap_or(0)},
        "output_tokens": usage.output,
        "output_tokens_details": {"reasoning_tokens": usage.reasoning.unwrap_or(0)},
        "total_tokens": usage.total,
    })
}

/// The whole turn `chunk` as a Responses `response` object: the same items, with the same
/// ids, as a stream of it ends with.
pub fn response_value(id: &str, created_at: u64, chunk: &TurnChunk) -> Value {
    let mut renderer = ResponsesRenderer::new(id, created_at);
    renderer.model = Some(chunk.model.clone());
    let output = output_items(id, chunk);
    let (status, incomplete) = status(chunk.finish.unwrap_or(Finish::Stop));
    renderer.response_value(status, output, chunk.usage.as_ref(), incomplete)
}

/// The items of a whole turn: adjacent text (and reasoning) parts in one item, each call its
/// own, every id as [`ResponsesRenderer`] gives it (the item's position).
fn output_items(id: &str, chunk: &TurnChunk) -> Vec<Value> {
    let base = id.trim_start_matches("resp_");
    let mut items: Vec<Value> = Vec::new();
    // The open text item: its kind, id and text so far.
    let mut open: Option<(Open, String, String)> = None;
    let close = |open: &mut Option<(Open, String, String)>, items: &mut Vec<Value>| {
        if let Some((kind, item_id, text)) = open.take() {
            items.push(match kind {
                Open::Message => message_item(&item_id, &text),
                Open::Reasoning => reasoning_item(&item_id, &text),
            });
        }
    };
    for part in &chunk.parts {
        let (kind, text) = match part {
            TurnPart::Text { text } if !text.is_empty() => (Open::Message, text),
            TurnPart::Reasoning { text } if !text.is_empty() => (Open::Reasoning, text),
            TurnPart::Text { .. } | TurnPart::Reasoning { .. } => continue,
            TurnPart::Call(call) => {
                close(&mut open, &mut items);
                let prefix = match call.kind {
                    CallKind::Function => "fc",
                    CallKind::Custom => "ctc",
                };
                items.push(call_item(&format!("{prefix}_{base}_{}", items.len()), call));
                continue;
            }
        };
        match &mut open {
            Some((open_kind, _, so_far)) if *open_kind == kind => so_far.push_str(text),
            _ => {
                close(&mut open, &mut items);
                let prefix = match kind {
                    Open::Message => "msg",
                    Open::Reasoning => REASONING_ID_PREFIX,
                };
                let item_id = format!("{prefix}_{base}_{}", items.len());
                open = Some((kind, item_id, text.clone()));
            }
        }
    }
    close(&mut open, &mut items);
    items
}

/// The `response.failed` event that ends a stream already under way (`code`: OpenAI's error
/// code, e.g. `server_error`).
pub fn failed_event(id: &str, code: &str, message: &str) -> String {
    json!({"type": "response.failed", "response": {
        "id": id, "object": "response", "status": "failed",
        "error": {"code": code, "message": message},
    }})
    .to_string()
}

#[cfg(test)]
#[path = "responses_answer_tests.rs"]
mod tests;
