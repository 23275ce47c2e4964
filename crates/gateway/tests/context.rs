//! The `[context]` policy in the gateway: a history over the max goes upstream within the
//! target with whole batches, the prompt kept; an over-budget request is refused in the
//! guest's shape and never sent; the decision is recorded; a provider's `/tokenize` counts the
//! messages, each once.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{UPSTREAM_KEY, UPSTREAM_MODEL, client, start, within};
use serde_json::{Value, json};
use switchyard_gateway::{Gateway, GatewayConfig, GatewayDeps, GatewayHandle};
use switchyard_records::{ExchangeFilter, RecordStore, SqliteStore};
use switchyard_testkit::chat_upstream::{
    ChatUpstream, RecordedRequest, Reply, Script, Step, Times,
};
use switchyard_translate::context::{ContextConfig, ContextPolicy, Tokenizer};

fn window(max: u32, target: u32) -> ContextConfig {
    ContextConfig {
        policy: ContextPolicy::SlidingWindow,
        max_input_tokens: max,
        target_input_tokens: target,
        ..ContextConfig::default()
    }
}

/// A Chat history of `reads` file reads, each result `bytes` long, after one prompt.
fn history(reads: usize, bytes: usize) -> Value {
    let mut messages = vec![
        json!({"role": "system", "content": "You are an agent."}),
        json!({"role": "user", "content": "Read the ten files and sum them."}),
    ];
    for n in 0..reads {
        let id = format!("call_{n}");
        messages.push(json!({"role": "assistant", "content": null, "tool_calls": [
            {"id": id, "type": "function", "function": {"name": "read", "arguments": format!("{{\"n\":{n}}}")}}]}));
        messages.push(json!({"role": "tool", "tool_call_id": id, "content": format!("{n}:{}", "x".repeat(bytes))}));
    }
    json!({"model": "m", "messages": messages, "stream": true,
        "tools": [{"type": "function", "function": {"name": "read", "parameters": {"type": "object"}}}]})
}

async fn chat(gw: &GatewayHandle, body: &Value) -> reqwest::Response {
    within(
        "chat request",
        client()
            .post(format!("{}/v1/chat/completions", gw.base_url()))
            .json(body)
            .send(),
    )
    .await
    .expect("gateway answers")
}

