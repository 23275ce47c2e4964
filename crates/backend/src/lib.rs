//! Owns guest agent processes: pinned installs, isolation, process groups, limits and
//! cancellation, plus one module per guest backend.
//!
//! - [`process`]: generic managed process (process group, bounded output, graceful stop,
//!   watchdogs, no orphans);
//! - [`install`]: pinned npm installs sealed by a manifest, verified before every run;
//! - [`gemini`]: the Gemini CLI backend (headless and ACP);
//! - [`opencode`]: the OpenCode pin (its install; the backend comes with its issue).

pub mod gemini;
pub mod install;
pub mod opencode;
pub mod process;
