//! Guest request → upstream Chat request, with a cache of the translated system prompt and tools.
//!
//! Gemini CLI sends the same `systemInstruction` (~23 KB) and `tools` (~20 KB) on every request of
//! a session; only `contents` grows. Parsing, cleaning and re-serializing those on every request
//! is most of the gateway's CPU cost, and keeping a private 47 KB copy per in-flight stream (for
//! retries) most of its memory. So the gateway translates them once and splices the cached bytes:
//!
//! * The body's top-level members are split without parsing their values (`split_members`), and
//!   a `systemInstruction` or `tools` value byte-identical to a cached one is recognised with one
//!   comparison instead of being scanned (~10 us instead of ~37 us per Gemini CLI request). When
//!   both match a cached entry (same upstream model, no `toolConfig`), only the rest
//!   (`contents`, `generationConfig`, ...) is parsed and translated, and the upstream body is
//!   assembled from byte segments: the cached system message and tools are shared (`Bytes`,
//!   reference-counted), not copied.
//! * On a miss the request is translated in full, *and* the splice is computed and compared with
//!   the full translation byte for byte. Only if they are identical is the entry marked usable;
//!   otherwise that system prompt + tools pair always takes the full path. Correctness never
//!   depends on the cache.
//! * Unknown top-level fields stay in the reduced body, so they are still refused (400).

use std::ops::Range;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use serde_json::value::RawValue;
use switchyard_records::{JsonText, SharedJson};
use switchyard_translate::google::GenerateContentRequest;
use switchyard_translate::openai::{ChatMessage, ChatRequest};
use switchyard_translate::{ConversionCache, TranslateError, TranslateOptions, TranslationReport};

/// Cached entries (distinct system prompt + tools + model combinations).
const CACHE_ENTRIES: usize = 8;

/// An upstream request body as pieces of text (concatenate to send). The cached system message
/// and tools are shared pieces, so records can keep them once (see `switchyard_records::document`).
#[derive(Debug, Clone, Default)]
pub struct ChatBody {
    text: JsonText,
}

impl ChatBody {
    pub(crate) fn single(bytes: Vec<u8>) -> Self {
        Self {
            text: JsonText::whole(Bytes::from(bytes)),
        }
    }

    fn push(&mut self, bytes: Bytes) {
        self.text.push_text(bytes);
    }

    fn push_shared(&mut self, shared: SharedJson) {
        self.text.push_shared(shared);
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.text.len()
    }

    /// True for an empty body.
    pub fn is_empty(&self) -> bool {
        self.text.is_empty()
    }

    /// The body as one buffer (copies unless it is a single piece).
    pub fn to_bytes(&self) -> Bytes {
        self.text.to_bytes()
    }

    /// The body as record pieces.
    pub fn text(&self) -> &JsonText {
        &self.text
    }

    /// The body as record pieces, taken (no piece is cloned).
    pub fn into_text(self) -> JsonText {
        self.text
    }
}

/// An upstream request body that sends the segments as they are (shared, not concatenated),
/// with its exact length known up front (so it goes out with `Content-Length`).
struct SegmentBody {
    segments: std::vec::IntoIter<Bytes>,
    remaining: u64,
}

impl http_body::Body for SegmentBody {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<Bytes>, Self::Error>>> {
        let this = self.get_mut();
        let next = this.segments.find(|s| !s.is_empty());
        if let Some(segment) = &next {
            this.remaining -= segment.len() as u64;
        }
        std::task::Poll::Ready(next.map(|s| Ok(http_body::Frame::data(s))))
    }

    fn is_end_stream(&self) -> bool {
        self.remaining == 0
    }

    fn size_hint(&self) -> http_body::SizeHint {
        http_body::SizeHint::with_exact(self.remaining)
    }
}

impl From<ChatBody> for reqwest::Body {
    fn from(body: ChatBody) -> Self {
        let pieces = body.text.pieces();
        if let [one] = pieces {
            return reqwest::Body::from(one.bytes().clone());
        }
        let segments: Vec<Bytes> = pieces.iter().map(|p| p.bytes().clone()).collect();
        reqwest::Body::wrap(SegmentBody {
            remaining: body.len() as u64,
            segments: segments.into_iter(),
        })
    }
}

