//! Request translation: ordering, ids, thoughts/signatures, tools, generation config, errors.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use serde_json::{Value, json};
use switchyard_translate::openai::{ChatMessage, ContentPart, ResponseFormat, UserContent};
use switchyard_translate::{
    ThinkingMode, TranslateError, TranslateOptions, TranslatedRequest, parse_request,
    translate_request,
};

fn translate_with(
    body: Value,
    opts: &TranslateOptions,
) -> Result<TranslatedRequest, TranslateError> {
    let req = parse_request(body.to_string().as_bytes())?;
    translate_request(&req, opts)
}

fn translate(body: Value) -> Result<TranslatedRequest, TranslateError> {
    translate_with(body, &TranslateOptions::new("up-model", true))
}

fn messages_json(t: &TranslatedRequest) -> Value {
    serde_json::to_value(&t.chat.messages).unwrap()
}

#[test]
fn tool_messages_come_before_user_text_in_call_order_with_ids_round_tripped() {
    let t = translate(json!({
        "contents": [
            {"role": "user", "parts": [{"text": "go"}]},
            {"role": "model", "parts": [
                {"text": "calling"},
                {"functionCall": {"id": "c1", "name": "f", "args": {"x": 1}}, "thoughtSignature": "skip_thought_signature_validator"},
                {"functionCall": {"id": "c2", "name": "f", "args": {"x": 1}}}
            ]},
            {"role": "user", "parts": [
                {"text": "and also this"},
                {"functionResponse": {"id": "c2", "name": "f", "response": {"error": "boom"}}},
                {"functionResponse": {"id": "c1", "name": "f", "response": {"output": "ok"}}}
            ]}
        ]
    }))
    .unwrap();
    assert_eq!(
        messages_json(&t),
        json!([
            {"role": "user", "content": "go"},
            {"role": "assistant", "content": "calling", "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{\"x\":1}"}},
                {"id": "c2", "type": "function", "function": {"name": "f", "arguments": "{\"x\":1}"}}
            ]},
            {"role": "tool", "tool_call_id": "c1", "content": "{\"output\":\"ok\"}"},
            {"role": "tool", "tool_call_id": "c2", "content": "{\"error\":\"boom\"}"},
            {"role": "user", "content": "and also this"}
        ])
    );
    assert_eq!(t.report.stripped_signatures, 1);
    assert_eq!(t.report.stripped_skip_validator_signatures, 1);
}

#[test]
fn thought_parts_are_dropped_and_text_signatures_stripped() {
    let t = translate(json!({
        "systemInstruction": {"role": "user", "parts": [{"text": "sys1"}, {"text": "sys2"}]},
        "contents": [
            {"role": "user", "parts": [{"text": "a"}, {"text": "b"}]},
            {"role": "model", "parts": [
                {"text": "thinking...", "thought": true, "thoughtSignature": "SIG_T"},
                {"text": "answer", "thoughtSignature": "SIG_ON_TEXT"}
            ]},
            {"role": "user", "parts": [{"text": "next"}]}
        ]
    }))
    .unwrap();
    assert_eq!(
        messages_json(&t),
        json!([
            {"role": "system", "content": "sys1\nsys2"},
            {"role": "user", "content": "a\nb"},
            {"role": "assistant", "content": "answer"},
            {"role": "user", "content": "next"}
        ])
    );
    assert_eq!(t.report.dropped_thought_parts, 1);
    assert_eq!(t.report.stripped_signatures, 2);
    assert_eq!(t.report.stripped_skip_validator_signatures, 0);
}

#[test]
fn response_without_id_pairs_by_name_and_history_call_without_id_gets_deterministic_id() {
    let body = json!({
        "contents": [
            {"role": "user", "parts": [{"text": "go"}]},
            {"role": "model", "parts": [{"functionCall": {"name": "f", "args": {}}}]},
            {"role": "user", "parts": [{"functionResponse": {"name": "f", "response": {"output": 1}}}]}
        ]
    });
    let t = translate(body.clone()).unwrap();
    let again = translate(body).unwrap();
    assert_eq!(t.chat, again.chat, "synthesized ids must be deterministic");
    let m = messages_json(&t);
    assert_eq!(m[1]["tool_calls"][0]["id"], "hist_1_0");
    assert_eq!(m[2]["tool_call_id"], "hist_1_0");
    assert_eq!(t.report.responses_paired_by_name, 1);
    assert_eq!(t.report.synthesized_history_ids, 1);
}

