//! `switchyard-dev bench run --agent opencode`: the host's own cost with OpenCode. The same
//! scripted text task is run, interleaved, N times each way: (a) `opencode serve` started
//! with the identical isolated launch and driven directly (readiness line, health, event
//! subscription, a session, one prompt, idle, SIGINT), its provider pointing straight at a
//! scripted Chat Completions upstream; (b) `switchyard run --agent opencode` through its
//! embedded gateway to the same upstream. Reported: median and p90 wall time of each, the
//! added time and ratio against (a), and Switchyard's own peak resident memory.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use futures_util::StreamExt;
use serde_json::{Value, json};
use switchyard_backend::gemini::launch::Secret;
use switchyard_backend::opencode::launch::{
    ConfigInput, GATEWAY_KEY_ENV, OpenCodeLaunchConfig, PROVIDER, SERVER_USER, config_document,
    prepare,
};
use switchyard_backend::opencode::run::READY_PREFIX;
use switchyard_backend::opencode::server::ServerClient;
use switchyard_testkit::chat_upstream::{ChatUpstream, Reply, Script};
use tokio::io::AsyncBufReadExt;

use super::bench::{RunBenchArgs, Sample, median_p90, timed_run};

const MODEL: &str = "scripted-model";
const PROMPT: &str = "Please do the task";

/// Entry point of `bench run --agent opencode`.
pub(super) async fn bench_run(args: &RunBenchArgs) -> Result<u8> {
    let prefix = match &args.opencode_binary {
        Some(p) => switchyard_runner::find_sealed_prefix(p)?,
        None => {
            switchyard_runner::agents::spec(switchyard_runner::Agent::Opencode).default_prefix()
        }
    };
    let prefix = std::path::absolute(prefix)?;
    let (package, version) = switchyard_runner::Agent::Opencode.pin();
    let install = switchyard_backend::install::verify(&prefix, package, version)?;
    let chat = ChatUpstream::start(Script::always(Reply::text_stream([
        "Hello ",
        "from the scripted model.",
    ])))
    .await?;
    let chat_url = format!("{}/v1", chat.base_url());
    let exe = super::product_binary()?;
    let scratch = tempfile::tempdir()?;
    let ws = scratch.path().join("ws");
    std::fs::create_dir_all(&ws)?;
    let (mut direct, mut hosted) = (Vec::new(), Vec::new());
    // One warm-up of each (page cache), then interleave.
    for i in 0..=args.iterations {
        let run_dir = scratch.path().join(format!("d{i}"));
        let d = drive_directly(&install.entry, &ws, &run_dir, &chat_url).await?;
        let mut cmd = std::process::Command::new(&exe);
        cmd.args(["run", "--agent", "opencode", "--prompt", PROMPT])
            .args(["--upstream-model", MODEL, "--output", "jsonl"])
            .arg("--upstream-url")
            .arg(&chat_url)
            .arg("--workdir")
            .arg(&ws)
            .arg("--opencode-binary")
            .arg(&prefix);
        let h = tokio::task::spawn_blocking(move || timed_run(cmd)).await??;
        if i > 0 {
            direct.push(d);
            hosted.push(h);
        }
        eprint!(".");
    }
    eprintln!();
    let stats = median_p90;
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let (d50, d90) = stats(&direct);
    let (h50, h90) = stats(&hosted);
    println!(
        "switchyard-dev bench run --agent opencode: {} iterations each, same scripted text task, \
         interleaved",
        args.iterations
    );
    println!(
        "  opencode serve driven directly  median {:8.1} ms   p90 {:8.1} ms",
        ms(d50),
        ms(d90)
    );
    println!(
        "  switchyard run, gateway         median {:8.1} ms   p90 {:8.1} ms",
        ms(h50),
        ms(h90)
    );
    println!(
        "  added (host + gateway)          median {:+8.1} ms   ratio {:.3}x",
        ms(h50) - ms(d50),
        h50.as_secs_f64() / d50.as_secs_f64()
    );
    match hosted.iter().filter_map(|s| s.peak_rss_kib).max() {
        Some(kib) => println!(
            "  peak RSS (host + gateway)       {:8.1} MiB (switchyard process, VmHWM)",
            kib as f64 / 1024.0
        ),
        None => println!("  peak RSS unavailable (/proc not readable)"),
    }
    chat.stop().await;
    Ok(0)
}

/// `opencode serve` with Switchyard's launch, its provider straight at `chat_url`, driven
/// through one prompt by hand; the wall time from spawn to exit.
async fn drive_directly(entry: &Path, ws: &Path, run_dir: &Path, chat_url: &str) -> Result<Sample> {
    let provider = json!({
        "provider": {PROVIDER: {
            "npm": "@ai-sdk/openai-compatible",
            "name": "scripted",
            "options": {"baseURL": chat_url, "apiKey": format!("{{env:{GATEWAY_KEY_ENV}}}")},
            "models": {MODEL: {"name": MODEL, "tool_call": true,
                "limit": {"context": 128000, "output": 8192}}},
        }},
        "model": format!("{PROVIDER}/{MODEL}"),
        "small_model": format!("{PROVIDER}/{MODEL}"),
    });
    let password = Secret::new(switchyard_runner::random_token());
    let launch = prepare(&OpenCodeLaunchConfig {
        trust_workspace_config: false,
        binary: entry.to_path_buf(),
        workdir: ws.to_path_buf(),
        run_dir: run_dir.to_path_buf(),
        config: config_document(&ConfigInput {
            provider,
            mcp_url: None,
            ripgrep: switchyard_runner::home::which("rg").is_some(),
        }),
        password: password.clone(),
        gateway_key: Secret::new("bench-key"),
        mcp_token: None,
        host_env: std::env::vars_os().collect(),
    })?;
    let start = Instant::now();
    let mut child = tokio::process::Command::new(&launch.program)
        .args(&launch.args)
        .env_clear()
        .envs(launch.env.iter().map(|(k, v)| (k, v)))
        .current_dir(&launch.cwd)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()?;
    let stdout = child.stdout.take().context("stdout")?;
    let mut lines = tokio::io::BufReader::new(stdout).lines();
    let base = loop {
        match lines.next_line().await? {
            Some(line) => {
                if let Some(url) = line.trim().strip_prefix(READY_PREFIX) {
                    break url.to_owned();
                }
            }
            None => bail!("opencode serve exited before it listened"),
        }
    };
    let directory = launch.cwd.to_string_lossy().into_owned();
    let client = ServerClient::new(&base, SERVER_USER, &password, &directory)?;
    while !client.healthy().await {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let mut events = Box::pin(client.events().await?);
    let session = client.create_session("bench").await?;
    client.prompt(&session, PROMPT, PROVIDER, MODEL).await?;
    let mut busy = false;
    while let Some(data) = events.next().await {
        let event: Value = serde_json::from_str(&data?)?;
        let ours = event
            .pointer("/properties/sessionID")
            .and_then(Value::as_str)
            == Some(session.as_str());
        match event["type"].as_str() {
            Some("session.status") if ours => {
                busy |= event.pointer("/properties/status/type") == Some(&json!("busy"));
            }
            Some("session.idle") if ours && busy => break,
            _ => {}
        }
    }
    if let Some(pid) = child.id() {
        let pid = nix::unistd::Pid::from_raw(i32::try_from(pid)?);
        nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGINT)?;
    }
    child.wait().await?;
    let wall = start.elapsed();
    Ok(Sample {
        wall,
        peak_rss_kib: None,
    })
}
