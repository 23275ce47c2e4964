//! The HTTP client for the OpenAI-compatible upstream: one `POST …/chat/completions` per
//! attempt, with connect / first-byte / idle timeouts, the API key as `Authorization: Bearer`
//! (never logged), and failures classified as retryable or not. Every upstream, `http://` or
//! `https://`, is reached with reqwest (rustls for TLS).

use std::pin::Pin;
use std::time::Duration;

use bytes::Bytes;
use futures_util::{Stream, StreamExt};

use crate::config::GatewayConfig;
use crate::retry::retry_after_from_headers;

/// How long an unused upstream connection is kept for the next request.
const POOL_IDLE_TIMEOUT: Duration = Duration::from_secs(60);

/// Largest upstream error body kept (for the guest's error message and the records).
const MAX_ERROR_BODY: usize = 64 * 1024;

/// Largest server-sent event accepted from the upstream (its lines up to the blank line that
/// ends it): the SSE parser buffers an event whole, so without a bound an upstream that never
/// ends a line would fill the gateway's memory.
pub const MAX_SSE_EVENT: usize = 16 * 1024 * 1024;

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
    /// A 2xx stream that carried no chunk, or ended before its end.
    #[error("upstream stream is unfinished: {0}")]
    Unfinished(&'static str),
    /// The response arrived but its content cannot be used (invalid JSON, an error the upstream
    /// reported inside the body or stream, data after `[DONE]`); the same for streamed and
    /// non-streamed exchanges.
    #[error(transparent)]
    Payload(switchyard_translate::UpstreamError),
    /// The answer passed a bound of `[limits]` (its size, calls or duration): ended there.
    #[error("the model's answer was cut off: {0}")]
    AnswerLimit(String),
}

impl UpstreamError {
    /// Whether another attempt may succeed (429, 408, 5xx, network trouble, timeouts).
    pub fn retryable(&self) -> bool {
        match self {
            UpstreamError::Connect(_)
            | UpstreamError::FirstByteTimeout(_)
            | UpstreamError::IdleTimeout(_)
            | UpstreamError::Body(_)
            | UpstreamError::Unfinished(_) => true,
            UpstreamError::Status { status, .. } => retryable_status(*status),
            UpstreamError::Invalid(_)
            | UpstreamError::Payload(_)
            | UpstreamError::AnswerLimit(_) => false,
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
            UpstreamError::Unfinished(_) => "upstream_unfinished",
            UpstreamError::Payload(switchyard_translate::UpstreamError::Reported { .. }) => {
                "upstream_reported"
            }
            UpstreamError::Payload(_) => "upstream_invalid",
            UpstreamError::AnswerLimit(_) => "answer_limit",
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

/// Client for one upstream endpoint.
#[derive(Clone)]
pub struct UpstreamClient {
    http: reqwest::Client,
    /// The URL, parsed once (not on every request).
    parsed_url: reqwest::Url,
    /// `Bearer <key>`, built once and marked sensitive (so HTTP tooling never prints it).
    bearer: Option<reqwest::header::HeaderValue>,
    /// The URL with any credentials in it masked (what records and logs name).
    url: String,
    first_byte: Duration,
    first_token: Duration,
    idle: Duration,
}

impl std::fmt::Debug for UpstreamClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UpstreamClient")
            .field("url", &self.url)
            .field("has_key", &self.bearer.is_some())
            .finish()
    }
}

/// An upstream response whose head arrived ([`UpstreamClient::send`] hands out only 2xx ones);
/// the body is read with [`UpstreamClient::body_stream`].
pub struct UpstreamResponse {
    status: u16,
    body: reqwest::Response,
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
    /// Build the client; the key is read by the caller from the configured env var.
    pub fn new(config: &GatewayConfig, api_key: Option<String>) -> Result<Self, ClientError> {
        let url = config.chat_completions_url();
        let parsed_url = reqwest::Url::parse(&url).map_err(|e| UpstreamUrlError(e.to_string()))?;
        let url = shown_url(&parsed_url);
        install_tls_provider();
        let http = reqwest::Client::builder()
            .connect_timeout(config.timeouts.connect())
            .tcp_nodelay(true)
            .pool_idle_timeout(POOL_IDLE_TIMEOUT)
            .build()?;
        let bearer = api_key
            .filter(|k| !k.is_empty())
            .map(|key| {
                let mut value = reqwest::header::HeaderValue::try_from(format!("Bearer {key}"))
                    .map_err(|_| ClientError::Key)?;
                value.set_sensitive(true);
                Ok::<_, ClientError>(value)
            })
            .transpose()?;
        Ok(Self {
            http,
            parsed_url,
            bearer,
            url,
            first_byte: config.timeouts.first_byte(),
            first_token: config.timeouts.first_token(),
            idle: config.timeouts.idle(),
        })
    }

