//! The machinery behind [`super::ManagedProcess`]: spawning with a process group, death signal
//! and orphan guard, the pipe readers, and the control loop (watchdogs and stop escalation).

use std::io;
use std::process::{ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use nix::sys::signal::{SigHandler, SigSet, SigmaskHow, Signal, killpg, signal, sigprocmask};
use nix::unistd::{Pid, getpid, getppid};
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::process::{Child, Command};
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;

use super::lines::{Line, LineSplitter, StreamStats};
use super::ring::TailRing;
use super::{
    Escalation, ExitStatusInfo, Limits, ManagedProcess, Outcome, ProcessEvent, ProcessSpec,
    SpawnError, StopHandle, StopPolicy, StopReason, Termination, Watchdogs,
};

/// The orphan guard: blocks on the lifeline pipe (its stdin); EOF means Switchyard is gone or
/// done, so it kills its whole process group, itself included. INT/TERM/HUP/QUIT are ignored
/// (set before exec, so there is no window before `trap` runs) because graceful stops signal
/// the whole group.
const GUARD_SCRIPT: &str = "trap '' INT TERM HUP QUIT; read -r _line; kill -KILL 0";

/// The signals a graceful stop may send the group: the guest gets them at their defaults, the
/// orphan guard ignores them.
const STOP_SIGNALS: [Signal; 4] = [
    Signal::SIGINT,
    Signal::SIGTERM,
    Signal::SIGQUIT,
    Signal::SIGHUP,
];

/// Size of one read from a pipe.
const READ_CHUNK_BYTES: usize = 64 * 1024;

/// The variable every guest process starts with, set to the run's own mark: a descendant that
/// left the guest's process group (`setsid`, a pty) still carries it in its initial
/// environment, so it is found and ended with the group.
pub const MARK_VAR: &str = "SWITCHYARD_PROCESS_MARK";

/// After the leader exited and its group was killed, how long the pipe readers may take to
/// reach EOF; a descendant that escaped every kill and still holds a pipe cannot hold the run.
const PIPE_EOF_WAIT: Duration = Duration::from_secs(2);

/// When the guest was last active, and whether the inactivity watchdog is paused.
#[derive(Debug)]
pub(crate) struct Activity {
    start: Instant,
    /// Milliseconds after `start`.
    last_ms: AtomicU64,
    paused: AtomicBool,
}

impl Activity {
    fn new(start: Instant) -> Self {
        Self {
            start,
            last_ms: AtomicU64::new(0),
            paused: AtomicBool::new(false),
        }
    }

    pub(crate) fn touch(&self) {
        self.last_ms.store(
            u64::try_from(self.start.elapsed().as_millis()).unwrap_or(u64::MAX),
            Ordering::Relaxed,
        );
    }

    pub(crate) fn pause(&self) {
        self.paused.store(true, Ordering::Release);
    }

    pub(crate) fn resume(&self) {
        self.touch();
        self.paused.store(false, Ordering::Release);
    }

    fn last(&self) -> Option<Instant> {
        if self.paused.load(Ordering::Acquire) {
            return None;
        }
        Some(self.start + Duration::from_millis(self.last_ms.load(Ordering::Relaxed)))
    }
}

/// A mark unique to one spawn: the pid of Switchyard, the time and a counter.
fn fresh_mark() -> String {
    static COUNT: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!(
        "{}-{nanos}-{}",
        std::process::id(),
        COUNT.fetch_add(1, Ordering::Relaxed)
    )
}

/// Kills every process (but this one) whose initial environment carries `MARK_VAR=mark`, until
/// none is left (bounded: a process forking as fast as it is killed is noted).
fn kill_marked(mark: &str) -> usize {
    let needle = format!("{MARK_VAR}={mark}");
    let me = std::process::id();
    let mut killed = 0;
    for _ in 0..5 {
        let Ok(entries) = std::fs::read_dir("/proc") else {
            return killed;
        };
        let mut found = 0;
        for pid in entries
            .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
            .filter(|pid| *pid != me)
        {
            // Bounded: an environment block is at most a few MiB (ARG_MAX).
            let Ok(environ) = std::fs::read(format!("/proc/{pid}/environ")) else {
                continue;
            };
            if environ
                .split(|b| *b == 0)
                .any(|entry| entry == needle.as_bytes())
            {
                let _ = nix::sys::signal::kill(
                    Pid::from_raw(i32::try_from(pid).unwrap_or(i32::MAX)),
                    Signal::SIGKILL,
                );
                found += 1;
            }
        }
        if found == 0 {
            return killed;
        }
        killed += found;
        std::thread::sleep(Duration::from_millis(20));
    }
    tracing::warn!(
        mark,
        killed,
        "guest descendants kept appearing while being killed"
    );
    killed
}

/// Sends SIGKILL to a process group, ignoring "no such process".
pub(super) fn kill_group(pgid: u32) {
    signal_group(pgid, Signal::SIGKILL);
}

fn signal_group(pgid: u32, signal: Signal) {
    if let Err(error) = killpg(Pid::from_raw(pgid as i32), signal)
        && error != nix::errno::Errno::ESRCH
    {
        tracing::warn!(pgid, ?signal, %error, "cannot signal guest process group");
    }
}

struct OrphanGuard {
    child: Child,
    lifeline: io::PipeWriter,
}

pub(super) fn spawn(spec: ProcessSpec) -> Result<ManagedProcess, SpawnError> {
    let runtime = tokio::runtime::Handle::try_current().map_err(|_| SpawnError::NoRuntime)?;
    let mark = fresh_mark();
    let mut command = Command::new(&spec.program);
    command
        .args(&spec.args)
        .env_clear()
        .envs(spec.env.iter().map(|(key, value)| (key, value)))
        .env(MARK_VAR, &mark)
        .current_dir(&spec.cwd)
        .stdin(if spec.stdin_pipe {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    let parent = getpid();
    // SAFETY: the closure runs in the forked child before exec and only makes async-signal-safe
    // syscalls (sigaction, sigprocmask, prctl, getppid); it allocates only on the error path,
    // where the child is about to fail anyway.
    unsafe {
        command.pre_exec(move || {
            // The stop signals must reach the guest whatever the host inherited: a host started
            // in the background by a script ignores SIGINT and SIGQUIT, and an ignored signal
            // stays ignored across exec (and cannot even be trapped by a shell), which would
            // turn every graceful stop into SIGTERM. A blocked mask would be inherited the same way.
            for stop_signal in STOP_SIGNALS {
                signal(stop_signal, SigHandler::SigDfl).map_err(io::Error::from)?;
            }
            sigprocmask(SigmaskHow::SIG_SETMASK, Some(&SigSet::empty()), None)
                .map_err(io::Error::from)?;
            nix::sys::prctl::set_pdeathsig(Signal::SIGKILL).map_err(io::Error::from)?;
            // The parent may have died between fork and prctl: then no signal would come.
            if getppid() != parent {
                return Err(io::Error::other("parent exited before the guest started"));
            }
            Ok(())
        });
    }
    let program = spec.program.clone();
    let with_guard = spec.orphan_guard;
    let spawn_runtime = runtime.clone();
    let (mut child, guard, pid) = on_spawner_thread(move || {
        let _runtime_guard = spawn_runtime.enter();
        let child = command.spawn().map_err(|source| SpawnError::Program {
            program: program.clone(),
            source,
        })?;
        // A child that was just spawned has a pid until it is waited for.
        let Some(pid) = child.id() else {
            let source = io::Error::other("the child has no pid right after spawning");
            return Err(SpawnError::Program { program, source });
        };
        if !with_guard {
            return Ok((child, None, pid));
        }
        match start_orphan_guard(pid) {
            Ok(guard) => Ok((child, Some(guard), pid)),
            Err(error) => {
                kill_group(pid);
                Err(SpawnError::Guard(error))
            }
        }
    })??;
    let (Some(stdout), Some(stderr)) = (child.stdout.take(), child.stderr.take()) else {
        kill_group(pid);
        return Err(SpawnError::Spawner(io::Error::other(
            "the child's stdout and stderr are not piped",
        )));
    };
    let stdin = child.stdin.take();
    let (events, receiver) = mpsc::channel(spec.limits.event_channel_capacity.max(1));
    let (stop_sender, stop_requests) = watch::channel(None);
    let finished = Arc::new(AtomicBool::new(false));
    let start = Instant::now();
    let activity = Arc::new(Activity::new(start));
    let run = Supervision {
        pid,
        mark,
        activity: activity.clone(),
        start,
        limits: spec.limits,
        watchdogs: spec.watchdogs,
        stop_policy: spec.stop_policy,
        finished: finished.clone(),
        events,
    };
    runtime.spawn(run.supervise(child, guard, stdout, stderr, stop_requests));
    Ok(ManagedProcess {
        events: receiver,
        stop: StopHandle {
            request: Arc::new(stop_sender),
            activity,
        },
        pid,
        finished,
        stdin,
    })
}

type SpawnJob = Box<dyn FnOnce() + Send>;

/// Runs `job` on one process-wide thread that never exits. `PR_SET_PDEATHSIG` fires when the
/// *thread* that forked the child exits, so forking from a caller's short-lived thread (a
/// `spawn_blocking` thread, a scoped thread) would kill the guest when that thread ends.
fn on_spawner_thread<T: Send + 'static>(
    job: impl FnOnce() -> T + Send + 'static,
) -> Result<T, SpawnError> {
    static SPAWNER: OnceLock<Result<Mutex<std::sync::mpsc::Sender<SpawnJob>>, String>> =
        OnceLock::new();
    let spawner = SPAWNER.get_or_init(|| {
        let (sender, jobs) = std::sync::mpsc::channel::<SpawnJob>();
        std::thread::Builder::new()
            .name("switchyard-spawner".to_owned())
            .spawn(move || {
                for job in jobs {
                    job();
                }
            })
            .map(|_| Mutex::new(sender))
            .map_err(|e| e.to_string())
    });
    let lost = |what: &str| SpawnError::Spawner(io::Error::other(what.to_owned()));
    let spawner = spawner.as_ref().map_err(|e| lost(e))?;
    let (result_sender, result) = std::sync::mpsc::sync_channel(1);
    spawner
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .send(Box::new(move || {
            let _ = result_sender.send(job());
        }))
        .map_err(|_| lost("the process spawner thread is gone"))?;
    result
        .recv()
        .map_err(|_| lost("the process spawner thread dropped a job"))
}

fn start_orphan_guard(pgid: u32) -> io::Result<OrphanGuard> {
    let (reader, lifeline) = io::pipe()?;
    let mut command = Command::new("/bin/sh");
    command
        .arg("-c")
        .arg(GUARD_SCRIPT)
        .env_clear()
        .current_dir("/")
        .stdin(Stdio::from(reader))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(pgid as i32);
    // SAFETY: only `signal(2)` calls with SIG_IGN, which are async-signal-safe.
    unsafe {
        command.pre_exec(|| {
            for ignored in STOP_SIGNALS {
                signal(ignored, SigHandler::SigIgn).map_err(io::Error::from)?;
            }
            Ok(())
        });
    }
    let child = command.spawn()?;
    Ok(OrphanGuard { child, lifeline })
}

/// State shared by the control loop and the pipe readers of one process.
struct Supervision {
    pid: u32,
    /// The value of [`MARK_VAR`] in the guest's environment.
    mark: String,
    activity: Arc<Activity>,
    start: Instant,
    limits: Limits,
    watchdogs: Watchdogs,
    stop_policy: StopPolicy,
    finished: Arc<AtomicBool>,
    events: mpsc::Sender<ProcessEvent>,
}

/// Where the control loop is.
#[derive(Debug, Clone, Copy)]
enum Phase {
    Running,
    Stopping {
        reason: StopReason,
        escalation: Escalation,
        next_escalation: Option<Instant>,
    },
}

impl Supervision {
    async fn supervise(
        self,
        mut child: Child,
        guard: Option<OrphanGuard>,
        stdout: impl AsyncRead + Unpin + Send + 'static,
        stderr: impl AsyncRead + Unpin + Send + 'static,
        stop_requests: watch::Receiver<Option<StopReason>>,
    ) {
        let stdout_task = tokio::spawn(read_stdout(
            stdout,
            self.limits.max_line_bytes,
            self.events.clone(),
            self.activity.clone(),
        ));
        let stderr_task = tokio::spawn(read_stderr(
            stderr,
            self.limits.clone(),
            self.events.clone(),
        ));

        let (status, phase) = self.control(&mut child, stop_requests).await;

        // The leader is gone: nothing it started may outlive it. The guard is still a member,
        // so the group id cannot have been reused yet. Descendants that left the group are
        // found by their mark.
        kill_group(self.pid);
        let mark = self.mark.clone();
        let escaped = tokio::task::spawn_blocking(move || kill_marked(&mark))
            .await
            .unwrap_or(0);
        if escaped > 0 {
            tracing::debug!(
                pid = self.pid,
                escaped,
                "ended guest descendants outside its group"
            );
        }
        self.finished.store(true, Ordering::Release);
        if let Some(guard) = guard {
            drop(guard.lifeline);
            let mut guard_child = guard.child;
            let _ = guard_child.wait().await;
        }
        // Bounded: a pipe still held open by something no kill reached must not hold the run.
        let eof_by = tokio::time::Instant::now() + PIPE_EOF_WAIT;
        let stdout_abort = stdout_task.abort_handle();
        let stdout_stats = match tokio::time::timeout_at(eof_by, stdout_task).await {
            Ok(stats) => stats.unwrap_or_default(),
            Err(_) => {
                stdout_abort.abort();
                tracing::warn!(
                    pid = self.pid,
                    "guest stdout still open after its exit; cut"
                );
                StreamStats::default()
            }
        };
        let stderr_abort = stderr_task.abort_handle();
        let (stderr_stats, ring) = match tokio::time::timeout_at(eof_by, stderr_task).await {
            Ok(read) => read.unwrap_or_else(|_| (StreamStats::default(), TailRing::new(0))),
            Err(_) => {
                stderr_abort.abort();
                (StreamStats::default(), TailRing::new(0))
            }
        };

        let (termination, exit) = termination_of(status, phase);
        let outcome = Outcome {
            termination,
            exit,
            stdout: stdout_stats,
            stderr: stderr_stats,
            stderr_tail: String::from_utf8_lossy(&ring.contents()).into_owned(),
            stderr_evicted_bytes: ring.evicted_bytes(),
            duration: self.start.elapsed(),
        };
        let _ = self.events.send(ProcessEvent::Finished(outcome)).await;
    }

    /// Waits for the leader to exit while running the watchdogs and the stop escalation.
    async fn control(
        &self,
        child: &mut Child,
        mut stop_requests: watch::Receiver<Option<StopReason>>,
    ) -> (io::Result<ExitStatus>, Phase) {
        let overall_deadline = self.watchdogs.overall_timeout.map(|t| self.start + t);
        let mut phase = Phase::Running;
        let mut stop_handles_alive = true;
        loop {
            let wake_at = match phase {
                Phase::Running => earliest(overall_deadline, self.inactivity_deadline()),
                Phase::Stopping {
                    next_escalation, ..
                } => next_escalation,
            };
            tokio::select! {
                status = child.wait() => return (status, phase),
                changed = stop_requests.changed(),
                    if stop_handles_alive && matches!(phase, Phase::Running) =>
                {
                    match changed {
                        Ok(()) => {
                            let requested = *stop_requests.borrow_and_update();
                            if let Some(reason) = requested {
                                phase = self.begin_stop(reason);
                            }
                        }
                        Err(_) => stop_handles_alive = false,
                    }
                }
                () = sleep_until(wake_at) => {
                    let now = Instant::now();
                    let due = |deadline: Option<Instant>| deadline.is_some_and(|d| d <= now);
                    phase = match phase {
                        Phase::Running if due(overall_deadline) => {
                            self.begin_stop(StopReason::Timeout)
                        }
                        Phase::Running if due(self.inactivity_deadline()) => {
                            self.begin_stop(StopReason::Inactivity)
                        }
                        Phase::Running => Phase::Running,
                        Phase::Stopping { reason, escalation, .. } => self.escalate(reason, escalation),
                    };
                }
            }
        }
    }

    /// When the inactivity watchdog fires if the guest stays inactive from now on (never while
    /// it is paused).
    fn inactivity_deadline(&self) -> Option<Instant> {
        let last = self.activity.last()?;
        self.watchdogs.inactivity_timeout.map(|limit| last + limit)
    }

    fn begin_stop(&self, reason: StopReason) -> Phase {
        tracing::debug!(
            pid = self.pid,
            ?reason,
            "stopping guest: SIGINT to its group"
        );
        signal_group(self.pid, Signal::SIGINT);
        Phase::Stopping {
            reason,
            escalation: Escalation::Int,
            next_escalation: Some(Instant::now() + self.stop_policy.grace_after_int),
        }
    }

    fn escalate(&self, reason: StopReason, current: Escalation) -> Phase {
        let (signal, escalation, next_escalation) = match current {
            Escalation::Int => (
                Signal::SIGTERM,
                Escalation::Term,
                Some(Instant::now() + self.stop_policy.grace_after_term),
            ),
            Escalation::Term | Escalation::Kill => (Signal::SIGKILL, Escalation::Kill, None),
        };
        tracing::debug!(
            pid = self.pid,
            ?signal,
            "guest ignored the previous stop signal"
        );
        signal_group(self.pid, signal);
        Phase::Stopping {
            reason,
            escalation,
            next_escalation,
        }
    }
}

fn earliest(a: Option<Instant>, b: Option<Instant>) -> Option<Instant> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline).await,
        None => std::future::pending().await,
    }
}

