//! Normalizer: Gemini CLI stream-json lines → canonical [`Event`]s.
//!
//! Feed every stdout line with [`GeminiNormalizer::push_line`] (already classified by
//! `switchyard_protocol::gemini_cli::stream_json::parse_line`), then call
//! [`GeminiNormalizer::finish`] with the process exit to get the closing events and the typed
//! outcome. The normalizer never drops a line: unknown and invalid lines become
//! [`Event::Unrecognized`] and are counted.
//!
//! A `tool_use` names its call by the id the gateway delivered; the backend asks
//! [`GeminiNormalizer::named_call`] for it, looks it up and hands the answer to
//! [`GeminiNormalizer::delivered`] before the line, so the call's event carries the model's own
//! id (without a gateway, or in a replay of bare lines, the delivered id stands in).

use crate::delivered::Delivered;
use crate::event::{
    AssistantDelta, ErrorReport, Event, ModelUsage, SessionStarted, ToolCall, ToolError,
    ToolResult, ToolStatus, Unrecognized, Usage, UserMessage, Warning,
};
use crate::outcome::{GuestExit, RunOutcome, classify_gemini};
use crate::tools::gemini_tool_category;
use crate::turns::Turns;
use serde_json::Value;
use std::collections::HashMap;
use switchyard_protocol::gemini_cli::stream_json::{
    ResultEvent, Role, Severity, Status, StreamEvent, StreamLine,
};

/// One normalized event plus the guest timestamp it came from. Serialized as
/// `{"event": …, "guest_timestamp": …}` (the line format of fixtures' `expected.jsonl`).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Normalized {
    pub event: Event,
    /// Source: the stream-json `timestamp` of the line that produced the event.
    pub guest_timestamp: Option<String>,
}

/// Stateful stream-json → canonical mapping for one run.
#[derive(Debug, Default)]
pub struct GeminiNormalizer {
    turns: Turns,
    tool_names: HashMap<String, String>,
    result: Option<ResultEvent>,
    last_error_message: Option<String>,
    unrecognized: u64,
    lines_after_result: u64,
    /// What the gateway delivered, by delivered call id (as the backend looked it up).
    delivered: HashMap<String, Delivered>,
}

impl GeminiNormalizer {
    pub fn new() -> Self {
        Self::default()
    }

    /// Lines kept as [`Event::Unrecognized`] so far.
    pub fn unrecognized_lines(&self) -> u64 {
        self.unrecognized
    }

    /// Whether the terminal `result` line has been seen.
    pub fn has_result(&self) -> bool {
        self.result.is_some()
    }

    /// The delivered call id a line names (a `tool_use`), for the backend to look up.
    pub fn named_call(line: &StreamLine) -> Option<String> {
        match line {
            StreamLine::Event { event, .. } => match event.as_ref() {
                StreamEvent::ToolUse(t) => Some(
                    t.tool_id
                        .strip_prefix(&format!("{}__", t.tool_name))
                        .unwrap_or(&t.tool_id)
                        .to_owned(),
                ),
                _ => None,
            },
            _ => None,
        }
    }

    /// What the gateway delivered under `call_id` (`None`: nothing).
    pub fn delivered(&mut self, call_id: &str, delivered: Option<Delivered>) {
        if let Some(delivered) = delivered {
            self.delivered.insert(call_id.to_owned(), delivered);
        }
    }

    /// Maps one classified line to zero or more events.
    pub fn push_line(&mut self, line: StreamLine) -> Vec<Normalized> {
        match line {
            StreamLine::Event { event, .. } => {
                let ts = Some(event.timestamp().to_owned());
                self.map_event(*event)
                    .into_iter()
                    .map(|event| Normalized {
                        event,
                        guest_timestamp: ts.clone(),
                    })
                    .collect()
            }
            StreamLine::UnknownType { event_type, raw } => {
                self.unrecognized += 1;
                let ts = raw
                    .get("timestamp")
                    .and_then(Value::as_str)
                    .map(str::to_owned);
                vec![Normalized {
                    event: Event::Unrecognized(Unrecognized {
                        reason: format!("unknown event type \"{event_type}\""),
                        event_type: Some(event_type),
                        raw,
                    }),
                    guest_timestamp: ts,
                }]
            }
            StreamLine::Invalid { reason, raw } => {
                self.unrecognized += 1;
                let event_type = match &reason {
                    switchyard_protocol::gemini_cli::stream_json::InvalidLine::BadShape {
                        event_type,
                        ..
                    } => Some(event_type.clone()),
                    _ => None,
                };
                vec![Normalized {
                    event: Event::Unrecognized(Unrecognized {
                        reason: reason.to_string(),
                        event_type,
                        raw: serde_json::from_str(&raw).unwrap_or(Value::String(raw)),
                    }),
                    guest_timestamp: None,
                }]
            }
        }
    }

