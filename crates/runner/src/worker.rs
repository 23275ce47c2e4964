//! A queue worker (`switchyard worker`): claims tasks from the PostgreSQL run queue
//! ([`switchyard_queue`]) and runs each in-process through [`execute_with`], up to `concurrency`
//! at once, each attempt in a fresh copy of the task's workdir, its run recorded in the same
//! PostgreSQL records store as every other worker's.
//!
//! One heartbeat renews all of the worker's leases every lease/3; a lease it lost (the task was
//! cancelled, or it expired and went to another worker) cancels its run, whose result the queue
//! then refuses. Claims that meet abandoned attempts mark their runs abandoned in the records.
//! On shutdown (SIGTERM to the command) the worker stops claiming, lets running runs finish
//! within the grace period, cancels the rest through the runner's cancel path and releases their
//! tasks back to the queue.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use switchyard_events::{Envelope, OutcomeStatus, RunOutcome};
use switchyard_queue::{ClaimRequest, Completion, Fenced, Lease, PgUrl, Queue, TaskState};
use switchyard_records::PgStore;
use tokio::sync::watch;
use tokio::task::JoinSet;
use uuid::Uuid;

use crate::execute::{ExecuteOptions, RunObserver, execute_with};
use crate::settings::{Agent, RunSettings};

/// How a worker runs.
#[derive(Debug, Clone)]
pub struct WorkerConfig {
    /// The database of the queue and of the records.
    pub database: PgUrl,
    /// Runs at once.
    pub concurrency: usize,
    /// Only tasks of these agents (`None`: any).
    pub agents: Option<Vec<Agent>>,
    /// How long a lease lasts without a heartbeat.
    pub lease: Duration,
    /// How long running runs may take to finish once shutdown begins.
    pub grace: Duration,
    /// How often an idle worker looks for work.
    pub poll: Duration,
    /// Where the attempts' workdir copies go (one folder per run).
    pub workdirs: PathBuf,
    /// Keep each attempt's workdir copy after the attempt.
    pub keep_workdirs: bool,
    /// Stop once the queue has nothing to claim and no run is left.
    pub exit_when_idle: bool,
    /// The worker's name in the attempts (default: host and pid).
    pub name: String,
}

impl WorkerConfig {
    /// Defaults for `database`: 1 run at once, any agent, 30 s leases, 60 s grace, workdir copies
    /// under the temp directory.
    pub fn new(database: PgUrl) -> Self {
        let name = default_name();
        WorkerConfig {
            database,
            concurrency: 1,
            agents: None,
            lease: Duration::from_secs(30),
            grace: Duration::from_secs(60),
            poll: Duration::from_millis(500),
            workdirs: std::env::temp_dir()
                .join("switchyard-worker")
                .join(name.replace(['/', ' '], "_")),
            keep_workdirs: false,
            exit_when_idle: false,
            name,
        }
    }
}

/// `host:pid`.
fn default_name() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_else(|| "worker".to_owned());
    format!("{host}:{}", std::process::id())
}

/// What a worker did, once it stopped.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct WorkerReport {
    /// Attempts started.
    pub claimed: u64,
    /// Results the queue took.
    pub accepted: u64,
    /// Results the queue refused (lease lost).
    pub refused: u64,
    /// Tasks handed back at shutdown.
    pub released: u64,
    /// Abandoned runs marked in the records.
    pub abandoned_marked: u64,
}

/// Checks a task file's text (the keys of `run --config`) for the queue: it parses, and names a
/// workdir and a prompt. Its agent.
pub fn check_task(text: &str) -> Result<Agent> {
    let settings: RunSettings = toml::from_str(text).context("parsing the task")?;
    if settings.workdir.is_none() {
        bail!("the task names no workdir");
    }
    if settings.prompt.is_empty() {
        bail!("the task names no prompt");
    }
    if settings.records.is_some() {
        bail!("the task sets records; the worker's --records decides where runs are recorded");
    }
    Ok(settings.agent.unwrap_or(Agent::GeminiCli))
}

/// Why a run is being cancelled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stop {
    /// The lease is gone: the result will be refused.
    LeaseLost,
    /// The worker is stopping: the task goes back to the queue.
    Shutdown,
}

/// A run in progress.
struct Active {
    lease: Lease,
    cancel: watch::Sender<bool>,
    stop: Option<Stop>,
}

