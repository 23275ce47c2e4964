//! Bounded line splitting for guest output pipes.
//!
//! [`LineSplitter`] turns arbitrary byte chunks into [`Line`]s without ever buffering more than
//! `max_line_bytes` of a single line: the excess of an over-long line is dropped and counted, the
//! line is flagged `truncated`. Invalid UTF-8 is kept lossily (U+FFFD) and flagged. A final line
//! without a trailing newline is still delivered by [`LineSplitter::finish`], flagged
//! `terminated: false`. Every input byte is accounted for in exactly one of: a line's
//! `kept_bytes`, a line's `dropped_bytes`, or its one-byte `\n` terminator.

/// One line of guest output. The `\n` terminator is not part of `text`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Line {
    /// Position of this line in its stream (stdout and stderr count separately), from 0.
    pub seq: u64,
    /// The kept bytes, decoded lossily (invalid sequences become U+FFFD).
    pub text: String,
    /// How many raw bytes of the line were kept (before lossy decoding).
    pub kept_bytes: usize,
    /// How many raw bytes of the line were dropped because the line exceeded the cap.
    pub dropped_bytes: u64,
    /// The line exceeded `max_line_bytes`; `text` holds only its beginning.
    pub truncated: bool,
    /// The kept bytes were not valid UTF-8; `text` holds U+FFFD replacements.
    pub invalid_utf8: bool,
    /// The line ended with `\n` (false only for a final partial line at end of stream).
    pub terminated: bool,
}

/// Counters over one output stream. `total_bytes == kept + dropped + terminated lines`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StreamStats {
    /// Bytes read from the pipe.
    pub total_bytes: u64,
    /// Lines delivered (including a final unterminated one).
    pub lines: u64,
    /// Bytes delivered inside lines.
    pub kept_bytes: u64,
    /// Bytes dropped from over-long lines.
    pub dropped_bytes: u64,
    /// Lines that exceeded the cap.
    pub truncated_lines: u64,
    /// Lines whose kept bytes were not valid UTF-8.
    pub invalid_utf8_lines: u64,
    /// Lines that ended with `\n`.
    pub terminated_lines: u64,
}

/// Splits a byte stream into bounded lines. See the module docs for the accounting rules.
#[derive(Debug)]
pub struct LineSplitter {
    max_line_bytes: usize,
    pending: Vec<u8>,
    pending_dropped: u64,
    next_seq: u64,
    stats: StreamStats,
}

impl LineSplitter {
    /// A splitter that keeps at most `max_line_bytes` (at least 1) of each line.
    pub fn new(max_line_bytes: usize) -> Self {
        Self {
            max_line_bytes: max_line_bytes.max(1),
            pending: Vec::new(),
            pending_dropped: 0,
            next_seq: 0,
            stats: StreamStats::default(),
        }
    }

    /// Feeds a chunk; complete lines are appended to `out`.
    pub fn push(&mut self, mut chunk: &[u8], out: &mut Vec<Line>) {
        self.stats.total_bytes += chunk.len() as u64;
        while let Some(newline) = chunk.iter().position(|&b| b == b'\n') {
            self.accumulate(&chunk[..newline]);
            out.push(self.emit(true));
            chunk = &chunk[newline + 1..];
        }
        self.accumulate(chunk);
    }

    /// Ends the stream: returns the final partial line, if any bytes are pending.
    pub fn finish(&mut self) -> Option<Line> {
        if self.pending.is_empty() && self.pending_dropped == 0 {
            return None;
        }
        Some(self.emit(false))
    }

    /// Bytes of the current partial line held in memory (never more than the cap).
    pub fn buffered_bytes(&self) -> usize {
        self.pending.len()
    }

    /// Allocated capacity of the partial-line buffer (never more than the cap).
    pub fn buffer_capacity(&self) -> usize {
        self.pending.capacity()
    }

    /// Counters so far.
    pub fn stats(&self) -> &StreamStats {
        &self.stats
    }

    fn accumulate(&mut self, bytes: &[u8]) {
        let room = self.max_line_bytes - self.pending.len();
        let take = room.min(bytes.len());
        if take > 0 {
            let needed = self.pending.len() + take;
            if needed > self.pending.capacity() {
                // Grow geometrically, but never past the cap.
                let target = needed
                    .max(self.pending.capacity() * 2)
                    .max(256)
                    .min(self.max_line_bytes);
                self.pending.reserve_exact(target - self.pending.len());
            }
            self.pending.extend_from_slice(&bytes[..take]);
        }
        self.pending_dropped += (bytes.len() - take) as u64;
    }

