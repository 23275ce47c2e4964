use serde_json::{Value, json};

use super::*;
use crate::ProviderOptions;
use crate::openai::ChatMessage;

fn options() -> ResponsesIngressOptions<'static> {
    ResponsesIngressOptions {
        upstream_model: "qwen".into(),
        provider: ProviderOptions::default(),
        strip: Some("_switchyard_call"),
        convert_on_miss: true,
    }
}

fn prepare(body: Value) -> Result<PreparedResponses, TranslateError> {
    prepare_with(body, &options())
}

fn prepare_with(
    body: Value,
    options: &ResponsesIngressOptions<'_>,
) -> Result<PreparedResponses, TranslateError> {
    let request = parse_responses_request(body.to_string().as_bytes())?;
    prepare_responses_request(request, options, None)
}

/// The shape of Codex 0.171.0's second request after a parallel pair of `exec_command` calls
/// and an `apply_patch` (the reference captures `exec_parallel`, `exec_apply_patch`, `as_mcp`):
/// developer messages, item ids on everything, calls first then outputs.
fn codex_history() -> Value {
    json!({
        "model": "switchyard-model",
        "stream": true,
        "input": [
            {"type": "message", "id": "msg_1", "role": "developer",
             "content": [{"type": "input_text", "text": "You are a coding agent."}]},
            {"type": "message", "id": "msg_2", "role": "user",
             "content": [{"type": "input_text", "text": "<environment_context/>"}]},
            {"type": "message", "id": "msg_3", "role": "user",
             "content": [{"type": "input_text", "text": "run two"}]},
            {"type": "reasoning", "id": "rs_up", "summary": [{"type": "summary_text", "text": "plan"}],
             "content": null, "encrypted_content": "b3BhcXVl"},
            {"type": "function_call", "status": "completed", "id": "fc_a", "name": "exec_command",
             "arguments": "{\"cmd\": \"echo A\"}", "call_id": "call_A"},
            {"type": "function_call", "status": "completed", "id": "fc_b", "name": "record",
             "namespace": "mcp__switchyard",
             "arguments": "{\"nonce\": \"n\", \"_switchyard_call\": \"secret\"}", "call_id": "call_B"},
            {"type": "custom_tool_call", "status": "completed", "id": "ctc_c", "call_id": "call_C",
             "name": "apply_patch", "input": "*** Begin Patch\n*** End Patch\n"},
            {"type": "function_call_output", "id": "fco_1", "call_id": "call_A", "output": "A-out"},
            {"type": "function_call_output", "id": "fco_2", "call_id": "call_B",
             "output": "{\"recorded\":\"n\"}"},
            {"type": "custom_tool_call_output", "id": "ctco_3", "call_id": "call_C",
             "output": "Exit code: 0"},
            {"type": "message", "id": "msg_4", "role": "assistant", "status": "completed",
             "content": [{"type": "output_text", "text": "done", "annotations": []}]},
        ],
        "tools": [
            {"type": "function", "name": "exec_command", "description": "Runs a command",
             "strict": false, "parameters": {"type": "object",
                "properties": {"cmd": {"type": "string"}}, "required": ["cmd"]}},
            {"type": "custom", "name": "apply_patch", "description": "Edit files.",
             "format": {"type": "grammar", "syntax": "lark", "definition": "start: begin_patch"}},
            {"type": "namespace", "name": "mcp__switchyard", "description": "Host tools",
             "tools": [{"type": "function", "name": "record", "description": "Record",
                "strict": false, "parameters": {"type": "object", "properties": {
                    "nonce": {"type": "string"}, "_switchyard_call": {"type": "string"}}}}]},
            {"type": "web_search", "external_web_access": false},
        ],
        "tool_choice": "auto",
        "parallel_tool_calls": true,
        "reasoning": {"effort": "medium", "summary": "auto"},
        "store": false,
        "include": ["reasoning.encrypted_content"],
        "prompt_cache_key": "thread",
        "client_metadata": {"x-codex-turn-metadata": "{\"workspaces\":{\"/home/me\":{}}}"},
        "text": {"verbosity": "low"},
    })
}

