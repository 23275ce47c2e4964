//! PNG -> lossless WebP: pixel-identical (checked with the `png` and `image-webp` decoders) for
//! RGB, RGBA with transparent pixels hiding non-zero RGB, palette, gray and gray+alpha; 16-bit
//! PNGs pass through unchanged.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use switchyard_translate::image::{
    DEFAULT_MAX_IMAGE_PIXELS as MAX, PngConversion, png_to_lossless_webp,
};

fn encode_png(
    width: u32,
    height: u32,
    color: png::ColorType,
    depth: png::BitDepth,
    data: &[u8],
    palette: Option<(&[u8], &[u8])>,
) -> Vec<u8> {
    let mut out = Vec::new();
    {
        let mut enc = png::Encoder::new(&mut out, width, height);
        enc.set_color(color);
        enc.set_depth(depth);
        if let Some((plte, trns)) = palette {
            enc.set_palette(plte.to_vec());
            enc.set_trns(trns.to_vec());
        }
        let mut writer = enc.write_header().unwrap();
        writer.write_image_data(data).unwrap();
    }
    out
}

/// Reference decode with the `png` crate to RGBA8 (independent of the code under test).
fn png_rgba(png_bytes: &[u8]) -> (u32, u32, Vec<[u8; 4]>) {
    let mut dec = png::Decoder::new(std::io::Cursor::new(png_bytes));
    dec.set_transformations(png::Transformations::EXPAND);
    let mut reader = dec.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size().unwrap()];
    let info = reader.next_frame(&mut buf).unwrap();
    let buf = &buf[..info.buffer_size()];
    let px = match info.color_type {
        png::ColorType::Rgba => buf.chunks(4).map(|p| [p[0], p[1], p[2], p[3]]).collect(),
        png::ColorType::Rgb => buf.chunks(3).map(|p| [p[0], p[1], p[2], 255]).collect(),
        png::ColorType::Grayscale => buf.iter().map(|&g| [g, g, g, 255]).collect(),
        png::ColorType::GrayscaleAlpha => buf.chunks(2).map(|p| [p[0], p[0], p[0], p[1]]).collect(),
        other => panic!("{other:?}"),
    };
    (info.width, info.height, px)
}

fn webp_rgba(webp: &[u8]) -> (u32, u32, Vec<[u8; 4]>) {
    let mut dec = image_webp::WebPDecoder::new(std::io::Cursor::new(webp)).unwrap();
    let (w, h) = dec.dimensions();
    let mut buf = vec![0; dec.output_buffer_size().unwrap()];
    dec.read_image(&mut buf).unwrap();
    let px = if dec.has_alpha() {
        buf.chunks(4).map(|p| [p[0], p[1], p[2], p[3]]).collect()
    } else {
        buf.chunks(3).map(|p| [p[0], p[1], p[2], 255]).collect()
    };
    (w, h, px)
}

fn assert_pixel_identical(png_bytes: &[u8]) -> Vec<u8> {
    let PngConversion::Reencoded { webp } = png_to_lossless_webp(png_bytes, MAX) else {
        panic!("expected re-encoding");
    };
    assert_eq!(&webp[..4], b"RIFF");
    assert_eq!(&webp[8..12], b"WEBP");
    assert_eq!(png_rgba(png_bytes), webp_rgba(&webp));
    webp
}

/// Deterministic noisy pattern.
fn pattern(len: usize, seed: u32) -> Vec<u8> {
    let mut x = seed;
    (0..len)
        .map(|_| {
            x = x.wrapping_mul(1_103_515_245).wrapping_add(12_345);
            (x >> 16) as u8
        })
        .collect()
}

#[test]
fn rgb_is_pixel_identical() {
    let (w, h) = (37, 23);
    assert_pixel_identical(&encode_png(
        w,
        h,
        png::ColorType::Rgb,
        png::BitDepth::Eight,
        &pattern((w * h * 3) as usize, 1),
        None,
    ));
}

#[test]
fn rgba_keeps_rgb_under_fully_transparent_pixels() {
    let (w, h) = (16, 16);
    let mut data = pattern((w * h * 4) as usize, 2);
    for (i, px) in data.chunks_mut(4).enumerate() {
        if i % 3 == 0 {
            px[3] = 0; // transparent, RGB stays non-zero noise
            px[0] |= 1;
        }
    }
    let png_bytes = encode_png(
        w,
        h,
        png::ColorType::Rgba,
        png::BitDepth::Eight,
        &data,
        None,
    );
    assert_pixel_identical(&png_bytes);
    let (_, _, px) = png_rgba(&png_bytes);
    assert!(
        px.iter().any(|p| p[3] == 0 && p[0] != 0),
        "test image must hide colour under alpha 0"
    );
}

#[test]
fn palette_with_transparency_is_pixel_identical() {
    let plte = [255, 0, 0, 0, 255, 0, 0, 0, 255, 10, 20, 30];
    let trns = [255, 128, 0];
    let (w, h) = (9, 7);
    let indices: Vec<u8> = pattern((w * h) as usize, 3).iter().map(|v| v % 4).collect();
    assert_pixel_identical(&encode_png(
        w,
        h,
        png::ColorType::Indexed,
        png::BitDepth::Eight,
        &indices,
        Some((&plte, &trns)),
    ));
}

