//! The fast write path for exchanges: requests handed over as JSON text, not as parsed values.
//!
//! Recording an [`ExchangeRecord`] means parsing the ~47 KB guest request and the ~47 KB upstream
//! request of every exchange into values, redacting every string in them, and serializing them
//! again; that is nearly all of what recording costs. A producer that already holds those requests
//! as bytes (the gateway) hands over an [`ExchangeText`] instead: the record without its requests,
//! plus each request as [`JsonText`] pieces (and, optionally, the guest response as JSON text it
//! serialized itself). Pieces that every exchange of a session repeats (the system prompt and the
//! tool declarations, which the gateway's translation cache already knows) are [`SharedJson`]:
//! keyed by the SHA-256 of their text, computed once by the producer.
//!
//! The recorder's writer [`prepare`]s each one into an [`ExchangeDocument`], the exact text the
//! store keeps:
//! * a shared piece is parsed, redacted and turned into a blob ([`crate::blobs`]) the first time
//!   its key is seen (again whenever the redactor gains a secret); later exchanges only look the
//!   key up and write the blob's marker;
//! * each history entry (an element of the guest request's `contents`, of an upstream request's
//!   `messages`) is found in the text without building anything and keyed by the SHA-256 of its
//!   text; the first time a key is seen the entry is parsed and redacted, and becomes a blob when
//!   it is big enough. Later exchanges (every turn resends the history) only hash it, look the
//!   key up and write the blob's marker;
//! * the rest of the text pieces is copied verbatim when [`Redactor::screen_json_text`] finds
//!   nothing in it that redaction could change. Otherwise the whole exchange is parsed and takes
//!   the value path ([`ExchangeText::into_record`], redaction, [`crate::blobs::deflate`]): the
//!   same stored result, only slower.
//!
//! The stored format is the one the value path writes (markers at the same places, same blob
//! hashes), so readers do not know which path wrote a record. Contract for producers: a shared
//! piece is a whole value at a blob place (the guest request's `systemInstruction` or `tools`,
//! an upstream request's `tools` or leading system message), never part of a history entry.

use std::collections::HashMap;
use std::ops::Range;
use std::sync::Arc;

use bytes::Bytes;
use serde::Serialize;
use serde_json::Value;
use serde_json::value::RawValue;
use sha2::{Digest, Sha256};

use crate::blobs::{self, Blob, RequestKind};
use crate::model::{ExchangeRecord, RecordOp, UpstreamAttempt};
use crate::redact::Redactor;

/// A JSON value repeated across exchanges, with the SHA-256 of its text as its key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SharedJson {
    key: [u8; 32],
    text: Bytes,
}

impl SharedJson {
    /// Keys `text` (one SHA-256 pass: make one per distinct value, not one per exchange).
    pub fn new(text: Bytes) -> Self {
        Self {
            key: Sha256::digest(&text).into(),
            text,
        }
    }

    /// The JSON text.
    pub fn text(&self) -> &Bytes {
        &self.text
    }
}

/// One piece of a [`JsonText`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JsonPiece {
    /// Text of this exchange.
    Text(Bytes),
    /// A whole value repeated across exchanges (stored once).
    Shared(SharedJson),
}

impl JsonPiece {
    /// The piece's bytes.
    pub fn bytes(&self) -> &Bytes {
        match self {
            JsonPiece::Text(bytes) => bytes,
            JsonPiece::Shared(shared) => &shared.text,
        }
    }
}

/// A JSON document as pieces of text; concatenated they are the document.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct JsonText {
    pieces: Vec<JsonPiece>,
}

impl JsonText {
    /// A document of one text piece.
    pub fn whole(text: Bytes) -> Self {
        Self {
            pieces: vec![JsonPiece::Text(text)],
        }
    }

    /// Appends a text piece (empty ones are left out).
    pub fn push_text(&mut self, text: Bytes) {
        if !text.is_empty() {
            self.pieces.push(JsonPiece::Text(text));
        }
    }

    /// Appends a shared piece.
    pub fn push_shared(&mut self, shared: SharedJson) {
        self.pieces.push(JsonPiece::Shared(shared));
    }

    /// The pieces in order.
    pub fn pieces(&self) -> &[JsonPiece] {
        &self.pieces
    }

    /// Total length in bytes.
    pub fn len(&self) -> usize {
        self.pieces.iter().map(|p| p.bytes().len()).sum()
    }

    /// Bytes in its own text pieces (shared pieces not counted).
    pub fn text_len(&self) -> usize {
        self.pieces
            .iter()
            .map(|piece| match piece {
                JsonPiece::Text(bytes) => bytes.len(),
                JsonPiece::Shared(_) => 0,
            })
            .sum()
    }

    /// True when there is no text at all.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// True when some piece is shared.
    pub fn has_shared(&self) -> bool {
        self.pieces
            .iter()
            .any(|p| matches!(p, JsonPiece::Shared(_)))
    }

    /// The document in one buffer (copies unless it is a single piece).
    pub fn to_bytes(&self) -> Bytes {
        if let [one] = self.pieces.as_slice() {
            return one.bytes().clone();
        }
        let mut out = Vec::with_capacity(self.len());
        for piece in &self.pieces {
            out.extend_from_slice(piece.bytes());
        }
        Bytes::from(out)
    }

    /// The document parsed, or as a JSON string when it is not JSON (nothing is lost).
    pub fn to_value(&self) -> Value {
        let bytes = self.to_bytes();
        serde_json::from_slice(&bytes)
            .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()))
    }
}

