//! The host side of a run, as every backend asks it: what the gateway delivered, and the
//! unattended permission policy's answer for a delivered call.

use serde_json::Value;
use switchyard_events::{Delivered, ToolCategory};

/// A permission decision on a delivered call.
#[derive(Debug, Clone, PartialEq)]
pub struct PermissionRuling {
    /// The id the call was delivered with (the gateway's own).
    pub call_id: String,
    /// The model's own id of the call.
    pub model_call_id: String,
    /// The tool it was decided as.
    pub tool: String,
    /// The exact arguments the gateway delivered.
    pub arguments: Value,
    pub allow: bool,
    /// The rule that decided.
    pub rule: String,
}

/// One permission request, as the agent's controller read it.
#[derive(Debug, Clone, PartialEq)]
pub struct PermissionAsk {
    /// How the guest named the call (ACP: `<tool>__<id>`; OpenCode: the call's id), for
    /// refusals.
    pub named: String,
    /// The delivered call it names, when the controller found one.
    pub call_id: Option<String>,
    /// What to decide: the delivered call's own tool, or (`own` false) another permission the
    /// guest asks for the call (OpenCode's `external_directory`), decided as a tool of that
    /// name, which only an explicit rule allows.
    pub tool: String,
    pub category: ToolCategory,
    pub own: bool,
    /// What the guest showed of the request besides the call (OpenCode's `metadata`; `null`
    /// over ACP).
    pub details: Value,
}

/// The host side of a run. Each request is decided once: a second request for the same call
/// and tool is refused.
pub trait PermissionHost: Send + Sync + 'static {
    /// The call the gateway delivered under `call_id`.
    fn delivered(&self, call_id: &str) -> Option<Delivered>;
    /// Whether the call `call_id` is confirmed to have reached the guest (a permission request
    /// for a call still on its way is refused); by default, whether it is known at all.
    fn confirmed(&self, call_id: &str) -> bool {
        self.delivered(call_id).is_some()
    }
    /// Decides `ask`; `Err` says why it is not a pending delivered call (answered as a refusal
    /// or a reject).
    fn permission(&self, ask: &PermissionAsk) -> Result<PermissionRuling, String>;
}

/// How long a permission request for a call still on its way waits for the gateway to confirm
/// its delivery: a guest may act on a call as soon as its part of the answer arrives, before
/// the answer's last frame was handed over.
pub const DELIVERY_WAIT: std::time::Duration = std::time::Duration::from_secs(3);

/// Waits (up to [`DELIVERY_WAIT`]) until `host` confirms it delivered `call_id`. A call it
/// does not know (never offered, or revoked) is not waited for: nothing will confirm it.
pub async fn await_confirmed(host: &dyn PermissionHost, call_id: &str) {
    if host.delivered(call_id).is_none() {
        return;
    }
    let deadline = tokio::time::Instant::now() + DELIVERY_WAIT;
    while !host.confirmed(call_id) && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
}

/// A run without a gateway: nothing is known to be delivered, every request is refused.
#[derive(Debug, Default)]
pub struct NoHost;

impl PermissionHost for NoHost {
    fn delivered(&self, _: &str) -> Option<Delivered> {
        None
    }

    fn permission(&self, _: &PermissionAsk) -> Result<PermissionRuling, String> {
        Err("no gateway: the run cannot tell which calls were delivered".to_owned())
    }
}
