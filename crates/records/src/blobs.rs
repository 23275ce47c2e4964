//! Content-addressed deduplication of the large sub-values that exchanges repeat: the guest's
//! system instruction and tool declarations, their translated forms in each upstream request
//! (the `tools` array), and the conversation history. A guest resends the whole history with
//! every turn, so storing each request whole would grow a session's records with the square of
//! its length; with each history entry (a guest `contents` element, an upstream `messages`
//! element, the leading system message among them) stored once, they grow with its length.
//!
//! On write, [`deflate`] replaces each such sub-value (when it serializes to at least
//! [`MIN_BLOB_BYTES`]) by a marker object `{"$blob": "sha256:<hex>"}` and hands back the bodies to
//! store once under their hash. On read, [`inflate`] puts the bodies back, at exactly the same
//! places and nowhere else. A value at one of those places that already *looks* like a marker is
//! always moved into a blob on write, so every marker found there on read is one this module
//! wrote. Backend-neutral: the caller stores and looks up the bodies.

use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::error::StoreError;
use crate::model::{ExchangeRecord, UpstreamAttempt};

/// Sub-values whose serialized JSON is at least this many bytes become blobs. A marker is 83
/// bytes, so a history entry this size that the guest resends even once more takes less room
/// as a blob; and the entries a session resends with every turn are mostly a few hundred bytes
/// (Gemini CLI's session context, ~700 bytes, the user's prompt, a model turn with a call). At
/// 1,024 those stayed inline in every exchange of a session: a Gemini CLI exchange record with
/// its first request was 3.9 KB instead of 3.0 KB (`switchyard-dev bench gateway`'s store).
pub const MIN_BLOB_BYTES: usize = 256;

/// The single key of a marker object.
const MARKER_KEY: &str = "$blob";

/// Prefix of every blob hash (the algorithm name).
const HASH_PREFIX: &str = "sha256:";

/// A sub-value moved out of an exchange: its serialized JSON and that JSON's hash.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Blob {
    /// `sha256:<lowercase hex>` of `body`.
    pub hash: String,
    /// The sub-value serialized as compact JSON.
    pub body: String,
}

/// The kind of request a blob place is in: the two have different places.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RequestKind {
    /// A guest request (GenerateContent, or Chat Completions from an OpenAI client): the
    /// guest's original request and the request after context policy.
    Guest,
    /// An upstream request (Chat Completions), one per attempt.
    Upstream,
}

impl RequestKind {
    /// Top-level members whose whole value is a place.
    fn whole_places(self) -> &'static [&'static str] {
        match self {
            RequestKind::Guest => &["systemInstruction", "tools"],
            RequestKind::Upstream => &["tools"],
        }
    }

    /// Whether `key` is the top-level member holding the history: each element of its array is
    /// a place.
    pub(crate) fn is_history_key(self, key: &str) -> bool {
        match self {
            RequestKind::Guest => key == "contents" || key == "messages",
            RequestKind::Upstream => key == "messages",
        }
    }
}

/// Visits every place of `exchange` that may hold a blob marker (the places [`deflate`] fills).
fn for_each_slot(
    exchange: &mut ExchangeRecord,
    mut visit: impl FnMut(&mut Value) -> Result<(), StoreError>,
) -> Result<(), StoreError> {
    let guest_requests = std::iter::once((RequestKind::Guest, &mut exchange.guest_request));
    let upstream_requests = exchange
        .context_request
        .as_mut()
        .into_iter()
        .chain(
            exchange
                .attempts
                .iter_mut()
                .map(|attempt| &mut attempt.request),
        )
        .map(|request| (RequestKind::Upstream, request));
    for (kind, request) in guest_requests.chain(upstream_requests) {
        let Some(fields) = request.as_object_mut() else {
            continue;
        };
        for (key, value) in fields.iter_mut() {
            if kind.whole_places().contains(&key.as_str()) {
                visit(value)?;
            } else if kind.is_history_key(key)
                && let Some(entries) = value.as_array_mut()
            {
                for entry in entries {
                    visit(entry)?;
                }
            }
        }
    }
    Ok(())
}

