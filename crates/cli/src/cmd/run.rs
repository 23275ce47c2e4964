//! `switchyard run`: one task, one guest, one typed outcome. The run itself is
//! [`switchyard_runner::execute`]; this is its command line, its printing and its exit codes.

use super::EXIT_CONFIG;
use anyhow::Result;
use std::path::PathBuf;
use switchyard_events::{ErrorKind, OutcomeStatus, RunOutcome};
use switchyard_runner::{ResolvedRun, RunSettings, Target};

/// Exit code: the run succeeded.
pub const EXIT_OK: u8 = 0;
/// The model's output was unusable, or the guest failed on its own (tool fatal, bad flags).
pub const EXIT_GUEST_FAILED: u8 = 3;
/// The model API / upstream failed.
pub const EXIT_UPSTREAM: u8 = 4;
/// The turn limit was reached.
pub const EXIT_TURN_LIMIT: u8 = 5;
/// The guest refused its setup (auth, settings, input, trust, sandbox).
pub const EXIT_GUEST_SETUP: u8 = 6;
/// Timed out (overall timeout or inactivity watchdog).
pub const EXIT_TIMEOUT: u8 = 7;
/// Cancelled by the host (Ctrl-C / SIGTERM to Switchyard).
pub const EXIT_CANCELLED: u8 = 8;
/// The guest ended without its final event, crashed, or exited with an undocumented code.
pub const EXIT_INCOMPLETE: u8 = 9;
/// The guest install is missing or does not match its sealed manifest.
pub const EXIT_INSTALL: u8 = 10;
/// The run had a finish schema and ended without a valid finish result.
pub const EXIT_NO_RESULT: u8 = 11;

/// `switchyard run` flags: the run's settings, which a `--config` TOML file can also set (same
/// names with `_`; flags win).
#[derive(Debug, Clone, Default, clap::Args)]
pub struct RunArgs {
    #[command(flatten)]
    pub settings: RunSettings,
    /// Check the configuration offline (files, URL, install seal, key variable) and exit.
    #[arg(long)]
    pub validate_config: bool,
}

/// Maps an outcome to the process exit code (documented in the README).
pub fn exit_code_for(outcome: &RunOutcome) -> u8 {
    match outcome.status {
        OutcomeStatus::Succeeded => EXIT_OK,
        OutcomeStatus::Cancelled => EXIT_CANCELLED,
        OutcomeStatus::TimedOut => EXIT_TIMEOUT,
        OutcomeStatus::Incomplete => EXIT_INCOMPLETE,
        OutcomeStatus::Failed => match outcome.error.as_ref().map(|e| &e.kind) {
            Some(ErrorKind::Api { .. }) => EXIT_UPSTREAM,
            Some(ErrorKind::TurnLimit) => EXIT_TURN_LIMIT,
            Some(
                ErrorKind::Auth
                | ErrorKind::Config
                | ErrorKind::Input
                | ErrorKind::UntrustedWorkspace
                | ErrorKind::Sandbox
                | ErrorKind::Resume,
            ) => EXIT_GUEST_SETUP,
            Some(
                ErrorKind::Crashed { .. }
                | ErrorKind::MissingResult { .. }
                | ErrorKind::UnexpectedExit { .. },
            ) => EXIT_INCOMPLETE,
            Some(ErrorKind::Timeout | ErrorKind::Inactivity) => EXIT_TIMEOUT,
            Some(ErrorKind::Cancelled) => EXIT_CANCELLED,
            Some(ErrorKind::NoFinish) => EXIT_NO_RESULT,
            Some(ErrorKind::ModelOutput | ErrorKind::FatalTool | ErrorKind::GuestFailure)
            | None => EXIT_GUEST_FAILED,
        },
    }
}

/// Resolves `settings` and verifies the sealed guest install: the settings and the guest's
/// entry point, or the exit code after the reason was printed.
pub fn checked(settings: RunSettings) -> std::result::Result<(ResolvedRun, PathBuf), u8> {
    let resolved = match settings.resolve() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("switchyard: invalid configuration: {e:#}");
            return Err(EXIT_CONFIG);
        }
    };
    let entry = match switchyard_runner::verify_install(&resolved) {
        Ok(entry) => entry,
        Err(refused) => {
            eprintln!("switchyard: {refused}");
            return Err(EXIT_INSTALL);
        }
    };
    if let Target::Gateway { key_env, .. } = &resolved.target
        && std::env::var_os(key_env).is_none()
    {
        eprintln!(
            "switchyard: note: {key_env} is not set; the upstream will be called without a key"
        );
    }
    Ok((resolved, entry))
}

/// Entry point.
pub async fn run(args: RunArgs) -> Result<u8> {
    let (resolved, entry) = match checked(args.settings) {
        Ok(checked) => checked,
        Err(code) => return Ok(code),
    };
    if args.validate_config {
        eprintln!(
            "switchyard: configuration is valid (guest {} verified)",
            entry.display()
        );
        return Ok(EXIT_OK);
    }
    let mut printer = super::view::Printer::new(resolved.output);
    let executed = switchyard_runner::execute(resolved, entry, &mut printer).await?;
    Ok(exit_code_for(&executed.outcome))
}

#[cfg(test)]
#[path = "run_tests.rs"]
mod tests;
