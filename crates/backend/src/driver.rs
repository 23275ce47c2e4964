//! The neutral run driver: one loop for every agent. An agent is a launch (its process spec), a
//! [`Controller`] (its control protocol, on a task of its own) and a [`Mapping`] (its notes to
//! canonical events and outcome); the driver owns everything else:
//!
//! - the managed process: its stdout lines (recorded raw, handed to the controller), stderr,
//!   and its end;
//! - the event sequence: `run_started`, the mapped notes, the host's events (the binding's
//!   decisions) merged as they arrive, then the closing events;
//! - delivered-call lookups: each call id a note names is looked up in the host's record once,
//!   and the answer handed to the mapping as a note of its own before the note, so a recorded
//!   transcript replays to the same events;
//! - the close: when the controller is done, the guest gets a grace to exit, then its group is
//!   stopped (`StopCause::Closed`, which leaves the outcome to the prompts);
//! - the conclusion: the mapping's outcome, then the host's (`conclude`), into `run_finished`.
//!
//! Inactivity is the process watchdog's (`Watchdogs::inactivity_timeout`): stdout lines count,
//! a controller counts other protocol activity with `StopHandle::touch`, and pauses it while
//! the host owes the next prompt.

use std::sync::Arc;
use std::time::Duration;

use chrono::Utc;
use serde::Serialize;
use switchyard_events::event::RunStarted;
use switchyard_events::gemini::{Normalized, StderrSummary};
use switchyard_events::{Delivered, Envelope, Event, GuestExit, RunOutcome};
use tokio::sync::mpsc;

use crate::permission::PermissionHost;
use crate::process::cancel::GracefulCancel;
use crate::process::{
    ExitStatusInfo, Line, ManagedProcess, ProcessEvent, StopReason, StreamStats, Termination,
};
use switchyard_events::StopCause;

/// Limits of one run.
#[derive(Debug, Clone, Default)]
pub struct RunLimits {
    /// Stop the run after this long.
    pub timeout: Option<Duration>,
    /// Stop the run when the guest shows no protocol activity for this long (never while the
    /// host owes it the next prompt).
    pub inactivity: Option<Duration>,
    /// Grace periods of the INT → TERM → KILL escalation.
    pub stop_policy: crate::process::StopPolicy,
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
    /// A line Switchyard wrote to the guest's stdin, exactly as sent.
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
    /// Guest messages kept as `unrecognized`.
    pub unrecognized_lines: u64,
    pub stdout: StreamStats,
    /// The guest's last stderr bytes, for diagnostics.
    pub stderr_tail: String,
    pub duration: Duration,
}

/// An agent's notes → canonical events and outcome (deterministic: a transcript of notes
/// replays to the same events).
pub trait Mapping: Send + 'static {
    type Note: Clone + Send + Serialize + 'static;

    /// The delivered call ids `note` names, to look up before it is mapped.
    fn calls_named(&self, note: &Self::Note) -> Vec<String>;
    /// The note that carries a lookup's answer (the mapping's own, so transcripts keep it).
    fn delivered_note(&self, call_id: String, call: Option<Delivered>) -> Self::Note;
    /// The events of one note.
    fn note(&mut self, note: Self::Note) -> Vec<Normalized>;
    /// Guest messages kept as `unrecognized` so far.
    fn unrecognized(&self) -> u64;
    /// The closing events and the outcome, once the guest is gone.
    fn finish(
        &mut self,
        exit: GuestExit,
        stderr: &StderrSummary,
        stderr_tail: &str,
    ) -> (Vec<Event>, RunOutcome);
}

/// Events without a guest timestamp (protocols whose messages carry none), as mapped.
pub fn untimed(events: Vec<Event>) -> Vec<Normalized> {
    events
        .into_iter()
        .map(|event| Normalized {
            event,
            guest_timestamp: None,
        })
        .collect()
}

/// What a controller reports to the driver.
#[derive(Debug)]
pub enum Report<N> {
    /// A note to map.
    Note(N),
    /// A raw record of the protocol (a stdin line, a server-sent event).
    Raw(RunItem),
    /// The controller is done: the guest has this long to exit on its own (`ZERO`: stop it
    /// now).
    Done { close_after: Duration },
}

/// What a controller works with.
pub struct ControllerIo<N> {
    /// The guest's stdout lines (already recorded raw); closed once the guest exited.
    pub stdout: mpsc::Receiver<Line>,
    /// The guest's stdin, when its launch pipes it.
    pub stdin: Option<tokio::process::ChildStdin>,
    pub reports: mpsc::UnboundedSender<Report<N>>,
    /// The run's cancel, and the process's inactivity controls.
    pub cancel: GracefulCancel,
    pub host: Arc<dyn PermissionHost>,
}

