//! The HTTP client for the OpenAI-compatible upstream: one `POST …/chat/completions` per
//! attempt, with connect / first-byte / idle timeouts, the API key as `Authorization: Bearer`
//! (never logged), and failures classified as retryable or not. `http://` upstreams are reached
//! with the lean HTTP/1.1 client of `http1.rs`, `https://` ones with reqwest.

use std::pin::Pin;
use std::time::Duration;

use bytes::Bytes;
use futures_util::{Stream, StreamExt};

use crate::config::GatewayConfig;
use crate::gap_timer::GapTimer;
use crate::http1::{Http1Body, Http1Client, Http1ConfigError, Http1Error};
use crate::retry::retry_after_from_headers;
use crate::translation::ChatBody;

/// How long an unused upstream connection is kept for the next request.
const POOL_IDLE_TIMEOUT: Duration = Duration::from_secs(60);

/// Largest upstream error body kept (for the guest's error message and the records).
const MAX_ERROR_BODY: usize = 64 * 1024;

/// Why one upstream attempt failed.
#[derive(Debug, Clone, thiserror::Error)]
pub enum UpstreamError {
    #[error("cannot reach the upstream: {0}")]
    Connect(String),
    #[error("upstream sent no response head within {0:?}")]
    FirstByteTimeout(Duration),
    #[error("upstream answered HTTP {status}: {body}")]
    Status {
        status: u16,
        body: String,
        retry_after: Option<Duration>,
    },
    #[error("upstream went silent for {0:?} in the middle of the response")]
    IdleTimeout(Duration),
    #[error("upstream response body broke off: {0}")]
    Body(String),
    #[error("upstream response is not valid: {0}")]
    Invalid(String),
    /// The response arrived but its content cannot be used (invalid JSON, an error the upstream
    /// reported inside the body or stream, data after `[DONE]`); the same for streamed and
    /// non-streamed exchanges.
    #[error(transparent)]
    Payload(switchyard_translate::UpstreamError),
}

impl UpstreamError {
    /// Whether another attempt may succeed (429, 408, 5xx, network trouble, timeouts).
    pub fn retryable(&self) -> bool {
        match self {
            UpstreamError::Connect(_)
            | UpstreamError::FirstByteTimeout(_)
            | UpstreamError::IdleTimeout(_)
            | UpstreamError::Body(_) => true,
            UpstreamError::Status { status, .. } => retryable_status(*status),
            UpstreamError::Invalid(_) | UpstreamError::Payload(_) => false,
        }
    }

    /// The wait the upstream asked for, if any.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            UpstreamError::Status { retry_after, .. } => *retry_after,
            _ => None,
        }
    }

    /// HTTP status the upstream answered with, or the code of an error it reported inside the
    /// response, if any.
    pub fn status(&self) -> Option<u16> {
        match self {
            UpstreamError::Status { status, .. } => Some(*status),
            UpstreamError::Payload(switchyard_translate::UpstreamError::Reported {
                code, ..
            }) => *code,
            _ => None,
        }
    }

    /// Stable kind for records.
    pub fn kind(&self) -> &'static str {
        match self {
            UpstreamError::Connect(_) => "upstream_connect",
            UpstreamError::FirstByteTimeout(_) => "upstream_first_byte_timeout",
            UpstreamError::Status { .. } => "upstream_status",
            UpstreamError::IdleTimeout(_) => "upstream_idle_timeout",
            UpstreamError::Body(_) => "upstream_body",
            UpstreamError::Invalid(_) => "upstream_invalid",
            UpstreamError::Payload(switchyard_translate::UpstreamError::Reported { .. }) => {
                "upstream_reported"
            }
            UpstreamError::Payload(_) => "upstream_invalid",
        }
    }
}

/// Whether an upstream status asks for another try (429, 408, 5xx).
pub fn retryable_status(status: u16) -> bool {
    status == 429 || status == 408 || status >= 500
}

/// The upstream URL does not parse.
#[derive(Debug, thiserror::Error)]
#[error("invalid upstream URL: {0}")]
pub struct UpstreamUrlError(String);

/// Why the upstream client cannot be built.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error(transparent)]
    Http(#[from] reqwest::Error),
    #[error(transparent)]
    Url(#[from] UpstreamUrlError),
    #[error("the upstream API key cannot be sent in an HTTP header (it has control characters)")]
    Key,
}

/// A body chunk stream with the idle timeout applied.
pub type ByteStream = Pin<Box<dyn Stream<Item = Result<Bytes, UpstreamError>> + Send>>;

/// How the client reaches the upstream.
#[derive(Clone)]
enum Transport {
    /// `http://` upstreams: the lean client of [`crate::http1`].
    Http1(Http1Client),
    /// `https://` upstreams (and `http://` in the test that compares the two clients).
    Reqwest {
        http: reqwest::Client,
        /// The URL, parsed once (not on every request).
        url: reqwest::Url,
        /// `Bearer <key>`, built once and marked sensitive (so HTTP tooling never prints it).
        bearer: Option<reqwest::header::HeaderValue>,
    },
}

/// Client for one upstream endpoint.
#[derive(Clone)]
pub struct UpstreamClient {
    transport: Transport,
    url: String,
    has_key: bool,
    first_byte: Duration,
    idle: Duration,
}

impl std::fmt::Debug for UpstreamClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UpstreamClient")
            .field("url", &self.url)
            .field("has_key", &self.has_key)
            .finish()
    }
}

