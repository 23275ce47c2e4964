//! The PostgreSQL record store: the same model as [`crate::SqliteStore`] on a shared server, so
//! several machines can record into (and read from) one database.
//!
//! - **Schema.** Versioned migrations ([`MIGRATIONS`]) recorded in `schema_version`, all applied
//!   in one transaction under a transaction-level advisory lock, so concurrent openers of a new
//!   database agree (one creates, the others find it done). A database written by a newer schema
//!   is refused ([`StoreError::UnsupportedSchema`]).
//! - **Rows.** The SQLite layout: ids and times as text (`COLLATE "C"`, so ids sort by byte,
//!   which is by time for UUID v7), each record whole as JSON text, the large repeated exchange
//!   sub-values in the content-addressed `blobs` table ([`crate::blobs`]), written in the same
//!   transaction as the exchange row and never twice. Raw guest lines are `bytea` (PostgreSQL
//!   text cannot hold NUL); the few plain text columns that only index (agent, model, event kind)
//!   have NUL replaced, and every read takes its values from the JSON.
//! - **Writers and recovery.** Every store instance is a writer with a fresh id and holds a
//!   session-level advisory lock on that id for as long as its connection lives. Opening a store
//!   marks the in-flight exchanges and running runs of writers whose lock is free (their process
//!   or connection is gone) `Incomplete`. A batch is one transaction: a writer that dies mid-batch
//!   leaves nothing of it, so recovery never sees half a batch. A writer whose connection dropped
//!   may be recovered by another opener in the meantime; its next write of a run or exchange
//!   replaces the mark.
//! - **Connection.** One connection per store, on a thread of its own (the `postgres` client runs
//!   a small runtime of its own, which may not be entered from an async task), so the store can
//!   be used from any thread. A lost connection is [`StoreError::Unavailable`]; the next call
//!   connects again (and takes the writer lock again). No TLS yet: use loopback or a unix socket.

use std::collections::{HashMap, HashSet};
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::Duration;

use postgres::fallible_iterator::FallibleIterator;
use postgres::types::ToSql;
use postgres::{Client, NoTls, Statement};
use serde_json::Value;
use sha2::{Digest, Sha256};
use uuid::Uuid;

use crate::blobs;
use crate::error::StoreError;
use crate::model::{
    EventRecord, ExchangeRecord, ExchangeStatus, ExchangeSummary, RawLineRecord, RawStream,
    RecordOp, RunRecord, RunState, TypedError,
};
use crate::spec::PgUrl;
use crate::sqlite::{SummaryRow, from_json, parse_timestamp, parse_uuid, timestamp, to_json};
use crate::store::{ExchangeFilter, IdPrefix, RecordSink, RecordStore, RecoveryReport};

/// The newest schema version this build writes and reads.
pub const SCHEMA_VERSION: i64 = 1;

/// The migrations, in order: version `n` turns a version `n - 1` database into version `n`.
/// v1 is the SQLite store's v3 (runs, events, raw lines, exchanges, blobs with history entries
/// as blob places).
pub const MIGRATIONS: &[(i64, &str)] = &[(1, MIGRATION_V1)];

const MIGRATION_V1: &str = r#"
CREATE TABLE runs (
    id             TEXT COLLATE "C" PRIMARY KEY,   -- UUID v7, hyphenated lowercase
    writer_id      TEXT COLLATE "C" NOT NULL,      -- store instance that last wrote the row
    agent          TEXT NOT NULL,
    upstream_model TEXT,
    started_at     TEXT NOT NULL,                  -- RFC 3339, UTC
    ended_at       TEXT,
    state          TEXT NOT NULL,                  -- running | ended | incomplete | abandoned
    record         TEXT NOT NULL                   -- the whole RunRecord as JSON
);
CREATE TABLE events (
    run_id TEXT COLLATE "C" NOT NULL,
    seq    BIGINT NOT NULL,
    at     TEXT NOT NULL,
    kind   TEXT NOT NULL,
    event  TEXT NOT NULL,                          -- canonical event JSON
    PRIMARY KEY (run_id, seq)
);
CREATE TABLE raw_lines (
    run_id TEXT COLLATE "C" NOT NULL,
    stream TEXT COLLATE "C" NOT NULL,              -- stdout | stderr | stdin | events
    seq    BIGINT NOT NULL,
    line   BYTEA NOT NULL,                         -- UTF-8 text, NUL included
    PRIMARY KEY (run_id, stream, seq)
);
CREATE TABLE exchanges (
    id             TEXT COLLATE "C" PRIMARY KEY,   -- UUID v7
    run_id         TEXT COLLATE "C",
    writer_id      TEXT COLLATE "C" NOT NULL,
    status         TEXT NOT NULL,                  -- in_flight | ok | error | incomplete
    ingress_api    TEXT NOT NULL,
    upstream_model TEXT NOT NULL,
    received_at    TEXT NOT NULL,
    record         TEXT NOT NULL                   -- the whole ExchangeRecord as JSON, with markers
);
CREATE INDEX exchanges_by_run ON exchanges (run_id, id);
CREATE INDEX exchanges_in_flight ON exchanges (writer_id) WHERE status = 'in_flight';
CREATE INDEX runs_running ON runs (writer_id) WHERE state = 'running';
CREATE TABLE blobs (
    hash TEXT COLLATE "C" PRIMARY KEY,             -- sha256:<hex> of body
    body TEXT NOT NULL                             -- the sub-value as compact JSON
);
"#;

/// Advisory lock class of Switchyard's own locks (two-key form: `"SYRD"`, then the lock).
const LOCK_CLASS: i32 = 0x5359_5244;
/// The second key of the migration lock.
const MIGRATION_LOCK: i32 = 1;

/// Connect timeout when the URL sets none.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// TCP keepalive idle time when the URL sets none (a server that vanished is noticed).
const KEEPALIVE_IDLE: Duration = Duration::from_secs(30);
/// Rows a streaming read hands over before it waits for the reader.
const STREAM_AHEAD: usize = 256;

