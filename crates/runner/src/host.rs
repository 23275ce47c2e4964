//! The host side of every agent's run: the gateway's delivered calls (for the event mappings
//! and the permission requests), and the unattended policy deciding each request on the exact
//! call the gateway delivered, once. A rejected host-tool call is revoked in the binding, so no
//! callback of it runs.

use switchyard_backend::permission::{PermissionAsk, PermissionHost, PermissionRuling};
use switchyard_binding::{Decision, HostBinding, Policy};
use switchyard_events::Delivered;

/// The policy over the run's binding. Without the gateway (`--guest-base-url`) nothing is known
/// to be delivered, so every request is refused.
pub(crate) struct PolicyHost {
    pub binding: Option<HostBinding>,
    pub policy: Policy,
}

impl PermissionHost for PolicyHost {
    fn delivered(&self, call_id: &str) -> Option<Delivered> {
        let (call, batch) = self.binding.as_ref()?.delivered_call(call_id)?;
        Some(Delivered {
            call_id: call.call_id,
            model_call_id: call.model_call_id,
            tool: call.tool,
            arguments: call.arguments,
            batch,
        })
    }

    fn confirmed(&self, call_id: &str) -> bool {
        self.binding
            .as_ref()
            .is_some_and(|b| b.delivery_confirmed(call_id))
    }

    fn permission(&self, ask: &PermissionAsk) -> Result<PermissionRuling, String> {
        let binding = self
            .binding
            .as_ref()
            .ok_or("no gateway: the run cannot tell which calls were delivered")?;
        let Some(call_id) = &ask.call_id else {
            return Err(format!(
                "no call {:?} was delivered to the guest: the model never made it",
                ask.named
            ));
        };
        let call = binding
            .ask_permission(call_id, &ask.tool)
            .map_err(|refusal| refusal.to_string())?;
        let host_tool = ask.own && binding.host_tool(&call.tool).is_some();
        let ruling = self
            .policy
            .decide_as(&ask.tool, &ask.category, &call.arguments, host_tool);
        let allow = ruling.decision == Decision::Allow;
        if !allow {
            // The guest is told not to run it; no callback of it may run either.
            binding.reject(&call.call_id);
        }
        Ok(PermissionRuling {
            call_id: call.call_id,
            model_call_id: call.model_call_id,
            tool: ask.tool.clone(),
            arguments: call.arguments,
            allow,
            rule: ruling.rule,
        })
    }
}
