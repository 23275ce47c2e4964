//! `switchyard-dev`: the developers' binary. It has every `switchyard` command, and the ones that
//! need scripted upstreams or measure Switchyard itself: `demo`, `bench`, `capture`,
//! `capture-upstream`, and `validate` offline. None of them ships in `switchyard`.

mod cmd;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "switchyard-dev",
    version,
    about = "Switchyard's commands plus the developers' own (demo, bench, capture)"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run one task with a guest agent CLI against a model you choose.
    Run(Box<switchyard::cmd::run::RunArgs>),
    /// Install a pinned guest CLI into a Switchyard-owned prefix and seal it.
    Install(switchyard::cmd::install::InstallArgs),
    /// Inspect and export the record store (runs, events, model exchanges).
    Records(switchyard::cmd::records::RecordsArgs),
    /// Serve the model gateway standalone (GenerateContent in, Chat Completions out).
    Gateway(switchyard::cmd::gateway::GatewayArgs),
    /// `switchyard validate`; without `--upstream-url`, against a scripted model on 127.0.0.1.
    Validate(cmd::validate::DevValidateArgs),
    /// Run the main job end to end against a scripted model (no real provider needed).
    Demo(cmd::demo::DemoArgs),
    /// Measure Switchyard's own cost (host overhead of `run`, gateway latency and throughput).
    #[command(subcommand)]
    Bench(cmd::bench::BenchCommand),
    /// Record fixtures: run the real guest against scripted upstreams and store transcripts.
    Capture(cmd::capture::CaptureArgs),
    /// Record fixtures of a real OpenAI-compatible server's answers to the gateway's requests.
    CaptureUpstream(cmd::capture_upstream::CaptureUpstreamArgs),
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    switchyard::main_with(async move {
        use switchyard::Command as Product;
        match cli.command {
            Command::Run(args) => Product::Run(args).run().await,
            Command::Install(args) => Product::Install(args).run().await,
            Command::Records(args) => Product::Records(args).run().await,
            Command::Gateway(args) => Product::Gateway(args).run().await,
            Command::Validate(args) => cmd::validate::run(args).await,
            Command::Demo(args) => cmd::demo::run(args).await,
            Command::Bench(command) => cmd::bench::run(command).await,
            Command::Capture(args) => cmd::capture::run(args).await,
            Command::CaptureUpstream(args) => cmd::capture_upstream::run(args).await,
        }
    })
}
