//! Model turns and their text, as both normalizers count them: a turn ends when tool results
//! go back to the model; the run's answer is the text of the last turn that called no tool.

use crate::event::{AssistantMessage, Event, RunFinished};
use crate::outcome::RunOutcome;

#[derive(Debug, Default)]
pub(crate) struct Turns {
    /// The current 0-based model turn.
    pub turn: u32,
    saw_model_output: bool,
    /// A tool result went back: the next model output starts a new turn.
    pub awaiting_next_turn: bool,
    text: String,
    last_text: Option<String>,
}

impl Turns {
    /// Model output arrived (text, a thought or a tool call).
    pub fn begin_model_output(&mut self) {
        if self.awaiting_next_turn {
            self.turn += 1;
            self.awaiting_next_turn = false;
        }
        self.saw_model_output = true;
    }

    pub fn push_text(&mut self, text: &str) {
        self.text.push_str(text);
    }

    /// Ends the turn's text: its `assistant_message`, if it had text.
    pub fn flush_text(&mut self, out: &mut Vec<Event>) {
        if !self.text.is_empty() {
            let text = std::mem::take(&mut self.text);
            self.last_text = Some(text.clone());
            out.push(Event::AssistantMessage(AssistantMessage {
                text,
                turn: self.turn,
            }));
        }
    }

    /// A tool call: the turn's text ends, and a turn with tool calls is not the answer.
    pub fn tool_call(&mut self, out: &mut Vec<Event>) {
        self.begin_model_output();
        self.flush_text(out);
        self.last_text = None;
    }

    pub fn saw_model_output(&self) -> bool {
        self.saw_model_output
    }

    /// The text of the last turn without tool calls.
    pub fn final_text(&self) -> Option<String> {
        self.last_text.clone()
    }

    /// Turns seen.
    pub fn count(&self) -> u32 {
        if self.saw_model_output {
            self.turn + 1
        } else {
            0
        }
    }

    /// The closing `run_finished` of a run with this `outcome` (its `result` is the host
    /// contract's, added later).
    pub fn run_finished(&self, outcome: &RunOutcome, unrecognized_lines: u64) -> Event {
        Event::RunFinished(RunFinished {
            status: outcome.status,
            error: outcome.error.clone(),
            final_text: self.final_text(),
            turns: self.count(),
            unrecognized_lines,
            exit: outcome.exit,
            result: None,
        })
    }
}
