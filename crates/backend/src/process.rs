//! Managed guest processes: spawn any guest CLI in its own process group, read its stdout as
//! bounded JSONL lines, keep a bounded stderr tail, stop it gracefully, and never leave orphans.
//!
//! # Usage
//! ```no_run
//! # async fn demo() -> Result<(), switchyard_backend::process::SpawnError> {
//! use switchyard_backend::process::{ManagedProcess, ProcessEvent, ProcessSpec};
//! let spec = ProcessSpec::new("/usr/bin/node", "/tmp/workspace")
//!     .arg("gemini.js")
//!     .env("PATH", "/usr/bin:/bin")
//!     .env("GEMINI_API_KEY", "secret-goes-in-env-never-argv");
//! let mut process = ManagedProcess::spawn(spec)?;
//! let stop = process.stop_handle(); // clone it into a cancel button
//! while let Some(event) = process.next_event().await {
//!     match event {
//!         ProcessEvent::Stdout(line) => { /* parse line.text as JSON */ }
//!         ProcessEvent::Stderr(_line) => {}
//!         ProcessEvent::Finished(outcome) => println!("{:?}", outcome.termination),
//!     }
//! }
//! # drop(stop); Ok(()) }
//! ```
//!
//! # Rules
//! * **Secrets never go in argv** (`/proc/<pid>/cmdline` is world-readable): pass them in
//!   [`ProcessSpec::env`]. The child gets exactly that environment (`env_clear` first).
//! * stdin is `/dev/null` unless [`ProcessSpec::with_stdin_pipe`] asks for a pipe; stdout is
//!   split into lines of at most [`Limits::max_line_bytes`]
//!   (see [`lines`]); stderr is split into lines (forwarded as events) and its last
//!   [`Limits::stderr_ring_bytes`] are kept for diagnostics in [`Outcome::stderr_tail`].
//! * Stopping ([`StopHandle::stop`], overall timeout, inactivity watchdog) sends SIGINT to the
//!   whole group, then SIGTERM after [`StopPolicy::grace_after_int`], then SIGKILL after
//!   [`StopPolicy::grace_after_term`]. [`Termination`] says why the process ended.
//! * When the group leader exits, the rest of its group is SIGKILLed: nothing the guest started
//!   outlives it.
//!
//! # No orphans, even if Switchyard is SIGKILLed
//! Three layers, each tested in `tests/process_orphans.rs` (and, with the real Gemini CLI and
//! its relaunched child process, in `tests/gemini_relaunch_orphans.rs`):
//! 1. Dropping a [`ManagedProcess`] that has not finished SIGKILLs its process group.
//! 2. The direct child gets `PR_SET_PDEATHSIG(SIGKILL)` before exec. Linux fires it when the
//!    *thread* that forked the child exits, so all forks happen on one process-wide spawner
//!    thread that never exits (spawning from any thread is safe). It only covers the direct
//!    child.
//! 3. An **orphan guard** (on by default, [`ProcessSpec::orphan_guard`]): a tiny `/bin/sh`
//!    joined to the guest's process group that ignores SIGINT/SIGTERM/SIGHUP and blocks reading
//!    a "lifeline" pipe whose only write end lives in Switchyard (close-on-exec). When
//!    Switchyard dies for any reason the kernel closes the write end, `read` returns, and the
//!    guard runs `kill -KILL 0`, killing every process still in the group (grandchildren
//!    included). Its group membership also keeps the process-group id from being reused while
//!    Switchyard may still signal it. A guest that moves itself into another process group or
//!    session escapes all of this; Gemini CLI does not, relaunched or not (the Gemini launcher
//!    sets `GEMINI_CLI_NO_RELAUNCH=true` anyway, so it runs as a single node process).

pub mod cancel;
pub mod lines;
pub mod ring;
mod supervisor;

use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio::sync::{mpsc, watch};

pub use lines::{Line, LineSplitter, StreamStats};

/// What to run and how. Build with [`ProcessSpec::new`] and the chained setters.
#[derive(Debug, Clone)]
pub struct ProcessSpec {
    /// Program to execute. Use an absolute path: `PATH` lookup uses the *given* env only.
    pub program: PathBuf,
    /// Arguments. Never put secrets here (argv is world-readable); use `env`.
    pub args: Vec<OsString>,
    /// The complete environment of the child: it gets only these variables.
    pub env: Vec<(OsString, OsString)>,
    /// Working directory of the child.
    pub cwd: PathBuf,
    /// Output bounds.
    pub limits: Limits,
    /// Overall timeout and inactivity watchdog.
    pub watchdogs: Watchdogs,
    /// Grace periods of the INT -> TERM -> KILL escalation.
    pub stop_policy: StopPolicy,
    /// Run the orphan guard (see the module docs). On by default; turning it off leaves only
    /// kill-on-drop and the direct child's death signal.
    pub orphan_guard: bool,
    /// Give the child a stdin pipe (take it with [`ManagedProcess::take_stdin`]) instead of
    /// `/dev/null`: for guests driven over stdio (ACP).
    pub stdin_pipe: bool,
}

