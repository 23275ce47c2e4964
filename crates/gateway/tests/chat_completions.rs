//! The Chat Completions ingress (`POST /v1/chat/completions`, what OpenCode speaks) against a
//! scripted upstream: the same guarantees as the GenerateContent path, in OpenAI's shapes.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{UPSTREAM_KEY, UPSTREAM_MODEL, client, start, within};
use futures_util::StreamExt;
use serde_json::{Value, json};
use switchyard_gateway::GatewayHandle;
use switchyard_testkit::chat_upstream::{Reply, Script, Step, Times};

async fn chat(gw: &GatewayHandle, body: &Value) -> reqwest::Response {
    within(
        "chat request",
        client()
            .post(format!("{}/v1/chat/completions", gw.base_url()))
            .header("authorization", "Bearer k")
            .json(body)
            .send(),
    )
    .await
    .expect("gateway answers")
}

/// The SSE events of a streamed answer: each `data:` payload, `[DONE]` included.
async fn events(response: reqwest::Response) -> Vec<String> {
    assert_eq!(response.status(), 200, "stream status");
    assert_eq!(
        response.headers()["content-type"],
        "text/event-stream",
        "stream content type"
    );
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
            e.strip_prefix("data: ")
                .unwrap_or_else(|| panic!("event without data prefix: {e:?}"))
                .to_string()
        })
        .collect()
}

fn chunks(events: &[String]) -> Vec<Value> {
    events
        .iter()
        .filter(|e| e.as_str() != "[DONE]")
        .map(|e| serde_json::from_str(e).expect("event is JSON"))
        .collect()
}

fn content(chunks: &[Value]) -> String {
    chunks
        .iter()
        .filter_map(|c| c["choices"][0]["delta"]["content"].as_str())
        .collect()
}

fn tool_calls(chunks: &[Value]) -> Vec<Value> {
    chunks
        .iter()
        .filter_map(|c| c["choices"][0]["delta"]["tool_calls"].as_array())
        .flatten()
        .cloned()
        .collect()
}

/// OpenCode's request shape (reference BRIEF): system prompt, user parts, tools, usage asked.
fn opencode_request(prompt: &str) -> Value {
    json!({
        "model": "fake-model",
        "max_tokens": 8192,
        "messages": [
            {"role": "system", "content": "You are opencode"},
            {"role": "user", "content": [{"type": "text", "text": prompt}]}
        ],
        "tools": [{"type": "function", "function": {"name": "read", "description": "Read a file",
            "parameters": {"type": "object", "properties": {"filePath": {"type": "string"}},
                "required": ["filePath"], "additionalProperties": false}}}],
        "tool_choice": "auto",
        "stream": true,
        "stream_options": {"include_usage": true}
    })
}

#[tokio::test]
async fn streamed_text_arrives_as_chat_chunks_with_usage_and_done() {
    let (upstream, gw) = start(
        Script::new().then(Reply::text_stream(["Hel", "lo"])),
        |_| {},
    )
    .await;
    let events = events(chat(&gw, &opencode_request("hi")).await).await;
    assert_eq!(events.last().map(String::as_str), Some("[DONE]"));
    let chunks = chunks(&events);
    assert_eq!(content(&chunks), "Hello");
    assert_eq!(chunks[0]["object"], "chat.completion.chunk");
    assert_eq!(chunks[0]["choices"][0]["delta"]["role"], "assistant");
    assert_eq!(chunks[0]["model"], UPSTREAM_MODEL);
    let finish: Vec<&Value> = chunks
        .iter()
        .map(|c| &c["choices"][0]["finish_reason"])
        .filter(|f| !f.is_null())
        .collect();
    assert_eq!(finish, [&json!("stop")]);
    let usage = chunks.last().unwrap();
    assert_eq!(usage["choices"], json!([]));
    assert_eq!(usage["usage"]["prompt_tokens"], 12);
    assert_eq!(usage["usage"]["completion_tokens"], 7);

    // Upstream: the guest's request, with the routed model and the provider key.
    let sent = &upstream.requests()[0];
    let mut expected = opencode_request("hi");
    expected["model"] = json!(UPSTREAM_MODEL);
    assert_eq!(sent.json(), expected);
    assert_eq!(
        sent.header("authorization"),
        Some(format!("Bearer {UPSTREAM_KEY}").as_str())
    );
    gw.shutdown().await.unwrap();
}

