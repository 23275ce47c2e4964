//! The canonical event model shared by every backend, and the normalizers into it.
//!
//! Layers (never mixed):
//! - upstream wire types live in `switchyard-protocol` (what the guest printed);
//! - [`event`] is Switchyard's canonical model: every field says which upstream field it comes
//!   from (`Source:`) or that Switchyard derived it (`Derived:`);
//! - [`tools`] classifies tool names by exact whitelist;
//! - [`outcome`] turns the guest's terminal event and exit into a typed [`outcome::RunOutcome`];
//! - [`gemini`] normalizes Gemini CLI stream-json lines into canonical events;
//! - [`acp`] normalizes its ACP traffic (`gemini --acp`) into the same events;
//! - [`opencode`] normalizes OpenCode's server-sent events (`opencode serve`) into them too;
//! - [`claude`] and [`codex`] normalize Claude Code's stream-json and Codex's app-server
//!   notifications into them as well.
//!
//! No I/O happens here.

pub mod acp;
pub mod claude;
pub mod codex;
pub mod delivered;
pub mod event;
pub mod gemini;
pub mod opencode;
pub mod outcome;
pub mod tools;
mod turns;
pub mod values;
pub mod verdict;

pub use delivered::Delivered;
pub use event::{Envelope, Event};
pub use outcome::{
    ErrorKind, GuestExit, HostConclusion, OutcomeStatus, RunError, RunOutcome, StopCause, conclude,
};
pub use tools::ToolCategory;
