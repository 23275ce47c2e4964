//! A run queue on PostgreSQL: PostgreSQL is the queue (the pattern of River, Oban and
//! graphile-worker), no cluster of our own. Tasks are rows; a worker claims one with
//! `FOR UPDATE SKIP LOCKED` and holds it by a lease (`lease_expires_at`) that its heartbeat
//! renews. A claim of a task whose lease expired (its worker died) marks that attempt abandoned
//! and starts the next one, up to the task's `max_attempts`. Every result is fenced: it lands
//! only while the attempt's fresh lease token is still the task's and its lease has not expired,
//! so a task succeeds exactly once and a late result of a lost lease is refused.
//!
//! All SQL, no I/O beyond the database. The client is the synchronous `postgres` crate (the
//! records store's): call it from a thread of its own or `spawn_blocking`, never from an async
//! task. The worker that runs the claimed tasks is `switchyard_runner::worker`.

mod error;
pub mod schema;

use std::time::Duration;

use postgres::{Client, NoTls, Row, Transaction};
use serde::Serialize;
use uuid::Uuid;

pub use error::QueueError;
use error::pg;
pub use switchyard_records::PgUrl;

/// Attempts a task gets unless its submitter says otherwise.
pub const DEFAULT_MAX_ATTEMPTS: u32 = 3;
/// Connect timeout when the URL sets none.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Most expired tasks one claim gives up on (their attempts used up) before it returns.
const MAX_EXHAUSTED_PER_CLAIM: usize = 64;

/// Where a task is in its life. Only `queued` and `running` ever change.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskState {
    Queued,
    Running,
    Succeeded,
    Failed,
    Cancelled,
}

impl TaskState {
    /// The stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            TaskState::Queued => "queued",
            TaskState::Running => "running",
            TaskState::Succeeded => "succeeded",
            TaskState::Failed => "failed",
            TaskState::Cancelled => "cancelled",
        }
    }

    /// The state a stored name names.
    pub fn parse(text: &str) -> Result<Self, QueueError> {
        Ok(match text {
            "queued" => TaskState::Queued,
            "running" => TaskState::Running,
            "succeeded" => TaskState::Succeeded,
            "failed" => TaskState::Failed,
            "cancelled" => TaskState::Cancelled,
            other => return Err(QueueError::Corrupt(format!("the task state {other:?}"))),
        })
    }

    /// True once the task can change no more.
    pub fn is_final(self) -> bool {
        !matches!(self, TaskState::Queued | TaskState::Running)
    }
}

/// One attempt's hold on a task: the fence every write of the attempt carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lease {
    pub task: Uuid,
    /// 1 for the first attempt.
    pub attempt: i32,
    /// Fresh and random for each attempt.
    pub token: String,
}

/// A claimed task: what to run, under which lease.
#[derive(Debug, Clone)]
pub struct Claim {
    pub lease: Lease,
    /// The task file as submitted (TOML, the keys of `run --config`).
    pub task: String,
    /// The run id the attempt's run records under (the caller's, stored with the attempt).
    pub run_id: Uuid,
}

/// An attempt whose lease expired before it ended, marked abandoned by a claim.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Abandoned {
    pub task: Uuid,
    pub attempt: i32,
    /// Its run, to be marked abandoned in the records.
    pub run_id: Uuid,
    /// The task had no attempts left: it is now `failed` (outcome `abandoned`).
    pub exhausted: bool,
}

/// What one claim did.
#[derive(Debug, Clone, Default)]
pub struct Claimed {
    /// The task claimed, if any was ready.
    pub claim: Option<Claim>,
    /// Attempts found abandoned on the way.
    pub abandoned: Vec<Abandoned>,
}

/// How a claim's attempt starts: who runs it and where.
#[derive(Debug, Clone)]
pub struct ClaimRequest<'a> {
    /// The worker's name (shown in the attempt; any text).
    pub worker: &'a str,
    /// How long the lease lasts without a heartbeat.
    pub lease: Duration,
    /// The run id the attempt's run will record under.
    pub run_id: Uuid,
    /// The attempt's fresh copy of the task's workdir (kept with the attempt).
    pub workdir: &'a str,
    /// Only tasks of these agents (`None`: any).
    pub agents: Option<&'a [String]>,
}

/// How an attempt ended.
#[derive(Debug, Clone)]
pub struct Completion {
    /// `succeeded`, `failed` or `cancelled`.
    pub state: TaskState,
    /// The run's outcome status (`succeeded`, `failed`, `timed_out`, …), or why there is none.
    pub outcome: String,
    /// The run's outcome as JSON (with its structured `result`).
    pub result: Option<String>,
}

