//! OpenCode 1.18.33 (`opencode-ai` on npm) as a backend: Switchyard owns an `opencode serve`
//! process on 127.0.0.1 and drives it over its HTTP API, reading its server-sent events.
//!
//! - [`launch`]: the isolated launch (private HOME, XDG directories and TMPDIR, the seeded
//!   config directory, the config document with every setting and its reason, the server
//!   password);
//! - [`server`]: the HTTP client of the running server (Basic auth, bounded bodies and events);
//! - [`run`]: one run: start-up budget, warm-up, session, prompts, permissions, abort, resync;
//! - [`notes`]: what a run observes and decides, and its deterministic mapping to events.
//!
//! The package's postinstall links the platform's Bun-compiled binary (`opencode-linux-x64`,
//! an optional dependency) to `bin/opencode.exe`, the entry point of the sealed install (an
//! executable, not a script).

pub mod launch;
pub mod notes;
pub mod run;
pub mod server;

/// The npm package of the guest.
pub const PACKAGE: &str = "opencode-ai";
/// The pinned version (the one `../shared/reference/opencode-1.18.33/BRIEF.md` verified).
pub const VERSION: &str = "1.18.33";
/// The executable inside a sealed npm prefix.
pub const ENTRY: &str = "node_modules/opencode-ai/bin/opencode.exe";
