//! Seal and verify on a small synthetic npm prefix: every kind of tampering is refused with
//! its typed error, and the stat cache both skips unchanged files and catches a same-size
//! rewrite whose mtime was restored.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod install_support;

use std::time::Duration;

use install_support::{ENTRY, PACKAGE, PACKAGE_JSON, VERSION, append, fake_install};
use sha2::{Digest, Sha256};
use switchyard_backend::install::{
    InstallError, MANIFEST_FILE, Manifest, RACY_WINDOW, TEMPORARY_PREFIX, VERIFY_CACHE_FILE, seal,
    verify, verify_full,
};

fn sealed() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    fake_install(dir.path());
    seal(dir.path(), PACKAGE, VERSION).expect("seal");
    dir
}

#[test]
fn seal_writes_a_manifest_that_verify_accepts() {
    let dir = sealed();
    let text = std::fs::read_to_string(dir.path().join(MANIFEST_FILE)).unwrap();
    let manifest: Manifest = serde_json::from_str(&text).unwrap();
    assert_eq!((manifest.schema, manifest.package.as_str()), (1, PACKAGE));
    assert_eq!(manifest.version, VERSION);
    assert_eq!(manifest.entry, ENTRY);
    let paths: Vec<_> = manifest.files.iter().map(|f| f.path.as_str()).collect();
    assert_eq!(
        paths,
        [
            "node_modules/.package-lock.json",
            "node_modules/@google/gemini-cli/bundle/chunk-A.js",
            ENTRY,
            PACKAGE_JSON,
            "node_modules/dep/index.js",
            "package.json",
        ]
    );
    let entry = manifest.files.iter().find(|f| f.path == ENTRY).unwrap();
    let content = std::fs::read(dir.path().join(ENTRY)).unwrap();
    assert_eq!(entry.sha256, hex::encode(Sha256::digest(&content)));
    assert_eq!(entry.size, content.len() as u64);
    assert_eq!(manifest.symlinks.len(), 1);
    assert_eq!(manifest.symlinks[0].path, "node_modules/.bin/gemini");

    let verified = verify(dir.path(), PACKAGE, VERSION).expect("verify");
    assert_eq!(verified.entry, dir.path().join(ENTRY));
    assert_eq!(verified.files_checked, 6);
}

#[test]
fn appended_byte_is_refused_as_file_changed() {
    let dir = sealed();
    append(dir.path(), ENTRY, b" ");
    match verify(dir.path(), PACKAGE, VERSION) {
        Err(InstallError::FileChanged { path }) => assert_eq!(path, ENTRY),
        other => panic!("expected FileChanged, got {other:?}"),
    }
}

#[test]
fn added_file_is_refused() {
    let dir = sealed();
    std::fs::write(dir.path().join("node_modules/dep/evil.js"), "x").unwrap();
    match verify(dir.path(), PACKAGE, VERSION) {
        Err(InstallError::FileAdded { path }) => assert_eq!(path, "node_modules/dep/evil.js"),
        other => panic!("expected FileAdded, got {other:?}"),
    }
}

#[test]
fn another_writers_temporary_file_is_not_an_added_file() {
    // What a concurrent verify sees while another process writes the verify cache.
    let dir = sealed();
    std::fs::write(dir.path().join(format!("{TEMPORARY_PREFIX}abc123")), b"{}").unwrap();
    verify(dir.path(), PACKAGE, VERSION)
        .expect("a writer's temporary file is not part of the install");
    // Elsewhere in the tree the same name is an added file like any other.
    let nested = dir
        .path()
        .join("node_modules")
        .join(format!("{TEMPORARY_PREFIX}x"));
    std::fs::write(&nested, b"{}").unwrap();
    assert!(matches!(
        verify(dir.path(), PACKAGE, VERSION),
        Err(InstallError::FileAdded { .. })
    ));
}

#[test]
fn deleted_file_is_refused() {
    let dir = sealed();
    std::fs::remove_file(dir.path().join("node_modules/dep/index.js")).unwrap();
    match verify(dir.path(), PACKAGE, VERSION) {
        Err(InstallError::FileMissing { path }) => assert_eq!(path, "node_modules/dep/index.js"),
        other => panic!("expected FileMissing, got {other:?}"),
    }
}

