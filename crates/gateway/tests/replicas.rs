//! Two gateway replicas behind one load balancer share nothing but their ingress key: a session
//! whose requests alternate between them keeps working, with the upstream's own call ids
//! given back, because a delivered id carries its own proof and the upstream id (sealed).
//! A replica with another key, or another session, refuses the ids.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{UPSTREAM_MODEL, client, within};
use futures_util::StreamExt;
use serde_json::{Value, json};
use switchyard_gateway::{Gateway, GatewayConfig, GatewayDeps, GatewayHandle};
use switchyard_testkit::chat_upstream::{ChatUpstream, Reply, Script, Step, Times};

async fn replica(upstream: &ChatUpstream, key: &str) -> GatewayHandle {
    let mut config = GatewayConfig::new(upstream.base_url(), UPSTREAM_MODEL);
    config.ingress_key = Some(key.to_owned());
    Gateway::start_with(
        config,
        GatewayDeps {
            upstream_key: Some("sk-upstream".into()),
            ..GatewayDeps::default()
        },
    )
    .await
    .expect("gateway starts")
}

async fn chat(gw: &GatewayHandle, key: &str, session: &str, messages: Value) -> reqwest::Response {
    within(
        "chat request",
        client()
            .post(format!("{}/v1/chat/completions", gw.base_url()))
            .bearer_auth(key)
            .header("x-session-id", session)
            .json(&json!({"model": "m", "stream": true, "messages": messages,
                "tools": [{"type": "function", "function": {"name": "read",
                    "parameters": {"type": "object"}}}]}))
            .send(),
    )
    .await
    .unwrap()
}

/// The delivered call ids of a streamed Chat answer.
async fn call_ids(response: reqwest::Response) -> Vec<String> {
    assert_eq!(response.status(), 200);
    let mut text = String::new();
    let mut stream = response.bytes_stream();
    while let Some(chunk) = stream.next().await {
        text.push_str(&String::from_utf8_lossy(&chunk.unwrap()));
    }
    text.lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .filter_map(|d| serde_json::from_str::<Value>(d).ok())
        .flat_map(|v| {
            v["choices"][0]["delta"]["tool_calls"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .filter_map(|c| c["id"].as_str().map(str::to_owned))
        .collect()
}

fn history(ids: &[String]) -> Value {
    let calls: Vec<Value> = ids
        .iter()
        .map(|id| {
            json!({"id": id, "type": "function",
            "function": {"name": "read", "arguments": "{\"p\":\"a\"}"}})
        })
        .collect();
    let mut messages = vec![
        json!({"role": "user", "content": "read"}),
        json!({"role": "assistant", "content": null, "tool_calls": calls}),
    ];
    messages.extend(
        ids.iter()
            .map(|id| json!({"role": "tool", "tool_call_id": id, "content": "alpha"})),
    );
    Value::Array(messages)
}

#[tokio::test]
async fn a_session_alternating_between_replicas_keeps_its_call_ids() {
    let args = r#"{"p":"a"}"#;
    let script = Script::new()
        .then(Reply::tool_calls_stream(
            &[("up_1", "read", args), ("up_2", "read", args)],
            4,
        ))
        .step(Step::once(Reply::text_stream(["done"])).times(Times::Always));
    let upstream = ChatUpstream::start(script).await.unwrap();
    let a = replica(&upstream, "shared-key").await;
    let b = replica(&upstream, "shared-key").await;
    let ids = call_ids(
        chat(
            &a,
            "shared-key",
            "s-1",
            json!([{"role": "user", "content": "read"}]),
        )
        .await,
    )
    .await;
    assert_eq!(ids.len(), 2);
    // Replica B never saw the session's calls: it accepts them and restores the upstream's ids.
    let answered = chat(&b, "shared-key", "s-1", history(&ids)).await;
    assert_eq!(answered.status(), 200);
    let sent = upstream.requests()[1].json();
    let restored: Vec<&str> = sent["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["tool_call_id"].as_str().unwrap())
        .collect();
    assert_eq!(restored, ["up_1", "up_2"]);

    // A session new to a replica adopts its history as sent; once the replica knows the
    // session, ids sealed for another session, or under another key, are refused.
    let other_session = chat(&b, "shared-key", "s-2", history(&ids)).await;
    assert_eq!(
        other_session.status(),
        200,
        "a new session adopts its history as sent"
    );
    let known = chat(
        &b,
        "shared-key",
        "s-3",
        json!([{"role": "user", "content": "hi"}]),
    )
    .await;
    assert_eq!(known.status(), 200);
    let sealed_elsewhere = chat(&b, "shared-key", "s-3", history(&ids)).await;
    assert_eq!(
        sealed_elsewhere.status(),
        400,
        "ids sealed for session s-1 are not s-3's"
    );
    let c = replica(&upstream, "other-key").await;
    let first = chat(
        &c,
        "other-key",
        "s-1",
        json!([{"role": "user", "content": "hi"}]),
    )
    .await;
    assert_eq!(first.status(), 200);
    let refused = chat(&c, "other-key", "s-1", history(&ids)).await;
    assert_eq!(
        refused.status(),
        400,
        "a known session never adopts ids it cannot verify"
    );
    for gw in [a, b, c] {
        gw.shutdown().await.unwrap();
    }
}