/// An exchange whose requests are JSON text: see the module docs.
#[derive(Debug, Clone, PartialEq)]
pub struct ExchangeText {
    /// Everything else. Its `guest_request` and the attempts' `request` are ignored (replaced by
    /// the texts below), and so is its `guest_response` when [`ExchangeText::guest_response`]
    /// is set.
    pub record: ExchangeRecord,
    /// The guest request as received.
    pub guest_request: JsonText,
    /// The upstream request of each attempt, by attempt index.
    pub attempt_requests: Vec<JsonText>,
    /// The response sent to the guest as JSON text, when the producer serialized it itself
    /// (cheaper than a [`Value`] tree: one buffer instead of one allocation per member). It is
    /// screened and redacted with the record's own fields; text that is not JSON is kept as a
    /// JSON string.
    pub guest_response: Option<String>,
}

impl ExchangeText {
    /// The same exchange as a plain record, requests and response parsed (the value path).
    pub fn into_record(mut self) -> ExchangeRecord {
        self.parse_guest_response();
        let mut record = self.record;
        record.guest_request = self.guest_request.to_value();
        for (attempt, text) in record.attempts.iter_mut().zip(&self.attempt_requests) {
            attempt.request = text.to_value();
        }
        record
    }

    /// Moves [`ExchangeText::guest_response`] into the record as a value
    /// ([`guest_response_value`]).
    fn parse_guest_response(&mut self) {
        if let Some(text) = self.guest_response.take() {
            self.record.guest_response = Some(guest_response_value(text));
        }
    }
}

/// A guest response given as JSON text, as the record's value: parsed, or kept as a JSON string
/// when it is not JSON (nothing is lost).
pub fn guest_response_value(text: String) -> Value {
    serde_json::from_str(&text).unwrap_or(Value::String(text))
}

/// An exchange ready to store: `json` is the record as stored (requests as text, blob markers in
/// place), `blobs` the bodies its markers refer to (a store writes the ones it does not have).
/// Made only by [`prepare`], from redacted input.
#[derive(Debug, Clone, PartialEq)]
pub struct ExchangeDocument {
    record: ExchangeRecord,
    json: String,
    blobs: Vec<Arc<Blob>>,
    /// The request texts and the guest response text `json` was written from: kept, not
    /// dropped, so that what the producer allocated can be freed on the producer's threads
    /// ([`ExchangeDocument::into_spent`]).
    requests: Vec<JsonText>,
    guest_response: Option<String>,
}

/// The parts of a stored exchange that its producer allocated (the record skeleton, the
/// request texts, the guest response text), for the producer's threads to free (see
/// [`crate::recorder`]).
#[derive(Debug)]
pub struct SpentExchange {
    _record: ExchangeRecord,
    _requests: Vec<JsonText>,
    _guest_response: Option<String>,
}

impl ExchangeDocument {
    /// Length of the record's stored JSON text (blob bodies not included).
    pub fn stored_len(&self) -> usize {
        self.json.len()
    }

    /// The record without its requests (and without its guest response when that came as
    /// text), for the store's index columns.
    pub fn record(&self) -> &ExchangeRecord {
        &self.record
    }

    /// The stored JSON text of the whole record.
    pub fn json(&self) -> &str {
        &self.json
    }

    /// The blobs `json` refers to.
    pub fn blobs(&self) -> &[Arc<Blob>] {
        &self.blobs
    }

    /// Drops the parts the recorder made (the stored text, the blob list) and returns the
    /// parts the producer made.
    pub fn into_spent(self) -> SpentExchange {
        SpentExchange {
            _record: self.record,
            _requests: self.requests,
            _guest_response: self.guest_response,
        }
    }
}

/// Most shared values remembered by one writer (a session has a handful).
const SHARED_ENTRIES: usize = 64;

/// Most history entries one writer remembers, and most bytes of blob bodies among them: past
/// either, it forgets them all and starts over (a forgotten entry is only parsed again).
const HISTORY_ENTRIES: usize = 8192;
const HISTORY_BYTES: usize = 16 * 1024 * 1024;

/// The blobs of the shared values and history entries a writer has seen, for the redactor
/// generation they were redacted with.
#[derive(Debug, Default)]
pub struct SharedBlobs {
    generation: u64,
    by_key: HashMap<[u8; 32], SharedBlob>,
    /// History entries by the SHA-256 of their text as sent; `None` for an entry too small to
    /// be a blob (it stays inline).
    history: HashMap<[u8; 32], Option<SharedBlob>>,
    /// Bytes of blob bodies in `history`.
    history_bytes: usize,
}

/// A shared value's blob and the marker text that stands for it.
#[derive(Debug, Clone)]
struct SharedBlob {
    blob: Arc<Blob>,
    marker: String,
}

impl SharedBlob {
    fn new(blob: Blob) -> Self {
        Self {
            marker: blobs::marker_text(&blob.hash),
            blob: Arc::new(blob),
        }
    }
}

impl SharedBlobs {
    /// Forgets everything redacted with an older redactor generation.
    fn follow(&mut self, redactor: &Redactor) {
        if self.generation != redactor.generation() {
            self.by_key.clear();
            self.history.clear();
            self.history_bytes = 0;
            self.generation = redactor.generation();
        }
    }

    /// The redacted blob of `shared`, made on first use. `None` when its text is not JSON.
    fn blob(&mut self, shared: &SharedJson, redactor: &Redactor) -> Option<&SharedBlob> {
        self.follow(redactor);
        if !self.by_key.contains_key(&shared.key) {
            let mut value: Value = serde_json::from_slice(&shared.text).ok()?;
            redactor.redact_value(&mut value);
            let body = serde_json::to_string(&value).ok()?;
            let hash = blobs::hash_body(&body);
            if self.by_key.len() >= SHARED_ENTRIES {
                self.by_key.clear();
            }
            self.by_key
                .insert(shared.key, SharedBlob::new(Blob { hash, body }));
        }
        self.by_key.get(&shared.key)
    }

