//! The guest-facing HTTP/1.1 connection: reads requests, hands them to the axum [`Router`], writes
//! the responses. Routing and handlers stay axum's; only the connection layer is the gateway's.
//!
//! Why not hyper's server connection: it allocates an 8 KiB write buffer for every connection and
//! keeps an 8 KiB read buffer (fully written by a 47 KB request body) for the connection's life,
//! including the whole of a streamed answer. Here a connection holds a read buffer only while
//! bytes it has read wait to be used, and writes each response head and body frame straight from
//! its pieces (vectored writes, no write buffer). In `switchyard bench gateway` the gateway
//! process with 1,000 open streams went from 37–42 MiB to 25–26 MiB, and the median of the
//! unary added latency p50 at concurrency 1 from 283 µs (8 runs) to 217 µs (14 runs), on the
//! same machine the same day.
//!
//! What a connection does, per request:
//! * reads the head (parsed by `httparse`; at most [`MAX_HEAD`] bytes and [`MAX_HEADERS`]
//!   headers, else 431; unparsable, or an ambiguous body length, 400 and close);
//! * frames the body by `Content-Length` or chunked transfer coding (any other coding: 501;
//!   the decoding is `crate::wire`'s, shared with the upstream client);
//!   the body is read only when the handler reads it, and answers `Expect: 100-continue` with
//!   `100 Continue` then;
//! * runs the router; once the request body is read, it watches the connection for the guest
//!   closing it, and drops the handler's future or the response body if it does (the exchange
//!   then sees the guest gone, as with hyper). Bytes of a next (pipelined) request end the watch;
//!   a guest leaving after that is noticed when a write fails;
//! * writes the response: `Content-Length` when the body's size is known, else chunked transfer
//!   coding (HTTP/1.0 guests: until close), with a `Date` header;
//! * keeps the connection for the next request unless either side asked to close, the request
//!   body was not read to its end, the guest spoke HTTP/1.0, or the gateway is stopping.
//!
//! Stopping: a connection waiting for a request closes at once; one in an exchange finishes it,
//! answers with `connection: close`, and closes.

use std::io::{self, IoSlice};
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll, ready};

use axum::Router;
use axum::body::Body;
use bytes::{Buf, Bytes, BytesMut};
use futures_util::FutureExt;
use http::header::{self, HeaderMap, HeaderName, HeaderValue};
use http::{Method, Request, Response, StatusCode, Version};
use http_body::{Body as _, Frame, SizeHint};
use tokio::net::TcpStream;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use tower::ServiceExt;

use crate::wire::{Chunk, Framing, write_all};

/// Largest request head accepted (request line and headers).
const MAX_HEAD: usize = 64 * 1024;

/// Most headers accepted in a request head.
const MAX_HEADERS: usize = 100;

/// Size of each read of a request head, and of a body of unknown length.
const READ_SIZE: usize = 8 * 1024;

/// Largest single read of a body of known length.
const MAX_BODY_READ: usize = 1024 * 1024;

/// Serves one guest connection until it closes, fails, or `stop` ends it between requests.
pub(crate) async fn serve_connection(stream: TcpStream, app: Router, stop: CancellationToken) {
    let stream = Arc::new(stream);
    let ending = serve_requests(&stream, &app, &stop).await;
    close(stream, ending).await;
}

/// How a connection's last exchange left it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ending {
    /// Everything the guest sent was read (or it is gone): just close.
    Clean,
    /// The guest may still be sending (a request body nobody read, a refused head).
    Unread,
}

async fn serve_requests(stream: &Arc<TcpStream>, app: &Router, stop: &CancellationToken) -> Ending {
    let mut leftover = BytesMut::new();
    loop {
        let head = tokio::select! {
            head = read_head(stream, &mut leftover) => head,
            // Between requests: nothing is lost by closing now.
            _ = stop.cancelled(), if leftover.is_empty() => return Ending::Clean,
        };
        let head = match head {
            Ok(Some(head)) => head,
            Ok(None) => return Ending::Clean,
            Err(refusal) => {
                let _ = write_refusal(stream, refusal).await;
                return Ending::Unread;
            }
        };
        match exchange(stream, app, head, std::mem::take(&mut leftover), stop).await {
            Ok(rest) if !stop.is_cancelled() => leftover = rest,
            Ok(_) => return Ending::Clean,
            Err(ending) => return ending,
        }
    }
}

/// How long a closing connection reads what the guest still sends (see [`close`]).
const LINGER: std::time::Duration = std::time::Duration::from_millis(500);