    fn map_event(&mut self, event: StreamEvent) -> Vec<Event> {
        let mut out = Vec::new();
        if self.result.is_some() {
            self.lines_after_result += 1;
        }
        match event {
            StreamEvent::Init(init) => out.push(Event::SessionStarted(SessionStarted {
                session_id: init.session_id,
                model: init.model,
            })),
            StreamEvent::Message(m) => match m.role {
                Role::User => out.push(Event::UserMessage(UserMessage { text: m.content })),
                Role::Assistant => {
                    self.turns.begin_model_output();
                    self.turns.push_text(&m.content);
                    out.push(Event::AssistantDelta(AssistantDelta {
                        text: m.content,
                        turn: self.turns.turn,
                    }));
                }
            },
            StreamEvent::ToolUse(t) => {
                self.turns.tool_call(&mut out);
                let delivered_id = t
                    .tool_id
                    .strip_prefix(&format!("{}__", t.tool_name))
                    .unwrap_or(&t.tool_id);
                let model_call_id = match self.delivered.get(delivered_id) {
                    Some(d) if d.tool == t.tool_name => d.model_call_id.clone(),
                    _ => delivered_id.to_owned(),
                };
                self.tool_names
                    .insert(t.tool_id.clone(), t.tool_name.clone());
                out.push(Event::ToolCall(ToolCall {
                    category: gemini_tool_category(&t.tool_name),
                    call_id: t.tool_id,
                    model_call_id,
                    tool_name: t.tool_name,
                    arguments: t.parameters,
                    turn: self.turns.turn,
                }));
            }
            StreamEvent::ToolResult(r) => {
                self.turns.awaiting_next_turn = true;
                out.push(Event::ToolResult(ToolResult {
                    tool_name: self.tool_names.get(&r.tool_id).cloned(),
                    call_id: r.tool_id,
                    status: match r.status {
                        Status::Success => ToolStatus::Success,
                        Status::Error => ToolStatus::Error,
                    },
                    output: r.output,
                    error: r.error.map(|e| ToolError {
                        kind: e.kind,
                        message: e.message,
                    }),
                    content: Vec::new(),
                }));
            }
            StreamEvent::Error(e) => match e.severity {
                Severity::Warning => out.push(Event::Warning(Warning {
                    message: e.message,
                    derived: false,
                })),
                Severity::Error => {
                    self.last_error_message = Some(e.message.clone());
                    out.push(Event::Error(ErrorReport { message: e.message }));
                }
            },
            StreamEvent::Result(r) => {
                self.turns.flush_text(&mut out);
                let s = &r.stats;
                out.push(Event::Usage(Usage {
                    input_tokens: s.input_tokens,
                    cached_tokens: s.cached,
                    output_tokens: s.output_tokens,
                    total_tokens: s.total_tokens,
                    tool_calls: s.tool_calls,
                    duration_ms: s.duration_ms,
                    by_model: s
                        .models
                        .iter()
                        .map(|(name, m)| {
                            (
                                name.clone(),
                                ModelUsage {
                                    input_tokens: m.input_tokens,
                                    cached_tokens: m.cached,
                                    output_tokens: m.output_tokens,
                                    total_tokens: m.total_tokens,
                                },
                            )
                        })
                        .collect(),
                }));
                self.result = Some(r);
            }
        }
        out
    }

    /// Closes the run: flushes pending text and returns the final events (ending with
    /// [`Event::RunFinished`]) and the typed outcome. `fallback_message` (e.g. the guest's last
    /// stderr lines) is used when neither a `result` nor an `error` event said what went wrong.
    pub fn finish(
        mut self,
        exit: GuestExit,
        fallback_message: Option<&str>,
    ) -> (Vec<Event>, RunOutcome) {
        let mut out = Vec::new();
        self.turns.flush_text(&mut out);
        if self.lines_after_result > 0 {
            out.push(Event::Warning(Warning {
                message: format!(
                    "{} event(s) arrived after the result event",
                    self.lines_after_result
                ),
                derived: true,
            }));
        }
        let message = self.last_error_message.as_deref().or(fallback_message);
        let outcome = classify_gemini(self.result.as_ref(), message, exit);
        out.push(self.turns.run_finished(&outcome, self.unrecognized));
        (out, outcome)
    }
}