    fn emit(&mut self, terminated: bool) -> Line {
        let mut dropped = self.pending_dropped;
        let truncated = dropped > 0;
        if truncated {
            // The cut may have split a multi-byte character: drop its orphaned start too.
            let incomplete = incomplete_utf8_suffix(&self.pending);
            self.pending.truncate(self.pending.len() - incomplete);
            dropped += incomplete as u64;
        }
        let (text, invalid_utf8) = match std::str::from_utf8(&self.pending) {
            Ok(valid) => (valid.to_owned(), false),
            Err(_) => (String::from_utf8_lossy(&self.pending).into_owned(), true),
        };
        let line = Line {
            seq: self.next_seq,
            text,
            kept_bytes: self.pending.len(),
            dropped_bytes: dropped,
            truncated,
            invalid_utf8,
            terminated,
        };
        self.next_seq += 1;
        self.stats.lines += 1;
        self.stats.kept_bytes += line.kept_bytes as u64;
        self.stats.dropped_bytes += dropped;
        self.stats.truncated_lines += u64::from(truncated);
        self.stats.invalid_utf8_lines += u64::from(invalid_utf8);
        self.stats.terminated_lines += u64::from(terminated);
        self.pending.clear();
        if self.pending.capacity() > 64 * 1024 {
            // Do not keep a huge buffer alive after one huge line.
            self.pending.shrink_to(64 * 1024);
        }
        self.pending_dropped = 0;
        line
    }
}

/// Length of an incomplete UTF-8 sequence at the end of `bytes` (0 if none).
fn incomplete_utf8_suffix(bytes: &[u8]) -> usize {
    let start = bytes.len().saturating_sub(3);
    for index in (start..bytes.len()).rev() {
        let byte = bytes[index];
        if byte & 0xC0 == 0x80 {
            continue; // continuation byte: keep looking for the lead byte
        }
        let expected = match byte {
            0xC0..=0xDF => 2,
            0xE0..=0xEF => 3,
            0xF0..=0xF7 => 4,
            _ => 1,
        };
        let available = bytes.len() - index;
        return if expected > available { available } else { 0 };
    }
    0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split(max: usize, chunks: &[&[u8]]) -> (Vec<Line>, LineSplitter) {
        let mut splitter = LineSplitter::new(max);
        let mut out = Vec::new();
        for chunk in chunks {
            splitter.push(chunk, &mut out);
        }
        out.extend(splitter.finish());
        (out, splitter)
    }

    #[test]
    fn lines_across_chunks_are_joined() {
        let (lines, _) = split(100, &[b"{\"a\":", b"1}\n{\"b\"", b":2}\n"]);
        let texts: Vec<_> = lines.iter().map(|l| l.text.as_str()).collect();
        assert_eq!(texts, ["{\"a\":1}", "{\"b\":2}"]);
        assert!(lines.iter().all(|l| l.terminated && !l.truncated));
        assert_eq!(lines[1].seq, 1);
    }

    #[test]
    fn over_long_line_is_truncated_and_counted() {
        let (lines, splitter) = split(4, &[b"abcdefgh\nxy\n"]);
        assert_eq!(lines[0].text, "abcd");
        assert!(lines[0].truncated);
        assert_eq!(lines[0].dropped_bytes, 4);
        assert_eq!(lines[1].text, "xy");
        assert_eq!(splitter.stats().truncated_lines, 1);
        assert_eq!(splitter.stats().dropped_bytes, 4);
    }

    #[test]
    fn truncation_does_not_split_a_character() {
        // "é" is two bytes; a cap of 2 after "a" would cut it in half.
        let (lines, _) = split(2, &["aé\n".as_bytes()]);
        assert_eq!(lines[0].text, "a");
        assert!(!lines[0].invalid_utf8);
        assert_eq!(lines[0].dropped_bytes, 2);
    }

    #[test]
    fn invalid_utf8_is_kept_lossily_and_flagged() {
        let (lines, splitter) = split(100, &[b"ok\xff\xfeok\n"]);
        assert_eq!(lines[0].text, "ok\u{fffd}\u{fffd}ok");
        assert!(lines[0].invalid_utf8);
        assert_eq!(lines[0].kept_bytes, 6);
        assert_eq!(splitter.stats().invalid_utf8_lines, 1);
    }

    #[test]
    fn final_partial_line_is_delivered_unterminated() {
        let (lines, _) = split(100, &[b"a\nlast"]);
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[1].text, "last");
        assert!(!lines[1].terminated);
    }

    #[test]
    fn empty_stream_has_no_lines_but_empty_lines_count() {
        assert!(split(10, &[]).0.is_empty());
        let (lines, _) = split(10, &[b"\n\n"]);
        assert_eq!(lines.len(), 2);
        assert!(lines.iter().all(|l| l.text.is_empty() && l.terminated));
    }

    #[test]
    fn huge_line_without_newline_stays_within_the_cap() {
        let mut splitter = LineSplitter::new(1024);
        let mut out = Vec::new();
        let chunk = vec![b'x'; 64 * 1024];
        for _ in 0..160 {
            splitter.push(&chunk, &mut out); // 10 MiB, no newline
            assert!(splitter.buffered_bytes() <= 1024);
            assert!(splitter.buffer_capacity() <= 1024);
        }
        assert!(out.is_empty());
        let last = splitter.finish().expect("partial line");
        assert_eq!(last.kept_bytes, 1024);
        assert_eq!(last.dropped_bytes, 160 * 64 * 1024 - 1024);
        assert!(last.truncated && !last.terminated);
    }
}
