//! Secret redaction applied to every string of every record before it reaches the store.
//!
//! Two layers: the literal secrets the process knows (the upstream API key, per-run tokens), and
//! generic patterns that catch credentials nobody registered: `Bearer <token>`, auth header values
//! (`Authorization`, `x-goog-api-key`, `api-key`, ...), credential query parameters (`?key=...`) and
//! JSON object members whose name is a credential header. A string holding none of the patterns'
//! trigger words (one Aho-Corasick pass) skips the pattern scan entirely.

use std::borrow::Cow;
use std::sync::LazyLock;

use aho_corasick::AhoCorasick;

use serde_json::Value;

use crate::model::{ExchangeRecord, RecordOp, TypedError, UpstreamAttempt};

/// What a redacted secret is replaced with.
pub const REDACTED: &str = "[REDACTED]";

/// Shorter words after "bearer" are prose ("the bearer of"), not tokens.
const MIN_BEARER_TOKEN_LEN: usize = 8;

/// Header names (lowercase) whose values are credentials.
const SECRET_HEADERS: &[&str] = &[
    "proxy-authorization",
    "authorization",
    "x-goog-api-key",
    "x-api-key",
    "api-key",
];

/// JSON member names (lowercase, `_` read as `-`) whose string values are credentials.
const SECRET_MEMBERS: &[&str] = &[
    "authorization",
    "proxy-authorization",
    "x-goog-api-key",
    "x-api-key",
    "api-key",
    "apikey",
    "access-token",
    "bearer-token",
];

/// Query parameters (lowercase) whose values are credentials.
const SECRET_QUERY_PARAMS: &[&str] = &["key", "api_key", "apikey", "access_token"];

/// Replaces known secrets and credential-shaped substrings with [`REDACTED`].
#[derive(Debug, Clone, Default)]
pub struct Redactor {
    /// Known secrets, longest first so a secret containing another is replaced whole.
    secrets: Vec<String>,
}

impl Redactor {
    /// A redactor for these known secrets (of any length; an empty one is no secret) plus the
    /// generic patterns.
    pub fn new<I, S>(secrets: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let mut redactor = Redactor::default();
        for secret in secrets {
            redactor.add_secret(secret);
        }
        redactor
    }

    /// Registers one more known secret (e.g. a per-run token minted later).
    pub fn add_secret(&mut self, secret: impl Into<String>) {
        let secret = secret.into();
        if secret.is_empty() || self.secrets.contains(&secret) {
            return;
        }
        self.secrets.push(secret);
        self.secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
    }

    /// How many literal secrets are registered.
    pub fn secret_count(&self) -> usize {
        self.secrets.len()
    }