/// stderr lines Gemini CLI always prints that carry no diagnosis.
const STDERR_NOISE: &[&str] = &[
    "Warning: ",
    "YOLO mode",
    "Ripgrep is not available",
    "[STARTUP]",
    "    at ",
    "Approval mode overridden",
];

/// Keeps the last few stderr lines that may explain a failure (noise and colour codes removed).
#[derive(Debug, Default, Clone)]
pub struct StderrSummary {
    lines: std::collections::VecDeque<String>,
}

impl StderrSummary {
    const KEEP: usize = 4;

    /// Offers one stderr line.
    pub fn push(&mut self, line: &str) {
        let text = strip_ansi(line);
        if text.trim().is_empty() || STDERR_NOISE.iter().any(|n| text.starts_with(n)) {
            return;
        }
        if self.lines.len() == Self::KEEP {
            self.lines.pop_front();
        }
        self.lines.push_back(text);
    }

    /// The kept lines joined, or `None`.
    pub fn message(&self) -> Option<String> {
        (!self.lines.is_empty()).then(|| self.lines.iter().cloned().collect::<Vec<_>>().join("\n"))
    }
}

/// Removes ANSI colour sequences (`ESC [ ... letter`).
pub fn strip_ansi(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' && chars.peek() == Some(&'[') {
            chars.next();
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// Replays a recorded run: stdout lines, stderr lines and the exit, through the same parser,
/// normalizer and stderr summary as the live backend. Returns every event and the outcome; the
/// live backend also adds `RunStarted` and a `Warning` for each stdout line its splitter had to
/// truncate, which a replay of whole lines never has.
pub fn replay<'a>(
    stdout_lines: impl IntoIterator<Item = &'a str>,
    stderr_lines: impl IntoIterator<Item = &'a str>,
    exit: GuestExit,
) -> (Vec<Normalized>, RunOutcome) {
    let mut normalizer = GeminiNormalizer::new();
    let mut events = Vec::new();
    for line in stdout_lines {
        events.extend(normalizer.push_line(
            switchyard_protocol::gemini_cli::stream_json::parse_line(line),
        ));
    }
    let mut summary = StderrSummary::default();
    for line in stderr_lines {
        summary.push(line);
    }
    let (closing, outcome) = normalizer.finish(exit, summary.message().as_deref());
    events.extend(closing.into_iter().map(|event| Normalized {
        event,
        guest_timestamp: None,
    }));
    (events, outcome)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stderr_summary_skips_noise_and_colour() {
        let mut s = StderrSummary::default();
        s.push("YOLO mode is enabled.");
        s.push("\u{1b}[31mGemini CLI is not running in a trusted directory.\u{1b}[0m");
        assert_eq!(
            s.message().as_deref(),
            Some("Gemini CLI is not running in a trusted directory.")
        );
    }

    #[test]
    fn turns_and_final_text_follow_tool_rounds() {
        let lines = [
            r#"{"type":"init","timestamp":"t","session_id":"s","model":"m"}"#,
            r#"{"type":"message","timestamp":"t","role":"assistant","content":"Let me look.","delta":true}"#,
            r#"{"type":"tool_use","timestamp":"t","tool_name":"list_directory","tool_id":"list_directory__c1","parameters":{}}"#,
            r#"{"type":"tool_result","timestamp":"t","tool_id":"list_directory__c1","status":"success"}"#,
            r#"{"type":"message","timestamp":"t","role":"assistant","content":"Done.","delta":true}"#,
            r#"{"type":"result","timestamp":"t","status":"success","stats":{"total_tokens":1,"input_tokens":1,"output_tokens":0,"cached":0,"input":1,"duration_ms":1,"tool_calls":1,"models":{}}}"#,
        ];
        let exit = GuestExit {
            code: Some(0),
            ..Default::default()
        };
        let (events, outcome) = replay(lines, [], exit);
        assert_eq!(outcome.status, crate::OutcomeStatus::Succeeded);
        let Some(Event::RunFinished(f)) = events.last().map(|n| &n.event) else {
            panic!()
        };
        assert_eq!(f.final_text.as_deref(), Some("Done."));
        assert_eq!(f.turns, 2);
        let call = events
            .iter()
            .find_map(|n| match &n.event {
                Event::ToolCall(c) => Some(c),
                _ => None,
            })
            .unwrap();
        assert_eq!(call.model_call_id, "c1");
        assert_eq!(call.turn, 0);
    }
}
