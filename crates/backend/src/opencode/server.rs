//! The HTTP client of a running `opencode serve` (loopback only, HTTP Basic auth): the calls a
//! run makes, each with a deadline, every body read within a bound, and the server-sent event
//! stream (`GET /event`) bounded per event.

use std::time::Duration;

use base64::Engine as _;
use futures_util::{Stream, StreamExt};
use serde_json::{Value, json};

use crate::secret::Secret;

/// Largest response body read (a session's messages included).
pub const MAX_BODY: usize = 64 * 1024 * 1024;
/// Largest server-sent event accepted.
pub const MAX_EVENT: usize = 16 * 1024 * 1024;
/// Deadline of one command (not of the event stream).
pub const COMMAND_TIMEOUT: Duration = Duration::from_secs(30);

/// Why a call to the server failed.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ServerError {
    #[error("opencode serve: {0}")]
    Connect(String),
    #[error("opencode serve answered {method} {path} with HTTP {status}: {body}")]
    Status {
        method: &'static str,
        path: String,
        status: u16,
        body: String,
    },
    #[error("opencode serve sent an unusable answer to {path}: {reason}")]
    Invalid { path: String, reason: String },
    #[error("opencode serve did not answer {path} within {0:?}", COMMAND_TIMEOUT)]
    Timeout { path: String },
}

/// A client of one server, scoped to one workspace directory.
#[derive(Clone)]
pub struct ServerClient {
    http: reqwest::Client,
    base: String,
    authorization: reqwest::header::HeaderValue,
    directory: String,
}

impl std::fmt::Debug for ServerClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerClient")
            .field("base", &self.base)
            .field("directory", &self.directory)
            .finish_non_exhaustive()
    }
}

impl ServerClient {
    /// A client of the server at `base` (`http://127.0.0.1:<port>`) for `directory`.
    pub fn new(
        base: &str,
        user: &str,
        password: &Secret,
        directory: &str,
    ) -> Result<Self, ServerError> {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let http = reqwest::Client::builder()
            .no_proxy()
            .build()
            .map_err(|e| ServerError::Connect(e.to_string()))?;
        let credentials = base64::engine::general_purpose::STANDARD
            .encode(format!("{user}:{}", password.expose()));
        let mut authorization =
            reqwest::header::HeaderValue::try_from(format!("Basic {credentials}"))
                .map_err(|e| ServerError::Connect(e.to_string()))?;
        authorization.set_sensitive(true);
        Ok(Self {
            http,
            base: base.trim_end_matches('/').to_owned(),
            authorization,
            directory: directory.to_owned(),
        })
    }

    fn request(&self, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
        self.http
            .request(method, format!("{}{path}", self.base))
            .header(reqwest::header::AUTHORIZATION, self.authorization.clone())
            .header("x-opencode-directory", &self.directory)
    }