    pub fn url(&self) -> &str {
        &self.url
    }

    /// Whether the upstream answers HTTP at its URL within `timeout` (any status: a 404 or 405
    /// for a `GET` of the Chat Completions path still says the server is there).
    pub async fn reachable(&self, timeout: Duration) -> Result<(), String> {
        let request = self.http.get(self.parsed_url.clone()).send();
        match tokio::time::timeout(timeout, request).await {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(e)) => Err(describe(e)),
            Err(_) => Err(format!("no answer within {timeout:?}")),
        }
    }

    /// A small JSON `POST` to another endpoint of the provider (its tokenizer), with the same
    /// key and connections; the answer is read up to 1 MiB within `timeout`.
    pub async fn post_json(
        &self,
        url: &str,
        body: &serde_json::Value,
        timeout: Duration,
    ) -> Result<serde_json::Value, String> {
        let mut request = self.http.post(url).json(body);
        if let Some(bearer) = &self.bearer {
            request = request.header(reqwest::header::AUTHORIZATION, bearer.clone());
        }
        let exchange = async {
            let mut response = request.send().await.map_err(describe)?;
            let status = response.status();
            let mut bytes = Vec::new();
            while let Some(chunk) = response.chunk().await.map_err(describe)? {
                if bytes.len() + chunk.len() > 1 << 20 {
                    return Err("the answer is over 1 MiB".to_owned());
                }
                bytes.extend_from_slice(&chunk);
            }
            if !status.is_success() {
                return Err(format!("HTTP {}", status.as_u16()));
            }
            serde_json::from_slice(&bytes).map_err(|e| format!("not JSON: {e}"))
        };
        tokio::time::timeout(timeout, exchange)
            .await
            .map_err(|_| format!("no answer within {timeout:?}"))?
    }

