//! A run as one ordered timeline (canonical events and model exchanges merged by time), with the
//! plain-text renderings used by `switchyard records list`, `show`, `exchanges` and `exchange`.

use std::collections::HashMap;
use std::fmt::Write as _;

use chrono::{DateTime, Utc};
use serde_json::Value;

use crate::error::StoreError;
use crate::model::{EventRecord, ExchangeRecord, ExchangeSummary, RunRecord, RunSummary, Usage};
use crate::store::{ExchangeFilter, RecordStore};

/// Everything stored about one run.
#[derive(Debug, Clone)]
pub struct RunView {
    /// The run.
    pub run: RunRecord,
    /// Its canonical events, by `seq`.
    pub events: Vec<EventRecord>,
    /// Its exchanges, by id.
    pub exchanges: Vec<ExchangeRecord>,
    /// How many raw guest lines it kept (the lines themselves are not loaded: a run keeps up to
    /// 200,000 of them).
    pub raw_line_count: u64,
}

/// One item of a run's timeline.
#[derive(Debug, Clone, Copy)]
pub enum TimelineEntry<'a> {
    /// A canonical event.
    Event(&'a EventRecord),
    /// A model exchange (placed at its receive time).
    Exchange(&'a ExchangeRecord),
}

impl TimelineEntry<'_> {
    /// When the entry happened.
    pub fn at(&self) -> DateTime<Utc> {
        match self {
            TimelineEntry::Event(event) => event.at,
            TimelineEntry::Exchange(exchange) => exchange.received_at,
        }
    }
}

impl RunView {
    /// Loads the run `id_or_prefix` (full id or unique prefix) and everything attached to it.
    pub fn load(store: &dyn RecordStore, id_or_prefix: &str) -> Result<Self, StoreError> {
        let run = store.resolve_run(id_or_prefix)?;
        Ok(RunView {
            events: store.events(run.id)?,
            exchanges: store.exchanges(ExchangeFilter::Run(run.id))?,
            raw_line_count: store.raw_line_count(run.id)?,
            run,
        })
    }

    /// Events and exchanges merged by time (events keep their `seq` order among equal times).
    /// Streaming `assistant_delta` events are left out: the final `assistant_message` carries
    /// their text.
    pub fn entries(&self) -> Vec<TimelineEntry<'_>> {
        let mut entries: Vec<TimelineEntry<'_>> = self
            .events
            .iter()
            .filter(|event| event.kind != "assistant_delta")
            .map(TimelineEntry::Event)
            .chain(self.exchanges.iter().map(TimelineEntry::Exchange))
            .collect();
        entries.sort_by_key(TimelineEntry::at);
        entries
    }

    /// What the guest sent the model as the result of each tool call, by the call's canonical
    /// `call_id`: the `response` of the `functionResponse` part that answers it in the guest's
    /// GenerateContent requests (the first request that carries it). Matched through the
    /// `tool_call` event's delivered id (its `call_id` without the `<tool_name>__` prefix), or
    /// else its `model_call_id`, and its `tool_name` (the part's `id` and `name`).
    ///
    /// A guest's own `tool_result` event may leave the result out (Gemini CLI's stream-json
    /// sends `output: ""` for `read_file` and no output for `list_directory`), so this is where
    /// the result the model saw is. Calls without a model call id, and exchanges of other
    /// ingress APIs, give nothing.
    pub fn tool_results_sent(&self) -> HashMap<&str, &Value> {
        let mut answers: HashMap<(&str, &str), &Value> = HashMap::new();
        for exchange in &self.exchanges {
            if !exchange.ingress_api.starts_with("google.") {
                continue;
            }
            for response in function_responses(&exchange.guest_request) {
                let id = response.get("id").and_then(Value::as_str);
                let name = response.get("name").and_then(Value::as_str);
                if let (Some(id), Some(name), Some(result)) = (id, name, response.get("response")) {
                    answers.entry((id, name)).or_insert(result);
                }
            }
        }
        let mut sent = HashMap::new();
        for event in self.events.iter().filter(|e| e.kind == "tool_call") {
            let text = |key: &str| event.event.get(key).and_then(Value::as_str);
            let (Some(call_id), Some(name)) = (text("call_id"), text("tool_name")) else {
                continue;
            };
            // The guest answers by the id it was delivered; records made before the gateway
            // had ids of its own name the call by the model's id.
            let delivered = call_id
                .strip_prefix(&format!("{name}__"))
                .unwrap_or(call_id);
            let found = answers
                .get(&(delivered, name))
                .or_else(|| text("model_call_id").and_then(|model| answers.get(&(model, name))));
            if let Some(result) = found {
                sent.insert(call_id, *result);
            }
        }
        sent
    }
}

