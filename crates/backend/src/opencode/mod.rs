//! OpenCode 1.18.33 (`opencode-ai` on npm): the pinned install. The package's postinstall links
//! the platform's Bun-compiled binary (`opencode-linux-x64`, an optional dependency) to
//! `bin/opencode.exe`, which is the entry point of the sealed install (an executable, not a
//! script). The `serve` backend is tracked in the OpenCode issue.

/// The npm package of the guest.
pub const PACKAGE: &str = "opencode-ai";
/// The pinned version (the one `../shared/reference/opencode-1.18.33/BRIEF.md` verified).
pub const VERSION: &str = "1.18.33";
/// The executable inside a sealed npm prefix.
pub const ENTRY: &str = "node_modules/opencode-ai/bin/opencode.exe";
