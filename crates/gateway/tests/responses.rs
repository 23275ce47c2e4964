//! The Responses ingress (`POST /v1/responses`, what Codex speaks) against a scripted upstream:
//! the same guarantees as the other ingresses, in OpenAI's Responses shapes (custom and
//! namespaced tools delivered as such), and statuses chosen against Codex's retries.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{UPSTREAM_MODEL, client, start, within};
use futures_util::StreamExt;
use serde_json::{Value, json};
use switchyard_gateway::GatewayHandle;
use switchyard_testkit::chat_upstream::{Reply, Script, Step, Times};

async fn responses(gw: &GatewayHandle, body: &Value) -> reqwest::Response {
    within(
        "responses request",
        client()
            .post(format!("{}/v1/responses", gw.base_url()))
            .bearer_auth("k")
            .header("session-id", "thread-1")
            .json(body)
            .send(),
    )
    .await
    .expect("gateway answers")
}

/// The events of a streamed answer, each checked: named by its type.
async fn events(response: reqwest::Response) -> Vec<Value> {
    assert_eq!(response.status(), 200, "stream status");
    let mut raw = Vec::new();
    let mut stream = response.bytes_stream();
    while let Some(chunk) = within("next bytes", stream.next()).await {
        raw.extend_from_slice(&chunk.expect("stream bytes"));
    }
    let text = String::from_utf8(raw).expect("utf-8 stream");
    assert!(
        text.ends_with("\n\n"),
        "every event is terminated: {text:?}"
    );
    text.split("\n\n")
        .filter(|e| !e.is_empty())
        .map(|e| {
            let (name, data) = e
                .strip_prefix("event: ")
                .and_then(|rest| rest.split_once("\ndata: "))
                .unwrap_or_else(|| panic!("not a named event: {e:?}"));
            let value: Value = serde_json::from_str(data).unwrap();
            assert_eq!(value["type"], name, "{e}");
            value
        })
        .collect()
}

fn done_items(events: &[Value]) -> Vec<Value> {
    events
        .iter()
        .filter(|e| e["type"] == "response.output_item.done")
        .map(|e| e["item"].clone())
        .collect()
}

/// Codex 0.171.0's request shape (reference brief §9.2), tools trimmed to one of each kind.
fn codex_request(prompt: &str) -> Value {
    json!({
        "model": "switchyard-model",
        "stream": true,
        "input": [
            {"type": "message", "id": "msg_1", "role": "developer",
             "content": [{"type": "input_text", "text": "You are a coding agent."}]},
            {"type": "message", "id": "msg_2", "role": "user",
             "content": [{"type": "input_text", "text": prompt}]},
        ],
        "tools": [
            {"type": "function", "name": "exec_command", "description": "Runs a command",
             "strict": false, "parameters": {"type": "object",
                "properties": {"cmd": {"type": "string"}}, "required": ["cmd"]}},
            {"type": "custom", "name": "apply_patch", "description": "Edit files.",
             "format": {"type": "grammar", "syntax": "lark", "definition": "start: begin_patch"}},
            {"type": "namespace", "name": "mcp__rec", "description": "Recorder",
             "tools": [{"type": "function", "name": "record", "strict": false,
                "parameters": {"type": "object", "properties": {"nonce": {"type": "string"}}}}]},
            {"type": "web_search", "external_web_access": false},
        ],
        "tool_choice": "auto",
        "parallel_tool_calls": true,
        "reasoning": {"effort": "medium"},
        "store": false,
        "include": ["reasoning.encrypted_content"],
        "prompt_cache_key": "thread-1",
        "client_metadata": {"x-codex-turn-metadata": "{\"workspaces\":{\"/home/me/repo\":{}}}"},
    })
}

