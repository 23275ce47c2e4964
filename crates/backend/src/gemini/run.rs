//! Headless Gemini CLI (`gemini -p … --output-format stream-json`) on the neutral driver: its
//! controller hands each stdout line over as a note (the CLI needs nothing on stdin), its
//! mapping parses the line as stream-json and normalizes it; the outcome comes from the
//! terminal `result` line and the process exit.

use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use switchyard_events::event::{RunStarted, Warning};
use switchyard_events::gemini::{GeminiNormalizer, Normalized, StderrSummary};
use switchyard_events::{Delivered, Event, GuestExit, RunOutcome};
use switchyard_protocol::gemini_cli::stream_json::parse_line;

use super::launch::PreparedLaunch;
use crate::driver::{Controller, ControllerIo, Driver, Mapping, RunLimits};
use crate::permission::PermissionHost;
use crate::process::cancel::GracefulCancel;
use crate::process::{ManagedProcess, ProcessSpec, SpawnError};

/// What a headless run observes, in order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HeadlessNote {
    /// One stdout line, as received (`truncated`: it exceeded the line cap).
    Line { text: String, truncated: bool },
    /// What the gateway delivered under a call id a line named.
    Delivered {
        call_id: String,
        call: Option<Box<Delivered>>,
    },
}

/// stream-json lines → canonical events.
#[derive(Debug, Default)]
pub struct HeadlessMapping {
    normalizer: GeminiNormalizer,
}

impl Mapping for HeadlessMapping {
    type Note = HeadlessNote;

    fn calls_named(&self, note: &HeadlessNote) -> Vec<String> {
        match note {
            HeadlessNote::Line { text, .. } => GeminiNormalizer::named_call(&parse_line(text))
                .into_iter()
                .collect(),
            HeadlessNote::Delivered { .. } => Vec::new(),
        }
    }

    fn delivered_note(&self, call_id: String, call: Option<Delivered>) -> HeadlessNote {
        HeadlessNote::Delivered {
            call_id,
            call: call.map(Box::new),
        }
    }

    fn note(&mut self, note: HeadlessNote) -> Vec<Normalized> {
        match note {
            HeadlessNote::Line { text, truncated } => {
                let mut out = Vec::new();
                if truncated {
                    out.push(Normalized {
                        event: Event::Warning(Warning {
                            message: "a stdout line exceeded the line cap and was truncated".into(),
                            derived: true,
                        }),
                        guest_timestamp: None,
                    });
                }
                out.extend(self.normalizer.push_line(parse_line(&text)));
                out
            }
            HeadlessNote::Delivered { call_id, call } => {
                self.normalizer.delivered(&call_id, call.map(|c| *c));
                Vec::new()
            }
        }
    }

    fn unrecognized(&self) -> u64 {
        self.normalizer.unrecognized_lines()
    }

    fn finish(
        &mut self,
        exit: GuestExit,
        stderr: &StderrSummary,
        _stderr_tail: &str,
    ) -> (Vec<Event>, RunOutcome) {
        let hint = stderr.message();
        std::mem::take(&mut self.normalizer).finish(exit, hint.as_deref())
    }
}

/// Hands every stdout line over; the CLI ends by itself.
struct HeadlessController;

impl Controller for HeadlessController {
    type Note = HeadlessNote;

    fn run(
        self: Box<Self>,
        mut io: ControllerIo<HeadlessNote>,
    ) -> futures_util::future::BoxFuture<'static, ()> {
        Box::pin(async move {
            while let Some(line) = io.stdout.recv().await {
                io.note(HeadlessNote::Line {
                    text: line.text,
                    truncated: line.truncated,
                });
            }
        })
    }
}

/// Spawns the guest for a headless run: a driver ready to drive. Cancelling it stops the
/// group at once (INT → TERM → KILL): a headless CLI has no way to be asked.
pub fn headless(
    launch: &PreparedLaunch,
    limits: &RunLimits,
    started: RunStarted,
    host: Arc<dyn PermissionHost>,
) -> Result<Driver<HeadlessMapping>, SpawnError> {
    let process = ManagedProcess::spawn(process_spec(launch, limits))?;
    let cancel = GracefulCancel::new(process.stop_handle(), Duration::ZERO);
    Ok(Driver {
        process,
        started,
        mapping: HeadlessMapping::default(),
        controller: Box::new(HeadlessController),
        cancel,
        host,
        host_events: None,
        launch_events: Vec::new(),
        transcript: None,
    })
}

/// The managed-process spec of a prepared launch under `limits`.
pub(crate) fn process_spec(launch: &PreparedLaunch, limits: &RunLimits) -> ProcessSpec {
    crate::driver::guest_spec(
        &launch.program,
        &launch.args,
        &launch.env,
        &launch.cwd,
        limits,
    )
}
