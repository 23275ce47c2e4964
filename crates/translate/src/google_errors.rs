//! Google-shaped error bodies for the guest, built from upstream HTTP errors (pure functions).
//!
//! Gemini CLI classifies errors by `error.status`, `error.code` and google.rpc `details`; a
//! `RetryInfo` detail with `retryDelay: "12s"` tells it how long to wait before retrying a 429/5xx.

use std::time::Duration;

use serde_json::{Value, json};

use crate::google::{GoogleError, GoogleErrorBody};

/// `@type` of the google.rpc retry detail.
pub const RETRY_INFO_TYPE: &str = "type.googleapis.com/google.rpc.RetryInfo";

/// google.rpc status name for an HTTP status.
///
/// 400 INVALID_ARGUMENT, 401 UNAUTHENTICATED, 403 PERMISSION_DENIED, 404 NOT_FOUND, 409 ABORTED,
/// 429 RESOURCE_EXHAUSTED, 499 CANCELLED, 500 INTERNAL, 501 UNIMPLEMENTED, 502/503 UNAVAILABLE,
/// 504 DEADLINE_EXCEEDED; other 4xx FAILED_PRECONDITION, other 5xx INTERNAL, anything else UNKNOWN.
pub fn google_status_for_http(status: u16) -> &'static str {
    match status {
        400 => "INVALID_ARGUMENT",
        401 => "UNAUTHENTICATED",
        403 => "PERMISSION_DENIED",
        404 => "NOT_FOUND",
        409 => "ABORTED",
        429 => "RESOURCE_EXHAUSTED",
        499 => "CANCELLED",
        500 => "INTERNAL",
        501 => "UNIMPLEMENTED",
        502 | 503 => "UNAVAILABLE",
        504 => "DEADLINE_EXCEEDED",
        405..=498 => "FAILED_PRECONDITION",
        505..=599 => "INTERNAL",
        _ => "UNKNOWN",
    }
}

/// A Google error body; with `retry_after`, adds a `RetryInfo` detail (`retryDelay` in whole
/// seconds, rounded up, e.g. `"12s"`).
pub fn google_error(status: u16, message: &str, retry_after: Option<Duration>) -> GoogleErrorBody {
    let mut details = Vec::new();
    if let Some(delay) = retry_after {
        details.push(retry_info_detail(delay));
    }
    GoogleErrorBody {
        error: GoogleError {
            code: status,
            message: message.to_string(),
            status: google_status_for_http(status).to_string(),
            details,
        },
    }
}

/// `{"@type": RetryInfo, "retryDelay": "<secs>s"}`.
pub fn retry_info_detail(delay: Duration) -> Value {
    let secs = delay.as_secs() + u64::from(delay.subsec_nanos() > 0);
    json!({ "@type": RETRY_INFO_TYPE, "retryDelay": format!("{secs}s") })
}

/// The longest retry hint kept: a larger (or overflowing) one is clamped to this. A caller's
/// retry budget clamps further.
pub const MAX_RETRY_HINT: Duration = Duration::from_secs(3600);

/// `secs` seconds, clamped to [`MAX_RETRY_HINT`]; `None` when negative or not a number.
fn clamped_secs(secs: f64) -> Option<Duration> {
    if secs.is_nan() || secs < 0.0 {
        return None;
    }
    Some(
        Duration::try_from_secs_f64(secs)
            .unwrap_or(MAX_RETRY_HINT)
            .min(MAX_RETRY_HINT),
    )
}

