//! The [`Recorder`]: a cheap, cloneable handle that queues record ops for one writer thread.
//!
//! The queue is bounded ([`RecorderOptions::queue_capacity`]); when it is full, `record` blocks until
//! the writer catches up (backpressure) instead of dropping records; async producers use
//! [`Recorder::try_record_deferred`] and wait on their side. The writer drains the queue in
//! batches, builds the [`DeferredExchange`]s (a producer hands over what a record is made of, the
//! writer thread makes it), skips an exchange write that a later write of the same exchange in
//! the batch replaces (every exchange op is an upsert of the whole record), redacts every op
//! (exchanges given as text are prepared by [`crate::document`]), and applies each batch in one
//! transaction; after a batch that did not fill up it lingers a few milliseconds so ops gather
//! instead of waking it one by one. It runs in the idle scheduling class while it keeps up, and
//! at nice +10 while it is behind or someone waits on it (at nice +10 throughout where the
//! process could not leave the idle class again; [`crate::background`]). A producer that asks
//! ([`Recorder::hand_back_spent`]) gets the parts of stored exchanges it allocated back, to free
//! them on its own threads, a few per call ([`Recorder::free_spent`]); what it does not take
//! back the writer frees once its queue has been empty for a second. `flush` waits until
//! everything queued before it is committed; `close` (or dropping the last handle) flushes and
//! stops the writer.
//! [`Recorder::disabled`] is the "records off" recorder: it accepts and discards.
//! [`Recorder::discarding`] is a benchmark instrument between records off and on: a real writer
//! thread and queue that drop every write unbuilt.

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{
    Receiver, RecvError, RecvTimeoutError, SyncSender, TryRecvError, sync_channel,
};
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::thread::JoinHandle;
use std::time::Duration;

use crate::document::{self, ExchangeText, SharedBlobs, SpentExchange};
use crate::error::{RecordError, StoreError};
use crate::model::{EventRecord, ExchangeRecord, RawLineRecord, RecordOp, RunRecord};
use crate::redact::Redactor;
use crate::sqlite::SqliteStore;
use crate::store::RecordSink;

/// An exchange write whose op is built on the recorder's writer thread, not by the producer:
/// the producer keeps its request path to handing over cheap handles (shared bytes, the parts
/// the record is derived from), and the writer builds, redacts and stores in one place.
pub trait DeferredExchange: Send {
    /// The exchange the built op upserts.
    fn exchange_id(&self) -> uuid::Uuid;

    /// Builds the op: an exchange upsert ([`RecordOp::UpsertExchange`] or
    /// [`RecordOp::UpsertExchangeText`]) of [`DeferredExchange::exchange_id`]. Runs on the writer
    /// thread, before redaction.
    fn build(self: Box<Self>) -> RecordOp;
}

/// What [`Recorder::try_record_deferred`] did with a write.
pub enum Queued {
    /// Queued (or discarded by a disabled recorder).
    Yes,
    /// The queue is full: the write is handed back; try again later.
    Full(Box<dyn DeferredExchange>),
}

/// Tuning of the writer queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecorderOptions {
    /// Ops the queue holds before `record` blocks.
    pub queue_capacity: usize,
    /// Most ops committed in one transaction.
    pub max_batch: usize,
}

