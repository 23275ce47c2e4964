//! The redaction screen's search: does a text contain any of a set of needles, ASCII
//! case-insensitively? (The needles themselves, and what a hit means, are
//! [`crate::redact`]'s business.)
//!
//! A plain Aho-Corasick automaton answers at ~0.5 GB/s here: with ~40 case-insensitive needles
//! its DFA does not fit the first-level cache, so every byte costs a table miss. Every text the
//! recorder stores passes the screen (~4 KB per exchange, and each new shared system prompt or
//! tool list), so [`Screen`] first looks for **anchors**: short pieces of which every needle
//! contains at least one, in all their ASCII case spellings, with the SIMD "Teddy" searcher of
//! `aho_corasick::packed` (~2 GB/s here). Only a window around each anchor found is handed to
//! the automaton, wide enough to hold every needle that anchor can belong to. The answer is the
//! automaton's answer on the whole text:
//! * every needle occurrence contains an anchor occurrence (checked when the screen is built),
//!   and every position where some anchor starts is visited, one after the other;
//! * the window around a position spans, on each side, the longest needle containing an anchor
//!   that can start there (anchors where one is a prefix of another share their widest span).
//!
//! Where anchors come so densely that the windows would cover more bytes than the text has, the
//! automaton searches the rest of the text in one pass instead.
//!
//! When no anchor set can be built (a needle shorter than two bytes, too many spellings for the
//! packed searcher, or a CPU without the SIMD it needs), the automaton searches the whole text.

use aho_corasick::packed;
use aho_corasick::{AhoCorasick, Span};

/// Anchors tried first, for the needles the redactor always has (trigger words, credential
/// member names, query parameters, blob marker key, escapes). They are picked to be rare in
/// ordinary JSON: `tok` alone would hit every usage object (`prompt_tokens`), so the token
/// names are anchored on `ss-t` / `ss_t` (`access-token`, `access_token`). A needle containing
/// none of them (a registered secret, say) brings an anchor of its own: its first three bytes.
const PREFERRED_ANCHORS: &[&str] = &["key", "aut", "bea", "ss-t", "ss_t", "$bl", "\\/", "\\u"];

/// Most spellings the packed searcher is given (its own limit for a fast search is 64).
const MAX_SPELLINGS: usize = 64;

/// A set of needles, searched ASCII case-insensitively.
#[derive(Debug, Clone)]
pub(crate) struct Screen {
    /// All needles; the answer on any window or text.
    automaton: AhoCorasick,
    /// The anchor search, when one could be built.
    anchors: Option<Anchors>,
}

#[derive(Debug, Clone)]
struct Anchors {
    /// Every ASCII case spelling of every anchor.
    searcher: packed::Searcher,
    /// Window half-width for each spelling, by pattern id.
    spans: Vec<usize>,
    /// The largest of `spans`.
    widest_reach: usize,
}

impl Screen {
    /// A screen for `needles` (matched ASCII case-insensitively).
    #[allow(clippy::expect_used)] // goes with the text path (records, one path)
    pub(crate) fn new(needles: &[Vec<u8>]) -> Self {
        let automaton = AhoCorasick::builder()
            .ascii_case_insensitive(true)
            .build(needles)
            .expect("redaction screen builds");
        Screen {
            automaton,
            anchors: Anchors::new(needles),
        }
    }

    /// True when `text` contains a needle.
    pub(crate) fn is_match(&self, text: &[u8]) -> bool {
        let Some(anchors) = &self.anchors else {
            return self.automaton.is_match(text);
        };
        let mut from = 0;
        // Windows may cover as many bytes as the text has; past that (anchors packed densely,
        // e.g. text full of `\u` escapes) one pass of the automaton over the rest is cheaper.
        let mut budget = text.len();
        while from < text.len() {
            let span = Span {
                start: from,
                end: text.len(),
            };
            let Some(found) = anchors.searcher.find_in(text, span) else {
                return false;
            };
            let reach = anchors.spans[found.pattern().as_usize()];
            let window =
                found.start().saturating_sub(reach)..(found.start() + reach).min(text.len());
            budget = budget.saturating_sub(window.len());
            if self.automaton.is_match(&text[window]) {
                return true;
            }
            from = found.start() + 1;
            if budget == 0 {
                // A needle not checked yet has its anchor at `from` or later, so it starts at
                // most the widest reach before it.
                let rest = from.saturating_sub(anchors.widest_reach).min(text.len());
                return self.automaton.is_match(&text[rest..]);
            }
        }
        false
    }

