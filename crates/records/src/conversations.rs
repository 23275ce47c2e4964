//! Which SFT examples a later example of the same conversation continues: a guest resends its
//! whole history every turn, so the example of turn *n* (its request messages and its answer)
//! is a prefix of the request of turn *n + 1*. Messages are compared as a model sees them: an
//! assistant message by role, text (absent, `null` and `""` alike) and calls (id, name, and
//! arguments as JSON); any other message as it is.

use serde_json::Value;
use uuid::Uuid;

/// For each `(run, example)`, whether a later example of the same run, with the same tools,
/// starts with all of its messages.
pub(crate) fn continued_later(examples: &[(Option<Uuid>, Value)]) -> Vec<bool> {
    let normalized: Vec<Vec<Value>> = examples
        .iter()
        .map(|(_, example)| {
            example
                .get("messages")
                .and_then(Value::as_array)
                .map(|messages| messages.iter().map(normalized_message).collect())
                .unwrap_or_default()
        })
        .collect();
    (0..examples.len())
        .map(|i| {
            let (run, example) = &examples[i];
            let mine = &normalized[i];
            (i + 1..examples.len()).any(|j| {
                let (later_run, later) = &examples[j];
                later_run == run
                    && later.get("tools") == example.get("tools")
                    && normalized[j].len() > mine.len()
                    && normalized[j][..mine.len()] == mine[..]
            })
        })
        .collect()
}

/// A message as compared for continuation.
fn normalized_message(message: &Value) -> Value {
    if message.get("role").and_then(Value::as_str) != Some("assistant") {
        return message.clone();
    }
    let content = match message.get("content") {
        None | Some(Value::Null) => Value::Null,
        Some(Value::String(text)) if text.is_empty() => Value::Null,
        Some(other) => other.clone(),
    };
    let calls: Vec<Value> = message
        .get("tool_calls")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|call| {
            let arguments = call
                .pointer("/function/arguments")
                .and_then(Value::as_str)
                .and_then(|text| serde_json::from_str::<Value>(text).ok())
                .unwrap_or(Value::Null);
            serde_json::json!({
                "id": call.get("id"),
                "name": call.pointer("/function/name"),
                "arguments": arguments,
            })
        })
        .collect();
    serde_json::json!({"role": "assistant", "content": content, "tool_calls": calls})
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn example(messages: Value) -> Value {
        json!({"messages": messages, "tools": [{"type": "function", "function": {"name": "ls"}}]})
    }

    #[test]
    fn a_turn_continued_by_the_next_request_of_its_run_is_folded() {
        let run = Some(Uuid::from_u128(1));
        let user = json!({"role": "user", "content": "list"});
        // Turn 1 answers with a call (content null); turn 2's request carries that call back
        // with content "" and its arguments spaced differently, then the result.
        let call = |content: Value, args: &str| {
            json!({"role": "assistant", "content": content, "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "ls", "arguments": args}}]})
        };
        let turn1 = example(json!([user, call(Value::Null, "{\"dir\":\".\"}")]));
        let result = json!({"role": "tool", "tool_call_id": "c1", "content": "a.txt"});
        let answer = json!({"role": "assistant", "content": "a.txt"});
        let turn2 = example(json!([
            user,
            call(json!(""), "{ \"dir\": \".\" }"),
            result,
            answer
        ]));
        // An auxiliary call of the same run (another history) is its own conversation.
        let aux = example(
            json!([{"role": "user", "content": "classify"}, {"role": "assistant", "content": "x"}]),
        );
        let examples = vec![(run, turn1.clone()), (run, aux), (run, turn2)];
        assert_eq!(continued_later(&examples), [true, false, false]);
        // Another run, or other tools, do not continue it.
        let mut other_tools = examples[2].1.clone();
        other_tools["tools"] = json!([]);
        let apart = vec![
            (run, turn1.clone()),
            (Some(Uuid::from_u128(2)), examples[2].1.clone()),
            (run, other_tools),
        ];
        assert_eq!(continued_later(&apart), [false, false, false]);
        // A different answer is not the same history.
        let mut diverged = examples[2].1.clone();
        diverged["messages"][1]["tool_calls"][0]["function"]["arguments"] =
            json!("{\"dir\":\"/\"}");
        assert_eq!(
            continued_later(&[(run, turn1), (run, diverged)]),
            [false, false]
        );
    }
}
