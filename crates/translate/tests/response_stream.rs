//! Response translation: text forwarding, tool-call assembly (proptest over arbitrary splits and
//! interleavings), malformed calls, finish reasons, usage, JSON answers, retries.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use proptest::prelude::*;
use serde_json::{Value, json};
use switchyard_translate::google::{
    FinishReason, FunctionCall, GenerateContentResponse, Part, UsageMetadata,
};
use switchyard_translate::google_answer::to_google;
use switchyard_translate::turn::TurnChunk;
use switchyard_translate::{
    MalformedReason, ResponseConfig, ResponseReport, StreamTranslator, TurnOutcome, UpstreamError,
    translate_completion,
};

/// A turn chunk read as the GenerateContent chunk its guest receives.
trait AsGoogle {
    fn to_json_line(&self) -> String;
    fn finish_reason(&self) -> Option<FinishReason>;
    fn parts(&self) -> Vec<Part>;
    fn usage_metadata(&self) -> Option<UsageMetadata>;
}

impl AsGoogle for TurnChunk {
    fn to_json_line(&self) -> String {
        to_google(self).to_json_line()
    }
    fn finish_reason(&self) -> Option<FinishReason> {
        to_google(self).finish_reason()
    }
    fn parts(&self) -> Vec<Part> {
        to_google(self).parts().to_vec()
    }
    fn usage_metadata(&self) -> Option<UsageMetadata> {
        to_google(self).usage_metadata
    }
}

fn cfg() -> ResponseConfig {
    ResponseConfig {
        model_version: "qwen3-coder".into(),
        response_id: "resp-1".into(),
        synthetic_id_prefix: "call_x".into(),
        forward_reasoning: true,
        ..ResponseConfig::default()
    }
}

fn text_chunk(text: &str) -> String {
    json!({"id": "u1", "model": "m", "choices": [{"index": 0, "delta": {"content": text}}]})
        .to_string()
}

fn tool_chunk(index: u32, id: Option<&str>, name: Option<&str>, args: &str) -> String {
    let mut call = json!({"index": index, "function": {"arguments": args}});
    if let Some(id) = id {
        call["id"] = json!(id);
        call["type"] = json!("function");
    }
    if let Some(name) = name {
        call["function"]["name"] = json!(name);
    }
    json!({"choices": [{"index": 0, "delta": {"tool_calls": [call]}}]}).to_string()
}

fn finish_chunk(reason: &str) -> String {
    json!({"choices": [{"index": 0, "delta": {}, "finish_reason": reason}]}).to_string()
}

fn usage_chunk() -> String {
    json!({"choices": [], "usage": {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120,
        "prompt_tokens_details": {"cached_tokens": 64}, "completion_tokens_details": {"reasoning_tokens": 5}}})
    .to_string()
}

/// Feeds payloads; returns forwarded chunks (as the Google guest gets them) and the outcome.
fn run(cfg: ResponseConfig, payloads: &[String]) -> (Vec<GenerateContentResponse>, TurnOutcome) {
    let mut tr = StreamTranslator::new(cfg);
    let mut chunks = Vec::new();
    for p in payloads {
        chunks.extend(tr.push(p).unwrap().iter().map(to_google));
    }
    (chunks, tr.finish())
}

/// A complete turn, its calls as the Google guest gets them.
struct Done {
    final_chunk: TurnChunk,
    delivered_calls: Vec<FunctionCall>,
    delivered_call_ids: Vec<String>,
    forwarded_text: String,
    report: ResponseReport,
}

fn complete(outcome: TurnOutcome) -> Done {
    match outcome {
        TurnOutcome::Complete(c) => Done {
            delivered_calls: to_google(&c.final_chunk)
                .parts()
                .iter()
                .filter_map(|p| p.function_call.clone())
                .collect(),
            final_chunk: c.final_chunk,
            delivered_call_ids: c.delivered_call_ids,
            forwarded_text: c.forwarded_text,
            report: c.report,
        },
        TurnOutcome::Malformed(m) => panic!("malformed: {:?}", m.reason),
    }
}

