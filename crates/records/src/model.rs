//! The record data model: what Switchyard keeps about runs, their canonical events, the guest's raw
//! output lines and every model exchange the gateway relays.
//!
//! Everything here is plain data (serde-serializable, no I/O). Producers (the backend/run command and
//! the gateway) build these values and hand them to a [`crate::Recorder`] as [`RecordOp`]s; the
//! writer thread redacts secrets and persists them. Readers get the same types back from a
//! [`crate::RecordStore`].

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use uuid::Uuid;

/// A new time-sortable record id (UUID v7). Use it for [`RunRecord::id`] and [`ExchangeRecord::id`].
pub fn new_record_id() -> Uuid {
    Uuid::now_v7()
}

/// One run of a guest agent CLI under Switchyard.
///
/// Written when the run starts (with `ended_at: None`) and upserted again when it ends.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunRecord {
    /// Run id, a UUID v7 (sorts by start time).
    pub id: Uuid,
    /// Guest agent name, e.g. `"gemini-cli"`.
    pub agent: String,
    /// Guest agent version, e.g. `"0.61.0"`.
    pub agent_version: String,
    /// The guest command line. The producer must already have removed secrets; the store still
    /// passes every element through the [`crate::Redactor`].
    pub argv: Vec<String>,
    /// Digest (e.g. hex SHA-256) of the effective settings the guest ran with.
    pub settings_digest: String,
    /// Working directory of the guest.
    pub workdir: String,
    /// Upstream model the gateway routed this run to, when known.
    pub upstream_model: Option<String>,
    /// When the run started.
    pub started_at: DateTime<Utc>,
    /// When the run ended; `None` while it is still running (or if it never finished).
    pub ended_at: Option<DateTime<Utc>>,
    /// Typed outcome of the run, serialized by the caller (e.g. the backend's `RunOutcome`).
    pub outcome: Option<Value>,
    /// Lifecycle state. Producers set `Running` and then `Ended`; the store sets `Incomplete` for runs
    /// whose writer died before it ended them. A run upserted with `ended_at` set is stored as `Ended`.
    #[serde(default)]
    pub state: RunState,
    /// Aggregated counts for the run.
    #[serde(default)]
    pub summary: RunSummary,
    /// Raw guest output lines not stored at all because the run's raw-line budget (lines and
    /// bytes, set by the producer) was used up.
    #[serde(default)]
    pub raw_lines_dropped: u64,
    /// Raw guest output lines stored cut short because one line exceeded the line cap (the line
    /// is kept, flagged, with its beginning only).
    #[serde(default)]
    pub raw_lines_truncated: u64,
    /// Where a later run can continue this one's guest session (`switchyard run --resume`):
    /// set only once a prompt of the session was answered normally.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resume: Option<ResumePoint>,
}

/// A guest session a later run can load.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResumePoint {
    /// How the guest was driven (`acp`).
    pub protocol: String,
    /// The guest's own session id.
    pub session_id: String,
    /// The workspace the session belongs to (the guest keys its sessions by it).
    pub workdir: String,
    /// Where the guest's saved session state is, relative to the record directory.
    pub state_dir: String,
}

impl RunRecord {
    /// A run of `agent` `agent_version` with id `id`, started now and running, with nothing
    /// else known yet (empty argv, digest and workdir, no model, no outcome, zero counts).
    pub fn begin(id: Uuid, agent: impl Into<String>, agent_version: impl Into<String>) -> Self {
        RunRecord {
            id,
            agent: agent.into(),
            agent_version: agent_version.into(),
            argv: Vec::new(),
            settings_digest: String::new(),
            workdir: String::new(),
            upstream_model: None,
            started_at: Utc::now(),
            ended_at: None,
            outcome: None,
            state: RunState::Running,
            summary: RunSummary::default(),
            raw_lines_dropped: 0,
            raw_lines_truncated: 0,
            resume: None,
        }
    }
}