/// Closes the connection. When the guest may still be sending, the gateway's side is shut down
/// first and what arrives is read and dropped for up to [`LINGER`]: closing a socket with unread
/// bytes resets the connection, and the guest could lose the answer it was sent.
async fn close(stream: Arc<TcpStream>, ending: Ending) {
    let Ok(mut stream) = Arc::try_unwrap(stream) else {
        return;
    };
    if ending == Ending::Clean {
        return;
    }
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let _ = stream.shutdown().await;
    let drain = async {
        // On the heap: an array here would be part of every connection task's size.
        let mut sink = vec![0u8; 4096];
        while let Ok(1..) = stream.read(&mut sink).await {}
    };
    let _ = tokio::time::timeout(LINGER, drain).await;
}

/// A request head that was read and accepted.
struct Head {
    method: Method,
    uri: http::Uri,
    version: Version,
    headers: HeaderMap,
    framing: Framing,
    expects_continue: bool,
    keep_alive: bool,
}

/// Why a request head was refused (the connection answers, then closes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Refusal {
    BadRequest,
    HeadTooLarge,
    UnsupportedCoding,
}

impl Refusal {
    fn status(self) -> StatusCode {
        match self {
            Refusal::BadRequest => StatusCode::BAD_REQUEST,
            Refusal::HeadTooLarge => StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
            Refusal::UnsupportedCoding => StatusCode::NOT_IMPLEMENTED,
        }
    }
}

/// Reads until a whole request head is in `buffer`, and parses it (the head's bytes are
/// consumed; what follows stays). `Ok(None)`: the guest closed the connection between requests.
async fn read_head(stream: &TcpStream, buffer: &mut BytesMut) -> Result<Option<Head>, Refusal> {
    loop {
        if !buffer.is_empty() {
            if let Some((head, length)) = parse_head(buffer)? {
                if length > MAX_HEAD {
                    return Err(Refusal::HeadTooLarge);
                }
                buffer.advance(length);
                if buffer.is_empty() {
                    // A request without a body, or one whose body is still on its way.
                    *buffer = BytesMut::new();
                }
                return Ok(Some(head));
            }
            if buffer.len() > MAX_HEAD {
                return Err(Refusal::HeadTooLarge);
            }
        }
        match read_some(stream, buffer, READ_SIZE).await {
            Ok(0) | Err(_) if buffer.is_empty() => return Ok(None),
            Ok(0) | Err(_) => return Err(Refusal::BadRequest),
            Ok(_) => {}
        }
    }
}

/// Parses a request head at the start of `bytes`: the head and its length, or `None` when it is
/// not complete yet.
fn parse_head(bytes: &[u8]) -> Result<Option<(Head, usize)>, Refusal> {
    let mut slots = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut request = httparse::Request::new(&mut slots);
    let length = match request.parse(bytes) {
        Ok(httparse::Status::Complete(length)) => length,
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(httparse::Error::TooManyHeaders) => return Err(Refusal::HeadTooLarge),
        Err(_) => return Err(Refusal::BadRequest),
    };
    let method = Method::from_bytes(request.method.unwrap_or_default().as_bytes())
        .map_err(|_| Refusal::BadRequest)?;
    let uri: http::Uri = request
        .path
        .unwrap_or_default()
        .parse()
        .map_err(|_| Refusal::BadRequest)?;
    let version = match request.version {
        Some(0) => Version::HTTP_10,
        _ => Version::HTTP_11,
    };
    let mut headers = HeaderMap::with_capacity(request.headers.len());
    for field in request.headers.iter() {
        let name =
            HeaderName::from_bytes(field.name.as_bytes()).map_err(|_| Refusal::BadRequest)?;
        let value = HeaderValue::from_bytes(field.value).map_err(|_| Refusal::BadRequest)?;
        headers.append(name, value);
    }
    let framing = request_framing(&headers)?;
    let expects_continue = version == Version::HTTP_11
        && headers
            .get(header::EXPECT)
            .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"100-continue"));
    let keep_alive = version == Version::HTTP_11 && !has_token(&headers, "close");
    Ok(Some((
        Head {
            method,
            uri,
            version,
            headers,
            framing,
            expects_continue,
            keep_alive,
        },
        length,
    )))
}

/// Whether the `Connection` header lists `token`.
fn has_token(headers: &HeaderMap, token: &str) -> bool {
    headers.get_all(header::CONNECTION).iter().any(|value| {
        value
            .to_str()
            .unwrap_or_default()
            .split(',')
            .any(|t| t.trim().eq_ignore_ascii_case(token))
    })
}

