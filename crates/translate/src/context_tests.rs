use serde_json::json;

use super::*;
use crate::openai::{FunctionCallSpec, ImageUrl, ToolCall};

fn system() -> ChatMessage {
    ChatMessage::System {
        content: "sys".into(),
        name: None,
    }
}

fn user(text: &str) -> ChatMessage {
    ChatMessage::User {
        content: UserContent::Text(text.into()),
        name: None,
    }
}

fn calls(ids: &[&str]) -> ChatMessage {
    ChatMessage::Assistant {
        name: None,
        content: None,
        tool_calls: ids
            .iter()
            .map(|id| ToolCall {
                id: (*id).into(),
                kind: "function".into(),
                function: FunctionCallSpec {
                    name: "read".into(),
                    arguments: r#"{"path":"a"}"#.into(),
                },
            })
            .collect(),
        reasoning_content: None,
    }
}

fn result(id: &str) -> ChatMessage {
    ChatMessage::Tool {
        tool_call_id: id.into(),
        content: "content".into(),
    }
}

fn answer(text: &str) -> ChatMessage {
    ChatMessage::Assistant {
        name: None,
        content: Some(text.into()),
        tool_calls: Vec::new(),
        reasoning_content: None,
    }
}

/// A 1×1 PNG as a data URL.
const PNG_URL: &str = "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==";

/// A data URL whose PNG header says `w`×`h` (the estimate reads only the header).
fn png_url(w: u32, h: u32) -> String {
    use base64::Engine as _;
    let mut bytes = b"\x89PNG\r\n\x1a\n\0\0\0\x0dIHDR".to_vec();
    bytes.extend(w.to_be_bytes());
    bytes.extend(h.to_be_bytes());
    bytes.extend([8, 6, 0, 0, 0, 0, 0, 0, 0, 0]);
    format!(
        "data:image/png;base64,{}",
        base64::engine::general_purpose::STANDARD.encode(bytes)
    )
}

fn images(id: &str, n: usize) -> ChatMessage {
    let mut parts = vec![ContentPart::Text {
        text: format!("Images returned by function call {id} (read):"),
    }];
    for _ in 0..n {
        parts.push(ContentPart::ImageUrl {
            image_url: ImageUrl {
                url: png_url(280, 280),
                detail: None,
            },
        });
    }
    ChatMessage::User {
        content: UserContent::Parts(parts),
        name: None,
    }
}

fn request(messages: Vec<ChatMessage>) -> ChatRequest {
    ChatRequest {
        model: "m".into(),
        messages,
        ..ChatRequest::default()
    }
}

fn window(max: u32, target: u32) -> ContextConfig {
    ContextConfig {
        policy: ContextPolicy::SlidingWindow,
        max_input_tokens: max,
        target_input_tokens: target,
        ..ContextConfig::default()
    }
}

/// Every message 10 tokens.
fn tens(chat: &ChatRequest) -> Vec<u32> {
    vec![10; chat.messages.len()]
}

fn ids_of(chat: &ChatRequest) -> Vec<String> {
    chat.messages
        .iter()
        .map(|m| match m {
            ChatMessage::System { .. } => "S".into(),
            ChatMessage::User {
                content: UserContent::Text(t),
                ..
            } => format!("U:{t}"),
            ChatMessage::User { .. } => "media".into(),
            ChatMessage::Assistant {
                tool_calls,
                content,
                ..
            } if tool_calls.is_empty() => {
                format!("A:{}", content.clone().unwrap_or_default())
            }
            ChatMessage::Assistant { tool_calls, .. } => format!(
                "C:{}",
                tool_calls
                    .iter()
                    .map(|c| c.id.as_str())
                    .collect::<Vec<_>>()
                    .join(",")
            ),
            ChatMessage::Tool { tool_call_id, .. } => format!("R:{tool_call_id}"),
            ChatMessage::Developer { .. } => "D".into(),
        })
        .collect()
}