/// Lifecycle state of a [`RunRecord`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunState {
    /// Started and not ended yet.
    #[default]
    Running,
    /// Ended normally (whatever the outcome).
    Ended,
    /// Its writer died before the run ended (crash, SIGKILL); marked when the store is next opened.
    Incomplete,
    /// A queue worker's lease on the run's task expired before the run ended (the worker died or
    /// lost the database), and the task went to another attempt; marked by the claimer.
    Abandoned,
}

impl RunState {
    /// The stable lowercase name stored in the database.
    pub fn as_str(self) -> &'static str {
        match self {
            RunState::Running => "running",
            RunState::Ended => "ended",
            RunState::Incomplete => "incomplete",
            RunState::Abandoned => "abandoned",
        }
    }
}

/// Aggregated counts for one run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct RunSummary {
    /// Model turns (upstream exchanges that produced an assistant message).
    pub turns: u32,
    /// Function/tool calls delivered to the guest.
    pub tool_calls: u32,
    /// Prompt tokens (including cached ones).
    pub input_tokens: u64,
    /// Completion tokens.
    pub output_tokens: u64,
    /// Prompt tokens served from a provider cache.
    pub cached_tokens: u64,
    /// Reasoning ("thinking") tokens.
    pub reasoning_tokens: u64,
}

impl RunSummary {
    /// Adds one exchange: a turn if it produced an upstream message, its delivered calls and its
    /// token usage.
    pub fn add_exchange(&mut self, exchange: &ExchangeRecord) {
        if exchange.upstream_message.is_some() {
            self.turns += 1;
        }
        self.tool_calls += exchange.function_calls.len() as u32;
        self.input_tokens += exchange.usage.input;
        self.output_tokens += exchange.usage.output;
        self.cached_tokens += exchange.usage.cached;
        self.reasoning_tokens += exchange.usage.reasoning;
    }

    /// The summary of these exchanges.
    pub fn from_exchanges<'a>(exchanges: impl IntoIterator<Item = &'a ExchangeRecord>) -> Self {
        let mut summary = RunSummary::default();
        exchanges
            .into_iter()
            .for_each(|exchange| summary.add_exchange(exchange));
        summary
    }
}

/// One canonical event of a run, in order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EventRecord {
    /// The run this event belongs to.
    pub run_id: Uuid,
    /// Position in the run's event sequence (0-based, strictly increasing; re-recording the same
    /// `seq` replaces the earlier event).
    pub seq: u64,
    /// When the event happened.
    pub at: DateTime<Utc>,
    /// Event kind (the canonical event's tag, e.g. `"assistant_message"`, `"tool_call"`,
    /// `"tool_result"`).
    pub kind: String,
    /// The canonical event, serialized by the caller.
    pub event: Value,
}

/// Which guest output stream a raw line came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RawStream {
    /// The guest's standard output.
    Stdout,
    /// The guest's standard error.
    Stderr,
    /// What Switchyard wrote to the guest's standard input (ACP requests and answers).
    Stdin,
    /// The data of each server-sent event the guest's server sent (OpenCode's `/event`).
    Events,
}

impl RawStream {
    /// `"stdout"`, `"stderr"`, `"stdin"` or `"events"`.
    pub fn as_str(self) -> &'static str {
        match self {
            RawStream::Stdout => "stdout",
            RawStream::Stderr => "stderr",
            RawStream::Stdin => "stdin",
            RawStream::Events => "events",
        }
    }
}

/// One raw output line of the guest, as read (bounded by the producer; see
/// [`RunRecord::raw_lines_dropped`] and [`RunRecord::raw_lines_truncated`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RawLineRecord {
    /// The run this line belongs to.
    pub run_id: Uuid,
    /// Which stream it was read from.
    pub stream: RawStream,
    /// Position within that stream (0-based).
    pub seq: u64,
    /// The line without its terminator (lossily decoded as UTF-8 by the producer).
    pub line: String,
}

/// Ingress API names used in [`ExchangeRecord::ingress_api`].
pub mod ingress {
    /// Google `models/{model}:streamGenerateContent`.
    pub const STREAM_GENERATE_CONTENT: &str = "google.streamGenerateContent";
    /// Google `models/{model}:generateContent`.
    pub const GENERATE_CONTENT: &str = "google.generateContent";
    /// Google `models/{model}:countTokens`.
    pub const COUNT_TOKENS: &str = "google.countTokens";
    /// OpenAI `chat/completions`, streamed or not.
    pub const CHAT_COMPLETIONS: &str = "openai.chatCompletions";
    /// Anthropic `v1/messages`, streamed or not.
    pub const MESSAGES: &str = "anthropic.messages";
    /// OpenAI `v1/responses`, streamed or not.
    pub const RESPONSES: &str = "openai.responses";
}

