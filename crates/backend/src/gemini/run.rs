//! Drives one headless Gemini CLI run: spawns the prepared launch as a managed process, parses
//! each stdout line as stream-json, normalizes it into canonical events as it arrives, and maps
//! the end of the process to a typed outcome.

use super::launch::PreparedLaunch;
use crate::process::{
    ExitStatusInfo, Limits, Line, ManagedProcess, ProcessEvent, ProcessSpec, SpawnError,
    StopHandle, StopPolicy, StopReason, StreamStats, Termination, Watchdogs,
};
use chrono::Utc;
use std::time::Duration;
use switchyard_events::event::{RunStarted, Warning};
use switchyard_events::gemini::{GeminiNormalizer, StderrSummary};
use switchyard_events::{Envelope, Event, GuestExit, RunOutcome, StopCause};
use switchyard_protocol::gemini_cli::stream_json::parse_line;

/// Limits of one run.
#[derive(Debug, Clone, Default)]
pub struct RunLimits {
    /// Stop the run after this long.
    pub timeout: Option<Duration>,
    /// Stop the run when the guest prints nothing on stdout for this long.
    pub inactivity: Option<Duration>,
    /// Grace periods of the INT → TERM → KILL escalation.
    pub stop_policy: StopPolicy,
    /// Longest stdout line kept.
    pub max_line_bytes: Option<usize>,
}

/// What the run reports while it runs, in order.
#[derive(Debug, Clone)]
pub enum RunItem {
    /// A canonical event.
    Event(Box<Envelope>),
    /// A raw stdout line, exactly as received (bounded by the line cap).
    RawStdout(Line),
    /// A raw stderr line (diagnostics; bounded).
    RawStderr(Line),
    /// A line Switchyard wrote to the guest's stdin (ACP), exactly as sent.
    RawStdin(Line),
    /// The data of one server-sent event of the guest's server (OpenCode), exactly as
    /// received (bounded).
    RawEvent(Line),
}

/// The end of a run.
#[derive(Debug, Clone)]
pub struct RunReport {
    pub outcome: RunOutcome,
    /// The last assistant turn's text, if any.
    pub final_text: Option<String>,
    /// Events emitted, `RunFinished` included.
    pub events: u64,
    /// Lines kept as `unrecognized`.
    pub unrecognized_lines: u64,
    pub stdout: StreamStats,
    /// The guest's last stderr bytes, for diagnostics.
    pub stderr_tail: String,
    pub duration: Duration,
}

/// A started run. Use [`GeminiRun::stop_handle`] to cancel it from elsewhere.
pub struct GeminiRun {
    process: ManagedProcess,
    started: RunStarted,
    /// Events from elsewhere in the run (the host-tool binding), merged into the sequence.
    host_events: Option<tokio::sync::mpsc::Receiver<Event>>,
    /// The gateway's delivered calls, by delivered call id.
    lookup: Option<DeliveredLookup>,
}

/// The gateway's record of a delivered call, by the id the guest received.
pub type DeliveredLookup = Box<dyn Fn(&str) -> Option<switchyard_events::Delivered> + Send + Sync>;

impl GeminiRun {
    /// Spawns the guest.
    pub fn start(
        launch: &PreparedLaunch,
        limits: &RunLimits,
        started: RunStarted,
    ) -> Result<Self, SpawnError> {
        Ok(GeminiRun {
            process: ManagedProcess::spawn(process_spec(launch, limits))?,
            started,
            host_events: None,
            lookup: None,
        })
    }

    /// Merges `events` (e.g. the host-tool binding's decisions) into the run's event sequence
    /// as they arrive.
    pub fn with_host_events(mut self, events: tokio::sync::mpsc::Receiver<Event>) -> Self {
        self.host_events = Some(events);
        self
    }

    /// Looks up each call the guest names in the gateway's delivered calls, so its events
    /// carry the model's own id.
    pub fn with_lookup(mut self, lookup: DeliveredLookup) -> Self {
        self.lookup = Some(lookup);
        self
    }

    /// A handle that cancels the run (INT → TERM → KILL to the guest's process group).
    pub fn stop_handle(&self) -> StopHandle {
        self.process.stop_handle()
    }

    /// Pid of the guest (its process-group id).
    pub fn pid(&self) -> u32 {
        self.process.pid()
    }

    /// Runs to the end, calling `sink` for every event and raw line as they happen (awaited in
    /// order: a sink that waits, e.g. on a full records queue, slows the run down instead of
    /// dropping anything).
    pub async fn drive(self, sink: impl AsyncFnMut(RunItem)) -> RunReport {
        self.drive_concluding(sink, async |outcome| outcome).await
    }

