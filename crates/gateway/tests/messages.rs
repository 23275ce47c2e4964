//! The Messages ingress (`POST /v1/messages`, what Claude Code speaks) against a scripted
//! upstream: the same guarantees as the other ingresses, in Anthropic's shapes, and statuses
//! chosen against Claude Code's retries.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{UPSTREAM_MODEL, client, start, within};
use futures_util::StreamExt;
use serde_json::{Value, json};
use switchyard_gateway::GatewayHandle;
use switchyard_testkit::chat_upstream::{
    Reply, Script, Step, StreamEvent, StreamReply, Times, chunk,
};

async fn messages(gw: &GatewayHandle, body: &Value) -> reqwest::Response {
    within(
        "messages request",
        client()
            .post(format!("{}/v1/messages?beta=true", gw.base_url()))
            .header("x-api-key", "k")
            .header("anthropic-version", "2023-06-01")
            .header(
                "anthropic-beta",
                "claude-code-20250219,interleaved-thinking-2025-05-14",
            )
            .header("x-claude-code-session-id", "s-1")
            .json(body)
            .send(),
    )
    .await
    .expect("gateway answers")
}

/// The named events of a streamed answer.
async fn events(response: reqwest::Response) -> Vec<(String, Value)> {
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
            (name.to_owned(), serde_json::from_str(data).unwrap())
        })
        .collect()
}

/// Claude Code's request shape (reference brief §5.1, under the launch's settings).
fn claude_request(prompt: &str) -> Value {
    json!({
        "model": "claude-opus-5-5",
        "max_tokens": 32000,
        "stream": true,
        "system": [
            {"type": "text", "text": "x-anthropic-billing-header: cc_version=2.1.332.abc;"},
            {"type": "text", "text": "You are a Claude agent.", "cache_control": {"type": "ephemeral"}},
        ],
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": prompt,
                "cache_control": {"type": "ephemeral"}}]},
            {"role": "system", "content": "# Environment", "output_config": {"effort": "medium"}},
        ],
        "tools": [{"name": "Read", "description": "Read a file", "input_schema": {
            "type": "object", "properties": {"file_path": {"type": "string"}},
            "required": ["file_path"]}}],
        "metadata": {"user_id": "{\"device_id\":\"d\"}"},
        "thinking": {"type": "adaptive"},
        "output_config": {"effort": "high"},
    })
}

#[tokio::test]
async fn streamed_text_is_the_exact_messages_sequence() {
    let (upstream, gw) = start(
        Script::new().then(Reply::text_stream(["Hel", "lo"])),
        |_| {},
    )
    .await;
    let events = events(messages(&gw, &claude_request("hi")).await).await;
    let names: Vec<&str> = events.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names[..2], ["message_start", "ping"]);
    assert_eq!(names[names.len() - 2..], ["message_delta", "message_stop"]);
    let text: String = events
        .iter()
        .filter_map(|(_, e)| e["delta"]["text"].as_str())
        .collect();
    assert_eq!(text, "Hello");
    assert_eq!(events[0].1["message"]["model"], UPSTREAM_MODEL);
    let end = &events[events.len() - 2].1;
    assert_eq!(end["delta"]["stop_reason"], "end_turn");
    assert_eq!(end["usage"]["output_tokens"], 7);
    // Upstream: a Chat request with Claude Code's system prompt and its system turn in place.
    let sent = upstream.requests()[0].json();
    assert_eq!(sent["model"], UPSTREAM_MODEL);
    let roles: Vec<&str> = sent["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles, ["system", "user", "system"]);
    assert_eq!(sent["tools"][0]["function"]["name"], "Read");
    assert!(sent.get("metadata").is_none(), "{sent}");
    gw.shutdown().await.unwrap();
}