/// Whether a completion landed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fenced {
    /// The lease was still the task's: the result is the task's.
    Accepted,
    /// The lease was lost (expired, claimed again, or the task was cancelled): nothing changed
    /// but the attempt's own row.
    Refused,
}

/// What `cancel` did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CancelOutcome {
    /// Cancelled; the state it had (`queued`, or `running`: its worker stops the run when its
    /// next heartbeat finds the lease gone).
    Cancelled(TaskState),
    /// It had already ended.
    AlreadyFinal(TaskState),
    /// No such task.
    NotFound,
}

/// A task as `queue status --json` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TaskStatus {
    pub id: String,
    pub state: TaskState,
    pub attempts: i32,
    pub run_id: Option<String>,
    pub outcome: Option<String>,
}

/// A task with everything the queue keeps of it but the task file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskDetail {
    pub status: TaskStatus,
    pub max_attempts: i32,
    pub released: i32,
    pub lease_owner: Option<String>,
    /// The run's outcome as JSON.
    pub result: Option<String>,
}

/// One attempt at a task.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AttemptRow {
    pub attempt: i32,
    pub worker: String,
    /// `running`, `succeeded`, `failed`, `cancelled`, `released`, `abandoned` or `refused`.
    pub state: String,
    pub run_id: String,
    pub workdir: String,
    pub outcome: Option<String>,
}

/// A connection to the queue.
pub struct Queue {
    url: PgUrl,
    config: postgres::Config,
    client: Option<Client>,
}

impl std::fmt::Debug for Queue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Queue").field("url", &self.url).finish()
    }
}

