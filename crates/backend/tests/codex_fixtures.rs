//! Replays the captured Codex 0.171.0 runs (`fixtures/codex/0.171.0/`, recorded by
//! `switchyard-dev capture --agent codex` from the real `codex app-server` through the gateway's
//! Responses ingress) through the note mapping, and asserts the exact canonical sequence and
//! typed outcome of every scenario.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;

use serde_json::Value;
use switchyard_backend::codex::run::{Note, replay};
use switchyard_events::event::PermissionOutcome;
use switchyard_events::{Event, GuestExit, OutcomeStatus};

mod fixture_support;
use fixture_support::{Replayed, json, lines, parsed};

fn fixtures_dir() -> PathBuf {
    fixture_support::fixtures("codex/0.171.0")
}

fn replay_scenario(name: &str) -> Replayed {
    let dir = fixtures_dir().join(name);
    let manifest = json(&dir.join("manifest.json"));
    assert_eq!(manifest["cli"]["version"], "0.171.0");
    assert_eq!(manifest["scenario"], name);
    let notes: Vec<Note> = parsed(&dir.join("notes.jsonl"));
    let exit: GuestExit = serde_json::from_value(json(&dir.join("exit.json"))).unwrap();
    let hint = lines(&dir.join("stderr.txt"))
        .into_iter()
        .rev()
        .find(|l| !l.trim().is_empty());
    let prompts = manifest["prompts"].as_array().unwrap().len();
    // Every prompt went to the server as one `turn/start`.
    let stdin: Vec<Value> = parsed(&dir.join("stdin.jsonl"));
    let turns = stdin.iter().filter(|l| l["method"] == "turn/start").count();
    assert_eq!(turns, prompts, "{name}");
    let (events, outcome) = replay(
        notes,
        u32::try_from(prompts).unwrap(),
        exit,
        hint.as_deref(),
    );
    Replayed { events, outcome }.checked(&dir, name)
}

#[test]
fn every_scenario_was_captured_and_replays_exactly() {
    let index = json(&fixtures_dir().join("manifest.json"));
    assert_eq!(index["cli"]["package"], "@openai/codex");
    let names: Vec<&str> = index["scenarios"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["scenario"].as_str().unwrap())
        .collect();
    assert!(names.len() >= 9, "{names:?}");
    for name in names {
        let r = replay_scenario(name);
        let unrecognized = r.of(|e| match e {
            Event::Unrecognized(u) => Some(u),
            _ => None,
        });
        assert!(unrecognized.is_empty(), "{name}: {unrecognized:?}");
    }
}

#[test]
fn tool_items_carry_the_gateways_ids_and_their_arguments() {
    for (name, tool, category) in [
        ("shell", "exec_command", "command"),
        ("apply_patch", "apply_patch", "file_write"),
    ] {
        let r = replay_scenario(name);
        let calls = r.of(|e| match e {
            Event::ToolCall(c) => Some(c),
            _ => None,
        });
        assert_eq!(calls.len(), 1, "{name}");
        let call = calls[0];
        assert_eq!(call.tool_name, tool);
        assert_eq!(
            serde_json::to_value(&call.category).unwrap()["kind"],
            category
        );
        assert!(call.call_id.starts_with("call_"), "{}", call.call_id);
        assert_ne!(
            call.call_id, call.model_call_id,
            "the guest got the gateway's id"
        );
        let results = r.of(|e| match e {
            Event::ToolResult(t) => Some(t),
            _ => None,
        });
        assert_eq!(results[0].call_id, call.call_id, "{name}");
        assert_eq!(r.outcome.status, OutcomeStatus::Succeeded);
    }
    let shell = replay_scenario("shell");
    let output = shell.of(|e| match e {
        Event::ToolResult(t) => t.output.as_ref(),
        _ => None,
    });
    assert_eq!(output, ["alpha\n"], "the command really ran");
    let patch = replay_scenario("apply_patch");
    let call = patch.of(|e| match e {
        Event::ToolCall(c) => Some(&c.arguments),
        _ => None,
    });
    assert!(
        call[0].as_str().unwrap().starts_with("*** Begin Patch"),
        "a freeform call's input: {:?}",
        call[0]
    );
}

#[test]
fn an_escalation_asks_once_and_a_decline_fails_the_command_while_the_turn_goes_on() {
    for (name, outcome, status) in [
        ("escalated_allowed", PermissionOutcome::Allowed, "success"),
        ("escalated_declined", PermissionOutcome::Rejected, "error"),
    ] {
        let r = replay_scenario(name);
        let kinds: Vec<&str> = r.events.iter().map(Event::kind).collect();
        let at = |kind: &str| kinds.iter().position(|k| *k == kind).unwrap();
        assert!(at("tool_call") < at("permission"), "{name}");
        assert!(at("permission") < at("tool_result"), "{name}");
        let permission = r.of(|e| match e {
            Event::Permission(p) => Some(p),
            _ => None,
        });
        assert_eq!(permission.len(), 1, "{name}");
        assert_eq!(permission[0].outcome, outcome, "{name}");
        let result = r.of(|e| match e {
            Event::ToolResult(t) => Some(t),
            _ => None,
        });
        assert_eq!(
            serde_json::to_value(result[0].status).unwrap(),
            Value::from(status),
            "{name}"
        );
        assert_eq!(r.outcome.status, OutcomeStatus::Succeeded, "{name}");
    }
}

#[test]
fn parallel_commands_are_three_calls_of_one_turn_with_distinct_ids() {
    let r = replay_scenario("parallel");
    let calls = r.of(|e| match e {
        Event::ToolCall(c) => Some(c),
        _ => None,
    });
    assert_eq!(calls.len(), 3);
    assert!(calls.iter().all(|c| c.turn == 0));
    let mut ids: Vec<&str> = calls.iter().map(|c| c.call_id.as_str()).collect();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), 3, "identical calls keep distinct delivered ids");
}

#[test]
fn reasoning_becomes_thoughts_two_prompts_two_ends_and_a_400_a_failed_turn() {
    let r = replay_scenario("reasoning");
    let thoughts: String = r
        .of(|e| match e {
            Event::Thought(t) => Some(t),
            _ => None,
        })
        .iter()
        .map(|t| t.text.as_str())
        .collect();
    assert_eq!(thoughts, "Let me think. Done thinking.");
    let two = replay_scenario("two_prompts");
    let ends = two.of(|e| match e {
        Event::PromptFinished(p) => Some(p),
        _ => None,
    });
    assert_eq!(ends.iter().map(|p| p.prompt).collect::<Vec<_>>(), [0, 1]);
    let failed = replay_scenario("api_400");
    assert_eq!(failed.outcome.status, OutcomeStatus::Failed);
    let message = &failed.outcome.error.as_ref().unwrap().message;
    assert!(message.contains("scripted failure 400"), "{message}");
}
