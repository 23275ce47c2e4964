use serde_json::{Value, json};

use super::*;
use crate::ProviderOptions;
use crate::openai::ChatMessage;

fn options() -> MessagesIngressOptions<'static> {
    MessagesIngressOptions {
        upstream_model: "qwen".into(),
        provider: ProviderOptions::default(),
        strip: Some("_switchyard_call"),
        convert_on_miss: true,
    }
}

fn prepare(body: Value) -> Result<PreparedMessages, TranslateError> {
    prepare_with(body, &options())
}

fn prepare_with(
    body: Value,
    options: &MessagesIngressOptions<'_>,
) -> Result<PreparedMessages, TranslateError> {
    let request = parse_messages_request(body.to_string().as_bytes())?;
    prepare_messages_request(request, options, None)
}

/// The shape of Claude Code's second request after two parallel Bash calls (`sj_parallel` in
/// the reference captures): system blocks, a system turn at index 1 with its per-turn control,
/// two calls and their results in one user turn.
fn parallel_history() -> Value {
    json!({
        "model": "claude-opus-5-5",
        "max_tokens": 32000,
        "stream": true,
        "system": [
            {"type": "text", "text": "x-anthropic-billing-header: cc_version=2.1.332.abc;"},
            {"type": "text", "text": "You are a Claude agent.", "cache_control": {"type": "ephemeral"}},
        ],
        "messages": [
            {"role": "user", "content": [
                {"type": "text", "text": "<system-reminder>attribution</system-reminder>"},
                {"type": "text", "text": "two"},
            ]},
            {"role": "system", "content": "# Environment", "output_config": {"effort": "medium"}},
            {"role": "assistant", "content": [
                {"type": "tool_use", "id": "toolu_A", "name": "Bash",
                 "input": {"command": "echo one", "_switchyard_call": "secret"}},
                {"type": "tool_use", "id": "toolu_B", "name": "Bash", "input": {"command": "echo two"}},
            ]},
            // Results as the guest's tools finished: B first.
            {"role": "user", "content": [
                {"tool_use_id": "toolu_B", "type": "tool_result", "content": "no such file",
                 "is_error": true, "cache_control": {"type": "ephemeral"}},
                {"tool_use_id": "toolu_A", "type": "tool_result", "content": "one", "is_error": false},
            ]},
        ],
        "tools": [{"name": "Bash", "description": "Run a command", "input_schema": {
            "type": "object",
            "properties": {"command": {"type": "string"}, "_switchyard_call": {"type": "string"}},
        }}],
        "metadata": {"user_id": "{\"device_id\":\"abc\"}"},
        "thinking": {"type": "adaptive", "display": "updates"},
        "output_config": {"effort": "medium"},
        "context_management": {"edits": [{"type": "clear_thinking_20251015", "keep": "all"}]},
    })
}

#[test]
fn a_parallel_history_keeps_ids_order_system_turns_and_errors() {
    let prepared = prepare(parallel_history()).unwrap();
    let chat = &prepared.chat;
    assert_eq!(chat.model, "qwen");
    assert!(chat.stream);
    assert_eq!(chat.max_tokens, Some(32000));
    let roles: Vec<&str> = chat
        .messages
        .iter()
        .map(|m| match m {
            ChatMessage::System { .. } => "system",
            ChatMessage::User { .. } => "user",
            ChatMessage::Assistant { .. } => "assistant",
            ChatMessage::Tool { .. } => "tool",
            ChatMessage::Developer { .. } => "developer",
        })
        .collect();
    assert_eq!(
        roles,
        ["system", "user", "system", "assistant", "tool", "tool"]
    );
    let ChatMessage::System { content, .. } = &chat.messages[0] else {
        panic!("{:?}", chat.messages[0]);
    };
    assert_eq!(
        content,
        "x-anthropic-billing-header: cc_version=2.1.332.abc;\n\nYou are a Claude agent."
    );
    let ChatMessage::Assistant {
        tool_calls,
        content,
        ..
    } = &chat.messages[3]
    else {
        panic!("{:?}", chat.messages[3]);
    };
    assert_eq!(content, &None);
    let ids: Vec<&str> = tool_calls.iter().map(|c| c.id.as_str()).collect();
    assert_eq!(ids, ["toolu_A", "toolu_B"]);
    // The private identity never goes upstream, in the history or the schema.
    assert_eq!(
        tool_calls[0].function.arguments,
        r#"{"command":"echo one"}"#
    );
    assert!(
        !chat.tools[0]
            .function
            .parameters
            .to_string()
            .contains("_switchyard_call")
    );
    let ChatMessage::Tool {
        tool_call_id,
        content,
    } = &chat.messages[5]
    else {
        panic!("{:?}", chat.messages[5]);
    };
    assert_eq!(
        (tool_call_id.as_str(), content.as_str()),
        ("toolu_B", "Error: no such file")
    );
    assert_eq!(prepared.history_call_ids, ["toolu_A", "toolu_B"]);
    assert_eq!(
        prepared.tool_result_ids,
        [
            (
                "toolu_B".to_owned(),
                "messages[3].content[0].tool_use_id".to_owned()
            ),
            (
                "toolu_A".to_owned(),
                "messages[3].content[1].tool_use_id".to_owned()
            ),
        ]
    );
    // Effort maps; the rest is noted, not silently lost.
    assert_eq!(chat.reasoning_effort.as_deref(), Some("medium"));
    let report = &prepared.report;
    assert!(
        report
            .dropped_options
            .iter()
            .any(|o| o.starts_with("metadata")),
        "{report:?}"
    );
    assert!(
        report
            .dropped_options
            .iter()
            .any(|o| o.starts_with("messages[1].output_config")),
        "{report:?}"
    );
    assert!(
        report.notes.iter().any(|n| n.contains("2 cache_control")),
        "{report:?}"
    );
    assert!(prepared.prompt_token_estimate > 0);
}

