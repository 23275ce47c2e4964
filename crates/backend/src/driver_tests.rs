use std::sync::Mutex;

use serde::{Deserialize, Serialize};
use serde_json::json;
use switchyard_events::event::Warning;
use switchyard_events::{OutcomeStatus, RunError};

use super::*;
use crate::permission::{PermissionAsk, PermissionRuling};
use crate::process::ProcessSpec;

/// A note of the test agent: a stdout line, or a lookup's answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
enum TestNote {
    Line(String),
    Delivered(String, Option<String>),
}

/// Maps each line to a warning; a line `call <id>` names a call.
#[derive(Default)]
struct TestMapping {
    seen: Vec<TestNote>,
}

impl Mapping for TestMapping {
    type Note = TestNote;

    fn calls_named(&self, note: &TestNote) -> Vec<String> {
        match note {
            TestNote::Line(line) => line
                .strip_prefix("call ")
                .map(|id| vec![id.to_owned()])
                .unwrap_or_default(),
            TestNote::Delivered(..) => Vec::new(),
        }
    }

    fn delivered_note(&self, call_id: String, call: Option<Delivered>) -> TestNote {
        TestNote::Delivered(call_id, call.map(|c| c.model_call_id))
    }

    fn note(&mut self, note: TestNote) -> Vec<Normalized> {
        self.seen.push(note.clone());
        match note {
            TestNote::Line(text) => vec![Normalized {
                event: Event::Warning(Warning {
                    message: text,
                    derived: true,
                }),
                guest_timestamp: None,
            }],
            TestNote::Delivered(..) => Vec::new(),
        }
    }

    fn unrecognized(&self) -> u64 {
        0
    }

    fn finish(&mut self, exit: GuestExit, _: &StderrSummary, _: &str) -> (Vec<Event>, RunOutcome) {
        let outcome = RunOutcome {
            status: OutcomeStatus::Succeeded,
            error: None,
            exit,
            result: None,
            incomplete_cleanup: Vec::new(),
        };
        (Vec::new(), outcome)
    }
}

/// Hands the guest's lines over; done after `done_after` lines.
struct TestController {
    done_after: usize,
}

impl Controller for TestController {
    type Note = TestNote;

    fn run(
        self: Box<Self>,
        mut io: ControllerIo<TestNote>,
    ) -> futures_util::future::BoxFuture<'static, ()> {
        Box::pin(async move {
            let mut lines = 0;
            while let Some(line) = io.stdout.recv().await {
                io.note(TestNote::Line(line.text));
                lines += 1;
                if lines == self.done_after {
                    io.done(Duration::from_millis(50));
                }
            }
        })
    }
}

/// Knows one delivered call, `c1` (model id `m1`); counts lookups.
#[derive(Default)]
struct TestHost {
    lookups: Mutex<Vec<String>>,
}

impl PermissionHost for TestHost {
    fn delivered(&self, call_id: &str) -> Option<Delivered> {
        self.lookups.lock().unwrap().push(call_id.to_owned());
        (call_id == "c1").then(|| Delivered {
            call_id: "c1".into(),
            model_call_id: "m1".into(),
            tool: "t".into(),
            arguments: json!({}),
            batch: 0,
        })
    }

    fn permission(&self, _: &PermissionAsk) -> Result<PermissionRuling, String> {
        Err("none".into())
    }
}

fn started() -> RunStarted {
    RunStarted {
        run_id: "r".into(),
        agent: "test".into(),
        agent_version: "0".into(),
        workdir: "/".into(),
        model: None,
    }
}

#[tokio::test]
async fn lookups_come_first_host_events_merge_and_a_done_controller_closes_the_guest() {
    // The guest prints two lines, then lingers: the controller's done closes it.
    let spec = ProcessSpec::new("/bin/sh", std::env::temp_dir()).args([
        "-c",
        "echo 'call c1'; echo 'call c1'; echo 'call zz'; sleep 30",
    ]);
    let process = ManagedProcess::spawn(spec).unwrap();
    let cancel = GracefulCancel::new(process.stop_handle(), Duration::ZERO);
    let host = Arc::new(TestHost::default());
    let (host_tx, host_rx) = mpsc::channel(4);
    host_tx
        .send(Event::Warning(Warning {
            message: "from the host".into(),
            derived: true,
        }))
        .await
        .unwrap();
    drop(host_tx);
    let (transcript_tx, mut transcript) = mpsc::unbounded_channel();
    let driver = Driver {
        process,
        started: started(),
        mapping: TestMapping::default(),
        controller: Box::new(TestController { done_after: 3 }),
        cancel,
        host: host.clone(),
        host_events: Some(host_rx),
        launch_events: Vec::new(),
        transcript: Some(transcript_tx),
    };
    let mut items = Vec::new();
    let report = driver
        .drive(
            async |item| items.push(item),
            async |mut outcome: RunOutcome| {
                outcome.error = Some(RunError::new(
                    switchyard_events::ErrorKind::NoFinish,
                    "concluded",
                ));
                outcome
            },
        )
        .await;
    assert_eq!(report.outcome.exit.stopped_by, Some(StopCause::Closed));
    assert_eq!(
        report.outcome.error.map(|e| e.message),
        Some("concluded".to_owned())
    );
    // Each call id is looked up once, before the first note that names it.
    assert_eq!(*host.lookups.lock().unwrap(), ["c1", "zz"]);
    let mut notes = Vec::new();
    while let Ok(note) = transcript.try_recv() {
        notes.push(note);
    }
    assert_eq!(
        notes,
        [
            TestNote::Delivered("c1".into(), Some("m1".into())),
            TestNote::Line("call c1".into()),
            TestNote::Line("call c1".into()),
            TestNote::Delivered("zz".into(), None),
            TestNote::Line("call zz".into()),
        ]
    );
    let events: Vec<String> = items
        .iter()
        .filter_map(|item| match item {
            RunItem::Event(e) => Some(e.event.kind().to_owned()),
            _ => None,
        })
        .collect();
    assert_eq!(events.first().map(String::as_str), Some("run_started"));
    let warnings = items
        .iter()
        .filter(|item| matches!(item, RunItem::Event(e) if matches!(&e.event, Event::Warning(w) if w.message == "from the host")))
        .count();
    assert_eq!(warnings, 1, "the host's event is in the sequence");
    let raw = items
        .iter()
        .filter(|item| matches!(item, RunItem::RawStdout(_)))
        .count();
    assert_eq!(raw, 3, "every stdout line is recorded raw");
    // Gapless sequence numbers.
    let seqs: Vec<u64> = items
        .iter()
        .filter_map(|item| match item {
            RunItem::Event(e) => Some(e.seq),
            _ => None,
        })
        .collect();
    assert_eq!(seqs, (0..seqs.len() as u64).collect::<Vec<_>>());
}
