//! Usage totals over recorded exchanges, for billing and capacity questions ("how many tokens
//! did each upstream model take this week, how often did it fail, how slow was it"): a
//! [`UsageTally`] groups [`ExchangeSummary`]s (which a store reads without loading requests or
//! responses, and can stream: `RecordStore::for_each_exchange_summary`) by upstream model,
//! requested model, run or day, one at a time, keeping only the totals and one latency per
//! exchange; [`render_usage`] prints the table `switchyard records usage` shows. No I/O.

use std::collections::BTreeMap;

use chrono::{DateTime, NaiveDate, Utc};
use serde::Serialize;

use crate::model::{ExchangeStatus, ExchangeSummary, Usage};
use crate::timeline::{Column, write_table_row};

/// The receive times an exchange must fall in to be counted: from `since` (inclusive) to
/// `until` (exclusive), each open when `None`. A billing month is
/// `since = YYYY-MM-01, until = the first of the next month`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct UsageWindow {
    /// Earliest receive time counted.
    pub since: Option<DateTime<Utc>>,
    /// Receive times from this one on are not counted.
    pub until: Option<DateTime<Utc>>,
}

impl UsageWindow {
    /// True when `exchange` was received within the window.
    pub fn contains(&self, exchange: &ExchangeSummary) -> bool {
        let at = exchange.received_at;
        self.since.is_none_or(|since| at >= since) && self.until.is_none_or(|until| at < until)
    }
}

/// A time given as RFC 3339 (`2026-11-30T12:00:00Z`, any offset) or as a UTC day
/// (`2026-11-30`, meaning its midnight).
pub fn parse_instant(text: &str) -> Result<DateTime<Utc>, InstantError> {
    if let Ok(at) = DateTime::parse_from_rfc3339(text) {
        return Ok(at.with_timezone(&Utc));
    }
    NaiveDate::parse_from_str(text, "%Y-%m-%d")
        .ok()
        .and_then(|day| day.and_hms_opt(0, 0, 0))
        .map(|midnight| midnight.and_utc())
        .ok_or_else(|| InstantError(text.to_owned()))
}

/// A time [`parse_instant`] cannot read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is neither a day (YYYY-MM-DD, UTC) nor an RFC 3339 time (2026-11-30T12:00:00Z)")]
pub struct InstantError(String);

/// What the exchanges are grouped by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum UsageGrouping {
    /// The upstream model the exchange was routed to (what the provider bills).
    UpstreamModel,
    /// The model name the guest asked for.
    RequestedModel,
    /// The run the exchange belongs to (`-` for exchanges of no run).
    Run,
    /// The UTC day the gateway received the request (`YYYY-MM-DD`).
    Day,
}

impl UsageGrouping {
    /// The column title of the group.
    fn title(self) -> &'static str {
        match self {
            UsageGrouping::UpstreamModel => "UPSTREAM MODEL",
            UsageGrouping::RequestedModel => "REQUESTED MODEL",
            UsageGrouping::Run => "RUN",
            UsageGrouping::Day => "DAY (UTC)",
        }
    }

    /// The group `exchange` falls in.
    fn key(self, exchange: &ExchangeSummary) -> String {
        match self {
            UsageGrouping::UpstreamModel => exchange.upstream_model.clone(),
            UsageGrouping::RequestedModel => exchange.requested_model.clone(),
            UsageGrouping::Run => exchange
                .run_id
                .map_or_else(|| "-".to_owned(), |id| id.to_string()),
            UsageGrouping::Day => exchange.received_at.format("%Y-%m-%d").to_string(),
        }
    }
}

/// Totals of one group of exchanges.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct UsageRow {
    /// The group (see [`UsageGrouping`]); `"total"` for [`UsageReport::total`].
    pub group: String,
    /// Exchanges in the group.
    pub exchanges: u64,
    /// Exchanges completed and delivered.
    pub ok: u64,
    /// Exchanges that ended with a typed error.
    pub errors: u64,
    /// Exchanges whose recording process stopped while they were in flight.
    pub incomplete: u64,
    /// Exchanges still in flight when the store was read.
    pub in_flight: u64,
    /// Upstream retries, summed.
    pub retries: u64,
    /// Token usage the upstream reported, summed.
    pub usage: Usage,
    /// Token usage the gateway estimated (the upstream reported none), summed apart.
    pub estimated: Usage,
    /// Token usage of every attempt (retried, malformed and failed ones too) as reported: what
    /// the provider bills.
    pub billed: Usage,
    /// The same where an attempt's usage was the gateway's estimate, summed apart.
    pub billed_estimated: Usage,
    /// Function calls delivered to the guest, summed.
    pub function_calls: u64,
    /// Median time from receiving the guest request to delivering the response, in
    /// milliseconds, over the exchanges that delivered (`None` when none did).
    pub latency_p50_ms: Option<u64>,
    /// 95th percentile of the same (nearest rank).
    pub latency_p95_ms: Option<u64>,
}

