//! Remembers PNG → lossless WebP conversions across requests.
//!
//! A guest resends its whole history on every turn, so an image it read once (a screenshot, a
//! diagram) is in every later request. Re-encoding it as lossless WebP and verifying the pixels
//! takes tens to hundreds of milliseconds per image (45 ms for a simple 1280×800 screenshot), on
//! every turn, for every image so far. [`ConversionCache`] keeps each conversion's outcome under
//! the SHA-256 of the PNG bytes, so a later request pays one hash per image instead.
//!
//! * Bounded by the bytes of the WebP files it holds (least recently used evicted first); an
//!   outcome larger than the whole bound is not kept.
//! * Pass-through outcomes (undecodable, over the pixel budget, 16-bit, animated) are kept too
//!   (their reason is small), so a bad image is looked at once, not on every turn.
//! * Pure memory, no I/O; safe to share between threads.

use std::sync::{Arc, Mutex};

use hashlink::LinkedHashMap;

use sha2::{Digest, Sha256};

use crate::image::{PngConversion, png_to_lossless_webp};

/// A PNG's identity in the cache: the SHA-256 of its bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ImageKey([u8; 32]);

impl ImageKey {
    pub fn of(png_bytes: &[u8]) -> Self {
        Self(Sha256::digest(png_bytes).into())
    }
}

/// Shared, bounded conversion cache (see the module docs).
#[derive(Debug)]
pub struct ConversionCache {
    capacity_bytes: usize,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    /// Least recently used first.
    entries: LinkedHashMap<ImageKey, Entry>,
    /// Sum of the entries' sizes.
    held_bytes: usize,
    hits: u64,
    misses: u64,
}

#[derive(Debug)]
struct Entry {
    conversion: Arc<PngConversion>,
    size: usize,
}

/// Hits and misses so far, and what the cache holds now.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CacheStats {
    pub hits: u64,
    pub misses: u64,
    pub entries: usize,
    pub held_bytes: usize,
}

fn size_of(conversion: &PngConversion) -> usize {
    match conversion {
        PngConversion::Reencoded { webp } => webp.len(),
        PngConversion::PassThrough { reason } => reason.len(),
    }
}

impl ConversionCache {
    /// A cache holding at most `capacity_bytes` of converted images.
    pub fn new(capacity_bytes: usize) -> Self {
        Self {
            capacity_bytes,
            state: Mutex::new(State::default()),
        }
    }

    /// The conversion of `png_bytes`: remembered, or computed (outside the lock, with the pixel
    /// budget `max_pixels`) and remembered. The flag is true when it was remembered.
    pub fn convert(&self, png_bytes: &[u8], max_pixels: u64) -> (Arc<PngConversion>, bool) {
        let key = ImageKey::of(png_bytes);
        if let Some(conversion) = self.get(&key) {
            return (conversion, true);
        }
        let conversion = Arc::new(png_to_lossless_webp(png_bytes, max_pixels));
        self.insert(key, Arc::clone(&conversion));
        (conversion, false)
    }

    /// The remembered conversion of the PNG `key` names, if any (counted as a hit or a miss).
    pub fn get(&self, key: &ImageKey) -> Option<Arc<PngConversion>> {
        let mut state = self.lock();
        match state.entries.to_back(key) {
            Some(entry) => {
                let conversion = Arc::clone(&entry.conversion);
                state.hits += 1;
                Some(conversion)
            }
            None => {
                state.misses += 1;
                None
            }
        }
    }

    /// Whether the PNG `key` names is remembered (not counted, not made recent).
    pub fn contains(&self, key: &ImageKey) -> bool {
        self.lock().entries.contains_key(key)
    }

    /// Remembers a conversion, least recently used ones evicted to stay within the bound; an
    /// outcome larger than the whole bound is not kept.
    pub fn insert(&self, key: ImageKey, conversion: Arc<PngConversion>) {
        let size = size_of(&conversion);
        if size > self.capacity_bytes {
            return;
        }
        let mut state = self.lock();
        if let Some(previous) = state.entries.insert(key, Entry { conversion, size }) {
            // Another request converted the same image meanwhile.
            state.held_bytes -= previous.size;
        }
        state.held_bytes += size;
        while state.held_bytes > self.capacity_bytes {
            let Some((_, evicted)) = state.entries.pop_front() else {
                break;
            };
            state.held_bytes -= evicted.size;
        }
    }

    /// Hits, misses and contents so far.
    pub fn stats(&self) -> CacheStats {
        let state = self.lock();
        CacheStats {
            hits: state.hits,
            misses: state.misses,
            entries: state.entries.len(),
            held_bytes: state.held_bytes,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // A panic while holding the lock cannot leave the map inconsistent with `held_bytes`
        // in a way that matters (at worst eviction runs early), so a poisoned lock is used as is.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAX: u64 = crate::image::DEFAULT_MAX_IMAGE_PIXELS;

    fn png(width: u32, seed: u8) -> Vec<u8> {
        let data: Vec<u8> = (0..width * 4 * 3)
            .map(|i| (i as u8).wrapping_mul(seed))
            .collect();
        switchyard_testkit::fixtures::rgb_png(width, 4, &data).unwrap()
    }

    #[test]
    fn a_second_conversion_of_the_same_png_is_remembered_and_identical() {
        let cache = ConversionCache::new(1 << 20);
        let image = png(16, 7);
        let (first, hit) = cache.convert(&image, MAX);
        assert!(!hit);
        let (second, hit) = cache.convert(&image, MAX);
        assert!(hit);
        assert!(Arc::ptr_eq(&first, &second));
        assert_eq!(*first, png_to_lossless_webp(&image, MAX));
        let (_, hit) = cache.convert(&png(16, 9), MAX);
        assert!(!hit, "another image is another entry");
        let stats = cache.stats();
        assert_eq!((stats.hits, stats.misses, stats.entries), (1, 2, 2));
    }

    #[test]
    fn the_least_recently_used_image_goes_first_when_the_bound_is_reached() {
        let images: Vec<Vec<u8>> = (1..=3).map(|seed| png(64, seed * 3)).collect();
        let sizes: Vec<usize> = images
            .iter()
            .map(|i| size_of(&png_to_lossless_webp(i, MAX)))
            .collect();
        // Room for the first two images, not for all three.
        let cache = ConversionCache::new(sizes[0] + sizes[1] + sizes[2] - 1);
        cache.convert(&images[0], MAX);
        cache.convert(&images[1], MAX);
        cache.convert(&images[0], MAX); // image 1 is now the least recently used
        cache.convert(&images[2], MAX);
        assert_eq!(cache.stats().held_bytes, sizes[0] + sizes[2]);
        assert!(cache.convert(&images[0], MAX).1, "recently used: kept");
        assert!(
            !cache.convert(&images[1], MAX).1,
            "least recently used: evicted"
        );
    }

    #[test]
    fn undecodable_images_are_remembered_as_passed_through_and_oversized_outcomes_not_kept() {
        let cache = ConversionCache::new(1 << 20);
        let (first, hit) = cache.convert(b"not a png", MAX);
        assert!(!hit);
        assert!(matches!(*first, PngConversion::PassThrough { .. }));
        assert!(cache.convert(b"not a png", MAX).1, "looked at once");
        let small = ConversionCache::new(1);
        let image = png(16, 5);
        assert!(!small.convert(&image, MAX).1);
        assert!(!small.convert(&image, MAX).1, "larger than the bound");
        assert_eq!(small.stats().held_bytes, 0);
    }
}
