//! Which requests the gateway serves at all, before any route: the `Host` must name a loopback
//! address, `localhost`, the listen address or a configured name (`allowed_hosts`), and an
//! `Origin`, when present, must name one of those too. A web page can neither reach the gateway
//! through DNS rebinding (its `Host` is the attacker's name) nor make the user's browser post to
//! it (a cross-site `Origin`), so no page spends the provider key.

use std::net::IpAddr;
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::header;
use axum::middleware::Next;
use axum::response::Response;

use crate::responses::error_response;

/// The names a request may address the gateway by.
#[derive(Debug, Clone)]
pub struct HostGuard {
    /// Lowercase names and IP literals, besides loopback addresses and `localhost`.
    allowed: Vec<String>,
}

impl HostGuard {
    /// Loopback, `localhost`, `listen` (unless it is the unspecified address) and `extra`.
    pub fn new(listen: IpAddr, extra: &[String]) -> Self {
        let mut allowed: Vec<String> = extra.iter().map(|h| h.to_ascii_lowercase()).collect();
        if !listen.is_unspecified() {
            allowed.push(listen.to_string());
        }
        Self { allowed }
    }

    /// Whether `host` (a `Host` value: name or IP literal, optional port) is one of ours.
    pub fn host_allowed(&self, host: &str) -> bool {
        let Ok(authority) = host.trim().parse::<http::uri::Authority>() else {
            return false;
        };
        // An `@` would make `user@evil` look like an authority; a Host value never has one.
        !host.contains('@') && self.name_allowed(authority.host())
    }

    /// Whether an `Origin` value names one of our hosts (`null` and other schemes do not).
    pub fn origin_allowed(&self, origin: &str) -> bool {
        let Ok(url) = url::Url::parse(origin.trim()) else {
            return false;
        };
        matches!(url.scheme(), "http" | "https")
            && url.username().is_empty()
            && url.host_str().is_some_and(|host| self.name_allowed(host))
    }

    fn name_allowed(&self, host: &str) -> bool {
        let bare = host.trim_start_matches('[').trim_end_matches(']');
        if bare.eq_ignore_ascii_case("localhost") {
            return true;
        }
        if let Ok(ip) = bare.parse::<IpAddr>()
            && ip.is_loopback()
        {
            return true;
        }
        self.allowed
            .iter()
            .any(|name| name.eq_ignore_ascii_case(bare))
    }
}

/// Middleware: 403 (Google error shape) for a foreign `Host` or `Origin`, or no `Host`.
pub(crate) async fn check(
    State(guard): State<Arc<HostGuard>>,
    request: Request,
    next: Next,
) -> Response {
    let headers = request.headers();
    let host = headers
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .or_else(|| request.uri().authority().map(|a| a.as_str()));
    if !host.is_some_and(|host| guard.host_allowed(host)) {
        return error_response(
            403,
            "the Host header does not name this gateway (loopback, localhost or a name in \
             allowed_hosts)",
        );
    }
    if let Some(origin) = headers.get(header::ORIGIN)
        && !origin.to_str().is_ok_and(|o| guard.origin_allowed(o))
    {
        return error_response(
            403,
            "cross-site requests are refused: the Origin header does not name this gateway",
        );
    }
    next.run(request).await
}

#[cfg(test)]
#[path = "guard_tests.rs"]
mod tests;
