//! Where Switchyard's system-precedence settings file can live so that Gemini CLI loads it.
//!
//! Gemini CLI 0.61.0 loads a system settings file only if the file and every folder above it
//! are owned by root and writable by nobody else (`isFileAndDirectorySecureSync`; otherwise a
//! "Security Warning: Skipping system settings file" and the file is ignored). A run directory
//! under `/tmp` (mode 1777) never qualifies, and nothing a non-root user owns does. The launch
//! writes the file to the first candidate folder that qualifies and says whether one did: without
//! it, a workspace's `.gemini/settings.json` outranks Switchyard's settings.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// Whether Gemini CLI would load a system settings file at `path`: it and every ancestor (of
/// the path as given and as resolved) owned by uid 0 and not writable by group or others, and
/// no link on the way owned by anyone else.
pub fn accepted(path: &Path) -> bool {
    let chain = |start: &Path| -> bool {
        start.ancestors().all(|p| {
            let secure = |m: std::fs::Metadata| m.uid() == 0 && m.mode() & 0o022 == 0;
            let link_ok = std::fs::symlink_metadata(p)
                .map(|m| !m.file_type().is_symlink() || m.uid() == 0)
                .unwrap_or(false);
            link_ok && std::fs::metadata(p).map(secure).unwrap_or(false)
        })
    };
    chain(path) && std::fs::canonicalize(path).is_ok_and(|real| chain(&real))
}

/// The folders tried, in order, for a run whose private folder is `run_dir`: the run folder
/// itself, then a fresh folder in root-only places outside `/tmp` (a unique name: runs may share
/// their run folder's name).
pub fn candidates(run_dir: &Path) -> Vec<PathBuf> {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let name = run_dir
        .file_name()
        .map_or_else(|| "run".into(), |n| n.to_string_lossy().into_owned());
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let unique = format!("{name}-{}-{nanos:x}-{n}", std::process::id());
    let mut dirs = vec![
        run_dir.to_path_buf(),
        Path::new("/run/switchyard").join(&unique),
    ];
    if let Some(home) = std::env::var_os("HOME") {
        dirs.push(
            Path::new(&home)
                .join(".cache/switchyard/gemini-system")
                .join(&unique),
        );
    }
    dirs
}

/// Writes `files` (name, bytes) into the first of `dirs` where Gemini CLI accepts them; the
/// folder, or `None` when no candidate qualifies (the files are then in `dirs[0]`, where the CLI
/// skips them).
pub fn place(dirs: &[PathBuf], files: &[(&str, &[u8])]) -> std::io::Result<Option<PathBuf>> {
    for dir in dirs {
        if std::fs::create_dir_all(dir).is_err() {
            continue;
        }
        let _ = std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700));
        let mut written = true;
        for (name, bytes) in files {
            written &= super::launch::write_private(&dir.join(name), bytes).is_ok();
        }
        if written && files.iter().all(|(name, _)| accepted(&dir.join(name))) {
            return Ok(Some(dir.clone()));
        }
        if dir != &dirs[0] {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
    let first = dirs
        .first()
        .ok_or_else(|| std::io::Error::other("no candidate folder"))?;
    for (name, bytes) in files {
        super::launch::write_private(&first.join(name), bytes)?;
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_under_a_world_writable_folder_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("s.json");
        std::fs::write(&file, "{}").unwrap();
        // `std::env::temp_dir()` is (or is under) /tmp, mode 1777.
        assert!(!accepted(&file));
        assert!(!accepted(Path::new("/nonexistent/s.json")));
    }

    #[test]
    fn root_owned_private_folders_are_accepted_when_running_as_root() {
        if nix_uid() != 0 {
            // Nothing a non-root user owns qualifies.
            let home = std::env::var_os("HOME").unwrap();
            assert!(!accepted(Path::new(&home)));
            return;
        }
        assert!(accepted(Path::new("/")));
        let scratch = Path::new("/run/switchyard").join(format!("test-{}", std::process::id()));
        let placed = place(
            &[
                std::env::temp_dir().join(format!("sy-{}", std::process::id())),
                scratch.clone(),
            ],
            &[("a.json", b"{}")],
        )
        .unwrap();
        assert_eq!(placed.as_deref(), Some(scratch.as_path()));
        let _ = std::fs::remove_dir_all(&scratch);
        let _ = std::fs::remove_dir_all(
            std::env::temp_dir().join(format!("sy-{}", std::process::id())),
        );
    }

    fn nix_uid() -> u32 {
        std::fs::metadata("/proc/self")
            .map(|m| m.uid())
            .unwrap_or(u32::MAX)
    }
}
