use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};

use super::*;
use crate::finish::FinishTool;
use crate::tool::{HostTool, ToolFuture};

/// A host tool that logs every call it runs, after an optional delay.
struct Logged {
    name: &'static str,
    schema: Value,
    log: Arc<Mutex<Vec<Value>>>,
    delay: Duration,
}

impl HostTool for Logged {
    fn name(&self) -> &str {
        self.name
    }
    fn description(&self) -> &str {
        "logs"
    }
    fn input_schema(&self) -> &Value {
        &self.schema
    }
    fn call(&self, arguments: Value) -> ToolFuture<'_> {
        Box::pin(async move {
            tokio::time::sleep(self.delay).await;
            self.log.lock().unwrap().push(arguments.clone());
            Ok(ToolOutput {
                text: format!("ran {arguments}"),
                images: Vec::new(),
            })
        })
    }
}

fn binding(delay: Duration) -> (HostBinding, Arc<Mutex<Vec<Value>>>, mpsc::Receiver<Event>) {
    let log = Arc::new(Mutex::new(Vec::new()));
    let mut registry = ToolRegistry::new();
    registry
        .add(Arc::new(Logged {
            name: "record",
            schema: json!({"type": "object", "properties": {"nonce": {"type": "string"}},
                           "required": ["nonce"], "additionalProperties": false}),
            log: log.clone(),
            delay,
        }))
        .unwrap();
    let limits = BindingLimits {
        delivery_wait: Duration::from_millis(300),
        batch_wait: Duration::from_millis(400),
    };
    let (binding, events) = HostBinding::new(registry, "mcp_sy_", limits);
    (binding, log, events)
}

fn offered(id: &str, nonce: &str) -> OfferedCall {
    OfferedCall {
        call_id: id.into(),
        model_call_id: id.into(),
        tool: "record".into(),
        arguments: json!({"nonce": nonce}),
    }
}

fn with_identity(nonce: &str, identity: &str) -> Map<String, Value> {
    let mut args = Map::new();
    args.insert("nonce".into(), json!(nonce));
    args.insert(IDENTITY_ARG.into(), json!(identity));
    args
}

fn admitted_id(event: &Event) -> Option<&str> {
    match event {
        Event::HostCall(c) if c.decision == HostDecision::Admitted => c.call_id.as_deref(),
        _ => None,
    }
}

#[tokio::test]
async fn a_call_named_by_its_delivered_id_is_admitted_once_and_a_mismatch_is_refused() {
    let (b, log, _events) = binding(Duration::ZERO);
    let delivery = b
        .offer("s", vec![offered("c1", "n"), offered("c2", "n")])
        .unwrap();
    let ids = delivery.identities().to_vec();
    delivery.confirm();
    let plain = |nonce: &str| {
        let mut args = Map::new();
        args.insert("nonce".into(), json!(nonce));
        args
    };
    // Named by its delivered id only (Claude Code's `_meta`): admitted.
    assert!(matches!(
        b.callback_named("record", plain("n"), Some("c1")).await,
        CallbackOutcome::Ran(Ok(_))
    ));
    // An identity in the arguments that belongs to another call: refused.
    assert!(matches!(
        b.callback_named("record", with_identity("n", &ids[0]), Some("c2")).await,
        CallbackOutcome::Refused(Refusal::WrongIdentity { ref call_id, .. }) if call_id == "c2"
    ));
    // A call id never delivered, and the same arguments under another's id: refused.
    assert!(matches!(
        b.callback_named("record", plain("n"), Some("c9")).await,
        CallbackOutcome::Refused(Refusal::MissingIdentity { .. })
    ));
    assert!(matches!(
        b.callback_named("record", plain("other"), Some("c2")).await,
        CallbackOutcome::Refused(Refusal::WrongIdentity { .. })
    ));
    // Both agreeing: admitted.
    assert!(matches!(
        b.callback_named("record", with_identity("n", &ids[1]), Some("c2"))
            .await,
        CallbackOutcome::Ran(Ok(_))
    ));
    assert_eq!(log.lock().unwrap().len(), 2);
}

