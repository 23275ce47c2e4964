//! The `switchyard` command line: each subcommand's flags (clap) and printing, over
//! `switchyard-runner` (a run) and the library crates. The binary is `main.rs`; the
//! developers' binary (`switchyard-dev`) adds its own commands to these.

pub mod cmd;

use clap::Subcommand;

/// The product's subcommands.
#[derive(Subcommand)]
pub enum Command {
    /// Run one task with a guest agent CLI against a model you choose.
    Run(Box<cmd::run::RunArgs>),
    /// Install a pinned guest CLI into a Switchyard-owned prefix and seal it.
    Install(cmd::install::InstallArgs),
    /// Inspect and export the record store (runs, events, model exchanges).
    Records(cmd::records::RecordsArgs),
    /// Serve the model gateway standalone (GenerateContent in, Chat Completions out).
    Gateway(cmd::gateway::GatewayArgs),
    /// Check an agent, provider and model end to end on the inert validation fixture (observe
    /// an image, record a nonce twice, finish with the colour); writes DIR/validation.json.
    Validate(cmd::validate::ValidateArgs),
    /// Tasks for the workers of a PostgreSQL run queue: submit, status, cancel.
    Queue(cmd::queue::QueueArgs),
    /// Run the tasks of a PostgreSQL run queue, on any number of machines.
    Worker(cmd::worker::WorkerArgs),
}

impl Command {
    /// Runs the subcommand; its exit code.
    pub async fn run(self) -> anyhow::Result<u8> {
        match self {
            Command::Run(args) => cmd::run::run(*args).await,
            Command::Install(args) => cmd::install::run(args).await,
            Command::Records(args) => cmd::records::run(args).map(|()| 0),
            Command::Validate(args) => cmd::validate::run(args).await,
            Command::Gateway(args) => cmd::gateway::run(args).await.map(|()| 0),
            Command::Queue(args) => cmd::queue::run(args).await,
            Command::Worker(args) => cmd::worker::run(args).await,
        }
    }
}

/// Runs `command` on a fresh multi-threaded runtime, with logging; the process's exit code.
pub fn main_with<F>(command: F) -> std::process::ExitCode
where
    F: std::future::Future<Output = anyhow::Result<u8>>,
{
    cmd::init_logging();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("switchyard: cannot start the async runtime: {e}");
            return std::process::ExitCode::from(cmd::EXIT_INTERNAL);
        }
    };
    match runtime.block_on(command) {
        Ok(code) => std::process::ExitCode::from(code),
        Err(e) => {
            eprintln!("switchyard: {e:#}");
            std::process::ExitCode::from(cmd::EXIT_INTERNAL)
        }
    }
}
