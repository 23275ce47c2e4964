//! Local token estimate for `:countTokens` and for usage when an upstream reports none.
//!
//! Method (no tokenizer, deterministic, pure): count UTF-8 bytes of everything that would reach the
//! model — text parts (thought parts excluded, they are never sent), `functionCall` name + compact
//! JSON args, `functionResponse` name + compact JSON response, system instruction text, and the
//! compact JSON of every function declaration — then `tokens = ceil(bytes / 4)`. Each content adds
//! [`PER_CONTENT_TOKENS`] for role framing and each inline image adds a fixed [`IMAGE_TOKENS`]
//! (Gemini's cost for an image up to 384 px). Non-image inline data counts its decoded size / 4.

use crate::google::{Content, CountTokensRequest, CountTokensResponse, GenerateContentRequest};

/// Fixed cost per inline image.
pub const IMAGE_TOKENS: u64 = 258;
/// Framing cost per content (role markers).
pub const PER_CONTENT_TOKENS: u64 = 4;

/// Estimate for a `:countTokens` body (`contents`, or `generateContentRequest`, or both).
pub fn count_tokens(req: &CountTokensRequest) -> CountTokensResponse {
    let mut est = Estimate::default();
    for content in &req.contents {
        est.content(content);
    }
    let mut total = est.tokens();
    if let Some(inner) = &req.generate_content_request {
        total = total.saturating_add(estimate_request_tokens(inner));
    }
    CountTokensResponse {
        total_tokens: total,
    }
}

/// Estimate of the prompt tokens of a generate request.
pub fn estimate_request_tokens(req: &GenerateContentRequest) -> u32 {
    let mut est = Estimate::default();
    if let Some(system) = &req.system_instruction {
        est.content(system);
    }
    for content in &req.contents {
        est.content(content);
    }
    for tool in req.tools.iter().flatten() {
        for decl in tool.function_declarations.iter().flatten() {
            est.bytes += compact_len(decl);
        }
    }
    est.tokens()
}

/// Estimate for plain text (bytes / 4, rounded up).
pub fn estimate_text_tokens(text: &str) -> u32 {
    u32::try_from((text.len() as u64).div_ceil(4)).unwrap_or(u32::MAX)
}

#[derive(Default)]
struct Estimate {
    bytes: u64,
    fixed: u64,
}

impl Estimate {
    fn content(&mut self, content: &Content) {
        self.fixed += PER_CONTENT_TOKENS;
        for part in &content.parts {
            if part.thought == Some(true) {
                continue;
            }
            if let Some(text) = &part.text {
                self.bytes += text.len() as u64;
            }
            if let Some(call) = &part.function_call {
                self.bytes += call.name.len() as u64;
                if let Some(args) = &call.args {
                    self.bytes += compact_len(args);
                }
            }
            if let Some(resp) = &part.function_response {
                self.bytes += resp.name.len() as u64 + compact_len(&resp.response);
                for media in resp.parts.iter().flatten() {
                    if let Some(blob) = &media.inline_data {
                        self.blob(&blob.mime_type, &blob.data);
                    }
                }
            }
            if let Some(blob) = &part.inline_data {
                self.blob(&blob.mime_type, &blob.data);
            }
        }
    }

    fn blob(&mut self, mime: &str, data: &str) {
        if mime.starts_with("image/") {
            self.fixed += IMAGE_TOKENS;
        } else {
            self.bytes += (data.len() as u64) * 3 / 4;
        }
    }

    fn tokens(&self) -> u32 {
        u32::try_from(self.bytes.div_ceil(4) + self.fixed).unwrap_or(u32::MAX)
    }
}

/// Length of `value` as compact JSON, counted without building the string (tool declarations
/// and histories are measured on every request).
fn compact_len<T: serde::Serialize + ?Sized>(value: &T) -> u64 {
    let mut counter = ByteCounter(0);
    match serde_json::to_writer(&mut counter, value) {
        Ok(()) => counter.0,
        Err(_) => 0,
    }
}

/// An `io::Write` sink that only counts bytes.
struct ByteCounter(u64);

impl std::io::Write for ByteCounter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0 += buf.len() as u64;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::google::{Blob, Part};

    fn user(parts: Vec<Part>) -> Content {
        Content {
            role: Some("user".into()),
            parts,
            ..Content::default()
        }
    }

    #[test]
    fn text_is_bytes_over_four_rounded_up_plus_framing() {
        let req = CountTokensRequest {
            contents: vec![user(vec![Part::text("12345")])],
            ..CountTokensRequest::default()
        };
        assert_eq!(count_tokens(&req).total_tokens, 2 + 4);
    }

    #[test]
    fn images_cost_a_fixed_amount_and_thoughts_are_free() {
        let image = Part {
            inline_data: Some(Blob {
                mime_type: "image/png".into(),
                data: "AAAA".repeat(1000),
                ..Blob::default()
            }),
            ..Part::default()
        };
        let req = CountTokensRequest {
            contents: vec![user(vec![
                image.clone(),
                image,
                Part::thought_text("x".repeat(400)),
            ])],
            ..CountTokensRequest::default()
        };
        assert_eq!(count_tokens(&req).total_tokens, 2 * 258 + 4);
    }

    #[test]
    fn generate_request_counts_system_and_tools() {
        let body = serde_json::json!({
            "contents": [{"role": "user", "parts": [{"text": "abcd"}]}],
            "systemInstruction": {"parts": [{"text": "abcdefgh"}]},
            "tools": [{"functionDeclarations": [{"name": "f"}]}]
        });
        let req: GenerateContentRequest = serde_json::from_value(body).unwrap();
        // {"name":"f"} = 12 bytes; 4 + 8 + 12 = 24 bytes = 6 tokens; 2 contents = 8.
        assert_eq!(estimate_request_tokens(&req), 6 + 8);
    }
}
