//! `switchyard`: runs coding-agent CLIs as managed, exactly-typed, model-agnostic backends.
//!
//! Subcommands live in [`switchyard::cmd`], one file each. Exit codes are documented in the
//! README ("Exit codes") and defined in [`switchyard::cmd::run::exit_code_for`].

use clap::Parser;

#[derive(Parser)]
#[command(
    name = "switchyard",
    version,
    about = "Run agent CLIs as managed, typed, model-agnostic backends"
)]
struct Cli {
    #[command(subcommand)]
    command: switchyard::Command,
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    switchyard::main_with(cli.command.run())
}
