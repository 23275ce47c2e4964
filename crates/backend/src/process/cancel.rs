//! Cancelling a session-style run (ACP, OpenCode): a flag and a wake-up for the run, which then
//! asks the guest to stop its work itself, and after a grace the process group is stopped
//! INT → TERM → KILL whatever the guest did.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio::sync::Notify;

use super::StopHandle;

/// A run's cancel; clones share it. The first [`GracefulCancel::cancel`] counts.
#[derive(Clone)]
pub struct GracefulCancel {
    cancelled: Arc<AtomicBool>,
    wake: Arc<Notify>,
    stop: StopHandle,
    grace: Duration,
}

impl GracefulCancel {
    /// A cancel that stops `stop`'s process group `grace` after it was asked for.
    pub fn new(stop: StopHandle, grace: Duration) -> Self {
        Self {
            cancelled: Arc::default(),
            wake: Arc::default(),
            stop,
            grace,
        }
    }

    pub fn cancel(&self) {
        if self.cancelled.swap(true, Ordering::AcqRel) {
            return;
        }
        self.wake.notify_one();
        let (stop, grace) = (self.stop.clone(), self.grace);
        tokio::spawn(async move {
            tokio::time::sleep(grace).await;
            stop.cancel();
        });
    }

    /// The process's stop handle (the inactivity watchdog's controls).
    pub fn stop_handle(&self) -> &StopHandle {
        &self.stop
    }

    /// Whether the run was cancelled.
    pub fn is_cancelled(&self) -> bool {
        self.cancelled.load(Ordering::Acquire)
    }

    /// The flag itself, for parts of the run that only read it.
    pub(crate) fn flag(&self) -> Arc<AtomicBool> {
        self.cancelled.clone()
    }

    /// Completes once the run is cancelled (at once when it was already, for one waiter).
    pub async fn notified(&self) {
        self.wake.notified().await;
    }
}
