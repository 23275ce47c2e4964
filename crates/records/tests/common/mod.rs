//! Shared builders for the records integration tests: deterministic runs, events and exchanges.
#![allow(dead_code)]

use chrono::{DateTime, TimeZone, Utc};
use serde_json::{Value, json};
use switchyard_records::{
    DeliveredCall, EventRecord, ExchangeRecord, ExchangeStatus, RawLineRecord, RawStream,
    RunRecord, RunState, RunSummary, UpstreamAttempt, Usage, ingress,
};
use uuid::Uuid;

pub fn at(second: u32) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 11, 29, 12, 0, 0).unwrap()
        + chrono::Duration::milliseconds(i64::from(second) * 1000 + 123)
}

pub fn sample_run(id: Uuid) -> RunRecord {
    RunRecord {
        argv: vec![
            "gemini".into(),
            "-p".into(),
            "list files".into(),
            "--output-format".into(),
            "stream-json".into(),
        ],
        settings_digest: "ab12".repeat(16),
        workdir: "/tmp/work".into(),
        upstream_model: Some("gpt-test".into()),
        started_at: at(0),
        ..RunRecord::begin(id, "gemini-cli", "0.61.0")
    }
}

pub fn ended(mut run: RunRecord) -> RunRecord {
    run.ended_at = Some(at(30));
    run.outcome = Some(json!({"status": "succeeded", "exit": {"code": 0}}));
    run.summary = RunSummary {
        turns: 2,
        tool_calls: 1,
        input_tokens: 300,
        output_tokens: 40,
        cached_tokens: 100,
        reasoning_tokens: 7,
    };
    run.state = RunState::Ended;
    run
}

pub fn sample_events(run_id: Uuid) -> Vec<EventRecord> {
    let bodies = [
        json!({"type": "user_message", "text": "list the files <please>"}),
        json!({"type": "tool_call", "call_id": "c1", "model_call_id": "call_1", "tool_name": "list_directory", "category": "read", "arguments": {"dir_path": "."}, "turn": 1}),
        json!({"type": "tool_result", "call_id": "c1", "tool_name": "list_directory", "status": "success", "output": "a.txt\nb.txt"}),
        json!({"type": "assistant_message", "text": "There are 2 files: a.txt & b.txt", "turn": 2}),
    ];
    bodies
        .into_iter()
        .enumerate()
        .map(|(seq, event)| EventRecord {
            run_id,
            seq: seq as u64,
            at: at(seq as u32 + 1),
            kind: event["type"].as_str().unwrap().to_owned(),
            event,
        })
        .collect()
}

pub fn sample_raw_lines(run_id: Uuid) -> Vec<RawLineRecord> {
    vec![
        RawLineRecord {
            run_id,
            stream: RawStream::Stdout,
            seq: 0,
            line: r#"{"type":"init"}"#.into(),
        },
        RawLineRecord {
            run_id,
            stream: RawStream::Stdout,
            seq: 1,
            line: r#"{"type":"result"}"#.into(),
        },
        RawLineRecord {
            run_id,
            stream: RawStream::Stderr,
            seq: 0,
            line: "warning: something".into(),
        },
    ]
}

/// The OpenAI chat request the gateway sent upstream on turn 2 (after the tool ran).
pub fn upstream_request_turn2() -> Value {
    json!({
        "model": "gpt-test",
        "stream": true,
        "messages": [
            {"role": "system", "content": "You are a coding agent."},
            {"role": "user", "content": "list the files"},
            {"role": "assistant", "content": null, "tool_calls": [
                {"id": "call_1", "type": "function", "function": {"name": "list_directory", "arguments": "{\"dir_path\":\".\"}"}}
            ]},
            {"role": "tool", "tool_call_id": "call_1", "content": "a.txt\nb.txt"}
        ],
        "tools": [{"type": "function", "function": {"name": "list_directory", "description": "List a directory", "parameters": {"type": "object", "properties": {"dir_path": {"type": "string"}}}}}]
    })
}