    /// `text` with every known secret and credential-shaped substring replaced.
    pub fn redact_str<'a>(&self, text: &'a str) -> Cow<'a, str> {
        let mut out = Cow::Borrowed(text);
        for secret in &self.secrets {
            if out.contains(secret.as_str()) {
                out = Cow::Owned(out.replace(secret.as_str(), REDACTED));
            }
        }
        match redact_patterns(&out) {
            Some(replaced) => Cow::Owned(replaced),
            None => out,
        }
    }

    /// Redacts `text` in place.
    pub fn redact_string(&self, text: &mut String) {
        if let Cow::Owned(replaced) = self.redact_str(text) {
            *text = replaced;
        }
    }

    /// Redacts every string inside `value`; string members named like credential headers are
    /// replaced whole.
    pub fn redact_value(&self, value: &mut Value) {
        match value {
            Value::String(text) => self.redact_string(text),
            Value::Array(items) => items.iter_mut().for_each(|item| self.redact_value(item)),
            Value::Object(members) => {
                for (name, member) in members.iter_mut() {
                    match member {
                        Value::String(text) if is_secret_member(name) && text != REDACTED => {
                            *text = REDACTED.to_owned();
                        }
                        _ => self.redact_value(member),
                    }
                }
            }
            Value::Null | Value::Bool(_) | Value::Number(_) => {}
        }
    }

    /// True when `text` holds a known secret or a credential-shaped substring.
    pub fn finds_secret(&self, text: &str) -> bool {
        matches!(self.redact_str(text), Cow::Owned(_))
    }

    /// Redacts every string of one record op.
    pub fn redact_op(&self, op: &mut RecordOp) {
        match op {
            RecordOp::UpsertRun(run) => {
                run.argv.iter_mut().for_each(|arg| self.redact_string(arg));
                self.redact_string(&mut run.agent);
                self.redact_string(&mut run.agent_version);
                self.redact_string(&mut run.workdir);
                if let Some(model) = &mut run.upstream_model {
                    self.redact_string(model);
                }
                if let Some(outcome) = &mut run.outcome {
                    self.redact_value(outcome);
                }
            }
            RecordOp::Event(event) => {
                self.redact_string(&mut event.kind);
                self.redact_value(&mut event.event);
            }
            RecordOp::RawLine(line) => self.redact_string(&mut line.line),
            RecordOp::UpsertExchange(exchange) => self.redact_exchange(exchange),
        }
    }

    pub(crate) fn redact_exchange(&self, exchange: &mut ExchangeRecord) {
        self.redact_string(&mut exchange.ingress_api);
        self.redact_string(&mut exchange.requested_model);
        self.redact_string(&mut exchange.upstream_url);
        self.redact_string(&mut exchange.upstream_model);
        self.redact_value(&mut exchange.guest_request);
        for value in [
            &mut exchange.context_request,
            &mut exchange.upstream_message,
            &mut exchange.guest_response,
        ]
        .into_iter()
        .flatten()
        {
            self.redact_value(value);
        }
        for attempt in &mut exchange.attempts {
            self.redact_attempt(attempt);
        }
        if let Some(error) = &mut exchange.error {
            self.redact_error(error);
        }
        for call in &mut exchange.function_calls {
            self.redact_string(&mut call.id);
            self.redact_string(&mut call.name);
            self.redact_value(&mut call.arguments);
        }
        exchange
            .notes
            .iter_mut()
            .for_each(|note| self.redact_string(note));
    }

    fn redact_attempt(&self, attempt: &mut UpstreamAttempt) {
        self.redact_value(&mut attempt.request);
        attempt
            .raw_events
            .iter_mut()
            .for_each(|raw| self.redact_string(raw));
        if let Some(error) = &mut attempt.error {
            self.redact_error(error);
        }
    }

    fn redact_error(&self, error: &mut TypedError) {
        self.redact_string(&mut error.kind);
        self.redact_string(&mut error.message);
    }
}

/// True when `name` is one of [`SECRET_MEMBERS`], compared ASCII case-insensitively with `_` read
/// as `-` (without allocating: this runs for every object member of every record).
fn is_secret_member(name: &str) -> bool {
    let normalize = |b: u8| {
        if b == b'_' {
            b'-'
        } else {
            b.to_ascii_lowercase()
        }
    };
    SECRET_MEMBERS.iter().any(|member| {
        member.len() == name.len()
            && member
                .bytes()
                .zip(name.bytes())
                .all(|(expected, found)| expected == normalize(found))
    })
}

/// Every generic pattern in [`redact_patterns`] needs one of these (ASCII case-insensitive) substrings, so a string
/// without any of them is skipped in one pass, without lower-casing it (most record strings:
/// prompts, tool schemas, file contents).
/// `None` only if the automaton could not be built: then every string is scanned.
static TRIGGERS: LazyLock<Option<AhoCorasick>> = LazyLock::new(|| {
    AhoCorasick::builder()
        .ascii_case_insensitive(true)
        .build(trigger_words())
        .ok()
});

/// The words of [`TRIGGERS`].
fn trigger_words() -> Vec<String> {
    let mut words: Vec<String> = vec!["bearer".to_owned()];
    words.extend(SECRET_HEADERS.iter().map(|h| (*h).to_owned()));
    for param in SECRET_QUERY_PARAMS {
        words.push(format!("?{param}="));
        words.push(format!("&{param}="));
    }
    words
}

