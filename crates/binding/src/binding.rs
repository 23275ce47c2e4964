//! [`HostBinding`]: the host tools of one run, between the gateway (which delivers the model's
//! calls) and the MCP server (which receives the guest's callbacks).
//!
//! The gateway stamps every host-tool call it delivers with a fresh private identity
//! ([`IDENTITY_ARG`]) and enters the batch in the ledger ([`HostBinding::offer`]); the returned
//! [`Delivery`] confirms the batch once the response was fully sent and revokes it otherwise.
//! A callback ([`HostBinding::callback`]) is admitted only by the ledger, waits for the calls
//! before it in its batch to return (the model's order), then runs its host tool once. A call
//! the guest does not send within [`BindingLimits::batch_wait`] is abandoned, so it holds no
//! later call back; a call the permission policy rejected is never admitted
//! ([`HostBinding::reject`]); a repeated callback of a completed call (a guest's retry) gets the
//! result the tool returned, without running it again. Every decision and result becomes a
//! canonical event on the run's event channel.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use serde_json::{Map, Value};
use switchyard_events::Event;
use switchyard_events::event::{
    HostCall, HostDecision, HostImage, HostResult, ToolStatus, Warning,
};
use tokio::sync::{mpsc, watch};

use crate::delivered::{DeliveredCall, DeliveredCalls, PermissionRefusal};
use crate::ledger::{Admission, BatchTicket, CallState, Ledger, OfferError, OfferedCall, Refusal};

use crate::tool::{ToolError, ToolOutput, ToolRegistry};

/// The private argument that carries a delivered call's identity from the gateway, through the
/// guest, to the MCP callback. Each host tool's MCP schema declares it as an optional string;
/// the gateway removes it from everything that goes upstream and the binding removes it before
/// validation.
pub const IDENTITY_ARG: &str = switchyard_events::delivered::IDENTITY_ARG;

/// Refused callbacks whose arguments are kept in their event; later ones keep `null` (each
/// callback body is already bounded by the MCP server, their number is not).
pub const MAX_REFUSALS_WITH_ARGUMENTS: u64 = 256;

/// Results of completed calls kept to answer a repeated callback; older ones are forgotten
/// (a guest repeats a callback right after it failed to get the answer, never much later).
pub const KEPT_RESULTS: usize = 64;

/// How long waits inside a callback may last.
#[derive(Debug, Clone, Copy)]
pub struct BindingLimits {
    /// A callback whose call is entered but not yet confirmed (its response still being sent)
    /// waits this long for the confirmation.
    pub delivery_wait: Duration,
    /// A callback waits this long for the guest to send the host calls before it in its batch;
    /// one not sent by then is abandoned (recorded, never run) and the callback goes on. Calls
    /// already running are waited for until they return.
    pub batch_wait: Duration,
}

/// The default [`BindingLimits::batch_wait`]: a guest sends a batch's callbacks together
/// (Gemini CLI) or one after another as each returns (OpenCode), so a call still missing this
/// long after a later one arrived is one the guest skipped.
pub const DEFAULT_BATCH_WAIT: Duration = Duration::from_secs(10);

impl Default for BindingLimits {
    fn default() -> Self {
        Self {
            delivery_wait: Duration::from_secs(10),
            batch_wait: DEFAULT_BATCH_WAIT,
        }
    }
}

/// What a callback gets back.
#[derive(Debug)]
pub enum CallbackOutcome {
    /// Refused by admission: no host tool ran.
    Refused(Refusal),
    /// Admitted: the host tool's result or error (invalid arguments included: then it did not
    /// run).
    Ran(Result<ToolOutput, ToolError>),
}

/// What cleanup found (see [`HostBinding::drain`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DrainReport {
    /// Admitted callbacks still running when the drain deadline passed (model call ids).
    pub incomplete: Vec<String>,
}

