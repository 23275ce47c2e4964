//! How `switchyard run` shows a run: `--output jsonl` prints one canonical event per line;
//! `--output text` prints streamed assistant text, one line per tool call and result, and a
//! final summary on stderr. When stderr is a terminal, a status line on stderr shows elapsed
//! time and what the run is waiting for; it is erased before anything is printed on stdout.

use std::io::{IsTerminal, Write};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use switchyard_events::{Envelope, Event, RunOutcome};
use switchyard_runner::{OutputMode, RunObserver};

/// What the run is doing, for the status line.
struct Status {
    started: Instant,
    phase: String,
    /// A status line is on screen and must be erased before other output.
    shown: bool,
    /// Assistant text is mid-line on stdout: the status line would break it, so it waits.
    paused: bool,
}

/// Erases the status line (if shown) so the next write starts on a clean line.
fn erase(status: &mut Status) {
    if status.shown {
        let _ = std::io::stderr().write_all(b"\r\x1b[2K");
        status.shown = false;
    }
}

/// Prints events in the chosen output mode.
pub struct Printer {
    mode: OutputMode,
    mid_line: bool,
    status: Option<Arc<Mutex<Status>>>,
    ticker: Option<tokio::task::JoinHandle<()>>,
}

impl Printer {
    /// A printer; in text mode on a terminal it also starts the status-line ticker.
    pub fn new(mode: OutputMode) -> Self {
        let progress = mode == OutputMode::Text && std::io::stderr().is_terminal();
        let status = progress.then(|| {
            Arc::new(Mutex::new(Status {
                started: Instant::now(),
                phase: "starting the guest".into(),
                shown: false,
                paused: false,
            }))
        });
        let ticker = status.clone().map(|status| {
            tokio::spawn(async move {
                let mut tick = tokio::time::interval(Duration::from_millis(250));
                loop {
                    tick.tick().await;
                    let mut s = status.lock().unwrap_or_else(|e| e.into_inner());
                    if s.paused {
                        continue;
                    }
                    let line = format!(
                        "\r\x1b[2K[switchyard] {:>5.1}s · {}",
                        s.started.elapsed().as_secs_f64(),
                        s.phase
                    );
                    let _ = std::io::stderr().write_all(line.as_bytes());
                    s.shown = true;
                }
            })
        });
        Printer {
            mode,
            mid_line: false,
            status,
            ticker,
        }
    }

    /// Prints one event.
    pub fn event(&mut self, envelope: &Envelope) {
        let status = self.status.clone();
        let mut guard = status
            .as_ref()
            .map(|s| s.lock().unwrap_or_else(|e| e.into_inner()));
        if let Some(s) = guard.as_deref_mut() {
            erase(s);
        }
        let mut out = std::io::stdout().lock();
        match self.mode {
            OutputMode::Jsonl => {
                let _ = serde_json::to_writer(&mut out, envelope);
                let _ = out.write_all(b"\n");
            }
            OutputMode::Text => {
                let mut line = |mid_line: &mut bool, text: String| {
                    if *mid_line {
                        let _ = out.write_all(b"\n");
                        *mid_line = false;
                    }
                    let _ = writeln!(out, "{text}");
                };
                let phase = match &envelope.event {
                    Event::RunStarted(s) => {
                        if guard.is_some() {
                            eprintln!(
                                "[switchyard] run {} · {} {} · model {}",
                                s.run_id,
                                s.agent,
                                s.agent_version,
                                s.model.as_deref().unwrap_or("?")
                            );
                        }
                        Some("starting the guest".to_owned())
                    }
                    Event::SessionStarted(_) | Event::UserMessage(_) => {
                        Some("waiting for the model".to_owned())
                    }
                    Event::AssistantDelta(d) => {
                        let _ = out.write_all(d.text.as_bytes());
                        self.mid_line = !d.text.ends_with('\n');
                        Some("model is answering".to_owned())
                    }
                    Event::ToolCall(c) => {
                        let mut args = c.arguments.to_string();
                        if args.len() > 160 {
                            args.truncate(args.floor_char_boundary(160));
                            args.push('…');
                        }
                        line(&mut self.mid_line, format!("→ {} {args}", c.tool_name));
                        Some(format!("running {}", c.tool_name))
                    }
                    Event::ToolResult(r) => {
                        let name = r.tool_name.as_deref().unwrap_or(&r.call_id);
                        let detail = match &r.error {
                            Some(e) => format!("failed ({}): {}", e.kind, e.message),
                            None => "ok".into(),
                        };
                        line(&mut self.mid_line, format!("← {name} {detail}"));
                        Some("waiting for the model".to_owned())
                    }
                    Event::Permission(p) => {
                        let outcome = serde_json::to_value(p.outcome)
                            .ok()
                            .and_then(|v| v.as_str().map(str::to_owned))
                            .unwrap_or_default();
                        let answer = match (&p.rule, &p.reason) {
                            (_, Some(reason)) => format!("{outcome}: {reason}"),
                            (Some(rule), None) => format!("{outcome} by {rule}"),
                            (None, None) => outcome,
                        };
                        line(
                            &mut self.mid_line,
                            format!("? permission {}: {answer}", p.tool_call_id),
                        );
                        None
                    }
                    Event::PromptFinished(p) => {
                        let how = p.stop_reason.as_deref().unwrap_or("error");
                        line(
                            &mut self.mid_line,
                            format!("· prompt {} {how}", p.prompt + 1),
                        );
                        Some("waiting for the next prompt".to_owned())
                    }
                    Event::Warning(w) => {
                        line(&mut self.mid_line, format!("! warning: {}", w.message));
                        None
                    }
                    Event::WorkspaceConfigIgnored(w) => {
                        line(
                            &mut self.mid_line,
                            format!(
                                "! workspace config ignored: {} ({})",
                                w.path,
                                w.keys.join(", ")
                            ),
                        );
                        None
                    }
                    Event::Error(e) => {
                        line(&mut self.mid_line, format!("! error: {}", e.message));
                        None
                    }
                    _ => None,
                };
                if let Some(s) = guard.as_deref_mut() {
                    s.paused = self.mid_line;
                    if let Some(phase) = phase {
                        s.phase = phase;
                    }
                }
            }
        }
        let _ = out.flush();
    }

    /// Prints the final summary (text mode) and stops the status line.
    pub fn summary(&mut self, outcome: &RunOutcome) {
        if let Some(ticker) = self.ticker.take() {
            ticker.abort();
        }
        if let Some(status) = &self.status {
            erase(&mut status.lock().unwrap_or_else(|e| e.into_inner()));
        }
        if self.mode != OutputMode::Text {
            return;
        }
        if self.mid_line {
            // Not `println!`: a reader that went away must not make the summary panic.
            let _ = std::io::stdout().lock().write_all(b"\n");
        }
        match &outcome.error {
            None => eprintln!("[switchyard] succeeded"),
            Some(e) => eprintln!(
                "[switchyard] {:?}: {} ({})",
                outcome.status,
                e.message,
                serde_json::to_string(&e.kind).unwrap_or_default()
            ),
        }
    }
}

impl Drop for Printer {
    fn drop(&mut self) {
        if let Some(ticker) = self.ticker.take() {
            ticker.abort();
        }
    }
}

impl RunObserver for Printer {
    fn event(&mut self, envelope: &Envelope) {
        Printer::event(self, envelope);
    }

    fn finished(&mut self, outcome: &RunOutcome) {
        self.summary(outcome);
    }
}
