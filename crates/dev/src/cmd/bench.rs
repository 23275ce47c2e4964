//! `switchyard-dev bench`: measurements, never tests.
//!
//! - `bench run`: the host's own cost. The same scripted task (a text answer from
//!   `testkit::genai_upstream`) is run, interleaved, N times each way: (a) the pinned CLI
//!   started directly with the identical isolated launch, (b) `switchyard run` pointing the guest
//!   at the same endpoint (`--guest-base-url`, so only Switchyard's host work differs), and
//!   (c) `switchyard run` the normal way, through its embedded gateway to a scripted Chat
//!   Completions upstream answering the same text. Reported: median and p90 wall time of each,
//!   the added time and ratio against (a), and Switchyard's own peak resident memory (VmHWM of
//!   the `switchyard` process, gateway included, not its children).
//! - `bench gateway`: `switchyard_gateway::bench` (direct upstream vs gateway, same run).

use anyhow::{Context, Result, ensure};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use switchyard_backend::gemini::launch::{GUEST_MAX_ATTEMPTS, GeminiLaunchConfig, Secret, prepare};
use switchyard_backend::gemini::settings::ApprovalMode;
use switchyard_testkit::chat_upstream::{ChatUpstream, Reply, Script};
use switchyard_testkit::genai_upstream::{GenaiScenario, GenaiUpstream};

/// `switchyard-dev bench` subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum BenchCommand {
    /// Host overhead of `switchyard run` against running the pinned CLI directly.
    Run(RunBenchArgs),
    /// Gateway latency, throughput, memory and forwarding delay against the direct upstream.
    Gateway(GatewayBenchArgs),
    /// Gateway memory while an upstream streams without end.
    Endless(EndlessBenchArgs),
    /// The PostgreSQL run queue: throughput of one worker against three, writes per run.
    Queue(QueueBenchArgs),
}

/// `switchyard-dev bench queue` flags.
#[derive(Debug, clap::Args)]
pub struct QueueBenchArgs {
    /// Tasks in each phase (one worker, then three).
    #[arg(long, default_value_t = 12)]
    pub tasks: u32,
    /// Runs at once per worker.
    #[arg(long, default_value_t = 2)]
    pub concurrency: usize,
    /// A sealed Gemini CLI install (default: the test install).
    #[arg(long)]
    pub gemini_binary: Option<PathBuf>,
}

/// `switchyard-dev bench endless` flags.
#[derive(Debug, clap::Args)]
pub struct EndlessBenchArgs {
    /// MiB the upstream streams in all.
    #[arg(long, default_value_t = 400)]
    pub mib: u64,
    /// Guests asking at once.
    #[arg(long, default_value_t = 4)]
    pub concurrency: usize,
    /// Bytes of text in each upstream event.
    #[arg(long, default_value_t = 16)]
    pub delta_bytes: usize,
    /// Also stream the same total as one unbounded answer (what the bounds prevent).
    #[arg(long)]
    pub control: bool,
    /// Without records (on by default).
    #[arg(long)]
    pub no_records: bool,
}

/// `switchyard-dev bench run` flags.
#[derive(Debug, clap::Args)]
pub struct RunBenchArgs {
    /// Runs of each variant.
    #[arg(long, default_value_t = 10)]
    pub iterations: usize,
    /// A sealed Gemini CLI install.
    #[arg(long)]
    pub gemini_binary: Option<PathBuf>,
    /// The guest: `gemini-cli`, or `opencode` (against `opencode serve` driven directly).
    #[arg(long, value_enum, default_value = "gemini-cli")]
    pub agent: switchyard_runner::Agent,
    /// A sealed OpenCode install (`--agent opencode`).
    #[arg(long)]
    pub opencode_binary: Option<PathBuf>,
}

/// `switchyard-dev bench gateway` flags.
#[derive(Debug, clap::Args)]
pub struct GatewayBenchArgs {
    /// Sequential requests per latency series.
    #[arg(long, default_value_t = 2000)]
    pub latency_requests: usize,
    /// Seconds of each throughput series.
    #[arg(long, default_value_t = 3)]
    pub throughput_secs: u64,
    /// Concurrent open streams for the memory figure.
    #[arg(long, default_value_t = 1000)]
    pub streams: usize,
    /// Requests/s offered in the paced records off/on series (0 skips them).
    #[arg(long, default_value_t = switchyard_bench::gateway::PACED_RATE)]
    pub paced_rate: u32,
}

