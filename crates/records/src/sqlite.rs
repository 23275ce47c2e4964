//! The embedded SQLite record store (WAL, busy timeout, one transaction per batch).
//!
//! Each store instance registers itself as a *writer* by holding an exclusive lock on
//! `<db>.writers/<writer-id>.lock` for as long as it is open. Rows it writes carry that writer id.
//! Opening a store recovers rows left in flight by writers whose lock file is no longer held (the
//! process died, even by SIGKILL): their in-flight exchanges and unfinished runs become
//! `Incomplete`. Rows of writers still alive in other processes are left alone.
//!
//! Exchanges are stored with their large repeated sub-values (system prompt, tool declarations,
//! the history entries every turn resends) moved into the content-addressed `blobs` table (see
//! [`crate::blobs`]), in the same transaction as the exchange row; every read of whole exchanges
//! puts them back. Listings (`exchange_summaries`, and `for_each_exchange_summary`, which streams
//! them row by row for usage totals) read their few fields from the stored JSON in place
//! (`json_extract`): no request, response or blob is parsed.

use std::collections::{HashMap, HashSet};
use std::fs::{File, OpenOptions, TryLockError};
use std::path::{Path, PathBuf};
use std::time::Duration;

use chrono::{DateTime, SecondsFormat, Utc};
use rusqlite::{Connection, OptionalExtension, Transaction, TransactionBehavior, params};
use serde_json::Value;
use uuid::Uuid;

use crate::blobs;
use crate::error::StoreError;
use crate::model::{
    EventRecord, ExchangeRecord, ExchangeStatus, ExchangeSummary, RawLineRecord, RawStream,
    RecordOp, RunRecord, RunState, TypedError, Usage,
};
use crate::store::{ExchangeFilter, IdPrefix, RecordSink, RecordStore, RecoveryReport};

/// Schema version stored in `PRAGMA user_version`. v1: runs, events, raw lines, exchanges.
/// v2: the `blobs` table of deduplicated exchange sub-values. v3: history entries (guest
/// `contents` and upstream `messages` elements) are blob places too (no table changes; a v2
/// reader would show their markers instead of them, so it must refuse v3).
pub const SCHEMA_VERSION: i64 = 3;

/// How long a writer waits for another process's transaction before failing.
const BUSY_TIMEOUT: Duration = Duration::from_secs(15);

/// Age after which an unlocked staging lock file is considered abandoned.
const STALE_STAGING: Duration = Duration::from_secs(600);

/// Schema version 1 (every table a v1 store has).
const SCHEMA_V1: &str = r#"
CREATE TABLE IF NOT EXISTS runs (
    id             TEXT PRIMARY KEY,          -- UUID v7, hyphenated lowercase (sorts by time)
    writer_id      TEXT NOT NULL,             -- store instance that last wrote the row
    agent          TEXT NOT NULL,
    upstream_model TEXT,
    started_at     TEXT NOT NULL,             -- RFC 3339, UTC
    ended_at       TEXT,
    state          TEXT NOT NULL,             -- running | ended | incomplete
    record         TEXT NOT NULL              -- the whole RunRecord as JSON
);
CREATE TABLE IF NOT EXISTS events (
    run_id TEXT NOT NULL,
    seq    INTEGER NOT NULL,
    at     TEXT NOT NULL,
    kind   TEXT NOT NULL,
    event  TEXT NOT NULL,                     -- canonical event JSON
    PRIMARY KEY (run_id, seq)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS raw_lines (
    run_id TEXT NOT NULL,
    stream TEXT NOT NULL,                     -- stdout | stderr
    seq    INTEGER NOT NULL,
    line   TEXT NOT NULL,
    PRIMARY KEY (run_id, stream, seq)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS exchanges (
    id             TEXT PRIMARY KEY,          -- UUID v7
    run_id         TEXT,
    writer_id      TEXT NOT NULL,
    status         TEXT NOT NULL,             -- in_flight | ok | error | incomplete
    ingress_api    TEXT NOT NULL,
    upstream_model TEXT NOT NULL,
    received_at    TEXT NOT NULL,
    record         TEXT NOT NULL              -- the whole ExchangeRecord as JSON
);
CREATE INDEX IF NOT EXISTS exchanges_by_run ON exchanges (run_id, id);
CREATE INDEX IF NOT EXISTS exchanges_in_flight ON exchanges (writer_id) WHERE status = 'in_flight';
CREATE INDEX IF NOT EXISTS runs_running ON runs (writer_id) WHERE state = 'running';
"#;

/// Migration from version 1 to 2: deduplicated exchange sub-values, keyed by `sha256:<hex>` of
/// their JSON text. v1 exchange rows hold no markers and keep working unchanged.
const MIGRATION_V2: &str = r#"
CREATE TABLE IF NOT EXISTS blobs (
    hash TEXT PRIMARY KEY,                    -- sha256:<hex> of body
    body TEXT NOT NULL                        -- the sub-value as compact JSON
);
"#;

/// The SQLite implementation of [`RecordStore`].
pub struct SqliteStore {
    conn: Connection,
    path: PathBuf,
    writer: WriterLock,
    /// Blob hashes known to be committed in this store (blobs are never deleted), so their
    /// bodies need not be written again.
    known_blobs: HashSet<String>,
}

impl std::fmt::Debug for SqliteStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteStore")
            .field("path", &self.path)
            .field("writer_id", &self.writer.id)
            .finish()
    }
}