impl Default for RecorderOptions {
    fn default() -> Self {
        RecorderOptions {
            queue_capacity: 4096,
            max_batch: 512,
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
    /// Exchange texts stored as text (the fast path of [`crate::document`]); the others were
    /// parsed because redaction could change them.
    pub exchanges_as_text: u64,
    /// Exchange writes skipped because a later write of the same exchange in the same batch
    /// replaced them (an exchange that began and ended within one batch is stored once).
    pub replaced_ops: u64,
    /// Bytes of the exchange records stored as text (their JSON, blobs not counted), summed:
    /// divided by [`RecorderStats::exchanges_as_text`], what one exchange adds to the store.
    pub exchange_text_bytes: u64,
    /// Writes a [`Recorder::discarding`] recorder's writer dropped unbuilt (0 for any other).
    pub discarded_ops: u64,
    /// CPU time the writer thread spent on its batches, by stage.
    pub writer_cpu: WriterCpu,
}

/// CPU time of the writer thread (its own CPU clock: time it waited or was preempted does not
/// count), summed over batches, by stage. Divided by [`RecorderStats::written_ops`] it is what
/// storing one op costs the machine, measured where it happens (`switchyard bench gateway`
/// prints it).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WriterCpu {
    /// Turning queued writes into ops: skipping replaced writes, building deferred exchanges,
    /// preparing exchange texts ([`crate::document`]) and redacting.
    pub preparing: Duration,
    /// Applying the ops to the store (one transaction per batch).
    pub storing: Duration,
    /// Freeing the applied ops, or handing the parts producers allocated back to them
    /// ([`Recorder::hand_back_spent`]); for a [`Recorder::discarding`] recorder, dropping the
    /// writes.
    pub freeing: Duration,
}

enum Message {
    Op(RecordOp),
    Deferred(Box<dyn DeferredExchange>),
    Flush(SyncSender<()>),
    Close,
}

#[derive(Default)]
struct WriterStatus {
    written_ops: AtomicU64,
    failed_ops: AtomicU64,
    failed_since_flush: AtomicU64,
    batches: AtomicU64,
    exchanges_as_text: AtomicU64,
    replaced_ops: AtomicU64,
    exchange_text_bytes: AtomicU64,
    discarded_ops: AtomicU64,
    /// [`WriterCpu`] in nanoseconds.
    preparing_ns: AtomicU64,
    storing_ns: AtomicU64,
    freeing_ns: AtomicU64,
    last_error: Mutex<Option<String>>,
}

struct Shared {
    sender: SyncSender<Message>,
    closed: AtomicBool,
    writer: Mutex<Option<JoinHandle<()>>>,
    redactor: Arc<RwLock<Redactor>>,
    status: Arc<WriterStatus>,
    spent: Arc<SpentPile>,
}

/// Most stored exchanges whose producer-made parts wait in a [`SpentPile`]; beyond it the writer
/// frees them itself.
const SPENT_MAX: usize = 1024;

/// Most exchanges whose parts one [`Recorder::free_spent`] call frees.
pub const SPENT_FREED_PER_CALL: usize = 8;

/// How long the writer's queue stays empty before the writer frees the parts producers have not
/// taken back ([`SpentPile`]): with nobody writing there is no allocator contention to avoid, and
/// an idle producer would otherwise keep them (up to [`SPENT_MAX`] exchanges, their request
/// bodies included) until its next writes.
const IDLE_FREE_AFTER: Duration = Duration::from_secs(1);

/// Producer-made parts of stored exchanges, handed back for the producers' threads to free
/// ([`Recorder::hand_back_spent`]).
///
/// Why: with glibc's allocator, a block freed on another thread than the one that allocated it
/// goes back to the allocating thread's arena under that arena's lock, and that thread's later
/// allocations miss its per-thread cache and take the slow path. An exchange record is dozens
/// of blocks the request threads allocated (the record skeleton, the request texts); freed on
/// the writer thread they made the request threads' `malloc` measurably slower.
#[derive(Default)]
struct SpentPile {
    /// Set once a producer promised to call [`Recorder::free_spent`].
    on: AtomicBool,
    parts: Mutex<Vec<SpentExchange>>,
}

impl SpentPile {
    /// Keeps the producer-made parts of the stored `batch` when handing back is on and the pile
    /// has room; frees everything else here.
    fn keep(&self, batch: Vec<RecordOp>) {
        if !self.on.load(Ordering::Relaxed) {
            return;
        }
        let mut parts = self.parts.lock().unwrap_or_else(PoisonError::into_inner);
        for op in batch {
            match op {
                RecordOp::UpsertExchangeDocument(document) if parts.len() < SPENT_MAX => {
                    parts.push(document.into_spent());
                }
                other => drop(other),
            }
        }
    }

    /// Takes up to `most` exchanges' parts (the newest) unless another thread is at the pile
    /// (never waits).
    fn take(&self, most: usize) -> Vec<SpentExchange> {
        match self.parts.try_lock() {
            Ok(mut parts) => {
                let keep = parts.len().saturating_sub(most);
                parts.split_off(keep)
            }
            Err(_) => Vec::new(),
        }
    }
}

impl Shared {
    fn stop_writer(&self) {
        if !self.closed.swap(true, Ordering::SeqCst) {
            // The writer may already be gone (it only exits on Close or when the store panicked).
            let _ = self.sender.send(Message::Close);
        }
        let handle = self
            .writer
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(handle) = handle {
            let _ = handle.join();
        }
    }
}

impl Drop for Shared {
    fn drop(&mut self) {
        self.stop_writer();
    }
}

/// Handle for recording runs, events, raw lines and exchanges. Clone it freely (it is an `Arc`).
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

    /// Opens the store `DIR/switchyard.sqlite3` (creating `DIR`), as [`Recorder::open_sqlite`].
    pub fn open_dir(dir: impl AsRef<Path>, redactor: Redactor) -> Result<Self, RecordError> {
        let dir = dir.as_ref();
        std::fs::create_dir_all(dir).map_err(|source| StoreError::Io {
            path: dir.display().to_string(),
            source,
        })?;
        Recorder::open_sqlite(crate::store_path(dir), redactor)
    }

    /// Starts a writer thread that owns `store`.
    pub fn start(
        store: Box<dyn RecordSink>,
        redactor: Redactor,
        options: RecorderOptions,
    ) -> Result<Self, RecordError> {
        Recorder::start_writer(WriterSink::Store(store), redactor, options)
    }

    /// A recorder whose writer thread takes every write off the queue, like any recorder's, and
    /// drops it: nothing is built, redacted or stored ([`RecorderStats::discarded_ops`] counts
    /// them). A benchmark instrument, not a way to run: with it, what records cost is what
    /// producers spend handing writes over, the queue and the dropping (`switchyard bench
    /// gateway` prints it as "records handover alone").
    pub fn discarding() -> Result<Self, RecordError> {
        Recorder::start_writer(
            WriterSink::Discard,
            Redactor::default(),
            RecorderOptions::default(),
        )
    }

