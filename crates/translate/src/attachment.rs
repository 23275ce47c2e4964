//! Attachments that are not images (PDF, audio, video, text, file references), for both
//! ingresses: each becomes something the upstream takes, never a refused request.
//!
//! * `text/*` (and JSON, XML) that is valid UTF-8 is inlined as text, after a line naming it.
//! * A MIME type listed in [`ProviderOptions::file_parts`] becomes a Chat `file` part; WAV and
//!   MP3 become an `input_audio` part when [`ProviderOptions::audio_parts`] is set.
//! * Anything else becomes a placeholder the model sees, naming the MIME type, the size and
//!   where it came from (a tool result or the user's message).
//! * A remote URL (a Google `fileData` URI, a Chat image link) is handed to the provider only
//!   with [`ProviderOptions::allow_remote_media`] and only for an image: otherwise the provider
//!   would fetch whatever URL a guest names.
//!
//! The guest's own request, the original attachment included, stays in the records; each
//! decision is listed in [`TranslationReport::attachments`].

use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};

use crate::openai::{ContentPart, FileData, ImageUrl, InputAudio};
use crate::options::{ProviderOptions, TranslationReport};

/// Where an attachment came from, as the placeholder names it.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Origin<'a> {
    /// The result of a call: its name and id.
    ToolResult { name: &'a str, id: &'a str },
    /// The user's (or a Chat guest's) own message.
    Message,
}

impl std::fmt::Display for Origin<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Origin::ToolResult { name, id } => write!(f, "the result of {name} (call {id})"),
            Origin::Message => f.write_str("the user's message"),
        }
    }
}

/// Decodes standard or URL-safe base64 (what Google and Chat guests send).
pub(crate) fn decode_base64(data: &str) -> Option<Vec<u8>> {
    let data = data.trim();
    STANDARD
        .decode(data)
        .or_else(|_| URL_SAFE_NO_PAD.decode(data.trim_end_matches('=')))
        .ok()
}

/// The part an inline non-image attachment becomes.
pub(crate) fn inline(
    mime: &str,
    data: &str,
    origin: Origin<'_>,
    provider: &ProviderOptions,
    report: &mut TranslationReport,
    path: &str,
) -> ContentPart {
    let mime = mime.trim().to_ascii_lowercase();
    let Some(bytes) = decode_base64(data) else {
        return placeholder(
            report,
            path,
            &format!("{mime} attachment from {origin} could not be decoded (invalid base64)"),
        );
    };
    let size = bytes.len();
    if is_text(&mime) {
        if let Ok(text) = String::from_utf8(bytes) {
            report
                .attachments
                .push(format!("{path}: {mime} ({size} bytes) -> inlined as text"));
            return ContentPart::Text {
                text: format!("Attachment ({mime}, {size} bytes) from {origin}:\n{text}"),
            };
        }
    } else if provider
        .file_parts
        .iter()
        .any(|m| m.eq_ignore_ascii_case(&mime))
    {
        report
            .attachments
            .push(format!("{path}: {mime} ({size} bytes) -> file part"));
        return ContentPart::File {
            file: FileData {
                filename: Some(format!("attachment.{}", extension(&mime))),
                file_data: Some(format!("data:{mime};base64,{}", STANDARD.encode(&bytes))),
                file_id: None,
            },
        };
    } else if provider.audio_parts
        && let Some(format) = audio_format(&mime)
    {
        report
            .attachments
            .push(format!("{path}: {mime} ({size} bytes) -> input_audio part"));
        return ContentPart::InputAudio {
            input_audio: InputAudio {
                data: STANDARD.encode(&bytes),
                format: format.to_owned(),
            },
        };
    }
    placeholder(
        report,
        path,
        &format!("{mime} attachment of {size} bytes from {origin}; the provider cannot read it"),
    )
}

/// The part a remote file reference becomes: the image link itself when remote media are
/// allowed, else a placeholder.
pub(crate) fn remote(
    mime: Option<&str>,
    uri: &str,
    origin: Origin<'_>,
    provider: &ProviderOptions,
    report: &mut TranslationReport,
    path: &str,
) -> ContentPart {
    let mime = mime.map(|m| m.trim().to_ascii_lowercase());
    let is_web = uri.starts_with("https://") || uri.starts_with("http://");
    let looks_like_image = mime.as_deref().is_none_or(|m| m.starts_with("image/"));
    let shown = mime.as_deref().unwrap_or("file");
    if provider.allow_remote_media && is_web && looks_like_image {
        report
            .attachments
            .push(format!("{path}: remote {shown} -> forwarded as a link"));
        return ContentPart::ImageUrl {
            image_url: ImageUrl {
                url: uri.to_owned(),
                detail: None,
            },
        };
    }
    placeholder(
        report,
        path,
        &format!(
            "{shown} at {} from {origin}; remote media are not fetched",
            shown_uri(uri)
        ),
    )
}

/// A text part the model reads in place of an attachment, noted in the report.
pub(crate) fn placeholder(report: &mut TranslationReport, path: &str, what: &str) -> ContentPart {
    report
        .attachments
        .push(format!("{path}: {what} -> placeholder"));
    ContentPart::Text {
        text: format!("[attachment not forwarded: {what}]"),
    }
}

/// A URI as a placeholder shows it: at most 200 characters, data URLs by their head only.
fn shown_uri(uri: &str) -> String {
    if let Some(rest) = uri.strip_prefix("data:") {
        let head = rest.split([',', ';']).next().unwrap_or_default();
        return format!("data:{head},…");
    }
    match uri.char_indices().nth(200) {
        Some((cut, _)) => format!("{}…", &uri[..cut]),
        None => uri.to_owned(),
    }
}

fn is_text(mime: &str) -> bool {
    let essence = mime.split(';').next().unwrap_or_default().trim();
    essence.starts_with("text/")
        || matches!(
            essence,
            "application/json" | "application/xml" | "application/x-yaml" | "application/yaml"
        )
}

fn audio_format(mime: &str) -> Option<&'static str> {
    match mime.split(';').next().unwrap_or_default().trim() {
        "audio/wav" | "audio/x-wav" | "audio/wave" => Some("wav"),
        "audio/mpeg" | "audio/mp3" => Some("mp3"),
        _ => None,
    }
}

/// A file name extension for a MIME type (`application/pdf` -> `pdf`).
fn extension(mime: &str) -> &str {
    let subtype = mime
        .split(';')
        .next()
        .and_then(|m| m.split('/').nth(1))
        .unwrap_or("bin");
    let subtype = subtype.rsplit(['+', '.', '-']).next().unwrap_or(subtype);
    if subtype.is_empty() || !subtype.bytes().all(|b| b.is_ascii_alphanumeric()) {
        "bin"
    } else {
        subtype
    }
}

#[cfg(test)]
#[path = "attachment_tests.rs"]
mod tests;
