//! What every guest launch shares: the only host variables that pass into a guest's
//! environment, and a private run directory that is neither inside the workspace nor holds it.

use std::ffi::OsString;
use std::io;
use std::path::{Path, PathBuf};

/// Host environment variables passed through when set. Everything else is dropped.
pub const PASSTHROUGH_ENV: &[&str] = &["PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ"];

/// The [`PASSTHROUGH_ENV`] entries of `host_env`: where a guest's environment starts.
pub fn passthrough_env(host_env: &[(OsString, OsString)]) -> Vec<(OsString, OsString)> {
    host_env
        .iter()
        .filter(|(k, _)| PASSTHROUGH_ENV.iter().any(|p| k == p))
        .cloned()
        .collect()
}

/// The workspace and the run directory (created), canonical; refused when one contains the
/// other.
pub fn workspace_and_run_dir(workdir: &Path, run_dir: &Path) -> io::Result<(PathBuf, PathBuf)> {
    let workdir = std::fs::canonicalize(workdir)?;
    std::fs::create_dir_all(run_dir)?;
    let run_dir = std::fs::canonicalize(run_dir)?;
    if workdir.starts_with(&run_dir) || run_dir.starts_with(&workdir) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "the run directory and the workspace must not contain each other",
        ));
    }
    Ok((workdir, run_dir))
}