/// The PostgreSQL implementation of [`RecordStore`].
pub struct PgStore {
    url: PgUrl,
    writer: Uuid,
    connection: ConnectionThread,
    /// Blob hashes known to be committed (blobs are never deleted), so their bodies need not be
    /// sent again.
    known_blobs: HashSet<String>,
}

impl std::fmt::Debug for PgStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgStore")
            .field("url", &self.url)
            .field("writer_id", &self.writer)
            .finish()
    }
}

/// A postgres error as a store error: a lost or refused connection or a server shutting down is
/// [`StoreError::Unavailable`], anything else [`StoreError::Backend`].
fn pg(context: &'static str) -> impl Fn(postgres::Error) -> StoreError {
    move |error| {
        let (unavailable, message) = describe(&error);
        if unavailable {
            StoreError::Unavailable { context, message }
        } else {
            StoreError::Backend { context, message }
        }
    }
}

/// Whether `error` is the database being unavailable (trying again later may work), and its
/// text with its sources: how every PostgreSQL user in Switchyard (records, the run queue)
/// classifies a client error.
pub fn describe(error: &postgres::Error) -> (bool, String) {
    (is_unavailable(error), render(error))
}

/// The error with its sources (the client's `Display` says only its kind).
fn render(error: &postgres::Error) -> String {
    let mut text = error.to_string();
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

fn is_unavailable(error: &postgres::Error) -> bool {
    if error.is_closed() {
        return true;
    }
    match error.code() {
        // Connection exceptions (08…), the server shutting down or starting (57P01..57P03).
        Some(state) => {
            let code = state.code();
            code.starts_with("08") || matches!(code, "57P01" | "57P02" | "57P03")
        }
        // No SQLSTATE: I/O (a refused, reset or timed-out connection carries its io::Error).
        // Anything else (a value that does not convert, an unexpected row count) is ours.
        None => {
            let mut source = std::error::Error::source(error);
            while let Some(cause) = source {
                if cause.is::<std::io::Error>() {
                    return true;
                }
                source = cause.source();
            }
            false
        }
    }
}

/// The advisory lock key (bigint form) of a writer id.
fn writer_key(writer: &str) -> i64 {
    let digest = Sha256::digest(writer.as_bytes());
    let mut bytes = [0u8; 8];
    bytes.copy_from_slice(&digest[..8]);
    i64::from_be_bytes(bytes)
}

/// Text for a column that only indexes: PostgreSQL text cannot hold NUL.
fn column_text(text: &str) -> String {
    text.replace('\0', "\u{FFFD}")
}

/// The statements a writer uses on every batch, prepared once per connection.
struct Prepared {
    run: Statement,
    event: Statement,
    raw_line: Statement,
    blob: Statement,
    exchange: Statement,
    read_blob: Statement,
}

impl Prepared {
    fn new(client: &mut Client) -> Result<Self, postgres::Error> {
        Ok(Prepared {
            run: client.prepare(
                "INSERT INTO runs (id, writer_id, agent, upstream_model, started_at, ended_at, state, record)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
                 ON CONFLICT (id) DO UPDATE SET writer_id = excluded.writer_id, agent = excluded.agent,
                   upstream_model = excluded.upstream_model, started_at = excluded.started_at,
                   ended_at = excluded.ended_at, state = excluded.state, record = excluded.record
                 WHERE runs.state <> 'abandoned'",
            )?,
            event: client.prepare(
                "INSERT INTO events (run_id, seq, at, kind, event) VALUES ($1, $2, $3, $4, $5)
                 ON CONFLICT (run_id, seq) DO UPDATE SET at = excluded.at, kind = excluded.kind,
                   event = excluded.event",
            )?,
            raw_line: client.prepare(
                "INSERT INTO raw_lines (run_id, stream, seq, line) VALUES ($1, $2, $3, $4)
                 ON CONFLICT (run_id, stream, seq) DO UPDATE SET line = excluded.line",
            )?,
            blob: client.prepare(
                "INSERT INTO blobs (hash, body) VALUES ($1, $2) ON CONFLICT (hash) DO NOTHING",
            )?,
            exchange: client.prepare(
                "INSERT INTO exchanges (id, run_id, writer_id, status, ingress_api, upstream_model, received_at, record)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
                 ON CONFLICT (id) DO UPDATE SET run_id = excluded.run_id, writer_id = excluded.writer_id,
                   status = excluded.status, ingress_api = excluded.ingress_api,
                   upstream_model = excluded.upstream_model, received_at = excluded.received_at,
                   record = excluded.record",
            )?,
            read_blob: client.prepare("SELECT body FROM blobs WHERE hash = $1")?,
        })
    }
}

/// The connection, owned by the connection thread: connects (again) when needed.
struct Session {
    config: postgres::Config,
    writer: String,
    live: Option<Client>,
    /// The writer's statements on `live` (prepared once the schema exists).
    prepared: Option<Prepared>,
}

impl Session {
    /// The live connection, connecting (and taking this writer's lock) first if there is none or
    /// it was lost.
    fn client(&mut self) -> Result<&mut Client, StoreError> {
        if self.live.as_ref().is_some_and(Client::is_closed) {
            self.live = None;
        }
        if self.live.is_none() {
            self.prepared = None;
            let mut client = self.config.connect(NoTls).map_err(pg("connecting"))?;
            // Never waited for: after a network drop the server may keep this writer's old
            // session (and its lock) until its own keepalive ends it; the recorder's backoff
            // tries again instead of this thread blocking for that long.
            let locked: bool = client
                .query_one(
                    "SELECT pg_try_advisory_lock($1)",
                    &[&writer_key(&self.writer)],
                )
                .map_err(pg("taking the writer lock"))?
                .try_get(0)
                .map_err(pg("taking the writer lock"))?;
            if !locked {
                return Err(StoreError::Unavailable {
                    context: "taking the writer lock",
                    message: "this writer's previous session still holds it".to_owned(),
                });
            }
            self.live = Some(client);
        }
        self.live.as_mut().ok_or_else(|| StoreError::Unavailable {
            context: "connecting",
            message: "no connection".to_owned(),
        })
    }

    /// Runs `step` on the connection with the writer's statements; a connection lost on the way
    /// is dropped, so the next call connects again.
    fn with<T>(
        &mut self,
        step: impl FnOnce(&mut Client, &Prepared) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        self.client()?;
        let result = match &mut self.live {
            Some(client) => {
                if self.prepared.is_none() {
                    match Prepared::new(client).map_err(pg("preparing statements")) {
                        Ok(prepared) => self.prepared = Some(prepared),
                        Err(error) => return self.failed(error),
                    }
                }
                match &self.prepared {
                    Some(prepared) => step(client, prepared),
                    None => return self.failed(thread_gone()),
                }
            }
            None => return self.failed(thread_gone()),
        };
        match result {
            Err(error) => self.failed(error),
            ok => ok,
        }
    }

    /// Forgets a connection that `error` says is gone.
    fn failed<T>(&mut self, error: StoreError) -> Result<T, StoreError> {
        if error.is_unavailable() {
            self.live = None;
            self.prepared = None;
        }
        Err(error)
    }
}

type Job = Box<dyn FnOnce(&mut Session) + Send>;

/// The thread that owns the [`Session`] and runs jobs on it, one at a time.
struct ConnectionThread {
    jobs: Option<mpsc::Sender<Job>>,
    thread: Option<JoinHandle<()>>,
}

impl ConnectionThread {
    fn start(session: Session) -> Result<Self, StoreError> {
        let (jobs, receiver) = mpsc::channel::<Job>();
        let thread = std::thread::Builder::new()
            .name("switchyard-records-pg".into())
            .spawn(move || {
                let mut session = session;
                for job in receiver {
                    // A panic fails that call alone (its caller sees the reply channel close).
                    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        job(&mut session)
                    }));
                }
            })
            .map_err(|source| StoreError::Io {
                path: "the PostgreSQL connection thread".to_owned(),
                source,
            })?;
        Ok(ConnectionThread {
            jobs: Some(jobs),
            thread: Some(thread),
        })
    }

    fn send(&self, job: Job) -> Result<(), StoreError> {
        self.jobs
            .as_ref()
            .ok_or_else(thread_gone)?
            .send(job)
            .map_err(|_| thread_gone())
    }

    /// Runs `step` on the connection thread and waits for its answer.
    fn call<T: Send + 'static>(
        &self,
        step: impl FnOnce(&mut Session) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, StoreError> {
        let (reply, answer) = mpsc::sync_channel(1);
        self.send(Box::new(move |session| {
            let _ = reply.send(step(session));
        }))?;
        answer.recv().map_err(|_| thread_gone())?
    }

    /// Runs `step` on the connection thread, which sends items as it reads them; the receiver
    /// ends when `step` returns.
    fn stream<T: Send + 'static>(
        &self,
        step: impl FnOnce(&mut Session, &mpsc::SyncSender<Result<T, StoreError>>) + Send + 'static,
    ) -> Result<mpsc::Receiver<Result<T, StoreError>>, StoreError> {
        let (items, receiver) = mpsc::sync_channel(STREAM_AHEAD);
        self.send(Box::new(move |session| step(session, &items)))?;
        Ok(receiver)
    }
}

