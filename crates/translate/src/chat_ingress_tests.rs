use serde_json::{Value, json};

use super::*;

fn options(strip: Option<&str>) -> ChatIngressOptions<'_> {
    ChatIngressOptions {
        upstream_model: "qwen3".into(),
        provider: ProviderOptions::default(),
        strip,
        convert_on_miss: true,
    }
}

/// The upstream body as the gateway sends it (the upstream plan applied), and the preparation.
fn prepare(body: Value, strip: Option<&str>) -> Result<(Value, PreparedChat), TranslateError> {
    let request = parse_chat_request(&serde_json::to_vec(&body).unwrap())?;
    let options = options(strip);
    let mut prepared = prepare_chat_request(request, &options, None)?;
    let mut chat = prepared.chat.clone();
    crate::plan::apply(
        &mut chat,
        &options.provider,
        &mut prepared.report,
        crate::plan::Schemas::Guest,
    )?;
    Ok((serde_json::to_value(&chat).unwrap(), prepared))
}

/// The first-turn shape OpenCode 1.18.33 sends (reference BRIEF, `req_chat_completions_*`).
fn opencode_turn() -> Value {
    json!({
        "model": "fake-model",
        "max_tokens": 8192,
        "messages": [
            {"role": "system", "content": "You are opencode"},
            {"role": "user", "content": [{"type": "text", "text": "list the files"}]},
            {"role": "assistant", "content": "", "tool_calls": [{"id": "call_1", "type": "function",
                "function": {"name": "sy_record", "arguments": "{\"nonce\":\"n\",\"_p\":\"secret\"}"}}]},
            {"role": "tool", "tool_call_id": "call_1", "content": "ok"}
        ],
        "tools": [{"type": "function", "function": {"name": "sy_record", "description": "d",
            "parameters": {"type": "object", "properties": {"nonce": {"type": "string"},
                "_p": {"type": "string"}}, "required": ["nonce", "_p"],
                "additionalProperties": false}}}],
        "tool_choice": "auto",
        "stream": true,
        "stream_options": {"include_usage": true}
    })
}

#[test]
fn a_known_request_goes_upstream_unchanged_but_for_the_model_and_the_profile() {
    let (upstream, prepared) = prepare(opencode_turn(), None).unwrap();
    let mut expected = opencode_turn();
    expected["model"] = json!("qwen3");
    // The openai profile's `tool_call_content`: a turn that only calls tools says `null`.
    expected["messages"][2]["content"] = Value::Null;
    assert_eq!(upstream, expected);
    assert!(prepared.stream && prepared.include_usage);
    assert_eq!(prepared.history_call_ids, ["call_1"]);
    assert_eq!(
        prepared.tool_result_ids,
        [("call_1".to_string(), "messages[3].tool_call_id".to_string())]
    );
    assert!(prepared.prompt_token_estimate > 0);
}

#[test]
fn the_private_argument_leaves_schemas_and_history() {
    let (upstream, _) = prepare(opencode_turn(), Some("_p")).unwrap();
    let arguments = upstream["messages"][2]["tool_calls"][0]["function"]["arguments"]
        .as_str()
        .unwrap();
    assert_eq!(
        serde_json::from_str::<Value>(arguments).unwrap(),
        json!({"nonce": "n"})
    );
    let schema = &upstream["tools"][0]["function"]["parameters"];
    assert_eq!(schema["properties"], json!({"nonce": {"type": "string"}}));
    assert_eq!(schema["required"], json!(["nonce"]));
    assert_eq!(schema["additionalProperties"], json!(false));
}