/// An upstream response whose head arrived ([`UpstreamClient::send`] hands out only 2xx ones);
/// the body is read with [`UpstreamClient::body_stream`].
pub struct UpstreamResponse {
    status: u16,
    body: ResponseBody,
}

enum ResponseBody {
    Http1(Http1Body),
    Reqwest(reqwest::Response),
}

impl UpstreamResponse {
    /// The HTTP status.
    pub fn status(&self) -> u16 {
        self.status
    }
}

/// Install the ring TLS provider once (reqwest is built with `rustls-no-provider`).
pub fn install_tls_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

impl UpstreamClient {
    /// Build the client; the key is read by the caller from the configured env var. `http://`
    /// upstreams get the lean HTTP/1.1 client, `https://` ones reqwest.
    pub fn new(config: &GatewayConfig, api_key: Option<String>) -> Result<Self, ClientError> {
        Self::build(config, api_key, false)
    }

    /// As [`UpstreamClient::new`], but reqwest for every scheme (to compare the two clients).
    #[cfg(test)]
    fn with_reqwest(config: &GatewayConfig, api_key: Option<String>) -> Result<Self, ClientError> {
        Self::build(config, api_key, true)
    }

    fn build(
        config: &GatewayConfig,
        api_key: Option<String>,
        reqwest_always: bool,
    ) -> Result<Self, ClientError> {
        let url = config.chat_completions_url();
        let parsed_url = reqwest::Url::parse(&url).map_err(|e| UpstreamUrlError(e.to_string()))?;
        let bearer = api_key
            .filter(|k| !k.is_empty())
            .map(|k| format!("Bearer {k}"));
        let has_key = bearer.is_some();
        let transport = if parsed_url.scheme() == "http" && !reqwest_always {
            Transport::Http1(
                Http1Client::new(
                    &parsed_url,
                    bearer.as_deref(),
                    config.timeouts.connect(),
                    POOL_IDLE_TIMEOUT,
                )
                .map_err(|e| match e {
                    Http1ConfigError::ControlCharacters => ClientError::Key,
                    other => ClientError::Url(UpstreamUrlError(other.to_string())),
                })?,
            )
        } else {
            install_tls_provider();
            let http = reqwest::Client::builder()
                .connect_timeout(config.timeouts.connect())
                .tcp_nodelay(true)
                .pool_idle_timeout(POOL_IDLE_TIMEOUT)
                .build()?;
            let bearer = bearer
                .map(|value| {
                    let mut value = reqwest::header::HeaderValue::try_from(value)
                        .map_err(|_| ClientError::Key)?;
                    value.set_sensitive(true);
                    Ok::<_, ClientError>(value)
                })
                .transpose()?;
            Transport::Reqwest {
                http,
                url: parsed_url,
                bearer,
            }
        };
        Ok(Self {
            transport,
            url,
            has_key,
            first_byte: config.timeouts.first_byte(),
            idle: config.timeouts.idle(),
        })
    }

    pub fn url(&self) -> &str {
        &self.url
    }

    /// Send one attempt; `Ok` only for a 2xx response head. Error bodies are read (bounded).
    pub async fn send(&self, body: &ChatBody) -> Result<UpstreamResponse, UpstreamError> {
        let first_byte = self.first_byte;
        let timed_out = || UpstreamError::FirstByteTimeout(first_byte);
        let (status, retry_after, body) = match &self.transport {
            Transport::Http1(client) => {
                let pieces: Vec<Bytes> = body
                    .text()
                    .pieces()
                    .iter()
                    .map(|piece| piece.bytes().clone())
                    .collect();
                let response = tokio::time::timeout(first_byte, client.post(&pieces))
                    .await
                    .map_err(|_| timed_out())?
                    .map_err(|e| match e {
                        Http1Error::Invalid(_) => UpstreamError::Invalid(e.to_string()),
                        _ => UpstreamError::Connect(e.to_string()),
                    })?;
                let retry_after = retry_after_from_headers(&response.headers);
                (
                    response.status,
                    retry_after,
                    ResponseBody::Http1(response.body),
                )
            }
            Transport::Reqwest { http, url, bearer } => {
                let mut request = http
                    .post(url.clone())
                    .header(reqwest::header::CONTENT_TYPE, "application/json")
                    .body(reqwest::Body::from(body.clone()));
                if let Some(bearer) = bearer {
                    request = request.header(reqwest::header::AUTHORIZATION, bearer.clone());
                }
                let response = tokio::time::timeout(first_byte, request.send())
                    .await
                    .map_err(|_| timed_out())?
                    .map_err(|e| UpstreamError::Connect(describe(&e)))?;
                let retry_after = retry_after_from_headers(response.headers());
                (
                    response.status().as_u16(),
                    retry_after,
                    ResponseBody::Reqwest(response),
                )
            }
        };
        let response = UpstreamResponse { status, body };
        if (200..300).contains(&status) {
            return Ok(response);
        }
        let body = self
            .read_body(response, MAX_ERROR_BODY)
            .await
            .unwrap_or_default();
        Err(UpstreamError::Status {
            status,
            body: String::from_utf8_lossy(&body).into_owned(),
            retry_after,
        })
    }

