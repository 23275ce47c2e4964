//! Installing an exact npm package version into a private prefix with a minimal environment.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use super::error::InstallError;
use super::manifest::{Manifest, seal};

/// Host variables passed to npm besides `PATH` and `HOME`: CA bundles and proxies only.
const NETWORK_ENV: &[&str] = &[
    "NODE_EXTRA_CA_CERTS",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "HTTPS_PROXY",
    "HTTP_PROXY",
    "NO_PROXY",
    "https_proxy",
    "http_proxy",
    "no_proxy",
];

/// How to run `npm install`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NpmInstallOptions {
    /// Pass `--offline`: install only from npm's local cache (no network).
    pub offline: bool,
    /// Pass `--userconfig /dev/null` so the user's `~/.npmrc` (which may hold registry tokens)
    /// is not read. Machine settings that lived there must then be given in `config`; for
    /// example on hosts whose `~/.npmrc` sets `nodedir`, native optional dependencies
    /// (`node-pty`) fail to build offline without `("nodedir", "/usr")` and npm silently
    /// leaves them out.
    pub ignore_user_config: bool,
    /// Extra `--key=value` npm settings (never secrets: they end up in argv).
    pub config: Vec<(String, String)>,
    /// npm executable; `npm` is looked up in `PATH`.
    pub npm: PathBuf,
    /// `HOME` for npm (its cache lives in `$HOME/.npm`); defaults to the current `HOME`.
    pub home: Option<PathBuf>,
}

impl Default for NpmInstallOptions {
    fn default() -> Self {
        Self {
            offline: false,
            ignore_user_config: true,
            config: Vec::new(),
            npm: PathBuf::from("npm"),
            home: None,
        }
    }
}

/// A fresh install and its seal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Install {
    pub prefix: PathBuf,
    pub manifest: Manifest,
    /// Absolute path of the entry script.
    pub entry: PathBuf,
}

/// Runs `npm install --prefix STAGING --no-audit --no-fund [--offline] PACKAGE@VERSION` with an
/// environment of only `PATH`, `HOME` and the proxy/CA variables in `NETWORK_ENV`, [`seal`]s
/// the staging folder, then renames it to `prefix` (replacing an install already there). The
/// prefix is visible only once the install is complete and sealed: npm extracts the package
/// before native dependencies have finished building, so a reader of a half-made prefix would
/// see (and could seal) a tree that is still changing.
pub fn install_npm(
    package: &str,
    version: &str,
    prefix: &Path,
    options: &NpmInstallOptions,
) -> Result<Install, InstallError> {
    let staging = sibling(prefix, "staging");
    let _ = std::fs::remove_dir_all(&staging);
    std::fs::create_dir_all(&staging).map_err(|e| InstallError::io(&staging, e))?;
    let result = npm_install_sealed(package, version, &staging, options)
        .and_then(|manifest| replace_dir(&staging, prefix).map(|()| manifest));
    let manifest = match result {
        Ok(manifest) => manifest,
        Err(e) => {
            let _ = std::fs::remove_dir_all(&staging);
            return Err(e);
        }
    };
    Ok(Install {
        prefix: prefix.to_path_buf(),
        entry: prefix.join(&manifest.entry),
        manifest,
    })
}

/// `prefix` with `.{what}-{pid}-{nanos}` appended to its last component: a folder beside it, on
/// the same file system (so a rename is atomic), unique to this call.
fn sibling(prefix: &Path, what: &str) -> PathBuf {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let mut name = prefix.file_name().map(OsString::from).unwrap_or_default();
    name.push(format!(".{what}-{}-{nanos}", std::process::id()));
    prefix.with_file_name(name)
}

/// Moves the folder `from` to `to`; an existing `to` is moved aside first and removed after.
fn replace_dir(from: &Path, to: &Path) -> Result<(), InstallError> {
    if let Some(parent) = to.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent).map_err(|e| InstallError::io(parent, e))?;
    }
    let old = sibling(to, "old");
    let had_old = match std::fs::rename(to, &old) {
        Ok(()) => true,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => false,
        Err(e) => return Err(InstallError::io(to, e)),
    };
    if let Err(e) = std::fs::rename(from, to) {
        if had_old {
            let _ = std::fs::rename(&old, to);
        }
        return Err(InstallError::io(to, e));
    }
    if had_old {
        let _ = std::fs::remove_dir_all(&old);
    }
    Ok(())
}

/// The npm install into `prefix` and its seal.
fn npm_install_sealed(
    package: &str,
    version: &str,
    prefix: &Path,
    options: &NpmInstallOptions,
) -> Result<Manifest, InstallError> {
    let spec = format!("{package}@{version}");
    let mut command = Command::new(&options.npm);
    command.arg("install").arg("--prefix").arg(prefix).args([
        "--no-audit",
        "--no-fund",
        "--loglevel=error",
        "--save-exact",
    ]);
    if options.offline {
        command.arg("--offline");
    }
    if options.ignore_user_config {
        command.args(["--userconfig", "/dev/null"]);
    }
    for (key, value) in &options.config {
        command.arg(format!("--{key}={value}"));
    }
    command.arg(&spec);
    let home = options
        .home
        .clone()
        .map(OsString::from)
        .or_else(|| std::env::var_os("HOME"));
    command
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .stdin(Stdio::null());
    if let Some(home) = home {
        command.env("HOME", home);
    }
    // Network plumbing npm needs to reach the registry (a TLS-intercepting proxy's CA, proxies).
    // No credentials: registry tokens live in npmrc files, which are ignored by default.
    for name in NETWORK_ENV {
        if let Some(value) = std::env::var_os(name) {
            command.env(name, value);
        }
    }
    let output = command.output().map_err(InstallError::NpmUnavailable)?;
    if !output.status.success() {
        let mut combined = String::from_utf8_lossy(&output.stdout).into_owned();
        combined.push_str(&String::from_utf8_lossy(&output.stderr));
        let tail_start = combined
            .char_indices()
            .rev()
            .nth(4000)
            .map_or(0, |(index, _)| index);
        return Err(InstallError::NpmFailed {
            spec,
            status: output.status.to_string(),
            output_tail: combined[tail_start..].to_owned(),
        });
    }
    seal(prefix, package, version)
}