#[test]
fn an_empty_system_turn_is_dropped_and_noted() {
    let prepared = prepare(json!({
        "model": "m", "max_tokens": 10,
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "hi"}]},
            {"role": "system", "content": [], "output_config": {"effort": "medium"}},
        ],
    }))
    .unwrap();
    assert_eq!(prepared.chat.messages.len(), 1);
    assert!(
        prepared
            .report
            .notes
            .iter()
            .any(|n| n.contains("messages[1]: empty system turn")),
        "{:?}",
        prepared.report
    );
}

#[test]
fn our_thinking_goes_back_only_when_the_provider_wants_it() {
    let body = json!({
        "model": "m", "max_tokens": 10,
        "messages": [
            {"role": "user", "content": "think"},
            {"role": "assistant", "content": [
                {"type": "thinking", "thinking": "let me see", "signature": THINKING_SIGNATURE},
                {"type": "thinking", "thinking": "foreign", "signature": "ZmFrZQ=="},
                {"type": "text", "text": "done"},
            ]},
            {"role": "user", "content": "again"},
        ],
    });
    let reasoning = |prepared: &PreparedMessages| match &prepared.chat.messages[1] {
        ChatMessage::Assistant {
            reasoning_content,
            content,
            ..
        } => (reasoning_content.clone(), content.clone()),
        other => panic!("{other:?}"),
    };
    let plain = prepare(body.clone()).unwrap();
    assert_eq!(reasoning(&plain), (None, Some("done".into())));
    assert_eq!(plain.report.dropped_thought_parts, 2);
    let mut echo = options();
    echo.provider.echo_reasoning = true;
    let echoed = prepare_with(body, &echo).unwrap();
    assert_eq!(
        reasoning(&echoed),
        (Some("let me see".into()), Some("done".into()))
    );
    assert_eq!(echoed.report.echoed_reasoning_turns, 1);
    assert_eq!(echoed.report.dropped_thought_parts, 1);
}

/// A 1×1 RGBA PNG.
const PIXEL_PNG: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==";

#[test]
fn a_read_png_goes_upstream_as_lossless_webp_after_its_tool_message() {
    let prepared = prepare(json!({
        "model": "m", "max_tokens": 10,
        "messages": [
            {"role": "user", "content": "look"},
            {"role": "assistant", "content": [
                {"type": "tool_use", "id": "toolu_R", "name": "Read", "input": {"file_path": "/w/p.png"}},
            ]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_R", "content": [
                    {"type": "image", "source": {"type": "base64", "data": PIXEL_PNG, "media_type": "image/png"}},
                ]},
            ]},
        ],
    }))
    .unwrap();
    let messages = &prepared.chat.messages;
    assert!(
        matches!(&messages[2], ChatMessage::Tool { tool_call_id, .. } if tool_call_id == "toolu_R")
    );
    let ChatMessage::User {
        content: UserContent::Parts(parts),
        ..
    } = &messages[3]
    else {
        panic!("{:?}", messages[3]);
    };
    assert_eq!(
        parts[0],
        ContentPart::Text {
            text: "Images returned by function call toolu_R (Read):".into()
        }
    );
    let ContentPart::ImageUrl { image_url } = &parts[1] else {
        panic!("{:?}", parts[1]);
    };
    assert!(
        image_url.url.starts_with("data:image/webp;base64,"),
        "{}",
        image_url.url
    );
    assert_eq!(prepared.report.images_reencoded, 1);
}

