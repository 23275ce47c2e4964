//! Collects the [`ExchangeRecord`] of one exchange while it runs and writes it (through the
//! [`RecordWriter`]) once when the exchange begins (`InFlight`) and once when it ends (`Ok` /
//! `Error`).
//!
//! The request path only keeps cheap handles: the guest body (or, when the translation cache
//! supplied a system prompt and tools that are most of it, copies of the few bytes around them)
//! and each attempt's upstream body are shared `Bytes`, the raw upstream events are kept as
//! received. When the exchange ends, what was delivered is reduced here to a [`Delivery`] (see
//! `record_writer`); JSON parsing, assembling the upstream message, redaction and storing happen
//! on the recorder's writer thread. With records off nothing is kept at all.
//!
//! `context_request` stays `None`: the gateway applies no context policy, so the request sent
//! upstream is the translation of the guest request as received (see each attempt's `request`).

use std::borrow::Cow;
use std::ops::Range;
use std::sync::{Arc, OnceLock};

use bytes::Bytes;
use chrono::Utc;
use serde_json::Value;
use switchyard_records::model::{ExchangeRecord, ExchangeStatus, TypedError, UpstreamAttempt};
use switchyard_records::{JsonText, SharedJson};
use switchyard_translate::ResponseReport;
use switchyard_translate::google::GenerateContentResponse;
use uuid::Uuid;

use crate::record_writer::{Delivery, GuestRequest, PendingWrite, RecordWriter};
use crate::translation::ChatBody;

/// What the guest received in an exchange, as [`Trace::finish_ok`] / [`Trace::finish_error`]
/// take it.
pub(crate) type Delivered<'a> = Cow<'a, [GenerateContentResponse]>;

/// The record of one exchange under construction (`None` inside when records are off).
pub(crate) struct Trace(Option<Active>);

/// What a trace holds while records are on.
struct Active {
    writer: RecordWriter,
    record: Box<ExchangeRecord>,
    guest: GuestRequest,
    /// Upstream request body of each attempt (shared with the request that was sent).
    attempt_bodies: Vec<ChatBody>,
}

impl Trace {
    pub fn begin(
        writer: Option<&RecordWriter>,
        run_id: Option<Uuid>,
        ingress_api: &str,
        guest_model: &str,
        guest_body: &Bytes,
    ) -> Self {
        Self(writer.map(|writer| Active {
            writer: writer.clone(),
            record: Box::new(ExchangeRecord::begin(
                run_id,
                ingress_api,
                guest_model,
                Value::Null,
            )),
            guest: GuestRequest {
                body: guest_body.clone(),
                parsed: Arc::new(OnceLock::new()),
                text: None,
            },
            attempt_bodies: Vec::new(),
        }))
    }

    fn record(&mut self) -> Option<&mut ExchangeRecord> {
        self.0.as_mut().map(|active| &mut *active.record)
    }

    /// Write the current state (begin, or an intermediate checkpoint).
    pub async fn write(&self) {
        if let Some(active) = &self.0 {
            active
                .writer
                .write(PendingWrite {
                    record: active.record.clone(),
                    guest: active.guest.clone(),
                    attempt_bodies: active.attempt_bodies.clone(),
                    delivered: None,
                })
                .await;
        }
    }

    /// The guest body holds these shared values (from the translation cache) at these ranges, in
    /// order: record it as text pieces instead of parsing it.
    pub fn guest_shared(&mut self, shared: &[(Range<usize>, SharedJson)]) {
        let Some(active) = &mut self.0 else {
            return;
        };
        if shared.is_empty() {
            return;
        }
        let body = &active.guest.body;
        let shared_bytes: usize = shared.iter().map(|(range, _)| range.len()).sum();
        // Mostly shared (Gemini CLI's early turns: ~1 KB of 47 KB): the record takes copies of
        // the few bytes around the shared parts, so the body is freed by the request's thread
        // once translated instead of being pinned by a queued record and freed by a record
        // thread. Mostly the guest's own history: slices (a copy would cost a memcpy of nearly
        // the whole body and free almost nothing).
        let copy = shared_bytes.saturating_mul(2) >= body.len();
        let piece = |range: Range<usize>| {
            if copy {
                Bytes::copy_from_slice(&body[range])
            } else {
                body.slice(range)
            }
        };
        let mut text = JsonText::default();
        let mut at = 0;
        for (range, value) in shared {
            if range.start < at || range.end > body.len() {
                return;
            }
            text.push_text(piece(at..range.start));
            text.push_shared(value.clone());
            at = range.end;
        }
        text.push_text(piece(at..body.len()));
        active.guest.text = Some(text);
        if copy {
            // The text path never reads the body itself.
            active.guest.body = Bytes::new();
        }
    }

    pub fn route(&mut self, upstream_url: &str, upstream_model: &str) {
        if let Some(r) = self.record() {
            r.upstream_url = upstream_url.to_string();
            r.upstream_model = upstream_model.to_string();
        }
    }

    /// Adds a note; `note` runs only when records are on.
    pub fn note(&mut self, note: impl FnOnce() -> String) {
        if let Some(r) = self.record() {
            r.notes.push(note());
        }
    }