/// The result of translating one guest request.
pub struct Translated {
    /// The guest request without `systemInstruction`/`tools` when the cache was used (enough for
    /// the call-id ledger, which only reads `contents`), else the whole request.
    pub request: GenerateContentRequest,
    pub body: ChatBody,
    pub report: TranslationReport,
    pub json_response: bool,
    /// Prompt-token estimate of the whole request.
    pub prompt_token_estimate: u32,
    pub cache_hit: bool,
    /// On a cache hit: where the guest body holds the cached `systemInstruction` and `tools`
    /// (byte ranges, in body order) and their shared record pieces.
    pub guest_shared: Vec<(std::ops::Range<usize>, SharedJson)>,
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

struct Entry {
    model: String,
    /// The guest's `systemInstruction` and `tools` text (record pieces: keyed once, here).
    system_raw: SharedJson,
    tools_raw: SharedJson,
    /// `None`: the splice did not reproduce the full translation; use the full path.
    splice: Option<Splice>,
}

#[derive(Clone)]
struct Splice {
    /// Serialized system message, if the system instruction produced one.
    system_message: Option<SharedJson>,
    /// Serialized `tools` array, if there are tools.
    tools: Option<SharedJson>,
    /// Token estimate of the system instruction + tools.
    extra_tokens: u32,
}

/// Bytes of converted images (lossless WebP) the translator remembers (see
/// [`switchyard_translate::image_cache`]).
pub const IMAGE_CACHE_BYTES: usize = 32 * 1024 * 1024;

/// Per-gateway translation cache, and the PNG conversions of images still in the history.
pub struct RequestTranslator {
    cache: Mutex<Vec<Arc<Entry>>>,
    images: ConversionCache,
}

impl Default for RequestTranslator {
    fn default() -> Self {
        Self {
            cache: Mutex::new(Vec::new()),
            images: ConversionCache::new(IMAGE_CACHE_BYTES),
        }
    }
}

/// One top-level member of the guest body: its key and where its value lies in the body.
struct Member<'a> {
    key: &'a str,
    value: Range<usize>,
    /// Index into `known` of the cached value this member's value is, if any.
    cached: Option<usize>,
}

/// Top-level members whose values may be the cached ones.
const CACHEABLE: [&str; 2] = ["systemInstruction", "tools"];

/// JSON whitespace from `at` on skipped.
fn skip_whitespace(body: &[u8], mut at: usize) -> usize {
    while matches!(body.get(at), Some(b' ' | b'\t' | b'\n' | b'\r')) {
        at += 1;
    }
    at
}

/// Where the JSON value starting at `start` ends (serde_json finds it; nothing is built).
fn value_end(body: &[u8], start: usize) -> Option<usize> {
    let mut values =
        serde_json::Deserializer::from_slice(body.get(start..)?).into_iter::<&RawValue>();
    match values.next() {
        Some(Ok(_)) => Some(start + values.byte_offset()),
        _ => None,
    }
}

