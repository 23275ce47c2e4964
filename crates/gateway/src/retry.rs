//! Upstream retry decisions: which failures are retried, how long to wait (exponential backoff,
//! or exactly an upstream's `Retry-After`), and the per-exchange budget.
//!
//! Budget (defaults): at most `upstream_attempts = 3` attempts, waits of 250 ms, 500 ms, ...
//! each capped at `max_backoff_ms = 4 s`, and no retry *starts* later than `budget_ms = 10 s`
//! after the exchange began; a wait that would cross the budget is not taken. A `Retry-After`
//! is waited as asked when it fits the time budget; one that does not is never shortened: the
//! gateway stops and the guest is handed the upstream's 429 with the delay
//! ([`RetryBudget::declined_wait`]). Malformed tool calls get their own counter
//! (`malformed_retries = 2`) but share the same time budget.

use std::time::{Duration, Instant};

use switchyard_translate::google_errors::MAX_RETRY_HINT;

use crate::config::RetryConfig;

/// Tracks retries of one exchange.
#[derive(Debug)]
pub struct RetryBudget {
    config: RetryConfig,
    started: Instant,
    transient_retries: u32,
    malformed_retries: u32,
    /// The upstream's `Retry-After` the last [`RetryBudget::next_transient`] refused to wait.
    declined: Option<Duration>,
}

impl RetryBudget {
    pub fn new(config: &RetryConfig) -> Self {
        Self {
            config: config.clone(),
            started: Instant::now(),
            transient_retries: 0,
            malformed_retries: 0,
            declined: None,
        }
    }

    /// Retries taken so far (both kinds).
    pub fn retries(&self) -> u32 {
        self.transient_retries + self.malformed_retries
    }

    /// After a retryable upstream failure: how long to wait before the next attempt (the
    /// upstream's `retry_after` exactly, else the backoff), or `None` when attempts or time are
    /// used up.
    pub fn next_transient(&mut self, retry_after: Option<Duration>) -> Option<Duration> {
        self.declined = None;
        if self.transient_retries + 1 >= self.config.upstream_attempts.max(1) {
            return None;
        }
        let backoff = Duration::from_millis(
            self.config
                .initial_backoff_ms
                .saturating_mul(1u64 << self.transient_retries.min(16)),
        )
        .min(Duration::from_millis(self.config.max_backoff_ms));
        let wait = retry_after.unwrap_or(backoff);
        if !self.fits(wait) {
            self.declined = retry_after;
            return None;
        }
        self.transient_retries += 1;
        Some(wait)
    }

    /// The upstream's `Retry-After` that did not fit the budget when the gateway last gave up:
    /// the guest gets it (and the upstream's 429) to decide for itself.
    pub fn declined_wait(&self) -> Option<Duration> {
        self.declined
    }

    /// After a malformed tool call: whether to try again (immediately).
    pub fn next_malformed(&mut self) -> bool {
        if self.malformed_retries >= self.config.malformed_retries || !self.fits(Duration::ZERO) {
            return false;
        }
        self.malformed_retries += 1;
        true
    }

    fn fits(&self, wait: Duration) -> bool {
        self.started.elapsed() + wait <= Duration::from_millis(self.config.budget_ms)
    }
}

/// Parse a `Retry-After` value: what [`switchyard_translate::google_errors::parse_retry_after`]
/// reads (delay seconds, integer or decimal, or a duration such as `1m30s`), else an HTTP date
/// (relative to `now`).
pub fn parse_retry_after(value: &str, now: chrono::DateTime<chrono::Utc>) -> Option<Duration> {
    if let Some(delay) = switchyard_translate::google_errors::parse_retry_after(value) {
        return Some(delay);
    }
    let when = chrono::DateTime::parse_from_rfc2822(value.trim()).ok()?;
    let delta = when.with_timezone(&chrono::Utc) - now;
    Some(delta.to_std().unwrap_or(Duration::ZERO).min(MAX_RETRY_HINT))
}

