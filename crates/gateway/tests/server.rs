//! The gateway against the scripted Chat Completions upstream (no guest CLI): streaming,
//! tool-call assembly and ids, malformed-call retry, rate limits, Google-shaped errors,
//! countTokens, model routing, ingress key, shutdown, the `[translation]` section.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use serde_json::{Value, json};
use std::time::Duration;
use switchyard_testkit::chat_upstream::{
    Gate, Reply, Script, Step, StreamEvent, StreamReply, Times, chunk,
};
use switchyard_testkit::fixtures::GEMINI_CLI_FIRST_REQUEST;

#[tokio::test]
async fn streamed_text_reaches_the_guest_before_the_upstream_sends_more() {
    let gate = Gate::new();
    let events = vec![
        StreamEvent::json(chunk::role()),
        StreamEvent::json(chunk::text("Hel")),
        StreamEvent::json(chunk::text("lo!")).after_gate(&gate),
        StreamEvent::json(chunk::finish("stop")),
        StreamEvent::json(chunk::usage(11, 2)),
    ];
    let (upstream, gw) = start(
        Script::new().then(Reply::Stream(StreamReply::new(events))),
        |_| {},
    )
    .await;

    let response = post(
        &gw,
        "gemini-2.5-flash",
        "streamGenerateContent",
        &user_request("hi"),
    )
    .await;
    let mut frames = Frames::new(response);
    // The upstream holds "lo!" until the gate opens: if the gateway buffered, this would hang.
    let first = loop {
        let f = frames.next().await.expect("a frame before the gate opens");
        if !text_of(std::slice::from_ref(&f)).is_empty() {
            break f;
        }
    };
    assert_eq!(text_of(std::slice::from_ref(&first)), "Hel");
    assert_eq!(first["modelVersion"], UPSTREAM_MODEL);
    gate.open();
    let rest = frames.all().await;
    assert_eq!(text_of(&rest), "lo!");
    let last = rest.last().expect("final chunk");
    assert_eq!(last["candidates"][0]["finishReason"], "STOP");
    assert_eq!(last["usageMetadata"]["promptTokenCount"], 11);
    assert_eq!(last["usageMetadata"]["candidatesTokenCount"], 2);
    assert!(String::from_utf8_lossy(&frames.raw).ends_with("\r\n\r\n"));

    let sent = upstream.requests();
    assert_eq!(sent.len(), 1);
    let body = sent[0].json();
    assert_eq!(body["model"], UPSTREAM_MODEL);
    assert_eq!(body["stream"], true);
    assert_eq!(body["stream_options"]["include_usage"], true);
    assert_eq!(sent[0].path, "/v1/chat/completions");
    assert_eq!(
        sent[0].header("authorization"),
        Some(format!("Bearer {UPSTREAM_KEY}").as_str())
    );
    gw.shutdown().await.unwrap();
}

