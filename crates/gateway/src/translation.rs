//! Guest request → upstream Chat request, with a cache of the translated system prompt and tools.
//!
//! Gemini CLI sends the same `systemInstruction` (~23 KB) and `tools` (~20 KB) on every request of
//! a session; only `contents` grows. Parsing, cleaning and re-serializing those on every request
//! is most of the gateway's CPU cost, and keeping a private 47 KB copy per in-flight stream (for
//! retries) most of its memory. So the gateway translates them once and splices the cached bytes:
//!
//! * The body's top-level fields are split without parsing them (`RawValue`). When
//!   `systemInstruction` and `tools` are byte-identical to a cached entry (same upstream model,
//!   no `toolConfig`), only the rest (`contents`, `generationConfig`, ...) is parsed and
//!   translated, and the upstream body is assembled from byte segments: the cached system message
//!   and tools are shared (`Bytes`, reference-counted), not copied.
//! * On a miss the request is translated in full, *and* the splice is computed and compared with
//!   the full translation byte for byte. Only if they are identical is the entry marked usable;
//!   otherwise that system prompt + tools pair always takes the full path. Correctness never
//!   depends on the cache.
//! * Unknown top-level fields stay in the reduced body, so they are still refused (400).

use std::sync::Mutex;

use bytes::Bytes;
use serde::de::{Deserializer, MapAccess, Visitor};
use serde_json::value::RawValue;
use switchyard_records::{JsonText, SharedJson};
use switchyard_translate::google::GenerateContentRequest;
use switchyard_translate::openai::{ChatMessage, ChatRequest};
use switchyard_translate::{TranslateError, TranslateOptions, TranslationReport};

/// Cached entries (distinct system prompt + tools + model combinations).
const CACHE_ENTRIES: usize = 8;

/// An upstream request body as pieces of text (concatenate to send). The cached system message
/// and tools are shared pieces, so records can keep them once (see `switchyard_records::document`).
#[derive(Debug, Clone, Default)]
pub struct ChatBody {
    text: JsonText,
    len: usize,
}

impl ChatBody {
    fn single(bytes: Vec<u8>) -> Self {
        let len = bytes.len();
        Self {
            text: JsonText::whole(Bytes::from(bytes)),
            len,
        }
    }

    fn push(&mut self, bytes: Bytes) {
        self.len += bytes.len();
        self.text.push_text(bytes);
    }

    fn push_shared(&mut self, shared: SharedJson) {
        self.len += shared.text().len();
        self.text.push_shared(shared);
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True for an empty body.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The body as one buffer (copies unless it is a single piece).
    pub fn to_bytes(&self) -> Bytes {
        self.text.to_bytes()
    }

    /// The body as record pieces.
    pub fn text(&self) -> &JsonText {
        &self.text
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
            remaining: body.len as u64,
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

struct Splice {
    /// Serialized system message, if the system instruction produced one.
    system_message: Option<SharedJson>,
    /// Serialized `tools` array, if there are tools.
    tools: Option<SharedJson>,
    /// Token estimate of the system instruction + tools.
    extra_tokens: u32,
}

/// Per-gateway translation cache.
#[derive(Default)]
pub struct RequestTranslator {
    cache: Mutex<Vec<Entry>>,
}

/// Top-level fields of a JSON object, unparsed, in order (duplicates kept).
struct RawFields<'a>(Vec<(&'a str, &'a RawValue)>);

impl<'de: 'a, 'a> serde::Deserialize<'de> for RawFields<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for V<'a> {
            type Value = RawFields<'a>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<M: MapAccess<'de>>(self, mut map: M) -> Result<Self::Value, M::Error> {
                let mut fields = Vec::new();
                while let Some((k, v)) = map.next_entry::<&'de str, &'de RawValue>()? {
                    fields.push((k, v));
                }
                Ok(RawFields(fields))
            }
        }
        deserializer.deserialize_map(V(std::marker::PhantomData))
    }
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