#[tokio::test]
async fn calls_get_the_gateways_ids_and_results_must_answer_them() {
    let args = r#"{"file_path":"/w/a"}"#;
    let script = Script::new()
        .then(Reply::tool_calls_stream(
            &[("up_1", "Read", args), ("up_2", "Read", args)],
            4,
        ))
        .then(Reply::text_stream(["done"]));
    let (upstream, gw) = start(script, |_| {}).await;
    let events = events(messages(&gw, &claude_request("read")).await).await;
    let uses: Vec<&Value> = events
        .iter()
        .filter(|(n, _)| n == "content_block_start")
        .map(|(_, e)| &e["content_block"])
        .filter(|b| b["type"] == "tool_use")
        .collect();
    assert_eq!(uses.len(), 2);
    let ids: Vec<&str> = uses.iter().map(|b| b["id"].as_str().unwrap()).collect();
    assert_ne!(ids[0], ids[1]);
    assert!(
        ids.iter()
            .all(|id| id.starts_with("call_") && !["up_1", "up_2"].contains(id))
    );
    let stop = &events[events.len() - 2].1;
    assert_eq!(stop["delta"]["stop_reason"], "tool_use");
    // A history answering the delivered ids goes upstream with the upstream's own ids.
    let mut next = claude_request("read");
    next["messages"].as_array_mut().unwrap().extend([
        json!({"role": "assistant", "content": [
            {"type": "tool_use", "id": ids[0], "name": "Read", "input": {"file_path": "/w/a"}},
            {"type": "tool_use", "id": ids[1], "name": "Read", "input": {"file_path": "/w/a"}},
        ]}),
        json!({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": ids[1], "content": "alpha"},
            {"type": "tool_result", "tool_use_id": ids[0], "content": "alpha"},
        ]}),
    ]);
    let answered = events_of_text(messages(&gw, &next).await).await;
    assert_eq!(answered, "done");
    let sent = upstream.requests()[1].json();
    let tool_ids: Vec<&str> = sent["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["tool_call_id"].as_str().unwrap())
        .collect();
    assert_eq!(tool_ids, ["up_1", "up_2"], "call order, the upstream's ids");
    // A result for a call never delivered is refused before anything goes upstream.
    let mut forged = claude_request("read");
    forged["messages"].as_array_mut().unwrap().extend([
        json!({"role": "assistant", "content": [
            {"type": "tool_use", "id": "toolu_forged", "name": "Read", "input": {}}]}),
        json!({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_forged", "content": "x"}]}),
    ]);
    let refused = messages(&gw, &forged).await;
    assert_eq!(refused.status(), 400);
    let body: Value = refused.json().await.unwrap();
    assert_eq!(body["type"], "error");
    assert_eq!(body["error"]["type"], "invalid_request_error");
    assert_eq!(upstream.requests().len(), 2);
    gw.shutdown().await.unwrap();
}

async fn events_of_text(response: reqwest::Response) -> String {
    events(response)
        .await
        .iter()
        .filter_map(|(_, e)| e["delta"]["text"].as_str().map(str::to_owned))
        .collect()
}

#[tokio::test]
async fn a_dead_upstream_fails_fast_with_a_529_claude_code_does_not_retry() {
    let gw = common::dead_upstream_gateway().await;
    let response = messages(&gw, &claude_request("hi")).await;
    assert_eq!(response.status(), 529);
    assert_eq!(response.headers()["x-should-retry"], "false");
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["type"], "error");
    assert_eq!(body["error"]["type"], "overloaded_error");
    gw.shutdown().await.unwrap();
}

#[tokio::test]
async fn without_fail_fast_a_529_lets_claude_code_retry_briefly() {
    let script =
        Script::new().step(Step::once(Reply::error(503, "overloaded")).times(Times::Always));
    let (_upstream, gw) = start(script, |c| c.retries.guest_fail_fast = false).await;
    let response = messages(&gw, &claude_request("hi")).await;
    assert_eq!(response.status(), 529);
    assert!(response.headers().get("x-should-retry").is_none());
    gw.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_retry_after_past_the_budget_reaches_claude_code_as_a_429() {
    let script = Script::always(Reply::error_retry_after(429, "slow down", "30"));
    let (upstream, gw) = start(script, |_| {}).await;
    let response = messages(&gw, &claude_request("hi")).await;
    assert_eq!(response.status(), 429);
    assert_eq!(response.headers()["retry-after"], "30");
    assert!(response.headers().get("x-should-retry").is_none());
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["error"]["type"], "rate_limit_error");
    assert_eq!(upstream.requests().len(), 1, "never retried early");
    gw.shutdown().await.unwrap();
}

#[tokio::test]
async fn an_upstream_refusal_keeps_its_status_and_is_not_retried() {
    let script = Script::always(Reply::Json {
        status: 401,
        body: json!({"error": {"message": "bad provider key", "type": "invalid_request_error"}}),
    });
    let (upstream, gw) = start(script, |_| {}).await;
    let response = messages(&gw, &claude_request("hi")).await;
    assert_eq!(response.status(), 401);
    assert_eq!(response.headers()["x-should-retry"], "false");
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["error"]["type"], "authentication_error");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("bad provider key"),
        "{body}"
    );
    assert_eq!(upstream.requests().len(), 1);
    gw.shutdown().await.unwrap();
}