    /// True when the anchor search is in use (false: the automaton searches every text whole).
    #[cfg(test)]
    fn uses_anchors(&self) -> bool {
        self.anchors.is_some()
    }
}

impl Anchors {
    fn new(needles: &[Vec<u8>]) -> Option<Self> {
        // Lowercase anchors, each with the longest needle that contains it.
        let mut anchors: Vec<(Vec<u8>, usize)> = Vec::new();
        for needle in needles {
            let lower = needle.to_ascii_lowercase();
            let preferred = PREFERRED_ANCHORS
                .iter()
                .map(|anchor| anchor.as_bytes())
                .find(|anchor| contains(&lower, anchor));
            let anchor = match preferred {
                Some(anchor) => anchor.to_vec(),
                None if lower.len() >= 2 => lower[..lower.len().min(3)].to_vec(),
                None => return None,
            };
            match anchors.iter_mut().find(|(known, _)| *known == anchor) {
                Some((_, reach)) => *reach = (*reach).max(needle.len()),
                None => anchors.push((anchor, needle.len())),
            }
        }
        // Two anchors can start at one position only when one is a prefix of the other; the
        // search reports one of them there, so both get the wider window.
        for i in 0..anchors.len() {
            for j in 0..anchors.len() {
                if anchors[j].0.starts_with(&anchors[i].0) {
                    let widest = anchors[i].1.max(anchors[j].1);
                    anchors[i].1 = widest;
                    anchors[j].1 = widest;
                }
            }
        }
        let mut builder = packed::Config::new().builder();
        let mut spans = Vec::new();
        for (anchor, reach) in &anchors {
            for spelling in ascii_case_spellings(anchor) {
                if spans.len() == MAX_SPELLINGS {
                    return None;
                }
                builder.add(spelling);
                spans.push(*reach);
            }
        }
        let searcher = builder.build()?;
        let widest_reach = spans.iter().copied().max().unwrap_or(0);
        Some(Anchors {
            searcher,
            spans,
            widest_reach,
        })
    }
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack
        .windows(needle.len())
        .any(|window| window == needle)
}

