use serde_json::{Value, json};

use super::*;

fn call(
    id: &str,
    kind: CallKind,
    namespace: Option<&str>,
    name: &str,
    arguments: Value,
) -> ToolCall {
    ToolCall {
        id: id.into(),
        upstream_id: Some("call_0".into()),
        kind,
        namespace: namespace.map(str::to_owned),
        name: name.into(),
        arguments,
        signature: None,
    }
}

fn chunk(parts: Vec<TurnPart>) -> TurnChunk {
    TurnChunk {
        parts,
        ..TurnChunk::new("qwen", "r1")
    }
}

fn last(parts: Vec<TurnPart>, finish: Finish) -> TurnChunk {
    let mut c = chunk(parts);
    c.finish = Some(finish);
    c.usage = Some(TurnUsage {
        input: 10,
        output: 4,
        total: 14,
        cached: Some(3),
        reasoning: None,
    });
    c
}

fn data(events: &[ResponsesEvent]) -> Vec<Value> {
    events
        .iter()
        .map(|(name, json)| {
            let value: Value = serde_json::from_str(json).unwrap();
            assert_eq!(value["type"], json!(name), "the event's name is its type");
            value
        })
        .collect()
}

#[test]
fn a_streamed_turn_has_every_item_done_and_one_completed() {
    let mut renderer = ResponsesRenderer::new("resp_r1", 7);
    let mut events = renderer.events(&chunk(vec![TurnPart::reasoning("think")]));
    events.extend(renderer.events(&chunk(vec![TurnPart::text("Hel")])));
    events.extend(renderer.events(&chunk(vec![TurnPart::text("lo")])));
    events.extend(renderer.events(&last(
        vec![
            TurnPart::Call(call(
                "sy_1",
                CallKind::Function,
                Some("mcp__switchyard"),
                "record",
                json!({"nonce": "n"}),
            )),
            TurnPart::Call(call(
                "sy_2",
                CallKind::Custom,
                None,
                "apply_patch",
                json!("*** Begin Patch"),
            )),
        ],
        Finish::Stop,
    )));
    let values = data(&events);
    let kinds: Vec<&str> = values.iter().map(|v| v["type"].as_str().unwrap()).collect();
    assert_eq!(kinds[..2], ["response.created", "response.in_progress"]);
    let sequence: Vec<u64> = values
        .iter()
        .map(|v| v["sequence_number"].as_u64().unwrap())
        .collect();
    assert_eq!(sequence, (0..values.len() as u64).collect::<Vec<_>>());
    let done: Vec<&Value> = values
        .iter()
        .filter(|v| v["type"] == "response.output_item.done")
        .map(|v| &v["item"])
        .collect();
    assert_eq!(done.len(), 4);
    assert_eq!(done[0]["type"], "reasoning");
    assert!(
        done[0]["id"]
            .as_str()
            .unwrap()
            .starts_with(REASONING_ID_PREFIX)
    );
    assert_eq!(done[0]["summary"][0]["text"], "think");
    assert_eq!(done[1]["content"][0]["text"], "Hello");
    assert_eq!(
        *done[2],
        json!({"id": done[2]["id"], "type": "function_call", "status": "completed", "call_id": "sy_1",
            "name": "record", "namespace": "mcp__switchyard", "arguments": "{\"nonce\":\"n\"}"})
    );
    assert_eq!(done[3]["type"], "custom_tool_call");
    assert_eq!(done[3]["input"], "*** Begin Patch");
    assert_eq!(done[3]["call_id"], "sy_2");
    let completed = values.last().unwrap();
    assert_eq!(completed["type"], "response.completed");
    let response = &completed["response"];
    assert_eq!(response["status"], "completed");
    assert_eq!(response["output"].as_array().unwrap().len(), 4);
    assert_eq!(response["usage"]["input_tokens"], 10);
    assert_eq!(
        response["usage"]["input_tokens_details"]["cached_tokens"],
        3
    );
    assert_eq!(response["usage"]["total_tokens"], 14);
    let text: String = values
        .iter()
        .filter(|v| v["type"] == "response.output_text.delta")
        .map(|v| v["delta"].as_str().unwrap())
        .collect();
    assert_eq!(text, "Hello");
}

#[test]
fn an_answer_cut_by_the_output_limit_is_completed_as_incomplete() {
    let mut renderer = ResponsesRenderer::new("resp_r1", 7);
    let values = data(&renderer.events(&last(vec![TurnPart::text("partial")], Finish::MaxTokens)));
    let completed = values.last().unwrap();
    assert_eq!(completed["type"], "response.completed");
    assert_eq!(completed["response"]["status"], "incomplete");
    assert_eq!(
        completed["response"]["incomplete_details"]["reason"],
        "max_output_tokens"
    );
}

#[test]
fn a_whole_response_has_the_same_items_as_the_stream() {
    let turn = last(
        vec![
            TurnPart::text("Hi"),
            TurnPart::Call(call(
                "sy_1",
                CallKind::Function,
                None,
                "exec_command",
                json!({"cmd": "ls"}),
            )),
        ],
        Finish::Stop,
    );
    let mut renderer = ResponsesRenderer::new("resp_r1", 7);
    let streamed = data(&renderer.events(&turn));
    let whole: Value = serde_json::from_str(&renderer.response(&turn)).unwrap();
    assert_eq!(
        whole["output"],
        streamed.last().unwrap()["response"]["output"]
    );
    assert_eq!(whole["object"], "response");
    assert_eq!(whole["output"][1]["arguments"], "{\"cmd\":\"ls\"}");
}
