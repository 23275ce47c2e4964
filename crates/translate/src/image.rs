//! PNG -> lossless WebP re-encoding (libwebp, `lossless = 1`, `exact = 1`, method 4), verified
//! pixel-identical by decoding the result with the pure-Rust `image-webp` decoder.
//!
//! `exact = 1` keeps the RGB values of fully transparent pixels (libwebp's default rewrites them).
//! Converting is an optimisation: it never fails. Whatever is not converted is passed through
//! unchanged with a reason ([`PngConversion::PassThrough`]): PNGs that cannot be decoded (cut
//! off, corrupt), images over the pixel budget (checked from the header, before any pixel is
//! decoded or allocated), 16-bit PNGs (WebP is 8 bits per channel), animated PNGs, and images
//! wider or taller than 16383 px. If the verification decode ever differs, the PNG is passed
//! through too, so re-encoding is never silently lossy.
//!
//! This module holds the only `unsafe` code of the crate: [`encode_lossless_exact`].

use std::ffi::c_void;
use std::io::Cursor;
use std::mem::MaybeUninit;

use libwebp_sys as webp;

/// WebP's maximum width/height.
pub const WEBP_MAX_DIMENSION: u32 = 16383;

/// Outcome of [`png_to_lossless_webp`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PngConversion {
    /// Re-encoded; pixels verified identical.
    Reencoded {
        /// The WebP file.
        webp: Vec<u8>,
    },
    /// Not re-encodable without loss; send the PNG unchanged.
    PassThrough {
        /// Why (recorded in the translation report).
        reason: String,
    },
}

/// Image errors.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ImageError {
    /// The PNG cannot be decoded.
    #[error("PNG decode failed: {0}")]
    Decode(String),
    /// libwebp failed (allocation or bad dimensions).
    #[error("WebP encode failed: {0}")]
    Encode(String),
}

/// 8-bit pixels, 3 (RGB) or 4 (RGBA) bytes each, row-major, no padding.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pixels {
    /// Width in pixels.
    pub width: u32,
    /// Height in pixels.
    pub height: u32,
    /// Whether there is an alpha byte per pixel.
    pub has_alpha: bool,
    /// The bytes.
    pub data: Vec<u8>,
}

/// The default pixel budget: images with more pixels (width × height) are not converted.
/// 4096 × 4096; a 4K screenshot has 8.3 million.
pub const DEFAULT_MAX_IMAGE_PIXELS: u64 = 4096 * 4096;

/// Re-encodes a PNG as lossless WebP, or says why it passes unchanged; never fails. Images of
/// more than `max_pixels` pixels are passed through without being decoded.
pub fn png_to_lossless_webp(png_bytes: &[u8], max_pixels: u64) -> PngConversion {
    // The `png` crate panics on some hostile files (0.18.1: a PLTE chunk whose length is not a
    // multiple of 3, found by fuzzing): a panic is a failed conversion too.
    let converted = std::panic::catch_unwind(|| try_png_to_lossless_webp(png_bytes, max_pixels));
    match converted {
        Ok(Ok(conversion)) => conversion,
        Ok(Err(e)) => PngConversion::PassThrough {
            reason: format!("{e}, forwarded unchanged"),
        },
        Err(_) => PngConversion::PassThrough {
            reason: "the PNG decoder failed on this image, forwarded unchanged".into(),
        },
    }
}

fn try_png_to_lossless_webp(
    png_bytes: &[u8],
    max_pixels: u64,
) -> Result<PngConversion, ImageError> {
    let pixels = match decode_png_8bit(png_bytes, max_pixels)? {
        Ok(pixels) => pixels,
        Err(reason) => return Ok(PngConversion::PassThrough { reason }),
    };
    if pixels.width > WEBP_MAX_DIMENSION || pixels.height > WEBP_MAX_DIMENSION {
        return Ok(PngConversion::PassThrough {
            reason: format!(
                "{}x{} exceeds WebP's {WEBP_MAX_DIMENSION} px limit",
                pixels.width, pixels.height
            ),
        });
    }
    let webp = encode_lossless_exact(&pixels)?;
    match decode_webp(&webp) {
        Ok(back) if same_pixels(&pixels, &back) => Ok(PngConversion::Reencoded { webp }),
        Ok(_) => Ok(PngConversion::PassThrough {
            reason: "WebP verification decode differed from the PNG pixels".into(),
        }),
        Err(e) => Ok(PngConversion::PassThrough {
            reason: format!("WebP verification decode failed: {e}"),
        }),
    }
}