impl Drop for ConnectionThread {
    fn drop(&mut self) {
        // Ends the job loop; the connection (and with it this writer's lock) closes.
        drop(self.jobs.take());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn thread_gone() -> StoreError {
    StoreError::Backend {
        context: "talking to the PostgreSQL connection thread",
        message: "the connection thread stopped".to_owned(),
    }
}

/// One row to write, built on the caller's thread (serialization, blob hashing) so the
/// connection thread only sends.
enum Write {
    Run {
        id: String,
        agent: String,
        upstream_model: Option<String>,
        started_at: String,
        ended_at: Option<String>,
        state: &'static str,
        record: String,
    },
    Event {
        run_id: String,
        seq: i64,
        at: String,
        kind: String,
        event: String,
    },
    RawLine {
        run_id: String,
        stream: &'static str,
        seq: i64,
        line: Vec<u8>,
    },
    Blob {
        hash: String,
        body: String,
    },
    Exchange {
        id: String,
        run_id: Option<String>,
        status: &'static str,
        ingress_api: String,
        upstream_model: String,
        received_at: String,
        record: String,
    },
}

impl Write {
    /// The rows of `op`, after `rows` (blobs not yet known are added before their exchange).
    fn push(
        op: &RecordOp,
        rows: &mut Vec<Write>,
        known_blobs: &HashSet<String>,
        new_blobs: &mut HashSet<String>,
    ) -> Result<(), StoreError> {
        match op {
            RecordOp::UpsertRun(run) => {
                let mut run = (**run).clone();
                if run.ended_at.is_some() && run.state == RunState::Running {
                    run.state = RunState::Ended;
                }
                rows.push(Write::Run {
                    id: run.id.to_string(),
                    agent: column_text(&run.agent),
                    upstream_model: run.upstream_model.as_deref().map(column_text),
                    started_at: timestamp(run.started_at),
                    ended_at: run.ended_at.map(timestamp),
                    state: run.state.as_str(),
                    record: to_json("run", &run)?,
                });
            }
            RecordOp::Event(event) => rows.push(Write::Event {
                run_id: event.run_id.to_string(),
                seq: seq_column(event.seq),
                at: timestamp(event.at),
                kind: column_text(&event.kind),
                event: to_json("event", &event.event)?,
            }),
            RecordOp::RawLine(line) => rows.push(Write::RawLine {
                run_id: line.run_id.to_string(),
                stream: line.stream.as_str(),
                seq: seq_column(line.seq),
                line: line.line.as_bytes().to_vec(),
            }),
            RecordOp::UpsertExchange(exchange) => {
                let (stored, blobs) = blobs::deflate(exchange)?;
                for blob in blobs {
                    if known_blobs.contains(&blob.hash) || !new_blobs.insert(blob.hash.clone()) {
                        continue;
                    }
                    rows.push(Write::Blob {
                        hash: blob.hash,
                        body: blob.body,
                    });
                }
                rows.push(Write::Exchange {
                    id: exchange.id.to_string(),
                    run_id: exchange.run_id.map(|id| id.to_string()),
                    status: exchange.status.as_str(),
                    ingress_api: column_text(&exchange.ingress_api),
                    upstream_model: column_text(&exchange.upstream_model),
                    received_at: timestamp(exchange.received_at),
                    record: to_json("exchange", &stored)?,
                });
            }
        }
        Ok(())
    }

    fn execute(
        &self,
        tx: &mut postgres::Transaction<'_>,
        prepared: &Prepared,
        writer: &str,
    ) -> Result<(), StoreError> {
        match self {
            Write::Run {
                id,
                agent,
                upstream_model,
                started_at,
                ended_at,
                state,
                record,
            } => tx
                .execute(
                    &prepared.run,
                    &[
                        id,
                        &writer,
                        agent,
                        upstream_model,
                        started_at,
                        ended_at,
                        state,
                        record,
                    ],
                )
                .map_err(pg("writing a run"))?,
            Write::Event {
                run_id,
                seq,
                at,
                kind,
                event,
            } => tx
                .execute(&prepared.event, &[run_id, seq, at, kind, event])
                .map_err(pg("writing an event"))?,
            Write::RawLine {
                run_id,
                stream,
                seq,
                line,
            } => tx
                .execute(&prepared.raw_line, &[run_id, stream, seq, line])
                .map_err(pg("writing a raw line"))?,
            Write::Blob { hash, body } => tx
                .execute(&prepared.blob, &[hash, body])
                .map_err(pg("writing a blob"))?,
            Write::Exchange {
                id,
                run_id,
                status,
                ingress_api,
                upstream_model,
                received_at,
                record,
            } => tx
                .execute(
                    &prepared.exchange,
                    &[
                        id,
                        run_id,
                        &writer,
                        status,
                        ingress_api,
                        upstream_model,
                        received_at,
                        record,
                    ],
                )
                .map_err(pg("writing an exchange"))?,
        };
        Ok(())
    }
}

/// A sequence number as a `BIGINT` (numbers past `i64::MAX` cannot occur in practice; they
/// saturate rather than wrap).
fn seq_column(seq: u64) -> i64 {
    i64::try_from(seq).unwrap_or(i64::MAX)
}

fn seq_of(seq: i64) -> u64 {
    u64::try_from(seq).unwrap_or(0)
}

/// Reads column `index` of `row`.
fn column<'a, T: postgres::types::FromSql<'a>>(
    row: &'a postgres::Row,
    index: usize,
    context: &'static str,
) -> Result<T, StoreError> {
    row.try_get(index).map_err(pg(context))
}

impl PgStore {
    /// Connects to the database at `url`, applies the schema migrations (creating the tables in a
    /// new database), registers this instance as a writer, then recovers dead writers' rows.
    pub fn open(url: &PgUrl) -> Result<Self, StoreError> {
        Self::open_with(url, false)
    }

    /// Opens a database that already holds a Switchyard schema: [`StoreError::Missing`] when it
    /// has none (never creates the tables).
    pub fn open_existing(url: &PgUrl) -> Result<Self, StoreError> {
        Self::open_with(url, true)
    }

    fn open_with(url: &PgUrl, existing: bool) -> Result<Self, StoreError> {
        let mut config: postgres::Config = url.expose().parse().map_err(|_| {
            StoreError::InvalidSpec("the PostgreSQL URL is not a valid connection string".into())
        })?;
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(CONNECT_TIMEOUT);
        }
        config.keepalives(true);
        if config.get_keepalives_idle() == Duration::from_secs(2 * 60 * 60) {
            config.keepalives_idle(KEEPALIVE_IDLE);
        }
        if config.get_application_name().is_none() {
            config.application_name("switchyard-records");
        }
        let writer = Uuid::now_v7();
        let connection = ConnectionThread::start(Session {
            config,
            writer: writer.to_string(),
            live: None,
            prepared: None,
        })?;
        let shown = url.to_string();
        connection.call(move |session| {
            let client = session.client()?;
            if existing && !has_schema(client)? {
                return Err(StoreError::Missing(shown));
            }
            migrate(client)
        })?;
        let mut store = PgStore {
            url: url.clone(),
            writer,
            connection,
            known_blobs: HashSet::new(),
        };
        store.recover()?;
        Ok(store)
    }

    /// The URL (its `Display` hides the password).
    pub fn url(&self) -> &PgUrl {
        &self.url
    }

    /// This instance's writer id (stored on every run and exchange row it writes).
    pub fn writer_id(&self) -> Uuid {
        self.writer
    }

    /// The schema version the database is at.
    pub fn schema_version(&self) -> Result<i64, StoreError> {
        self.connection.call(|session| {
            session.with(|client, _| {
                let row = client
                    .query_one("SELECT max(version) FROM schema_version", &[])
                    .map_err(pg("reading the schema version"))?;
                Ok(column::<Option<i64>>(&row, 0, "reading the schema version")?.unwrap_or(0))
            })
        })
    }

    /// Rows in each table, by name (for tests and tools: blob deduplication is visible here).
    pub fn table_counts(&self) -> Result<Vec<(String, i64)>, StoreError> {
        self.connection.call(|session| {
            session.with(|client, _| {
                let mut counts = Vec::new();
                for table in ["runs", "events", "raw_lines", "exchanges", "blobs"] {
                    let row = client
                        .query_one(&format!("SELECT COUNT(*) FROM {table}"), &[])
                        .map_err(pg("counting rows"))?;
                    counts.push((table.to_owned(), column(&row, 0, "counting rows")?));
                }
                Ok(counts)
            })
        })
    }

    /// Marks run `id` [`RunState::Abandoned`] (a queue worker's lease on its task expired and
    /// the task went to another attempt), unless it ended: true when it was marked. Its writer's
    /// later upserts of the run leave the mark (the run's events and exchanges still land).
    pub fn mark_run_abandoned(&self, id: Uuid) -> Result<bool, StoreError> {
        let id = id.to_string();
        self.connection.call(move |session| {
            session.with(|client, _| {
                let mut tx = client.transaction().map_err(pg("starting to abandon a run"))?;
                let row = tx
                    .query_opt(
                        "SELECT record FROM runs WHERE id = $1 AND state IN ('running', 'incomplete')
                         FOR UPDATE",
                        &[&id],
                    )
                    .map_err(pg("reading a run to abandon"))?;
                let Some(row) = row else {
                    return Ok(false);
                };
                let record: String = column(&row, 0, "reading a run to abandon")?;
                let mut run: RunRecord = from_json("run", &record)?;
                run.state = RunState::Abandoned;
                tx.execute(
                    "UPDATE runs SET state = 'abandoned', record = $2 WHERE id = $1",
                    &[&id, &to_json("run", &run)?],
                )
                .map_err(pg("marking a run abandoned"))?;
                tx.commit().map_err(pg("committing an abandoned run"))?;
                Ok(true)
            })
        })
    }

    /// Reads `sql` (one text parameter at most) to whole exchanges, blobs put back.
    fn read_exchanges(
        &self,
        sql: String,
        param: Option<String>,
    ) -> Result<Vec<ExchangeRecord>, StoreError> {
        self.connection.call(move |session| {
            session.with(|client, prepared| {
                let params: Vec<&(dyn ToSql + Sync)> =
                    param.iter().map(|p| p as &(dyn ToSql + Sync)).collect();
                let rows = client
                    .query(sql.as_str(), &params)
                    .map_err(pg("reading exchanges"))?;
                let mut bodies = HashMap::new();
                rows.iter()
                    .map(|row| {
                        let record: String = column(row, 0, "reading exchanges")?;
                        exchange_from_row(client, prepared, &record, &mut bodies)
                    })
                    .collect()
            })
        })
    }

    /// Sends the summaries of the exchanges `filter` selects, by id in `order`, at most `limit`.
    fn summaries(
        &self,
        filter: ExchangeFilter,
        newest_first: bool,
        limit: Option<usize>,
    ) -> Result<mpsc::Receiver<Result<ExchangeSummary, StoreError>>, StoreError> {
        let (condition, param) = exchange_condition(filter);
        let limit = match limit {
            Some(limit) => i64::try_from(limit).unwrap_or(i64::MAX).to_string(),
            None => "ALL".to_owned(),
        };
        let sql = summary_query(condition, newest_first, &limit);
        self.connection.stream(move |session, items| {
            let result = session.with(|client, _| {
                let params: Vec<&(dyn ToSql + Sync)> =
                    param.iter().map(|p| p as &(dyn ToSql + Sync)).collect();
                let mut rows = client
                    .query_raw(sql.as_str(), params)
                    .map_err(pg("reading exchange summaries"))?;
                while let Some(row) = rows.next().map_err(pg("reading exchange summaries"))? {
                    let summary = summary_of(&row);
                    if items.send(summary).is_err() {
                        // The reader stopped: stop reading.
                        break;
                    }
                }
                Ok(())
            });
            if let Err(error) = result {
                let _ = items.send(Err(error));
            }
        })
    }
}

/// True when the database holds the `schema_version` table.
fn has_schema(client: &mut Client) -> Result<bool, StoreError> {
    let row = client
        .query_one("SELECT to_regclass('schema_version') IS NOT NULL", &[])
        .map_err(pg("looking for the schema"))?;
    column(&row, 0, "looking for the schema")
}

/// Applies the migrations the database lacks, all in one transaction under the migration lock
/// (so concurrent openers of a new database wait for the first), and refuses a newer schema.
fn migrate(client: &mut Client) -> Result<(), StoreError> {
    let mut tx = client.transaction().map_err(pg("starting schema setup"))?;
    tx.execute(
        "SELECT pg_advisory_xact_lock($1, $2)",
        &[&LOCK_CLASS, &MIGRATION_LOCK],
    )
    .map_err(pg("taking the migration lock"))?;
    tx.batch_execute(
        "CREATE TABLE IF NOT EXISTS schema_version (
             version    BIGINT PRIMARY KEY,
             applied_at TIMESTAMPTZ NOT NULL DEFAULT now()
         )",
    )
    .map_err(pg("creating schema_version"))?;
    let row = tx
        .query_one("SELECT max(version) FROM schema_version", &[])
        .map_err(pg("reading the schema version"))?;
    let found = column::<Option<i64>>(&row, 0, "reading the schema version")?.unwrap_or(0);
    if found > SCHEMA_VERSION {
        return Err(StoreError::UnsupportedSchema {
            found,
            supported: SCHEMA_VERSION,
        });
    }
    for (version, sql) in MIGRATIONS {
        if *version <= found {
            continue;
        }
        tx.batch_execute(sql).map_err(pg("migrating the schema"))?;
        tx.execute(
            "INSERT INTO schema_version (version) VALUES ($1)",
            &[version],
        )
        .map_err(pg("recording the schema version"))?;
    }
    tx.commit().map_err(pg("committing the schema"))
}

