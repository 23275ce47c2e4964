//! Stopping managed processes: INT -> TERM -> KILL escalation (the level reached is asserted,
//! never timings), cancellation through a StopHandle, overall timeout, inactivity watchdog.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod process_support;

use std::time::Duration;

use process_support::sh;
use switchyard_backend::process::{
    Escalation, ManagedProcess, ProcessEvent, ProcessSpec, StopPolicy, StopReason, Termination,
    Watchdogs,
};

fn quick_escalation(spec: ProcessSpec) -> ProcessSpec {
    spec.stop_policy(StopPolicy {
        grace_after_int: Duration::from_millis(800),
        grace_after_term: Duration::from_millis(800),
    })
}

/// Reads until a stdout line equals `marker`; returns the stdout lines seen.
async fn read_until(process: &mut ManagedProcess, marker: &str) -> Vec<String> {
    let mut seen = Vec::new();
    while let Some(event) = process.next_event().await {
        match event {
            ProcessEvent::Stdout(line) => {
                let done = line.text == marker;
                seen.push(line.text);
                if done {
                    return seen;
                }
            }
            ProcessEvent::Stderr(_) => {}
            ProcessEvent::Finished(outcome) => panic!("ended before {marker}: {outcome:?}"),
        }
    }
    panic!("event stream ended without Finished")
}

/// Drains the rest; returns stdout lines and the termination.
async fn finish(mut process: ManagedProcess) -> (Vec<String>, Termination, Option<i32>) {
    let mut stdout = Vec::new();
    while let Some(event) = process.next_event().await {
        match event {
            ProcessEvent::Stdout(line) => stdout.push(line.text),
            ProcessEvent::Stderr(_) => {}
            ProcessEvent::Finished(outcome) => {
                return (stdout, outcome.termination, outcome.exit.signal);
            }
        }
    }
    panic!("event stream ended without Finished")
}

/// A guest that does not trap SIGINT, with long grace periods (the result must not depend on
/// timing).
fn untrapping_guest() -> ProcessSpec {
    sh("echo ready; exec sleep 1000").stop_policy(StopPolicy {
        grace_after_int: Duration::from_secs(60),
        grace_after_term: Duration::from_secs(60),
    })
}

/// Stops `process` once it is ready and asserts SIGINT alone ended it.
async fn assert_sigint_was_enough(mut process: ManagedProcess) {
    read_until(&mut process, "ready").await;
    process.stop(StopReason::Cancelled);
    let (_, termination, signal) = finish(process).await;
    assert_eq!(
        termination,
        Termination::Stopped {
            reason: StopReason::Cancelled,
            escalation: Escalation::Int
        }
    );
    assert_eq!(signal, Some(2));
}

#[tokio::test]
async fn sigint_is_enough_for_a_guest_that_does_not_trap_it() {
    assert_sigint_was_enough(ManagedProcess::spawn(untrapping_guest()).unwrap()).await;
}

/// A host started in the background by a script inherits SIGINT ignored; the guest must not:
/// the first stop signal still ends a guest that does not trap it. (Spawned while this test
/// process ignores SIGINT; the disposition is restored right after.)
#[tokio::test]
async fn sigint_reaches_the_guest_even_when_the_host_ignores_it() {
    use nix::sys::signal::{SigHandler, Signal, signal};
    // SAFETY: changes only this process's SIGINT disposition (no handler code runs); the
    // previous disposition is put back right after the spawn.
    let previous = unsafe { signal(Signal::SIGINT, SigHandler::SigIgn) }.unwrap();
    let spawned = ManagedProcess::spawn(untrapping_guest());
    // SAFETY: as above.
    unsafe { signal(Signal::SIGINT, previous) }.unwrap();
    assert_sigint_was_enough(spawned.unwrap()).await;
}