type ActiveRuns = Arc<Mutex<HashMap<Uuid, Active>>>;

/// The queue connection, used from the blocking pool (its client may not run on an async task).
#[derive(Clone)]
struct Db(Arc<Mutex<Queue>>);

impl Db {
    async fn call<T: Send + 'static>(
        &self,
        step: impl FnOnce(&mut Queue) -> Result<T, switchyard_queue::QueueError> + Send + 'static,
    ) -> Result<T> {
        let queue = self.0.clone();
        tokio::task::spawn_blocking(move || {
            let mut queue = queue.lock().unwrap_or_else(PoisonError::into_inner);
            step(&mut queue)
        })
        .await
        .context("the queue thread")?
        .map_err(anyhow::Error::from)
    }
}

/// The records store, for marking abandoned runs (also from the blocking pool).
#[derive(Clone)]
struct Records(Arc<Mutex<PgStore>>);

impl Records {
    async fn mark_abandoned(&self, run: Uuid) -> Result<bool> {
        let store = self.0.clone();
        tokio::task::spawn_blocking(move || {
            store
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .mark_run_abandoned(run)
        })
        .await
        .context("the records thread")?
        .map_err(anyhow::Error::from)
    }
}

/// Runs the worker until `shutdown` holds `true` (then stops as the module says), or, with
/// `exit_when_idle`, until the queue is empty. Call it on a multi-threaded runtime: its runs
/// share one thread (a run's future is not `Send`), their gateways and guests' pipes the rest.
pub async fn work(config: WorkerConfig, shutdown: watch::Receiver<bool>) -> Result<WorkerReport> {
    tokio::task::LocalSet::new()
        .run_until(work_here(config, shutdown))
        .await
}

