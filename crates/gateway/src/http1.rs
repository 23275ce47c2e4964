//! A lean HTTP/1.1 client for plain `http://` upstreams (vLLM, llama.cpp, Ollama on this machine
//! or network). `https://` upstreams keep using reqwest (see `upstream.rs`).
//!
//! Why not reqwest for these too: an open upstream stream through hyper's client holds an 8 KiB
//! read buffer, an 8 KiB write buffer and a ~9 KB dispatch channel, and the connection runs in a
//! task of its own, so each request and each response crosses between tasks (often between
//! threads). This client keeps the connection inside the request's own future:
//! * the request is written straight from its pieces (head, then the body's shared segments) with
//!   vectored writes, no write buffer;
//! * a read buffer exists only while bytes are waiting: the socket's readiness is awaited with
//!   no buffer held, then what is there is read (through a 4 KiB scratch array into a buffer of
//!   its own size; reads that fill it go on into buffers doubling up to 64 KiB);
//! * the response head is parsed by `httparse`; the body is framed by `Content-Length`, by
//!   chunked transfer coding or by the end of the connection (decoded by `crate::wire`, which
//!   the guest-facing `ingress.rs` uses too).
//!
//! A connection goes back to the idle pool only after its response body was read to its end and
//! neither side asked to close; a body dropped early closes its connection unless the rest of
//! the body has already arrived (then it is read off without waiting). A pooled connection
//! is checked before reuse (no byte and no end-of-stream waiting), and a request on a reused
//! connection that gets no response byte at all is sent once more on a new connection (the
//! server may have closed the idle connection at the moment it was taken).
//!
//! A server that answers before it has read the whole request (a 413 for a body too large) and
//! closes makes the write fail; the answer it sent is then read and returned, as any other.
//!
//! Proxies: connections go straight to the upstream's address; `HTTP_PROXY` and the like are
//! not consulted (reqwest, used for `https://`, honours them).

use std::io::{self, IoSlice};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use bytes::{Buf, Bytes, BytesMut};
use tokio::net::TcpStream;

use crate::wire::{Chunk, Framing, write_all};

/// Smallest read (and the first read of each response).
const MIN_READ: usize = 4 * 1024;

/// Largest read: reads double up to this while they fill the buffer.
const MAX_READ: usize = 64 * 1024;

/// Largest response head accepted.
const MAX_HEAD: usize = 64 * 1024;

/// Most headers in a response head (hyper's default too).
const MAX_HEADERS: usize = 100;

/// Most idle connections kept.
const MAX_IDLE: usize = 1024;

/// Why a request failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Http1Error {
    #[error("cannot connect to {target}: {source}")]
    Connect { target: String, source: io::Error },
    #[error("connecting to {0} timed out")]
    ConnectTimeout(String),
    #[error("sending the request failed: {0}")]
    Send(io::Error),
    #[error("the connection closed before a response arrived")]
    ClosedBeforeResponse,
    #[error("the connection failed before a response arrived: {0}")]
    ResetBeforeResponse(io::Error),
    #[error("reading the response failed: {0}")]
    Receive(io::Error),
    #[error("the response is not valid HTTP/1.1: {0}")]
    Invalid(String),
}

impl Http1Error {
    /// True when the server cannot have answered: the request was not fully sent, or the
    /// connection ended before any response byte.
    fn nothing_received(&self) -> bool {
        matches!(
            self,
            Http1Error::Send(_)
                | Http1Error::ClosedBeforeResponse
                | Http1Error::ResetBeforeResponse(_)
        )
    }
}

/// Why a client cannot be made for a URL and key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub(crate) enum Http1ConfigError {
    #[error("only http:// URLs are served by this client")]
    NotHttp,
    #[error("the URL has no host")]
    NoHost,
    #[error("the Authorization value has control characters")]
    ControlCharacters,
}

/// Where to connect.
#[derive(Debug, Clone)]
enum ConnectTarget {
    Address(SocketAddr),
    Name(String, u16),
}

impl std::fmt::Display for ConnectTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ConnectTarget::Address(address) => write!(f, "{address}"),
            ConnectTarget::Name(host, port) => write!(f, "{host}:{port}"),
        }
    }
}

/// A connection in the idle pool.
struct Idle {
    stream: TcpStream,
    since: Instant,
}

struct Inner {
    target: ConnectTarget,
    /// `POST <path> HTTP/1.1`, `Host`, `Content-Type`, `Accept`, and `Authorization` when there
    /// is a key (so this is never printed). `Content-Length` and the blank line follow.
    head_prefix: Vec<u8>,
    connect_timeout: Duration,
    idle_timeout: Duration,
    idle: Mutex<Vec<Idle>>,
}

