//! Captured guest requests that the gateway's tests and benchmarks replay (see
//! `benches/data/README.md`). Not behind the `bench` feature: the tests need them too.

/// The first request Gemini CLI 0.61.0 sent in a captured run (~47 KB: the system instruction
/// and 16 tool declarations).
pub const GEMINI_CLI_FIRST_REQUEST: &[u8] =
    include_bytes!("../benches/data/gemini-cli-0.61.0-first-request.json");