impl ProcessSpec {
    /// A spec with default limits, no watchdogs, default grace periods and the orphan guard on.
    pub fn new(program: impl Into<PathBuf>, cwd: impl Into<PathBuf>) -> Self {
        Self {
            program: program.into(),
            args: Vec::new(),
            env: Vec::new(),
            cwd: cwd.into(),
            limits: Limits::default(),
            watchdogs: Watchdogs::default(),
            stop_policy: StopPolicy::default(),
            orphan_guard: true,
            stdin_pipe: false,
        }
    }

    /// Appends one argument.
    pub fn arg(mut self, arg: impl Into<OsString>) -> Self {
        self.args.push(arg.into());
        self
    }

    /// Appends arguments.
    pub fn args<I, S>(mut self, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<OsString>,
    {
        self.args.extend(args.into_iter().map(Into::into));
        self
    }

    /// Adds one environment variable (the child sees only what is added here).
    pub fn env(mut self, key: impl Into<OsString>, value: impl Into<OsString>) -> Self {
        self.env.push((key.into(), value.into()));
        self
    }

    /// Replaces the limits.
    pub fn limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    /// Replaces the watchdogs.
    pub fn watchdogs(mut self, watchdogs: Watchdogs) -> Self {
        self.watchdogs = watchdogs;
        self
    }

    /// Pipes the child's stdin (see [`ProcessSpec::stdin_pipe`]).
    pub fn with_stdin_pipe(mut self) -> Self {
        self.stdin_pipe = true;
        self
    }

    /// Replaces the stop policy.
    pub fn stop_policy(mut self, stop_policy: StopPolicy) -> Self {
        self.stop_policy = stop_policy;
        self
    }
}

/// Memory bounds for the output of one process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// Longest stdout line kept; the rest of a longer line is dropped and counted.
    pub max_line_bytes: usize,
    /// Longest stderr line forwarded as an event.
    pub max_stderr_line_bytes: usize,
    /// How many trailing stderr bytes are kept for [`Outcome::stderr_tail`].
    pub stderr_ring_bytes: usize,
    /// Forward stderr lines as [`ProcessEvent::Stderr`] (the ring is kept either way).
    pub forward_stderr_lines: bool,
    /// Capacity of the event channel. A consumer that stops reading stalls the pipes (and
    /// thus the guest), it never makes Switchyard buffer without bound.
    pub event_channel_capacity: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_line_bytes: 8 * 1024 * 1024,
            max_stderr_line_bytes: 16 * 1024,
            stderr_ring_bytes: 64 * 1024,
            forward_stderr_lines: true,
            event_channel_capacity: 64,
        }
    }
}

/// Time limits that trigger a graceful stop.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Watchdogs {
    /// Stop with [`StopReason::Timeout`] this long after spawn.
    pub overall_timeout: Option<Duration>,
    /// Stop with [`StopReason::Inactivity`] when stdout has been silent this long (any stdout
    /// byte counts as activity, so a long line that is still arriving does too).
    pub inactivity_timeout: Option<Duration>,
}

/// Grace periods of the stop escalation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StopPolicy {
    /// Wait this long after SIGINT before sending SIGTERM.
    pub grace_after_int: Duration,
    /// Wait this long after SIGTERM before sending SIGKILL.
    pub grace_after_term: Duration,
}

impl Default for StopPolicy {
    fn default() -> Self {
        Self {
            grace_after_int: Duration::from_secs(5),
            grace_after_term: Duration::from_secs(5),
        }
    }
}

/// Why Switchyard stopped a process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopReason {
    /// Someone called [`StopHandle::stop`] / [`StopHandle::cancel`].
    Cancelled,
    /// [`Watchdogs::overall_timeout`] elapsed.
    Timeout,
    /// [`Watchdogs::inactivity_timeout`] elapsed without stdout output.
    Inactivity,
    /// The guest's work was done (a session guest answered its last prompt) and it did not
    /// exit on its own in time.
    Closed,
}

/// The strongest signal sent to the group during a stop.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Escalation {
    /// SIGINT was enough.
    Int,
    /// SIGTERM was needed.
    Term,
    /// SIGKILL was needed.
    Kill,
}

/// How the process ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Termination {
    /// It exited by itself with this code.
    Exited { code: i32 },
    /// A signal not sent by Switchyard ended it.
    Signaled { signal: i32 },
    /// Switchyard stopped it; `escalation` is the strongest signal that was needed.
    Stopped {
        reason: StopReason,
        escalation: Escalation,
    },
    /// Waiting for the process failed (should not happen); the group was killed.
    WaitFailed { error: String },
}

/// Raw exit status of the group leader.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ExitStatusInfo {
    /// Exit code, if it exited normally.
    pub code: Option<i32>,
    /// Signal number, if a signal ended it.
    pub signal: Option<i32>,
}