/// Client for one `http://` URL; cheap to clone (connections are shared).
#[derive(Clone)]
pub(crate) struct Http1Client {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Http1Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Http1Client")
            .field("target", &self.inner.target)
            .finish_non_exhaustive()
    }
}

/// A response head, and the body still to read.
pub(crate) struct Http1Response {
    pub status: u16,
    /// Set only for non-2xx responses (only their `Retry-After` is needed).
    pub headers: http::HeaderMap,
    pub body: Http1Body,
}

impl Http1Client {
    /// A client POSTing JSON to `url` (must be `http://`), with `authorization` as the value of
    /// the `Authorization` header when given.
    pub fn new(
        url: &reqwest::Url,
        authorization: Option<&str>,
        connect_timeout: Duration,
        idle_timeout: Duration,
    ) -> Result<Self, Http1ConfigError> {
        if url.scheme() != "http" {
            return Err(Http1ConfigError::NotHttp);
        }
        let port = url.port_or_known_default().unwrap_or(80);
        let target = match url.host() {
            Some(url::Host::Ipv4(ip)) => ConnectTarget::Address(SocketAddr::from((ip, port))),
            Some(url::Host::Ipv6(ip)) => ConnectTarget::Address(SocketAddr::from((ip, port))),
            Some(url::Host::Domain(name)) => ConnectTarget::Name(name.to_owned(), port),
            None => return Err(Http1ConfigError::NoHost),
        };
        let host = url.host_str().unwrap_or_default();
        let authority = match url.port() {
            Some(port) => format!("{host}:{port}"),
            None => host.to_owned(),
        };
        let mut path = url.path().to_owned();
        if let Some(query) = url.query() {
            path.push('?');
            path.push_str(query);
        }
        let mut head_prefix = format!(
            "POST {path} HTTP/1.1\r\nhost: {authority}\r\ncontent-type: application/json\r\naccept: */*\r\n"
        )
        .into_bytes();
        if let Some(value) = authorization {
            if value.bytes().any(|b| b.is_ascii_control()) {
                return Err(Http1ConfigError::ControlCharacters);
            }
            head_prefix.extend_from_slice(b"authorization: ");
            head_prefix.extend_from_slice(value.as_bytes());
            head_prefix.extend_from_slice(b"\r\n");
        }
        Ok(Self {
            inner: Arc::new(Inner {
                target,
                head_prefix,
                connect_timeout,
                idle_timeout,
                idle: Mutex::new(Vec::new()),
            }),
        })
    }

    /// POSTs the body made of `pieces` (in order) and returns once the response head arrived.
    pub async fn post(&self, pieces: &[Bytes]) -> Result<Http1Response, Http1Error> {
        let length: usize = pieces.iter().map(Bytes::len).sum();
        let mut head = Vec::with_capacity(self.inner.head_prefix.len() + 32);
        head.extend_from_slice(&self.inner.head_prefix);
        head.extend_from_slice(format!("content-length: {length}\r\n\r\n").as_bytes());
        if let Some(stream) = self.take_idle() {
            match self.exchange(stream, &head, pieces).await {
                Ok(response) => return Ok(response),
                // The server closed the idle connection as it was taken: nothing was received,
                // so nothing was processed; send again on a new connection.
                Err(e) if e.nothing_received() => {}
                Err(other) => return Err(other),
            }
        }
        let stream = self.connect().await?;
        self.exchange(stream, &head, pieces).await
    }

    async fn connect(&self) -> Result<TcpStream, Http1Error> {
        let target = &self.inner.target;
        let connecting = async {
            match target {
                ConnectTarget::Address(address) => TcpStream::connect(address).await,
                ConnectTarget::Name(host, port) => TcpStream::connect((host.as_str(), *port)).await,
            }
        };
        let stream = tokio::time::timeout(self.inner.connect_timeout, connecting)
            .await
            .map_err(|_| Http1Error::ConnectTimeout(target.to_string()))?
            .map_err(|source| Http1Error::Connect {
                target: target.to_string(),
                source,
            })?;
        let _ = stream.set_nodelay(true);
        Ok(stream)
    }

    /// The most recently used idle connection that is still open and quiet, if any.
    fn take_idle(&self) -> Option<TcpStream> {
        let mut idle = self
            .inner
            .idle
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let now = Instant::now();
        idle.retain(|c| now.duration_since(c.since) < self.inner.idle_timeout);
        while let Some(Idle { stream, .. }) = idle.pop() {
            // Alive and quiet: nothing to read and no end-of-stream.
            if let Err(e) = stream.try_read(&mut [0u8; 1])
                && e.kind() == io::ErrorKind::WouldBlock
            {
                return Some(stream);
            }
        }
        None
    }