#[test]
fn text_deltas_are_forwarded_one_chunk_each_and_turn_ends_with_finish_and_usage() {
    let (chunks, outcome) = run(
        cfg(),
        &[
            text_chunk("Hel"),
            text_chunk("lo"),
            finish_chunk("stop"),
            usage_chunk(),
            "[DONE]".into(),
        ],
    );
    assert_eq!(chunks.len(), 2);
    assert_eq!(
        chunks[0].to_json_line(),
        r#"{"candidates":[{"content":{"role":"model","parts":[{"text":"Hel"}]},"index":0}],"modelVersion":"qwen3-coder","responseId":"resp-1"}"#
    );
    let done = complete(outcome);
    let last: Value = serde_json::from_str(&done.final_chunk.to_json_line()).unwrap();
    assert_eq!(
        last,
        json!({"candidates": [{"content": {"role": "model", "parts": []}, "finishReason": "STOP", "index": 0}],
            "usageMetadata": {"promptTokenCount": 100, "candidatesTokenCount": 20, "totalTokenCount": 120,
                "cachedContentTokenCount": 64, "thoughtsTokenCount": 5},
            "modelVersion": "qwen3-coder", "responseId": "resp-1"})
    );
    assert_eq!(done.forwarded_text, "Hello");
    assert!(!done.report.synthesized_finish_reason);
    assert!(!done.report.usage_estimated);
}

#[test]
fn finish_reasons_map() {
    for (upstream, expected) in [
        ("stop", FinishReason::Stop),
        ("tool_calls", FinishReason::Stop),
        ("length", FinishReason::MaxTokens),
        ("content_filter", FinishReason::Safety),
        ("abort", FinishReason::Other),
    ] {
        let (_, outcome) = run(
            cfg(),
            &[text_chunk("x"), finish_chunk(upstream), "[DONE]".into()],
        );
        assert_eq!(
            outcome.final_chunk().finish_reason(),
            Some(expected),
            "{upstream}"
        );
    }
    // Missing finish reason: STOP synthesized and noted; usage estimated when absent.
    let mut c = cfg();
    c.prompt_token_estimate = Some(40);
    let (_, outcome) = run(c, &[text_chunk("12345678"), "[DONE]".into()]);
    let done = complete(outcome);
    assert_eq!(done.final_chunk.finish_reason(), Some(FinishReason::Stop));
    assert!(done.report.synthesized_finish_reason);
    assert!(done.report.usage_estimated);
    let usage = done.final_chunk.usage_metadata().unwrap();
    assert_eq!(
        (
            usage.prompt_token_count,
            usage.candidates_token_count,
            usage.total_token_count
        ),
        (40, 2, 42)
    );
}

#[test]
fn parallel_and_identical_calls_stay_distinct_and_ordered() {
    let (chunks, outcome) = run(
        cfg(),
        &[
            tool_chunk(0, Some("call_a"), Some("read_file"), ""),
            tool_chunk(1, Some("call_b"), Some("read_file"), ""),
            tool_chunk(1, None, None, "{\"path\":"),
            tool_chunk(0, None, None, "{\"path\":"),
            tool_chunk(0, None, None, "\"x\"}"),
            tool_chunk(1, None, None, "\"x\"}"),
            finish_chunk("tool_calls"),
            "[DONE]".into(),
        ],
    );
    assert!(
        chunks.is_empty(),
        "calls are delivered only on the final chunk"
    );
    let done = complete(outcome);
    assert_eq!(done.delivered_call_ids, ["call_a", "call_b"]);
    let parts = done.final_chunk.parts();
    assert_eq!(parts.len(), 2);
    for (part, id) in parts.iter().zip(["call_a", "call_b"]) {
        let call = part.function_call.as_ref().unwrap();
        assert_eq!(call.id.as_deref(), Some(id));
        assert_eq!(call.name, "read_file");
        assert_eq!(call.args, Some(json!({"path": "x"})));
    }
    assert_eq!(done.final_chunk.finish_reason(), Some(FinishReason::Stop));
}

