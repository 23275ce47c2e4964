use super::*;

#[test]
fn an_id_opens_only_in_its_session_under_the_same_key() {
    let ids = CallIds::new(Some("ingress-key"));
    let id = ids.seal("thread-1", Some("call_0"));
    assert!(id.starts_with("call_"));
    assert!(
        id.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-'),
        "{id}"
    );
    assert_eq!(ids.open("thread-1", &id), Some(Some("call_0".to_owned())));
    // Another replica with the same ingress key opens it too.
    let replica = CallIds::new(Some("ingress-key"));
    assert_eq!(
        replica.open("thread-1", &id),
        Some(Some("call_0".to_owned()))
    );
    // Not in another session, not under another key, not with any byte changed.
    assert_eq!(ids.open("thread-2", &id), None);
    assert_eq!(CallIds::new(Some("other-key")).open("thread-1", &id), None);
    assert_eq!(CallIds::new(None).open("thread-1", &id), None);
    let mut forged = id.clone().into_bytes();
    let last = forged.len() - 3;
    forged[last] = if forged[last] == b'A' { b'B' } else { b'A' };
    assert_eq!(
        ids.open("thread-1", std::str::from_utf8(&forged).unwrap()),
        None
    );
}

#[test]
fn ids_are_fresh_and_long_or_absent_upstream_ids_are_not_carried() {
    let ids = CallIds::new(None);
    let a = ids.seal("s", Some("call_0"));
    let b = ids.seal("s", Some("call_0"));
    assert_ne!(a, b, "identical calls get distinct ids");
    let long = "x".repeat(MAX_CARRIED_UPSTREAM_ID + 1);
    assert_eq!(ids.open("s", &ids.seal("s", Some(&long))), Some(None));
    assert_eq!(ids.open("s", &ids.seal("s", None)), Some(None));
    for junk in [
        "",
        "call_",
        "call_!!",
        "toolu_01",
        "call_AAAA",
        &format!("call_{}", "A".repeat(500)),
    ] {
        assert_eq!(ids.open("s", junk), None, "{junk}");
    }
}
