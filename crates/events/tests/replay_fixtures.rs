//! Replays the captured Gemini CLI 0.61.0 transcripts (`fixtures/gemini-cli/0.61.0/`, recorded
//! by `switchyard-dev capture` from the real CLI) through the stream-json parser and normalizer, and
//! asserts the exact canonical sequence and the typed outcome of every scenario.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use serde_json::Value;
use std::path::{Path, PathBuf};
use switchyard_events::event::ToolStatus;
use switchyard_events::gemini::replay;
use switchyard_events::{ErrorKind, Event, GuestExit, OutcomeStatus, RunOutcome, ToolCategory};

fn fixtures_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/gemini-cli/0.61.0")
}

struct Replayed {
    events: Vec<Event>,
    outcome: RunOutcome,
}

fn lines(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .lines()
        .map(str::to_owned)
        .collect()
}

/// Replays one scenario and checks it against its stored expectation, exactly.
fn replay_scenario(name: &str) -> Replayed {
    let dir = fixtures_dir().join(name);
    let stdout = lines(&dir.join("stdout.jsonl"));
    let stderr = lines(&dir.join("stderr.txt"));
    let exit: GuestExit =
        serde_json::from_slice(&std::fs::read(dir.join("exit.json")).unwrap()).unwrap();
    let (events, outcome) = replay(
        stdout.iter().map(String::as_str),
        stderr.iter().map(String::as_str),
        exit,
    );
    let got: Vec<Value> = events
        .iter()
        .map(|n| serde_json::to_value(n).unwrap())
        .collect();
    let expected: Vec<Value> = lines(&dir.join("expected.jsonl"))
        .iter()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(
        got, expected,
        "{name}: canonical sequence differs from the captured one"
    );
    let stored: RunOutcome =
        serde_json::from_slice(&std::fs::read(dir.join("outcome.json")).unwrap()).unwrap();
    assert_eq!(outcome, stored, "{name}: outcome differs");
    let manifest: Value =
        serde_json::from_slice(&std::fs::read(dir.join("manifest.json")).unwrap()).unwrap();
    assert_eq!(manifest["cli"]["version"], "0.61.0");
    assert_eq!(manifest["scenario"], name);
    Replayed {
        events: events.into_iter().map(|n| n.event).collect(),
        outcome,
    }
}

fn tool_calls(r: &Replayed) -> Vec<&switchyard_events::event::ToolCall> {
    r.events
        .iter()
        .filter_map(|e| {
            if let Event::ToolCall(c) = e {
                Some(c)
            } else {
                None
            }
        })
        .collect()
}

fn tool_results(r: &Replayed) -> Vec<&switchyard_events::event::ToolResult> {
    r.events
        .iter()
        .filter_map(|e| {
            if let Event::ToolResult(t) = e {
                Some(t)
            } else {
                None
            }
        })
        .collect()
}

fn kinds(events: &[Event]) -> Vec<&'static str> {
    events.iter().map(Event::kind).collect()
}

fn final_text(r: &Replayed) -> Option<String> {
    match r.events.last() {
        Some(Event::RunFinished(f)) => f.final_text.clone(),
        other => panic!("last event is not run_finished: {other:?}"),
    }
}

fn error_kind(r: &Replayed) -> ErrorKind {
    r.outcome.error.as_ref().expect("an error").kind.clone()
}

#[test]
fn every_required_scenario_was_captured() {
    let index: Value =
        serde_json::from_slice(&std::fs::read(fixtures_dir().join("manifest.json")).unwrap())
            .unwrap();
    let names: Vec<&str> = index["scenarios"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["scenario"].as_str().unwrap())
        .collect();
    for required in [
        "text",
        "tool_ok",
        "tool_fail",
        "tool_parallel",
        "api_400",
        "api_429",
        "api_500",
        "empty",
        "loop",
        "turn_limit",
        "cancel",
        "inactivity",
    ] {
        assert!(
            names.contains(&required),
            "fixture {required} missing from the index"
        );
    }
}

#[test]
fn text_answer() {
    let r = replay_scenario("text");
    assert_eq!(r.outcome.status, OutcomeStatus::Succeeded);
    assert_eq!(
        kinds(&r.events),
        [
            "session_started",
            "user_message",
            "assistant_delta",
            "assistant_delta",
            "assistant_message",
            "usage",
            "run_finished"
        ]
    );
    assert_eq!(
        final_text(&r).as_deref(),
        Some("Hello from the scripted model.")
    );
}