/// The hash inside a marker object, if `value` is one.
fn marker_hash(value: &Value) -> Option<&str> {
    match value.as_object() {
        Some(fields) if fields.len() == 1 => fields.get(MARKER_KEY)?.as_str(),
        _ => None,
    }
}

fn marker(hash: &str) -> Value {
    serde_json::json!({ MARKER_KEY: hash })
}

/// `sha256:<hex>` of `body`.
pub fn hash_body(body: &str) -> String {
    let digest = Sha256::digest(body.as_bytes());
    format!("{HASH_PREFIX}{}", hex::encode(digest))
}

/// The blob `value` (at a blob place) becomes, if it becomes one: when it serializes to at least
/// [`MIN_BLOB_BYTES`], or looks like a marker.
pub(crate) fn blob_of(value: &Value) -> Result<Option<Blob>, StoreError> {
    let looks_like_marker = marker_hash(value).is_some();
    let body = serde_json::to_string(value).map_err(|source| StoreError::Serde {
        what: "a blob".to_owned(),
        source,
    })?;
    if body.len() < MIN_BLOB_BYTES && !looks_like_marker {
        return Ok(None);
    }
    let hash = hash_body(&body);
    Ok(Some(Blob { hash, body }))
}

/// `value` as stored at a blob place: its marker (its body added to `blobs`), or itself.
fn deflate_value(value: &Value, blobs: &mut Vec<Blob>) -> Result<Value, StoreError> {
    Ok(match blob_of(value)? {
        Some(blob) => {
            let stored = marker(&blob.hash);
            blobs.push(blob);
            stored
        }
        None => value.clone(),
    })
}

/// A copy of the guest (or upstream) request `request` with its blob places replaced by markers.
/// Blob values are serialized from `request` directly, never cloned.
fn deflate_request(
    request: &Value,
    kind: RequestKind,
    blobs: &mut Vec<Blob>,
) -> Result<Value, StoreError> {
    let Some(fields) = request.as_object() else {
        return Ok(request.clone());
    };
    let mut copy = serde_json::Map::with_capacity(fields.len());
    for (key, value) in fields {
        let stored = if kind.whole_places().contains(&key.as_str()) {
            deflate_value(value, blobs)?
        } else if kind.is_history_key(key)
            && let Some(entries) = value.as_array()
        {
            let entries = entries
                .iter()
                .map(|entry| deflate_value(entry, blobs))
                .collect::<Result<Vec<_>, _>>()?;
            Value::Array(entries)
        } else {
            value.clone()
        };
        copy.insert(key.clone(), stored);
    }
    Ok(Value::Object(copy))
}