    pub fn attempt_started(&mut self, chat_body: &ChatBody) {
        if let Some(active) = &mut self.0 {
            active.attempt_bodies.push(chat_body.clone());
            let r = &mut active.record;
            r.attempts.push(UpstreamAttempt {
                request: Value::Null,
                status: None,
                raw_events: Vec::new(),
                error: None,
                started_at: Utc::now(),
                first_byte_at: None,
                last_byte_at: None,
            });
            r.retries = r.attempts.len().saturating_sub(1) as u32;
        }
    }

    pub fn attempt_head(&mut self, status: u16) {
        if let Some(r) = self.record() {
            let now = Utc::now();
            r.first_byte_at = Some(now);
            if let Some(a) = r.attempts.last_mut() {
                a.status = Some(status);
                a.first_byte_at = Some(now);
            }
        }
    }

    /// One raw upstream event (taken, not copied).
    pub fn attempt_event(&mut self, data: String) {
        if let Some(r) = self.record() {
            let now = Utc::now();
            r.last_byte_at = Some(now);
            if let Some(a) = r.attempts.last_mut() {
                a.raw_events.push(data);
                a.last_byte_at = Some(now);
            }
        }
    }

    /// A whole (non-streamed) upstream response body, kept as one raw event.
    pub fn attempt_body(&mut self, body: &[u8]) {
        if self.0.is_some() {
            self.attempt_event(String::from_utf8_lossy(body).into_owned());
        }
    }

    /// What the response translator decided for the current attempt (upstream fields it does
    /// not model, with counts; synthesized ids or finish reason; reasoning not forwarded; ...),
    /// as a note; the fields themselves are in the attempt's raw events.
    pub fn response_report(&mut self, report: &ResponseReport) {
        if let Some(r) = self.record() {
            let attempt = r.attempts.len();
            let report = serde_json::to_string(report).unwrap_or_default();
            r.notes.push(format!(
                "response translation (attempt {attempt}): {report}"
            ));
        }
    }

    pub fn attempt_failed(&mut self, kind: &str, message: &str) {
        if let Some(a) = self.record().and_then(|r| r.attempts.last_mut()) {
            a.error = Some(TypedError {
                kind: kind.to_string(),
                message: message.to_string(),
            });
        }
    }

    /// Ends the exchange successfully with what the guest received (owned when the caller is
    /// done with it, so records take it without a copy).
    pub async fn finish_ok(&mut self, delivered: Delivered<'_>) {
        self.finish(delivered, None).await;
    }

    /// Ends the exchange with a typed error (and whatever was delivered before it).
    pub async fn finish_error(&mut self, delivered: Delivered<'_>, kind: &str, message: &str) {
        self.finish(
            delivered,
            Some(TypedError {
                kind: kind.to_string(),
                message: message.to_string(),
            }),
        )
        .await;
    }

    /// The last write: reduces what was delivered to a [`Delivery`] here and hands the record
    /// over (no copy); the upstream message is assembled on the recorder's thread. Later calls
    /// do nothing.
    async fn finish(&mut self, delivered: Delivered<'_>, error: Option<TypedError>) {
        let Some(Active {
            writer,
            mut record,
            guest,
            attempt_bodies,
        }) = self.0.take()
        else {
            return;
        };
        record.delivered_at = Some(Utc::now());
        record.status = if error.is_some() {
            ExchangeStatus::Error
        } else {
            ExchangeStatus::Ok
        };
        record.error = error;
        writer
            .write(PendingWrite {
                record,
                guest,
                attempt_bodies,
                delivered: Some(Delivery::of(delivered)),
            })
            .await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use switchyard_records::Recorder;

    /// The guest request pieces a trace with records on keeps.
    fn guest_text(trace: &Trace) -> &JsonText {
        let Some(active) = &trace.0 else {
            panic!("records are on")
        };
        active.guest.text.as_ref().expect("recorded as text")
    }

    #[test]
    fn a_cache_hit_record_keeps_copies_of_its_pieces_not_the_guest_body() {
        let writer = RecordWriter::new(Recorder::disabled());
        // Like Gemini CLI's early turns: the shared tools are most of the body.
        let tools_json = format!("[{}]", vec!["2"; 100].join(","));
        let body = Bytes::from(format!(r#"{{"contents":[1],"tools":{tools_json},"x":4}}"#));
        let start = body.len() - tools_json.len() - r#","x":4}"#.len();
        let tools = start..start + tools_json.len();
        assert_eq!(&body[tools.clone()], tools_json.as_bytes());
        let mut trace = Trace::begin(Some(&writer), None, "ingress", "model", &body);
        trace.guest_shared(&[(tools, SharedJson::new(Bytes::from(tools_json.clone())))]);
        assert!(
            body.is_unique(),
            "the trace still holds the guest body: a queued record would pin it"
        );
        assert_eq!(
            guest_text(&trace).to_bytes(),
            body,
            "the pieces still make up the body"
        );
    }

    #[test]
    fn a_record_of_mostly_own_history_shares_the_guest_body() {
        let writer = RecordWriter::new(Recorder::disabled());
        let body = Bytes::from(br#"{"contents":["a long history ...."],"tools":[2]}"#.to_vec());
        let tools = body.len() - br#"[2]}"#.len()..body.len() - 1;
        assert_eq!(&body[tools.clone()], b"[2]");
        let mut trace = Trace::begin(Some(&writer), None, "ingress", "model", &body);
        trace.guest_shared(&[(tools, SharedJson::new(Bytes::from_static(b"[2]")))]);
        assert!(!body.is_unique(), "slices of the body, not copies");
        assert_eq!(guest_text(&trace).to_bytes(), body);
    }
}