#[test]
fn grayscale_and_gray_alpha_are_pixel_identical() {
    let (w, h) = (13, 11);
    assert_pixel_identical(&encode_png(
        w,
        h,
        png::ColorType::Grayscale,
        png::BitDepth::Eight,
        &pattern((w * h) as usize, 4),
        None,
    ));
    assert_pixel_identical(&encode_png(
        w,
        h,
        png::ColorType::GrayscaleAlpha,
        png::BitDepth::Eight,
        &pattern((w * h * 2) as usize, 5),
        None,
    ));
    // 4-bit gray: two pixels per byte, rows padded to whole bytes.
    let row_bytes = (w as usize).div_ceil(2);
    assert_pixel_identical(&encode_png(
        w,
        h,
        png::ColorType::Grayscale,
        png::BitDepth::Four,
        &pattern(row_bytes * h as usize, 6),
        None,
    ));
}

#[test]
fn sixteen_bit_png_passes_through_with_a_reason() {
    let (w, h) = (4, 4);
    let png_bytes = encode_png(
        w,
        h,
        png::ColorType::Rgb,
        png::BitDepth::Sixteen,
        &pattern((w * h * 6) as usize, 7),
        None,
    );
    match png_to_lossless_webp(&png_bytes, MAX) {
        PngConversion::PassThrough { reason } => assert!(reason.contains("16-bit"), "{reason}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn sixteen_bit_png_is_forwarded_unchanged_and_reported() {
    use base64::Engine as _;
    let png_bytes = encode_png(
        2,
        2,
        png::ColorType::Grayscale,
        png::BitDepth::Sixteen,
        &pattern(8, 8),
        None,
    );
    let b64 = base64::engine::general_purpose::STANDARD.encode(&png_bytes);
    let body = serde_json::json!({"contents": [{"role": "user", "parts": [{"inlineData": {"mimeType": "image/png", "data": b64}}]}]});
    let req = switchyard_translate::parse_request(body.to_string().as_bytes()).unwrap();
    let t = switchyard_translate::translate_request(
        &req,
        &switchyard_translate::TranslateOptions::new("m", false),
    )
    .unwrap();
    let json = serde_json::to_string(&t.chat.messages).unwrap();
    assert!(json.contains(&format!("data:image/png;base64,{b64}")));
    assert_eq!(t.report.images_reencoded, 0);
    assert_eq!(t.report.png_passthrough.len(), 1);
    assert!(t.report.png_passthrough[0].contains("16-bit"));
}

#[test]
fn corrupt_or_cut_off_pngs_pass_through_with_a_reason() {
    let whole = encode_png(
        8,
        8,
        png::ColorType::Rgb,
        png::BitDepth::Eight,
        &pattern(192, 3),
        None,
    );
    for broken in [
        &b"\x89PNG\r\n\x1a\nnot really"[..],
        &whole[..whole.len() / 2],
        &whole[..20],
        b"",
    ] {
        match png_to_lossless_webp(broken, MAX) {
            PngConversion::PassThrough { reason } => {
                assert!(reason.contains("forwarded unchanged"), "{reason}")
            }
            other => panic!("{other:?}"),
        }
    }
}

/// Found by fuzzing (`fuzz/`, target `png_image`): a palette PNG whose PLTE chunk is 13 bytes
/// long makes the `png` crate (0.18.1) panic while expanding the palette.
const PLTE_NOT_A_MULTIPLE_OF_3: [u8; 95] = [
    0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x48, 0x44, 0x52,
    0x00, 0x00, 0x00, 0x04, 0x00, 0x00, 0x00, 0x02, 0x08, 0x03, 0x00, 0x00, 0x00, 0x48, 0x76, 0x8d,
    0x51, 0x00, 0x00, 0x00, 0x0d, 0x50, 0x4c, 0x54, 0x45, 0x00, 0x01, 0x32, 0x02, 0x03, 0x04, 0x05,
    0x06, 0x07, 0x08, 0x09, 0x0a, 0x0b, 0xdc, 0x4c, 0x38, 0x9c, 0x00, 0x00, 0x00, 0x0f, 0x49, 0x44,
    0x41, 0x54, 0x78, 0x9c, 0x63, 0x60, 0x60, 0x64, 0x62, 0x66, 0x00, 0x11, 0x00, 0x00, 0x3c, 0x00,
    0x0d, 0xd4, 0xe7, 0x38, 0xe3, 0x00, 0x00, 0x00, 0x00, 0x49, 0x89, 0x50, 0x4e, 0x45, 0x4e,
];

#[test]
fn a_png_the_decoder_panics_on_passes_through() {
    match png_to_lossless_webp(&PLTE_NOT_A_MULTIPLE_OF_3, MAX) {
        PngConversion::PassThrough { reason } => {
            assert!(reason.contains("forwarded unchanged"), "{reason}")
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn an_image_over_the_pixel_budget_is_not_decoded() {
    // 16000 x 16000 zeros compress to under a megabyte but would decode to 768 MB of pixels.
    let huge = switchyard_testkit::fixtures::zero_png(16_000, 16_000).unwrap();
    assert!(huge.len() < 2 << 20, "{} bytes", huge.len());
    let started = std::time::Instant::now();
    match png_to_lossless_webp(&huge, MAX) {
        PngConversion::PassThrough { reason } => {
            assert!(reason.contains("pixel budget"), "{reason}")
        }
        other => panic!("{other:?}"),
    }
    // Not a timing assertion of the product: decoding it would take many seconds, the header
    // check takes microseconds; a generous bound tells the two apart.
    assert!(started.elapsed() < std::time::Duration::from_secs(2));
    let small = encode_png(
        4,
        4,
        png::ColorType::Rgb,
        png::BitDepth::Eight,
        &pattern(48, 1),
        None,
    );
    assert!(matches!(
        png_to_lossless_webp(&small, 15),
        PngConversion::PassThrough { .. }
    ));
    assert!(matches!(
        png_to_lossless_webp(&small, 16),
        PngConversion::Reencoded { .. }
    ));
}
