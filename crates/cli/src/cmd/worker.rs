//! `switchyard worker`: runs the tasks of a PostgreSQL run queue, `--concurrency` at once, on
//! any number of machines (`switchyard_runner::worker`). SIGTERM or SIGINT stops it gently:
//! no new claims, running runs get `--grace-secs` to finish, the rest are cancelled and their
//! tasks go back to the queue.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result};
use switchyard_queue::PgUrl;
use switchyard_runner::Agent;
use switchyard_runner::worker::{WorkerConfig, work};

/// `switchyard worker` flags.
#[derive(Debug, clap::Args)]
pub struct WorkerArgs {
    /// The queue's and the records' PostgreSQL database (`postgres://…`).
    #[arg(long, env = "SWITCHYARD_RECORDS", hide_env_values = true)]
    pub records: String,
    /// Runs at once.
    #[arg(long, default_value_t = 1)]
    pub concurrency: usize,
    /// Only tasks of these agents (comma-separated; default: any).
    #[arg(long, value_enum, value_delimiter = ',')]
    pub agents: Vec<Agent>,
    /// Seconds a lease lasts without a heartbeat (renewed every third of it).
    #[arg(long, default_value_t = 30)]
    pub lease_secs: u64,
    /// Seconds running runs get to finish after SIGTERM before they are cancelled.
    #[arg(long, default_value_t = 60)]
    pub grace_secs: u64,
    /// Milliseconds between looks at an empty queue.
    #[arg(long, default_value_t = 500)]
    pub poll_ms: u64,
    /// Where the attempts' workdir copies go (default: under the temp directory).
    #[arg(long)]
    pub workdirs: Option<PathBuf>,
    /// Keep each attempt's workdir copy (its path is in the attempt's row).
    #[arg(long)]
    pub keep_workdirs: bool,
    /// Stop once the queue has nothing to claim and no run is left.
    #[arg(long)]
    pub exit_when_idle: bool,
    /// The worker's name in the attempts (default: host:pid).
    #[arg(long)]
    pub name: Option<String>,
}

/// Entry point: the exit code.
pub async fn run(args: WorkerArgs) -> Result<u8> {
    let url = PgUrl::parse(&args.records).context("--records must be a postgres:// URL")?;
    let mut config = WorkerConfig::new(url);
    config.concurrency = args.concurrency;
    config.agents = (!args.agents.is_empty()).then_some(args.agents);
    config.lease = Duration::from_secs(args.lease_secs.max(1));
    config.grace = Duration::from_secs(args.grace_secs);
    config.poll = Duration::from_millis(args.poll_ms.max(10));
    config.keep_workdirs = args.keep_workdirs;
    config.exit_when_idle = args.exit_when_idle;
    if let Some(name) = args.name {
        config.name = name;
    }
    if let Some(dir) = args.workdirs {
        config.workdirs = dir;
    }
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let signals = tokio::spawn(async move {
        use tokio::signal::unix::{SignalKind, signal};
        let (Ok(mut int), Ok(mut term)) = (
            signal(SignalKind::interrupt()),
            signal(SignalKind::terminate()),
        ) else {
            return;
        };
        tokio::select! { _ = int.recv() => {}, _ = term.recv() => {} }
        let _ = stop.send(true);
        // Later signals are absorbed: the worker is already stopping within its grace period.
        loop {
            tokio::select! { _ = int.recv() => {}, _ = term.recv() => {} }
        }
    });
    let report = work(config, stopped).await;
    signals.abort();
    report.map(|_| 0)
}
