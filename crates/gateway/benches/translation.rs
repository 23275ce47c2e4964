//! What translating Gemini CLI's real first request (~47 KB) costs the gateway, with and without
//! its translation cache, in one run:
//! * `uncached`: parse the whole request, translate it, serialize the Chat request (what every
//!   request would cost without the cache);
//! * `cache_hit`: `RequestTranslator::translate` when the system prompt and tools are cached (every
//!   request of a session after the first): the cached parts are recognised by comparison and
//!   spliced in as shared bytes; only the rest is parsed and translated. `cache_hit_cold` is the
//!   same with the CPU caches cold first, as they are in a gateway between requests;
//! * `png_in_history_*`: the same request with a 1280×800 screenshot-like PNG in its history,
//!   once converted to lossless WebP on every request (`translate_request`, no conversion cache)
//!   and once with the conversion remembered (`RequestTranslator`, every turn after the one that
//!   brought the image).
//!
//! Run: `cargo bench -p switchyard-gateway --bench translation`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use switchyard_gateway::fixtures::GEMINI_CLI_FIRST_REQUEST;
use switchyard_gateway::translation::RequestTranslator;
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
        .translate(body, &options())
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

#[divan::bench]
fn cache_hit(bencher: divan::Bencher) {
    let translator = translator_after(GEMINI_CLI_FIRST_REQUEST);
    let options = options();
    bencher.bench_local(|| {
        let translated = translator
            .translate(divan::black_box(GEMINI_CLI_FIRST_REQUEST), &options)
            .expect("it translates");
        assert!(translated.cache_hit);
        translated.body.len()
    });
}

/// `cache_hit` with the caches cold, as in the gateway between requests: 8 MiB are written
/// before each translation. (Measured 2026-11-30: median 24.3 µs against 7.9 µs warm; a probe
/// in the standalone gateway fed back-to-back by a socket client saw 29 µs.)
#[divan::bench]
fn cache_hit_cold(bencher: divan::Bencher) {
    let translator = translator_after(GEMINI_CLI_FIRST_REQUEST);
    let options = options();
    let mut thrash = vec![0u8; 8 << 20];
    bencher
        .with_inputs(|| {
            for (i, b) in thrash.iter_mut().enumerate().step_by(64) {
                *b = b.wrapping_add(i as u8);
            }
            GEMINI_CLI_FIRST_REQUEST.to_vec()
        })
        .bench_local_refs(|body| {
            let translated = translator.translate(body, &options).expect("it translates");
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
    let mut png_bytes = Vec::new();
    let mut encoder = png::Encoder::new(&mut png_bytes, width, height);
    encoder.set_color(png::ColorType::Rgb);
    encoder.set_depth(png::BitDepth::Eight);
    encoder
        .write_header()
        .and_then(|mut w| w.write_image_data(&pixels))
        .expect("the PNG encodes");
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
            .translate(divan::black_box(&body), &options)
            .expect("it translates");
        assert_eq!(translated.report.reencodings_remembered, 1);
        translated.body.len()
    });
}
