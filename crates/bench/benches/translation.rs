//! What translating Gemini CLI's real first request (~47 KB) costs the gateway, in one run:
//! * `uncached`: parse the whole request, translate it, serialize the Chat request;
//! * `gateway_translator`: the same through the gateway's `RequestTranslator`;
//! * `png_in_history_*`: the same request with a 1280×800 screenshot-like PNG in its history,
//!   once converted to lossless WebP on every request (`translate_request`, no conversion cache)
//!   and once with the conversion remembered (`RequestTranslator`, every turn after the one that
//!   brought the image).
//!
//! Run: `cargo bench -p switchyard-bench --bench translation`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use switchyard_gateway::translation::RequestTranslator;
use switchyard_testkit::fixtures::GEMINI_CLI_FIRST_REQUEST;
use switchyard_translate::TranslateOptions;

fn main() {
    divan::main();
}

fn options() -> TranslateOptions {
    TranslateOptions::new("bench-model", true)
}

/// A translator whose caches already hold what translating `body` fills them with.
fn translator_after(body: &[u8]) -> RequestTranslator {
    let translator = RequestTranslator::new();
    translator
        .translate(body, &options(), None)
        .expect("the first translation fills the caches");
    translator
}

#[divan::bench]
fn uncached() -> usize {
    let request = switchyard_translate::parse_request(divan::black_box(GEMINI_CLI_FIRST_REQUEST))
        .expect("the captured request parses");
    let translated =
        switchyard_translate::translate_request(&request, &options()).expect("it translates");
    serde_json::to_vec(&translated.chat)
        .expect("it serializes")
        .len()
}

/// The gateway's translator (parse, translate, serialize; conversions remembered).
#[divan::bench]
fn gateway_translator(bencher: divan::Bencher) {
    let translator = translator_after(GEMINI_CLI_FIRST_REQUEST);
    let options = options();
    bencher.bench_local(|| {
        let translated = translator
            .translate(divan::black_box(GEMINI_CLI_FIRST_REQUEST), &options, None)
            .expect("it translates");
        translated.body.len()
    });
}

/// Gemini CLI's first request with a 1280×800 screenshot-like PNG (flat background, stripes of
/// "text") added to the user's turn.
fn request_with_png() -> Vec<u8> {
    use base64::Engine;
    let (width, height) = (1280u32, 800u32);
    let mut pixels = Vec::with_capacity((width * height * 3) as usize);
    for y in 0..height {
        for x in 0..width {
            let ink = (y / 16) % 2 == 0 && (x / 7) % 3 == 0 && (x * 31 + y * 17) % 11 > 3;
            let v: u8 = if ink { 30 } else { 240 };
            pixels.extend_from_slice(&[v, v, v.saturating_add(10)]);
        }
    }
    let png_bytes =
        switchyard_testkit::fixtures::rgb_png(width, height, &pixels).expect("the PNG encodes");
    let mut request: serde_json::Value =
        serde_json::from_slice(GEMINI_CLI_FIRST_REQUEST).expect("the captured request parses");
    request["contents"][0]["parts"]
        .as_array_mut()
        .expect("parts")
        .push(serde_json::json!({"inlineData": {
            "mimeType": "image/png",
            "data": base64::engine::general_purpose::STANDARD.encode(&png_bytes)
        }}));
    serde_json::to_vec(&request).expect("it serializes")
}

#[divan::bench(sample_count = 20)]
fn png_in_history_converted_each_time(bencher: divan::Bencher) {
    let body = request_with_png();
    let options = options();
    bencher.bench_local(|| {
        let request = switchyard_translate::parse_request(divan::black_box(&body)).expect("parses");
        let translated =
            switchyard_translate::translate_request(&request, &options).expect("it translates");
        assert_eq!(translated.report.images_reencoded, 1);
        serde_json::to_vec(&translated.chat)
            .expect("it serializes")
            .len()
    });
}

#[divan::bench]
fn png_in_history_remembered(bencher: divan::Bencher) {
    let body = request_with_png();
    let translator = translator_after(&body);
    let options = options();
    bencher.bench_local(|| {
        let translated = translator
            .translate(divan::black_box(&body), &options, None)
            .expect("it translates");
        assert_eq!(translated.report.reencodings_remembered, 1);
        translated.body.len()
    });
}