#[test]
fn unknown_fields_are_refused_with_their_path_at_every_level() {
    let cases = [
        ("/logprobs", json!(true), "logprobs"),
        (
            "/messages/1/cache_control",
            json!({}),
            "messages[1].cache_control",
        ),
        (
            "/messages/1/content/0/cache_control",
            json!({}),
            "messages[1].content[0].cache_control",
        ),
        (
            "/messages/2/tool_calls/0/function/thought",
            json!("x"),
            "messages[2].tool_calls[0].function.thought",
        ),
        (
            "/tools/0/function/examples",
            json!([]),
            "tools[0].function.examples",
        ),
        (
            "/stream_options/continuous",
            json!(true),
            "stream_options.continuous",
        ),
    ];
    for (pointer, value, path) in cases {
        let mut body = opencode_turn();
        let (parent, key) = pointer.rsplit_once('/').unwrap();
        body.pointer_mut(parent).unwrap()[key] = value;
        match prepare(body, None) {
            Err(TranslateError::UnknownField { path: got }) => assert_eq!(got, path),
            other => panic!("{pointer}: {other:?}"),
        }
    }
}

#[test]
fn forwarded_fields_pass_and_nothing_is_added_but_usage() {
    let mut body = opencode_turn();
    body["temperature"] = json!(0.2);
    body["parallel_tool_calls"] = json!(false);
    body["messages"][1]["name"] = json!("alice");
    body["stream_options"] = json!({"include_usage": false});
    let (upstream, prepared) = prepare(body, None).unwrap();
    assert_eq!(upstream["temperature"], json!(0.2));
    assert_eq!(upstream["parallel_tool_calls"], json!(false));
    assert_eq!(upstream["messages"][1]["name"], json!("alice"));
    assert_eq!(upstream["stream_options"], json!({"include_usage": true}));
    assert!(!prepared.include_usage, "the guest did not ask for usage");
}

#[test]
fn bad_shapes_are_typed_errors() {
    let mut two = opencode_turn();
    two["n"] = json!(2);
    let mut role = opencode_turn();
    role["messages"][1]["role"] = json!("narrator");
    let mut orphan = opencode_turn();
    orphan["messages"][3]
        .as_object_mut()
        .unwrap()
        .remove("tool_call_id");
    let mut video = opencode_turn();
    video["messages"][1]["content"] = json!([{"type": "video_url", "video_url": {}}]);
    let mut builtin = opencode_turn();
    builtin["tools"][0]["type"] = json!("web_search");
    for body in [two, role, orphan, builtin] {
        assert!(matches!(
            prepare(body, None),
            Err(TranslateError::InvalidValue { .. })
        ));
    }
    // Unknown part fields are refused before the part type is looked at.
    assert!(matches!(
        prepare(video, None),
        Err(TranslateError::UnknownField { .. })
    ));
    let mut file = opencode_turn();
    file["messages"][1]["content"] = json!([{"type": "file"}]);
    assert!(matches!(
        prepare(file, None),
        Err(TranslateError::InvalidValue { .. })
    ));
    let mut audio = opencode_turn();
    audio["messages"][1]["content"] = json!([{"type": "input_audio", "input_audio": {}}]);
    assert!(prepare(audio, None).is_err(), "audio needs its data");
    let mut other = opencode_turn();
    other["messages"][1]["content"] = json!([{"type": "refusal"}]);
    assert!(matches!(
        prepare(other, None),
        Err(TranslateError::Unsupported { .. })
    ));
    assert!(matches!(
        parse_chat_request(b"{\"messages\": 3}"),
        Err(TranslateError::InvalidBody(_))
    ));
}

