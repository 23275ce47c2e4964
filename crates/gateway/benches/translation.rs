//! What translating Gemini CLI's real first request (~47 KB) costs the gateway, with and without
//! its translation cache, in one run:
//! * `uncached`: parse the whole request, translate it, serialize the Chat request (what every
//!   request would cost without the cache);
//! * `cache_hit`: `RequestTranslator::translate` when the system prompt and tools are cached (every
//!   request of a session after the first): the cached parts are recognised by comparison and
//!   spliced in as shared bytes; only the rest is parsed and translated.
//!
//! Run: `cargo bench -p switchyard-gateway --bench translation`.

use switchyard_gateway::bench::GEMINI_CLI_FIRST_REQUEST;
use switchyard_gateway::translation::RequestTranslator;
use switchyard_translate::TranslateOptions;

fn main() {
    divan::main();
}

fn options() -> TranslateOptions {
    TranslateOptions::new("bench-model", true)
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
    let translator = RequestTranslator::new();
    let options = options();
    translator
        .translate(GEMINI_CLI_FIRST_REQUEST, &options)
        .expect("the first translation fills the cache");
    bencher.bench_local(|| {
        let translated = translator
            .translate(divan::black_box(GEMINI_CLI_FIRST_REQUEST), &options)
            .expect("it translates");
        assert!(translated.cache_hit);
        translated.body.len()
    });
}
