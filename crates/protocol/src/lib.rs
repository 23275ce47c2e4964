//! Exact wire types of the guest CLIs' control protocols.
//!
//! This crate does no I/O: it turns bytes a guest printed into typed values and back, keeping
//! everything it does not recognise (unknown fields, unknown event types, malformed lines) so the
//! caller can count and record it. Meaning that Switchyard derives from these types lives in
//! `switchyard-events`, never here.

pub mod auth;
pub mod codex;
pub mod codex_catalog;
pub mod gemini_cli;
pub mod opencode;
pub mod sse;