#[tokio::test]
async fn an_unstreamed_request_gets_one_message() {
    let script = Script::new().then(Reply::Json {
        status: 200,
        body: switchyard_testkit::chat_upstream::chunk::completion_tool_calls(&[(
            "call_1",
            "Read",
            r#"{"file_path":"b"}"#,
        )]),
    });
    let (upstream, gw) = start(script, |_| {}).await;
    let mut body = claude_request("hi");
    body["stream"] = json!(false);
    let response = messages(&gw, &body).await;
    assert_eq!(response.status(), 200);
    let message: Value = response.json().await.unwrap();
    assert_eq!(message["type"], "message");
    assert_eq!(message["role"], "assistant");
    assert_eq!(message["stop_reason"], "tool_use");
    let block = &message["content"][0];
    assert_eq!(block["type"], "tool_use");
    assert_eq!(block["input"], json!({"file_path": "b"}));
    assert!(block["id"].as_str().unwrap() != "call_1");
    assert!(!upstream.requests()[0].wants_stream());
    gw.shutdown().await.unwrap();
}

#[tokio::test]
async fn the_ingress_key_is_read_from_x_api_key_or_a_bearer_token() {
    let script = Script::new().step(Step::once(Reply::text_stream(["ok"])).times(Times::Always));
    let (upstream, gw) = start(script, |c| c.ingress_key = Some("per-run-token".into())).await;
    let response = messages(&gw, &claude_request("hi")).await;
    assert_eq!(response.status(), 401);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["error"]["type"], "authentication_error");
    for (name, value) in [
        ("x-api-key", "per-run-token"),
        ("authorization", "Bearer per-run-token"),
    ] {
        let response = within(
            "messages request",
            client()
                .post(format!("{}/v1/messages", gw.base_url()))
                .header(name, value)
                .json(&claude_request("hi"))
                .send(),
        )
        .await
        .unwrap();
        assert_eq!(events_of_text(response).await, "ok", "{name}");
    }
    assert_eq!(upstream.requests().len(), 2);
    gw.shutdown().await.unwrap();
}