/// How a request body is delimited (RFC 9112 §6.3).
fn request_framing(headers: &HeaderMap) -> Result<Framing, Refusal> {
    if headers.contains_key(header::TRANSFER_ENCODING) {
        // Both at once is how requests get smuggled: refuse, as RFC 9112 §6.3 allows.
        if headers.contains_key(header::CONTENT_LENGTH) {
            return Err(Refusal::BadRequest);
        }
        let mut codings = headers
            .get_all(header::TRANSFER_ENCODING)
            .iter()
            .flat_map(|v| v.to_str().unwrap_or("?").split(','))
            .map(str::trim);
        return match (codings.next(), codings.next()) {
            (Some(only), None) if only.eq_ignore_ascii_case("chunked") => {
                Ok(Framing::Chunked(Chunk::Size))
            }
            _ => Err(Refusal::UnsupportedCoding),
        };
    }
    let mut length = None;
    for value in headers.get_all(header::CONTENT_LENGTH) {
        let parsed: u64 = value
            .to_str()
            .ok()
            .filter(|s| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()))
            .and_then(|s| s.parse().ok())
            .ok_or(Refusal::BadRequest)?;
        if length.is_some_and(|l| l != parsed) {
            return Err(Refusal::BadRequest);
        }
        length = Some(parsed);
    }
    Ok(Framing::Length(length.unwrap_or(0)))
}

/// Runs one request through the router and writes its response. Returns what was read beyond
/// the request when the connection can serve another one, else how it ended.
async fn exchange(
    stream: &Arc<TcpStream>,
    app: &Router,
    head: Head,
    leftover: BytesMut,
    stop: &CancellationToken,
) -> Result<BytesMut, Ending> {
    let body_read = Arc::new(BodyShared {
        state: Mutex::new(BodyState {
            buffer: leftover,
            framing: head.framing,
            continue_due: head.expects_continue,
        }),
        ended: Notify::new(),
    });
    let body = RequestBody {
        stream: stream.clone(),
        shared: body_read.clone(),
        continue_written: 0,
    };
    let mut request = Request::new(Body::new(body));
    *request.method_mut() = head.method.clone();
    *request.uri_mut() = head.uri;
    *request.version_mut() = head.version;
    *request.headers_mut() = head.headers;

    let respond = app.clone().oneshot(request);
    let response = tokio::select! {
        response = respond => match response {
            Ok(response) => response,
            Err(never) => match never {},
        },
        () = guest_gone(stream, &body_read) => return Err(Ending::Clean),
    };
    // A body the handler left unread cannot be skipped reliably: the connection ends after this
    // answer (and says so).
    let keep_alive = head.keep_alive
        && !has_token(response.headers(), "close")
        && body_read.lock().framing.is_done();
    let bodiless = head.method == Method::HEAD
        || response.status().is_informational()
        || response.status() == StatusCode::NO_CONTENT
        || response.status() == StatusCode::NOT_MODIFIED;
    let written = write_response(
        stream,
        response,
        head.version,
        bodiless,
        keep_alive && !stop.is_cancelled(),
        &body_read,
    )
    .await;
    let mut state = body_read.lock();
    if !state.framing.is_done() {
        return Err(Ending::Unread);
    }
    if written.is_err() || !keep_alive {
        return Err(Ending::Clean);
    }
    Ok(std::mem::take(&mut state.buffer))
}

/// Resolves once the guest has closed the connection, watching only after the request body was
/// read to its end (before that, the body's own reads see it). Bytes of a next request that
/// arrive meanwhile end the watch (then a close is seen when the response is written).
async fn guest_gone(stream: &TcpStream, body: &BodyShared) {
    loop {
        let ended = body.ended.notified();
        let (body_done, next_request_began) = {
            let state = body.lock();
            let done = state.framing.is_done();
            (done, done && !state.buffer.is_empty())
        };
        if next_request_began {
            return std::future::pending().await;
        }
        if body_done {
            break;
        }
        ended.await;
    }
    let mut probe = [0u8; 1];
    match stream.peek(&mut probe).await {
        Ok(0) | Err(_) => {}
        Ok(_) => std::future::pending().await,
    }
}