#[tokio::test]
async fn parallel_and_identical_calls_get_the_gateways_ids_and_answers_are_checked() {
    let args = r#"{"filePath":"/tmp/a.txt"}"#;
    let script = Script::new()
        .then(Reply::tool_calls_stream(
            &[("call_A", "read", args), ("call_B", "read", args)],
            4,
        ))
        .then(Reply::text_stream(["done"]));
    let (upstream, gw) = start(script, |_| {}).await;
    let first = chunks(&events(chat(&gw, &opencode_request("go")).await).await);
    let calls = tool_calls(&first);
    assert_eq!(calls.len(), 2, "{first:?}");
    // The guest gets the gateway's own ids, never the upstream's.
    let (a, b) = (
        calls[0]["id"].as_str().unwrap().to_owned(),
        calls[1]["id"].as_str().unwrap().to_owned(),
    );
    assert!(a.starts_with("call_") && a != "call_A" && b != "call_B" && a != b);
    assert_eq!(
        calls[0],
        json!({"index": 0, "id": a, "type": "function",
            "function": {"name": "read", "arguments": args}})
    );
    assert_eq!(
        calls[1]["function"]["arguments"],
        calls[0]["function"]["arguments"]
    );
    let with_calls = first
        .iter()
        .find(|c| c["choices"][0]["delta"].get("tool_calls").is_some())
        .unwrap();
    assert_eq!(
        with_calls["choices"][0]["finish_reason"], "tool_calls",
        "the calls come whole, with the finish reason"
    );

    let mut follow_up = opencode_request("go");
    let messages = follow_up["messages"].as_array_mut().unwrap();
    messages.push(json!({"role": "assistant", "content": "", "tool_calls": [
        {"id": a, "type": "function", "function": {"name": "read", "arguments": args}},
        {"id": b, "type": "function", "function": {"name": "read", "arguments": args}}]}));
    messages.push(json!({"role": "tool", "tool_call_id": a, "content": "one"}));
    messages.push(json!({"role": "tool", "tool_call_id": b, "content": "two"}));
    let chunks2 = chunks(&events(chat(&gw, &follow_up).await).await);
    assert_eq!(content(&chunks2), "done");
    // The upstream sees its own ids again, in its history and its answers.
    let ids: Vec<Value> = upstream.requests()[1]
        .tool_messages()
        .iter()
        .map(|m| m["tool_call_id"].clone())
        .collect();
    assert_eq!(ids, [json!("call_A"), json!("call_B")]);
    let history: Vec<Value> = upstream.requests()[1].json()["messages"][2]["tool_calls"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["id"].clone())
        .collect();
    assert_eq!(history, [json!("call_A"), json!("call_B")]);

    // A tool message for a call this session never delivered is refused, in OpenAI's shape.
    let mut forged = follow_up.clone();
    forged["messages"][4]["tool_call_id"] = json!("call_Z");
    let response = chat(&gw, &forged).await;
    assert_eq!(response.status(), 400);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["error"]["type"], "invalid_request_error");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("call_Z")
    );
    assert_eq!(upstream.requests().len(), 2, "never sent upstream");
    gw.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_malformed_call_is_retried_and_delivered_once_or_fails_clearly() {
    let script = Script::new()
        .then(Reply::malformed_tool_call_stream("call_bad", "read"))
        .then(Reply::tool_calls_stream(
            &[("call_good", "read", r#"{"filePath":"a"}"#)],
            3,
        ));
    let (upstream, gw) = start(script, |_| {}).await;
    let calls = tool_calls(&chunks(
        &events(chat(&gw, &opencode_request("go")).await).await,
    ));
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0]["function"]["arguments"], r#"{"filePath":"a"}"#);
    assert_ne!(calls[0]["id"], "call_good", "the gateway's id");
    assert_eq!(upstream.requests().len(), 2);
    gw.shutdown().await.unwrap();

    let always_bad = Script::new().step(
        Step::once(Reply::malformed_tool_call_stream("call_bad", "read")).times(Times::Always),
    );
    let (upstream, gw) = start(always_bad, |c| c.retries.malformed_retries = 1).await;
    let answer = events(chat(&gw, &opencode_request("go")).await).await;
    let answer_chunks = chunks(&answer);
    assert!(
        tool_calls(&answer_chunks).is_empty(),
        "never delivered: {answer:?}"
    );
    let error = &answer_chunks.last().unwrap()["error"];
    assert_eq!(error["code"], "malformed_tool_call", "{answer:?}");
    assert_eq!(
        upstream.requests().len(),
        2,
        "1 attempt + 1 malformed retry"
    );
    gw.shutdown().await.unwrap();
}

#[tokio::test]
async fn unknown_fields_are_refused_before_anything_goes_upstream() {
    let (upstream, gw) = start(Script::new().then(Reply::text_stream(["x"])), |_| {}).await;
    let mut body = opencode_request("hi");
    body["logprobs"] = json!(true);
    let response = chat(&gw, &body).await;
    assert_eq!(response.status(), 400);
    let error: Value = response.json().await.unwrap();
    assert_eq!(error["error"]["type"], "invalid_request_error");
    assert!(
        error["error"]["message"]
            .as_str()
            .unwrap()
            .contains("`logprobs`"),
        "{error}"
    );
    assert!(upstream.requests().is_empty());
    gw.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_dead_upstream_fails_fast_with_an_error_opencode_does_not_retry() {
    let gw = common::dead_upstream_gateway().await;
    let response = chat(&gw, &opencode_request("hi")).await;
    assert_eq!(response.status(), 424);
    let text = response.text().await.unwrap();
    let body: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(body["error"]["code"], "upstream_failed");
    // OpenCode 1.18.33 retries any error whose status is 408/409/429/5xx or whose message or
    // body matches these words (its `SessionRetry` patterns, abridged).
    let lower = text.to_lowercase();
    for word in [
        "429",
        "500",
        "502",
        "503",
        "504",
        "rate limit",
        "unavailable",
        "server_error",
        "server error",
        "connection refused",
        "econnrefused",
        "timeout",
        "overloaded",
    ] {
        assert!(!lower.contains(word), "{word:?} in {text}");
    }
    gw.shutdown().await.unwrap();
}

#[tokio::test]
async fn without_fail_fast_the_guest_gets_the_status_to_retry() {
    let script =
        Script::new().step(Step::once(Reply::error(503, "overloaded")).times(Times::Always));
    let (_upstream, gw) = start(script, |c| c.retries.guest_fail_fast = false).await;
    let response = chat(&gw, &opencode_request("hi")).await;
    assert_eq!(response.status(), 503);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["error"]["type"], "server_error");
    gw.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_retry_after_past_the_budget_reaches_opencode_with_its_header() {
    let script = Script::always(Reply::error_retry_after(429, "slow down", "30"));
    let (upstream, gw) = start(script, |_| {}).await;
    let response = chat(&gw, &opencode_request("hi")).await;
    assert_eq!(response.status(), 429);
    assert_eq!(response.headers()["retry-after"], "30");
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["error"]["code"], "rate_limit_exceeded", "{body}");
    assert_eq!(upstream.requests().len(), 1, "never retried early");
    gw.shutdown().await.unwrap();
}

#[tokio::test]
async fn upstream_client_errors_keep_their_openai_error() {
    let script = Script::new().then(Reply::Json {
        status: 400,
        body: json!({"error": {"message": "maximum context length is 8192 tokens",
            "type": "invalid_request_error", "code": "context_length_exceeded"}}),
    });
    let (_upstream, gw) = start(script, |_| {}).await;
    let response = chat(&gw, &opencode_request("hi")).await;
    assert_eq!(response.status(), 400);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["error"]["code"], "context_length_exceeded");
    assert_eq!(
        body["error"]["message"],
        "maximum context length is 8192 tokens"
    );
    gw.shutdown().await.unwrap();
}

