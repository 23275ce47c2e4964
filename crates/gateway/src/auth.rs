//! Optional per-run ingress token: when configured, every guest request must carry it in
//! `x-goog-api-key` (what Gemini CLI sends from `GEMINI_API_KEY`). Compared in constant time.

use axum::http::HeaderMap;
use subtle::ConstantTimeEq;

/// The header Gemini CLI puts its API key in.
pub const INGRESS_KEY_HEADER: &str = "x-goog-api-key";

/// True when no key is required, or the request carries exactly `expected`.
pub fn ingress_allowed(expected: Option<&str>, headers: &HeaderMap) -> bool {
    let Some(expected) = expected else {
        return true;
    };
    let presented = headers
        .get(INGRESS_KEY_HEADER)
        .map(|v| v.as_bytes())
        .unwrap_or_default();
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
}