#[test]
fn changed_package_json_version_is_refused_as_version_mismatch() {
    let dir = sealed();
    let path = dir.path().join(PACKAGE_JSON);
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::write(&path, text.replace("0.61.0", "0.62.0")).unwrap();
    match verify(dir.path(), PACKAGE, VERSION) {
        Err(InstallError::VersionMismatch {
            expected,
            found_in_manifest,
            found_in_package_json,
            ..
        }) => {
            assert_eq!(expected, VERSION);
            assert_eq!(found_in_manifest.as_deref(), Some("0.61.0"));
            assert_eq!(found_in_package_json.as_deref(), Some("0.62.0"));
        }
        other => panic!("expected VersionMismatch, got {other:?}"),
    }
}

#[test]
fn asking_for_another_version_or_package_is_refused() {
    let dir = sealed();
    let error = verify(dir.path(), PACKAGE, "0.60.0").unwrap_err();
    assert!(
        matches!(&error, InstallError::VersionMismatch { found_in_manifest: Some(m), found_in_package_json: Some(p), .. } if m == "0.61.0" && p == "0.61.0"),
        "{error:?}"
    );
    assert!(
        error
            .to_string()
            .contains("expected @google/gemini-cli@0.60.0")
    );
    let error = verify(dir.path(), "@other/cli", VERSION).unwrap_err();
    assert!(
        matches!(error, InstallError::PackageMismatch { .. }),
        "{error:?}"
    );
    // Sealing the wrong version is refused too.
    let error = seal(dir.path(), PACKAGE, "0.60.0").unwrap_err();
    assert!(
        matches!(error, InstallError::VersionMismatch { .. }),
        "{error:?}"
    );
}

#[test]
fn unsealed_prefix_is_refused_as_manifest_missing() {
    let dir = tempfile::tempdir().unwrap();
    fake_install(dir.path());
    let error = verify(dir.path(), PACKAGE, VERSION).unwrap_err();
    assert!(
        matches!(error, InstallError::ManifestMissing { .. }),
        "{error:?}"
    );
    assert!(error.to_string().contains("never sealed"));
    std::fs::write(dir.path().join(MANIFEST_FILE), "{not json").unwrap();
    let error = verify(dir.path(), PACKAGE, VERSION).unwrap_err();
    assert!(
        matches!(error, InstallError::ManifestInvalid { .. }),
        "{error:?}"
    );
}

#[test]
fn symlinks_not_in_the_manifest_or_retargeted_are_refused() {
    let dir = sealed();
    std::os::unix::fs::symlink("../package.json", dir.path().join("node_modules/sneaky")).unwrap();
    let error = verify(dir.path(), PACKAGE, VERSION).unwrap_err();
    assert!(
        matches!(&error, InstallError::SymlinkNotAllowed { path, .. } if path == "node_modules/sneaky"),
        "{error:?}"
    );
    std::fs::remove_file(dir.path().join("node_modules/sneaky")).unwrap();
    verify(dir.path(), PACKAGE, VERSION).expect("clean again");

    let bin = dir.path().join("node_modules/.bin/gemini");
    std::fs::remove_file(&bin).unwrap();
    std::os::unix::fs::symlink("../dep/index.js", &bin).unwrap();
    let error = verify(dir.path(), PACKAGE, VERSION).unwrap_err();
    assert!(
        matches!(&error, InstallError::SymlinkNotAllowed { target, .. } if target == "../dep/index.js"),
        "{error:?}"
    );

    // A sealed file replaced by a symlink to identical content is refused too.
    let chunk = dir.path().join("node_modules/dep/index.js");
    let copy = dir.path().join("elsewhere.js");
    std::fs::rename(&chunk, &copy).unwrap();
    std::os::unix::fs::symlink(&copy, &chunk).unwrap();
    let error = verify(dir.path(), PACKAGE, VERSION).unwrap_err();
    assert!(
        matches!(error, InstallError::SymlinkNotAllowed { .. }),
        "{error:?}"
    );
}

#[test]
fn seal_refuses_symlinks_that_leave_the_prefix() {
    let dir = tempfile::tempdir().unwrap();
    fake_install(dir.path());
    std::os::unix::fs::symlink("/etc/passwd", dir.path().join("node_modules/passwd")).unwrap();
    let error = seal(dir.path(), PACKAGE, VERSION).unwrap_err();
    assert!(
        matches!(&error, InstallError::SymlinkNotAllowed { path, .. } if path == "node_modules/passwd"),
        "{error:?}"
    );
    // A chain that only escapes when the kernel resolves it: `root -> .`, `up -> root/..`.
    std::fs::remove_file(dir.path().join("node_modules/passwd")).unwrap();
    std::os::unix::fs::symlink(".", dir.path().join("root")).unwrap();
    std::os::unix::fs::symlink("root/..", dir.path().join("up")).unwrap();
    let error = seal(dir.path(), PACKAGE, VERSION).unwrap_err();
    assert!(
        matches!(&error, InstallError::SymlinkNotAllowed { path, .. } if path == "up"),
        "{error:?}"
    );
}

