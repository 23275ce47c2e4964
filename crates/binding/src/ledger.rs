//! The delivered-call ledger of one run, and claim-once admission of host-tool callbacks (pure:
//! no I/O, no clock).
//!
//! The gateway enters each batch of host-tool calls of a model response *before* it sends the
//! response ([`Ledger::offer`]), giving each call a fresh private identity, and confirms the
//! batch once the response was fully sent to the guest ([`Ledger::confirm`]); a failed or cut
//! send revokes it ([`Ledger::revoke`]). A callback ([`Ledger::claim`]) is admitted only if its
//! identity names a delivered, unclaimed call with the same tool and the same arguments; it is
//! then claimed and never admitted again. Everything else is refused with a reason
//! ([`Refusal`]). [`Ledger::close`] (cancellation) refuses every later claim. Model call ids and
//! identities are never reused within a run.

use std::collections::{HashMap, HashSet};

use serde::Serialize;
use serde_json::Value;

/// One host-tool call the model made, as the gateway delivers it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OfferedCall {
    /// The id the call is delivered with (the gateway's own, unique in the run).
    pub call_id: String,
    /// The model's id of the call (the upstream's; the delivered id when it gave none), for
    /// the run's events.
    pub model_call_id: String,
    pub tool: String,
    /// The exact arguments the model produced (without the private identity).
    pub arguments: Value,
}

/// Where a delivered call stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CallState {
    /// Entered, its response not yet fully sent.
    Offered,
    /// Its response reached the guest: it may be claimed once.
    Delivered,
    /// A callback claimed it; its host tool is running.
    Claimed,
    /// Its callback's host tool returned (a result or an error).
    Completed,
    /// Its response never fully reached the guest.
    Revoked,
    /// The host's permission policy rejected it: the guest was told not to run it, so no
    /// callback of it may run either.
    Rejected,
    /// The guest did not call it back while a later call of its batch waited for it: the later
    /// calls went ahead, and it can no longer run (it would break the model's order).
    Abandoned,
}

impl CallState {
    /// The call will never run (again): later calls of its batch need not wait for it.
    pub fn is_settled(self) -> bool {
        matches!(
            self,
            CallState::Completed | CallState::Revoked | CallState::Rejected | CallState::Abandoned
        )
    }
}

#[derive(Debug, Clone)]
struct Entry {
    call: OfferedCall,
    session: String,
    batch: u64,
    /// Position within its batch (the model's order).
    position: usize,
    state: CallState,
}

/// A batch entered with [`Ledger::offer`], to confirm or revoke.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct BatchTicket(pub u64);

/// Why a batch cannot be entered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OfferError {
    #[error("model call id {0:?} was already used in this run")]
    ReusedCallId(String),
    #[error("model call id {0:?} appears twice in one batch")]
    DuplicateInBatch(String),
    #[error("a call has an empty model call id or tool name")]
    Empty,
    #[error("the identity {0:?} was already used in this run")]
    ReusedIdentity(String),
    #[error("admission is closed (the run was cancelled or ended)")]
    Closed,
}

/// An admitted callback: the call it claimed.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Admission {
    pub call_id: String,
    pub model_call_id: String,
    pub tool: String,
    pub session: String,
    /// Its batch and position in it (the model's order).
    pub batch: u64,
    pub position: usize,
}

/// Why a callback was refused (each is recorded).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, thiserror::Error)]
#[serde(tag = "reason", rename_all = "snake_case")]
pub enum Refusal {
    #[error("admission is closed (the run was cancelled or ended)")]
    Closed,
    #[error("the callback of {tool} carries no call identity: it is not a call the model made")]
    MissingIdentity { tool: String },
    #[error(
        "no call of {tool} with this identity was delivered: the model never made it, or it was \
         made up"
    )]
    NotDelivered { tool: String },
    #[error("the response carrying the call {call_id} of {tool} has not been fully sent yet")]
    NotYetDelivered { tool: String, call_id: String },
    #[error("the response carrying the call {call_id} of {tool} never fully reached the guest")]
    Revoked { tool: String, call_id: String },
    #[error("the call {call_id} of {tool} was already claimed")]
    AlreadyClaimed { tool: String, call_id: String },
    #[error(
        "the call {call_id} of {tool} was rejected by the host's permission policy; it \
         cannot run"
    )]
    Rejected { tool: String, call_id: String },
    #[error(
        "the call {call_id} of {tool} was abandoned: the guest did not send it while a \
         later call of its batch waited, and the later calls went ahead"
    )]
    Abandoned { tool: String, call_id: String },
    #[error(
        "the identity names the call {call_id}, which is not a call of {tool} with these \
         arguments"
    )]
    WrongIdentity { tool: String, call_id: String },
}

