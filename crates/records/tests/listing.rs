//! Listing exchanges: summaries and counts read in place by the SQLite store agree with the
//! trait's default (built from whole records), and ids resolve from a unique prefix.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use switchyard_records::model::{
    EventRecord, ExchangeRecord, ExchangeSummary, RawLineRecord, RunRecord, TypedError,
};
use switchyard_records::{
    ExchangeFilter, ExchangeStatus, RecordOp, RecordSink, RecordStore, RecoveryReport, SqliteStore,
    StoreError, new_record_id, store_path,
};
use uuid::Uuid;

/// A store holding one run's two exchanges (one ok with a call, one failed after retries) and
/// three of no run (one still in flight); the records, made (so also ordered by id) in this order.
fn store_with_exchanges() -> (tempfile::TempDir, SqliteStore, Uuid, Vec<ExchangeRecord>) {
    let dir = tempfile::tempdir().unwrap();
    let mut store = SqliteStore::open(store_path(dir.path())).unwrap();
    let run_id = new_record_id();
    let first = sample_exchange(new_record_id(), Some(run_id), 1);
    let mut failed = sample_exchange(new_record_id(), Some(run_id), 2);
    failed.status = ExchangeStatus::Error;
    failed.error = Some(TypedError {
        kind: "upstream_status".into(),
        message: "HTTP 503 after 2 retries".into(),
    });
    failed.retries = 2;
    failed.function_calls.clear();
    failed.delivered_at = None;
    let exchanges = vec![
        first,
        failed,
        sample_exchange(new_record_id(), None, 3),
        begun(&sample_exchange(new_record_id(), None, 4)),
        sample_exchange(new_record_id(), None, 5),
    ];
    let ops: Vec<RecordOp> = std::iter::once(RecordOp::UpsertRun(Box::new(sample_run(run_id))))
        .chain(
            exchanges
                .iter()
                .map(|e| RecordOp::UpsertExchange(Box::new(e.clone()))),
        )
        .collect();
    store.apply(&ops).unwrap();
    (dir, store, run_id, exchanges)
}

#[test]
fn summaries_read_in_place_match_the_records() {
    let (_dir, store, run_id, exchanges) = store_with_exchanges();
    let of = |filter: fn(&ExchangeRecord) -> bool| -> Vec<ExchangeSummary> {
        exchanges
            .iter()
            .filter(|e| filter(e))
            .map(ExchangeSummary::of)
            .collect()
    };
    let all = of(|_| true);
    assert_eq!(
        store.exchange_summaries(ExchangeFilter::All, None).unwrap(),
        all
    );
    assert_eq!(
        store
            .exchange_summaries(ExchangeFilter::Run(run_id), None)
            .unwrap(),
        all[..2]
    );
    assert_eq!(
        store
            .exchange_summaries(ExchangeFilter::Unattributed, None)
            .unwrap(),
        all[2..]
    );
    // The failed one keeps its error kind and retries; the in-flight one has no delivery.
    assert_eq!(all[1].error_kind.as_deref(), Some("upstream_status"));
    assert_eq!((all[1].retries, all[1].function_calls), (2, 0));
    assert_eq!(all[3].status, ExchangeStatus::InFlight);
    assert_eq!(all[3].delivered_at, None);
    assert_eq!(all[0].function_calls, 1);
    assert_eq!(all[0].usage.input, 101);
}

#[test]
fn a_limit_keeps_the_newest_oldest_first() {
    let (_dir, store, _run, exchanges) = store_with_exchanges();
    let newest: Vec<Uuid> = store
        .exchange_summaries(ExchangeFilter::All, Some(2))
        .unwrap()
        .iter()
        .map(|s| s.id)
        .collect();
    assert_eq!(newest, vec![exchanges[3].id, exchanges[4].id]);
    assert_eq!(
        store
            .exchange_summaries(ExchangeFilter::All, Some(0))
            .unwrap(),
        vec![]
    );
    assert_eq!(
        store
            .exchange_summaries(ExchangeFilter::Unattributed, Some(10))
            .unwrap()
            .len(),
        3
    );
}

#[test]
fn counts_follow_the_filter() {
    let (_dir, store, run_id, _) = store_with_exchanges();
    assert_eq!(store.exchange_count(ExchangeFilter::All).unwrap(), 5);
    assert_eq!(
        store.exchange_count(ExchangeFilter::Run(run_id)).unwrap(),
        2
    );
    assert_eq!(
        store.exchange_count(ExchangeFilter::Unattributed).unwrap(),
        3
    );
    assert_eq!(
        store
            .exchange_count(ExchangeFilter::Run(new_record_id()))
            .unwrap(),
        0
    );
}

