//! Seal and verify a `cp -a` copy of the real pinned Gemini CLI install (the original under
//! `.cache/guests` is never modified), and refuse a one-byte change to its bundle.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod install_support;

use install_support::{ENTRY, PACKAGE, VERSION, append, copy_of_real_install};
use switchyard_backend::install::{InstallError, seal, verify, verify_full};

#[test]
fn real_gemini_install_seals_verifies_and_refuses_a_patched_bundle() {
    let (_dir, prefix) = copy_of_real_install();
    let manifest = seal(&prefix, PACKAGE, VERSION).expect("seal the copy");
    assert_eq!(manifest.entry, ENTRY);
    assert!(manifest.files.len() > 500, "{} files", manifest.files.len());
    assert!(
        manifest
            .symlinks
            .iter()
            .any(|link| link.path == "node_modules/.bin/gemini"),
        "{:?}",
        manifest.symlinks
    );
    let verified = verify_full(&prefix, PACKAGE, VERSION).expect("verify the copy");
    assert_eq!(verified.files_checked, manifest.files.len());
    assert!(verified.entry.is_file());

    append(&prefix, ENTRY, b"\n");
    match verify(&prefix, PACKAGE, VERSION) {
        Err(InstallError::FileChanged { path }) => assert_eq!(path, ENTRY),
        other => panic!("expected FileChanged, got {other:?}"),
    }
}