/// Parses a stored exchange row and puts its blobs back. `bodies` caches parsed blob bodies
/// across the rows of one read.
fn exchange_from_row(
    client: &mut Client,
    prepared: &Prepared,
    record: &str,
    bodies: &mut HashMap<String, Value>,
) -> Result<ExchangeRecord, StoreError> {
    let mut exchange: ExchangeRecord = from_json("exchange", record)?;
    blobs::inflate(&mut exchange, |hash| {
        if let Some(body) = bodies.get(hash) {
            return Ok(Some(body.clone()));
        }
        let row = client
            .query_opt(&prepared.read_blob, &[&hash])
            .map_err(pg("reading a blob"))?;
        let Some(row) = row else {
            return Ok(None);
        };
        let text: String = column(&row, 0, "reading a blob")?;
        let body: Value = from_json("blob", &text)?;
        bodies.insert(hash.to_owned(), body.clone());
        Ok(Some(body))
    })?;
    Ok(exchange)
}

/// The `WHERE` condition of the `exchanges` rows `filter` selects, and its one parameter if any.
fn exchange_condition(filter: ExchangeFilter) -> (&'static str, Option<String>) {
    match filter {
        ExchangeFilter::All => ("TRUE", None),
        ExchangeFilter::Run(run_id) => ("run_id = $1", Some(run_id.to_string())),
        ExchangeFilter::Unattributed => ("run_id IS NULL", None),
    }
}