/// The form of `exchange` to store: its large repeated sub-values replaced by markers, plus the
/// moved bodies (one per place, possibly with repeated hashes). The big values are serialized
/// straight from `exchange`; only the rest is copied.
pub fn deflate(exchange: &ExchangeRecord) -> Result<(ExchangeRecord, Vec<Blob>), StoreError> {
    let mut blobs = Vec::new();
    let guest_request = deflate_request(&exchange.guest_request, RequestKind::Guest, &mut blobs)?;
    let context_request = exchange
        .context_request
        .as_ref()
        // The neutral Chat request the context policy left: the upstream's shape.
        .map(|request| deflate_request(request, RequestKind::Upstream, &mut blobs))
        .transpose()?;
    let attempts = exchange
        .attempts
        .iter()
        .map(|attempt| {
            Ok(UpstreamAttempt {
                request: deflate_request(&attempt.request, RequestKind::Upstream, &mut blobs)?,
                status: attempt.status,
                raw_events: attempt.raw_events.clone(),
                error: attempt.error.clone(),
                started_at: attempt.started_at,
                first_byte_at: attempt.first_byte_at,
                last_byte_at: attempt.last_byte_at,
                usage: attempt.usage,
            })
        })
        .collect::<Result<Vec<_>, StoreError>>()?;
    // Every field listed (no `..`): a new field is a compile error here, not a silent loss.
    let stored = ExchangeRecord {
        id: exchange.id,
        run_id: exchange.run_id,
        ingress_api: exchange.ingress_api.clone(),
        requested_model: exchange.requested_model.clone(),
        upstream_url: exchange.upstream_url.clone(),
        upstream_model: exchange.upstream_model.clone(),
        guest_request,
        context_request,
        context: exchange.context.clone(),
        attempts,
        upstream_message: exchange.upstream_message.clone(),
        guest_response: exchange.guest_response.clone(),
        status: exchange.status,
        error: exchange.error.clone(),
        retries: exchange.retries,
        received_at: exchange.received_at,
        first_byte_at: exchange.first_byte_at,
        last_byte_at: exchange.last_byte_at,
        delivered_at: exchange.delivered_at,
        usage: exchange.usage,
        billed: exchange.billed,
        function_calls: exchange.function_calls.clone(),
        notes: exchange.notes.clone(),
    };
    Ok((stored, blobs))
}

