//! What the ACP connection reports to the run ([`Note`]), and its mapping to canonical events
//! ([`AcpEvents`]). Notes carry the protocol payloads as the guest sent them (updates, prompt
//! answers) and what Switchyard sent or decided, in the order the run saw them; the mapping is
//! deterministic, so a recorded note transcript [`replay`]s to the same events and outcome.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use switchyard_events::acp::{AcpNormalizer, Delivered, RpcError};
use switchyard_events::event::{Permission, PermissionOutcome, SessionStarted};
use switchyard_events::gemini::{Normalized, StderrSummary};
use switchyard_events::{Event, GuestExit, OutcomeStatus, RunError, RunOutcome};

use crate::driver::Mapping;

/// One thing the connection side reports, in order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Note {
    /// A line Switchyard wrote to the guest.
    Sent(String),
    /// The guest opened (or loaded) its session: its id.
    SessionStarted(String),
    /// A prompt about to be sent.
    PromptSent(String),
    /// A `session/update` notification's params.
    Update(Value),
    /// The guest asked permission for this tool call.
    PermissionAsked(String),
    /// The answer it got.
    Permission(Box<Permission>),
    /// The answer to a `session/prompt`: its result, or its JSON-RPC error.
    PromptAnswered(Result<Value, RpcError>),
    /// The session failed outside a prompt (setup, connection).
    Failed(OutcomeStatus, RunError),
    /// Something with no mapping: why, its method, the raw value.
    Unrecognized(String, Option<String>, Value),
    /// What the gateway delivered under a call id a note named (`None`: nothing).
    Delivered {
        call_id: String,
        call: Option<Box<Delivered>>,
    },
    /// The controller is done: every prompt answered, or a failure.
    Done,
}

/// Notes → canonical events for one session.
pub struct AcpEvents {
    normalizer: AcpNormalizer,
    /// The model the run asked for (ACP's session answer lists the CLI's own models).
    model: String,
    /// Prompts the run was given up front.
    expected_prompts: u32,
    /// What the gateway delivered, by call id (as the driver looked it up).
    delivered: HashMap<String, Delivered>,
}

impl AcpEvents {
    pub fn new(model: String, expected_prompts: u32) -> Self {
        Self {
            normalizer: AcpNormalizer::new(),
            model,
            expected_prompts,
            delivered: HashMap::new(),
        }
    }

    /// The events of one note.
    pub fn events(&mut self, note: Note) -> Vec<Event> {
        let delivered = &self.delivered;
        let lookup = |id: &str| delivered.get(id).cloned();
        match note {
            Note::Sent(_) | Note::Done => Vec::new(),
            Note::SessionStarted(session_id) => vec![Event::SessionStarted(SessionStarted {
                session_id,
                model: self.model.clone(),
            })],
            Note::PromptSent(text) => vec![self.normalizer.prompt_sent(&text)],
            Note::Update(params) => self.normalizer.update(&params, &lookup),
            Note::PermissionAsked(tool_call_id) => {
                self.normalizer.tool_call(&tool_call_id, &lookup)
            }
            Note::Permission(permission) => {
                let mut out = vec![];
                let rejected = permission.outcome == PermissionOutcome::Rejected;
                let id = permission.tool_call_id.clone();
                out.push(Event::Permission(permission));
                if rejected {
                    out.extend(
                        self.normalizer
                            .tool_rejected(&id, "rejected by the permission policy"),
                    );
                }
                out
            }
            Note::PromptAnswered(answer) => self.normalizer.prompt_answered(answer.as_ref()),
            Note::Failed(status, error) => {
                self.normalizer.fail(status, error);
                Vec::new()
            }
            Note::Unrecognized(reason, method, raw) => {
                vec![self.normalizer.unrecognized_message(reason, method, raw)]
            }
            Note::Delivered { call_id, call } => {
                if let Some(call) = call {
                    self.delivered.insert(call_id, *call);
                }
                Vec::new()
            }
        }
    }
}

/// The call ids a guest's `<tool>__<id>` may stand for (a tool name or an id may hold `__`).
fn candidates(tool_call_id: &str) -> Vec<String> {
    tool_call_id
        .match_indices("__")
        .map(|(at, _)| tool_call_id[at + 2..].to_owned())
        .collect()
}

impl Mapping for AcpEvents {
    type Note = Note;

    fn calls_named(&self, note: &Note) -> Vec<String> {
        match note {
            Note::Update(params) => params
                .pointer("/update/toolCallId")
                .and_then(Value::as_str)
                .map(candidates)
                .unwrap_or_default(),
            Note::PermissionAsked(tool_call_id) => candidates(tool_call_id),
            _ => Vec::new(),
        }
    }

    fn delivered_note(&self, call_id: String, call: Option<Delivered>) -> Note {
        Note::Delivered {
            call_id,
            call: call.map(Box::new),
        }
    }

    fn note(&mut self, note: Note) -> Vec<Normalized> {
        crate::driver::untimed(self.events(note))
    }

    fn unrecognized(&self) -> u64 {
        self.normalizer.unrecognized()
    }

    fn finish(
        &mut self,
        exit: GuestExit,
        stderr: &StderrSummary,
        _stderr_tail: &str,
    ) -> (Vec<Event>, RunOutcome) {
        let hint = stderr.message();
        std::mem::take(&mut self.normalizer).finish(self.expected_prompts, exit, hint.as_deref())
    }
}

/// Replays a recorded session: its notes (with the gateway's lookups, when it had them), the
/// prompts it was given, the guest's exit and its stderr summary. Returns every event after
/// `RunStarted` and the outcome, as the live backend produced them.
pub fn replay(
    model: &str,
    notes: impl IntoIterator<Item = Note>,
    expected_prompts: u32,
    exit: GuestExit,
    fallback_message: Option<&str>,
) -> (Vec<Event>, RunOutcome) {
    let mut mapping = AcpEvents::new(model.to_owned(), expected_prompts);
    let mut events = Vec::new();
    for note in notes {
        events.extend(mapping.events(note));
    }
    let (closing, outcome) =
        std::mem::take(&mut mapping.normalizer).finish(expected_prompts, exit, fallback_message);
    events.extend(closing);
    (events, outcome)
}