    /// The redacted blob of the history entry `text` (the exact text of one value), made on
    /// first use; `Ok(None)` when it is too small to be one (see [`blobs::blob_of`]). `Err` when
    /// it is not JSON.
    fn history_entry(
        &mut self,
        text: &[u8],
        redactor: &Redactor,
    ) -> Result<Option<&SharedBlob>, Dirty> {
        self.follow(redactor);
        let key: [u8; 32] = Sha256::digest(text).into();
        if !self.history.contains_key(&key) {
            let mut value: Value = serde_json::from_slice(text).map_err(|_| Dirty::Requests)?;
            redactor.redact_value(&mut value);
            let blob = blobs::blob_of(&value).map_err(|_| Dirty::Requests)?;
            let bytes = blob.as_ref().map_or(0, |b| b.body.len());
            if self.history.len() >= HISTORY_ENTRIES || self.history_bytes + bytes > HISTORY_BYTES {
                self.history.clear();
                self.history_bytes = 0;
            }
            self.history_bytes += bytes;
            self.history.insert(key, blob.map(SharedBlob::new));
        }
        Ok(self.history.get(&key).and_then(Option::as_ref))
    }
}

/// Turns `text` into the op the store writes, redacted: an [`RecordOp::UpsertExchangeDocument`]
/// when every request text piece passes the redactor's screen, else the parsed exchange
/// ([`RecordOp::UpsertExchange`], already redacted).
///
/// The record's own fields are written as they are when their text passes the screen too (the
/// common case: nothing in them to redact); otherwise they are redacted first.
pub fn prepare(mut text: ExchangeText, redactor: &Redactor, shared: &mut SharedBlobs) -> RecordOp {
    let mut written = write_document(&text, redactor, shared, Screen::Everything);
    if matches!(written, Err(Dirty::Record)) {
        text.parse_guest_response();
        redactor.redact_exchange(&mut text.record);
        written = write_document(&text, redactor, shared, Screen::RequestsOnly);
    }
    match written {
        Ok((json, blobs)) => {
            let mut requests = text.attempt_requests;
            requests.push(text.guest_request);
            RecordOp::UpsertExchangeDocument(Box::new(ExchangeDocument {
                record: text.record,
                json,
                blobs,
                requests,
                guest_response: text.guest_response,
            }))
        }
        Err(_) => {
            let mut op = RecordOp::UpsertExchange(Box::new(text.into_record()));
            redactor.redact_op(&mut op);
            op
        }
    }
}

/// What [`write_document`] screens.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Screen {
    /// The request text pieces and the record's own fields.
    Everything,
    /// The request text pieces only (the record is already redacted).
    RequestsOnly,
}

/// Why an exchange cannot be stored as written by [`write_document`].
#[derive(Debug, PartialEq, Eq)]
enum Dirty {
    /// A request text piece may need redaction, is not UTF-8, or the requests are not JSON: the
    /// exchange takes the value path.
    Requests,
    /// The record's own fields may need redaction, or the guest response text is not JSON:
    /// redact them (the response as a value), then write again.
    Record,
}

/// The stored JSON of `text`'s exchange, written in one buffer: the record's fields in their
/// order (what `serde_json::to_string(&record)` writes; a test holds the two together), with
/// the request texts spliced in as they are (shared pieces and big history entries as blob
/// markers), and the blobs the markers refer to.
fn write_document(
    text: &ExchangeText,
    redactor: &Redactor,
    shared: &mut SharedBlobs,
    screen: Screen,
) -> Result<(String, Vec<Arc<Blob>>), Dirty> {
    // The requests' own text, plus room for the record's fields and the blob markers.
    let request_text = text.guest_request.text_len()
        + text
            .attempt_requests
            .iter()
            .map(JsonText::text_len)
            .sum::<usize>();
    let mut doc = DocumentWriter {
        out: Vec::with_capacity(request_text + 4096),
        spliced: Vec::new(),
        verbatim: None,
        blobs: Vec::new(),
        redactor,
        shared,
    };
    // Every field listed (no `..`): a new field is a compile error here, not a silent loss.
    let ExchangeRecord {
        id,
        run_id,
        ingress_api,
        requested_model,
        upstream_url,
        upstream_model,
        guest_request: _,
        context_request,
        attempts,
        upstream_message,
        guest_response,
        status,
        error,
        retries,
        received_at,
        first_byte_at,
        last_byte_at,
        delivered_at,
        usage,
        function_calls,
        notes,
    } = &text.record;
    doc.out.push(b'{');
    doc.field("id", id)?;
    doc.field("run_id", run_id)?;
    doc.field("ingress_api", ingress_api)?;
    doc.field("requested_model", requested_model)?;
    doc.field("upstream_url", upstream_url)?;
    doc.field("upstream_model", upstream_model)?;
    doc.key("guest_request");
    doc.splice(&text.guest_request, RequestKind::Guest)?;
    doc.key("context_request");
    doc.guest_request_value(context_request.as_ref(), screen)?;
    doc.key("attempts");
    doc.out.push(b'[');
    let mut requests = text.attempt_requests.iter();
    for (index, attempt) in attempts.iter().enumerate() {
        let UpstreamAttempt {
            request,
            status,
            raw_events,
            error,
            started_at,
            first_byte_at,
            last_byte_at,
        } = attempt;
        if index > 0 {
            doc.out.push(b',');
        }
        doc.out.push(b'{');
        doc.key("request");
        match requests.next() {
            Some(request_text) => doc.splice(request_text, RequestKind::Upstream)?,
            None => doc.value(request)?,
        }
        doc.field("status", status)?;
        doc.field("raw_events", raw_events)?;
        doc.field("error", error)?;
        doc.field("started_at", started_at)?;
        doc.field("first_byte_at", first_byte_at)?;
        doc.field("last_byte_at", last_byte_at)?;
        doc.out.push(b'}');
    }
    doc.out.push(b']');
    doc.field("upstream_message", upstream_message)?;
    match &text.guest_response {
        Some(response) => {
            doc.key("guest_response");
            let start = doc.out.len();
            doc.out.extend_from_slice(response.as_bytes());
            doc.verbatim = Some(start..doc.out.len());
        }
        None => doc.field("guest_response", guest_response)?,
    }
    doc.field("status", status)?;
    doc.field("error", error)?;
    doc.field("retries", retries)?;
    doc.field("received_at", received_at)?;
    doc.field("first_byte_at", first_byte_at)?;
    doc.field("last_byte_at", last_byte_at)?;
    doc.field("delivered_at", delivered_at)?;
    doc.field("usage", usage)?;
    doc.field("function_calls", function_calls)?;
    doc.field("notes", notes)?;
    doc.out.push(b'}');
    let DocumentWriter {
        out,
        spliced,
        verbatim,
        blobs,
        ..
    } = doc;
    // The response text must be JSON (as producers promise); checked without building anything.
    // (The spliced requests were checked as their history entries were found.)
    if let Some(range) = verbatim {
        serde_json::from_slice::<serde::de::IgnoredAny>(&out[range]).map_err(|_| Dirty::Record)?;
    }
    let json = String::from_utf8(out).map_err(|_| Dirty::Requests)?;
    if screen == Screen::Everything {
        // Everything outside the spliced requests is the record's own text.
        let mut at = 0;
        for range in spliced.iter().chain([&(json.len()..json.len())]) {
            if redactor.screen_json_text(&json[at..range.start]) {
                return Err(Dirty::Record);
            }
            at = range.end;
        }
    }
    Ok((json, blobs))
}

