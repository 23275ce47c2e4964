use std::sync::Arc;

use bytes::Bytes;
use futures_util::StreamExt;
use serde_json::{Map, Value, json};
use switchyard_binding::{
    BindingLimits, CallbackOutcome, HostTool, Refusal, ToolFuture, ToolOutput, ToolRegistry,
};
use switchyard_translate::google_answer::to_google;
use switchyard_translate::turn::{ToolCall, TurnChunk, TurnPart};
use tokio::sync::mpsc;

use super::*;
use crate::responses::sse_body;

struct Echo(Value);

impl HostTool for Echo {
    fn name(&self) -> &str {
        "record"
    }
    fn description(&self) -> &str {
        "echo"
    }
    fn input_schema(&self) -> &Value {
        &self.0
    }
    fn call(&self, arguments: Value) -> ToolFuture<'_> {
        Box::pin(std::future::ready(Ok(ToolOutput {
            text: arguments.to_string(),
            images: Vec::new(),
        })))
    }
}

fn binding() -> HostBinding {
    let mut registry = ToolRegistry::new();
    registry
        .add(Arc::new(Echo(json!({"type": "object"}))))
        .unwrap();
    let limits = BindingLimits {
        delivery_wait: std::time::Duration::from_millis(100),
        ..BindingLimits::default()
    };
    HostBinding::new(registry, "mcp_sy_", limits).0
}

/// A last chunk with these calls (delivered id, name, arguments); each call's upstream id is
/// `up-<id>`.
fn chunk(calls: &[(&str, &str, Value)]) -> TurnChunk {
    let mut chunk = TurnChunk::new("m", "r");
    chunk.parts = calls
        .iter()
        .map(|(id, name, args)| {
            TurnPart::Call(ToolCall {
                id: (*id).to_owned(),
                upstream_id: Some(format!("up-{id}")),
                kind: Default::default(),
                namespace: None,
                name: (*name).to_owned(),
                arguments: args.clone(),
                signature: None,
            })
        })
        .collect();
    chunk
}

fn calls(chunk: &TurnChunk) -> Vec<ToolCall> {
    chunk.calls().cloned().collect()
}

fn identity_of(call: &ToolCall) -> String {
    call.arguments[IDENTITY_ARG].as_str().unwrap().to_owned()
}

async fn callback(binding: &HostBinding, identity: &str) -> CallbackOutcome {
    let mut args = Map::new();
    args.insert("n".into(), json!(1));
    args.insert(IDENTITY_ARG.into(), json!(identity));
    binding.callback("record", args).await
}

#[test]
fn host_calls_get_fresh_identities_and_guest_calls_are_untouched() {
    let binding = binding();
    let mut answer = chunk(&[
        (
            "c1",
            "mcp_sy_record",
            json!({"n": 1, IDENTITY_ARG: "made-up-by-the-model"}),
        ),
        ("c2", "read_file", json!({"file_path": "a"})),
        ("c3", "mcp_sy_record", json!({"n": 1})),
    ]);
    let delivery = stamp(&binding, "s", &mut answer, true).unwrap().unwrap();
    let calls = calls(&answer);
    assert_eq!(delivery.identities().len(), 2);
    assert_eq!(identity_of(&calls[0]), delivery.identities()[0]);
    assert_eq!(identity_of(&calls[2]), delivery.identities()[1]);
    assert_ne!(identity_of(&calls[0]), "made-up-by-the-model");
    assert_eq!(calls[1].arguments, json!({"file_path": "a"}));
    let mut no_host_call = chunk(&[("c9", "read_file", json!({}))]);
    let native = stamp(&binding, "s", &mut no_host_call, true)
        .unwrap()
        .unwrap();
    assert!(native.identities().is_empty());
    assert_eq!(super::tests::calls(&no_host_call)[0].arguments, json!({}));
    // Every call is in the delivered-call table, with what the guest received, once confirmed.
    assert!(binding.permission_for("read_file__c9").is_err());
    native.confirm();
    delivery.confirm();
    let c2 = binding.permission_for("read_file__c2").unwrap();
    assert_eq!(c2.arguments, json!({"file_path": "a"}));
    // Named by the id the guest received; the model's own id kept beside it.
    assert_eq!(
        (c2.call_id.as_str(), c2.model_call_id.as_str()),
        ("c2", "up-c2")
    );
    assert!(binding.permission_for("read_file__c9").is_ok());
    let mut text_only = TurnChunk::new("m", "r");
    text_only.parts.push(TurnPart::text("hi"));
    assert!(
        stamp(&binding, "s", &mut text_only, true)
            .unwrap()
            .is_none()
    );
}