#[test]
fn a_codex_history_becomes_chat_messages_in_order() {
    let prepared = prepare(codex_history()).unwrap();
    let messages = &prepared.chat.messages;
    assert_eq!(messages.len(), 8, "{messages:#?}");
    assert!(
        matches!(&messages[0], ChatMessage::System { content, .. } if content == "You are a coding agent.")
    );
    assert!(
        matches!(&messages[2], ChatMessage::User { content: UserContent::Text(t), .. } if t == "run two")
    );
    let ChatMessage::Assistant {
        tool_calls,
        content,
        reasoning_content,
        ..
    } = &messages[3]
    else {
        panic!("{:?}", messages[3]);
    };
    assert_eq!(content, &None);
    assert_eq!(
        reasoning_content, &None,
        "an upstream's reasoning is never echoed"
    );
    let names: Vec<&str> = tool_calls
        .iter()
        .map(|c| c.function.name.as_str())
        .collect();
    assert_eq!(
        names,
        ["exec_command", "mcp__switchyard__record", "apply_patch"]
    );
    assert_eq!(tool_calls[1].function.arguments, r#"{"nonce":"n"}"#);
    let patch: Value = serde_json::from_str(&tool_calls[2].function.arguments).unwrap();
    assert_eq!(patch, json!({"input": "*** Begin Patch\n*** End Patch\n"}));
    let outputs: Vec<(&str, &str)> = messages[4..7]
        .iter()
        .map(|m| match m {
            ChatMessage::Tool {
                tool_call_id,
                content,
            } => (tool_call_id.as_str(), content.as_str()),
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(
        outputs,
        [
            ("call_A", "A-out"),
            ("call_B", "{\"recorded\":\"n\"}"),
            ("call_C", "Exit code: 0")
        ]
    );
    assert!(matches!(&messages[7], ChatMessage::Assistant { content: Some(t), .. } if t == "done"));
    assert_eq!(prepared.history_call_ids, ["call_A", "call_B", "call_C"]);
    let answered: Vec<&str> = prepared
        .tool_result_ids
        .iter()
        .map(|(id, _)| id.as_str())
        .collect();
    assert_eq!(answered, ["call_A", "call_B", "call_C"]);
    assert_eq!(prepared.report.dropped_thought_parts, 1);
}

#[test]
fn custom_and_namespaced_tools_become_functions_with_their_shapes() {
    let prepared = prepare(codex_history()).unwrap();
    let tools: Vec<&str> = prepared
        .chat
        .tools
        .iter()
        .map(|t| t.function.name.as_str())
        .collect();
    assert_eq!(
        tools,
        ["exec_command", "apply_patch", "mcp__switchyard__record"],
        "web_search is dropped"
    );
    let patch = &prepared.chat.tools[1].function;
    assert_eq!(patch.parameters["required"], json!(["input"]));
    let description = patch.description.as_deref().unwrap();
    assert!(description.starts_with("Edit files."));
    assert!(description.contains("lark grammar:\nstart: begin_patch"));
    let record = &prepared.chat.tools[2].function;
    assert!(
        record.parameters["properties"]
            .get("_switchyard_call")
            .is_none()
    );
    let shapes = &prepared.call_shapes;
    assert_eq!(
        shapes.get("apply_patch"),
        Some(&CallShape {
            kind: CallKind::Custom,
            namespace: None,
            name: "apply_patch".into()
        })
    );
    assert_eq!(
        shapes.get("mcp__switchyard__record"),
        Some(&CallShape {
            kind: CallKind::Function,
            namespace: Some("mcp__switchyard".into()),
            name: "record".into()
        })
    );
    assert_eq!(shapes.get("exec_command"), None);
    assert!(
        prepared
            .report
            .dropped_options
            .iter()
            .any(|d| d.contains("web_search"))
    );
}

#[test]
fn request_options_map_to_chat_and_local_metadata_never_goes_upstream() {
    let mut body = codex_history();
    body["max_output_tokens"] = json!(512);
    body["parallel_tool_calls"] = json!(false);
    body["tool_choice"] = json!({"type": "custom", "name": "apply_patch"});
    body["text"] = json!({"format": {"type": "json_schema", "name": "out", "strict": true,
        "schema": {"type": "object"}}});
    let prepared = prepare(body).unwrap();
    let chat = &prepared.chat;
    assert_eq!(chat.max_tokens, Some(512));
    assert_eq!(chat.reasoning_effort.as_deref(), Some("medium"));
    assert_eq!(chat.extra["parallel_tool_calls"], json!(false));
    assert_eq!(
        chat.tool_choice,
        Some(json!({"type": "function", "function": {"name": "apply_patch"}}))
    );
    assert!(matches!(
        &chat.response_format,
        Some(ResponseFormat::JsonSchema { json_schema }) if json_schema.schema == json!({"type": "object"})
    ));
    let upstream = serde_json::to_string(chat).unwrap();
    assert!(!upstream.contains("/home/me"), "{upstream}");
    assert!(!upstream.contains("thread"));
    assert!(
        !upstream.contains("b3BhcXVl"),
        "reasoning blobs stay with the guest"
    );
}

#[test]
fn a_string_input_is_one_user_message_after_the_instructions() {
    let prepared =
        prepare(json!({"model": "m", "input": "hi", "instructions": "be brief"})).unwrap();
    assert!(matches!(&prepared.chat.messages[..], [
        ChatMessage::System { content: s, .. },
        ChatMessage::User { content: UserContent::Text(u), .. },
    ] if s == "be brief" && u == "hi"));
    assert!(!prepared.stream);
}

#[test]
fn unknown_fields_types_and_server_state_are_typed_errors() {
    let cases = [
        (
            json!({"model": "m", "input": "x", "background": true}),
            "background",
        ),
        (
            json!({"model": "m", "input": "x", "previous_response_id": "resp_1"}),
            "previous_response_id",
        ),
        (
            json!({"model": "m", "input": [{"type": "item_reference", "id": "x"}]}),
            "input[0].type",
        ),
        (
            json!({"model": "m", "input": "x", "tools": [{"type": "local_shell"}]}),
            "tools[0].type",
        ),
        (
            json!({"model": "m", "input": [{"type": "function_call", "call_id": "c", "name": "f",
                "arguments": "[1]"}]}),
            "input[0].arguments",
        ),
        (
            json!({"model": "m", "input": [{"role": "user", "content": [
                {"type": "input_text", "text": "x", "image_url": "data:,"}]}]}),
            "input[0].content[0].image_url",
        ),
        (
            json!({"model": "m", "input": "x", "tools": [
                {"type": "function", "name": "a__b"},
                {"type": "namespace", "name": "a", "tools": [{"type": "function", "name": "b"}]}]}),
            "tools[1].tools[0]",
        ),
    ];
    for (body, path) in cases {
        let error = prepare(body.clone()).unwrap_err().to_string();
        assert!(error.contains(path), "{body}: {error}");
    }
}

#[test]
fn an_output_image_follows_the_batch_as_a_user_message() {
    let body = json!({"model": "m", "input": [
        {"role": "user", "content": "look"},
        {"type": "function_call", "call_id": "c1", "name": "view_image", "arguments": "{\"path\":\"a.png\"}"},
        {"type": "function_call", "call_id": "c2", "name": "exec_command", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": [
            {"type": "input_image", "image_url": "data:image/jpeg;base64,/9j/"}]},
        {"type": "function_call_output", "call_id": "c2", "output": "ok"},
        {"role": "user", "content": "next"},
    ]});
    let prepared = prepare(body).unwrap();
    let roles: Vec<&str> = prepared
        .chat
        .messages
        .iter()
        .map(|m| match m {
            ChatMessage::System { .. } | ChatMessage::Developer { .. } => "system",
            ChatMessage::User { .. } => "user",
            ChatMessage::Assistant { .. } => "assistant",
            ChatMessage::Tool { .. } => "tool",
        })
        .collect();
    assert_eq!(roles, ["user", "assistant", "tool", "tool", "user", "user"]);
    let ChatMessage::User {
        content: UserContent::Parts(parts),
        ..
    } = &prepared.chat.messages[4]
    else {
        panic!("{:?}", prepared.chat.messages[4]);
    };
    assert!(
        matches!(&parts[0], ContentPart::Text { text } if text == "Images returned by function call c1 (view_image):")
    );
    assert!(
        matches!(&parts[1], ContentPart::ImageUrl { image_url } if image_url.url == "data:image/jpeg;base64,/9j/")
    );
    assert_eq!(prepared.report.images_forwarded, 1);
}

#[test]
fn the_gateways_own_reasoning_is_echoed_only_when_asked() {
    let body = json!({"model": "m", "input": [
        {"role": "user", "content": "x"},
        {"type": "reasoning", "id": "rs_sy0_0", "summary": [{"type": "summary_text", "text": "thought"}]},
        {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": "ok"},
    ]});
    let reasoning = |prepared: &PreparedResponses| match &prepared.chat.messages[1] {
        ChatMessage::Assistant {
            reasoning_content, ..
        } => reasoning_content.clone(),
        other => panic!("{other:?}"),
    };
    assert_eq!(reasoning(&prepare(body.clone()).unwrap()), None);
    let mut echo = options();
    echo.provider.echo_reasoning = true;
    let prepared = prepare_with(body, &echo).unwrap();
    assert_eq!(reasoning(&prepared).as_deref(), Some("thought"));
    assert_eq!(prepared.report.echoed_reasoning_turns, 1);
}

/// Codex 0.171.0's real first request (through the gateway, paths replaced): every field and
/// item is modeled, the freeform `apply_patch` and the `multi_agent_v1` namespace become
/// functions, and Codex's local metadata stays behind.
#[test]
fn codex_s_real_first_request_translates() {
    let request =
        parse_responses_request(switchyard_testkit::fixtures::CODEX_FIRST_REQUEST).unwrap();
    let prepared = prepare_responses_request(request, &options(), None).unwrap();
    let names: Vec<&str> = prepared
        .chat
        .tools
        .iter()
        .map(|t| t.function.name.as_str())
        .collect();
    assert!(names.contains(&"apply_patch"), "{names:?}");
    assert!(
        names.iter().any(|n| n.starts_with("multi_agent_v1__")),
        "{names:?}"
    );
    assert_eq!(
        prepared.call_shapes.get("apply_patch").map(|s| s.kind),
        Some(CallKind::Custom)
    );
    assert!(matches!(
        prepared.chat.messages[0],
        ChatMessage::System { .. }
    ));
    let upstream = serde_json::to_string(&prepared.chat).unwrap();
    assert!(!upstream.contains("x-codex-turn-metadata"));
    assert!(prepared.stream);
}

/// A PNG in a call's output (Codex's `view_image`) goes upstream as lossless WebP.
#[test]
fn an_output_png_goes_upstream_as_lossless_webp() {
    use base64::Engine as _;
    let pixels: Vec<u8> = (0..16 * 16 * 3).map(|i| (i * 7 % 251) as u8).collect();
    let png = switchyard_testkit::fixtures::rgb_png(16, 16, &pixels).unwrap();
    let url = format!(
        "data:image/png;base64,{}",
        base64::engine::general_purpose::STANDARD.encode(&png)
    );
    let body = json!({"model": "m", "input": [
        {"role": "user", "content": "look"},
        {"type": "function_call", "call_id": "c1", "name": "view_image", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": [
            {"type": "input_image", "image_url": url}]},
    ]});
    let prepared = prepare(body).unwrap();
    let Some(ChatMessage::User {
        content: UserContent::Parts(parts),
        ..
    }) = prepared.chat.messages.last()
    else {
        panic!("{:?}", prepared.chat.messages);
    };
    let ContentPart::ImageUrl { image_url } = &parts[1] else {
        panic!("{parts:?}");
    };
    assert!(
        image_url.url.starts_with("data:image/webp;base64,"),
        "{}",
        &image_url.url[..40]
    );
}