#[test]
fn call_identity_errors_are_typed() {
    let base = |model_parts: Value, user_parts: Value| {
        json!({"contents": [
            {"role": "user", "parts": [{"text": "go"}]},
            {"role": "model", "parts": model_parts},
            {"role": "user", "parts": user_parts}
        ]})
    };
    let call = |id: &str| json!({"functionCall": {"id": id, "name": "f", "args": {}}});
    let resp = |id: &str| json!({"functionResponse": {"id": id, "name": "f", "response": {}}});

    let err = translate(base(json!([call("a")]), json!([resp("zzz")]))).unwrap_err();
    assert!(
        matches!(err, TranslateError::UnmatchedFunctionResponse { ref id, .. } if id.as_deref() == Some("zzz")),
        "{err}"
    );

    let err = translate(base(json!([call("a"), call("a")]), json!([resp("a")]))).unwrap_err();
    assert!(
        matches!(err, TranslateError::DuplicateCallId { ref id, .. } if id == "a"),
        "{err}"
    );

    let err = translate(base(json!([call("a")]), json!([resp("a"), resp("a")]))).unwrap_err();
    assert!(
        matches!(err, TranslateError::DuplicateCallId { .. }),
        "{err}"
    );

    let err = translate(base(json!([call("a"), call("b")]), json!([resp("a")]))).unwrap_err();
    assert!(
        matches!(err, TranslateError::MissingFunctionResponse { ref id, .. } if id == "b"),
        "{err}"
    );

    let err = translate(base(
        json!([{"functionCall": {"id": "a", "name": "f", "args": [1]}}]),
        json!([resp("a")]),
    ))
    .unwrap_err();
    assert!(
        matches!(err, TranslateError::InvalidValue { ref path, .. } if path.ends_with("functionCall.args")),
        "{err}"
    );
}

#[test]
fn unknown_fields_fail_with_their_json_path() {
    let cases = [
        (json!({"contents": [], "bogus": 1}), "bogus"),
        (
            json!({"contents": [{"role": "user", "parts": [{"text": "a", "weird": true}]}]}),
            "contents[0].parts[0].weird",
        ),
        (
            json!({"contents": [], "generationConfig": {"seedling": 3}}),
            "generationConfig.seedling",
        ),
        (
            json!({"contents": [], "generationConfig": {"thinkingConfig": {"x": 1}}}),
            "generationConfig.thinkingConfig.x",
        ),
        (
            json!({"contents": [], "tools": [{"functionDeclarations": [{"name": "f", "strict": true}]}]}),
            "tools[0].functionDeclarations[0].strict",
        ),
        (
            json!({"contents": [], "tools": [{"mystery": {}}]}),
            "tools[0].mystery",
        ),
    ];
    for (body, path) in cases {
        match translate(body) {
            Err(TranslateError::UnknownField { path: got }) => assert_eq!(got, path),
            other => panic!("{path}: {other:?}"),
        }
    }
}

#[test]
fn builtin_tools_and_unsupported_parts_are_refused() {
    let err = translate(json!({"contents": [], "tools": [{"googleSearch": {}}]})).unwrap_err();
    assert!(
        err.to_string().contains("unsupported tool googleSearch"),
        "{err}"
    );
    assert_eq!(err.to_google_error().error.status, "INVALID_ARGUMENT");
    let err = translate(json!({"contents": [{"parts": [{"executableCode": {"code": "1"}}]}]}))
        .unwrap_err();
    assert!(matches!(err, TranslateError::Unsupported { .. }), "{err}");
    let err = translate(json!({"contents": [], "cachedContent": "c/1"})).unwrap_err();
    assert!(matches!(err, TranslateError::Unsupported { .. }), "{err}");
}