#[tokio::test]
async fn a_body_handed_over_whole_confirms_and_a_cut_one_revokes() {
    let binding = binding();
    for cut in [false, true] {
        let id = if cut { "cut" } else { "whole" };
        let mut answer = chunk(&[(id, "mcp_sy_record", json!({"n": 1}))]);
        let delivery = stamp(&binding, "s", &mut answer, true).unwrap().unwrap();
        let identity = delivery.identities()[0].clone();
        let slot = DeliverySlot::default();
        slot.put(delivery);
        let (tx, rx) = mpsc::channel(4);
        let response = sse_body(rx, slot);
        tx.send(Bytes::from_static(b"data: {}\r\n\r\n"))
            .await
            .unwrap();
        let mut body = response.into_body().into_data_stream();
        assert!(body.next().await.is_some());
        if cut {
            // The guest's connection went away before the end of the answer.
            drop(body);
            drop(tx);
            assert!(matches!(
                callback(&binding, &identity).await,
                CallbackOutcome::Refused(Refusal::Revoked { .. })
            ));
        } else {
            tx.send(Bytes::from(to_google(&answer).to_json_line()))
                .await
                .unwrap();
            drop(tx);
            while body.next().await.is_some() {}
            assert!(matches!(
                callback(&binding, &identity).await,
                CallbackOutcome::Ran(Ok(_))
            ));
        }
    }
}

#[tokio::test]
async fn until_the_body_ends_a_callback_waits_and_then_is_refused() {
    let binding = binding();
    let mut answer = chunk(&[("c1", "mcp_sy_record", json!({"n": 1}))]);
    let delivery = stamp(&binding, "s", &mut answer, true).unwrap().unwrap();
    let identity = delivery.identities()[0].clone();
    let slot = DeliverySlot::default();
    slot.put(delivery);
    let (_tx, rx) = mpsc::channel::<Bytes>(4);
    let _response = sse_body(rx, slot);
    // The body neither ended nor dropped within the delivery wait.
    assert!(matches!(
        callback(&binding, &identity).await,
        CallbackOutcome::Refused(Refusal::NotYetDelivered { .. })
    ));
}

#[tokio::test]
async fn a_unary_answer_confirms_only_once_its_body_was_taken_whole() {
    let binding = binding();
    for taken in [true, false] {
        let id = if taken { "u-taken" } else { "u-dropped" };
        let mut answer = chunk(&[(id, "mcp_sy_record", json!({"n": 1}))]);
        let delivery = stamp(&binding, "s", &mut answer, true).unwrap().unwrap();
        let identity = delivery.identities()[0].clone();
        let slot = DeliverySlot::default();
        slot.put(delivery);
        let body = crate::responses::confirming_body(
            axum::body::Body::from(to_google(&answer).to_json_line()),
            slot,
        );
        if taken {
            let bytes = axum::body::to_bytes(body, usize::MAX).await.unwrap();
            assert!(String::from_utf8_lossy(&bytes).contains(&identity));
            assert!(matches!(
                callback(&binding, &identity).await,
                CallbackOutcome::Ran(Ok(_))
            ));
        } else {
            drop(body);
            assert!(matches!(
                callback(&binding, &identity).await,
                CallbackOutcome::Refused(Refusal::Revoked { .. })
            ));
        }
    }
}
