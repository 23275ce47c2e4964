//! The host's answer to a guest's permission request, as every backend reports it.

use serde_json::Value;

/// A permission decision on a delivered call.
#[derive(Debug, Clone, PartialEq)]
pub struct PermissionRuling {
    /// The id the call was delivered with (the gateway's own).
    pub call_id: String,
    /// The model's own id of the call.
    pub model_call_id: String,
    pub tool: String,
    /// The exact arguments the gateway delivered.
    pub arguments: Value,
    pub allow: bool,
    /// The rule that decided.
    pub rule: String,
}
