//! The storage traits every record backend implements (SQLite today; a shared server database can
//! follow): [`RecordSink`], the write side a recorder needs, and [`RecordStore`], recovery and
//! reads. They speak only the crate's own model types and [`StoreError`].

use uuid::Uuid;

use crate::error::StoreError;
use crate::model::{
    EventRecord, ExchangeRecord, ExchangeSummary, RawLineRecord, RecordOp, RunRecord,
};

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

/// Where a [`crate::Recorder`]'s writer thread puts its batches: the write side of a store.
///
/// Implementations must be `Send` so the writer thread can own them.
pub trait RecordSink: Send {
    /// Applies `ops` atomically (all or none), in order. Ops are already redacted.
    fn apply(&mut self, ops: &[RecordOp]) -> Result<(), StoreError>;
}

/// A durable record store: all writes go through [`RecordSink::apply`], one batch per
/// transaction; crash recovery and every read are here.
///
/// Reads may run on any instance opened on the same store (several processes may write to one
/// store at once).
pub trait RecordStore: RecordSink {
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

    /// Summaries of the exchanges matching `filter`, ordered by id (receive time); with a
    /// `limit`, only the newest `limit` of them (still oldest first). The default reads whole
    /// exchanges; a store should answer without loading requests and responses.
    fn exchange_summaries(
        &self,
        filter: ExchangeFilter,
        limit: Option<usize>,
    ) -> Result<Vec<ExchangeSummary>, StoreError> {
        let exchanges = self.exchanges(filter)?;
        let skip = limit.map_or(0, |limit| exchanges.len().saturating_sub(limit));
        Ok(exchanges[skip..].iter().map(ExchangeSummary::of).collect())
    }

    /// Calls `visit` with the summary of every exchange matching `filter`, ordered by id, without
    /// holding them all (for totals over a large store). The default collects
    /// [`RecordStore::exchange_summaries`]; a store should stream them.
    fn for_each_exchange_summary(
        &self,
        filter: ExchangeFilter,
        visit: &mut dyn FnMut(ExchangeSummary),
    ) -> Result<(), StoreError> {
        self.exchange_summaries(filter, None)?
            .into_iter()
            .for_each(visit);
        Ok(())
    }

    /// How many exchanges match `filter`. The default reads whole exchanges; a store should count
    /// without loading them.
    fn exchange_count(&self, filter: ExchangeFilter) -> Result<u64, StoreError> {
        Ok(self.exchanges(filter)?.len() as u64)
    }

    /// The exchange whose id is `id_or_prefix` or uniquely starts with it (hyphens optional,
    /// any case). The default reads whole exchanges; a store should look the prefix up.
    fn resolve_exchange(&self, id_or_prefix: &str) -> Result<ExchangeRecord, StoreError> {
        let needle = IdPrefix::parse(id_or_prefix)
            .ok_or_else(|| StoreError::ExchangeNotFound(id_or_prefix.to_owned()))?;
        let mut matching: Vec<ExchangeRecord> = self
            .exchanges(ExchangeFilter::All)?
            .into_iter()
            .filter(|exchange| needle.matches(exchange.id))
            .collect();
        match matching.len() {
            0 => Err(StoreError::ExchangeNotFound(id_or_prefix.to_owned())),
            1 => Ok(matching.remove(0)),
            count => Err(StoreError::AmbiguousExchangePrefix {
                prefix: id_or_prefix.to_owned(),
                count,
            }),
        }
    }
}

/// A record id or the start of one, as a user types it: hex digits, hyphens anywhere (ignored),
/// any case.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct IdPrefix(String);

impl IdPrefix {
    /// The prefix's hex digits in lower case; `None` when it is empty or not hex.
    pub(crate) fn parse(text: &str) -> Option<Self> {
        let digits: String = text
            .chars()
            .filter(|c| *c != '-')
            .collect::<String>()
            .to_ascii_lowercase();
        (!digits.is_empty() && digits.len() <= 32 && digits.chars().all(|c| c.is_ascii_hexdigit()))
            .then_some(IdPrefix(digits))
    }

    /// The lower-case hex digits (no hyphens).
    pub(crate) fn digits(&self) -> &str {
        &self.0
    }

    /// True when `id`, written without hyphens, starts with this prefix.
    pub(crate) fn matches(&self, id: Uuid) -> bool {
        id.simple().to_string().starts_with(&self.0)
    }
}