    /// The response body as a stream, each chunk bounded by the idle timeout.
    pub fn body_stream(&self, response: UpstreamResponse) -> ByteStream {
        type Chunks = Pin<Box<dyn Stream<Item = Result<Bytes, String>> + Send>>;
        let chunks: Chunks = match response.body {
            ResponseBody::Http1(body) => {
                Box::pin(futures_util::stream::unfold(body, |mut body| async move {
                    let chunk = body.next().await?;
                    Some((chunk.map_err(|e| e.to_string()), body))
                }))
            }
            ResponseBody::Reqwest(response) => Box::pin(
                response
                    .bytes_stream()
                    .map(|chunk| chunk.map_err(|e| describe(&e))),
            ),
        };
        // One idle timer per body, not per chunk (see `crate::gap_timer`).
        let idle = GapTimer::new(self.idle);
        Box::pin(futures_util::stream::unfold(
            Some((chunks, idle)),
            |state| async move {
                let (mut chunks, mut idle) = state?;
                let Some(next) = idle.next(chunks.next()).await else {
                    return Some((Err(UpstreamError::IdleTimeout(idle.gap())), None));
                };
                match next {
                    None => None,
                    Some(Ok(bytes)) => Some((Ok(bytes), Some((chunks, idle)))),
                    Some(Err(e)) => Some((Err(UpstreamError::Body(e)), None)),
                }
            },
        ))
    }

    /// Read a whole body (bounded by `limit` bytes, idle timeout per chunk).
    pub async fn read_body(
        &self,
        response: UpstreamResponse,
        limit: usize,
    ) -> Result<Bytes, UpstreamError> {
        let mut stream = self.body_stream(response);
        let mut out = Vec::new();
        while let Some(chunk) = stream.next().await {
            let chunk = chunk?;
            let room = limit.saturating_sub(out.len());
            out.extend_from_slice(&chunk[..chunk.len().min(room)]);
            if out.len() >= limit {
                break;
            }
        }
        Ok(Bytes::from(out))
    }
}

/// reqwest errors with their source chain (never includes headers, so never the key).
pub(crate) fn describe(e: &reqwest::Error) -> String {
    let mut text = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use serde_json::Value;
    use switchyard_testkit::chat_upstream::{ChatUpstream, Reply, Script};

    use super::*;

    #[tokio::test]
    async fn both_transports_send_the_same_request_and_read_the_same_answer() {
        let upstream = ChatUpstream::start(Script::always(Reply::completion_text("Hello")))
            .await
            .unwrap();
        let config = GatewayConfig::new(upstream.base_url(), "m");
        let sent = br#"{"model":"m","messages":[{"role":"user","content":"hi"}]}"#;
        let body = ChatBody::single(sent.to_vec());
        let key = Some("sk-transport-test-1".to_owned());
        let lean = UpstreamClient::new(&config, key.clone()).unwrap();
        let reqwest = UpstreamClient::with_reqwest(&config, key).unwrap();
        assert!(matches!(lean.transport, Transport::Http1(_)));
        assert!(matches!(reqwest.transport, Transport::Reqwest { .. }));
        for client in [&lean, &reqwest] {
            let response = client.send(&body).await.unwrap();
            assert_eq!(response.status(), 200);
            let answer = client.read_body(response, 1 << 20).await.unwrap();
            let answer: Value = serde_json::from_slice(&answer).unwrap();
            assert_eq!(answer["choices"][0]["message"]["content"], "Hello");
        }
        let requests = upstream.requests();
        assert_eq!(requests.len(), 2);
        for request in &requests {
            assert_eq!(request.path, "/v1/chat/completions");
            assert_eq!(&request.body[..], sent);
            assert_eq!(
                request.header("authorization"),
                Some("Bearer sk-transport-test-1")
            );
            assert_eq!(request.header("content-type"), Some("application/json"));
        }
    }
}
