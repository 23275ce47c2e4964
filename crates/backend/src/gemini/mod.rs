//! The Gemini CLI 0.61.0 backend: headless (`gemini -p ... --output-format stream-json`) or ACP.
//!
//! - [`settings`]: the per-run settings file Switchyard generates (pure);
//! - [`launch`]: the isolated run directory, allowlisted environment and argv;
//! - [`system_settings`]: where the system-precedence settings go so that the CLI loads them;
//! - [`run`]: the headless controller and mapping on the neutral driver (stream-json into
//!   canonical events, the typed outcome);
//! - [`acp`]: the same over the Agent Client Protocol (`gemini --acp`): sessions, several
//!   prompts, permission requests, cancel and resume.

pub mod acp;
pub mod launch;
pub mod run;
pub mod settings;
pub mod system_settings;

/// The npm package of the guest.
pub const PACKAGE: &str = "@google/gemini-cli";
/// The pinned version: the one the protocol types were verified against.
pub const VERSION: &str = switchyard_protocol::gemini_cli::VERIFIED_VERSION;
/// The JavaScript entry point inside a sealed npm prefix.
pub const ENTRY: &str = "node_modules/@google/gemini-cli/bundle/gemini.js";
