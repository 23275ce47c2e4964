//! One module per subcommand, plus what they share (exit codes, logging, install lookup).

pub mod agents;
pub mod bench;
pub mod bench_opencode;
pub mod capture;
pub mod capture_acp;
pub mod capture_opencode;
pub mod capture_upstream;
pub mod demo;
pub mod gateway;
mod host;
pub mod install;
pub mod records;
pub mod run;
pub mod run_opencode;
pub mod validate;
pub mod view;

use std::path::PathBuf;

/// Switchyard itself failed (I/O, bad internal state). Outcome-specific codes are in `run`.
pub const EXIT_INTERNAL: u8 = 1;
/// The configuration or arguments are invalid.
pub const EXIT_CONFIG: u8 = 2;

/// Logs go to stderr, filtered by `SWITCHYARD_LOG` (default `warn`). Never to stdout, which
/// carries `--output jsonl` events.
pub fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("SWITCHYARD_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
}

/// Switchyard's data directory: `$SWITCHYARD_HOME`, else `$XDG_DATA_HOME/switchyard`, else
/// `~/.local/share/switchyard`.
pub fn switchyard_home() -> PathBuf {
    if let Some(home) = std::env::var_os("SWITCHYARD_HOME") {
        return PathBuf::from(home);
    }
    if let Some(xdg) = std::env::var_os("XDG_DATA_HOME") {
        return PathBuf::from(xdg).join("switchyard");
    }
    let home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("."));
    home.join(".local/share/switchyard")
}

/// Where `switchyard install gemini-cli` puts the pinned Gemini CLI by default.
pub fn default_gemini_prefix() -> PathBuf {
    switchyard_home().join("guests").join(format!(
        "gemini-cli-{}",
        switchyard_backend::gemini::VERSION
    ))
}

/// The first `program` on `PATH`.
pub fn which(program: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join(program))
            .find(|p| p.is_file())
    })
}