/// The exclusive lock that proves this store instance is alive.
struct WriterLock {
    id: Uuid,
    path: PathBuf,
    _file: File,
}

impl Drop for WriterLock {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

fn backend(context: &'static str) -> impl Fn(rusqlite::Error) -> StoreError {
    move |error| StoreError::Backend {
        context,
        message: error.to_string(),
    }
}

fn io_error(path: &Path) -> impl Fn(std::io::Error) -> StoreError + '_ {
    move |source| StoreError::Io {
        path: path.display().to_string(),
        source,
    }
}

pub(crate) fn to_json<T: serde::Serialize>(what: &str, value: &T) -> Result<String, StoreError> {
    serde_json::to_string(value).map_err(|source| StoreError::Serde {
        what: what.to_owned(),
        source,
    })
}

pub(crate) fn from_json<T: serde::de::DeserializeOwned>(
    what: &str,
    text: &str,
) -> Result<T, StoreError> {
    serde_json::from_str(text).map_err(|source| StoreError::Serde {
        what: what.to_owned(),
        source,
    })
}

pub(crate) fn timestamp(at: DateTime<Utc>) -> String {
    at.to_rfc3339_opts(SecondsFormat::AutoSi, true)
}

pub(crate) fn parse_timestamp(text: &str) -> Result<DateTime<Utc>, StoreError> {
    DateTime::parse_from_rfc3339(text)
        .map(|at| at.with_timezone(&Utc))
        .map_err(|error| StoreError::Backend {
            context: "reading a timestamp",
            message: format!("{text:?}: {error}"),
        })
}

pub(crate) fn parse_uuid(text: &str) -> Result<Uuid, StoreError> {
    Uuid::parse_str(text).map_err(|error| StoreError::Backend {
        context: "reading an id",
        message: format!("{text:?}: {error}"),
    })
}

fn writers_dir(db_path: &Path) -> PathBuf {
    let mut name = db_path.as_os_str().to_owned();
    name.push(".writers");
    PathBuf::from(name)
}

/// Runs `step` again while SQLite answers busy/locked, for at most [`BUSY_TIMEOUT`] (for the
/// statements SQLite does not wait on by itself).
fn retry_while_busy<T>(mut step: impl FnMut() -> rusqlite::Result<T>) -> rusqlite::Result<T> {
    let started = std::time::Instant::now();
    loop {
        match step() {
            Err(rusqlite::Error::SqliteFailure(e, _))
                if matches!(
                    e.code,
                    rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked
                ) && started.elapsed() < BUSY_TIMEOUT =>
            {
                std::thread::sleep(Duration::from_millis(5));
            }
            other => return other,
        }
    }
}

/// Page size of a new store. 16 KiB pages hold a whole exchange record; with SQLite's default
/// 4 KiB every record overflowed into a second page, and the recorder's writer stored ~30 %
/// fewer exchanges per second (`cargo bench -p switchyard-records --bench recorder --
/// writer_throughput`, `gemini_text`).
const PAGE_SIZE: i64 = 16 * 1024;