/// The `functionResponse` objects of a GenerateContent request's `contents`, in order.
fn function_responses(request: &Value) -> impl Iterator<Item = &Value> {
    request
        .get("contents")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|content| content.get("parts").and_then(Value::as_array))
        .flatten()
        .filter_map(|part| part.get("functionResponse"))
}

/// The result the model was sent for a `tool_result` event, from [`RunView::tool_results_sent`].
pub fn sent_result<'a>(sent: &HashMap<&str, &'a Value>, event: &EventRecord) -> Option<&'a Value> {
    if event.kind != "tool_result" {
        return None;
    }
    let call_id = event.event.get("call_id").and_then(Value::as_str)?;
    sent.get(call_id).copied()
}

/// Seconds between two instants, e.g. `"1.250s"`.
pub fn seconds_between(from: DateTime<Utc>, to: DateTime<Utc>) -> String {
    seconds((to - from).num_milliseconds())
}

/// `milliseconds` as seconds with three decimals (`1.250s`).
pub fn seconds(milliseconds: i64) -> String {
    format!("{:.3}s", milliseconds as f64 / 1000.0)
}

/// The outcome's `status` string if it has one, else the run state.
pub fn outcome_label(run: &RunRecord) -> String {
    run.outcome
        .as_ref()
        .and_then(|outcome| outcome.get("status"))
        .and_then(Value::as_str)
        .map(str::to_owned)
        .unwrap_or_else(|| run.state.as_str().to_owned())
}

/// When the run ended and how long it took (`- (running)` and the like while it has not).
pub fn ended_label(run: &RunRecord) -> String {
    match run.ended_at {
        Some(end) => format!(
            "{} ({})",
            end.to_rfc3339(),
            seconds_between(run.started_at, end)
        ),
        None => format!("- ({})", run.state.as_str()),
    }
}

/// An exchange's token counts: `tokens in I (cached C) out O reasoning R`.
pub fn usage_text(usage: &Usage) -> String {
    format!(
        "tokens in {} (cached {}) out {} reasoning {}{}",
        usage.input,
        usage.cached,
        usage.output,
        usage.reasoning,
        if usage.estimated {
            " (estimated: the upstream reported none)"
        } else {
            ""
        }
    )
}

/// What every attempt of an exchange cost, when that is more than its delivered answer's
/// usage (retried, malformed or failed attempts): `billed in I out O`, estimates labelled.
pub fn billed_text(exchange: &ExchangeRecord) -> Option<String> {
    let (billed, usage) = (exchange.billed, exchange.usage);
    let same = (billed.input, billed.cached, billed.output, billed.reasoning)
        == (usage.input, usage.cached, usage.output, usage.reasoning);
    (!same && billed != Usage::default()).then(|| {
        format!(
            "billed (every attempt) in {} out {}{}",
            billed.input,
            billed.output,
            if billed.estimated {
                " (partly estimated)"
            } else {
                ""
            }
        )
    })
}

