use super::*;

#[test]
fn the_check_reads_the_colour_back_from_a_png_or_webp() {
    for (name, rgb) in COLOURS {
        let pixels: Vec<u8> = (0..16).flat_map(|_| rgb).collect();
        let png = rgb_png(4, 4, &pixels).unwrap();
        let b64 = |b: &[u8]| base64::engine::general_purpose::STANDARD.encode(b);
        let png_url = format!("data:image/png;base64,{}", b64(&png));
        assert_eq!(decode_colour(&png_url).as_deref(), Some(name));
        let switchyard_translate::image::PngConversion::Reencoded { webp } =
            switchyard_translate::image::png_to_lossless_webp(&png, u64::MAX)
        else {
            panic!("converts")
        };
        let webp_url = format!("data:image/webp;base64,{}", b64(&webp));
        assert_eq!(decode_colour(&webp_url).as_deref(), Some(name));
    }
    assert_eq!(decode_colour("data:image/gif;base64,AAAA"), None);
}
