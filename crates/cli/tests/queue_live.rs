//! Live tests of the run queue: real `switchyard worker` processes run the pinned Gemini CLI
//! (headless) against scripted upstreams on 127.0.0.1, with the queue and the records in a real
//! throwaway PostgreSQL (testkit's PgCluster). A SIGKILLed worker's task is re-run by another
//! and its run marked abandoned; a cancelled task's run stops; the status JSON has its shape;
//! and a load of 24 tasks on three workers, one SIGKILLed mid-run, all succeed exactly once.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use switchyard_queue::{PgUrl, Queue, TaskState};
use switchyard_records::{PgStore, RecordStore, RunState};
use switchyard_testkit::chat_upstream::{ChatUpstream, Reply, Script, Step, Times};
use switchyard_testkit::postgres::{TestDatabase, skip_message};

use common::{BIN, sealed_prefix};

fn database(test: &str) -> Option<TestDatabase> {
    match TestDatabase::create() {
        Ok(Some(db)) => Some(db),
        Ok(None) => {
            skip_message(test);
            None
        }
        Err(error) => panic!("{test}: {error}"),
    }
}

/// A workspace with the notes the prompt asks about.
fn workspace() -> tempfile::TempDir {
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("notes.txt"), "The secret word is quokka.\n").unwrap();
    ws
}

/// A task file for the pinned Gemini CLI against `upstream`.
fn task_file(dir: &Path, workdir: &Path, upstream: &str) -> std::path::PathBuf {
    let text = format!(
        "agent = \"gemini-cli\"\nworkdir = {:?}\nprompt = \"What is the secret word?\"\n\
         upstream_url = \"{upstream}/v1\"\nupstream_model = \"scripted-model\"\n\
         gemini_binary = {:?}\ntimeout = 120\n",
        workdir.display().to_string(),
        sealed_prefix().display().to_string()
    );
    let path = dir.join("task.toml");
    std::fs::write(&path, text).unwrap();
    path
}

