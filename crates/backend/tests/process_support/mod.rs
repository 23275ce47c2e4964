//! Helpers shared by the `process_*` integration tests: spec builders for `/bin/sh` scripts and
//! `/proc` inspection of process groups.

#![allow(dead_code)] // each test binary uses a different subset

use std::time::{Duration, Instant};

use switchyard_backend::process::{ProcessEvent, ProcessSpec};

/// A spec that runs `/bin/sh -c script` with a minimal PATH.
pub fn sh(script: &str) -> ProcessSpec {
    ProcessSpec::new("/bin/sh", std::env::temp_dir())
        .arg("-c")
        .arg(script)
        .env("PATH", "/usr/bin:/bin")
}

/// Splits events into stdout texts, stderr texts and the final outcome.
pub fn split_events(
    events: Vec<ProcessEvent>,
) -> (
    Vec<String>,
    Vec<String>,
    switchyard_backend::process::Outcome,
) {
    let mut stdout = Vec::new();
    let mut stderr = Vec::new();
    let mut outcome = None;
    for event in events {
        match event {
            ProcessEvent::Stdout(line) => stdout.push(line.text),
            ProcessEvent::Stderr(line) => stderr.push(line.text),
            ProcessEvent::Finished(finished) => {
                assert!(outcome.is_none(), "Finished must come once");
                outcome = Some(finished);
            }
        }
    }
    (stdout, stderr, outcome.expect("Finished is always sent"))
}

/// One `/proc/<pid>/stat` entry: pid, state letter, process group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcStat {
    pub pid: i32,
    pub state: char,
    pub pgid: i32,
}

/// Reads `/proc/<pid>/stat`; `None` when the process is gone.
pub fn proc_stat(pid: i32) -> Option<ProcStat> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name is in parentheses and may contain spaces: parse after the last ')'.
    let rest = &text[text.rfind(')')? + 2..];
    let mut fields = rest.split(' ');
    let state = fields.next()?.chars().next()?;
    let _ppid = fields.next()?;
    let pgid = fields.next()?.parse().ok()?;
    Some(ProcStat { pid, state, pgid })
}

/// Live (non-zombie) processes whose process group is `pgid`.
pub fn live_group_members(pgid: i32) -> Vec<ProcStat> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter_map(proc_stat)
        .filter(|stat| stat.pgid == pgid && stat.state != 'Z' && stat.state != 'X')
        .collect()
}

/// True if `pid` is gone or a zombie (PID 1 in a container may never reap it).
pub fn is_dead(pid: i32) -> bool {
    proc_stat(pid).is_none_or(|stat| stat.state == 'Z' || stat.state == 'X')
}

/// Polls `condition` every 20 ms until it holds or `limit` passes; returns whether it held.
pub fn wait_until(limit: Duration, mut condition: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + limit;
    loop {
        if condition() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}