#[test]
fn calls_without_upstream_id_get_prefix_index_ids_and_empty_args_become_empty_object() {
    let (_, outcome) = run(
        cfg(),
        &[
            tool_chunk(0, None, Some("list"), ""),
            tool_chunk(1, None, Some("list"), ""),
            finish_chunk("tool_calls"),
            "[DONE]".into(),
        ],
    );
    let done = complete(outcome);
    assert_eq!(done.delivered_call_ids, ["call_x_0", "call_x_1"]);
    assert_eq!(done.report.synthesized_call_ids, ["call_x_0", "call_x_1"]);
    assert_eq!(done.report.empty_arguments_as_empty_object, 2);
    assert_eq!(done.delivered_calls[0].args, Some(json!({})));
}

#[test]
fn malformed_or_truncated_calls_are_never_delivered() {
    type ReasonCheck = fn(&MalformedReason) -> bool;
    let cases: Vec<(Vec<String>, ReasonCheck)> = vec![
        (
            vec![
                tool_chunk(0, Some("a"), Some("f"), "{\"x\":"),
                finish_chunk("tool_calls"),
                "[DONE]".into(),
            ],
            |r| matches!(r, MalformedReason::InvalidArguments { .. }),
        ),
        (
            vec![
                tool_chunk(0, Some("a"), Some("f"), "[1,2]"),
                finish_chunk("tool_calls"),
                "[DONE]".into(),
            ],
            |r| matches!(r, MalformedReason::NotAnObject { .. }),
        ),
        (
            vec![
                tool_chunk(0, Some("a"), None, "{}"),
                finish_chunk("tool_calls"),
                "[DONE]".into(),
            ],
            |r| matches!(r, MalformedReason::MissingName { .. }),
        ),
        (
            vec![
                tool_chunk(0, Some("a"), Some("f"), "{\"x\":1}"),
                finish_chunk("length"),
                "[DONE]".into(),
            ],
            |r| matches!(r, MalformedReason::TruncatedByLength { .. }),
        ),
        // Stream closed with neither finish_reason nor [DONE], even though the JSON parses.
        (
            vec![tool_chunk(0, Some("a"), Some("f"), "{\"x\":1}")],
            |r| matches!(r, MalformedReason::StreamEndedMidCall { .. }),
        ),
        (
            vec![
                tool_chunk(0, Some("a"), Some("f"), "{}"),
                tool_chunk(1, Some("a"), Some("f"), "{}"),
                finish_chunk("tool_calls"),
                "[DONE]".into(),
            ],
            |r| matches!(r, MalformedReason::DuplicateId { .. }),
        ),
    ];
    for (payloads, check) in cases {
        let (_, outcome) = run(cfg(), &payloads);
        match outcome {
            TurnOutcome::Malformed(m) => {
                assert!(check(&m.reason), "{:?}", m.reason);
                assert_eq!(
                    m.final_chunk.finish_reason(),
                    Some(FinishReason::MalformedFunctionCall)
                );
                assert!(
                    m.final_chunk
                        .parts()
                        .iter()
                        .all(|p| p.function_call.is_none())
                );
                assert!(m.final_chunk.usage_metadata().is_some());
            }
            TurnOutcome::Complete(c) => panic!("delivered {:?}", c.delivered_calls),
        }
    }
}