#[tokio::test]
async fn parallel_and_identical_tool_calls_are_assembled_under_the_gateways_ids() {
    let args = r#"{"file_path":"/tmp/a.txt"}"#;
    let script = Script::new()
        .then(Reply::tool_calls_stream(
            &[
                ("call_A", "read_file", args),
                ("call_B", "read_file", args),
                ("call_C", "glob", r#"{"pattern":"*.rs"}"#),
            ],
            3,
        ))
        .then(Reply::text_stream(["done"]));
    let (upstream, gw) = start(script, |_| {}).await;

    let frames = Frames::new(
        post(
            &gw,
            "gemini-2.5-flash",
            "streamGenerateContent",
            &user_request("go"),
        )
        .await,
    )
    .all()
    .await;
    let calls = function_calls(&frames);
    assert_eq!(calls.len(), 3, "{frames:?}");
    let ids: Vec<String> = calls
        .iter()
        .map(|c| c["id"].as_str().unwrap().to_owned())
        .collect();
    assert!(
        ids.iter()
            .all(|id| id.starts_with("call_")
                && !["call_A", "call_B", "call_C"].contains(&id.as_str())),
        "the guest gets the gateway's ids: {ids:?}"
    );
    assert!(ids[0] != ids[1] && ids[1] != ids[2]);
    assert_eq!(
        calls[0],
        json!({"id": ids[0], "name": "read_file", "args": {"file_path": "/tmp/a.txt"}})
    );
    assert_eq!(
        calls[1]["args"], calls[0]["args"],
        "identical calls stay distinct by id"
    );
    assert_eq!(calls[2]["args"], json!({"pattern": "*.rs"}));
    // All calls arrive together, on the final chunk.
    let last = frames.last().unwrap();
    assert_eq!(function_calls(std::slice::from_ref(last)).len(), 3);
    assert_eq!(last["candidates"][0]["finishReason"], "STOP");

    // The guest answers by the ids it got; the upstream sees its own ids again, in order.
    let follow_up = json!({
        "contents": [
            {"role": "user", "parts": [{"text": "go"}]},
            {"role": "model", "parts": calls.iter().map(|c| json!({"functionCall": c})).collect::<Vec<_>>()},
            {"role": "user", "parts": [
                {"functionResponse": {"id": ids[0], "name": "read_file", "response": {"output": "one"}}},
                {"functionResponse": {"id": ids[1], "name": "read_file", "response": {"output": "two"}}},
                {"functionResponse": {"id": ids[2], "name": "glob", "response": {"output": "three"}}}
            ]}
        ]
    });
    let frames =
        Frames::new(post(&gw, "gemini-2.5-flash", "streamGenerateContent", &follow_up).await)
            .all()
            .await;
    assert_eq!(text_of(&frames), "done");
    let tool_messages = upstream.requests()[1].tool_messages();
    let ids: Vec<&str> = tool_messages
        .iter()
        .map(|m| m["tool_call_id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["call_A", "call_B", "call_C"]);
    assert!(
        tool_messages[1]["content"]
            .as_str()
            .unwrap()
            .contains("two")
    );
    gw.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_response_for_an_id_never_delivered_is_refused() {
    let script = Script::new()
        .then(Reply::tool_calls_stream(
            &[("call_1", "glob", r#"{"pattern":"*"}"#)],
            4,
        ))
        .then(Reply::text_stream(["x"]));
    let (upstream, gw) = start(script, |_| {}).await;
    let _ = Frames::new(post(&gw, "m", "streamGenerateContent", &user_request("go")).await)
        .all()
        .await;
    let forged = json!({"contents": [
        {"role": "user", "parts": [{"text": "go"}]},
        {"role": "model", "parts": [{"functionCall": {"id": "call_1", "name": "glob", "args": {"pattern": "*"}}}]},
        {"role": "user", "parts": [{"functionResponse": {"id": "call_999", "name": "glob", "response": {"output": "x"}}}]}
    ]});
    let response = post(&gw, "m", "streamGenerateContent", &forged).await;
    assert_eq!(response.status(), 400);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["error"]["status"], "INVALID_ARGUMENT");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("call_999"),
        "{body}"
    );
    assert_eq!(
        upstream.requests().len(),
        1,
        "refused before reaching the upstream"
    );
    gw.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_malformed_call_is_retried_and_the_tool_is_delivered_exactly_once() {
    let script = Script::new()
        .then(Reply::malformed_tool_call_stream("call_bad", "read_file"))
        .then(Reply::tool_calls_stream(
            &[("call_good", "read_file", r#"{"file_path":"a"}"#)],
            5,
        ));
    let (upstream, gw) = start(script, |_| {}).await;
    let frames = Frames::new(post(&gw, "m", "streamGenerateContent", &user_request("go")).await)
        .all()
        .await;
    let calls = function_calls(&frames);
    assert_eq!(calls.len(), 1, "{frames:?}");
    assert_eq!(
        calls[0]["args"],
        json!({"file_path": "a"}),
        "the retried call"
    );
    assert_eq!(upstream.requests().len(), 2);
    assert_eq!(
        upstream.requests()[0].body,
        upstream.requests()[1].body,
        "same request retried"
    );
    gw.shutdown().await.unwrap();
}

#[tokio::test]
async fn malformed_calls_beyond_the_retry_limit_end_with_malformed_function_call() {
    let script = Script::new().step(
        Step::once(Reply::malformed_tool_call_stream("call_bad", "read_file")).times(Times::Always),
    );
    let (upstream, gw) = start(script, |c| c.retries.malformed_retries = 2).await;
    let frames = Frames::new(post(&gw, "m", "streamGenerateContent", &user_request("go")).await)
        .all()
        .await;
    assert!(
        function_calls(&frames).is_empty(),
        "never delivered: {frames:?}"
    );
    assert_eq!(
        frames.last().unwrap()["candidates"][0]["finishReason"],
        "MALFORMED_FUNCTION_CALL"
    );
    assert_eq!(
        upstream.requests().len(),
        3,
        "1 attempt + 2 malformed retries"
    );
    gw.shutdown().await.unwrap();
}

#[tokio::test]
async fn an_upstream_that_reuses_its_call_ids_gets_every_call_delivered() {
    // Local servers restart at `call_0` every turn: each turn's call is still delivered, under
    // a fresh id of the gateway's, and the history sent upstream never holds one id twice.
    let call = ("call_0", "glob", r#"{"pattern":"*"}"#);
    let script = Script::new()
        .then(Reply::tool_calls_stream(&[call], 4))
        .then(Reply::tool_calls_stream(&[call], 4))
        .then(Reply::text_stream(["done"]));
    let (upstream, gw) = start(script, |c| c.retries.malformed_retries = 1).await;
    let mut contents = vec![json!({"role": "user", "parts": [{"text": "go"}]})];
    let mut delivered = Vec::new();
    for _ in 0..2 {
        let request = json!({ "contents": contents });
        let frames = Frames::new(post(&gw, "m", "streamGenerateContent", &request).await)
            .all()
            .await;
        let calls = function_calls(&frames);
        assert_eq!(calls.len(), 1, "{frames:?}");
        let id = calls[0]["id"].as_str().unwrap().to_owned();
        contents.push(json!({"role": "model", "parts": [{"functionCall": calls[0]}]}));
        contents.push(json!({"role": "user", "parts": [{"functionResponse":
            {"id": id, "name": "glob", "response": {"output": "x"}}}]}));
        delivered.push(id);
    }
    assert_ne!(delivered[0], delivered[1]);
    let request = json!({ "contents": contents });
    let frames = Frames::new(post(&gw, "m", "streamGenerateContent", &request).await)
        .all()
        .await;
    assert_eq!(text_of(&frames), "done");
    let sent = upstream.requests();
    assert_eq!(sent.len(), 3, "no malformed retry");
    let tool_messages = sent[2].tool_messages();
    let answered: Vec<&str> = tool_messages
        .iter()
        .map(|m| m["tool_call_id"].as_str().unwrap())
        .collect();
    // The first call_0 is the upstream's own again; the repeat keeps the gateway's id.
    assert_eq!(answered, ["call_0", delivered[1].as_str()]);
    gw.shutdown().await.unwrap();
}

#[tokio::test]
async fn rate_limited_then_ok_honours_retry_after() {
    let script = Script::new()
        .then(Reply::error_retry_after(429, "slow down", "1"))
        .then(Reply::text_stream(["after the wait"]));
    let (upstream, gw) = start(script, |_| {}).await;
    let frames = Frames::new(post(&gw, "m", "streamGenerateContent", &user_request("hi")).await)
        .all()
        .await;
    assert_eq!(text_of(&frames), "after the wait");
    let sent = upstream.requests();
    assert_eq!(sent.len(), 2);
    gw.shutdown().await.unwrap();
}

#[tokio::test]
async fn upstream_client_errors_are_passed_on_in_google_shape() {
    let script = Script::new().then(Reply::error(400, "context length exceeded: 40000 > 32768"));
    let (upstream, gw) = start(script, |_| {}).await;
    let response = post(&gw, "m", "streamGenerateContent", &user_request("hi")).await;
    assert_eq!(response.status(), 400);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["error"]["code"], 400);
    assert_eq!(body["error"]["status"], "INVALID_ARGUMENT");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("context length exceeded")
    );
    assert_eq!(upstream.requests().len(), 1, "400 is not retried");
    gw.shutdown().await.unwrap();
}

#[tokio::test]
async fn persistent_rate_limits_fail_fast_with_a_terminal_quota_error_and_retry_info() {
    let script = Script::always(Reply::error_retry_after(429, "rate limited", "0"));
    let (upstream, gw) = start(script, |c| c.retries.upstream_attempts = 3).await;
    let response = post(&gw, "m", "generateContent", &user_request("hi")).await;
    assert_eq!(response.status(), 429);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["error"]["status"], "RESOURCE_EXHAUSTED");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("limit: 0"),
        "terminal for Gemini CLI: {message}"
    );
    assert_eq!(
        body["error"]["details"][0]["@type"],
        "type.googleapis.com/google.rpc.RetryInfo"
    );
    assert_eq!(body["error"]["details"][0]["retryDelay"], "0s");
    assert_eq!(upstream.requests().len(), 3);
    gw.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_dead_upstream_is_a_503_after_bounded_retries() {
    let gw = dead_upstream_gateway().await;
    let response = post(&gw, "m", "streamGenerateContent", &user_request("hi")).await;
    assert_eq!(response.status(), 503);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["error"]["status"], "UNAVAILABLE");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("3 attempt"),
        "{body}"
    );
    gw.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_stream_going_idle_before_any_output_is_retried() {
    let stalled = StreamReply::new(vec![StreamEvent::json(chunk::role())])
        .ending(switchyard_testkit::chat_upstream::StreamEnd::Hang);
    let script = Script::new()
        .then(Reply::Stream(stalled))
        .then(Reply::text_stream(["recovered"]));
    let (upstream, gw) = start(script, |c| c.timeouts.idle_ms = 300).await;
    let frames = Frames::new(post(&gw, "m", "streamGenerateContent", &user_request("hi")).await)
        .all()
        .await;
    assert_eq!(text_of(&frames), "recovered");
    assert_eq!(upstream.requests().len(), 2);
    within(
        "abandoned stream noticed",
        upstream.wait_for_cancelled_hangs(1),
    )
    .await;
    gw.shutdown().await.unwrap();
}

#[tokio::test]
async fn count_tokens_is_a_local_estimate() {
    let (upstream, gw) = start(Script::new(), |_| {}).await;
    let short = json!({"contents": [{"role": "user", "parts": [{"text": "hi"}]}]});
    let long = json!({"contents": [{"role": "user", "parts": [{"text": "word ".repeat(4000)}]}]});
    let a: Value = post(&gw, "gemini-2.5-flash", "countTokens", &short)
        .await
        .json()
        .await
        .unwrap();
    let b: Value = post(&gw, "gemini-2.5-flash", "countTokens", &long)
        .await
        .json()
        .await
        .unwrap();
    let (a, b) = (
        a["totalTokens"].as_u64().unwrap(),
        b["totalTokens"].as_u64().unwrap(),
    );
    assert!(a >= 1 && b > a * 100, "short {a}, long {b}");
    assert!(upstream.requests().is_empty(), "never an upstream call");
    gw.shutdown().await.unwrap();
}

#[tokio::test]
async fn auxiliary_models_follow_aliases_and_json_requests_get_bare_json() {
    let script = Script::new()
        .then(Reply::completion_text(
            "```json\n{\"next_speaker\": \"user\"}\n```",
        ))
        .then(Reply::completion_text("plain"));
    let (upstream, gw) = start(script, |c| {
        c.aliases
            .insert("gemini-3-flash-preview".into(), "small-model".into());
    })
    .await;
    let json_request = json!({
        "contents": [{"role": "user", "parts": [{"text": "who speaks next?"}]}],
        "generationConfig": {"temperature": 0, "responseMimeType": "application/json",
            "responseJsonSchema": {"type": "object", "properties": {"next_speaker": {"type": "string"}}}}
    });
    let response = post(
        &gw,
        "gemini-3-flash-preview",
        "generateContent",
        &json_request,
    )
    .await;
    assert_eq!(response.status(), 200);
    let body: Value = response.json().await.unwrap();
    let text = body["candidates"][0]["content"]["parts"][0]["text"]
        .as_str()
        .unwrap();
    assert_eq!(
        serde_json::from_str::<Value>(text).unwrap(),
        json!({"next_speaker": "user"})
    );

    let response = post(
        &gw,
        "gemini-3-pro-preview",
        "generateContent",
        &user_request("x"),
    )
    .await;
    assert_eq!(response.status(), 200);

    let sent = upstream.requests();
    assert_eq!(sent[0].json()["model"], "small-model");
    assert_ne!(sent[0].json()["stream"], true);
    assert_eq!(
        sent[1].json()["model"],
        UPSTREAM_MODEL,
        "unaliased names go to the main model"
    );
    gw.shutdown().await.unwrap();
}

#[tokio::test]
async fn strict_models_refuses_unknown_names() {
    let (upstream, gw) = start(Script::always(Reply::text("ok")), |c| {
        c.strict_models = true
    })
    .await;
    let response = post(&gw, "gemini-2.5-pro", "generateContent", &user_request("x")).await;
    assert_eq!(response.status(), 404);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["error"]["status"], "NOT_FOUND");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("strict_models")
    );
    assert!(upstream.requests().is_empty());
    let ok = post(&gw, UPSTREAM_MODEL, "generateContent", &user_request("x")).await;
    assert_eq!(ok.status(), 200);
    gw.shutdown().await.unwrap();
}

#[tokio::test]
async fn unknown_request_options_are_a_400_not_silently_dropped() {
    let (upstream, gw) = start(Script::always(Reply::text("ok")), |_| {}).await;
    let mut body = user_request("x");
    body["generationConfig"]["frobnicate"] = json!(true);
    let response = post(&gw, "m", "streamGenerateContent", &body).await;
    assert_eq!(response.status(), 400);
    let err: Value = response.json().await.unwrap();
    assert_eq!(err["error"]["status"], "INVALID_ARGUMENT");
    assert!(
        err["error"]["message"]
            .as_str()
            .unwrap()
            .contains("frobnicate"),
        "{err}"
    );
    assert!(upstream.requests().is_empty());
    gw.shutdown().await.unwrap();
}

#[tokio::test]
async fn the_ingress_key_is_required_when_configured() {
    let (upstream, gw) = start(Script::always(Reply::text("ok")), |c| {
        c.ingress_key = Some("per-run-token".into())
    })
    .await;
    let url = url(&gw, "m", "generateContent");
    let missing = client()
        .post(&url)
        .json(&user_request("x"))
        .send()
        .await
        .unwrap();
    assert_eq!(missing.status(), 401);
    let body: Value = missing.json().await.unwrap();
    assert_eq!(body["error"]["status"], "UNAUTHENTICATED");
    let wrong = client()
        .post(&url)
        .header("x-goog-api-key", "per-run-tokeX")
        .json(&user_request("x"))
        .send()
        .await
        .unwrap();
    assert_eq!(wrong.status(), 401);
    assert!(upstream.requests().is_empty());
    let right = client()
        .post(&url)
        .header("x-goog-api-key", "per-run-token")
        .json(&user_request("x"))
        .send()
        .await
        .unwrap();
    assert_eq!(right.status(), 200);
    assert_eq!(
        gw.guest_env()[1],
        ("GEMINI_API_KEY".to_string(), "per-run-token".to_string())
    );
    gw.shutdown().await.unwrap();
}

#[tokio::test]
async fn shutdown_cancels_an_in_flight_hung_upstream() {
    let (upstream, gw) = start(Script::always(Reply::Hang), |c| {
        c.timeouts.shutdown_ms = 2_000
    })
    .await;
    let url = url(&gw, "m", "streamGenerateContent");
    let guest =
        tokio::spawn(async move { client().post(url).json(&user_request("x")).send().await });
    within("upstream request", upstream.wait_for_requests(1)).await;
    within("gateway shutdown", gw.shutdown()).await.unwrap();
    within(
        "upstream request dropped",
        upstream.wait_for_cancelled_hangs(1),
    )
    .await;
    let answer = within("guest answered", guest).await.unwrap();
    // The guest gets an error (a 503 Google error or a closed connection), never a hang.
    if let Ok(response) = answer {
        assert_eq!(response.status(), 503);
    }
}

#[tokio::test]
async fn unknown_paths_and_methods_get_google_errors() {
    let (_upstream, gw) = start(Script::new(), |_| {}).await;
    let response = post(&gw, "m", "embedContent", &json!({})).await;
    assert_eq!(response.status(), 404);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["error"]["status"], "NOT_FOUND");
    gw.shutdown().await.unwrap();
}

#[tokio::test]
async fn the_upstream_request_goes_whole_with_its_content_length() {
    // The real first Gemini CLI request twice: both upstream bodies are sent with a
    // Content-Length, and the same request translates to the same bytes.
    let request: Value = serde_json::from_slice(GEMINI_CLI_FIRST_REQUEST).unwrap();
    let script = Script::always(Reply::text_stream(["ok"]));
    let (upstream, gw) = start(script, |_| {}).await;
    for _ in 0..2 {
        let frames = Frames::new(post(&gw, "m", "streamGenerateContent", &request).await)
            .all()
            .await;
        assert_eq!(text_of(&frames), "ok");
    }
    let sent = upstream.requests();
    assert_eq!(sent.len(), 2);
    for request in &sent {
        assert_eq!(
            request.header("content-length"),
            Some(request.body.len().to_string().as_str())
        );
        assert_eq!(request.header("transfer-encoding"), None);
    }
    assert_eq!(
        sent[0].body, sent[1].body,
        "the same request sends the same bytes"
    );
    assert!(
        sent[1].json()["tools"]
            .as_array()
            .is_some_and(|t| !t.is_empty())
    );
    gw.shutdown().await.unwrap();
}

/// An error the upstream reports inside its response reaches the guest the same way whether the
/// exchange was streamed or not: a client error (here 400) as that error, a retryable one (429)
/// as the gateway's terminal "gave up" answer, so the guest does not retry it either.
#[tokio::test]
async fn errors_reported_inside_the_response_map_alike_streamed_or_not() {
    for (code, status, terminal) in [
        (400, "INVALID_ARGUMENT", false),
        (429, "RESOURCE_EXHAUSTED", true),
    ] {
        let error = json!({"error": {"message": "context is too long", "code": code}});
        let unary_error = error.clone();
        let reply = Reply::Dynamic(std::sync::Arc::new(move |request| {
            if request.json()["stream"] == json!(true) {
                Reply::Stream(StreamReply::new(vec![StreamEvent::json(error.clone())]))
            } else {
                Reply::Json {
                    status: 200,
                    body: unary_error.clone(),
                }
            }
        }));
        let (upstream, gw) = start(Script::always(reply), |_| {}).await;

        let response = post(&gw, "m", "generateContent", &user_request("hi")).await;
        assert_eq!(response.status().as_u16(), code);
        let unary: Value = response.json().await.unwrap();
        let streamed =
            Frames::new(post(&gw, "m", "streamGenerateContent", &user_request("hi")).await)
                .all()
                .await;
        assert_eq!(streamed.len(), 1, "{streamed:?}");
        for body in [&unary, &streamed[0]] {
            assert_eq!(body["error"]["code"], code, "{body}");
            assert_eq!(body["error"]["status"], status, "{body}");
            let message = body["error"]["message"].as_str().unwrap();
            assert!(message.contains("context is too long"), "{message}");
            assert_eq!(message.contains("limit: 0"), terminal, "{message}");
        }
        // Not retried by the gateway either: one request each.
        assert_eq!(upstream.requests().len(), 2);
        gw.shutdown().await.unwrap();
    }
}

/// A countTokens body of exactly `len` bytes.
fn count_tokens_body_of_len(len: usize) -> Vec<u8> {
    let empty = json!({"contents": [{"role": "user", "parts": [{"text": ""}]}]}).to_string();
    let body =
        json!({"contents": [{"role": "user", "parts": [{"text": "a".repeat(len - empty.len())}]}]})
            .to_string()
            .into_bytes();
    assert_eq!(body.len(), len);
    body
}

/// Sends a request head and the first `sent` bytes of `body` on a raw connection.
async fn send_partly(
    gw: &switchyard_gateway::GatewayHandle,
    body: &[u8],
    sent: usize,
) -> tokio::net::TcpStream {
    use tokio::io::AsyncWriteExt;
    let mut tcp = tokio::net::TcpStream::connect(gw.local_addr())
        .await
        .unwrap();
    let head = format!(
        "POST /v1beta/models/m:countTokens HTTP/1.1\r\nhost: 127.0.0.1\r\n\
         content-type: application/json\r\ncontent-length: {}\r\n\r\n",
        body.len()
    );
    tcp.write_all(head.as_bytes()).await.unwrap();
    tcp.write_all(&body[..sent]).await.unwrap();
    tcp
}

/// Reads one HTTP/1.1 response (head and a `content-length` body) and returns its status line.
async fn read_status_line(tcp: &mut tokio::net::TcpStream) -> String {
    use tokio::io::AsyncReadExt;
    let mut seen = Vec::new();
    let mut buf = [0u8; 4096];
    while !seen.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = within("response head", tcp.read(&mut buf)).await.unwrap();
        assert!(n > 0, "connection closed before a response head");
        seen.extend_from_slice(&buf[..n]);
    }
    let text = String::from_utf8_lossy(&seen).to_string();
    text.lines().next().unwrap_or_default().to_string()
}