#[tokio::test]
async fn guest_names_map_to_registered_tools_only() {
    let (b, _, _) = binding(Duration::ZERO);
    assert_eq!(b.host_tool("mcp_sy_record"), Some("record"));
    assert_eq!(b.host_tool("record"), None);
    assert_eq!(b.host_tool("mcp_sy_other"), None);
}

#[tokio::test]
async fn identical_calls_run_twice_each_claiming_its_own_model_call() {
    let (b, log, mut events) = binding(Duration::ZERO);
    let delivery = b
        .offer("s", vec![offered("c1", "n"), offered("c2", "n")])
        .unwrap();
    let ids = delivery.identities().to_vec();
    assert_ne!(ids[0], ids[1]);
    delivery.confirm();
    for id in &ids {
        assert!(matches!(
            b.callback("record", with_identity("n", id)).await,
            CallbackOutcome::Ran(Ok(_))
        ));
    }
    // The same callback again (a guest's retry) gets the result the call returned, and the
    // tool did not run a third time.
    assert!(matches!(
        b.callback("record", with_identity("n", &ids[0])).await,
        CallbackOutcome::Ran(Ok(ref output)) if output.text.contains("\"n\"")
    ));
    assert_eq!(log.lock().unwrap().len(), 2);
    // The tool saw the arguments without the identity.
    assert_eq!(log.lock().unwrap()[0], json!({"nonce": "n"}));
    let mut claimed = Vec::new();
    while let Ok(e) = events.try_recv() {
        if let Some(id) = admitted_id(&e) {
            claimed.push(id.to_owned());
        }
    }
    assert_eq!(claimed, ["c1", "c2"]);
}

#[tokio::test]
async fn a_repeat_with_other_arguments_is_still_refused() {
    let (b, log, mut events) = binding(Duration::ZERO);
    let delivery = b.offer("s", vec![offered("c1", "n")]).unwrap();
    let id = delivery.identities()[0].clone();
    delivery.confirm();
    assert!(matches!(
        b.callback("record", with_identity("n", &id)).await,
        CallbackOutcome::Ran(Ok(_))
    ));
    assert!(matches!(
        b.callback("record", with_identity("other", &id)).await,
        CallbackOutcome::Refused(Refusal::WrongIdentity { .. })
    ));
    assert_eq!(log.lock().unwrap().len(), 1);
    let mut repeated = 0;
    while let Ok(e) = events.try_recv() {
        repeated +=
            usize::from(matches!(e, Event::HostCall(c) if c.decision == HostDecision::Repeated));
    }
    assert_eq!(repeated, 0);
}

