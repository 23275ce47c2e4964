//! Replays the captured Gemini CLI 0.61.0 ACP sessions (`fixtures/gemini-cli/0.61.0/acp/`,
//! recorded by `switchyard-dev capture --protocol acp` from the real CLI) through the ACP note
//! mapping, and asserts the exact canonical sequence and typed outcome of every scenario.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use switchyard_backend::gemini::acp::{Note, replay};
use switchyard_events::event::PermissionOutcome;
use switchyard_events::gemini::StderrSummary;
use switchyard_events::{ErrorKind, Event, GuestExit, OutcomeStatus};

mod fixture_support;
use fixture_support::{Replayed, json, lines, parsed};

fn fixtures_dir() -> PathBuf {
    fixture_support::fixtures("gemini-cli/0.61.0/acp")
}

/// Replays one scenario and checks it against its stored expectation, exactly.
fn replay_scenario(name: &str) -> Replayed {
    let dir = fixtures_dir().join(name);
    let manifest = json(&dir.join("manifest.json"));
    assert_eq!(manifest["cli"]["version"], "0.61.0");
    assert_eq!(manifest["scenario"], name);
    assert_eq!(manifest["protocol"], "acp");
    let notes: Vec<Note> = parsed(&dir.join("notes.jsonl"));
    let exit: GuestExit = serde_json::from_value(json(&dir.join("exit.json"))).unwrap();
    let mut stderr = StderrSummary::default();
    for line in lines(&dir.join("stderr.txt")) {
        stderr.push(&line);
    }
    let prompts = manifest["prompts"].as_array().unwrap().len();
    let (events, outcome) = replay(
        manifest["model"].as_str().unwrap(),
        notes,
        u32::try_from(prompts).unwrap(),
        exit,
        stderr.message().as_deref(),
    );
    Replayed { events, outcome }.checked(&dir, name)
}

#[test]
fn every_scenario_was_captured_and_replays_exactly() {
    let index = json(&fixtures_dir().join("manifest.json"));
    let names: Vec<&str> = index["scenarios"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["scenario"].as_str().unwrap())
        .collect();
    for required in [
        "text",
        "two_prompts",
        "tool_ok",
        "thought",
        "tool_parallel",
        "permission_allowed",
        "permission_rejected",
        "api_400",
        "api_429",
        "cancel",
    ] {
        assert!(names.contains(&required), "{required} was not captured");
        replay_scenario(required);
    }
}

#[test]
fn two_prompts_answer_in_one_session() {
    let r = replay_scenario("two_prompts");
    assert_eq!(r.outcome.status, OutcomeStatus::Succeeded);
    let prompts = r.of(|e| match e {
        Event::PromptFinished(p) => Some(p),
        _ => None,
    });
    assert_eq!(prompts.len(), 2);
    assert!(
        prompts
            .iter()
            .all(|p| p.stop_reason.as_deref() == Some("end_turn"))
    );
    let sessions = r.of(|e| match e {
        Event::SessionStarted(s) => Some(s),
        _ => None,
    });
    assert_eq!(sessions.len(), 1);
}

#[test]
fn a_rejected_call_is_reported_to_the_model_and_the_run_goes_on() {
    let r = replay_scenario("permission_rejected");
    assert_eq!(r.outcome.status, OutcomeStatus::Succeeded);
    let decisions: Vec<(PermissionOutcome, Option<&str>)> = r
        .of(|e| match e {
            Event::Permission(p) => Some(p.as_ref()),
            _ => None,
        })
        .iter()
        .map(|p| (p.outcome, p.option_id.as_deref()))
        .collect();
    assert_eq!(
        decisions,
        [
            (PermissionOutcome::Rejected, Some("cancel")),
            (PermissionOutcome::Rejected, Some("cancel"))
        ]
    );
    let results = r.of(|e| match e {
        Event::ToolResult(t) => Some(t),
        _ => None,
    });
    assert!(
        results
            .iter()
            .all(|t| t.error.as_ref().unwrap().kind == "permission_rejected")
    );
    let allowed = replay_scenario("permission_allowed");
    let results = allowed.of(|e| match e {
        Event::ToolResult(t) => Some(t),
        _ => None,
    });
    // The write forwards its diff; the shell forwards nothing.
    assert_eq!(results[0].content[0]["type"], "diff", "{:?}", results[0]);
    assert_eq!(results[0].content[0]["newText"], "new file\n");
}

#[test]
fn model_api_failures_carry_their_http_status() {
    for (name, status) in [("api_400", 400), ("api_429", 429)] {
        let r = replay_scenario(name);
        assert_eq!(r.outcome.status, OutcomeStatus::Failed, "{name}");
        assert_eq!(
            r.outcome.error.unwrap().kind,
            ErrorKind::Api {
                http_status: Some(status)
            },
            "{name}"
        );
    }
}

#[test]
fn a_cancelled_prompt_is_a_cancelled_run() {
    let r = replay_scenario("cancel");
    assert_eq!(r.outcome.status, OutcomeStatus::Cancelled);
    assert_eq!(r.outcome.error.unwrap().kind, ErrorKind::Cancelled);
}

#[test]
fn thoughts_are_kept_and_parallel_calls_keep_their_model_ids() {
    let r = replay_scenario("thought");
    let thoughts = r.of(|e| match e {
        Event::Thought(t) => Some(t),
        _ => None,
    });
    assert_eq!(thoughts[0].text, "**Planning**\nList the directory first.");
    let parallel = replay_scenario("tool_parallel");
    // Without the gateway (as captured) nothing says the two calls came in one response, so
    // each tool round counts as a turn; with it they share one (tests/host_tools_live.rs).
    let calls: Vec<&str> = parallel
        .of(|e| match e {
            Event::ToolCall(c) => Some(c),
            _ => None,
        })
        .iter()
        .map(|c| c.model_call_id.as_str())
        .collect();
    assert_eq!(calls, ["call_A", "call_B"]);
}
