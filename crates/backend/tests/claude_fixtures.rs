//! Replays the captured Claude Code 2.1.332 runs (`fixtures/claude-code/2.1.332/`, recorded by
//! `switchyard-dev capture --agent claude-code` from the real `claude -p` on stream-json)
//! through the note mapping, and asserts the exact canonical sequence and typed outcome of
//! every scenario.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;

use serde_json::Value;
use switchyard_backend::claude::run::{Note, replay};
use switchyard_events::event::PermissionOutcome;
use switchyard_events::{ErrorKind, Event, GuestExit, OutcomeStatus};

mod fixture_support;
use fixture_support::{Replayed, json, lines, parsed};

fn fixtures_dir() -> PathBuf {
    fixture_support::fixtures("claude-code/2.1.332")
}

fn replay_scenario(name: &str) -> Replayed {
    let dir = fixtures_dir().join(name);
    let manifest = json(&dir.join("manifest.json"));
    assert_eq!(manifest["cli"]["version"], "2.1.332");
    assert_eq!(manifest["scenario"], name);
    let notes: Vec<Note> = parsed(&dir.join("notes.jsonl"));
    let exit: GuestExit = serde_json::from_value(json(&dir.join("exit.json"))).unwrap();
    let hint = lines(&dir.join("stderr.txt"))
        .into_iter()
        .rev()
        .find(|l| !l.trim().is_empty());
    let prompts = manifest["prompts"].as_array().unwrap().len();
    // Every prompt went to the guest as one stream-json user line.
    let stdin: Vec<Value> = parsed(&dir.join("stdin.jsonl"));
    let users = stdin.iter().filter(|l| l["type"] == "user").count();
    assert_eq!(users, prompts, "{name}");
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
    assert_eq!(index["cli"]["package"], "@anthropic-ai/claude-code");
    let names: Vec<&str> = index["scenarios"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["scenario"].as_str().unwrap())
        .collect();
    assert!(names.len() >= 8, "{names:?}");
    for name in names {
        replay_scenario(name);
    }
}

#[test]
fn nothing_real_claude_code_sent_is_unrecognized() {
    for name in [
        "text",
        "two_prompts",
        "tool_read",
        "read_pdf",
        "tool_parallel",
        "bash_rejected",
        "reasoning",
        "api_400",
    ] {
        let r = replay_scenario(name);
        let unrecognized = r.of(|e| match e {
            Event::Unrecognized(u) => Some(u),
            _ => None,
        });
        assert!(unrecognized.is_empty(), "{name}: {unrecognized:?}");
    }
}

#[test]
fn a_bash_call_asks_once_and_a_denial_fails_it_while_the_answer_still_comes() {
    let allowed = replay_scenario("bash_allowed");
    let rejected = replay_scenario("bash_rejected");
    for (r, outcome, status) in [
        (&allowed, PermissionOutcome::Allowed, "success"),
        (&rejected, PermissionOutcome::Rejected, "error"),
    ] {
        let kinds: Vec<&str> = r.events.iter().map(Event::kind).collect();
        let at = |kind: &str| kinds.iter().position(|k| *k == kind).unwrap();
        assert!(at("tool_call") < at("permission"));
        assert!(at("permission") < at("tool_result"));
        let permission = r.of(|e| match e {
            Event::Permission(p) => Some(p),
            _ => None,
        });
        assert_eq!(permission.len(), 1);
        assert_eq!(permission[0].outcome, outcome);
        let result = r.of(|e| match e {
            Event::ToolResult(t) => Some(t),
            _ => None,
        });
        assert_eq!(
            serde_json::to_value(result[0].status).unwrap(),
            Value::from(status)
        );
        assert_eq!(r.outcome.status, OutcomeStatus::Succeeded);
    }
    let result = rejected.of(|e| match e {
        Event::ToolResult(t) => Some(t),
        _ => None,
    });
    assert_eq!(
        result[0].error.as_ref().map(|e| e.kind.as_str()),
        Some("permission_rejected")
    );
}

#[test]
fn parallel_reads_are_three_calls_of_one_turn() {
    let r = replay_scenario("tool_parallel");
    let calls = r.of(|e| match e {
        Event::ToolCall(c) => Some(c),
        _ => None,
    });
    assert_eq!(calls.len(), 3);
    assert!(calls.iter().all(|c| c.turn == 0));
    let mut ids: Vec<&str> = calls.iter().map(|c| c.call_id.as_str()).collect();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), 3, "distinct delivered ids");
}

#[test]
fn reasoning_becomes_thoughts_and_two_prompts_two_ends() {
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
    let sessions = two.of(|e| match e {
        Event::SessionStarted(s) => Some(s),
        _ => None,
    });
    assert_eq!(sessions.len(), 1, "the repeated init is one session");
}

#[test]
fn an_upstream_400_is_an_api_failure_by_is_error_not_subtype() {
    let r = replay_scenario("api_400");
    assert_eq!(r.outcome.status, OutcomeStatus::Failed);
    let error = r.outcome.error.as_ref().unwrap();
    assert_eq!(
        error.kind,
        ErrorKind::Api {
            http_status: Some(400)
        }
    );
    // The guest reported it as `subtype: success`: only is_error says it failed.
    let notes: Vec<Note> = parsed(&fixtures_dir().join("api_400/notes.jsonl"));
    let result = notes
        .iter()
        .find_map(|n| match n {
            Note::Line(l) if l.contains("\"type\":\"result\"") => {
                Some(serde_json::from_str::<Value>(l).unwrap())
            }
            _ => None,
        })
        .unwrap();
    assert_eq!(result["subtype"], "success");
    assert_eq!(result["is_error"], true);
}
