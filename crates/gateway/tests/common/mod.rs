//! Shared helpers for the gateway integration tests: start a gateway in front of a scripted
//! Chat Completions upstream, send Google-shaped requests, read SSE frames.
#![allow(dead_code)]

use std::time::Duration;

use futures_util::StreamExt;
use serde_json::{Value, json};
use switchyard_gateway::{Gateway, GatewayConfig, GatewayDeps, GatewayHandle};
use switchyard_testkit::chat_upstream::{ChatUpstream, Script};

/// Generous bound for anything that should happen "soon" (never a timing assertion).
pub const WATCHDOG: Duration = Duration::from_secs(30);

pub const UPSTREAM_MODEL: &str = "scripted-upstream-model";
pub const UPSTREAM_KEY: &str = "sk-test-upstream-key-123";

pub async fn within<T>(what: &str, f: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(WATCHDOG, f)
        .await
        .unwrap_or_else(|_| panic!("watchdog: {what} did not happen within {WATCHDOG:?}"))
}

pub async fn start(
    script: Script,
    tweak: impl FnOnce(&mut GatewayConfig),
) -> (ChatUpstream, GatewayHandle) {
    let upstream = ChatUpstream::start(script)
        .await
        .expect("scripted upstream");
    let mut config = GatewayConfig::new(upstream.base_url(), UPSTREAM_MODEL);
    config.retries.initial_backoff_ms = 10;
    tweak(&mut config);
    let handle = Gateway::start_with(
        config,
        GatewayDeps {
            upstream_key: Some(UPSTREAM_KEY.into()),
            ..GatewayDeps::default()
        },
    )
    .await
    .expect("gateway starts");
    (upstream, handle)
}

pub fn client() -> reqwest::Client {
    switchyard_gateway::upstream::install_tls_provider();
    reqwest::Client::new()
}

pub fn user_request(prompt: &str) -> Value {
    json!({
        "contents": [{"role": "user", "parts": [{"text": prompt}]}],
        "generationConfig": {"temperature": 1}
    })
}

pub fn url(handle: &GatewayHandle, model: &str, method: &str) -> String {
    let query = if method == "streamGenerateContent" {
        "?alt=sse"
    } else {
        ""
    };
    format!(
        "{}/v1beta/models/{model}:{method}{query}",
        handle.base_url()
    )
}

pub async fn post(
    handle: &GatewayHandle,
    model: &str,
    method: &str,
    body: &Value,
) -> reqwest::Response {
    within(
        "guest request",
        client()
            .post(url(handle, model, method))
            .header("x-goog-api-key", "k")
            .json(body)
            .send(),
    )
    .await
    .expect("gateway answers")
}

/// Reads `data: <json>\r\n\r\n` frames from a guest SSE response.
pub struct Frames {
    stream: futures_util::stream::BoxStream<'static, reqwest::Result<bytes::Bytes>>,
    buffer: Vec<u8>,
    /// Raw bytes seen, for framing assertions.
    pub raw: Vec<u8>,
}

impl Frames {
    pub fn new(response: reqwest::Response) -> Self {
        assert_eq!(response.status(), 200, "stream response status");
        Self {
            stream: response.bytes_stream().boxed(),
            buffer: Vec::new(),
            raw: Vec::new(),
        }
    }

    /// The next frame's JSON, or `None` at the end of the stream.
    pub async fn next(&mut self) -> Option<Value> {
        loop {
            if let Some(pos) = find(&self.buffer, b"\r\n\r\n") {
                let frame: Vec<u8> = self.buffer.drain(..pos + 4).collect();
                let text = std::str::from_utf8(&frame[..pos]).expect("utf-8 frame");
                let json = text
                    .strip_prefix("data: ")
                    .unwrap_or_else(|| panic!("frame without data prefix: {text:?}"));
                assert!(!json.contains('\n'), "frame must be single-line: {json:?}");
                return Some(serde_json::from_str(json).expect("frame is JSON"));
            }
            match within("next guest frame", self.stream.next()).await {
                Some(chunk) => {
                    let chunk = chunk.expect("guest stream bytes");
                    self.raw.extend_from_slice(&chunk);
                    self.buffer.extend_from_slice(&chunk);
                }
                None => {
                    if self.buffer.is_empty() {
                        return None;
                    }
                    // A raw error chunk (not an SSE frame).
                    let rest = std::mem::take(&mut self.buffer);
                    return Some(
                        serde_json::from_slice(&rest).expect("trailing bytes are a JSON error"),
                    );
                }
            }
        }
    }

    pub async fn all(&mut self) -> Vec<Value> {
        let mut out = Vec::new();
        while let Some(f) = self.next().await {
            out.push(f);
        }
        out
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

pub fn parts(frame: &Value) -> Vec<Value> {
    frame["candidates"][0]["content"]["parts"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

pub fn function_calls(frames: &[Value]) -> Vec<Value> {
    frames
        .iter()
        .flat_map(parts)
        .filter_map(|p| p.get("functionCall").cloned())
        .collect()
}

pub fn text_of(frames: &[Value]) -> String {
    frames
        .iter()
        .flat_map(parts)
        .filter_map(|p| p.get("text").and_then(Value::as_str).map(str::to_string))
        .collect()
}

/// A gateway whose upstream is a loopback port nothing listens on (bound, then released),
/// with short backoffs.
pub async fn dead_upstream_gateway() -> GatewayHandle {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .expect("a free port")
        .local_addr()
        .expect("its address")
        .port();
    let mut config = GatewayConfig::new(format!("http://127.0.0.1:{port}/v1"), "m");
    config.retries.initial_backoff_ms = 10;
    Gateway::start(config).await.expect("gateway starts")
}
