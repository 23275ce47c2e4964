//! PNG → lossless WebP conversions off the runtime: a request's PNGs that the image cache does
//! not hold yet are converted on tokio's blocking pool, [`MAX_CONCURRENT_CONVERSIONS`] at a time,
//! each distinct image once, and remembered; the request is then translated with them. A
//! conversion that fails, panics or is over the pixel budget passes the PNG unchanged: converting
//! is an optimisation and never fails a request.

use std::sync::Arc;

use switchyard_translate::image::{PngConversion, png_to_lossless_webp};
use switchyard_translate::{ConversionCache, ImageKey};
use tokio::sync::Semaphore;

/// Conversions running at once (each can take a core for up to seconds).
pub const MAX_CONCURRENT_CONVERSIONS: usize = 2;

/// Runs conversions on the blocking pool, a few at a time.
#[derive(Debug)]
pub(crate) struct ImageConverter {
    slots: Semaphore,
}

impl ImageConverter {
    pub fn new() -> Self {
        Self {
            slots: Semaphore::new(MAX_CONCURRENT_CONVERSIONS),
        }
    }

    /// Converts each of `pngs` that `cache` does not hold yet and remembers it there.
    pub async fn convert_into(&self, cache: &ConversionCache, pngs: Vec<Vec<u8>>, max_pixels: u64) {
        for png in pngs {
            let key = ImageKey::of(&png);
            // The semaphore is never closed; without a slot, do not convert at all.
            let Ok(_slot) = self.slots.acquire().await else {
                return;
            };
            // Another request may have converted it while this one waited.
            if cache.contains(&key) {
                continue;
            }
            let converted =
                tokio::task::spawn_blocking(move || png_to_lossless_webp(&png, max_pixels)).await;
            let conversion = converted.unwrap_or_else(|e| PngConversion::PassThrough {
                reason: format!("the conversion failed ({e}), forwarded unchanged"),
            });
            cache.insert(key, Arc::new(conversion));
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU32, Ordering};
    use std::time::Duration;

    use super::*;

    /// A `side` x `side` RGB PNG of noise (slow to convert).
    fn noise_png(side: u32) -> Vec<u8> {
        let mut state = 0x2545_f491_u32;
        let data: Vec<u8> = (0..side * side * 3)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 17;
                state ^= state << 5;
                state as u8
            })
            .collect();
        switchyard_testkit::fixtures::rgb_png(side, side, &data).unwrap()
    }

    // One runtime thread: had the conversion run on it, nothing else could run meanwhile.
    #[tokio::test(flavor = "current_thread")]
    async fn conversions_run_off_the_runtime_and_are_remembered() {
        let cache = ConversionCache::new(64 << 20);
        let converter = ImageConverter::new();
        let png = noise_png(1_024);
        let ticks = AtomicU32::new(0);
        let ticker = async {
            loop {
                tokio::time::sleep(Duration::from_millis(1)).await;
                ticks.fetch_add(1, Ordering::Relaxed);
            }
        };
        let started = std::time::Instant::now();
        tokio::select! {
            () = converter.convert_into(&cache, vec![png.clone(), png.clone()], u64::MAX) => {}
            () = ticker => unreachable!("the ticker never ends"),
        }
        let took = started.elapsed();
        // The ticker ran all along (not a timing bound on the conversion: only that the
        // runtime was free while it ran, which takes many ticks for a conversion this slow).
        let ticked = ticks.load(Ordering::Relaxed);
        assert!(
            f64::from(ticked) > took.as_secs_f64() * 1000.0 / 4.0,
            "{ticked} ticks in {took:?}"
        );
        let key = ImageKey::of(&png);
        assert!(cache.contains(&key));
        assert!(matches!(
            cache.get(&key).as_deref(),
            Some(PngConversion::Reencoded { .. })
        ));
        assert_eq!(cache.stats().entries, 1, "the same image is converted once");
    }
}
