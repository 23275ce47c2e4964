//! No guest process outlives Switchyard: kill-on-drop, group kill when the leader exits, and
//! the orphan guard when the supervisor itself is SIGKILLed (checked in `/proc`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod process_support;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use process_support::{is_dead, live_group_members, sh, wait_until};
use switchyard_backend::process::{ManagedProcess, ProcessEvent, Termination};

const SUPERVISOR: &str = env!("CARGO_BIN_EXE_sy-test-supervisor");
const BOUND: Duration = Duration::from_secs(15);

async fn first_stdout_line(process: &mut ManagedProcess) -> String {
    loop {
        match process.next_event().await.expect("event") {
            ProcessEvent::Stdout(line) => return line.text,
            ProcessEvent::Stderr(_) => {}
            ProcessEvent::Finished(outcome) => panic!("ended early: {outcome:?}"),
        }
    }
}

#[tokio::test]
async fn dropping_a_running_process_kills_its_whole_group() {
    let mut process = ManagedProcess::spawn(sh("sleep 1000 & echo $!; sleep 1000")).unwrap();
    let pgid = process.pid() as i32;
    let background: i32 = first_stdout_line(&mut process).await.parse().unwrap();
    let members = live_group_members(pgid);
    assert!(members.iter().any(|m| m.pid == background), "{members:?}");
    assert!(members.iter().any(|m| m.pid == pgid), "{members:?}");
    drop(process);
    assert!(
        wait_until(BOUND, || live_group_members(pgid).is_empty()),
        "group {pgid} still has {:?}",
        live_group_members(pgid)
    );
}

#[tokio::test]
async fn leader_exit_kills_what_it_left_behind() {
    // The background sleep keeps stdout open: without the group kill there would be no EOF.
    let mut process = ManagedProcess::spawn(sh("sleep 1000 & echo $!")).unwrap();
    let pgid = process.pid() as i32;
    let background: i32 = first_stdout_line(&mut process).await.parse().unwrap();
    let outcome = process.wait().await;
    assert_eq!(outcome.termination, Termination::Exited { code: 0 });
    assert!(wait_until(BOUND, || is_dead(background)));
    assert!(wait_until(BOUND, || live_group_members(pgid).is_empty()));
}

/// Starts `sy-test-supervisor`, waits for the guest's pgid, returns (supervisor, pgid).
fn start_supervisor(dir: &Path, guard: &str, script: &str) -> (std::process::Child, i32) {
    let pid_file = dir.join("guest.pid");
    let supervisor = Command::new(SUPERVISOR)
        .arg(&pid_file)
        .arg(guard)
        .args(["/bin/sh", "-c", script, "sh"])
        .arg(dir.join("background.pid"))
        .spawn()
        .expect("start sy-test-supervisor");
    assert!(wait_until(BOUND, || pid_file.exists()), "no pid file");
    let pgid = std::fs::read_to_string(&pid_file).unwrap().parse().unwrap();
    (supervisor, pgid)
}