/// One model exchange relayed by the gateway: the guest's request, what went upstream (per attempt),
/// what came back, and what was delivered to the guest.
///
/// Lifecycle: upsert it once when it begins (`status: InFlight`) and again when it ends. When a store
/// is opened after a crash, exchanges still `InFlight` whose writer is gone become `Incomplete`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExchangeRecord {
    /// Exchange id, a UUID v7 (sorts by receive time).
    pub id: Uuid,
    /// The run this exchange belongs to, if the gateway knows it (per-run token).
    pub run_id: Option<Uuid>,
    /// Ingress API, one of the [`ingress`] constants.
    pub ingress_api: String,
    /// Model name the guest asked for.
    pub requested_model: String,
    /// Upstream endpoint URL the exchange was routed to (query-string keys are redacted on write).
    pub upstream_url: String,
    /// Upstream model name the exchange was routed to.
    pub upstream_model: String,
    /// The guest's original request body, as received.
    pub guest_request: Value,
    /// The upstream request as the context policy left it (the neutral Chat request, before
    /// the provider's plan); `None` means the policy changed nothing.
    pub context_request: Option<Value>,
    /// The context policy's decision: the policy, how tokens were counted, the tokens before
    /// and after, the blocks evicted and images omitted (`None`: policy `identity`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<Value>,
    /// Every upstream attempt, in order (retries add attempts).
    pub attempts: Vec<UpstreamAttempt>,
    /// The assembled upstream assistant message (e.g. an OpenAI chat `message` object with
    /// `role`, `content`, `tool_calls`).
    pub upstream_message: Option<Value>,
    /// The assembled response sent to the guest (e.g. a GenerateContent response; for streams the
    /// merged chunks).
    pub guest_response: Option<Value>,
    /// Exchange status.
    pub status: ExchangeStatus,
    /// Typed error when `status` is `Error` (or `Incomplete` after recovery).
    pub error: Option<TypedError>,
    /// Upstream retries performed (attempts minus one, unless an attempt was never sent).
    pub retries: u32,
    /// When the gateway received the guest request.
    pub received_at: DateTime<Utc>,
    /// First upstream response byte of the successful (or last) attempt.
    pub first_byte_at: Option<DateTime<Utc>>,
    /// Last upstream response byte of the successful (or last) attempt.
    pub last_byte_at: Option<DateTime<Utc>>,
    /// When the response was fully delivered to the guest.
    pub delivered_at: Option<DateTime<Utc>>,
    /// Token usage of the answer delivered to the guest, as reported upstream.
    pub usage: Usage,
    /// Token usage of every attempt together (retried, malformed and failed ones too): what
    /// the provider bills for this exchange. Estimated when any attempt's usage was.
    #[serde(default)]
    pub billed: Usage,
    /// Every function call delivered to the guest, in order.
    pub function_calls: Vec<DeliveredCall>,
    /// Translation decisions worth knowing about (dropped fields, renamed ids, repaired JSON...).
    pub notes: Vec<String>,
}

impl ExchangeRecord {
    /// A fresh in-flight exchange with a new v7 id, received now, and every optional part empty.
    pub fn begin(
        run_id: Option<Uuid>,
        ingress_api: impl Into<String>,
        requested_model: impl Into<String>,
        guest_request: Value,
    ) -> Self {
        ExchangeRecord {
            id: new_record_id(),
            run_id,
            ingress_api: ingress_api.into(),
            requested_model: requested_model.into(),
            upstream_url: String::new(),
            upstream_model: String::new(),
            guest_request,
            context_request: None,
            context: None,
            attempts: Vec::new(),
            upstream_message: None,
            guest_response: None,
            status: ExchangeStatus::InFlight,
            error: None,
            retries: 0,
            received_at: Utc::now(),
            first_byte_at: None,
            last_byte_at: None,
            delivered_at: None,
            usage: Usage::default(),
            billed: Usage::default(),
            function_calls: Vec::new(),
            notes: Vec::new(),
        }
    }
}

