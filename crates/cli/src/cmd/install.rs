//! `switchyard install gemini-cli`: installs the pinned guest with npm into a Switchyard-owned
//! prefix and seals it with a manifest (version + hash of every file). `switchyard run` refuses
//! an install whose version or files no longer match.

use anyhow::{Context, Result};
use std::path::PathBuf;
use switchyard_backend::gemini;

/// Guests that can be installed.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum Guest {
    GeminiCli,
}

/// `switchyard install` flags.
#[derive(Debug, clap::Args)]
pub struct InstallArgs {
    /// The guest to install.
    #[arg(value_enum)]
    pub guest: Guest,
    /// Where to install (default: $SWITCHYARD_HOME/guests/gemini-cli-VERSION).
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
    let Guest::GeminiCli = args.guest;
    let prefix = args.prefix.unwrap_or_else(super::default_gemini_prefix);
    if args.verify {
        return match switchyard_backend::install::verify_full(
            &prefix,
            gemini::PACKAGE,
            gemini::VERSION,
        ) {
            Ok(v) => {
                println!(
                    "verified {}@{} at {} ({})",
                    gemini::PACKAGE,
                    gemini::VERSION,
                    prefix.display(),
                    v.entry.display()
                );
                Ok(0)
            }
            Err(e) => {
                eprintln!(
                    "switchyard: install at {} is not valid: {e}",
                    prefix.display()
                );
                Ok(super::run::EXIT_INSTALL)
            }
        };
    }
    let task_prefix = prefix.clone();
    let offline = args.offline;
    tokio::task::spawn_blocking(move || {
        let options = switchyard_backend::install::NpmInstallOptions {
            offline,
            ..Default::default()
        };
        switchyard_backend::install::install_npm(
            gemini::PACKAGE,
            gemini::VERSION,
            &task_prefix,
            &options,
        )
    })
    .await
    .context("install task")?
    .with_context(|| {
        format!(
            "installing {}@{} into {}",
            gemini::PACKAGE,
            gemini::VERSION,
            prefix.display()
        )
    })?;
    let verified =
        switchyard_backend::install::verify(&prefix, gemini::PACKAGE, gemini::VERSION)
            .with_context(|| format!("verifying the fresh install at {}", prefix.display()))?;
    println!(
        "installed and sealed {}@{} at {} ({} files)",
        gemini::PACKAGE,
        gemini::VERSION,
        prefix.display(),
        verified.files_checked
    );
    Ok(0)
}