/// The buffer [`write_document`] writes into, and what it learned on the way.
struct DocumentWriter<'a> {
    out: Vec<u8>,
    /// Where the requests are in `out` (screened on their own, not with the record).
    spliced: Vec<std::ops::Range<usize>>,
    /// Where the guest response text is in `out` (screened with the record).
    verbatim: Option<std::ops::Range<usize>>,
    blobs: Vec<Arc<Blob>>,
    redactor: &'a Redactor,
    shared: &'a mut SharedBlobs,
}

impl DocumentWriter<'_> {
    /// `"name":` (after a comma unless it is the object's first member).
    fn key(&mut self, name: &str) {
        if self.out.last() != Some(&b'{') {
            self.out.push(b',');
        }
        self.out.push(b'"');
        self.out.extend_from_slice(name.as_bytes());
        self.out.extend_from_slice(b"\":");
    }

    fn value<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Dirty> {
        serde_json::to_writer(&mut self.out, value).map_err(|_| Dirty::Record)
    }

    fn field<T: Serialize + ?Sized>(&mut self, name: &str, value: &T) -> Result<(), Dirty> {
        self.key(name);
        self.value(value)
    }

    /// Writes a guest request given as a value in the record (or `null`), its blob places as
    /// markers, the way the value path stores it. It is screened as a part of the record
    /// (before its markers are written), unless `screen` says the record is already redacted.
    fn guest_request_value(
        &mut self,
        request: Option<&Value>,
        screen: Screen,
    ) -> Result<(), Dirty> {
        let Some(request) = request else {
            return self.value(&Value::Null);
        };
        if screen == Screen::Everything {
            let text = serde_json::to_string(request).map_err(|_| Dirty::Record)?;
            if self.redactor.screen_json_text(&text) {
                return Err(Dirty::Record);
            }
        }
        let (stored, blobs) = blobs::deflate_guest_request(request).map_err(|_| Dirty::Record)?;
        self.blobs.extend(blobs.into_iter().map(Arc::new));
        let start = self.out.len();
        self.value(&stored)?;
        // Screened above: its markers must not be taken for the record's own text.
        self.spliced.push(start..self.out.len());
        Ok(())
    }

    /// Writes a request's text: text pieces as they are (each must pass the screen), shared
    /// pieces as their blob's marker, and each history entry big enough to be a blob as its
    /// marker.
    fn splice(&mut self, json: &JsonText, kind: RequestKind) -> Result<(), Dirty> {
        let start = self.out.len();
        // Where the request's own text and its shared pieces are, relative to `start`.
        let mut own_text = Vec::new();
        let mut shared_values = Vec::new();
        for piece in json.pieces() {
            let at = self.out.len() - start;
            match piece {
                JsonPiece::Text(bytes) => {
                    self.out.extend_from_slice(bytes);
                    own_text.push(at..self.out.len() - start);
                }
                JsonPiece::Shared(value) => {
                    let shared = self
                        .shared
                        .blob(value, self.redactor)
                        .ok_or(Dirty::Requests)?;
                    self.out.extend_from_slice(shared.marker.as_bytes());
                    self.blobs.push(Arc::clone(&shared.blob));
                    shared_values.push(at..self.out.len() - start);
                }
            }
        }
        if self.out.len() == start {
            return Err(Dirty::Requests);
        }
        // The history entries that become blobs, and the markers that stand for them.
        let mut moved: Vec<(Range<usize>, String)> = Vec::new();
        for entry in history_entries(&self.out[start..], kind)? {
            if shared_values.contains(&entry) {
                continue;
            }
            if shared_values
                .iter()
                .any(|shared| shared.start < entry.end && entry.start < shared.end)
            {
                // A shared piece inside an entry breaks the producers' contract.
                return Err(Dirty::Requests);
            }
            let text = &self.out[start + entry.start..start + entry.end];
            if let Some(blob) = self.shared.history_entry(text, self.redactor)? {
                self.blobs.push(Arc::clone(&blob.blob));
                moved.push((entry, blob.marker.clone()));
            }
        }
        // The own text that stays (moved entries are redacted blobs) must pass the screen.
        // UTF-8 is checked once, for the whole document, when it is written.
        let request = &self.out[start..];
        for text in &own_text {
            for kept in outside(text.clone(), moved.iter().map(|(entry, _)| entry)) {
                if self.redactor.screen_json_text(&request[kept]) {
                    return Err(Dirty::Requests);
                }
            }
        }
        if !moved.is_empty() {
            let written = self.out.split_off(start);
            let mut at = 0;
            for (entry, marker) in &moved {
                self.out.extend_from_slice(&written[at..entry.start]);
                self.out.extend_from_slice(marker.as_bytes());
                at = entry.end;
            }
            self.out.extend_from_slice(&written[at..]);
        }
        self.spliced.push(start..self.out.len());
        Ok(())
    }
}

