//! Helpers for the `install_*` tests: a small synthetic npm prefix shaped like the real Gemini
//! CLI install, and tamper utilities.

#![allow(dead_code)] // each test binary uses a different subset

use std::path::{Path, PathBuf};

pub use switchyard_backend::gemini::{ENTRY, PACKAGE, VERSION};
pub const PACKAGE_JSON: &str = "node_modules/@google/gemini-cli/package.json";

/// Writes a tiny npm prefix: root package files, the package with a `bin`, a dependency and
/// npm's `.bin` symlink.
pub fn fake_install(prefix: &Path) {
    let write = |relative: &str, text: &str| {
        let path = prefix.join(relative);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    };
    write(
        "package.json",
        r#"{"dependencies":{"@google/gemini-cli":"0.61.0"}}"#,
    );
    write("node_modules/.package-lock.json", "{}");
    write(
        PACKAGE_JSON,
        r#"{"name":"@google/gemini-cli","version":"0.61.0","bin":{"gemini":"bundle/gemini.js"}}"#,
    );
    write(ENTRY, "#!/usr/bin/env node\nconsole.log('gemini');\n");
    write(
        "node_modules/@google/gemini-cli/bundle/chunk-A.js",
        "export const a = 1;\n",
    );
    write("node_modules/dep/index.js", "module.exports = 42;\n");
    std::fs::create_dir_all(prefix.join("node_modules/.bin")).unwrap();
    std::os::unix::fs::symlink(
        "../@google/gemini-cli/bundle/gemini.js",
        prefix.join("node_modules/.bin/gemini"),
    )
    .unwrap();
}

/// Appends bytes to a file below `prefix`.
pub fn append(prefix: &Path, relative: &str, bytes: &[u8]) {
    use std::io::Write;
    let mut file = std::fs::OpenOptions::new()
        .append(true)
        .open(prefix.join(relative))
        .unwrap();
    file.write_all(bytes).unwrap();
}

/// `cp -a` of the real pinned install into a fresh temp dir (the original is never touched).
pub fn copy_of_real_install() -> (tempfile::TempDir, PathBuf) {
    let original = switchyard_testkit::guest::gemini_prefix();
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("gemini-cli-0.61.0");
    let status = std::process::Command::new("cp")
        .arg("-a")
        .arg(&original)
        .arg(&copy)
        .status()
        .unwrap();
    assert!(status.success(), "cp -a failed");
    (dir, copy)
}