#[test]
fn retry_suppresses_text_the_guest_already_has() {
    // First attempt: text then a broken call.
    let (chunks, outcome) = run(
        cfg(),
        &[
            text_chunk("Let me "),
            text_chunk("check."),
            tool_chunk(0, Some("a"), Some("f"), "{"),
            finish_chunk("tool_calls"),
            "[DONE]".into(),
        ],
    );
    assert_eq!(chunks.len(), 2);
    let TurnOutcome::Malformed(m) = outcome else {
        panic!()
    };
    assert_eq!(m.forwarded_text, "Let me check.");

    // Retry repeats the text (split differently) and adds more: only the excess is forwarded.
    let mut retry = cfg();
    retry.already_forwarded_text = Some(m.forwarded_text.clone());
    let (chunks, outcome) = run(
        retry.clone(),
        &[
            text_chunk("Let"),
            text_chunk(" me check. Now"),
            text_chunk("!"),
            tool_chunk(0, Some("b"), Some("f"), "{}"),
            finish_chunk("tool_calls"),
            "[DONE]".into(),
        ],
    );
    let texts: Vec<_> = chunks
        .iter()
        .map(|c| c.parts()[0].text.clone().unwrap())
        .collect();
    assert_eq!(texts, [" Now", "!"]);
    let done = complete(outcome);
    assert_eq!(done.forwarded_text, "Let me check. Now!");
    assert_eq!(done.delivered_call_ids, ["b"]);

    // A diverging retry forwards no further text but still delivers its calls.
    let (chunks, outcome) = run(
        retry,
        &[
            text_chunk("Something else entirely"),
            tool_chunk(0, Some("c"), Some("f"), "{}"),
            finish_chunk("tool_calls"),
            "[DONE]".into(),
        ],
    );
    assert!(chunks.is_empty());
    let done = complete(outcome);
    assert!(done.report.retry_text_diverged);
    assert_eq!(done.forwarded_text, "Let me check.");
    assert_eq!(done.delivered_call_ids, ["c"]);
}

#[test]
fn reasoning_becomes_thought_parts_and_upstream_errors_are_typed() {
    let mut tr = StreamTranslator::new(cfg());
    let chunks = tr
        .push(
            &json!({"choices": [{"index": 0, "delta": {"reasoning_content": "hmm"}}]}).to_string(),
        )
        .unwrap();
    assert_eq!(chunks[0].parts()[0].thought, Some(true));
    let err = tr
        .push(r#"{"error":{"message":"overloaded","code":503}}"#)
        .unwrap_err();
    assert!(matches!(
        err,
        UpstreamError::Reported {
            code: Some(503),
            ..
        }
    ));
    assert_eq!(err.to_google_error().error.status, "UNAVAILABLE");
    assert!(matches!(
        tr.push("not json").unwrap_err(),
        UpstreamError::InvalidJson { .. }
    ));
}

#[test]
fn unknown_upstream_fields_are_counted() {
    let (_, outcome) = run(cfg(), &[
        json!({"choices": [{"index": 0, "delta": {"content": "x", "audio": {}}, "stop_reason": 1}], "service_tier": "t"}).to_string(),
        "[DONE]".into(),
    ]);
    let fields = &outcome.report().unknown_upstream_fields;
    assert_eq!(fields.get("service_tier"), Some(&1));
    assert_eq!(fields.get("choices[].stop_reason"), Some(&1));
    assert_eq!(fields.get("choices[].delta.audio"), Some(&1));
}

#[test]
fn standard_completion_envelope_fields_are_not_counted_as_unknown() {
    let body = json!({
        "id": "chatcmpl-1", "object": "chat.completion", "created": 1_700_000_000,
        "model": "m", "system_fingerprint": "fp",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "hi"},
                     "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
        "x_vendor": true
    });
    let outcome = translate_completion(body.to_string().as_bytes(), cfg()).unwrap();
    let fields = &outcome.report().unknown_upstream_fields;
    assert_eq!(fields.keys().collect::<Vec<_>>(), ["x_vendor"]);
}

