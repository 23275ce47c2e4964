//! An image a guest read: PNG → lossless WebP conversion never fails and never panics; whatever
//! it cannot convert passes through with a reason.
#![no_main]

use libfuzzer_sys::fuzz_target;
use switchyard_translate::image::png_to_lossless_webp;

// The decoder underneath may panic on hostile files; the contract fuzzed here is that no
// panic leaves `png_to_lossless_webp` (it catches them). libfuzzer-sys aborts on every panic,
// caught or not, so the hook is quieted and an escaping panic aborts explicitly.
fuzz_target!(|data: &[u8]| {
    static QUIET: std::sync::Once = std::sync::Once::new();
    QUIET.call_once(|| std::panic::set_hook(Box::new(|_| {})));
    // A budget small enough that a hostile header cannot make one run slow.
    let converted = std::panic::catch_unwind(|| png_to_lossless_webp(data, 256 * 256));
    if converted.is_err() {
        std::process::abort();
    }
});
