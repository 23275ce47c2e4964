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
use crate::model::ExchangeRecord;

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

/// What kind of place a slot is: the leading chat message only qualifies when it is a system message.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Slot {
    Whole,
    LeadingMessage,
}

/// Visits every place of `exchange` that may hold a blob marker.
fn for_each_slot(
    exchange: &mut ExchangeRecord,
    mut visit: impl FnMut(Slot, &mut Value) -> Result<(), StoreError>,
) -> Result<(), StoreError> {
    let guest_requests =
        std::iter::once(&mut exchange.guest_request).chain(exchange.context_request.as_mut());
    for request in guest_requests {
        if let Some(fields) = request.as_object_mut() {
            for key in ["systemInstruction", "tools"] {
                if let Some(value) = fields.get_mut(key) {
                    visit(Slot::Whole, value)?;
                }
            }
        }
    }
    for attempt in &mut exchange.attempts {
        if let Some(fields) = attempt.request.as_object_mut() {
            if let Some(tools) = fields.get_mut("tools") {
                visit(Slot::Whole, tools)?;
            }
            if let Some(first) = fields
                .get_mut("messages")
                .and_then(Value::as_array_mut)
                .and_then(|messages| messages.first_mut())
            {
                visit(Slot::LeadingMessage, first)?;
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

/// Replaces the large repeated sub-values of `exchange` by markers, returning the moved bodies
/// (one per slot, possibly with repeated hashes).
pub fn deflate(exchange: &mut ExchangeRecord) -> Result<Vec<Blob>, StoreError> {
    let mut blobs = Vec::new();
    for_each_slot(exchange, |slot, value| {
        let looks_like_marker = marker_hash(value).is_some();
        let is_system_message = value.get("role").and_then(Value::as_str) == Some("system");
        if slot == Slot::LeadingMessage && !is_system_message && !looks_like_marker {
            return Ok(());
        }
        let body = serde_json::to_string(value).map_err(|source| StoreError::Serde {
            what: "a blob".to_owned(),
            source,
        })?;
        if body.len() < MIN_BLOB_BYTES && !looks_like_marker {
            return Ok(());
        }
        let hash = hash_body(&body);
        *value = marker(&hash);
        blobs.push(Blob { hash, body });
        Ok(())
    })?;
    Ok(blobs)
}

/// Puts the blob bodies back in place of the markers of `exchange`. `body_of` looks a body up by
/// hash (`Ok(None)` when the store has no such blob, which is a [`StoreError::MissingBlob`]).
pub fn inflate(
    exchange: &mut ExchangeRecord,
    mut body_of: impl FnMut(&str) -> Result<Option<Value>, StoreError>,
) -> Result<(), StoreError> {
    let exchange_id = exchange.id;
    for_each_slot(exchange, |_, value| {
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