/// Decodes a PNG to 8-bit RGB/RGBA (palette and grayscale expanded, tRNS -> alpha).
/// The inner `Err` is a pass-through reason (over `max_pixels`, 16-bit, animated).
pub fn decode_png_8bit(
    png_bytes: &[u8],
    max_pixels: u64,
) -> Result<Result<Pixels, String>, ImageError> {
    let mut decoder = png::Decoder::new(Cursor::new(png_bytes));
    decoder.set_transformations(png::Transformations::EXPAND);
    let mut reader = decoder
        .read_info()
        .map_err(|e| ImageError::Decode(e.to_string()))?;
    let info = reader.info();
    let pixels = u64::from(info.width) * u64::from(info.height);
    if pixels > max_pixels {
        return Ok(Err(format!(
            "{}x{} is {pixels} pixels, over the pixel budget of {max_pixels}, forwarded unchanged",
            info.width, info.height
        )));
    }
    if info.bit_depth == png::BitDepth::Sixteen {
        return Ok(Err(
            "16-bit PNG: WebP stores 8 bits per channel, forwarded unchanged".into(),
        ));
    }
    if info.animation_control.is_some() {
        return Ok(Err(
            "animated PNG: only a single frame could be re-encoded, forwarded unchanged".into(),
        ));
    }
    let size = reader
        .output_buffer_size()
        .ok_or_else(|| ImageError::Decode("image too large".into()))?;
    let mut buf = vec![0u8; size];
    let frame = reader
        .next_frame(&mut buf)
        .map_err(|e| ImageError::Decode(e.to_string()))?;
    if frame.bit_depth != png::BitDepth::Eight {
        return Ok(Err(format!(
            "unexpected bit depth {:?} after expansion, forwarded unchanged",
            frame.bit_depth
        )));
    }
    let (width, height) = (frame.width, frame.height);
    let row_len = frame.line_size;
    let channels = frame.color_type.samples();
    let mut data = Vec::with_capacity(width as usize * height as usize * 4);
    let has_alpha = matches!(
        frame.color_type,
        png::ColorType::Rgba | png::ColorType::GrayscaleAlpha
    );
    for row in buf.chunks(row_len).take(height as usize) {
        let row = &row[..width as usize * channels];
        match frame.color_type {
            png::ColorType::Rgb | png::ColorType::Rgba => data.extend_from_slice(row),
            png::ColorType::Grayscale => {
                for &g in row {
                    data.extend_from_slice(&[g, g, g]);
                }
            }
            png::ColorType::GrayscaleAlpha => {
                for ga in row.chunks_exact(2) {
                    data.extend_from_slice(&[ga[0], ga[0], ga[0], ga[1]]);
                }
            }
            png::ColorType::Indexed => {
                return Ok(Err("palette not expanded, forwarded unchanged".into()));
            }
        }
    }
    Ok(Ok(Pixels {
        width,
        height,
        has_alpha,
        data,
    }))
}

/// Decodes a WebP with `image-webp` to RGB/RGBA.
pub fn decode_webp(webp_bytes: &[u8]) -> Result<Pixels, ImageError> {
    let mut decoder = image_webp::WebPDecoder::new(Cursor::new(webp_bytes))
        .map_err(|e| ImageError::Decode(e.to_string()))?;
    let (width, height) = decoder.dimensions();
    let has_alpha = decoder.has_alpha();
    let size = decoder
        .output_buffer_size()
        .ok_or_else(|| ImageError::Decode("image too large".into()))?;
    let mut data = vec![0u8; size];
    decoder
        .read_image(&mut data)
        .map_err(|e| ImageError::Decode(e.to_string()))?;
    Ok(Pixels {
        width,
        height,
        has_alpha,
        data,
    })
}

/// Same size and same RGBA values (a missing alpha channel counts as 255).
pub fn same_pixels(a: &Pixels, b: &Pixels) -> bool {
    if a.width != b.width || a.height != b.height {
        return false;
    }
    let ca = if a.has_alpha { 4 } else { 3 };
    let cb = if b.has_alpha { 4 } else { 3 };
    let count = a.width as usize * a.height as usize;
    if a.data.len() != count * ca || b.data.len() != count * cb {
        return false;
    }
    a.data
        .chunks_exact(ca)
        .zip(b.data.chunks_exact(cb))
        .all(|(pa, pb)| {
            pa[..3] == pb[..3]
                && pa.get(3).copied().unwrap_or(255) == pb.get(3).copied().unwrap_or(255)
        })
}

