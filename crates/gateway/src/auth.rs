//! Optional per-run ingress token: when configured, every guest request must carry it, in
//! `x-goog-api-key` (what Gemini CLI sends from `GEMINI_API_KEY`) on the Google routes and as
//! `Authorization: Bearer` (what OpenAI clients send) on the Chat Completions route. Compared
//! in constant time.

use axum::http::HeaderMap;
use subtle::ConstantTimeEq;

/// The header Gemini CLI puts its API key in.
pub const INGRESS_KEY_HEADER: &str = "x-goog-api-key";

/// True when no key is required, or the request carries exactly `expected` in
/// [`INGRESS_KEY_HEADER`].
pub fn ingress_allowed(expected: Option<&str>, headers: &HeaderMap) -> bool {
    let presented = headers
        .get(INGRESS_KEY_HEADER)
        .map(|v| v.as_bytes())
        .unwrap_or_default();
    matches(expected, presented)
}

/// True when no key is required, or the request carries `Authorization: Bearer <expected>`
/// (the scheme in any case).
pub fn bearer_allowed(expected: Option<&str>, headers: &HeaderMap) -> bool {
    let presented = headers
        .get(axum::http::header::AUTHORIZATION)
        .and_then(|v| switchyard_protocol::auth::bearer_token(v.as_bytes()))
        .unwrap_or_default();
    matches(expected, presented)
}

fn matches(expected: Option<&str>, presented: &[u8]) -> bool {
    let Some(expected) = expected else {
        return true;
    };
    // `ct_eq` on slices of different lengths returns false without comparing contents; the
    // length of a random per-run token is not secret.
    bool::from(presented.ct_eq(expected.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(key: Option<&str>) -> HeaderMap {
        let mut h = HeaderMap::new();
        if let Some(k) = key {
            h.insert(INGRESS_KEY_HEADER, k.parse().unwrap());
        }
        h
    }

    #[test]
    fn checks_the_key_only_when_configured() {
        assert!(ingress_allowed(None, &headers(None)));
        assert!(ingress_allowed(Some("tok"), &headers(Some("tok"))));
        assert!(!ingress_allowed(Some("tok"), &headers(Some("tok2"))));
        assert!(!ingress_allowed(Some("tok"), &headers(Some("tox"))));
        assert!(!ingress_allowed(Some("tok"), &headers(None)));
    }

    #[test]
    fn a_bearer_key_is_checked_only_when_configured() {
        let bearer = |value: &str| {
            let mut h = HeaderMap::new();
            h.insert(axum::http::header::AUTHORIZATION, value.parse().unwrap());
            h
        };
        assert!(bearer_allowed(None, &HeaderMap::new()));
        assert!(bearer_allowed(Some("tok"), &bearer("Bearer tok")));
        assert!(!bearer_allowed(Some("tok"), &bearer("Bearer tok2")));
        assert!(!bearer_allowed(Some("tok"), &bearer("tok")));
        assert!(bearer_allowed(Some("tok"), &bearer("bearer tok")));
        assert!(!bearer_allowed(Some("tok"), &bearer("Basic tok")));
        assert!(!bearer_allowed(Some("tok"), &bearer("Basic tok")));
        assert!(!bearer_allowed(Some("tok"), &HeaderMap::new()));
    }
}
