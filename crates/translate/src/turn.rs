//! The model turn, neutral of every guest API: what the response translator assembles from the
//! upstream's answer, the gateway stamps and records, and each ingress renders in its guest's
//! shape (`google_answer`, `chat_answer`).
//!
//! A turn streams as [`TurnChunk`]s: text and reasoning increments as they arrive, then one last
//! chunk with the complete tool calls, the finish reason and the usage.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One chunk of a turn.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TurnChunk {
    /// The model the answer is reported as (the routed upstream model).
    pub model: String,
    /// The gateway's id of the answer.
    pub response_id: String,
    /// In order.
    pub parts: Vec<TurnPart>,
    /// Set on the last chunk only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finish: Option<Finish>,
    /// Set on the last chunk only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<TurnUsage>,
}

/// A part of a turn.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum TurnPart {
    /// Visible text.
    Text { text: String },
    /// The model's reasoning, for display (never part of the guest's history on its own).
    Reasoning { text: String },
    /// A complete tool call.
    Call(ToolCall),
}

/// What kind of tool a call is for.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CallKind {
    /// A function with JSON object arguments.
    #[default]
    Function,
    /// A custom (freeform) tool whose input is text (OpenAI Responses `custom`).
    Custom,
}

/// One tool call of a turn, as delivered.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    /// The id the guest receives: the gateway's own, unique in its run.
    pub id: String,
    /// The id the upstream gave the call, if it gave one (restored in later requests'
    /// history, so the upstream sees its own ids).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub upstream_id: Option<String>,
    #[serde(default)]
    pub kind: CallKind,
    /// The tool's namespace, for guests that group tools (OpenAI Responses `namespace`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    pub name: String,
    /// A JSON object for a function; the input text (a JSON string) for a custom tool.
    pub arguments: Value,
    /// Opaque data the guest carries back with the call (the turn's reasoning, when it is
    /// carried: [`crate::reasoning`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature: Option<String>,
}

impl ToolCall {
    /// The name the call has upstream and in the run's tables: a namespaced call's
    /// [`flat_name`], else its name.
    pub fn qualified_name(&self) -> String {
        flat_name(self.namespace.as_deref(), &self.name)
    }
}

/// The one name a namespaced tool has upstream: `{namespace}__{name}` (Codex's own spelling of
/// an MCP tool, `mcp__server__tool`).
pub fn flat_name(namespace: Option<&str>, name: &str) -> String {
    match namespace {
        Some(namespace) => format!("{namespace}__{name}"),
        None => name.to_owned(),
    }
}

/// What an upstream function call stands for in a guest that declared other kinds of tools
/// (OpenAI Responses): a custom tool, or a function of a namespace. Functions not listed are
/// plain functions.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CallShapes(BTreeMap<String, CallShape>);

/// One entry of [`CallShapes`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CallShape {
    pub kind: CallKind,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// The tool's own name in the guest.
    pub name: String,
}

/// The one argument a custom tool's upstream function takes: the tool's input text.
pub const CUSTOM_INPUT_ARG: &str = "input";

impl CallShapes {
    /// Adds the shape of the upstream function `upstream_name`.
    pub fn insert(&mut self, upstream_name: String, shape: CallShape) {
        self.0.insert(upstream_name, shape);
    }

    /// The shape of the upstream function `upstream_name`, if it is not a plain function.
    pub fn get(&self, upstream_name: &str) -> Option<&CallShape> {
        self.0.get(upstream_name)
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// Why a turn ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Finish {
    /// A natural end (with or without calls).
    Stop,
    /// The output limit.
    MaxTokens,
    /// A content filter.
    Safety,
    /// A tool call could not be delivered (malformed, after the gateway's retries).
    MalformedCall,
    /// Anything else the upstream said.
    Other,
}

/// Tokens of one answer.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TurnUsage {
    pub input: u32,
    pub output: u32,
    pub total: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning: Option<u32>,
}

impl TurnChunk {
    /// An empty chunk of the answer `response_id` from `model`.
    pub fn new(model: impl Into<String>, response_id: impl Into<String>) -> Self {
        Self {
            model: model.into(),
            response_id: response_id.into(),
            parts: Vec::new(),
            finish: None,
            usage: None,
        }
    }

