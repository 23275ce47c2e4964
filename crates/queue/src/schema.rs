//! The queue's tables and their migrations, in the style of the records store's PostgreSQL
//! schema: versioned steps recorded in a version table of the queue's own
//! (`queue_schema_version`, so the queue can share a database with the records), all applied in
//! one transaction under an advisory lock, a newer schema refused.

use postgres::Client;

use crate::error::{QueueError, pg};

/// The newest schema version this build writes and reads.
pub const SCHEMA_VERSION: i64 = 1;

/// The migrations, in order: version `n` turns a version `n - 1` database into version `n`.
pub const MIGRATIONS: &[(i64, &str)] = &[(1, MIGRATION_V1)];

const MIGRATION_V1: &str = r#"
CREATE TABLE queue_tasks (
    id               TEXT COLLATE "C" PRIMARY KEY,  -- UUID v7 (sorts by submit time)
    state            TEXT NOT NULL,                 -- queued | running | succeeded | failed | cancelled
    task             TEXT NOT NULL,                 -- the task file: TOML, the keys of `run --config`
    agent            TEXT NOT NULL,                 -- its agent (workers may take only some)
    max_attempts     INTEGER NOT NULL,
    attempts         INTEGER NOT NULL DEFAULT 0,    -- attempts started (each claim is one)
    released         INTEGER NOT NULL DEFAULT 0,    -- of them, handed back by a stopping worker
    lease_token      TEXT COLLATE "C",              -- the running attempt's fence
    lease_owner      TEXT,                          -- the worker holding the lease
    lease_expires_at TIMESTAMPTZ,
    run_id           TEXT COLLATE "C",              -- the latest attempt's run in the records
    outcome          TEXT,                          -- the run's outcome status, or why there is none
    result           TEXT,                          -- the run's outcome as JSON (its finish result too)
    submitted_at     TIMESTAMPTZ NOT NULL DEFAULT now(),
    updated_at       TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE INDEX queue_tasks_queued ON queue_tasks (submitted_at, id) WHERE state = 'queued';
CREATE INDEX queue_tasks_leased ON queue_tasks (lease_expires_at) WHERE state = 'running';
CREATE TABLE queue_attempts (
    task_id     TEXT COLLATE "C" NOT NULL REFERENCES queue_tasks (id) ON DELETE CASCADE,
    attempt     INTEGER NOT NULL,
    worker      TEXT NOT NULL,
    lease_token TEXT COLLATE "C" NOT NULL,
    state       TEXT NOT NULL,     -- running | succeeded | failed | cancelled | released | abandoned | refused
    run_id      TEXT COLLATE "C" NOT NULL,
    workdir     TEXT NOT NULL,     -- the attempt's fresh copy of the task's workdir
    outcome     TEXT,
    started_at  TIMESTAMPTZ NOT NULL DEFAULT now(),
    ended_at    TIMESTAMPTZ,
    PRIMARY KEY (task_id, attempt)
);
"#;

/// Advisory lock class of Switchyard's own locks (`"SYRD"`, as the records store's).
const LOCK_CLASS: i32 = 0x5359_5244;
/// The second key of the queue's migration lock (the records store's is 1).
const MIGRATION_LOCK: i32 = 2;

/// Applies the migrations the database lacks, in one transaction under the migration lock (so
/// concurrent openers of a new database wait for the first), and refuses a newer schema.
pub(crate) fn migrate(client: &mut Client) -> Result<(), QueueError> {
    let mut tx = client.transaction().map_err(pg("starting schema setup"))?;
    tx.execute(
        "SELECT pg_advisory_xact_lock($1, $2)",
        &[&LOCK_CLASS, &MIGRATION_LOCK],
    )
    .map_err(pg("taking the migration lock"))?;
    tx.batch_execute(
        "CREATE TABLE IF NOT EXISTS queue_schema_version (
             version    BIGINT PRIMARY KEY,
             applied_at TIMESTAMPTZ NOT NULL DEFAULT now()
         )",
    )
    .map_err(pg("creating queue_schema_version"))?;
    let row = tx
        .query_one("SELECT max(version) FROM queue_schema_version", &[])
        .map_err(pg("reading the schema version"))?;
    let found: i64 = row
        .try_get::<_, Option<i64>>(0)
        .map_err(pg("reading the schema version"))?
        .unwrap_or(0);
    if found > SCHEMA_VERSION {
        return Err(QueueError::UnsupportedSchema {
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
            "INSERT INTO queue_schema_version (version) VALUES ($1)",
            &[version],
        )
        .map_err(pg("recording the schema version"))?;
    }
    tx.commit().map_err(pg("committing the schema"))
}