/// One request sent upstream and what came back for it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UpstreamAttempt {
    /// The request body the provider received (e.g. an OpenAI chat completions request).
    pub request: Value,
    /// HTTP status, if a response head arrived.
    pub status: Option<u16>,
    /// Raw SSE `data:` payloads in arrival order, or the whole raw body for non-streaming responses.
    pub raw_events: Vec<String>,
    /// Why this attempt failed, if it did.
    pub error: Option<TypedError>,
    /// When the request was sent.
    pub started_at: DateTime<Utc>,
    /// First response byte.
    pub first_byte_at: Option<DateTime<Utc>>,
    /// Last response byte.
    pub last_byte_at: Option<DateTime<Utc>>,
    /// What this attempt cost: the usage its response reported, else (for an attempt the
    /// upstream answered) the gateway's estimate, labelled; `None` when nothing came back to
    /// bill (a refused connection, an error status).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
}

/// What a listing of exchanges shows of one [`ExchangeRecord`]: its identity, route, outcome,
/// timings and counts, without the requests and responses (a store can read it without loading
/// them; see [`crate::RecordStore::exchange_summaries`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExchangeSummary {
    /// Exchange id (UUID v7).
    pub id: Uuid,
    /// The run it belongs to, if any (exchanges of a standalone `switchyard gateway` have none).
    pub run_id: Option<Uuid>,
    /// Ingress API, one of the [`ingress`] constants.
    pub ingress_api: String,
    /// Model name the guest asked for.
    pub requested_model: String,
    /// Upstream model the exchange was routed to.
    pub upstream_model: String,
    /// Exchange status.
    pub status: ExchangeStatus,
    /// Kind of the typed error, when there is one.
    pub error_kind: Option<String>,
    /// Upstream retries.
    pub retries: u32,
    /// When the gateway received the guest request.
    pub received_at: DateTime<Utc>,
    /// When the response was fully delivered to the guest.
    pub delivered_at: Option<DateTime<Utc>>,
    /// Token usage of the delivered answer, as reported upstream.
    pub usage: Usage,
    /// Token usage of every attempt together (see [`ExchangeRecord::billed`]).
    pub billed: Usage,
    /// How many function calls were delivered to the guest.
    pub function_calls: u64,
}

impl ExchangeSummary {
    /// The summary of `record`.
    pub fn of(record: &ExchangeRecord) -> Self {
        ExchangeSummary {
            id: record.id,
            run_id: record.run_id,
            ingress_api: record.ingress_api.clone(),
            requested_model: record.requested_model.clone(),
            upstream_model: record.upstream_model.clone(),
            status: record.status,
            error_kind: record.error.as_ref().map(|error| error.kind.clone()),
            retries: record.retries,
            received_at: record.received_at,
            delivered_at: record.delivered_at,
            usage: record.usage,
            billed: record.billed,
            function_calls: record.function_calls.len() as u64,
        }
    }
}

/// Status of an [`ExchangeRecord`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ExchangeStatus {
    /// Begun, not finished yet.
    InFlight,
    /// Completed and delivered.
    Ok,
    /// Ended with a typed error.
    Error,
    /// Its writer died while it was in flight; marked when the store is next opened.
    Incomplete,
}

impl ExchangeStatus {
    /// The stable lowercase name stored in the database.
    pub fn as_str(self) -> &'static str {
        match self {
            ExchangeStatus::InFlight => "in_flight",
            ExchangeStatus::Ok => "ok",
            ExchangeStatus::Error => "error",
            ExchangeStatus::Incomplete => "incomplete",
        }
    }

    /// The status whose [`ExchangeStatus::as_str`] name is `name`.
    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "in_flight" => Some(ExchangeStatus::InFlight),
            "ok" => Some(ExchangeStatus::Ok),
            "error" => Some(ExchangeStatus::Error),
            "incomplete" => Some(ExchangeStatus::Incomplete),
            _ => None,
        }
    }
}