    /// Send one attempt; `Ok` only for a 2xx response head. Error bodies are read (bounded).
    /// `traceparent`: the W3C trace context of the exchange's span, sent along.
    pub async fn send(
        &self,
        body: &Bytes,
        traceparent: Option<&str>,
    ) -> Result<UpstreamResponse, UpstreamError> {
        let first_byte = self.first_byte;
        let timed_out = || UpstreamError::FirstByteTimeout(first_byte);
        let mut request = self
            .http
            .post(self.parsed_url.clone())
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(body.clone());
        if let Some(parent) = traceparent {
            request = request.header("traceparent", parent);
        }
        if let Some(bearer) = &self.bearer {
            request = request.header(reqwest::header::AUTHORIZATION, bearer.clone());
        }
        let response = tokio::time::timeout(first_byte, request.send())
            .await
            .map_err(|_| timed_out())?
            .map_err(|e| UpstreamError::Connect(describe(e)))?;
        let retry_after = retry_after_from_headers(response.headers());
        let status = response.status().as_u16();
        let body = response;
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

    /// The response body as a stream: the first chunk bounded by the first-token timeout (a
    /// local server may read a long prompt after sending its head), each later one by the idle
    /// timeout.
    pub fn body_stream(&self, response: UpstreamResponse) -> ByteStream {
        let (first_token, idle) = (self.first_token, self.idle);
        let chunks = Box::pin(response.body.bytes_stream());
        Box::pin(futures_util::stream::unfold(
            Some((chunks, first_token)),
            move |state| async move {
                let (mut chunks, bound) = state?;
                match tokio::time::timeout(bound, chunks.next()).await {
                    Err(_) => Some((Err(UpstreamError::IdleTimeout(bound)), None)),
                    Ok(None) => None,
                    Ok(Some(Ok(bytes))) => Some((Ok(bytes), Some((chunks, idle)))),
                    Ok(Some(Err(e))) => Some((Err(UpstreamError::Body(describe(e))), None)),
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

/// `stream`, failing with [`UpstreamError::Invalid`] once one server-sent event (the bytes
/// since the last blank line, line ends excluded) grows past `max` bytes.
pub fn bounded_events(stream: ByteStream, max: usize) -> ByteStream {
    let start = Some((stream, switchyard_protocol::sse::EventScan::default()));
    Box::pin(futures_util::stream::unfold(
        start,
        move |state| async move {
            let (mut stream, mut scan) = state?;
            match stream.next().await? {
                Ok(bytes) if scan.push(&bytes, max) => Some((Ok(bytes), Some((stream, scan)))),
                Ok(_) => {
                    let message = format!("an upstream server-sent event is over {max} bytes");
                    Some((Err(UpstreamError::Invalid(message)), None))
                }
                Err(e) => Some((Err(e), None)),
            }
        },
    ))
}

/// `url` as it may be shown: a user name and password written into it are masked.
fn shown_url(url: &reqwest::Url) -> String {
    let mut shown = url.clone();
    if !url.username().is_empty() {
        let _ = shown.set_username("***");
    }
    if url.password().is_some() {
        let _ = shown.set_password(Some("***"));
    }
    shown.to_string()
}

/// A reqwest error with its source chain, without its URL (which can carry credentials), and
/// never with headers, so never the key.
pub fn describe(e: reqwest::Error) -> String {
    let e = e.without_url();
    let mut text = e.to_string();
    let mut source = std::error::Error::source(&e);
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

    /// reqwest's own text names the URL, query included.
    #[tokio::test]
    async fn an_error_is_described_without_its_url() {
        install_tls_provider();
        let closed = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let url = format!("http://127.0.0.1:{closed}/v1?key=s3cr3t");
        let error = reqwest::Client::new().get(&url).send().await.unwrap_err();
        assert!(error.to_string().contains("s3cr3t"), "{error}");
        let described = describe(error);
        assert!(!described.contains("s3cr3t"), "{described}");
        assert!(!described.is_empty());
    }

    #[test]
    fn credentials_in_the_url_are_masked_where_it_is_shown() {
        let config = GatewayConfig::new("http://ann:p%40ss@127.0.0.1:9/v1", "m");
        let client = UpstreamClient::new(&config, None).unwrap();
        assert_eq!(
            client.url(),
            "http://***:***@127.0.0.1:9/v1/chat/completions"
        );
        assert!(!format!("{client:?}").contains("p%40ss"));
        let plain =
            UpstreamClient::new(&GatewayConfig::new("http://127.0.0.1:9/v1", "m"), None).unwrap();
        assert_eq!(plain.url(), "http://127.0.0.1:9/v1/chat/completions");
    }

    #[tokio::test]
    async fn sends_the_body_and_key_and_reads_the_answer() {
        let upstream = ChatUpstream::start(Script::always(Reply::completion_text("Hello")))
            .await
            .unwrap();
        let config = GatewayConfig::new(upstream.base_url(), "m");
        let sent = br#"{"model":"m","messages":[{"role":"user","content":"hi"}]}"#;
        let body = Bytes::from_static(sent);
        let client = UpstreamClient::new(&config, Some("sk-transport-test-1".to_owned())).unwrap();
        let response = client.send(&body, None).await.unwrap();
        assert_eq!(response.status(), 200);
        let answer = client.read_body(response, 1 << 20).await.unwrap();
        let answer: Value = serde_json::from_slice(&answer).unwrap();
        assert_eq!(answer["choices"][0]["message"]["content"], "Hello");
        let requests = upstream.requests();
        assert_eq!(requests.len(), 1);
        assert_eq!(requests[0].path, "/v1/chat/completions");
        assert_eq!(&requests[0].body[..], sent);
        assert_eq!(
            requests[0].header("authorization"),
            Some("Bearer sk-transport-test-1")
        );
        assert_eq!(requests[0].header("content-type"), Some("application/json"));
        assert!(
            !format!("{client:?}").contains("sk-transport"),
            "Debug hides the key"
        );
    }

    fn chunks(pieces: &[&'static str]) -> ByteStream {
        let pieces: Vec<Result<Bytes, UpstreamError>> = pieces
            .iter()
            .map(|p| Ok(Bytes::from_static(p.as_bytes())))
            .collect();
        Box::pin(futures_util::stream::iter(pieces))
    }

    async fn collect(stream: ByteStream) -> Vec<Result<Bytes, UpstreamError>> {
        stream.collect().await
    }

    #[tokio::test]
    async fn events_within_the_bound_pass_whole_across_chunks() {
        // Two events of 10 bytes each (line ends excluded), split anywhere, in every line-end style.
        let ok = chunks(&[
            "data: 1234\r\n",
            "\r\nda",
            "ta: 5678\n\n",
            "data: 9\r\rdata: 0\n\n",
        ]);
        let out = collect(bounded_events(ok, 10)).await;
        assert_eq!(out.len(), 4);
        assert!(out.iter().all(Result::is_ok));
    }

    #[tokio::test]
    async fn an_event_that_never_ends_is_cut_off() {
        // Lines that are each short, but no blank line ever ends the event.
        let endless = chunks(&["data: 12\n", "data: 34\n", "data: 56\n", "data: 78\n"]);
        let out = collect(bounded_events(endless, 20)).await;
        assert_eq!(
            out.len(),
            3,
            "the third line passes the bound and ends the stream"
        );
        assert!(matches!(&out[2], Err(UpstreamError::Invalid(m)) if m.contains("over 20 bytes")));
        let one_line = chunks(&["data: ", "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"]);
        let out = collect(bounded_events(one_line, 20)).await;
        assert!(matches!(out.last(), Some(Err(UpstreamError::Invalid(_)))));
    }
}