/// The query of exchange summaries matching `condition`. Fields are read from the stored JSON
/// on the server, each as JSON text; requests, responses and blobs never leave the server. A
/// record holding `\u0000` (which PostgreSQL refuses to extract) comes whole instead, the last
/// column, and is summarised here.
fn summary_query(condition: &str, newest_first: bool, limit: &str) -> String {
    let order = if newest_first { "DESC" } else { "ASC" };
    format!(
        "SELECT id, run_id, status, received_at, \
                (r -> 'ingress_api')::text, (r -> 'upstream_model')::text, \
                (r -> 'requested_model')::text, (r #> '{{error,kind}}')::text, \
                (r -> 'retries')::text, (r -> 'delivered_at')::text, \
                (r #> '{{usage,input}}')::text, (r #> '{{usage,cached}}')::text, \
                (r #> '{{usage,output}}')::text, (r #> '{{usage,reasoning}}')::text, \
                CASE WHEN json_typeof(r -> 'function_calls') = 'array' \
                     THEN json_array_length(r -> 'function_calls') END, \
                (r #> '{{usage,estimated}}')::text, \
                (r #> '{{billed,input}}')::text, (r #> '{{billed,cached}}')::text, \
                (r #> '{{billed,output}}')::text, (r #> '{{billed,reasoning}}')::text, \
                (r #> '{{billed,estimated}}')::text, \
                CASE WHEN r IS NULL THEN record END \
         FROM exchanges CROSS JOIN LATERAL ( \
             SELECT CASE WHEN strpos(record, '\\u0000') = 0 THEN record::json END AS r) AS parsed \
         WHERE {condition} ORDER BY id {order} LIMIT {limit}"
    )
}