#[test]
fn json_answers_are_buffered_and_unfenced() {
    let mut c = cfg();
    c.json_response = true;
    let (chunks, outcome) = run(
        c.clone(),
        &[
            text_chunk("```json\n{\"next_speaker\":"),
            text_chunk(" \"user\"}\n```"),
            finish_chunk("stop"),
            "[DONE]".into(),
        ],
    );
    assert!(chunks.is_empty());
    let done = complete(outcome);
    assert_eq!(
        done.final_chunk.parts()[0].text.as_deref(),
        Some("{\"next_speaker\": \"user\"}")
    );
    assert!(done.report.fences_stripped);

    let body = json!({"id": "x", "model": "m", "choices": [{"index": 0, "message": {"role": "assistant", "content": "```json\n{\"a\":1}\n```"}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 7}});
    let done = complete(translate_completion(body.to_string().as_bytes(), c).unwrap());
    assert_eq!(
        done.final_chunk.parts()[0].text.as_deref(),
        Some("{\"a\":1}")
    );
    assert_eq!(
        done.final_chunk.usage_metadata().unwrap().total_token_count,
        7
    );
}

#[test]
fn non_streamed_completion_with_tool_calls() {
    let body = json!({"choices": [{"index": 0, "message": {"role": "assistant", "content": "ok", "tool_calls": [
        {"id": "t1", "type": "function", "function": {"name": "f", "arguments": "{\"a\":1}"}},
        {"id": "t2", "type": "function", "function": {"name": "f", "arguments": "{\"a\":1}"}}
    ]}, "finish_reason": "tool_calls"}]});
    let done = complete(translate_completion(body.to_string().as_bytes(), cfg()).unwrap());
    assert_eq!(done.final_chunk.parts()[0].text.as_deref(), Some("ok"));
    assert_eq!(done.delivered_call_ids, ["t1", "t2"]);
    let err =
        translate_completion(br#"{"error":{"message":"bad","code":400}}"#, cfg()).unwrap_err();
    assert!(matches!(
        err,
        UpstreamError::Reported {
            code: Some(400),
            ..
        }
    ));
}

/// Splits `s` at arbitrary char boundaries chosen by `cuts`.
fn split(s: &str, cuts: &[usize]) -> Vec<String> {
    let chars: Vec<char> = s.chars().collect();
    let mut points: Vec<usize> = cuts.iter().map(|c| c % (chars.len() + 1)).collect();
    points.push(0);
    points.push(chars.len());
    points.sort_unstable();
    points.dedup();
    points
        .windows(2)
        .map(|w| chars[w[0]..w[1]].iter().collect())
        .collect()
}

fn args_strategy() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        any::<i64>().prop_map(Value::from),
        "[a-zé\"\\\\{}, ]{0,12}".prop_map(Value::from),
        any::<bool>().prop_map(Value::from),
        Just(Value::Null),
    ];
    let value = leaf.prop_recursive(3, 16, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::from),
            prop::collection::btree_map("[a-z]{1,5}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    });
    prop::collection::btree_map("[a-z_]{1,8}", value, 0..5)
        .prop_map(|m| Value::Object(m.into_iter().collect()))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// Any split of two parallel calls' argument text, interleaved in any order, reassembles to
    /// the same two calls in index order.
    #[test]
    fn any_split_and_interleaving_reassembles(
        args_a in args_strategy(),
        args_b in args_strategy(),
        cuts_a in prop::collection::vec(any::<usize>(), 0..8),
        cuts_b in prop::collection::vec(any::<usize>(), 0..8),
        order in prop::collection::vec(any::<bool>(), 0..20),
        same_call in any::<bool>(),
    ) {
        let args_b = if same_call { args_a.clone() } else { args_b };
        let text_a = args_a.to_string();
        let text_b = args_b.to_string();
        let mut pieces_a = split(&text_a, &cuts_a).into_iter();
        let mut pieces_b = split(&text_b, &cuts_b).into_iter();
        let mut payloads = vec![
            tool_chunk(0, Some("id_a"), Some("tool"), ""),
            tool_chunk(1, Some("id_b"), Some("tool"), ""),
        ];
        let mut order = order.into_iter();
        loop {
            let take_a = order.next().unwrap_or(true);
            let next = if take_a {
                pieces_a.next().map(|p| (0, p)).or_else(|| pieces_b.next().map(|p| (1, p)))
            } else {
                pieces_b.next().map(|p| (1, p)).or_else(|| pieces_a.next().map(|p| (0, p)))
            };
            match next {
                Some((index, piece)) => payloads.push(tool_chunk(index, None, None, &piece)),
                None => break,
            }
        }
        payloads.push(finish_chunk("tool_calls"));
        payloads.push("[DONE]".into());
        let (_, outcome) = run(cfg(), &payloads);
        let done = complete(outcome);
        let expected = vec![
            FunctionCall { id: Some("id_a".into()), name: "tool".into(), args: Some(args_a), ..FunctionCall::default() },
            FunctionCall { id: Some("id_b".into()), name: "tool".into(), args: Some(args_b), ..FunctionCall::default() },
        ];
        prop_assert_eq!(done.delivered_calls, expected);
    }

    /// Any split of text deltas forwards exactly the text, in order.
    #[test]
    fn any_split_of_text_forwards_it_exactly(text in "\\PC{0,40}", cuts in prop::collection::vec(any::<usize>(), 0..6)) {
        let mut payloads: Vec<String> = split(&text, &cuts).iter().map(|p| text_chunk(p)).collect();
        payloads.push(finish_chunk("stop"));
        let (chunks, outcome) = run(cfg(), &payloads);
        let joined: String = chunks.iter().map(|c| c.parts()[0].text.clone().unwrap()).collect();
        prop_assert_eq!(&joined, &text);
        prop_assert_eq!(complete(outcome).forwarded_text, text);
    }
}

fn reasoning_chunk(text: &str) -> String {
    json!({"choices": [{"index": 0, "delta": {"reasoning_content": text}}]}).to_string()
}

#[test]
fn carried_reasoning_rides_in_the_first_calls_signature_only() {
    let payloads = [
        reasoning_chunk("I should read "),
        reasoning_chunk("both files."),
        tool_chunk(0, Some("c1"), Some("read_file"), r#"{"path":"a"}"#),
        tool_chunk(1, Some("c2"), Some("read_file"), r#"{"path":"b"}"#),
        finish_chunk("tool_calls"),
        "[DONE]".into(),
    ];
    let carrying = ResponseConfig {
        carry_reasoning: true,
        forward_reasoning: false,
        ..cfg()
    };
    let turn = complete(run(carrying, &payloads).1);
    let parts = &to_google(&turn.final_chunk).candidates[0].content.parts;
    let signatures: Vec<Option<&str>> = parts
        .iter()
        .map(|p| p.thought_signature.as_deref())
        .collect();
    assert_eq!(parts.len(), 2);
    let carried = signatures[0].expect("the first call carries the reasoning");
    assert_eq!(
        switchyard_translate::reasoning::reasoning_from_signature(carried).as_deref(),
        Some("I should read both files.")
    );
    assert_eq!(signatures[1], None);
    assert_eq!(turn.report.carried_reasoning_chars, 25);

    // Off: no signature at all.
    let turn = complete(run(cfg(), &payloads).1);
    let parts = &to_google(&turn.final_chunk).candidates[0].content.parts;
    assert!(parts.iter().all(|p| p.thought_signature.is_none()));

    // A turn without calls carries nothing (no part to carry it, and no call to answer).
    let text_only = [
        reasoning_chunk("hm"),
        text_chunk("Hi"),
        finish_chunk("stop"),
    ];
    let carrying = ResponseConfig {
        carry_reasoning: true,
        ..cfg()
    };
    let turn = complete(run(carrying, &text_only).1);
    assert_eq!(turn.report.carried_reasoning_chars, 0);
}

#[test]
fn a_non_streamed_completion_carries_its_reasoning_too() {
    let body = json!({
        "id": "u1", "model": "m",
        "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
            "role": "assistant", "content": null, "reasoning_content": "Look first.",
            "tool_calls": [{"id": "c1", "type": "function",
                "function": {"name": "ls", "arguments": "{}"}}]}}]
    });
    let carrying = ResponseConfig {
        carry_reasoning: true,
        ..cfg()
    };
    let outcome = translate_completion(body.to_string().as_bytes(), carrying).unwrap();
    let turn = complete(outcome);
    let google = to_google(&turn.final_chunk);
    let call_part = google.candidates[0]
        .content
        .parts
        .iter()
        .find(|p| p.function_call.is_some())
        .unwrap();
    assert_eq!(
        switchyard_translate::reasoning::reasoning_from_signature(
            call_part.thought_signature.as_deref().unwrap()
        )
        .as_deref(),
        Some("Look first.")
    );
}

