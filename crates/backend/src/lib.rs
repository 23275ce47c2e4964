//! Owns guest agent processes: pinned installs, isolation, process groups, limits and
//! cancellation, plus one module per guest backend.
//!
//! - [`process`]: generic managed process (process group, bounded output, graceful stop,
//!   watchdogs, no orphans);
//! - [`install`]: pinned npm installs sealed by a manifest, verified before every run;
//! - [`gemini`]: the Gemini CLI backend (headless and ACP);
//! - [`opencode`]: the OpenCode backend (`opencode serve`, HTTP commands, server-sent events);
//! - [`isolation`]: the host variables a guest may see, the private run directory;
//! - [`permission`]: the host's answer to a permission request;
//! - [`secret`]: secrets that travel only through a child's environment.

pub mod gemini;
pub mod install;
pub mod isolation;
pub mod opencode;
pub mod permission;
pub mod process;
pub mod secret;