/// Writes the response head and body. The body is dropped (ending the exchange's stream) if the
/// guest goes away while it waits for the next frame.
async fn write_response(
    stream: &TcpStream,
    response: Response<Body>,
    version: Version,
    bodiless: bool,
    keep_alive: bool,
    request_body: &BodyShared,
) -> io::Result<()> {
    let (parts, mut body) = response.into_parts();
    let length = body.size_hint().exact();
    let chunked = !bodiless && length.is_none() && version == Version::HTTP_11;
    let mut head = Vec::with_capacity(256);
    head.extend_from_slice(b"HTTP/1.1 ");
    head.extend_from_slice(parts.status.as_str().as_bytes());
    head.push(b' ');
    head.extend_from_slice(
        parts
            .status
            .canonical_reason()
            .unwrap_or_default()
            .as_bytes(),
    );
    head.extend_from_slice(b"\r\n");
    for (name, value) in &parts.headers {
        if name == header::CONTENT_LENGTH
            || name == header::TRANSFER_ENCODING
            || name == header::CONNECTION
        {
            continue;
        }
        head.extend_from_slice(name.as_str().as_bytes());
        head.extend_from_slice(b": ");
        head.extend_from_slice(value.as_bytes());
        head.extend_from_slice(b"\r\n");
    }
    if !parts.headers.contains_key(header::DATE) {
        head.extend_from_slice(b"date: ");
        head.extend_from_slice(httpdate::fmt_http_date(std::time::SystemTime::now()).as_bytes());
        head.extend_from_slice(b"\r\n");
    }
    match (chunked, length) {
        (true, _) => head.extend_from_slice(b"transfer-encoding: chunked\r\n"),
        (false, Some(length)) if parts.status != StatusCode::NO_CONTENT => {
            head.extend_from_slice(format!("content-length: {length}\r\n").as_bytes());
        }
        _ => {}
    }
    if !keep_alive {
        head.extend_from_slice(b"connection: close\r\n");
    }
    head.extend_from_slice(b"\r\n");
    if bodiless {
        return write_all(stream, &mut [IoSlice::new(&head)]).await;
    }

    let mut head = Some(head);
    loop {
        let frame = match next_frame(&mut body).now_or_never() {
            Some(frame) => frame,
            None => {
                // The next frame is not ready: the head goes now (a guest learns the status
                // before the first event), and the guest leaving while it waits is noticed.
                if let Some(head) = head.take() {
                    write_all(stream, &mut [IoSlice::new(&head)]).await?;
                }
                tokio::select! {
                    frame = next_frame(&mut body) => frame,
                    () = guest_gone(stream, request_body) => {
                        return Err(io::ErrorKind::ConnectionReset.into());
                    }
                }
            }
        };
        let data = match frame {
            Some(Ok(frame)) => match frame.into_data() {
                Ok(data) if data.is_empty() => continue,
                Ok(data) => Some(data),
                Err(_trailers) => continue,
            },
            Some(Err(e)) => return Err(io::Error::other(e)),
            None => None,
        };
        let head_bytes = head.take().unwrap_or_default();
        let size_line = match (&data, chunked) {
            (Some(data), true) => format!("{:x}\r\n", data.len()),
            _ => String::new(),
        };
        let (end_of_chunk, last_chunk): (&[u8], &[u8]) = match (&data, chunked) {
            (Some(_), true) => (b"\r\n", b""),
            (None, true) => (b"", b"0\r\n\r\n"),
            _ => (b"", b""),
        };
        let data_bytes = data.as_deref().unwrap_or_default();
        let mut slices = [
            IoSlice::new(&head_bytes),
            IoSlice::new(size_line.as_bytes()),
            IoSlice::new(data_bytes),
            IoSlice::new(end_of_chunk),
            IoSlice::new(last_chunk),
        ];
        write_all(stream, &mut slices).await?;
        if data.is_none() {
            return Ok(());
        }
    }
}

/// The response body's next frame (`None` at its end).
fn next_frame(body: &mut Body) -> impl Future<Output = Option<Result<Frame<Bytes>, axum::Error>>> {
    std::future::poll_fn(move |cx| Pin::new(&mut *body).poll_frame(cx))
}

/// Answers a refused request head and closes.
async fn write_refusal(stream: &TcpStream, refusal: Refusal) -> io::Result<()> {
    let status = refusal.status();
    let text = format!(
        "HTTP/1.1 {} {}\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
        status.as_str(),
        status.canonical_reason().unwrap_or_default()
    );
    write_all(stream, &mut [IoSlice::new(text.as_bytes())]).await
}

/// Waits until `stream` is readable and reads up to `size` bytes into `buffer`. `Ok(0)`: end
/// of stream.
async fn read_some(stream: &TcpStream, buffer: &mut BytesMut, size: usize) -> io::Result<usize> {
    loop {
        stream.readable().await?;
        buffer.reserve(size);
        match stream.try_read_buf(buffer) {
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            read => return read,
        }
    }
}

/// The request body's progress, shared by the body (which reads) and the connection (which
/// watches for the guest leaving once it ended, and takes back bytes read beyond it).
struct BodyShared {
    state: Mutex<BodyState>,
    /// Notified when the body ends.
    ended: Notify,
}