/// libwebp lossless encode with `exact = 1` (keeps RGB under transparent pixels), method 4.
pub fn encode_lossless_exact(pixels: &Pixels) -> Result<Vec<u8>, ImageError> {
    let channels = if pixels.has_alpha { 4 } else { 3 };
    let width = i32::try_from(pixels.width).map_err(|_| ImageError::Encode("width".into()))?;
    let height = i32::try_from(pixels.height).map_err(|_| ImageError::Encode("height".into()))?;
    let stride = width
        .checked_mul(channels)
        .ok_or_else(|| ImageError::Encode("stride overflow".into()))?;
    if pixels.data.len() != stride as usize * height as usize {
        return Err(ImageError::Encode("pixel buffer size mismatch".into()));
    }
    let abi = webp::WEBP_ENCODER_ABI_VERSION as i32;

    let mut config = MaybeUninit::<webp::WebPConfig>::uninit();
    // SAFETY: WebPConfigInitInternal fully initialises the struct behind the pointer when it
    // returns non-zero (ABI version matches the bundled libwebp headers).
    let mut config = unsafe {
        if webp::WebPConfigInitInternal(
            config.as_mut_ptr(),
            webp::WebPPreset::WEBP_PRESET_DEFAULT,
            75.0,
            abi,
        ) == 0
        {
            return Err(ImageError::Encode("WebPConfigInit failed".into()));
        }
        config.assume_init()
    };
    config.lossless = 1;
    config.exact = 1;
    config.method = 4;
    // SAFETY: config is a valid, initialised WebPConfig.
    if unsafe { webp::WebPValidateConfig(&config) } == 0 {
        return Err(ImageError::Encode("invalid WebP config".into()));
    }

    let mut picture = MaybeUninit::<webp::WebPPicture>::uninit();
    // SAFETY: WebPPictureInitInternal zero-fills and initialises the picture when it returns non-zero.
    let mut picture = unsafe {
        if webp::WebPPictureInitInternal(picture.as_mut_ptr(), abi) == 0 {
            return Err(ImageError::Encode("WebPPictureInit failed".into()));
        }
        picture.assume_init()
    };
    picture.use_argb = 1;
    picture.width = width;
    picture.height = height;

    let mut writer = MaybeUninit::<webp::WebPMemoryWriter>::uninit();
    // SAFETY: WebPMemoryWriterInit initialises all fields (null buffer, zero sizes).
    let mut writer = unsafe {
        webp::WebPMemoryWriterInit(writer.as_mut_ptr());
        writer.assume_init()
    };

    // SAFETY: `pixels.data` holds exactly `height` rows of `stride` bytes (checked above) and
    // outlives the import, which copies it into the picture's own ARGB buffer. `writer` lives on
    // this stack frame for the whole WebPEncode call, which is the only user of `custom_ptr`.
    // WebPPictureFree releases the picture buffer, WebPMemoryWriterClear the output buffer, after
    // the output was copied into a Vec; neither pointer is used afterwards.
    unsafe {
        let imported = if pixels.has_alpha {
            webp::WebPPictureImportRGBA(&mut picture, pixels.data.as_ptr(), stride)
        } else {
            webp::WebPPictureImportRGB(&mut picture, pixels.data.as_ptr(), stride)
        };
        if imported == 0 {
            webp::WebPPictureFree(&mut picture);
            return Err(ImageError::Encode("WebPPictureImport failed".into()));
        }
        picture.writer = Some(webp::WebPMemoryWrite);
        picture.custom_ptr = (&mut writer as *mut webp::WebPMemoryWriter).cast::<c_void>();
        let ok = webp::WebPEncode(&config, &mut picture);
        let error_code = picture.error_code;
        webp::WebPPictureFree(&mut picture);
        let result = if ok != 0 && !writer.mem.is_null() {
            Ok(std::slice::from_raw_parts(writer.mem, writer.size).to_vec())
        } else {
            Err(ImageError::Encode(format!(
                "WebPEncode failed: {error_code:?}"
            )))
        };
        webp::WebPMemoryWriterClear(&mut writer);
        result
    }
}
