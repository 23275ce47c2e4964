//! Captured guest requests that tests and benchmarks replay (see `data/README.md`).

/// The first request Gemini CLI 0.61.0 sent in a captured run (~47 KB: the system instruction
/// and 16 tool declarations).
pub const GEMINI_CLI_FIRST_REQUEST: &[u8] =
    include_bytes!("../data/gemini-cli-0.61.0-first-request.json");
