//! How `switchyard run` shows a run: `--output jsonl` prints one canonical event per line;
//! `--output text` prints streamed assistant text, one line per tool call and result, and a
//! final summary on stderr. When stderr is a terminal, one status line on stderr (`indicatif`)
//! updates in place: the agent, the model turn, tokens in and out, tool calls, elapsed time,
//! the last tool and what the run waits for; it steps aside for every line printed on stdout,
//! and hides while assistant text is mid-line there.

use std::io::{IsTerminal, Write};
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use switchyard_events::{Envelope, Event, RunOutcome};
use switchyard_runner::{OutputMode, RunObserver};

/// What the status line shows.
struct Progress {
    bar: ProgressBar,
    agent: String,
    turn: u32,
    tokens_in: u64,
    tokens_out: u64,
    tool_calls: u64,
    last_tool: Option<String>,
    phase: String,
    /// Assistant text is mid-line on stdout: the line would break it, so it hides.
    hidden: bool,
}

impl Progress {
    fn new() -> Self {
        let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
        if let Ok(style) = ProgressStyle::with_template("[switchyard] {elapsed:>4} · {msg}") {
            bar.set_style(style);
        }
        bar.enable_steady_tick(Duration::from_millis(250));
        let progress = Self {
            bar,
            agent: "guest".into(),
            turn: 0,
            tokens_in: 0,
            tokens_out: 0,
            tool_calls: 0,
            last_tool: None,
            phase: "starting the guest".into(),
            hidden: false,
        };
        progress.show();
        progress
    }

    fn show(&self) {
        let last = self
            .last_tool
            .as_deref()
            .map(|t| format!(" · last {t}"))
            .unwrap_or_default();
        self.bar.set_message(format!(
            "{} · turn {} · {} in / {} out tokens · {} tool calls{last} · {}",
            self.agent,
            self.turn + 1,
            self.tokens_in,
            self.tokens_out,
            self.tool_calls,
            self.phase
        ));
    }

    /// Hides the line while stdout is mid-line, shows it again after.
    fn hide(&mut self, hidden: bool) {
        if hidden != self.hidden {
            self.hidden = hidden;
            self.bar.set_draw_target(if hidden {
                ProgressDrawTarget::hidden()
            } else {
                ProgressDrawTarget::stderr()
            });
        }
    }
}

/// Prints events in the chosen output mode.
pub struct Printer {
    mode: OutputMode,
    mid_line: bool,
    progress: Option<Progress>,
}

impl Printer {
    /// A printer; in text mode on a terminal it also shows the status line.
    pub fn new(mode: OutputMode) -> Self {
        let progress =
            (mode == OutputMode::Text && std::io::stderr().is_terminal()).then(Progress::new);
        Printer {
            mode,
            mid_line: false,
            progress,
        }
    }

    /// Prints one event.
    pub fn event(&mut self, envelope: &Envelope) {
        // The status line steps aside while the event is printed.
        let bar = self.progress.as_ref().map(|p| p.bar.clone());
        match bar {
            Some(bar) => bar.suspend(|| self.print(envelope)),
            None => self.print(envelope),
        }
        // Outside `suspend`, which holds the line's state: redrawn with what the event told.
        if let Some(p) = &mut self.progress {
            p.show();
            p.hide(self.mid_line);
        }
    }

    fn print(&mut self, envelope: &Envelope) {
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
                        if let Some(p) = &mut self.progress {
                            s.agent.clone_into(&mut p.agent);
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
                        if let Some(p) = &mut self.progress {
                            p.turn = d.turn;
                        }
                        Some("model is answering".to_owned())
                    }
                    Event::Usage(u) => {
                        if let Some(p) = &mut self.progress {
                            p.tokens_in = u.input_tokens;
                            p.tokens_out = u.output_tokens;
                        }
                        None
                    }
                    Event::ToolCall(c) => {
                        if let Some(p) = &mut self.progress {
                            p.turn = c.turn;
                            p.tool_calls += 1;
                            p.last_tool = Some(c.tool_name.clone());
                        }
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
                if let Some(p) = &mut self.progress
                    && let Some(phase) = phase
                {
                    p.phase = phase;
                }
            }
        }
        let _ = out.flush();
    }

    /// Prints the final summary (text mode) and stops the status line.
    pub fn summary(&mut self, outcome: &RunOutcome) {
        if let Some(progress) = self.progress.take() {
            progress.bar.finish_and_clear();
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
        if let Some(progress) = self.progress.take() {
            progress.bar.finish_and_clear();
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
