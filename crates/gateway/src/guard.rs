//! Which requests the gateway serves at all, before any route: the `Host` must name a loopback
//! address, `localhost`, the listen address or a configured name (`allowed_hosts`), and an
//! `Origin`, when present, must be exactly the gateway's own (`http`, one of those hosts, the
//! listen port) or one of `allowed_origins`. A web page can neither reach the gateway through
//! DNS rebinding (its `Host` is the attacker's name) nor make the user's browser post to it (a
//! cross-site `Origin`, another localhost port included), so no page spends the provider key.

use std::net::{IpAddr, SocketAddr};
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
    /// The port the gateway listens on: its own origin's.
    port: u16,
    /// `allowed_origins`, as (scheme, lowercase host, port).
    origins: Vec<Origin>,
}

/// An origin: scheme, lowercase host (IPv6 without brackets), port (the scheme's default when
/// none is written).
type Origin = (String, String, u16);

/// `text` as an origin: `http(s)://host[:port]`, nothing else (no user, path, query).
pub fn parse_origin(text: &str) -> Option<Origin> {
    let url = url::Url::parse(text.trim()).ok()?;
    let plain = url.username().is_empty()
        && url.password().is_none()
        && matches!(url.path(), "" | "/")
        && url.query().is_none()
        && url.fragment().is_none();
    if !plain || !matches!(url.scheme(), "http" | "https") {
        return None;
    }
    let host = url.host_str()?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    Some((
        url.scheme().to_owned(),
        host.to_ascii_lowercase(),
        url.port_or_known_default()?,
    ))
}

impl HostGuard {
    /// Hosts: loopback, `localhost`, `listen`'s address (unless unspecified) and `extra`; the
    /// gateway's own origin on `listen`'s port, and `origins` (each `http(s)://host[:port]`;
    /// ones that are not are ignored here: the config check refuses them).
    pub fn new(listen: SocketAddr, extra: &[String], origins: &[String]) -> Self {
        let mut allowed: Vec<String> = extra.iter().map(|h| h.to_ascii_lowercase()).collect();
        if !listen.ip().is_unspecified() {
            allowed.push(listen.ip().to_string());
        }
        Self {
            allowed,
            port: listen.port(),
            origins: origins.iter().filter_map(|o| parse_origin(o)).collect(),
        }
    }

    /// Whether `host` (a `Host` value: name or IP literal, optional port) is one of ours.
    pub fn host_allowed(&self, host: &str) -> bool {
        let Ok(authority) = host.trim().parse::<http::uri::Authority>() else {
            return false;
        };
        // An `@` would make `user@evil` look like an authority; a Host value never has one.
        !host.contains('@') && self.name_allowed(authority.host())
    }

    /// Whether an `Origin` value is the gateway's own or a configured one (`null`, other
    /// schemes and other ports are not).
    pub fn origin_allowed(&self, origin: &str) -> bool {
        let Some(origin) = parse_origin(origin) else {
            return false;
        };
        let (scheme, host, port) = &origin;
        let own = scheme == "http" && *port == self.port && self.name_allowed(host);
        own || self.origins.contains(&origin)
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
