//! Gemini CLI's ACP stdout: each JSON-RPC line is mapped as the backend maps it
//! (`session/update` notifications, prompt answers and errors, anything else unrecognized)
//! into canonical events, then the run is finished; never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use serde_json::Value;
use switchyard_events::acp::{AcpNormalizer, RpcError};

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let mut normalizer = AcpNormalizer::new();
    let _ = normalizer.prompt_sent("fuzz");
    let lookup = |_: &str| None;
    for line in text.split('\n') {
        let Ok(message) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        if message["method"] == "session/update" {
            let _ = normalizer.update(&message["params"], &lookup);
        } else if let Some(result) = message.get("result") {
            let _ = normalizer.prompt_answered(Ok(result));
        } else if let Some(error) = message.get("error") {
            let error = RpcError {
                code: error["code"].as_i64().unwrap_or(0),
                message: error["message"].as_str().unwrap_or_default().to_owned(),
            };
            let _ = normalizer.prompt_answered(Err(&error));
        } else if let Some(id) = message.get("toolCallId").and_then(Value::as_str) {
            let _ = normalizer.tool_call(id, &lookup);
            let _ = normalizer.tool_rejected(id, "fuzz");
        }
    }
    let _ = normalizer.unrecognized();
    let _ = normalizer.finish(1, switchyard_events::GuestExit::default(), None);
});