/// Everything known when a process has ended and its pipes are drained.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    /// Why it ended.
    pub termination: Termination,
    /// The leader's raw exit status.
    pub exit: ExitStatusInfo,
    /// stdout counters (lines, truncations, invalid UTF-8...).
    pub stdout: StreamStats,
    /// stderr counters.
    pub stderr: StreamStats,
    /// The last [`Limits::stderr_ring_bytes`] of stderr, decoded lossily.
    pub stderr_tail: String,
    /// stderr bytes that fell out of the ring.
    pub stderr_evicted_bytes: u64,
    /// Time from spawn to the end of output.
    pub duration: Duration,
}

/// What a running process reports, in order per stream. `Finished` is always last.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProcessEvent {
    /// One stdout line (parse it as it comes).
    Stdout(Line),
    /// One stderr line (diagnostics only; never protocol data).
    Stderr(Line),
    /// The process ended and both pipes reached EOF.
    Finished(Outcome),
}

/// Failure to start a process.
#[derive(Debug, thiserror::Error)]
pub enum SpawnError {
    /// The program could not be executed.
    #[error("cannot start {program}: {source}")]
    Program {
        program: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The orphan guard could not be started; the guest was killed.
    #[error("cannot start the orphan guard: {0}")]
    Guard(#[source] std::io::Error),
    /// The process-wide thread that forks guests could not be started or is gone.
    #[error("the process spawner thread failed: {0}")]
    Spawner(#[source] std::io::Error),
    /// `spawn` was called outside a tokio runtime.
    #[error("ManagedProcess::spawn must be called inside a tokio runtime")]
    NoRuntime,
}

/// A cloneable handle that asks a process to stop (INT -> TERM -> KILL).
#[derive(Debug, Clone)]
pub struct StopHandle {
    request: Arc<watch::Sender<Option<StopReason>>>,
    activity: Arc<supervisor::Activity>,
}

impl StopHandle {
    /// Pauses the inactivity watchdog: the guest owes nothing while the host owes it the next
    /// prompt.
    pub fn pause_inactivity(&self) {
        self.activity.pause();
    }

    /// Resumes the inactivity watchdog, its clock starting now (a prompt was just sent).
    pub fn resume_inactivity(&self) {
        self.activity.resume();
    }

    /// Counts as activity now (protocol activity a controller saw besides stdout, e.g. a
    /// server's events).
    pub fn touch(&self) {
        self.activity.touch();
    }

    /// Requests a stop. The first reason wins; later calls do nothing.
    pub fn stop(&self, reason: StopReason) {
        self.request.send_if_modified(|current| {
            if current.is_some() {
                return false;
            }
            *current = Some(reason);
            true
        });
    }

    /// Same as `stop(StopReason::Cancelled)`.
    pub fn cancel(&self) {
        self.stop(StopReason::Cancelled);
    }
}

/// A running guest process. Read its events with [`ManagedProcess::next_event`] (or
/// [`ManagedProcess::wait`]). Dropping it before `Finished` SIGKILLs the whole group.
#[derive(Debug)]
pub struct ManagedProcess {
    events: mpsc::Receiver<ProcessEvent>,
    stop: StopHandle,
    pid: u32,
    finished: Arc<AtomicBool>,
    stdin: Option<tokio::process::ChildStdin>,
}

impl ManagedProcess {
    /// Spawns the process in a new process group. Must be called inside a tokio runtime.
    pub fn spawn(spec: ProcessSpec) -> Result<Self, SpawnError> {
        supervisor::spawn(spec)
    }

    /// Pid of the group leader, which is also the process-group id.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// The child's stdin, once, when the spec asked for a pipe. Dropping it closes the pipe.
    pub fn take_stdin(&mut self) -> Option<tokio::process::ChildStdin> {
        self.stdin.take()
    }

    /// A handle to stop the process from elsewhere.
    pub fn stop_handle(&self) -> StopHandle {
        self.stop.clone()
    }

    /// Requests a stop (see [`StopHandle::stop`]).
    pub fn stop(&self, reason: StopReason) {
        self.stop.stop(reason);
    }

    /// The next event; `None` after [`ProcessEvent::Finished`] has been returned.
    pub async fn next_event(&mut self) -> Option<ProcessEvent> {
        self.events.recv().await
    }

    /// Discards remaining lines and returns the outcome.
    pub async fn wait(mut self) -> Outcome {
        while let Some(event) = self.next_event().await {
            if let ProcessEvent::Finished(outcome) = event {
                return outcome;
            }
        }
        // Only reachable if the supervisor task died (a bug or a runtime shutdown).
        Outcome::supervisor_lost()
    }
}

impl Outcome {
    /// The outcome of a process whose supervisor ended without reporting one.
    pub(crate) fn supervisor_lost() -> Self {
        Outcome {
            termination: Termination::WaitFailed {
                error: "the supervisor ended without reporting an outcome".to_owned(),
            },
            exit: ExitStatusInfo::default(),
            stdout: StreamStats::default(),
            stderr: StreamStats::default(),
            stderr_tail: String::new(),
            stderr_evicted_bytes: 0,
            duration: Duration::ZERO,
        }
    }
}

impl Drop for ManagedProcess {
    fn drop(&mut self) {
        if !self.finished.load(Ordering::Acquire) {
            supervisor::kill_group(self.pid);
        }
    }
}
