//! `switchyard-dev bench queue`: the PostgreSQL run queue's throughput with one worker against
//! three (a ratio, measured in the same run), and the database writes each run costs. Every
//! task is a real run of the pinned Gemini CLI (headless) through the embedded gateway to a
//! scripted upstream on 127.0.0.1; the queue and the records share a throwaway PostgreSQL
//! cluster (testkit). Writes are `pg_stat_database` deltas (commits, rows inserted and updated)
//! of the three-worker phase, over its runs.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use switchyard_queue::{PgUrl, Queue};
use switchyard_runner::worker::{WorkerConfig, work};
use switchyard_testkit::chat_upstream::{ChatUpstream, Reply, Script};
use switchyard_testkit::postgres::TestDatabase;

/// What the bench measured.
#[derive(Debug, Clone)]
pub struct QueueBench {
    pub tasks: u32,
    pub concurrency: usize,
    pub one_worker: Duration,
    pub three_workers: Duration,
    /// Transactions committed per run (three-worker phase, queue and records together).
    pub commits_per_run: f64,
    pub rows_inserted_per_run: f64,
    pub rows_updated_per_run: f64,
}

impl QueueBench {
    /// Runs per second with one worker and with three.
    pub fn throughput(&self) -> (f64, f64) {
        let rate = |d: Duration| f64::from(self.tasks) / d.as_secs_f64();
        (rate(self.one_worker), rate(self.three_workers))
    }
}

fn task_text(workdir: &Path, upstream: &str, gemini: &Path) -> String {
    format!(
        "agent = \"gemini-cli\"\nworkdir = {:?}\nprompt = \"What is the secret word?\"\n\
         upstream_url = \"{upstream}/v1\"\nupstream_model = \"scripted-model\"\n\
         gemini_binary = {:?}\ntimeout = 120\n",
        workdir.display().to_string(),
        gemini.display().to_string()
    )
}

/// `pg_stat_database` counters of the database: commits, inserted, updated.
fn counters(url: &str) -> Result<(i64, i64, i64), String> {
    let url = url.to_owned();
    std::thread::spawn(move || {
        let mut client = postgres::Client::connect(&url, postgres::NoTls)
            .map_err(|e| format!("connecting: {e}"))?;
        let row = client
            .query_one(
                "SELECT xact_commit, tup_inserted, tup_updated FROM pg_stat_database
                 WHERE datname = current_database()",
                &[],
            )
            .map_err(|e| format!("reading pg_stat_database: {e}"))?;
        Ok((row.get(0), row.get(1), row.get(2)))
    })
    .join()
    .map_err(|_| "the stats thread panicked".to_owned())?
}

/// Submits `tasks` tasks to a fresh database and runs them on `workers` in-process workers of
/// `concurrency` each until the queue is empty; the wall time and the stats deltas.
async fn phase(
    db: &TestDatabase,
    task: &str,
    tasks: u32,
    workers: usize,
    concurrency: usize,
    scratch: &Path,
) -> Result<(Duration, (i64, i64, i64)), String> {
    let url = db.another()?;
    let pg = PgUrl::parse(&url).map_err(|e| e.to_string())?;
    let (task, submit_url) = (task.to_owned(), pg.clone());
    tokio::task::spawn_blocking(move || -> Result<(), String> {
        let mut queue = Queue::connect(&submit_url).map_err(|e| e.to_string())?;
        queue
            .submit(&task, "gemini-cli", 3, tasks)
            .map_err(|e| e.to_string())?;
        Ok(())
    })
    .await
    .map_err(|e| e.to_string())??;
    // Records schema in place before timing (the first worker would create it).
    let records = pg.clone();
    tokio::task::spawn_blocking(move || switchyard_records::PgStore::open(&records).map(drop))
        .await
        .map_err(|e| e.to_string())?
        .map_err(|e| e.to_string())?;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let before = counters(&url)?;
    let started = Instant::now();
    let (_stop, stopped) = tokio::sync::watch::channel(false);
    let runs = (0..workers).map(|n| {
        let mut config = WorkerConfig::new(pg.clone());
        config.concurrency = concurrency;
        config.exit_when_idle = true;
        config.poll = Duration::from_millis(100);
        config.name = format!("bench-{n}");
        config.workdirs = scratch.join(format!("w{workers}-{n}"));
        work(config, stopped.clone())
    });
    for report in futures_util::future::join_all(runs).await {
        report.map_err(|e| format!("{e:#}"))?;
    }
    let elapsed = started.elapsed();
    // Statistics reach pg_stat_database within a second.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let after = counters(&url)?;
    Ok((
        elapsed,
        (after.0 - before.0, after.1 - before.1, after.2 - before.2),
    ))
}

/// Runs the bench: `tasks` tasks on 1 worker, then on 3, each at `concurrency`.
pub async fn run(gemini: PathBuf, tasks: u32, concurrency: usize) -> Result<QueueBench, String> {
    let db = TestDatabase::create()?.ok_or("no PostgreSQL binaries (initdb, pg_ctl) here")?;
    let upstream = ChatUpstream::start(
        Script::always(Reply::text_stream(["The secret word is quokka."])).record_bodies(false),
    )
    .await
    .map_err(|e| e.to_string())?;
    let scratch = tempfile::tempdir().map_err(|e| e.to_string())?;
    let workdir = scratch.path().join("workspace");
    std::fs::create_dir_all(&workdir).map_err(|e| e.to_string())?;
    std::fs::write(workdir.join("notes.txt"), "The secret word is quokka.\n")
        .map_err(|e| e.to_string())?;
    let task = task_text(&workdir, &upstream.base_url(), &gemini);
    let (one_worker, _) = phase(&db, &task, tasks, 1, concurrency, scratch.path()).await?;
    let (three_workers, (commits, inserted, updated)) =
        phase(&db, &task, tasks, 3, concurrency, scratch.path()).await?;
    let per_run = |n: i64| n as f64 / f64::from(tasks);
    Ok(QueueBench {
        tasks,
        concurrency,
        one_worker,
        three_workers,
        commits_per_run: per_run(commits),
        rows_inserted_per_run: per_run(inserted),
        rows_updated_per_run: per_run(updated),
    })
}