    /// [`GeminiRun::drive`], with `conclude` applied to the guest's outcome once the guest has
    /// exited (e.g. the host contract: a finish result), before `run_finished` is emitted.
    pub async fn drive_concluding(
        mut self,
        mut sink: impl AsyncFnMut(RunItem),
        conclude: impl AsyncFnOnce(RunOutcome) -> RunOutcome,
    ) -> RunReport {
        let mut seq = 0u64;
        let mut items: Vec<RunItem> = Vec::new();
        let mut emit = |event: Event, guest_timestamp: Option<String>, items: &mut Vec<RunItem>| {
            items.push(RunItem::Event(Box::new(Envelope {
                seq,
                at: Utc::now(),
                guest_timestamp,
                event,
            })));
            seq += 1;
        };
        emit(Event::RunStarted(self.started.clone()), None, &mut items);
        let mut normalizer = GeminiNormalizer::new();
        let mut stderr_summary = StderrSummary::default();
        let outcome = loop {
            for item in items.drain(..) {
                sink(item).await;
            }
            let next = match &mut self.host_events {
                Some(host) => tokio::select! {
                    biased;
                    event = self.process.next_event() => event,
                    host_event = host.recv() => {
                        match host_event {
                            Some(event) => emit(event, None, &mut items),
                            None => self.host_events = None,
                        }
                        continue;
                    }
                },
                None => self.process.next_event().await,
            };
            match next {
                Some(ProcessEvent::Stdout(line)) => {
                    let truncated = line.truncated;
                    let parsed = parse_line(&line.text);
                    items.push(RunItem::RawStdout(line));
                    if truncated {
                        emit(
                            Event::Warning(Warning {
                                message: "a stdout line exceeded the line cap and was truncated"
                                    .into(),
                                derived: true,
                            }),
                            None,
                            &mut items,
                        );
                    }
                    if let (Some(lookup), Some(id)) =
                        (&self.lookup, GeminiNormalizer::named_call(&parsed))
                    {
                        normalizer.delivered(&id, lookup(&id));
                    }
                    for n in normalizer.push_line(parsed) {
                        emit(n.event, n.guest_timestamp, &mut items);
                    }
                }
                Some(ProcessEvent::Stderr(line)) => {
                    stderr_summary.push(&line.text);
                    items.push(RunItem::RawStderr(line));
                }
                Some(ProcessEvent::Finished(outcome)) => break outcome,
                // The process always reports Finished before closing; if it ever does not,
                // the run ends as if the guest vanished.
                None => break crate::process::Outcome::supervisor_lost(),
            }
        };
        let exit = guest_exit(&outcome.termination, outcome.exit);
        let hint = stderr_summary.message();
        let unrecognized = normalizer.unrecognized_lines();
        let (mut events, run_outcome) = normalizer.finish(exit, hint.as_deref());
        let run_outcome = conclude(run_outcome).await;
        // What the host side reported up to now (its decisions during cleanup included).
        if let Some(mut host) = self.host_events.take() {
            host.close();
            while let Some(event) = host.recv().await {
                emit(event, None, &mut items);
            }
        }
        let final_text = conclude_events(&mut events, &run_outcome);
        for event in events {
            emit(event, None, &mut items);
        }
        for item in items {
            sink(item).await;
        }
        RunReport {
            outcome: run_outcome,
            final_text,
            events: seq,
            unrecognized_lines: unrecognized,
            stdout: outcome.stdout,
            stderr_tail: outcome.stderr_tail,
            duration: outcome.duration,
        }
    }
}

/// Puts the concluded outcome into the closing `run_finished`; the run's answer.
pub(crate) fn conclude_events(events: &mut [Event], outcome: &RunOutcome) -> Option<String> {
    let mut final_text = None;
    for event in events {
        if let Event::RunFinished(f) = event {
            f.status = outcome.status;
            f.error.clone_from(&outcome.error);
            f.result.clone_from(&outcome.result);
            final_text = f.final_text.clone();
        }
    }
    final_text
}

/// The managed-process spec of a prepared launch under `limits`.
pub(crate) fn process_spec(launch: &PreparedLaunch, limits: &RunLimits) -> ProcessSpec {
    guest_spec(
        &launch.program,
        &launch.args,
        &launch.env,
        &launch.cwd,
        limits,
    )
}

/// The managed-process spec of a guest: `program args` in `cwd` with exactly `env`, under
/// `limits` (line cap, watchdogs, stop policy).
pub(crate) fn guest_spec(
    program: &std::path::Path,
    args: &[std::ffi::OsString],
    env: &[(std::ffi::OsString, std::ffi::OsString)],
    cwd: &std::path::Path,
    limits: &RunLimits,
) -> ProcessSpec {
    let mut process_limits = Limits::default();
    if let Some(max) = limits.max_line_bytes {
        process_limits.max_line_bytes = max;
    }
    let spec = ProcessSpec::new(program, cwd)
        .args(args.iter().cloned())
        .limits(process_limits)
        .watchdogs(Watchdogs {
            overall_timeout: limits.timeout,
            inactivity_timeout: limits.inactivity,
        })
        .stop_policy(limits.stop_policy.clone());
    env.iter().fold(spec, |spec, (k, v)| spec.env(k, v))
}

/// Maps the process manager's termination (and the leader's raw status) to the canonical
/// guest exit.
pub fn guest_exit(termination: &Termination, raw: ExitStatusInfo) -> GuestExit {
    // Code and signal come from the raw status in every case; the termination adds only why
    // Switchyard stopped the guest, if it did.
    let stopped_by = match termination {
        Termination::Stopped { reason, .. } => Some(match reason {
            StopReason::Cancelled => StopCause::Cancelled,
            StopReason::Timeout => StopCause::Timeout,
            StopReason::Inactivity => StopCause::Inactivity,
            StopReason::Closed => StopCause::Closed,
        }),
        Termination::Exited { .. }
        | Termination::Signaled { .. }
        | Termination::WaitFailed { .. } => None,
    };
    GuestExit {
        code: raw.code,
        signal: raw.signal,
        stopped_by,
    }
}