impl<N> ControllerIo<N> {
    pub fn note(&self, note: N) {
        let _ = self.reports.send(Report::Note(note));
    }

    pub fn raw(&self, item: RunItem) {
        let _ = self.reports.send(Report::Raw(item));
    }

    pub fn done(&self, close_after: Duration) {
        let _ = self.reports.send(Report::Done { close_after });
    }
}

/// An agent's control protocol, on a task of its own.
pub trait Controller: Send + 'static {
    type Note: Send + 'static;
    fn run(
        self: Box<Self>,
        io: ControllerIo<Self::Note>,
    ) -> futures_util::future::BoxFuture<'static, ()>;
}

/// One run, ready to drive.
pub struct Driver<M: Mapping> {
    pub process: ManagedProcess,
    pub started: RunStarted,
    pub mapping: M,
    pub controller: Box<dyn Controller<Note = M::Note>>,
    pub cancel: GracefulCancel,
    pub host: Arc<dyn PermissionHost>,
    /// Events from elsewhere in the run (the host-tool binding), merged into the sequence.
    pub host_events: Option<mpsc::Receiver<Event>>,
    /// Events of the launch itself (what was found in the workspace), right after
    /// `run_started`.
    pub launch_events: Vec<Event>,
    /// Every note, as mapped (fixture capture).
    pub transcript: Option<mpsc::UnboundedSender<M::Note>>,
}

/// The event sequence of a run.
struct Emitter {
    seq: u64,
    items: Vec<RunItem>,
}

impl Emitter {
    fn emit(&mut self, event: Event, guest_timestamp: Option<String>) {
        self.items.push(RunItem::Event(Box::new(Envelope {
            seq: self.seq,
            at: Utc::now(),
            guest_timestamp,
            event,
        })));
        self.seq += 1;
    }
}

/// How long a controller may take to end once its guest is gone.
const CONTROLLER_END: Duration = Duration::from_secs(5);

impl<M: Mapping> Driver<M> {
    /// Runs to the end, calling `sink` for every event and raw line in order (awaited: a sink
    /// that waits slows the run down, it loses nothing); `conclude` is applied to the outcome
    /// once the guest is gone, before `run_finished`.
    pub async fn drive(
        self,
        mut sink: impl AsyncFnMut(RunItem),
        conclude: impl AsyncFnOnce(RunOutcome) -> RunOutcome,
    ) -> RunReport {
        let Driver {
            mut process,
            started,
            mut mapping,
            controller,
            cancel,
            host,
            mut host_events,
            launch_events,
            transcript,
        } = self;
        let (stdout_tx, stdout_rx) = mpsc::channel::<Line>(256);
        let (reports_tx, mut reports) = mpsc::unbounded_channel();
        let io = ControllerIo {
            stdout: stdout_rx,
            stdin: process.take_stdin(),
            reports: reports_tx,
            cancel: cancel.clone(),
            host: host.clone(),
        };
        let controller = tokio::spawn(controller.run(io));
        let mut out = Emitter {
            seq: 0,
            items: Vec::new(),
        };
        out.emit(Event::RunStarted(started), None);
        for event in launch_events {
            out.emit(event, None);
        }
        let mut notes = NoteFlow {
            mapping: &mut mapping,
            host: host.as_ref(),
            transcript: transcript.as_ref(),
            looked_up: std::collections::HashSet::new(),
        };
        let mut stderr_summary = StderrSummary::default();
        let mut stdout_tx = Some(stdout_tx);
        let mut reports_open = true;
        let stop = process.stop_handle();
        let outcome = loop {
            for item in out.items.drain(..) {
                sink(item).await;
            }
            tokio::select! {
                biased;
                event = process.next_event() => match event {
                    Some(ProcessEvent::Stdout(line)) => {
                        out.items.push(RunItem::RawStdout(line.clone()));
                        if let Some(tx) = &stdout_tx
                            && tx.send(line).await.is_err()
                        {
                            stdout_tx = None;
                        }
                    }
                    Some(ProcessEvent::Stderr(line)) => {
                        stderr_summary.push(&line.text);
                        out.items.push(RunItem::RawStderr(line));
                    }
                    Some(ProcessEvent::Finished(outcome)) => break outcome,
                    // The process always reports Finished before closing; if it ever does not,
                    // the run ends as if the guest vanished.
                    None => break crate::process::Outcome::supervisor_lost(),
                },
                report = reports.recv(), if reports_open => match report {
                    Some(Report::Note(note)) => notes.map(note, &mut out),
                    Some(Report::Raw(item)) => out.items.push(item),
                    Some(Report::Done { close_after }) => close(&stop, &cancel, close_after),
                    None => reports_open = false,
                },
                event = recv_host(&mut host_events) => match event {
                    Some(event) => out.emit(event, None),
                    None => host_events = None,
                },
            }
        };
        // The guest is gone: its stdout closes, so the controller ends; map what it reported.
        drop(stdout_tx);
        let _ = tokio::time::timeout(CONTROLLER_END, controller).await;
        while let Ok(report) = reports.try_recv() {
            match report {
                Report::Note(note) => notes.map(note, &mut out),
                Report::Raw(item) => out.items.push(item),
                Report::Done { .. } => {}
            }
        }
        let exit = guest_exit(&outcome.termination, outcome.exit);
        let unrecognized = mapping.unrecognized();
        let (mut events, run_outcome) = mapping.finish(exit, &stderr_summary, &outcome.stderr_tail);
        let run_outcome = conclude(run_outcome).await;
        // What the host side reported up to now (its decisions during cleanup included).
        if let Some(mut host) = host_events.take() {
            host.close();
            while let Some(event) = host.recv().await {
                out.emit(event, None);
            }
        }
        let final_text = conclude_events(&mut events, &run_outcome);
        for event in events {
            out.emit(event, None);
        }
        for item in out.items.drain(..) {
            sink(item).await;
        }
        RunReport {
            outcome: run_outcome,
            final_text,
            events: out.seq,
            unrecognized_lines: unrecognized,
            stdout: outcome.stdout,
            stderr_tail: outcome.stderr_tail,
            duration: outcome.duration,
        }
    }
}

