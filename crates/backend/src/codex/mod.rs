//! Codex 0.171.0 (`@openai/codex` on npm) as a backend: one long-lived `codex app-server`
//! process speaking JSON-RPC on stdio, its model traffic sent to the gateway's Responses
//! ingress.
//!
//! - [`launch`]: the isolated launch (private `CODEX_HOME`, HOME and TMPDIR, the generated
//!   `config.toml` and model catalog, the environment with every setting and its reason);
//! - [`run`]: one run: a thread, one turn per prompt, approvals answered from the host's
//!   policy, `turn/interrupt` for cancel, and the notes that map to events.
//!
//! The npm package is a Node launcher (`bin/codex.js`); the native binary comes with the
//! platform's optional dependency (`@openai/codex-linux-x64`), which the install seals like
//! every other file. Switchyard runs that binary directly ([`ENTRY`]); Node is not used at run
//! time.

pub mod launch;
pub mod run;

use std::path::{Path, PathBuf};

use crate::install::{InstallError, MANIFEST_FILE, Manifest};

/// The npm package of the guest.
pub const PACKAGE: &str = "@openai/codex";
/// The pinned version (the one `../shared/reference/codex-0.171.0/BRIEF.md` verified).
pub const VERSION: &str = "0.171.0";
/// The native executable inside a sealed npm prefix (Linux x86-64).
pub const ENTRY: &str =
    "node_modules/@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl/bin/codex";
/// What Codex calls host tool `t` of Switchyard's MCP server (namespace `mcp__switchyard`,
/// function `t`, as the gateway flattens them).
pub const HOST_TOOL_PREFIX: &str = "mcp__switchyard__";

/// The native executable of the verified install at `prefix`: [`ENTRY`], which its manifest
/// must list (npm leaves an optional dependency out silently when the platform does not
/// match, and then the seal does not cover it).
pub fn native_entry(prefix: &Path) -> Result<PathBuf, InstallError> {
    let path = prefix.join(MANIFEST_FILE);
    let text = std::fs::read_to_string(&path).map_err(|e| InstallError::io(&path, e))?;
    let manifest: Manifest = serde_json::from_str(&text)
        .map_err(|e| InstallError::io(&path, std::io::Error::other(e)))?;
    if !manifest.files.iter().any(|f| f.path == ENTRY) {
        return Err(InstallError::EntryMissing {
            package: PACKAGE.to_owned(),
            reason: format!(
                "{ENTRY} (the platform's native binary, an optional npm dependency) is not in \
                 the sealed install"
            ),
        });
    }
    Ok(prefix.join(ENTRY))
}