    async fn exchange(
        &self,
        stream: TcpStream,
        head: &[u8],
        pieces: &[Bytes],
    ) -> Result<Http1Response, Http1Error> {
        let mut buffer = ReadBuffer::default();
        if let Err(sending) = write_request(&stream, head, pieces).await {
            // The server may have answered before reading the whole request (a 413, say) and
            // closed: that answer, if it arrived, says more than the failed write.
            return match read_head(&stream, &mut buffer).await {
                Ok(mut head) => {
                    head.keep_alive = false;
                    Ok(self.response(stream, buffer, head))
                }
                Err(_) => Err(Http1Error::Send(sending)),
            };
        }
        let head = read_head(&stream, &mut buffer).await?;
        Ok(self.response(stream, buffer, head))
    }

    fn response(&self, stream: TcpStream, buffer: ReadBuffer, head: Head) -> Http1Response {
        let framing = if head.status == 204 || head.status == 304 {
            Framing::Length(0)
        } else {
            head.framing
        };
        Http1Response {
            status: head.status,
            headers: head.headers,
            body: Http1Body {
                stream: Some(stream),
                buffer,
                framing,
                keep_alive: head.keep_alive,
                client: self.clone(),
            },
        }
    }

    fn put_idle(&self, stream: TcpStream) {
        let mut idle = self
            .inner
            .idle
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if idle.len() >= MAX_IDLE {
            idle.remove(0);
        }
        idle.push(Idle {
            stream,
            since: Instant::now(),
        });
    }
}

/// Reads the final response head (interim 1xx heads are skipped); what follows it stays in
/// `buffer`.
async fn read_head(stream: &TcpStream, buffer: &mut ReadBuffer) -> Result<Head, Http1Error> {
    loop {
        let head = loop {
            if let Some(head) = parse_head(buffer.bytes())? {
                break head;
            }
            if buffer.bytes().len() > MAX_HEAD {
                return Err(Http1Error::Invalid("response head too large".into()));
            }
            let read = match buffer.read(stream).await {
                Ok(read) => read,
                Err(e) if buffer.bytes().is_empty() => {
                    return Err(Http1Error::ResetBeforeResponse(e));
                }
                Err(e) => return Err(Http1Error::Receive(e)),
            };
            if read == 0 {
                return Err(if buffer.bytes().is_empty() {
                    Http1Error::ClosedBeforeResponse
                } else {
                    Http1Error::Invalid("the connection closed inside the head".into())
                });
            }
        };
        buffer.consume(head.length);
        // Interim responses (100 Continue, 103 Early Hints) precede the real one.
        if !(100..200).contains(&head.status) {
            return Ok(head);
        }
    }
}

/// Writes `head` then `pieces` with vectored writes (nothing copied).
async fn write_request(stream: &TcpStream, head: &[u8], pieces: &[Bytes]) -> io::Result<()> {
    let mut slices: Vec<IoSlice<'_>> = std::iter::once(head)
        .chain(pieces.iter().map(|piece| &piece[..]))
        .filter(|slice| !slice.is_empty())
        .map(IoSlice::new)
        .collect();
    write_all(stream, &mut slices).await
}

/// A parsed response head.
struct Head {
    /// Bytes the head took.
    length: usize,
    status: u16,
    headers: http::HeaderMap,
    framing: Framing,
    keep_alive: bool,
}

