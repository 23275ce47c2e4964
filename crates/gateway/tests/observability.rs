//! What a platform team watches: `GET /health`, `GET /ready` (the upstream reachable, the
//! records writable) and a Prometheus scrape of `GET /metrics` after traffic, behind the Host
//! guard and the ingress key.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{UPSTREAM_MODEL, client, start, within};
use serde_json::{Value, json};
use switchyard_gateway::GatewayHandle;
use switchyard_testkit::chat_upstream::{Reply, Script, Step, Times};

async fn get(gw: &GatewayHandle, path: &str, key: Option<&str>) -> reqwest::Response {
    let mut request = client().get(format!("{}{path}", gw.base_url()));
    if let Some(key) = key {
        request = request.header("authorization", format!("Bearer {key}"));
    }
    within("GET", request.send()).await.unwrap()
}

/// The value of the first sample line of `text` that starts with `prefix`.
fn sample(text: &str, prefix: &str) -> Option<f64> {
    text.lines()
        .find(|l| l.starts_with(prefix))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

#[tokio::test]
async fn health_ready_and_a_scrape_after_traffic() {
    let script = Script::new().step(Step::once(Reply::text_stream(["Hi"])).times(Times::Always));
    let (_upstream, gw) = start(script, |c| {
        c.ingress_key = Some("k".into());
        c.limits.max_request_bytes = 2_000;
    })
    .await;
    assert_eq!(get(&gw, "/health", None).await.status(), 200);
    let ready = get(&gw, "/ready", None).await;
    assert_eq!(ready.status(), 200);
    let body: Value = ready.json().await.unwrap();
    assert_eq!(body["upstream"], "reachable");
    assert_eq!(body["records"], "off");

    // Traffic: one answered chat, one body over the size limit.
    let chat = |body: Value| {
        client()
            .post(format!("{}/v1/chat/completions", gw.base_url()))
            .header("authorization", "Bearer k")
            .json(&body)
            .send()
    };
    let ok = chat(json!({"model": "m", "stream": true,
        "messages": [{"role": "user", "content": "hi"}]}))
    .await
    .unwrap();
    assert_eq!(ok.status(), 200);
    let _ = ok.text().await;
    let big =
        chat(json!({"model": "m", "messages": [{"role": "user", "content": "x".repeat(5_000)}]}))
            .await
            .unwrap();
    assert_eq!(big.status(), 413);

    // Without the key: refused; with it: the scrape.
    assert_eq!(get(&gw, "/metrics", None).await.status(), 401);
    let scrape = get(&gw, "/metrics", Some("k")).await;
    assert_eq!(scrape.status(), 200);
    assert!(
        scrape.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("application/openmetrics-text")
    );
    let text = scrape.text().await.unwrap();
    let labels = format!(
        "gen_ai_operation_name=\"chat\",gen_ai_request_model=\"{UPSTREAM_MODEL}\",\
         switchyard_ingress=\"openai.chatCompletions\""
    );
    assert_eq!(
        sample(
            &text,
            &format!("gen_ai_client_operation_duration_seconds_count{{{labels},outcome=\"ok\"}}")
        ),
        Some(1.0),
        "{text}"
    );
    // The scripted upstream reports 12 prompt and 7 completion tokens.
    assert_eq!(
        sample(
            &text,
            &format!(
                "gen_ai_client_token_usage_sum{{{labels},outcome=\"ok\",gen_ai_token_type=\"input\"}}"
            )
        ),
        Some(12.0),
        "{text}"
    );
    assert_eq!(
        sample(
            &text,
            &format!(
                "gen_ai_client_token_usage_sum{{{labels},outcome=\"ok\",gen_ai_token_type=\"output\"}}"
            )
        ),
        Some(7.0),
        "{text}"
    );
    // /health, /ready and the chat (the scrape itself is counted after it is rendered).
    assert_eq!(
        sample(&text, "switchyard_gateway_responses_total{status=\"200\"}"),
        Some(3.0),
        "{text}"
    );
    assert_eq!(
        sample(&text, "switchyard_gateway_responses_total{status=\"401\"}"),
        Some(1.0),
        "{text}"
    );
    assert_eq!(
        sample(&text, "switchyard_gateway_responses_total{status=\"413\"}"),
        Some(1.0),
        "{text}"
    );
    assert_eq!(
        sample(
            &text,
            "switchyard_gateway_refused_bodies_total{limit=\"size\"}"
        ),
        Some(1.0),
        "{text}"
    );
    assert_eq!(
        sample(&text, "switchyard_gateway_active_streams"),
        Some(0.0),
        "{text}"
    );
    assert!(
        text.contains("switchyard_gateway_upstream_retries_total 0"),
        "{text}"
    );
    assert!(text.trim_end().ends_with("# EOF"));
    gw.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_dead_upstream_is_not_ready_and_metrics_can_be_public() {
    let gw = common::dead_upstream_gateway().await;
    let ready = get(&gw, "/ready", None).await;
    assert_eq!(ready.status(), 503);
    let body: Value = ready.json().await.unwrap();
    assert!(
        body["upstream"]
            .as_str()
            .unwrap()
            .starts_with("unreachable"),
        "{body}"
    );
    gw.shutdown().await.unwrap();

    let (_upstream, gw) = start(Script::always(Reply::text_stream(["x"])), |c| {
        c.ingress_key = Some("k".into());
        c.metrics_public = true;
    })
    .await;
    assert_eq!(get(&gw, "/metrics", None).await.status(), 200);
    // The Host guard covers these routes too.
    let foreign = within(
        "GET",
        client()
            .get(format!("{}/health", gw.base_url()))
            .header("host", "evil.example")
            .send(),
    )
    .await
    .unwrap();
    assert_eq!(foreign.status(), 403);
    gw.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn standalone_each_guest_request_is_a_trace_of_its_own() {
    use switchyard_gateway::{Gateway, GatewayConfig, GatewayDeps};
    use switchyard_telemetry::{Telemetry, TelemetryConfig};
    use switchyard_testkit::chat_upstream::ChatUpstream;
    use switchyard_testkit::otlp::OtlpReceiver;
    let receiver = OtlpReceiver::start().await.unwrap();
    let upstream = ChatUpstream::start(
        Script::new().step(Step::once(Reply::text_stream(["Hi"])).times(Times::Always)),
    )
    .await
    .unwrap();
    let telemetry = Telemetry::start(&TelemetryConfig {
        endpoint: Some(format!("{}/v1/traces", receiver.url())),
        service_name: "switchyard-gateway".into(),
        content: true,
    })
    .unwrap()
    .unwrap();
    let gw = Gateway::start_with(
        GatewayConfig::new(upstream.base_url(), UPSTREAM_MODEL),
        GatewayDeps {
            telemetry: Some((telemetry.clone(), None)),
            ..GatewayDeps::default()
        },
    )
    .await
    .unwrap();
    for _ in 0..2 {
        let response = client()
            .post(format!("{}/v1/chat/completions", gw.base_url()))
            .json(&json!({"model": "guest-model", "stream": true,
                "messages": [{"role": "user", "content": "hi"}]}))
            .send()
            .await
            .unwrap();
        let _ = response.text().await;
    }
    gw.shutdown().await.unwrap();
    // The exporter's client blocks: off the runtime that serves the receiver.
    let flushing = telemetry.clone();
    tokio::task::spawn_blocking(move || flushing.shutdown())
        .await
        .unwrap();
    let spans = receiver.spans();
    let chats: Vec<_> = spans
        .iter()
        .filter(|s| s.name == "chat guest-model")
        .collect();
    assert_eq!(chats.len(), 2, "{spans:#?}");
    assert_ne!(chats[0].trace_id, chats[1].trace_id, "a trace per request");
    assert!(chats.iter().all(|c| c.parent_span_id.is_empty()));
    assert_eq!(chats[0].attributes["gen_ai.request.model"], "guest-model");
    assert_eq!(chats[0].attributes["gen_ai.response.model"], UPSTREAM_MODEL);
    assert_eq!(chats[0].attributes["gen_ai.usage.output_tokens"], "7");
    // With content on, the answer's text goes too.
    assert_eq!(chats[0].attributes["gen_ai.output.text"], "Hi");
    assert_eq!(chats[0].service, "switchyard-gateway");
    let traceparent = upstream.requests()[0]
        .header("traceparent")
        .unwrap()
        .to_owned();
    assert!(traceparent.contains(&chats[0].trace_id) || traceparent.contains(&chats[1].trace_id));
}
