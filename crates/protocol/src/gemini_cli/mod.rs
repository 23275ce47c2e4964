//! Gemini CLI 0.61.0 headless transport (`gemini -p ... --output-format stream-json|json`).
//!
//! Shapes are taken from captured fixtures (`fixtures/gemini-cli/0.61.0/`) and from the CLI's
//! `packages/core/src/output/types.ts`. Every struct keeps unknown fields in `extra`.

pub mod exit;
pub mod json_output;
pub mod stream_json;

/// The Gemini CLI version these types were verified against.
pub const VERIFIED_VERSION: &str = "0.61.0";