#[tokio::test]
async fn request_bodies_are_read_within_the_shared_budget() {
    let (_upstream, gw) = start(Script::new(), |c| {
        c.limits.buffered_request_bytes = 4096;
        c.limits.connection_body_bytes = 512;
    })
    .await;
    // A guest sends most of a body larger than the whole budget: the bytes past its own bound
    // that arrived hold the whole budget until it is complete.
    let large = count_tokens_body_of_len(5000);
    let mut slow = send_partly(&gw, &large, 4700).await;
    let post_later = |body: Value| {
        let url = url(&gw, "m", "countTokens");
        tokio::spawn(async move {
            client()
                .post(url)
                .json(&body)
                .send()
                .await
                .unwrap()
                .status()
        })
    };
    // A body past its own bound waits for the budget; one within it does not.
    let medium = post_later(serde_json::from_slice(&count_tokens_body_of_len(2000)).unwrap());
    let small = post_later(user_request("hi"));
    assert_eq!(within("the small request", small).await.unwrap(), 200);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        !medium.is_finished(),
        "a body past its own bound was read while a larger one held the whole budget"
    );
    use tokio::io::AsyncWriteExt;
    slow.write_all(&large[4700..]).await.unwrap();
    assert_eq!(read_status_line(&mut slow).await, "HTTP/1.1 200 OK");
    assert_eq!(within("the waiting request", medium).await.unwrap(), 200);
    gw.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_stalled_body_is_a_408_and_an_oversized_one_a_413() {
    let (_upstream, gw) = start(Script::new(), |c| {
        c.limits.buffered_request_bytes = 4096;
        c.limits.max_request_bytes = 10_000;
        c.timeouts.guest_body_idle_ms = 200;
    })
    .await;
    let body = count_tokens_body_of_len(5000);
    let mut stalled = send_partly(&gw, &body, 100).await;
    assert_eq!(
        read_status_line(&mut stalled).await,
        "HTTP/1.1 408 Request Timeout"
    );
    // The stalled body's reservation is back: the next request is read.
    let ok = post(&gw, "m", "countTokens", &user_request("hi")).await;
    assert_eq!(ok.status(), 200);
    let oversized = count_tokens_body_of_len(10_001);
    let mut refused = send_partly(&gw, &oversized, 0).await;
    assert_eq!(
        read_status_line(&mut refused).await,
        "HTTP/1.1 413 Payload Too Large"
    );
    gw.shutdown().await.unwrap();
}

