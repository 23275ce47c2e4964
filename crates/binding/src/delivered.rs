//! Every function call the gateway delivered to the guest, host tool or not (pure: no I/O).
//!
//! The host-tool [`crate::ledger`] admits MCP callbacks; this table answers the other question a
//! backend asks: is the tool call the guest wants permission for one the model really made and
//! the guest really received, and has it not been decided yet? Entries are made with the same
//! batch as the host-tool ledger's ([`crate::Delivery`] confirms or revokes both), keyed by the
//! model call id, and keep the exact arguments the gateway delivered.

use std::collections::HashMap;

use serde::Serialize;
use serde_json::Value;

/// One delivered call, as the gateway sent it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DeliveredCall {
    /// The id the guest received (the gateway's own, unique in the run).
    pub call_id: String,
    /// The model's id of the call (the upstream's; the delivered id when it gave none).
    pub model_call_id: String,
    /// The function name the guest received (e.g. `run_shell_command`, `mcp_switchyard_t`).
    pub tool: String,
    /// The exact arguments delivered (a host tool's private identity removed).
    pub arguments: Value,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Offered,
    Delivered,
    Revoked,
}

/// One entered call.
#[derive(Debug)]
struct Entry {
    call: DeliveredCall,
    batch: u64,
    state: State,
    /// What was decided for it already (the tools it was asked as).
    decided: std::collections::HashSet<String>,
}

/// Why a permission request does not name a pending delivered call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, thiserror::Error)]
#[serde(tag = "reason", rename_all = "snake_case")]
pub enum PermissionRefusal {
    #[error("no call {tool_call_id:?} was delivered to the guest: the model never made it")]
    NotDelivered { tool_call_id: String },
    #[error("the response carrying the call {call_id} has not been fully sent yet")]
    NotYetDelivered { call_id: String },
    #[error("the response carrying the call {call_id} never fully reached the guest")]
    Revoked { call_id: String },
    #[error("the call {call_id} was already decided")]
    AlreadyDecided { call_id: String },
}

impl PermissionRefusal {
    /// The refusal's name, as recorded.
    pub fn reason(&self) -> &'static str {
        match self {
            PermissionRefusal::NotDelivered { .. } => "not_delivered",
            PermissionRefusal::NotYetDelivered { .. } => "not_yet_delivered",
            PermissionRefusal::Revoked { .. } => "revoked",
            PermissionRefusal::AlreadyDecided { .. } => "already_decided",
        }
    }
}

/// How many of the latest batches keep their calls' arguments. The guest runs (and asks about)
/// a response's calls before it sends the next request, so older arguments are never needed
/// again; dropping them keeps a long run's table small (a `write_file` carries a whole file).
pub const BATCHES_WITH_ARGUMENTS: u64 = 8;

/// The delivered calls of one run.
#[derive(Debug, Default)]
pub struct DeliveredCalls {
    entries: HashMap<String, Entry>,
}

impl DeliveredCalls {
    /// Enters the calls of batch `batch` before their response is sent. A call id already
    /// entered is left as it was (the host-tool ledger refuses reused ids on its own). Calls of
    /// batches [`BATCHES_WITH_ARGUMENTS`] or more before it lose their arguments (`null`).
    pub fn offer(&mut self, batch: u64, calls: Vec<DeliveredCall>) {
        if let Some(oldest_kept) = batch.checked_sub(BATCHES_WITH_ARGUMENTS - 1) {
            for entry in self.entries.values_mut() {
                if entry.batch < oldest_kept && !entry.call.arguments.is_null() {
                    entry.call.arguments = Value::Null;
                }
            }
        }
        for call in calls {
            self.entries.entry(call.call_id.clone()).or_insert(Entry {
                call,
                batch,
                state: State::Offered,
                decided: std::collections::HashSet::new(),
            });
        }
    }

    fn settle(&mut self, batch: u64, to: State) {
        for entry in self.entries.values_mut() {
            if entry.batch == batch && entry.state == State::Offered {
                entry.state = to;
            }
        }
    }

    pub fn confirm(&mut self, batch: u64) {
        self.settle(batch, State::Delivered);
    }

    pub fn revoke(&mut self, batch: u64) {
        self.settle(batch, State::Revoked);
    }

    /// The delivered, undecided call a guest's tool call id names, marked decided. The guest
    /// names a call `<tool>__<call id>` (Gemini CLI's `toolCallId`); the id is accepted only if
    /// it is exactly that for a delivered call.
    pub fn decide(&mut self, tool_call_id: &str) -> Result<DeliveredCall, PermissionRefusal> {
        let named = tool_call_id
            .match_indices("__")
            .map(|(at, _)| (&tool_call_id[..at], &tool_call_id[at + 2..]))
            .find(|(tool, id)| self.entries.get(*id).is_some_and(|e| e.call.tool == *tool));
        match named {
            Some((tool, id)) => {
                let (tool, id) = (tool.to_owned(), id.to_owned());
                self.ask(&id, &tool)
            }
            None => Err(PermissionRefusal::NotDelivered {
                tool_call_id: tool_call_id.to_owned(),
            }),
        }
    }