#[tokio::test]
async fn streamed_text_is_a_message_item_done_then_completed() {
    let (upstream, gw) = start(
        Script::new().then(Reply::text_stream(["Hel", "lo"])),
        |_| {},
    )
    .await;
    let events = events(responses(&gw, &codex_request("hi")).await).await;
    assert_eq!(events[0]["type"], "response.created");
    let last = events.last().unwrap();
    assert_eq!(last["type"], "response.completed");
    assert_eq!(last["response"]["status"], "completed");
    assert_eq!(last["response"]["model"], UPSTREAM_MODEL);
    assert_eq!(last["response"]["usage"]["output_tokens"], 7);
    let items = done_items(&events);
    assert_eq!(items.len(), 1);
    assert_eq!(items[0]["type"], "message");
    assert_eq!(items[0]["content"][0]["text"], "Hello");
    assert_eq!(last["response"]["output"], json!(items));
    let sent = upstream.requests()[0].json();
    assert_eq!(sent["model"], UPSTREAM_MODEL);
    let roles: Vec<&str> = sent["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles, ["system", "user"]);
    let tools: Vec<&str> = sent["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(tools, ["exec_command", "apply_patch", "mcp__rec__record"]);
    let raw = String::from_utf8_lossy(&upstream.requests()[0].body).into_owned();
    assert!(!raw.contains("/home/me/repo"), "local metadata stays local");
    gw.shutdown().await.unwrap();
}

#[tokio::test]
async fn calls_come_back_in_their_kind_with_the_gateways_ids() {
    let script = Script::new()
        .then(Reply::tool_calls_stream(
            &[
                ("call_0", "exec_command", r#"{"cmd":"echo A"}"#),
                ("call_1", "exec_command", r#"{"cmd":"echo A"}"#),
                (
                    "call_2",
                    "apply_patch",
                    r#"{"input":"*** Begin Patch\n*** End Patch\n"}"#,
                ),
                ("call_3", "mcp__rec__record", r#"{"nonce":"n-1"}"#),
            ],
            4,
        ))
        .then(Reply::text_stream(["done"]));
    let (upstream, gw) = start(script, |_| {}).await;
    let first = events(responses(&gw, &codex_request("go")).await).await;
    let items = done_items(&first);
    let kinds: Vec<&str> = items.iter().map(|i| i["type"].as_str().unwrap()).collect();
    assert_eq!(
        kinds,
        [
            "function_call",
            "function_call",
            "custom_tool_call",
            "function_call"
        ]
    );
    let ids: Vec<&str> = items
        .iter()
        .map(|i| i["call_id"].as_str().unwrap())
        .collect();
    let distinct: std::collections::HashSet<&&str> = ids.iter().collect();
    assert_eq!(
        distinct.len(),
        4,
        "identical calls get distinct ids: {ids:?}"
    );
    let upstream_ids = ["call_0", "call_1", "call_2", "call_3"];
    assert!(
        ids.iter().all(|id| !upstream_ids.contains(id)),
        "the gateway's own ids: {ids:?}"
    );
    assert_eq!(items[2]["input"], "*** Begin Patch\n*** End Patch\n");
    assert_eq!(items[2]["name"], "apply_patch");
    assert_eq!(items[3]["name"], "record");
    assert_eq!(items[3]["namespace"], "mcp__rec");
    // Codex's next request: calls then outputs, by the delivered ids.
    let mut next = codex_request("go");
    let input = next["input"].as_array_mut().unwrap();
    input.extend([
        json!({"type": "function_call", "id": "fc_1", "call_id": ids[0], "name": "exec_command",
            "arguments": "{\"cmd\":\"echo A\"}"}),
        json!({"type": "function_call", "id": "fc_2", "call_id": ids[1], "name": "exec_command",
            "arguments": "{\"cmd\":\"echo A\"}"}),
        json!({"type": "custom_tool_call", "id": "ctc_3", "call_id": ids[2], "name": "apply_patch",
            "input": "*** Begin Patch\n*** End Patch\n"}),
        json!({"type": "function_call", "id": "fc_4", "call_id": ids[3], "name": "record",
            "namespace": "mcp__rec", "arguments": "{\"nonce\":\"n-1\"}"}),
    ]);
    for id in &ids {
        input.push(json!({"type": "function_call_output", "call_id": id, "output": "ok"}));
    }
    let answered = events(responses(&gw, &next).await).await;
    assert_eq!(done_items(&answered)[0]["content"][0]["text"], "done");
    let sent = upstream.requests()[1].json();
    let messages = sent["messages"].as_array().unwrap();
    let assistant = messages.iter().find(|m| m["role"] == "assistant").unwrap();
    let upstream_ids: Vec<&str> = assistant["tool_calls"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["id"].as_str().unwrap())
        .collect();
    assert_eq!(
        upstream_ids,
        ["call_0", "call_1", "call_2", "call_3"],
        "the upstream sees its own ids"
    );
    assert_eq!(
        assistant["tool_calls"][3]["function"]["name"],
        "mcp__rec__record"
    );
    let patch: Value = serde_json::from_str(
        assistant["tool_calls"][2]["function"]["arguments"]
            .as_str()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(patch, json!({"input": "*** Begin Patch\n*** End Patch\n"}));
    // An output for a call never delivered is refused before anything goes upstream.
    let mut forged = codex_request("go");
    forged["input"].as_array_mut().unwrap().extend([
        json!({"type": "function_call", "call_id": "call_forged", "name": "exec_command",
            "arguments": "{}"}),
        json!({"type": "function_call_output", "call_id": "call_forged", "output": "x"}),
    ]);
    let refused = responses(&gw, &forged).await;
    assert_eq!(refused.status(), 400);
    let body: Value = refused.json().await.unwrap();
    assert_eq!(body["error"]["type"], "invalid_request_error");
    assert_eq!(upstream.requests().len(), 2);
    gw.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_custom_call_without_its_input_is_retried_and_never_delivered() {
    let script = Script::new()
        .then(Reply::tool_calls_stream(
            &[("call_0", "apply_patch", r#"{"patch":"*** Begin Patch"}"#)],
            3,
        ))
        .then(Reply::tool_calls_stream(
            &[("call_1", "apply_patch", r#"{"input":"*** Begin Patch"}"#)],
            3,
        ));
    let (upstream, gw) = start(script, |_| {}).await;
    let items = done_items(&events(responses(&gw, &codex_request("go")).await).await);
    assert_eq!(items.len(), 1, "{items:?}");
    assert_eq!(items[0]["type"], "custom_tool_call");
    assert_eq!(items[0]["input"], "*** Begin Patch");
    assert_eq!(upstream.requests().len(), 2);
    gw.shutdown().await.unwrap();

    let always_bad = Script::new().step(
        Step::once(Reply::malformed_tool_call_stream(
            "call_bad",
            "exec_command",
        ))
        .times(Times::Always),
    );
    let (upstream, gw) = start(always_bad, |c| c.retries.malformed_retries = 1).await;
    let answer = events(responses(&gw, &codex_request("go")).await).await;
    assert!(
        done_items(&answer).is_empty(),
        "never delivered: {answer:?}"
    );
    let last = answer.last().unwrap();
    assert_eq!(last["type"], "response.failed", "{answer:?}");
    assert_eq!(last["response"]["error"]["code"], "invalid_prompt");
    assert_eq!(
        upstream.requests().len(),
        2,
        "1 attempt + 1 malformed retry"
    );
    gw.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_dead_upstream_fails_fast_with_a_status_codex_does_not_retry() {
    let gw = common::dead_upstream_gateway().await;
    let response = responses(&gw, &codex_request("hi")).await;
    assert_eq!(response.status(), 424);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["error"]["code"], "upstream_failed");
    gw.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_retry_after_past_the_budget_reaches_codex_as_a_429_with_the_header() {
    let script = Script::always(Reply::error_retry_after(429, "slow down", "30"));
    let (upstream, gw) = start(script, |_| {}).await;
    let response = responses(&gw, &codex_request("hi")).await;
    assert_eq!(response.status(), 429);
    assert_eq!(response.headers()["retry-after"], "30");
    assert_eq!(upstream.requests().len(), 1, "never retried early");
    gw.shutdown().await.unwrap();
}

#[tokio::test]
async fn an_unstreamed_request_gets_one_response_and_a_wrong_key_a_401() {
    let (_upstream, gw) = start(
        Script::new().then(Reply::Json {
            status: 200,
            body: switchyard_testkit::chat_upstream::chunk::completion_tool_calls(&[(
                "call_1",
                "mcp__rec__record",
                r#"{"nonce":"x"}"#,
            )]),
        }),
        |c| c.ingress_key = Some("k".into()),
    )
    .await;
    let mut body = codex_request("hi");
    body["stream"] = json!(false);
    let response = responses(&gw, &body).await;
    assert_eq!(response.status(), 200);
    let whole: Value = response.json().await.unwrap();
    assert_eq!(whole["object"], "response");
    assert_eq!(whole["status"], "completed");
    assert_eq!(whole["output"][0]["type"], "function_call");
    assert_eq!(whole["output"][0]["namespace"], "mcp__rec");
    let wrong = within(
        "unauthorised request",
        client()
            .post(format!("{}/v1/responses", gw.base_url()))
            .bearer_auth("wrong")
            .json(&body)
            .send(),
    )
    .await
    .unwrap();
    assert_eq!(wrong.status(), 401);
    gw.shutdown().await.unwrap();
}
