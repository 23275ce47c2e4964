//! Replays the captured OpenCode 1.18.33 runs (`fixtures/opencode/1.18.33/`, recorded by
//! `switchyard-dev capture --agent opencode` from the real `opencode serve`) through the note
//! mapping, and asserts the exact canonical sequence and typed outcome of every scenario.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;

use serde_json::Value;
use switchyard_backend::opencode::notes::{Note, replay};
use switchyard_events::event::PermissionOutcome;
use switchyard_events::{ErrorKind, Event, GuestExit, OutcomeStatus};

mod fixture_support;
use fixture_support::{Replayed, json, lines, parsed};

fn fixtures_dir() -> PathBuf {
    fixture_support::fixtures("opencode/1.18.33")
}

fn replay_scenario(name: &str) -> Replayed {
    let dir = fixtures_dir().join(name);
    let manifest = json(&dir.join("manifest.json"));
    assert_eq!(manifest["cli"]["version"], "1.18.33");
    assert_eq!(manifest["scenario"], name);
    let notes: Vec<Note> = parsed(&dir.join("notes.jsonl"));
    // The raw event data are exactly the notes' events (those read back after a reconnect
    // aside, which these captures have none of).
    let raw = lines(&dir.join("events.jsonl"));
    let noted: Vec<&String> = notes
        .iter()
        .filter_map(|n| match n {
            Note::Event(data) => Some(data),
            _ => None,
        })
        .collect();
    assert_eq!(noted.len(), raw.len(), "{name}");
    assert!(noted.iter().zip(&raw).all(|(n, r)| *n == r), "{name}");
    let exit: GuestExit = serde_json::from_value(json(&dir.join("exit.json"))).unwrap();
    let hint = lines(&dir.join("stderr.txt"))
        .into_iter()
        .rev()
        .find(|l| !l.trim().is_empty());
    let prompts = manifest["prompts"].as_array().unwrap().len();
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
    assert_eq!(index["cli"]["package"], "opencode-ai");
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
fn nothing_real_opencode_sent_is_unrecognized() {
    for name in [
        "text",
        "tool_read",
        "tool_parallel",
        "bash_rejected",
        "reasoning",
        "api_400",
    ] {
        let r = replay_scenario(name);
        assert!(
            r.of(|e| match e {
                Event::Unrecognized(u) => Some(u),
                _ => None,
            })
            .is_empty(),
            "{name}"
        );
    }
}

#[test]
fn a_read_is_one_call_one_allowed_permission_and_one_result_before_the_answer() {
    let r = replay_scenario("tool_read");
    let kinds: Vec<&str> = r.events.iter().map(Event::kind).collect();
    let at = |kind: &str| kinds.iter().position(|k| *k == kind).unwrap();
    assert!(at("tool_call") < at("permission"));
    assert!(at("permission") < at("tool_result"));
    assert!(at("tool_result") < at("assistant_message"));
    let permission = r.of(|e| match e {
        Event::Permission(p) => Some(p),
        _ => None,
    });
    assert_eq!(permission[0].outcome, PermissionOutcome::Allowed);
    assert_eq!(r.outcome.status, OutcomeStatus::Succeeded);
}

#[test]
fn parallel_reads_are_three_calls_of_one_turn() {
    let r = replay_scenario("tool_parallel");
    let calls = r.of(|e| match e {
        Event::ToolCall(c) => Some(c),
        _ => None,
    });
    let mut ids: Vec<&str> = calls.iter().map(|c| c.model_call_id.as_str()).collect();
    ids.sort_unstable();
    assert_eq!(ids, ["call_a1", "call_a2", "call_b"]);
    assert!(calls.iter().all(|c| c.turn == 0));
}

#[test]
fn a_rejected_bash_fails_as_rejected_and_the_answer_still_comes() {
    let r = replay_scenario("bash_rejected");
    let results = r.of(|e| match e {
        Event::ToolResult(t) => Some(t),
        _ => None,
    });
    assert_eq!(
        results[0].error.as_ref().map(|e| e.kind.as_str()),
        Some("permission_rejected")
    );
    assert_eq!(r.outcome.status, OutcomeStatus::Succeeded);
}

#[test]
fn reasoning_becomes_thoughts() {
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
}

#[test]
fn an_upstream_400_fails_the_run_as_an_api_error() {
    let r = replay_scenario("api_400");
    assert_eq!(r.outcome.status, OutcomeStatus::Failed);
    assert_eq!(
        r.outcome.error.as_ref().map(|e| e.kind.clone()),
        Some(ErrorKind::Api {
            http_status: Some(400)
        })
    );
}

#[test]
fn two_prompts_finish_in_turn() {
    let r = replay_scenario("two_prompts");
    let finished = r.of(|e| match e {
        Event::PromptFinished(p) => Some(p),
        _ => None,
    });
    assert_eq!(finished.len(), 2);
    assert!(finished.iter().all(|p| p.error.is_none()));
}

/// The first prompt's upstream answered 400; its assistant message got the error only after the
/// second prompt was sent. The error stays the first prompt's, and the second is answered.
#[test]
fn an_earlier_prompts_late_error_stays_with_it() {
    let r = replay_scenario("error_then_text");
    let finished = r.of(|e| match e {
        Event::PromptFinished(p) => Some(p),
        _ => None,
    });
    assert_eq!(finished.len(), 2);
    assert_eq!(
        finished[0].error.as_ref().map(|e| e.kind.clone()),
        Some(ErrorKind::Api {
            http_status: Some(400)
        })
    );
    assert_eq!(finished[1].error, None);
    assert_eq!(finished[1].final_text.as_deref(), Some("Second answer."));
    assert_eq!(r.outcome.status, OutcomeStatus::Failed);
}

/// A stream that drops mid-answer loses deltas; the parts read back after the reconnect (as
/// `message.part.updated`, what the backend feeds) bring the missing text, and nothing that
/// was already reported is repeated.
#[test]
fn parts_read_back_after_a_lost_stream_complete_the_answer_once() {
    let dir = fixtures_dir().join("tool_read");
    let notes: Vec<Note> = parsed(&dir.join("notes.jsonl"));
    let kind = |n: &Note| match n {
        Note::Event(data) => serde_json::from_str::<Value>(data).unwrap()["type"]
            .as_str()
            .map(str::to_owned),
        _ => None,
    };
    // The stream is lost at the first text delta: every later event is missed...
    let cut = notes
        .iter()
        .position(|n| kind(n).as_deref() == Some("message.part.delta"))
        .unwrap();
    let mut lossy: Vec<Note> = notes[..cut].to_vec();
    // ...and every part comes back whole (the last update of each, as the server stores them),
    // those already reported included.
    let mut parts: Vec<(String, Note)> = Vec::new();
    for n in &notes {
        if kind(n).as_deref() == Some("message.part.updated")
            && let Note::Event(data) = n
        {
            let id = serde_json::from_str::<Value>(data).unwrap()["properties"]["part"]["id"]
                .as_str()
                .unwrap()
                .to_owned();
            parts.retain(|(p, _)| *p != id);
            parts.push((id, n.clone()));
        }
    }
    lossy.extend(parts.into_iter().map(|(_, n)| n));
    lossy.push(Note::PromptDone);
    let exit = serde_json::from_value(json(&dir.join("exit.json"))).unwrap();
    let (events, outcome) = replay(lossy, 1, exit, None);
    let text: String = events
        .iter()
        .filter_map(|e| match e {
            Event::AssistantDelta(d) => Some(d.text.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(text, "Done with the task.");
    assert_eq!(outcome.status, OutcomeStatus::Succeeded);
    let results = events
        .iter()
        .filter(|e| matches!(e, Event::ToolResult(_)))
        .count();
    assert_eq!(results, 1, "the tool result is not repeated");
}
