//! Reading guest request bodies: each connection within its own bound, and beyond it within a
//! byte budget shared by all connections.
//!
//! Every exchange starts by buffering the whole guest request (Gemini CLI sends ~47 KB on the
//! first turn and its history grows from there, images included). Without a bound, a burst of
//! requests is buffered all at once: 1,000 agents starting together put ~47 MB of request
//! bodies in the gateway's memory before the first is translated, and long histories make it
//! gigabytes. So:
//!
//! * Each connection reads the first `limits.connection_body_bytes` of its body on its own bound,
//!   never waiting for anyone: an ordinary request is read in its normal time whatever other
//!   guests do.
//! * Bytes beyond it are charged to [`BodyBudget`] (`limits.buffered_request_bytes`) as they
//!   arrive, never for a declared or expected size, so a guest that drips its body holds only
//!   what it sent. A body's charge is capped at the whole budget (a larger body is read alone).
//! * A piece that does not fit at once: the reader gives its charge back and waits for all of it
//!   at once, reading nothing meanwhile (its sender waits in the kernel's socket buffers). The
//!   budget serves waiters in order, so two large bodies never wait for each other.
//! * The charge is given back as soon as the request is parsed and translated: never held across
//!   image conversion or while the recorder waits (the caller drops the [`BodyPermit`]).
//! * A body larger than `limits.max_request_bytes` is refused (413) before it is read, or as soon
//!   as a chunked body passes the limit.
//! * A sender that stalls for `timeouts.guest_body_idle_ms` between two pieces, or takes longer
//!   than `timeouts.guest_body_ms` for the whole body (time spent waiting for the budget not
//!   counted), gets a 408 and its charge is freed.
//!
//! What the budget bounds is bodies being read: each connection's own bound, plus the budget,
//! plus what readers waiting for the budget have already read. A body read and parsed stays in
//! memory while its exchange runs (its record keeps it), outside the budget.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use bytes::Bytes;
use futures_util::StreamExt;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;

/// The shared reservation pool (bytes of guest request bodies buffered at once).
#[derive(Debug, Clone)]
pub(crate) struct BodyBudget {
    available: Arc<Semaphore>,
    total: u32,
}

/// A body's charge to the [`BodyBudget`]; given back on drop.
#[derive(Debug, Default)]
pub(crate) struct BodyPermit {
    reserved: Option<OwnedSemaphorePermit>,
}

impl BodyPermit {
    /// Bytes charged.
    fn charged(&self) -> usize {
        self.reserved
            .as_ref()
            .map_or(0, OwnedSemaphorePermit::num_permits)
    }
}

/// A guest's request body, with its charge to the body budget. The charge is dropped once the
/// request is translated: the bytes are not needed after that (a record keeps what it needs),
/// and the charge lets the next body be read.
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
    /// The limit that refused the body, as `/metrics` names it.
    pub fn limit(&self) -> &'static str {
        match self {
            IntakeError::TooLarge { .. } => "size",
            IntakeError::Stalled(_) => "stall",
            IntakeError::TooSlow(_) => "time",
            IntakeError::Broken(_) => "broken",
        }
    }

    /// The HTTP status the guest gets.
    pub fn status(&self) -> u16 {
        match self {
            IntakeError::TooLarge { .. } => 413,
            IntakeError::Stalled(_) | IntakeError::TooSlow(_) => 408,
            IntakeError::Broken(_) => 400,
        }
    }
}

/// How bodies are read: the size limit, each connection's own bound, the shared budget, the
/// stall and whole-body bounds.
#[derive(Debug, Clone)]
pub(crate) struct Intake {
    pub budget: BodyBudget,
    /// Bytes of a body read on the connection's own bound, before the budget is charged.
    pub own: usize,
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

    /// Bytes not charged right now.
    #[cfg(test)]
    pub fn available(&self) -> usize {
        self.available.available_permits()
    }

    /// Raises `permit`'s charge to `wanted` bytes (capped at the whole budget): at once when
    /// they are free, else by giving the charge back and waiting for all of it (never waiting
    /// while holding some). Returns how long it waited.
    async fn charge(&self, permit: &mut BodyPermit, wanted: usize) -> Duration {
        let wanted = u32::try_from(wanted).unwrap_or(u32::MAX).min(self.total);
        let held = u32::try_from(permit.charged()).unwrap_or(u32::MAX);
        let Some(more) = wanted.checked_sub(held).filter(|&m| m > 0) else {
            return Duration::ZERO;
        };
        if let Ok(extra) = Arc::clone(&self.available).try_acquire_many_owned(more) {
            match &mut permit.reserved {
                Some(reserved) => reserved.merge(extra),
                None => permit.reserved = Some(extra),
            }
            return Duration::ZERO;
        }
        let started = Instant::now();
        permit.reserved = None;
        // The semaphore is never closed, so acquiring only waits.
        permit.reserved = Arc::clone(&self.available)
            .acquire_many_owned(wanted)
            .await
            .ok();
        started.elapsed()
    }
}

impl Intake {
    /// [`Intake::read`] of a request's body, its declared length the exact size hyper gives
    /// it (hyper checked `Content-Length` against the body; none for a chunked body).
    pub async fn read_request(&self, body: Body) -> Result<GuestBody, IntakeError> {
        let declared = http_body::Body::size_hint(&body).exact();
        self.read(body, declared).await
    }

    /// Reads the whole body, charging the budget as its bytes arrive. `declared` is the
    /// request's `Content-Length`, if any: only checked against the size limit.
    pub async fn read(&self, body: Body, declared: Option<u64>) -> Result<GuestBody, IntakeError> {
        if let Some(size) = declared.filter(|&s| s > self.max_body as u64) {
            return Err(IntakeError::TooLarge {
                size,
                limit: self.max_body,
            });
        }
        let mut frames = body.into_data_stream();
        let mut permit = BodyPermit::default();
        // Sized from the declared length, but a guest's word allocates at most its own bound.
        let mut joined = bytes::BytesMut::with_capacity(
            declared.map_or(0, |d| usize::try_from(d).unwrap_or(0).min(self.own)),
        );
        let mut first: Option<Bytes> = None;
        let mut deadline = Instant::now() + self.deadline;
        loop {
            let now = Instant::now();
            if now >= deadline {
                return Err(IntakeError::TooSlow(self.deadline));
            }
            let next =
                match tokio::time::timeout(self.stall.min(deadline - now), frames.next()).await {
                    Ok(next) => next,
                    Err(_) if Instant::now() >= deadline => {
                        return Err(IntakeError::TooSlow(self.deadline));
                    }
                    Err(_) => return Err(IntakeError::Stalled(self.stall)),
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
            // Time spent waiting for the budget is not the sender's.
            deadline += self
                .budget
                .charge(&mut permit, size.saturating_sub(self.own))
                .await;
            match first.take() {
                None if joined.is_empty() => first = Some(piece),
                Some(earlier) => {
                    joined.extend_from_slice(&earlier);
                    joined.extend_from_slice(&piece);
                }
                None => joined.extend_from_slice(&piece),
            }
        }
        let bytes = first.unwrap_or_else(|| joined.freeze());
        Ok(GuestBody { bytes, permit })
    }
}

#[cfg(test)]
#[path = "intake_tests.rs"]
mod tests;
