//! What an OpenCode run observes and decides ([`Note`]), in order, and its mapping to
//! canonical events ([`apply`]). Notes carry the server-sent events as received and what
//! Switchyard did (the session it opened, the prompts, its permission answers, its warnings,
//! the end of each prompt); the mapping is deterministic, so a recorded note transcript
//! [`replay`]s to the same events and outcome (the fixtures of `switchyard-dev capture --agent
//! opencode`).

use serde::{Deserialize, Serialize};
use serde_json::Value;
use switchyard_events::event::{Permission, SessionStarted, Warning};
use switchyard_events::opencode::OpenCodeNormalizer;
use switchyard_events::{Delivered, Event, GuestExit, OutcomeStatus, RunError, RunOutcome};

/// One thing the run observed or did.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Note {
    /// The session `POST /session` opened, and the model its prompts ask for.
    SessionStarted { id: String, model: String },
    /// A prompt about to be sent.
    PromptSent(String),
    /// The data of one server-sent event, as received (or a part read back after a
    /// reconnect, wrapped as the `message.part.updated` it stands for).
    Event(String),
    /// What the gateway delivered under a call id an event named (looked up before the
    /// event; `None`: nothing).
    Delivered {
        call_id: String,
        call: Option<Box<Delivered>>,
    },
    /// Switchyard's answer to a `permission.asked`.
    Permission(Box<Permission>),
    /// Something Switchyard did or saw besides the guest's events (a rejected question, a
    /// lost event stream, a failed warm-up call).
    Warning(String),
    /// The session went idle after the prompt: the prompt's end.
    PromptDone,
    /// The run failed outside a prompt (start-up, the event stream).
    Failed(OutcomeStatus, RunError),
}

/// The events `note` maps to.
pub fn apply(normalizer: &mut OpenCodeNormalizer, note: &Note) -> Vec<Event> {
    match note {
        Note::SessionStarted { id, model } => {
            *normalizer = OpenCodeNormalizer::new(id.clone());
            vec![Event::SessionStarted(SessionStarted {
                session_id: id.clone(),
                model: model.clone(),
            })]
        }
        Note::PromptSent(text) => vec![normalizer.prompt_sent(text)],
        Note::Event(data) => match serde_json::from_str::<Value>(data) {
            Ok(event) => normalizer.event(&event),
            Err(_) => vec![normalizer.unrecognized_payload(
                "a server-sent event that is not JSON",
                Value::String(data.clone()),
            )],
        },
        Note::Delivered { call_id, call } => {
            normalizer.delivered(call_id, call.as_deref().cloned());
            Vec::new()
        }
        Note::Permission(permission) => vec![normalizer.permission((**permission).clone())],
        Note::Warning(message) => vec![Event::Warning(Warning {
            message: message.clone(),
            derived: true,
        })],
        Note::PromptDone => normalizer.prompt_done(),
        Note::Failed(status, error) => {
            normalizer.fail(*status, error.clone());
            Vec::new()
        }
    }
}

/// The events and outcome a note transcript maps to, `run_finished` included (its `exit` and
/// `fallback_message` as the run saw them).
pub fn replay(
    notes: impl IntoIterator<Item = Note>,
    expected_prompts: u32,
    exit: GuestExit,
    fallback_message: Option<&str>,
) -> (Vec<Event>, RunOutcome) {
    let mut normalizer = OpenCodeNormalizer::default();
    let mut events = Vec::new();
    for note in notes {
        events.extend(apply(&mut normalizer, &note));
    }
    let (end, outcome) = normalizer.finish(expected_prompts, exit, fallback_message);
    events.extend(end);
    (events, outcome)
}