struct Shared {
    registry: ToolRegistry,
    /// What the guest calls host tool `t`: `{guest_prefix}{t}`.
    guest_prefix: String,
    ledger: Mutex<Ledger>,
    /// Every delivered call, host tool or not (permission requests are checked against it).
    delivered: Mutex<DeliveredCalls>,
    next_delivery: std::sync::atomic::AtomicU64,
    /// Refused callbacks so far.
    refused: std::sync::atomic::AtomicU64,
    /// What the latest completed calls returned, by model call id (at most [`KEPT_RESULTS`]).
    results: Mutex<KeptResults>,
    /// Bumped on every ledger change a waiting callback may care about.
    changed: watch::Sender<u64>,
    events: mpsc::Sender<Event>,
    limits: BindingLimits,
}

/// The host tools of one run (cheap to clone; clones share the ledger).
#[derive(Clone)]
pub struct HostBinding {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for HostBinding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostBinding")
            .field("tools", &self.shared.registry)
            .field("guest_prefix", &self.shared.guest_prefix)
            .finish()
    }
}

/// A random identity: 244 random bits, never sent upstream.
fn fresh_identity() -> String {
    format!(
        "sy{}{}",
        uuid::Uuid::new_v4().simple(),
        uuid::Uuid::new_v4().simple()
    )
}

impl HostBinding {
    /// A binding of `registry`'s tools, which the guest names `{guest_prefix}{tool}`. Its events
    /// arrive on the returned receiver (a bounded queue: a run that stops reading them holds
    /// callbacks back, it loses none).
    pub fn new(
        registry: ToolRegistry,
        guest_prefix: impl Into<String>,
        limits: BindingLimits,
    ) -> (Self, mpsc::Receiver<Event>) {
        let (events, rx) = mpsc::channel(256);
        let shared = Shared {
            registry,
            guest_prefix: guest_prefix.into(),
            ledger: Mutex::new(Ledger::new()),
            delivered: Mutex::new(DeliveredCalls::default()),
            next_delivery: std::sync::atomic::AtomicU64::new(0),
            refused: std::sync::atomic::AtomicU64::new(0),
            results: Mutex::default(),
            changed: watch::channel(0).0,
            events,
            limits,
        };
        (
            Self {
                shared: Arc::new(shared),
            },
            rx,
        )
    }

    pub fn registry(&self) -> &ToolRegistry {
        &self.shared.registry
    }

    /// The host tool a guest-visible function name denotes, if any.
    pub fn host_tool(&self, guest_name: &str) -> Option<&str> {
        let tool = guest_name.strip_prefix(&self.shared.guest_prefix)?;
        self.shared.registry.get(tool).map(|t| t.name())
    }

    fn ledger(&self) -> MutexGuard<'_, Ledger> {
        // The ledger stays consistent across a panicking holder (each method is one step).
        self.shared
            .ledger
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn bump(&self) {
        self.shared.changed.send_modify(|v| *v = v.wrapping_add(1));
    }

    fn delivered(&self) -> MutexGuard<'_, DeliveredCalls> {
        self.shared
            .delivered
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Enters one model response's host-tool calls (model order) before it is sent; each gets
    /// a fresh identity to deliver with it ([`Delivery::identities`]).
    pub fn offer(&self, session: &str, calls: Vec<OfferedCall>) -> Result<Delivery, OfferError> {
        self.deliver(session, calls, Vec::new())
    }

    /// [`HostBinding::offer`] for the host-tool calls of a response, and enters `all` of its
    /// calls (host tools included) in the delivered-call table.
    pub fn deliver(
        &self,
        session: &str,
        host_calls: Vec<OfferedCall>,
        all: Vec<DeliveredCall>,
    ) -> Result<Delivery, OfferError> {
        let identities: Vec<String> = host_calls.iter().map(|_| fresh_identity()).collect();
        let ticket = if host_calls.is_empty() {
            None
        } else {
            let entries = host_calls
                .into_iter()
                .zip(identities.iter().cloned())
                .collect();
            Some(self.ledger().offer(session, entries)?)
        };
        let batch = self
            .shared
            .next_delivery
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.delivered().offer(batch, all);
        Ok(Delivery {
            binding: self.clone(),
            ticket,
            batch,
            identities,
            settled: false,
        })
    }

