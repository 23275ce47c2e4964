//! `install_npm` against the real npm, offline (from the npm cache that
//! `scripts/install-guests.sh` fills), into a temp prefix: the result is sealed and verifies;
//! an unknown version is a typed `NpmFailed` error carrying npm's output. Either way nothing
//! half-made is left: the prefix appears only whole, and no staging folder remains.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use switchyard_backend::gemini::{PACKAGE, VERSION};
use switchyard_backend::install::{InstallError, NpmInstallOptions, install_npm, verify};

fn offline() -> NpmInstallOptions {
    // The pinned install puts the package in npm's cache (a fresh machine has none).
    switchyard_testkit::guest::gemini_prefix();
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
    assert_eq!(entries(dir.path()), [format!("gemini-cli-{VERSION}")]);

    // Installing again replaces the install whole.
    let marker = prefix.join("left-over");
    std::fs::write(&marker, b"x").unwrap();
    install_npm(PACKAGE, VERSION, &prefix, &offline()).expect("npm install again");
    assert!(!marker.exists());
    verify(&prefix, PACKAGE, VERSION).expect("verify the second install");
    assert_eq!(entries(dir.path()), [format!("gemini-cli-{VERSION}")]);
}

/// The names in `dir`.
fn entries(dir: &std::path::Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
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
    assert!(!prefix.exists());
    assert!(entries(dir.path()).is_empty(), "{:?}", entries(dir.path()));
}