/// Where the history entries of the request `text` are (each the exact text of one value).
/// `Err` when `text` is not a JSON object with at most one history member, and that an array
/// when present (such requests take the value path, which stores them just as well).
fn history_entries(text: &[u8], kind: RequestKind) -> Result<Vec<Range<usize>>, Dirty> {
    #[derive(serde::Deserialize)]
    struct GuestHistory<'a> {
        #[serde(borrow, default)]
        contents: Option<Vec<&'a RawValue>>,
    }
    #[derive(serde::Deserialize)]
    struct UpstreamHistory<'a> {
        #[serde(borrow, default)]
        messages: Option<Vec<&'a RawValue>>,
    }
    let entries = match kind {
        RequestKind::Guest => serde_json::from_slice::<GuestHistory>(text).map(|h| h.contents),
        RequestKind::Upstream => {
            serde_json::from_slice::<UpstreamHistory>(text).map(|h| h.messages)
        }
    }
    .map_err(|_| Dirty::Requests)?
    .unwrap_or_default();
    let base = text.as_ptr() as usize;
    Ok(entries
        .iter()
        .map(|entry| {
            let at = entry.get().as_ptr() as usize - base;
            at..at + entry.get().len()
        })
        .collect())
}

/// The parts of `range` outside every one of `holes` (sorted, not overlapping each other).
fn outside<'a>(
    range: Range<usize>,
    holes: impl IntoIterator<Item = &'a Range<usize>>,
) -> Vec<Range<usize>> {
    let mut at = range.start;
    let mut parts = Vec::new();
    for hole in holes {
        if hole.end <= at || hole.start >= range.end {
            continue;
        }
        if hole.start > at {
            parts.push(at..hole.start);
        }
        at = at.max(hole.end);
    }
    if at < range.end {
        parts.push(at..range.end);
    }
    parts
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{UpstreamAttempt, ingress};
    use crate::sqlite::SqliteStore;
    use crate::store::{RecordSink, RecordStore};
    use chrono::Utc;
    use serde_json::json;

    const SECRET: &str = "sk-document-secret-123456";

    fn shared(value: Value) -> SharedJson {
        SharedJson::new(Bytes::from(serde_json::to_vec(&value).unwrap()))
    }

    fn text(s: &str) -> Bytes {
        Bytes::copy_from_slice(s.as_bytes())
    }

    /// A guest request `{"contents":<contents>,"systemInstruction":S,"tools":T}` and an upstream
    /// request with a shared system message, a user message holding `<contents>` as text, and
    /// shared tools, as the gateway hands them over.
    fn exchange_text(contents: &str) -> ExchangeText {
        let system = shared(json!({"parts": [{"text": "You are a helpful agent. ".repeat(60)}]}));
        let tools = shared(
            json!([{"functionDeclarations": [{"name": "read_file", "description": "d".repeat(2000)}]}]),
        );
        let mut guest = JsonText::default();
        guest.push_text(text(&format!(
            "{{\"contents\":{contents},\"systemInstruction\":"
        )));
        guest.push_shared(system);
        guest.push_text(text(",\"tools\":"));
        guest.push_shared(tools);
        guest.push_text(text("}"));
        let system_message =
            shared(json!({"role": "system", "content": "You are a helpful agent. ".repeat(60)}));
        let chat_tools = shared(
            json!([{"type": "function", "function": {"name": "read_file", "description": "d".repeat(2000)}}]),
        );
        let mut upstream = JsonText::default();
        upstream.push_text(text("{\"model\":\"m\",\"messages\":["));
        upstream.push_shared(system_message);
        // The guest's contents again, as the text of one user message.
        let user = json!({"role": "user", "content": contents}).to_string();
        upstream.push_text(text(&format!(",{user}],\"tools\":")));
        upstream.push_shared(chat_tools);
        upstream.push_text(text(",\"stream\":true}"));
        let mut record =
            ExchangeRecord::begin(None, ingress::GENERATE_CONTENT, "gemini", Value::Null);
        record.attempts.push(UpstreamAttempt {
            request: Value::Null,
            status: Some(200),
            raw_events: vec![r#"{"choices":[]}"#.into()],
            error: None,
            started_at: Utc::now(),
            first_byte_at: None,
            last_byte_at: None,
        });
        ExchangeText {
            record,
            guest_request: guest,
            attempt_requests: vec![upstream],
            guest_response: None,
        }
    }

    fn store() -> (tempfile::TempDir, SqliteStore) {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(dir.path().join("s.sqlite3")).unwrap();
        (dir, store)
    }

    fn blob_hashes(store: &SqliteStore) -> Vec<String> {
        let conn = rusqlite::Connection::open(store.path()).unwrap();
        let mut statement = conn
            .prepare("SELECT hash FROM blobs ORDER BY hash")
            .unwrap();
        statement
            .query_map([], |row| row.get(0))
            .unwrap()
            .map(Result::unwrap)
            .collect()
    }

    /// Stores `exchange` the value path's way (parsed, redacted as a whole) into `store`; returns
    /// the record it stored.
    fn store_by_value_path(
        exchange: &ExchangeText,
        redactor: &Redactor,
        store: &mut SqliteStore,
    ) -> ExchangeRecord {
        let mut record = exchange.clone().into_record();
        redactor.redact_exchange(&mut record);
        store
            .apply(&[RecordOp::UpsertExchange(Box::new(record.clone()))])
            .unwrap();
        record
    }

    /// Prepares `exchange`, which must take the value path; returns the record of the op and the
    /// record read back after storing it.
    fn through_the_value_path(
        exchange: &ExchangeText,
        redactor: &Redactor,
    ) -> (ExchangeRecord, ExchangeRecord) {
        let op = prepare(exchange.clone(), redactor, &mut SharedBlobs::default());
        let RecordOp::UpsertExchange(record) = &op else {
            panic!("expected the value path: {op:?}");
        };
        let record = (**record).clone();
        let (_dir, mut store) = store();
        store.apply(&[op]).unwrap();
        let stored = store.exchange(exchange.record.id).unwrap().unwrap();
        (record, stored)
    }

    #[test]
    fn the_text_path_stores_what_the_value_path_stores() {
        let redactor = Redactor::new([SECRET]);
        let mut shared_blobs = SharedBlobs::default();
        let (_dir, mut text_store) = store();
        let (_dir2, mut value_store) = store();
        let big = "x".repeat(blobs::MIN_BLOB_BYTES);
        for contents in [
            r#"[{"role":"user","parts":[{"text":"a"}]}]"#.to_owned(),
            r#"[{"role":"user","parts":[{"text":"b \"quoted\"\n"}]}]"#.to_owned(),
            // A big entry (a blob), with escapes the value path writes differently.
            format!(
                r#"[{{"role":"user","parts":[{{"text":"{big} caf\u00e9 a\/b"}}]}},{{"role":"model","parts":[{{"text":"ok"}}]}}]"#
            ),
            // A big entry holding a secret: redacted in its blob, no value path needed.
            format!(r#"[{{"role":"user","parts":[{{"text":"{big} key {SECRET}"}}]}}]"#),
        ] {
            let exchange = exchange_text(&contents);
            let op = prepare(exchange.clone(), &redactor, &mut shared_blobs);
            let RecordOp::UpsertExchangeDocument(document) = &op else {
                panic!("expected the text path for {contents}: {op:?}");
            };
            assert!(!document.json().contains(SECRET));
            assert!(document.blobs().iter().all(|b| !b.body.contains(SECRET)));
            text_store.apply(std::slice::from_ref(&op)).unwrap();
            let expected = store_by_value_path(&exchange, &redactor, &mut value_store);

            let stored = text_store.exchange(exchange.record.id).unwrap().unwrap();
            assert_eq!(stored, expected);
            if !contents.contains(SECRET) {
                assert_eq!(
                    stored.guest_request["contents"],
                    serde_json::from_str::<Value>(&contents).unwrap()
                );
            }
        }
        // Four shared values and two big history entries (each in its guest and its upstream
        // form), each stored once, under the hashes the value path gives them.
        assert_eq!(blob_hashes(&text_store).len(), 8);
        assert_eq!(blob_hashes(&text_store), blob_hashes(&value_store));
    }

    #[test]
    fn a_context_request_is_stored_as_the_value_path_stores_it() {
        let redactor = Redactor::new([SECRET]);
        let big = "c".repeat(blobs::MIN_BLOB_BYTES);
        for extra in ["", SECRET] {
            let mut exchange = exchange_text("[]");
            exchange.record.context_request = Some(json!({
                "contents": [{"role": "user", "parts": [{"text": format!("{big} {extra}")}]}],
                "systemInstruction": {"parts": [{"text": big}]},
                "generationConfig": {"note": extra},
            }));
            let op = prepare(exchange.clone(), &redactor, &mut SharedBlobs::default());
            let RecordOp::UpsertExchangeDocument(document) = &op else {
                panic!("expected the text path: {op:?}");
            };
            assert!(
                !document.json().contains(&big),
                "context request blobs are markers"
            );
            assert!(!document.json().contains(SECRET));
            assert!(document.blobs().iter().all(|b| !b.body.contains(SECRET)));
            let (_dir, mut text_store) = store();
            let (_dir2, mut value_store) = store();
            text_store.apply(std::slice::from_ref(&op)).unwrap();
            let expected = store_by_value_path(&exchange, &redactor, &mut value_store);
            assert_eq!(
                text_store.exchange(exchange.record.id).unwrap().unwrap(),
                expected
            );
            assert_eq!(blob_hashes(&text_store), blob_hashes(&value_store));
        }
    }

    #[test]
    fn a_growing_history_is_stored_once() {
        let redactor = Redactor::default();
        let mut shared_blobs = SharedBlobs::default();
        let (_dir, mut store) = store();
        let entry = |n: usize| {
            format!(
                r#"{{"role":"user","parts":[{{"text":"turn {n}: {}"}}]}}"#,
                "z".repeat(4 * blobs::MIN_BLOB_BYTES)
            )
        };
        let mut history = Vec::new();
        let mut documents = Vec::new();
        for turn in 0..6 {
            history.push(entry(turn));
            let exchange = exchange_text(&format!("[{}]", history.join(",")));
            let op = prepare(exchange.clone(), &redactor, &mut shared_blobs);
            let RecordOp::UpsertExchangeDocument(document) = &op else {
                panic!("expected the text path: {op:?}");
            };
            documents.push(document.json().len());
            store.apply(std::slice::from_ref(&op)).unwrap();
            let stored = store.exchange(exchange.record.id).unwrap().unwrap();
            assert_eq!(stored, exchange.into_record());
        }
        // Each document holds one marker per entry, never an entry's text: it grows by a
        // marker's length per turn, not by the entry's.
        let growth = documents[5] - documents[4];
        assert!(growth < 200, "{documents:?}");
        // Four shared values, six guest entries and six upstream messages, each stored once.
        assert_eq!(blob_hashes(&store).len(), 4 + 6 + 6);
    }

    #[test]
    fn outside_leaves_out_exactly_the_holes() {
        let parts = |range, holes: &[Range<usize>]| outside(range, holes);
        assert_eq!(parts(0..10, &[]), vec![0..10]);
        assert_eq!(parts(0..10, &[2..4, 6..7]), vec![0..2, 4..6, 7..10]);
        assert_eq!(parts(3..10, &[0..5, 9..12]), vec![5..9]);
        assert_eq!(parts(3..5, &[0..3, 5..8]), vec![3..5]);
        assert_eq!(parts(3..5, &[0..2, 2..8]), Vec::<Range<usize>>::new());
    }

    #[test]
    fn a_secret_next_to_a_moved_entry_is_still_caught() {
        let redactor = Redactor::new([SECRET]);
        let big = "x".repeat(blobs::MIN_BLOB_BYTES);
        let mut exchange = exchange_text("[]");
        exchange.guest_request = JsonText::whole(text(&format!(
            r#"{{"contents":[{{"parts":[{{"text":"{big}"}}]}}],"labels":{{"k":"{SECRET}"}}}}"#
        )));
        let op = prepare(exchange, &redactor, &mut SharedBlobs::default());
        let RecordOp::UpsertExchange(record) = &op else {
            panic!("expected the value path: {op:?}");
        };
        assert_eq!(record.guest_request["labels"]["k"], json!(crate::REDACTED));
    }

    #[test]
    fn history_that_is_not_in_the_usual_shape_takes_the_value_path() {
        let redactor = Redactor::default();
        for guest in [
            r#"{"contents":{"role":"user"}}"#,
            r#"{"contents":[],"contents":[]}"#,
            r#"["contents"]"#,
        ] {
            let mut exchange = exchange_text("[]");
            exchange.guest_request = JsonText::whole(text(guest));
            let (_, stored) = through_the_value_path(&exchange, &redactor);
            assert_eq!(
                stored.guest_request,
                JsonText::whole(text(guest)).to_value()
            );
        }
    }

    #[test]
    fn text_redaction_could_change_takes_the_value_path() {
        let redactor = Redactor::new([SECRET]);
        let escaped_secret = format!("\\u0073{}", &SECRET[1..]);
        for contents in [
            format!(r#"[{{"role":"user","parts":[{{"text":"key {SECRET}"}}]}}]"#),
            format!(r#"[{{"role":"user","parts":[{{"text":"key {escaped_secret}"}}]}}]"#),
            r#"[{"role":"user","parts":[{"text":"Authorization: Bearer abcdefghijkl"}]}]"#.into(),
        ] {
            let exchange = exchange_text(&contents);
            let op = prepare(exchange.clone(), &redactor, &mut SharedBlobs::default());
            let RecordOp::UpsertExchange(record) = &op else {
                panic!("expected the value path for {contents}: {op:?}");
            };
            let text = record.guest_request["contents"][0]["parts"][0]["text"]
                .as_str()
                .unwrap();
            assert!(text.contains(crate::REDACTED), "{text}");
            assert!(
                !text.contains("sk-document") && !text.contains("abcdefghijkl"),
                "{text}"
            );
        }
    }

    #[test]
    fn secrets_in_the_record_around_the_requests_are_redacted_on_the_text_path() {
        let redactor = Redactor::new([SECRET]);
        let stored_text = |op: &RecordOp| match op {
            RecordOp::UpsertExchangeDocument(document) => document.json().to_owned(),
            RecordOp::UpsertExchange(record) => serde_json::to_string(record).unwrap(),
            other => panic!("unexpected op {other:?}"),
        };
        type AddSecret = fn(&mut ExchangeRecord);
        let cases: [(&str, AddSecret); 3] = [
            ("a raw upstream event", |record| {
                record.attempts[0]
                    .raw_events
                    .push(format!(r#"{{"echo":"{SECRET}"}}"#));
            }),
            ("a delivered call's arguments", |record| {
                record.function_calls.push(crate::model::DeliveredCall {
                    id: "c1".into(),
                    name: "fetch".into(),
                    arguments: json!({"headers": {"Authorization": "Bearer abcdefghijkl"}}),
                });
            }),
            ("a note", |record| {
                record
                    .notes
                    .push("upstream said x-api-key: zzzzzzzzzz".into());
            }),
        ];
        for (place, add_secret) in cases {
            let mut exchange = exchange_text("[]");
            add_secret(&mut exchange.record);
            let op = prepare(exchange, &redactor, &mut SharedBlobs::default());
            let text = stored_text(&op);
            for secret in [SECRET, "abcdefghijkl", "zzzzzzzzzz"] {
                assert!(!text.contains(secret), "{place}: {secret} stored in {text}");
            }
            assert!(text.contains(crate::REDACTED), "{place}: {text}");
        }
    }

    #[test]
    fn request_text_that_is_not_json_is_kept_on_the_value_path() {
        let redactor = Redactor::default();
        let mut exchange = exchange_text("[]");
        exchange.guest_request = JsonText::whole(text(r#"{"contents":[1,"#));
        let (record, stored) = through_the_value_path(&exchange, &redactor);
        assert_eq!(record.guest_request, json!(r#"{"contents":[1,"#));
        assert_eq!(stored.guest_request, json!(r#"{"contents":[1,"#));
    }

    #[test]
    fn request_text_that_is_not_utf8_is_kept_lossily_on_the_value_path() {
        let redactor = Redactor::default();
        let mut exchange = exchange_text("[]");
        // JSON in shape, with a byte that is not UTF-8 inside a string.
        exchange.guest_request = JsonText::whole(Bytes::from_static(b"{\"contents\":\"a\xffb\"}"));
        let (record, stored) = through_the_value_path(&exchange, &redactor);
        let lossy = json!("{\"contents\":\"a\u{fffd}b\"}");
        assert_eq!(record.guest_request, lossy);
        assert_eq!(stored.guest_request, lossy);
    }

    #[test]
    fn inline_text_shaped_like_a_blob_marker_is_kept_as_it_was() {
        let redactor = Redactor::default();
        let mut exchange = exchange_text("[]");
        // The guest's own `tools` is a marker-shaped object, given inline (not shared).
        exchange.guest_request =
            JsonText::whole(text(r#"{"contents":[],"tools":{"$blob":"sha256:0000"}}"#));
        let (_, stored) = through_the_value_path(&exchange, &redactor);
        assert_eq!(
            stored.guest_request["tools"],
            json!({"$blob": "sha256:0000"})
        );
    }

    #[test]
    fn shared_values_are_redacted_again_when_a_secret_is_added() {
        let mut redactor = Redactor::default();
        let mut shared_blobs = SharedBlobs::default();
        let mut exchange = exchange_text("[]");
        let mut guest = JsonText::default();
        guest.push_text(text("{\"contents\":[],\"systemInstruction\":"));
        guest.push_shared(shared(
            json!({"parts": [{"text": format!("token {SECRET}")}]}),
        ));
        guest.push_text(text("}"));
        exchange.guest_request = guest;
        let blob_body = |op: &RecordOp| match op {
            RecordOp::UpsertExchangeDocument(d) => d.blobs()[0].body.clone(),
            other => panic!("expected a document: {other:?}"),
        };
        let before = prepare(exchange.clone(), &redactor, &mut shared_blobs);
        assert!(blob_body(&before).contains(SECRET));
        redactor.add_secret(SECRET);
        let after = prepare(exchange, &redactor, &mut shared_blobs);
        assert!(!blob_body(&after).contains(SECRET), "{}", blob_body(&after));
    }

    #[test]
    fn a_stored_exchange_serializes_like_the_record() {
        let mut record = exchange_text("[]").into_record();
        // Requests without big history entries (those would be written as blob markers).
        record.attempts[0].request =
            json!({"model": "m", "messages": [{"role": "user", "content": "hi"}]});
        record.context_request = Some(json!({"c": 1}));
        record.upstream_message = Some(json!({"role": "assistant", "content": "x"}));
        record.guest_response = Some(json!({"candidates": []}));
        record.error = Some(crate::model::TypedError {
            kind: "k".into(),
            message: "m".into(),
        });
        record.first_byte_at = Some(Utc::now());
        record.function_calls.push(crate::model::DeliveredCall {
            id: "c1".into(),
            name: "ls".into(),
            arguments: json!({"a": 1}),
        });
        record.notes.push("note".into());
        record.attempts.push(record.attempts[0].clone());
        // The first attempt's request given as text, the second's as a value in the record.
        let as_text =
            |value: &Value| JsonText::whole(Bytes::from(serde_json::to_vec(value).unwrap()));
        let text = ExchangeText {
            guest_request: as_text(&record.guest_request),
            attempt_requests: vec![as_text(&record.attempts[0].request)],
            record: record.clone(),
            guest_response: None,
        };
        let redactor = Redactor::default();
        let write = |text: &ExchangeText| {
            write_document(
                text,
                &redactor,
                &mut SharedBlobs::default(),
                Screen::Everything,
            )
            .unwrap()
        };
        let (stored, blobs) = write(&text);
        assert!(blobs.is_empty());
        assert_eq!(stored, serde_json::to_string(&record).unwrap());
        // And with no attempts at all.
        let mut bare = record.clone();
        bare.attempts.clear();
        let text = ExchangeText {
            guest_request: as_text(&bare.guest_request),
            attempt_requests: Vec::new(),
            record: bare.clone(),
            guest_response: None,
        };
        let (stored, _) = write(&text);
        assert_eq!(stored, serde_json::to_string(&bare).unwrap());
        // And with the guest response given as text (the record's own value is then ignored).
        let mut text = ExchangeText {
            guest_request: as_text(&record.guest_request),
            attempt_requests: Vec::new(),
            record: record.clone(),
            guest_response: Some(r#"{"candidates":[{"index":0}]}"#.into()),
        };
        text.record.attempts.clear();
        text.record.guest_response = Some(json!("ignored"));
        let mut expected = text.record.clone();
        expected.guest_response = Some(json!({"candidates": [{"index": 0}]}));
        let (stored, _) = write(&text);
        assert_eq!(stored, serde_json::to_string(&expected).unwrap());
    }

    #[test]
    fn a_guest_response_text_is_redacted_or_kept_as_a_string_when_not_json() {
        let redactor = Redactor::new([SECRET]);
        let (_dir, mut store) = store();
        let mut with_secret = exchange_text("[]");
        with_secret.guest_response = Some(format!(
            r#"{{"candidates":[{{"content":{{"parts":[{{"text":"key {SECRET}"}}]}}}}]}}"#
        ));
        let mut not_json = exchange_text("[]");
        not_json.guest_response = Some(r#"{"candidates":["#.into());
        let ops: Vec<RecordOp> = [&with_secret, &not_json]
            .into_iter()
            .map(|text| prepare(text.clone(), &redactor, &mut SharedBlobs::default()))
            .collect();
        // Both stay on the text path: only the record's own fields needed a second look.
        for op in &ops {
            assert!(matches!(op, RecordOp::UpsertExchangeDocument(_)), "{op:?}");
        }
        store.apply(&ops).unwrap();
        let stored = |id| store.exchange(id).unwrap().unwrap().guest_response.unwrap();
        let redacted = stored(with_secret.record.id);
        assert_eq!(
            redacted["candidates"][0]["content"]["parts"][0]["text"],
            json!(format!("key {}", crate::REDACTED))
        );
        assert_eq!(stored(not_json.record.id), json!(r#"{"candidates":["#));
    }

    #[test]
    fn the_screen_passes_plain_json_and_catches_escapes_and_triggers() {
        let redactor = Redactor::new([SECRET]);
        let clean = r#"{"text":"line\nwith \"quotes\", a tab\t, an escape \u001b[0m and ünïcode"}"#;
        assert!(!redactor.screen_json_text(clean));
        for dirty in [
            SECRET.to_string(),
            "\\u0041".into(),
            "a\\/b".into(),
            r#"{"X-Api-Key":"v"}"#.into(),
            r#"{"access_token":"v"}"#.into(),
            "see https://h/x?KEY=abc".into(),
            r#"{"$blob":"x"}"#.into(),
        ] {
            assert!(redactor.screen_json_text(&dirty), "{dirty}");
        }
    }
}