#[test]
fn an_exchange_resolves_from_a_unique_prefix() {
    let (_dir, store, _run, exchanges) = store_with_exchanges();
    let target = &exchanges[2];
    let full = target.id.to_string();
    assert_eq!(&store.resolve_exchange(&full).unwrap(), target);
    // Without hyphens, in upper case, and cut short: still that one, once it is unique.
    let digits = target.id.simple().to_string().to_ascii_uppercase();
    let unique = (1..=32)
        .map(|len| &digits[..len])
        .find(|prefix| {
            exchanges
                .iter()
                .filter(|e| {
                    e.id.simple()
                        .to_string()
                        .starts_with(&prefix.to_ascii_lowercase())
                })
                .count()
                == 1
        })
        .unwrap();
    assert_eq!(&store.resolve_exchange(unique).unwrap(), target);
    // One digit shorter than the shortest unique prefix matches others too.
    let shared = &digits[..unique.len() - 1];
    assert!(matches!(
        store.resolve_exchange(shared),
        Err(StoreError::AmbiguousExchangePrefix { count, .. }) if count > 1
    ));
    assert!(matches!(
        store.resolve_exchange(&Uuid::now_v7().to_string()),
        Err(StoreError::ExchangeNotFound(_))
    ));
    assert!(matches!(
        store.resolve_exchange("not-hex"),
        Err(StoreError::ExchangeNotFound(_))
    ));
}

/// A store with only the trait's required methods (delegated to a second connection to the
/// SQLite store): its listing methods are the trait's defaults, built from whole records.
struct Defaults(SqliteStore);

impl RecordSink for Defaults {
    fn apply(&mut self, _: &[RecordOp]) -> Result<(), StoreError> {
        unreachable!("read only")
    }
}

impl RecordStore for Defaults {
    fn recover(&mut self) -> Result<RecoveryReport, StoreError> {
        unreachable!("read only")
    }
    fn runs(&self) -> Result<Vec<RunRecord>, StoreError> {
        self.0.runs()
    }
    fn run(&self, id: Uuid) -> Result<Option<RunRecord>, StoreError> {
        self.0.run(id)
    }
    fn resolve_run(&self, id: &str) -> Result<RunRecord, StoreError> {
        self.0.resolve_run(id)
    }
    fn events(&self, run_id: Uuid) -> Result<Vec<EventRecord>, StoreError> {
        self.0.events(run_id)
    }
    fn raw_lines(&self, run_id: Uuid) -> Result<Vec<RawLineRecord>, StoreError> {
        self.0.raw_lines(run_id)
    }
    fn raw_line_count(&self, run_id: Uuid) -> Result<u64, StoreError> {
        self.0.raw_line_count(run_id)
    }
    fn exchanges(&self, filter: ExchangeFilter) -> Result<Vec<ExchangeRecord>, StoreError> {
        self.0.exchanges(filter)
    }
    fn exchange(&self, id: Uuid) -> Result<Option<ExchangeRecord>, StoreError> {
        self.0.exchange(id)
    }
}

#[test]
fn the_sqlite_listing_agrees_with_the_traits_definitions() {
    let (dir, store, run_id, exchanges) = store_with_exchanges();
    let defaults = Defaults(SqliteStore::open_existing(store_path(dir.path())).unwrap());
    for filter in [
        ExchangeFilter::All,
        ExchangeFilter::Run(run_id),
        ExchangeFilter::Unattributed,
        ExchangeFilter::Run(new_record_id()),
    ] {
        for limit in [None, Some(0), Some(1), Some(4), Some(9)] {
            assert_eq!(
                store.exchange_summaries(filter, limit).unwrap(),
                defaults.exchange_summaries(filter, limit).unwrap(),
                "{filter:?} {limit:?}"
            );
        }
        assert_eq!(
            store.exchange_count(filter).unwrap(),
            defaults.exchange_count(filter).unwrap()
        );
        let visited = |store: &dyn RecordStore| {
            let mut seen = Vec::new();
            store
                .for_each_exchange_summary(filter, &mut |summary| seen.push(summary))
                .unwrap();
            seen
        };
        assert_eq!(visited(&store), visited(&defaults), "{filter:?}");
        assert_eq!(
            visited(&store),
            store.exchange_summaries(filter, None).unwrap(),
            "streamed in the listing's order"
        );
    }
    for exchange in &exchanges {
        let digits = exchange.id.simple().to_string();
        for prefix in [
            &digits[..8],
            &digits[..13],
            &digits[..],
            &exchange.id.to_string(),
        ] {
            assert_eq!(
                format!("{:?}", store.resolve_exchange(prefix)),
                format!("{:?}", defaults.resolve_exchange(prefix)),
                "{prefix}"
            );
        }
    }
}
