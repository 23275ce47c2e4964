//! Property test: arbitrary bytes on the guest's stdout go through the same stages as a live run
//! (bounded line splitter → stream-json classifier → normalizer; not the live run's own loop). Nothing panics, and every line
//! is accounted for: it yields at least one canonical event, and exactly the lines that are not
//! known events are counted as unrecognized.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use proptest::prelude::*;
use switchyard_backend::process::LineSplitter;
use switchyard_events::gemini::GeminiNormalizer;
use switchyard_events::{Event, GuestExit};
use switchyard_protocol::gemini_cli::stream_json::{StreamLine, parse_line};

/// Fragments that make random input look like stream-json often enough to reach deep paths.
fn fragment() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        proptest::collection::vec(any::<u8>(), 0..40),
        Just(br#"{"type":"message","timestamp":"t","role":"assistant","content":"hi","delta":true}"#.to_vec()),
        Just(br#"{"type":"tool_use","timestamp":"t","tool_name":"read_file","tool_id":"read_file__1","parameters":{}}"#.to_vec()),
        Just(br#"{"type":"tool_result","timestamp":"t","tool_id":"read_file__1","status":"error"}"#.to_vec()),
        Just(br#"{"type":"result","timestamp":"t","status":"success","stats":{"total_tokens":1,"input_tokens":1,"output_tokens":0,"cached":0,"input":1,"duration_ms":1,"tool_calls":0,"models":{}}}"#.to_vec()),
        Just(br#"{"type":"brand_new","x":1}"#.to_vec()),
        Just(b"\n".to_vec()),
        Just("\u{feff}é\u{0}".as_bytes().to_vec()),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn every_line_is_accounted_for(
        parts in proptest::collection::vec(fragment(), 0..24),
        chunk in 1usize..64,
        cap in 16usize..4096,
    ) {
        let bytes: Vec<u8> = parts.concat();
        let mut splitter = LineSplitter::new(cap);
        let mut lines = Vec::new();
        for piece in bytes.chunks(chunk) {
            splitter.push(piece, &mut lines);
        }
        lines.extend(splitter.finish());
        let mut normalizer = GeminiNormalizer::new();
        let mut not_known = 0u64;
        for line in &lines {
            let parsed = parse_line(&line.text);
            if !matches!(parsed, StreamLine::Event { .. }) {
                not_known += 1;
            }
            let events = normalizer.push_line(parsed);
            prop_assert!(!events.is_empty(), "line {:?} produced no event", line.text);
        }
        prop_assert_eq!(normalizer.unrecognized_lines(), not_known);
        let (closing, _outcome) = normalizer.finish(GuestExit { code: Some(0), ..Default::default() }, None);
        let is_finished = matches!(closing.last(), Some(Event::RunFinished(f)) if f.unrecognized_lines == not_known);
        prop_assert!(is_finished);
        // The splitter's own accounting: every byte is kept, dropped or a terminator.
        let stats = splitter.stats();
        prop_assert_eq!(stats.total_bytes, bytes.len() as u64);
        prop_assert_eq!(stats.kept_bytes + stats.dropped_bytes + stats.terminated_lines, stats.total_bytes);
        prop_assert_eq!(stats.lines, lines.len() as u64);
    }
}
