//! Guest request → upstream Chat Completions body, with the PNG → WebP conversions of images that
//! stay in a session's history remembered (a guest resends its whole history every turn).

use bytes::Bytes;
use switchyard_translate::google::GenerateContentRequest;
use switchyard_translate::{ConversionCache, TranslateError, TranslateOptions, TranslationReport};

/// Bytes of converted images (lossless WebP) the translator remembers (see
/// [`switchyard_translate::image_cache`]).
pub const IMAGE_CACHE_BYTES: usize = 32 * 1024 * 1024;

/// The result of translating one guest request.
pub struct Translated {
    /// The guest request, parsed (the call-id ledger reads its `contents`).
    pub request: GenerateContentRequest,
    /// The upstream request body (JSON).
    pub body: Bytes,
    pub report: TranslationReport,
    pub json_response: bool,
    /// Prompt-token estimate of the whole request.
    pub prompt_token_estimate: u32,
    /// The upstream request streams (a streaming request with tools does not when
    /// `translation.stream_tools` is off).
    pub stream: bool,
    /// PNGs not converted because the image cache did not hold them (see
    /// [`switchyard_translate::TranslateOptions::convert_on_miss`]).
    pub unconverted_pngs: Vec<Vec<u8>>,
}

/// Why a guest request cannot be translated.
#[derive(Debug)]
pub enum TranslationFailure {
    Guest(TranslateError),
    Serialize(serde_json::Error),
}

/// Per-gateway translator: the PNG conversions of images still in the history.
pub struct RequestTranslator {
    images: ConversionCache,
}

impl Default for RequestTranslator {
    fn default() -> Self {
        Self {
            images: ConversionCache::new(IMAGE_CACHE_BYTES),
        }
    }
}

impl RequestTranslator {
    pub fn new() -> Self {
        Self::default()
    }

    /// The PNG conversions of images seen so far.
    pub fn images(&self) -> &ConversionCache {
        &self.images
    }

    /// Parses a GenerateContent body, without the private argument `strip` (the host-tool
    /// call identity) anywhere in it.
    pub fn parse(
        &self,
        body: &[u8],
        strip: Option<&str>,
    ) -> Result<GenerateContentRequest, TranslationFailure> {
        let mut request =
            switchyard_translate::parse_request(body).map_err(TranslationFailure::Guest)?;
        if let Some(name) = strip {
            switchyard_translate::strip_private_argument(&mut request, name);
        }
        Ok(request)
    }

    /// Translates a parsed request for `options`, the remembered conversions used.
    pub fn translate_parsed(
        &self,
        request: &GenerateContentRequest,
        options: &TranslateOptions,
    ) -> Result<switchyard_translate::TranslatedRequest, TranslationFailure> {
        switchyard_translate::translate_request_with(request, options, Some(&self.images))
            .map_err(TranslationFailure::Guest)
    }

    /// Parses and translates `body` for `options`, without the private argument `strip` (the
    /// host-tool call identity) anywhere in what goes upstream.
    pub fn translate(
        &self,
        body: &[u8],
        options: &TranslateOptions,
        strip: Option<&str>,
    ) -> Result<Translated, TranslationFailure> {
        let request = self.parse(body, strip)?;
        let translated = self.translate_parsed(&request, options)?;
        let body = serde_json::to_vec(&translated.chat).map_err(TranslationFailure::Serialize)?;
        Ok(Translated {
            prompt_token_estimate: switchyard_translate::estimate_request_tokens(&request),
            stream: translated.chat.stream,
            request,
            body: Bytes::from(body),
            report: translated.report,
            json_response: translated.json_response,
            unconverted_pngs: translated.unconverted_pngs,
        })
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;

    /// A small RGB PNG, base64.
    fn png_base64() -> String {
        use base64::Engine;
        let pixels: Vec<u8> = (0..8 * 8 * 3).map(|i| (i * 7) as u8).collect();
        let png = switchyard_testkit::fixtures::rgb_png(8, 8, &pixels).unwrap();
        base64::engine::general_purpose::STANDARD.encode(png)
    }

    fn webp_url(body: &Bytes) -> String {
        let chat: Value = serde_json::from_slice(body).unwrap();
        let url = chat["messages"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|m| m["content"].as_array().cloned().unwrap_or_default())
            .find_map(|p| p["image_url"]["url"].as_str().map(str::to_owned))
            .expect("an image part");
        assert!(url.starts_with("data:image/webp;base64,"), "{url:.40}");
        url
    }

    #[test]
    fn an_image_staying_in_the_history_is_converted_once() {
        let translator = RequestTranslator::new();
        let options = TranslateOptions::new("m", true);
        let image = json!({"inlineData": {"mimeType": "image/png", "data": png_base64()}});
        let mut request =
            json!({"contents": [{"role": "user", "parts": [{"text": "see"}, image]}]});
        let first = translator
            .translate(&serde_json::to_vec(&request).unwrap(), &options, None)
            .unwrap();
        request["contents"].as_array_mut().unwrap().extend([
            json!({"role": "model", "parts": [{"text": "a picture"}]}),
            json!({"role": "user", "parts": [{"text": "again"}]}),
        ]);
        let second = translator
            .translate(&serde_json::to_vec(&request).unwrap(), &options, None)
            .unwrap();
        assert_eq!(first.report.images_reencoded, 1);
        assert_eq!(second.report.images_reencoded, 1);
        assert_eq!(second.report.reencodings_remembered, 1);
        assert_eq!(webp_url(&first.body), webp_url(&second.body));
        assert_eq!(translator.images.stats().entries, 1);
    }

    #[test]
    fn without_conversion_on_a_miss_the_png_is_handed_back_and_then_taken_from_the_cache() {
        let translator = RequestTranslator::new();
        let options = TranslateOptions {
            convert_on_miss: false,
            ..TranslateOptions::new("m", false)
        };
        let image = json!({"inlineData": {"mimeType": "image/png", "data": png_base64()}});
        let request = json!({"contents": [{"role": "user", "parts": [image.clone(), image]}]});
        let body = serde_json::to_vec(&request).unwrap();
        let first = translator.translate(&body, &options, None).unwrap();
        assert_eq!(
            first.unconverted_pngs.len(),
            1,
            "the same image is handed back once"
        );
        assert_eq!(first.report.images_reencoded, 0);
        let png = first.unconverted_pngs[0].clone();
        let converted = switchyard_translate::image::png_to_lossless_webp(&png, u64::MAX);
        translator.images().insert(
            switchyard_translate::ImageKey::of(&png),
            std::sync::Arc::new(converted),
        );
        let second = translator.translate(&body, &options, None).unwrap();
        assert!(second.unconverted_pngs.is_empty());
        assert_eq!(second.report.images_reencoded, 2);
        webp_url(&second.body);
    }
}