#[test]
fn choices_map_and_budgets_become_efforts() {
    let prepared = prepare(json!({
        "model": "m", "max_tokens": 10,
        "messages": [{"role": "user", "content": "x"}],
        "tool_choice": {"type": "tool", "name": "Bash", "disable_parallel_tool_use": true},
        "thinking": {"type": "enabled", "budget_tokens": 31999},
        "temperature": 0.5,
        "stop_sequences": ["END"],
    }))
    .unwrap();
    let chat = &prepared.chat;
    assert_eq!(
        chat.tool_choice,
        Some(json!({"type": "function", "function": {"name": "Bash"}}))
    );
    assert_eq!(chat.extra.get("parallel_tool_calls"), Some(&json!(false)));
    assert_eq!(chat.reasoning_effort.as_deref(), Some("high"));
    assert_eq!(chat.temperature, Some(0.5));
    assert_eq!(chat.stop, ["END"]);
}

#[test]
fn what_the_gateway_cannot_honour_is_a_typed_error() {
    let base = |extra: Value| {
        let mut body = json!({"model": "m", "max_tokens": 10,
            "messages": [{"role": "user", "content": "x"}]});
        for (k, v) in extra.as_object().unwrap() {
            body[k] = v.clone();
        }
        body
    };
    let message = |body: Value| prepare(body).unwrap_err().to_string();
    // Claude Code resends its tools inline when a 400 names defer_loading.
    let deferred = message(base(json!({"tools": [
        {"name": "A", "input_schema": {"type": "object"}},
        {"name": "B", "input_schema": {"type": "object"}, "defer_loading": true},
    ]})));
    assert!(deferred.contains("tools[1].defer_loading"), "{deferred}");
    let cleared = message(base(json!({"context_management": {"edits": [
        {"type": "clear_tool_uses_20250919"},
    ]}})));
    assert!(cleared.contains("context_management.edits[0]"), "{cleared}");
    let server_tool = message(base(json!({"tools": [
        {"type": "web_search_20250305", "name": "web_search"},
    ]})));
    assert!(server_tool.contains("web_search_20250305"), "{server_tool}");
    let unknown_field = message(base(json!({"container": "x"})));
    assert!(unknown_field.contains("`container`"), "{unknown_field}");
    let unknown_block = message(json!({"model": "m", "max_tokens": 1, "messages": [
        {"role": "user", "content": [{"type": "search_result", "text": "x"}]},
    ]}));
    assert!(
        unknown_block.contains("messages[0].content[0]"),
        "{unknown_block}"
    );
    let misplaced = message(json!({"model": "m", "max_tokens": 1, "messages": [
        {"role": "user", "content": [{"type": "text", "text": "t", "tool_use_id": "x"}]},
    ]}));
    assert!(misplaced.contains("tool_use_id"), "{misplaced}");
    let not_object = message(json!({"model": "m", "max_tokens": 1, "messages": [
        {"role": "user", "content": "x"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "a", "name": "n", "input": [1]}]},
    ]}));
    assert!(not_object.contains("input"), "{not_object}");
    assert!(message(json!({"model": "m", "messages": []})).contains("empty"));
}

#[test]
fn a_read_pdf_follows_the_attachment_rules() {
    use base64::Engine as _;
    let pdf = base64::engine::general_purpose::STANDARD.encode(b"%PDF-1.4 tiny");
    let body = json!({
        "model": "m", "max_tokens": 10,
        "messages": [
            {"role": "user", "content": "read it"},
            {"role": "assistant", "content": [
                {"type": "tool_use", "id": "toolu_P", "name": "Read", "input": {"file_path": "/w/q.pdf"}},
            ]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_P", "content": [
                    {"type": "text", "text": "PDF file read: /w/q.pdf (13 bytes)"},
                    {"type": "document", "source": {"type": "base64",
                        "media_type": "application/pdf", "data": pdf}},
                ]},
            ]},
        ],
    });
    // OpenAI's profile takes PDFs as a file part, after the line naming the call.
    let openai = prepare(body.clone()).unwrap();
    let ChatMessage::User {
        content: UserContent::Parts(parts),
        ..
    } = &openai.chat.messages[3]
    else {
        panic!("{:?}", openai.chat.messages);
    };
    assert!(matches!(&parts[1], ContentPart::File { .. }), "{parts:?}");
    // A local server's profile gets a placeholder naming the document and the call.
    let mut local = options();
    local.provider = crate::options::Profile::Vllm.options();
    let vllm = prepare_with(body, &local).unwrap();
    let text = serde_json::to_string(&vllm.chat.messages).unwrap();
    assert!(!text.contains(&pdf), "the bytes never go upstream");
    assert!(
        text.contains(
            "application/pdf attachment of 13 bytes from the result of Read (call toolu_P)"
        ),
        "{text}"
    );
}