#[test]
fn tools_are_cleaned_and_both_schema_fields_accepted() {
    let t = translate(json!({
        "contents": [{"role": "user", "parts": [{"text": "x"}]}],
        "tools": [{"functionDeclarations": [
            {"name": "a", "description": "A", "parametersJsonSchema": {"$schema": "s", "type": "object", "properties": {"p": {"type": "string"}}}},
            {"name": "b", "parameters": {"type": "OBJECT", "properties": {"q": {"type": "STRING", "nullable": true}}, "propertyOrdering": ["q"]}},
            {"name": "c"}
        ]}]
    }))
    .unwrap();
    let tools = serde_json::to_value(&t.chat.tools).unwrap();
    assert_eq!(
        tools,
        json!([
            {"type": "function", "function": {"name": "a", "description": "A", "parameters": {"type": "object", "properties": {"p": {"type": "string"}}}}},
            {"type": "function", "function": {"name": "b", "parameters": {"type": "object", "properties": {"q": {"type": ["string", "null"]}}}}},
            {"type": "function", "function": {"name": "c", "parameters": {"type": "object", "properties": {}}}}
        ])
    );
    assert_eq!(t.report.schema_changes.len(), 2);
    assert_eq!(t.report.schema_changes[0].dropped_keys, vec!["/$schema"]);
}

#[test]
fn tool_config_maps_to_tool_choice() {
    let body = |cfg: Value| {
        json!({
            "contents": [{"role": "user", "parts": [{"text": "x"}]}],
            "tools": [{"functionDeclarations": [{"name": "a"}, {"name": "b"}]}],
            "toolConfig": {"functionCallingConfig": cfg}
        })
    };
    let t = translate(body(json!({"mode": "ANY"}))).unwrap();
    assert_eq!(t.chat.tool_choice, Some(json!("required")));
    // An upstream that does not accept "required": ANY becomes auto, noted.
    let mut no_required = TranslateOptions::new("up-model", true);
    no_required.provider.tool_choice_required = false;
    let t = translate_with(body(json!({"mode": "ANY"})), &no_required).unwrap();
    assert_eq!(t.chat.tool_choice, None);
    assert!(
        t.report
            .mapped_options
            .iter()
            .any(|o| o.starts_with("toolConfig mode ANY -> tool_choice auto")),
        "{:?}",
        t.report.mapped_options
    );
    let t = translate(body(json!({"mode": "NONE"}))).unwrap();
    assert_eq!(t.chat.tool_choice, Some(json!("none")));
    let t = translate(body(json!({"mode": "ANY", "allowedFunctionNames": ["b"]}))).unwrap();
    assert_eq!(
        t.chat.tool_choice,
        Some(json!({"type": "function", "function": {"name": "b"}}))
    );
    let t = translate(body(json!({"mode": "AUTO", "allowedFunctionNames": ["b"]}))).unwrap();
    assert_eq!(t.chat.tool_choice, None);
    assert_eq!(t.chat.tools.len(), 1);
    assert!(
        translate(body(
            json!({"mode": "ANY", "allowedFunctionNames": ["nope"]})
        ))
        .is_err()
    );
}

