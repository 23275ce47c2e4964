//! The [`Recorder`]: a cheap, cloneable handle that queues record ops for one writer thread.
//!
//! The queue is a bounded async channel ([`RecorderOptions::queue_capacity`]). When it is full,
//! [`Recorder::record`] waits for room without blocking a runtime worker (backpressure: nothing is
//! dropped, memory stays bounded); threads outside a runtime use the blocking variants
//! ([`Recorder::blocking_record`] and the `record_*` helpers). A producer may hand over a write as
//! a closure ([`Recorder::record_built`]) that the writer thread runs, so that parsing and
//! assembling a large record happens there, not on a request thread.
//!
//! The writer drains the queue in batches of at most [`RecorderOptions::max_batch`], redacts
//! every op ([`Redactor`]) and applies each batch in one transaction (a failed batch is retried
//! op by op, so one bad op cannot sink the others). A batch that failed because the store was
//! unavailable (a database server stopped or unreachable, [`StoreError::Unavailable`]) is
//! retried whole, [`RecorderOptions::unavailable_retries`] times with doubling backoff, while
//! producers wait on the full queue; what still fails is counted, op by op, never dropped
//! silently: [`RecorderStats::failed_ops`] and [`RecordError::StoreUnavailable`] from `flush`. `flush` waits until everything queued before
//! it is committed and reports what failed since the last flush; `close` (or dropping the last
//! handle) flushes and stops the writer. [`Recorder::disabled`] accepts and discards.

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::thread::JoinHandle;
use std::time::Duration;

use tokio::sync::{mpsc, oneshot};

use crate::error::{RecordError, StoreError};
use crate::model::{EventRecord, ExchangeRecord, RawLineRecord, RecordOp, RunRecord};
use crate::redact::Redactor;
use crate::spec::StoreSpec;
use crate::sqlite::SqliteStore;
use crate::store::RecordSink;

/// A write the writer thread builds: the producer hands over what the op is made of. `None`:
/// nothing to write any more (e.g. a later write of the same record already replaces it).
pub type BuildOp = Box<dyn FnOnce() -> Option<RecordOp> + Send>;

/// Tuning of the writer queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecorderOptions {
    /// Writes the queue holds before producers wait.
    pub queue_capacity: usize,
    /// Most ops committed in one transaction.
    pub max_batch: usize,
    /// Retries of a batch the store could not take because it was unavailable.
    pub unavailable_retries: u32,
    /// Wait before the first such retry; each next one waits twice as long (at most 10 s).
    pub retry_backoff: Duration,
}

impl Default for RecorderOptions {
    fn default() -> Self {
        RecorderOptions {
            queue_capacity: 4096,
            max_batch: 512,
            unavailable_retries: 6,
            retry_backoff: Duration::from_millis(250),
        }
    }
}

/// Counters of a recorder's writer.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RecorderStats {
    /// Ops committed.
    pub written_ops: u64,
    /// Ops that could not be persisted (ever).
    pub failed_ops: u64,
    /// Transactions committed.
    pub batches: u64,
    /// CPU time of the writer thread (its own clock), building, redacting and storing.
    pub writer_cpu: Duration,
}

/// Who waits for a flush.
enum Waiter {
    Thread(std::sync::mpsc::SyncSender<()>),
    Task(oneshot::Sender<()>),
}

impl Waiter {
    fn wake(self) {
        match self {
            Waiter::Thread(done) => {
                let _ = done.send(());
            }
            Waiter::Task(done) => {
                let _ = done.send(());
            }
        }
    }
}

enum Message {
    Op(RecordOp),
    Build(BuildOp),
    Flush(Waiter),
    Close,
}

#[derive(Default)]
struct Status {
    written_ops: AtomicU64,
    failed_ops: AtomicU64,
    failed_since_flush: AtomicU64,
    /// The last failure was the store being unavailable.
    last_unavailable: AtomicBool,
    batches: AtomicU64,
    writer_cpu_ns: AtomicU64,
    last_error: Mutex<Option<String>>,
}

