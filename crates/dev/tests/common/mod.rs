//! What the live tests of `switchyard-dev` share: the pinned test installs, sealed.
#![allow(clippy::expect_used, dead_code)]

use std::path::{Path, PathBuf};

/// `prefix` sealed as `package@version` (sealing is idempotent and atomic, so parallel tests
/// are fine).
fn sealed(prefix: PathBuf, package: &str, version: &str) -> PathBuf {
    if switchyard_backend::install::verify(Path::new(&prefix), package, version).is_err() {
        switchyard_backend::install::seal(&prefix, package, version)
            .expect("seal the test install");
    }
    prefix
}

/// The pinned Gemini CLI install.
pub fn sealed_prefix() -> PathBuf {
    use switchyard_backend::gemini::{PACKAGE, VERSION};
    sealed(switchyard_testkit::guest::gemini_prefix(), PACKAGE, VERSION)
}

/// The pinned OpenCode install.
pub fn sealed_claude_code() -> PathBuf {
    use switchyard_backend::claude::{PACKAGE, VERSION};
    sealed(
        switchyard_testkit::guest::claude_code_prefix(),
        PACKAGE,
        VERSION,
    )
}

pub fn sealed_codex() -> PathBuf {
    use switchyard_backend::codex::{PACKAGE, VERSION};
    sealed(switchyard_testkit::guest::codex_prefix(), PACKAGE, VERSION)
}

pub fn sealed_opencode() -> PathBuf {
    use switchyard_backend::opencode::{PACKAGE, VERSION};
    sealed(
        switchyard_testkit::guest::opencode_prefix(),
        PACKAGE,
        VERSION,
    )
}