    /// Translate `body` for `options`, using the cache when it applies.
    pub fn translate(
        &self,
        body: &[u8],
        options: &TranslateOptions,
    ) -> Result<Translated, TranslationFailure> {
        let Ok(RawFields(fields)) = serde_json::from_slice::<RawFields>(body) else {
            return self.full(body, options);
        };
        let count = |name: &str| fields.iter().filter(|(k, _)| *k == name).count();
        let raw = |name: &str| fields.iter().find(|(k, _)| *k == name).map(|(_, v)| *v);
        if count("systemInstruction") != 1 || count("tools") != 1 || count("toolConfig") != 0 {
            return self.full(body, options);
        }
        let (Some(system), Some(tools)) = (raw("systemInstruction"), raw("tools")) else {
            return self.full(body, options);
        };
        let (system_raw, tools_raw) = (system.get().as_bytes(), tools.get().as_bytes());
        let parts = {
            let cache = self.cache.lock().expect("translation cache");
            cache
                .iter()
                .find(|e| {
                    e.model == options.upstream_model
                        && e.system_raw.text() == system_raw
                        && e.tools_raw.text() == tools_raw
                })
                .map(|e| {
                    e.splice.as_ref().map(|s| {
                        let splice = Splice {
                            system_message: s.system_message.clone(),
                            tools: s.tools.clone(),
                            extra_tokens: s.extra_tokens,
                        };
                        (splice, e.system_raw.clone(), e.tools_raw.clone())
                    })
                })
        };
        let reduced_body = reduced_body(&fields);
        match parts {
            Some(Some((parts, system_shared, tools_shared))) => {
                let request = switchyard_translate::parse_request(&reduced_body).map_err(guest)?;
                let translated =
                    switchyard_translate::translate_request(&request, options).map_err(guest)?;
                let chat_body = splice(&translated.chat, &parts)?;
                Ok(Translated {
                    prompt_token_estimate: switchyard_translate::estimate_request_tokens(&request)
                        .saturating_add(parts.extra_tokens),
                    request,
                    body: chat_body,
                    report: translated.report,
                    json_response: translated.json_response,
                    cache_hit: true,
                    guest_shared: guest_ranges(
                        body,
                        [(system, system_shared), (tools, tools_shared)],
                    ),
                })
            }
            Some(None) => self.full(body, options),
            None => {
                let full = self.full(body, options)?;
                let splice = self.derive_splice(&full, &reduced_body, options);
                let mut cache = self.cache.lock().expect("translation cache");
                if cache.len() >= CACHE_ENTRIES {
                    cache.remove(0);
                }
                cache.push(Entry {
                    model: options.upstream_model.clone(),
                    system_raw: SharedJson::new(Bytes::copy_from_slice(system_raw)),
                    tools_raw: SharedJson::new(Bytes::copy_from_slice(tools_raw)),
                    splice,
                });
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
        let reduced = switchyard_translate::translate_request(&request, options).ok()?;
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

    fn full(
        &self,
        body: &[u8],
        options: &TranslateOptions,
    ) -> Result<Translated, TranslationFailure> {
        let request = switchyard_translate::parse_request(body).map_err(guest)?;
        let translated =
            switchyard_translate::translate_request(&request, options).map_err(guest)?;
        Ok(Translated {
            prompt_token_estimate: switchyard_translate::estimate_request_tokens(&request),
            body: ChatBody::single(serialize(&translated.chat)?),
            request,
            report: translated.report,
            json_response: translated.json_response,
            cache_hit: false,
            guest_shared: Vec::new(),
        })
    }
}

/// Where in `body` each raw value lies (they were borrowed from it), in body order.
fn guest_ranges<const N: usize>(
    body: &[u8],
    values: [(&RawValue, SharedJson); N],
) -> Vec<(std::ops::Range<usize>, SharedJson)> {
    let mut ranges: Vec<_> = values
        .into_iter()
        .filter_map(|(raw, shared)| {
            let start = (raw.get().as_ptr() as usize).checked_sub(body.as_ptr() as usize)?;
            let range = start..start + raw.get().len();
            (body.get(range.clone()) == Some(raw.get().as_bytes())).then_some((range, shared))
        })
        .collect();
    ranges.sort_by_key(|(range, _)| range.start);
    ranges
}

/// The body without `systemInstruction` and `tools` (other fields verbatim, in order).
fn reduced_body(fields: &[(&str, &RawValue)]) -> Vec<u8> {
    let mut out = Vec::with_capacity(fields.iter().map(|(_, v)| v.get().len() + 32).sum());
    out.push(b'{');
    let mut first = true;
    for (key, value) in fields {
        if *key == "systemInstruction" || *key == "tools" {
            continue;
        }
        if !first {
            out.push(b',');
        }
        first = false;
        // Keys were borrowed without escapes, so they serialize back verbatim.
        out.extend_from_slice(serde_json::to_string(key).unwrap_or_default().as_bytes());
        out.push(b':');
        out.extend_from_slice(value.get().as_bytes());
    }
    out.push(b'}');
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn fixture() -> Value {
        serde_json::from_slice(crate::bench::GEMINI_CLI_FIRST_REQUEST).unwrap()
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
}