    fn start_writer(
        sink: WriterSink,
        redactor: Redactor,
        options: RecorderOptions,
    ) -> Result<Self, RecordError> {
        let (sender, receiver) = sync_channel(options.queue_capacity.max(1));
        let redactor = Arc::new(RwLock::new(redactor));
        let status = Arc::new(WriterStatus::default());
        let spent = Arc::new(SpentPile::default());
        let writer = Writer {
            sink,
            receiver,
            redactor: Arc::clone(&redactor),
            status: Arc::clone(&status),
            max_batch: options.max_batch.max(1),
            shared_blobs: SharedBlobs::default(),
            spent: Arc::clone(&spent),
        };
        let handle = std::thread::Builder::new()
            .name("switchyard-records-writer".into())
            .spawn(move || {
                crate::background::lower_this_threads_priority();
                writer.run()
            })
            .map_err(RecordError::Spawn)?;
        Ok(Recorder {
            shared: Some(Arc::new(Shared {
                sender,
                closed: AtomicBool::new(false),
                writer: Mutex::new(Some(handle)),
                redactor,
                status,
                spent,
            })),
        })
    }

    /// False for [`Recorder::disabled`].
    pub fn is_enabled(&self) -> bool {
        self.shared.is_some()
    }

    /// Queues one op. Returns at once unless the queue is full, in which case it waits for room.
    pub fn record(&self, op: RecordOp) -> Result<(), RecordError> {
        let Some(shared) = &self.shared else {
            return Ok(());
        };
        if shared.closed.load(Ordering::Acquire) {
            return Err(RecordError::Closed);
        }
        shared
            .sender
            .send(Message::Op(op))
            .map_err(|_| RecordError::Closed)
    }

    /// Queues an exchange write to be built on the writer thread, without waiting: when the
    /// queue is full the write comes back as [`Queued::Full`] (for producers that must not block,
    /// e.g. on an async runtime's worker threads).
    pub fn try_record_deferred(
        &self,
        write: Box<dyn DeferredExchange>,
    ) -> Result<Queued, RecordError> {
        let Some(shared) = &self.shared else {
            return Ok(Queued::Yes);
        };
        if shared.closed.load(Ordering::Acquire) {
            return Err(RecordError::Closed);
        }
        match shared.sender.try_send(Message::Deferred(write)) {
            Ok(()) => Ok(Queued::Yes),
            Err(std::sync::mpsc::TrySendError::Full(Message::Deferred(write))) => {
                Ok(Queued::Full(write))
            }
            Err(_) => Err(RecordError::Closed),
        }
    }

    /// Queues an upsert of `run`.
    pub fn record_run(&self, run: RunRecord) -> Result<(), RecordError> {
        self.record(RecordOp::UpsertRun(Box::new(run)))
    }

    /// Queues one canonical event.
    pub fn record_event(&self, event: EventRecord) -> Result<(), RecordError> {
        self.record(RecordOp::Event(event))
    }

    /// Queues one raw guest line.
    pub fn record_raw_line(&self, line: RawLineRecord) -> Result<(), RecordError> {
        self.record(RecordOp::RawLine(line))
    }

    /// Queues an upsert of `exchange` (call it when the exchange begins and when it ends).
    pub fn record_exchange(&self, exchange: ExchangeRecord) -> Result<(), RecordError> {
        self.record(RecordOp::UpsertExchange(Box::new(exchange)))
    }

    /// Queues an upsert of an exchange whose requests are JSON text (the fast path of
    /// [`Recorder::record_exchange`], see [`crate::document`]).
    pub fn record_exchange_text(&self, exchange: ExchangeText) -> Result<(), RecordError> {
        self.record(RecordOp::UpsertExchangeText(Box::new(exchange)))
    }

    /// From now on the writer hands back the parts of stored exchanges that the producer's
    /// threads allocated (the record skeleton and the request texts of exchanges stored as
    /// text), instead of freeing them itself; the producer frees them with
    /// [`Recorder::free_spent`], which it must then call regularly (e.g. with each exchange it
    /// hands over). At most a bounded number wait; beyond that the writer frees them as before.
    pub fn hand_back_spent(&self) {
        if let Some(shared) = &self.shared {
            shared.spent.on.store(true, Ordering::Relaxed);
        }
    }

    /// Frees, on the calling thread, the parts of at most [`SPENT_FREED_PER_CALL`] exchanges the
    /// writer handed back ([`Recorder::hand_back_spent`]); returns for how many. A producer
    /// calls it once per write and each write hands back at most one exchange, so this keeps
    /// up, and one call never holds a request thread for long (freeing a whole pile of 512
    /// exchanges took 4-19 ms, blocking an async runtime's worker). Never waits: returns 0 when
    /// another thread is at it.
    pub fn free_spent(&self) -> usize {
        self.free_handed_back(SPENT_FREED_PER_CALL)
    }

    /// Frees everything the writer handed back, on the calling thread (at shutdown, or off the
    /// request path); returns for how many exchanges.
    pub fn free_all_spent(&self) -> usize {
        self.free_handed_back(usize::MAX)
    }

    fn free_handed_back(&self, most: usize) -> usize {
        let Some(shared) = &self.shared else {
            return 0;
        };
        let spent = shared.spent.take(most);
        let exchanges = spent.len();
        drop(spent);
        exchanges
    }

