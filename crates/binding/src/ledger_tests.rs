use serde_json::json;

use super::*;

fn call(id: &str, tool: &str, arguments: Value) -> (OfferedCall, String) {
    (
        OfferedCall {
            call_id: id.into(),
            model_call_id: id.into(),
            tool: tool.into(),
            arguments,
        },
        format!("identity-of-{id}"),
    )
}

fn nonce(n: &str) -> Value {
    json!({"nonce": n})
}

fn ident(id: &str) -> String {
    format!("identity-of-{id}")
}

#[test]
fn only_a_delivered_call_is_claimed_and_only_once() {
    let mut ledger = Ledger::new();
    let ticket = ledger
        .offer("s", vec![call("c1", "record", nonce("a"))])
        .unwrap();
    // Not yet sent: a callback now is one the guest cannot have received.
    assert_eq!(
        ledger.claim("record", &nonce("a"), Some(&ident("c1"))),
        Err(Refusal::NotYetDelivered {
            tool: "record".into(),
            call_id: "c1".into()
        })
    );
    ledger.confirm(ticket);
    let admitted = ledger
        .claim("record", &nonce("a"), Some(&ident("c1")))
        .unwrap();
    assert_eq!((admitted.call_id.as_str(), admitted.position), ("c1", 0));
    assert_eq!(ledger.state("c1"), Some(CallState::Claimed));
    ledger.complete("c1");
    assert_eq!(ledger.state("c1"), Some(CallState::Completed));
    assert_eq!(
        ledger.claim("record", &nonce("a"), Some(&ident("c1"))),
        Err(Refusal::AlreadyClaimed {
            tool: "record".into(),
            call_id: "c1".into()
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
    // The right tool and arguments, but no identity (e.g. the guest's own shell calling the
    // MCP server), or one that was never delivered.
    assert_eq!(
        ledger.claim("record", &nonce("a"), None),
        Err(Refusal::MissingIdentity {
            tool: "record".into()
        })
    );
    assert_eq!(
        ledger.claim("record", &nonce("a"), Some("guessed")),
        Err(Refusal::NotDelivered {
            tool: "record".into()
        })
    );
    // A real identity with other arguments or another tool.
    for (tool, args) in [("record", nonce("forged")), ("finish", nonce("a"))] {
        assert_eq!(
            ledger.claim(tool, &args, Some(&ident("c1"))),
            Err(Refusal::WrongIdentity {
                tool: tool.into(),
                call_id: "c1".into()
            })
        );
    }
    assert_eq!(
        ledger.state("c1"),
        Some(CallState::Delivered),
        "the real call is untouched"
    );
}

#[test]
fn identical_calls_are_two_claims_each_by_its_identity() {
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
    let second = ledger
        .claim("record", &nonce("n"), Some(&ident("c2")))
        .unwrap();
    let first = ledger
        .claim("record", &nonce("n"), Some(&ident("c1")))
        .unwrap();
    assert_eq!((first.call_id.as_str(), first.position), ("c1", 0));
    assert_eq!((second.call_id.as_str(), second.position), ("c2", 1));
    assert_eq!(
        ledger.earlier_in_batch(first.batch, 1),
        vec![("c1".to_owned(), CallState::Claimed)]
    );
}

#[test]
fn a_revoked_batch_can_never_be_claimed() {
    let mut ledger = Ledger::new();
    let ticket = ledger
        .offer("s", vec![call("c1", "record", nonce("a"))])
        .unwrap();
    ledger.revoke(ticket);
    // A late confirm does not bring it back.
    ledger.confirm(ticket);
    assert_eq!(
        ledger.claim("record", &nonce("a"), Some(&ident("c1"))),
        Err(Refusal::Revoked {
            tool: "record".into(),
            call_id: "c1".into()
        })
    );
}

#[test]
fn ids_and_identities_are_never_reused_within_a_run() {
    let mut ledger = Ledger::new();
    let t = ledger
        .offer("s1", vec![call("c1", "record", nonce("a"))])
        .unwrap();
    ledger.confirm(t);
    // Another session of the same run cannot reuse the id either.
    assert_eq!(
        ledger.offer("s2", vec![call("c1", "record", nonce("b"))]),
        Err(OfferError::ReusedCallId("c1".into()))
    );
    let (fresh, _) = call("c9", "record", nonce("b"));
    assert_eq!(
        ledger.offer("s2", vec![(fresh, ident("c1"))]),
        Err(OfferError::ReusedIdentity(ident("c1")))
    );
    assert_eq!(
        ledger.offer(
            "s1",
            vec![
                call("c2", "record", nonce("a")),
                call("c2", "x", nonce("b"))
            ]
        ),
        Err(OfferError::DuplicateInBatch("c2".into()))
    );
    // A refused batch enters nothing.
    assert_eq!(ledger.state("c2"), None);
}

#[test]
fn closing_refuses_every_later_claim_and_offer() {
    let mut ledger = Ledger::new();
    let t = ledger
        .offer("s", vec![call("c1", "record", nonce("a"))])
        .unwrap();
    ledger.confirm(t);
    ledger.close();
    assert_eq!(
        ledger.claim("record", &nonce("a"), Some(&ident("c1"))),
        Err(Refusal::Closed)
    );
    assert_eq!(
        ledger.offer("s", vec![call("c2", "record", nonce("a"))]),
        Err(OfferError::Closed)
    );
}

#[test]
fn a_refusal_names_itself_as_its_serialized_reason() {
    let tool = || "t".to_owned();
    let id = || "c".to_owned();
    for refusal in [
        Refusal::Closed,
        Refusal::MissingIdentity { tool: tool() },
        Refusal::NotDelivered { tool: tool() },
        Refusal::NotYetDelivered {
            tool: tool(),
            call_id: id(),
        },
        Refusal::Revoked {
            tool: tool(),
            call_id: id(),
        },
        Refusal::AlreadyClaimed {
            tool: tool(),
            call_id: id(),
        },
        Refusal::WrongIdentity {
            tool: tool(),
            call_id: id(),
        },
    ] {
        let serialized = serde_json::to_value(&refusal).unwrap();
        assert_eq!(serialized["reason"], refusal.reason(), "{refusal:?}");
        assert_eq!(
            serialized.get("call_id").and_then(Value::as_str),
            refusal.call_id()
        );
    }
}

#[test]
fn a_rejected_or_abandoned_call_is_settled_and_never_claimed() {
    let mut ledger = Ledger::new();
    let ticket = ledger
        .offer(
            "s",
            vec![
                call("c1", "record", nonce("a")),
                call("c2", "record", nonce("b")),
                call("c3", "record", nonce("c")),
            ],
        )
        .unwrap();
    ledger.confirm(ticket);
    assert!(ledger.reject("c1"));
    assert!(ledger.abandon("c2"));
    ledger
        .claim("record", &nonce("c"), Some(&ident("c3")))
        .unwrap();
    // Only a call still waiting to be claimed can be rejected or abandoned.
    assert!(!ledger.reject("c3"));
    assert!(!ledger.abandon("c1"));
    assert_eq!(
        ledger.claim("record", &nonce("a"), Some(&ident("c1"))),
        Err(Refusal::Rejected {
            tool: "record".into(),
            call_id: "c1".into()
        })
    );
    assert_eq!(
        ledger
            .claim("record", &nonce("b"), Some(&ident("c2")))
            .map_err(|r| r.reason()),
        Err("abandoned")
    );
    let settled: Vec<bool> = ledger
        .earlier_in_batch(0, 2)
        .into_iter()
        .map(|(_, state)| state.is_settled())
        .collect();
    assert_eq!(settled, [true, true]);
}

#[test]
fn arguments_match_as_values() {
    let mut ledger = Ledger::new();
    let model: Value = serde_json::from_str(r#"{"x": 1.0, "big": 12345678901234567890}"#).unwrap();
    let ticket = ledger
        .offer("s", vec![call("c1", "record", model)])
        .unwrap();
    ledger.confirm(ticket);
    let rounded: Value = serde_json::from_str(r#"{"x": 1, "big": 12345678901234567000}"#).unwrap();
    assert!(matches!(
        ledger.claim("record", &rounded, Some(&ident("c1"))),
        Err(Refusal::WrongIdentity { .. })
    ));
    let reencoded: Value =
        serde_json::from_str(r#"{"big": 12345678901234567890, "x": 1}"#).unwrap();
    assert!(
        ledger
            .claim("record", &reencoded, Some(&ident("c1")))
            .is_ok()
    );
}