impl Status {
    fn count_written(&self, ops: usize) {
        self.written_ops.fetch_add(ops as u64, Ordering::Relaxed);
        self.batches.fetch_add(1, Ordering::Relaxed);
    }

    fn count_failed(&self, error: &StoreError) {
        self.count_failed_ops(1, error);
    }

    fn count_failed_ops(&self, ops: usize, error: &StoreError) {
        let ops = ops as u64;
        self.failed_ops.fetch_add(ops, Ordering::Relaxed);
        self.failed_since_flush.fetch_add(ops, Ordering::Relaxed);
        self.last_unavailable
            .store(error.is_unavailable(), Ordering::Relaxed);
        *self
            .last_error
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(error.to_string());
    }

    /// The failures since the last call, as an error (and resets the count).
    fn take_failures(&self) -> Result<(), RecordError> {
        let failed_ops = self.failed_since_flush.swap(0, Ordering::AcqRel);
        if failed_ops == 0 {
            return Ok(());
        }
        let last_error = self
            .last_error
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
            .unwrap_or_default();
        if self.last_unavailable.load(Ordering::Relaxed) {
            return Err(RecordError::StoreUnavailable {
                failed_ops,
                last_error,
            });
        }
        Err(RecordError::WriteFailed {
            failed_ops,
            last_error,
        })
    }
}

struct Shared {
    sender: mpsc::Sender<Message>,
    closed: AtomicBool,
    writer: Mutex<Option<JoinHandle<()>>>,
    redactor: Arc<RwLock<Redactor>>,
    status: Arc<Status>,
}

impl Drop for Shared {
    /// The last handle is gone: the writer stores what is queued, stops, and is waited for.
    fn drop(&mut self) {
        self.closed.store(true, Ordering::Release);
        // Dropping the only sender ends the writer's queue once it is drained.
        let (detached, _) = mpsc::channel(1);
        drop(std::mem::replace(&mut self.sender, detached));
        let writer = self
            .writer
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(writer) = writer {
            let _ = writer.join();
        }
    }
}

/// Handle to the records writer (clone freely; `Send + Sync`).
#[derive(Clone)]
pub struct Recorder {
    shared: Option<Arc<Shared>>,
}

impl std::fmt::Debug for Recorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recorder")
            .field("enabled", &self.is_enabled())
            .finish()
    }
}

impl Default for Recorder {
    fn default() -> Self {
        Recorder::disabled()
    }
}

impl Recorder {
    /// A recorder that accepts every op and stores nothing ("records off").
    pub fn disabled() -> Self {
        Recorder { shared: None }
    }

    /// Opens (or creates) the SQLite store at `path`, recovers what a crashed writer left in
    /// flight, and starts the writer thread with default options.
    pub fn open_sqlite(path: impl AsRef<Path>, redactor: Redactor) -> Result<Self, RecordError> {
        let store = SqliteStore::open(path)?;
        Recorder::start(Box::new(store), redactor, RecorderOptions::default())
    }

    /// Opens the store `DIR/switchyard.sqlite3` (creating `DIR`), as [`Recorder::open_sqlite`];
    /// a `dir` that is a `postgres://` URL (a `--records` value kept as a path) opens that
    /// database instead ([`Recorder::open`]).
    pub fn open_dir(dir: impl AsRef<Path>, redactor: Redactor) -> Result<Self, RecordError> {
        Recorder::open(&StoreSpec::from_path(dir.as_ref())?, redactor)
    }

    /// Opens (or creates) the store `spec` names, SQLite or PostgreSQL, recovers what crashed
    /// writers left in flight, and starts the writer thread with default options.
    pub fn open(spec: &StoreSpec, redactor: Redactor) -> Result<Self, RecordError> {
        let store = spec.open()?;
        Recorder::start(store, redactor, RecorderOptions::default())
    }

