//! [`CallLedger`]: per-session bookkeeping of delivered function-call ids (pure, no I/O).
//!
//! The gateway keeps one ledger per guest session. After a turn completes it registers the ids it
//! delivered ([`CallLedger::register_delivered`]; a reused id is an error). Before translating the
//! next request it checks that every `functionResponse.id` answers a delivered call
//! ([`CallLedger::check_request`]). For a session resumed from disk (history the ledger never saw),
//! [`CallLedger::adopt_history`] registers the `functionCall` ids already in the history.
//!
//! The ids the gateway delivers are its own ([`crate::ResponseConfig::mint_call_ids`]); the
//! ledger remembers which upstream id each stands for ([`CallLedger::register_turn`]), so later
//! requests' history carries the upstream's own ids again ([`CallLedger::upstream_id`]). Only an
//! upstream id that is unique in the session is remembered: an upstream that restarts its ids
//! every turn (`call_0` each time) sees the gateway's ids for the repeats, so its history never
//! holds one id twice.

use std::collections::{HashMap, HashSet};

use crate::google::GenerateContentRequest;
use crate::turn::ToolCall;

/// Most upstream ids a session remembers; past it, later calls' history carries the gateway's
/// ids (an upstream accepts any id it is given back).
pub const MAX_UPSTREAM_IDS: usize = 65_536;

/// Ledger errors.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LedgerError {
    /// The id was already delivered earlier in this session.
    #[error("function call id {0:?} was already used in this session")]
    ReusedId(String),
    /// The id appears twice in one batch.
    #[error("function call id {0:?} appears twice in one turn")]
    DuplicateInTurn(String),
    /// A functionResponse answers an id that was never delivered.
    #[error("functionResponse at `{path}` answers id {id:?}, which this session never delivered")]
    UnknownResponseId {
        /// JSON path.
        path: String,
        /// The id.
        id: String,
    },
    /// A Chat Completions tool message answers a call id that was never delivered.
    #[error("tool message at `{path}` answers call {id:?}, which this session never delivered")]
    UnknownToolCallId {
        /// JSON path of its `tool_call_id`.
        path: String,
        /// The id.
        id: String,
    },
    /// A functionResponse without id (Gemini CLI always sends one).
    #[error("functionResponse at `{path}` has no id")]
    MissingResponseId {
        /// JSON path.
        path: String,
    },
}

/// Set of function-call ids delivered to the guest in one session.
#[derive(Debug, Clone, Default)]
pub struct CallLedger {
    delivered: HashSet<String>,
    order: Vec<String>,
    /// Delivered id → the upstream's id of the call.
    upstream: HashMap<String, String>,
    /// The upstream ids seen in the session (remembered or not).
    upstream_seen: HashSet<String>,
}

impl CallLedger {
    /// Empty ledger.
    pub fn new() -> Self {
        Self::default()
    }