    /// The delivered, undecided call a guest's permission request names (`<tool>__<model call
    /// id>`), marked decided: a second request for it is refused.
    pub fn permission_for(&self, tool_call_id: &str) -> Result<DeliveredCall, PermissionRefusal> {
        self.delivered().decide(tool_call_id)
    }

    /// The delivered call `call_id`, for a permission request that asks for it as `key` (its
    /// tool, or another permission for it): refused when its response has not reached the
    /// guest whole, or when it was decided as `key` already.
    pub fn ask_permission(
        &self,
        call_id: &str,
        key: &str,
    ) -> Result<DeliveredCall, PermissionRefusal> {
        self.delivered().ask(call_id, key)
    }

    /// The permission policy rejected the delivered call `call_id`: when it is a host-tool
    /// call, no callback of it will ever run (the guest was told not to run it; a callback
    /// anyway, e.g. from the guest's shell with the identity read from its home, is refused).
    /// Returns whether a host-tool call was rejected.
    pub fn reject(&self, call_id: &str) -> bool {
        let rejected = self.ledger().reject(call_id);
        if rejected {
            self.bump();
        }
        rejected
    }

    /// Whether the call `call_id` is confirmed delivered (see `DeliveredCalls::confirmed`).
    pub fn delivery_confirmed(&self, call_id: &str) -> bool {
        self.delivered().confirmed(call_id)
    }

    /// The delivered call `call_id` and the number of the response that carried it, if
    /// it was delivered.
    pub fn delivered_call(&self, call_id: &str) -> Option<(DeliveredCall, u64)> {
        self.delivered()
            .get(call_id)
            .map(|(call, batch)| (call.clone(), batch))
    }

    /// Closes admission (cancellation, or the end of the run): every later callback is refused.
    pub fn close(&self) {
        self.ledger().close();
        self.bump();
    }

    /// Waits up to `deadline` for admitted callbacks to return; reports the ones that did not.
    pub async fn drain(&self, deadline: Duration) -> DrainReport {
        let mut changed = self.shared.changed.subscribe();
        let wait = async {
            loop {
                if self.ledger().running().is_empty() {
                    return;
                }
                if changed.changed().await.is_err() {
                    return;
                }
            }
        };
        let _ = tokio::time::timeout(deadline, wait).await;
        let incomplete = self.ledger().running();
        if !incomplete.is_empty() {
            // Not awaited: during cleanup nobody may be reading events yet.
            let _ = self.shared.events.try_send(Event::Warning(Warning {
                message: format!(
                    "cleanup incomplete: host calls still running after {deadline:?}: {}",
                    incomplete.join(", ")
                ),
                derived: true,
            }));
        }
        DrainReport { incomplete }
    }

    async fn emit(&self, event: Event) {
        // A closed receiver (the run stopped listening) loses nothing the callback needs.
        let _ = self.shared.events.send(event).await;
    }

    /// One MCP `tools/call` of host tool `tool`: admission, the model's order, then the tool.
    pub async fn callback(&self, tool: &str, arguments: Map<String, Value>) -> CallbackOutcome {
        self.callback_named(tool, arguments, None).await
    }

