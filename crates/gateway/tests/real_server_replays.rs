//! The gateway fed what a real server sent (fixtures of `switchyard-dev capture-upstream`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::Path;

use common::*;
use serde_json::Value;
use switchyard_testkit::chat_upstream::{Reply, Script};

fn captured(case: &str) -> Reply {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/upstreams/llama-cpp-python-0.3.36")
        .join(case);
    let meta: Value =
        serde_json::from_slice(&std::fs::read(dir.join("response.json")).unwrap()).unwrap();
    Reply::Raw {
        status: u16::try_from(meta["status"].as_u64().unwrap()).unwrap(),
        content_type: meta["content_type"].as_str().unwrap().to_owned(),
        body: std::fs::read(dir.join("response.txt")).unwrap().into(),
    }
}

#[tokio::test]
async fn an_empty_200_stream_is_retried_then_an_api_error_for_the_guest() {
    let (upstream, gw) = start(Script::always(captured("stream_context_overflow")), |_| {}).await;
    let frames = Frames::new(post(&gw, "m", "streamGenerateContent", &user_request("hi")).await)
        .all()
        .await;
    let error = frames
        .iter()
        .find_map(|f| f.get("error"))
        .unwrap_or_else(|| panic!("no error frame: {frames:?}"));
    assert_eq!(error["code"], 503, "{error}");
    assert!(
        error["message"].as_str().unwrap().contains("unfinished"),
        "{error}"
    );
    assert_eq!(upstream.requests().len(), 3, "retried within the budget");
}

#[tokio::test]
async fn a_forced_call_streamed_like_llama_cpp_reaches_the_guest_once_named() {
    let (_upstream, gw) = start(Script::always(captured("stream_tools_named")), |_| {}).await;
    let frames = Frames::new(post(&gw, "m", "streamGenerateContent", &user_request("read")).await)
        .all()
        .await;
    let calls = function_calls(&frames);
    assert_eq!(calls.len(), 1, "{frames:?}");
    assert_eq!(calls[0]["name"], "read_file");
}