    /// Starts a writer thread that owns `store`.
    pub fn start(
        store: Box<dyn RecordSink>,
        redactor: Redactor,
        options: RecorderOptions,
    ) -> Result<Self, RecordError> {
        let (sender, receiver) = mpsc::channel(options.queue_capacity.max(1));
        let redactor = Arc::new(RwLock::new(redactor));
        let status = Arc::new(Status::default());
        let writer = Writer {
            store,
            receiver,
            redactor: Arc::clone(&redactor),
            status: Arc::clone(&status),
            max_batch: options.max_batch.max(1),
            retries: options.unavailable_retries,
            backoff: options.retry_backoff,
        };
        let handle = std::thread::Builder::new()
            .name("switchyard-records-writer".into())
            .spawn(move || writer.run())
            .map_err(RecordError::Spawn)?;
        Ok(Recorder {
            shared: Some(Arc::new(Shared {
                sender,
                closed: AtomicBool::new(false),
                writer: Mutex::new(Some(handle)),
                redactor,
                status,
            })),
        })
    }

    /// False for [`Recorder::disabled`].
    pub fn is_enabled(&self) -> bool {
        self.shared.is_some()
    }

    fn open_shared(&self) -> Result<Option<&Arc<Shared>>, RecordError> {
        match &self.shared {
            None => Ok(None),
            Some(shared) if shared.closed.load(Ordering::Acquire) => Err(RecordError::Closed),
            Some(shared) => Ok(Some(shared)),
        }
    }

    async fn send(&self, message: Message) -> Result<(), RecordError> {
        let Some(shared) = self.open_shared()? else {
            return Ok(());
        };
        shared
            .sender
            .send(message)
            .await
            .map_err(|_| RecordError::Closed)
    }

    /// Sends from synchronous code: waits for room by polling every millisecond (never
    /// tokio's `blocking_send`, which panics when called on a runtime thread).
    fn blocking_send(&self, message: Message) -> Result<(), RecordError> {
        let Some(shared) = self.open_shared()? else {
            return Ok(());
        };
        let mut message = message;
        loop {
            match shared.sender.try_send(message) {
                Ok(()) => return Ok(()),
                Err(mpsc::error::TrySendError::Closed(_)) => return Err(RecordError::Closed),
                Err(mpsc::error::TrySendError::Full(back)) => {
                    message = back;
                    std::thread::sleep(Duration::from_millis(1));
                }
            }
        }
    }

    /// Queues one op; waits (asynchronously) while the queue is full.
    pub async fn record(&self, op: RecordOp) -> Result<(), RecordError> {
        self.send(Message::Op(op)).await
    }

    /// Queues a write that the writer thread builds by running `build` (a panic in it fails
    /// that write alone; `None` writes nothing); waits (asynchronously) while the queue is full.
    pub async fn record_built(
        &self,
        build: impl FnOnce() -> Option<RecordOp> + Send + 'static,
    ) -> Result<(), RecordError> {
        if !self.is_enabled() {
            return Ok(());
        }
        self.send(Message::Build(Box::new(build))).await
    }

    /// Queues one op from synchronous code (it blocks while the queue is full: from async code
    /// use [`Recorder::record`]).
    pub fn blocking_record(&self, op: RecordOp) -> Result<(), RecordError> {
        self.blocking_send(Message::Op(op))
    }

    /// [`Recorder::blocking_record`] of a run.
    pub fn record_run(&self, run: RunRecord) -> Result<(), RecordError> {
        self.blocking_record(RecordOp::UpsertRun(Box::new(run)))
    }

    /// [`Recorder::blocking_record`] of an event.
    pub fn record_event(&self, event: EventRecord) -> Result<(), RecordError> {
        self.blocking_record(RecordOp::Event(event))
    }

    /// [`Recorder::blocking_record`] of a raw guest line.
    pub fn record_raw_line(&self, line: RawLineRecord) -> Result<(), RecordError> {
        self.blocking_record(RecordOp::RawLine(line))
    }

    /// [`Recorder::blocking_record`] of an exchange.
    pub fn record_exchange(&self, exchange: ExchangeRecord) -> Result<(), RecordError> {
        self.blocking_record(RecordOp::UpsertExchange(Box::new(exchange)))
    }