    /// [`HostBinding::callback`] for a guest that names the call it answers by its delivered
    /// call id (`guest_call_id`: Claude Code's `_meta["claudecode/toolUseId"]`, which is the
    /// gateway's `tool_use` id). The call's identity is then the one delivered with that call;
    /// an identity in the arguments too must be the same, or the callback is refused.
    pub async fn callback_named(
        &self,
        tool: &str,
        mut arguments: Map<String, Value>,
        guest_call_id: Option<&str>,
    ) -> CallbackOutcome {
        let carried = match arguments.remove(IDENTITY_ARG) {
            Some(Value::String(s)) => Some(s),
            _ => None,
        };
        let named = guest_call_id.map(|id| (id, self.ledger().identity_of(id)));
        let (identity, conflict) = match (carried, named) {
            (carried, None) => (carried, None),
            (None, Some((_, named))) => (named, None),
            (Some(carried), Some((id, named))) => {
                let conflict = (named.as_deref() != Some(carried.as_str())).then_some(id);
                (Some(carried), conflict)
            }
        };
        let arguments = Value::Object(arguments);
        let admitted = match conflict {
            Some(id) => Err(Refusal::WrongIdentity {
                tool: tool.to_owned(),
                call_id: id.to_owned(),
            }),
            None => self.admit(tool, &arguments, identity.as_deref()).await,
        };
        let admission = match admitted {
            Ok(admission) => admission,
            Err(Refusal::AlreadyClaimed { .. })
                if let Some(call) = self.same_call(identity.as_deref(), tool, &arguments) =>
            {
                return self.repeat(tool, &call, arguments).await;
            }
            Err(refusal) => {
                // A guest that keeps forging callbacks cannot grow the run's record without
                // bound: past the first refusals, their arguments are no longer kept.
                let refused = self
                    .shared
                    .refused
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let arguments = if refused < MAX_REFUSALS_WITH_ARGUMENTS {
                    arguments
                } else {
                    Value::Null
                };
                let model_call_id = refusal
                    .call_id()
                    .and_then(|id| self.ledger().model_call_id(id));
                self.emit(refused_event(tool, &refusal, model_call_id, arguments))
                    .await;
                return CallbackOutcome::Refused(refusal);
            }
        };
        self.emit(Event::HostCall(HostCall {
            tool: tool.to_owned(),
            decision: HostDecision::Admitted,
            model_call_id: Some(admission.model_call_id.clone()),
            call_id: Some(admission.call_id.clone()),
            batch: Some(admission.batch),
            position: Some(admission.position),
            arguments: arguments.clone(),
            reason: None,
            message: None,
        }))
        .await;
        self.await_turn(&admission).await;
        // The tool runs on its own task: a guest that drops the request mid-call does not
        // cancel a host operation halfway, and its end is still recorded.
        let this = self.clone();
        let name = tool.to_owned();
        let ids = (admission.call_id.clone(), admission.model_call_id.clone());
        let task = tokio::spawn(async move {
            let result = this.shared.registry.call(&name, arguments).await;
            this.keep_result(&ids.0, &result);
            this.ledger().complete(&ids.0);
            this.bump();
            this.emit(Event::HostResult(host_result(&name, &ids, &result)))
                .await;
            result
        });
        match task.await {
            Ok(result) => CallbackOutcome::Ran(result),
            Err(e) => {
                // The tool panicked: its call stays claimed (never run twice) and is completed,
                // and its end is recorded like any other.
                self.ledger().complete(&admission.call_id);
                self.bump();
                let result = Err(ToolError::Failed(format!("the host tool failed: {e}")));
                self.keep_result(&admission.call_id, &result);
                let ids = (admission.call_id.clone(), admission.model_call_id.clone());
                self.emit(Event::HostResult(host_result(tool, &ids, &result)))
                    .await;
                CallbackOutcome::Ran(result)
            }
        }
    }

    /// Claims the call `identity` names; a call whose response is still being sent is waited
    /// for (up to [`BindingLimits::delivery_wait`]).
    async fn admit(
        &self,
        tool: &str,
        arguments: &Value,
        identity: Option<&str>,
    ) -> Result<Admission, Refusal> {
        let mut changed = self.shared.changed.subscribe();
        let deadline = tokio::time::Instant::now() + self.shared.limits.delivery_wait;
        loop {
            let claimed = self.ledger().claim(tool, arguments, identity);
            match claimed {
                Err(Refusal::NotYetDelivered { .. })
                    if tokio::time::timeout_at(deadline, changed.changed())
                        .await
                        .is_ok_and(|r| r.is_ok()) => {}
                other => {
                    if other.is_ok() {
                        self.bump();
                    }
                    return other;
                }
            }
        }
    }

