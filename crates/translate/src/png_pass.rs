//! The PNG → lossless WebP step of one request's translation, shared by every guest dialect:
//! conversions taken from (and kept in) the conversion cache, PNGs the cache does not hold
//! handed back for the caller to convert off its request threads, and every decision noted in
//! the request's report.

use std::sync::Arc;

use crate::image::{PngConversion, png_to_lossless_webp};
use crate::image_cache::{ConversionCache, ImageKey};
use crate::options::{ProviderOptions, TranslationReport};

/// PNG conversions of one request.
pub(crate) struct PngPass<'a> {
    images: Option<&'a ConversionCache>,
    convert_on_miss: bool,
    /// Keys of `unconverted_pngs`.
    unconverted: Vec<ImageKey>,
    /// PNGs not converted because the cache did not hold them (`convert_on_miss` off).
    pub unconverted_pngs: Vec<Vec<u8>>,
}

impl<'a> PngPass<'a> {
    pub fn new(images: Option<&'a ConversionCache>, convert_on_miss: bool) -> Self {
        Self {
            images,
            convert_on_miss,
            unconverted: Vec::new(),
            unconverted_pngs: Vec::new(),
        }
    }

    /// The WebP that replaces the PNG `bytes` (at `path` of the request), or `None` when it
    /// goes upstream unchanged (conversion off, over the pixel budget, undecodable, not
    /// converted yet); the reason is noted in `report`.
    pub fn webp(
        &mut self,
        bytes: &[u8],
        provider: &ProviderOptions,
        report: &mut TranslationReport,
        path: &str,
    ) -> Option<Arc<PngConversion>> {
        if !provider.reencode_png {
            return None;
        }
        let max_pixels = provider.max_image_pixels;
        let conversion = match self.images {
            Some(cache) if self.convert_on_miss => {
                let (conversion, remembered) = cache.convert(bytes, max_pixels);
                report.reencodings_remembered += u32::from(remembered);
                Some(conversion)
            }
            Some(cache) => {
                let key = ImageKey::of(bytes);
                let remembered = cache.get(&key);
                report.reencodings_remembered += u32::from(remembered.is_some());
                if remembered.is_none() && !self.unconverted.contains(&key) {
                    self.unconverted.push(key);
                    self.unconverted_pngs.push(bytes.to_vec());
                }
                remembered
            }
            None => Some(Arc::new(png_to_lossless_webp(bytes, max_pixels))),
        };
        match conversion.as_deref() {
            Some(PngConversion::Reencoded { webp }) => {
                report.images_reencoded += 1;
                report.reencoded_bytes_before += bytes.len() as u64;
                report.reencoded_bytes_after += webp.len() as u64;
                return conversion;
            }
            Some(PngConversion::PassThrough { reason }) => {
                report.png_passthrough.push(format!("{path}: {reason}"));
            }
            None => report
                .png_passthrough
                .push(format!("{path}: not converted yet, forwarded unchanged")),
        }
        None
    }
}
