//! `switchyard install gemini-cli|opencode|claude-code|codex`: installs the pinned guest with npm into a
//! Switchyard-owned prefix and seals it with a manifest (version + hash of every file).
//! `switchyard run` refuses an install whose version or files no longer match.

use anyhow::{Context, Result};
use std::path::Path;
use std::path::PathBuf;

/// Guests that can be installed: every agent of the registry.
pub use switchyard_runner::Agent as Guest;

/// `switchyard install` flags.
#[derive(Debug, clap::Args)]
pub struct InstallArgs {
    /// The guest to install.
    #[arg(value_enum)]
    pub guest: Guest,
    /// Where to install (default: `$SWITCHYARD_HOME/guests/GUEST-VERSION`).
    #[arg(long)]
    pub prefix: Option<PathBuf>,
    /// Install from npm's local cache only (no registry access).
    #[arg(long)]
    pub offline: bool,
    /// Only verify an existing install (full hash of every file) and exit.
    #[arg(long)]
    pub verify: bool,
}

/// Entry point.
pub async fn run(args: InstallArgs) -> Result<u8> {
    let (package, version) = switchyard_runner::agents::spec(args.guest).pin();
    let prefix = args
        .prefix
        .unwrap_or_else(|| switchyard_runner::agents::spec(args.guest).default_prefix());
    if args.verify {
        return Ok(verify_only(args.guest, &prefix, package, version));
    }
    let task_prefix = prefix.clone();
    let offline = args.offline;
    tokio::task::spawn_blocking(move || {
        let options = switchyard_backend::install::NpmInstallOptions {
            offline,
            ..Default::default()
        };
        switchyard_backend::install::install_npm(package, version, &task_prefix, &options)
    })
    .await
    .context("install task")?
    .with_context(|| format!("installing {package}@{version} into {}", prefix.display()))?;
    let verified = switchyard_backend::install::verify(&prefix, package, version)
        .with_context(|| format!("verifying the fresh install at {}", prefix.display()))?;
    if args.guest == Guest::Codex {
        // The native binary is an optional npm dependency: npm skips it silently when the
        // platform does not match, and then the seal does not cover it.
        switchyard_backend::codex::native_entry(&prefix)
            .with_context(|| format!("the Codex install at {}", prefix.display()))?;
    }
    println!(
        "installed and sealed {package}@{version} at {} ({} files)",
        prefix.display(),
        verified.files_checked
    );
    Ok(0)
}

/// `--verify`: a full hash of every file; the exit code.
fn verify_only(guest: Guest, prefix: &Path, package: &str, version: &str) -> u8 {
    let verified = switchyard_backend::install::verify_full(prefix, package, version).and_then(
        |v| match guest {
            Guest::Codex => switchyard_backend::codex::native_entry(prefix)
                .map(|entry| switchyard_backend::install::VerifiedInstall { entry, ..v }),
            _ => Ok(v),
        },
    );
    match verified {
        Ok(v) => {
            println!(
                "verified {package}@{version} at {} ({})",
                prefix.display(),
                v.entry.display()
            );
            0
        }
        Err(e) => {
            eprintln!(
                "switchyard: install at {} is not valid: {e}",
                prefix.display()
            );
            super::run::EXIT_INSTALL
        }
    }
}