impl SqliteStore {
    /// Opens (or creates) the store at `path`: WAL mode, schema, a writer lock for this instance,
    /// then crash recovery of dead writers' rows.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, StoreError> {
        let path = path.as_ref().to_path_buf();
        let conn = Connection::open(&path).map_err(backend("opening the database"))?;
        conn.busy_timeout(BUSY_TIMEOUT)
            .map_err(backend("setting busy_timeout"))?;
        // Before anything is written (later it changes nothing): an exchange record (~4 KB for
        // a Gemini CLI turn) then fits in its page instead of spilling into overflow pages.
        conn.pragma_update(None, "page_size", PAGE_SIZE)
            .map_err(backend("setting page_size"))?;
        // Several writers may create the same new store at once; switching it to WAL then fails
        // with "database is locked" without SQLite's busy handler being asked to wait.
        retry_while_busy(|| conn.pragma_update(None, "journal_mode", "WAL"))
            .map_err(backend("enabling WAL"))?;
        conn.pragma_update(None, "synchronous", "NORMAL")
            .map_err(backend("setting synchronous"))?;
        let mut conn = conn;
        migrate(&mut conn)?;
        let writer = register_writer(&path)?;
        let mut store = SqliteStore {
            conn,
            path,
            writer,
            known_blobs: HashSet::new(),
        };
        store.recover()?;
        Ok(store)
    }

    /// Opens an existing store (never creates one): [`StoreError::Missing`] if `path` does not exist.
    pub fn open_existing(path: impl AsRef<Path>) -> Result<Self, StoreError> {
        let path = path.as_ref();
        if !path.is_file() {
            return Err(StoreError::Missing(path.display().to_string()));
        }
        SqliteStore::open(path)
    }

    /// The database file path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// This instance's writer id (stored on every run and exchange row it writes).
    pub fn writer_id(&self) -> Uuid {
        self.writer.id
    }

    /// Result of `PRAGMA integrity_check` (`"ok"` when the database is sound).
    pub fn integrity_check(&self) -> Result<String, StoreError> {
        self.conn
            .query_row("PRAGMA integrity_check", [], |row| row.get(0))
            .map_err(backend("running integrity_check"))
    }

    /// Writes the WAL back into the main database file (`PRAGMA wal_checkpoint(TRUNCATE)`).
    pub fn checkpoint(&self) -> Result<(), StoreError> {
        self.conn
            .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
            .map_err(backend("checkpointing"))
    }

    /// Writes `blob` unless it is known to be stored (or written earlier in this transaction).
    fn write_blob(
        tx: &Transaction<'_>,
        blob: &blobs::Blob,
        known_blobs: &HashSet<String>,
        new_blobs: &mut HashSet<String>,
    ) -> Result<(), StoreError> {
        if known_blobs.contains(&blob.hash) || new_blobs.contains(&blob.hash) {
            return Ok(());
        }
        tx.prepare_cached("INSERT OR IGNORE INTO blobs (hash, body) VALUES (?1, ?2)")
            .and_then(|mut statement| statement.execute(params![blob.hash, blob.body]))
            .map_err(backend("writing a blob"))?;
        new_blobs.insert(blob.hash.clone());
        Ok(())
    }

    /// Upserts the row of `exchange` with `record` (its stored JSON text) as the record.
    fn write_exchange(
        tx: &Transaction<'_>,
        writer: &str,
        exchange: &ExchangeRecord,
        record: &str,
    ) -> Result<(), StoreError> {
        tx.prepare_cached(
            "INSERT INTO exchanges (id, run_id, writer_id, status, ingress_api, upstream_model, received_at, record)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)
             ON CONFLICT (id) DO UPDATE SET run_id = excluded.run_id, writer_id = excluded.writer_id,
               status = excluded.status, ingress_api = excluded.ingress_api,
               upstream_model = excluded.upstream_model, received_at = excluded.received_at,
               record = excluded.record",
        )
        .and_then(|mut statement| {
            statement.execute(params![
                exchange.id.to_string(),
                exchange.run_id.map(|id| id.to_string()),
                writer,
                exchange.status.as_str(),
                exchange.ingress_api,
                exchange.upstream_model,
                timestamp(exchange.received_at),
                record
            ])
        })
        .map_err(backend("writing an exchange"))?;
        Ok(())
    }

    /// Writes `op` in `tx`. Blob hashes inserted by this transaction are added to `new_blobs`;
    /// hashes in `known_blobs` or `new_blobs` are not written again.
    fn apply_op(
        tx: &Transaction<'_>,
        writer: &str,
        op: &RecordOp,
        known_blobs: &HashSet<String>,
        new_blobs: &mut HashSet<String>,
    ) -> Result<(), StoreError> {
        match op {
            RecordOp::UpsertRun(run) => {
                let mut run = (**run).clone();
                if run.ended_at.is_some() && run.state == RunState::Running {
                    run.state = RunState::Ended;
                }
                let record = to_json("run", &run)?;
                tx.prepare_cached(
                    "INSERT INTO runs (id, writer_id, agent, upstream_model, started_at, ended_at, state, record)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)
                     ON CONFLICT (id) DO UPDATE SET writer_id = excluded.writer_id, agent = excluded.agent,
                       upstream_model = excluded.upstream_model, started_at = excluded.started_at,
                       ended_at = excluded.ended_at, state = excluded.state, record = excluded.record",
                )
                .and_then(|mut statement| {
                    statement.execute(params![
                        run.id.to_string(),
                        writer,
                        run.agent,
                        run.upstream_model,
                        timestamp(run.started_at),
                        run.ended_at.map(timestamp),
                        run.state.as_str(),
                        record
                    ])
                })
                .map_err(backend("writing a run"))?;
            }
            RecordOp::Event(event) => {
                let body = to_json("event", &event.event)?;
                tx.prepare_cached(
                    "INSERT OR REPLACE INTO events (run_id, seq, at, kind, event) VALUES (?1, ?2, ?3, ?4, ?5)",
                )
                .and_then(|mut statement| {
                    statement.execute(params![
                        event.run_id.to_string(),
                        event.seq as i64,
                        timestamp(event.at),
                        event.kind,
                        body
                    ])
                })
                .map_err(backend("writing an event"))?;
            }
            RecordOp::RawLine(line) => {
                tx.prepare_cached(
                    "INSERT OR REPLACE INTO raw_lines (run_id, stream, seq, line) VALUES (?1, ?2, ?3, ?4)",
                )
                .and_then(|mut statement| {
                    statement.execute(params![
                        line.run_id.to_string(),
                        line.stream.as_str(),
                        line.seq as i64,
                        line.line
                    ])
                })
                .map_err(backend("writing a raw line"))?;
            }
            RecordOp::UpsertExchange(exchange) => {
                let (stored, blobs) = blobs::deflate(exchange)?;
                for blob in &blobs {
                    Self::write_blob(tx, blob, known_blobs, new_blobs)?;
                }
                Self::write_exchange(tx, writer, exchange, &to_json("exchange", &stored)?)?;
            }
        }
        Ok(())
    }

    /// Writer ids with unfinished rows, or with a lock file on disk.
    fn candidate_writers(&self) -> Result<Vec<String>, StoreError> {
        let mut statement = self
            .conn
            .prepare(
                "SELECT writer_id FROM exchanges WHERE status = 'in_flight'
                 UNION SELECT writer_id FROM runs WHERE state = 'running'",
            )
            .map_err(backend("finding unfinished rows"))?;
        let mut writers: Vec<String> = statement
            .query_map([], |row| row.get(0))
            .and_then(Iterator::collect)
            .map_err(backend("finding unfinished rows"))?;
        let dir = writers_dir(&self.path);
        if let Ok(entries) = std::fs::read_dir(&dir) {
            for entry in entries.flatten() {
                let name = entry.file_name().to_string_lossy().into_owned();
                if name.ends_with(".staging") {
                    remove_stale_staging(&entry.path());
                    continue;
                }
                if let Some(id) = name.strip_suffix(".lock")
                    && !writers.iter().any(|known| known == id)
                {
                    writers.push(id.to_owned());
                }
            }
        }
        Ok(writers)
    }

    fn mark_writer_incomplete(&mut self, writer: &str) -> Result<(u64, u64), StoreError> {
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(backend("starting recovery"))?;
        let mut exchanges = 0;
        let mut runs = 0;
        {
            let mut select = tx
                .prepare("SELECT id, record FROM exchanges WHERE writer_id = ?1 AND status = 'in_flight'")
                .map_err(backend("reading in-flight exchanges"))?;
            let rows: Vec<(String, String)> = select
                .query_map([writer], |row| Ok((row.get(0)?, row.get(1)?)))
                .and_then(Iterator::collect)
                .map_err(backend("reading in-flight exchanges"))?;
            for (id, record) in rows {
                let mut exchange: ExchangeRecord = from_json("exchange", &record)?;
                exchange.status = ExchangeStatus::Incomplete;
                exchange.error.get_or_insert_with(|| TypedError {
                    kind: "interrupted".into(),
                    message: "the recording process stopped before the exchange ended".into(),
                });
                tx.execute(
                    "UPDATE exchanges SET status = 'incomplete', record = ?2 WHERE id = ?1",
                    params![id, to_json("exchange", &exchange)?],
                )
                .map_err(backend("marking an exchange incomplete"))?;
                exchanges += 1;
            }
            let mut select = tx
                .prepare("SELECT id, record FROM runs WHERE writer_id = ?1 AND state = 'running'")
                .map_err(backend("reading running runs"))?;
            let rows: Vec<(String, String)> = select
                .query_map([writer], |row| Ok((row.get(0)?, row.get(1)?)))
                .and_then(Iterator::collect)
                .map_err(backend("reading running runs"))?;
            for (id, record) in rows {
                let mut run: RunRecord = from_json("run", &record)?;
                run.state = RunState::Incomplete;
                tx.execute(
                    "UPDATE runs SET state = 'incomplete', record = ?2 WHERE id = ?1",
                    params![id, to_json("run", &run)?],
                )
                .map_err(backend("marking a run incomplete"))?;
                runs += 1;
            }
        }
        tx.commit().map_err(backend("committing recovery"))?;
        Ok((exchanges, runs))
    }

    /// Calls `visit` with the summaries of the exchanges `filter` selects, by id in `order`, at
    /// most `limit` of them, one row at a time.
    fn visit_summaries(
        &self,
        filter: ExchangeFilter,
        order: IdOrder,
        limit: Option<usize>,
        visit: &mut dyn FnMut(ExchangeSummary),
    ) -> Result<(), StoreError> {
        let (condition, param) = exchange_condition(filter);
        // SQLite reads a negative limit as "no limit".
        let limit = limit.map_or(-1, |limit| i64::try_from(limit).unwrap_or(i64::MAX));
        let mut statement = self
            .conn
            .prepare(&summary_query(condition, order, limit))
            .map_err(backend("reading exchange summaries"))?;
        let rows = statement
            .query_map(rusqlite::params_from_iter(param), SummaryRow::read)
            .map_err(backend("reading exchange summaries"))?;
        for row in rows {
            visit(
                row.map_err(backend("reading exchange summaries"))?
                    .into_summary()?,
            );
        }
        Ok(())
    }

    fn read_exchanges(
        &self,
        sql: &str,
        param: Option<String>,
    ) -> Result<Vec<ExchangeRecord>, StoreError> {
        let mut statement = self
            .conn
            .prepare_cached(sql)
            .map_err(backend("reading exchanges"))?;
        let params: Vec<String> = param.into_iter().collect();
        let rows: Vec<String> = statement
            .query_map(rusqlite::params_from_iter(params), |row| row.get(0))
            .and_then(Iterator::collect)
            .map_err(backend("reading exchanges"))?;
        let mut bodies = HashMap::new();
        rows.iter()
            .map(|record| self.exchange_from_row(record, &mut bodies))
            .collect()
    }

    /// Parses a stored exchange row and puts its blobs back. `bodies` caches parsed blob bodies
    /// across the rows of one read.
    fn exchange_from_row(
        &self,
        record: &str,
        bodies: &mut HashMap<String, Value>,
    ) -> Result<ExchangeRecord, StoreError> {
        let mut exchange: ExchangeRecord = from_json("exchange", record)?;
        blobs::inflate(&mut exchange, |hash| {
            if let Some(body) = bodies.get(hash) {
                return Ok(Some(body.clone()));
            }
            let text: Option<String> = self
                .conn
                .prepare_cached("SELECT body FROM blobs WHERE hash = ?1")
                .and_then(|mut statement| statement.query_row([hash], |row| row.get(0)).optional())
                .map_err(backend("reading a blob"))?;
            let Some(text) = text else {
                return Ok(None);
            };
            let body: Value = from_json("blob", &text)?;
            bodies.insert(hash.to_owned(), body.clone());
            Ok(Some(body))
        })?;
        Ok(exchange)
    }
}