/// The `[translation]` section reaches the upstream request: with `forward_top_k` and
/// `thinking = "reasoning_effort"`, `topK` and the thinking budget are sent; by default both are
/// dropped (and recorded as dropped).
#[tokio::test]
async fn the_translation_section_decides_what_reaches_the_upstream() {
    let mut request = user_request("hi");
    request["generationConfig"] = json!({"topK": 40, "thinkingConfig": {"thinkingBudget": 512}});
    for configured in [false, true] {
        let (upstream, gw) = start(Script::always(Reply::completion_text("ok")), |config| {
            if configured {
                config.translation =
                    toml::from_str("forward_top_k = true\nthinking = \"reasoning_effort\"\n")
                        .unwrap();
            }
        })
        .await;
        let response = post(&gw, "gemini-2.5-flash", "generateContent", &request).await;
        assert_eq!(response.status(), 200);
        let sent = upstream.requests()[0].json();
        if configured {
            assert_eq!(sent["top_k"], 40);
            assert_eq!(sent["reasoning_effort"], "low");
        } else {
            assert!(sent.get("top_k").is_none() && sent.get("reasoning_effort").is_none());
        }
        gw.shutdown().await.unwrap();
    }
}

/// `[translation] forward_reasoning` shows the upstream's reasoning to the guest as `thought`
/// parts; by default the guest gets none.
#[tokio::test]
async fn forward_reasoning_shows_the_upstream_reasoning_as_thought_parts() {
    let events = || {
        vec![
            StreamEvent::json(chunk::role()),
            StreamEvent::json(chunk::reasoning("Let me think.")),
            StreamEvent::json(chunk::text("Hi!")),
            StreamEvent::json(chunk::finish("stop")),
            StreamEvent::json(chunk::usage(11, 2)),
        ]
    };
    for shown in [false, true] {
        let script = Script::always(Reply::Stream(StreamReply::new(events())));
        let (_upstream, gw) = start(script, |config| {
            config.translation.forward_reasoning = shown;
        })
        .await;
        let request = user_request("hi");
        let frames =
            Frames::new(post(&gw, "gemini-2.5-flash", "streamGenerateContent", &request).await)
                .all()
                .await;
        let thoughts: Vec<Value> = frames
            .iter()
            .flat_map(parts)
            .filter(|p| p["thought"] == true)
            .collect();
        if shown {
            assert_eq!(
                thoughts,
                vec![json!({"text": "Let me think.", "thought": true})]
            );
        } else {
            assert!(thoughts.is_empty(), "{thoughts:?}");
        }
        let visible: String = frames
            .iter()
            .flat_map(parts)
            .filter(|p| p["thought"] != true)
            .filter_map(|p| p["text"].as_str().map(str::to_owned))
            .collect();
        assert_eq!(visible, "Hi!");
        gw.shutdown().await.unwrap();
    }
}

