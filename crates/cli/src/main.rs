//! `switchyard`: runs coding-agent CLIs as managed, exactly-typed, model-agnostic backends.
//!
//! Subcommands live in [`cmd`], one file each. Exit codes are documented in the README
//! ("Exit codes") and defined in [`cmd::run::exit_code_for`].

mod cmd;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "switchyard",
    version,
    about = "Run agent CLIs as managed, typed, model-agnostic backends"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run one task with a guest agent CLI against a model you choose.
    Run(Box<cmd::run::RunArgs>),
    /// Install a pinned guest CLI into a Switchyard-owned prefix and seal it.
    Install(cmd::install::InstallArgs),
    /// Measure Switchyard's own cost (host overhead of `run`, gateway latency and throughput).
    #[command(subcommand)]
    Bench(cmd::bench::BenchCommand),
    /// Run the main job end to end against a scripted model (no real provider needed).
    Demo(cmd::demo::DemoArgs),
    /// Inspect and export the record store (runs, events, model exchanges).
    Records(cmd::records::RecordsArgs),
    /// Serve the model gateway standalone (GenerateContent in, Chat Completions out).
    Gateway(cmd::gateway::GatewayArgs),
    /// Check an agent, provider and model end to end on the inert validation fixture (observe
    /// an image, record a nonce twice, finish with the colour); writes DIR/validation.json.
    Validate(cmd::validate::ValidateArgs),
    /// Record fixtures: run the real guest against scripted upstreams and store transcripts.
    Capture(cmd::capture::CaptureArgs),
    /// Record fixtures of a real OpenAI-compatible server's answers to the gateway's requests.
    CaptureUpstream(cmd::capture_upstream::CaptureUpstreamArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    cmd::init_logging();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("switchyard: cannot start the async runtime: {e}");
            return ExitCode::from(cmd::EXIT_INTERNAL);
        }
    };
    let result = runtime.block_on(async move {
        match cli.command {
            Command::Run(args) => cmd::run::run(*args).await,
            Command::Install(args) => cmd::install::run(args).await,
            Command::Capture(args) => cmd::capture::run(args).await,
            Command::CaptureUpstream(args) => cmd::capture_upstream::run(args).await,
            Command::Bench(command) => cmd::bench::run(command).await,
            Command::Demo(args) => cmd::demo::run(args).await,
            Command::Records(args) => cmd::records::run(args).map(|()| 0),
            Command::Validate(args) => cmd::validate::run(args).await,
            Command::Gateway(args) => cmd::gateway::run(args).await.map(|()| 0),
        }
    });
    match result {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("switchyard: {e:#}");
            ExitCode::from(cmd::EXIT_INTERNAL)
        }
    }
}