    async fn call(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<&Value>,
    ) -> Result<Value, ServerError> {
        let shown: &'static str = match method {
            reqwest::Method::GET => "GET",
            _ => "POST",
        };
        let mut request = self.request(method, path);
        if let Some(body) = body {
            request = request.json(body);
        }
        let exchange = async {
            let response = request
                .send()
                .await
                .map_err(|e| ServerError::Connect(e.to_string()))?;
            let status = response.status().as_u16();
            let bytes = read_bounded(response, MAX_BODY, path).await?;
            if !(200..300).contains(&status) {
                let text: String = String::from_utf8_lossy(&bytes).chars().take(2000).collect();
                return Err(ServerError::Status {
                    method: shown,
                    path: path.to_owned(),
                    status,
                    body: text,
                });
            }
            if bytes.is_empty() {
                return Ok(Value::Null);
            }
            serde_json::from_slice(&bytes).map_err(|e| ServerError::Invalid {
                path: path.to_owned(),
                reason: e.to_string(),
            })
        };
        tokio::time::timeout(COMMAND_TIMEOUT, exchange)
            .await
            .map_err(|_| ServerError::Timeout {
                path: path.to_owned(),
            })?
    }

    /// `GET /global/health` answered `healthy: true`.
    pub async fn healthy(&self) -> bool {
        matches!(
            self.call(reqwest::Method::GET, "/global/health", None).await,
            Ok(v) if v.get("healthy") == Some(&Value::Bool(true))
        )
    }

    /// `GET path` as JSON.
    pub async fn get(&self, path: &str) -> Result<Value, ServerError> {
        self.call(reqwest::Method::GET, path, None).await
    }

    /// `POST path` with a JSON body.
    pub async fn post(&self, path: &str, body: &Value) -> Result<Value, ServerError> {
        self.call(reqwest::Method::POST, path, Some(body)).await
    }

    /// `POST /session {title}`: the new session's id.
    pub async fn create_session(&self, title: &str) -> Result<String, ServerError> {
        let session = self.post("/session", &json!({"title": title})).await?;
        session
            .get("id")
            .and_then(Value::as_str)
            .map(str::to_owned)
            .ok_or_else(|| ServerError::Invalid {
                path: "/session".into(),
                reason: format!("no session id in {session}"),
            })
    }

    /// `POST /session/:id/prompt_async`: the prompt is queued; everything else arrives as
    /// events.
    pub async fn prompt(
        &self,
        session: &str,
        text: &str,
        provider: &str,
        model: &str,
    ) -> Result<(), ServerError> {
        let body = json!({
            "parts": [{"type": "text", "text": text}],
            "model": {"providerID": provider, "modelID": model},
        });
        self.post(&format!("/session/{session}/prompt_async"), &body)
            .await
            .map(drop)
    }

    /// `POST /session/:id/abort`.
    pub async fn abort(&self, session: &str) -> Result<(), ServerError> {
        self.post(&format!("/session/{session}/abort"), &json!({}))
            .await
            .map(drop)
    }

    /// `POST /permission/:id/reply`: `once`, or `reject` with a message (the form that lets
    /// the loop go on: a bare reject stops the session's loop).
    pub async fn reply_permission(
        &self,
        request: &str,
        allow: bool,
        message: &str,
    ) -> Result<(), ServerError> {
        let body = if allow {
            json!({"reply": "once"})
        } else {
            json!({"reply": "reject", "message": message})
        };
        self.post(&format!("/permission/{request}/reply"), &body)
            .await
            .map(drop)
    }

    /// `POST /question/:id/reject`.
    pub async fn reject_question(&self, request: &str) -> Result<(), ServerError> {
        self.post(&format!("/question/{request}/reject"), &json!({}))
            .await
            .map(drop)
    }

    /// `GET /session/:id/message`: every message with its parts (to resync after the event
    /// stream dropped).
    pub async fn messages(&self, session: &str) -> Result<Value, ServerError> {
        self.get(&format!("/session/{session}/message")).await
    }

    /// `GET /event`: the data of each server-sent event, as received, until the stream ends.
    pub async fn events(
        &self,
    ) -> Result<impl Stream<Item = Result<String, ServerError>> + Send + 'static, ServerError> {
        use eventsource_stream::Eventsource;
        let response = tokio::time::timeout(
            COMMAND_TIMEOUT,
            self.request(reqwest::Method::GET, "/event")
                .header(reqwest::header::ACCEPT, "text/event-stream")
                .send(),
        )
        .await
        .map_err(|_| ServerError::Timeout {
            path: "/event".into(),
        })?
        .map_err(|e| ServerError::Connect(e.to_string()))?;
        let status = response.status().as_u16();
        if status != 200 {
            return Err(ServerError::Status {
                method: "GET",
                path: "/event".into(),
                status,
                body: String::new(),
            });
        }
        let mut scan = switchyard_protocol::sse::EventScan::default();
        let bytes = response.bytes_stream().map(move |chunk| match chunk {
            Ok(bytes) if scan.push(&bytes, MAX_EVENT) => Ok(bytes),
            Ok(_) => Err(format!("a server-sent event over {MAX_EVENT} bytes")),
            Err(e) => Err(e.to_string()),
        });
        Ok(bytes.eventsource().map(|event| match event {
            Ok(event) => Ok(event.data),
            Err(e) => Err(ServerError::Connect(format!("the event stream broke: {e}"))),
        }))
    }
}

async fn read_bounded(
    response: reqwest::Response,
    max: usize,
    path: &str,
) -> Result<Vec<u8>, ServerError> {
    let mut body = Vec::new();
    let mut stream = response.bytes_stream();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|e| ServerError::Connect(e.to_string()))?;
        if body.len() + chunk.len() > max {
            return Err(ServerError::Invalid {
                path: path.to_owned(),
                reason: format!("a body over {max} bytes"),
            });
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}
