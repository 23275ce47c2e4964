//! What the live tests of `switchyard` share.
#![allow(clippy::unwrap_used, clippy::expect_used, dead_code)]

use std::path::PathBuf;
use switchyard_backend::gemini::{PACKAGE, VERSION};

/// The pinned install, sealed (sealing is idempotent and atomic, so parallel tests are fine).
pub fn sealed_prefix() -> PathBuf {
    let prefix = switchyard_testkit::guest::gemini_prefix();
    if switchyard_backend::install::verify(&prefix, PACKAGE, VERSION).is_err() {
        switchyard_backend::install::seal(&prefix, PACKAGE, VERSION)
            .expect("seal the test install");
    }
    prefix
}