#[test]
fn under_the_max_nothing_changes_and_identity_never_changes() {
    let mut chat = request(vec![system(), user("go"), calls(&["a"]), result("a")]);
    let before = chat.clone();
    let d = apply(&mut chat, &window(100, 50), &tens(&before), 0, "estimate").unwrap();
    assert!(!d.changed());
    assert_eq!((d.tokens_before, d.tokens_after), (40, 40));
    assert_eq!(chat, before);
    let d = apply(
        &mut chat,
        &ContextConfig::default(),
        &[1000; 4],
        0,
        "estimate",
    )
    .unwrap();
    assert!(!d.changed());
    assert_eq!(chat, before);
}

#[test]
fn whole_batches_go_oldest_first_and_prompts_and_the_latest_results_stay() {
    // Parallel calls (a1, a2) and identical calls under distinct ids (b1, b2) are whole batches.
    let mut chat = request(vec![
        system(),
        user("first"),
        calls(&["a1", "a2"]),
        result("a2"),
        result("a1"),
        calls(&["b1", "b2"]),
        result("b1"),
        result("b2"),
        user("second"),
        calls(&["c"]),
        result("c"),
        calls(&["d"]),
        result("d"),
    ]);
    let counts = tens(&chat);
    let d = apply(&mut chat, &window(100, 80), &counts, 5, "estimate").unwrap();
    assert_eq!(d.tokens_before, 135);
    assert_eq!(
        ids_of(&chat),
        ["S", "U:first", "U:second", "C:c", "R:c", "C:d", "R:d"]
    );
    assert_eq!(d.tokens_after, 75);
    let evicted: Vec<Vec<String>> = d.evicted.iter().map(|e| e.calls.clone()).collect();
    assert_eq!(evicted, [vec!["a1", "a2"], vec!["b1", "b2"]]);
    assert_eq!(d.evicted[0].tokens, 30);
    // Every remaining result still answers a call just before it.
    blocks(&chat.messages).unwrap();
}

#[test]
fn a_malformed_old_call_goes_with_its_result_and_a_broken_batch_is_refused() {
    let mut malformed = calls(&["x"]);
    if let ChatMessage::Assistant { tool_calls, .. } = &mut malformed {
        tool_calls[0].function.arguments = "{not json".into();
    }
    let mut chat = request(vec![
        user("go"),
        malformed,
        result("x"),
        calls(&["y"]),
        result("y"),
    ]);
    let counts = tens(&chat);
    apply(&mut chat, &window(40, 30), &counts, 0, "estimate").unwrap();
    assert_eq!(ids_of(&chat), ["U:go", "C:y", "R:y"]);

    for broken in [
        vec![user("go"), result("z")],
        vec![user("go"), calls(&["a"]), result("b")],
        vec![user("go"), calls(&["a", "a"]), result("a"), result("a")],
        vec![user("go"), calls(&["a", "b"]), result("a"), user("more")],
    ] {
        let mut chat = request(broken);
        let counts = tens(&chat);
        let error = apply(&mut chat, &window(1, 1), &counts, 0, "estimate").unwrap_err();
        assert!(matches!(error, ContextError::Malformed(_)), "{error}");
    }
}

#[test]
fn an_answer_between_two_prompts_stays_so_no_two_user_messages_touch() {
    let mut chat = request(vec![
        user("one"),
        answer("first answer"),
        user("two"),
        calls(&["a"]),
        result("a"),
        answer("second answer"),
        user("three"),
    ]);
    let counts = tens(&chat);
    let d = apply(&mut chat, &window(60, 40), &counts, 0, "estimate").unwrap();
    assert_eq!(
        ids_of(&chat),
        [
            "U:one",
            "A:first answer",
            "U:two",
            "A:second answer",
            "U:three"
        ]
    );
    assert_eq!(d.evicted.len(), 1);
}