/// The run summary in one line: turns, tool calls and token counts.
pub fn summary_line(summary: &RunSummary) -> String {
    format!(
        "{} turns, {} tool calls, tokens in {} (cached {}) out {} reasoning {}",
        summary.turns,
        summary.tool_calls,
        summary.input_tokens,
        summary.cached_tokens,
        summary.output_tokens,
        summary.reasoning_tokens
    )
}

/// Time from receiving the exchange to its first upstream byte, or `"-"` if none came.
pub fn first_byte_latency(exchange: &ExchangeRecord) -> String {
    exchange
        .first_byte_at
        .map(|at| seconds_between(exchange.received_at, at))
        .unwrap_or_else(|| "-".into())
}

/// Time from receiving the exchange to delivering it (or to its last upstream byte), or `"-"`.
pub fn total_latency(exchange: &ExchangeRecord) -> String {
    exchange
        .delivered_at
        .or(exchange.last_byte_at)
        .map(|at| seconds_between(exchange.received_at, at))
        .unwrap_or_else(|| "-".into())
}

/// `text` cut to `max` characters with an ellipsis, newlines shown as `⏎`.
pub fn one_line(text: &str, max: usize) -> String {
    let flat: String = text
        .chars()
        .map(|c| if c == '\n' { '⏎' } else { c })
        .collect();
    if flat.chars().count() <= max {
        flat
    } else {
        let cut: String = flat.chars().take(max).collect();
        format!("{cut}…")
    }
}

/// One column of a fixed-width text table: its width, and the side its cells keep to.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Column {
    Left(usize),
    Right(usize),
}

/// Writes one line of a table: each cell padded to its column, two spaces between columns (a
/// cell wider than its column pushes the rest of the line right).
pub(crate) fn write_table_row<const N: usize>(
    out: &mut String,
    columns: &[Column; N],
    cells: [&str; N],
) {
    for (index, (column, cell)) in columns.iter().zip(cells).enumerate() {
        if index > 0 {
            out.push_str("  ");
        }
        let _ = match *column {
            Column::Left(width) => write!(out, "{cell:<width$}"),
            Column::Right(width) => write!(out, "{cell:>width$}"),
        };
    }
    out.push('\n');
}

/// Token totals of the exchanges of each run, reported and estimated apart (see
/// [`Usage::estimated`]), from every exchange whatever the run's outcome.
pub fn run_token_totals(
    store: &dyn RecordStore,
) -> Result<HashMap<uuid::Uuid, (Usage, Usage)>, StoreError> {
    let mut totals: HashMap<uuid::Uuid, (Usage, Usage)> = HashMap::new();
    store.for_each_exchange_summary(ExchangeFilter::All, &mut |summary| {
        if let Some(run) = summary.run_id {
            let (reported, estimated) = totals.entry(run).or_default();
            let sum = if summary.usage.estimated {
                estimated
            } else {
                reported
            };
            sum.input = sum.input.saturating_add(summary.usage.input);
            sum.output = sum.output.saturating_add(summary.usage.output);
        }
    })?;
    Ok(totals)
}

/// The table printed by `switchyard records list`. Tokens are the sums of each run's model
/// exchanges (`totals`, see [`run_token_totals`]); estimated ones follow as `+~IN/OUT`.
pub fn render_run_list(runs: &[RunRecord], totals: &HashMap<uuid::Uuid, (Usage, Usage)>) -> String {
    use Column::{Left, Right};
    const COLUMNS: [Column; 8] = [
        Left(36),
        Left(12),
        Left(24),
        Left(10),
        Right(5),
        Right(5),
        Right(24),
        Right(9),
    ];
    let mut out = String::new();
    write_table_row(
        &mut out,
        &COLUMNS,
        [
            "RUN",
            "AGENT",
            "MODEL",
            "OUTCOME",
            "TURNS",
            "TOOLS",
            "TOKENS IN/OUT",
            "DURATION",
        ],
    );
    for run in runs {
        let duration = run
            .ended_at
            .map(|end| seconds_between(run.started_at, end))
            .unwrap_or_else(|| "-".into());
        let (reported, estimated) = totals.get(&run.id).copied().unwrap_or_default();
        let mut tokens = format!("{}/{}", reported.input, reported.output);
        if estimated.input + estimated.output > 0 {
            let _ = write!(tokens, " +~{}/{}", estimated.input, estimated.output);
        }
        write_table_row(
            &mut out,
            &COLUMNS,
            [
                &run.id.to_string(),
                &one_line(&run.agent, 12),
                &one_line(run.upstream_model.as_deref().unwrap_or("-"), 24),
                &one_line(&outcome_label(run), 10),
                &run.summary.turns.to_string(),
                &run.summary.tool_calls.to_string(),
                &tokens,
                &duration,
            ],
        );
    }
    out
}

