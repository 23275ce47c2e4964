//! Content-addressed deduplication of the large sub-values that every exchange of a session
//! repeats: the guest's system instruction and tool declarations, and their translated forms in
//! each upstream request (the `tools` array and a leading `system` message).
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

/// Sub-values whose serialized JSON is at least this many bytes become blobs.
pub const MIN_BLOB_BYTES: usize = 1024;

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

/// Visits every place of `exchange` that may hold a blob marker (the places [`deflate`] fills).
fn for_each_slot(
    exchange: &mut ExchangeRecord,
    mut visit: impl FnMut(&mut Value) -> Result<(), StoreError>,
) -> Result<(), StoreError> {
    let guest_requests =
        std::iter::once(&mut exchange.guest_request).chain(exchange.context_request.as_mut());
    for request in guest_requests {
        if let Some(fields) = request.as_object_mut() {
            for key in ["systemInstruction", "tools"] {
                if let Some(value) = fields.get_mut(key) {
                    visit(value)?;
                }
            }
        }
    }
    for attempt in &mut exchange.attempts {
        if let Some(fields) = attempt.request.as_object_mut() {
            if let Some(tools) = fields.get_mut("tools") {
                visit(tools)?;
            }
            if let Some(first) = fields
                .get_mut("messages")
                .and_then(Value::as_array_mut)
                .and_then(|messages| messages.first_mut())
            {
                visit(first)?;
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

/// The JSON text of the marker for `hash` (what [`marker`] serializes to).
pub(crate) fn marker_text(hash: &str) -> String {
    serde_json::to_string(&marker(hash)).unwrap_or_default()
}

/// `sha256:<hex>` of `body`.
pub fn hash_body(body: &str) -> String {
    let digest = Sha256::digest(body.as_bytes());
    format!("{HASH_PREFIX}{}", hex::encode(digest))
}

/// Decides whether `value` (at a blob place) becomes a blob, and if so returns its marker and body.
/// `leading_message` places only qualify when the value is a system message.
fn deflate_value(
    value: &Value,
    leading_message: bool,
) -> Result<Option<(Value, Blob)>, StoreError> {
    let looks_like_marker = marker_hash(value).is_some();
    let is_system_message = value.get("role").and_then(Value::as_str) == Some("system");
    if leading_message && !is_system_message && !looks_like_marker {
        return Ok(None);
    }
    let body = serde_json::to_string(value).map_err(|source| StoreError::Serde {
        what: "a blob".to_owned(),
        source,
    })?;
    if body.len() < MIN_BLOB_BYTES && !looks_like_marker {
        return Ok(None);
    }
    let hash = hash_body(&body);
    Ok(Some((marker(&hash), Blob { hash, body })))
}

/// A copy of the guest (or upstream) request `request` with its blob places replaced by markers.
/// Blob values are serialized from `request` directly, never cloned.
fn deflate_request(
    request: &Value,
    upstream: bool,
    blobs: &mut Vec<Blob>,
) -> Result<Value, StoreError> {
    let Some(fields) = request.as_object() else {
        return Ok(request.clone());
    };
    let mut copy = serde_json::Map::with_capacity(fields.len());
    for (key, value) in fields {
        let is_whole_place = if upstream {
            key == "tools"
        } else {
            key == "systemInstruction" || key == "tools"
        };
        let stored = if is_whole_place {
            match deflate_value(value, false)? {
                Some((marker, blob)) => {
                    blobs.push(blob);
                    marker
                }
                None => value.clone(),
            }
        } else if upstream && key == "messages" {
            match value.as_array().and_then(|messages| messages.split_first()) {
                Some((first, rest)) => {
                    let first = match deflate_value(first, true)? {
                        Some((marker, blob)) => {
                            blobs.push(blob);
                            marker
                        }
                        None => first.clone(),
                    };
                    let mut messages = Vec::with_capacity(rest.len() + 1);
                    messages.push(first);
                    messages.extend(rest.iter().cloned());
                    Value::Array(messages)
                }
                None => value.clone(),
            }
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
    let guest_request = deflate_request(&exchange.guest_request, false, &mut blobs)?;
    let context_request = exchange
        .context_request
        .as_ref()
        .map(|request| deflate_request(request, false, &mut blobs))
        .transpose()?;
    let attempts = exchange
        .attempts
        .iter()
        .map(|attempt| {
            Ok(UpstreamAttempt {
                request: deflate_request(&attempt.request, true, &mut blobs)?,
                status: attempt.status,
                raw_events: attempt.raw_events.clone(),
                error: attempt.error.clone(),
                started_at: attempt.started_at,
                first_byte_at: attempt.first_byte_at,
                last_byte_at: attempt.last_byte_at,
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
        });
        exchange
    }

    #[test]
    fn only_a_leading_system_message_and_big_places_become_blobs() {
        let big = "x".repeat(MIN_BLOB_BYTES);
        let exchange = exchange_with(
            json!({"systemInstruction": {"parts": [{"text": big}]}, "contents": [{"parts": [{"text": big}]}]}),
            json!({"messages": [{"role": "user", "content": big}], "tools": []}),
        );
        let (stored, blobs) = deflate(&exchange).unwrap();
        assert_eq!(blobs.len(), 1, "only systemInstruction");
        assert_eq!(blobs[0].hash, hash_body(&blobs[0].body));
        assert_eq!(
            stored.guest_request["systemInstruction"],
            marker(&blobs[0].hash)
        );
        assert_eq!(
            stored.guest_request["contents"],
            exchange.guest_request["contents"]
        );
        assert_eq!(stored.attempts[0].request, exchange.attempts[0].request);

        let mut read = stored.clone();
        let body: Value = serde_json::from_str(&blobs[0].body).unwrap();
        inflate(&mut read, |hash| {
            assert_eq!(hash, blobs[0].hash);
            Ok(Some(body.clone()))
        })
        .unwrap();
        assert_eq!(read, exchange);
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