/// Every spelling of `lower` with each ASCII letter in either case.
fn ascii_case_spellings(lower: &[u8]) -> Vec<Vec<u8>> {
    let mut spellings = vec![Vec::with_capacity(lower.len())];
    for &byte in lower {
        let upper = byte.to_ascii_uppercase();
        if upper == byte {
            spellings.iter_mut().for_each(|s| s.push(byte));
        } else {
            spellings = spellings
                .into_iter()
                .flat_map(|s| {
                    let mut other = s.clone();
                    other.push(upper);
                    let mut same = s;
                    same.push(byte);
                    [same, other]
                })
                .collect();
        }
    }
    spellings
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn needles(list: &[&str]) -> Vec<Vec<u8>> {
        list.iter().map(|n| n.as_bytes().to_vec()).collect()
    }

    /// The redactor's needles with one registered secret (its escaped spelling is a needle too).
    fn redactor_needles() -> Vec<Vec<u8>> {
        crate::redact::screen_needles(&["sk-Secret\"Value-0123".to_owned()])
    }

    #[test]
    fn spellings_cover_every_ascii_case() {
        let spellings = ascii_case_spellings(b"$bl");
        assert_eq!(spellings.len(), 4);
        for spelling in ["$bl", "$bL", "$Bl", "$BL"] {
            assert!(
                spellings.contains(&spelling.as_bytes().to_vec()),
                "{spelling}"
            );
        }
    }

    #[test]
    fn the_redactors_needles_use_anchors_and_find_what_the_automaton_finds() {
        let screen = Screen::new(&redactor_needles());
        assert!(screen.uses_anchors());
        for text in [
            r#"{"usage":{"prompt_tokens":3,"promptTokenCount":3}}"#,
            r#"{"text":"the keyboard's author, a bear"}"#,
            "",
            "k",
        ] {
            assert!(!screen.is_match(text.as_bytes()), "{text}");
        }
        for text in [
            "Authorization: x",
            "{\"X-API-KEY\":1}",
            "a\\/b",
            "see ?KEY=abc",
            "tail sk-secret\"value-0123",
            "{\"$BLOB\":\"h\"}",
            "\\U0027",
        ] {
            assert!(screen.is_match(text.as_bytes()), "{text}");
        }
    }

    #[test]
    fn densely_packed_anchors_end_in_one_pass_over_the_rest() {
        let screen = Screen::new(&redactor_needles());
        // `\u` every six bytes, none of them a needle, then a needle: the windows soon cover
        // the text, and the rest (including the needle's start before that point) is searched
        // whole.
        let mut text = "\\u4e2d".repeat(200);
        assert!(!screen.is_match(text.as_bytes()));
        text.push_str("x-api-KEY");
        assert!(screen.is_match(text.as_bytes()));
        let cut = text.len() - "KEY".len();
        assert!(!screen.is_match(&text.as_bytes()[..cut]));
    }

    #[test]
    fn a_needle_begun_before_the_one_pass_starts_is_found() {
        // `\uqqqqqqqkey` is anchored on `key` but starts with `\u`, another anchor: when the
        // windows' budget runs out at that `\u`, the one pass must start early enough to see
        // the needle's beginning. Some prefix and padding lengths put that point right there.
        let screen = Screen::new(&needles(&["\\u002", "\\uqqqqqqqkey"]));
        assert!(screen.uses_anchors());
        for repeats in 0..20 {
            for pad in 0..60 {
                let text = format!(
                    "{}\\uqqqqqqqkey{}",
                    "\\uzz".repeat(repeats),
                    "z".repeat(pad)
                );
                assert!(screen.is_match(text.as_bytes()), "{repeats} {pad}");
            }
        }
    }

    #[test]
    fn without_anchors_the_automaton_answers_alone() {
        // A one-byte needle cannot be anchored; more spellings than the packed searcher takes
        // cannot either.
        let one_byte = Screen::new(&needles(&["x", "bearer"]));
        assert!(!one_byte.uses_anchors());
        assert!(one_byte.is_match(b"aXb"));
        assert!(!one_byte.is_match(b"abc"));
        let many: Vec<Vec<u8>> = (0..40).map(|i| format!("z{i:02}w").into_bytes()).collect();
        let crowded = Screen::new(&many);
        assert!(!crowded.uses_anchors());
        assert!(crowded.is_match(b"..Z07W.."));
        assert!(!crowded.is_match(b"..Z07.."));
    }

    /// Text made of pieces of the needles, in random case, with filler.
    fn texts() -> impl Strategy<Value = Vec<u8>> {
        let pieces = prop::sample::select(vec![
            "bearer",
            "auth",
            "authoriz",
            "key",
            "api",
            "-",
            "_",
            "x-goog",
            "api-key",
            "ss-t",
            "access",
            "token",
            "?",
            "&",
            "=",
            "$b",
            "$blob",
            "\\",
            "/",
            "\\u00",
            "2",
            "7",
            "sk-",
            "Secret",
            "\"",
            "Value-0123",
            " ",
            "a",
            "{\"",
            "\":",
        ]);
        prop::collection::vec((pieces, any::<u64>()), 0..24).prop_map(|parts| {
            let mut text = Vec::new();
            for (piece, case) in parts {
                for (i, byte) in piece.bytes().enumerate() {
                    let upper = (case >> (i % 64)) & 1 == 1;
                    text.push(if upper {
                        byte.to_ascii_uppercase()
                    } else {
                        byte
                    });
                }
            }
            text
        })
    }

    /// Short strings over a few bytes (so needles overlap, prefix each other and recur in text),
    /// in random case.
    fn small_alphabet(len: std::ops::Range<usize>) -> impl Strategy<Value = Vec<u8>> {
        prop::collection::vec(prop::sample::select(b"abAB-$\\/u".to_vec()), len)
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(1000))]
        #[test]
        fn the_anchored_search_answers_as_the_automaton_does(text in texts()) {
            let screen = Screen::new(&redactor_needles());
            prop_assert_eq!(screen.is_match(&text), screen.automaton.is_match(&text));
        }

        #[test]
        fn any_needles_answer_as_the_automaton_does(
            needles in prop::collection::vec(small_alphabet(1..7), 1..10),
            text in small_alphabet(0..40),
        ) {
            let screen = Screen::new(&needles);
            prop_assert_eq!(screen.is_match(&text), screen.automaton.is_match(&text));
        }
    }
}
