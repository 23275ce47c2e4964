//! One module per subcommand, plus what they share (exit codes, logging).

pub mod gateway;
pub mod install;
pub mod queue;
pub mod records;
pub mod replay_context;
pub mod run;
pub mod validate;
pub mod view;
pub mod worker;

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