/// `text` with the credential values found by the generic patterns replaced by [`REDACTED`], or
/// `None` if there are none.
fn redact_patterns(text: &str) -> Option<String> {
    if text.len() < 5 || TRIGGERS.as_ref().is_some_and(|t| !t.is_match(text)) {
        return None;
    }
    let lower = text.to_ascii_lowercase();
    let bytes = text.as_bytes();
    let mut ranges: Vec<(usize, usize)> = Vec::new();

    // `Bearer <token>`
    for (at, _) in lower.match_indices("bearer") {
        let mut start = at + "bearer".len();
        let after_word = start;
        while start < bytes.len() && (bytes[start] == b' ' || bytes[start] == b'\t') {
            start += 1;
        }
        if start == after_word || (at > 0 && bytes[at - 1].is_ascii_alphanumeric()) {
            continue;
        }
        let end = scan_token(bytes, start);
        if end - start >= MIN_BEARER_TOKEN_LEN {
            push_value(text, &mut ranges, start, end);
        }
    }

    // `<auth header>: value` / `"<auth header>": "value"` / `<auth header>=value`
    for header in SECRET_HEADERS {
        for (at, _) in lower.match_indices(header) {
            let before_ok = at == 0 || !is_name_byte(bytes[at - 1]);
            let mut cursor = at + header.len();
            if !before_ok || (cursor < bytes.len() && is_name_byte(bytes[cursor])) {
                continue;
            }
            if cursor < bytes.len() && (bytes[cursor] == b'"' || bytes[cursor] == b'\'') {
                cursor += 1;
            }
            cursor = skip_spaces(bytes, cursor);
            if cursor >= bytes.len() || !(bytes[cursor] == b':' || bytes[cursor] == b'=') {
                continue;
            }
            cursor = skip_spaces(bytes, cursor + 1);
            let (start, end) = match bytes.get(cursor) {
                Some(&quote @ (b'"' | b'\'')) => {
                    let start = cursor + 1;
                    let end = bytes[start..]
                        .iter()
                        .position(|&b| b == quote)
                        .map_or(bytes.len(), |p| start + p);
                    (start, end)
                }
                _ => {
                    let end = bytes[cursor..]
                        .iter()
                        .position(|&b| b == b'\n' || b == b'\r')
                        .map_or(bytes.len(), |p| cursor + p);
                    (cursor, end)
                }
            };
            push_value(text, &mut ranges, start, end);
        }
    }

    // `?key=...` / `&api_key=...`
    for param in SECRET_QUERY_PARAMS {
        for (at, _) in lower.match_indices(param) {
            let eq = at + param.len();
            if at == 0 || !(bytes[at - 1] == b'?' || bytes[at - 1] == b'&') {
                continue;
            }
            if bytes.get(eq) != Some(&b'=') {
                continue;
            }
            let start = eq + 1;
            let end = bytes[start..]
                .iter()
                .position(|&b| {
                    matches!(b, b'&' | b'#' | b'"' | b'\'' | b'<' | b'>') || b.is_ascii_whitespace()
                })
                .map_or(bytes.len(), |p| start + p);
            push_value(text, &mut ranges, start, end);
        }
    }

    if ranges.is_empty() {
        return None;
    }
    ranges.sort_unstable();
    let mut out = String::with_capacity(text.len());
    let mut copied = 0;
    for (start, end) in ranges {
        if end <= copied {
            continue;
        }
        let start = start.max(copied);
        out.push_str(&text[copied..start]);
        out.push_str(REDACTED);
        copied = end;
    }
    out.push_str(&text[copied..]);
    Some(out)
}

/// Records `start..end` for replacement unless it is empty or already the marker.
fn push_value(text: &str, ranges: &mut Vec<(usize, usize)>, start: usize, end: usize) {
    let value = text.get(start..end).unwrap_or("");
    let trimmed = value.trim();
    if trimmed.is_empty() || trimmed == REDACTED || trimmed.starts_with(REDACTED) {
        return;
    }
    // A scheme word followed by an already-redacted token ("Bearer [REDACTED]") is done.
    if trimmed
        .split_once(' ')
        .is_some_and(|(_, rest)| rest.trim() == REDACTED)
    {
        return;
    }
    if text.is_char_boundary(start) && text.is_char_boundary(end) {
        ranges.push((start, end));
    }
}

fn scan_token(bytes: &[u8], start: usize) -> usize {
    bytes[start..]
        .iter()
        .position(|&b| {
            b.is_ascii_whitespace() || matches!(b, b'"' | b'\'' | b',' | b';' | b'<' | b'>' | b'\\')
        })
        .map_or(bytes.len(), |p| start + p)
}