/// The head at the start of `bytes`, `None` when it is not complete yet.
fn parse_head(bytes: &[u8]) -> Result<Option<Head>, Http1Error> {
    let mut slots = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut response = httparse::Response::new(&mut slots);
    let length = match response.parse(bytes) {
        Ok(httparse::Status::Complete(length)) => length,
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(e) => return Err(Http1Error::Invalid(e.to_string())),
    };
    let status = response.code.unwrap_or_default();
    let mut keep_alive = response.version == Some(1);
    let mut content_length: Option<u64> = None;
    let mut chunked = false;
    let mut transfer_encoding = false;
    let mut headers = http::HeaderMap::new();
    let success = (200..300).contains(&status);
    for header in response.headers.iter() {
        let name = header.name;
        let value = header.value;
        if name.eq_ignore_ascii_case("content-length") {
            let parsed = std::str::from_utf8(value)
                .ok()
                .and_then(|v| v.trim().parse::<u64>().ok())
                .ok_or_else(|| Http1Error::Invalid("invalid Content-Length".into()))?;
            if content_length.is_some_and(|known| known != parsed) {
                return Err(Http1Error::Invalid("conflicting Content-Length".into()));
            }
            content_length = Some(parsed);
        } else if name.eq_ignore_ascii_case("transfer-encoding") {
            transfer_encoding = true;
            // Only the last coding decides whether the body is chunked.
            chunked = value
                .rsplit(|&b| b == b',')
                .next()
                .is_some_and(|last| last.trim_ascii().eq_ignore_ascii_case(b"chunked"));
        } else if name.eq_ignore_ascii_case("connection")
            && value
                .split(|&b| b == b',')
                .any(|token| token.trim_ascii().eq_ignore_ascii_case(b"close"))
        {
            keep_alive = false;
        }
        if !success
            && let (Ok(name), Ok(value)) = (
                http::HeaderName::from_bytes(name.as_bytes()),
                http::HeaderValue::from_bytes(value),
            )
        {
            headers.append(name, value);
        }
    }
    let framing = if transfer_encoding {
        if chunked {
            Framing::Chunked(Chunk::Size)
        } else {
            // A transfer coding other than chunked last: the body ends with the connection.
            Framing::UntilClose
        }
    } else {
        match content_length {
            Some(length) => Framing::Length(length),
            None => Framing::UntilClose,
        }
    };
    if matches!(framing, Framing::UntilClose) {
        keep_alive = false;
    }
    Ok(Some(Head {
        length,
        status,
        headers,
        framing,
        keep_alive,
    }))
}

/// Bytes read and not consumed yet; holds no allocation while it is empty.
#[derive(Default)]
struct ReadBuffer {
    bytes: BytesMut,
    /// The next read's size (small reads go through a scratch array first).
    next_read: usize,
}

impl ReadBuffer {
    fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    fn consume(&mut self, count: usize) {
        self.bytes.advance(count);
    }