    /// Registers one more secret to redact (e.g. a per-run token). It applies to every op the
    /// writer has not written yet, including ones already queued.
    pub fn add_secret(&self, secret: impl Into<String>) {
        if let Some(shared) = &self.shared {
            shared
                .redactor
                .write()
                .unwrap_or_else(PoisonError::into_inner)
                .add_secret(secret);
        }
    }

    /// Waits until every op queued before this call is committed. Reports ops that failed to
    /// persist since the previous flush.
    pub fn flush(&self) -> Result<(), RecordError> {
        let Some(shared) = &self.shared else {
            return Ok(());
        };
        let (done_sender, done) = sync_channel(1);
        shared
            .sender
            .send(Message::Flush(done_sender))
            .map_err(|_| RecordError::Closed)?;
        done.recv().map_err(|_| RecordError::Closed)?;
        take_failures(&shared.status)
    }

    /// Flushes and stops the writer thread. Later `record` calls on any clone return
    /// [`RecordError::Closed`]. Closing twice is fine.
    pub fn close(&self) -> Result<(), RecordError> {
        let Some(shared) = &self.shared else {
            return Ok(());
        };
        shared.stop_writer();
        take_failures(&shared.status)
    }

    /// Writer counters so far.
    pub fn stats(&self) -> RecorderStats {
        let Some(shared) = &self.shared else {
            return RecorderStats::default();
        };
        RecorderStats {
            written_ops: shared.status.written_ops.load(Ordering::Relaxed),
            failed_ops: shared.status.failed_ops.load(Ordering::Relaxed),
            batches: shared.status.batches.load(Ordering::Relaxed),
            exchanges_as_text: shared.status.exchanges_as_text.load(Ordering::Relaxed),
            replaced_ops: shared.status.replaced_ops.load(Ordering::Relaxed),
            exchange_text_bytes: shared.status.exchange_text_bytes.load(Ordering::Relaxed),
            discarded_ops: shared.status.discarded_ops.load(Ordering::Relaxed),
            writer_cpu: WriterCpu {
                preparing: nanos(&shared.status.preparing_ns),
                storing: nanos(&shared.status.storing_ns),
                freeing: nanos(&shared.status.freeing_ns),
            },
        }
    }
}

fn nanos(counter: &AtomicU64) -> Duration {
    Duration::from_nanos(counter.load(Ordering::Relaxed))
}

/// CPU time the calling thread has used (zero where the clock is unavailable).
pub(crate) fn thread_cpu_time() -> Duration {
    #[cfg(unix)]
    {
        let mut now = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: `now` is a valid, writable timespec; the call only writes it.
        if unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut now) } == 0 {
            return Duration::new(now.tv_sec as u64, now.tv_nsec as u32);
        }
    }
    Duration::ZERO
}

/// Adds the thread CPU time since `since` to `counter`; returns the time now.
fn charge(counter: &AtomicU64, since: Duration) -> Duration {
    let now = thread_cpu_time();
    let spent = now.saturating_sub(since).as_nanos();
    counter.fetch_add(u64::try_from(spent).unwrap_or(u64::MAX), Ordering::Relaxed);
    now
}

fn take_failures(status: &WriterStatus) -> Result<(), RecordError> {
    let failed_ops = status.failed_since_flush.swap(0, Ordering::AcqRel);
    if failed_ops == 0 {
        return Ok(());
    }
    let last_error = status
        .last_error
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clone()
        .unwrap_or_default();
    Err(RecordError::WriteFailed {
        failed_ops,
        last_error,
    })
}

/// How long the writer lets ops gather after a batch that did not fill up (and answered no
/// flush): waking it for every op costs producers more than the records' delay.
const LINGER: std::time::Duration = std::time::Duration::from_millis(5);

/// Where a writer's batches go.
enum WriterSink {
    Store(Box<dyn RecordSink>),
    /// Nowhere: see [`Recorder::discarding`].
    Discard,
}

struct Writer {
    sink: WriterSink,
    receiver: Receiver<Message>,
    redactor: Arc<RwLock<Redactor>>,
    status: Arc<WriterStatus>,
    max_batch: usize,
    /// Blobs of the shared request parts seen so far (see [`crate::document`]).
    shared_blobs: SharedBlobs,
    spent: Arc<SpentPile>,
}

impl Writer {
    fn run(mut self) {
        let mut batch = Vec::with_capacity(self.max_batch);
        let mut flushes = Vec::new();
        let mut closing = false;
        let mut behind = false;
        while !closing {
            let next = match self.receiver.recv_timeout(IDLE_FREE_AFTER) {
                Err(RecvTimeoutError::Timeout) => {
                    // Idle: free what no producer took back, then wait as long as it takes.
                    drop(self.spent.take(usize::MAX));
                    self.receiver.recv().map_err(|RecvError| ())
                }
                other => other.map_err(|_| ()),
            };
            match next {
                Ok(message) => closing = self.take(message, &mut batch, &mut flushes),
                Err(()) => closing = true,
            }
            while !closing && batch.len() < self.max_batch {
                match self.receiver.try_recv() {
                    Ok(message) => closing = self.take(message, &mut batch, &mut flushes),
                    Err(TryRecvError::Empty | TryRecvError::Disconnected) => break,
                }
            }
            if closing {
                // Keep whatever other clones queued before the close was seen.
                while let Ok(message) = self.receiver.try_recv() {
                    self.take(message, &mut batch, &mut flushes);
                    if batch.len() >= self.max_batch {
                        self.write(&mut batch);
                    }
                }
            }
            let full = batch.len() >= self.max_batch;
            // Behind, or someone waits: run as normal (nice) work until a batch does not fill
            // up (see `crate::background`).
            let now_behind = full || !flushes.is_empty() || closing;
            if now_behind != behind {
                crate::background::set_this_thread_behind(now_behind);
                behind = now_behind;
            }
            self.write(&mut batch);
            let flushed = !flushes.is_empty();
            for flush in flushes.drain(..) {
                let _ = flush.send(());
            }
            if !full && !flushed && !closing {
                // Let ops gather instead of being woken for each one.
                std::thread::sleep(LINGER);
            }
        }
    }

