//! Every real request body Gemini CLI 0.61.0 sent in our captures must translate.
//!
//! Bodies are read from `fixtures/gemini-cli/0.61.0/<scenario>/requests.jsonl`, recorded by
//! `switchyard-dev capture` from the real CLI. Set `$SWITCHYARD_GEMINI_FIXTURES` to a directory of
//! extra `*.requests.jsonl` captures to check those too.
//! Intentionally refused: requests declaring Google built-in tools (`googleSearch`, `urlContext`),
//! which must fail with `UnsupportedTool` instead.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;

use serde_json::Value;
use switchyard_translate::openai::{ChatMessage, ResponseFormat};
use switchyard_translate::{
    TranslateError, TranslateOptions, is_json_response, parse_request, translate_request,
};

/// `(label, file)` of every request log: our captures, plus `$SWITCHYARD_GEMINI_FIXTURES`.
fn request_logs() -> Vec<(String, PathBuf)> {
    let ours = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/gemini-cli/0.61.0");
    let mut files: Vec<(String, PathBuf)> = std::fs::read_dir(&ours)
        .unwrap_or_else(|e| panic!("fixture dir {} unreadable: {e}", ours.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.join("requests.jsonl").is_file())
        .map(|p| {
            (
                p.file_name().unwrap().to_string_lossy().into_owned(),
                p.join("requests.jsonl"),
            )
        })
        .collect();
    if let Some(extra) = std::env::var_os("SWITCHYARD_GEMINI_FIXTURES") {
        for e in std::fs::read_dir(PathBuf::from(extra))
            .expect("SWITCHYARD_GEMINI_FIXTURES unreadable")
            .flatten()
        {
            let name = e.file_name().to_string_lossy().into_owned();
            if name.ends_with(".requests.jsonl") {
                files.push((name, e.path()));
            }
        }
    }
    files.sort();
    files
}

/// (capture name, request path, body) of every captured model request.
fn captured_bodies() -> Vec<(String, String, Value)> {
    let mut out = Vec::new();
    for (name, file) in request_logs() {
        for line in std::fs::read_to_string(&file).unwrap().lines() {
            if line.trim().is_empty() {
                continue;
            }
            let record: Value = serde_json::from_str(line).unwrap();
            let path = record["path"].as_str().unwrap_or_default().to_string();
            if !path.contains(":generateContent") && !path.contains(":streamGenerateContent") {
                continue;
            }
            let body = match &record["body"] {
                Value::String(s) => serde_json::from_str(s).unwrap(),
                other => other.clone(),
            };
            out.push((name.clone(), path, body));
        }
    }
    out
}

#[test]
fn every_captured_request_translates_or_is_refused_for_a_documented_reason() {
    let bodies = captured_bodies();
    assert!(
        bodies.len() >= 25,
        "expected the full capture set, got {}",
        bodies.len()
    );
    let (mut translated, mut refused) = (0, 0);
    for (file, path, body) in &bodies {
        let req = parse_request(body.to_string().as_bytes())
            .unwrap_or_else(|e| panic!("{file} {path}: parse: {e}"));
        let stream = path.contains(":streamGenerateContent");
        let result = translate_request(&req, &TranslateOptions::new("upstream-model", stream));
        let builtin = body["tools"]
            .as_array()
            .into_iter()
            .flatten()
            .find_map(|t| {
                ["googleSearch", "urlContext"]
                    .into_iter()
                    .find(|k| t.get(*k).is_some())
            });
        match (builtin, result) {
            (Some(tool), Err(TranslateError::UnsupportedTool { tool: got, .. })) => {
                assert_eq!(got, tool, "{file}");
                refused += 1;
            }
            (Some(tool), other) => panic!("{file} {path}: {tool} must be refused, got {other:?}"),
            (None, Err(e)) => panic!("{file} {path}: {e}"),
            (None, Ok(t)) => {
                translated += 1;
                check_translation(file, body, &req, &t);
            }
        }
    }
    assert!(translated >= 25, "translated only {translated}");
    assert!(refused >= 1, "the websearch capture should be refused");
}

fn check_translation(
    file: &str,
    body: &Value,
    req: &switchyard_translate::google::GenerateContentRequest,
    t: &switchyard_translate::TranslatedRequest,
) {
    let json = serde_json::to_string(&t.chat).unwrap();
    assert!(
        !json.contains("thoughtSignature") && !json.contains("skip_thought_signature_validator"),
        "{file}: signature leaked upstream"
    );
    // Every call id in the history is answered by a tool message right after its assistant message.
    let messages = &t.chat.messages;
    for (i, m) in messages.iter().enumerate() {
        if let ChatMessage::Assistant { tool_calls, .. } = m {
            for (k, call) in tool_calls.iter().enumerate() {
                match messages.get(i + 1 + k) {
                    Some(ChatMessage::Tool { tool_call_id, .. }) => {
                        assert_eq!(tool_call_id, &call.id, "{file}: tool order")
                    }
                    None => {} // conversation ends with the call
                    other => panic!(
                        "{file}: expected tool message for {}, got {other:?}",
                        call.id
                    ),
                }
            }
        }
    }
    // Declared tools survive and upper-case types never reach the upstream.
    let declared = body["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t["functionDeclarations"].as_array())
        .map(Vec::len)
        .sum::<usize>();
    assert_eq!(t.chat.tools.len(), declared, "{file}");
    for tool in &t.chat.tools {
        let schema = tool.function.parameters.to_string();
        assert!(!schema.contains("\"$schema\""), "{file}: $schema kept");
    }
    if is_json_response(req) {
        match &t.chat.response_format {
            Some(ResponseFormat::JsonSchema { json_schema }) => {
                let s = json_schema.schema.to_string();
                assert!(
                    !s.contains("\"OBJECT\"") && !s.contains("\"STRING\""),
                    "{file}: {s}"
                );
                assert_eq!(json_schema.schema["type"], "object");
            }
            other => panic!("{file}: JSON request without json_schema: {other:?}"),
        }
    }
    if body["generationConfig"].get("topK").is_some() {
        assert!(
            t.report.dropped_options.iter().any(|o| o.contains("topK")),
            "{file}: topK not recorded"
        );
    }
}

#[test]
fn tool_multi_capture_keeps_call_ids_and_order() {
    let bodies = captured_bodies();
    let (_, _, body) = bodies
        .iter()
        .rfind(|(f, _, b)| f == "tool_parallel" && b.to_string().contains("call_B"))
        .expect("tool_parallel second request");
    let req = parse_request(body.to_string().as_bytes()).unwrap();
    let t = translate_request(&req, &TranslateOptions::new("m", true)).unwrap();
    let ids: Vec<_> = t
        .chat
        .messages
        .iter()
        .filter_map(|m| match m {
            ChatMessage::Tool { tool_call_id, .. } => Some(tool_call_id.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(ids, ["call_A", "call_B"]);
    assert_eq!(t.report.stripped_skip_validator_signatures, 1);
}

#[test]
fn thought_capture_strips_real_signatures() {
    let bodies = captured_bodies();
    let (_, _, body) = bodies
        .iter()
        .rfind(|(f, _, _)| f == "thought")
        .expect("thought capture request");
    let req = parse_request(body.to_string().as_bytes()).unwrap();
    let t = translate_request(&req, &TranslateOptions::new("m", true)).unwrap();
    let sigs = body.to_string().matches("thoughtSignature").count() as u32;
    assert!(sigs > 0);
    assert_eq!(t.report.stripped_signatures, sigs);
}
