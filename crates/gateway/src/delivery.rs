//! Calls in the gateway's answers: each call of a host tool in a completed turn gets a fresh
//! private identity in its arguments, and every call of the batch is entered in the run's binding
//! before the answer is sent ([`stamp`]). The answer's body holds the [`Delivery`] ([`DeliverySlot`]):
//! the batch is confirmed when the body has handed its last byte to the guest's connection, and
//! revoked when the body is dropped before that (a cut or failed send).

use std::sync::{Arc, Mutex};

use switchyard_binding::{
    DeliveredCall, Delivery, HostBinding, IDENTITY_ARG, OfferError, OfferedCall,
};
use switchyard_translate::google::GenerateContentResponse;

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
/// `None` when the chunk calls no function. Arguments the model itself put under the identity's
/// name are replaced.
pub(crate) fn stamp(
    binding: &HostBinding,
    session: &str,
    chunk: &mut GenerateContentResponse,
) -> Result<Option<Delivery>, OfferError> {
    let mut host_calls = Vec::new();
    let mut offered = Vec::new();
    let mut all = Vec::new();
    let calls = chunk
        .candidates
        .iter_mut()
        .flat_map(|c| c.content.parts.iter_mut())
        .filter_map(|p| p.function_call.as_mut());
    for call in calls {
        let model_call_id = call.id.clone().unwrap_or_default();
        let Some(tool) = binding.host_tool(&call.name) else {
            all.push(DeliveredCall {
                model_call_id,
                tool: call.name.clone(),
                arguments: call.args.clone().unwrap_or_else(|| serde_json::json!({})),
            });
            continue;
        };
        let args = call.args.get_or_insert_with(|| serde_json::json!({}));
        if let Some(object) = args.as_object_mut() {
            object.remove(IDENTITY_ARG);
        }
        all.push(DeliveredCall {
            model_call_id: model_call_id.clone(),
            tool: call.name.clone(),
            arguments: args.clone(),
        });
        offered.push(OfferedCall {
            model_call_id,
            tool: tool.to_owned(),
            arguments: args.clone(),
        });
        host_calls.push(call);
    }
    if all.is_empty() {
        return Ok(None);
    }
    let delivery = binding.deliver(session, offered, all)?;
    for (call, identity) in host_calls.into_iter().zip(delivery.identities()) {
        if let Some(object) = call.args.as_mut().and_then(|a| a.as_object_mut()) {
            object.insert(IDENTITY_ARG.to_owned(), identity.clone().into());
        }
    }
    Ok(Some(delivery))
}

#[cfg(test)]
#[path = "delivery_tests.rs"]
mod tests;
