//! Durable records of Switchyard runs: the run itself, its canonical events, the guest's raw output
//! lines, and every model exchange the gateway relays (guest request, context-policy request,
//! upstream attempts with raw stream events, assembled messages, timings, usage, delivered calls).
//!
//! Producers hold a [`Recorder`] (cheap to clone, `Send + Sync`) and call [`Recorder::record`] with
//! [`RecordOp`]s; a single writer thread redacts secrets ([`Redactor`]) and commits batches to a
//! [`RecordSink`] (the write side of a [`RecordStore`]; SQLite by default, [`SqliteStore`], or
//! PostgreSQL, [`PgStore`], when `--records` is a `postgres://` URL: see [`StoreSpec`]).
//! Readers open a store ([`StoreSpec::open_existing`]: a records directory's [`SqliteStore`],
//! or a [`PgStore`] on PostgreSQL for records shared between machines) and use the
//! [`RecordStore`] trait; [`export`], [`html`] and
//! [`timeline`] render what is stored, [`usage`] totals it (tokens, failures, latency by model,
//! run or day).
//! Both stores keep the large sub-values every exchange of a session repeats (system prompt,
//! tool declarations, history entries) once, content-addressed ([`blobs`]); readers always get
//! whole records back.
//! Producers may hand a write over as a closure the writer thread runs
//! ([`Recorder::record_built`]), so that building a large record happens off their threads.
//!
//! ```no_run
//! use switchyard_records::{ExchangeRecord, Recorder, Redactor, ingress};
//! let recorder = Recorder::open_dir("/tmp/records", Redactor::new(["the-upstream-key"]))?;
//! let mut exchange = ExchangeRecord::begin(None, ingress::GENERATE_CONTENT, "gemini-2.5-pro",
//!     serde_json::json!({"contents": []}));
//! recorder.record_exchange(exchange.clone())?;            // begins: InFlight
//! exchange.status = switchyard_records::ExchangeStatus::Ok;
//! recorder.record_exchange(exchange)?;                    // ends: upsert
//! recorder.close()?;                                      // flush on shutdown
//! # Ok::<(), switchyard_records::RecordError>(())
//! ```

pub mod blobs;
mod conversations;
pub mod error;
pub mod export;
pub mod html;
pub mod model;
pub mod postgres;
pub mod recorder;
pub mod redact;
pub mod spec;
pub mod sqlite;
pub mod store;
pub mod timeline;
pub mod usage;

pub use error::{RecordError, StoreError};
pub use model::{
    DeliveredCall, EventRecord, ExchangeRecord, ExchangeStatus, ExchangeSummary, RawLineRecord,
    RawStream, RecordOp, ResumePoint, RunRecord, RunState, RunSummary, TypedError, UpstreamAttempt,
    Usage, ingress, new_record_id,
};
pub use postgres::PgStore;
pub use recorder::{BuildOp, Recorder, RecorderOptions, RecorderStats};
pub use redact::{REDACTED, Redactor};
pub use spec::{PgUrl, StoreSpec, display_records, local_records_dir};
pub use sqlite::SqliteStore;
pub use store::{ExchangeFilter, RecordSink, RecordStore, RecoveryReport};

/// File name of the SQLite store inside a records directory.
pub const STORE_FILE_NAME: &str = "switchyard.sqlite3";

/// The store path for a records directory: `DIR/switchyard.sqlite3`.
pub fn store_path(dir: impl AsRef<std::path::Path>) -> std::path::PathBuf {
    dir.as_ref().join(STORE_FILE_NAME)
}
