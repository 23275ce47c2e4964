//! Runs one task with a guest agent CLI: the settings (a TOML file under flags) resolved and
//! checked, the sealed install verified, the embedded gateway, the host tools' binding and MCP
//! server, the record sink, and the guest's session state for `--resume`. The agent registry
//! ([`agents`]) says what each agent can do and how it is launched.
//!
//! `switchyard run`, `validate`, `demo` and `bench` all run through [`execute`]; the `switchyard`
//! crate keeps the command line and the printing. With the `clap` feature the settings are also
//! the command line's flags.

pub mod agents;
mod claude;
mod codex;
mod execute;
mod gemini;
pub mod home;
mod host;
mod opencode;
mod prompts;
mod resolve;
mod settings;
mod spans;
pub mod worker;

pub use execute::{ExecuteOptions, Executed, RunObserver, execute, execute_with};
pub use home::random_token;
pub use resolve::{
    DEFAULT_KEY_ENV, HostTools, InstallRefused, ResolvedRun, Target, find_sealed_prefix,
    verify_install,
};
pub use settings::{
    Agent, ApprovalArg, OutputMode, ProtocolArg, RunSettings, context_with_flags,
    parse_context_policy,
};
