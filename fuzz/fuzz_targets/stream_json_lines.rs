//! Gemini CLI's stream-json stdout: every line is parsed and normalized into canonical events,
//! then the run is finished; unknown or broken lines are kept and counted, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use switchyard_events::gemini::GeminiNormalizer;
use switchyard_protocol::gemini_cli::stream_json::parse_line;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let mut normalizer = GeminiNormalizer::new();
    for line in text.split('\n') {
        let _ = normalizer.push_line(parse_line(line));
    }
    let _ = normalizer.unrecognized_lines();
    let _ = normalizer.finish(switchyard_events::GuestExit::default(), None);
});