/// A complete exchange `n` of a run (deterministic content derived from `n`).
pub fn sample_exchange(id: Uuid, run_id: Option<Uuid>, n: u64) -> ExchangeRecord {
    ExchangeRecord {
        id,
        run_id,
        ingress_api: ingress::STREAM_GENERATE_CONTENT.into(),
        requested_model: "gemini-2.5-pro".into(),
        upstream_url: "http://127.0.0.1:9/v1/chat/completions".into(),
        upstream_model: "gpt-test".into(),
        guest_request: json!({"contents": [{"role": "user", "parts": [{"text": format!("request number {n}")}]}]}),
        context_request: None,
        context: None,
        attempts: vec![UpstreamAttempt {
            request: upstream_request_turn2(),
            status: Some(200),
            raw_events: vec![
                r#"{"choices":[{"delta":{"content":"There are "}}]}"#.into(),
                format!(r#"{{"choices":[{{"delta":{{"content":"{n} files"}}}}]}}"#),
                "[DONE]".into(),
            ],
            error: None,
            started_at: at(2),
            first_byte_at: Some(at(3)),
            last_byte_at: Some(at(4)),
            usage: Some(Usage {
                input: 100 + n,
                cached: 10,
                output: 20,
                reasoning: 3,
                estimated: false,
            }),
        }],
        upstream_message: Some(
            json!({"role": "assistant", "content": format!("There are {n} files")}),
        ),
        guest_response: Some(
            json!({"candidates": [{"content": {"role": "model", "parts": [{"text": format!("There are {n} files")}]}}]}),
        ),
        status: ExchangeStatus::Ok,
        error: None,
        retries: 0,
        received_at: at(1),
        first_byte_at: Some(at(3)),
        last_byte_at: Some(at(4)),
        delivered_at: Some(at(5)),
        usage: Usage {
            input: 100 + n,
            cached: 10,
            output: 20,
            reasoning: 3,
            estimated: false,
        },
        billed: Usage {
            input: 100 + n,
            cached: 10,
            output: 20,
            reasoning: 3,
            estimated: false,
        },
        function_calls: vec![DeliveredCall {
            id: format!("call_{n}"),
            delivered_id: None,
            name: "list_directory".into(),
            arguments: json!({"dir_path": "."}),
        }],
        notes: vec!["merged 2 text deltas".into()],
    }
}

/// The same exchange as it is recorded when it begins.
pub fn begun(exchange: &ExchangeRecord) -> ExchangeRecord {
    let mut begun = ExchangeRecord::begin(
        exchange.run_id,
        exchange.ingress_api.clone(),
        exchange.requested_model.clone(),
        exchange.guest_request.clone(),
    );
    begun.id = exchange.id;
    begun.received_at = exchange.received_at;
    begun
}

/// A system prompt of about `kib` KiB, like Gemini CLI's (~23 KB), mentioning `extra`.
pub fn big_system_prompt(kib: usize, extra: &str) -> String {
    let mut prompt = format!("You are an interactive CLI agent. {extra}\n");
    let mut rule = 0;
    while prompt.len() < kib * 1024 {
        prompt.push_str(&format!(
            "- Rule {rule}: follow the project's conventions, read before you write, verify with tests.\n"
        ));
        rule += 1;
    }
    prompt
}

/// `count` tool declarations in GenerateContent form (about 20 KB for 40 tools).
pub fn big_guest_tools(count: usize) -> Value {
    let declarations: Vec<Value> = (0..count)
        .map(|i| json!({
            "name": format!("tool_{i}"),
            "description": format!("Tool number {i}: does a useful thing to the workspace and reports what happened in detail."),
            "parametersJsonSchema": {"type": "object", "properties": {
                "path": {"type": "string", "description": "Absolute path of the file to work on."},
                "limit": {"type": "integer", "description": "Maximum number of lines to read."}
            }, "required": ["path"]}
        }))
        .collect();
    json!([{"functionDeclarations": declarations}])
}

/// The same `count` tools in OpenAI chat form.
pub fn big_upstream_tools(count: usize) -> Value {
    Value::Array(
        (0..count)
            .map(|i| json!({"type": "function", "function": {
                "name": format!("tool_{i}"),
                "description": format!("Tool number {i}: does a useful thing to the workspace and reports what happened in detail."),
                "parameters": {"type": "object", "properties": {
                    "path": {"type": "string", "description": "Absolute path of the file to work on."},
                    "limit": {"type": "integer", "description": "Maximum number of lines to read."}
                }, "required": ["path"]}
            }}))
            .collect(),
    )
}

/// Exchange `n` carrying a Gemini-CLI-sized system prompt and tool set in its guest request, its
/// context request and its upstream request, as the gateway records them.
pub fn session_exchange(id: Uuid, run_id: Option<Uuid>, n: u64, prompt: &str) -> ExchangeRecord {
    let mut exchange = sample_exchange(id, run_id, n);
    exchange.guest_request["systemInstruction"] = json!({"parts": [{"text": prompt}]});
    exchange.guest_request["tools"] = big_guest_tools(40);
    let request = &mut exchange.attempts[0].request;
    request["messages"][0] = json!({"role": "system", "content": prompt});
    request["tools"] = big_upstream_tools(40);
    // The request the context policy left: the upstream's shape.
    exchange.context_request = Some(exchange.attempts[0].request.clone());
    exchange
}