impl Refusal {
    /// The refusal's name, as recorded (`not_delivered`, `already_claimed`, ...).
    pub fn reason(&self) -> &'static str {
        match self {
            Refusal::Closed => "closed",
            Refusal::MissingIdentity { .. } => "missing_identity",
            Refusal::NotDelivered { .. } => "not_delivered",
            Refusal::NotYetDelivered { .. } => "not_yet_delivered",
            Refusal::Revoked { .. } => "revoked",
            Refusal::AlreadyClaimed { .. } => "already_claimed",
            Refusal::Rejected { .. } => "rejected",
            Refusal::Abandoned { .. } => "abandoned",
            Refusal::WrongIdentity { .. } => "wrong_identity",
        }
    }

    /// The delivered call the callback's identity named, when it named one.
    pub fn call_id(&self) -> Option<&str> {
        match self {
            Refusal::NotYetDelivered { call_id, .. }
            | Refusal::Revoked { call_id, .. }
            | Refusal::AlreadyClaimed { call_id, .. }
            | Refusal::Rejected { call_id, .. }
            | Refusal::Abandoned { call_id, .. }
            | Refusal::WrongIdentity { call_id, .. } => Some(call_id),
            Refusal::Closed | Refusal::MissingIdentity { .. } | Refusal::NotDelivered { .. } => {
                None
            }
        }
    }
}

/// The ledger of one run.
#[derive(Debug, Default)]
pub struct Ledger {
    entries: Vec<Entry>,
    by_identity: HashMap<String, usize>,
    /// The identity each delivered call id carries.
    identity_by_call_id: HashMap<String, String>,
    used_ids: HashSet<String>,
    next_batch: u64,
    closed: bool,
}

impl Ledger {
    pub fn new() -> Self {
        Self::default()
    }

    /// Enters the calls of one model response of `session`, in the model's order, before the
    /// response is sent; `identities[i]` is the private identity delivered with `calls[i]`.
    /// Refused as a whole if any call id or identity was already used in the run.
    pub fn offer(
        &mut self,
        session: &str,
        calls: Vec<(OfferedCall, String)>,
    ) -> Result<BatchTicket, OfferError> {
        if self.closed {
            return Err(OfferError::Closed);
        }
        let mut seen = HashSet::new();
        for (call, identity) in &calls {
            if call.call_id.is_empty() || call.tool.is_empty() || identity.is_empty() {
                return Err(OfferError::Empty);
            }
            if self.used_ids.contains(&call.call_id) {
                return Err(OfferError::ReusedCallId(call.call_id.clone()));
            }
            if self.by_identity.contains_key(identity) {
                return Err(OfferError::ReusedIdentity(identity.clone()));
            }
            if !seen.insert(call.call_id.as_str()) {
                return Err(OfferError::DuplicateInBatch(call.call_id.clone()));
            }
        }
        let batch = self.next_batch;
        self.next_batch += 1;
        for (position, (call, identity)) in calls.into_iter().enumerate() {
            self.used_ids.insert(call.call_id.clone());
            self.identity_by_call_id
                .insert(call.call_id.clone(), identity.clone());
            self.by_identity.insert(identity, self.entries.len());
            self.entries.push(Entry {
                call,
                session: session.to_owned(),
                batch,
                position,
                state: CallState::Offered,
            });
        }
        Ok(BatchTicket(batch))
    }

    fn set_batch(&mut self, ticket: BatchTicket, from: CallState, to: CallState) {
        for entry in &mut self.entries {
            if entry.batch == ticket.0 && entry.state == from {
                entry.state = to;
            }
        }
    }

    /// The batch's response reached the guest whole: its calls may be claimed.
    pub fn confirm(&mut self, ticket: BatchTicket) {
        self.set_batch(ticket, CallState::Offered, CallState::Delivered);
    }

    /// The batch's response did not reach the guest whole: its calls can never be claimed.
    pub fn revoke(&mut self, ticket: BatchTicket) {
        self.set_batch(ticket, CallState::Offered, CallState::Revoked);
    }

    /// Refuses every later claim and offer (cancellation).
    pub fn close(&mut self) {
        self.closed = true;
    }

