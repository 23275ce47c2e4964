//! What the ACP connection reports to the run ([`Note`]), and its mapping to canonical events
//! ([`AcpEvents`]). Notes carry the protocol payloads as the guest sent them (updates, prompt
//! answers) and what Switchyard sent or decided, in the order the run saw them; the mapping is
//! deterministic, so a recorded note transcript [`replay`]s to the same events and outcome.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use switchyard_events::acp::{AcpNormalizer, Delivered, RpcError};
use switchyard_events::event::{Permission, PermissionOutcome, SessionStarted};
use switchyard_events::{Event, GuestExit, OutcomeStatus, RunError, RunOutcome};

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
    /// The controller is done: every prompt answered, or a failure.
    Done,
}

/// A delivered-call lookup (the gateway's, or none).
pub type Lookup = Box<dyn Fn(&str) -> Option<Delivered> + Send>;

/// Notes → canonical events for one session.
pub struct AcpEvents {
    normalizer: AcpNormalizer,
    /// The model the run asked for (ACP's session answer lists the CLI's own models).
    model: String,
    lookup: Lookup,
}

impl AcpEvents {
    pub fn new(model: String, lookup: Lookup) -> Self {
        Self {
            normalizer: AcpNormalizer::new(),
            model,
            lookup,
        }
    }

    /// Guest messages kept as unrecognized so far.
    pub fn unrecognized(&self) -> u64 {
        self.normalizer.unrecognized()
    }

    /// The events of one note.
    pub fn note(&mut self, note: Note) -> Vec<Event> {
        let lookup = &self.lookup;
        let lookup = |id: &str| lookup(id);
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
        }
    }

    /// The closing events and the outcome (see [`AcpNormalizer::finish`]); the mapping starts
    /// over after it.
    pub fn finish(
        &mut self,
        expected_prompts: u32,
        exit: GuestExit,
        fallback_message: Option<&str>,
    ) -> (Vec<Event>, RunOutcome) {
        std::mem::take(&mut self.normalizer).finish(expected_prompts, exit, fallback_message)
    }
}

/// Replays a recorded session: its notes (without the gateway, so no delivered calls), the
/// prompts it was given, the guest's exit and its stderr summary. Returns every event after
/// `RunStarted` and the outcome, as the live backend produced them.
pub fn replay(
    model: &str,
    notes: impl IntoIterator<Item = Note>,
    expected_prompts: u32,
    exit: GuestExit,
    fallback_message: Option<&str>,
) -> (Vec<Event>, RunOutcome) {
    let mut mapping = AcpEvents::new(model.to_owned(), Box::new(|_| None));
    let mut events = Vec::new();
    for note in notes {
        events.extend(mapping.note(note));
    }
    let (closing, outcome) = mapping.finish(expected_prompts, exit, fallback_message);
    events.extend(closing);
    (events, outcome)
}