/// Parses a retry hint: `Retry-After` delta-seconds (`"12"`, `"1.5"`) or a duration string as in
/// `x-ratelimit-reset-*` headers (`"12s"`, `"250ms"`, `"1m30s"`, `"2h"`), clamped to
/// [`MAX_RETRY_HINT`]. Negative, NaN and unparsable values give `None`. HTTP-date values need a
/// clock and are not handled here (returns `None`; the gateway may compute them itself).
pub fn parse_retry_after(value: &str) -> Option<Duration> {
    let value = value.trim();
    if value.is_empty() {
        return None;
    }
    if let Ok(secs) = value.parse::<f64>() {
        return clamped_secs(secs);
    }
    let mut total = Duration::ZERO;
    let mut rest = value;
    while !rest.is_empty() {
        let num_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        if num_len == 0 {
            return None;
        }
        let number: f64 = rest[..num_len].parse().ok()?;
        rest = &rest[num_len..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let unit_secs = match &rest[..unit_len] {
            "ms" => 0.001,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            _ => return None,
        };
        rest = &rest[unit_len..];
        total = total.saturating_add(clamped_secs(number * unit_secs)?);
    }
    Some(total.min(MAX_RETRY_HINT))
}

/// Builds the guest error for an upstream HTTP error response.
///
/// The message is taken from an OpenAI-shaped body (`{"error":{"message":..}}`), a Google-shaped body,
/// a top-level `message`/`detail` string, or else the body text itself (trimmed to 2000 characters).
/// `retry_after` (from [`parse_retry_after`] on `Retry-After` or `x-ratelimit-reset-*`) adds a
/// `RetryInfo` detail; a Google-shaped upstream body keeps its own `details` too.
pub fn upstream_error_to_google(
    status: u16,
    body: &[u8],
    retry_after: Option<Duration>,
) -> GoogleErrorBody {
    let text = String::from_utf8_lossy(body);
    let parsed: Option<Value> = serde_json::from_str(&text).ok();
    let mut upstream_details = Vec::new();
    let message = parsed
        .as_ref()
        .and_then(|v| {
            let err = v.get("error");
            if let Some(details) = err.and_then(|e| e.get("details")).and_then(Value::as_array) {
                upstream_details = details.clone();
            }
            err.and_then(|e| e.get("message"))
                .or_else(|| err.filter(|e| e.is_string()))
                .or_else(|| v.get("message"))
                .or_else(|| v.get("detail"))
                .and_then(Value::as_str)
                .map(str::to_string)
        })
        .unwrap_or_else(|| {
            let trimmed = text.trim();
            if trimmed.is_empty() {
                format!("upstream returned HTTP {status} with an empty body")
            } else {
                trimmed.chars().take(2000).collect()
            }
        });
    let mut body = google_error(status, &format!("upstream: {message}"), retry_after);
    let has_retry = !body.error.details.is_empty();
    for detail in upstream_details {
        let is_retry = detail.get("@type").and_then(Value::as_str) == Some(RETRY_INFO_TYPE);
        if !(is_retry && has_retry) {
            body.error.details.push(detail);
        }
    }
    body
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn http_statuses_map_to_google_statuses() {
        for (code, status) in [
            (400, "INVALID_ARGUMENT"),
            (401, "UNAUTHENTICATED"),
            (403, "PERMISSION_DENIED"),
            (404, "NOT_FOUND"),
            (429, "RESOURCE_EXHAUSTED"),
            (499, "CANCELLED"),
            (500, "INTERNAL"),
            (503, "UNAVAILABLE"),
            (504, "DEADLINE_EXCEEDED"),
            (418, "FAILED_PRECONDITION"),
        ] {
            assert_eq!(google_status_for_http(code), status, "{code}");
        }
    }

    #[test]
    fn rate_limit_becomes_resource_exhausted_with_retry_info() {
        let body =
            br#"{"error":{"message":"Rate limit reached","type":"requests","code":"rate_limit"}}"#;
        let err = upstream_error_to_google(429, body, parse_retry_after("12"));
        assert_eq!(
            serde_json::to_value(&err).unwrap(),
            json!({"error": {"code": 429, "message": "upstream: Rate limit reached", "status": "RESOURCE_EXHAUSTED",
                "details": [{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "12s"}]}})
        );
    }

    #[test]
    fn no_retry_hint_means_no_details_and_plain_bodies_are_kept() {
        let err = upstream_error_to_google(500, b"  gateway exploded  ", None);
        assert_eq!(err.error.message, "upstream: gateway exploded");
        assert_eq!(err.error.status, "INTERNAL");
        assert!(err.error.details.is_empty());
        assert!(!err.to_json_line().contains("details"));
        let err = upstream_error_to_google(502, b"", None);
        assert!(err.error.message.contains("empty body"));
    }

    #[test]
    fn google_shaped_upstream_keeps_details_without_duplicate_retry_info() {
        let body = json!({"error": {"code": 429, "message": "quota", "status": "RESOURCE_EXHAUSTED", "details": [
            {"@type": RETRY_INFO_TYPE, "retryDelay": "30s"},
            {"@type": "type.googleapis.com/google.rpc.QuotaFailure", "violations": []}
        ]}})
        .to_string();
        let err = upstream_error_to_google(429, body.as_bytes(), Some(Duration::from_secs(5)));
        assert_eq!(err.error.details.len(), 2);
        assert_eq!(err.error.details[0]["retryDelay"], "5s");
        assert_eq!(
            err.error.details[1]["@type"],
            "type.googleapis.com/google.rpc.QuotaFailure"
        );
    }

    #[test]
    fn retry_after_formats() {
        assert_eq!(parse_retry_after("12"), Some(Duration::from_secs(12)));
        assert_eq!(parse_retry_after("1.5"), Some(Duration::from_millis(1500)));
        assert_eq!(parse_retry_after("1m30s"), Some(Duration::from_secs(90)));
        assert_eq!(parse_retry_after("250ms"), Some(Duration::from_millis(250)));
        assert_eq!(parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT"), None);
    }

    #[test]
    fn hostile_retry_hints_never_panic_and_are_clamped() {
        for huge in [
            "1e20",
            "1e308",
            "99999999999999999999999",
            "99999999999999999999h",
            "9000000000000000000s9000000000000000000s",
        ] {
            assert_eq!(parse_retry_after(huge), Some(MAX_RETRY_HINT), "{huge}");
        }
        for bad in [
            "-1", "-0.5", "NaN", "nan", "inf", "-inf", "1x", "..", "s", "1.2.3s", "\u{0}",
        ] {
            let parsed = parse_retry_after(bad);
            assert!(
                parsed.is_none() || parsed == Some(MAX_RETRY_HINT),
                "{bad}: {parsed:?}"
            );
        }
        assert_eq!(parse_retry_after("-3s"), None);
        assert_eq!(parse_retry_after("-3"), None);
        // Sub-second delays round up so the guest never retries early.
        assert_eq!(
            retry_info_detail(Duration::from_millis(250))["retryDelay"],
            "1s"
        );
    }
}
