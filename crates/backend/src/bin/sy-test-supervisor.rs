//! Test-only helper: a minimal "Switchyard" that starts one guest through
//! [`ManagedProcess`] and then idles, so a test can SIGKILL it and check that the guest's whole
//! process group dies with it (`tests/process_orphans.rs`).
//!
//! Usage: `sy-test-supervisor <pid-file> <guard|no-guard> <program> [args...]`. Writes the
//! guest's pid (= process-group id) to `<pid-file>` once the guest runs, then sleeps forever.
// A test helper: a failed step should stop it loudly.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;

use switchyard_backend::process::{ManagedProcess, ProcessSpec};

#[tokio::main(flavor = "multi_thread", worker_threads = 1)]
async fn main() {
    let mut args = std::env::args_os().skip(1);
    let usage = "usage: sy-test-supervisor <pid-file> <guard|no-guard> <program> [args...]";
    let pid_file = PathBuf::from(args.next().expect(usage));
    let orphan_guard = match args.next().expect(usage).to_str() {
        Some("guard") => true,
        Some("no-guard") => false,
        _ => panic!("{usage}"),
    };
    let program = args.next().expect(usage);
    let mut spec = ProcessSpec::new(program, "/").args(args);
    spec.orphan_guard = orphan_guard;
    let mut process = ManagedProcess::spawn(spec).expect("guest starts");
    // Write to a temporary name first so the test never reads a half-written file.
    let partial = pid_file.with_extension("partial");
    std::fs::write(&partial, process.pid().to_string()).expect("write pid file");
    std::fs::rename(&partial, &pid_file).expect("publish pid file");
    while process.next_event().await.is_some() {}
    // The guest ended by itself; keep idling so the test decides when we die.
    std::future::pending::<()>().await;
}