fn termination_of(status: io::Result<ExitStatus>, phase: Phase) -> (Termination, ExitStatusInfo) {
    use std::os::unix::process::ExitStatusExt;
    let status = match status {
        Ok(status) => status,
        Err(error) => {
            let termination = Termination::WaitFailed {
                error: error.to_string(),
            };
            return (termination, ExitStatusInfo::default());
        }
    };
    let exit = ExitStatusInfo {
        code: status.code(),
        signal: status.signal(),
    };
    let termination = match phase {
        Phase::Stopping {
            reason, escalation, ..
        } => Termination::Stopped { reason, escalation },
        Phase::Running => match (exit.code, exit.signal) {
            (Some(code), _) => Termination::Exited { code },
            (None, Some(signal)) => Termination::Signaled { signal },
            (None, None) => Termination::WaitFailed {
                error: format!("exit status without code or signal: {status:?}"),
            },
        },
    };
    (termination, exit)
}

async fn read_stdout(
    pipe: impl AsyncRead + Unpin,
    max_line_bytes: usize,
    events: mpsc::Sender<ProcessEvent>,
    activity: Arc<Activity>,
) -> StreamStats {
    let forward = Forwarder::new(events, true);
    pump_lines(pipe, max_line_bytes, forward, ProcessEvent::Stdout, |_| {
        activity.touch();
    })
    .await
}