#[test]
fn png_data_urls_become_lossless_webp_and_other_images_pass() {
    use base64::Engine as _;
    let pixels: Vec<u8> = (0..16 * 16 * 3).map(|i| (i * 5) as u8).collect();
    let png = switchyard_testkit::fixtures::rgb_png(16, 16, &pixels).unwrap();
    let png_url = format!(
        "data:image/png;base64,{}",
        base64::engine::general_purpose::STANDARD.encode(&png)
    );
    let mut body = opencode_turn();
    body["messages"][1]["content"] = json!([
        {"type": "text", "text": "see"},
        {"type": "image_url", "image_url": {"url": png_url}},
        {"type": "image_url", "image_url": {"url": "data:image/jpeg;base64,AAAA", "detail": "low"}}
    ]);
    let (upstream, prepared) = prepare(body, None).unwrap();
    let parts = &upstream["messages"][1]["content"];
    let webp = parts[1]["image_url"]["url"].as_str().unwrap();
    assert!(webp.starts_with("data:image/webp;base64,"), "{webp:.40}");
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(webp.trim_start_matches("data:image/webp;base64,"))
        .unwrap();
    let decoded = crate::image::decode_webp(&bytes).unwrap();
    assert_eq!(decoded.data, pixels, "lossless");
    assert_eq!(
        parts[2],
        json!({"type": "image_url", "image_url": {"url": "data:image/jpeg;base64,AAAA", "detail": "low"}})
    );
    assert_eq!(prepared.report.images_forwarded, 2);
    assert_eq!(prepared.report.images_reencoded, 1);
}

#[test]
fn remote_images_files_and_audio_follow_the_attachment_rules() {
    let mut body = opencode_turn();
    body["messages"][1]["content"] = json!([
        {"type": "text", "text": "see"},
        {"type": "image_url", "image_url": {"url": "http://169.254.169.254/latest/meta-data"}},
        {"type": "file", "file": {"filename": "q.pdf", "file_data": "data:application/pdf;base64,JVBERi0xLjQK"}},
        {"type": "file", "file": {"file_data": "data:text/csv;base64,YSxiCjEsMgo="}},
        {"type": "file", "file": {"file_id": "file-abc"}},
        {"type": "input_audio", "input_audio": {"data": "UklGRg==", "format": "wav"}}
    ]);
    // The default (openai) profile takes PDFs, not audio, and fetches no link.
    let (upstream, prepared) = prepare(body, None).unwrap();
    let parts = &upstream["messages"][1]["content"];
    assert!(
        parts[1]["text"]
            .as_str()
            .unwrap()
            .contains("remote media are not fetched"),
        "{parts}"
    );
    assert_eq!(
        parts[2],
        json!({"type": "file", "file": {"filename": "q.pdf", "file_data": "data:application/pdf;base64,JVBERi0xLjQK"}})
    );
    assert_eq!(
        parts[3]["text"],
        "Attachment (text/csv, 8 bytes) from the user's message:\na,b\n1,2\n"
    );
    assert!(parts[4]["text"].as_str().unwrap().contains("file-abc"));
    assert!(
        parts[5]["text"]
            .as_str()
            .unwrap()
            .starts_with("[attachment not forwarded: audio/wav")
    );
    assert_eq!(
        prepared.report.attachments.len(),
        5,
        "{:?}",
        prepared.report
    );
    assert_eq!(prepared.report.images_forwarded, 0);
}

#[test]
fn a_remote_image_is_a_link_only_with_allow_remote_media() {
    let mut body = opencode_turn();
    body["messages"][1]["content"] = json!([
        {"type": "image_url", "image_url": {"url": "https://example.com/cat.png"}}
    ]);
    let request = parse_chat_request(&serde_json::to_vec(&body).unwrap()).unwrap();
    let mut options = options(None);
    options.provider.allow_remote_media = true;
    let prepared = prepare_chat_request(request, &options, None).unwrap();
    let upstream = serde_json::to_value(&prepared.chat).unwrap();
    assert_eq!(
        upstream["messages"][1]["content"][0]["image_url"]["url"],
        "https://example.com/cat.png"
    );
    assert_eq!(prepared.report.images_forwarded, 1);
}

#[test]
fn options_the_provider_does_not_take_are_dropped_and_noted() {
    let mut body = opencode_turn();
    body["top_k"] = json!(40);
    body["reasoning_effort"] = json!("high");
    let (upstream, prepared) = prepare(body, None).unwrap();
    assert!(upstream.get("top_k").is_none());
    assert!(upstream.get("reasoning_effort").is_none());
    assert_eq!(
        prepared.report.dropped_options,
        ["top_k=40", "reasoning_effort=\"high\""]
    );
}
