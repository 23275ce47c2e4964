//! Claude Code's stream-json stdout: each line is mapped to canonical events (JSON or not),
//! with the calls it names looked up first, then the run is finished; unknown or broken lines
//! are kept and counted, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use switchyard_events::claude::ClaudeNormalizer;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let mut normalizer = ClaudeNormalizer::default();
    let _ = normalizer.prompt_sent("fuzz");
    for line in text.lines() {
        match serde_json::from_str::<serde_json::Value>(line) {
            Ok(raw) => {
                let _ = ClaudeNormalizer::named_calls(&raw);
                let _ = normalizer.line(&raw);
            }
            Err(_) => {
                let _ = normalizer.unrecognized_text(line);
            }
        }
    }
    let _ = normalizer.unrecognized();
    let _ = normalizer.finish(1, switchyard_events::GuestExit::default(), None);
});