async fn read_stderr(
    pipe: impl AsyncRead + Unpin,
    limits: Limits,
    events: mpsc::Sender<ProcessEvent>,
) -> (StreamStats, TailRing) {
    let mut ring = TailRing::new(limits.stderr_ring_bytes);
    let forward = Forwarder::new(events, limits.forward_stderr_lines);
    let stats = pump_lines(
        pipe,
        limits.max_stderr_line_bytes,
        forward,
        ProcessEvent::Stderr,
        |chunk| ring.push(chunk),
    )
    .await;
    (stats, ring)
}

/// Reads `pipe` to EOF: hands every raw chunk to `on_chunk`, then forwards its complete lines
/// (and a final partial one) as `as_event(line)`. Returns the stream's counters.
async fn pump_lines(
    mut pipe: impl AsyncRead + Unpin,
    max_line_bytes: usize,
    mut forward: Forwarder,
    as_event: fn(Line) -> ProcessEvent,
    mut on_chunk: impl FnMut(&[u8]),
) -> StreamStats {
    let mut splitter = LineSplitter::new(max_line_bytes);
    let mut chunk = vec![0u8; READ_CHUNK_BYTES];
    let mut lines = Vec::new();
    while let Some(read) = read_some(&mut pipe, &mut chunk).await {
        on_chunk(&chunk[..read]);
        splitter.push(&chunk[..read], &mut lines);
        for line in lines.drain(..) {
            forward.send(as_event(line)).await;
        }
    }
    if let Some(line) = splitter.finish() {
        forward.send(as_event(line)).await;
    }
    splitter.stats().clone()
}

/// Reads one chunk; `None` at EOF or on a read error (the pipe is then unusable).
async fn read_some(pipe: &mut (impl AsyncRead + Unpin), chunk: &mut [u8]) -> Option<usize> {
    loop {
        match pipe.read(chunk).await {
            Ok(0) => return None,
            Ok(read) => return Some(read),
            Err(error) if error.kind() == io::ErrorKind::Interrupted => continue,
            Err(error) => {
                tracing::warn!(%error, "reading a guest pipe failed");
                return None;
            }
        }
    }
}

/// Sends events until the receiver is gone, then keeps the pipe drained without sending.
struct Forwarder {
    events: mpsc::Sender<ProcessEvent>,
    enabled: bool,
}

impl Forwarder {
    fn new(events: mpsc::Sender<ProcessEvent>, enabled: bool) -> Self {
        Self { events, enabled }
    }

    async fn send(&mut self, event: ProcessEvent) {
        if self.enabled && self.events.send(event).await.is_err() {
            self.enabled = false;
        }
    }
}