/// A JSON field read as text (`None`: absent, or JSON null).
fn json_field(row: &postgres::Row, index: usize) -> Result<Option<Value>, StoreError> {
    let text: Option<String> = column(row, index, "reading exchange summaries")?;
    Ok(text
        .and_then(|text| serde_json::from_str::<Value>(&text).ok())
        .filter(|value| !value.is_null()))
}

fn json_string(row: &postgres::Row, index: usize) -> Result<Option<String>, StoreError> {
    Ok(json_field(row, index)?.and_then(|v| v.as_str().map(str::to_owned)))
}

fn json_i64(row: &postgres::Row, index: usize) -> Result<Option<i64>, StoreError> {
    Ok(json_field(row, index)?.and_then(|v| v.as_i64()))
}

fn json_bool(row: &postgres::Row, index: usize) -> Result<Option<bool>, StoreError> {
    Ok(json_field(row, index)?.and_then(|v| v.as_bool()))
}

/// The summary of one row of [`summary_query`].
fn summary_of(row: &postgres::Row) -> Result<ExchangeSummary, StoreError> {
    let whole: Option<String> = column(row, 21, "reading exchange summaries")?;
    match whole {
        Some(record) => Ok(ExchangeSummary::of(&from_json::<ExchangeRecord>(
            "exchange", &record,
        )?)),
        None => summary_row(row)?.into_summary(),
    }
}

/// One row of [`summary_query`] in the SQLite store's form.
fn summary_row(row: &postgres::Row) -> Result<SummaryRow, StoreError> {
    const CONTEXT: &str = "reading exchange summaries";
    Ok(SummaryRow {
        id: column(row, 0, CONTEXT)?,
        run_id: column(row, 1, CONTEXT)?,
        status: column(row, 2, CONTEXT)?,
        received_at: column(row, 3, CONTEXT)?,
        ingress_api: json_string(row, 4)?.unwrap_or_default(),
        upstream_model: json_string(row, 5)?.unwrap_or_default(),
        requested_model: json_string(row, 6)?,
        error_kind: json_string(row, 7)?,
        retries: json_i64(row, 8)?,
        delivered_at: json_string(row, 9)?,
        usage: [
            json_i64(row, 10)?,
            json_i64(row, 11)?,
            json_i64(row, 12)?,
            json_i64(row, 13)?,
        ],
        function_calls: column::<Option<i32>>(row, 14, CONTEXT)?.map(i64::from),
        usage_estimated: json_bool(row, 15)?,
        billed: [
            json_i64(row, 16)?,
            json_i64(row, 17)?,
            json_i64(row, 18)?,
            json_i64(row, 19)?,
        ],
        billed_estimated: json_bool(row, 20)?,
    })
}

