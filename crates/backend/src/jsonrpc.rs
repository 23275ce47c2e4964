//! JSON lines on a guest's stdin with a request/response correlator, for controllers whose
//! control protocol is requests and answers over stdio (Codex's `app-server`: JSON-RPC without
//! the `jsonrpc` field; Claude Code's stream-json control protocol: `control_request` /
//! `control_response` with a `request_id`). A [`Dialect`] says how a message is written and
//! read; the [`Pump`] writes lines in order, hands each answer to the request that waits for
//! it, and gives the controller everything else (the guest's requests and notifications, and
//! what it cannot read, which the controller keeps as unrecognized).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio::sync::{mpsc, oneshot};

/// An error answer, or the end of the connection.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RpcError {
    #[error("the guest answered error {code}: {message}")]
    Answered {
        code: i64,
        message: String,
        data: Option<Value>,
    },
    #[error("the connection to the guest ended before the answer")]
    Closed,
}

/// A message read from the guest.
#[derive(Debug, Clone, PartialEq)]
pub enum Incoming {
    /// The answer to a request of ours (`id` as we wrote it).
    Response {
        id: String,
        result: Result<Value, RpcError>,
    },
    /// A request of the guest's, to answer with [`Pump::respond`].
    Request {
        id: Value,
        method: String,
        params: Value,
    },
    /// A notification of the guest's.
    Notification { method: String, params: Value },
    /// Anything else (kept by the controller as unrecognized).
    Other(Value),
}

/// How one control protocol writes and reads its messages.
pub trait Dialect: Send + Sync + 'static {
    /// Our request number `n` as its id.
    fn id(&self, n: u64) -> Value;
    fn request(&self, id: &Value, method: &str, params: Value) -> Value;
    fn notification(&self, method: &str, params: Value) -> Value;
    fn response(&self, id: &Value, result: Result<Value, RpcError>) -> Value;
    fn classify(&self, message: Value) -> Incoming;
}

/// JSON-RPC 2.0, with or without the `"jsonrpc": "2.0"` member (Codex's app-server omits it).
#[derive(Debug, Clone, Copy)]
pub struct JsonRpc {
    pub version_field: bool,
}

impl JsonRpc {
    fn envelope(&self, mut message: Value) -> Value {
        if self.version_field
            && let Some(object) = message.as_object_mut()
        {
            object.insert("jsonrpc".into(), json!("2.0"));
        }
        message
    }
}

