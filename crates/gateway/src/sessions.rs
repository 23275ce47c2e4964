//! The call-id ledgers of the gateway's sessions, by session id (the `x-switchyard-session`
//! header, else `default`). Bounded: at most [`MAX_SESSIONS`] ledgers, the least recently used
//! one forgotten first, and a session id is at most [`MAX_SESSION_ID`] bytes, so no stream of
//! header values can grow the gateway's memory.

use std::sync::{Mutex, PoisonError};

use hashlink::LruCache;
use switchyard_translate::CallLedger;

/// Most sessions remembered at once.
pub const MAX_SESSIONS: usize = 1_024;

/// Longest session id accepted (longer: the request is refused).
pub const MAX_SESSION_ID: usize = 128;

/// Ledgers by session id, least recently used forgotten first.
#[derive(Debug)]
pub(crate) struct Sessions {
    ledgers: Mutex<LruCache<String, CallLedger>>,
}

impl Sessions {
    pub fn new(capacity: usize) -> Self {
        Self {
            ledgers: Mutex::new(LruCache::new(capacity.max(1))),
        }
    }

    /// Runs `f` on the session's ledger; a session seen for the first time gets `first()`.
    /// A panic elsewhere while the lock was held leaves the ledgers usable (no poisoning).
    pub fn with<T>(
        &self,
        session: &str,
        first: impl FnOnce() -> CallLedger,
        f: impl FnOnce(&mut CallLedger) -> T,
    ) -> T {
        let mut ledgers = self.ledgers.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(ledger) = ledgers.get_mut(session) {
            return f(ledger);
        }
        let mut ledger = first();
        let answer = f(&mut ledger);
        ledgers.insert(session.to_string(), ledger);
        answer
    }

    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.ledgers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }
}

/// Ids of a guest's history that `ledger` does not know but `call_ids` opens for `session`
/// (another replica delivered them, or this gateway before it forgot the session) are entered
/// as delivered, and the upstream id a seal carries is remembered in the ledger, so each id is
/// opened once; returns the upstream id each history id goes back as: the ledger's, else the
/// one its seal carries, each upstream id given to one delivered id only (the first).
pub(crate) fn adopt_and_map<'a>(
    call_ids: &crate::call_ids::CallIds,
    session: &str,
    ledger: &mut CallLedger,
    ids: impl IntoIterator<Item = &'a str>,
) -> std::collections::HashMap<String, String> {
    let mut mapped = std::collections::HashMap::new();
    let mut seen = std::collections::HashSet::new();
    let mut taken = std::collections::HashSet::new();
    for id in ids {
        // A call and its output name one id: looked at once.
        if !seen.insert(id) {
            continue;
        }
        if ledger.upstream_id(id).is_none()
            && let Some(carried) = call_ids.open(session, id)
        {
            if !ledger.contains(id) {
                ledger.adopt_ids([id]);
            }
            if let Some(upstream) = carried {
                ledger.adopt_upstream(id, &upstream);
            }
        }
        if let Some(upstream) = ledger.upstream_id(id)
            && taken.insert(upstream.to_owned())
        {
            mapped.insert(id.to_owned(), upstream.to_owned());
        }
    }
    mapped
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sessions_are_bounded_and_the_least_recently_used_is_forgotten() {
        let sessions = Sessions::new(3);
        for id in ["a", "b", "c"] {
            sessions.with(id, CallLedger::new, |l| {
                l.register_delivered([format!("call-{id}")]).unwrap()
            });
        }
        // `a` is used again, so `b` is the oldest when `d` arrives.
        assert!(sessions.with("a", CallLedger::new, |l| l.contains("call-a")));
        sessions.with("d", CallLedger::new, |_| ());
        assert_eq!(sessions.len(), 3);
        assert!(!sessions.with("b", CallLedger::new, |l| l.contains("call-b")));
        assert!(sessions.with("a", CallLedger::new, |l| l.contains("call-a")));
        for i in 0..10_000 {
            sessions.with(&format!("junk-{i}"), CallLedger::new, |_| ());
        }
        assert_eq!(sessions.len(), 3, "arbitrary ids never grow the map");
    }
}
