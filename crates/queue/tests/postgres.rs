//! The queue against a real PostgreSQL (testkit's throwaway cluster): leases, expiry and the
//! abandoned attempt, the fence that refuses a late result, cancel, release, and concurrent
//! claimers that never share a task.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use switchyard_queue::{CancelOutcome, ClaimRequest, Completion, Fenced, PgUrl, Queue, TaskState};
use switchyard_testkit::postgres::{TestDatabase, skip_message};
use uuid::Uuid;

fn database(test: &str) -> Option<(TestDatabase, PgUrl)> {
    match TestDatabase::create() {
        Ok(Some(db)) => {
            let url = PgUrl::parse(db.url()).unwrap();
            Some((db, url))
        }
        Ok(None) => {
            skip_message(test);
            None
        }
        Err(error) => panic!("{test}: {error}"),
    }
}

const TASK: &str = "agent = \"gemini-cli\"\nprompt = \"hello\"\n";

fn request(worker: &str, lease: Duration) -> (Uuid, ClaimRequest<'_>) {
    let run_id = Uuid::now_v7();
    (
        run_id,
        ClaimRequest {
            worker,
            lease,
            run_id,
            workdir: "/tmp/copy",
            agents: None,
        },
    )
}

fn succeeded() -> Completion {
    Completion {
        state: TaskState::Succeeded,
        outcome: "succeeded".into(),
        result: Some(r#"{"status":"succeeded"}"#.into()),
    }
}

#[test]
fn an_expired_lease_is_claimed_again_and_its_late_result_refused() {
    let Some((_db, url)) = database("an_expired_lease_is_claimed_again") else {
        return;
    };
    let mut queue = Queue::connect(&url).unwrap();
    let ids = queue.submit(TASK, "gemini-cli", 3, 1).unwrap();
    let (first_run, req) = request("w1", Duration::from_millis(300));
    let first = queue.claim(&req).unwrap().claim.unwrap();
    assert_eq!(first.lease.task, ids[0]);
    assert_eq!(first.lease.attempt, 1);
    assert_eq!(first.task, TASK);
    // Nothing else is ready while the lease holds.
    assert!(
        queue
            .claim(&request("w2", Duration::from_secs(5)).1)
            .unwrap()
            .claim
            .is_none()
    );
    // The heartbeat keeps it.
    let held = queue
        .heartbeat(
            std::slice::from_ref(&first.lease),
            Duration::from_millis(300),
        )
        .unwrap();
    assert_eq!(held, vec![first.lease.clone()]);
    std::thread::sleep(Duration::from_millis(500));
    // Expired: another worker takes it, and the first attempt is abandoned.
    let (second_run, req) = request("w2", Duration::from_secs(30));
    let claimed = queue.claim(&req).unwrap();
    let second = claimed.claim.unwrap();
    assert_eq!(second.lease.attempt, 2);
    assert_ne!(second.lease.token, first.lease.token);
    assert_eq!(claimed.abandoned.len(), 1);
    assert_eq!(claimed.abandoned[0].run_id, first_run);
    assert!(!claimed.abandoned[0].exhausted);
    // The first worker's heartbeat and result come late: refused.
    assert!(
        queue
            .heartbeat(std::slice::from_ref(&first.lease), Duration::from_secs(30))
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        queue.complete(&first.lease, &succeeded()).unwrap(),
        Fenced::Refused
    );
    // The second lands once; a repeat is refused.
    assert_eq!(
        queue.complete(&second.lease, &succeeded()).unwrap(),
        Fenced::Accepted
    );
    assert_eq!(
        queue.complete(&second.lease, &succeeded()).unwrap(),
        Fenced::Refused
    );
    let status = queue.status().unwrap();
    assert_eq!(status.len(), 1);
    assert_eq!(status[0].state, TaskState::Succeeded);
    assert_eq!(status[0].attempts, 2);
    assert_eq!(
        status[0].run_id.as_deref(),
        Some(second_run.to_string().as_str())
    );
    assert_eq!(status[0].outcome.as_deref(), Some("succeeded"));
    let attempts = queue.attempts(ids[0]).unwrap();
    let states: Vec<&str> = attempts.iter().map(|a| a.state.as_str()).collect();
    assert_eq!(states, ["abandoned", "succeeded"]);
    assert_eq!(attempts[0].workdir, "/tmp/copy");
    let detail = queue.task(ids[0]).unwrap().unwrap();
    assert_eq!(detail.result.as_deref(), Some(r#"{"status":"succeeded"}"#));
}

#[test]
fn a_result_after_the_lease_expired_is_refused_even_unclaimed() {
    let Some((_db, url)) = database("a_result_after_the_lease_expired") else {
        return;
    };
    let mut queue = Queue::connect(&url).unwrap();
    queue.submit(TASK, "gemini-cli", 1, 1).unwrap();
    let claim = queue
        .claim(&request("w1", Duration::from_millis(200)).1)
        .unwrap()
        .claim
        .unwrap();
    std::thread::sleep(Duration::from_millis(400));
    assert_eq!(
        queue.complete(&claim.lease, &succeeded()).unwrap(),
        Fenced::Refused
    );
    // Its only attempt is used up: the next claim fails the task instead of running it again.
    let claimed = queue
        .claim(&request("w2", Duration::from_secs(5)).1)
        .unwrap();
    assert!(claimed.claim.is_none());
    assert!(
        claimed.abandoned.is_empty(),
        "the refused attempt is no longer running"
    );
    let status = queue.status().unwrap();
    assert_eq!(status[0].state, TaskState::Failed);
    assert_eq!(status[0].outcome.as_deref(), Some("abandoned"));
}

#[test]
fn attempts_run_out_and_the_task_fails_abandoned() {
    let Some((_db, url)) = database("attempts_run_out") else {
        return;
    };
    let mut queue = Queue::connect(&url).unwrap();
    queue.submit(TASK, "gemini-cli", 2, 1).unwrap();
    for _ in 0..2 {
        assert!(
            queue
                .claim(&request("w", Duration::from_millis(100)).1)
                .unwrap()
                .claim
                .is_some()
        );
        std::thread::sleep(Duration::from_millis(250));
    }
    let claimed = queue
        .claim(&request("w", Duration::from_secs(5)).1)
        .unwrap();
    assert!(claimed.claim.is_none());
    assert_eq!(claimed.abandoned.len(), 1);
    assert!(claimed.abandoned[0].exhausted);
    let status = queue.status().unwrap();
    assert_eq!(status[0].state, TaskState::Failed);
    assert_eq!(status[0].outcome.as_deref(), Some("abandoned"));
}

#[test]
fn cancel_stops_a_queued_or_running_task_and_refuses_its_result() {
    let Some((_db, url)) = database("cancel") else {
        return;
    };
    let mut queue = Queue::connect(&url).unwrap();
    let ids = queue.submit(TASK, "gemini-cli", 3, 3).unwrap();
    let running = queue
        .claim(&request("w", Duration::from_secs(30)).1)
        .unwrap()
        .claim
        .unwrap();
    assert_eq!(running.lease.task, ids[0]);
    assert_eq!(
        queue.cancel(ids[0]).unwrap(),
        CancelOutcome::Cancelled(TaskState::Running)
    );
    assert_eq!(
        queue.cancel(ids[1]).unwrap(),
        CancelOutcome::Cancelled(TaskState::Queued)
    );
    assert_eq!(
        queue.cancel(ids[1]).unwrap(),
        CancelOutcome::AlreadyFinal(TaskState::Cancelled)
    );
    assert_eq!(
        queue.cancel(Uuid::now_v7()).unwrap(),
        CancelOutcome::NotFound
    );
    // The worker's heartbeat finds the lease gone; its result is refused.
    assert!(
        queue
            .heartbeat(
                std::slice::from_ref(&running.lease),
                Duration::from_secs(30)
            )
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        queue.complete(&running.lease, &succeeded()).unwrap(),
        Fenced::Refused
    );
    let next = queue
        .claim(&request("w", Duration::from_secs(30)).1)
        .unwrap()
        .claim
        .unwrap();
    assert_eq!(next.lease.task, ids[2], "cancelled tasks are never claimed");
    let states: Vec<TaskState> = queue.status().unwrap().iter().map(|t| t.state).collect();
    assert_eq!(
        states,
        [
            TaskState::Cancelled,
            TaskState::Cancelled,
            TaskState::Running
        ]
    );
    assert_eq!(queue.attempts(ids[0]).unwrap()[0].state, "cancelled");
    assert_eq!(
        queue.resolve(&ids[2].to_string()[..30]).unwrap(),
        Some(ids[2])
    );
}

#[test]
fn a_released_task_runs_again_without_using_an_attempt() {
    let Some((_db, url)) = database("release") else {
        return;
    };
    let mut queue = Queue::connect(&url).unwrap();
    let ids = queue.submit(TASK, "gemini-cli", 1, 1).unwrap();
    let claim = queue
        .claim(&request("w", Duration::from_secs(30)).1)
        .unwrap()
        .claim
        .unwrap();
    assert!(queue.release(&claim.lease).unwrap());
    assert!(!queue.release(&claim.lease).unwrap());
    let again = queue
        .claim(&request("w", Duration::from_secs(30)).1)
        .unwrap()
        .claim
        .unwrap();
    assert_eq!(again.lease.attempt, 2);
    assert_eq!(
        queue.complete(&again.lease, &succeeded()).unwrap(),
        Fenced::Accepted
    );
    let detail = queue.task(ids[0]).unwrap().unwrap();
    assert_eq!((detail.status.attempts, detail.released), (2, 1));
}

#[test]
fn concurrent_claimers_never_share_a_task() {
    let Some((_db, url)) = database("concurrent_claimers") else {
        return;
    };
    let mut queue = Queue::connect(&url).unwrap();
    let ids = queue.submit(TASK, "gemini-cli", 1, 60).unwrap();
    let workers: Vec<_> = (0..6)
        .map(|n| {
            let url = url.clone();
            std::thread::spawn(move || {
                let mut queue = Queue::connect(&url).unwrap();
                let name = format!("w{n}");
                let mut mine = Vec::new();
                loop {
                    let (_, req) = request(&name, Duration::from_secs(60));
                    let Some(claim) = queue.claim(&req).unwrap().claim else {
                        break;
                    };
                    assert_eq!(
                        queue.complete(&claim.lease, &succeeded()).unwrap(),
                        Fenced::Accepted
                    );
                    mine.push(claim.lease.task);
                }
                mine
            })
        })
        .collect();
    let mut all: Vec<Uuid> = workers
        .into_iter()
        .flat_map(|w| w.join().unwrap())
        .collect();
    all.sort();
    assert_eq!(all, ids, "every task claimed exactly once");
    assert!(
        queue
            .status()
            .unwrap()
            .iter()
            .all(|t| t.state == TaskState::Succeeded && t.attempts == 1)
    );
}