fn read_background_pid(dir: &Path) -> i32 {
    let file = dir.join("background.pid");
    assert!(wait_until(BOUND, || {
        std::fs::read_to_string(&file).is_ok_and(|text| text.ends_with('\n'))
    }));
    std::fs::read_to_string(&file)
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

const GUEST_WITH_BACKGROUND_CHILD: &str = "sleep 1000 & echo $! > \"$1\"; exec sleep 1000";

#[test]
fn sigkill_of_the_supervisor_kills_the_whole_guest_group() {
    let dir = tempfile::tempdir().unwrap();
    let (mut supervisor, pgid) = start_supervisor(dir.path(), "guard", GUEST_WITH_BACKGROUND_CHILD);
    let background = read_background_pid(dir.path());
    // Leader (exec'd sleep), background sleep and the orphan guard.
    assert!(wait_until(BOUND, || live_group_members(pgid).len() == 3));
    supervisor.kill().unwrap(); // SIGKILL: no destructor runs
    supervisor.wait().unwrap();
    assert!(
        wait_until(BOUND, || live_group_members(pgid).is_empty()),
        "group {pgid} survived the supervisor: {:?}",
        live_group_members(pgid)
    );
    assert!(is_dead(background));
}

/// Control experiment: without the guard only the direct child dies (PR_SET_PDEATHSIG); its
/// background child survives. This is why the guard exists, and it shows the test above
/// would catch a guard that does nothing.
#[test]
fn without_the_guard_only_the_direct_child_dies_with_the_supervisor() {
    let dir = tempfile::tempdir().unwrap();
    let (mut supervisor, pgid) =
        start_supervisor(dir.path(), "no-guard", GUEST_WITH_BACKGROUND_CHILD);
    let background = read_background_pid(dir.path());
    assert!(wait_until(BOUND, || live_group_members(pgid).len() == 2));
    supervisor.kill().unwrap();
    supervisor.wait().unwrap();
    assert!(
        wait_until(BOUND, || is_dead(pgid)),
        "death signal did not fire"
    );
    let survivors = live_group_members(pgid);
    // Clean up before asserting so a failure leaves nothing behind.
    let _ = nix::sys::signal::killpg(
        nix::unistd::Pid::from_raw(pgid),
        nix::sys::signal::Signal::SIGKILL,
    );
    assert_eq!(
        survivors.iter().map(|m| m.pid).collect::<Vec<_>>(),
        [background]
    );
}

/// PR_SET_PDEATHSIG fires when the forking *thread* exits; spawning from a thread that ends
/// right away must not kill the guest.
#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
async fn spawning_from_a_short_lived_thread_does_not_kill_the_guest() {
    let runtime = tokio::runtime::Handle::current();
    let mut process = std::thread::spawn(move || {
        let _entered = runtime.enter();
        ManagedProcess::spawn(sh("echo ready; sleep 1; echo still-alive")).unwrap()
    })
    .join()
    .unwrap();
    assert_eq!(first_stdout_line(&mut process).await, "ready");
    assert_eq!(first_stdout_line(&mut process).await, "still-alive");
    assert_eq!(
        process.wait().await.termination,
        Termination::Exited { code: 0 }
    );
}

#[tokio::test]
async fn a_descendant_that_left_the_group_is_ended_and_cannot_hold_the_run() {
    // `setsid` puts the sleep in a session (and group) of its own, holding stdout open: the
    // group kill misses it, the mark finds it, and the run ends at once instead of waiting for
    // the pipe. The control: the same setsid sleep started outside the guest (no mark) stays.
    let control = Command::new("setsid")
        .args(["-f", "sh", "-c", "echo $$ > \"$0\"; exec sleep 1000"])
        .arg(std::env::temp_dir().join(format!("sy-control-{}.pid", std::process::id())))
        .spawn()
        .unwrap()
        .wait()
        .unwrap();
    assert!(control.success());
    let control_file = std::env::temp_dir().join(format!("sy-control-{}.pid", std::process::id()));
    assert!(wait_until(BOUND, || std::fs::read_to_string(&control_file)
        .is_ok_and(|t| t.ends_with('\n'))));
    let control_pid: i32 = std::fs::read_to_string(&control_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();

    let started = std::time::Instant::now();
    let mut process =
        ManagedProcess::spawn(sh("setsid -f sh -c 'echo $$; exec sleep 1000'; sleep 0.2")).unwrap();
    let escaped: i32 = first_stdout_line(&mut process).await.parse().unwrap();
    assert!(
        !is_dead(escaped),
        "the escaped sleep runs while the guest does"
    );
    let outcome = process.wait().await;
    assert_eq!(outcome.termination, Termination::Exited { code: 0 });
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "the run waited for the escaped pipe holder"
    );
    assert!(
        wait_until(BOUND, || is_dead(escaped)),
        "{escaped} outlived the run"
    );
    assert!(!is_dead(control_pid), "an unmarked process is left alone");
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(control_pid),
        nix::sys::signal::Signal::SIGKILL,
    );
    let _ = std::fs::remove_file(control_file);
}