fn tool_ids(request: &RecordedRequest) -> Vec<String> {
    request
        .tool_messages()
        .iter()
        .map(|m| m["tool_call_id"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn a_long_history_goes_upstream_within_the_target_in_whole_batches() {
    let script = Script::new().step(Step::once(Reply::text_stream(["ok"])).times(Times::Always));
    let (upstream, gw) = start(script, |c| c.context = window(3_000, 2_000)).await;
    // Ten results of ~1,000 tokens each (4,000 bytes / 4).
    let response = chat(&gw, &history(10, 4_000)).await;
    assert_eq!(response.status(), 200);
    let _ = response.text().await;
    let sent = &upstream.requests()[0];
    let body = sent.json();
    let bytes = serde_json::to_string(&body["messages"]).unwrap().len();
    assert!(bytes / 4 <= 2_000, "{bytes} bytes went upstream");
    assert_eq!(body["messages"][0]["role"], "system");
    assert_eq!(
        body["messages"][1]["content"],
        "Read the ten files and sum them."
    );
    // The newest batch stays; every result answers the call right before it.
    assert_eq!(tool_ids(sent).last().map(String::as_str), Some("call_9"));
    let messages = body["messages"].as_array().unwrap();
    for (i, m) in messages.iter().enumerate() {
        if m["role"] == "tool" {
            assert_eq!(
                messages[i - 1]["tool_calls"][0]["id"],
                m["tool_call_id"],
                "pairs intact"
            );
        }
    }
    // A request within the max passes unchanged.
    let small = history(2, 100);
    let _ = chat(&gw, &small).await.text().await;
    assert_eq!(tool_ids(&upstream.requests()[1]), ["call_0", "call_1"]);
    gw.shutdown().await.unwrap();
}

#[tokio::test]
async fn protected_content_over_the_max_is_refused_and_never_sent() {
    let script = Script::always(Reply::text_stream(["never"]));
    let (upstream, gw) = start(script, |c| c.context = window(500, 400)).await;
    let mut body = history(1, 10);
    body["messages"][1]["content"] = json!("y".repeat(8_000));
    let response = chat(&gw, &body).await;
    assert_eq!(response.status(), 400);
    let error: Value = response.json().await.unwrap();
    let message = error["error"]["message"].as_str().unwrap();
    assert!(message.contains("budget is 500"), "{message}");
    assert!(upstream.requests().is_empty(), "nothing went upstream");
    gw.shutdown().await.unwrap();
}

#[tokio::test]
async fn an_over_budget_refusal_is_recorded_as_such() {
    let records = tempfile::tempdir().unwrap();
    let upstream = ChatUpstream::start(Script::always(Reply::text_stream(["never"])))
        .await
        .unwrap();
    let mut config = GatewayConfig::new(upstream.base_url(), UPSTREAM_MODEL);
    config.records_dir = Some(records.path().to_path_buf());
    config.context = window(500, 400);
    let gw = Gateway::start_with(config, GatewayDeps::default())
        .await
        .unwrap();
    let mut body = history(1, 10);
    body["messages"][1]["content"] = json!("y".repeat(8_000));
    assert_eq!(chat(&gw, &body).await.status(), 400);
    gw.shutdown().await.unwrap();
    let store = SqliteStore::open(switchyard_records::store_path(records.path())).unwrap();
    let exchange = store.exchanges(ExchangeFilter::All).unwrap().remove(0);
    let error = exchange.error.unwrap();
    assert_eq!(error.kind, "context_budget");
    assert!(error.message.contains("budget is 500"), "{}", error.message);
    assert!(exchange.attempts.is_empty());
}

#[tokio::test]
async fn the_decision_and_the_request_it_left_are_recorded() {
    let records = tempfile::tempdir().unwrap();
    let upstream = ChatUpstream::start(Script::always(Reply::text_stream(["ok"])))
        .await
        .unwrap();
    let mut config = GatewayConfig::new(upstream.base_url(), UPSTREAM_MODEL);
    config.records_dir = Some(records.path().to_path_buf());
    config.context = window(3_000, 2_000);
    let gw = Gateway::start_with(
        config,
        GatewayDeps {
            upstream_key: Some(UPSTREAM_KEY.into()),
            ..GatewayDeps::default()
        },
    )
    .await
    .unwrap();
    let _ = chat(&gw, &history(10, 4_000)).await.text().await;
    gw.shutdown().await.unwrap();
    let store = SqliteStore::open(switchyard_records::store_path(records.path())).unwrap();
    let exchange = store.exchanges(ExchangeFilter::All).unwrap().remove(0);
    let decision = exchange.context.unwrap();
    assert_eq!(decision["policy"], "sliding-window");
    assert_eq!(decision["counted_by"], "estimate");
    assert!(
        decision["tokens_before"].as_u64().unwrap() > 10_000,
        "{decision}"
    );
    assert!(
        decision["tokens_after"].as_u64().unwrap() <= 2_000,
        "{decision}"
    );
    let evicted = decision["evicted"].as_array().unwrap();
    assert!(!evicted.is_empty());
    assert!(evicted.iter().all(|e| e["kind"] == "tool_batch"));
    assert_eq!(evicted[0]["calls"], json!(["call_0"]), "oldest first");
    let after = exchange.context_request.unwrap();
    assert!(after["messages"].as_array().unwrap().len() < 22);
    // The guest's own request is kept whole.
    assert_eq!(
        exchange.guest_request["messages"].as_array().unwrap().len(),
        22
    );
}

#[tokio::test]
async fn a_providers_tokenizer_counts_each_message_once() {
    // The scripted `/tokenize` says every text is 100 tokens; the model's budget is 450.
    let script = Script::new()
        .step(
            Step::once(Reply::Json {
                status: 200,
                body: json!({"tokens": vec![1; 100]}),
            })
            .when(|r| r.path == "/tokenize")
            .times(Times::Always),
        )
        .step(Step::once(Reply::text_stream(["ok"])).times(Times::Always));
    let (upstream, gw) = start(script, |c| {
        c.context = ContextConfig {
            tokenizer: Tokenizer::LlamaCpp,
            ..window(450, 400)
        };
    })
    .await;
    // 2 + 2 × 3 messages of 100 tokens (plus the tools' estimate): over 450.
    let body = history(3, 10);
    let _ = chat(&gw, &body).await.text().await;
    let tokenized = |upstream: &ChatUpstream| {
        upstream
            .requests()
            .iter()
            .filter(|r| r.path == "/tokenize")
            .count()
    };
    assert_eq!(tokenized(&upstream), 8, "each message once");
    let sent: Vec<RecordedRequest> = upstream
        .requests()
        .into_iter()
        .filter(|r| r.path != "/tokenize")
        .collect();
    // System, prompt (protected) and the latest batch: 400 tokens.
    assert_eq!(tool_ids(&sent[0]), ["call_2"]);
    let asked = upstream
        .requests()
        .into_iter()
        .find(|r| r.path == "/tokenize")
        .unwrap();
    assert_eq!(asked.json()["add_special"], false);
    // The same history again: every count comes from the cache.
    let _ = chat(&gw, &body).await.text().await;
    assert_eq!(tokenized(&upstream), 8);
    gw.shutdown().await.unwrap();
}