#[test]
fn protected_content_over_the_max_fails_explicitly() {
    let mut chat = request(vec![
        system(),
        user("huge prompt"),
        calls(&["a"]),
        result("a"),
    ]);
    let before = chat.clone();
    let counts = [10, 500, 10, 10];
    let error = apply(&mut chat, &window(100, 80), &counts, 0, "estimate").unwrap_err();
    assert_eq!(
        error,
        ContextError::OverBudget {
            tokens: 530,
            max: 100
        }
    );
    assert_eq!(chat, before, "nothing changed");
}

#[test]
fn tool_images_are_omitted_in_whole_batches_keeping_the_minimum() {
    // Nine images over four batches; min 6 and batches of 2: 9 - 6 = 3 → one batch of 2 goes.
    let mut chat = request(vec![
        user("look"),
        calls(&["a"]),
        result("a"),
        images("a", 3),
        calls(&["b"]),
        result("b"),
        images("b", 2),
        calls(&["c"]),
        result("c"),
        images("c", 2),
        calls(&["d"]),
        result("d"),
        images("d", 2),
    ]);
    let counts: Vec<u32> = chat.messages.iter().map(estimate_message).collect();
    let total: u32 = counts.iter().sum();
    // Over the max, but within the target once images go: no block is evicted.
    let config = ContextConfig {
        min_recent_tool_images: 6,
        image_eviction_batch_size: 2,
        ..window(total - 1, total + 100)
    };
    let d = apply(&mut chat, &config, &counts, 0, "estimate").unwrap();
    assert_eq!(d.images_omitted.len(), 2, "{d:?}");
    assert!(d.evicted.is_empty(), "{d:?}");
    assert!(
        d.images_omitted.iter().all(|i| i.message == 3),
        "the oldest first"
    );
    let kept = serde_json::to_string(&chat.messages)
        .unwrap()
        .matches("data:image/png")
        .count();
    assert_eq!(d.images_omitted[0].tokens, 102, "100 patches + 2");
    assert_eq!(kept, 7, "6 to 7 kept");
    assert!(
        serde_json::to_string(&chat.messages)
            .unwrap()
            .contains(OMITTED_IMAGE)
    );
    // A standalone user image is never counted as a tool image, nor omitted.
    let mut own = request(vec![
        ChatMessage::User {
            content: UserContent::Parts(vec![ContentPart::ImageUrl {
                image_url: ImageUrl {
                    url: PNG_URL.into(),
                    detail: None,
                },
            }]),
            name: None,
        },
        calls(&["a"]),
        result("a"),
    ]);
    let counts = tens(&own);
    let d = apply(
        &mut own,
        &ContextConfig {
            min_recent_tool_images: 0,
            ..window(20, 10)
        },
        &counts,
        0,
        "estimate",
    );
    assert!(matches!(d, Err(ContextError::OverBudget { .. })));
}

#[test]
fn image_tokens_come_from_the_pixel_size() {
    assert_eq!(estimate_image(PNG_URL), 3, "one patch + 2");
    assert_eq!(estimate_image(&png_url(281, 56)), 11 * 2 + 2);
    let webp = {
        use base64::Engine as _;
        let pixels = crate::image::Pixels {
            width: 64,
            height: 30,
            has_alpha: true,
            data: vec![7; 64 * 30 * 4],
        };
        let bytes = crate::image::encode_lossless_exact(&pixels).unwrap();
        format!(
            "data:image/webp;base64,{}",
            base64::engine::general_purpose::STANDARD.encode(bytes)
        )
    };
    assert_eq!(estimate_image(&webp), 3 * 2 + 2);
    assert_eq!(estimate_image("https://example.com/x.png"), 1024);
    let _ = json!(null);
}

#[test]
fn settings_are_checked() {
    assert!(ContextConfig::default().validate().is_ok());
    assert!(window(0, 0).validate().is_err());
    assert!(window(100, 200).validate().is_err());
    assert!(window(100, 80).validate().is_ok());
}
