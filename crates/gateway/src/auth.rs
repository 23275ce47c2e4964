//! Optional per-run ingress token: when configured, every guest request must carry it, in
//! `x-goog-api-key` (what Gemini CLI sends from `GEMINI_API_KEY`) on the Google routes and as
//! `Authorization: Bearer` (what OpenAI clients send) on the Chat Completions route, and in
//! `x-api-key` or as a bearer token (Claude Code's `ANTHROPIC_API_KEY` and
//! `ANTHROPIC_AUTH_TOKEN`) on the Messages route. Compared in constant time.

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

/// The header Anthropic clients put their API key in.
pub const ANTHROPIC_KEY_HEADER: &str = "x-api-key";

/// True when no key is required, or the request carries `expected` in
/// [`ANTHROPIC_KEY_HEADER`] or as a bearer token (either is enough; a wrong one in the other
/// header does not matter, as Claude Code sends both when both variables are set).
pub fn anthropic_allowed(expected: Option<&str>, headers: &HeaderMap) -> bool {
    let key = headers
        .get(ANTHROPIC_KEY_HEADER)
        .map(|v| v.as_bytes())
        .unwrap_or_default();
    // Both are compared, so the time taken does not say which one matched.
    let by_key = matches(expected, key);
    let by_bearer = bearer_allowed(expected, headers);
    by_key | by_bearer
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

    #[test]
    fn an_anthropic_key_is_accepted_in_either_header() {
        let with = |pairs: &[(&'static str, &str)]| {
            let mut h = HeaderMap::new();
            for (name, value) in pairs {
                h.insert(*name, value.parse().unwrap());
            }
            h
        };
        assert!(anthropic_allowed(None, &HeaderMap::new()));
        assert!(anthropic_allowed(
            Some("tok"),
            &with(&[("x-api-key", "tok")])
        ));
        assert!(anthropic_allowed(
            Some("tok"),
            &with(&[("authorization", "Bearer tok")])
        ));
        assert!(anthropic_allowed(
            Some("tok"),
            &with(&[("x-api-key", "other"), ("authorization", "Bearer tok")])
        ));
        assert!(!anthropic_allowed(
            Some("tok"),
            &with(&[("x-api-key", "tok2")])
        ));
        assert!(!anthropic_allowed(
            Some("tok"),
            &with(&[("x-goog-api-key", "tok")])
        ));
        assert!(!anthropic_allowed(Some("tok"), &HeaderMap::new()));
    }
}