impl BodyShared {
    fn lock(&self) -> std::sync::MutexGuard<'_, BodyState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

struct BodyState {
    /// Read and not yet handed out (body bytes, or the start of the next request).
    buffer: BytesMut,
    framing: Framing,
    /// `100 Continue` must be sent before the first read.
    continue_due: bool,
}

impl BodyState {
    /// Bytes of a body of known length that are not buffered yet (0 for other bodies).
    fn missing(&self) -> u64 {
        match self.framing {
            Framing::Length(left) => left.saturating_sub(self.buffer.len() as u64),
            _ => 0,
        }
    }

    /// How much the next read asks for: the rest of a body of known length (between
    /// [`READ_SIZE`] and [`MAX_BODY_READ`]), else [`READ_SIZE`]. The handler reads a body only
    /// after reserving its size from the gateway's body budget, so this stays within it.
    fn read_size(&self) -> usize {
        let missing = usize::try_from(self.missing()).unwrap_or(usize::MAX);
        missing.clamp(READ_SIZE, MAX_BODY_READ)
    }

    /// Reads what `stream` holds now (no waiting; up to [`BodyState::read_size`]) into the
    /// buffer: how many bytes, `Some(0)` when the guest closed the connection, `None` when
    /// nothing is there yet.
    fn read_available(&mut self, stream: &TcpStream) -> io::Result<Option<usize>> {
        self.buffer.reserve(self.read_size());
        match stream.try_read_buf(&mut self.buffer) {
            Ok(read) => Ok(Some(read)),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(None),
            Err(e) => Err(e),
        }
    }
}

/// The request body handed to the router: reads from the connection as the handler asks.
struct RequestBody {
    stream: Arc<TcpStream>,
    shared: Arc<BodyShared>,
    /// Bytes of `100 Continue` written so far.
    continue_written: usize,
}

/// The interim response to `Expect: 100-continue`.
const CONTINUE: &[u8] = b"HTTP/1.1 100 Continue\r\n\r\n";

impl http_body::Body for RequestBody {
    type Data = Bytes;
    type Error = io::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, io::Error>>> {
        let this = &mut *self;
        loop {
            let mut state = this.shared.lock();
            if state.continue_due {
                drop(state);
                while this.continue_written < CONTINUE.len() {
                    ready!(this.stream.poll_write_ready(cx))?;
                    match this.stream.try_write(&CONTINUE[this.continue_written..]) {
                        Ok(written) => this.continue_written += written,
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                        Err(e) => return Poll::Ready(Some(Err(e))),
                    }
                }
                state = this.shared.lock();
                state.continue_due = false;
            }
            if state.missing() > 0 {
                // Take what the socket already holds (no waiting) into one buffer sized for the
                // rest of the body: over loopback the whole body is usually there, so it goes
                // out as one piece, read in one call. An early end shows again below, once what
                // is buffered is handed out.
                if let Err(e) = state.read_available(&this.stream) {
                    return Poll::Ready(Some(Err(e)));
                }
            }
            let piece = {
                let state = &mut *state;
                state
                    .framing
                    .next_piece(&mut state.buffer)
                    .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?
            };
            if state.buffer.is_empty() {
                // Nothing kept: give the allocation back (an exchange streaming its answer, or
                // waiting for more of the body, holds none).
                state.buffer = BytesMut::new();
            }
            if let Some(piece) = piece {
                if state.framing.is_done() {
                    this.shared.ended.notify_waiters();
                }
                return Poll::Ready(Some(Ok(Frame::data(piece))));
            }
            if state.framing.is_done() {
                this.shared.ended.notify_waiters();
                return Poll::Ready(None);
            }
            drop(state);
            ready!(this.stream.poll_read_ready(cx))?;
            match this.shared.lock().read_available(&this.stream) {
                Ok(Some(0)) => {
                    return Poll::Ready(Some(Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "the guest closed the connection before the request body ended",
                    ))));
                }
                Ok(_) => {}
                Err(e) => return Poll::Ready(Some(Err(e))),
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.shared.lock().framing.is_done()
    }