impl Queue {
    /// Connects to the database at `url` and applies the queue's migrations.
    pub fn connect(url: &PgUrl) -> Result<Self, QueueError> {
        let mut config: postgres::Config = url.expose().parse().map_err(|_| {
            QueueError::Invalid("the PostgreSQL URL is not a valid connection string".into())
        })?;
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(CONNECT_TIMEOUT);
        }
        config.keepalives(true);
        if config.get_application_name().is_none() {
            config.application_name("switchyard-queue");
        }
        let mut queue = Queue {
            url: url.clone(),
            config,
            client: None,
        };
        schema::migrate(queue.client()?)?;
        Ok(queue)
    }

    /// The URL (its `Display` hides the password).
    pub fn url(&self) -> &PgUrl {
        &self.url
    }

    /// The live connection, connecting again when it was lost.
    fn client(&mut self) -> Result<&mut Client, QueueError> {
        if self.client.as_ref().is_some_and(Client::is_closed) {
            self.client = None;
        }
        let client = match self.client.take() {
            Some(client) => client,
            None => self.config.connect(NoTls).map_err(pg("connecting"))?,
        };
        Ok(self.client.insert(client))
    }

    /// Runs `step` in a transaction; a lost connection is dropped so the next call reconnects.
    fn transaction<T>(
        &mut self,
        context: &'static str,
        step: impl FnOnce(&mut Transaction<'_>) -> Result<T, QueueError>,
    ) -> Result<T, QueueError> {
        let result = (|| -> Result<T, QueueError> {
            let mut tx = self.client()?.transaction().map_err(pg(context))?;
            let value = step(&mut tx)?;
            tx.commit().map_err(pg(context))?;
            Ok(value)
        })();
        if let Err(error) = &result
            && error.is_unavailable()
        {
            self.client = None;
        }
        result
    }

    /// Queues `count` copies of `task` (a task file's text) for `agent`, each with up to
    /// `max_attempts` attempts; their ids, in submit order.
    pub fn submit(
        &mut self,
        task: &str,
        agent: &str,
        max_attempts: u32,
        count: u32,
    ) -> Result<Vec<Uuid>, QueueError> {
        let max_attempts = i32::try_from(max_attempts)
            .ok()
            .filter(|n| *n > 0)
            .ok_or_else(|| QueueError::Invalid("max_attempts must be 1 or more".into()))?;
        let ids: Vec<Uuid> = (0..count).map(|_| Uuid::now_v7()).collect();
        let texts: Vec<String> = ids.iter().map(Uuid::to_string).collect();
        let (task, agent) = (task.to_owned(), agent.to_owned());
        self.transaction("submitting tasks", |tx| {
            tx.execute(
                "INSERT INTO queue_tasks (id, state, task, agent, max_attempts)
                 SELECT id, 'queued', $2, $3, $4 FROM unnest($1::text[]) AS ids (id)",
                &[&texts, &task, &agent, &max_attempts],
            )
            .map_err(pg("submitting tasks"))?;
            Ok(())
        })?;
        Ok(ids)
    }

    /// Claims the oldest task that is queued or whose lease expired, with a fresh lease; marks
    /// the expired attempts it meets abandoned (failing their tasks when no attempt is left).
    pub fn claim(&mut self, request: &ClaimRequest<'_>) -> Result<Claimed, QueueError> {
        let token = Uuid::new_v4().simple().to_string();
        let lease_secs = request.lease.as_secs_f64();
        let run_id = request.run_id.to_string();
        let agents: Option<Vec<String>> = request.agents.map(<[String]>::to_vec);
        self.transaction("claiming a task", |tx| {
            let mut claimed = Claimed::default();
            for _ in 0..MAX_EXHAUSTED_PER_CLAIM {
                let Some(row) = tx
                    .query_opt(
                        "SELECT id, state, attempts, released, max_attempts, task FROM queue_tasks
                         WHERE (state = 'queued' OR (state = 'running' AND lease_expires_at < now()))
                           AND ($1::text[] IS NULL OR agent = ANY ($1))
                         ORDER BY submitted_at, id
                         LIMIT 1
                         FOR UPDATE SKIP LOCKED",
                        &[&agents],
                    )
                    .map_err(pg("finding a task to claim"))?
                else {
                    return Ok(claimed);
                };
                let id: String = get(&row, 0)?;
                let task_id = parse_uuid(&id)?;
                let state = TaskState::parse(&get::<String>(&row, 1)?)?;
                let attempts: i32 = get(&row, 2)?;
                let released: i32 = get(&row, 3)?;
                let max_attempts: i32 = get(&row, 4)?;
                if state == TaskState::Running {
                    let exhausted = attempts - released >= max_attempts;
                    let run = tx
                        .query_opt(
                            "UPDATE queue_attempts SET state = 'abandoned', ended_at = now()
                             WHERE task_id = $1 AND attempt = $2 AND state = 'running'
                             RETURNING run_id",
                            &[&id, &attempts],
                        )
                        .map_err(pg("abandoning an expired attempt"))?;
                    if let Some(run) = run {
                        claimed.abandoned.push(Abandoned {
                            task: task_id,
                            attempt: attempts,
                            run_id: parse_uuid(&get::<String>(&run, 0)?)?,
                            exhausted,
                        });
                    }
                    if exhausted {
                        tx.execute(
                            "UPDATE queue_tasks SET state = 'failed', outcome = 'abandoned',
                               lease_token = NULL, lease_owner = NULL, lease_expires_at = NULL,
                               updated_at = now()
                             WHERE id = $1",
                            &[&id],
                        )
                        .map_err(pg("failing an abandoned task"))?;
                        continue;
                    }
                }
                let attempt = attempts + 1;
                tx.execute(
                    "UPDATE queue_tasks SET state = 'running', attempts = $2, lease_token = $3,
                       lease_owner = $4, lease_expires_at = now() + make_interval(secs => $5),
                       run_id = $6, outcome = NULL, result = NULL, updated_at = now()
                     WHERE id = $1",
                    &[&id, &attempt, &token, &request.worker, &lease_secs, &run_id],
                )
                .map_err(pg("leasing a task"))?;
                tx.execute(
                    "INSERT INTO queue_attempts (task_id, attempt, worker, lease_token, state,
                       run_id, workdir)
                     VALUES ($1, $2, $3, $4, 'running', $5, $6)",
                    &[
                        &id,
                        &attempt,
                        &request.worker,
                        &token,
                        &run_id,
                        &request.workdir,
                    ],
                )
                .map_err(pg("starting an attempt"))?;
                claimed.claim = Some(Claim {
                    lease: Lease {
                        task: task_id,
                        attempt,
                        token: token.clone(),
                    },
                    task: get(&row, 5)?,
                    run_id: request.run_id,
                });
                return Ok(claimed);
            }
            Ok(claimed)
        })
    }

    /// Renews `leases` for another `lease` (one statement for all of them); the ones still held.
    /// A lease missing from the answer was lost: the task was cancelled, or it expired and was
    /// claimed again. Its run should stop; its result will be refused.
    pub fn heartbeat(
        &mut self,
        leases: &[Lease],
        lease: Duration,
    ) -> Result<Vec<Lease>, QueueError> {
        if leases.is_empty() {
            return Ok(Vec::new());
        }
        let ids: Vec<String> = leases.iter().map(|l| l.task.to_string()).collect();
        let tokens: Vec<String> = leases.iter().map(|l| l.token.clone()).collect();
        let secs = lease.as_secs_f64();
        let held: Vec<String> = self.transaction("renewing leases", |tx| {
            let rows = tx
                .query(
                    "UPDATE queue_tasks AS t
                     SET lease_expires_at = now() + make_interval(secs => $3)
                     FROM unnest($1::text[], $2::text[]) AS l (id, token)
                     WHERE t.id = l.id AND t.lease_token = l.token AND t.state = 'running'
                     RETURNING t.lease_token",
                    &[&ids, &tokens, &secs],
                )
                .map_err(pg("renewing leases"))?;
            rows.iter().map(|row| get(row, 0)).collect()
        })?;
        Ok(leases
            .iter()
            .filter(|l| held.contains(&l.token))
            .cloned()
            .collect())
    }

    /// Ends an attempt: the task takes `done` only while `lease` is its live, unexpired lease
    /// ([`Fenced::Accepted`]); otherwise the task is left as it is ([`Fenced::Refused`]) and
    /// only the attempt's own row says how it ended (`refused`, unless it was already marked).
    pub fn complete(&mut self, lease: &Lease, done: &Completion) -> Result<Fenced, QueueError> {
        if !done.state.is_final() {
            return Err(QueueError::Invalid(format!(
                "an attempt cannot end {}",
                done.state.as_str()
            )));
        }
        let id = lease.task.to_string();
        self.transaction("completing a task", |tx| {
            let landed = tx
                .execute(
                    "UPDATE queue_tasks SET state = $3, outcome = $4, result = $5,
                       lease_token = NULL, lease_owner = NULL, lease_expires_at = NULL,
                       updated_at = now()
                     WHERE id = $1 AND lease_token = $2 AND state = 'running'
                       AND lease_expires_at > now()",
                    &[
                        &id,
                        &lease.token,
                        &done.state.as_str(),
                        &done.outcome,
                        &done.result,
                    ],
                )
                .map_err(pg("completing a task"))?;
            let fenced = if landed == 1 {
                Fenced::Accepted
            } else {
                Fenced::Refused
            };
            let attempt_state = match fenced {
                Fenced::Accepted => done.state.as_str(),
                Fenced::Refused => "refused",
            };
            tx.execute(
                "UPDATE queue_attempts SET state = $3, outcome = $4, ended_at = now()
                 WHERE task_id = $1 AND attempt = $2 AND state = 'running'",
                &[&id, &lease.attempt, &attempt_state, &done.outcome],
            )
            .map_err(pg("ending an attempt"))?;
            Ok(fenced)
        })
    }

    /// Hands a task back to the queue (a worker stopping: its run was cancelled, not the task):
    /// queued again, this attempt not counted against `max_attempts`. False when the lease was
    /// already lost.
    pub fn release(&mut self, lease: &Lease) -> Result<bool, QueueError> {
        let id = lease.task.to_string();
        self.transaction("releasing a task", |tx| {
            let released = tx
                .execute(
                    "UPDATE queue_tasks SET state = 'queued', released = released + 1,
                       lease_token = NULL, lease_owner = NULL, lease_expires_at = NULL,
                       updated_at = now()
                     WHERE id = $1 AND lease_token = $2 AND state = 'running'",
                    &[&id, &lease.token],
                )
                .map_err(pg("releasing a task"))?;
            tx.execute(
                "UPDATE queue_attempts SET state = $3, ended_at = now()
                 WHERE task_id = $1 AND attempt = $2 AND state = 'running'",
                &[
                    &id,
                    &lease.attempt,
                    &if released == 1 { "released" } else { "refused" },
                ],
            )
            .map_err(pg("ending an attempt"))?;
            Ok(released == 1)
        })
    }

    /// Cancels a task that has not ended. A running one's lease goes with it, so its worker's
    /// next heartbeat stops the run and its result is refused.
    pub fn cancel(&mut self, task: Uuid) -> Result<CancelOutcome, QueueError> {
        let id = task.to_string();
        self.transaction("cancelling a task", |tx| {
            let Some(row) = tx
                .query_opt(
                    "SELECT state FROM queue_tasks WHERE id = $1 FOR UPDATE",
                    &[&id],
                )
                .map_err(pg("reading a task"))?
            else {
                return Ok(CancelOutcome::NotFound);
            };
            let state = TaskState::parse(&get::<String>(&row, 0)?)?;
            if state.is_final() {
                return Ok(CancelOutcome::AlreadyFinal(state));
            }
            tx.execute(
                "UPDATE queue_tasks SET state = 'cancelled', outcome = 'cancelled',
                   lease_token = NULL, lease_owner = NULL, lease_expires_at = NULL,
                   updated_at = now()
                 WHERE id = $1",
                &[&id],
            )
            .map_err(pg("cancelling a task"))?;
            tx.execute(
                "UPDATE queue_attempts SET state = 'cancelled', outcome = 'cancelled',
                   ended_at = now()
                 WHERE task_id = $1 AND state = 'running'",
                &[&id],
            )
            .map_err(pg("cancelling an attempt"))?;
            Ok(CancelOutcome::Cancelled(state))
        })
    }

    /// Every task, oldest first.
    pub fn status(&mut self) -> Result<Vec<TaskStatus>, QueueError> {
        self.transaction("reading tasks", |tx| {
            let rows = tx
                .query(
                    "SELECT id, state, attempts, run_id, outcome FROM queue_tasks
                     ORDER BY submitted_at, id",
                    &[],
                )
                .map_err(pg("reading tasks"))?;
            rows.iter().map(status_of).collect()
        })
    }

    /// One task, or `None`.
    pub fn task(&mut self, task: Uuid) -> Result<Option<TaskDetail>, QueueError> {
        let id = task.to_string();
        self.transaction("reading a task", |tx| {
            let row = tx
                .query_opt(
                    "SELECT id, state, attempts, run_id, outcome, max_attempts, released,
                       lease_owner, result
                     FROM queue_tasks WHERE id = $1",
                    &[&id],
                )
                .map_err(pg("reading a task"))?;
            row.map(|row| {
                Ok(TaskDetail {
                    status: status_of(&row)?,
                    max_attempts: get(&row, 5)?,
                    released: get(&row, 6)?,
                    lease_owner: get(&row, 7)?,
                    result: get(&row, 8)?,
                })
            })
            .transpose()
        })
    }

    /// The task whose id is `id_or_prefix` or uniquely starts with it.
    pub fn resolve(&mut self, id_or_prefix: &str) -> Result<Option<Uuid>, QueueError> {
        let prefix = id_or_prefix.trim().to_ascii_lowercase();
        if prefix.is_empty() || !prefix.chars().all(|c| c.is_ascii_hexdigit() || c == '-') {
            return Err(QueueError::Invalid(format!(
                "{id_or_prefix:?} is not a task id"
            )));
        }
        let ids: Vec<String> = self.transaction("finding a task", |tx| {
            let rows = tx
                .query(
                    "SELECT id FROM queue_tasks WHERE id LIKE $1 || '%' LIMIT 2",
                    &[&prefix],
                )
                .map_err(pg("finding a task"))?;
            rows.iter().map(|row| get(row, 0)).collect()
        })?;
        match ids.as_slice() {
            [] => Ok(None),
            [one] => parse_uuid(one).map(Some),
            _ => Err(QueueError::Invalid(format!(
                "{id_or_prefix:?} names more than one task"
            ))),
        }
    }

    /// A task's attempts, first first.
    pub fn attempts(&mut self, task: Uuid) -> Result<Vec<AttemptRow>, QueueError> {
        let id = task.to_string();
        self.transaction("reading attempts", |tx| {
            let rows = tx
                .query(
                    "SELECT attempt, worker, state, run_id, workdir, outcome FROM queue_attempts
                     WHERE task_id = $1 ORDER BY attempt",
                    &[&id],
                )
                .map_err(pg("reading attempts"))?;
            rows.iter()
                .map(|row| {
                    Ok(AttemptRow {
                        attempt: get(row, 0)?,
                        worker: get(row, 1)?,
                        state: get(row, 2)?,
                        run_id: get(row, 3)?,
                        workdir: get(row, 4)?,
                        outcome: get(row, 5)?,
                    })
                })
                .collect()
        })
    }
}

fn status_of(row: &Row) -> Result<TaskStatus, QueueError> {
    Ok(TaskStatus {
        id: get(row, 0)?,
        state: TaskState::parse(&get::<String>(row, 1)?)?,
        attempts: get(row, 2)?,
        run_id: get(row, 3)?,
        outcome: get(row, 4)?,
    })
}

fn get<'a, T: postgres::types::FromSql<'a>>(row: &'a Row, index: usize) -> Result<T, QueueError> {
    row.try_get(index).map_err(pg("reading a row"))
}

fn parse_uuid(text: &str) -> Result<Uuid, QueueError> {
    Uuid::parse_str(text).map_err(|_| QueueError::Corrupt(format!("the id {text:?}")))
}

#[cfg(test)]
#[path = "lib_tests.rs"]
mod tests;