/// Entry point.
pub async fn run(command: BenchCommand) -> Result<u8> {
    match command {
        BenchCommand::Run(args) => bench_run(args).await,
        BenchCommand::Queue(args) => {
            let gemini = match args.gemini_binary {
                Some(prefix) => prefix,
                None => {
                    use switchyard_backend::gemini::{PACKAGE, VERSION};
                    let prefix = switchyard_testkit::guest::gemini_prefix();
                    if switchyard_backend::install::verify(&prefix, PACKAGE, VERSION).is_err() {
                        switchyard_backend::install::seal(&prefix, PACKAGE, VERSION)?;
                    }
                    prefix
                }
            };
            let b = switchyard_bench::queue::run(gemini, args.tasks, args.concurrency)
                .await
                .map_err(|e| anyhow::anyhow!("{e}"))?;
            let (one, three) = b.throughput();
            println!(
                "queue: {} real Gemini CLI runs per phase, {} at once per worker",
                b.tasks, b.concurrency
            );
            println!(
                "  1 worker : {:6.1} s  {one:5.2} runs/s",
                b.one_worker.as_secs_f64()
            );
            println!(
                "  3 workers: {:6.1} s  {three:5.2} runs/s  (x{:.2} of one worker)",
                b.three_workers.as_secs_f64(),
                three / one
            );
            println!(
                "  database per run (queue + records): {:.1} commits, {:.1} rows inserted, \
                 {:.1} rows updated",
                b.commits_per_run, b.rows_inserted_per_run, b.rows_updated_per_run
            );
            Ok(0)
        }
        BenchCommand::Endless(args) => {
            let report =
                switchyard_bench::endless::probe(switchyard_bench::endless::EndlessOptions {
                    total_bytes: args.mib * 1024 * 1024,
                    concurrency: args.concurrency,
                    delta_bytes: args.delta_bytes,
                    control: args.control,
                    records: !args.no_records,
                })
                .await
                .map_err(|e| anyhow::anyhow!("{e}"))?;
            println!("{report}");
            Ok(0)
        }
        BenchCommand::Gateway(args) => {
            let options = switchyard_bench::gateway::BenchOptions {
                latency_requests: args.latency_requests,
                throughput_duration: Duration::from_secs(args.throughput_secs),
                streams: args.streams,
                paced_rate: args.paced_rate,
                // The memory figure is of `switchyard gateway`, even under another file name.
                gateway_process: switchyard_bench::gateway::GatewayProcess::GatewaySubcommand,
                ..Default::default()
            };
            let report = switchyard_bench::gateway::bench(options).await?;
            println!("{report}");
            Ok(0)
        }
    }
}

pub(super) struct Sample {
    pub wall: Duration,
    pub peak_rss_kib: Option<u64>,
}

async fn bench_run(args: RunBenchArgs) -> Result<u8> {
    ensure!(args.iterations >= 1, "--iterations must be at least 1");
    if args.agent == switchyard_runner::Agent::Opencode {
        return super::bench_opencode::bench_run(&args).await;
    }
    let prefix = match &args.gemini_binary {
        Some(p) => switchyard_runner::find_sealed_prefix(p)?,
        None => {
            switchyard_runner::agents::spec(switchyard_runner::Agent::GeminiCli).default_prefix()
        }
    };
    let prefix = std::path::absolute(prefix)?;
    let install = switchyard_backend::install::verify(
        &prefix,
        switchyard_backend::gemini::PACKAGE,
        switchyard_backend::gemini::VERSION,
    )?;
    let upstream = GenaiUpstream::start(GenaiScenario::Text).await?;
    let exe = super::product_binary()?;
    let scratch = tempfile::tempdir()?;
    let ws = scratch.path().join("ws");
    std::fs::create_dir_all(&ws)?;
    let node = switchyard_runner::home::which("node").context("node not on PATH")?;

    let chat = ChatUpstream::start(Script::always(Reply::text_stream([
        "Hello ",
        "from the scripted model.",
    ])))
    .await?;
    let (mut direct, mut hosted, mut gatewayed) = (Vec::new(), Vec::new(), Vec::new());
    // One warm-up of each (page cache, node compile cache), then interleave.
    for i in 0..=args.iterations {
        let d = run_direct(
            &node,
            &install.entry,
            &ws,
            &scratch.path().join(format!("d{i}")),
            &upstream.base_url(),
        )?;
        let h = run_hosted(
            &exe,
            &prefix,
            &ws,
            &["--guest-base-url", &upstream.base_url()],
        )?;
        let chat_url = format!("{}/v1", chat.base_url());
        let g = run_hosted(&exe, &prefix, &ws, &["--upstream-url", &chat_url])?;
        if i > 0 {
            direct.push(d);
            hosted.push(h);
            gatewayed.push(g);
        }
        eprint!(".");
    }
    eprintln!();
    let stats = median_p90;
    let (d50, d90) = stats(&direct);
    let (h50, h90) = stats(&hosted);
    let (g50, g90) = stats(&gatewayed);
    let peak = |xs: &[Sample]| xs.iter().filter_map(|s| s.peak_rss_kib).max();
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    println!(
        "switchyard-dev bench run: {} iterations each, same scripted text task, interleaved",
        args.iterations
    );
    println!(
        "  pinned CLI directly      median {:8.1} ms   p90 {:8.1} ms",
        ms(d50),
        ms(d90)
    );
    println!(
        "  switchyard run           median {:8.1} ms   p90 {:8.1} ms",
        ms(h50),
        ms(h90)
    );
    println!(
        "  switchyard run, gateway  median {:8.1} ms   p90 {:8.1} ms",
        ms(g50),
        ms(g90)
    );
    for (label, median) in [("host only", h50), ("host + gateway", g50)] {
        println!(
            "  added ({label:<14}) median {:+8.1} ms   ratio {:.3}x (target: <= +50 ms)",
            ms(median) - ms(d50),
            median.as_secs_f64() / d50.as_secs_f64()
        );
    }
    for (label, xs) in [("host only", &hosted), ("host + gateway", &gatewayed)] {
        match peak(xs) {
            Some(kib) => println!(
                "  peak RSS ({label:<14}) {:8.1} MiB (switchyard process, VmHWM; target: <= 20 MiB)",
                kib as f64 / 1024.0
            ),
            None => println!("  peak RSS ({label:<14}) unavailable (/proc not readable)"),
        }
    }
    chat.stop().await;
    Ok(0)
}