async fn work_here(
    config: WorkerConfig,
    mut shutdown: watch::Receiver<bool>,
) -> Result<WorkerReport> {
    if config.concurrency == 0 {
        bail!("--concurrency must be 1 or more");
    }
    std::fs::create_dir_all(&config.workdirs)
        .with_context(|| format!("creating {}", config.workdirs.display()))?;
    let database = config.database.clone();
    let (queue, store) = tokio::task::spawn_blocking(move || -> Result<(Queue, PgStore)> {
        let queue = Queue::connect(&database)
            .with_context(|| format!("opening the queue at {database}"))?;
        let store = PgStore::open(&database)
            .with_context(|| format!("opening the records at {database}"))?;
        Ok((queue, store))
    })
    .await
    .context("connecting")??;
    let db = Db(Arc::new(Mutex::new(queue)));
    let records = Records(Arc::new(Mutex::new(store)));
    let config = Arc::new(config);
    let active: ActiveRuns = Arc::default();
    let report = Arc::new(Mutex::new(WorkerReport::default()));
    let heartbeat = tokio::spawn(heartbeats(db.clone(), active.clone(), config.lease));
    let agents: Option<Vec<String>> = config
        .agents
        .as_ref()
        .map(|agents| agents.iter().map(|a| a.name().to_owned()).collect());
    let mut runs = JoinSet::new();
    eprintln!(
        "switchyard worker {}: {} at once, queue {}",
        config.name, config.concurrency, config.database
    );
    while !*shutdown.borrow() {
        while runs.try_join_next().is_some() {}
        let mut idle = true;
        let mut unanswered = false;
        if runs.len() < config.concurrency {
            let run_id = Uuid::now_v7();
            let workdir = config.workdirs.join(run_id.to_string());
            let (name, lease, agents) = (config.name.clone(), config.lease, agents.clone());
            let workdir_text = workdir.to_string_lossy().into_owned();
            let claimed = db
                .call(move |queue| {
                    queue.claim(&ClaimRequest {
                        worker: &name,
                        lease,
                        run_id,
                        workdir: &workdir_text,
                        agents: agents.as_deref(),
                    })
                })
                .await;
            match claimed {
                Ok(claimed) => {
                    for abandoned in claimed.abandoned {
                        eprintln!(
                            "switchyard worker {}: task {} attempt {} was abandoned (run {})",
                            config.name, abandoned.task, abandoned.attempt, abandoned.run_id
                        );
                        match records.mark_abandoned(abandoned.run_id).await {
                            Ok(true) => lock(&report).abandoned_marked += 1,
                            Ok(false) => {}
                            Err(e) => {
                                eprintln!("switchyard worker: marking a run abandoned: {e:#}")
                            }
                        }
                    }
                    if let Some(claim) = claimed.claim {
                        idle = false;
                        lock(&report).claimed += 1;
                        let (cancel, cancelled) = watch::channel(false);
                        lock(&active).insert(
                            claim.lease.task,
                            Active {
                                lease: claim.lease.clone(),
                                cancel,
                                stop: None,
                            },
                        );
                        runs.spawn_local(attempt(
                            config.clone(),
                            db.clone(),
                            active.clone(),
                            report.clone(),
                            claim,
                            workdir,
                            cancelled,
                        ));
                    }
                }
                Err(e) => {
                    // Not knowing is not an empty queue: `exit_when_idle` waits for an answer.
                    unanswered = true;
                    eprintln!("switchyard worker {}: claiming: {e:#}", config.name);
                }
            }
        } else {
            idle = false;
        }
        if idle && !unanswered && runs.is_empty() && config.exit_when_idle {
            break;
        }
        if !idle && runs.len() < config.concurrency {
            // Claimed one and a slot is free: look again at once.
            continue;
        }
        tokio::select! {
            _ = tokio::time::sleep(config.poll) => {}
            _ = shutdown.changed() => {}
            Some(_) = runs.join_next(), if !runs.is_empty() => {}
        }
    }
    if !runs.is_empty() {
        eprintln!(
            "switchyard worker {}: stopping; {} run(s) have {:?} to finish",
            config.name,
            runs.len(),
            config.grace
        );
        let drained = tokio::time::timeout(config.grace, async {
            while runs.join_next().await.is_some() {}
        })
        .await;
        if drained.is_err() {
            for run in lock(&active).values_mut() {
                run.stop.get_or_insert(Stop::Shutdown);
                let _ = run.cancel.send(true);
            }
            while runs.join_next().await.is_some() {}
        }
    }
    heartbeat.abort();
    let _ = heartbeat.await;
    // The clients block when they close: off the runtime.
    let _ = tokio::task::spawn_blocking(move || drop((db, records))).await;
    let report = lock(&report).clone();
    eprintln!(
        "switchyard worker {}: stopped ({} claimed, {} done, {} refused, {} released)",
        config.name, report.claimed, report.accepted, report.refused, report.released
    );
    Ok(report)
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Renews every active lease each lease/3; cancels the runs whose lease is lost (or that could
/// not be renewed for a whole lease).
async fn heartbeats(db: Db, active: ActiveRuns, lease: Duration) {
    let every = lease / 3;
    let mut renewed = Instant::now();
    loop {
        tokio::time::sleep(every).await;
        let leases: Vec<Lease> = lock(&active).values().map(|a| a.lease.clone()).collect();
        if leases.is_empty() {
            renewed = Instant::now();
            continue;
        }
        let asked = leases.clone();
        match db.call(move |queue| queue.heartbeat(&asked, lease)).await {
            Ok(held) => {
                renewed = Instant::now();
                let mut active = lock(&active);
                for lost in leases.iter().filter(|l| !held.contains(l)) {
                    if let Some(run) = active.get_mut(&lost.task) {
                        eprintln!(
                            "switchyard worker: task {} lost its lease (cancelled or expired); \
                             stopping its run",
                            lost.task
                        );
                        run.stop = Some(Stop::LeaseLost);
                        let _ = run.cancel.send(true);
                    }
                }
            }
            Err(e) => {
                eprintln!("switchyard worker: heartbeat: {e:#}");
                if renewed.elapsed() >= lease {
                    // The leases are gone by now: whatever the runs produce will be refused.
                    for run in lock(&active).values_mut() {
                        run.stop = Some(Stop::LeaseLost);
                        let _ = run.cancel.send(true);
                    }
                }
            }
        }
    }
}

/// Prints nothing: a worker's runs are seen in the records.
struct Quiet;

impl RunObserver for Quiet {
    fn event(&mut self, _envelope: &Envelope) {}
}

/// One attempt: the workdir copied, the run executed, its result handed to the queue (or the
/// task released), the copy removed.
async fn attempt(
    config: Arc<WorkerConfig>,
    db: Db,
    active: ActiveRuns,
    report: Arc<Mutex<WorkerReport>>,
    claim: switchyard_queue::Claim,
    workdir: PathBuf,
    cancelled: watch::Receiver<bool>,
) {
    let lease = claim.lease.clone();
    let started = Instant::now();
    let ran = run_task(&config, &claim, &workdir, cancelled).await;
    let stop = lock(&active).remove(&lease.task).and_then(|a| a.stop);
    if !config.keep_workdirs {
        let _ = std::fs::remove_dir_all(&workdir);
    }
    if stop == Some(Stop::Shutdown) {
        let kept = lease.clone();
        match db.call(move |queue| queue.release(&kept)).await {
            Ok(true) => lock(&report).released += 1,
            Ok(false) => {}
            Err(e) => eprintln!("switchyard worker: releasing task {}: {e:#}", lease.task),
        }
        eprintln!(
            "switchyard worker {}: task {} released",
            config.name, lease.task
        );
        return;
    }
    let completion = match &ran {
        Ok(outcome) => Completion {
            state: match outcome.status {
                OutcomeStatus::Succeeded => TaskState::Succeeded,
                _ => TaskState::Failed,
            },
            outcome: status_name(outcome),
            result: serde_json::to_string(outcome).ok(),
        },
        Err(e) => Completion {
            state: TaskState::Failed,
            outcome: "error".to_owned(),
            result: Some(serde_json::json!({ "error": format!("{e:#}") }).to_string()),
        },
    };
    let summary = completion.outcome.clone();
    let fenced = {
        let lease = lease.clone();
        db.call(move |queue| queue.complete(&lease, &completion))
            .await
    };
    let verdict = match fenced {
        Ok(Fenced::Accepted) => {
            lock(&report).accepted += 1;
            "done"
        }
        Ok(Fenced::Refused) => {
            lock(&report).refused += 1;
            "refused (lease lost)"
        }
        Err(e) => {
            eprintln!("switchyard worker: completing task {}: {e:#}", lease.task);
            "not recorded"
        }
    };
    eprintln!(
        "switchyard worker {}: task {} attempt {} run {}: {summary} in {:.1}s, {verdict}",
        config.name,
        lease.task,
        lease.attempt,
        claim.run_id,
        started.elapsed().as_secs_f64()
    );
}

/// The outcome's status as its JSON names it (`succeeded`, `timed_out`, …).
fn status_name(outcome: &RunOutcome) -> String {
    serde_json::to_value(outcome.status)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_else(|| "unknown".to_owned())
}

/// The task's run, in `workdir` (a fresh copy of the task's), recorded in the worker's records.
async fn run_task(
    config: &WorkerConfig,
    claim: &switchyard_queue::Claim,
    workdir: &Path,
    cancelled: watch::Receiver<bool>,
) -> Result<RunOutcome> {
    let mut settings: RunSettings = toml::from_str(&claim.task).context("parsing the task")?;
    let source = settings
        .workdir
        .clone()
        .context("the task names no workdir")?;
    let (from, to) = (source.clone(), workdir.to_path_buf());
    tokio::task::spawn_blocking(move || copy_tree(&from, &to))
        .await
        .context("copying the workdir")?
        .with_context(|| format!("copying the workdir {}", source.display()))?;
    settings.workdir = Some(workdir.to_path_buf());
    settings.records = Some(PathBuf::from(config.database.expose()));
    settings.config = None;
    settings.resume = None;
    settings.prompts_stdin = false;
    let resolved = settings.resolve().context("the task's settings")?;
    let entry = crate::resolve::verify_install(&resolved).map_err(|r| anyhow::anyhow!("{r}"))?;
    let executed = execute_with(
        resolved,
        entry,
        &mut Quiet,
        ExecuteOptions {
            run_id: Some(claim.run_id),
            cancel: Some(cancelled),
        },
    )
    .await?;
    Ok(executed.outcome)
}

/// Copies the tree at `from` to `to` (created): files with their permissions, symlinks as
/// symlinks (never followed), directories recursively.
pub fn copy_tree(from: &Path, to: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let kind = entry.file_type()?;
        let target = to.join(entry.file_name());
        if kind.is_symlink() {
            std::os::unix::fs::symlink(std::fs::read_link(entry.path())?, &target)?;
        } else if kind.is_dir() {
            copy_tree(&entry.path(), &target)?;
        } else if kind.is_file() {
            std::fs::copy(entry.path(), &target)?;
        }
    }
    Ok(())
}

#[cfg(test)]
#[path = "worker_tests.rs"]
mod tests;
