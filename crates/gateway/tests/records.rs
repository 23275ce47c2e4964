//! Exchanges are recorded through switchyard-records: begin + end, attempts, usage, delivered
//! calls; the upstream key never reaches the store.

mod common;

use common::*;
use switchyard_gateway::{Gateway, GatewayConfig, GatewayDeps};
use switchyard_records::model::ExchangeStatus;
use switchyard_records::{ExchangeFilter, RecordStore, SqliteStore};
use switchyard_testkit::chat_upstream::{ChatUpstream, Reply, Script};

#[tokio::test]
async fn every_exchange_is_recorded_with_attempts_usage_and_calls() {
    let records = tempfile::tempdir().unwrap();
    let upstream = ChatUpstream::start(
        Script::new()
            .then(Reply::error_retry_after(503, "busy", "0"))
            .then(Reply::tool_calls_stream(
                &[("call_r1", "glob", r#"{"pattern":"*.md"}"#)],
                4,
            )),
    )
    .await
    .unwrap();
    let mut config = GatewayConfig::new(upstream.base_url(), UPSTREAM_MODEL);
    config.records_dir = Some(records.path().to_path_buf());
    config.retries.initial_backoff_ms = 5;
    let gw = Gateway::start_with(
        config,
        GatewayDeps {
            upstream_key: Some(UPSTREAM_KEY.into()),
            ..GatewayDeps::default()
        },
    )
    .await
    .unwrap();
    let mut request = user_request("find markdown");
    request["contents"][0]["parts"][0]["text"] =
        format!("find markdown, my key is {UPSTREAM_KEY}").into();
    let frames =
        Frames::new(post(&gw, "gemini-2.5-flash", "streamGenerateContent", &request).await)
            .all()
            .await;
    assert_eq!(function_calls(&frames).len(), 1);
    gw.shutdown().await.unwrap();

    let store = SqliteStore::open(switchyard_records::store_path(records.path())).unwrap();
    let exchanges = store.exchanges(ExchangeFilter::All).unwrap();
    assert_eq!(exchanges.len(), 1);
    let x = &exchanges[0];
    assert_eq!(x.status, ExchangeStatus::Ok);
    assert_eq!(x.requested_model, "gemini-2.5-flash");
    assert_eq!(x.upstream_model, UPSTREAM_MODEL);
    assert_eq!(x.attempts.len(), 2, "503 then success");
    assert_eq!(x.attempts[0].status, Some(503));
    assert_eq!(x.retries, 1);
    assert_eq!(x.function_calls.len(), 1);
    assert_eq!(x.function_calls[0].id, "call_r1");
    assert_eq!(x.usage.input, 20);
    assert!(x.first_byte_at.is_some() && x.delivered_at.is_some());
    let stored = serde_json::to_string(x).unwrap();
    assert!(
        !stored.contains(UPSTREAM_KEY),
        "the upstream key is redacted"
    );
    assert!(stored.contains("find markdown"));
}