/// The delay an upstream response asks for: `retry-after-ms` (OpenAI), else `Retry-After`.
pub fn retry_after_from_headers(headers: &reqwest::header::HeaderMap) -> Option<Duration> {
    if let Some(ms) = headers
        .get("retry-after-ms")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<f64>().ok())
        .and_then(|ms| parse_retry_after(&(ms / 1000.0).to_string(), chrono::Utc::now()))
    {
        return Some(ms);
    }
    headers
        .get(reqwest::header::RETRY_AFTER)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| parse_retry_after(v, chrono::Utc::now()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_seconds_and_dates() {
        let now = chrono::DateTime::parse_from_rfc3339("2015-10-21T07:28:00Z")
            .unwrap()
            .with_timezone(&chrono::Utc);
        assert_eq!(parse_retry_after("2", now), Some(Duration::from_secs(2)));
        assert_eq!(
            parse_retry_after("0.5", now),
            Some(Duration::from_millis(500))
        );
        assert_eq!(
            parse_retry_after("Wed, 21 Oct 2015 07:28:07 GMT", now),
            Some(Duration::from_secs(7))
        );
        assert_eq!(
            parse_retry_after("Wed, 21 Oct 2015 07:27:00 GMT", now),
            Some(Duration::ZERO)
        );
        assert_eq!(
            parse_retry_after("1m30s", now),
            Some(Duration::from_secs(90))
        );
        assert_eq!(parse_retry_after("soon", now), None);
        assert_eq!(
            parse_retry_after("Fri, 31 Dec 9999 23:59:59 GMT", now),
            Some(MAX_RETRY_HINT)
        );
        assert_eq!(parse_retry_after("-3", now), None);
    }

    #[test]
    fn backoff_doubles_is_capped_and_stops_after_attempts() {
        let cfg = RetryConfig {
            upstream_attempts: 4,
            initial_backoff_ms: 100,
            max_backoff_ms: 300,
            ..RetryConfig::default()
        };
        let mut b = RetryBudget::new(&cfg);
        assert_eq!(b.next_transient(None), Some(Duration::from_millis(100)));
        assert_eq!(b.next_transient(None), Some(Duration::from_millis(200)));
        assert_eq!(b.next_transient(None), Some(Duration::from_millis(300)));
        assert_eq!(b.next_transient(None), None, "4 attempts = 3 retries");
        assert_eq!(b.retries(), 3);
        assert_eq!(b.declined_wait(), None);
    }

    #[test]
    fn retry_after_is_waited_exactly_or_declined_never_shortened() {
        let cfg = RetryConfig {
            upstream_attempts: 10,
            max_backoff_ms: 100,
            budget_ms: 5_000,
            ..RetryConfig::default()
        };
        let mut b = RetryBudget::new(&cfg);
        assert_eq!(
            b.next_transient(Some(Duration::from_secs(2))),
            Some(Duration::from_secs(2)),
            "longer than max_backoff_ms, but it fits the budget: waited as asked"
        );
        assert_eq!(b.next_transient(Some(Duration::from_secs(30))), None);
        assert_eq!(b.declined_wait(), Some(Duration::from_secs(30)));
        assert_eq!(b.next_transient(None), Some(Duration::from_millis(100)));
        assert_eq!(b.declined_wait(), None, "only the last decision counts");
    }

    #[test]
    fn a_wait_crossing_the_time_budget_is_not_taken() {
        let cfg = RetryConfig {
            upstream_attempts: 10,
            max_backoff_ms: 60_000,
            budget_ms: 1_000,
            ..RetryConfig::default()
        };
        let mut b = RetryBudget::new(&cfg);
        assert_eq!(b.next_transient(Some(Duration::from_secs(5))), None);
        assert_eq!(
            b.next_transient(Some(Duration::from_millis(10))),
            Some(Duration::from_millis(10))
        );
    }

    #[test]
    fn malformed_retries_are_counted_separately() {
        let cfg = RetryConfig {
            malformed_retries: 2,
            ..RetryConfig::default()
        };
        let mut b = RetryBudget::new(&cfg);
        assert!(b.next_malformed());
        assert!(b.next_malformed());
        assert!(!b.next_malformed());
        assert!(b.next_transient(None).is_some());
    }

    #[test]
    fn hostile_retry_headers_parse_without_panicking_and_are_clamped() {
        let headers = |name: &'static str, value: &'static str| {
            let mut h = reqwest::header::HeaderMap::new();
            h.insert(name, reqwest::header::HeaderValue::from_static(value));
            h
        };
        for value in ["1e20", "1e308", "99999999999999999999999999"] {
            assert_eq!(
                retry_after_from_headers(&headers("retry-after", value)),
                Some(MAX_RETRY_HINT)
            );
            assert_eq!(
                retry_after_from_headers(&headers("retry-after-ms", value)),
                Some(MAX_RETRY_HINT)
            );
        }
        for value in ["-5", "NaN", "garbage", "", "Thu, 99 Foo 2015"] {
            assert_eq!(
                retry_after_from_headers(&headers("retry-after", value)),
                None
            );
            assert_eq!(
                retry_after_from_headers(&headers("retry-after-ms", value)),
                None
            );
        }
        let mut b = RetryBudget::new(&RetryConfig::default());
        assert_eq!(
            b.next_transient(retry_after_from_headers(&headers("retry-after", "1e20"))),
            None,
            "a wait past the budget is not taken"
        );
        assert_eq!(b.declined_wait(), Some(MAX_RETRY_HINT));
    }
}
