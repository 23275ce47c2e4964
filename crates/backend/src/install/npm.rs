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

/// Runs `npm install --prefix PREFIX --no-audit --no-fund [--offline] PACKAGE@VERSION` with an
/// environment of only `PATH`, `HOME` and the proxy/CA variables in `NETWORK_ENV`, then
/// [`seal`]s the prefix.
pub fn install_npm(
    package: &str,
    version: &str,
    prefix: &Path,
    options: &NpmInstallOptions,
) -> Result<Install, InstallError> {
    std::fs::create_dir_all(prefix).map_err(|e| InstallError::io(prefix, e))?;
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
    let manifest = seal(prefix, package, version)?;
    Ok(Install {
        prefix: prefix.to_path_buf(),
        entry: prefix.join(&manifest.entry),
        manifest,
    })
}