/// The members of the top-level object `body`, in order (duplicates kept), without parsing
/// their values beyond finding where they end. A `systemInstruction` or `tools` value that is
/// byte-identical to one of `known` (cached values, JSON checked when they were cached) is
/// recognised with one comparison instead of being scanned: a complete JSON object or array
/// followed by `,` or `}` is that member's whole value. `None` when `body` is not one JSON
/// object or a key has escapes: the caller then takes the full path, which reports any error.
fn split_members<'a>(body: &'a [u8], known: &[&[u8]]) -> Option<Vec<Member<'a>>> {
    let mut members = Vec::new();
    let mut at = skip_whitespace(body, 0);
    if body.get(at) != Some(&b'{') {
        return None;
    }
    at = skip_whitespace(body, at + 1);
    if body.get(at) == Some(&b'}') {
        at += 1;
    } else {
        loop {
            let key_end = value_end(body, at)?;
            let key = body.get(at..key_end)?;
            let key = match key {
                [b'"', inner @ .., b'"'] if !inner.contains(&b'\\') => {
                    std::str::from_utf8(inner).ok()?
                }
                _ => return None,
            };
            at = skip_whitespace(body, key_end);
            if body.get(at) != Some(&b':') {
                return None;
            }
            let start = skip_whitespace(body, at + 1);
            let cached = CACHEABLE
                .contains(&key)
                .then(|| {
                    known.iter().position(|value| {
                        body[start..].starts_with(value)
                            && matches!(
                                body.get(skip_whitespace(body, start + value.len())),
                                Some(b',' | b'}')
                            )
                    })
                })
                .flatten();
            let end = match cached {
                Some(index) => start + known[index].len(),
                None => value_end(body, start)?,
            };
            members.push(Member {
                key,
                value: start..end,
                cached,
            });
            at = skip_whitespace(body, end);
            match body.get(at) {
                Some(b',') => at = skip_whitespace(body, at + 1),
                Some(b'}') => {
                    at += 1;
                    break;
                }
                _ => return None,
            }
        }
    }
    (skip_whitespace(body, at) == body.len()).then_some(members)
}

fn serialize<T: serde::Serialize>(value: &T) -> Result<Vec<u8>, TranslationFailure> {
    serde_json::to_vec(value).map_err(TranslationFailure::Serialize)
}

/// `{"model":<m>,"messages":[` — the fixed start of a serialized [`ChatRequest`].
fn head(model: &str) -> Result<Vec<u8>, TranslationFailure> {
    let mut out = b"{\"model\":".to_vec();
    out.extend_from_slice(&serialize(&model)?);
    out.extend_from_slice(b",\"messages\":[");
    Ok(out)
}

/// Assemble a full body from a reduced translation (no system message, no tools) and the
/// cached parts. Relies on `ChatRequest` serializing `model`, `messages`, `tools` first, in that
/// order; the byte-for-byte check on every cache miss guards that assumption.
fn splice(reduced: &ChatRequest, parts: &Splice) -> Result<ChatBody, TranslationFailure> {
    let mut body = ChatBody::default();
    let mut first = head(&reduced.model)?;
    let mut need_comma = false;
    if let Some(system) = &parts.system_message {
        body.push(Bytes::from(std::mem::take(&mut first)));
        body.push_shared(system.clone());
        need_comma = true;
    }
    let mut middle = first;
    for message in &reduced.messages {
        if need_comma {
            middle.push(b',');
        }
        middle.extend_from_slice(&serialize(message)?);
        need_comma = true;
    }
    middle.push(b']');
    if let Some(tools) = &parts.tools {
        middle.extend_from_slice(b",\"tools\":");
        body.push(Bytes::from(middle));
        body.push_shared(tools.clone());
        middle = Vec::new();
    }
    // The remaining fields: serialize with the three leading fields emptied and strip them.
    let rest = ChatRequest {
        model: String::new(),
        messages: Vec::new(),
        tools: Vec::new(),
        ..reduced.clone()
    };
    let rest = serialize(&rest)?;
    let prefix = b"{\"model\":\"\",\"messages\":[]";
    let Some(tail) = rest.strip_prefix(prefix.as_slice()) else {
        return Err(TranslationFailure::Serialize(serde::ser::Error::custom(
            "ChatRequest field order changed",
        )));
    };
    middle.extend_from_slice(tail);
    body.push(Bytes::from(middle));
    Ok(body)
}

fn guest(e: TranslateError) -> TranslationFailure {
    TranslationFailure::Guest(e)
}

impl RequestTranslator {
    pub fn new() -> Self {
        Self::default()
    }

    /// The PNG conversions of images seen so far.
    pub fn images(&self) -> &ConversionCache {
        &self.images
    }