#[tokio::test]
async fn numbers_are_matched_by_value_as_a_guest_reencodes_them() {
    let mut registry = ToolRegistry::new();
    let log = Arc::new(Mutex::new(Vec::new()));
    registry
        .add(Arc::new(Logged {
            name: "record",
            schema: json!({"type": "object"}),
            log: log.clone(),
            delay: Duration::ZERO,
        }))
        .unwrap();
    let (b, _events) = HostBinding::new(registry, "mcp_sy_", BindingLimits::default());
    let model_args: Value = serde_json::from_str(r#"{"angle": 90.0, "scale": 1.0}"#).unwrap();
    let delivery = b
        .offer(
            "s",
            vec![OfferedCall {
                call_id: "c1".into(),
                model_call_id: "c1".into(),
                tool: "record".into(),
                arguments: model_args,
            }],
        )
        .unwrap();
    let id = delivery.identities()[0].clone();
    delivery.confirm();
    // What a JavaScript guest sends back: `JSON.stringify(90.0)` is `90`.
    let mut args: Map<String, Value> =
        serde_json::from_str(r#"{"angle": 90, "scale": 1}"#).unwrap();
    args.insert(IDENTITY_ARG.into(), json!(id));
    assert!(matches!(
        b.callback("record", args).await,
        CallbackOutcome::Ran(Ok(_))
    ));
    assert_eq!(log.lock().unwrap().len(), 1);
}

#[tokio::test]
async fn a_rejected_call_is_never_admitted() {
    let (b, log, _events) = binding(Duration::ZERO);
    let delivery = b.offer("s", vec![offered("c1", "a")]).unwrap();
    let id = delivery.identities()[0].clone();
    delivery.confirm();
    assert!(b.reject("c1"));
    assert!(!b.reject("c1"), "rejected once");
    assert!(!b.reject("no-such-call"));
    // The guest's shell, with the token and the identity read from the guest's files.
    assert!(matches!(
        b.callback("record", with_identity("a", &id)).await,
        CallbackOutcome::Refused(Refusal::Rejected { .. })
    ));
    assert!(log.lock().unwrap().is_empty());
}

#[tokio::test]
async fn a_call_the_guest_skips_is_abandoned_and_holds_nothing_back() {
    let (b, log, mut events) = binding(Duration::ZERO);
    let delivery = b
        .offer(
            "s",
            vec![
                offered("c1", "skipped"),
                offered("c2", "second"),
                offered("c3", "third"),
            ],
        )
        .unwrap();
    let ids = delivery.identities().to_vec();
    delivery.confirm();
    // The guest never sends c1; c2 waits the batch wait (400 ms here), then goes ahead.
    assert!(matches!(
        b.callback("record", with_identity("second", &ids[1])).await,
        CallbackOutcome::Ran(Ok(_))
    ));
    // c3 does not wait again: c1 is abandoned, c2 returned.
    let third = tokio::time::timeout(
        Duration::from_millis(300),
        b.callback("record", with_identity("third", &ids[2])),
    )
    .await
    .expect("the third call does not wait for the abandoned one");
    assert!(matches!(third, CallbackOutcome::Ran(Ok(_))));
    // A late callback of the abandoned call would break the model's order: refused.
    assert!(matches!(
        b.callback("record", with_identity("skipped", &ids[0]))
            .await,
        CallbackOutcome::Refused(Refusal::Abandoned { .. })
    ));
    assert_eq!(
        log.lock().unwrap().clone(),
        [json!({"nonce": "second"}), json!({"nonce": "third"})]
    );
    let mut abandoned = Vec::new();
    while let Ok(e) = events.try_recv() {
        if let Event::Warning(w) = e
            && w.message.contains("abandoned")
        {
            abandoned.push(w.message);
        }
    }
    assert_eq!(abandoned.len(), 1, "{abandoned:?}");
    assert!(abandoned[0].contains("c1"), "{abandoned:?}");
}

#[tokio::test]
async fn a_later_call_waits_for_the_earlier_one_to_return() {
    let (b, log, _events) = binding(Duration::from_millis(150));
    let delivery = b
        .offer("s", vec![offered("c1", "first"), offered("c2", "second")])
        .unwrap();
    let ids = delivery.identities().to_vec();
    delivery.confirm();
    // The guest calls the second one first.
    let second = tokio::spawn({
        let b = b.clone();
        let id = ids[1].clone();
        async move { b.callback("record", with_identity("second", &id)).await }
    });
    tokio::time::sleep(Duration::from_millis(50)).await;
    let first = b.callback("record", with_identity("first", &ids[0])).await;
    assert!(matches!(first, CallbackOutcome::Ran(Ok(_))));
    assert!(matches!(second.await.unwrap(), CallbackOutcome::Ran(Ok(_))));
    let order: Vec<Value> = log.lock().unwrap().clone();
    assert_eq!(
        order,
        [json!({"nonce": "first"}), json!({"nonce": "second"})]
    );
}

#[tokio::test]
async fn a_callback_during_the_send_waits_for_it_and_a_dropped_delivery_revokes() {
    let (b, log, _events) = binding(Duration::ZERO);
    let delivery = b.offer("s", vec![offered("c1", "a")]).unwrap();
    let id = delivery.identities()[0].clone();
    let waiting = tokio::spawn({
        let b = b.clone();
        let id = id.clone();
        async move { b.callback("record", with_identity("a", &id)).await }
    });
    tokio::time::sleep(Duration::from_millis(50)).await;
    delivery.confirm();
    assert!(matches!(
        waiting.await.unwrap(),
        CallbackOutcome::Ran(Ok(_))
    ));

    let cut = b.offer("s", vec![offered("c2", "b")]).unwrap();
    let id = cut.identities()[0].clone();
    drop(cut);
    assert!(matches!(
        b.callback("record", with_identity("b", &id)).await,
        CallbackOutcome::Refused(Refusal::Revoked { .. })
    ));
    // Never confirmed, never revoked: refused once the delivery wait passes.
    let pending = b.offer("s", vec![offered("c3", "c")]).unwrap();
    let id = pending.identities()[0].clone();
    assert!(matches!(
        b.callback("record", with_identity("c", &id)).await,
        CallbackOutcome::Refused(Refusal::NotYetDelivered { .. })
    ));
    drop(pending);
    assert_eq!(log.lock().unwrap().len(), 1);
}

#[tokio::test]
async fn invalid_arguments_are_a_tool_error_and_the_tool_never_runs() {
    let (b, log, _events) = binding(Duration::ZERO);
    let bad = OfferedCall {
        call_id: "c1".into(),
        model_call_id: "c1".into(),
        tool: "record".into(),
        arguments: json!({"nonce": 7}),
    };
    let delivery = b.offer("s", vec![bad]).unwrap();
    let id = delivery.identities()[0].clone();
    delivery.confirm();
    let mut args = Map::new();
    args.insert("nonce".into(), json!(7));
    args.insert(IDENTITY_ARG.into(), json!(id));
    let outcome = b.callback("record", args).await;
    assert!(
        matches!(
            outcome,
            CallbackOutcome::Ran(Err(ToolError::InvalidArguments { .. }))
        ),
        "{outcome:?}"
    );
    assert!(log.lock().unwrap().is_empty());
}

#[tokio::test]
async fn closing_refuses_callbacks_and_drain_reports_what_still_runs() {
    let (b, _log, mut events) = binding(Duration::from_secs(2));
    let delivery = b.offer("s", vec![offered("c1", "a")]).unwrap();
    let id = delivery.identities()[0].clone();
    delivery.confirm();
    let running = tokio::spawn({
        let b = b.clone();
        async move { b.callback("record", with_identity("a", &id)).await }
    });
    // Close once the callback was admitted (its tool then runs for 2 s).
    while let Some(event) = events.recv().await {
        if admitted_id(&event).is_some() {
            break;
        }
    }
    b.close();
    assert_eq!(
        b.drain(Duration::from_millis(10)).await.incomplete,
        ["c1"],
        "an admitted callback still running is reported"
    );
    let mut warned = false;
    while let Ok(event) = events.try_recv() {
        warned |= matches!(&event, Event::Warning(w) if w.message.contains("cleanup incomplete"));
    }
    assert!(
        warned,
        "an incomplete cleanup is reported in the run's events"
    );
    assert!(b.drain(Duration::from_secs(10)).await.incomplete.is_empty());
    assert!(matches!(
        running.await.unwrap(),
        CallbackOutcome::Ran(Ok(_))
    ));
    assert!(b.offer("s", vec![offered("c2", "a")]).is_err());
}

#[tokio::test]
async fn finish_keeps_the_first_valid_result_and_refuses_a_second() {
    let (finish, slot) = FinishTool::new(json!({"type": "object",
        "properties": {"colour": {"type": "string"}}, "required": ["colour"]}));
    let mut registry = ToolRegistry::new();
    registry.add(Arc::new(finish)).unwrap();
    let (b, _events) = HostBinding::new(registry, "mcp_sy_", BindingLimits::default());
    let calls = vec![
        OfferedCall {
            call_id: "f0".into(),
            model_call_id: "f0".into(),
            tool: "finish".into(),
            arguments: json!({"shade": "red"}),
        },
        OfferedCall {
            call_id: "f1".into(),
            model_call_id: "f1".into(),
            tool: "finish".into(),
            arguments: json!({"colour": "red"}),
        },
        OfferedCall {
            call_id: "f2".into(),
            model_call_id: "f2".into(),
            tool: "finish".into(),
            arguments: json!({"colour": "blue"}),
        },
    ];
    let args: Vec<Value> = calls.iter().map(|c| c.arguments.clone()).collect();
    let delivery = b.offer("s", calls).unwrap();
    let ids = delivery.identities().to_vec();
    delivery.confirm();
    let mut outcomes = Vec::new();
    for (arguments, id) in args.iter().zip(&ids) {
        let mut map = arguments.as_object().unwrap().clone();
        map.insert(IDENTITY_ARG.into(), json!(id));
        outcomes.push(b.callback("finish", map).await);
    }
    assert!(matches!(
        outcomes[0],
        CallbackOutcome::Ran(Err(ToolError::InvalidArguments { .. }))
    ));
    assert!(matches!(outcomes[1], CallbackOutcome::Ran(Ok(_))));
    assert!(matches!(
        outcomes[2],
        CallbackOutcome::Ran(Err(ToolError::Failed(_)))
    ));
    assert_eq!(slot.result(), Some(json!({"colour": "red"})));
}

#[test]
fn the_identity_is_declared_optional() {
    let schema = schema_with_identity(&json!({"type": "object", "required": ["nonce"],
        "properties": {"nonce": {"type": "string"}}}));
    assert_eq!(schema["properties"][IDENTITY_ARG]["type"], "string");
    assert_eq!(schema["required"], json!(["nonce"]));
}

/// A host tool that panics.
struct Panics(Value);

impl HostTool for Panics {
    fn name(&self) -> &str {
        "boom"
    }
    fn description(&self) -> &str {
        "panics"
    }
    fn input_schema(&self) -> &Value {
        &self.0
    }
    fn call(&self, _: Value) -> ToolFuture<'_> {
        Box::pin(async { panic!("the host tool broke") })
    }
}

#[tokio::test]
async fn a_panicking_tool_is_a_tool_error_with_its_result_recorded() {
    let mut registry = ToolRegistry::new();
    registry
        .add(Arc::new(Panics(json!({"type": "object"}))))
        .unwrap();
    let (b, mut events) = HostBinding::new(registry, "mcp_sy_", BindingLimits::default());
    let delivery = b
        .offer(
            "s",
            vec![OfferedCall {
                call_id: "c1".into(),
                model_call_id: "c1".into(),
                tool: "boom".into(),
                arguments: json!({}),
            }],
        )
        .unwrap();
    let identity = delivery.identities()[0].clone();
    delivery.confirm();
    let mut args = Map::new();
    args.insert(IDENTITY_ARG.into(), json!(identity));
    let outcome = b.callback("boom", args).await;
    assert!(
        matches!(&outcome, CallbackOutcome::Ran(Err(ToolError::Failed(m))) if m.contains("failed")),
        "{outcome:?}"
    );
    assert!(b.ledger().running().is_empty(), "the call is completed");
    let mut results = Vec::new();
    while let Ok(e) = events.try_recv() {
        if let Event::HostResult(r) = e {
            results.push(r);
        }
    }
    assert_eq!(results.len(), 1);
    assert_eq!(results[0].model_call_id, "c1");
    assert_eq!(results[0].status, ToolStatus::Error);
}

#[tokio::test]
async fn past_the_first_refusals_forged_arguments_are_not_kept() {
    let (b, _log, mut events) = binding(Duration::ZERO);
    let mut kept = 0;
    let mut dropped = 0;
    for i in 0..MAX_REFUSALS_WITH_ARGUMENTS + 3 {
        let outcome = b
            .callback("record", with_identity(&format!("forged {i}"), "made-up"))
            .await;
        assert!(matches!(outcome, CallbackOutcome::Refused(_)));
        while let Ok(Event::HostCall(call)) = events.try_recv() {
            if call.arguments.is_null() {
                dropped += 1;
            } else {
                kept += 1;
            }
        }
    }
    assert_eq!((kept, dropped), (MAX_REFUSALS_WITH_ARGUMENTS, 3));
}
