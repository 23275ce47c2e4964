//! Claude Code 2.1.332 (`@anthropic-ai/claude-code` on npm) as a backend: one long-lived
//! `claude -p` process speaking stream-json on stdio, its model traffic sent to the gateway's
//! Messages ingress.
//!
//! - [`launch`]: the isolated launch (private config directory, HOME and TMPDIR, the settings
//!   and MCP files, the environment with every setting and its reason);
//! - [`run`]: one run: prompts as user messages, `can_use_tool` answered from the host's policy,
//!   `interrupt` for cancel, and the notes that map to events.
//!
//! The package's postinstall hard-links the platform's native binary
//! (`@anthropic-ai/claude-code-linux-x64`) to `bin/claude.exe`, the entry point of the sealed
//! install; Node is not used at run time.

pub mod launch;
pub mod run;

/// The npm package of the guest.
pub const PACKAGE: &str = "@anthropic-ai/claude-code";
/// The pinned version (the one `../shared/reference/claude-code-2.1.332/BRIEF.md` verified).
pub const VERSION: &str = "2.1.332";
/// The executable inside a sealed npm prefix.
pub const ENTRY: &str = "node_modules/@anthropic-ai/claude-code/bin/claude.exe";
/// What Claude Code calls host tool `t` of Switchyard's MCP server.
pub const HOST_TOOL_PREFIX: &str = "mcp__switchyard__";