    /// Translate `body` for `options`, using the cache when it applies.
    pub fn translate(
        &self,
        body: &[u8],
        options: &TranslateOptions,
    ) -> Result<Translated, TranslationFailure> {
        // The cached entries for this model, held for this request (no second lookup).
        let entries: Vec<Arc<Entry>> = {
            let cache = self
                .cache
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            cache
                .iter()
                .filter(|e| e.model == options.upstream_model)
                .cloned()
                .collect()
        };
        let known: Vec<&[u8]> = entries
            .iter()
            .flat_map(|e| [e.system_raw.text().as_ref(), e.tools_raw.text().as_ref()])
            .collect();
        let Some(fields) = split_members(body, &known) else {
            return self.full(body, options);
        };
        let count = |name: &str| fields.iter().filter(|m| m.key == name).count();
        let member = |name: &str| fields.iter().find(|m| m.key == name);
        if count("systemInstruction") != 1 || count("tools") != 1 || count("toolConfig") != 0 {
            return self.full(body, options);
        }
        let (Some(system), Some(tools)) = (member("systemInstruction"), member("tools")) else {
            return self.full(body, options);
        };
        // A hit is one entry holding both values. `split_members` names the first known value
        // each member equals; entries may share a system instruction, so the entry is found by
        // its own two values (the same bytes: at once when they are the very slices found).
        let same = |held: &Bytes, found: &[u8]| std::ptr::eq(held.as_ref(), found) || held == found;
        let entry = match (system.cached, tools.cached) {
            (Some(s), Some(t)) => entries.iter().find(|e| {
                same(e.system_raw.text(), known[s]) && same(e.tools_raw.text(), known[t])
            }),
            _ => None,
        };
        let (system, tools) = (system.value.clone(), tools.value.clone());
        let parts = entry.map(|e| {
            e.splice
                .clone()
                .map(|splice| (splice, e.system_raw.clone(), e.tools_raw.clone()))
        });
        match parts {
            Some(Some((parts, system_shared, tools_shared))) => {
                let reduced_body = reduced_body(body, &fields);
                let request = switchyard_translate::parse_request(&reduced_body).map_err(guest)?;
                let translated = self.translate_parsed(&request, options).map_err(guest)?;
                let chat_body = splice(&translated.chat, &parts)?;
                Ok(Translated {
                    prompt_token_estimate: switchyard_translate::estimate_request_tokens(&request)
                        .saturating_add(parts.extra_tokens),
                    request,
                    body: chat_body,
                    report: translated.report,
                    json_response: translated.json_response,
                    cache_hit: true,
                    guest_shared: ordered([(system, system_shared), (tools, tools_shared)]),
                    unconverted_pngs: translated.unconverted_pngs,
                })
            }
            Some(None) => self.full(body, options),
            None => {
                let full = self.full(body, options)?;
                let splice = self.derive_splice(&full, &reduced_body(body, &fields), options);
                let mut cache = self
                    .cache
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                if cache.len() >= CACHE_ENTRIES {
                    cache.remove(0);
                }
                cache.push(Arc::new(Entry {
                    model: options.upstream_model.clone(),
                    system_raw: SharedJson::new(Bytes::copy_from_slice(&body[system])),
                    tools_raw: SharedJson::new(Bytes::copy_from_slice(&body[tools])),
                    splice,
                }));
                Ok(full)
            }
        }
    }

    /// Cache parts from a full translation, kept only if splicing reproduces it exactly.
    fn derive_splice(
        &self,
        full: &Translated,
        reduced_body: &[u8],
        options: &TranslateOptions,
    ) -> Option<Splice> {
        let full_chat: ChatRequest = serde_json::from_slice(&full.body.to_bytes()).ok()?;
        let request = switchyard_translate::parse_request(reduced_body).ok()?;
        let reduced = self.translate_parsed(&request, options).ok()?;
        let system_message = match full_chat.messages.first() {
            Some(m @ ChatMessage::System { .. }) => {
                Some(SharedJson::new(Bytes::from(serde_json::to_vec(m).ok()?)))
            }
            _ => None,
        };
        let tools = (!full_chat.tools.is_empty())
            .then(|| serde_json::to_vec(&full_chat.tools).ok())
            .flatten()
            .map(|tools| SharedJson::new(Bytes::from(tools)));
        let parts = Splice {
            system_message,
            tools,
            extra_tokens: full
                .prompt_token_estimate
                .saturating_sub(switchyard_translate::estimate_request_tokens(&request)),
        };
        let spliced = splice(&reduced.chat, &parts).ok()?;
        (spliced.to_bytes() == full.body.to_bytes()).then_some(parts)
    }