    /// Sorts one message into the batch; returns true for `Close`.
    fn take(
        &self,
        message: Message,
        batch: &mut Vec<Pending>,
        flushes: &mut Vec<SyncSender<()>>,
    ) -> bool {
        match message {
            Message::Op(op) => batch.push(Pending::Op(op)),
            Message::Deferred(write) => batch.push(Pending::Deferred(write)),
            Message::Flush(done) => flushes.push(done),
            Message::Close => return true,
        }
        false
    }

    fn write(&mut self, pending: &mut Vec<Pending>) {
        if pending.is_empty() {
            return;
        }
        let started = thread_cpu_time();
        let store = match &mut self.sink {
            WriterSink::Store(store) => store,
            WriterSink::Discard => {
                let dropped = pending.len() as u64;
                pending.clear();
                self.status.count_discarded(dropped);
                charge(&self.status.freeing_ns, started);
                return;
            }
        };
        let before = pending.len();
        let kept = without_replaced_writes(std::mem::take(pending));
        self.status
            .replaced_ops
            .fetch_add((before - kept.len()) as u64, Ordering::Relaxed);
        let batch: Vec<RecordOp> = {
            let redactor = self.redactor.read().unwrap_or_else(PoisonError::into_inner);
            let shared_blobs = &mut self.shared_blobs;
            let status = &self.status;
            kept.into_iter()
                .filter_map(|pending| match pending {
                    Pending::Op(op) => Some(op),
                    // A producer's code: if it panics, that write fails alone, not the writer.
                    Pending::Deferred(write) => {
                        let built = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                            write.build()
                        }));
                        if built.is_err() {
                            status.count_failed(&StoreError::Backend {
                                context: "building a deferred exchange write",
                                message: "the producer's build panicked".to_owned(),
                            });
                        }
                        built.ok()
                    }
                })
                .map(|op| match op {
                    RecordOp::UpsertExchangeText(text) => {
                        let op = document::prepare(*text, &redactor, shared_blobs);
                        if let RecordOp::UpsertExchangeDocument(document) = &op {
                            status.exchanges_as_text.fetch_add(1, Ordering::Relaxed);
                            status
                                .exchange_text_bytes
                                .fetch_add(document.stored_len() as u64, Ordering::Relaxed);
                        }
                        op
                    }
                    mut op => {
                        redactor.redact_op(&mut op);
                        op
                    }
                })
                .collect()
        };
        let prepared = charge(&self.status.preparing_ns, started);
        if batch.is_empty() {
            return;
        }
        match store.apply(&batch) {
            Ok(()) => self.status.count_written(batch.len()),
            Err(_) => {
                // Retry one op per transaction so one bad op cannot sink the others.
                for op in batch.iter() {
                    match store.apply(std::slice::from_ref(op)) {
                        Ok(()) => self.status.count_written(1),
                        Err(error) => self.status.count_failed(&error),
                    }
                }
            }
        }
        let stored = charge(&self.status.storing_ns, prepared);
        self.spent.keep(batch);
        charge(&self.status.freeing_ns, stored);
    }
}

impl WriterStatus {
    fn count_discarded(&self, ops: u64) {
        self.discarded_ops.fetch_add(ops, Ordering::Relaxed);
        self.batches.fetch_add(1, Ordering::Relaxed);
    }

    fn count_written(&self, ops: usize) {
        self.written_ops.fetch_add(ops as u64, Ordering::Relaxed);
        self.batches.fetch_add(1, Ordering::Relaxed);
    }

    fn count_failed(&self, error: &StoreError) {
        self.failed_ops.fetch_add(1, Ordering::Relaxed);
        self.failed_since_flush.fetch_add(1, Ordering::AcqRel);
        *self
            .last_error
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(error.to_string());
    }
}

/// A queued write: an op as given, or an exchange still to be built.
enum Pending {
    Op(RecordOp),
    Deferred(Box<dyn DeferredExchange>),
}

impl Pending {
    /// The exchange a write upserts (whole-record upserts only).
    fn exchange_id(&self) -> Option<uuid::Uuid> {
        match self {
            Pending::Deferred(write) => Some(write.exchange_id()),
            Pending::Op(RecordOp::UpsertExchange(record)) => Some(record.id),
            Pending::Op(RecordOp::UpsertExchangeText(text)) => Some(text.record.id),
            Pending::Op(RecordOp::UpsertExchangeDocument(document)) => Some(document.record().id),
            Pending::Op(RecordOp::UpsertRun(_) | RecordOp::Event(_) | RecordOp::RawLine(_)) => None,
        }
    }
}