#[tokio::test]
async fn with_stream_tools_off_a_streamed_request_with_tools_goes_upstream_unstreamed() {
    let (upstream, gw) = start(
        Script::new()
            .then(Reply::Json {
                status: 200,
                body: chunk::completion_tool_calls(&[("call_u1", "glob", r#"{"pattern":"*"}"#)]),
            })
            .then(Reply::text("plain")),
        |config| config.translation.stream_tools = false,
    )
    .await;
    let with_tools = json!({
        "contents": [{"role": "user", "parts": [{"text": "find"}]}],
        "tools": [{"functionDeclarations": [{"name": "glob",
            "parametersJsonSchema": {"type": "object", "properties": {"pattern": {"type": "string"}}}}]}]
    });
    let frames = Frames::new(post(&gw, "m", "streamGenerateContent", &with_tools).await)
        .all()
        .await;
    let calls = function_calls(&frames);
    assert_eq!(calls.len(), 1, "{frames:?}");
    assert_eq!(calls[0]["name"], "glob");
    // Without tools the request still streams.
    let plain = Frames::new(post(&gw, "m", "streamGenerateContent", &user_request("hi")).await)
        .all()
        .await;
    assert_eq!(text_of(&plain), "plain");
    let requests = upstream.requests();
    assert_ne!(
        requests[0].json()["stream"],
        json!(true),
        "asked without streaming"
    );
    assert_eq!(requests[1].json()["stream"], json!(true));
}