#[test]
fn tool_ok() {
    let r = replay_scenario("tool_ok");
    assert_eq!(r.outcome.status, OutcomeStatus::Succeeded);
    let call = tool_calls(&r)[0];
    assert_eq!(call.tool_name, "list_directory");
    assert_eq!(call.category, ToolCategory::FileRead);
    assert_eq!(call.turn, 0);
    let result = tool_results(&r)[0];
    assert_eq!(result.call_id, call.call_id);
    assert_eq!(result.status, ToolStatus::Success);
    assert_eq!(final_text(&r).as_deref(), Some("Done. All good."));
    let Some(Event::RunFinished(f)) = r.events.last() else {
        unreachable!()
    };
    assert_eq!(f.turns, 2);
}

#[test]
fn tool_failure_is_not_fatal() {
    let r = replay_scenario("tool_fail");
    assert_eq!(r.outcome.status, OutcomeStatus::Succeeded);
    let result = tool_results(&r)[0];
    assert_eq!(result.status, ToolStatus::Error);
    assert_eq!(result.error.as_ref().unwrap().kind, "invalid_tool_params");
}

#[test]
fn parallel_tools_keep_model_ids_and_pair_results() {
    let r = replay_scenario("tool_parallel");
    let calls = tool_calls(&r);
    let ids: Vec<&str> = calls.iter().map(|c| c.model_call_id.as_str()).collect();
    assert_eq!(ids, ["call_A", "call_B"]);
    let results = tool_results(&r);
    assert_eq!(results.len(), 2);
    for (call, result) in calls.iter().zip(&results) {
        assert_eq!(result.call_id, call.call_id);
        assert_eq!(result.tool_name.as_deref(), Some(call.tool_name.as_str()));
    }
}

#[test]
fn api_errors_keep_their_http_status() {
    for (name, status) in [("api_400", 400), ("api_429", 429), ("api_500", 500)] {
        let r = replay_scenario(name);
        assert_eq!(r.outcome.status, OutcomeStatus::Failed, "{name}");
        assert_eq!(
            error_kind(&r),
            ErrorKind::Api {
                http_status: Some(status)
            },
            "{name}"
        );
        assert_eq!(
            r.outcome.error.as_ref().unwrap().retryable,
            status != 400,
            "{name}"
        );
    }
}

#[test]
fn empty_response_is_a_model_output_failure() {
    let r = replay_scenario("empty");
    assert_eq!(r.outcome.status, OutcomeStatus::Failed);
    assert_eq!(error_kind(&r), ErrorKind::ModelOutput);
    assert!(r.events.iter().any(|e| matches!(e, Event::Error(_))));
    assert_eq!(
        r.outcome.exit.code,
        Some(0),
        "the guest exits 0 on an invalid stream"
    );
}

#[test]
fn loop_detection_is_a_warning_then_success() {
    let r = replay_scenario("loop");
    assert_eq!(r.outcome.status, OutcomeStatus::Succeeded);
    assert!(
        r.events
            .iter()
            .any(|e| matches!(e, Event::Warning(w) if w.message.contains("Loop detected")))
    );
}

#[test]
fn turn_limit() {
    let r = replay_scenario("turn_limit");
    assert_eq!(r.outcome.status, OutcomeStatus::Failed);
    assert_eq!(error_kind(&r), ErrorKind::TurnLimit);
}

#[test]
fn cancel_by_signal_is_cancelled_not_success() {
    let r = replay_scenario("cancel");
    assert_eq!(r.outcome.status, OutcomeStatus::Cancelled);
    assert!(
        r.events
            .iter()
            .any(|e| matches!(e, Event::AssistantDelta(_)))
    );
    assert!(
        !r.events.iter().any(|e| matches!(e, Event::Usage(_))),
        "no result line after a signal"
    );
}

#[test]
fn stalled_stream_is_stopped_by_the_watchdog() {
    let r = replay_scenario("inactivity");
    assert_eq!(r.outcome.status, OutcomeStatus::TimedOut);
    assert_eq!(error_kind(&r), ErrorKind::Inactivity);
}