#[tokio::test]
async fn an_unstreamed_request_gets_one_completion() {
    let script = Script::new().then(Reply::Json {
        status: 200,
        body: switchyard_testkit::chat_upstream::chunk::completion_tool_calls(&[(
            "call_1",
            "read",
            r#"{"filePath":"b"}"#,
        )]),
    });
    let (upstream, gw) = start(script, |_| {}).await;
    let mut body = opencode_request("hi");
    body["stream"] = json!(false);
    body.as_object_mut().unwrap().remove("stream_options");
    let response = chat(&gw, &body).await;
    assert_eq!(response.status(), 200);
    let completion: Value = response.json().await.unwrap();
    assert_eq!(completion["object"], "chat.completion");
    let message = &completion["choices"][0]["message"];
    let id = message["tool_calls"][0]["id"].as_str().unwrap();
    assert!(
        id.starts_with("call_") && id != "call_1",
        "the gateway's id: {id}"
    );
    assert_eq!(
        message["tool_calls"][0]["function"]["arguments"],
        r#"{"filePath":"b"}"#
    );
    assert_eq!(completion["choices"][0]["finish_reason"], "tool_calls");
    assert!(!upstream.requests()[0].wants_stream());
    gw.shutdown().await.unwrap();
}

#[tokio::test]
async fn the_ingress_key_is_a_bearer_token_when_configured() {
    let script = Script::new().then(Reply::text_stream(["ok"]));
    let (upstream, gw) = start(script, |c| c.ingress_key = Some("per-run-token".into())).await;
    let response = chat(&gw, &opencode_request("hi")).await;
    assert_eq!(response.status(), 401);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["error"]["type"], "authentication_error");
    let response = within(
        "chat request",
        client()
            .post(format!("{}/v1/chat/completions", gw.base_url()))
            .header("authorization", "Bearer per-run-token")
            .json(&opencode_request("hi"))
            .send(),
    )
    .await
    .unwrap();
    assert_eq!(content(&chunks(&events(response).await)), "ok");
    assert_eq!(upstream.requests().len(), 1);
    gw.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_png_reaches_the_upstream_as_lossless_webp() {
    use base64::Engine as _;
    let pixels: Vec<u8> = (0..24 * 24 * 3).map(|i| (i * 11) as u8).collect();
    let png = switchyard_testkit::fixtures::rgb_png(24, 24, &pixels).unwrap();
    let url = format!(
        "data:image/png;base64,{}",
        base64::engine::general_purpose::STANDARD.encode(&png)
    );
    let (upstream, gw) = start(Script::new().then(Reply::text_stream(["seen"])), |_| {}).await;
    let mut body = opencode_request("look");
    body["messages"][1]["content"]
        .as_array_mut()
        .unwrap()
        .push(json!({"type": "image_url", "image_url": {"url": url}}));
    assert_eq!(
        content(&chunks(&events(chat(&gw, &body).await).await)),
        "seen"
    );
    let sent = upstream.requests()[0].json();
    let webp = sent["messages"][1]["content"][1]["image_url"]["url"]
        .as_str()
        .unwrap()
        .to_string();
    let data = webp
        .strip_prefix("data:image/webp;base64,")
        .expect("a WebP data URL");
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(data)
        .unwrap();
    let decoded = switchyard_translate::image::decode_webp(&bytes).unwrap();
    assert_eq!(decoded.data, pixels, "lossless");
    gw.shutdown().await.unwrap();
}