    /// Waits until every host call before `admission` in its batch has returned. A call the
    /// guest has not sent by the batch wait is abandoned (recorded; it will never run), so it
    /// holds nothing back; calls already running are waited for.
    async fn await_turn(&self, admission: &Admission) {
        let mut changed = self.shared.changed.subscribe();
        let deadline = tokio::time::Instant::now() + self.shared.limits.batch_wait;
        let mut past_deadline = false;
        loop {
            let earlier = self
                .ledger()
                .earlier_in_batch(admission.batch, admission.position);
            if earlier.iter().all(|(_, state)| state.is_settled()) {
                return;
            }
            if past_deadline {
                let unsent: Vec<String> = earlier
                    .into_iter()
                    .filter(|(_, state)| matches!(state, CallState::Offered | CallState::Delivered))
                    .map(|(id, _)| id)
                    .collect();
                for id in unsent {
                    if self.ledger().abandon(&id) {
                        self.bump();
                        let model = self.ledger().model_call_id(&id).unwrap_or_default();
                        self.emit(Event::Warning(Warning {
                            message: format!(
                                "host call {model} (delivered as {id}) abandoned: the guest did \
                                 not send it within {:?} while the later call {} of its batch \
                                 waited; it will not run",
                                self.shared.limits.batch_wait, admission.model_call_id
                            ),
                            derived: true,
                        }))
                        .await;
                    }
                }
                // Only running calls are left: their end is the next change.
                if changed.changed().await.is_err() {
                    return;
                }
                continue;
            }
            let waited = tokio::time::timeout_at(deadline, changed.changed()).await;
            match waited {
                Ok(Ok(())) => {}
                Ok(Err(_)) => return,
                Err(_) => past_deadline = true,
            }
        }
    }

    /// The call `identity` names, when it is a call of `tool` with these arguments (a repeated
    /// callback).
    fn same_call(
        &self,
        identity: Option<&str>,
        tool: &str,
        arguments: &Value,
    ) -> Option<OfferedCall> {
        let ledger = self.ledger();
        identity
            .and_then(|identity| ledger.named(identity))
            .filter(|(call, _)| {
                call.tool == tool && crate::values::same_value(&call.arguments, arguments)
            })
            .map(|(call, _)| call.clone())
    }

    fn keep_result(&self, call_id: &str, result: &Result<ToolOutput, ToolError>) {
        self.shared
            .results
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .keep(call_id, result.clone());
    }

    /// A repeated callback of the claimed `call` (a guest retrying after it lost the answer):
    /// once the call has returned, its result, without running the tool again.
    async fn repeat(&self, tool: &str, call: &OfferedCall, arguments: Value) -> CallbackOutcome {
        let call_id = call.call_id.as_str();
        let mut changed = self.shared.changed.subscribe();
        while self.ledger().state(call_id) == Some(CallState::Claimed) {
            if changed.changed().await.is_err() {
                break;
            }
        }
        let kept = self
            .shared
            .results
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(call_id);
        let Some(result) = kept else {
            let refusal = Refusal::AlreadyClaimed {
                tool: tool.to_owned(),
                call_id: call_id.to_owned(),
            };
            let model_call_id = Some(call.model_call_id.clone());
            self.emit(refused_event(tool, &refusal, model_call_id, arguments))
                .await;
            return CallbackOutcome::Refused(refusal);
        };
        self.emit(Event::HostCall(HostCall {
            tool: tool.to_owned(),
            decision: HostDecision::Repeated,
            model_call_id: Some(call.model_call_id.clone()),
            call_id: Some(call_id.to_owned()),
            batch: None,
            position: None,
            arguments,
            reason: Some("repeated".to_owned()),
            message: Some(
                "a repeated callback of a completed call: answered with the result it \
                 returned; the tool did not run again"
                    .to_owned(),
            ),
        }))
        .await;
        CallbackOutcome::Ran(result)
    }
}