impl UsageRow {
    fn add(&mut self, exchange: &ExchangeSummary) {
        self.exchanges += 1;
        match exchange.status {
            ExchangeStatus::Ok => self.ok += 1,
            ExchangeStatus::Error => self.errors += 1,
            ExchangeStatus::Incomplete => self.incomplete += 1,
            ExchangeStatus::InFlight => self.in_flight += 1,
        }
        self.retries += u64::from(exchange.retries);
        let (delivered, billed) = (exchange.usage, exchange.billed);
        let sum = if delivered.estimated {
            &mut self.estimated
        } else {
            &mut self.usage
        };
        *sum = sum.plus(delivered);
        let sum = if billed.estimated {
            &mut self.billed_estimated
        } else {
            &mut self.billed
        };
        *sum = sum.plus(billed);
        self.function_calls += exchange.function_calls;
    }

    /// Sets the latency percentiles from the group's latencies (any order).
    fn set_latencies(&mut self, mut latencies_ms: Vec<u64>) {
        latencies_ms.sort_unstable();
        self.latency_p50_ms = nearest_rank(&latencies_ms, 50);
        self.latency_p95_ms = nearest_rank(&latencies_ms, 95);
    }
}

/// The `percent`th percentile of `sorted` by the nearest-rank method.
fn nearest_rank(sorted: &[u64], percent: usize) -> Option<u64> {
    let rank = (sorted.len() * percent).div_ceil(100).max(1);
    sorted.get(rank - 1).copied()
}

/// Usage totals by group, and over everything.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct UsageReport {
    /// What the rows are grouped by.
    pub grouped_by: UsageGrouping,
    /// The receive times counted.
    pub window: UsageWindow,
    /// One row per group, ordered by group (days in order).
    pub rows: Vec<UsageRow>,
    /// All exchanges together.
    pub total: UsageRow,
}

/// Usage totals being added up, one exchange at a time.
#[derive(Debug, Clone)]
pub struct UsageTally {
    by: UsageGrouping,
    window: UsageWindow,
    /// Each group's totals and the latencies (ms) of its delivered exchanges.
    groups: BTreeMap<String, (UsageRow, Vec<u64>)>,
    total: UsageRow,
}

impl UsageTally {
    /// An empty tally grouping by `by`, counting every exchange.
    pub fn new(by: UsageGrouping) -> Self {
        Self::within(by, UsageWindow::default())
    }

    /// An empty tally grouping by `by`, counting the exchanges received within `window`.
    pub fn within(by: UsageGrouping, window: UsageWindow) -> Self {
        UsageTally {
            by,
            window,
            groups: BTreeMap::new(),
            total: UsageRow {
                group: "total".to_owned(),
                ..UsageRow::default()
            },
        }
    }

    /// Counts one exchange (when it falls in the tally's window).
    pub fn add(&mut self, exchange: &ExchangeSummary) {
        if !self.window.contains(exchange) {
            return;
        }
        let (row, latencies) = self.groups.entry(self.by.key(exchange)).or_default();
        row.add(exchange);
        self.total.add(exchange);
        if let Some(delivered) = exchange.delivered_at {
            let ms = (delivered - exchange.received_at).num_milliseconds().max(0);
            latencies.push(ms as u64);
        }
    }

    /// The totals by group and over everything.
    pub fn finish(self) -> UsageReport {
        let UsageTally {
            by,
            window,
            groups,
            mut total,
        } = self;
        let mut all_latencies = Vec::new();
        let rows = groups
            .into_iter()
            .map(|(group, (mut row, latencies))| {
                all_latencies.extend_from_slice(&latencies);
                row.group = group;
                row.set_latencies(latencies);
                row
            })
            .collect();
        total.set_latencies(all_latencies);
        UsageReport {
            grouped_by: by,
            window,
            rows,
            total,
        }
    }
}