/// One-line description of a canonical event.
pub fn describe_event(event: &EventRecord) -> String {
    let body = &event.event;
    let text = |key: &str| body.get(key).and_then(Value::as_str).unwrap_or("");
    match event.kind.as_str() {
        "user_message" => format!("user: {}", one_line(text("text"), 200)),
        "assistant_message" => format!("assistant: {}", one_line(text("text"), 200)),
        "tool_call" => {
            let call_id = text("call_id");
            let shown = match call_id.strip_prefix(&format!("{}__", text("tool_name"))) {
                Some(delivered) => by_model_id(call_id, delivered, text("model_call_id")),
                None => call_id.to_owned(),
            };
            format!(
                "tool call {} [{shown}] {}",
                text("tool_name"),
                arguments_line(body, 200)
            )
        }
        "tool_result" => {
            let detail = body
                .get("output")
                .and_then(Value::as_str)
                .map(str::to_owned)
                .or_else(|| body.get("error").map(Value::to_string))
                .unwrap_or_default();
            let mut line = format!("tool result [{}] {}", text("call_id"), text("status"));
            if !detail.is_empty() {
                let _ = write!(line, ": {}", one_line(&detail, 200));
            }
            line
        }
        "warning" | "error" => format!("{}: {}", event.kind, one_line(text("message"), 200)),
        "workspace_config_ignored" => format!(
            "workspace config ignored: {} ({})",
            text("path"),
            one_line(
                &body
                    .get("keys")
                    .and_then(Value::as_array)
                    .map(|keys| {
                        keys.iter()
                            .filter_map(Value::as_str)
                            .collect::<Vec<_>>()
                            .join(", ")
                    })
                    .unwrap_or_default(),
                200
            )
        ),
        "host_call" | "host_result" => host_line(event),
        "permission" => permission_line(event),
        "thought" => format!("thought: {}", one_line(text("text"), 200)),
        "prompt_finished" => format!(
            "prompt {} finished: {}{}",
            body.get("prompt").and_then(Value::as_u64).unwrap_or(0),
            body.get("stop_reason")
                .and_then(Value::as_str)
                .unwrap_or("error"),
            body.get("error")
                .map(|error| format!(" {}", one_line(&error.to_string(), 160)))
                .unwrap_or_default()
        ),
        "session_started" => format!("session {} model {}", text("session_id"), text("model")),
        "usage" => {
            let count = |key: &str| body.get(key).and_then(Value::as_u64).unwrap_or(0);
            format!(
                "usage: tokens in {} (cached {}) out {}, {} tool calls",
                count("input_tokens"),
                count("cached_tokens"),
                count("output_tokens"),
                count("tool_calls")
            )
        }
        "run_finished" => format!(
            "run finished: {}{}{}",
            text("status"),
            body.get("error")
                .map(|error| format!(" {}", one_line(&error.to_string(), 160)))
                .unwrap_or_default(),
            body.get("result")
                .map(|result| format!(" result {}", one_line(&result.to_string(), 160)))
                .unwrap_or_default()
        ),
        _ => format!(
            "{}: {}",
            event.kind,
            one_line(&event_payload(body).to_string(), 200)
        ),
    }
}