    /// The calls of this chunk, in order.
    pub fn calls(&self) -> impl Iterator<Item = &ToolCall> {
        self.parts.iter().filter_map(|p| match p {
            TurnPart::Call(call) => Some(call),
            _ => None,
        })
    }

    /// The calls of this chunk, to change in place.
    pub fn calls_mut(&mut self) -> impl Iterator<Item = &mut ToolCall> {
        self.parts.iter_mut().filter_map(|p| match p {
            TurnPart::Call(call) => Some(call),
            _ => None,
        })
    }

    /// Bytes of the answer this chunk carries: text, reasoning, and each call's name and
    /// arguments (what the gateway's answer bounds and the recorder's budget count).
    pub fn answer_bytes(&self) -> usize {
        self.parts
            .iter()
            .map(|part| match part {
                TurnPart::Text { text } | TurnPart::Reasoning { text } => text.len(),
                TurnPart::Call(call) => call.name.len() + call.arguments.to_string().len(),
            })
            .sum()
    }

    /// The visible text of this chunk.
    pub fn text(&self) -> String {
        self.parts
            .iter()
            .filter_map(|p| match p {
                TurnPart::Text { text } => Some(text.as_str()),
                _ => None,
            })
            .collect()
    }
}

impl TurnPart {
    pub fn text(text: impl Into<String>) -> Self {
        TurnPart::Text { text: text.into() }
    }

    pub fn reasoning(text: impl Into<String>) -> Self {
        TurnPart::Reasoning { text: text.into() }
    }
}

/// The answer the guest received, as one chunk: the parts in order (adjacent text parts of the
/// same kind joined), the last finish reason and usage, the last chunk's model and id. `None`
/// when nothing was delivered.
pub fn merge(mut chunks: Vec<TurnChunk>) -> Option<TurnChunk> {
    if chunks.len() <= 1 {
        return chunks.pop();
    }
    let mut parts: Vec<TurnPart> = Vec::new();
    for part in chunks.iter_mut().flat_map(|c| std::mem::take(&mut c.parts)) {
        match (parts.last_mut(), part) {
            (Some(TurnPart::Text { text }), TurnPart::Text { text: more })
            | (Some(TurnPart::Reasoning { text }), TurnPart::Reasoning { text: more }) => {
                text.push_str(&more);
            }
            (_, part) => parts.push(part),
        }
    }
    let finish = chunks.iter().rev().find_map(|c| c.finish);
    let usage = chunks.iter().rev().find_map(|c| c.usage);
    let mut merged = chunks.pop()?;
    merged.parts = parts;
    merged.finish = finish;
    merged.usage = usage;
    Some(merged)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn chunk(parts: Vec<TurnPart>) -> TurnChunk {
        TurnChunk {
            parts,
            ..TurnChunk::new("m", "r")
        }
    }

    #[test]
    fn merging_joins_adjacent_text_of_a_kind_and_keeps_the_end() {
        let call = ToolCall {
            id: "call_1".into(),
            upstream_id: Some("u1".into()),
            kind: CallKind::Function,
            namespace: None,
            name: "f".into(),
            arguments: json!({}),
            signature: None,
        };
        let mut last = chunk(vec![TurnPart::Call(call.clone())]);
        last.finish = Some(Finish::Stop);
        last.usage = Some(TurnUsage {
            input: 3,
            output: 2,
            total: 5,
            ..TurnUsage::default()
        });
        let merged = merge(vec![
            chunk(vec![TurnPart::reasoning("thinking ")]),
            chunk(vec![TurnPart::reasoning("more")]),
            chunk(vec![TurnPart::text("Hel")]),
            chunk(vec![TurnPart::text("lo")]),
            last,
        ])
        .unwrap();
        assert_eq!(
            merged.parts,
            [
                TurnPart::reasoning("thinking more"),
                TurnPart::text("Hello"),
                TurnPart::Call(call)
            ]
        );
        assert_eq!(merged.finish, Some(Finish::Stop));
        assert_eq!(merged.usage.map(|u| u.total), Some(5));
        assert_eq!(merge(Vec::new()), None);
    }
}