/// The median and p90 wall time of `samples` (at least one).
pub(super) fn median_p90(samples: &[Sample]) -> (Duration, Duration) {
    let mut w: Vec<Duration> = samples.iter().map(|s| s.wall).collect();
    w.sort();
    let at = |i: usize| {
        w.get(i.min(w.len().saturating_sub(1)))
            .copied()
            .unwrap_or_default()
    };
    (at(w.len() / 2), at(w.len() * 9 / 10))
}

/// The pinned CLI started directly with exactly the launch Switchyard would build.
fn run_direct(
    node: &Path,
    entry: &Path,
    ws: &Path,
    run_dir: &Path,
    base_url: &str,
) -> Result<Sample> {
    let launch = prepare(&GeminiLaunchConfig {
        trust_workspace_config: false,
        node: node.to_path_buf(),
        entry: entry.to_path_buf(),
        workdir: ws.to_path_buf(),
        run_dir: run_dir.to_path_buf(),
        prompt: "Please do the task".into(),
        model: "gemini-2.5-flash".into(),
        base_url: base_url.into(),
        api_key: Secret::new("bench-key"),
        approval_mode: ApprovalMode::Default,
        max_turns: None,
        max_attempts: GUEST_MAX_ATTEMPTS,
        host_env: std::env::vars_os().collect(),
        host_mcp: None,
        protocol: Default::default(),
    })?;
    let start = Instant::now();
    let status = Command::new(&launch.program)
        .args(&launch.args)
        .env_clear()
        .envs(launch.env.iter().map(|(k, v)| (k, v)))
        .current_dir(&launch.cwd)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()?;
    let wall = start.elapsed();
    ensure!(status.success(), "direct CLI run failed: {status}");
    launch.remove_system_settings();
    Ok(Sample {
        wall,
        peak_rss_kib: None,
    })
}

/// `switchyard run` on the same task (`target` selects the model endpoint), sampling its own
/// VmHWM while it runs.
fn run_hosted(exe: &Path, prefix: &Path, ws: &Path, target: &[&str]) -> Result<Sample> {
    let mut cmd = Command::new(exe);
    cmd.args([
        "run",
        "--prompt",
        "Please do the task",
        "--upstream-model",
        "gemini-2.5-flash",
        "--output",
        "jsonl",
    ])
    .arg("--workdir")
    .arg(ws)
    .arg("--gemini-binary")
    .arg(prefix)
    .args(target);
    timed_run(cmd)
}

/// Runs `cmd` (a `switchyard run`) to its end, sampling its own VmHWM while it runs.
pub(super) fn timed_run(mut cmd: Command) -> Result<Sample> {
    let start = Instant::now();
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()?;
    let status_path = format!("/proc/{}/status", child.id());
    let mut peak = None;
    let status = loop {
        if let Some(s) = child.try_wait()? {
            break s;
        }
        let kib = switchyard_bench::gateway::status_kib(&status_path, "VmHWM:");
        if kib > 0 {
            peak = Some(peak.unwrap_or(0).max(kib));
        }
        std::thread::sleep(Duration::from_millis(2));
    };
    let wall = start.elapsed();
    ensure!(status.success(), "switchyard run failed: {status}");
    Ok(Sample {
        wall,
        peak_rss_kib: peak,
    })
}