#[tokio::test]
async fn deferred_tools_are_refused_with_a_message_naming_defer_loading() {
    let (upstream, gw) = start(Script::always(Reply::text_stream(["x"])), |_| {}).await;
    let mut body = claude_request("hi");
    body["tools"][0]["defer_loading"] = json!(true);
    let response = messages(&gw, &body).await;
    assert_eq!(response.status(), 400);
    let body: Value = response.json().await.unwrap();
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("defer_loading"),
        "{body}"
    );
    assert!(upstream.requests().is_empty());
    gw.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_malformed_call_is_retried_and_never_delivered_when_it_stays_malformed() {
    let script = Script::new()
        .then(Reply::malformed_tool_call_stream("call_bad", "Read"))
        .then(Reply::tool_calls_stream(
            &[("call_good", "Read", r#"{"file_path":"a"}"#)],
            3,
        ));
    let (upstream, gw) = start(script, |_| {}).await;
    let answer = events(messages(&gw, &claude_request("go")).await).await;
    let uses: Vec<&Value> = answer
        .iter()
        .filter(|(n, e)| n == "content_block_start" && e["content_block"]["type"] == "tool_use")
        .map(|(_, e)| &e["content_block"])
        .collect();
    assert_eq!(uses.len(), 1, "{answer:?}");
    assert_eq!(upstream.requests().len(), 2);
    gw.shutdown().await.unwrap();

    let always_bad = Script::new().step(
        Step::once(Reply::malformed_tool_call_stream("call_bad", "Read")).times(Times::Always),
    );
    let (upstream, gw) = start(always_bad, |c| c.retries.malformed_retries = 1).await;
    let answer = events(messages(&gw, &claude_request("go")).await).await;
    assert!(
        answer
            .iter()
            .all(|(_, e)| e["content_block"]["type"] != "tool_use"),
        "never delivered: {answer:?}"
    );
    let (name, error) = answer.last().unwrap();
    assert_eq!(name, "error", "{answer:?}");
    assert_eq!(error["error"]["type"], "overloaded_error");
    assert!(
        error["error"]["message"]
            .as_str()
            .unwrap()
            .contains("could not be delivered"),
        "{error}"
    );
    assert_eq!(
        upstream.requests().len(),
        2,
        "1 attempt + 1 malformed retry"
    );
    gw.shutdown().await.unwrap();
}

#[tokio::test]
async fn reasoning_is_a_thinking_block_and_comes_back_only_when_asked() {
    let thinking_then_call = || {
        Reply::Stream(StreamReply::new(vec![
            StreamEvent::json(chunk::role()),
            StreamEvent::json(chunk::reasoning("Let me look.")),
            StreamEvent::json(chunk::tool_call(
                0,
                Some("up_1"),
                Some("Read"),
                r#"{"file_path":"a"}"#,
            )),
            StreamEvent::json(chunk::finish("tool_calls")),
        ]))
    };
    for echo in [false, true] {
        let script = Script::new()
            .then(thinking_then_call())
            .then(Reply::text_stream(["done"]));
        let (upstream, gw) = start(script, |c| c.translation.echo_reasoning = echo).await;
        let first = events(messages(&gw, &claude_request("go")).await).await;
        let thinking: String = first
            .iter()
            .filter_map(|(_, e)| e["delta"]["thinking"].as_str())
            .collect();
        assert_eq!(thinking, "Let me look.");
        let signature = first
            .iter()
            .find_map(|(_, e)| e["delta"]["signature"].as_str())
            .unwrap()
            .to_owned();
        let id = first
            .iter()
            .find_map(|(_, e)| e["content_block"]["id"].as_str())
            .unwrap()
            .to_owned();
        // The guest sends the block back as it got it, signature included.
        let mut next = claude_request("go");
        next["messages"].as_array_mut().unwrap().extend([
            json!({"role": "assistant", "content": [
                {"type": "thinking", "thinking": "Let me look.", "signature": signature},
                {"type": "tool_use", "id": id, "name": "Read", "input": {"file_path": "a"}},
            ]}),
            json!({"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": id, "content": "alpha"},
            ]}),
        ]);
        assert_eq!(events_of_text(messages(&gw, &next).await).await, "done");
        let sent = upstream.requests()[1].json();
        let assistant = sent["messages"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["role"] == "assistant")
            .unwrap()
            .clone();
        let echoed = assistant.get("reasoning_content").and_then(Value::as_str);
        assert_eq!(
            echoed,
            echo.then_some("Let me look."),
            "echo {echo}: {assistant}"
        );
        gw.shutdown().await.unwrap();
    }
}