fn switchyard(args: &[&str]) -> std::process::Output {
    Command::new(BIN)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

fn submit(url: &str, task: &Path, count: u32) -> Vec<String> {
    let out = switchyard(&[
        "queue",
        "submit",
        "--records",
        url,
        task.to_str().unwrap(),
        "--count",
        &count.to_string(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect()
}

fn status(url: &str) -> Vec<Value> {
    let out = switchyard(&["queue", "status", "--records", url, "--json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json: Value = serde_json::from_slice(&out.stdout).unwrap();
    json["tasks"].as_array().unwrap().clone()
}

/// A `switchyard worker` process named `name`, its stderr in `logs/name.log`.
fn worker(url: &str, name: &str, concurrency: usize, logs: &Path) -> Child {
    let log = std::fs::File::create(logs.join(format!("{name}.log"))).unwrap();
    Command::new(BIN)
        .args(["worker", "--records", url, "--name", name])
        .args(["--concurrency", &concurrency.to_string()])
        .args(["--lease-secs", "3", "--poll-ms", "200", "--grace-secs", "5"])
        .arg("--workdirs")
        .arg(logs.join(format!("{name}-workdirs")))
        .env("SWITCHYARD_UPSTREAM_KEY", "sk-queue-test-key")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .unwrap()
}

fn logs_of(logs: &Path) -> String {
    let mut text = String::new();
    for entry in std::fs::read_dir(logs).unwrap().flatten() {
        if entry.path().extension().is_some_and(|e| e == "log") {
            text.push_str(&format!("== {}\n", entry.path().display()));
            text.push_str(&std::fs::read_to_string(entry.path()).unwrap_or_default());
        }
    }
    text
}

/// Waits (up to `secs`) for `ready` over the status JSON.
fn wait_for(url: &str, secs: u64, logs: &Path, what: &str, ready: impl Fn(&[Value]) -> bool) {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        let tasks = status(url);
        if ready(&tasks) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "timed out waiting for {what}: {tasks:#?}\n{}",
            logs_of(logs)
        );
        std::thread::sleep(Duration::from_millis(250));
    }
}

fn stop(mut child: Child) {
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    );
    let _ = child.wait();
}

fn records_store(url: &str) -> PgStore {
    PgStore::open_existing(&PgUrl::parse(url).unwrap()).unwrap()
}

/// The whole test off the async runtime: the blocking clients need their own threads.
fn blocking<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    std::thread::spawn(f).join().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_json_has_its_shape_and_a_queued_task_cancels() {
    let Some(db) = database("status_json_has_its_shape") else {
        return;
    };
    let url = db.url().to_owned();
    let dir = tempfile::tempdir().unwrap();
    let ws = workspace();
    let task = task_file(dir.path(), ws.path(), "http://127.0.0.1:9");
    blocking(move || {
        let ids = submit(&url, &task, 2);
        assert_eq!(ids.len(), 2);
        let tasks = status(&url);
        assert_eq!(tasks.len(), 2);
        for (task, id) in tasks.iter().zip(&ids) {
            let keys: Vec<&str> = task
                .as_object()
                .unwrap()
                .keys()
                .map(String::as_str)
                .collect();
            assert_eq!(keys, ["id", "state", "attempts", "run_id", "outcome"]);
            assert_eq!(task["id"], id.as_str());
            assert_eq!(task["state"], "queued");
            assert_eq!(task["attempts"], 0);
            assert!(task["run_id"].is_null() && task["outcome"].is_null());
        }
        let out = switchyard(&["queue", "cancel", "--records", &url, &ids[0]]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let tasks = status(&url);
        assert_eq!(tasks[0]["state"], "cancelled");
        assert_eq!(tasks[1]["state"], "queued");
        // A task file the queue cannot run is refused before it is queued.
        let bad = dir.path().join("bad.toml");
        std::fs::write(&bad, "prompt = \"no workdir\"\n").unwrap();
        let out = switchyard(&["queue", "submit", "--records", &url, bad.to_str().unwrap()]);
        assert_eq!(out.status.code(), Some(2));
        // The URL's password is never printed.
        let out = switchyard(&[
            "queue",
            "status",
            "--records",
            "postgres://u:hunter2-secret@127.0.0.1:1/none?connect_timeout=2",
        ]);
        assert!(!out.status.success());
        assert!(!String::from_utf8_lossy(&out.stderr).contains("hunter2"));
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sigkilled_worker_s_task_is_rerun_and_its_run_marked_abandoned() {
    let Some(db) = database("a_sigkilled_worker_s_task_is_rerun") else {
        return;
    };
    // The first attempt's model call never answers; the next ones do.
    let upstream =
        ChatUpstream::start(Script::new().then(Reply::Hang).step(
            Step::once(Reply::text_stream(["The secret word is quokka."])).times(Times::Always),
        ))
        .await
        .unwrap();
    let url = db.url().to_owned();
    let dir = tempfile::tempdir().unwrap();
    let ws = workspace();
    let task = task_file(dir.path(), ws.path(), &upstream.base_url());
    let logs = dir.path().to_owned();
    let upstream = std::sync::Arc::new(upstream);
    let seen = {
        let upstream = upstream.clone();
        move || upstream.requests().len()
    };
    blocking(move || {
        let id = submit(&url, &task, 1).remove(0);
        let mut doomed = worker(&url, "doomed", 1, &logs);
        let deadline = Instant::now() + Duration::from_secs(90);
        while seen() == 0 {
            assert!(
                Instant::now() < deadline,
                "no model call\n{}",
                logs_of(&logs)
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        doomed.kill().unwrap(); // SIGKILL
        doomed.wait().unwrap();
        let rescuer = worker(&url, "rescuer", 1, &logs);
        wait_for(&url, 120, &logs, "the task to succeed", |tasks| {
            tasks[0]["state"] == "succeeded"
        });
        stop(rescuer);
        let tasks = status(&url);
        assert_eq!(tasks[0]["id"], id.as_str());
        assert_eq!(tasks[0]["attempts"], 2);
        assert_eq!(tasks[0]["outcome"], "succeeded");
        let mut queue = Queue::connect(&PgUrl::parse(&url).unwrap()).unwrap();
        let attempts = queue.attempts(id.parse().unwrap()).unwrap();
        let states: Vec<&str> = attempts.iter().map(|a| a.state.as_str()).collect();
        assert_eq!(states, ["abandoned", "succeeded"], "{}", logs_of(&logs));
        assert_eq!(attempts[0].worker, "doomed");
        assert_eq!(attempts[1].worker, "rescuer");
        assert_ne!(attempts[0].workdir, attempts[1].workdir);
        // The copies are gone after their attempts (the killed worker's stays behind).
        assert!(!Path::new(&attempts[1].workdir).exists());
        // The records agree: the first run abandoned, the second succeeded.
        let store = records_store(&url);
        let first = store
            .run(attempts[0].run_id.parse().unwrap())
            .unwrap()
            .unwrap();
        assert_eq!(first.state, RunState::Abandoned);
        let second = store
            .run(attempts[1].run_id.parse().unwrap())
            .unwrap()
            .unwrap();
        assert_eq!(second.state, RunState::Ended);
        assert_eq!(second.outcome.as_ref().unwrap()["status"], "succeeded");
        assert_eq!(tasks[0]["run_id"], attempts[1].run_id.as_str());
        let result: Value = serde_json::from_str(
            &queue
                .task(id.parse().unwrap())
                .unwrap()
                .unwrap()
                .result
                .unwrap(),
        )
        .unwrap();
        assert_eq!(result["status"], "succeeded");
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_running_task_cancels_through_the_runner_and_its_result_is_refused() {
    let Some(db) = database("a_running_task_cancels") else {
        return;
    };
    let upstream = ChatUpstream::start(Script::always(Reply::Hang))
        .await
        .unwrap();
    let url = db.url().to_owned();
    let dir = tempfile::tempdir().unwrap();
    let ws = workspace();
    let task = task_file(dir.path(), ws.path(), &upstream.base_url());
    let logs = dir.path().to_owned();
    let upstream = std::sync::Arc::new(upstream);
    let seen = {
        let upstream = upstream.clone();
        move || upstream.requests().len()
    };
    blocking(move || {
        let id = submit(&url, &task, 1).remove(0);
        let w = worker(&url, "w", 1, &logs);
        let deadline = Instant::now() + Duration::from_secs(90);
        while seen() == 0 {
            assert!(
                Instant::now() < deadline,
                "no model call\n{}",
                logs_of(&logs)
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        let out = switchyard(&["queue", "cancel", "--records", &url, &id]);
        assert!(out.status.success());
        assert_eq!(status(&url)[0]["state"], "cancelled");
        // The worker's next heartbeat stops the run; its result is refused.
        let mut queue = Queue::connect(&PgUrl::parse(&url).unwrap()).unwrap();
        let run_id: uuid::Uuid = queue.attempts(id.parse().unwrap()).unwrap()[0]
            .run_id
            .parse()
            .unwrap();
        let store = records_store(&url);
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let run = store.run(run_id).unwrap();
            if let Some(run) = run.filter(|r| r.state == RunState::Ended) {
                assert_eq!(run.outcome.unwrap()["status"], "cancelled");
                break;
            }
            assert!(
                Instant::now() < deadline,
                "the run never ended\n{}",
                logs_of(&logs)
            );
            std::thread::sleep(Duration::from_millis(200));
        }
        stop(w);
        let task = queue.task(id.parse().unwrap()).unwrap().unwrap();
        assert_eq!(task.status.state, TaskState::Cancelled);
        assert_eq!(task.status.attempts, 1);
        assert!(logs_of(&logs).contains("refused"), "{}", logs_of(&logs));
    });
}

/// The load test: three workers at concurrency 2 run 24 tasks while one of them is SIGKILLed
/// mid-run. Every task ends `succeeded` exactly once, every succeeded run is in the records, and
/// `queue status` agrees with them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn load_24_tasks_on_3_workers_one_sigkilled() {
    let Some(db) = database("load_24_tasks") else {
        return;
    };
    let upstream = ChatUpstream::start(
        Script::always(Reply::text_stream(["The secret word is quokka."])).record_bodies(false),
    )
    .await
    .unwrap();
    let url = db.url().to_owned();
    let dir = tempfile::tempdir().unwrap();
    let ws = workspace();
    let task = task_file(dir.path(), ws.path(), &upstream.base_url());
    let logs = dir.path().to_owned();
    blocking(move || {
        let started = Instant::now();
        let ids = submit(&url, &task, 24);
        let mut workers: Vec<Child> = (0..3)
            .map(|n| worker(&url, &format!("w{n}"), 2, &logs))
            .collect();
        // Kill w0 while it runs something, after the first tasks are through.
        let mut queue = Queue::connect(&PgUrl::parse(&url).unwrap()).unwrap();
        let deadline = Instant::now() + Duration::from_secs(120);
        'kill: loop {
            assert!(
                Instant::now() < deadline,
                "w0 never ran a task\n{}",
                logs_of(&logs)
            );
            let tasks = queue.status().unwrap();
            let done = tasks
                .iter()
                .filter(|t| t.state == TaskState::Succeeded)
                .count();
            if done >= 3 {
                for t in tasks.iter().filter(|t| t.state == TaskState::Running) {
                    let attempts = queue.attempts(t.id.parse().unwrap()).unwrap();
                    if attempts
                        .last()
                        .is_some_and(|a| a.worker == "w0" && a.state == "running")
                    {
                        break 'kill;
                    }
                }
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        workers[0].kill().unwrap();
        workers[0].wait().unwrap();
        wait_for(&url, 170, &logs, "every task to succeed", |tasks| {
            tasks
                .iter()
                .all(|t| t.get("state").is_some_and(|s| s == "succeeded"))
        });
        let elapsed = started.elapsed();
        for w in workers.drain(1..) {
            stop(w);
        }
        let tasks = status(&url);
        assert_eq!(tasks.len(), 24);
        let store = records_store(&url);
        let runs = store.runs().unwrap();
        let mut abandoned = 0;
        for (task, id) in tasks.iter().zip(&ids) {
            assert_eq!(task["id"], id.as_str());
            let attempts = queue.attempts(id.parse().unwrap()).unwrap();
            // Exactly once: one succeeded attempt per task; the rest were abandoned.
            let succeeded: Vec<_> = attempts.iter().filter(|a| a.state == "succeeded").collect();
            assert_eq!(succeeded.len(), 1, "{id}: {attempts:?}");
            abandoned += attempts.iter().filter(|a| a.state == "abandoned").count();
            assert!(
                attempts
                    .iter()
                    .all(|a| a.state == "succeeded" || a.state == "abandoned")
            );
            // Status agrees with the records.
            assert_eq!(task["run_id"], succeeded[0].run_id.as_str());
            let run = runs
                .iter()
                .find(|r| r.id.to_string() == succeeded[0].run_id)
                .unwrap_or_else(|| panic!("{id}: its run is not in the records"));
            assert_eq!(run.state, RunState::Ended);
            assert_eq!(run.outcome.as_ref().unwrap()["status"], task["outcome"]);
            assert_eq!(task["outcome"], "succeeded");
            assert!(!store.events(run.id).unwrap().is_empty(), "{id}: no events");
            for a in attempts.iter().filter(|a| a.state == "abandoned") {
                if let Some(run) = runs.iter().find(|r| r.id.to_string() == a.run_id) {
                    assert_eq!(run.state, RunState::Abandoned, "{id}");
                }
            }
        }
        assert!(
            abandoned >= 1,
            "the SIGKILLed worker abandoned nothing\n{}",
            logs_of(&logs)
        );
        // No run in the records that no attempt started.
        let attempt_runs: Vec<String> = ids
            .iter()
            .flat_map(|id| queue.attempts(id.parse().unwrap()).unwrap())
            .map(|a| a.run_id)
            .collect();
        assert!(
            runs.iter()
                .all(|r| attempt_runs.contains(&r.id.to_string()))
        );
        eprintln!(
            "load: 24 tasks, {abandoned} abandoned attempt(s), {} runs recorded, {:.1}s",
            runs.len(),
            elapsed.as_secs_f64()
        );
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_stops_claiming_cancels_after_the_grace_and_releases_the_task() {
    let Some(db) = database("sigterm_stops_claiming") else {
        return;
    };
    // The first model call never answers; later ones do.
    let upstream =
        ChatUpstream::start(Script::new().then(Reply::Hang).step(
            Step::once(Reply::text_stream(["The secret word is quokka."])).times(Times::Always),
        ))
        .await
        .unwrap();
    let url = db.url().to_owned();
    let dir = tempfile::tempdir().unwrap();
    let ws = workspace();
    let task = task_file(dir.path(), ws.path(), &upstream.base_url());
    let logs = dir.path().to_owned();
    let upstream = std::sync::Arc::new(upstream);
    let seen = {
        let upstream = upstream.clone();
        move || upstream.requests().len()
    };
    blocking(move || {
        let ids = submit(&url, &task, 2);
        let mut stopping = worker(&url, "stopping", 1, &logs);
        let deadline = Instant::now() + Duration::from_secs(90);
        while seen() == 0 {
            assert!(
                Instant::now() < deadline,
                "no model call\n{}",
                logs_of(&logs)
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        let signalled = Instant::now();
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(i32::try_from(stopping.id()).unwrap()),
            nix::sys::signal::Signal::SIGTERM,
        )
        .unwrap();
        let code = stopping.wait().unwrap().code();
        // The hung run had its 5 s grace, then was cancelled; the worker left on its own.
        let took = signalled.elapsed();
        assert!(
            took >= Duration::from_secs(4) && took < Duration::from_secs(60),
            "{took:?}\n{}",
            logs_of(&logs)
        );
        assert_eq!(code, Some(0), "{}", logs_of(&logs));
        // Nothing was claimed after the signal: one attempt in all, released, both queued.
        let mut queue = Queue::connect(&PgUrl::parse(&url).unwrap()).unwrap();
        let mut attempts = Vec::new();
        for id in &ids {
            attempts.extend(queue.attempts(id.parse().unwrap()).unwrap());
        }
        assert_eq!(attempts.len(), 1, "{}", logs_of(&logs));
        assert_eq!(attempts[0].state, "released", "{}", logs_of(&logs));
        let tasks = status(&url);
        assert!(tasks.iter().all(|t| t["state"] == "queued"), "{tasks:#?}");
        // The cancelled run is in the records as such.
        let store = records_store(&url);
        let run = store
            .run(attempts[0].run_id.parse().unwrap())
            .unwrap()
            .unwrap();
        assert_eq!(run.outcome.as_ref().unwrap()["status"], "cancelled");
        // Another worker runs both; the released attempt did not count against the limit.
        let next = worker(&url, "next", 2, &logs);
        wait_for(&url, 120, &logs, "both tasks to succeed", |tasks| {
            tasks.iter().all(|t| t["state"] == "succeeded")
        });
        stop(next);
    });
}