    /// Translates a parsed request, with PNG conversions remembered across requests.
    fn translate_parsed(
        &self,
        request: &GenerateContentRequest,
        options: &TranslateOptions,
    ) -> Result<switchyard_translate::TranslatedRequest, TranslateError> {
        switchyard_translate::translate_request_with(request, options, Some(&self.images))
    }

    fn full(
        &self,
        body: &[u8],
        options: &TranslateOptions,
    ) -> Result<Translated, TranslationFailure> {
        let request = switchyard_translate::parse_request(body).map_err(guest)?;
        let translated = self.translate_parsed(&request, options).map_err(guest)?;
        Ok(Translated {
            prompt_token_estimate: switchyard_translate::estimate_request_tokens(&request),
            body: ChatBody::single(serialize(&translated.chat)?),
            request,
            report: translated.report,
            json_response: translated.json_response,
            cache_hit: false,
            guest_shared: Vec::new(),
            unconverted_pngs: translated.unconverted_pngs,
        })
    }
}

/// The cached values' ranges in body order.
fn ordered(mut ranges: [(Range<usize>, SharedJson); 2]) -> Vec<(Range<usize>, SharedJson)> {
    ranges.sort_by_key(|(range, _)| range.start);
    ranges.into()
}

/// The body without `systemInstruction` and `tools` (other fields verbatim, in order).
fn reduced_body(body: &[u8], fields: &[Member<'_>]) -> Vec<u8> {
    let mut out = Vec::with_capacity(fields.iter().map(|m| m.value.len() + 32).sum());
    out.push(b'{');
    let mut first = true;
    for Member { key, value, .. } in fields {
        if CACHEABLE.contains(key) {
            continue;
        }
        if !first {
            out.push(b',');
        }
        first = false;
        // Keys were borrowed without escapes, so they serialize back verbatim.
        out.extend_from_slice(serde_json::to_string(key).unwrap_or_default().as_bytes());
        out.push(b':');
        out.extend_from_slice(&body[value.clone()]);
    }
    out.push(b'}');
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn fixture() -> Value {
        serde_json::from_slice(crate::fixtures::GEMINI_CLI_FIRST_REQUEST).unwrap()
    }

    fn full_bytes(body: &[u8], options: &TranslateOptions) -> Bytes {
        RequestTranslator::new()
            .full(body, options)
            .unwrap()
            .body
            .to_bytes()
    }

    #[test]
    fn cache_hits_produce_exactly_the_full_translation() {
        let translator = RequestTranslator::new();
        let options = TranslateOptions::new("m", true);
        let first = serde_json::to_vec(&fixture()).unwrap();
        let miss = translator.translate(&first, &options).unwrap();
        assert!(!miss.cache_hit);
        assert_eq!(miss.body.to_bytes(), full_bytes(&first, &options));

        // Same system prompt and tools, longer history: served from the cache, identical bytes.
        let mut next = fixture();
        next["contents"].as_array_mut().unwrap().extend([
            json!({"role": "model", "parts": [{"functionCall": {"id": "c1", "name": "read_file", "args": {"file_path": "x"}}}]}),
            json!({"role": "user", "parts": [{"functionResponse": {"id": "c1", "name": "read_file", "response": {"output": "hi \"there\""}}}]}),
        ]);
        let next = serde_json::to_vec(&next).unwrap();
        let hit = translator.translate(&next, &options).unwrap();
        assert!(hit.cache_hit);
        assert_eq!(hit.body.to_bytes(), full_bytes(&next, &options));
        assert_eq!(
            hit.prompt_token_estimate,
            switchyard_translate::estimate_request_tokens(
                &switchyard_translate::parse_request(&next).unwrap()
            )
        );
        // The cached parts are shared, not copied, per request.
        assert!(hit.body.text().has_shared());
        // The guest's cached parts are located in its body, in order.
        let located: Vec<&[u8]> = hit
            .guest_shared
            .iter()
            .map(|(range, shared)| {
                assert_eq!(&next[range.clone()], shared.text().as_ref());
                &next[range.clone()]
            })
            .collect();
        let fixture = fixture();
        assert_eq!(
            located,
            [
                serde_json::to_vec(&fixture["systemInstruction"]).unwrap(),
                serde_json::to_vec(&fixture["tools"]).unwrap()
            ]
        );
    }

    #[test]
    fn a_different_model_or_tools_is_a_miss() {
        let translator = RequestTranslator::new();
        let body = serde_json::to_vec(&fixture()).unwrap();
        translator
            .translate(&body, &TranslateOptions::new("m", true))
            .unwrap();
        let other_model = translator
            .translate(&body, &TranslateOptions::new("n", true))
            .unwrap();
        assert!(!other_model.cache_hit);
        let mut changed = fixture();
        changed["tools"][0]["functionDeclarations"]
            .as_array_mut()
            .unwrap()
            .pop();
        let changed = serde_json::to_vec(&changed).unwrap();
        let options = TranslateOptions::new("m", true);
        let miss = translator.translate(&changed, &options).unwrap();
        assert!(!miss.cache_hit);
        assert_eq!(miss.body.to_bytes(), full_bytes(&changed, &options));
    }

    #[test]
    fn entries_sharing_a_system_instruction_are_each_hit() {
        let translator = RequestTranslator::new();
        let options = TranslateOptions::new("m", true);
        let first = serde_json::to_vec(&fixture()).unwrap();
        let mut fewer_tools = fixture();
        fewer_tools["tools"][0]["functionDeclarations"]
            .as_array_mut()
            .unwrap()
            .pop();
        let fewer_tools = serde_json::to_vec(&fewer_tools).unwrap();
        assert!(!translator.translate(&first, &options).unwrap().cache_hit);
        assert!(
            !translator
                .translate(&fewer_tools, &options)
                .unwrap()
                .cache_hit
        );
        for body in [&fewer_tools, &first] {
            let again = translator.translate(body, &options).unwrap();
            assert!(again.cache_hit, "each system + tools pair is cached");
            assert_eq!(again.body.to_bytes(), full_bytes(body, &options));
        }
    }

    /// (key, value text) of each member, as `split_members` sees them.
    fn members(body: &[u8], known: &[Bytes]) -> Option<Vec<(String, String)>> {
        let known: Vec<&[u8]> = known.iter().map(|k| k.as_ref()).collect();
        split_members(body, &known).map(|members| {
            members
                .iter()
                .map(|m| {
                    let value = String::from_utf8(body[m.value.clone()].to_vec()).unwrap();
                    (m.key.to_string(), value)
                })
                .collect()
        })
    }

    #[test]
    fn members_are_split_like_a_json_parser_would() {
        let system = br#"{"parts":[{"text":"be \"brief\" }"}]}"#;
        let known = [Bytes::from_static(system)];
        let body = format!(
            r#" {{ "contents" : [{{"role":"user","parts":[{{"functionResponse":{{"name":"f","response":{{"systemInstruction":{s}}}}}}}]}}] ,"systemInstruction":{s} , "tools":[] , "tools":[1]}} "#,
            s = std::str::from_utf8(system).unwrap()
        );
        let split = members(body.as_bytes(), &known).unwrap();
        let keys: Vec<&str> = split.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(keys, ["contents", "systemInstruction", "tools", "tools"]);
        // The nested copy stays inside `contents`; the top-level one is the cached value.
        assert!(split[0].1.contains("systemInstruction"));
        assert_eq!(split[1].1.as_bytes(), system);
        assert_eq!((split[2].1.as_str(), split[3].1.as_str()), ("[]", "[1]"));
        // Without the cache the same members are found by scanning.
        assert_eq!(members(body.as_bytes(), &[]).unwrap(), split);
    }

    #[test]
    fn a_cached_value_is_only_taken_when_it_is_the_whole_member() {
        let known = [Bytes::from_static(b"[1]")];
        // `[1]` is a prefix of the real value here: not taken, and the body is invalid anyway.
        assert!(members(br#"{"tools":[1]2}"#, &known).is_none());
        assert_eq!(
            members(br#"{"tools":[1] }"#, &known).unwrap(),
            [("tools".to_string(), "[1]".to_string())]
        );
        for bad in [
            &br#"[1]"#[..],
            br#"{"a":1"#,
            br#"{"a":1} x"#,
            br#"{"a\u0041":1}"#,
            b"",
        ] {
            assert!(
                members(bad, &known).is_none(),
                "{}",
                String::from_utf8_lossy(bad)
            );
        }
        assert_eq!(members(b" {} ", &known).unwrap(), []);
    }

    #[test]
    fn unknown_fields_are_still_refused_on_a_hit() {
        let translator = RequestTranslator::new();
        let options = TranslateOptions::new("m", false);
        translator
            .translate(&serde_json::to_vec(&fixture()).unwrap(), &options)
            .unwrap();
        let mut bad = fixture();
        bad["frobnicate"] = json!(1);
        let err = translator.translate(&serde_json::to_vec(&bad).unwrap(), &options);
        assert!(matches!(err, Err(TranslationFailure::Guest(_))));
    }

    /// A small RGB PNG (dev-dependency `png`), base64.
    fn png_base64() -> String {
        use base64::Engine;
        let mut out = Vec::new();
        let mut encoder = png::Encoder::new(&mut out, 8, 8);
        encoder.set_color(png::ColorType::Rgb);
        encoder.set_depth(png::BitDepth::Eight);
        let pixels: Vec<u8> = (0..8 * 8 * 3).map(|i| (i * 7) as u8).collect();
        encoder
            .write_header()
            .unwrap()
            .write_image_data(&pixels)
            .unwrap();
        base64::engine::general_purpose::STANDARD.encode(out)
    }

    #[test]
    fn an_image_staying_in_the_history_is_converted_once() {
        let translator = RequestTranslator::new();
        let options = TranslateOptions::new("m", true);
        let image = json!({"inlineData": {"mimeType": "image/png", "data": png_base64()}});
        let mut request = fixture();
        request["contents"][0]["parts"]
            .as_array_mut()
            .unwrap()
            .push(image);
        let first = translator
            .translate(&serde_json::to_vec(&request).unwrap(), &options)
            .unwrap();
        request["contents"].as_array_mut().unwrap().extend([
            json!({"role": "model", "parts": [{"text": "a picture"}]}),
            json!({"role": "user", "parts": [{"text": "again"}]}),
        ]);
        let second = translator
            .translate(&serde_json::to_vec(&request).unwrap(), &options)
            .unwrap();
        assert!(second.cache_hit);
        assert_eq!(first.report.images_reencoded, 1);
        assert_eq!(second.report.images_reencoded, 1);
        assert_eq!(second.report.reencodings_remembered, 1);
        let webp_url = |body: &ChatBody| -> String {
            let chat: Value = serde_json::from_slice(&body.to_bytes()).unwrap();
            let url = chat["messages"]
                .as_array()
                .unwrap()
                .iter()
                .flat_map(|m| m["content"].as_array().cloned().unwrap_or_default())
                .find_map(|p| p["image_url"]["url"].as_str().map(str::to_owned))
                .expect("an image part");
            assert!(url.starts_with("data:image/webp;base64,"), "{url:.40}");
            url
        };
        assert_eq!(webp_url(&first.body), webp_url(&second.body));
        let stats = translator.images.stats();
        assert_eq!(stats.entries, 1);
    }
}