/// Notes into events: lookups first, the transcript kept.
struct NoteFlow<'a, M: Mapping> {
    mapping: &'a mut M,
    host: &'a dyn PermissionHost,
    transcript: Option<&'a mpsc::UnboundedSender<M::Note>>,
    looked_up: std::collections::HashSet<String>,
}

impl<M: Mapping> NoteFlow<'_, M> {
    fn map(&mut self, note: M::Note, out: &mut Emitter) {
        for call_id in self.mapping.calls_named(&note) {
            if self.looked_up.insert(call_id.clone()) {
                let call = self.host.delivered(&call_id);
                let lookup = self.mapping.delivered_note(call_id, call);
                self.one(lookup, out);
            }
        }
        self.one(note, out);
    }

    fn one(&mut self, note: M::Note, out: &mut Emitter) {
        if let Some(transcript) = self.transcript {
            let _ = transcript.send(note.clone());
        }
        for n in self.mapping.note(note) {
            out.emit(n.event, n.guest_timestamp);
        }
    }
}

/// The controller is done: the guest exits on its own within `after`, or is stopped.
fn close(stop: &crate::process::StopHandle, cancel: &GracefulCancel, after: Duration) {
    if cancel.is_cancelled() {
        // The cancel's own escalation stops the guest.
        return;
    }
    if after.is_zero() {
        stop.stop(StopReason::Closed);
        return;
    }
    let stop = stop.clone();
    tokio::spawn(async move {
        tokio::time::sleep(after).await;
        stop.stop(StopReason::Closed);
    });
}

async fn recv_host(events: &mut Option<mpsc::Receiver<Event>>) -> Option<Event> {
    match events {
        Some(rx) => rx.recv().await,
        None => std::future::pending().await,
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

/// The managed-process spec of a guest: `program args` in `cwd` with exactly `env`, under
/// `limits` (line cap, watchdogs, stop policy).
pub fn guest_spec(
    program: &std::path::Path,
    args: &[std::ffi::OsString],
    env: &[(std::ffi::OsString, std::ffi::OsString)],
    cwd: &std::path::Path,
    limits: &RunLimits,
) -> crate::process::ProcessSpec {
    let mut process_limits = crate::process::Limits::default();
    if let Some(max) = limits.max_line_bytes {
        process_limits.max_line_bytes = max;
    }
    let spec = crate::process::ProcessSpec::new(program, cwd)
        .args(args.iter().cloned())
        .limits(process_limits)
        .watchdogs(crate::process::Watchdogs {
            overall_timeout: limits.timeout,
            inactivity_timeout: limits.inactivity,
        })
        .stop_policy(limits.stop_policy.clone());
    env.iter().fold(spec, |spec, (k, v)| spec.env(k, v))
}

#[cfg(test)]
#[path = "driver_tests.rs"]
mod tests;