/// The report as a text table, one line per group and a total line.
pub fn render_usage(report: &UsageReport) -> String {
    use Column::{Left, Right};
    const COLUMNS: [Column; 14] = [
        Left(36),
        Right(9),
        Right(7),
        Right(7),
        Right(7),
        Right(12),
        Right(10),
        Right(10),
        Right(10),
        Right(16),
        Right(20),
        Right(20),
        Right(6),
        Right(17),
    ];
    let mut out = String::new();
    write_table_row(
        &mut out,
        &COLUMNS,
        [
            report.grouped_by.title(),
            "EXCHANGES",
            "OK",
            "FAILED",
            "RETRIES",
            "TOKENS IN",
            "CACHED",
            "OUT",
            "REASONING",
            "EST. IN/OUT",
            "BILLED IN/OUT",
            "EST. BILLED IN/OUT",
            "CALLS",
            "LATENCY P50/P95",
        ],
    );
    for row in report.rows.iter().chain([&report.total]) {
        let seconds = |ms: Option<u64>| {
            ms.map_or_else(|| "-".to_owned(), |ms| crate::timeline::seconds(ms as i64))
        };
        write_table_row(
            &mut out,
            &COLUMNS,
            [
                &row.group,
                &row.exchanges.to_string(),
                &row.ok.to_string(),
                // Errors and exchanges cut off by a crash; in-flight ones are neither.
                &(row.errors + row.incomplete).to_string(),
                &row.retries.to_string(),
                &row.usage.input.to_string(),
                &row.usage.cached.to_string(),
                &row.usage.output.to_string(),
                &row.usage.reasoning.to_string(),
                &format!("{}/{}", row.estimated.input, row.estimated.output),
                &format!("{}/{}", row.billed.input, row.billed.output),
                &format!(
                    "{}/{}",
                    row.billed_estimated.input, row.billed_estimated.output
                ),
                &row.function_calls.to_string(),
                &format!(
                    "{}/{}",
                    seconds(row.latency_p50_ms),
                    seconds(row.latency_p95_ms)
                ),
            ],
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::{TimeZone, Utc};
    use uuid::Uuid;

    /// Totals of `exchanges` grouped by `by`.
    fn summarize(exchanges: &[ExchangeSummary], by: UsageGrouping) -> UsageReport {
        let mut tally = UsageTally::new(by);
        exchanges.iter().for_each(|exchange| tally.add(exchange));
        tally.finish()
    }

    fn summary(
        upstream_model: &str,
        status: ExchangeStatus,
        day: u32,
        latency_ms: Option<i64>,
        input: u64,
    ) -> ExchangeSummary {
        let received_at = Utc.with_ymd_and_hms(2026, 11, day, 23, 59, 59).unwrap();
        ExchangeSummary {
            id: Uuid::now_v7(),
            run_id: None,
            ingress_api: "google.generateContent".into(),
            requested_model: "gemini-2.5-flash".into(),
            upstream_model: upstream_model.into(),
            status,
            error_kind: None,
            retries: 1,
            received_at,
            delivered_at: latency_ms.map(|ms| received_at + chrono::Duration::milliseconds(ms)),
            usage: Usage {
                input,
                cached: input / 2,
                output: 7,
                reasoning: 3,
                estimated: false,
            },
            billed: Usage {
                input: input * 2,
                cached: input,
                output: 9,
                reasoning: 3,
                estimated: false,
            },
            function_calls: 2,
        }
    }

    #[test]
    fn groups_sum_statuses_tokens_and_calls() {
        let exchanges = [
            summary("qwen", ExchangeStatus::Ok, 29, Some(100), 10),
            summary("llama", ExchangeStatus::Error, 29, Some(50), 20),
            summary("qwen", ExchangeStatus::Incomplete, 30, None, 40),
            summary("qwen", ExchangeStatus::InFlight, 30, None, 0),
        ];
        let report = summarize(&exchanges, UsageGrouping::UpstreamModel);
        let groups: Vec<&str> = report.rows.iter().map(|r| r.group.as_str()).collect();
        assert_eq!(groups, ["llama", "qwen"]);
        let qwen = &report.rows[1];
        assert_eq!(
            (
                qwen.exchanges,
                qwen.ok,
                qwen.errors,
                qwen.incomplete,
                qwen.in_flight
            ),
            (3, 1, 0, 1, 1)
        );
        assert_eq!(qwen.retries, 3);
        assert_eq!(
            qwen.usage,
            Usage {
                input: 50,
                cached: 25,
                output: 21,
                reasoning: 9,
                estimated: false,
            }
        );
        assert_eq!(qwen.function_calls, 6);
        assert_eq!(
            (qwen.billed.input, qwen.billed.output),
            (100, 27),
            "every attempt, apart from the delivered answers"
        );
        assert_eq!(qwen.billed_estimated, Usage::default());
        let total = &report.total;
        assert_eq!(
            (total.exchanges, total.usage.input, total.errors),
            (4, 70, 1)
        );
        assert_eq!(total.group, "total");
    }

    #[test]
    fn days_are_utc_and_in_order() {
        let exchanges = [
            summary("qwen", ExchangeStatus::Ok, 30, Some(1), 1),
            summary("qwen", ExchangeStatus::Ok, 29, Some(1), 1),
            summary("qwen", ExchangeStatus::Ok, 30, Some(1), 1),
        ];
        let report = summarize(&exchanges, UsageGrouping::Day);
        let days: Vec<(&str, u64)> = report
            .rows
            .iter()
            .map(|r| (r.group.as_str(), r.exchanges))
            .collect();
        assert_eq!(days, [("2026-11-29", 1), ("2026-11-30", 2)]);
    }

    #[test]
    fn latency_percentiles_use_delivered_exchanges_only() {
        // 1..=20 ms delivered, plus two that never delivered.
        let mut exchanges: Vec<ExchangeSummary> = (1..=20)
            .map(|ms| summary("qwen", ExchangeStatus::Ok, 29, Some(ms), 1))
            .collect();
        exchanges.push(summary("qwen", ExchangeStatus::Error, 29, None, 1));
        exchanges.push(summary("qwen", ExchangeStatus::InFlight, 29, None, 1));
        let row = &summarize(&exchanges, UsageGrouping::RequestedModel).rows[0];
        assert_eq!(row.group, "gemini-2.5-flash");
        assert_eq!(
            (row.latency_p50_ms, row.latency_p95_ms),
            (Some(10), Some(19))
        );
        let none = summarize(
            &[summary("qwen", ExchangeStatus::InFlight, 29, None, 1)],
            UsageGrouping::Run,
        );
        assert_eq!(none.rows[0].group, "-");
        assert_eq!(none.rows[0].latency_p50_ms, None);
        assert!(render_usage(&none).contains("-/-"));
    }

    #[test]
    fn a_window_counts_receive_times_from_since_up_to_until() {
        // Received at 23:59:59 on the 28th, 29th and 30th.
        let exchanges =
            [28, 29, 30].map(|day| summary("qwen", ExchangeStatus::Ok, day, None, day.into()));
        let window = UsageWindow {
            since: Some(parse_instant("2026-11-28T23:59:59Z").unwrap()),
            until: Some(parse_instant("2026-11-30").unwrap()),
        };
        let mut tally = UsageTally::within(UsageGrouping::Day, window);
        exchanges.iter().for_each(|e| tally.add(e));
        let report = tally.finish();
        let days: Vec<&str> = report.rows.iter().map(|r| r.group.as_str()).collect();
        assert_eq!(
            days,
            ["2026-11-28", "2026-11-29"],
            "since counts, until does not"
        );
        assert_eq!(report.total.usage.input, 28 + 29);
        assert_eq!(report.window, window);
    }

    #[test]
    fn instants_are_days_at_utc_midnight_or_rfc3339() {
        assert_eq!(
            parse_instant("2026-11-30").unwrap(),
            Utc.with_ymd_and_hms(2026, 11, 30, 0, 0, 0).unwrap()
        );
        assert_eq!(
            parse_instant("2026-11-30T12:00:00+02:00").unwrap(),
            Utc.with_ymd_and_hms(2026, 11, 30, 10, 0, 0).unwrap()
        );
        for bad in ["30.11.2026", "2026-13-01", "yesterday", ""] {
            let error = parse_instant(bad).unwrap_err();
            assert!(error.to_string().contains("YYYY-MM-DD"), "{bad}: {error}");
        }
    }

    #[test]
    fn the_table_has_a_line_per_group_and_a_total() {
        let exchanges = [
            summary("qwen", ExchangeStatus::Ok, 29, Some(1500), 10),
            summary("llama", ExchangeStatus::Error, 29, Some(250), 20),
        ];
        let mut exchanges = exchanges;
        // The llama exchange's upstream reported nothing: its counts are estimates, kept apart.
        exchanges[1].usage.estimated = true;
        exchanges[1].billed.estimated = true;
        let report = summarize(&exchanges, UsageGrouping::UpstreamModel);
        assert_eq!(
            (report.total.usage.input, report.total.estimated.input),
            (10, 20)
        );
        let text = render_usage(&report);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 4, "{text}");
        assert!(lines[0].starts_with("UPSTREAM MODEL"));
        assert!(lines[1].starts_with("llama"));
        let total: Vec<&str> = lines[3].split_whitespace().collect();
        // group, exchanges, ok, failed, retries, in, cached, out, reasoning, estimated in/out,
        // billed in/out, estimated billed in/out, calls, latency
        assert_eq!(
            total,
            [
                "total",
                "2",
                "1",
                "1",
                "2",
                "10",
                "5",
                "7",
                "3",
                "20/7",
                "20/9",
                "40/9",
                "4",
                "0.250s/1.500s"
            ]
        );
    }
}