    /// The delivered call `call_id`, when its response reached the guest whole and it was not
    /// decided as `key` yet (a call may be asked for under several permissions, each once);
    /// marks it decided as `key`.
    pub fn ask(&mut self, call_id: &str, key: &str) -> Result<DeliveredCall, PermissionRefusal> {
        let Some(entry) = self.entries.get_mut(call_id) else {
            return Err(PermissionRefusal::NotDelivered {
                tool_call_id: call_id.to_owned(),
            });
        };
        let call_id = entry.call.call_id.clone();
        match entry.state {
            State::Offered => Err(PermissionRefusal::NotYetDelivered { call_id }),
            State::Revoked => Err(PermissionRefusal::Revoked { call_id }),
            State::Delivered if !entry.decided.insert(key.to_owned()) => {
                Err(PermissionRefusal::AlreadyDecided { call_id })
            }
            State::Delivered => Ok(entry.call.clone()),
        }
    }

    /// Whether the call with this id reached the guest (its answer's last frame was handed to
    /// the connection), so a permission request may name it.
    pub fn confirmed(&self, call_id: &str) -> bool {
        self.entries
            .get(call_id)
            .is_some_and(|e| e.state == State::Delivered)
    }

    /// The delivered call with this id (any state but revoked) and its batch, for display.
    pub fn get(&self, call_id: &str) -> Option<(&DeliveredCall, u64)> {
        self.entries
            .get(call_id)
            .filter(|e| e.state != State::Revoked)
            .map(|e| (&e.call, e.batch))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn call(id: &str, tool: &str) -> DeliveredCall {
        DeliveredCall {
            call_id: id.into(),
            model_call_id: format!("model-{id}"),
            tool: tool.into(),
            arguments: json!({"command": "ls"}),
        }
    }

    #[test]
    fn a_delivered_call_is_decided_once_and_only_under_its_own_name() {
        let mut d = DeliveredCalls::default();
        d.offer(
            0,
            vec![call("c1", "run_shell_command"), call("c2", "write_file")],
        );
        assert_eq!(
            d.decide("run_shell_command__c1"),
            Err(PermissionRefusal::NotYetDelivered {
                call_id: "c1".into()
            })
        );
        d.confirm(0);
        // The right id under another tool's name is not the call.
        assert!(matches!(
            d.decide("write_file__c1"),
            Err(PermissionRefusal::NotDelivered { .. })
        ));
        assert_eq!(
            d.decide("run_shell_command__c1").unwrap().arguments,
            json!({"command": "ls"})
        );
        assert_eq!(
            d.decide("run_shell_command__c1").unwrap_err().reason(),
            "already_decided"
        );
        assert!(matches!(
            d.decide("run_shell_command__made_up"),
            Err(PermissionRefusal::NotDelivered { .. })
        ));
    }

    #[test]
    fn a_call_is_confirmed_only_once_its_answer_was_handed_over() {
        let mut d = DeliveredCalls::default();
        d.offer(0, vec![call("c1", "exec_command")]);
        d.offer(1, vec![call("c2", "exec_command")]);
        assert!(d.get("c1").is_some(), "an offered call is known");
        assert!(!d.confirmed("c1"), "but not yet confirmed");
        d.confirm(0);
        d.revoke(1);
        assert!(d.confirmed("c1"));
        assert!(!d.confirmed("c2"), "a revoked call never is");
        assert!(!d.confirmed("made_up"));
    }

    #[test]
    fn only_the_latest_batches_keep_their_arguments() {
        let mut d = DeliveredCalls::default();
        for batch in 0..=BATCHES_WITH_ARGUMENTS {
            d.offer(batch, vec![call(&format!("c{batch}"), "write_file")]);
            d.confirm(batch);
        }
        assert_eq!(d.get("c0").unwrap().0.arguments, Value::Null);
        assert_eq!(d.get("c1").unwrap().0.arguments, json!({"command": "ls"}));
        // The call itself is still known, and still decided only once.
        assert!(d.decide("write_file__c0").is_ok());
        assert!(d.decide("write_file__c0").is_err());
    }

    #[test]
    fn a_revoked_batch_is_never_decided_and_ids_with_underscores_resolve() {
        let mut d = DeliveredCalls::default();
        d.offer(3, vec![call("call__x", "mcp_switchyard_record")]);
        d.revoke(3);
        assert_eq!(
            d.decide("mcp_switchyard_record__call__x")
                .unwrap_err()
                .reason(),
            "revoked"
        );
        d.offer(4, vec![call("id_2", "mcp_switchyard_record")]);
        d.confirm(4);
        assert!(d.decide("mcp_switchyard_record__id_2").is_ok());
        assert!(d.get("call__x").is_none());
    }
}
