//! Hostile guests and upstreams: the gateway answers each with a clear error or closes the
//! connection, and keeps serving everyone else.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use common::*;
use serde_json::Value;
use switchyard_testkit::chat_upstream::{Reply, Script};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Reads until the gateway closes the connection (EOF or reset); returns what it sent.
async fn read_to_close(tcp: &mut TcpStream) -> Vec<u8> {
    let mut seen = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match within("the gateway closes the connection", tcp.read(&mut buf)).await {
            Ok(0) | Err(_) => return seen,
            Ok(n) => seen.extend_from_slice(&buf[..n]),
        }
    }
}

#[tokio::test]
async fn connections_that_stop_mid_head_are_closed() {
    let (_upstream, gw) = start(Script::new(), |c| c.timeouts.guest_head_ms = 300).await;
    let mut stuck = Vec::new();
    for _ in 0..50 {
        let mut tcp = TcpStream::connect(gw.local_addr()).await.unwrap();
        tcp.write_all(b"POST /v1beta/models/m:countTokens HTTP/1.1\r\nhost: 127.0.0.1\r\n")
            .await
            .unwrap();
        stuck.push(tcp);
    }
    // A connection that never sends a byte is closed too.
    stuck.push(TcpStream::connect(gw.local_addr()).await.unwrap());
    for tcp in &mut stuck {
        read_to_close(tcp).await;
    }
    // And the gateway still serves a whole request.
    let ok = post(&gw, "m", "countTokens", &user_request("hi")).await;
    assert_eq!(ok.status(), 200);
    gw.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_kept_alive_connection_left_idle_is_closed() {
    let (_upstream, gw) = start(Script::new(), |c| c.timeouts.guest_head_ms = 300).await;
    let mut tcp = TcpStream::connect(gw.local_addr()).await.unwrap();
    let body = serde_json::to_vec(&user_request("hi")).unwrap();
    let head = format!(
        "POST /v1beta/models/m:countTokens HTTP/1.1\r\nhost: 127.0.0.1\r\n\
         content-type: application/json\r\ncontent-length: {}\r\n\r\n",
        body.len()
    );
    tcp.write_all(head.as_bytes()).await.unwrap();
    tcp.write_all(&body).await.unwrap();
    let answer = read_to_close(&mut tcp).await;
    assert!(
        answer.starts_with(b"HTTP/1.1 200 OK"),
        "{}",
        String::from_utf8_lossy(&answer)
    );
    gw.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_chunk_extension_that_never_ends_is_refused() {
    let (_upstream, gw) = start(Script::new(), |_| {}).await;
    let mut tcp = TcpStream::connect(gw.local_addr()).await.unwrap();
    tcp.write_all(
        b"POST /v1beta/models/m:countTokens HTTP/1.1\r\nhost: 127.0.0.1\r\n\
          transfer-encoding: chunked\r\n\r\n5;ext=",
    )
    .await
    .unwrap();
    // 256 KiB of one extension, never ended: far past any sane extension.
    let filler = vec![b'x'; 16 * 1024];
    for _ in 0..16 {
        if tcp.write_all(&filler).await.is_err() {
            break;
        }
    }
    let answer = read_to_close(&mut tcp).await;
    let answer = String::from_utf8_lossy(&answer);
    assert!(
        answer.is_empty() || answer.starts_with("HTTP/1.1 4"),
        "the body is refused, not read on: {answer}"
    );
    gw.shutdown().await.unwrap();
}

async fn post_with(
    gw: &switchyard_gateway::GatewayHandle,
    headers: &[(&str, &str)],
) -> reqwest::Response {
    let mut request = client()
        .post(url(gw, "m", "countTokens"))
        .json(&user_request("hi"));
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    within("guest request", request.send()).await.unwrap()
}

#[tokio::test]
async fn foreign_hosts_and_cross_site_origins_are_refused() {
    let (_upstream, gw) = start(Script::new(), |_| {}).await;
    for headers in [
        vec![("host", "evil.example")],
        vec![("host", "evil.example:80")],
        vec![("origin", "http://evil.example")],
        vec![("origin", "null")],
        // A page on another localhost port is another site.
        vec![("origin", "http://127.0.0.1:5173")],
        vec![("origin", "http://localhost:5173")],
    ] {
        let response = post_with(&gw, &headers).await;
        assert_eq!(response.status(), 403, "{headers:?}");
        let body: Value = response.json().await.unwrap();
        assert_eq!(body["error"]["code"], 403, "a Google-shaped error");
    }
    let own = gw.base_url();
    let own_by_name = own.replace("127.0.0.1", "localhost");
    for headers in [
        vec![],
        vec![("host", "localhost")],
        vec![("origin", own.as_str())],
        vec![("origin", own_by_name.as_str())],
    ] {
        assert_eq!(post_with(&gw, &headers).await.status(), 200, "{headers:?}");
    }
    // The gateway's own port over https is not its origin.
    let https = own.replace("http://", "https://");
    assert_eq!(
        post_with(&gw, &[("origin", https.as_str())]).await.status(),
        403
    );
    gw.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_configured_origin_is_matched_exactly() {
    let (_upstream, gw) = start(Script::new(), |c| {
        c.allowed_origins = vec!["https://gateway.example".into()];
    })
    .await;
    let status = |origin: &'static str| {
        let gw = &gw;
        async move { post_with(gw, &[("origin", origin)]).await.status() }
    };
    assert_eq!(status("https://gateway.example").await, 200);
    assert_eq!(status("https://GATEWAY.example:443").await, 200);
    for other in [
        "http://gateway.example",
        "https://gateway.example:8443",
        "https://gateway.example.evil",
    ] {
        assert_eq!(status(other).await, 403, "{other}");
    }
    gw.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_configured_host_name_is_served() {
    let (_upstream, gw) = start(Script::new(), |c| {
        c.allowed_hosts = vec!["gateway.internal".into()];
    })
    .await;
    let response = post_with(&gw, &[("host", "gateway.internal:8080")]).await;
    assert_eq!(response.status(), 200);
    gw.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_retry_after_past_the_budget_is_handed_to_the_guest_never_shortened() {
    // 30 s does not fit the 10 s budget; "1e20" is clamped to an hour, not a panic.
    for (asked, expected) in [("30", "30"), ("1e20", "3600")] {
        for method in ["generateContent", "streamGenerateContent"] {
            let script = Script::always(Reply::error_retry_after(429, "slow down", asked));
            let (upstream, gw) = start(script, |_| {}).await;
            let response = post(&gw, "m", method, &user_request("hi")).await;
            assert_eq!(response.status(), 429, "{method}");
            assert_eq!(response.headers()["retry-after"], expected, "{method}");
            let body: Value = response.json().await.unwrap();
            assert_eq!(body["error"]["status"], "RESOURCE_EXHAUSTED");
            assert_eq!(
                body["error"]["details"][0]["retryDelay"],
                format!("{expected}s")
            );
            let message = body["error"]["message"].as_str().unwrap();
            assert!(
                !message.contains("limit: 0"),
                "not terminal: the guest decides ({message})"
            );
            assert_eq!(
                upstream.requests().len(),
                1,
                "{method}: never retried early"
            );
            gw.shutdown().await.unwrap();
        }
    }
}

#[tokio::test]
async fn a_retry_after_within_the_budget_is_waited_as_asked() {
    // Longer than max_backoff_ms: waited all the same, not cut to it.
    let script = Script::new()
        .then(Reply::error_retry_after(429, "slow down", "2"))
        .then(Reply::completion_text("after the wait"));
    let (upstream, gw) = start(script, |c| c.retries.max_backoff_ms = 50).await;
    let started = std::time::Instant::now();
    let response = post(&gw, "m", "generateContent", &user_request("hi")).await;
    assert_eq!(response.status(), 200);
    assert!(
        started.elapsed() >= Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    let body: Value = response.json().await.unwrap();
    assert_eq!(text_of(&[body]), "after the wait");
    assert_eq!(upstream.requests().len(), 2);
    gw.shutdown().await.unwrap();
}

#[tokio::test]
async fn provider_errors_quoting_a_secret_reach_the_guest_redacted() {
    let quoting = format!("Incorrect API key provided: {UPSTREAM_KEY}. Check your key.");
    let ingress = "ingress-token-abcdef-123456";
    let quoting_ingress = format!("proxy saw x-goog-api-key={ingress}");
    let script = Script::new()
        .then(Reply::error(401, &quoting))
        .then(Reply::error(403, &quoting_ingress));
    let (_upstream, gw) = start(script, |c| c.ingress_key = Some(ingress.into())).await;
    for method in ["generateContent", "streamGenerateContent"] {
        let response = within(
            "guest request",
            client()
                .post(url(&gw, "m", method))
                .header("x-goog-api-key", ingress)
                .json(&user_request("hi"))
                .send(),
        )
        .await
        .unwrap();
        assert!(response.status().is_client_error());
        let text = response.text().await.unwrap();
        assert!(!text.contains(UPSTREAM_KEY), "{method}: {text}");
        assert!(!text.contains(ingress), "{method}: {text}");
        assert!(text.contains("[REDACTED]"), "{method}: {text}");
    }
    gw.shutdown().await.unwrap();
}

#[tokio::test]
async fn an_upstream_event_that_never_ends_fails_the_exchange() {
    // One SSE line of 17 MiB with no line end: past the event bound.
    let endless = "x".repeat(17 * 1024 * 1024);
    let script = Script::always(Reply::Raw {
        status: 200,
        content_type: "text/event-stream".into(),
        body: format!("data: {endless}").into_bytes().into(),
    });
    let (_upstream, gw) = start(script, |_| {}).await;
    let response = post(&gw, "m", "streamGenerateContent", &user_request("hi")).await;
    let text = within("the answer", response.text()).await.unwrap();
    assert!(
        text.contains("server-sent event is over"),
        "{}",
        &text[..text.len().min(500)]
    );
    gw.shutdown().await.unwrap();
}

#[tokio::test]
async fn overlong_session_ids_are_refused() {
    let (_upstream, gw) = start(Script::new(), |_| {}).await;
    let long = "s".repeat(129);
    let response = post_with(&gw, &[("x-switchyard-session", &long)]).await;
    assert_eq!(response.status(), 400);
    let ok = post_with(&gw, &[("x-switchyard-session", "run-1")]).await;
    assert_eq!(ok.status(), 200);
    gw.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_guest_that_stops_reading_is_cut_off() {
    // A long stream the guest never reads: the gateway's writes block, then time out.
    let pieces: Vec<String> = (0..4_000)
        .map(|i| format!("{i:07} {}", "y".repeat(2_000)))
        .collect();
    let (_upstream, gw) = start(Script::always(Reply::text_stream(pieces)), |c| {
        c.timeouts.guest_write_ms = 300;
    })
    .await;
    let mut tcp = TcpStream::connect(gw.local_addr()).await.unwrap();
    let body = serde_json::to_vec(&user_request("hi")).unwrap();
    let head = format!(
        "POST /v1beta/models/m:streamGenerateContent?alt=sse HTTP/1.1\r\nhost: 127.0.0.1\r\n\
         content-type: application/json\r\ncontent-length: {}\r\n\r\n",
        body.len()
    );
    tcp.write_all(head.as_bytes()).await.unwrap();
    tcp.write_all(&body).await.unwrap();
    // Do not read for a while: the gateway gives up on this guest.
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    let seen = read_to_close(&mut tcp).await;
    assert!(
        seen.len() < 16_000 * 2_000,
        "the stream was cut off, not delivered whole ({} bytes)",
        seen.len()
    );
    gw.shutdown().await.unwrap();
}

fn image_request(png: &[u8]) -> Value {
    use base64::Engine as _;
    let data = base64::engine::general_purpose::STANDARD.encode(png);
    serde_json::json!({"contents": [{"role": "user", "parts": [
        {"text": "look"},
        {"inlineData": {"mimeType": "image/png", "data": data}}
    ]}]})
}

/// The image URL of the upstream request's user message.
fn upstream_image_url(request: &Value) -> String {
    request["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|m| m["content"].as_array().cloned().unwrap_or_default())
        .find_map(|part| part["image_url"]["url"].as_str().map(str::to_string))
        .unwrap_or_default()
}

#[tokio::test]
async fn an_image_over_the_pixel_budget_or_cut_off_goes_upstream_unchanged() {
    let huge = switchyard_testkit::fixtures::zero_png(16_000, 16_000).unwrap();
    let small = switchyard_testkit::fixtures::zero_png(64, 64).unwrap();
    let half = small[..small.len() / 2].to_vec();
    let (upstream, gw) = start(Script::always(Reply::completion_text("seen")), |_| {}).await;
    for png in [&huge, &half] {
        let response = post(&gw, "m", "generateContent", &image_request(png)).await;
        assert_eq!(response.status(), 200, "converting never fails a request");
    }
    // Within the budget, a whole PNG is converted.
    let response = post(&gw, "m", "generateContent", &image_request(&small)).await;
    assert_eq!(response.status(), 200);
    let requests = upstream.requests();
    assert_eq!(requests.len(), 3);
    let urls: Vec<String> = requests
        .iter()
        .map(|r| upstream_image_url(&r.json()))
        .collect();
    assert!(
        urls[0].starts_with("data:image/png;base64,"),
        "over budget: unchanged"
    );
    assert!(
        urls[1].starts_with("data:image/png;base64,"),
        "cut off: unchanged"
    );
    assert!(
        urls[2].starts_with("data:image/webp;base64,"),
        "{}",
        &urls[2][..40]
    );
    gw.shutdown().await.unwrap();
}

#[tokio::test]
async fn credentials_in_the_upstream_url_never_reach_the_guest_or_the_records() {
    let closed = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let records = tempfile::tempdir().unwrap();
    let records_dir = records.path().to_path_buf();
    let (_upstream, gw) = start(Script::new(), move |c| {
        c.upstream_url = format!("http://user-name:s3cr3t%2Fpass@127.0.0.1:{closed}/v1");
        c.retries.upstream_attempts = 1;
        c.records_dir = Some(records_dir);
    })
    .await;
    let response = post(&gw, "m", "generateContent", &user_request("hi")).await;
    assert!(response.status().is_server_error(), "{}", response.status());
    let body = response.text().await.unwrap();
    gw.shutdown().await.unwrap();
    let mut stored = Vec::new();
    for entry in std::fs::read_dir(records.path()).unwrap() {
        stored.extend(std::fs::read(entry.unwrap().path()).unwrap_or_default());
    }
    assert!(!stored.is_empty(), "the exchange was recorded");
    let stored = String::from_utf8_lossy(&stored);
    for secret in ["s3cr3t", "user-name"] {
        assert!(!body.contains(secret), "{secret} in {body}");
        assert!(!stored.contains(secret), "{secret} in the records");
    }
}

/// Sends a request head, then one body byte every 300 ms until dropped.
async fn drip(
    gw: &switchyard_gateway::GatewayHandle,
    length: Option<u64>,
) -> tokio::task::JoinHandle<()> {
    let mut tcp = TcpStream::connect(gw.local_addr()).await.unwrap();
    let framing = match length {
        Some(n) => format!("content-length: {n}"),
        None => "transfer-encoding: chunked".to_owned(),
    };
    let head = format!(
        "POST /v1beta/models/m:generateContent HTTP/1.1\r\nhost: 127.0.0.1\r\n\
         content-type: application/json\r\n{framing}\r\n\r\n"
    );
    tcp.write_all(head.as_bytes()).await.unwrap();
    tokio::spawn(async move {
        loop {
            let byte: &[u8] = if length.is_some() {
                b" "
            } else {
                b"1\r\n \r\n"
            };
            if tcp.write_all(byte).await.is_err() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
    })
}

#[tokio::test]
async fn guests_dripping_their_bodies_do_not_hold_up_an_ordinary_request() {
    let (_upstream, gw) = start(Script::always(Reply::completion_text("on time")), |_| {}).await;
    // One chunked, one declaring far more than the body budget; both drip for ever.
    let drippers = [
        drip(&gw, None).await,
        drip(&gw, Some(100 * 1024 * 1024)).await,
    ];
    tokio::time::sleep(Duration::from_millis(700)).await;
    let first_turn: Value =
        serde_json::from_slice(switchyard_testkit::fixtures::GEMINI_CLI_FIRST_REQUEST).unwrap();
    for _ in 0..3 {
        // `post` gives up after the watchdog; before, each dripper held the whole budget until
        // its 120 s body deadline.
        let response = post(&gw, "m", "generateContent", &first_turn).await;
        assert_eq!(response.status(), 200);
        let body: Value = response.json().await.unwrap();
        assert_eq!(text_of(&[body]), "on time");
    }
    for dripper in &drippers {
        assert!(!dripper.is_finished(), "still dripping");
        dripper.abort();
    }
    gw.shutdown().await.unwrap();
}

/// A text delta of `n` bytes, as an endless upstream repeats it.
fn text_delta(n: usize) -> Value {
    switchyard_testkit::chat_upstream::chunk::text(&"x".repeat(n))
}

#[tokio::test]
async fn an_endless_answer_is_cut_at_its_bound_recorded_and_the_gateway_serves_on() {
    let records = tempfile::tempdir().unwrap();
    let script = Script::new()
        .then(Reply::Endless(text_delta(1024)))
        .then(Reply::completion_text("next one"));
    let (upstream, gw) = start(script, |c| {
        c.limits.max_answer_bytes = 256 * 1024;
        c.limits.max_recorded_stream_bytes = 16 * 1024;
        c.records_dir = Some(records.path().to_path_buf());
    })
    .await;
    let frames = Frames::new(post(&gw, "m", "streamGenerateContent", &user_request("go")).await)
        .all()
        .await;
    let (last, text) = frames.split_last().unwrap();
    assert_eq!(
        text_of(text).len(),
        256 * 1024,
        "every byte up to the bound, none past it"
    );
    let message = last["error"]["message"].as_str().unwrap();
    assert!(message.contains("limits.max_answer_bytes"), "{last}");
    assert!(
        message.contains("limit: 0"),
        "terminal for Gemini CLI: {message}"
    );
    // The upstream was let go: it streamed a bounded amount, however long we wait.
    let streamed = upstream.endless_bytes();
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(upstream.endless_bytes() < streamed + 4 * 1024 * 1024);
    // The gateway serves on.
    let next = post(&gw, "m", "generateContent", &user_request("again")).await;
    assert_eq!(next.status(), 200);
    gw.shutdown().await.unwrap();

    use switchyard_records::RecordStore as _;
    let store =
        switchyard_records::SqliteStore::open(switchyard_records::store_path(records.path()))
            .unwrap();
    let x = &store
        .exchanges(switchyard_records::ExchangeFilter::All)
        .unwrap()[0];
    assert_eq!(x.error.as_ref().unwrap().kind, "answer_limit");
    let recorded = x.guest_response.clone().unwrap();
    assert_eq!(
        text_of(&[recorded]).len(),
        256 * 1024,
        "the record holds what the guest received"
    );
    let kept: usize = x.attempts[0].raw_events.iter().map(String::len).sum();
    assert!(kept <= 16 * 1024, "{kept}");
    assert!(
        x.notes
            .iter()
            .any(|n| n.contains("raw events of attempt 1 cut at 16384 bytes")),
        "{:?}",
        x.notes
    );
}

#[tokio::test]
async fn an_answer_past_its_calls_or_its_time_ends_with_a_typed_error() {
    let five: Vec<(String, String)> = (0..5)
        .map(|i| (format!("call_{i}"), format!("{{\"n\":{i}}}")))
        .collect();
    let calls: Vec<(&str, &str, &str)> = five
        .iter()
        .map(|(id, args)| (id.as_str(), "list_directory", args.as_str()))
        .collect();
    for stream in [true, false] {
        let reply = if stream {
            Reply::tool_calls_stream(&calls, 4)
        } else {
            Reply::Json {
                status: 200,
                body: switchyard_testkit::chat_upstream::chunk::completion_tool_calls(&calls),
            }
        };
        let (_upstream, gw) = start(Script::always(reply), |c| {
            c.limits.max_answer_tool_calls = 3
        })
        .await;
        let method = if stream {
            "streamGenerateContent"
        } else {
            "generateContent"
        };
        let response = post(&gw, "m", method, &user_request("go")).await;
        let error = if stream {
            Frames::new(response).all().await.pop().unwrap()
        } else {
            response.json().await.unwrap()
        };
        let message = error["error"]["message"].as_str().unwrap_or_default();
        assert!(
            message.contains("limits.max_answer_tool_calls"),
            "{method}: {error}"
        );
        gw.shutdown().await.unwrap();
    }
    let (_upstream, gw) = start(Script::always(Reply::Endless(text_delta(16))), |c| {
        c.limits.max_answer_ms = 300;
    })
    .await;
    let last = Frames::new(post(&gw, "m", "streamGenerateContent", &user_request("go")).await)
        .all()
        .await
        .pop()
        .unwrap();
    let message = last["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("limits.max_answer_ms"), "{last}");
    gw.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_body_past_the_blocking_threshold_is_translated_and_answered() {
    // 3 MiB of history: parsed and translated on the blocking pool.
    let (upstream, gw) = start(
        Script::always(Reply::completion_text("read it all")),
        |_| {},
    )
    .await;
    let request = user_request(&"long history ".repeat(3 * 1024 * 1024 / 13));
    let response = post(&gw, "m", "generateContent", &request).await;
    assert_eq!(response.status(), 200);
    let body: Value = response.json().await.unwrap();
    assert_eq!(text_of(&[body]), "read it all");
    let sent = upstream.requests()[0].json();
    assert!(sent["messages"][0]["content"].as_str().unwrap().len() > 3_000_000);
    // A bad one is still a typed error from there.
    let mut bad = request.clone();
    bad["contents"][0]["parts"][0]["executableCode"] = serde_json::json!({"code": "1"});
    let response = post(&gw, "m", "generateContent", &bad).await;
    assert_eq!(response.status(), 400);
    gw.shutdown().await.unwrap();
}