/// The event of a refused callback (`model_call_id`: the model's id of the call its identity
/// named, if it named one).
fn refused_event(
    tool: &str,
    refusal: &Refusal,
    model_call_id: Option<String>,
    arguments: Value,
) -> Event {
    Event::HostCall(HostCall {
        tool: tool.to_owned(),
        decision: HostDecision::Refused,
        model_call_id,
        call_id: refusal.call_id().map(str::to_owned),
        batch: None,
        position: None,
        arguments,
        reason: Some(refusal.reason().to_owned()),
        message: Some(refusal.to_string()),
    })
}

/// The latest completed calls' results, oldest first out.
#[derive(Default)]
struct KeptResults {
    order: VecDeque<String>,
    results: HashMap<String, Result<ToolOutput, ToolError>>,
}

impl KeptResults {
    fn keep(&mut self, call_id: &str, result: Result<ToolOutput, ToolError>) {
        if self.results.insert(call_id.to_owned(), result).is_none() {
            self.order.push_back(call_id.to_owned());
        }
        while self.order.len() > KEPT_RESULTS {
            if let Some(oldest) = self.order.pop_front() {
                self.results.remove(&oldest);
            }
        }
    }

    fn get(&self, call_id: &str) -> Option<Result<ToolOutput, ToolError>> {
        self.results.get(call_id).cloned()
    }
}

/// The result event of a call; `ids`: its delivered and model ids.
fn host_result(
    tool: &str,
    ids: &(String, String),
    result: &Result<ToolOutput, ToolError>,
) -> HostResult {
    let (status, text, images) = match result {
        Ok(output) => (
            ToolStatus::Success,
            output.text.clone(),
            output
                .images
                .iter()
                .map(|i| HostImage {
                    mime_type: i.mime_type.clone(),
                    base64_len: i.data.len(),
                })
                .collect(),
        ),
        Err(e) => (ToolStatus::Error, e.to_string(), Vec::new()),
    };
    HostResult {
        tool: tool.to_owned(),
        model_call_id: ids.1.clone(),
        call_id: Some(ids.0.clone()),
        status,
        text,
        images,
    }
}

/// One entered batch, until it is confirmed ([`Delivery::confirm`]); dropped unconfirmed, it is
/// revoked.
#[must_use = "a delivery is revoked when dropped unconfirmed"]
pub struct Delivery {
    binding: HostBinding,
    /// The host-tool ledger's batch, when the response calls host tools.
    ticket: Option<BatchTicket>,
    /// The delivered-call table's batch.
    batch: u64,
    identities: Vec<String>,
    settled: bool,
}

impl std::fmt::Debug for Delivery {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Delivery")
            .field("batch", &self.batch)
            .field("calls", &self.identities.len())
            .finish()
    }
}

impl Delivery {
    /// The identity to deliver with each offered call, in order.
    pub fn identities(&self) -> &[String] {
        &self.identities
    }

    /// The response carrying the batch was fully sent.
    pub fn confirm(mut self) {
        self.settled = true;
        if let Some(ticket) = self.ticket {
            self.binding.ledger().confirm(ticket);
        }
        self.binding.delivered().confirm(self.batch);
        self.binding.bump();
    }
}

impl Drop for Delivery {
    fn drop(&mut self) {
        if !self.settled {
            if let Some(ticket) = self.ticket {
                self.binding.ledger().revoke(ticket);
            }
            self.binding.delivered().revoke(self.batch);
            self.binding.bump();
        }
    }
}

/// Adds the optional identity property to a host tool's argument schema (the guest sees this
/// schema; the model never does).
pub fn schema_with_identity(schema: &Value) -> Value {
    let mut schema = schema.clone();
    if let Some(object) = schema.as_object_mut() {
        let properties = object
            .entry("properties")
            .or_insert_with(|| Value::Object(Map::new()));
        if let Some(properties) = properties.as_object_mut() {
            properties.insert(
                IDENTITY_ARG.to_owned(),
                serde_json::json!({
                    "type": "string",
                    "description": "Set by Switchyard; leave it out."
                }),
            );
        }
    }
    schema
}

#[cfg(test)]
#[path = "binding_tests.rs"]
mod tests;