    /// Admits a callback of `tool` with `arguments` (the private identity already removed) if
    /// `identity` names a delivered, unclaimed call of that tool with exactly these arguments;
    /// claims it.
    pub fn claim(
        &mut self,
        tool: &str,
        arguments: &Value,
        identity: Option<&str>,
    ) -> Result<Admission, Refusal> {
        if self.closed {
            return Err(Refusal::Closed);
        }
        let Some(identity) = identity else {
            return Err(Refusal::MissingIdentity {
                tool: tool.to_owned(),
            });
        };
        let Some(&index) = self.by_identity.get(identity) else {
            return Err(Refusal::NotDelivered {
                tool: tool.to_owned(),
            });
        };
        let entry = &mut self.entries[index];
        let call_id = entry.call.call_id.clone();
        if entry.call.tool != tool || !crate::values::same_value(&entry.call.arguments, arguments) {
            return Err(Refusal::WrongIdentity {
                tool: tool.to_owned(),
                call_id,
            });
        }
        let tool = tool.to_owned();
        match entry.state {
            CallState::Offered => Err(Refusal::NotYetDelivered { tool, call_id }),
            CallState::Revoked => Err(Refusal::Revoked { tool, call_id }),
            CallState::Claimed | CallState::Completed => {
                Err(Refusal::AlreadyClaimed { tool, call_id })
            }
            CallState::Rejected => Err(Refusal::Rejected { tool, call_id }),
            CallState::Abandoned => Err(Refusal::Abandoned { tool, call_id }),
            CallState::Delivered => {
                entry.state = CallState::Claimed;
                Ok(Admission {
                    call_id,
                    model_call_id: entry.call.model_call_id.clone(),
                    tool,
                    session: entry.session.clone(),
                    batch: entry.batch,
                    position: entry.position,
                })
            }
        }
    }

    /// The claimed call `call_id`'s host tool returned.
    pub fn complete(&mut self, call_id: &str) {
        if let Some(entry) = self
            .entries
            .iter_mut()
            .find(|e| e.call.call_id == call_id && e.state == CallState::Claimed)
        {
            entry.state = CallState::Completed;
        }
    }

    /// The permission policy rejected the delivered call `call_id`: it can never be
    /// claimed. Returns whether a claimable call was rejected (a call already claimed, or one
    /// that is not a host-tool call, is left as it is).
    pub fn reject(&mut self, call_id: &str) -> bool {
        self.settle_one(call_id, CallState::Rejected)
    }

    /// The delivered call `call_id` was not called back in time: it can never be
    /// claimed. Returns whether it was still waiting to be claimed.
    pub fn abandon(&mut self, call_id: &str) -> bool {
        self.settle_one(call_id, CallState::Abandoned)
    }

    fn settle_one(&mut self, call_id: &str, to: CallState) -> bool {
        match self.entries.iter_mut().find(|e| e.call.call_id == call_id) {
            Some(entry) if matches!(entry.state, CallState::Offered | CallState::Delivered) => {
                entry.state = to;
                true
            }
            _ => false,
        }
    }

    /// Claimed calls whose host tool has not returned yet (the model's call ids).
    pub fn running(&self) -> Vec<String> {
        self.entries
            .iter()
            .filter(|e| e.state == CallState::Claimed)
            .map(|e| e.call.model_call_id.clone())
            .collect()
    }

    /// The state of the call with this model call id, if it was entered.
    pub fn state(&self, call_id: &str) -> Option<CallState> {
        self.entries
            .iter()
            .find(|e| e.call.call_id == call_id)
            .map(|e| e.state)
    }

    /// The calls of `batch` before `position` (model call ids and states), in order.
    pub fn earlier_in_batch(&self, batch: u64, position: usize) -> Vec<(String, CallState)> {
        self.entries
            .iter()
            .filter(|e| e.batch == batch && e.position < position)
            .map(|e| (e.call.call_id.clone(), e.state))
            .collect()
    }

    /// The model's id of the delivered call `call_id`.
    pub fn model_call_id(&self, call_id: &str) -> Option<String> {
        self.entries
            .iter()
            .find(|e| e.call.call_id == call_id)
            .map(|e| e.call.model_call_id.clone())
    }

    /// The private identity the call delivered as `call_id` carries (for guests that name a
    /// callback by its delivered call id, as Claude Code does in `_meta`).
    pub fn identity_of(&self, call_id: &str) -> Option<String> {
        self.identity_by_call_id.get(call_id).cloned()
    }

    /// The call a callback's identity names, if it names one, with its state; whatever the
    /// callback's tool and arguments (see [`Ledger::claim`] for what admits it).
    pub fn named(&self, identity: &str) -> Option<(&OfferedCall, CallState)> {
        let &index = self.by_identity.get(identity)?;
        self.entries.get(index).map(|e| (&e.call, e.state))
    }
}

#[cfg(test)]
#[path = "ledger_tests.rs"]
mod tests;
