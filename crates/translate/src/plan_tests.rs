use serde_json::json;

use super::*;
use crate::openai::{ChatFunction, ChatTool, FunctionCallSpec, ToolCall, UserContent};
use crate::options::Profile;

fn request() -> ChatRequest {
    ChatRequest {
        model: "m".into(),
        messages: vec![
            ChatMessage::Developer {
                content: "be brief".into(),
                name: None,
            },
            ChatMessage::User {
                content: UserContent::Text("hi".into()),
                name: None,
            },
            ChatMessage::Assistant {
                name: None,
                content: Some(String::new()),
                tool_calls: vec![ToolCall {
                    id: "c1".into(),
                    kind: "function".into(),
                    function: FunctionCallSpec {
                        name: "f".into(),
                        arguments: "{}".into(),
                    },
                }],
                reasoning_content: None,
            },
        ],
        tools: vec![ChatTool {
            kind: "function".into(),
            function: ChatFunction {
                name: "f".into(),
                description: None,
                parameters: json!({"type": "object", "$schema": "x", "properties": {}}),
                strict: None,
            },
        }],
        tool_choice: Some(json!("required")),
        stream: true,
        top_k: Some(40.into()),
        reasoning_effort: Some("high".into()),
        response_format: Some(ResponseFormat::JsonSchema {
            json_schema: JsonSchemaFormat {
                name: "response".into(),
                schema: json!({"type": "object"}),
                strict: false,
            },
        }),
        ..ChatRequest::default()
    }
}

fn planned(profile: Profile) -> (Result<ChatRequest, TranslateError>, TranslationReport) {
    let mut chat = request();
    let mut report = TranslationReport::default();
    let result = apply(&mut chat, &profile.options(), &mut report, Schemas::Guest).map(|()| chat);
    (result, report)
}

#[test]
fn the_openai_profile_keeps_what_openai_takes() {
    let (chat, report) = planned(Profile::OpenAi);
    let chat = chat.unwrap();
    assert!(matches!(chat.messages[0], ChatMessage::Developer { .. }));
    assert_eq!(chat.tool_choice, Some(json!("required")));
    assert!(matches!(
        &chat.messages[2],
        ChatMessage::Assistant { content: None, .. }
    ));
    assert!(matches!(
        chat.response_format,
        Some(ResponseFormat::JsonSchema { .. })
    ));
    assert_eq!(chat.max_tokens, Some(crate::DEFAULT_MAX_TOKENS));
    assert_eq!(chat.top_k, None);
    assert_eq!(chat.reasoning_effort, None);
    assert!(chat.stream);
    assert_eq!(chat.stream_options.map(|o| o.include_usage), Some(true));
    // The schema keyword no upstream needs is cleaned away.
    assert!(chat.tools[0].function.parameters.get("$schema").is_none());
    assert_eq!(report.schema_changes.len(), 1);
}

#[test]
fn the_llama_cpp_profile_changes_each_switch_it_sets() {
    let (chat, report) = planned(Profile::LlamaCpp);
    let chat = chat.unwrap();
    assert!(matches!(
        &chat.messages[0],
        ChatMessage::System { content, .. } if content == "be brief"
    ));
    assert_eq!(chat.tool_choice, Some(json!("auto")));
    assert!(matches!(
        &chat.messages[2],
        ChatMessage::Assistant { content: Some(c), .. } if c.is_empty()
    ));
    assert!(matches!(
        chat.response_format,
        Some(ResponseFormat::JsonObject { schema: Some(_) })
    ));
    assert_eq!(chat.top_k, Some(40.into()), "llama.cpp takes top_k");
    assert!(!chat.stream, "stream_tools is off for llama.cpp");
    assert!(chat.stream_options.is_none());
    for note in ["developer", "tool_choice", "json_schema", "stream_tools"] {
        assert!(
            report.mapped_options.iter().any(|m| m.contains(note)),
            "{note}: {:?}",
            report.mapped_options
        );
    }
}

#[test]
fn too_many_stop_sequences_are_a_typed_error() {
    let mut chat = request();
    chat.stop = (0..5).map(|i| i.to_string()).collect();
    let mut report = TranslationReport::default();
    assert!(matches!(
        apply(
            &mut chat,
            &Profile::OpenAi.options(),
            &mut report,
            Schemas::Guest
        ),
        Err(TranslateError::TooManyStopSequences { count: 5, max: 4 })
    ));
}

#[test]
fn a_request_already_in_the_providers_form_passes_with_no_note() {
    for profile in [
        Profile::OpenAi,
        Profile::LlamaCpp,
        Profile::Vllm,
        Profile::Ollama,
    ] {
        let provider = profile.options();
        let mut chat = request();
        let mut report = TranslationReport::default();
        apply(&mut chat, &provider, &mut report, Schemas::Guest).unwrap();
        let once = chat.clone();
        let mut again = TranslationReport::default();
        apply(&mut chat, &provider, &mut again, Schemas::Guest).unwrap();
        assert_eq!(chat, once, "{profile:?}");
        assert_eq!(again, TranslationReport::default(), "{profile:?}");
    }
}
