use base64::Engine as _;

use super::*;
use crate::options::Profile;

const PDF: &[u8] = b"%PDF-1.4\n...";

fn b64(bytes: &[u8]) -> String {
    STANDARD.encode(bytes)
}

const CALL: Origin<'static> = Origin::ToolResult {
    name: "read_file",
    id: "c1",
};

#[test]
fn text_is_inlined_and_names_its_origin() {
    let mut report = TranslationReport::default();
    let part = inline(
        "Text/Plain; charset=utf-8",
        &b64(b"total: 42\n"),
        CALL,
        &Profile::Vllm.options(),
        &mut report,
        "p",
    );
    let ContentPart::Text { text } = part else {
        panic!("{part:?}")
    };
    assert_eq!(
        text,
        "Attachment (text/plain; charset=utf-8, 10 bytes) from the result of read_file (call \
         c1):\ntotal: 42\n"
    );
    assert_eq!(report.attachments.len(), 1);
}

#[test]
fn a_pdf_is_a_file_part_where_the_provider_takes_one_else_a_placeholder() {
    let mut report = TranslationReport::default();
    let openai = inline(
        "application/pdf",
        &b64(PDF),
        CALL,
        &Profile::OpenAi.options(),
        &mut report,
        "p",
    );
    assert_eq!(
        openai,
        ContentPart::File {
            file: FileData {
                filename: Some("attachment.pdf".into()),
                file_data: Some(format!("data:application/pdf;base64,{}", b64(PDF))),
                file_id: None,
            }
        }
    );
    let local = inline(
        "application/pdf",
        &b64(PDF),
        CALL,
        &Profile::LlamaCpp.options(),
        &mut report,
        "p",
    );
    assert_eq!(
        local,
        ContentPart::Text {
            text: format!(
                "[attachment not forwarded: application/pdf attachment of {} bytes from the \
                 result of read_file (call c1); the provider cannot read it]",
                PDF.len()
            )
        }
    );
    assert_eq!(report.attachments.len(), 2);
}

#[test]
fn audio_needs_the_switch_and_a_format_the_provider_knows() {
    let mut report = TranslationReport::default();
    let with_audio = ProviderOptions {
        audio_parts: true,
        ..Profile::Vllm.options()
    };
    let wav = inline(
        "audio/x-wav",
        &b64(b"RIFF"),
        Origin::Message,
        &with_audio,
        &mut report,
        "p",
    );
    assert_eq!(
        wav,
        ContentPart::InputAudio {
            input_audio: InputAudio {
                data: b64(b"RIFF"),
                format: "wav".into()
            }
        }
    );
    for (mime, provider) in [
        ("audio/ogg", &with_audio),
        ("audio/wav", &Profile::Vllm.options()),
        ("video/mp4", &with_audio),
    ] {
        let part = inline(
            mime,
            &b64(b"xx"),
            Origin::Message,
            provider,
            &mut report,
            "p",
        );
        assert!(
            matches!(&part, ContentPart::Text { text } if text.starts_with("[attachment not forwarded: ") && text.contains(mime) && text.contains("2 bytes") && text.contains("the user's message")),
            "{mime}: {part:?}"
        );
    }
}

#[test]
fn undecodable_or_non_utf8_attachments_become_placeholders_never_errors() {
    let mut report = TranslationReport::default();
    let provider = Profile::OpenAi.options();
    let bad = inline("application/pdf", "@@@", CALL, &provider, &mut report, "p");
    assert!(matches!(&bad, ContentPart::Text { text } if text.contains("invalid base64")));
    let latin1 = inline(
        "text/plain",
        &b64(&[0xff, 0xfe]),
        CALL,
        &provider,
        &mut report,
        "p",
    );
    assert!(
        matches!(&latin1, ContentPart::Text { text } if text.starts_with("[attachment not forwarded: text/plain"))
    );
}

#[test]
fn remote_media_are_links_only_when_allowed_and_only_for_images() {
    let mut report = TranslationReport::default();
    let shut = Profile::OpenAi.options();
    let open = ProviderOptions {
        allow_remote_media: true,
        ..shut.clone()
    };
    let url = "https://example.com/cat.png";
    assert_eq!(
        remote(None, url, Origin::Message, &open, &mut report, "p"),
        ContentPart::ImageUrl {
            image_url: ImageUrl {
                url: url.into(),
                detail: None
            }
        }
    );
    let refused = remote(None, url, Origin::Message, &shut, &mut report, "p");
    assert!(
        matches!(&refused, ContentPart::Text { text } if text.contains(url) && text.contains("not fetched")),
        "{refused:?}"
    );
    for (mime, uri) in [
        (Some("application/pdf"), "https://example.com/a.pdf"),
        (Some("image/png"), "gs://bucket/a.png"),
        (None, "file:///etc/passwd"),
    ] {
        let part = remote(mime, uri, CALL, &open, &mut report, "p");
        assert!(matches!(part, ContentPart::Text { .. }), "{uri}: {part:?}");
    }
}

#[test]
fn a_placeholder_shows_a_bounded_uri() {
    let mut report = TranslationReport::default();
    let long = format!("https://example.com/{}", "é".repeat(500));
    let ContentPart::Text { text } = remote(
        None,
        &long,
        Origin::Message,
        &Profile::OpenAi.options(),
        &mut report,
        "p",
    ) else {
        panic!()
    };
    assert!(text.chars().count() < 300, "{}", text.len());
    let ContentPart::Text { text } = remote(
        None,
        &format!("data:image/png;base64,{}", "A".repeat(10_000)),
        Origin::Message,
        &Profile::OpenAi.options(),
        &mut report,
        "p",
    ) else {
        panic!()
    };
    assert!(
        text.contains("data:image/png,…") && text.len() < 200,
        "{text}"
    );
}

#[test]
fn extensions_come_from_the_subtype() {
    assert_eq!(extension("application/pdf"), "pdf");
    assert_eq!(
        extension("application/vnd.openxmlformats-officedocument.wordprocessingml.document"),
        "document"
    );
    assert_eq!(extension("application/../../x"), "bin");
    assert_eq!(extension("nonsense"), "bin");
}
