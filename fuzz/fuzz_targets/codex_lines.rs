//! Codex's app-server stdout: each line is read as JSON-RPC (a notification, a server request,
//! or neither), typed by the wire module and mapped to canonical events, with the calls it names
//! looked up first, then the run is finished; unknown or broken lines are kept and counted,
//! never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use serde_json::Value;
use switchyard_events::codex::CodexNormalizer;
use switchyard_protocol::codex::parse_server_request;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let mut normalizer = CodexNormalizer::default();
    let _ = normalizer.thread("thread", "model");
    let _ = normalizer.prompt_sent("fuzz");
    for line in text.lines() {
        let Ok(message) = serde_json::from_str::<Value>(line) else {
            let _ = normalizer.unrecognized_text(line, "not JSON");
            continue;
        };
        let params = message.get("params").cloned().unwrap_or(Value::Null);
        match (
            message.get("method").and_then(Value::as_str),
            message.get("id"),
        ) {
            (Some(method), None) => {
                let _ = CodexNormalizer::named_calls(method, &params);
                let _ = normalizer.notification(method, &params);
            }
            (Some(method), Some(_)) => {
                let _ = parse_server_request(method, &params);
                let _ = normalizer.unserved_request(method, &message);
            }
            (None, _) => {
                let _ = normalizer.unrecognized_text(line, "not a notification");
            }
        }
    }
    let _ = normalizer.unrecognized();
    let _ = normalizer.finish(1, switchyard_events::GuestExit::default(), None);
});
