//! OpenCode's `/event` stream: bytes are bounded per event, split into server-sent events, and
//! each event's JSON normalized into canonical events, then the run is finished; unknown or
//! broken events are kept and counted, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use switchyard_events::opencode::OpenCodeNormalizer;
use switchyard_protocol::sse::EventScan;

fuzz_target!(|data: &[u8]| {
    let mut scan = EventScan::default();
    if !scan.push(data, 1 << 20) {
        return;
    }
    let text = String::from_utf8_lossy(data);
    let mut normalizer = OpenCodeNormalizer::new("ses_fuzz");
    let _ = normalizer.prompt_sent("fuzz");
    for event in text.split("\n\n") {
        let payload: String = event
            .lines()
            .filter_map(|line| line.strip_prefix("data:"))
            .map(str::trim_start)
            .collect::<Vec<_>>()
            .join("\n");
        match serde_json::from_str::<serde_json::Value>(&payload) {
            Ok(raw) => {
                let _ = normalizer.event(&raw);
            }
            Err(_) => {
                let _ = normalizer.unrecognized_payload("not JSON", payload.into());
            }
        }
    }
    let _ = normalizer.prompt_done();
    let _ = normalizer.unrecognized();
    let _ = normalizer.finish(1, switchyard_events::GuestExit::default(), None);
});
