//! A guest's GenerateContent request body: parsing and translating it to Chat Completions must
//! end in a value or a typed error, never a panic, whatever the bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;
use switchyard_translate::{ConversionCache, TranslateOptions};

fuzz_target!(|data: &[u8]| {
    let Ok(request) = switchyard_translate::parse_request(data) else {
        return;
    };
    let mut options = TranslateOptions::new("fuzz-model", true);
    // Images stay cheap: the pixel budget is checked before any decoding.
    options.provider.max_image_pixels = 64 * 64;
    let cache = ConversionCache::new(1 << 20);
    if let Ok(translated) =
        switchyard_translate::translate_request_with(&request, &options, Some(&cache))
    {
        let _ = serde_json::to_vec(&translated.chat);
    }
    let _ = switchyard_translate::estimate_request_tokens(&request);
    let mut ledger = switchyard_translate::CallLedger::new();
    ledger.adopt_history(&request);
    let _ = ledger.check_request(&request);
});