/// Marks the in-flight exchanges and running runs of `writer` incomplete, in one transaction.
fn mark_writer_incomplete(client: &mut Client, writer: &str) -> Result<(u64, u64), StoreError> {
    let mut tx = client.transaction().map_err(pg("starting recovery"))?;
    let mut exchanges = 0;
    let mut runs = 0;
    let rows = tx
        .query(
            "SELECT id, record FROM exchanges WHERE writer_id = $1 AND status = 'in_flight' FOR UPDATE",
            &[&writer],
        )
        .map_err(pg("reading in-flight exchanges"))?;
    for row in rows {
        let id: String = column(&row, 0, "reading in-flight exchanges")?;
        let record: String = column(&row, 1, "reading in-flight exchanges")?;
        let mut exchange: ExchangeRecord = from_json("exchange", &record)?;
        exchange.status = ExchangeStatus::Incomplete;
        exchange.error.get_or_insert_with(|| TypedError {
            kind: "interrupted".into(),
            message: "the recording process stopped before the exchange ended".into(),
        });
        tx.execute(
            "UPDATE exchanges SET status = 'incomplete', record = $2 WHERE id = $1",
            &[&id, &to_json("exchange", &exchange)?],
        )
        .map_err(pg("marking an exchange incomplete"))?;
        exchanges += 1;
    }
    let rows = tx
        .query(
            "SELECT id, record FROM runs WHERE writer_id = $1 AND state = 'running' FOR UPDATE",
            &[&writer],
        )
        .map_err(pg("reading running runs"))?;
    for row in rows {
        let id: String = column(&row, 0, "reading running runs")?;
        let record: String = column(&row, 1, "reading running runs")?;
        let mut run: RunRecord = from_json("run", &record)?;
        run.state = RunState::Incomplete;
        tx.execute(
            "UPDATE runs SET state = 'incomplete', record = $2 WHERE id = $1",
            &[&id, &to_json("run", &run)?],
        )
        .map_err(pg("marking a run incomplete"))?;
        runs += 1;
    }
    tx.commit().map_err(pg("committing recovery"))?;
    Ok((exchanges, runs))
}

impl RecordSink for PgStore {
    fn apply(&mut self, ops: &[RecordOp]) -> Result<(), StoreError> {
        let mut rows = Vec::with_capacity(ops.len());
        let mut new_blobs = HashSet::new();
        for op in ops {
            Write::push(op, &mut rows, &self.known_blobs, &mut new_blobs)?;
        }
        let writer = self.writer.to_string();
        self.connection.call(move |session| {
            session.with(|client, prepared| {
                let mut tx = client
                    .transaction()
                    .map_err(pg("starting a write transaction"))?;
                for row in &rows {
                    row.execute(&mut tx, prepared, &writer)?;
                }
                tx.commit().map_err(pg("committing a batch"))
            })
        })?;
        // Only committed blobs are known: a failed batch rolls its blobs back.
        self.known_blobs.extend(new_blobs);
        Ok(())
    }
}

impl RecordStore for PgStore {
    fn recover(&mut self) -> Result<RecoveryReport, StoreError> {
        let own = self.writer.to_string();
        self.connection.call(move |session| {
            session.with(|client, _| {
                let rows = client
                    .query(
                        "SELECT writer_id FROM exchanges WHERE status = 'in_flight'
                         UNION SELECT writer_id FROM runs WHERE state = 'running'",
                        &[],
                    )
                    .map_err(pg("finding unfinished rows"))?;
                let mut report = RecoveryReport::default();
                for row in rows {
                    let writer: String = column(&row, 0, "finding unfinished rows")?;
                    if writer == own {
                        continue;
                    }
                    let key = writer_key(&writer);
                    let row = client
                        .query_one("SELECT pg_try_advisory_lock($1)", &[&key])
                        .map_err(pg("checking a writer"))?;
                    let free: bool = column(&row, 0, "checking a writer")?;
                    if !free {
                        // Its connection is alive: its rows are its own business.
                        continue;
                    }
                    // Held while marking, so the writer cannot come back half way.
                    let marked = mark_writer_incomplete(client, &writer);
                    client
                        .execute("SELECT pg_advisory_unlock($1)", &[&key])
                        .map_err(pg("releasing a writer lock"))?;
                    let (exchanges, runs) = marked?;
                    report.exchanges_marked_incomplete += exchanges;
                    report.runs_marked_incomplete += runs;
                    report.dead_writers += 1;
                }
                Ok(report)
            })
        })
    }

    fn runs(&self) -> Result<Vec<RunRecord>, StoreError> {
        let records = self.connection.call(|session| {
            session.with(|client, _| {
                let rows = client
                    .query("SELECT record FROM runs ORDER BY id", &[])
                    .map_err(pg("reading runs"))?;
                rows.iter()
                    .map(|row| column::<String>(row, 0, "reading runs"))
                    .collect::<Result<Vec<_>, _>>()
            })
        })?;
        records
            .iter()
            .map(|record| from_json("run", record))
            .collect()
    }

    fn run(&self, id: Uuid) -> Result<Option<RunRecord>, StoreError> {
        let record = self.connection.call(move |session| {
            session.with(|client, _| {
                let row = client
                    .query_opt("SELECT record FROM runs WHERE id = $1", &[&id.to_string()])
                    .map_err(pg("reading a run"))?;
                row.map(|row| column::<String>(&row, 0, "reading a run"))
                    .transpose()
            })
        })?;
        record.map(|record| from_json("run", &record)).transpose()
    }

    fn resolve_run(&self, id_or_prefix: &str) -> Result<RunRecord, StoreError> {
        let needle = IdPrefix::parse(id_or_prefix)
            .ok_or_else(|| StoreError::RunNotFound(id_or_prefix.to_owned()))?;
        let digits = needle.digits().to_owned();
        let records = self.connection.call(move |session| {
            session.with(|client, _| {
                let rows = client
                    .query(
                        "SELECT record FROM runs WHERE replace(id, '-', '') LIKE $1 || '%' ORDER BY id",
                        &[&digits],
                    )
                    .map_err(pg("resolving a run prefix"))?;
                rows.iter()
                    .map(|row| column::<String>(row, 0, "resolving a run prefix"))
                    .collect::<Result<Vec<_>, _>>()
            })
        })?;
        match records.as_slice() {
            [] => Err(StoreError::RunNotFound(id_or_prefix.to_owned())),
            [record] => from_json("run", record),
            many => Err(StoreError::AmbiguousRunPrefix {
                prefix: id_or_prefix.to_owned(),
                count: many.len(),
            }),
        }
    }