/// Creates the schema if this database has none yet, migrates older versions forward (under a
/// write lock, so concurrent openers agree), and refuses databases written by a newer schema.
fn migrate(conn: &mut Connection) -> Result<(), StoreError> {
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(backend("starting schema setup"))?;
    let found: i64 = tx
        .pragma_query_value(None, "user_version", |row| row.get(0))
        .map_err(backend("reading user_version"))?;
    if found > SCHEMA_VERSION {
        return Err(StoreError::UnsupportedSchema {
            found,
            supported: SCHEMA_VERSION,
        });
    }
    if found < 1 {
        tx.execute_batch(SCHEMA_V1)
            .map_err(backend("creating the schema"))?;
    }
    if found < 2 {
        tx.execute_batch(MIGRATION_V2)
            .map_err(backend("migrating the schema to version 2"))?;
    }
    if found < SCHEMA_VERSION {
        tx.pragma_update(None, "user_version", SCHEMA_VERSION)
            .map_err(backend("writing user_version"))?;
    }
    tx.commit().map_err(backend("committing the schema"))
}

/// Creates and exclusively locks `<db>.writers/<new id>.lock`. The file is locked under a
/// temporary name and then renamed, so recovery never sees a writer's lock file unlocked.
fn register_writer(db_path: &Path) -> Result<WriterLock, StoreError> {
    let dir = writers_dir(db_path);
    std::fs::create_dir_all(&dir).map_err(io_error(&dir))?;
    let id = Uuid::now_v7();
    let staging = dir.join(format!(".{id}.staging"));
    let path = dir.join(format!("{id}.lock"));
    let file = OpenOptions::new()
        .create_new(true)
        .write(true)
        .open(&staging)
        .map_err(io_error(&staging))?;
    file.lock().map_err(io_error(&staging))?;
    std::fs::rename(&staging, &path).map_err(io_error(&path))?;
    Ok(WriterLock {
        id,
        path,
        _file: file,
    })
}

