//! HTTP/1.1 wire pieces that both ends of the gateway share: the guest-facing server
//! (`ingress.rs`) and the upstream client (`http1.rs`). Message body framing (RFC 9112 §6: by
//! length, chunked, or until the connection closes) with the decoding of what is buffered, and
//! vectored writes. No I/O but the write.

use std::io::{self, IoSlice};

use bytes::{Buf, Bytes, BytesMut};
use tokio::net::TcpStream;

/// Largest trailer section of a chunked body.
const MAX_TRAILERS: usize = 64 * 1024;

/// How a body's end is known, and how much of it is left.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Framing {
    /// This many bytes are left.
    Length(u64),
    Chunked(Chunk),
    /// Everything until the peer closes the connection.
    UntilClose,
    /// Read to its end.
    Done,
}

/// Where a chunked body is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Chunk {
    /// Expecting a chunk-size line.
    Size,
    /// This many data bytes of the current chunk are left.
    Data(u64),
    /// Expecting the CRLF after a chunk's data.
    DataEnd,
    /// After the last chunk: trailer lines until an empty one.
    Trailers,
}

/// A body whose framing is broken.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("{0}")]
pub(crate) struct InvalidBody(&'static str);

impl Framing {
    /// Whether nothing of the body is left to read.
    pub fn is_done(self) -> bool {
        matches!(self, Framing::Length(0) | Framing::Done)
    }

    /// Takes the next piece of body out of `buffer` (chunk-size lines, chunk CRLFs and trailers
    /// are consumed and dropped). `Ok(None)`: more must be read first, or the body ended (then
    /// `self` is [`Framing::Done`]). An `UntilClose` body ends when the caller sees the close.
    pub fn next_piece(&mut self, buffer: &mut BytesMut) -> Result<Option<Bytes>, InvalidBody> {
        loop {
            let available = buffer.len();
            match *self {
                Framing::Done => return Ok(None),
                Framing::Length(0) => {
                    *self = Framing::Done;
                    return Ok(None);
                }
                Framing::Length(left) => {
                    if available == 0 {
                        return Ok(None);
                    }
                    let take = available.min(usize::try_from(left).unwrap_or(usize::MAX));
                    *self = Framing::Length(left - take as u64);
                    return Ok(Some(buffer.split_to(take).freeze()));
                }
                Framing::UntilClose => {
                    if available == 0 {
                        return Ok(None);
                    }
                    return Ok(Some(buffer.split_to(available).freeze()));
                }
                Framing::Chunked(Chunk::Size) => match httparse::parse_chunk_size(buffer) {
                    Ok(httparse::Status::Complete((used, size))) => {
                        buffer.advance(used);
                        *self = Framing::Chunked(if size == 0 {
                            Chunk::Trailers
                        } else {
                            Chunk::Data(size)
                        });
                    }
                    Ok(httparse::Status::Partial) => return Ok(None),
                    Err(_) => return Err(InvalidBody("invalid chunk size")),
                },
                Framing::Chunked(Chunk::Data(left)) => {
                    if available == 0 {
                        return Ok(None);
                    }
                    let take = available.min(usize::try_from(left).unwrap_or(usize::MAX));
                    let rest = left - take as u64;
                    *self = Framing::Chunked(if rest == 0 {
                        Chunk::DataEnd
                    } else {
                        Chunk::Data(rest)
                    });
                    return Ok(Some(buffer.split_to(take).freeze()));
                }
                Framing::Chunked(Chunk::DataEnd) => {
                    if available < 2 {
                        return Ok(None);
                    }
                    if &buffer[..2] != b"\r\n" {
                        return Err(InvalidBody("chunk data not followed by CRLF"));
                    }
                    buffer.advance(2);
                    *self = Framing::Chunked(Chunk::Size);
                }
                Framing::Chunked(Chunk::Trailers) => {
                    let Some(end) = buffer.windows(2).position(|w| w == b"\r\n") else {
                        if available > MAX_TRAILERS {
                            return Err(InvalidBody("trailers too large"));
                        }
                        return Ok(None);
                    };
                    buffer.advance(end + 2);
                    if end == 0 {
                        *self = Framing::Done;
                        return Ok(None);
                    }
                }
            }
        }
    }
}

/// Writes every byte of `slices` (vectored; nothing copied into a buffer).
pub(crate) async fn write_all(
    stream: &TcpStream,
    mut slices: &mut [IoSlice<'_>],
) -> io::Result<()> {
    IoSlice::advance_slices(&mut slices, 0);
    while !slices.is_empty() {
        stream.writable().await?;
        match stream.try_write_vectored(slices) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(written) => IoSlice::advance_slices(&mut slices, written),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}
