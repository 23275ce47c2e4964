//! Exchanges are recorded through switchyard-records: attempts, usage, delivered calls, the
//! assembled upstream message and guest response (streaming and unary), a guest that leaves
//! (mid-stream, or while a unary exchange waits); the upstream key never reaches the store.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use serde_json::json;
use switchyard_gateway::{Gateway, GatewayConfig, GatewayDeps};
use switchyard_records::model::ExchangeStatus;
use switchyard_records::{ExchangeFilter, RecordStore, SqliteStore};
use switchyard_testkit::chat_upstream::{
    ChatUpstream, Reply, Script, StreamEvent, StreamReply, chunk,
};
use switchyard_testkit::fixtures::GEMINI_CLI_FIRST_REQUEST;

#[tokio::test]
async fn every_exchange_is_recorded_with_attempts_usage_and_calls() {
    let records = tempfile::tempdir().unwrap();
    let upstream = ChatUpstream::start(
        Script::new()
            .then(Reply::error_retry_after(503, "busy", "0"))
            .then(Reply::tool_calls_stream(
                &[
                    ("call_r1", "glob", r#"{"pattern":"*.md"}"#),
                    ("call_r2", "read_file", r#"{"file_path":"a \"b\".md"}"#),
                ],
                4,
            ))
            .then(Reply::Json {
                status: 200,
                body: chunk::completion_tool_calls(&[(
                    "call_u1",
                    "list_directory",
                    r#"{"dir_path":"/tmp"}"#,
                )]),
            }),
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
    assert_eq!(function_calls(&frames).len(), 2);
    let unary = post(
        &gw,
        "gemini-2.5-flash",
        "generateContent",
        &user_request("list"),
    )
    .await;
    assert_eq!(unary.status(), 200);
    let unary: serde_json::Value = unary.json().await.unwrap();
    gw.shutdown().await.unwrap();

    let store = SqliteStore::open(switchyard_records::store_path(records.path())).unwrap();
    let exchanges = store.exchanges(ExchangeFilter::All).unwrap();
    assert_eq!(exchanges.len(), 2);
    let x = &exchanges[0];
    assert_eq!(x.status, ExchangeStatus::Ok);
    assert_eq!(x.requested_model, "gemini-2.5-flash");
    assert_eq!(x.upstream_model, UPSTREAM_MODEL);
    assert_eq!(x.attempts.len(), 2, "503 then success");
    assert_eq!(x.attempts[0].status, Some(503));
    assert_eq!(x.retries, 1);
    assert_eq!(x.function_calls.len(), 2);
    // Recorded under the model's own id, with the id the guest received beside it.
    assert_eq!(x.function_calls[0].id, "call_r1");
    assert_eq!(x.function_calls[1].id, "call_r2");
    let delivered: Vec<&str> = x
        .function_calls
        .iter()
        .map(|c| c.delivered_id.as_deref().unwrap())
        .collect();
    assert!(
        delivered
            .iter()
            .all(|d| d.starts_with("call_") && !d.starts_with("call_r"))
    );
    assert_eq!(
        x.function_calls[1].arguments,
        json!({"file_path": "a \"b\".md"})
    );
    assert_eq!(x.usage.input, 20);
    assert!(x.first_byte_at.is_some() && x.delivered_at.is_some());
    let stored = serde_json::to_string(x).unwrap();
    assert!(
        !stored.contains(UPSTREAM_KEY),
        "the upstream key is redacted"
    );
    assert!(stored.contains("find markdown"));

    // The upstream message is the assembled chat message: the ids, names and argument strings
    // exactly as the upstream sent them (in four-byte fragments).
    assert_eq!(
        x.upstream_message,
        Some(json!({
            "role": "assistant",
            "content": "", // the upstream's role chunk carries `"content": ""`
            "tool_calls": [
                {"id": "call_r1", "type": "function",
                 "function": {"name": "glob", "arguments": r#"{"pattern":"*.md"}"#}},
                {"id": "call_r2", "type": "function",
                 "function": {"name": "read_file", "arguments": r#"{"file_path":"a \"b\".md"}"#}}
            ]
        }))
    );
    // The guest response is the one merged GenerateContent response the guest received.
    let response = x.guest_response.as_ref().expect("guest response");
    let guest_calls = &response["candidates"][0]["content"]["parts"];
    assert_eq!(guest_calls[0]["functionCall"]["id"], delivered[0]);
    assert_eq!(
        guest_calls[0]["functionCall"]["args"],
        json!({"pattern": "*.md"})
    );
    assert_eq!(guest_calls[1]["functionCall"]["id"], delivered[1]);
    assert_eq!(response["candidates"][0]["finishReason"], "STOP");
    assert_eq!(response["usageMetadata"]["promptTokenCount"], 20);
    assert_eq!(
        function_calls(&frames),
        guest_calls
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["functionCall"].clone())
            .collect::<Vec<_>>()
    );
    assert_eq!(
        x.context_request, None,
        "no context policy: nothing to record"
    );
    assert_eq!(x.attempts[1].request["model"], UPSTREAM_MODEL);
    assert_eq!(x.guest_request["contents"][0]["role"], "user");

    // Unary: the upstream's own message and exactly the response the guest got.
    let u = &exchanges[1];
    assert_eq!(u.status, ExchangeStatus::Ok);
    assert_eq!(u.attempts.len(), 1);
    let message = u.upstream_message.as_ref().expect("upstream message");
    assert_eq!(message["tool_calls"][0]["id"], "call_u1");
    assert_eq!(
        message["tool_calls"][0]["function"]["name"],
        "list_directory"
    );
    assert_eq!(
        message["tool_calls"][0]["function"]["arguments"],
        r#"{"dir_path":"/tmp"}"#
    );
    assert_eq!(u.guest_response.as_ref(), Some(&unary));
    assert_eq!(u.function_calls[0].id, "call_u1");
    assert_eq!(u.function_calls[0].arguments, json!({"dir_path": "/tmp"}));
}

/// Exchanges of one session repeat the system prompt and tools: those are stored once (as
/// blobs), every exchange reads back exactly as sent, and a secret inside one is redacted from
/// the database file.
#[tokio::test]
async fn repeated_parts_are_stored_once_and_secrets_redacted() {
    let records = tempfile::tempdir().unwrap();
    let (upstream, gw) = recording_gateway_answering_done(&records).await;
    let base: serde_json::Value = serde_json::from_slice(GEMINI_CLI_FIRST_REQUEST).unwrap();
    let prompts = [
        "first".to_string(),
        "second, \"quoted\"\n".to_string(),
        format!("third, my key is {UPSTREAM_KEY}"),
    ];
    let mut sent = Vec::new();
    for prompt in &prompts {
        let mut request = base.clone();
        request["contents"] = json!([{"role": "user", "parts": [{"text": prompt}]}]);
        stream_expecting_done(&gw, &request).await;
        sent.push(request);
    }
    gw.shutdown().await.unwrap();

    let store = SqliteStore::open(switchyard_records::store_path(records.path())).unwrap();
    let exchanges = store.exchanges(ExchangeFilter::All).unwrap();
    assert_eq!(exchanges.len(), 3);
    let seen = upstream.requests();
    for (i, exchange) in exchanges.iter().enumerate() {
        let upstream_body: serde_json::Value = serde_json::from_slice(&seen[i].body).unwrap();
        if i < 2 {
            assert_eq!(exchange.guest_request, sent[i], "guest request {i} as sent");
            assert_eq!(
                exchange.attempts[0].request, upstream_body,
                "upstream request {i}"
            );
        }
    }
    let third = &exchanges[2];
    let text = third.guest_request["contents"][0]["parts"][0]["text"]
        .as_str()
        .unwrap();
    assert_eq!(text, "third, my key is [REDACTED]");
    assert_eq!(third.guest_request["tools"], base["tools"]);
    assert!(
        !serde_json::to_string(&third.attempts[0].request)
            .unwrap()
            .contains(UPSTREAM_KEY)
    );
    drop(store);
    for entry in std::fs::read_dir(records.path()).unwrap() {
        let path = entry.unwrap().path();
        if path.is_file() {
            let bytes = std::fs::read(&path).unwrap();
            assert!(
                !bytes
                    .windows(UPSTREAM_KEY.len())
                    .any(|w| w == UPSTREAM_KEY.as_bytes()),
                "the key is in {}",
                path.display()
            );
        }
    }
    // System prompt and tools, guest and upstream forms: four blobs for all three exchanges.
    assert_eq!(
        blob_count(&switchyard_records::store_path(records.path())),
        4
    );
}

/// A session resends its whole history with every turn: through the gateway, each history entry
/// big enough to be a blob is stored once (guest and upstream form), whatever the number of turns
/// that resend it, and every exchange reads back exactly as sent and as the upstream received it.
#[tokio::test]
async fn a_growing_history_is_stored_once_per_entry() {
    let records = tempfile::tempdir().unwrap();
    let (upstream, gw) = recording_gateway_answering_done(&records).await;
    let base: serde_json::Value = serde_json::from_slice(GEMINI_CLI_FIRST_REQUEST).unwrap();
    let mut history = Vec::new();
    let mut sent = Vec::new();
    for turn in 0..3 {
        if turn > 0 {
            history.push(json!({"role": "model", "parts": [{"text": "done"}]}));
        }
        let notes = format!("turn {turn} notes: {}", "the quick brown fox ".repeat(200));
        history.push(json!({"role": "user", "parts": [{"text": notes}]}));
        let mut request = base.clone();
        request["contents"] = json!(history);
        stream_expecting_done(&gw, &request).await;
        sent.push(request);
    }
    gw.shutdown().await.unwrap();

    let path = switchyard_records::store_path(records.path());
    let store = SqliteStore::open(&path).unwrap();
    let exchanges = store.exchanges(ExchangeFilter::All).unwrap();
    let seen = upstream.requests();
    assert_eq!(exchanges.len(), 3);
    for (i, exchange) in exchanges.iter().enumerate() {
        let upstream_body: serde_json::Value = serde_json::from_slice(&seen[i].body).unwrap();
        assert_eq!(exchange.guest_request, sent[i], "guest request {i} as sent");
        assert_eq!(
            exchange.attempts[0].request, upstream_body,
            "upstream request {i}"
        );
    }
    // System prompt and tools (guest and upstream form), then each turn's notes in both forms;
    // the small model entries stay inline.
    assert_eq!(blob_count(&path), 4 + 2 * 3);
    let longest_row: i64 = rusqlite::Connection::open(&path)
        .unwrap()
        .query_row("SELECT max(length(record)) FROM exchanges", [], |row| {
            row.get(0)
        })
        .unwrap();
    assert!(
        longest_row < 8_000,
        "the third exchange's row is {longest_row} bytes"
    );
}

/// A gateway recording into `records`, on an upstream that answers every request with the
/// streamed text "done".
async fn recording_gateway_answering_done(
    records: &tempfile::TempDir,
) -> (ChatUpstream, switchyard_gateway::GatewayHandle) {
    start(Script::always(Reply::text_stream(["done"])), |config| {
        config.records_dir = Some(records.path().to_path_buf());
    })
    .await
}

/// Sends `request` as a streamed exchange and checks the guest got "done".
async fn stream_expecting_done(
    gw: &switchyard_gateway::GatewayHandle,
    request: &serde_json::Value,
) {
    let frames = Frames::new(post(gw, "gemini-2.5-flash", "streamGenerateContent", request).await)
        .all()
        .await;
    assert_eq!(text_of(&frames), "done");
}

/// Rows of the store's `blobs` table.
fn blob_count(path: &std::path::Path) -> i64 {
    rusqlite::Connection::open(path)
        .unwrap()
        .query_row("SELECT count(*) FROM blobs", [], |row| row.get(0))
        .unwrap()
}

/// The same for unary `generateContent`: each exchange reads back exactly as the guest sent it
/// and as the upstream received it.
#[tokio::test]
async fn unary_exchanges_read_back_as_sent() {
    let records = tempfile::tempdir().unwrap();
    let (upstream, gw) = start(Script::always(Reply::completion_text("done")), |config| {
        config.records_dir = Some(records.path().to_path_buf());
    })
    .await;
    let mut sent = Vec::new();
    for prompt in ["one", "two"] {
        let mut request: serde_json::Value =
            serde_json::from_slice(GEMINI_CLI_FIRST_REQUEST).unwrap();
        request["contents"] = json!([{"role": "user", "parts": [{"text": prompt}]}]);
        let response = post(&gw, "gemini-2.5-flash", "generateContent", &request).await;
        assert_eq!(response.status(), 200);
        sent.push(request);
    }
    gw.shutdown().await.unwrap();
    let store = SqliteStore::open(switchyard_records::store_path(records.path())).unwrap();
    let exchanges = store.exchanges(ExchangeFilter::All).unwrap();
    let seen = upstream.requests();
    assert_eq!(exchanges.len(), 2);
    for (i, exchange) in exchanges.iter().enumerate() {
        assert_eq!(exchange.guest_request, sent[i]);
        let upstream_body: serde_json::Value = serde_json::from_slice(&seen[i].body).unwrap();
        assert_eq!(exchange.attempts[0].request, upstream_body);
        assert_eq!(exchange.status, ExchangeStatus::Ok);
        assert!(exchange.guest_response.is_some() && exchange.upstream_message.is_some());
    }
}

/// Upstream fields the translator does not model are kept (in the raw events) and counted: the
/// count reaches the exchange record, streamed and non-streamed.
#[tokio::test]
async fn upstream_fields_the_gateway_does_not_model_are_counted_in_the_record() {
    let records = tempfile::tempdir().unwrap();
    let mut with_vendor_field = chunk::text("hello");
    with_vendor_field["x_vendor_trace"] = json!("t-1");
    with_vendor_field["choices"][0]["delta"]["x_vendor_delta"] = json!(1);
    let mut completion = chunk::completion_text("hi");
    completion["x_vendor_trace"] = json!("t-2");
    let script = Script::new()
        .then(Reply::Stream(StreamReply::new(vec![
            StreamEvent::json(chunk::role()),
            StreamEvent::json(with_vendor_field.clone()),
            StreamEvent::json(with_vendor_field),
            StreamEvent::json(chunk::finish("stop")),
            StreamEvent::json(chunk::usage(3, 2)),
        ])))
        .then(Reply::Json {
            status: 200,
            body: completion,
        });
    let (_upstream, gw) = start(script, |config| {
        config.records_dir = Some(records.path().to_path_buf());
    })
    .await;
    let frames = Frames::new(post(&gw, "m", "streamGenerateContent", &user_request("a")).await)
        .all()
        .await;
    assert_eq!(text_of(&frames), "hellohello");
    assert_eq!(
        post(&gw, "m", "generateContent", &user_request("b"))
            .await
            .status(),
        200
    );
    gw.shutdown().await.unwrap();

    let store = SqliteStore::open(switchyard_records::store_path(records.path())).unwrap();
    let exchanges = store.exchanges(ExchangeFilter::All).unwrap();
    let counted = |notes: &[String]| -> serde_json::Value {
        let note = notes
            .iter()
            .find_map(|n| n.strip_prefix("response translation (attempt 1): "))
            .unwrap_or_else(|| panic!("no response translation note in {notes:?}"));
        serde_json::from_str::<serde_json::Value>(note).unwrap()["unknown_upstream_fields"].clone()
    };
    assert_eq!(
        counted(&exchanges[0].notes),
        json!({"x_vendor_trace": 2, "choices[].delta.x_vendor_delta": 2})
    );
    assert!(
        exchanges[0].attempts[0]
            .raw_events
            .iter()
            .any(|e| e.contains("x_vendor_trace")),
        "the fields themselves stay in the raw events"
    );
    assert_eq!(counted(&exchanges[1].notes), json!({"x_vendor_trace": 1}));
}

/// A guest that goes away mid-stream ends its exchange: the record says so (with what it had
/// received), instead of staying in flight until the gateway shuts down.
#[tokio::test]
async fn a_guest_leaving_mid_stream_is_recorded_as_disconnected() {
    let records = tempfile::tempdir().unwrap();
    let gate = switchyard_testkit::chat_upstream::Gate::new();
    let script = Script::always(Reply::Stream(StreamReply::new(vec![
        StreamEvent::json(chunk::role()),
        StreamEvent::json(chunk::text("first")),
        StreamEvent::json(chunk::text("never sent")).after_gate(&gate),
    ])));
    let (_upstream, gw) = start(script, |config| {
        config.records_dir = Some(records.path().to_path_buf());
    })
    .await;
    let mut frames =
        Frames::new(post(&gw, "m", "streamGenerateContent", &user_request("hi")).await);
    let first = within("the first frame", frames.next()).await.unwrap();
    assert_eq!(text_of(&[first]), "first");
    drop(frames);

    let ended = first_ended_exchange(records.path()).await;
    assert_eq!(ended.status, ExchangeStatus::Error);
    assert_eq!(
        ended.error.as_ref().map(|e| e.kind.as_str()),
        Some("guest_disconnected")
    );
    let delivered = ended.guest_response.expect("what the guest received");
    assert_eq!(
        delivered["candidates"][0]["content"]["parts"][0]["text"],
        "first"
    );
    gw.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_guest_leaving_a_unary_exchange_is_recorded_as_abandoned() {
    let records = tempfile::tempdir().unwrap();
    let (_upstream, gw) = start(Script::always(Reply::Hang), |config| {
        config.records_dir = Some(records.path().to_path_buf());
    })
    .await;
    // The guest gives up while the upstream hangs: the server drops the exchange.
    let gave_up = client()
        .post(url(&gw, "m", "generateContent"))
        .header("x-goog-api-key", "k")
        .json(&user_request("hi"))
        .timeout(std::time::Duration::from_millis(300))
        .send()
        .await;
    assert!(gave_up.is_err(), "the upstream hangs: {gave_up:?}");

    let ended = first_ended_exchange(records.path()).await;
    assert_eq!(ended.status, ExchangeStatus::Error);
    assert_eq!(
        ended.error.as_ref().map(|e| e.kind.as_str()),
        Some("abandoned")
    );
    assert_eq!(ended.attempts.len(), 1, "the attempt it was waiting on");
    gw.shutdown().await.unwrap();
}

/// The first exchange in the store under `records` that is no longer in flight (waits for it,
/// reading the store as another process would, without recovering it).
async fn first_ended_exchange(records: &std::path::Path) -> switchyard_records::ExchangeRecord {
    let path = switchyard_records::store_path(records);
    within("an exchange to end", async {
        loop {
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            let Ok(store) = SqliteStore::open_existing(&path) else {
                continue;
            };
            let exchanges = store.exchanges(ExchangeFilter::All).unwrap_or_default();
            if let Some(x) = exchanges
                .into_iter()
                .find(|x| x.status != ExchangeStatus::InFlight)
            {
                return x;
            }
        }
    })
    .await
}

#[tokio::test]
async fn usage_the_upstream_did_not_report_is_recorded_as_estimated() {
    let records = tempfile::tempdir().unwrap();
    let without_usage = Reply::Stream(StreamReply::new(vec![
        StreamEvent::json(chunk::role()),
        StreamEvent::json(chunk::text("hello there")),
        StreamEvent::json(chunk::finish("stop")),
    ]));
    let upstream = ChatUpstream::start(
        Script::new()
            .then(without_usage)
            .then(Reply::text_stream(["reported"])),
    )
    .await
    .unwrap();
    let mut config = GatewayConfig::new(upstream.base_url(), UPSTREAM_MODEL);
    config.records_dir = Some(records.path().to_path_buf());
    let gw = Gateway::start_with(config, GatewayDeps::default())
        .await
        .unwrap();
    for prompt in ["first", "second"] {
        Frames::new(post(&gw, "m", "streamGenerateContent", &user_request(prompt)).await)
            .all()
            .await;
    }
    gw.shutdown().await.unwrap();
    let store = SqliteStore::open_existing(records.path().join("switchyard.sqlite3")).unwrap();
    let exchanges = store.exchanges(ExchangeFilter::All).unwrap();
    let usage: Vec<_> = exchanges.iter().map(|e| e.usage).collect();
    assert!(usage[0].estimated && usage[0].input > 0, "{usage:?}");
    assert!(!usage[1].estimated, "{usage:?}");
    assert_eq!((usage[1].input, usage[1].output), (12, 7));
    // The summaries the usage report sums carry the flag too.
    let summaries = store.exchange_summaries(ExchangeFilter::All, None).unwrap();
    assert!(summaries[0].usage.estimated && !summaries[1].usage.estimated);
}

#[tokio::test]
async fn a_pdf_the_provider_cannot_read_is_recorded_as_sent_and_replaced_upstream() {
    let records = tempfile::tempdir().unwrap();
    let upstream = ChatUpstream::start(Script::always(Reply::completion_text("read it")))
        .await
        .unwrap();
    let mut config = GatewayConfig::new(upstream.base_url(), UPSTREAM_MODEL);
    config.records_dir = Some(records.path().to_path_buf());
    config.translation = switchyard_translate::Profile::Vllm.options();
    let gw = Gateway::start(config).await.unwrap();
    // What Gemini CLI 0.61.0 sends after read_file of a PDF (fixture read_pdf).
    let pdf = "JVBERi0xLjQKJcfsj6IK";
    let request = json!({"contents": [
        {"role": "user", "parts": [{"text": "read q.pdf"}]},
        {"role": "model", "parts": [{"functionCall": {"id": "r1", "name": "read_file", "args": {"file_path": "q.pdf"}}}]},
        {"role": "user", "parts": [
            {"functionResponse": {"id": "r1", "name": "read_file", "response": {"output": "Binary content provided (1 item(s))."}}},
            {"inlineData": {"mimeType": "application/pdf", "data": pdf}}
        ]}
    ]});
    let response = post(&gw, "m", "generateContent", &request).await;
    assert_eq!(response.status(), 200);
    gw.shutdown().await.unwrap();

    let store = SqliteStore::open(switchyard_records::store_path(records.path())).unwrap();
    let x = &store.exchanges(ExchangeFilter::All).unwrap()[0];
    assert_eq!(
        x.guest_request["contents"][2]["parts"][1]["inlineData"]["data"], pdf,
        "the original stays in the records"
    );
    let sent = x.attempts[0].request.to_string();
    assert!(!sent.contains(pdf), "{sent}");
    assert!(
        sent.contains("[attachment not forwarded: application/pdf"),
        "{sent}"
    );
    assert!(
        x.notes
            .iter()
            .any(|n| n.contains("application/pdf") && n.contains("placeholder")),
        "{:?}",
        x.notes
    );
}

#[tokio::test]
async fn every_attempt_is_billed_apart_from_the_delivered_answer() {
    let records = tempfile::tempdir().unwrap();
    // Attempt 1: a malformed call (usage 20/3), retried; attempt 2: a stream cut off mid-way
    // without usage (estimated), retried; attempt 3: the answer (usage 12/7).
    let cut = StreamReply::new(vec![
        StreamEvent::json(chunk::role()),
        StreamEvent::json(chunk::tool_call(
            0,
            Some("call_x"),
            Some("read_file"),
            "{\"file",
        )),
    ])
    .ending(switchyard_testkit::chat_upstream::StreamEnd::Close);
    let upstream = ChatUpstream::start(
        Script::new()
            .then(Reply::malformed_tool_call_stream("call_bad", "read_file"))
            .then(Reply::Stream(cut))
            .then(Reply::text_stream(["Hello"])),
    )
    .await
    .unwrap();
    let mut config = GatewayConfig::new(upstream.base_url(), UPSTREAM_MODEL);
    config.records_dir = Some(records.path().to_path_buf());
    config.retries.initial_backoff_ms = 5;
    let gw = Gateway::start(config).await.unwrap();
    let frames = Frames::new(post(&gw, "m", "streamGenerateContent", &user_request("hi")).await)
        .all()
        .await;
    assert_eq!(text_of(&frames), "Hello");
    gw.shutdown().await.unwrap();

    let store = SqliteStore::open(switchyard_records::store_path(records.path())).unwrap();
    let x = &store.exchanges(ExchangeFilter::All).unwrap()[0];
    assert_eq!(x.attempts.len(), 3);
    let billed: Vec<_> = x.attempts.iter().map(|a| a.usage).collect();
    assert_eq!(
        (
            billed[0].unwrap().input,
            billed[0].unwrap().output,
            billed[0].unwrap().estimated
        ),
        (20, 3, false)
    );
    assert!(
        billed[1].unwrap().estimated,
        "no usage came: estimated, labelled"
    );
    assert_eq!(
        (x.usage.input, x.usage.output),
        (12, 7),
        "the delivered answer's"
    );
    assert_eq!(x.billed.input, 20 + billed[1].unwrap().input + 12);
    assert_eq!(x.billed.output, 3 + billed[1].unwrap().output + 7);
    assert!(x.billed.estimated, "part of it is an estimate");

    let summaries = store.exchange_summaries(ExchangeFilter::All, None).unwrap();
    assert_eq!(summaries[0].billed, x.billed);
    let mut tally = switchyard_records::usage::UsageTally::new(
        switchyard_records::usage::UsageGrouping::UpstreamModel,
    );
    tally.add(&summaries[0]);
    let report = tally.finish();
    assert_eq!(report.total.usage.input, 12);
    assert_eq!(report.total.billed_estimated.input, x.billed.input);
    let table = switchyard_records::usage::render_usage(&report);
    assert!(table.contains("EST. BILLED IN/OUT"), "{table}");
}
