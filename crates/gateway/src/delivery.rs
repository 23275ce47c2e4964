//! Calls in the gateway's answers: each call of a host tool in a completed turn gets a fresh
//! private identity in its arguments, and every call of the batch is entered in the run's binding
//! before the answer is sent ([`stamp`]). The answer's body holds the [`Delivery`] ([`DeliverySlot`]):
//! the batch is confirmed when the body has handed its last byte to the guest's connection, and
//! revoked when the body is dropped before that (a cut or failed send).

use std::sync::{Arc, Mutex};

use switchyard_binding::{
    DeliveredCall, Delivery, HostBinding, IDENTITY_ARG, OfferError, OfferedCall,
};
use switchyard_translate::turn::TurnChunk;

/// The delivery an answer's body confirms at its end.
#[derive(Clone, Default)]
pub(crate) struct DeliverySlot(Arc<Mutex<Option<Delivery>>>);

impl DeliverySlot {
    pub fn put(&self, delivery: Delivery) {
        *self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(delivery);
    }

    /// The body reached its end: confirm what it carried.
    pub fn confirm(&self) {
        let delivery = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        if let Some(delivery) = delivery {
            delivery.confirm();
        }
    }
}

/// Gives every host-tool call in `chunk` its identity, and enters every call of the chunk (model
/// order; host-tool calls in the ledger, all of them in the delivered-call table) for `session`;
/// `None` when the chunk calls no tool. Arguments the model itself put under the identity's
/// name are replaced.
pub(crate) fn stamp(
    binding: &HostBinding,
    session: &str,
    chunk: &mut TurnChunk,
    identities: bool,
) -> Result<Option<Delivery>, OfferError> {
    let mut host_calls = Vec::new();
    let mut offered = Vec::new();
    let mut all = Vec::new();
    for call in chunk.calls_mut() {
        let model_call_id = call.upstream_id.clone().unwrap_or_else(|| call.id.clone());
        // A namespaced call (Codex's MCP tools) by the one name it has upstream.
        let name = call.qualified_name();
        let Some(tool) = binding.host_tool(&name) else {
            all.push(DeliveredCall {
                call_id: call.id.clone(),
                model_call_id,
                tool: name,
                arguments: call.arguments.clone(),
            });
            continue;
        };
        if let Some(object) = call.arguments.as_object_mut() {
            object.remove(IDENTITY_ARG);
        }
        all.push(DeliveredCall {
            call_id: call.id.clone(),
            model_call_id: model_call_id.clone(),
            tool: name.clone(),
            arguments: call.arguments.clone(),
        });
        offered.push(OfferedCall {
            call_id: call.id.clone(),
            model_call_id,
            tool: tool.to_owned(),
            arguments: call.arguments.clone(),
        });
        host_calls.push(call);
    }
    if all.is_empty() {
        return Ok(None);
    }
    let delivery = binding.deliver(session, offered, all)?;
    if !identities {
        // The guest names each callback by its delivered call id instead (Claude Code).
        return Ok(Some(delivery));
    }
    for (call, identity) in host_calls.into_iter().zip(delivery.identities()) {
        if let Some(object) = call.arguments.as_object_mut() {
            object.insert(IDENTITY_ARG.to_owned(), identity.clone().into());
        }
    }
    Ok(Some(delivery))
}

#[cfg(test)]
#[path = "delivery_tests.rs"]
mod tests;
