//! A timeout on the silence between the pieces of a body (guest request bodies, upstream
//! response bodies), armed once per body instead of once per piece.
//!
//! `tokio::time::timeout` around the wait for each piece registers a timer per piece.
//! Registering a timer that is due before every other timer of the runtime wakes the thread
//! that waits on the runtime's I/O and timer driver (an eventfd write, then a wake-up and a
//! re-park on another core), and a body's gap timer often is that timer: Gemini CLI's 47 KB
//! request arrives in six 8 KB reads, and each read re-armed it. Measured on `switchyard
//! gateway` with a raw-socket client sending that request 2,000 times in a row to a zero-delay
//! upstream (`perf stat` on the gateway process): `write` calls (nearly all of them eventfd
//! wake-ups) per request 6.3 -> 2.0, `futex` calls 2.8 -> 2.1; gateway CPU per request in three
//! alternating pairs 223/266/260 -> 200/246/260 us. Latency p50, with requests to the two builds
//! interleaved, moved by 0-20 us, within noise.
//!
//! [`GapTimer`] arms one timer for the first gap. Each wait for a piece ([`GapTimer::next`])
//! only notes when it began ([`GapTimer::start_gap`]), as `timeout` would have started its timer
//! then; when the timer fires, it is moved to the end of the current gap if a new one began since,
//! and reports the gap as too long only when none did.

use std::pin::Pin;
use std::time::Duration;

use tokio::time::{Instant, Sleep};

/// Expires once `gap` passes after the last [`GapTimer::start_gap`].
#[derive(Debug)]
pub(crate) struct GapTimer {
    gap: Duration,
    gap_started: Instant,
    timer: Pin<Box<Sleep>>,
}

impl GapTimer {
    /// A timer whose first gap starts now.
    pub fn new(gap: Duration) -> Self {
        let now = Instant::now();
        Self {
            gap,
            gap_started: now,
            timer: Box::pin(tokio::time::sleep_until(now + gap)),
        }
    }

    /// The longest silence allowed.
    pub fn gap(&self) -> Duration {
        self.gap
    }

    /// A wait for the next piece begins: the current gap starts now.
    pub fn start_gap(&mut self) {
        self.gap_started = Instant::now();
    }

    /// Waits for the next `piece`: a new gap starts now, and `None` means it lasted a whole
    /// `gap` (the piece is dropped). A piece that is ready wins over an expiry due at once.
    pub async fn next<F: Future>(&mut self, piece: F) -> Option<F::Output> {
        self.start_gap();
        tokio::select! {
            biased;
            piece = piece => Some(piece),
            () = self.expired() => None,
        }
    }

    /// Resolves once a whole gap has passed since the last [`GapTimer::start_gap`] (or since
    /// [`GapTimer::new`]). Cancel-safe: dropping it
    /// (e.g. when the piece it raced in a `select!` arrives first) loses nothing.
    pub async fn expired(&mut self) {
        loop {
            self.timer.as_mut().await;
            let gap_ends = self.gap_started + self.gap;
            if Instant::now() >= gap_ends {
                return;
            }
            self.timer.as_mut().reset(gap_ends);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GAP: Duration = Duration::from_millis(100);

    /// Whether the timer expires within `within` (in paused time).
    async fn expires_within(timer: &mut GapTimer, within: Duration) -> bool {
        tokio::time::timeout(within, timer.expired()).await.is_ok()
    }

    #[tokio::test(start_paused = true)]
    async fn a_new_gap_moves_the_end_past_the_first_timer() {
        let mut timer = GapTimer::new(GAP);
        tokio::time::sleep(GAP * 3 / 4).await;
        timer.start_gap();
        // The first timer fires at 100 ms; the gap that began at 75 ms ends at 175 ms.
        assert!(
            !expires_within(&mut timer, GAP / 2).await,
            "expired at 125 ms"
        );
        assert!(
            expires_within(&mut timer, GAP * 6 / 10).await,
            "not expired at 185 ms"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn silence_for_a_whole_gap_expires_it() {
        let mut timer = GapTimer::new(GAP);
        assert!(!expires_within(&mut timer, GAP - Duration::from_millis(1)).await);
        assert!(expires_within(&mut timer, Duration::from_millis(2)).await);
        assert_eq!(timer.gap(), GAP);
    }

    #[tokio::test(start_paused = true)]
    async fn gaps_shorter_than_the_bound_never_expire_it() {
        let mut timer = GapTimer::new(GAP);
        for _ in 0..20 {
            assert!(!expires_within(&mut timer, GAP / 2).await);
            timer.start_gap();
        }
    }
}
