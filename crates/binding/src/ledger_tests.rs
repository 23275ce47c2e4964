use serde_json::json;

use super::*;

fn call(id: &str, tool: &str, arguments: Value) -> OfferedCall {
    OfferedCall {
        model_call_id: id.into(),
        tool: tool.into(),
        arguments,
    }
}

fn nonce(n: &str) -> Value {
    json!({"nonce": n})
}

#[test]
fn only_a_delivered_call_is_claimed_and_only_once() {
    let mut ledger = Ledger::new();
    let ticket = ledger
        .offer("s", vec![call("c1", "record", nonce("a"))])
        .unwrap();
    // Not yet sent: a callback now is one the guest cannot have received.
    assert_eq!(
        ledger.claim("record", &nonce("a"), None),
        Err(Refusal::NotDelivered {
            tool: "record".into()
        })
    );
    ledger.confirm(ticket);
    let admitted = ledger.claim("record", &nonce("a"), None).unwrap();
    assert_eq!(
        (admitted.model_call_id.as_str(), admitted.position),
        ("c1", 0)
    );
    assert_eq!(ledger.state("c1"), Some(CallState::Claimed));
    assert_eq!(
        ledger.claim("record", &nonce("a"), None),
        Err(Refusal::AlreadyClaimed {
            tool: "record".into(),
            model_call_id: "c1".into()
        })
    );
}

#[test]
fn a_forged_callback_matches_nothing() {
    let mut ledger = Ledger::new();
    let ticket = ledger
        .offer("s", vec![call("c1", "record", nonce("a"))])
        .unwrap();
    ledger.confirm(ticket);
    // Right tool, other arguments (e.g. the guest's own shell calling the MCP server).
    assert_eq!(
        ledger.claim("record", &nonce("forged"), None),
        Err(Refusal::NotDelivered {
            tool: "record".into()
        })
    );
    assert_eq!(
        ledger.claim("finish", &nonce("a"), None),
        Err(Refusal::NotDelivered {
            tool: "finish".into()
        })
    );
    assert_eq!(
        ledger.state("c1"),
        Some(CallState::Delivered),
        "the real call is untouched"
    );
}

#[test]
fn identical_calls_are_two_claims_by_identity_and_ambiguous_without() {
    let mut ledger = Ledger::new();
    let ticket = ledger
        .offer(
            "s",
            vec![
                call("c1", "record", nonce("n")),
                call("c2", "record", nonce("n")),
            ],
        )
        .unwrap();
    ledger.confirm(ticket);
    assert_eq!(
        ledger.claim("record", &nonce("n"), None),
        Err(Refusal::Ambiguous {
            tool: "record".into(),
            count: 2
        })
    );
    let second = ledger.claim("record", &nonce("n"), Some("c2")).unwrap();
    let first = ledger.claim("record", &nonce("n"), Some("c1")).unwrap();
    assert_eq!((first.position, second.position), (0, 1));
    assert_eq!(
        ledger.claim("record", &nonce("n"), Some("c1")),
        Err(Refusal::AlreadyClaimed {
            tool: "record".into(),
            model_call_id: "c1".into()
        })
    );
    assert_eq!(
        ledger.claim("record", &nonce("n"), Some("c9")),
        Err(Refusal::WrongIdentity {
            tool: "record".into(),
            model_call_id: "c9".into()
        })
    );
}

#[test]
fn a_revoked_batch_can_never_be_claimed() {
    let mut ledger = Ledger::new();
    let ticket = ledger
        .offer("s", vec![call("c1", "record", nonce("a"))])
        .unwrap();
    ledger.revoke(ticket);
    ledger.confirm(ticket);
    assert_eq!(
        ledger.state("c1"),
        Some(CallState::Revoked),
        "confirming later changes nothing"
    );
    assert_eq!(
        ledger.claim("record", &nonce("a"), Some("c1")),
        Err(Refusal::WrongIdentity {
            tool: "record".into(),
            model_call_id: "c1".into()
        })
    );
}

#[test]
fn call_ids_are_never_reused_within_a_run() {
    let mut ledger = Ledger::new();
    let ticket = ledger
        .offer("s", vec![call("c1", "record", nonce("a"))])
        .unwrap();
    ledger.revoke(ticket);
    assert_eq!(
        ledger.offer("other-session", vec![call("c1", "record", nonce("b"))]),
        Err(OfferError::ReusedCallId("c1".into()))
    );
    assert_eq!(
        ledger.offer(
            "s",
            vec![call("c2", "a", json!({})), call("c2", "b", json!({}))]
        ),
        Err(OfferError::DuplicateInBatch("c2".into()))
    );
    assert_eq!(
        ledger.offer("s", vec![call("", "a", json!({}))]),
        Err(OfferError::Empty)
    );
    // A refused batch entered nothing: its ids are still free.
    assert!(ledger.offer("s", vec![call("c2", "a", json!({}))]).is_ok());
}

#[test]
fn closing_refuses_every_later_claim() {
    let mut ledger = Ledger::new();
    let ticket = ledger
        .offer("s", vec![call("c1", "record", nonce("a"))])
        .unwrap();
    ledger.confirm(ticket);
    ledger.close();
    assert_eq!(
        ledger.claim("record", &nonce("a"), None),
        Err(Refusal::Closed)
    );
    assert_eq!(ledger.state("c1"), Some(CallState::Delivered));
}