#[test]
fn an_id_and_name_repeated_in_every_fragment_are_taken_once_and_a_change_is_malformed() {
    // llama.cpp's server repeats both in each fragment of the arguments.
    let payloads = [
        tool_chunk(0, Some("call_1"), Some("read_file"), "{\"file_"),
        tool_chunk(0, Some("call_1"), Some("read_file"), "path\":\"a\"}"),
        finish_chunk("tool_calls"),
        "[DONE]".into(),
    ];
    let done = complete(run(cfg(), &payloads).1);
    assert_eq!(done.delivered_calls.len(), 1);
    assert_eq!(done.delivered_calls[0].name, "read_file");
    assert_eq!(done.delivered_calls[0].id.as_deref(), Some("call_1"));
    assert_eq!(
        done.delivered_calls[0].args,
        Some(json!({"file_path": "a"}))
    );
    // The same id under another name is a conflict (a new id would be the next call: see
    // `complete_calls_sent_one_by_one_at_index_zero_are_each_a_call`).
    let payloads = [
        tool_chunk(0, Some("call_1"), Some("read_file"), "{}"),
        tool_chunk(0, Some("call_1"), Some("write_file"), ""),
        finish_chunk("tool_calls"),
    ];
    match run(cfg(), &payloads).1 {
        TurnOutcome::Malformed(turn) => assert_eq!(
            turn.reason,
            MalformedReason::ConflictingFragments {
                index: 0,
                field: "name"
            }
        ),
        TurnOutcome::Complete(turn) => panic!("delivered {:?}", turn.delivered_calls),
    }
}