    /// Adds a secret to redact from every op written from now on.
    pub fn add_secret(&self, secret: impl Into<String>) {
        if let Some(shared) = &self.shared {
            shared
                .redactor
                .write()
                .unwrap_or_else(PoisonError::into_inner)
                .add_secret(secret);
        }
    }

    /// Waits until every op queued before this call is committed (blocking: not from a runtime
    /// worker; see [`Recorder::flush_async`]). Reports the ops that failed since the last flush.
    pub fn flush(&self) -> Result<(), RecordError> {
        let Some(shared) = self.open_shared()? else {
            return Ok(());
        };
        let (done, wait) = std::sync::mpsc::sync_channel(1);
        self.blocking_send(Message::Flush(Waiter::Thread(done)))?;
        wait.recv().map_err(|_| RecordError::Closed)?;
        shared.status.take_failures()
    }

    /// [`Recorder::flush`] for async code.
    pub async fn flush_async(&self) -> Result<(), RecordError> {
        let Some(shared) = self.open_shared()? else {
            return Ok(());
        };
        let (done, wait) = oneshot::channel();
        self.send(Message::Flush(Waiter::Task(done))).await?;
        wait.await.map_err(|_| RecordError::Closed)?;
        shared.status.take_failures()
    }

    /// Flushes, stops the writer and waits for it (blocking). Later ops are refused
    /// ([`RecordError::Closed`]); closing again does nothing.
    pub fn close(&self) -> Result<(), RecordError> {
        let Some(shared) = &self.shared else {
            return Ok(());
        };
        if shared.closed.load(Ordering::Acquire) {
            return Ok(());
        }
        let flushed = self.flush();
        let _ = self.blocking_send(Message::Close);
        shared.closed.store(true, Ordering::Release);
        let writer = shared
            .writer
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(writer) = writer {
            let _ = writer.join();
        }
        flushed
    }

    /// [`Recorder::close`] for async code: flushes and stops the writer (which then ends by
    /// itself; the last handle's drop waits for it).
    pub async fn close_async(&self) -> Result<(), RecordError> {
        let Some(shared) = &self.shared else {
            return Ok(());
        };
        if shared.closed.load(Ordering::Acquire) {
            return Ok(());
        }
        let flushed = self.flush_async().await;
        shared.closed.store(true, Ordering::Release);
        let _ = shared.sender.send(Message::Close).await;
        flushed
    }

    /// Counters so far (zeros for a disabled recorder).
    /// Writes queued and not yet taken by the writer (0 when records are off).
    pub fn queued(&self) -> usize {
        self.shared
            .as_ref()
            .map_or(0, |s| s.sender.max_capacity() - s.sender.capacity())
    }

    pub fn stats(&self) -> RecorderStats {
        let Some(shared) = &self.shared else {
            return RecorderStats::default();
        };
        let status = &shared.status;
        RecorderStats {
            written_ops: status.written_ops.load(Ordering::Relaxed),
            failed_ops: status.failed_ops.load(Ordering::Relaxed),
            batches: status.batches.load(Ordering::Relaxed),
            writer_cpu: Duration::from_nanos(status.writer_cpu_ns.load(Ordering::Relaxed)),
        }
    }
}

/// The writer thread's state.
struct Writer {
    store: Box<dyn RecordSink>,
    receiver: mpsc::Receiver<Message>,
    redactor: Arc<RwLock<Redactor>>,
    status: Arc<Status>,
    max_batch: usize,
    retries: u32,
    backoff: Duration,
}

/// Longest wait between two retries of an unavailable store.
const MAX_BACKOFF: Duration = Duration::from_secs(10);