/// An id as the text it is keyed by (a number or a string).
fn id_key(id: &Value) -> String {
    match id {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

impl Dialect for JsonRpc {
    fn id(&self, n: u64) -> Value {
        json!(n)
    }

    fn request(&self, id: &Value, method: &str, params: Value) -> Value {
        self.envelope(json!({"id": id, "method": method, "params": params}))
    }

    fn notification(&self, method: &str, params: Value) -> Value {
        self.envelope(json!({"method": method, "params": params}))
    }

    fn response(&self, id: &Value, result: Result<Value, RpcError>) -> Value {
        self.envelope(match result {
            Ok(result) => json!({"id": id, "result": result}),
            Err(RpcError::Answered {
                code,
                message,
                data,
            }) => {
                json!({"id": id, "error": {"code": code, "message": message, "data": data}})
            }
            Err(RpcError::Closed) => {
                json!({"id": id, "error": {"code": -32603, "message": "closed"}})
            }
        })
    }

    fn classify(&self, message: Value) -> Incoming {
        let id = message.get("id").filter(|id| !id.is_null()).cloned();
        let method = message
            .get("method")
            .and_then(Value::as_str)
            .map(str::to_owned);
        let params = message.get("params").cloned().unwrap_or(Value::Null);
        match (id, method) {
            (Some(id), Some(method)) => Incoming::Request { id, method, params },
            (None, Some(method)) => Incoming::Notification { method, params },
            (Some(id), None) => {
                if let Some(result) = message.get("result") {
                    Incoming::Response {
                        id: id_key(&id),
                        result: Ok(result.clone()),
                    }
                } else if let Some(error) = message.get("error") {
                    Incoming::Response {
                        id: id_key(&id),
                        result: Err(RpcError::Answered {
                            code: error.get("code").and_then(Value::as_i64).unwrap_or(0),
                            message: error
                                .get("message")
                                .and_then(Value::as_str)
                                .unwrap_or_default()
                                .to_owned(),
                            data: error.get("data").cloned(),
                        }),
                    }
                } else {
                    Incoming::Other(message)
                }
            }
            (None, None) => Incoming::Other(message),
        }
    }
}

type Waiting = Arc<Mutex<HashMap<String, oneshot::Sender<Result<Value, RpcError>>>>>;

/// Lines to a guest's stdin, and the correlation of our requests with its answers. Cheap to
/// clone; clones share the connection.
#[derive(Clone)]
pub struct Pump<D> {
    dialect: Arc<D>,
    lines: mpsc::Sender<String>,
    waiting: Waiting,
    next: Arc<AtomicU64>,
}

impl<D: Dialect> Pump<D> {
    /// A pump writing to `stdin`; `on_sent` sees every line as written (the raw record). The
    /// writer ends when every clone of the pump is dropped, or at the first failed write (then
    /// every waiting request gets [`RpcError::Closed`]).
    pub fn new(
        dialect: D,
        stdin: impl AsyncWrite + Unpin + Send + 'static,
        on_sent: impl Fn(&str) + Send + 'static,
    ) -> Self {
        let (lines, mut rx) = mpsc::channel::<String>(64);
        let waiting: Waiting = Arc::default();
        let on_failure = waiting.clone();
        tokio::spawn(async move {
            let mut stdin = stdin;
            while let Some(line) = rx.recv().await {
                let written = async {
                    stdin.write_all(line.as_bytes()).await?;
                    stdin.write_all(b"\n").await?;
                    stdin.flush().await
                };
                if written.await.is_err() {
                    break;
                }
                on_sent(&line);
            }
            fail_all(&on_failure);
        });
        Self {
            dialect: Arc::new(dialect),
            lines,
            waiting,
            next: Arc::default(),
        }
    }

    async fn write(&self, message: Value) -> Result<(), RpcError> {
        self.lines
            .send(message.to_string())
            .await
            .map_err(|_| RpcError::Closed)
    }

    /// Sends a request and waits for its answer.
    pub async fn request(&self, method: &str, params: Value) -> Result<Value, RpcError> {
        let id = self.dialect.id(self.next.fetch_add(1, Ordering::Relaxed));
        let (tx, rx) = oneshot::channel();
        self.waiting
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(id_key(&id), tx);
        self.write(self.dialect.request(&id, method, params))
            .await?;
        rx.await.unwrap_or(Err(RpcError::Closed))
    }

    pub async fn notify(&self, method: &str, params: Value) -> Result<(), RpcError> {
        self.write(self.dialect.notification(method, params)).await
    }

    /// Answers the guest's request `id`.
    pub async fn respond(
        &self,
        id: &Value,
        result: Result<Value, RpcError>,
    ) -> Result<(), RpcError> {
        self.write(self.dialect.response(id, result)).await
    }

    /// One line the guest wrote: an answer goes to its request (and is returned as such, for
    /// the record); anything else is the controller's. A line that is not JSON is `Other`.
    pub fn receive(&self, line: &str) -> Incoming {
        let Ok(message) = serde_json::from_str::<Value>(line) else {
            return Incoming::Other(Value::String(line.to_owned()));
        };
        let incoming = self.dialect.classify(message);
        if let Incoming::Response { id, result } = &incoming {
            let waiter = self
                .waiting
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .remove(id);
            if let Some(waiter) = waiter {
                let _ = waiter.send(result.clone());
            }
        }
        incoming
    }

    /// The guest is gone: every waiting request gets [`RpcError::Closed`].
    pub fn close(&self) {
        fail_all(&self.waiting);
    }
}

fn fail_all(waiting: &Waiting) {
    let waiters: Vec<_> = waiting
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .drain()
        .collect();
    for (_, waiter) in waiters {
        let _ = waiter.send(Err(RpcError::Closed));
    }
}

#[cfg(test)]
#[path = "jsonrpc_tests.rs"]
mod tests;