    fn size_hint(&self) -> SizeHint {
        match self.shared.lock().framing {
            Framing::Length(left) => SizeHint::with_exact(left),
            Framing::Done => SizeHint::with_exact(0),
            Framing::Chunked(_) | Framing::UntilClose => SizeHint::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::Duration;

    use axum::routing::post;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;

    /// Serves `app` on a loopback port with [`serve_connection`]; cancel the token to stop.
    async fn serve(app: Router) -> (std::net::SocketAddr, CancellationToken) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let stop = CancellationToken::new();
        let accepting = stop.clone();
        tokio::spawn(async move {
            while let Ok((tcp, _)) = listener.accept().await {
                tokio::spawn(serve_connection(tcp, app.clone(), accepting.clone()));
            }
        });
        (address, stop)
    }

    /// Answers with the request body.
    fn echo() -> Router {
        Router::new().route("/echo", post(|body: Bytes| async move { body }))
    }

    /// One response read off `stream`: status, head text, and body (by `Content-Length`,
    /// chunked coding, or until close).
    async fn read_response(stream: &mut Guest) -> (u16, String, Vec<u8>) {
        let mut bytes = std::mem::take(&mut stream.carry);
        let (status, head, head_len) = loop {
            let mut headers = [httparse::EMPTY_HEADER; 32];
            let mut response = httparse::Response::new(&mut headers);
            if let httparse::Status::Complete(len) = response.parse(&bytes).unwrap() {
                let head = String::from_utf8(bytes[..len].to_vec()).unwrap();
                break (response.code.unwrap(), head.to_ascii_lowercase(), len);
            }
            read_more(stream, &mut bytes).await;
        };
        let mut rest = bytes.split_off(head_len);
        let length = head
            .lines()
            .find_map(|l| l.strip_prefix("content-length: "))
            .map(|v| v.trim().parse::<usize>().unwrap());
        if let Some(length) = length {
            while rest.len() < length {
                read_more(stream, &mut rest).await;
            }
            stream.carry = rest.split_off(length);
            return (status, head, rest);
        }
        if head.contains("transfer-encoding: chunked") {
            let mut body = Vec::new();
            loop {
                while !rest.windows(2).any(|w| w == b"\r\n") {
                    read_more(stream, &mut rest).await;
                }
                let line = rest.windows(2).position(|w| w == b"\r\n").unwrap();
                let size =
                    usize::from_str_radix(std::str::from_utf8(&rest[..line]).unwrap(), 16).unwrap();
                while rest.len() < line + 2 + size + 2 {
                    read_more(stream, &mut rest).await;
                }
                body.extend_from_slice(&rest[line + 2..line + 2 + size]);
                rest.drain(..line + 2 + size + 2);
                if size == 0 {
                    stream.carry = rest;
                    return (status, head, body);
                }
            }
        }
        if status == 100 {
            stream.carry = rest;
            return (status, head, Vec::new());
        }
        stream.tcp.read_to_end(&mut rest).await.unwrap();
        (status, head, rest)
    }

    /// A raw client connection, with what was read past the last response.
    struct Guest {
        tcp: tokio::net::TcpStream,
        carry: Vec<u8>,
    }

    impl Guest {
        async fn connect(address: std::net::SocketAddr) -> Self {
            Self {
                tcp: tokio::net::TcpStream::connect(address).await.unwrap(),
                carry: Vec::new(),
            }
        }

        async fn send(&mut self, bytes: &[u8]) {
            self.tcp.write_all(bytes).await.unwrap();
        }
    }

    async fn read_more(stream: &mut Guest, into: &mut Vec<u8>) {
        let mut chunk = [0u8; 4096];
        let read = tokio::time::timeout(Duration::from_secs(10), stream.tcp.read(&mut chunk))
            .await
            .expect("the server answers")
            .unwrap();
        assert!(
            read > 0,
            "the connection closed early: {:?}",
            String::from_utf8_lossy(into)
        );
        into.extend_from_slice(&chunk[..read]);
    }

    /// Reads into `seen` until it holds `needle`.
    async fn read_until(stream: &mut Guest, seen: &mut Vec<u8>, needle: &[u8]) {
        while !seen.windows(needle.len()).any(|w| w == needle) {
            read_more(stream, seen).await;
        }
    }

    /// Whether the server closed `stream` (reads to the end within a bound).
    async fn closed(stream: &mut Guest) -> bool {
        let mut rest = Vec::new();
        matches!(
            tokio::time::timeout(Duration::from_secs(10), stream.tcp.read_to_end(&mut rest)).await,
            Ok(Ok(_))
        )
    }

    fn post_echo(body: &str) -> String {
        format!(
            "POST /echo HTTP/1.1\r\nhost: x\r\ncontent-length: {}\r\n\r\n{body}",
            body.len()
        )
    }

    #[tokio::test]
    async fn pipelined_requests_on_one_connection_are_answered_in_order() {
        let (address, _stop) = serve(echo()).await;
        let mut stream = Guest::connect(address).await;
        let two = format!("{}{}", post_echo("first"), post_echo("second one"));
        stream.send(two.as_bytes()).await;
        let (status, head, body) = read_response(&mut stream).await;
        assert_eq!((status, body.as_slice()), (200, b"first".as_slice()));
        assert!(
            head.contains("content-length: 5") && head.contains("date: "),
            "{head}"
        );
        let (status, _, body) = read_response(&mut stream).await;
        assert_eq!((status, body.as_slice()), (200, b"second one".as_slice()));
        // And the connection stays for a third.
        stream.send(post_echo("third").as_bytes()).await;
        assert_eq!(read_response(&mut stream).await.2, b"third");
    }

    #[tokio::test]
    async fn a_body_that_arrives_in_parts_is_read_to_its_length() {
        let (address, _stop) = serve(echo()).await;
        let mut stream = Guest::connect(address).await;
        stream
            .send(b"POST /echo HTTP/1.1\r\nhost: x\r\ncontent-length: 11\r\n\r\nhello")
            .await;
        tokio::time::sleep(Duration::from_millis(50)).await;
        stream.send(b" wo").await;
        tokio::time::sleep(Duration::from_millis(50)).await;
        stream
            .send(format!("rld{}", post_echo("next")).as_bytes())
            .await;
        assert_eq!(read_response(&mut stream).await.2, b"hello world");
        assert_eq!(read_response(&mut stream).await.2, b"next");
    }

    #[tokio::test]
    async fn a_chunked_request_body_is_decoded() {
        let (address, _stop) = serve(echo()).await;
        let mut stream = Guest::connect(address).await;
        let request = "POST /echo HTTP/1.1\r\nhost: x\r\ntransfer-encoding: chunked\r\n\r\n\
                       5\r\nhello\r\n6;ext=1\r\n world\r\n0\r\nx-trailer: t\r\n\r\n";
        stream.send(request.as_bytes()).await;
        assert_eq!(read_response(&mut stream).await.2, b"hello world");
        stream.send(post_echo("next").as_bytes()).await;
        assert_eq!(read_response(&mut stream).await.2, b"next");
    }

    #[tokio::test]
    async fn a_body_of_unknown_length_goes_out_chunked_frame_by_frame() {
        let (frames, receiver) = tokio::sync::mpsc::channel::<Result<Bytes, io::Error>>(4);
        let receiver = Arc::new(Mutex::new(Some(receiver)));
        let app = Router::new().route(
            "/stream",
            post(move || {
                let receiver = receiver.lock().unwrap().take().unwrap();
                async move { Body::from_stream(tokio_stream_of(receiver)) }
            }),
        );
        let (address, _stop) = serve(app).await;
        let mut stream = Guest::connect(address).await;
        stream
            .send(b"POST /stream HTTP/1.1\r\nhost: x\r\ncontent-length: 0\r\n\r\n")
            .await;
        frames
            .send(Ok(Bytes::from_static(b"data: a\n\n")))
            .await
            .unwrap();
        // The first frame arrives while the second does not exist yet.
        let mut seen = Vec::new();
        read_until(&mut stream, &mut seen, b"data: a").await;
        let text = String::from_utf8_lossy(&seen).to_ascii_lowercase();
        assert!(text.contains("transfer-encoding: chunked"), "{text}");
        assert!(text.ends_with("9\r\ndata: a\n\n\r\n"), "{text}");
        frames
            .send(Ok(Bytes::from_static(b"data: b\n\n")))
            .await
            .unwrap();
        drop(frames);
        while !seen.ends_with(b"0\r\n\r\n") {
            read_more(&mut stream, &mut seen).await;
        }
        assert!(String::from_utf8_lossy(&seen).contains("9\r\ndata: b\n\n\r\n0\r\n\r\n"));
    }

    fn tokio_stream_of(
        mut receiver: tokio::sync::mpsc::Receiver<Result<Bytes, io::Error>>,
    ) -> impl futures_util::Stream<Item = Result<Bytes, io::Error>> {
        futures_util::stream::poll_fn(move |cx| receiver.poll_recv(cx))
    }

    #[tokio::test]
    async fn expect_continue_is_answered_when_the_body_is_read() {
        let (address, _stop) = serve(echo()).await;
        let mut stream = Guest::connect(address).await;
        stream
            .send(
                b"POST /echo HTTP/1.1\r\nhost: x\r\nexpect: 100-continue\r\ncontent-length: 4\r\n\r\n",
            )
            .await;
        let (status, _, _) = read_response(&mut stream).await;
        assert_eq!(status, 100);
        stream.send(b"body").await;
        let (status, _, body) = read_response(&mut stream).await;
        assert_eq!((status, body.as_slice()), (200, b"body".as_slice()));
    }

    #[tokio::test]
    async fn bad_heads_are_refused_and_the_connection_closed() {
        let (address, _stop) = serve(echo()).await;
        let huge = format!(
            "POST /echo HTTP/1.1\r\nx-big: {}\r\n\r\n",
            "a".repeat(MAX_HEAD)
        );
        let cases: [(&str, u16); 5] = [
            ("NOT HTTP AT ALL\r\n\r\n", 400),
            (
                "POST /echo HTTP/1.1\r\ncontent-length: 2\r\ntransfer-encoding: chunked\r\n\r\n",
                400,
            ),
            (
                "POST /echo HTTP/1.1\r\ncontent-length: 2\r\ncontent-length: 3\r\n\r\n",
                400,
            ),
            (
                "POST /echo HTTP/1.1\r\ntransfer-encoding: gzip\r\n\r\n",
                501,
            ),
            (&huge, 431),
        ];
        for (request, expected) in cases {
            let mut stream = Guest::connect(address).await;
            stream.send(request.as_bytes()).await;
            let (status, head, _) = read_response(&mut stream).await;
            assert_eq!(status, expected, "{request:.60}");
            assert!(head.contains("connection: close"), "{head}");
            assert!(closed(&mut stream).await, "{request:.60}");
        }
    }

    #[tokio::test]
    async fn an_http_1_0_guest_gets_its_answer_and_a_closed_connection() {
        let (address, _stop) = serve(echo()).await;
        let mut stream = Guest::connect(address).await;
        stream
            .send(b"POST /echo HTTP/1.0\r\ncontent-length: 2\r\n\r\nhi")
            .await;
        let (status, head, body) = read_response(&mut stream).await;
        assert_eq!((status, body.as_slice()), (200, b"hi".as_slice()));
        assert!(head.contains("connection: close"), "{head}");
        assert!(closed(&mut stream).await);
    }

    #[tokio::test]
    async fn an_answer_that_leaves_the_body_unread_still_reaches_the_guest() {
        // The guest sends a large body the handler never reads; closing with it unread would
        // reset the connection, and the guest could lose the answer.
        let app = Router::new().route("/refuse", post(|| async { StatusCode::UNAUTHORIZED }));
        let (address, _stop) = serve(app).await;
        let mut stream = Guest::connect(address).await;
        let body = vec![b'x'; 2 * 1024 * 1024];
        let head = format!(
            "POST /refuse HTTP/1.1\r\ncontent-length: {}\r\n\r\n",
            body.len()
        );
        stream.send(head.as_bytes()).await;
        let (mut reader, mut writer) = stream.tcp.into_split();
        let sending = tokio::spawn(async move {
            let _ = writer.write_all(&body).await;
            writer
        });
        let mut answer = Vec::new();
        tokio::time::timeout(Duration::from_secs(10), reader.read_to_end(&mut answer))
            .await
            .expect("the server closes")
            .expect("no reset before the answer was read");
        let text = String::from_utf8_lossy(&answer).to_ascii_lowercase();
        assert!(text.starts_with("http/1.1 401"), "{text}");
        assert!(text.contains("connection: close"), "{text}");
        drop(sending.await);
    }

    #[tokio::test]
    async fn a_guest_leaving_mid_answer_drops_the_response_body() {
        struct Guard(Arc<AtomicBool>);
        impl Drop for Guard {
            fn drop(&mut self) {
                self.0.store(true, Ordering::SeqCst);
            }
        }
        let dropped = Arc::new(AtomicBool::new(false));
        let app = Router::new().route(
            "/forever",
            post({
                let dropped = dropped.clone();
                move || {
                    let guard = Guard(dropped.clone());
                    async move {
                        let first = futures_util::stream::once(async {
                            Ok::<_, io::Error>(Bytes::from_static(b"data: a\n\n"))
                        });
                        let never = futures_util::stream::pending();
                        Body::from_stream(futures_util::StreamExt::map(
                            futures_util::StreamExt::chain(first, never),
                            move |frame| {
                                let _keep = &guard;
                                frame
                            },
                        ))
                    }
                }
            }),
        );
        let (address, _stop) = serve(app).await;
        let mut stream = Guest::connect(address).await;
        stream
            .send(b"POST /forever HTTP/1.1\r\ncontent-length: 0\r\n\r\n")
            .await;
        let mut seen = Vec::new();
        read_until(&mut stream, &mut seen, b"data: a").await;
        assert!(!dropped.load(Ordering::SeqCst));
        drop(stream);
        tokio::time::timeout(Duration::from_secs(10), async {
            while !dropped.load(Ordering::SeqCst) {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
        .await
        .expect("the body is dropped once the guest is gone");
    }

    #[tokio::test]
    async fn stopping_closes_a_connection_between_requests() {
        let (address, stop) = serve(echo()).await;
        let mut stream = Guest::connect(address).await;
        stream.send(post_echo("one").as_bytes()).await;
        assert_eq!(read_response(&mut stream).await.2, b"one");
        stop.cancel();
        assert!(closed(&mut stream).await);
    }
}