/// Removes a staging lock file left by a writer that died between creating and renaming it.
/// Only files older than [`STALE_STAGING`] are touched: a younger one may belong to a writer that
/// is registering right now and has not taken its lock yet.
fn remove_stale_staging(path: &Path) {
    let stale = std::fs::metadata(path)
        .and_then(|metadata| metadata.modified())
        .ok()
        .and_then(|modified| modified.elapsed().ok())
        .is_some_and(|age| age > STALE_STAGING);
    if !stale {
        return;
    }
    if let Ok(file) = OpenOptions::new().write(true).open(path)
        && file.try_lock().is_ok()
    {
        let _ = std::fs::remove_file(path);
    }
}

/// True when the writer's lock file is held by a live process.
fn writer_is_alive(db_path: &Path, writer: &str) -> Result<bool, StoreError> {
    let path = writers_dir(db_path).join(format!("{writer}.lock"));
    let file = match OpenOptions::new().write(true).open(&path) {
        Ok(file) => file,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(false),
        Err(error) => return Err(io_error(&path)(error)),
    };
    match file.try_lock() {
        Ok(()) => {
            // Nobody holds it: the writer is gone. Remove its lock file while we hold the lock.
            let _ = std::fs::remove_file(&path);
            Ok(false)
        }
        Err(TryLockError::WouldBlock) => Ok(true),
        Err(TryLockError::Error(error)) => Err(io_error(&path)(error)),
    }
}