/// An event's `arguments`, on one line of at most `max` characters.
fn arguments_line(body: &Value, max: usize) -> String {
    one_line(
        &body
            .get("arguments")
            .map(Value::to_string)
            .unwrap_or_default(),
        max,
    )
}

/// One line for a permission decision: what was asked, what answered it, and why.
pub fn permission_line(event: &EventRecord) -> String {
    let body = &event.event;
    let text = |key: &str| body.get(key).and_then(Value::as_str).unwrap_or("");
    let why = match body.get("reason").and_then(Value::as_str) {
        Some(reason) => format!(" ({})", one_line(reason, 160)),
        None => format!(" by {} → {}", text("rule"), text("option_id")),
    };
    format!(
        "permission {} {} [{}]{why} {}",
        text("outcome"),
        text("tool"),
        by_model_id(text("tool_call_id"), text("call_id"), text("model_call_id")),
        arguments_line(body, 200)
    )
}

/// A guest's `<tool>__<delivered id>` name of a call shown with the model's own id in place of
/// the gateway's: the id a user finds in the provider's logs.
fn by_model_id(shown: &str, delivered: &str, model: &str) -> String {
    match shown.strip_suffix(delivered) {
        Some(prefix) if prefix.ends_with("__") && !delivered.is_empty() && !model.is_empty() => {
            format!("{prefix}{model}")
        }
        _ => shown.to_owned(),
    }
}

/// One line for a host-tool decision (`host_call`) or result (`host_result`).
pub fn host_line(event: &EventRecord) -> String {
    let body = &event.event;
    let text = |key: &str| body.get(key).and_then(Value::as_str).unwrap_or("");
    if event.kind == "host_result" {
        let images = body
            .get("images")
            .and_then(Value::as_array)
            .map_or(0, Vec::len);
        return format!(
            "host result {} [{}] {}{}: {}",
            text("tool"),
            text("model_call_id"),
            text("status"),
            if images > 0 {
                format!(" +{images} image(s)")
            } else {
                String::new()
            },
            one_line(text("text"), 200)
        );
    }
    let place = match (body.get("batch"), body.get("position")) {
        (Some(batch), Some(position)) => format!(" batch {batch} #{position}"),
        _ => String::new(),
    };
    let why = match body.get("reason").and_then(Value::as_str) {
        Some(reason) => format!(" ({reason}: {})", one_line(text("message"), 160)),
        None => String::new(),
    };
    format!(
        "host call {} {} [{}]{place}{why} {}",
        text("tool"),
        text("decision"),
        text("model_call_id"),
        arguments_line(body, 160)
    )
}