impl Writer {
    fn run(mut self) {
        let mut batch: Vec<RecordOp> = Vec::with_capacity(self.max_batch);
        let mut waiters = Vec::new();
        let mut closing = false;
        while !closing {
            // Every sender gone (all handles dropped): store what is queued and stop.
            let Some(first) = self.receiver.blocking_recv() else {
                break;
            };
            let started = thread_cpu_time();
            closing = self.take(first, &mut batch, &mut waiters);
            while !closing && batch.len() < self.max_batch {
                match self.receiver.try_recv() {
                    Ok(message) => closing = self.take(message, &mut batch, &mut waiters),
                    Err(_) => break,
                }
            }
            self.write(&mut batch);
            for waiter in waiters.drain(..) {
                waiter.wake();
            }
            let spent = thread_cpu_time().saturating_sub(started).as_nanos();
            self.status
                .writer_cpu_ns
                .fetch_add(u64::try_from(spent).unwrap_or(u64::MAX), Ordering::Relaxed);
        }
        // Keep whatever other clones queued before the close was seen.
        while let Ok(message) = self.receiver.try_recv() {
            self.take(message, &mut batch, &mut waiters);
            if batch.len() >= self.max_batch {
                self.write(&mut batch);
            }
        }
        self.write(&mut batch);
        for waiter in waiters {
            waiter.wake();
        }
    }

    /// Sorts one message into the batch (building a deferred write); true for `Close`.
    fn take(&self, message: Message, batch: &mut Vec<RecordOp>, waiters: &mut Vec<Waiter>) -> bool {
        match message {
            Message::Op(op) => batch.push(op),
            Message::Build(build) => {
                // A producer's code: if it panics, that write fails alone, not the writer.
                match std::panic::catch_unwind(std::panic::AssertUnwindSafe(build)) {
                    Ok(Some(op)) => batch.push(op),
                    Ok(None) => {}
                    Err(_) => self.status.count_failed(&StoreError::Backend {
                        context: "building a record",
                        message: "the producer's build panicked".to_owned(),
                    }),
                }
            }
            Message::Flush(waiter) => waiters.push(waiter),
            Message::Close => return true,
        }
        false
    }

    fn write(&mut self, batch: &mut Vec<RecordOp>) {
        if batch.is_empty() {
            return;
        }
        {
            let redactor = self.redactor.read().unwrap_or_else(PoisonError::into_inner);
            for op in batch.iter_mut() {
                redactor.redact_op(op);
            }
        }
        match self.apply(batch) {
            Ok(()) => self.status.count_written(batch.len()),
            // Still unreachable after every retry: the whole batch is lost, and counted.
            Err(error) if error.is_unavailable() => {
                self.status.count_failed_ops(batch.len(), &error)
            }
            Err(_) => {
                // Retry one op per transaction so one bad op cannot sink the others.
                for (index, op) in batch.iter().enumerate() {
                    match self.apply(std::slice::from_ref(op)) {
                        Ok(()) => self.status.count_written(1),
                        Err(error) if error.is_unavailable() => {
                            // The store went away meanwhile: the rest fails the same way.
                            self.status.count_failed_ops(batch.len() - index, &error);
                            break;
                        }
                        Err(error) => self.status.count_failed(&error),
                    }
                }
            }
        }
        batch.clear();
    }

    /// Applies `ops`, retrying with doubling backoff while the store is unavailable. Every op is
    /// an upsert, so a batch whose commit was cut off (and may have landed) is safe to repeat.
    fn apply(&mut self, ops: &[RecordOp]) -> Result<(), StoreError> {
        let mut wait = self.backoff;
        let mut retries = 0;
        loop {
            match self.store.apply(ops) {
                Err(error) if error.is_unavailable() && retries < self.retries => {
                    retries += 1;
                    std::thread::sleep(wait);
                    wait = wait.saturating_mul(2).min(MAX_BACKOFF);
                }
                other => return other,
            }
        }
    }
}

/// The calling thread's CPU time (zero where the clock is unavailable).
fn thread_cpu_time() -> Duration {
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `now` is a valid, writable timespec; the call only writes it.
    if unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut now) } == 0 {
        return Duration::new(
            u64::try_from(now.tv_sec).unwrap_or(0),
            u32::try_from(now.tv_nsec).unwrap_or(0),
        );
    }
    Duration::ZERO
}

#[cfg(test)]
#[path = "recorder_tests.rs"]
mod tests;