#[test]
fn freshly_written_files_are_not_trusted_from_the_cache() {
    // Everything was written just now (inside RACY_WINDOW), so nothing is cached yet. On a
    // loaded machine writing, sealing and verifying can take longer than the window; such a
    // round proves nothing and is run again. (The margin covers file timestamps taken from a
    // coarse clock.)
    for _ in 0..5 {
        let started = std::time::Instant::now();
        let dir = sealed();
        let verified = verify(dir.path(), PACKAGE, VERSION).unwrap();
        if started.elapsed() < RACY_WINDOW - Duration::from_millis(100) {
            assert_eq!(verified.files_hashed, verified.files_checked);
            return;
        }
    }
    panic!("five rounds each took longer than RACY_WINDOW; the machine is too slow to tell");
}

#[test]
fn cached_verify_skips_unchanged_files_but_catches_a_same_size_rewrite() {
    let dir = tempfile::tempdir().unwrap();
    fake_install(dir.path());
    // Let the files settle so the seal may cache them.
    std::thread::sleep(RACY_WINDOW + Duration::from_millis(200));
    seal(dir.path(), PACKAGE, VERSION).unwrap();
    assert!(dir.path().join(VERIFY_CACHE_FILE).is_file());
    let warm = verify(dir.path(), PACKAGE, VERSION).unwrap();
    assert_eq!(
        (warm.files_hashed, warm.bytes_hashed),
        (0, 0),
        "cache must be warm"
    );

    // Same length, different bytes, and the old mtime put back: only ctime differs.
    let path = dir.path().join(ENTRY);
    let before = std::fs::metadata(&path).unwrap();
    let original = std::fs::read(&path).unwrap();
    let forged = original
        .iter()
        .map(|b| b.to_ascii_uppercase())
        .collect::<Vec<_>>();
    assert_ne!(forged, original);
    std::fs::write(&path, &forged).unwrap();
    let file = std::fs::File::options().write(true).open(&path).unwrap();
    file.set_modified(before.modified().unwrap()).unwrap();
    drop(file);
    let after = std::fs::metadata(&path).unwrap();
    assert_eq!(after.len(), before.len());
    assert_eq!(after.modified().unwrap(), before.modified().unwrap());

    match verify(dir.path(), PACKAGE, VERSION) {
        Err(InstallError::FileChanged { path }) => assert_eq!(path, ENTRY),
        other => panic!("expected FileChanged, got {other:?}"),
    }
    // Restoring the original content makes it pass again (the content is what counts).
    std::fs::write(&path, &original).unwrap();
    let restored = verify(dir.path(), PACKAGE, VERSION).unwrap();
    assert_eq!(restored.files_hashed, 1);
}

#[test]
fn verify_full_hashes_every_file() {
    // Settled files, so the cache is warm and plain `verify` would hash nothing.
    let dir = tempfile::tempdir().unwrap();
    fake_install(dir.path());
    std::thread::sleep(RACY_WINDOW + Duration::from_millis(200));
    seal(dir.path(), PACKAGE, VERSION).unwrap();
    assert_eq!(
        verify(dir.path(), PACKAGE, VERSION).unwrap().files_hashed,
        0
    );
    let full = verify_full(dir.path(), PACKAGE, VERSION).unwrap();
    assert_eq!(full.files_hashed, full.files_checked);
    assert!(full.bytes_hashed > 0);
    // And it catches what only hashing catches: the same length, different bytes.
    let path = dir.path().join("node_modules/dep/index.js");
    let original = std::fs::read(&path).unwrap();
    let forged: Vec<u8> = original.iter().map(|b| b.to_ascii_uppercase()).collect();
    assert_ne!(forged, original);
    std::fs::write(&path, &forged).unwrap();
    let error = verify_full(dir.path(), PACKAGE, VERSION).unwrap_err();
    assert!(
        matches!(error, InstallError::FileChanged { .. }),
        "{error:?}"
    );
}
