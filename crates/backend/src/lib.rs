//! Owns guest agent processes: pinned installs, isolation, process groups, limits and
//! cancellation, plus one module per guest backend.
//!
//! - [`driver`]: the neutral run driver every agent runs on (an agent is a launch, a controller
//!   and a mapping);
//! - [`process`]: generic managed process (process group, bounded output, graceful stop,
//!   watchdogs, no orphans);
//! - [`install`]: pinned npm installs sealed by a manifest, verified before every run;
//! - [`gemini`]: the Gemini CLI backend (headless and ACP);
//! - [`claude`]: the Claude Code backend (stream-json and its control protocol);
//! - [`codex`]: the Codex backend (`codex app-server`, JSON-RPC over stdio);
//! - [`opencode`]: the OpenCode backend (`opencode serve`, HTTP commands, server-sent events);
//! - [`jsonrpc`]: JSON lines on a guest's stdin with a request/response correlator (control
//!   protocols over stdio);
//! - [`isolation`]: the host variables a guest may see, the private run directory;
//! - [`permission`]: the host side every backend asks (delivered calls, permission policy);
//! - [`secret`]: secrets that travel only through a child's environment;
//! - [`workspace`]: the agent configuration a workspace carries, found and reported.

pub mod claude;
pub mod codex;
pub mod driver;
pub mod gemini;
pub mod install;
pub mod isolation;
pub mod jsonrpc;
pub mod opencode;
pub mod permission;
pub mod process;
pub mod secret;
pub mod workspace;