#[test]
fn a_stream_without_chunks_or_without_its_end_is_unfinished() {
    let mut empty = StreamTranslator::new(cfg());
    assert!(empty.unfinished().is_some());
    empty.push("[DONE]").unwrap();
    assert!(
        empty.unfinished().is_some(),
        "[DONE] alone carries no answer"
    );
    let mut cut = StreamTranslator::new(cfg());
    cut.push(&text_chunk("half an answ")).unwrap();
    assert!(cut.unfinished().is_some());
    for end in [finish_chunk("stop"), "[DONE]".to_string()] {
        let mut whole = StreamTranslator::new(cfg());
        whole.push(&text_chunk("an answer")).unwrap();
        whole.push(&end).unwrap();
        assert_eq!(whole.unfinished(), None);
    }
}

#[test]
fn complete_calls_sent_one_by_one_at_index_zero_are_each_a_call() {
    // Servers that send each parallel call whole, in its own chunk, all at `index: 0`.
    let payloads = [
        tool_chunk(0, Some("call_a"), Some("read_file"), r#"{"file_path":"a"}"#),
        tool_chunk(0, Some("call_b"), Some("read_file"), r#"{"file_path":"b"}"#),
        tool_chunk(0, Some("call_c"), Some("list"), ""),
        finish_chunk("tool_calls"),
        "[DONE]".into(),
    ];
    let done = complete(run(cfg(), &payloads).1);
    let calls: Vec<(Option<&str>, &str, Option<&Value>)> = done
        .delivered_calls
        .iter()
        .map(|c| (c.id.as_deref(), c.name.as_str(), c.args.as_ref()))
        .collect();
    assert_eq!(
        calls,
        [
            (
                Some("call_a"),
                "read_file",
                Some(&json!({"file_path": "a"}))
            ),
            (
                Some("call_b"),
                "read_file",
                Some(&json!({"file_path": "b"}))
            ),
            (Some("call_c"), "list", Some(&json!({}))),
        ]
    );
    // A new id before the call's arguments are whole is still a conflict, not a new call.
    let payloads = [
        tool_chunk(0, Some("call_a"), Some("read_file"), r#"{"file_"#),
        tool_chunk(0, Some("call_b"), None, r#"path":"a"}"#),
        finish_chunk("tool_calls"),
    ];
    assert!(matches!(
        run(cfg(), &payloads).1,
        TurnOutcome::Malformed(m) if m.reason == MalformedReason::ConflictingFragments { index: 0, field: "id" }
    ));
}

#[test]
fn minted_ids_are_the_gateways_and_keep_the_upstreams_beside_them() {
    let mut c = cfg();
    c.mint_call_ids = true;
    // A local server that restarts its ids every turn, and one call without an id.
    let payloads = [
        tool_chunk(0, Some("call_0"), Some("read_file"), r#"{"file_path":"a"}"#),
        tool_chunk(1, None, Some("read_file"), r#"{"file_path":"b"}"#),
        tool_chunk(2, Some("call_0"), Some("read_file"), r#"{"file_path":"c"}"#),
        finish_chunk("tool_calls"),
        "[DONE]".into(),
    ];
    let TurnOutcome::Complete(done) = run(c, &payloads).1 else {
        panic!("a turn with a repeated upstream id is still delivered");
    };
    let ids: Vec<(&str, Option<&str>)> = done
        .delivered_calls
        .iter()
        .map(|c| (c.id.as_str(), c.upstream_id.as_deref()))
        .collect();
    assert_eq!(
        ids,
        [
            ("call_x_0", Some("call_0")),
            ("call_x_1", None),
            ("call_x_2", Some("call_0"))
        ]
    );
    assert_eq!(
        done.delivered_call_ids,
        ["call_x_0", "call_x_1", "call_x_2"]
    );
    assert_eq!(done.report.synthesized_call_ids, ["call_x_1"]);
}

/// Calls of functions that stand for a Responses guest's custom and namespaced tools come back
/// in that shape; a custom call that is not `{"input": text}` is malformed, never delivered.
#[test]
fn shaped_calls_come_back_as_custom_and_namespaced_calls() {
    use switchyard_translate::turn::{CallKind, CallShape, CallShapes};
    let mut shapes = CallShapes::default();
    shapes.insert(
        "apply_patch".into(),
        CallShape {
            kind: CallKind::Custom,
            namespace: None,
            name: "apply_patch".into(),
        },
    );
    shapes.insert(
        "mcp__switchyard__record".into(),
        CallShape {
            kind: CallKind::Function,
            namespace: Some("mcp__switchyard".into()),
            name: "record".into(),
        },
    );
    let shaped = ResponseConfig {
        call_shapes: shapes,
        ..cfg()
    };
    let (_, outcome) = run(
        shaped.clone(),
        &[
            tool_chunk(
                0,
                Some("a"),
                Some("apply_patch"),
                "{\"input\":\"*** Begin Patch\"}",
            ),
            tool_chunk(
                1,
                Some("b"),
                Some("mcp__switchyard__record"),
                "{\"nonce\":\"n\"}",
            ),
            tool_chunk(2, Some("c"), Some("exec_command"), "{\"cmd\":\"ls\"}"),
            finish_chunk("tool_calls"),
            "[DONE]".into(),
        ],
    );
    let TurnOutcome::Complete(turn) = outcome else {
        panic!("{outcome:?}");
    };
    let calls: Vec<_> = turn.final_chunk.calls().cloned().collect();
    assert_eq!(calls[0].kind, CallKind::Custom);
    assert_eq!(calls[0].arguments, json!("*** Begin Patch"));
    assert_eq!(calls[1].kind, CallKind::Function);
    assert_eq!(calls[1].namespace.as_deref(), Some("mcp__switchyard"));
    assert_eq!(calls[1].name, "record");
    assert_eq!(calls[1].qualified_name(), "mcp__switchyard__record");
    assert_eq!(
        (calls[2].namespace.as_deref(), calls[2].name.as_str()),
        (None, "exec_command")
    );
    for args in [
        "{\"patch\":\"x\"}",
        "{\"input\":1}",
        "{\"input\":\"x\",\"more\":1}",
    ] {
        let (_, outcome) = run(
            shaped.clone(),
            &[
                tool_chunk(0, Some("a"), Some("apply_patch"), args),
                finish_chunk("tool_calls"),
                "[DONE]".into(),
            ],
        );
        assert!(
            matches!(&outcome, TurnOutcome::Malformed(m) if matches!(m.reason, MalformedReason::CustomInput { .. })),
            "{args}: {outcome:?}"
        );
    }
}