#[tokio::test]
async fn aliases_route_an_auxiliary_model_and_strict_models_refuse_the_rest() {
    let script = Script::new().step(Step::once(Reply::text_stream(["ok"])).times(Times::Always));
    let (upstream, gw) = start(script, |c| {
        c.strict_models = true;
        c.aliases
            .insert("title-model".into(), "small-upstream".into());
    })
    .await;
    let mut title = opencode_request("Generate a title for this conversation:\n");
    title["model"] = json!("title-model");
    title.as_object_mut().unwrap().remove("tools");
    assert_eq!(
        content(&chunks(&events(chat(&gw, &title).await).await)),
        "ok"
    );
    assert_eq!(upstream.requests()[0].json()["model"], "small-upstream");
    let mut other = opencode_request("hi");
    other["model"] = json!("unknown-model");
    let response = chat(&gw, &other).await;
    assert_eq!(response.status(), 404);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["error"]["type"], "invalid_request_error");
    assert_eq!(upstream.requests().len(), 1);
    gw.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_chat_exchange_is_recorded_with_both_requests_and_the_answer_as_a_completion() {
    use switchyard_records::{ExchangeFilter, RecordStore, SqliteStore};
    let records = tempfile::tempdir().unwrap();
    let script = Script::new().then(Reply::tool_calls_stream(
        &[("call_R", "read", r#"{"filePath":"x"}"#)],
        3,
    ));
    let dir = records.path().to_path_buf();
    let (_upstream, gw) = start(script, move |c| c.records_dir = Some(dir)).await;
    let mut request = opencode_request("read x");
    request["messages"][1]["content"][0]["text"] = json!(format!("read x, key {UPSTREAM_KEY}"));
    let _ = events(chat(&gw, &request).await).await;
    gw.shutdown().await.unwrap();
    let store = SqliteStore::open(switchyard_records::store_path(records.path())).unwrap();
    let exchanges = store.exchanges(ExchangeFilter::All).unwrap();
    assert_eq!(exchanges.len(), 1);
    let x = &exchanges[0];
    assert_eq!(x.ingress_api, "openai.chatCompletions");
    assert_eq!(x.requested_model, "fake-model");
    assert_eq!(x.guest_request["model"], "fake-model");
    assert_eq!(x.attempts[0].request["model"], UPSTREAM_MODEL);
    let answer = x.guest_response.as_ref().unwrap();
    assert_eq!(answer["object"], "chat.completion");
    // The guest's answer as it received it (the gateway's id); the call under the model's id.
    assert_eq!(x.function_calls[0].id, "call_R");
    let delivered = x.function_calls[0].delivered_id.as_deref().unwrap();
    assert_ne!(delivered, "call_R");
    assert_eq!(
        answer["choices"][0]["message"]["tool_calls"][0]["id"],
        delivered
    );
    assert!(x.upstream_message.is_some());
    assert_eq!(x.usage.input, 20);
    let stored = serde_json::to_string(x).unwrap();
    assert!(
        !stored.contains(UPSTREAM_KEY),
        "the provider key is redacted"
    );
}

#[tokio::test]
async fn an_endless_answer_ends_as_an_openai_error_event() {
    let endless = Reply::Endless(switchyard_testkit::chat_upstream::chunk::text("word "));
    let (_upstream, gw) = start(Script::always(endless), |c| {
        c.limits.max_answer_bytes = 10_000;
    })
    .await;
    let events = events(chat(&gw, &opencode_request("hi")).await).await;
    let last: Value = serde_json::from_str(events.last().unwrap()).unwrap();
    assert_eq!(last["error"]["code"], "answer_limit", "{last}");
    let message = last["error"]["message"].as_str().unwrap();
    assert!(message.contains("limits.max_answer_bytes"), "{message}");
    assert!(
        !message.contains("rate limit"),
        "OpenCode would retry: {message}"
    );
    assert_eq!(content(&chunks(&events[..events.len() - 1])).len(), 10_000);
    gw.shutdown().await.unwrap();
}