impl RecordSink for SqliteStore {
    fn apply(&mut self, ops: &[RecordOp]) -> Result<(), StoreError> {
        let writer = self.writer.id.to_string();
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(backend("starting a write transaction"))?;
        let mut new_blobs = HashSet::new();
        for op in ops {
            SqliteStore::apply_op(&tx, &writer, op, &self.known_blobs, &mut new_blobs)?;
        }
        tx.commit().map_err(backend("committing a batch"))?;
        // Only committed blobs are known: a failed batch rolls its blobs back.
        self.known_blobs.extend(new_blobs);
        Ok(())
    }
}

impl RecordStore for SqliteStore {
    fn recover(&mut self) -> Result<RecoveryReport, StoreError> {
        let mut report = RecoveryReport::default();
        let own = self.writer.id.to_string();
        for writer in self.candidate_writers()? {
            if writer == own || writer_is_alive(&self.path, &writer)? {
                continue;
            }
            let (exchanges, runs) = self.mark_writer_incomplete(&writer)?;
            report.exchanges_marked_incomplete += exchanges;
            report.runs_marked_incomplete += runs;
            report.dead_writers += 1;
        }
        Ok(report)
    }

    fn runs(&self) -> Result<Vec<RunRecord>, StoreError> {
        let mut statement = self
            .conn
            .prepare_cached("SELECT record FROM runs ORDER BY id")
            .map_err(backend("reading runs"))?;
        let rows: Vec<String> = statement
            .query_map([], |row| row.get(0))
            .and_then(Iterator::collect)
            .map_err(backend("reading runs"))?;
        rows.iter().map(|record| from_json("run", record)).collect()
    }

    fn run(&self, id: Uuid) -> Result<Option<RunRecord>, StoreError> {
        let record: Option<String> = self
            .conn
            .query_row(
                "SELECT record FROM runs WHERE id = ?1",
                [id.to_string()],
                |row| row.get(0),
            )
            .optional()
            .map_err(backend("reading a run"))?;
        record.map(|record| from_json("run", &record)).transpose()
    }

    fn resolve_run(&self, id_or_prefix: &str) -> Result<RunRecord, StoreError> {
        let needle = IdPrefix::parse(id_or_prefix)
            .ok_or_else(|| StoreError::RunNotFound(id_or_prefix.to_owned()))?;
        let mut statement = self
            .conn
            .prepare(
                "SELECT record FROM runs WHERE replace(id, '-', '') LIKE ?1 || '%' ORDER BY id",
            )
            .map_err(backend("resolving a run prefix"))?;
        let rows: Vec<String> = statement
            .query_map([needle.digits()], |row| row.get(0))
            .and_then(Iterator::collect)
            .map_err(backend("resolving a run prefix"))?;
        match rows.as_slice() {
            [] => Err(StoreError::RunNotFound(id_or_prefix.to_owned())),
            [record] => from_json("run", record),
            many => Err(StoreError::AmbiguousRunPrefix {
                prefix: id_or_prefix.to_owned(),
                count: many.len(),
            }),
        }
    }

    fn events(&self, run_id: Uuid) -> Result<Vec<EventRecord>, StoreError> {
        let mut statement = self
            .conn
            .prepare_cached(
                "SELECT seq, at, kind, event FROM events WHERE run_id = ?1 ORDER BY seq",
            )
            .map_err(backend("reading events"))?;
        let rows: Vec<(i64, String, String, String)> = statement
            .query_map([run_id.to_string()], |row| {
                Ok((row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?))
            })
            .and_then(Iterator::collect)
            .map_err(backend("reading events"))?;
        rows.into_iter()
            .map(|(seq, at, kind, event)| {
                Ok(EventRecord {
                    run_id,
                    seq: seq as u64,
                    at: parse_timestamp(&at)?,
                    kind,
                    event: from_json("event", &event)?,
                })
            })
            .collect()
    }

    fn raw_line_count(&self, run_id: Uuid) -> Result<u64, StoreError> {
        let count: i64 = self
            .conn
            .prepare_cached("SELECT COUNT(*) FROM raw_lines WHERE run_id = ?1")
            .and_then(|mut statement| statement.query_row([run_id.to_string()], |row| row.get(0)))
            .map_err(backend("counting raw lines"))?;
        Ok(u64::try_from(count).unwrap_or(0))
    }

