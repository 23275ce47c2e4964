//! Reading guest request bodies within a byte budget shared by all connections.
//!
//! Every exchange starts by buffering the whole guest request (Gemini CLI sends ~47 KB on the
//! first turn and its history grows from there, images included). Without a bound, a burst of
//! requests is buffered all at once: 1,000 agents starting together put ~47 MB of request
//! bodies in the gateway's memory before the first is translated, and long histories make it
//! gigabytes. So a body is read only once its size is reserved from [`BodyBudget`]
//! (`limits.buffered_request_bytes`); the others wait with their bytes still in the kernel's
//! socket buffers (TCP flow control slows their senders). The reservation is held until the
//! request has been translated (the caller drops the [`BodyPermit`]).
//!
//! * A body with a `Content-Length` reserves that many bytes, at most the whole budget (a body
//!   larger than the budget is read alone).
//! * A body without one (chunked) reserves the whole budget: its size is unknown.
//! * A body larger than `limits.max_request_bytes` is refused (413) before it is read, or as soon
//!   as a chunked body passes the limit.
//! * A sender that stalls for `timeouts.guest_body_idle_ms` between two pieces, or takes longer
//!   than `timeouts.guest_body_ms` for the whole body, loses its reservation (408), so neither a
//!   stuck nor a trickling client can hold the budget.
//!
//! Loopback clients deliver a body in microseconds, so the budget costs no throughput: it only
//! decides how many bodies sit in memory at the same time.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use bytes::Bytes;
use futures_util::StreamExt;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// The shared reservation pool (bytes of guest request bodies buffered at once).
#[derive(Debug, Clone)]
pub(crate) struct BodyBudget {
    available: Arc<Semaphore>,
    total: u32,
}

/// A reservation from the [`BodyBudget`]; released on drop.
#[derive(Debug)]
pub(crate) struct BodyPermit {
    _reserved: Option<OwnedSemaphorePermit>,
}

/// A guest's request body, with its reservation from the body budget. Dropped once the request
/// is translated: the bytes are not needed after that (a record keeps what it needs), and the
/// reservation lets the next body be read.
#[derive(Debug)]
pub(crate) struct GuestBody {
    pub bytes: Bytes,
    pub permit: BodyPermit,
}

/// Why a guest request body could not be read.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub(crate) enum IntakeError {
    #[error("request body of {size} bytes is larger than the gateway accepts ({limit} bytes)")]
    TooLarge { size: u64, limit: usize },
    #[error("the request body stalled for {0:?}")]
    Stalled(Duration),
    #[error("the request body took longer than {0:?} to arrive")]
    TooSlow(Duration),
    #[error("the request body could not be read: {0}")]
    Broken(String),
}

impl IntakeError {
    /// The HTTP status the guest gets.
    pub fn status(&self) -> u16 {
        match self {
            IntakeError::TooLarge { .. } => 413,
            IntakeError::Stalled(_) | IntakeError::TooSlow(_) => 408,
            IntakeError::Broken(_) => 400,
        }
    }
}

/// How bodies are read: the size limit, the shared budget, the stall and whole-body bounds.
#[derive(Debug, Clone)]
pub(crate) struct Intake {
    pub budget: BodyBudget,
    pub max_body: usize,
    pub stall: Duration,
    pub deadline: Duration,
}

impl BodyBudget {
    /// A pool of `total` bytes (at least 1).
    pub fn new(total: u32) -> Self {
        let total = total.max(1);
        Self {
            available: Arc::new(Semaphore::new(total as usize)),
            total,
        }
    }

    /// Bytes not reserved right now.
    #[cfg(test)]
    pub fn available(&self) -> usize {
        self.available.available_permits()
    }

    /// Waits until `size` bytes (capped at the whole budget; unknown = the whole budget) are
    /// free and reserves them.
    async fn reserve(&self, size: Option<u64>) -> BodyPermit {
        let charge = size.map_or(self.total, |s| {
            u32::try_from(s).unwrap_or(u32::MAX).min(self.total)
        });
        // The semaphore is never closed, so acquiring only waits.
        let reserved = Arc::clone(&self.available)
            .acquire_many_owned(charge)
            .await
            .ok();
        BodyPermit {
            _reserved: reserved,
        }
    }
}

impl Intake {
    /// [`Intake::read`] of a request's body, its declared length the exact size hyper gives
    /// it (hyper checked `Content-Length` against the body; none for a chunked body).
    pub async fn read_request(&self, body: Body) -> Result<GuestBody, IntakeError> {
        let declared = http_body::Body::size_hint(&body).exact();
        self.read(body, declared).await
    }

    /// Reads the whole body once its size is reserved. `declared` is the request's
    /// `Content-Length`, if any (hyper makes sure the body has exactly that length).
    pub async fn read(&self, body: Body, declared: Option<u64>) -> Result<GuestBody, IntakeError> {
        if let Some(size) = declared.filter(|&s| s > self.max_body as u64) {
            return Err(IntakeError::TooLarge {
                size,
                limit: self.max_body,
            });
        }
        let permit = self.budget.reserve(declared).await;
        let bytes = tokio::time::timeout(self.deadline, self.read_pieces(body, declared))
            .await
            .map_err(|_| IntakeError::TooSlow(self.deadline))??;
        Ok(GuestBody { bytes, permit })
    }

