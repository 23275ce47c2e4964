//! The delivered-call ledger of one run, and claim-once admission of host-tool callbacks.
//!
//! The gateway enters each batch of function calls of a model response *before* it sends the
//! response ([`Ledger::offer`]) and confirms the batch once the response was fully sent to the
//! guest ([`Ledger::confirm`]); a failed or cut send revokes it ([`Ledger::revoke`]). Only
//! confirmed calls can be claimed. A callback ([`Ledger::claim`]) is admitted only if it matches
//! exactly one delivered, unclaimed call of the run (same tool, same arguments and, when the
//! guest passed one back, the same model call id); it is then claimed and never admitted again.
//! Everything else is refused with a reason ([`Refusal`]). [`Ledger::close`] (cancellation)
//! refuses every later claim. Model call ids are never reused within a run.

use std::collections::HashSet;

use serde::Serialize;
use serde_json::Value;

/// One function call the model made, as the gateway delivered it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OfferedCall {
    /// The model's call id (the upstream's, or one the gateway made up).
    pub model_call_id: String,
    pub tool: String,
    /// The exact arguments the model produced.
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
    /// A callback claimed it.
    Claimed,
    /// Its response never fully reached the guest.
    Revoked,
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
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use = "a batch must be confirmed once sent, or revoked"]
pub struct BatchTicket(u64);

/// Why a batch cannot be entered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OfferError {
    #[error("model call id {0:?} was already used in this run")]
    ReusedCallId(String),
    #[error("model call id {0:?} appears twice in one batch")]
    DuplicateInBatch(String),
    #[error("a call has an empty model call id or tool name")]
    Empty,
}

/// An admitted callback: the call it claimed.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Admission {
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
    #[error(
        "no delivered call of {tool} with these arguments: the model never made it, or its response never reached the guest"
    )]
    NotDelivered { tool: String },
    #[error("the call {model_call_id} of {tool} was already claimed")]
    AlreadyClaimed { tool: String, model_call_id: String },
    #[error(
        "{count} delivered calls of {tool} have these arguments and the callback names none of them"
    )]
    Ambiguous { tool: String, count: usize },
    #[error("model call id {model_call_id} is not a delivered call of {tool} with these arguments")]
    WrongIdentity { tool: String, model_call_id: String },
}

/// The ledger of one run.
#[derive(Debug, Default)]
pub struct Ledger {
    entries: Vec<Entry>,
    used_ids: HashSet<String>,
    next_batch: u64,
    closed: bool,
}

impl Ledger {
    pub fn new() -> Self {
        Self::default()
    }

    /// Enters the calls of one model response of `session`, in the model's order, before the
    /// response is sent. Refused as a whole if any call id was already used in the run.
    pub fn offer(
        &mut self,
        session: &str,
        calls: Vec<OfferedCall>,
    ) -> Result<BatchTicket, OfferError> {
        let mut seen = HashSet::new();
        for call in &calls {
            if call.model_call_id.is_empty() || call.tool.is_empty() {
                return Err(OfferError::Empty);
            }
            if self.used_ids.contains(&call.model_call_id) {
                return Err(OfferError::ReusedCallId(call.model_call_id.clone()));
            }
            if !seen.insert(call.model_call_id.as_str()) {
                return Err(OfferError::DuplicateInBatch(call.model_call_id.clone()));
            }
        }
        let batch = self.next_batch;
        self.next_batch += 1;
        for (position, call) in calls.into_iter().enumerate() {
            self.used_ids.insert(call.model_call_id.clone());
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

    /// Refuses every later claim (cancellation).
    pub fn close(&mut self) {
        self.closed = true;
    }

    /// Admits a callback of `tool` with `arguments` if it matches exactly one delivered,
    /// unclaimed call (and `model_call_id`, when the guest passed one back); claims it.
    pub fn claim(
        &mut self,
        tool: &str,
        arguments: &Value,
        model_call_id: Option<&str>,
    ) -> Result<Admission, Refusal> {
        if self.closed {
            return Err(Refusal::Closed);
        }
        let same = |e: &Entry| e.call.tool == tool && e.call.arguments == *arguments;
        let candidates: Vec<usize> = self
            .entries
            .iter()
            .enumerate()
            .filter(|(_, e)| same(e) && e.state == CallState::Delivered)
            .map(|(i, _)| i)
            .collect();
        let chosen = match model_call_id {
            Some(id) => {
                if let Some(claimed) = self.entries.iter().find(|e| {
                    same(e) && e.call.model_call_id == id && e.state == CallState::Claimed
                }) {
                    return Err(Refusal::AlreadyClaimed {
                        tool: tool.to_owned(),
                        model_call_id: claimed.call.model_call_id.clone(),
                    });
                }
                candidates
                    .into_iter()
                    .find(|&i| self.entries[i].call.model_call_id == id)
                    .ok_or_else(|| Refusal::WrongIdentity {
                        tool: tool.to_owned(),
                        model_call_id: id.to_owned(),
                    })?
            }
            None => match candidates.as_slice() {
                [one] => *one,
                [] => {
                    return Err(
                        match self
                            .entries
                            .iter()
                            .find(|e| same(e) && e.state == CallState::Claimed)
                        {
                            Some(claimed) => Refusal::AlreadyClaimed {
                                tool: tool.to_owned(),
                                model_call_id: claimed.call.model_call_id.clone(),
                            },
                            None => Refusal::NotDelivered {
                                tool: tool.to_owned(),
                            },
                        },
                    );
                }
                many => {
                    return Err(Refusal::Ambiguous {
                        tool: tool.to_owned(),
                        count: many.len(),
                    });
                }
            },
        };
        let entry = &mut self.entries[chosen];
        entry.state = CallState::Claimed;
        Ok(Admission {
            model_call_id: entry.call.model_call_id.clone(),
            tool: entry.call.tool.clone(),
            session: entry.session.clone(),
            batch: entry.batch,
            position: entry.position,
        })
    }

    /// The state of the call with this model call id, if it was entered.
    pub fn state(&self, model_call_id: &str) -> Option<CallState> {
        self.entries
            .iter()
            .find(|e| e.call.model_call_id == model_call_id)
            .map(|e| e.state)
    }
}

#[cfg(test)]
#[path = "ledger_tests.rs"]
mod tests;