/// The event without its envelope fields (`seq`, `at`, `guest_timestamp`, `type`), which the
/// timeline already shows.
pub fn event_payload(body: &Value) -> Value {
    match body {
        Value::Object(members) => Value::Object(
            members
                .iter()
                .filter(|(name, _)| {
                    !matches!(name.as_str(), "seq" | "at" | "guest_timestamp" | "type")
                })
                .map(|(name, value)| (name.clone(), value.clone()))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// One-line description of an exchange: route, status, latency, tokens, calls.
/// The context policy's decision in one line (`None`: no policy applied), e.g. `context
/// sliding-window 52301 -> 28900 tokens (estimate; evicted 6 blocks, 2 images omitted)`.
pub fn context_text(exchange: &ExchangeRecord) -> Option<String> {
    let decision = exchange.context.as_ref()?;
    let count = |key: &str| {
        decision
            .get(key)
            .and_then(Value::as_array)
            .map_or(0, Vec::len)
    };
    let (evicted, omitted) = (count("evicted"), count("images_omitted"));
    let changes = if evicted + omitted == 0 {
        "unchanged".to_owned()
    } else {
        let calls: Vec<String> = decision
            .get("evicted")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .map(|e| {
                let calls = e.get("calls").and_then(Value::as_array);
                match calls {
                    Some(calls) if !calls.is_empty() => calls
                        .iter()
                        .filter_map(Value::as_str)
                        .collect::<Vec<_>>()
                        .join("+"),
                    _ => e
                        .get("kind")
                        .and_then(Value::as_str)
                        .unwrap_or("?")
                        .to_owned(),
                }
            })
            .collect();
        format!(
            "evicted {evicted} block(s) [{}], {omitted} image(s) omitted",
            one_line(&calls.join(", "), 120)
        )
    };
    Some(format!(
        "context {} {} -> {} tokens (max {}, target {}; {}; {changes})",
        decision
            .get("policy")
            .and_then(Value::as_str)
            .unwrap_or("?"),
        decision.get("tokens_before").unwrap_or(&Value::Null),
        decision.get("tokens_after").unwrap_or(&Value::Null),
        decision.get("max_input_tokens").unwrap_or(&Value::Null),
        decision.get("target_input_tokens").unwrap_or(&Value::Null),
        decision
            .get("counted_by")
            .and_then(Value::as_str)
            .unwrap_or("?"),
    ))
}

pub fn describe_exchange(exchange: &ExchangeRecord) -> String {
    let first_byte = first_byte_latency(exchange);
    let total = total_latency(exchange);
    let mut line = format!(
        "exchange {} {} {} -> {} {}  first byte {first_byte} total {total}  {}",
        exchange.id,
        exchange.ingress_api,
        exchange.requested_model,
        exchange.upstream_model,
        exchange.status.as_str(),
        usage_text(&exchange.usage)
    );
    if let Some(billed) = billed_text(exchange) {
        let _ = write!(line, "  {billed}");
    }
    if exchange.retries > 0 {
        let _ = write!(line, "  retries {}", exchange.retries);
    }
    if !exchange.function_calls.is_empty() {
        let names: Vec<&str> = exchange
            .function_calls
            .iter()
            .map(|call| call.name.as_str())
            .collect();
        let _ = write!(line, "  calls {}", names.join(", "));
    }
    if let Some(context) = context_text(exchange) {
        let _ = write!(line, "  {context}");
    }
    if let Some(error) = &exchange.error {
        let _ = write!(
            line,
            "  error {}: {}",
            error.kind,
            one_line(&error.message, 120)
        );
    }
    line
}

/// The table printed by `switchyard records exchanges`: one exchange per line, with the start of
/// its run id (`-` for none), its route, outcome, latency (receipt to delivery), tokens, calls
/// and retries.
pub fn render_exchange_list(exchanges: &[ExchangeSummary]) -> String {
    use Column::{Left, Right};
    const COLUMNS: [Column; 10] = [
        Left(36),
        Left(23),
        Left(8),
        Left(28),
        Left(36),
        Left(24),
        Right(9),
        Right(15),
        Right(5),
        Right(7),
    ];
    let mut out = String::new();
    write_table_row(
        &mut out,
        &COLUMNS,
        [
            "EXCHANGE",
            "RECEIVED (UTC)",
            "RUN",
            "API",
            "MODEL (ASKED -> ROUTED)",
            "STATUS",
            "LATENCY",
            "TOKENS IN/OUT (~EST.)",
            "CALLS",
            "RETRIES",
        ],
    );
    for exchange in exchanges {
        let run = exchange
            .run_id
            .map(|id| id.simple().to_string()[..8].to_owned())
            .unwrap_or_else(|| "-".into());
        let status = match &exchange.error_kind {
            Some(kind) => format!("{}: {kind}", exchange.status.as_str()),
            None => exchange.status.as_str().to_owned(),
        };
        let latency = exchange
            .delivered_at
            .map(|at| seconds_between(exchange.received_at, at))
            .unwrap_or_else(|| "-".into());
        write_table_row(
            &mut out,
            &COLUMNS,
            [
                &exchange.id.to_string(),
                &exchange
                    .received_at
                    .format("%Y-%m-%d %H:%M:%S%.3f")
                    .to_string(),
                &run,
                &one_line(&exchange.ingress_api, 28),
                &one_line(
                    &format!(
                        "{} -> {}",
                        exchange.requested_model, exchange.upstream_model
                    ),
                    36,
                ),
                &one_line(&status, 24),
                &latency,
                &format!(
                    "{}{}/{}",
                    if exchange.usage.estimated { "~" } else { "" },
                    exchange.usage.input,
                    exchange.usage.output
                ),
                &exchange.function_calls.to_string(),
                &exchange.retries.to_string(),
            ],
        );
    }
    out
}

/// One exchange as printed by `switchyard records exchange ID`: a summary line, the calls it
/// delivered with their arguments, its notes, then the whole stored record as indented JSON
/// (requests and responses included, as redacted when stored).
pub fn render_exchange(exchange: &ExchangeRecord) -> String {
    let mut out = String::new();
    let run = exchange
        .run_id
        .map(|id| id.to_string())
        .unwrap_or_else(|| "- (recorded outside a run)".into());
    let _ = writeln!(out, "{}", describe_exchange(exchange));
    let _ = writeln!(out, "run       {run}");
    let _ = writeln!(out, "received  {}", exchange.received_at.to_rfc3339());
    let _ = writeln!(out, "upstream  {}", exchange.upstream_url);
    let _ = writeln!(out, "attempts  {}", exchange.attempts.len());
    for call in &exchange.function_calls {
        let _ = writeln!(
            out,
            "call      {} [{}] {}",
            call.name,
            call.id,
            one_line(&call.arguments.to_string(), 200)
        );
    }
    for note in &exchange.notes {
        let _ = writeln!(out, "note      {}", one_line(note, 200));
    }
    let _ = writeln!(out);
    let json = serde_json::to_string_pretty(exchange)
        .unwrap_or_else(|error| format!("(cannot serialize the record: {error})"));
    let _ = writeln!(out, "{json}");
    out
}

/// The readable timeline printed by `switchyard records show RUN`.
pub fn render_timeline(view: &RunView) -> String {
    let run = &view.run;
    let mut out = String::new();
    let _ = writeln!(out, "run       {}", run.id);
    let _ = writeln!(out, "agent     {} {}", run.agent, run.agent_version);
    let _ = writeln!(
        out,
        "model     {}",
        run.upstream_model.as_deref().unwrap_or("-")
    );
    let _ = writeln!(out, "argv      {}", run.argv.join(" "));
    let _ = writeln!(out, "workdir   {}", run.workdir);
    let _ = writeln!(out, "started   {}", run.started_at.to_rfc3339());
    let _ = writeln!(out, "ended     {}", ended_label(run));
    let _ = writeln!(out, "outcome   {}", outcome_label(run));
    let _ = writeln!(out, "summary   {}", summary_line(&run.summary));
    let _ = writeln!(
        out,
        "raw lines {} kept ({} cut at the line cap), {} dropped",
        view.raw_line_count, run.raw_lines_truncated, run.raw_lines_dropped
    );
    let _ = writeln!(out);
    let sent = view.tool_results_sent();
    for entry in view.entries() {
        let offset = seconds_between(run.started_at, entry.at());
        let line = match entry {
            TimelineEntry::Event(event) => {
                let mut line = format!("#{:<4} {}", event.seq, describe_event(event));
                if let Some(result) = sent_result(&sent, event) {
                    let _ = write!(
                        line,
                        " | sent to the model: {}",
                        one_line(&result.to_string(), 200)
                    );
                }
                line
            }
            TimelineEntry::Exchange(exchange) => describe_exchange(exchange),
        };
        let _ = writeln!(out, "+{offset:>9}  {line}");
    }
    out
}

#[cfg(test)]
#[path = "timeline_tests.rs"]
mod tests;