    /// The body's pieces, joined (one piece is kept as it is).
    async fn read_pieces(&self, body: Body, declared: Option<u64>) -> Result<Bytes, IntakeError> {
        let mut frames = body.into_data_stream();
        // Sized from the declared length, but a guest's word allocates at most 1 MiB ahead.
        let mut joined = bytes::BytesMut::with_capacity(
            declared.map_or(0, |d| usize::try_from(d).unwrap_or(0).min(1 << 20)),
        );
        let mut first: Option<Bytes> = None;
        loop {
            let next = tokio::time::timeout(self.stall, frames.next())
                .await
                .map_err(|_| IntakeError::Stalled(self.stall))?;
            let Some(piece) = next else { break };
            let piece = piece.map_err(|e| IntakeError::Broken(e.to_string()))?;
            let size = first.as_ref().map_or(0, Bytes::len) + joined.len() + piece.len();
            if size > self.max_body {
                return Err(IntakeError::TooLarge {
                    size: size as u64,
                    limit: self.max_body,
                });
            }
            match first.take() {
                None if joined.is_empty() => first = Some(piece),
                Some(earlier) => {
                    joined.extend_from_slice(&earlier);
                    joined.extend_from_slice(&piece);
                }
                None => joined.extend_from_slice(&piece),
            }
        }
        Ok(first.unwrap_or_else(|| joined.freeze()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn intake(budget: u32, max_body: usize) -> Intake {
        Intake {
            budget: BodyBudget::new(budget),
            max_body,
            stall: Duration::from_millis(200),
            deadline: Duration::from_secs(2),
        }
    }

    fn body_of(pieces: &[&'static [u8]]) -> Body {
        let pieces: Vec<Result<Bytes, std::io::Error>> =
            pieces.iter().map(|p| Ok(Bytes::from_static(p))).collect();
        Body::from_stream(futures_util::stream::iter(pieces))
    }

    #[tokio::test]
    async fn pieces_are_joined_and_the_declared_size_is_reserved_until_the_permit_drops() {
        let intake = intake(100, 1_000);
        let GuestBody { bytes, permit } = intake
            .read(body_of(&[b"{\"a\"", b":1", b"}"]), Some(7))
            .await
            .unwrap();
        assert_eq!(&bytes[..], b"{\"a\":1}");
        assert_eq!(intake.budget.available(), 93);
        drop(permit);
        assert_eq!(intake.budget.available(), 100);
    }

    #[tokio::test]
    async fn a_body_without_a_length_reserves_the_whole_budget_and_a_larger_one_is_capped() {
        let intake = intake(100, 1_000);
        let GuestBody {
            permit: unknown, ..
        } = intake.read(body_of(&[b"x"]), None).await.unwrap();
        assert_eq!(intake.budget.available(), 0);
        drop(unknown);
        let GuestBody {
            bytes,
            permit: larger,
        } = intake
            .read(body_of(&[&[b'y'; 300]]), Some(300))
            .await
            .unwrap();
        assert_eq!(bytes.len(), 300);
        assert_eq!(intake.budget.available(), 0);
        drop(larger);
    }

    #[tokio::test]
    async fn a_reader_waits_while_the_budget_is_reserved() {
        let intake = intake(10, 1_000);
        let GuestBody { permit: held, .. } =
            intake.read(body_of(&[b"12345678"]), Some(8)).await.unwrap();
        let waiting = intake.read(body_of(&[b"abcd"]), Some(4));
        tokio::pin!(waiting);
        assert!(
            tokio::time::timeout(Duration::from_millis(50), waiting.as_mut())
                .await
                .is_err(),
            "4 bytes do not fit while 8 of 10 are reserved"
        );
        drop(held);
        let GuestBody { bytes, .. } = waiting.await.unwrap();
        assert_eq!(&bytes[..], b"abcd");
    }

    #[tokio::test]
    async fn too_large_bodies_are_refused_declared_or_chunked() {
        let intake = intake(100, 5);
        assert_eq!(
            intake
                .read(body_of(&[b"123456"]), Some(6))
                .await
                .unwrap_err(),
            IntakeError::TooLarge { size: 6, limit: 5 }
        );
        assert_eq!(
            intake
                .read(body_of(&[b"123", b"456"]), None)
                .await
                .unwrap_err(),
            IntakeError::TooLarge { size: 6, limit: 5 }
        );
        assert_eq!(
            intake.budget.available(),
            100,
            "a refused body keeps nothing"
        );
    }

    #[tokio::test]
    async fn a_stalled_body_gives_its_reservation_back() {
        let intake = intake(100, 1_000);
        let stalled =
            futures_util::stream::iter([Ok::<_, std::io::Error>(Bytes::from_static(b"{"))])
                .chain(futures_util::stream::pending());
        let err = intake
            .read(Body::from_stream(stalled), Some(10))
            .await
            .unwrap_err();
        assert_eq!(err, IntakeError::Stalled(Duration::from_millis(200)));
        assert_eq!(err.status(), 408);
        assert_eq!(intake.budget.available(), 100);
    }

    #[tokio::test]
    async fn a_trickling_body_is_cut_off_at_the_whole_body_deadline() {
        let intake = Intake {
            deadline: Duration::from_millis(300),
            ..intake(100, 1_000)
        };
        // One byte every 50 ms: never a stall of 200 ms, but never done either.
        let trickle = futures_util::stream::unfold((), |()| async {
            tokio::time::sleep(Duration::from_millis(50)).await;
            Some((Ok::<_, std::io::Error>(Bytes::from_static(b" ")), ()))
        });
        let err = intake
            .read(Body::from_stream(trickle), Some(1_000))
            .await
            .unwrap_err();
        assert_eq!(err, IntakeError::TooSlow(Duration::from_millis(300)));
        assert_eq!(err.status(), 408);
        assert_eq!(intake.budget.available(), 100, "the reservation is freed");
    }
}
