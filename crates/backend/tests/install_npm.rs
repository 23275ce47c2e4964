//! `install_npm` against the real npm, offline (from the npm cache that
//! `scripts/install-guests.sh` fills), into a temp prefix: the result is sealed and verifies;
//! an unknown version is a typed `NpmFailed` error carrying npm's output.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use switchyard_backend::gemini::{PACKAGE, VERSION};
use switchyard_backend::install::{InstallError, NpmInstallOptions, install_npm, verify};

fn offline() -> NpmInstallOptions {
    NpmInstallOptions {
        offline: true,
        ..NpmInstallOptions::default()
    }
}

#[test]
fn offline_install_of_the_pinned_version_is_sealed_and_verifies() {
    let dir = tempfile::tempdir().unwrap();
    let prefix = dir.path().join(format!("gemini-cli-{VERSION}"));
    let install = install_npm(PACKAGE, VERSION, &prefix, &offline()).expect("npm install");
    assert_eq!(
        install.entry,
        prefix.join("node_modules/@google/gemini-cli/bundle/gemini.js")
    );
    assert!(install.entry.is_file());
    assert_eq!(install.manifest.version, VERSION);
    let verified = verify(&prefix, PACKAGE, VERSION).expect("verify");
    assert_eq!(verified.files_checked, install.manifest.files.len());
}

#[test]
fn unknown_version_is_a_typed_npm_failure() {
    let dir = tempfile::tempdir().unwrap();
    let prefix = dir.path().join("nope");
    match install_npm(PACKAGE, "0.0.0-no-such-version", &prefix, &offline()) {
        Err(InstallError::NpmFailed {
            spec, output_tail, ..
        }) => {
            assert_eq!(spec, "@google/gemini-cli@0.0.0-no-such-version");
            assert!(!output_tail.trim().is_empty());
        }
        other => panic!("expected NpmFailed, got {other:?}"),
    }
}