    fn raw_lines(&self, run_id: Uuid) -> Result<Vec<RawLineRecord>, StoreError> {
        let mut statement = self
            .conn
            .prepare_cached(
                "SELECT stream, seq, line FROM raw_lines WHERE run_id = ?1 ORDER BY stream DESC, seq",
            )
            .map_err(backend("reading raw lines"))?;
        let rows: Vec<(String, i64, String)> = statement
            .query_map([run_id.to_string()], |row| {
                Ok((row.get(0)?, row.get(1)?, row.get(2)?))
            })
            .and_then(Iterator::collect)
            .map_err(backend("reading raw lines"))?;
        rows.into_iter()
            .map(|(stream, seq, line)| {
                let stream = match stream.as_str() {
                    "stdout" => RawStream::Stdout,
                    "stderr" => RawStream::Stderr,
                    "stdin" => RawStream::Stdin,
                    "events" => RawStream::Events,
                    other => {
                        return Err(StoreError::Backend {
                            context: "reading raw lines",
                            message: format!("unknown stream {other:?}"),
                        });
                    }
                };
                Ok(RawLineRecord {
                    run_id,
                    stream,
                    seq: seq as u64,
                    line,
                })
            })
            .collect()
    }

    fn exchanges(&self, filter: ExchangeFilter) -> Result<Vec<ExchangeRecord>, StoreError> {
        let (condition, param) = exchange_condition(filter);
        self.read_exchanges(
            &format!("SELECT record FROM exchanges WHERE {condition} ORDER BY id"),
            param,
        )
    }

    fn exchange_summaries(
        &self,
        filter: ExchangeFilter,
        limit: Option<usize>,
    ) -> Result<Vec<ExchangeSummary>, StoreError> {
        // The newest `limit`, read newest first, then put oldest first.
        let mut summaries = Vec::new();
        self.visit_summaries(filter, IdOrder::NewestFirst, limit, &mut |summary| {
            summaries.push(summary)
        })?;
        summaries.reverse();
        Ok(summaries)
    }

    fn for_each_exchange_summary(
        &self,
        filter: ExchangeFilter,
        visit: &mut dyn FnMut(ExchangeSummary),
    ) -> Result<(), StoreError> {
        self.visit_summaries(filter, IdOrder::OldestFirst, None, visit)
    }

    fn exchange_count(&self, filter: ExchangeFilter) -> Result<u64, StoreError> {
        let (condition, param) = exchange_condition(filter);
        let count: i64 = self
            .conn
            .prepare_cached(&format!("SELECT COUNT(*) FROM exchanges WHERE {condition}"))
            .and_then(|mut statement| {
                statement.query_row(rusqlite::params_from_iter(param), |row| row.get(0))
            })
            .map_err(backend("counting exchanges"))?;
        Ok(u64::try_from(count).unwrap_or(0))
    }

    fn resolve_exchange(&self, id_or_prefix: &str) -> Result<ExchangeRecord, StoreError> {
        let needle = IdPrefix::parse(id_or_prefix)
            .ok_or_else(|| StoreError::ExchangeNotFound(id_or_prefix.to_owned()))?;
        let mut statement = self
            .conn
            .prepare("SELECT id FROM exchanges WHERE replace(id, '-', '') LIKE ?1 || '%'")
            .map_err(backend("resolving an exchange prefix"))?;
        let ids: Vec<String> = statement
            .query_map([needle.digits()], |row| row.get(0))
            .and_then(Iterator::collect)
            .map_err(backend("resolving an exchange prefix"))?;
        match ids.as_slice() {
            [] => Err(StoreError::ExchangeNotFound(id_or_prefix.to_owned())),
            [id] => self
                .exchange(parse_uuid(id)?)?
                .ok_or_else(|| StoreError::ExchangeNotFound(id_or_prefix.to_owned())),
            many => Err(StoreError::AmbiguousExchangePrefix {
                prefix: id_or_prefix.to_owned(),
                count: many.len(),
            }),
        }
    }

    fn exchange(&self, id: Uuid) -> Result<Option<ExchangeRecord>, StoreError> {
        let record: Option<String> = self
            .conn
            .query_row(
                "SELECT record FROM exchanges WHERE id = ?1",
                [id.to_string()],
                |row| row.get(0),
            )
            .optional()
            .map_err(backend("reading an exchange"))?;
        record
            .map(|record| self.exchange_from_row(&record, &mut HashMap::new()))
            .transpose()
    }
}

/// The `WHERE` condition of the `exchanges` rows `filter` selects, and its one parameter if any.
fn exchange_condition(filter: ExchangeFilter) -> (&'static str, Option<String>) {
    match filter {
        ExchangeFilter::All => ("1", None),
        ExchangeFilter::Run(run_id) => ("run_id = ?1", Some(run_id.to_string())),
        ExchangeFilter::Unattributed => ("run_id IS NULL", None),
    }
}

/// The order rows are read in, by id (UUID v7 ids sort by time).
#[derive(Debug, Clone, Copy)]
enum IdOrder {
    OldestFirst,
    NewestFirst,
}

impl IdOrder {
    fn sql(self) -> &'static str {
        match self {
            IdOrder::OldestFirst => "ASC",
            IdOrder::NewestFirst => "DESC",
        }
    }
}