#[tokio::test]
async fn guest_trapping_int_gets_sigterm() {
    let script = "trap 'echo got-int' INT; echo ready; while :; do sleep 0.05; done";
    let mut process = ManagedProcess::spawn(quick_escalation(sh(script))).unwrap();
    read_until(&mut process, "ready").await;
    process.stop(StopReason::Cancelled);
    let (stdout, termination, signal) = finish(process).await;
    assert_eq!(
        termination,
        Termination::Stopped {
            reason: StopReason::Cancelled,
            escalation: Escalation::Term
        }
    );
    assert_eq!(signal, Some(15));
    assert!(stdout.contains(&"got-int".to_owned()), "{stdout:?}");
}

#[tokio::test]
async fn guest_trapping_int_and_term_gets_sigkill() {
    let script = "trap 'echo got-int' INT; trap 'echo got-term' TERM; echo ready; \
                  while :; do sleep 0.05; done";
    let mut process = ManagedProcess::spawn(quick_escalation(sh(script))).unwrap();
    read_until(&mut process, "ready").await;
    process.stop_handle().cancel();
    let (stdout, termination, signal) = finish(process).await;
    assert_eq!(
        termination,
        Termination::Stopped {
            reason: StopReason::Cancelled,
            escalation: Escalation::Kill
        }
    );
    assert_eq!(signal, Some(9));
    let int_at = stdout
        .iter()
        .position(|l| l == "got-int")
        .expect("INT seen");
    let term_at = stdout
        .iter()
        .position(|l| l == "got-term")
        .expect("TERM seen");
    assert!(int_at < term_at, "{stdout:?}");
}

#[tokio::test]
async fn stop_handle_cancels_from_another_task_and_first_reason_wins() {
    let mut process = ManagedProcess::spawn(sh("echo ready; exec sleep 1000")).unwrap();
    let handle = process.stop_handle();
    read_until(&mut process, "ready").await;
    tokio::spawn(async move {
        handle.cancel();
        handle.stop(StopReason::Timeout); // ignored: already stopping for Cancelled
    });
    let (_, termination, _) = finish(process).await;
    assert_eq!(
        termination,
        Termination::Stopped {
            reason: StopReason::Cancelled,
            escalation: Escalation::Int
        }
    );
}

#[tokio::test]
async fn overall_timeout_stops_a_busy_guest() {
    let spec = sh("while :; do echo tick; sleep 0.1; done").watchdogs(Watchdogs {
        overall_timeout: Some(Duration::from_millis(700)),
        inactivity_timeout: Some(Duration::from_secs(60)),
    });
    let (stdout, termination, _) = finish(ManagedProcess::spawn(spec).unwrap()).await;
    assert_eq!(
        termination,
        Termination::Stopped {
            reason: StopReason::Timeout,
            escalation: Escalation::Int
        }
    );
    assert!(stdout.iter().all(|line| line == "tick"));
}

#[tokio::test]
async fn inactivity_watchdog_stops_a_silent_guest() {
    let spec = sh("echo started; exec sleep 1000").watchdogs(Watchdogs {
        overall_timeout: None,
        inactivity_timeout: Some(Duration::from_millis(500)),
    });
    let (stdout, termination, _) = finish(ManagedProcess::spawn(spec).unwrap()).await;
    assert_eq!(stdout, ["started"]);
    assert_eq!(
        termination,
        Termination::Stopped {
            reason: StopReason::Inactivity,
            escalation: Escalation::Int
        }
    );
}

#[tokio::test]
async fn steady_output_keeps_the_inactivity_watchdog_quiet() {
    // Runs ~2.4 s in total, longer than the 1.5 s inactivity limit, with a line every 0.3 s.
    let spec = sh("for i in 1 2 3 4 5 6 7 8; do echo $i; sleep 0.3; done").watchdogs(Watchdogs {
        overall_timeout: None,
        inactivity_timeout: Some(Duration::from_millis(1500)),
    });
    let (stdout, termination, _) = finish(ManagedProcess::spawn(spec).unwrap()).await;
    assert_eq!(stdout.len(), 8);
    assert_eq!(termination, Termination::Exited { code: 0 });
}