    /// Waits until the socket is readable, then reads what is there. `Ok(0)` at end of stream.
    ///
    /// A small read (an SSE event, a response head) is read into a scratch array and kept in an
    /// allocation of its own size: many streams may each hold an unprocessed read at once (a
    /// burst of answers), and a 4 KiB buffer apiece would add up. Reads that fill the scratch
    /// array continue straight into a larger buffer.
    async fn read(&mut self, stream: &TcpStream) -> io::Result<usize> {
        if self.bytes.is_empty() {
            // Nothing kept: give the allocation back before waiting (an idle stream holds none).
            self.bytes = BytesMut::new();
        }
        loop {
            stream.readable().await?;
            if self.next_read <= MIN_READ {
                let mut scratch = [0u8; MIN_READ];
                match stream.try_read(&mut scratch) {
                    Ok(read) if read < MIN_READ => {
                        self.bytes.extend_from_slice(&scratch[..read]);
                        return Ok(read);
                    }
                    Ok(read) => {
                        // More is likely waiting: read on with a larger buffer next time.
                        self.bytes.extend_from_slice(&scratch);
                        self.next_read = MIN_READ * 2;
                        return Ok(read);
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                    Err(e) => return Err(e),
                }
            }
            let size = self.next_read.min(MAX_READ);
            self.bytes.reserve(size);
            let spare = self.bytes.capacity() - self.bytes.len();
            match stream.try_read_buf(&mut self.bytes) {
                Ok(read) => {
                    // Double while reads fill the buffer; back to small reads once they do not.
                    self.next_read = if read >= spare { size * 2 } else { MIN_READ };
                    return Ok(read);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                Err(e) => return Err(e),
            }
        }
    }
}

/// The body of an [`Http1Response`].
pub(crate) struct Http1Body {
    /// `None` once the body ended (the connection went back to the pool or was closed).
    stream: Option<TcpStream>,
    buffer: ReadBuffer,
    framing: Framing,
    keep_alive: bool,
    client: Http1Client,
}

impl Http1Body {
    /// The next piece of the body; `None` at its end.
    pub async fn next(&mut self) -> Option<Result<Bytes, Http1Error>> {
        loop {
            match self.step() {
                Ok(Some(bytes)) => return Some(Ok(bytes)),
                Ok(None) if self.framing == Framing::Done => {
                    self.finish();
                    return None;
                }
                Ok(None) => {}
                Err(e) => return Some(Err(self.fail(e))),
            }
            let stream = self.stream.as_ref()?;
            match self.buffer.read(stream).await {
                Ok(0) if self.framing == Framing::UntilClose => {
                    self.framing = Framing::Done;
                    self.keep_alive = false;
                }
                Ok(0) => {
                    let cut = io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "the connection closed before the body ended",
                    );
                    return Some(Err(self.fail(Http1Error::Receive(cut))));
                }
                Ok(_) => {}
                Err(e) => return Some(Err(self.fail(Http1Error::Receive(e)))),
            }
        }
    }

    /// Ends the body with `error`; the connection is closed (never reused).
    fn fail(&mut self, error: Http1Error) -> Http1Error {
        self.stream = None;
        self.framing = Framing::Done;
        error
    }

    /// Advances through what is buffered: body bytes, or `None` when more must be read (or
    /// the body ended: then `framing` is `Done`).
    fn step(&mut self) -> Result<Option<Bytes>, Http1Error> {
        self.framing
            .next_piece(&mut self.buffer.bytes)
            .map_err(|e| Http1Error::Invalid(e.to_string()))
    }

    /// Reads the rest of the body from what has already arrived (no waiting), so that a body
    /// dropped right after its last event (an SSE stream after `[DONE]`) still returns its
    /// connection to the pool. Gives up after [`MAX_READ`] bytes.
    fn drain_arrived(&mut self) {
        let mut discarded = 0;
        while self.stream.is_some() && self.framing != Framing::Done && discarded <= MAX_READ {
            match self.step() {
                Ok(Some(bytes)) => {
                    discarded += bytes.len();
                    continue;
                }
                Ok(None) if self.framing == Framing::Done => break,
                Ok(None) => {}
                Err(_) => return,
            }
            let Some(stream) = &self.stream else { return };
            self.buffer.bytes.reserve(MIN_READ);
            match stream.try_read_buf(&mut self.buffer.bytes) {
                Ok(read) if read > 0 => {}
                _ => return,
            }
        }
        if self.framing == Framing::Done {
            self.finish();
        }
    }

    /// The body ended: the connection goes back to the pool if it can carry another request.
    fn finish(&mut self) {
        let Some(stream) = self.stream.take() else {
            return;
        };
        // Bytes after the body would be read as the next response: do not reuse.
        if self.keep_alive && self.buffer.bytes().is_empty() {
            self.client.put_idle(stream);
        }
    }
}

impl Drop for Http1Body {
    fn drop(&mut self) {
        if self.stream.is_some() && self.framing != Framing::UntilClose {
            self.drain_arrived();
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::VecDeque;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;

    use super::*;

    /// What the scripted server does with one request.
    enum Reply {
        /// Writes these pieces one by one (1 ms apart), then keeps the connection, or closes it.
        Send { pieces: Vec<Vec<u8>>, close: bool },
        /// Writes the first piece, and the second one after a pause no test waits for.
        Pause(Vec<u8>, Vec<u8>),
        /// Closes the connection without answering.
        Hang,
    }

    fn send(text: &str) -> Reply {
        Reply::Send {
            pieces: vec![text.as_bytes().to_vec()],
            close: false,
        }
    }

    /// `text` written one byte at a time.
    fn trickle(text: &str) -> Reply {
        Reply::Send {
            pieces: text.bytes().map(|b| vec![b]).collect(),
            close: false,
        }
    }

    struct Server {
        url: reqwest::Url,
        accepted: Arc<AtomicUsize>,
        requests: Arc<Mutex<Vec<Vec<u8>>>>,
    }

    impl Server {
        fn accepted(&self) -> usize {
            self.accepted.load(Ordering::SeqCst)
        }
    }

    /// A raw HTTP/1.1 server on loopback answering the requests it reads, on any connection,
    /// with `replies` in order.
    async fn server(replies: Vec<Reply>) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!(
            "http://{}/v1/chat/completions",
            listener.local_addr().unwrap()
        );
        let replies = Arc::new(Mutex::new(VecDeque::from(replies)));
        let accepted = Arc::new(AtomicUsize::new(0));
        let requests = Arc::new(Mutex::new(Vec::new()));
        let (count, seen) = (Arc::clone(&accepted), Arc::clone(&requests));
        tokio::spawn(async move {
            loop {
                let (mut stream, _) = listener.accept().await.unwrap();
                count.fetch_add(1, Ordering::SeqCst);
                let (replies, seen) = (Arc::clone(&replies), Arc::clone(&seen));
                tokio::spawn(async move {
                    while let Some(request) = read_request(&mut stream).await {
                        seen.lock().unwrap().push(request);
                        let reply = replies.lock().unwrap().pop_front();
                        match reply {
                            Some(Reply::Send { pieces, close }) => {
                                for piece in pieces {
                                    if stream.write_all(&piece).await.is_err() {
                                        return;
                                    }
                                    tokio::time::sleep(Duration::from_millis(1)).await;
                                }
                                if close {
                                    return;
                                }
                            }
                            Some(Reply::Pause(first, second)) => {
                                let _ = stream.write_all(&first).await;
                                tokio::time::sleep(Duration::from_secs(5)).await;
                                let _ = stream.write_all(&second).await;
                            }
                            Some(Reply::Hang) | None => return,
                        }
                    }
                });
            }
        });
        Server {
            url: reqwest::Url::parse(&url).unwrap(),
            accepted,
            requests,
        }
    }

    /// One request (head and `content-length` body), `None` at end of stream.
    async fn read_request(stream: &mut TcpStream) -> Option<Vec<u8>> {
        let mut request = Vec::new();
        let mut byte = [0u8; 1];
        while !request.ends_with(b"\r\n\r\n") {
            if stream.read(&mut byte).await.ok()? == 0 {
                return None;
            }
            request.push(byte[0]);
        }
        let head = String::from_utf8_lossy(&request).to_ascii_lowercase();
        let length: usize = head
            .split("content-length: ")
            .nth(1)
            .and_then(|rest| rest.split("\r\n").next())
            .and_then(|n| n.parse().ok())
            .unwrap_or(0);
        let mut body = vec![0u8; length];
        stream.read_exact(&mut body).await.ok()?;
        request.extend_from_slice(&body);
        Some(request)
    }

    fn client(server: &Server) -> Http1Client {
        Http1Client::new(
            &server.url,
            Some("Bearer test-key-123"),
            Duration::from_secs(5),
            Duration::from_secs(60),
        )
        .unwrap()
    }

    async fn read_all(body: &mut Http1Body) -> Result<Vec<u8>, Http1Error> {
        let mut out = Vec::new();
        while let Some(piece) = body.next().await {
            out.extend_from_slice(&piece?);
        }
        Ok(out)
    }

    async fn post_text(client: &Http1Client, body: &'static str) -> (u16, Vec<u8>) {
        let mut response = client
            .post(&[Bytes::from_static(body.as_bytes())])
            .await
            .unwrap();
        let bytes = read_all(&mut response.body).await.unwrap();
        (response.status, bytes)
    }

    #[tokio::test]
    async fn a_chunked_body_arriving_byte_by_byte_is_reassembled_and_the_connection_reused() {
        let server = server(vec![
            trickle(
                "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n\
                 5;name=value\r\nhello\r\n6\r\n world\r\n0\r\nx-trailer: t\r\n\r\n",
            ),
            send("HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok"),
        ])
        .await;
        let client = client(&server);
        let pieces = [Bytes::from_static(b"{\"a\""), Bytes::from_static(b":1}")];
        let mut response = client.post(&pieces).await.unwrap();
        assert_eq!(response.status, 200);
        assert_eq!(read_all(&mut response.body).await.unwrap(), b"hello world");
        drop(response);
        assert_eq!(post_text(&client, "{}").await, (200, b"ok".to_vec()));
        assert_eq!(
            server.accepted(),
            1,
            "the second request reused the connection"
        );
        let requests = server.requests.lock().unwrap();
        let first = String::from_utf8(requests[0].clone()).unwrap();
        let port = server.url.port().unwrap();
        assert!(
            first.starts_with("POST /v1/chat/completions HTTP/1.1\r\n"),
            "{first}"
        );
        for line in [
            format!("host: 127.0.0.1:{port}\r\n"),
            "content-type: application/json\r\n".into(),
            "authorization: Bearer test-key-123\r\n".into(),
            "content-length: 7\r\n".into(),
        ] {
            assert!(first.contains(&line), "{line:?} missing in {first}");
        }
        assert!(first.ends_with("\r\n\r\n{\"a\":1}"), "{first}");
    }

    #[tokio::test]
    async fn a_body_without_length_ends_with_the_connection_which_is_not_reused() {
        let server = server(vec![
            Reply::Send {
                pieces: vec![b"HTTP/1.1 200 OK\r\n\r\nall ".to_vec(), b"of it".to_vec()],
                close: true,
            },
            send("HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok"),
        ])
        .await;
        let client = client(&server);
        assert_eq!(post_text(&client, "{}").await, (200, b"all of it".to_vec()));
        assert_eq!(post_text(&client, "{}").await, (200, b"ok".to_vec()));
        assert_eq!(server.accepted(), 2);
    }

    #[tokio::test]
    async fn a_request_on_a_pooled_connection_the_server_dropped_is_sent_again_once() {
        let server = server(vec![
            send("HTTP/1.1 200 OK\r\ncontent-length: 3\r\n\r\none"),
            Reply::Hang,
            send("HTTP/1.1 200 OK\r\ncontent-length: 3\r\n\r\ntwo"),
        ])
        .await;
        let client = client(&server);
        assert_eq!(post_text(&client, "{}").await, (200, b"one".to_vec()));
        assert_eq!(post_text(&client, "{}").await, (200, b"two".to_vec()));
        assert_eq!(server.accepted(), 2);
        assert_eq!(server.requests.lock().unwrap().len(), 3);
    }

    #[tokio::test]
    async fn a_new_connection_closed_without_an_answer_is_an_error_and_not_repeated() {
        let server = server(vec![Reply::Hang]).await;
        let client = client(&server);
        let error = client
            .post(&[Bytes::from_static(b"{}")])
            .await
            .err()
            .unwrap();
        assert!(
            matches!(error, Http1Error::ClosedBeforeResponse),
            "{error:?}"
        );
        assert_eq!(server.requests.lock().unwrap().len(), 1);
    }

    #[tokio::test]
    async fn a_body_dropped_after_its_last_event_returns_its_connection_only_if_its_end_arrived() {
        let ended = "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n\
                     9\r\ndata: x\n\n\r\n0\r\n\r\n";
        let server = server(vec![
            send(ended),
            Reply::Pause(
                b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n9\r\ndata: y\n\n\r\n"
                    .to_vec(),
                b"0\r\n\r\n".to_vec(),
            ),
            send("HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok"),
        ])
        .await;
        let client = client(&server);
        // The whole body arrived with its first piece: dropping it keeps the connection.
        let mut response = client.post(&[Bytes::from_static(b"{}")]).await.unwrap();
        assert_eq!(
            &response.body.next().await.unwrap().unwrap()[..],
            b"data: x\n\n"
        );
        drop(response);
        // The end is still on its way: dropping the body closes the connection.
        let mut response = client.post(&[Bytes::from_static(b"{}")]).await.unwrap();
        assert_eq!(
            &response.body.next().await.unwrap().unwrap()[..],
            b"data: y\n\n"
        );
        drop(response);
        assert_eq!(server.accepted(), 1);
        assert_eq!(post_text(&client, "{}").await, (200, b"ok".to_vec()));
        assert_eq!(server.accepted(), 2);
    }

    #[tokio::test]
    async fn interim_responses_are_skipped_and_error_heads_keep_their_headers() {
        let server = server(vec![
            send(
                "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 429 Too Many Requests\r\n\
                 retry-after: 7\r\ncontent-length: 4\r\n\r\nslow",
            ),
            send("HTTP/1.1 200 OK\r\nx-other: 1\r\ncontent-length: 2\r\n\r\nok"),
        ])
        .await;
        let client = client(&server);
        let mut response = client.post(&[Bytes::from_static(b"{}")]).await.unwrap();
        assert_eq!(response.status, 429);
        assert_eq!(response.headers.get("retry-after").unwrap(), "7");
        assert_eq!(read_all(&mut response.body).await.unwrap(), b"slow");
        drop(response);
        let response = client.post(&[Bytes::from_static(b"{}")]).await.unwrap();
        assert_eq!(response.status, 200);
        assert!(response.headers.is_empty(), "2xx heads keep no headers");
    }

    #[tokio::test]
    async fn a_large_body_is_read_whole_through_growing_reads() {
        let payload: String = (0..200_000)
            .map(|i| char::from(b'a' + (i % 26) as u8))
            .collect();
        let answer = format!(
            "HTTP/1.1 200 OK\r\ncontent-length: {}\r\n\r\n{payload}",
            payload.len()
        );
        let server = server(vec![
            send(&answer),
            send("HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok"),
        ])
        .await;
        let client = client(&server);
        let mut response = client.post(&[Bytes::from_static(b"{}")]).await.unwrap();
        let mut pieces = 0;
        let mut body = Vec::new();
        while let Some(piece) = response.body.next().await {
            body.extend_from_slice(&piece.unwrap());
            pieces += 1;
        }
        assert_eq!(body, payload.as_bytes());
        assert!(pieces < 40, "{pieces} reads for 200 KB: reads did not grow");
        drop(response);
        assert_eq!(post_text(&client, "{}").await, (200, b"ok".to_vec()));
        assert_eq!(server.accepted(), 1);
    }

    #[tokio::test]
    async fn a_body_cut_short_is_an_error() {
        let server = server(vec![Reply::Send {
            pieces: vec![b"HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\nshort".to_vec()],
            close: true,
        }])
        .await;
        let client = client(&server);
        let mut response = client.post(&[Bytes::from_static(b"{}")]).await.unwrap();
        let error = read_all(&mut response.body).await.err().unwrap();
        assert!(matches!(error, Http1Error::Receive(_)), "{error:?}");
    }

    #[tokio::test]
    async fn an_answer_sent_before_the_request_was_read_is_returned_not_a_send_error() {
        // The server reads the head only, refuses the body and closes with it unread.
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!(
            "http://{}/v1/chat/completions",
            listener.local_addr().unwrap()
        );
        tokio::spawn(async move {
            let (mut stream, _) = listener.accept().await.unwrap();
            let mut head = Vec::new();
            let mut byte = [0u8; 1];
            while !head.ends_with(b"\r\n\r\n") {
                stream.read_exact(&mut byte).await.unwrap();
                head.push(byte[0]);
            }
            stream
                .write_all(b"HTTP/1.1 413 Payload Too Large\r\ncontent-length: 8\r\n\r\ntoo big!")
                .await
                .unwrap();
            tokio::time::sleep(Duration::from_millis(50)).await;
        });
        let client = Http1Client::new(
            &reqwest::Url::parse(&url).unwrap(),
            None,
            Duration::from_secs(5),
            Duration::from_secs(60),
        )
        .unwrap();
        // Far more than the socket buffers hold, so the write fails once the server is gone.
        let body = Bytes::from(vec![b' '; 32 * 1024 * 1024]);
        let mut response = client.post(&[body]).await.unwrap();
        assert_eq!(response.status, 413);
        assert_eq!(read_all(&mut response.body).await.unwrap(), b"too big!");
    }

    #[test]
    fn heads_decide_framing_and_reuse() {
        let head = |text: &str| parse_head(text.as_bytes()).unwrap().unwrap();
        let chunked = head("HTTP/1.1 200 OK\r\ntransfer-encoding: gzip, chunked\r\n\r\n");
        assert_eq!(chunked.framing, Framing::Chunked(Chunk::Size));
        assert!(chunked.keep_alive);
        let not_chunked_last = head("HTTP/1.1 200 OK\r\ntransfer-encoding: chunked, gzip\r\n\r\n");
        assert_eq!(not_chunked_last.framing, Framing::UntilClose);
        assert!(!not_chunked_last.keep_alive);
        let close =
            head("HTTP/1.1 200 OK\r\nconnection: keep-alive, close\r\ncontent-length: 0\r\n\r\n");
        assert_eq!(close.framing, Framing::Length(0));
        assert!(!close.keep_alive);
        assert!(!head("HTTP/1.0 200 OK\r\ncontent-length: 0\r\n\r\n").keep_alive);
        let same_twice = head("HTTP/1.1 200 OK\r\ncontent-length: 3\r\ncontent-length: 3\r\n\r\n");
        assert_eq!(same_twice.framing, Framing::Length(3));
        assert!(
            parse_head(b"HTTP/1.1 200 OK\r\ncontent-length: 3\r\n")
                .unwrap()
                .is_none()
        );
        for invalid in [
            "HTTP/1.1 200 OK\r\ncontent-length: 3\r\ncontent-length: 4\r\n\r\n",
            "HTTP/1.1 200 OK\r\ncontent-length: -1\r\n\r\n",
            "NOT HTTP\r\n\r\n",
        ] {
            assert!(
                matches!(parse_head(invalid.as_bytes()), Err(Http1Error::Invalid(_))),
                "{invalid:?}"
            );
        }
    }

    #[test]
    fn only_http_urls_and_printable_keys_are_accepted() {
        let https = reqwest::Url::parse("https://example.com/v1").unwrap();
        let timeout = Duration::from_secs(1);
        assert_eq!(
            Http1Client::new(&https, None, timeout, timeout).err(),
            Some(Http1ConfigError::NotHttp)
        );
        let http = reqwest::Url::parse("http://[::1]:8080/v1?x=1").unwrap();
        assert_eq!(
            Http1Client::new(&http, Some("Bearer a\r\nb"), timeout, timeout).err(),
            Some(Http1ConfigError::ControlCharacters)
        );
        let client = Http1Client::new(&http, Some("Bearer k"), timeout, timeout).unwrap();
        let head = String::from_utf8(client.inner.head_prefix.clone()).unwrap();
        assert!(
            head.starts_with("POST /v1?x=1 HTTP/1.1\r\nhost: [::1]:8080\r\n"),
            "{head}"
        );
        assert!(
            !format!("{client:?}").contains("Bearer"),
            "the key is never printed"
        );
    }
}
