//! Locates the pinned guest CLI installs that `scripts/install-guests.sh` (run by `.ci/run`)
//! puts under `<workspace>/.cache/guests/`.
//!
//! Tests that need a real guest call [`gemini_prefix`] and fail loudly when it is missing: a
//! missing guest is a broken setup, never a silently skipped test.

use std::path::{Path, PathBuf};

/// The Gemini CLI version every test and fixture is pinned to: the one the protocol types were
/// verified against (`scripts/install-guests.sh` installs the same, see the test below).
pub const GEMINI_CLI_VERSION: &str = switchyard_protocol::gemini_cli::VERIFIED_VERSION;

/// Environment variable that overrides where the pinned Gemini CLI install lives.
pub const GEMINI_PREFIX_ENV: &str = "SWITCHYARD_TEST_GEMINI_PREFIX";

/// The workspace root (two levels above this crate's manifest).
pub fn workspace_root() -> PathBuf {
    // crates/testkit sits two levels below the workspace root.
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest
        .ancestors()
        .nth(2)
        .unwrap_or(manifest)
        .to_path_buf()
}

/// The npm prefix holding `@google/gemini-cli@0.61.0` (`node_modules/...` below it).
///
/// When the install is missing it runs `scripts/install-guests.sh` (npm registry only; the
/// script serialises concurrent callers with a lock), so `cargo test` works on a fresh clone.
///
/// # Panics
/// When the install is still missing after that, with the command that creates it.
pub fn gemini_prefix() -> PathBuf {
    let prefix = std::env::var_os(GEMINI_PREFIX_ENV)
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            workspace_root()
                .join(".cache/guests")
                .join(format!("gemini-cli-{GEMINI_CLI_VERSION}"))
        });
    let entry = gemini_entry_in(&prefix);
    if std::env::var_os(GEMINI_PREFIX_ENV).is_none() {
        install_when_missing(&entry);
    }
    assert!(
        entry.is_file(),
        "pinned Gemini CLI not found at {}; run `bash scripts/install-guests.sh` first",
        entry.display()
    );
    prefix
}

/// The OpenCode version the tests are pinned to (`scripts/install-guests.sh` installs it).
pub const OPENCODE_VERSION: &str = "1.18.33";

/// The npm prefix holding `opencode-ai@1.18.33`, installed like [`gemini_prefix`]'s (which
/// also puts the package in npm's cache, so an `--offline` install of it works).
///
/// # Panics
/// When the install is still missing after running the install script.
pub fn opencode_prefix() -> PathBuf {
    let prefix = workspace_root()
        .join(".cache/guests")
        .join(format!("opencode-{OPENCODE_VERSION}"));
    let entry = prefix.join("node_modules/opencode-ai/bin/opencode.exe");
    install_when_missing(&entry);
    assert!(
        entry.is_file(),
        "pinned OpenCode not found at {}; run `bash scripts/install-guests.sh` first",
        entry.display()
    );
    prefix
}

/// The Claude Code version the tests are pinned to (`scripts/install-guests.sh` installs it).
pub const CLAUDE_CODE_VERSION: &str = "2.1.332";

/// The native executable inside a Claude Code npm prefix (the package's postinstall links the
/// platform binary there).
pub const CLAUDE_CODE_ENTRY: &str = "node_modules/@anthropic-ai/claude-code/bin/claude.exe";

/// The npm prefix holding `@anthropic-ai/claude-code@2.1.332`, installed like
/// [`gemini_prefix`]'s.
///
/// # Panics
/// When the install is still missing after running the install script.
pub fn claude_code_prefix() -> PathBuf {
    let prefix = workspace_root()
        .join(".cache/guests")
        .join(format!("claude-code-{CLAUDE_CODE_VERSION}"));
    let entry = prefix.join(CLAUDE_CODE_ENTRY);
    install_when_missing(&entry);
    assert!(
        entry.is_file(),
        "pinned Claude Code not found at {}; run `bash scripts/install-guests.sh` first",
        entry.display()
    );
    prefix
}

/// The Codex version the tests are pinned to (`scripts/install-guests.sh` installs it).
pub const CODEX_VERSION: &str = "0.171.0";

/// The native executable inside a Codex npm prefix (the platform package, an optional
/// dependency of `@openai/codex`; run directly, never through the Node launcher).
pub const CODEX_ENTRY: &str =
    "node_modules/@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl/bin/codex";

/// The npm prefix holding `@openai/codex@0.171.0`, installed like [`gemini_prefix`]'s.
///
/// # Panics
/// When the install is still missing after running the install script.
pub fn codex_prefix() -> PathBuf {
    let prefix = workspace_root()
        .join(".cache/guests")
        .join(format!("codex-{CODEX_VERSION}"));
    let entry = prefix.join(CODEX_ENTRY);
    install_when_missing(&entry);
    assert!(
        entry.is_file(),
        "pinned Codex not found at {}; run `bash scripts/install-guests.sh` first",
        entry.display()
    );
    prefix
}

/// Runs `scripts/install-guests.sh` when `entry` is missing.
fn install_when_missing(entry: &Path) {
    if entry.is_file() {
        return;
    }
    let script = workspace_root().join("scripts/install-guests.sh");
    let status = std::process::Command::new("bash").arg(&script).status();
    assert!(
        matches!(status, Ok(s) if s.success()),
        "{} failed: {status:?}",
        script.display()
    );
}

/// The JavaScript entry point (`bundle/gemini.js`) inside an npm prefix.
pub fn gemini_entry_in(prefix: &Path) -> PathBuf {
    prefix.join("node_modules/@google/gemini-cli/bundle/gemini.js")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_install_script_pins_the_same_gemini_cli_version() {
        let script = std::fs::read_to_string(workspace_root().join("scripts/install-guests.sh"))
            .expect("scripts/install-guests.sh");
        let pinned: Vec<&str> = script
            .lines()
            .filter_map(|line| line.trim().strip_prefix("GEMINI_VERSION="))
            .map(|value| value.trim_matches('"'))
            .collect();
        assert_eq!(pinned, [GEMINI_CLI_VERSION], "{script}");
        let opencode: Vec<&str> = script
            .lines()
            .filter_map(|line| line.trim().strip_prefix("OPENCODE_VERSION="))
            .map(|value| value.trim_matches('"'))
            .collect();
        assert_eq!(opencode, [OPENCODE_VERSION], "{script}");
        let claude: Vec<&str> = script
            .lines()
            .filter_map(|line| line.trim().strip_prefix("CLAUDE_CODE_VERSION="))
            .map(|value| value.trim_matches('"'))
            .collect();
        assert_eq!(claude, [CLAUDE_CODE_VERSION], "{script}");
        let codex: Vec<&str> = script
            .lines()
            .filter_map(|line| line.trim().strip_prefix("CODEX_VERSION="))
            .map(|value| value.trim_matches('"'))
            .collect();
        assert_eq!(codex, [CODEX_VERSION], "{script}");
    }
}