#[test]
fn generation_config_maps_and_reports_what_it_drops() {
    let body = json!({
        "contents": [{"role": "user", "parts": [{"text": "x"}]}],
        "generationConfig": {
            "temperature": 0.5, "topP": 0.9, "topK": 64, "maxOutputTokens": 100,
            "stopSequences": ["END"], "candidateCount": 1, "seed": 7,
            "thinkingConfig": {"includeThoughts": true, "thinkingBudget": 8192}
        }
    });
    let t = translate(body.clone()).unwrap();
    let chat = serde_json::to_value(&t.chat).unwrap();
    assert_eq!(chat["temperature"], 0.5);
    assert_eq!(chat["top_p"], 0.9);
    assert_eq!(chat["max_tokens"], 100);
    assert_eq!(chat["stop"], json!(["END"]));
    assert_eq!(chat["seed"], 7);
    assert_eq!(chat["stream"], true);
    assert_eq!(chat["stream_options"], json!({"include_usage": true}));
    assert!(chat.get("top_k").is_none());
    assert!(chat.get("reasoning_effort").is_none());
    assert!(
        t.report
            .dropped_options
            .iter()
            .any(|o| o == "generationConfig.topK=64 (provider not marked as accepting top_k)")
    );
    assert!(
        t.report
            .dropped_options
            .iter()
            .any(|o| o.starts_with("generationConfig.thinkingConfig="))
    );

    let mut opts = TranslateOptions::new("m", false);
    opts.provider.forward_top_k = true;
    opts.provider.thinking = ThinkingMode::ReasoningEffort;
    let t = translate_with(body, &opts).unwrap();
    let chat = serde_json::to_value(&t.chat).unwrap();
    assert_eq!(chat["top_k"], 64);
    assert_eq!(chat["reasoning_effort"], "medium");
    assert!(chat.get("stream").is_none());

    let level =
        json!({"contents": [], "generationConfig": {"thinkingConfig": {"thinkingLevel": "HIGH"}}});
    assert_eq!(
        translate_with(level, &opts)
            .unwrap()
            .chat
            .reasoning_effort
            .as_deref(),
        Some("high")
    );
}

#[test]
fn generation_config_limits_are_typed_errors() {
    let err = translate(
        json!({"contents": [], "generationConfig": {"stopSequences": ["a","b","c","d","e"]}}),
    )
    .unwrap_err();
    assert_eq!(
        err,
        TranslateError::TooManyStopSequences { count: 5, max: 4 }
    );
    let err =
        translate(json!({"contents": [], "generationConfig": {"candidateCount": 2}})).unwrap_err();
    assert_eq!(err, TranslateError::CandidateCount(2));
    let err =
        translate(json!({"contents": [], "generationConfig": {"responseModalities": ["IMAGE"]}}))
            .unwrap_err();
    assert!(matches!(err, TranslateError::Unsupported { .. }));
    let err = translate(
        json!({"contents": [], "generationConfig": {"responseSchema": {"type": "STRING"}}}),
    )
    .unwrap_err();
    assert!(matches!(err, TranslateError::InvalidValue { .. }));
}

#[test]
fn response_json_schema_becomes_response_format_with_lowered_types() {
    let t = translate(json!({
        "contents": [{"role": "user", "parts": [{"text": "x"}]}],
        "generationConfig": {"responseMimeType": "application/json", "responseJsonSchema": {
            "type": "OBJECT",
            "properties": {"score": {"type": "INTEGER"}, "why": {"type": "STRING"}},
            "required": ["score"]
        }}
    }))
    .unwrap();
    assert!(t.json_response);
    assert_eq!(
        serde_json::to_value(&t.chat.response_format).unwrap(),
        json!({"type": "json_schema", "json_schema": {"name": "response", "strict": false, "schema": {
            "type": "object",
            "properties": {"score": {"type": "integer"}, "why": {"type": "string"}},
            "required": ["score"]
        }}})
    );
    let t = translate(
        json!({"contents": [], "generationConfig": {"responseMimeType": "application/json"}}),
    )
    .unwrap();
    assert_eq!(
        t.chat.response_format,
        Some(ResponseFormat::JsonObject { schema: None })
    );
}

/// A 2x2 RGBA PNG, base64.
fn tiny_png() -> String {
    use base64::Engine as _;
    let mut out = Vec::new();
    {
        let mut enc = png::Encoder::new(&mut out, 2, 2);
        enc.set_color(png::ColorType::Rgba);
        enc.set_depth(png::BitDepth::Eight);
        let mut w = enc.write_header().unwrap();
        w.write_image_data(&[1, 2, 3, 255, 4, 5, 6, 0, 7, 8, 9, 128, 10, 11, 12, 255])
            .unwrap();
    }
    base64::engine::general_purpose::STANDARD.encode(out)
}

