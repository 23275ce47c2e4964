//! Managed process basics against real `/bin/sh` children: exit codes and signals, exact
//! environment, cwd, closed stdin, bounded stdout lines, and the bounded stderr tail.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod process_support;

use process_support::{sh, split_events};
use switchyard_backend::process::{
    Limits, Line, ManagedProcess, Outcome, ProcessEvent, ProcessSpec, SpawnError, Termination,
};

async fn run(spec: ProcessSpec) -> (Vec<String>, Vec<String>, Outcome) {
    split_events(run_raw(spec).await)
}

async fn run_raw(spec: ProcessSpec) -> Vec<ProcessEvent> {
    let mut process = ManagedProcess::spawn(spec).expect("spawn");
    let mut events = Vec::new();
    while let Some(event) = process.next_event().await {
        events.push(event);
    }
    events
}

/// The stdout lines of `events`, with their flags.
fn stdout_lines(events: &[ProcessEvent]) -> Vec<Line> {
    events
        .iter()
        .filter_map(|event| match event {
            ProcessEvent::Stdout(line) => Some(line.clone()),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn stdout_lines_arrive_in_order_and_exit_code_is_reported() {
    let (stdout, _, outcome) = run(sh("echo one; echo two; exit 7")).await;
    assert_eq!(stdout, ["one", "two"]);
    assert_eq!(outcome.termination, Termination::Exited { code: 7 });
    assert_eq!(outcome.exit.code, Some(7));
    assert_eq!(outcome.stdout.lines, 2);
}

#[tokio::test]
async fn death_by_a_foreign_signal_is_reported_as_signaled() {
    let (_, _, outcome) = run(sh("kill -TERM $$")).await;
    assert_eq!(outcome.termination, Termination::Signaled { signal: 15 });
    assert_eq!(outcome.exit.signal, Some(15));
    assert_eq!(outcome.exit.code, None);
}

#[tokio::test]
async fn child_sees_exactly_the_given_environment() {
    assert!(std::env::vars_os().next().is_some(), "test process has env");
    let spec = ProcessSpec::new("/usr/bin/env", std::env::temp_dir())
        .env("SY_ONE", "1")
        .env("SY_TWO", "two words=and equals");
    let (mut stdout, _, outcome) = run(spec).await;
    stdout.sort();
    // Besides what it was given, only the mark that finds its descendants (see process_orphans).
    let (mark, given): (Vec<String>, Vec<String>) = stdout
        .into_iter()
        .partition(|line| line.starts_with("SWITCHYARD_PROCESS_MARK="));
    assert_eq!(given, ["SY_ONE=1", "SY_TWO=two words=and equals"]);
    assert_eq!(mark.len(), 1, "{mark:?}");
    assert_eq!(outcome.termination, Termination::Exited { code: 0 });
}

#[tokio::test]
async fn cwd_is_applied_and_stdin_is_closed() {
    let dir = tempfile::tempdir().unwrap();
    let mut spec = sh("pwd; cat; echo stdin-was-empty");
    spec.cwd = dir.path().to_path_buf();
    let (stdout, _, outcome) = run(spec).await;
    let expected = dir.path().canonicalize().unwrap();
    assert_eq!(stdout, [expected.to_str().unwrap(), "stdin-was-empty"]);
    assert_eq!(outcome.termination, Termination::Exited { code: 0 });
}

#[tokio::test]
async fn missing_program_is_a_typed_error() {
    let spec = ProcessSpec::new("/nonexistent/guest-cli", std::env::temp_dir());
    match ManagedProcess::spawn(spec) {
        Err(SpawnError::Program { program, source }) => {
            assert_eq!(program.to_str(), Some("/nonexistent/guest-cli"));
            assert_eq!(source.kind(), std::io::ErrorKind::NotFound);
        }
        other => panic!("expected SpawnError::Program, got {other:?}"),
    }
}

#[tokio::test]
async fn huge_stdout_line_is_truncated_and_counted() {
    // 10 MB without a newline, then a newline and a normal line.
    let spec = sh("head -c 10000000 /dev/zero | tr '\\0' a; echo; echo ok").limits(Limits {
        max_line_bytes: 1024,
        ..Limits::default()
    });
    let events = run_raw(spec).await;
    let lines = stdout_lines(&events);
    assert_eq!(lines.len(), 2);
    assert_eq!(lines[0].text.len(), 1024);
    assert!(lines[0].text.bytes().all(|b| b == b'a'));
    assert!(lines[0].truncated);
    assert_eq!(lines[0].dropped_bytes, 10_000_000 - 1024);
    assert_eq!((lines[1].text.as_str(), lines[1].seq), ("ok", 1));
    let Some(ProcessEvent::Finished(outcome)) = events.last() else {
        panic!("Finished must be last");
    };
    assert_eq!(outcome.stdout.truncated_lines, 1);
    assert_eq!(outcome.stdout.dropped_bytes, 10_000_000 - 1024);
    assert_eq!(outcome.stdout.total_bytes, 10_000_000 + 1 + 3);
}

#[tokio::test]
async fn partial_final_line_and_invalid_utf8_are_kept_and_flagged() {
    let events = run_raw(sh("printf 'bad\\377\\nlast'")).await;
    let lines = stdout_lines(&events);
    assert_eq!(lines[0].text, "bad\u{fffd}");
    assert!(lines[0].invalid_utf8 && lines[0].terminated);
    assert_eq!(lines[1].text, "last");
    assert!(!lines[1].terminated && !lines[1].invalid_utf8);
    let Some(ProcessEvent::Finished(outcome)) = events.last() else {
        panic!("Finished must be last");
    };
    assert_eq!(outcome.stdout.invalid_utf8_lines, 1);
    assert_eq!(outcome.stdout.terminated_lines, 1);
}

const NOISY_STDERR: &str =
    "i=0; while [ $i -lt 1000 ]; do echo \"err $i\" >&2; i=$((i+1)); done; echo done";

#[tokio::test]
async fn stderr_ring_keeps_the_tail_and_lines_are_forwarded() {
    let spec = sh(NOISY_STDERR).limits(Limits {
        stderr_ring_bytes: 100,
        ..Limits::default()
    });
    let (stdout, stderr, outcome) = run(spec).await;
    assert_eq!(stdout, ["done"]);
    assert_eq!(stderr.len(), 1000);
    assert_eq!(stderr[999], "err 999");
    assert_eq!(outcome.stderr_tail.len(), 100);
    assert!(outcome.stderr_tail.ends_with("err 998\nerr 999\n"));
    assert_eq!(
        outcome.stderr_evicted_bytes,
        outcome.stderr.total_bytes - 100
    );
    assert_eq!(outcome.stderr.lines, 1000);
}

#[tokio::test]
async fn stderr_lines_can_be_kept_out_of_the_event_stream() {
    let spec = sh(NOISY_STDERR).limits(Limits {
        forward_stderr_lines: false,
        ..Limits::default()
    });
    let (_, stderr, outcome) = run(spec).await;
    assert!(stderr.is_empty());
    assert_eq!(outcome.stderr.lines, 1000);
    assert!(outcome.stderr_tail.ends_with("err 999\n"));
}