/// Puts the blob bodies back in place of the markers of `exchange`. `body_of` looks a body up by
/// hash (`Ok(None)` when the store has no such blob, which is a [`StoreError::MissingBlob`]).
pub fn inflate(
    exchange: &mut ExchangeRecord,
    mut body_of: impl FnMut(&str) -> Result<Option<Value>, StoreError>,
) -> Result<(), StoreError> {
    let exchange_id = exchange.id;
    for_each_slot(exchange, |value| {
        let Some(hash) = marker_hash(value) else {
            return Ok(());
        };
        match body_of(hash)? {
            Some(body) => {
                *value = body;
                Ok(())
            }
            None => Err(StoreError::MissingBlob {
                hash: hash.to_owned(),
                exchange: exchange_id.to_string(),
            }),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn exchange_with(guest_request: Value, upstream_request: Value) -> ExchangeRecord {
        let mut exchange =
            ExchangeRecord::begin(None, "google.generateContent", "m", guest_request);
        exchange.attempts.push(UpstreamAttempt {
            request: upstream_request,
            status: None,
            raw_events: Vec::new(),
            error: None,
            started_at: exchange.received_at,
            first_byte_at: None,
            last_byte_at: None,
            usage: None,
        });
        exchange
    }

    /// Inflates `stored` from `blobs` (every hash must be one of them).
    fn inflated(stored: &ExchangeRecord, blobs: &[Blob]) -> ExchangeRecord {
        let mut read = stored.clone();
        inflate(&mut read, |hash| {
            let blob = blobs.iter().find(|b| b.hash == hash).expect("a known hash");
            Ok(Some(serde_json::from_str(&blob.body).unwrap()))
        })
        .unwrap();
        read
    }

    #[test]
    fn big_whole_places_and_big_history_entries_become_blobs() {
        let big = "x".repeat(MIN_BLOB_BYTES);
        let exchange = exchange_with(
            json!({
                "systemInstruction": {"parts": [{"text": big}]},
                "contents": [{"role": "user", "parts": [{"text": big}]}, {"role": "model", "parts": [{"text": "ok"}]}],
                "tools": [],
                "generationConfig": {"note": big},
            }),
            json!({
                "messages": [{"role": "user", "content": big}, {"role": "assistant", "content": "ok"}],
                "tools": [],
                "metadata": {"note": big},
            }),
        );
        let (stored, blobs) = deflate(&exchange).unwrap();
        assert_eq!(
            blobs.len(),
            3,
            "systemInstruction, contents[0], messages[0]"
        );
        for blob in &blobs {
            assert_eq!(blob.hash, hash_body(&blob.body));
        }
        let guest = &stored.guest_request;
        assert_eq!(guest["systemInstruction"], marker(&blobs[0].hash));
        assert_eq!(guest["contents"][0], marker(&blobs[1].hash));
        let upstream = &stored.attempts[0].request;
        assert_eq!(upstream["messages"][0], marker(&blobs[2].hash));
        // Small places, small history entries and big values elsewhere stay inline.
        for (stored, original) in [
            (
                &guest["contents"][1],
                &exchange.guest_request["contents"][1],
            ),
            (&guest["tools"], &exchange.guest_request["tools"]),
            (
                &guest["generationConfig"],
                &exchange.guest_request["generationConfig"],
            ),
            (
                &upstream["messages"][1],
                &exchange.attempts[0].request["messages"][1],
            ),
            (
                &upstream["metadata"],
                &exchange.attempts[0].request["metadata"],
            ),
        ] {
            assert_eq!(stored, original);
        }
        assert_eq!(inflated(&stored, &blobs), exchange);
    }

    #[test]
    fn a_growing_history_shares_its_earlier_entries() {
        let entry = |n: usize| json!({"role": "user", "parts": [{"text": format!("{n} {}", "y".repeat(MIN_BLOB_BYTES))}]});
        let turn = |n: usize| {
            let contents: Vec<Value> = (0..n).map(entry).collect();
            exchange_with(json!({ "contents": contents }), json!({}))
        };
        let (_, first) = deflate(&turn(2)).unwrap();
        let (_, second) = deflate(&turn(3)).unwrap();
        assert_eq!(second.len(), 3);
        assert_eq!(
            &second[..2],
            &first[..],
            "the first two entries keep their hashes"
        );
        assert_ne!(second[2].hash, second[1].hash);
    }

    #[test]
    fn history_entries_shaped_like_markers_are_moved_and_come_back() {
        let exchange = exchange_with(
            json!({"contents": [{"$blob": "sha256:0000"}, {"role": "user"}]}),
            json!({"messages": [{"$blob": "sha256:1111"}]}),
        );
        let (stored, blobs) = deflate(&exchange).unwrap();
        assert_eq!(blobs.len(), 2);
        assert_eq!(stored.guest_request["contents"][0], marker(&blobs[0].hash));
        assert_eq!(stored.guest_request["contents"][1], json!({"role": "user"}));
        assert_eq!(inflated(&stored, &blobs), exchange);
    }

    #[test]
    fn gemini_cli_session_context_entry_is_a_blob() {
        let request: Value = serde_json::from_slice(include_bytes!(
            "../../testkit/data/gemini-cli-0.61.0-first-request.json"
        ))
        .unwrap();
        let context = request["contents"][0].clone();
        let context_len = serde_json::to_string(&context).unwrap().len();
        assert!(
            context_len < 1024,
            "the entry the threshold is for: {context_len} bytes"
        );
        let exchange = exchange_with(json!({ "contents": [context] }), json!({}));
        let (stored, blobs) = deflate(&exchange).unwrap();
        assert_eq!(blobs.len(), 1);
        assert_eq!(stored.guest_request["contents"][0], marker(&blobs[0].hash));
        assert_eq!(inflated(&stored, &blobs), exchange);
    }

    #[test]
    fn values_just_below_the_threshold_stay_inline() {
        let system = json!({"role": "system", "content": ""});
        let padding = MIN_BLOB_BYTES - serde_json::to_string(&system).unwrap().len() - 1;
        let exchange = exchange_with(
            json!({}),
            json!({"messages": [{"role": "system", "content": "y".repeat(padding)}]}),
        );
        assert!(deflate(&exchange).unwrap().1.is_empty());
        let exchange = exchange_with(
            json!({}),
            json!({"messages": [{"role": "system", "content": "y".repeat(padding + 1)}]}),
        );
        assert_eq!(deflate(&exchange).unwrap().1.len(), 1);
    }
}