/// `batch` without the exchange writes that a later write of the same exchange in it replaces
/// (each is an upsert of the whole record, and the batch is one transaction: the stored result
/// is the same, built and redacted once).
fn without_replaced_writes(batch: Vec<Pending>) -> Vec<Pending> {
    let mut later = std::collections::HashSet::new();
    let mut kept: Vec<Pending> = batch
        .into_iter()
        .rev()
        .filter(|pending| pending.exchange_id().is_none_or(|id| later.insert(id)))
        .collect();
    kept.reverse();
    kept
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::document::JsonText;
    use crate::model::{EventRecord, RecordOp};
    use bytes::Bytes;
    use chrono::Utc;
    use serde_json::Value;
    use std::sync::Arc;
    use uuid::Uuid;

    /// A sink that keeps applied ops in memory; refuses any batch containing an event with
    /// `seq == 13`.
    /// With a `gate`, each `apply` first waits for the test at that barrier.
    #[derive(Clone, Default)]
    struct PickyStore {
        applied: Arc<Mutex<Vec<RecordOp>>>,
        gate: Option<Arc<std::sync::Barrier>>,
    }

    impl RecordSink for PickyStore {
        fn apply(&mut self, ops: &[RecordOp]) -> Result<(), StoreError> {
            if let Some(gate) = &self.gate {
                gate.wait();
            }
            if ops
                .iter()
                .any(|op| matches!(op, RecordOp::Event(e) if e.seq == 13))
            {
                return Err(StoreError::Backend {
                    context: "test",
                    message: "seq 13 refused".into(),
                });
            }
            self.applied.lock().unwrap().extend_from_slice(ops);
            Ok(())
        }
    }

    /// A recorder writing into a [`PickyStore`], and what that store applied.
    fn picky_recorder(
        redactor: Redactor,
        options: RecorderOptions,
    ) -> (Recorder, Arc<Mutex<Vec<RecordOp>>>) {
        let store = PickyStore::default();
        let applied = Arc::clone(&store.applied);
        let recorder = Recorder::start(Box::new(store), redactor, options).unwrap();
        (recorder, applied)
    }

    fn event(seq: u64, text: &str) -> EventRecord {
        EventRecord {
            run_id: Uuid::nil(),
            seq,
            at: Utc::now(),
            kind: "user_message".into(),
            event: serde_json::json!({"type": "user_message", "text": text}),
        }
    }

    #[test]
    fn recorder_is_send_and_sync() {
        fn assert_send_sync<T: Send + Sync + Clone>() {}
        assert_send_sync::<Recorder>();
    }

    #[test]
    fn one_bad_op_fails_alone_and_is_reported_by_flush() {
        let (recorder, applied) = picky_recorder(
            Redactor::new(["secret-token-123"]),
            RecorderOptions {
                queue_capacity: 64,
                max_batch: 64,
            },
        );
        for seq in 10..16 {
            recorder
                .record_event(event(seq, "uses secret-token-123"))
                .unwrap();
        }
        match recorder.flush() {
            Err(RecordError::WriteFailed {
                failed_ops: 1,
                last_error,
            }) => {
                assert!(last_error.contains("seq 13 refused"), "{last_error}");
            }
            other => panic!("expected one failed op, got {other:?}"),
        }
        recorder.flush().expect("failures are reported once");
        recorder.close().unwrap();
        let applied = applied.lock().unwrap();
        let seqs: Vec<u64> = applied
            .iter()
            .map(|op| match op {
                RecordOp::Event(e) => e.seq,
                _ => unreachable!(),
            })
            .collect();
        assert_eq!(seqs, [10, 11, 12, 14, 15]);
        assert!(
            applied
                .iter()
                .all(|op| matches!(op, RecordOp::Event(e) if e.event["text"] == "uses [REDACTED]"))
        );
        let stats = recorder.stats();
        assert_eq!((stats.written_ops, stats.failed_ops), (5, 1));
    }

    /// An exchange write built on the writer thread: the record with `note` added.
    struct NoteOnBuild {
        record: ExchangeRecord,
        note: &'static str,
        built_on: Arc<Mutex<Vec<std::thread::ThreadId>>>,
    }

    impl NoteOnBuild {
        /// A write of a fresh exchange (where it is built is kept but not looked at).
        fn new(note: &'static str) -> Self {
            Self {
                record: ExchangeRecord::begin(None, "ingress", "m", serde_json::Value::Null),
                note,
                built_on: Arc::new(Mutex::new(Vec::new())),
            }
        }
    }

    impl DeferredExchange for NoteOnBuild {
        fn exchange_id(&self) -> Uuid {
            self.record.id
        }
        fn build(self: Box<Self>) -> RecordOp {
            self.built_on
                .lock()
                .unwrap()
                .push(std::thread::current().id());
            let mut record = self.record;
            record
                .notes
                .push(format!("{} uses secret-token-123", self.note));
            RecordOp::UpsertExchange(Box::new(record))
        }
    }

    fn exchange_notes(op: &RecordOp) -> String {
        match op {
            RecordOp::UpsertExchange(record) => record.notes.join(","),
            other => panic!("expected an exchange upsert, got {other:?}"),
        }
    }

    #[test]
    fn a_discarding_recorder_takes_every_write_and_builds_or_stores_none() {
        let recorder = Recorder::discarding().unwrap();
        let built_on = Arc::new(Mutex::new(Vec::new()));
        for note in ["a", "b", "c"] {
            let write = NoteOnBuild {
                built_on: Arc::clone(&built_on),
                ..NoteOnBuild::new(note)
            };
            assert!(matches!(
                recorder.try_record_deferred(Box::new(write)),
                Ok(Queued::Yes)
            ));
        }
        recorder.record_event(event(1, "plain")).unwrap();
        recorder.flush().unwrap();
        assert!(built_on.lock().unwrap().is_empty(), "nothing was built");
        let stats = recorder.stats();
        assert_eq!(stats.discarded_ops, 4);
        assert_eq!((stats.written_ops, stats.failed_ops), (0, 0));
        assert_eq!(
            stats.writer_cpu.preparing + stats.writer_cpu.storing,
            Duration::ZERO
        );
        recorder.close().unwrap();
    }

    #[test]
    fn deferred_exchanges_are_built_on_the_writer_thread_and_redacted() {
        let (recorder, applied) = picky_recorder(
            Redactor::new(["secret-token-123"]),
            RecorderOptions::default(),
        );
        let built_on = Arc::new(Mutex::new(Vec::new()));
        let write = NoteOnBuild {
            built_on: Arc::clone(&built_on),
            ..NoteOnBuild::new("end")
        };
        assert!(matches!(
            recorder.try_record_deferred(Box::new(write)),
            Ok(Queued::Yes)
        ));
        recorder.flush().unwrap();
        let applied = applied.lock().unwrap();
        assert_eq!(applied.len(), 1);
        assert_eq!(exchange_notes(&applied[0]), "end uses [REDACTED]");
        let built_on = built_on.lock().unwrap();
        assert_eq!(built_on.len(), 1);
        assert_ne!(built_on[0], std::thread::current().id());
        recorder.close().unwrap();
        assert!(matches!(
            recorder.try_record_deferred(Box::new(NoteOnBuild::new("late"))),
            Err(RecordError::Closed)
        ));
    }

    #[test]
    fn a_full_queue_hands_a_deferred_write_back() {
        // A store that blocks until released keeps the writer busy while the queue fills.
        let gate = Arc::new(std::sync::Barrier::new(2));
        let store = PickyStore {
            gate: Some(Arc::clone(&gate)),
            ..PickyStore::default()
        };
        let recorder = Recorder::start(
            Box::new(store),
            Redactor::default(),
            RecorderOptions {
                queue_capacity: 1,
                max_batch: 1,
            },
        )
        .unwrap();
        // The writer takes the first write and blocks in `apply`; the second fills the queue.
        let mut queued = 0;
        let (offered, handed_back) = loop {
            let write = NoteOnBuild::new("n");
            let offered = write.record.id;
            match recorder.try_record_deferred(Box::new(write)).unwrap() {
                Queued::Yes => queued += 1,
                Queued::Full(back) => break (offered, back),
            }
            assert!(queued <= 2, "a queue of one took {queued} writes");
        };
        assert!(queued >= 1);
        assert_eq!(
            handed_back.exchange_id(),
            offered,
            "the refused write comes back"
        );
        drop(handed_back);
        for _ in 0..queued {
            gate.wait();
        }
        drop(recorder);
    }

    #[test]
    fn a_deferred_write_whose_build_panics_fails_alone() {
        struct Panics(Uuid);
        impl DeferredExchange for Panics {
            fn exchange_id(&self) -> Uuid {
                self.0
            }
            fn build(self: Box<Self>) -> RecordOp {
                panic!("producer bug")
            }
        }
        let (recorder, applied) = picky_recorder(Redactor::default(), RecorderOptions::default());
        let exchange = ExchangeRecord::begin(None, "ingress", "m", serde_json::Value::Null);
        let queued = recorder.try_record_deferred(Box::new(Panics(exchange.id)));
        assert!(matches!(queued, Ok(Queued::Yes)));
        recorder.record_event(event(1, "after")).unwrap();
        match recorder.flush() {
            Err(RecordError::WriteFailed {
                failed_ops: 1,
                last_error,
            }) => assert!(last_error.contains("panicked"), "{last_error}"),
            other => panic!("expected one failed op, got {other:?}"),
        }
        // The writer lives on: later ops are stored.
        recorder.record_event(event(2, "later")).unwrap();
        recorder.flush().unwrap();
        let seqs: Vec<u64> = applied
            .lock()
            .unwrap()
            .iter()
            .map(|op| match op {
                RecordOp::Event(e) => e.seq,
                other => panic!("unexpected op {other:?}"),
            })
            .collect();
        assert_eq!(seqs, [1, 2]);
    }

    #[test]
    fn only_exchange_writes_replaced_later_in_the_batch_are_skipped() {
        let a = ExchangeRecord::begin(None, "x", "m", serde_json::Value::Null);
        let b = ExchangeRecord::begin(None, "x", "m", serde_json::Value::Null);
        let upsert = |record: &ExchangeRecord, note: &str| {
            let mut record = record.clone();
            record.notes.push(note.into());
            Pending::Op(RecordOp::UpsertExchange(Box::new(record)))
        };
        let deferred = |record: &ExchangeRecord, note: &'static str| {
            Pending::Deferred(Box::new(NoteOnBuild {
                record: record.clone(),
                ..NoteOnBuild::new(note)
            }))
        };
        let batch = vec![
            upsert(&a, "a-begin"),
            deferred(&b, "b-begin"),
            Pending::Op(RecordOp::Event(event(1, "kept"))),
            deferred(&a, "a-end"),
            Pending::Op(RecordOp::Event(event(2, "kept"))),
        ];
        let kept: Vec<String> = without_replaced_writes(batch)
            .into_iter()
            .map(|pending| match pending {
                Pending::Op(RecordOp::Event(e)) => format!("event {}", e.seq),
                Pending::Op(op) => exchange_notes(&op),
                Pending::Deferred(write) => exchange_notes(&write.build()),
            })
            .collect();
        assert_eq!(
            kept,
            [
                "b-begin uses secret-token-123",
                "event 1",
                "a-end uses secret-token-123",
                "event 2"
            ]
        );
    }

    /// An exchange the writer stores as a document (requests as text, nothing to redact).
    fn text_exchange() -> ExchangeText {
        ExchangeText {
            record: ExchangeRecord::begin(None, "google", "gemini-2.5-flash", Value::Null),
            guest_request: JsonText::whole(Bytes::from_static(br#"{"contents":[]}"#)),
            attempt_requests: vec![JsonText::whole(Bytes::from_static(br#"{"messages":[]}"#))],
            guest_response: None,
        }
    }

    /// Records `count` text exchanges and waits until they are stored.
    fn store_text_exchanges(recorder: &Recorder, count: usize) {
        for _ in 0..count {
            recorder.record_exchange_text(text_exchange()).unwrap();
        }
        recorder.flush().unwrap();
        assert_eq!(recorder.stats().exchanges_as_text, count as u64);
    }

    #[test]
    fn stored_exchanges_are_handed_back_once_the_producer_asks() {
        let (recorder, applied) = picky_recorder(Redactor::default(), RecorderOptions::default());
        recorder.hand_back_spent();
        store_text_exchanges(&recorder, 3);
        assert_eq!(applied.lock().unwrap().len(), 3);
        assert_eq!(recorder.free_spent(), 3);
        assert_eq!(recorder.free_spent(), 0, "the pile is emptied");
    }

    #[test]
    fn nothing_is_handed_back_unless_asked() {
        let (recorder, _) = picky_recorder(Redactor::default(), RecorderOptions::default());
        store_text_exchanges(&recorder, 3);
        assert_eq!(recorder.free_spent(), 0);
        assert_eq!(Recorder::disabled().free_spent(), 0);
    }

    #[test]
    fn the_writer_frees_what_does_not_fit_in_the_pile() {
        let (recorder, _) = picky_recorder(Redactor::default(), RecorderOptions::default());
        recorder.hand_back_spent();
        store_text_exchanges(&recorder, SPENT_MAX + 10);
        assert_eq!(recorder.free_all_spent(), SPENT_MAX);
    }

    #[test]
    fn one_free_spent_call_frees_a_few_exchanges() {
        let (recorder, _) = picky_recorder(Redactor::default(), RecorderOptions::default());
        recorder.hand_back_spent();
        store_text_exchanges(&recorder, 2 * SPENT_FREED_PER_CALL + 3);
        let freed: Vec<usize> = (0..4).map(|_| recorder.free_spent()).collect();
        assert_eq!(
            freed,
            [SPENT_FREED_PER_CALL, SPENT_FREED_PER_CALL, 3, 0],
            "at most {SPENT_FREED_PER_CALL} a call, until the pile is empty"
        );
    }

    #[test]
    fn the_writer_frees_the_pile_once_its_queue_stays_empty() {
        let (recorder, _) = picky_recorder(Redactor::default(), RecorderOptions::default());
        recorder.hand_back_spent();
        store_text_exchanges(&recorder, 3);
        let pile_len = || {
            let shared = recorder.shared.as_ref().unwrap();
            shared.spent.parts.lock().unwrap().len()
        };
        let deadline = std::time::Instant::now() + IDLE_FREE_AFTER * 10;
        while pile_len() > 0 {
            assert!(
                std::time::Instant::now() < deadline,
                "the idle writer left {} exchanges in the pile",
                pile_len()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        assert_eq!(recorder.free_spent(), 0, "nothing left for the producer");
        // The writer still stores after freeing.
        recorder.record_exchange_text(text_exchange()).unwrap();
        recorder.flush().unwrap();
        assert_eq!(recorder.stats().exchanges_as_text, 4);
        recorder.close().unwrap();
    }

    #[test]
    fn dropping_the_last_handle_flushes() {
        let (recorder, applied) = picky_recorder(Redactor::default(), RecorderOptions::default());
        let clone = recorder.clone();
        recorder.record_event(event(1, "a")).unwrap();
        clone.record_event(event(2, "b")).unwrap();
        drop(recorder);
        drop(clone);
        assert_eq!(applied.lock().unwrap().len(), 2);
    }
}