/// A typed error: a stable machine-readable `kind` and a human message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TypedError {
    /// Stable kind, e.g. `"upstream_status"`, `"upstream_timeout"`, `"translate"`, `"interrupted"`.
    pub kind: String,
    /// Human-readable detail.
    pub message: String,
}

/// Token usage of one exchange.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Usage {
    /// Prompt tokens (including cached ones).
    pub input: u64,
    /// Prompt tokens served from cache.
    pub cached: u64,
    /// Completion tokens.
    pub output: u64,
    /// Reasoning tokens.
    pub reasoning: u64,
    /// The upstream reported no usage: the counts are the gateway's estimate (request and
    /// answer bytes / 4), not what a provider would bill.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub estimated: bool,
}

impl Usage {
    /// `self` with `other` added; estimated when either is.
    pub fn plus(self, other: Usage) -> Usage {
        Usage {
            input: self.input.saturating_add(other.input),
            cached: self.cached.saturating_add(other.cached),
            output: self.output.saturating_add(other.output),
            reasoning: self.reasoning.saturating_add(other.reasoning),
            estimated: self.estimated || other.estimated,
        }
    }
}

/// A function call delivered to the guest.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeliveredCall {
    /// The model's id of the call (the upstream's; the delivered id when it gave none).
    pub id: String,
    /// The id the call was delivered with, when it differs from `id` (the gateway's own: the
    /// id the guest answers with).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delivered_id: Option<String>,
    /// Function name.
    pub name: String,
    /// Parsed arguments object.
    pub arguments: Value,
}

/// One write for the recorder. Every op is an idempotent upsert or append-by-key.
#[derive(Debug, Clone, PartialEq)]
pub enum RecordOp {
    /// Insert or replace a run.
    UpsertRun(Box<RunRecord>),
    /// Insert or replace the event `(run_id, seq)`.
    Event(EventRecord),
    /// Insert or replace the raw line `(run_id, stream, seq)`.
    RawLine(RawLineRecord),
    /// Insert or replace an exchange (begin and end of its lifecycle).
    UpsertExchange(Box<ExchangeRecord>),
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn summary_adds_turns_calls_and_usage() {
        let mut answered = ExchangeRecord::begin(None, ingress::GENERATE_CONTENT, "m", json!({}));
        answered.upstream_message = Some(json!({"role": "assistant", "content": "hi"}));
        answered.usage = Usage {
            input: 10,
            cached: 4,
            output: 3,
            reasoning: 2,
            estimated: false,
        };
        answered.function_calls = vec![
            DeliveredCall {
                id: "a".into(),
                delivered_id: None,
                name: "read_file".into(),
                arguments: json!({}),
            },
            DeliveredCall {
                id: "b".into(),
                delivered_id: None,
                name: "glob".into(),
                arguments: json!({}),
            },
        ];
        let mut counted = ExchangeRecord::begin(None, ingress::COUNT_TOKENS, "m", json!({}));
        counted.usage.input = 5;
        let summary = RunSummary::from_exchanges([&answered, &counted]);
        assert_eq!(
            summary,
            RunSummary {
                turns: 1,
                tool_calls: 2,
                input_tokens: 15,
                output_tokens: 3,
                cached_tokens: 4,
                reasoning_tokens: 2
            }
        );
    }

    #[test]
    fn statuses_serialize_as_their_stored_names() {
        for status in [
            ExchangeStatus::InFlight,
            ExchangeStatus::Ok,
            ExchangeStatus::Error,
            ExchangeStatus::Incomplete,
        ] {
            assert_eq!(
                serde_json::to_value(status).unwrap(),
                json!(status.as_str())
            );
            assert_eq!(ExchangeStatus::from_name(status.as_str()), Some(status));
        }
        assert_eq!(ExchangeStatus::from_name("done"), None);
        for state in [
            RunState::Running,
            RunState::Ended,
            RunState::Incomplete,
            RunState::Abandoned,
        ] {
            assert_eq!(serde_json::to_value(state).unwrap(), json!(state.as_str()));
        }
    }
}