#[test]
fn images_reach_the_upstream_and_tool_images_follow_tool_messages() {
    let t = translate(json!({
        "contents": [
            {"role": "user", "parts": [{"text": "look"}, {"inlineData": {"mimeType": "image/jpeg", "data": "/9j/AA=="}}]},
            {"role": "model", "parts": [{"functionCall": {"id": "shot_1", "name": "screenshot", "args": {}}}]},
            {"role": "user", "parts": [
                {"functionResponse": {"id": "shot_1", "name": "screenshot", "response": {"output": "done"},
                    "parts": [{"inlineData": {"mimeType": "image/png", "data": tiny_png()}}]}},
                {"inlineData": {"mimeType": "image/gif", "data": "R0lGODlh"}},
                {"text": "what now?"}
            ]}
        ]
    }))
    .unwrap();
    let m = &t.chat.messages;
    assert_eq!(m.len(), 4);
    match &m[0] {
        ChatMessage::User {
            content: UserContent::Parts(parts),
            ..
        } => {
            assert_eq!(
                parts[0],
                ContentPart::Text {
                    text: "look".into()
                }
            );
            assert!(
                matches!(&parts[1], ContentPart::ImageUrl { image_url } if image_url.url == "data:image/jpeg;base64,/9j/AA==")
            );
        }
        other => panic!("{other:?}"),
    }
    assert!(
        matches!(&m[2], ChatMessage::Tool { tool_call_id, content } if tool_call_id == "shot_1" && content == "{\"output\":\"done\"}")
    );
    match &m[3] {
        ChatMessage::User {
            content: UserContent::Parts(parts),
            ..
        } => {
            assert_eq!(
                parts[0],
                ContentPart::Text {
                    text: "Images returned by function call shot_1 (screenshot):".into()
                }
            );
            assert!(
                matches!(&parts[1], ContentPart::ImageUrl { image_url } if image_url.url.starts_with("data:image/webp;base64,"))
            );
            assert!(
                matches!(&parts[2], ContentPart::ImageUrl { image_url } if image_url.url == "data:image/gif;base64,R0lGODlh")
            );
            assert_eq!(
                parts[3],
                ContentPart::Text {
                    text: "what now?".into()
                }
            );
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(t.report.images_forwarded, 3);
    assert_eq!(t.report.images_reencoded, 1);
}

#[test]
fn a_pdf_read_by_a_tool_is_a_placeholder_naming_it_and_bad_image_base64_an_error() {
    // The shape Gemini CLI 0.61.0 sends after read_file of a PDF (fixture read_pdf): the
    // functionResponse, then the document as a sibling inlineData part.
    let history = |provider| {
        let mut opts = TranslateOptions::new("up-model", true);
        opts.provider = provider;
        translate_with(
            json!({"contents": [
                {"role": "user", "parts": [{"text": "read it"}]},
                {"role": "model", "parts": [{"functionCall": {"id": "r1", "name": "read_file", "args": {"file_path": "q.pdf"}}}]},
                {"role": "user", "parts": [
                    {"functionResponse": {"id": "r1", "name": "read_file", "response": {"output": "Binary content provided (1 item(s))."}}},
                    {"inlineData": {"mimeType": "application/pdf", "data": "JVBERi0xLjQK"}}
                ]}
            ]}),
            &opts,
        )
        .unwrap()
    };
    let local = history(switchyard_translate::Profile::Vllm.options());
    let m = messages_json(&local);
    assert_eq!(m[2]["role"], "tool");
    assert_eq!(
        m[3]["content"],
        "Attachments returned by function call r1 (read_file):\n[attachment not forwarded: \
         application/pdf attachment of 9 bytes from the result of read_file (call r1); the \
         provider cannot read it]"
    );
    assert_eq!(local.report.attachments.len(), 1, "{:?}", local.report);
    let openai = history(switchyard_translate::Profile::OpenAi.options());
    let m = messages_json(&openai);
    assert_eq!(m[3]["content"][1]["type"], "file");
    assert_eq!(
        m[3]["content"][1]["file"]["file_data"],
        "data:application/pdf;base64,JVBERi0xLjQK"
    );
    let err = translate(json!({"contents": [{"parts": [{"inlineData": {"mimeType": "image/png", "data": "@@@"}}]}]})).unwrap_err();
    assert!(matches!(err, TranslateError::InvalidBase64 { .. }), "{err}");
}

#[test]
fn file_data_is_never_fetched_unless_remote_media_are_allowed() {
    let body = json!({"contents": [{"role": "user", "parts": [
        {"text": "see"},
        {"fileData": {"mimeType": "image/png", "fileUri": "https://example.com/a.png"}}
    ]}]});
    let shut = translate(body.clone()).unwrap();
    let m = messages_json(&shut);
    assert!(
        m[0]["content"]
            .as_str()
            .unwrap()
            .contains("remote media are not fetched"),
        "{m}"
    );
    let mut opts = TranslateOptions::new("up-model", true);
    opts.provider.allow_remote_media = true;
    let open = translate_with(body, &opts).unwrap();
    let m = messages_json(&open);
    assert_eq!(
        m[0]["content"][1]["image_url"]["url"],
        "https://example.com/a.png"
    );
}

#[test]
fn an_undecodable_png_is_forwarded_unchanged_and_noted() {
    // Half a PNG (or none): converting is an optimisation and never fails the request.
    let t = translate(json!({"contents": [{"parts": [{"inlineData": {"mimeType": "image/png", "data": "AAAA"}}]}]})).unwrap();
    let json = serde_json::to_string(&t.chat.messages).unwrap();
    assert!(json.contains("data:image/png;base64,AAAA"), "{json}");
    assert_eq!(t.report.images_reencoded, 0);
    assert_eq!(t.report.png_passthrough.len(), 1);
    assert!(
        t.report.png_passthrough[0].contains("forwarded unchanged"),
        "{:?}",
        t.report.png_passthrough
    );
}

#[test]
fn url_safe_image_data_is_forwarded_as_standard_base64() {
    let t = translate(json!({"contents": [{"parts": [{"inlineData": {"mimeType": "image/jpeg", "data": "-_-_"}}]}]}))
        .unwrap();
    match &t.chat.messages[0] {
        ChatMessage::User {
            content: UserContent::Parts(parts),
            ..
        } => assert!(
            matches!(&parts[0], ContentPart::ImageUrl { image_url } if image_url.url == "data:image/jpeg;base64,+/+/"),
            "{parts:?}"
        ),
        other => panic!("{other:?}"),
    }
}

#[test]
fn reasoning_carried_in_a_signature_of_ours_is_echoed_only_when_asked() {
    let carried = switchyard_translate::reasoning::reasoning_signature("Read a, then b.");
    let body = json!({
        "contents": [
            {"role": "user", "parts": [{"text": "go"}]},
            {"role": "model", "parts": [
                {"functionCall": {"id": "c1", "name": "f", "args": {}}, "thoughtSignature": carried},
                {"functionCall": {"id": "c2", "name": "f", "args": {}}}
            ]},
            {"role": "user", "parts": [
                {"functionResponse": {"id": "c1", "name": "f", "response": {"output": "1"}}},
                {"functionResponse": {"id": "c2", "name": "f", "response": {"output": "2"}}}
            ]},
            {"role": "model", "parts": [
                {"functionCall": {"id": "c3", "name": "f", "args": {}}, "thoughtSignature": "SIG_ABC123"}
            ]},
            {"role": "user", "parts": [
                {"functionResponse": {"id": "c3", "name": "f", "response": {"output": "3"}}}
            ]}
        ]
    });
    let mut echoing = TranslateOptions::new("up-model", true);
    echoing.provider.echo_reasoning = true;
    let t = translate_with(body.clone(), &echoing).unwrap();
    let messages = messages_json(&t);
    let assistants: Vec<&Value> = messages
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "assistant")
        .collect();
    assert_eq!(assistants[0]["reasoning_content"], "Read a, then b.");
    assert!(
        assistants[1].get("reasoning_content").is_none(),
        "a foreign signature carries nothing: {}",
        assistants[1]
    );
    assert_eq!(t.report.echoed_reasoning_turns, 1);
    assert_eq!(t.report.stripped_signatures, 2);

    // Not asked: the signature is stripped like any other, nothing is echoed.
    let t = translate(body).unwrap();
    assert!(!messages_json(&t).to_string().contains("reasoning_content"));
    assert_eq!(t.report.echoed_reasoning_turns, 0);
}

fn with_profile(toml_section: &str) -> TranslateOptions {
    let provider: switchyard_translate::ProviderOptions = toml::from_str(toml_section).unwrap();
    TranslateOptions {
        provider,
        ..TranslateOptions::new("up-model", true)
    }
}

#[test]
fn a_profile_sets_the_switches_and_each_switch_can_be_set_on_its_own() {
    use switchyard_translate::{JsonSchemaMode, Profile, ProviderOptions, ToolCallContent};
    let llama = with_profile("profile = \"llama.cpp\"").provider;
    assert_eq!(llama, Profile::LlamaCpp.options());
    assert_eq!(llama.tool_call_content, ToolCallContent::Empty);
    assert_eq!(llama.json_schema, JsonSchemaMode::JsonObjectSchema);
    let tuned = with_profile(
        "profile = \"llama.cpp\"\njson_schema = \"prompt_only\"\nforward_top_k = false",
    )
    .provider;
    assert_eq!(tuned.json_schema, JsonSchemaMode::PromptOnly);
    assert!(!tuned.forward_top_k);
    assert_eq!(
        tuned.tool_call_content,
        ToolCallContent::Empty,
        "the rest stays the profile's"
    );
    assert_eq!(with_profile("").provider, ProviderOptions::default());
    assert!(toml::from_str::<ProviderOptions>("profile = \"lmstudio\"").is_err());
    assert!(toml::from_str::<ProviderOptions>("tool_call_content = \"none\"").is_err());
}

#[test]
fn profiles_change_the_tool_turn_content_the_json_schema_form_and_the_output_cap() {
    let history = json!({"contents": [
        {"role": "user", "parts": [{"text": "go"}]},
        {"role": "model", "parts": [{"functionCall": {"id": "c1", "name": "f", "args": {}}}]},
        {"role": "user", "parts": [{"functionResponse": {"id": "c1", "name": "f", "response": {"output": "ok"}}}]}
    ]});
    let content = |opts: &TranslateOptions| {
        messages_json(&translate_with(history.clone(), opts).unwrap())[1]["content"].clone()
    };
    assert_eq!(content(&with_profile("")), Value::Null);
    assert_eq!(content(&with_profile("profile = \"llama.cpp\"")), json!(""));

    let json_request = json!({"contents": [{"role": "user", "parts": [{"text": "rate"}]}],
        "systemInstruction": {"parts": [{"text": "You rate."}]},
        "generationConfig": {"responseMimeType": "application/json",
            "responseJsonSchema": {"type": "object", "properties": {"score": {"type": "integer"}}}}});
    let llama = translate_with(
        json_request.clone(),
        &with_profile("profile = \"llama.cpp\""),
    )
    .unwrap();
    assert_eq!(
        serde_json::to_value(&llama.chat.response_format).unwrap(),
        json!({"type": "json_object", "schema": {"type": "object", "properties": {"score": {"type": "integer"}}}})
    );
    let prompt =
        translate_with(json_request, &with_profile("json_schema = \"prompt_only\"")).unwrap();
    assert_eq!(
        serde_json::to_value(&prompt.chat.response_format).unwrap(),
        json!({"type": "json_object"})
    );
    let system = messages_json(&prompt)[0]["content"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(system.starts_with("You rate."), "{system}");
    assert!(system.contains("\"score\""), "{system}");

    // No maxOutputTokens (Gemini CLI never sends one): the default cap, under every profile.
    for section in ["", "profile = \"vllm\"", "profile = \"ollama\""] {
        let t = translate_with(history.clone(), &with_profile(section)).unwrap();
        assert_eq!(
            t.chat.max_tokens,
            Some(switchyard_translate::DEFAULT_MAX_TOKENS)
        );
    }
    let capped = translate_with(
        json!({"contents": [], "generationConfig": {"maxOutputTokens": 100}}),
        &with_profile("default_max_tokens = 0"),
    )
    .unwrap();
    assert_eq!(capped.chat.max_tokens, Some(100));
    let uncapped = translate_with(history, &with_profile("default_max_tokens = 0")).unwrap();
    assert_eq!(uncapped.chat.max_tokens, None);
}