    /// Registers ids delivered in one turn. All-or-nothing: on error nothing is registered.
    pub fn register_delivered<I, S>(&mut self, ids: I) -> Result<(), LedgerError>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let ids: Vec<String> = ids.into_iter().map(|s| s.as_ref().to_string()).collect();
        let mut batch = HashSet::new();
        for id in &ids {
            if self.delivered.contains(id) {
                return Err(LedgerError::ReusedId(id.clone()));
            }
            if !batch.insert(id.as_str()) {
                return Err(LedgerError::DuplicateInTurn(id.clone()));
            }
        }
        for id in ids {
            self.delivered.insert(id.clone());
            self.order.push(id);
        }
        Ok(())
    }

    /// Registers the calls of one delivered turn ([`CallLedger::register_delivered`] of their
    /// ids) and remembers the upstream id of each call whose upstream id is new to the session
    /// and unique in the turn.
    pub fn register_turn(&mut self, calls: &[ToolCall]) -> Result<(), LedgerError> {
        self.register_delivered(calls.iter().map(|c| c.id.as_str()))?;
        let mut in_turn: HashMap<&str, usize> = HashMap::new();
        for upstream in calls.iter().filter_map(|c| c.upstream_id.as_deref()) {
            *in_turn.entry(upstream).or_default() += 1;
        }
        for call in calls {
            let Some(upstream) = call.upstream_id.as_deref() else {
                continue;
            };
            let fresh = self.upstream_seen.insert(upstream.to_owned());
            if fresh && in_turn.get(upstream) == Some(&1) && self.upstream.len() < MAX_UPSTREAM_IDS
            {
                self.upstream.insert(call.id.clone(), upstream.to_owned());
            }
        }
        Ok(())
    }

    /// The upstream's own id of the delivered call `id`, when the ledger remembers one.
    pub fn upstream_id(&self, id: &str) -> Option<&str> {
        self.upstream.get(id).map(String::as_str)
    }

    /// Whether `id` was delivered.
    pub fn contains(&self, id: &str) -> bool {
        self.delivered.contains(id)
    }

    /// Would any of these ids be a reuse? (Check before forwarding a turn.)
    pub fn check_fresh<'a>(
        &self,
        ids: impl IntoIterator<Item = &'a str>,
    ) -> Result<(), LedgerError> {
        let mut batch = HashSet::new();
        for id in ids {
            if self.delivered.contains(id) {
                return Err(LedgerError::ReusedId(id.to_string()));
            }
            if !batch.insert(id) {
                return Err(LedgerError::DuplicateInTurn(id.to_string()));
            }
        }
        Ok(())
    }

    /// Delivered ids in delivery order.
    pub fn delivered(&self) -> &[String] {
        &self.order
    }

    /// Number of delivered ids.
    pub fn len(&self) -> usize {
        self.order.len()
    }

    /// No ids yet.
    pub fn is_empty(&self) -> bool {
        self.order.is_empty()
    }

    /// Checks that every `functionResponse` in the request carries an id this session delivered.
    pub fn check_request(&self, req: &GenerateContentRequest) -> Result<(), LedgerError> {
        for (ci, content) in req.contents.iter().enumerate() {
            for (pi, part) in content.parts.iter().enumerate() {
                if let Some(resp) = &part.function_response {
                    let path = format!("contents[{ci}].parts[{pi}].functionResponse");
                    match &resp.id {
                        None => return Err(LedgerError::MissingResponseId { path }),
                        Some(id) if !self.delivered.contains(id) => {
                            return Err(LedgerError::UnknownResponseId {
                                path,
                                id: id.clone(),
                            });
                        }
                        Some(_) => {}
                    }
                }
            }
        }
        Ok(())
    }

    /// Checks that every answered call id (with the path it is at) was delivered.
    pub fn check_answers<'a>(
        &self,
        answers: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> Result<(), LedgerError> {
        for (id, path) in answers {
            if !self.delivered.contains(id) {
                return Err(LedgerError::UnknownToolCallId {
                    path: path.to_string(),
                    id: id.to_string(),
                });
            }
        }
        Ok(())
    }

    /// Remembers `upstream` as the upstream id of the delivered call `id` (one a sealed id
    /// carried), within [`MAX_UPSTREAM_IDS`]; a known mapping stays.
    pub fn adopt_upstream(&mut self, id: &str, upstream: &str) {
        if self.upstream.len() < MAX_UPSTREAM_IDS && !self.upstream.contains_key(id) {
            self.upstream_seen.insert(upstream.to_owned());
            self.upstream.insert(id.to_owned(), upstream.to_owned());
        }
    }

    /// Registers the given call ids of a history the ledger never saw (a resumed session);
    /// returns how many were new.
    pub fn adopt_ids<'a>(&mut self, ids: impl IntoIterator<Item = &'a str>) -> usize {
        let mut adopted = 0;
        for id in ids {
            if self.delivered.insert(id.to_string()) {
                self.order.push(id.to_string());
                adopted += 1;
            }
        }
        adopted
    }

    /// Registers every `functionCall.id` found in the request history that is not yet known
    /// (for sessions resumed from disk). Returns how many ids were adopted.
    pub fn adopt_history(&mut self, req: &GenerateContentRequest) -> usize {
        let mut adopted = 0;
        for content in &req.contents {
            for part in &content.parts {
                if let Some(id) = part.function_call.as_ref().and_then(|c| c.id.as_ref())
                    && self.delivered.insert(id.clone())
                {
                    self.order.push(id.clone());
                    adopted += 1;
                }
            }
        }
        adopted
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn request(body: serde_json::Value) -> GenerateContentRequest {
        serde_json::from_value(body).unwrap()
    }

    #[test]
    fn reused_ids_are_rejected_atomically() {
        let mut ledger = CallLedger::new();
        ledger.register_delivered(["a", "b"]).unwrap();
        assert_eq!(
            ledger.register_delivered(["c", "a"]),
            Err(LedgerError::ReusedId("a".into()))
        );
        assert!(
            !ledger.contains("c"),
            "failed batch must not register anything"
        );
        assert_eq!(
            ledger.register_delivered(["d", "d"]),
            Err(LedgerError::DuplicateInTurn("d".into()))
        );
        assert_eq!(
            ledger.check_fresh(["b"]),
            Err(LedgerError::ReusedId("b".into()))
        );
        assert_eq!(ledger.delivered(), ["a", "b"]);
    }

    #[test]
    fn responses_must_answer_delivered_ids() {
        let mut ledger = CallLedger::new();
        ledger.register_delivered(["call_1"]).unwrap();
        let ok = request(json!({"contents": [{"role": "user", "parts": [
            {"functionResponse": {"id": "call_1", "name": "f", "response": {}}}]}]}));
        assert_eq!(ledger.check_request(&ok), Ok(()));
        let unknown = request(json!({"contents": [{"role": "user", "parts": [
            {"functionResponse": {"id": "call_9", "name": "f", "response": {}}}]}]}));
        assert!(
            matches!(ledger.check_request(&unknown), Err(LedgerError::UnknownResponseId { ref id, .. }) if id == "call_9")
        );
        let missing = request(json!({"contents": [{"role": "user", "parts": [
            {"functionResponse": {"name": "f", "response": {}}}]}]}));
        assert!(matches!(
            ledger.check_request(&missing),
            Err(LedgerError::MissingResponseId { .. })
        ));
    }

    #[test]
    fn resumed_history_can_be_adopted() {
        let mut ledger = CallLedger::new();
        let req = request(json!({"contents": [
            {"role": "model", "parts": [{"functionCall": {"id": "old_1", "name": "f"}}]},
            {"role": "user", "parts": [{"functionResponse": {"id": "old_1", "name": "f", "response": {}}}]}]}));
        assert!(ledger.check_request(&req).is_err());
        assert_eq!(ledger.adopt_history(&req), 1);
        assert_eq!(ledger.adopt_history(&req), 0);
        assert_eq!(ledger.check_request(&req), Ok(()));
        assert!(ledger.register_delivered(["old_1"]).is_err());
    }

    fn call(id: &str, upstream: Option<&str>) -> ToolCall {
        ToolCall {
            id: id.into(),
            upstream_id: upstream.map(str::to_owned),
            kind: crate::turn::CallKind::Function,
            namespace: None,
            name: "f".into(),
            arguments: json!({}),
            signature: None,
        }
    }

    #[test]
    fn upstream_ids_are_remembered_only_when_unique_in_the_session() {
        let mut ledger = CallLedger::new();
        ledger
            .register_turn(&[call("g1", Some("call_0")), call("g2", None)])
            .unwrap();
        // The next turn restarts at call_0, and repeats an id within the turn.
        ledger
            .register_turn(&[
                call("g3", Some("call_0")),
                call("g4", Some("dup")),
                call("g5", Some("dup")),
                call("g6", Some("call_9")),
            ])
            .unwrap();
        assert_eq!(ledger.upstream_id("g1"), Some("call_0"));
        assert_eq!(ledger.upstream_id("g2"), None);
        assert_eq!(ledger.upstream_id("g3"), None, "call_0 is g1's");
        assert_eq!(ledger.upstream_id("g4"), None);
        assert_eq!(ledger.upstream_id("g5"), None);
        assert_eq!(ledger.upstream_id("g6"), Some("call_9"));
        assert!(ledger.contains("g5"));
        // The gateway's own ids are never reused.
        assert!(ledger.register_turn(&[call("g1", Some("x"))]).is_err());
    }

    #[test]
    fn chat_answers_must_name_delivered_or_adopted_ids() {
        let mut ledger = CallLedger::new();
        ledger.register_delivered(["call_1"]).unwrap();
        assert_eq!(ledger.check_answers([("call_1", "messages[3]")]), Ok(()));
        assert_eq!(
            ledger.check_answers([("call_1", "m[3]"), ("call_2", "m[5]")]),
            Err(LedgerError::UnknownToolCallId {
                path: "m[5]".into(),
                id: "call_2".into()
            })
        );
        assert_eq!(ledger.adopt_ids(["call_1", "call_2"]), 1);
        assert_eq!(ledger.check_answers([("call_2", "m[5]")]), Ok(()));
    }
}
