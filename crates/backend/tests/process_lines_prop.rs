//! Property test for the bounded line splitter: any bytes, cut into any chunks, are fully
//! accounted for (kept + dropped + newlines), never panic, and never buffer past the cap.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use proptest::prelude::*;
use switchyard_backend::process::LineSplitter;

fn input_and_cuts() -> impl Strategy<Value = (Vec<u8>, Vec<usize>, usize)> {
    // Bias towards newlines and multi-byte UTF-8 starts so short lines and cuts mid-character
    // are common.
    let byte = prop_oneof![
        4 => any::<u8>(),
        2 => Just(b'\n'),
        1 => Just(0xE2u8),
        1 => Just(0x82u8),
    ];
    (
        prop::collection::vec(byte, 0..2048),
        prop::collection::vec(1usize..300, 0..40),
        1usize..64,
    )
}

proptest! {
    #[test]
    fn every_byte_is_accounted_for((input, cuts, max) in input_and_cuts()) {
        let mut splitter = LineSplitter::new(max);
        let mut lines = Vec::new();
        let mut rest = input.as_slice();
        for cut in cuts {
            let (chunk, tail) = rest.split_at(cut.min(rest.len()));
            splitter.push(chunk, &mut lines);
            prop_assert!(splitter.buffered_bytes() <= max);
            rest = tail;
        }
        splitter.push(rest, &mut lines);
        lines.extend(splitter.finish());

        let newlines = input.iter().filter(|&&b| b == b'\n').count();
        let accounted: u64 = lines
            .iter()
            .map(|l| l.kept_bytes as u64 + l.dropped_bytes + u64::from(l.terminated))
            .sum();
        prop_assert_eq!(accounted, input.len() as u64);
        prop_assert_eq!(lines.iter().filter(|l| l.terminated).count(), newlines);
        // Only the last line may be unterminated, and only if input does not end in '\n'.
        for (index, line) in lines.iter().enumerate() {
            prop_assert_eq!(line.seq, index as u64);
            prop_assert!(line.kept_bytes <= max);
            prop_assert_eq!(line.truncated, line.dropped_bytes > 0);
            if !line.terminated {
                prop_assert_eq!(index, lines.len() - 1);
                prop_assert!(input.last() != Some(&b'\n'));
            }
        }
        // Kept bytes are exactly the line's prefix: rebuild the input where nothing was cut.
        if lines.iter().all(|l| !l.truncated && !l.invalid_utf8) {
            let rebuilt: Vec<u8> = lines
                .iter()
                .flat_map(|l| {
                    let mut bytes = l.text.clone().into_bytes();
                    if l.terminated { bytes.push(b'\n'); }
                    bytes
                })
                .collect();
            prop_assert_eq!(rebuilt, input.clone());
        }
        let stats = splitter.stats();
        prop_assert_eq!(stats.total_bytes, input.len() as u64);
        prop_assert_eq!(stats.lines, lines.len() as u64);
        prop_assert_eq!(stats.kept_bytes + stats.dropped_bytes + stats.terminated_lines, input.len() as u64);
    }
}
