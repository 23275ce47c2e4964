//! An upstream's Chat Completions answer: each line of the input is one server-sent event's
//! data, pushed through the stream translator; the whole input is also read as a non-streamed
//! completion. Both must end in chunks or a typed error, never a panic; once with the upstream's
//! ids, once with the gateway's own.
#![no_main]

use libfuzzer_sys::fuzz_target;
use switchyard_translate::{ResponseConfig, StreamTranslator};

fn config(mint_call_ids: bool) -> ResponseConfig {
    ResponseConfig {
        model_version: "fuzz-model".into(),
        response_id: "r".into(),
        synthetic_id_prefix: "call_fuzz".into(),
        mint_call_ids,
        ..ResponseConfig::default()
    }
}

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    for mint in [false, true] {
        let mut translator = StreamTranslator::new(config(mint));
        for event in text.split('\n') {
            if translator.push(event).is_err() || translator.is_done() {
                break;
            }
        }
        let _ = translator.finish();
        let _ = switchyard_translate::translate_completion(data, config(mint));
    }
});