/// The query of exchange summaries matching `condition`, by id in `order`, at most `limit` rows
/// (negative: all). Fields are read from the stored JSON in place: requests and responses are
/// never parsed.
fn summary_query(condition: &str, order: IdOrder, limit: i64) -> String {
    let order = order.sql();
    format!(
        "SELECT id, run_id, status, ingress_api, upstream_model, received_at, \
                json_extract(record, '$.requested_model'), \
                json_extract(record, '$.error.kind'), \
                json_extract(record, '$.retries'), \
                json_extract(record, '$.delivered_at'), \
                json_extract(record, '$.usage.input'), \
                json_extract(record, '$.usage.cached'), \
                json_extract(record, '$.usage.output'), \
                json_extract(record, '$.usage.reasoning'), \
                json_array_length(record, '$.function_calls'), \
                json_extract(record, '$.usage.estimated'), \
                json_extract(record, '$.billed.input'), \
                json_extract(record, '$.billed.cached'), \
                json_extract(record, '$.billed.output'), \
                json_extract(record, '$.billed.reasoning'), \
                json_extract(record, '$.billed.estimated') \
         FROM exchanges WHERE {condition} ORDER BY id {order} LIMIT {limit}"
    )
}

/// One row of [`summary_query`], as SQLite returns it (the PostgreSQL store fills it too, so
/// both turn rows into summaries the same way).
pub(crate) struct SummaryRow {
    pub(crate) id: String,
    pub(crate) run_id: Option<String>,
    pub(crate) status: String,
    pub(crate) ingress_api: String,
    pub(crate) upstream_model: String,
    pub(crate) received_at: String,
    pub(crate) requested_model: Option<String>,
    pub(crate) error_kind: Option<String>,
    pub(crate) retries: Option<i64>,
    pub(crate) delivered_at: Option<String>,
    pub(crate) usage: [Option<i64>; 4],
    pub(crate) function_calls: Option<i64>,
    pub(crate) usage_estimated: Option<bool>,
    pub(crate) billed: [Option<i64>; 4],
    pub(crate) billed_estimated: Option<bool>,
}

impl SummaryRow {
    fn read(row: &rusqlite::Row<'_>) -> rusqlite::Result<Self> {
        Ok(SummaryRow {
            id: row.get(0)?,
            run_id: row.get(1)?,
            status: row.get(2)?,
            ingress_api: row.get(3)?,
            upstream_model: row.get(4)?,
            received_at: row.get(5)?,
            requested_model: row.get(6)?,
            error_kind: row.get(7)?,
            retries: row.get(8)?,
            delivered_at: row.get(9)?,
            usage: [row.get(10)?, row.get(11)?, row.get(12)?, row.get(13)?],
            function_calls: row.get(14)?,
            usage_estimated: row.get(15)?,
            billed: [row.get(16)?, row.get(17)?, row.get(18)?, row.get(19)?],
            billed_estimated: row.get(20)?,
        })
    }

    pub(crate) fn into_summary(self) -> Result<ExchangeSummary, StoreError> {
        let count = |value: Option<i64>| value.and_then(|n| u64::try_from(n).ok()).unwrap_or(0);
        let [input, cached, output, reasoning] = self.usage.map(count);
        let usage = Usage {
            input,
            cached,
            output,
            reasoning,
            estimated: self.usage_estimated.unwrap_or(false),
        };
        // Records written before attempts were billed: the delivered answer's usage.
        let billed = if self.billed.iter().all(Option::is_none) {
            usage
        } else {
            let [input, cached, output, reasoning] = self.billed.map(count);
            Usage {
                input,
                cached,
                output,
                reasoning,
                estimated: self.billed_estimated.unwrap_or(false),
            }
        };
        Ok(ExchangeSummary {
            id: parse_uuid(&self.id)?,
            run_id: self.run_id.as_deref().map(parse_uuid).transpose()?,
            status: parse_exchange_status(&self.status)?,
            ingress_api: self.ingress_api,
            requested_model: self.requested_model.unwrap_or_default(),
            upstream_model: self.upstream_model,
            error_kind: self.error_kind,
            retries: u32::try_from(count(self.retries)).unwrap_or(u32::MAX),
            received_at: parse_timestamp(&self.received_at)?,
            delivered_at: self
                .delivered_at
                .as_deref()
                .map(parse_timestamp)
                .transpose()?,
            usage,
            billed,
            function_calls: count(self.function_calls),
        })
    }
}

/// The [`ExchangeStatus`] stored as `name`.
fn parse_exchange_status(name: &str) -> Result<ExchangeStatus, StoreError> {
    ExchangeStatus::from_name(name).ok_or_else(|| StoreError::Backend {
        context: "reading an exchange status",
        message: format!("unknown status {name:?}"),
    })
}

/// Parses a stored id column (exposed for tests and tools that read the database directly).
pub fn parse_record_id(text: &str) -> Result<Uuid, StoreError> {
    parse_uuid(text)
}