fn skip_spaces(bytes: &[u8], mut cursor: usize) -> usize {
    while cursor < bytes.len() && (bytes[cursor] == b' ' || bytes[cursor] == b'\t') {
        cursor += 1;
    }
    cursor
}

fn is_name_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'-' || b == b'_'
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn trigger_prefilter_keeps_every_pattern_and_skips_plain_text() {
        let r = Redactor::new(Vec::<String>::new());
        for text in [
            "AUTHORIZATION: Basic dXNlcjpwYXNz",
            "Proxy-Authorization: Digest abcdef",
            "X-Goog-Api-Key=AIzaSyExample123",
            "curl -H 'Api-Key: sk-1234567890'",
            "GET /v1?KEY=abcdef123456 HTTP/1.1",
            "https://h/p?x=1&Access_Token=tok123456",
            "BEARER eyJhbGciOiJIUzI1NiJ9.payload",
        ] {
            assert!(r.finds_secret(text), "{text}");
        }
        let prose = "The key of the map is a string; keys are sorted. A bearer of news.";
        assert!(matches!(r.redact_str(prose), Cow::Borrowed(_)));
    }

    #[test]
    fn a_configured_secret_of_any_length_is_replaced() {
        let r = Redactor::new(["k9", "", "abc"]);
        assert_eq!(r.secret_count(), 2, "the empty string is no secret");
        assert_eq!(
            r.redact_str("key k9, abc."),
            format!("key {REDACTED}, {REDACTED}.")
        );
    }

    #[test]
    fn literal_secrets_are_replaced_everywhere() {
        let redactor = Redactor::new(["sk-live-123456"]);
        assert_eq!(
            redactor.redact_str("a sk-live-123456 b sk-live-123456"),
            "a [REDACTED] b [REDACTED]"
        );
    }

    #[test]
    fn bearer_tokens_and_headers_are_replaced() {
        let redactor = Redactor::default();
        assert_eq!(
            redactor.redact_str("Authorization: Bearer abc.def-ghi"),
            "Authorization: [REDACTED]"
        );
        assert_eq!(
            redactor.redact_str("curl -H 'x-goog-api-key: AIzaSecret' url"),
            "curl -H 'x-goog-api-key: [REDACTED]"
        );
        assert_eq!(
            redactor.redact_str(r#"{"api-key":"abcdef","model":"m"}"#),
            r#"{"api-key":"[REDACTED]","model":"m"}"#
        );
        assert_eq!(
            redactor.redact_str("sent bearer xyz123456 then"),
            "sent bearer [REDACTED] then"
        );
        assert_eq!(
            redactor.redact_str("https://h/v1/models/m:generateContent?alt=sse&key=AIzaXYZ&x=1"),
            "https://h/v1/models/m:generateContent?alt=sse&key=[REDACTED]&x=1"
        );
    }

    #[test]
    fn ordinary_text_is_untouched() {
        let redactor = Redactor::new(["super-secret-key"]);
        for text in [
            "The bearer of bad news",
            "monkey=3 and keys?",
            "authorization is required",
            "pick a key: any key",
        ] {
            assert_eq!(redactor.redact_str(text), text, "{text}");
        }
        assert!(!redactor.finds_secret("no credentials here"));
    }

    #[test]
    fn json_members_named_like_credentials_are_replaced() {
        let redactor = Redactor::new(["known-secret-value"]);
        let mut value = json!({
            "headers": {"Authorization": "Basic dXNlcjpwYXNz", "X_Goog_Api_Key": "AIza123"},
            "contents": [{"parts": [{"text": "my key is known-secret-value"}]}],
            "count": 3
        });
        redactor.redact_value(&mut value);
        assert_eq!(
            value,
            json!({
                "headers": {"Authorization": REDACTED, "X_Goog_Api_Key": REDACTED},
                "contents": [{"parts": [{"text": "my key is [REDACTED]"}]}],
                "count": 3
            })
        );
    }

    #[test]
    fn redaction_is_idempotent() {
        let redactor = Redactor::new(["known-secret-value"]);
        let once = redactor
            .redact_str("Authorization: Bearer known-secret-value ?key=abc")
            .into_owned();
        assert_eq!(redactor.redact_str(&once), once);
        assert!(!redactor.finds_secret(&once));
    }
}
