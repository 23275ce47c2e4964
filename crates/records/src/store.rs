//! The storage trait every record backend implements (SQLite today; a shared server database can
//! follow). It speaks only the crate's own model types and [`StoreError`].

use uuid::Uuid;

use crate::error::StoreError;
use crate::model::{EventRecord, ExchangeRecord, RawLineRecord, RecordOp, RunRecord};

/// Which exchanges to read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExchangeFilter {
    /// Every exchange in the store.
    All,
    /// Only exchanges of this run.
    Run(Uuid),
    /// Only exchanges that carry no run id.
    Unattributed,
}

/// What crash recovery changed when a store was opened.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RecoveryReport {
    /// Exchanges moved from `InFlight` to `Incomplete`.
    pub exchanges_marked_incomplete: u64,
    /// Runs moved from `Running` to `Incomplete`.
    pub runs_marked_incomplete: u64,
    /// Dead writers whose rows were recovered.
    pub dead_writers: u64,
}

/// A durable record store. All writes go through [`RecordStore::apply`], one batch per transaction.
///
/// Implementations must be `Send` so one writer thread can own them; reads may run on any instance
/// opened on the same store (several processes may write to one store at once).
pub trait RecordStore: Send {
    /// Applies `ops` atomically (all or none), in order. Ops are already redacted.
    fn apply(&mut self, ops: &[RecordOp]) -> Result<(), StoreError>;

    /// Marks in-flight exchanges and running runs whose writer is gone as `Incomplete`.
    /// Rows of live writers (other processes still running) are left alone.
    fn recover(&mut self) -> Result<RecoveryReport, StoreError>;

    /// Every run, oldest first.
    fn runs(&self) -> Result<Vec<RunRecord>, StoreError>;

    /// One run by id.
    fn run(&self, id: Uuid) -> Result<Option<RunRecord>, StoreError>;

    /// The run whose id is `id_or_prefix` or uniquely starts with it (hyphens optional).
    fn resolve_run(&self, id_or_prefix: &str) -> Result<RunRecord, StoreError>;

    /// The run's canonical events ordered by `seq`.
    fn events(&self, run_id: Uuid) -> Result<Vec<EventRecord>, StoreError>;

    /// The run's raw guest lines, stdout first then stderr, each ordered by `seq`.
    fn raw_lines(&self, run_id: Uuid) -> Result<Vec<RawLineRecord>, StoreError>;

    /// How many raw guest lines the run kept (without loading them).
    fn raw_line_count(&self, run_id: Uuid) -> Result<u64, StoreError>;

    /// Exchanges matching `filter`, ordered by id (receive time).
    fn exchanges(&self, filter: ExchangeFilter) -> Result<Vec<ExchangeRecord>, StoreError>;

    /// One exchange by id.
    fn exchange(&self, id: Uuid) -> Result<Option<ExchangeRecord>, StoreError>;
}
