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
//! * A sender that stalls for `timeouts.guest_body_idle_ms` between two pieces loses its
//!   reservation (408), so a stuck client cannot hold the budget.
//!
//! Loopback clients deliver a body in microseconds, so the budget costs no throughput: it only
//! decides how many bodies sit in memory at the same time.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use bytes::Bytes;
use futures_util::StreamExt;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::gap_timer::GapTimer;

/// The shared reservation pool (bytes of guest request bodies buffered at once).
#[derive(Debug, Clone)]
pub(crate) struct BodyBudget {
    available: Arc<Semaphore>,
    total: u32,
}

/// A reservation from the [`BodyBudget`]; released on drop.
#[derive(Debug)]
pub(crate) struct BodyPermit {
    _reserved: OwnedSemaphorePermit,
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
    #[error("the request body could not be read: {0}")]
    Broken(String),
}

impl IntakeError {
    /// The HTTP status the guest gets.
    pub fn status(&self) -> u16 {
        match self {
            IntakeError::TooLarge { .. } => 413,
            IntakeError::Stalled(_) => 408,
            IntakeError::Broken(_) => 400,
        }
    }
}

/// How bodies are read: the size limit, the shared budget, the stall bound.
#[derive(Debug, Clone)]
pub(crate) struct Intake {
    pub budget: BodyBudget,
    pub max_body: usize,
    pub stall: Duration,
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
        let reserved = Arc::clone(&self.available)
            .acquire_many_owned(charge)
            .await
            .expect("the body budget semaphore is never closed");
        BodyPermit {
            _reserved: reserved,
        }
    }
}

impl Intake {
    /// Reads the whole body once its size is reserved. `declared` is the request's
    /// `Content-Length`, if any (the ingress makes sure the body has exactly that length).
    pub async fn read(&self, body: Body, declared: Option<u64>) -> Result<GuestBody, IntakeError> {
        if let Some(size) = declared.filter(|&s| s > self.max_body as u64) {
            return Err(IntakeError::TooLarge {
                size,
                limit: self.max_body,
            });
        }
        let permit = self.budget.reserve(declared).await;
        let mut frames = body.into_data_stream();
        let mut first: Option<Bytes> = None;
        let mut joined: Vec<u8> = Vec::new();
        // One timer per body, not per piece (see `crate::gap_timer`).
        let mut stall = GapTimer::new(self.stall);
        loop {
            let Some(next) = stall.next(frames.next()).await else {
                return Err(IntakeError::Stalled(stall.gap()));
            };
            let Some(piece) = next else { break };
            let piece = piece.map_err(|e| IntakeError::Broken(e.to_string()))?;
            let size = first.as_ref().map_or(0, Bytes::len) + joined.len() + piece.len();
            if size > self.max_body {
                return Err(IntakeError::TooLarge {
                    size: size as u64,
                    limit: self.max_body,
                });
            }
            // One piece stays as it is (no copy); several are joined into one buffer, sized
            // once from the declared length.
            match first.take() {
                None if joined.is_empty() => first = Some(piece),
                None => joined.extend_from_slice(&piece),
                Some(earlier) => {
                    let capacity = declared.map_or(0, |d| d as usize).max(size);
                    joined.reserve_exact(capacity);
                    joined.extend_from_slice(&earlier);
                    joined.extend_from_slice(&piece);
                }
            }
        }
        let bytes = first.unwrap_or_else(|| Bytes::from(joined));
        Ok(GuestBody { bytes, permit })
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
}
