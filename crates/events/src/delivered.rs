//! What the host's gateway delivered: a call as the guest received it. Mappings use it to name
//! a call by the model's own id and to give a call the exact arguments the guest got (ACP and
//! OpenCode events carry none, or the guest's re-encoding). A backend looks each call up when
//! the guest names it and hands the answer to the mapping as a note, so a recorded transcript
//! replays to the same events.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The argument the gateway adds to every host-tool call it delivers: the call's private
/// identity, which the guest passes back unchanged (see the binding).
pub const IDENTITY_ARG: &str = "_switchyard_call";

/// A call the gateway delivered, as it sent it. Derived: the host's own record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Delivered {
    /// The id the guest received (the gateway's own, unique in the run).
    pub call_id: String,
    /// The model's id of the call (the upstream's; the delivered id when it gave none).
    pub model_call_id: String,
    /// The function name the guest received.
    pub tool: String,
    /// The exact arguments.
    pub arguments: Value,
    /// The response (model batch) that carried it, numbered per run.
    pub batch: u64,
}