    fn events(&self, run_id: Uuid) -> Result<Vec<EventRecord>, StoreError> {
        let rows = self.connection.call(move |session| {
            session.with(|client, _| {
                let rows = client
                    .query(
                        "SELECT seq, at, kind, event FROM events WHERE run_id = $1 ORDER BY seq",
                        &[&run_id.to_string()],
                    )
                    .map_err(pg("reading events"))?;
                rows.iter()
                    .map(|row| {
                        Ok((
                            column::<i64>(row, 0, "reading events")?,
                            column::<String>(row, 1, "reading events")?,
                            column::<String>(row, 2, "reading events")?,
                            column::<String>(row, 3, "reading events")?,
                        ))
                    })
                    .collect::<Result<Vec<_>, StoreError>>()
            })
        })?;
        rows.into_iter()
            .map(|(seq, at, kind, event)| {
                Ok(EventRecord {
                    run_id,
                    seq: seq_of(seq),
                    at: parse_timestamp(&at)?,
                    kind,
                    event: from_json("event", &event)?,
                })
            })
            .collect()
    }

    fn raw_line_count(&self, run_id: Uuid) -> Result<u64, StoreError> {
        let count = self.connection.call(move |session| {
            session.with(|client, _| {
                let row = client
                    .query_one(
                        "SELECT COUNT(*) FROM raw_lines WHERE run_id = $1",
                        &[&run_id.to_string()],
                    )
                    .map_err(pg("counting raw lines"))?;
                column::<i64>(&row, 0, "counting raw lines")
            })
        })?;
        Ok(u64::try_from(count).unwrap_or(0))
    }

    fn raw_lines(&self, run_id: Uuid) -> Result<Vec<RawLineRecord>, StoreError> {
        let rows = self.connection.call(move |session| {
            session.with(|client, _| {
                let rows = client
                    .query(
                        "SELECT stream, seq, line FROM raw_lines WHERE run_id = $1 ORDER BY stream DESC, seq",
                        &[&run_id.to_string()],
                    )
                    .map_err(pg("reading raw lines"))?;
                rows.iter()
                    .map(|row| {
                        Ok((
                            column::<String>(row, 0, "reading raw lines")?,
                            column::<i64>(row, 1, "reading raw lines")?,
                            column::<Vec<u8>>(row, 2, "reading raw lines")?,
                        ))
                    })
                    .collect::<Result<Vec<_>, StoreError>>()
            })
        })?;
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
                let line = String::from_utf8(line).map_err(|_| StoreError::Backend {
                    context: "reading raw lines",
                    message: "a stored line is not UTF-8".to_owned(),
                })?;
                Ok(RawLineRecord {
                    run_id,
                    stream,
                    seq: seq_of(seq),
                    line,
                })
            })
            .collect()
    }

    fn exchanges(&self, filter: ExchangeFilter) -> Result<Vec<ExchangeRecord>, StoreError> {
        let (condition, param) = exchange_condition(filter);
        self.read_exchanges(
            format!("SELECT record FROM exchanges WHERE {condition} ORDER BY id"),
            param,
        )
    }

    fn exchange(&self, id: Uuid) -> Result<Option<ExchangeRecord>, StoreError> {
        Ok(self
            .read_exchanges(
                "SELECT record FROM exchanges WHERE id = $1".to_owned(),
                Some(id.to_string()),
            )?
            .pop())
    }

    fn exchange_summaries(
        &self,
        filter: ExchangeFilter,
        limit: Option<usize>,
    ) -> Result<Vec<ExchangeSummary>, StoreError> {
        // The newest `limit`, read newest first, then put oldest first.
        let mut summaries = self
            .summaries(filter, true, limit)?
            .into_iter()
            .collect::<Result<Vec<_>, _>>()?;
        summaries.reverse();
        Ok(summaries)
    }

    fn for_each_exchange_summary(
        &self,
        filter: ExchangeFilter,
        visit: &mut dyn FnMut(ExchangeSummary),
    ) -> Result<(), StoreError> {
        for summary in self.summaries(filter, false, None)? {
            visit(summary?);
        }
        Ok(())
    }

    fn exchange_count(&self, filter: ExchangeFilter) -> Result<u64, StoreError> {
        let (condition, param) = exchange_condition(filter);
        let sql = format!("SELECT COUNT(*) FROM exchanges WHERE {condition}");
        let count = self.connection.call(move |session| {
            session.with(|client, _| {
                let params: Vec<&(dyn ToSql + Sync)> =
                    param.iter().map(|p| p as &(dyn ToSql + Sync)).collect();
                let row = client
                    .query_one(sql.as_str(), &params)
                    .map_err(pg("counting exchanges"))?;
                column::<i64>(&row, 0, "counting exchanges")
            })
        })?;
        Ok(u64::try_from(count).unwrap_or(0))
    }

    fn resolve_exchange(&self, id_or_prefix: &str) -> Result<ExchangeRecord, StoreError> {
        let needle = IdPrefix::parse(id_or_prefix)
            .ok_or_else(|| StoreError::ExchangeNotFound(id_or_prefix.to_owned()))?;
        let digits = needle.digits().to_owned();
        let ids = self.connection.call(move |session| {
            session.with(|client, _| {
                let rows = client
                    .query(
                        "SELECT id FROM exchanges WHERE replace(id, '-', '') LIKE $1 || '%'",
                        &[&digits],
                    )
                    .map_err(pg("resolving an exchange prefix"))?;
                rows.iter()
                    .map(|row| column::<String>(row, 0, "resolving an exchange prefix"))
                    .collect::<Result<Vec<_>, _>>()
            })
        })?;
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
}

#[cfg(test)]
#[path = "postgres_tests.rs"]
mod tests;
