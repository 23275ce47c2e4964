//! Builds the [`ExchangeRecord`] of one exchange and writes it through the [`Recorder`]: once
//! when the exchange begins (`InFlight`) and once when it ends (`Ok` / `Error`).
//!
//! With records off (a disabled recorder) nothing is parsed or cloned, so the hot path stays
//! cheap. The recorder redacts secrets again on write.

use bytes::Bytes;
use chrono::Utc;
use serde_json::Value;
use switchyard_records::Recorder;
use switchyard_records::model::{
    DeliveredCall, ExchangeRecord, ExchangeStatus, TypedError, UpstreamAttempt, Usage,
};
use switchyard_translate::google::{GenerateContentResponse, Part};
use uuid::Uuid;

/// The record of one exchange under construction (`None` inside when records are off).
pub(crate) struct Trace {
    recorder: Recorder,
    record: Option<Box<ExchangeRecord>>,
}

fn json_or_string(bytes: &[u8]) -> Value {
    serde_json::from_slice(bytes)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(bytes).into_owned()))
}

impl Trace {
    pub fn begin(
        recorder: &Recorder,
        run_id: Option<Uuid>,
        ingress_api: &str,
        guest_model: &str,
        guest_body: &[u8],
    ) -> Self {
        let record = recorder.is_enabled().then(|| {
            Box::new(ExchangeRecord::begin(
                run_id,
                ingress_api,
                guest_model,
                json_or_string(guest_body),
            ))
        });
        Self {
            recorder: recorder.clone(),
            record,
        }
    }

    pub fn enabled(&self) -> bool {
        self.record.is_some()
    }

    /// Write the current state (begin, or an intermediate checkpoint).
    pub fn write(&self) {
        if let Some(record) = &self.record
            && let Err(e) = self.recorder.record_exchange((**record).clone())
        {
            tracing::warn!(error = %e, "cannot record exchange");
        }
    }

    pub fn route(&mut self, upstream_url: &str, upstream_model: &str) {
        if let Some(r) = &mut self.record {
            r.upstream_url = upstream_url.to_string();
            r.upstream_model = upstream_model.to_string();
        }
    }

    pub fn note(&mut self, note: impl FnOnce() -> String) {
        if let Some(r) = &mut self.record {
            r.notes.push(note());
        }
    }

    pub fn attempt_started(&mut self, chat_body: &Bytes) {
        if let Some(r) = &mut self.record {
            r.attempts.push(UpstreamAttempt {
                request: json_or_string(chat_body),
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
        if let Some(a) = self.record.as_mut().and_then(|r| r.attempts.last_mut()) {
            a.status = Some(status);
            a.first_byte_at = Some(Utc::now());
        }
        if let Some(r) = &mut self.record {
            r.first_byte_at = Some(Utc::now());
        }
    }

    pub fn attempt_event(&mut self, data: &str) {
        if let Some(r) = &mut self.record {
            let now = Utc::now();
            r.last_byte_at = Some(now);
            if let Some(a) = r.attempts.last_mut() {
                a.raw_events.push(data.to_string());
                a.last_byte_at = Some(now);
            }
        }
    }

    pub fn attempt_failed(&mut self, kind: &str, message: &str) {
        if let Some(a) = self.record.as_mut().and_then(|r| r.attempts.last_mut()) {
            a.error = Some(TypedError {
                kind: kind.to_string(),
                message: message.to_string(),
            });
        }
    }

    /// Ends the exchange successfully with what the guest received.
    pub fn finish_ok(&mut self, delivered: &[GenerateContentResponse]) {
        self.finish(delivered, None);
    }

    /// Ends the exchange with a typed error (and whatever was delivered before it).
    pub fn finish_error(
        &mut self,
        delivered: &[GenerateContentResponse],
        kind: &str,
        message: &str,
    ) {
        self.finish(
            delivered,
            Some(TypedError {
                kind: kind.to_string(),
                message: message.to_string(),
            }),
        );
    }

    fn finish(&mut self, delivered: &[GenerateContentResponse], error: Option<TypedError>) {
        let Some(r) = &mut self.record else {
            return;
        };
        r.delivered_at = Some(Utc::now());
        r.status = if error.is_some() {
            ExchangeStatus::Error
        } else {
            ExchangeStatus::Ok
        };
        r.error = error;
        let mut calls = Vec::new();
        for chunk in delivered {
            for part in chunk.parts() {
                if let Some(call) = call_of(part) {
                    calls.push(call);
                }
            }
            if let Some(u) = &chunk.usage_metadata {
                r.usage = Usage {
                    input: u64::from(u.prompt_token_count),
                    cached: u64::from(u.cached_content_token_count.unwrap_or(0)),
                    output: u64::from(u.candidates_token_count),
                    reasoning: u64::from(u.thoughts_token_count.unwrap_or(0)),
                };
            }
        }
        r.function_calls = calls;
        r.guest_response = Some(match delivered {
            [one] => serde_json::to_value(one).unwrap_or(Value::Null),
            many => serde_json::to_value(many).unwrap_or(Value::Null),
        });
        self.write();
    }
}

fn call_of(part: &Part) -> Option<DeliveredCall> {
    let call = part.function_call.as_ref()?;
    Some(DeliveredCall {
        id: call.id.clone().unwrap_or_default(),
        name: call.name.clone(),
        arguments: call.args.clone().unwrap_or(Value::Null),
    })
}
