//! `switchyard queue`: tasks for the workers of a PostgreSQL run queue (`submit`, `status`,
//! `cancel`). A task file holds the keys of `run --config`; the workers run it (see
//! `switchyard worker` and `switchyard_runner::worker`).

use std::path::PathBuf;

use anyhow::{Context, Result};
use switchyard_queue::{CancelOutcome, PgUrl, Queue, TaskState};

/// `switchyard queue` subcommands.
#[derive(Debug, clap::Args)]
pub struct QueueArgs {
    #[command(subcommand)]
    pub command: QueueCommand,
}

/// What to do with the queue.
#[derive(Debug, clap::Subcommand)]
pub enum QueueCommand {
    /// Queue a task file (the keys of `run --config`) and print the new tasks' ids.
    Submit(SubmitArgs),
    /// Every task with its state, attempts, run and outcome.
    Status(StatusArgs),
    /// Cancel a task (a running one's worker stops its run).
    Cancel(CancelArgs),
}

/// Where the queue is.
#[derive(Debug, clap::Args)]
pub struct Database {
    /// The queue's PostgreSQL database (the same `postgres://` URL as the workers' records).
    #[arg(long, env = "SWITCHYARD_RECORDS", hide_env_values = true)]
    pub records: String,
}

/// `switchyard queue submit` flags.
#[derive(Debug, clap::Args)]
pub struct SubmitArgs {
    #[command(flatten)]
    pub database: Database,
    /// The task file: TOML with the keys of `run --config` (workdir and prompt required; paths
    /// as the workers see them).
    pub task: PathBuf,
    /// Queue this many copies.
    #[arg(long, default_value_t = 1)]
    pub count: u32,
    /// Attempts each task gets when its workers die under it.
    #[arg(long, default_value_t = switchyard_queue::DEFAULT_MAX_ATTEMPTS)]
    pub max_attempts: u32,
}

/// `switchyard queue status` flags.
#[derive(Debug, clap::Args)]
pub struct StatusArgs {
    #[command(flatten)]
    pub database: Database,
    /// `{"tasks":[{"id","state","attempts","run_id","outcome"}]}` on stdout.
    #[arg(long)]
    pub json: bool,
}

/// `switchyard queue cancel` flags.
#[derive(Debug, clap::Args)]
pub struct CancelArgs {
    #[command(flatten)]
    pub database: Database,
    /// The task's id (or a unique prefix of it).
    pub id: String,
}

fn url(database: &Database) -> Result<PgUrl> {
    PgUrl::parse(&database.records).context("--records must be a postgres:// URL")
}

/// Runs `step` on a queue connection, off the async runtime (the client is synchronous).
async fn with_queue<T: Send + 'static>(
    database: &Database,
    step: impl FnOnce(&mut Queue) -> Result<T> + Send + 'static,
) -> Result<T> {
    let url = url(database)?;
    tokio::task::spawn_blocking(move || {
        let mut queue =
            Queue::connect(&url).with_context(|| format!("opening the queue at {url}"))?;
        step(&mut queue)
    })
    .await
    .context("the queue thread")?
}

/// Entry point: the exit code.
pub async fn run(args: QueueArgs) -> Result<u8> {
    match args.command {
        QueueCommand::Submit(args) => {
            let text = std::fs::read_to_string(&args.task)
                .with_context(|| format!("reading {}", args.task.display()))?;
            let agent = match switchyard_runner::worker::check_task(&text) {
                Ok(agent) => agent,
                Err(e) => {
                    eprintln!("switchyard: invalid task {}: {e:#}", args.task.display());
                    return Ok(super::EXIT_CONFIG);
                }
            };
            let (count, max_attempts) = (args.count, args.max_attempts);
            let ids = with_queue(&args.database, move |queue| {
                Ok(queue.submit(&text, agent.name(), max_attempts, count)?)
            })
            .await?;
            for id in ids {
                println!("{id}");
            }
            Ok(0)
        }
        QueueCommand::Status(args) => {
            let tasks = with_queue(&args.database, |queue| Ok(queue.status()?)).await?;
            if args.json {
                println!("{}", serde_json::json!({ "tasks": tasks }));
            } else {
                println!(
                    "{:<36}  {:<9}  {:>8}  {:<36}  outcome",
                    "id", "state", "attempts", "run"
                );
                for t in tasks {
                    println!(
                        "{:<36}  {:<9}  {:>8}  {:<36}  {}",
                        t.id,
                        t.state.as_str(),
                        t.attempts,
                        t.run_id.as_deref().unwrap_or("-"),
                        t.outcome.as_deref().unwrap_or("-")
                    );
                }
            }
            Ok(0)
        }
        QueueCommand::Cancel(args) => {
            let given = args.id.clone();
            let done = with_queue(&args.database, move |queue| {
                let Some(id) = queue.resolve(&given)? else {
                    return Ok(None);
                };
                Ok(Some((id, queue.cancel(id)?)))
            })
            .await?;
            match done {
                None | Some((_, CancelOutcome::NotFound)) => {
                    eprintln!("switchyard: no task {}", args.id);
                    Ok(super::EXIT_CONFIG)
                }
                Some((id, CancelOutcome::Cancelled(TaskState::Running))) => {
                    println!("{id} cancelled (its worker stops the run)");
                    Ok(0)
                }
                Some((id, CancelOutcome::Cancelled(_))) => {
                    println!("{id} cancelled");
                    Ok(0)
                }
                Some((id, CancelOutcome::AlreadyFinal(state))) => {
                    println!("{id} already {}", state.as_str());
                    Ok(0)
                }
            }
        }
    }
}
