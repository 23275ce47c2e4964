//! `switchyard-dev bench gateway`: what the gateway costs on top of talking to the upstream directly.
//!
//! Everything runs in this process on loopback, against zero-delay scripted Chat Completions
//! upstreams (`switchyard_testkit::chat_upstream`). Every figure is measured twice in the same
//! run, once **direct** (client → upstream, sending the Chat request the gateway would send) and
//! once **through the gateway** (client → gateway → upstream, sending the Google request), so the
//! difference is the gateway's cost. The request is the real first request Gemini CLI 0.61.0
//! sends (~47 KB, `benches/data/gemini-cli-0.61.0-first-request.json`).
//!
//! Measured:
//! * latency p50/p99 at concurrency 1, non-streaming and streaming (whole response read);
//! * requests/s at concurrency 16, non-streaming and streaming, and the process CPU time per
//!   request in each series (client, upstream and gateway share the two cores, so the CPU per
//!   request is the steadier figure; the difference between two series is what the extra part
//!   costs, e.g. records on minus records off is the records' CPU per exchange);
//! * resident memory (process VmRSS) with N concurrent open streams (default 1,000), with the
//!   47 KB request and with a tiny one;
//! * the latency series again with the client, the gateway and the upstream each on threads of
//!   their own, all pinned to one CPU ([`OneCpuLatency`]): the gateway's own cost at concurrency
//!   1, without the cost of waking the other core on each of its two extra socket hops;
//! * forwarding delay of one streamed text chunk: the client releases a held upstream chunk and
//!   times until it arrives;
//! * records off vs on: the latency and throughput series are also run through a second gateway
//!   pair that records every exchange into a real SQLite store (`Recorder::open` on a
//!   temporary directory, or the empty PostgreSQL database [`RECORDS_ENV`] names), reported
//!   side by side with ratios. The series run in alternating
//!   rounds (direct, records off, records on), so machine noise spreads over all of them. What
//!   records cost (the CPU-per-request difference) is spent on the request path and on the
//!   recorder's writer thread, whose own CPU clock is reported per exchange. A records-on
//!   throughput series ends only once every exchange it sent is stored (its time and CPU
//!   include the writer's backlog); after a records-on latency round the backlog is stored
//!   untimed, so it never lands on the next target's round.
//! * records off vs on at a fixed offered rate (default [`PACED_RATE`], the gateway's own
//!   throughput target): an open loop sends requests on schedule whatever the answers do, and
//!   reports the rate served, the latency and the CPU per request ([`Paced`]). The saturated
//!   series above answer "how much less can the machine serve with records on"; this one answers
//!   "at the load the gateway is specified for, do records cost the guest anything": below
//!   saturation the served rates should match, and the CPU difference is records' cost without
//!   the closed loop's feedback.
//!
//! Build with `--release` for meaningful numbers. The in-process memory figures are the whole
//! process (client, upstream and gateway); the gateway's share is the difference to the direct
//! phase, which runs first (a direct phase that leaves freed memory in the allocator makes the
//! gateway figure an underestimate, so both absolute values are reported). The honest figure is
//! the **gateway process alone** (`gateway_process`, see [`GatewayProcess`]): the same stream
//! phases against a gateway in a child process (this binary's `gateway` subcommand when the
//! caller is the `switchyard` binary, else this binary again through
//! [`serve_child_if_requested`]), reading the child's `VmRSS`/`VmHWM` from `/proc/<pid>/status`
//! while the streams are open.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures_util::StreamExt;
use switchyard_testkit::chat_upstream::{
    ChatUpstream, Gate, Reply, Script, StreamEvent, StreamReply, chunk,
};
use switchyard_translate::TranslateOptions;

use switchyard_records::{Recorder, Redactor};

/// Names a PostgreSQL database (`postgres://…`, empty) to record into instead of a temporary
/// SQLite store.
pub const RECORDS_ENV: &str = "SWITCHYARD_BENCH_RECORDS";

use switchyard_gateway::upstream::describe;
use switchyard_gateway::{Gateway, GatewayConfig, GatewayDeps, GatewayHandle};

use switchyard_testkit::fixtures::GEMINI_CLI_FIRST_REQUEST;

mod one_cpu;

pub use one_cpu::OneCpuLatency;

const BENCH_MODEL: &str = "bench-model";

/// How much to measure.
#[derive(Debug, Clone)]
pub struct BenchOptions {
    /// Sequential requests per latency series (after `warmup`).
    pub latency_requests: usize,
    /// Requests before each series, not measured.
    pub warmup: usize,
    /// Duration of each throughput series.
    pub throughput_duration: Duration,
    /// Concurrency of the throughput series.
    pub concurrency: usize,
    /// Concurrent open streams for the memory figure.
    pub streams: usize,
    /// Requests/s offered by the paced records series ([`Paced`]); 0 skips them.
    pub paced_rate: u32,
    /// Samples of the chunk forwarding delay.
    pub forward_samples: usize,
    /// Whether and how to measure the memory of a gateway running as a separate process.
    pub gateway_process: GatewayProcess,
    /// Also run the latency series with the client, gateway and upstream pinned to one CPU
    /// ([`OneCpuLatency`]).
    pub one_cpu: bool,
}

impl Default for BenchOptions {
    fn default() -> Self {
        Self {
            latency_requests: 2_000,
            warmup: 200,
            throughput_duration: Duration::from_secs(3),
            concurrency: 16,
            streams: 1_000,
            paced_rate: PACED_RATE,
            forward_samples: 500,
            gateway_process: GatewayProcess::ThisBinaryAsChild,
            one_cpu: true,
        }
    }
}

/// How the benchmark starts the gateway whose process memory it reads alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GatewayProcess {
    /// Not measured (a test binary cannot serve as the gateway).
    Skip,
    /// This binary again with [`CHILD_ENV`] set: benchmark binaries that call
    /// [`serve_child_if_requested`] first thing.
    ThisBinaryAsChild,
    /// This binary's `gateway` subcommand: the `switchyard` binary, so the figure is the memory
    /// of `switchyard gateway` itself (whatever the binary file is called).
    GatewaySubcommand,
}

/// Why the benchmark could not run.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    #[error("cannot start the scripted upstream: {0}")]
    Upstream(std::io::Error),
    #[error("cannot start the gateway: {0}")]
    Gateway(#[from] switchyard_gateway::GatewayError),
    #[error("cannot translate the benchmark request: {0}")]
    Translate(String),
    #[error("request failed during the benchmark: {0}")]
    Request(String),
    #[error("cannot create the records directory: {0}")]
    Records(std::io::Error),
    #[error("cannot start the gateway child process: {0}")]
    Child(std::io::Error),
    #[error("cannot run the parties on one CPU: {0}")]
    Pin(String),
}

/// p50/p99 of a latency series.
#[derive(Debug, Clone, Copy, Default)]
pub struct Percentiles {
    pub p50: Duration,
    pub p99: Duration,
}

/// One figure measured direct and through the gateway.
#[derive(Debug, Clone, Copy, Default)]
pub struct Pair<T> {
    pub direct: T,
    pub gateway: T,
}

/// One figure measured through a gateway with records off and through one with records on.
#[derive(Debug, Clone, Copy, Default)]
pub struct OffOn<T> {
    pub off: T,
    pub on: T,
}

/// Records off vs on: two gateways on the same upstream, one with a real SQLite recorder.
#[derive(Debug, Clone, Default)]
pub struct RecordsReport {
    pub latency_unary: OffOn<Percentiles>,
    pub latency_stream: OffOn<Percentiles>,
    pub rps_unary: OffOn<Throughput>,
    pub rps_stream: OffOn<Throughput>,
    /// At a fixed offered rate ([`BenchOptions::paced_rate`]; `None` when skipped).
    pub paced_unary: Option<OffOn<Paced>>,
    pub paced_stream: Option<OffOn<Paced>>,
    /// Record ops the records-on gateway's writer committed (proves it recorded).
    pub written_ops: u64,
    /// Record ops that failed to persist (should be 0).
    pub failed_ops: u64,
    /// Exchanges the records-on gateways recorded.
    pub exchanges: u64,
    /// The writer thread's CPU time (building, redacting, storing; all records-on series).
    pub writer_cpu: Duration,
}

/// Everything `bench` measured.
#[derive(Debug, Clone, Default)]
pub struct BenchReport {
    pub request_bytes: usize,
    pub latency_unary: Pair<Percentiles>,
    pub latency_stream: Pair<Percentiles>,
    pub rps_unary: Pair<Throughput>,
    pub rps_stream: Pair<Throughput>,
    pub concurrency: usize,
    pub streams: usize,
    /// Requests/s offered by the paced records series.
    pub paced_rate: u32,
    pub rss_idle_kib: u64,
    pub rss_streams_kib: Pair<u64>,
    /// The same with a ~100-byte request (the per-stream cost when the request body is small).
    pub rss_small_streams_kib: Pair<u64>,
    pub forward_delay: Pair<Percentiles>,
    /// The latency series with every party on one CPU (when enabled and possible).
    pub one_cpu: Option<OneCpuLatency>,
    /// Why the one-CPU series could not run (the rest of the report stands).
    pub one_cpu_error: Option<String>,
    /// Records off vs on (same run).
    pub records: RecordsReport,
    /// The Chat Completions ingress (OpenCode's request), direct vs through the gateway.
    pub chat: ChatIngressReport,
    /// The Messages ingress (Claude Code's request): the Chat request it becomes sent direct,
    /// vs the Messages request through the gateway.
    pub messages: ChatIngressReport,
    /// The Responses ingress (Codex's request): the Chat request it becomes sent direct, vs
    /// the Responses request through the gateway.
    pub responses: ChatIngressReport,
    /// Tracing off vs on (a `chat` span per exchange, exported to an OTLP receiver on
    /// 127.0.0.1), unary and streamed.
    pub tracing_unary: OffOn<Percentiles>,
    pub tracing_stream: OffOn<Percentiles>,
    /// The gateway's own memory, measured in a separate process (when enabled).
    pub gateway_process: Option<ProcessMemory>,
    /// Why the separate-process measurement could not be made (the rest of the report stands).
    pub gateway_process_error: Option<String>,
}

/// The Chat Completions ingress with OpenCode 1.18.33's real first request: the same body
/// sent straight to the upstream and to the gateway's `/v1/chat/completions`.
#[derive(Debug, Clone, Default)]
pub struct ChatIngressReport {
    pub request_bytes: usize,
    pub latency_unary: Pair<Percentiles>,
    pub latency_stream: Pair<Percentiles>,
}

/// Resident memory of the gateway child process (KiB, from `/proc/<pid>/status`).
#[derive(Debug, Clone, Default)]
pub struct ProcessMemory {
    /// What ran in the child (`switchyard gateway` or the benchmark binary).
    pub kind: String,
    /// VmRSS after a few warm-up requests.
    pub idle_kib: u64,
    /// VmRSS with `streams` open streams, tiny request.
    pub small_streams_kib: u64,
    /// VmRSS with `streams` open streams, the 47 KB request.
    pub streams_kib: u64,
    /// VmHWM (peak resident) at the end.
    pub peak_kib: u64,
}

fn micros(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

/// One row of a comparison table: the two figures, their ratio and (with `added`) the
/// difference, with `decimals` digits.
fn write_row(
    f: &mut std::fmt::Formatter<'_>,
    name: &str,
    left: f64,
    right: f64,
    decimals: usize,
    added: bool,
) -> std::fmt::Result {
    let ratio = right / left.max(1e-9);
    let added = if added {
        format!("{:.*}", decimals, right - left)
    } else {
        String::new()
    };
    writeln!(
        f,
        "{name:<34} {left:>12.decimals$} {right:>12.decimals$} {ratio:>10.2} {added:>12}"
    )
}

/// The p50 and p99 rows of a latency figure, in microseconds.
fn write_percentile_rows(
    f: &mut std::fmt::Formatter<'_>,
    name: &str,
    left: Percentiles,
    right: Percentiles,
) -> std::fmt::Result {
    write_row(
        f,
        &format!("{name} p50"),
        micros(left.p50),
        micros(right.p50),
        1,
        true,
    )?;
    write_row(
        f,
        &format!("{name} p99"),
        micros(left.p99),
        micros(right.p99),
        1,
        true,
    )
}

/// The requests/s row and the CPU-per-request row of a throughput figure.
fn write_throughput_rows(
    f: &mut std::fmt::Formatter<'_>,
    kind: &str,
    concurrency: usize,
    left: Throughput,
    right: Throughput,
) -> std::fmt::Result {
    write_row(
        f,
        &format!("req/s {kind} c={concurrency}"),
        left.requests_per_sec,
        right.requests_per_sec,
        0,
        false,
    )?;
    write_row(
        f,
        &format!("CPU us/request {kind} c={concurrency}"),
        left.cpu_us_per_request,
        right.cpu_us_per_request,
        1,
        true,
    )
}

/// The rows of a records off/on figure at a fixed offered rate: served rate, latency and CPU
/// per request (and, when any request was not sent, how many).
fn write_paced_rows(
    f: &mut std::fmt::Formatter<'_>,
    kind: &str,
    rate: u32,
    pair: &OffOn<Paced>,
) -> std::fmt::Result {
    let name = format!("{kind} at {rate}/s");
    write_row(
        f,
        &format!("served req/s {name}"),
        pair.off.served_per_sec,
        pair.on.served_per_sec,
        0,
        false,
    )?;
    write_percentile_rows(
        f,
        &format!("latency {name} (us)"),
        pair.off.latency,
        pair.on.latency,
    )?;
    write_row(
        f,
        &format!("CPU us/request {name}"),
        pair.off.cpu_us_per_request,
        pair.on.cpu_us_per_request,
        1,
        true,
    )?;
    if pair.off.skipped + pair.on.skipped > 0 {
        writeln!(
            f,
            "({name}: not sent because {PACED_MAX_IN_FLIGHT} requests were waiting: \
             records off {}, records on {})",
            pair.off.skipped, pair.on.skipped
        )?;
    }
    Ok(())
}

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

impl std::fmt::Display for BenchReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(
            f,
            "switchyard gateway benchmark (request {} bytes, zero-delay scripted upstream)",
            self.request_bytes
        )?;
        writeln!(
            f,
            "{:<34} {:>12} {:>12} {:>10} {:>12}",
            "figure", "direct", "gateway", "ratio", "added"
        )?;
        for (name, pair) in [
            ("latency unary (us)", &self.latency_unary),
            ("latency stream (us)", &self.latency_stream),
            ("chunk forward delay (us)", &self.forward_delay),
        ] {
            write_percentile_rows(f, name, pair.direct, pair.gateway)?;
        }
        for (kind, pair) in [("unary", &self.rps_unary), ("stream", &self.rps_stream)] {
            write_throughput_rows(f, kind, self.concurrency, pair.direct, pair.gateway)?;
        }
        for (name, pair) in [
            (
                format!("RSS MiB, {} open streams", self.streams),
                &self.rss_streams_kib,
            ),
            (
                format!("RSS MiB, {} streams, tiny request", self.streams),
                &self.rss_small_streams_kib,
            ),
        ] {
            write_row(f, &name, mib(pair.direct), mib(pair.gateway), 1, true)?;
        }
        writeln!(
            f,
            "(process RSS before the stream phases: {:.1} MiB; 'added' = gateway - direct)",
            mib(self.rss_idle_kib)
        )?;
        if let Some(p) = &self.gateway_process {
            let per_stream =
                |k: u64| k.saturating_sub(p.idle_kib) as f64 / self.streams.max(1) as f64;
            writeln!(
                f,
                "gateway process alone ({}): idle {:.1} MiB; {} streams tiny request {:.1} MiB \
                 ({:.1} KiB/stream); {} streams 47 KB request {:.1} MiB ({:.1} KiB/stream); \
                 peak {:.1} MiB (bound: <= 64 MiB with 1,000 streams)",
                p.kind,
                mib(p.idle_kib),
                self.streams,
                mib(p.small_streams_kib),
                per_stream(p.small_streams_kib),
                self.streams,
                mib(p.streams_kib),
                per_stream(p.streams_kib),
                mib(p.peak_kib)
            )?;
        }
        if let Some(e) = &self.gateway_process_error {
            writeln!(f, "gateway process alone: not measured ({e})")?;
        }
        writeln!(
            f,
            "Chat Completions ingress (OpenCode 1.18.33's first request, {} bytes; same body \
             direct and through /v1/chat/completions)",
            self.chat.request_bytes
        )?;
        for (name, pair) in [
            ("chat latency unary (us)", &self.chat.latency_unary),
            ("chat latency stream (us)", &self.chat.latency_stream),
        ] {
            write_percentile_rows(f, name, pair.direct, pair.gateway)?;
        }
        writeln!(
            f,
            "tracing off vs on (a chat span per exchange, OTLP/HTTP to a receiver on 127.0.0.1)"
        )?;
        for (name, pair) in [
            ("tracing latency unary (us)", &self.tracing_unary),
            ("tracing latency stream (us)", &self.tracing_stream),
        ] {
            write_percentile_rows(f, name, pair.off, pair.on)?;
        }
        writeln!(
            f,
            "Messages ingress (Claude Code 2.1.332's first request, {} bytes, through \
             /v1/messages; direct: the Chat request it becomes, straight to the upstream)",
            self.messages.request_bytes
        )?;
        for (name, pair) in [
            ("messages latency unary (us)", &self.messages.latency_unary),
            (
                "messages latency stream (us)",
                &self.messages.latency_stream,
            ),
        ] {
            write_percentile_rows(f, name, pair.direct, pair.gateway)?;
        }
        writeln!(
            f,
            "Responses ingress (Codex 0.171.0's first request, {} bytes, through /v1/responses; \
             direct: the Chat request it becomes, straight to the upstream)",
            self.responses.request_bytes
        )?;
        for (name, pair) in [
            (
                "responses latency unary (us)",
                &self.responses.latency_unary,
            ),
            (
                "responses latency stream (us)",
                &self.responses.latency_stream,
            ),
        ] {
            write_percentile_rows(f, name, pair.direct, pair.gateway)?;
        }
        if let Some(one) = &self.one_cpu {
            writeln!(
                f,
                "latency with client, gateway and upstream pinned to CPU {} (the gateway's own \
                 cost: no hop wakes another core)",
                one.cpu
            )?;
            for (name, pair) in [
                ("one CPU: latency unary (us)", &one.unary),
                ("one CPU: latency stream (us)", &one.stream),
            ] {
                write_percentile_rows(f, name, pair.direct, pair.gateway)?;
            }
        }
        if let Some(e) = &self.one_cpu_error {
            writeln!(f, "latency on one CPU: not measured ({e})")?;
        }
        write!(f, "{}", RecordsTable(self))
    }
}

/// The records off/on table of a [`BenchReport`].
struct RecordsTable<'a>(&'a BenchReport);

impl std::fmt::Display for RecordsTable<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let r = &self.0.records;
        writeln!(
            f,
            "records off vs on (gateway with a SQLite recorder, redaction on; each exchange written in flight and ended)"
        )?;
        writeln!(
            f,
            "{:<34} {:>12} {:>12} {:>10} {:>12}",
            "figure", "records off", "records on", "ratio", "added"
        )?;
        for (name, pair) in [
            ("latency unary (us)", &r.latency_unary),
            ("latency stream (us)", &r.latency_stream),
        ] {
            write_percentile_rows(f, name, pair.off, pair.on)?;
        }
        for (kind, pair) in [("unary", &r.rps_unary), ("stream", &r.rps_stream)] {
            write_throughput_rows(f, kind, self.0.concurrency, pair.off, pair.on)?;
        }
        for (kind, pair) in [("unary", &r.paced_unary), ("stream", &r.paced_stream)] {
            if let Some(pair) = pair {
                write_paced_rows(f, kind, self.0.paced_rate, pair)?;
            }
        }
        writeln!(
            f,
            "(records written: {} ops for {} exchanges (an exchange that ends before its \
             in-flight write is built is written once), failed: {}; writer thread CPU per \
             exchange, its own clock: {:.1} us; the rest of 'added' is on the request threads)",
            r.written_ops,
            r.exchanges,
            r.failed_ops,
            micros(r.writer_cpu) / r.exchanges.max(1) as f64
        )?;
        Ok(())
    }
}

/// Resident set size of this process in KiB (Linux `/proc/self/status`), 0 elsewhere.
pub fn rss_kib() -> u64 {
    status_kib("/proc/self/status", "VmRSS:")
}

/// A `/proc/<pid>/status` figure in KiB (`VmRSS:`, `VmHWM:`), 0 when unavailable.
pub fn status_kib(path: &str, field: &str) -> u64 {
    std::fs::read_to_string(path)
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with(field))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(0)
}

/// Environment variable that makes a benchmark binary serve as the gateway child process
/// (value: the upstream base URL); see [`serve_child_if_requested`].
pub const CHILD_ENV: &str = "SWITCHYARD_BENCH_GATEWAY_CHILD";

/// Call first thing in a benchmark binary's `main`. When [`bench()`] started this process as its
/// gateway child ([`CHILD_ENV`] set), it runs a gateway on the given upstream, prints the
/// gateway banner (whose first line names the address) and serves until its stdin closes, then
/// exits. Otherwise it returns at once.
pub fn serve_child_if_requested() {
    let Ok(upstream) = std::env::var(CHILD_ENV) else {
        return;
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("bench gateway child: cannot start a tokio runtime: {e}");
            std::process::exit(1);
        }
    };
    let served = runtime.block_on(async move {
        let mut config = GatewayConfig::new(upstream, BENCH_MODEL);
        config.upstream_key_env = "SWITCHYARD_BENCH_NO_KEY".into();
        let handle = Gateway::start(config).await?;
        use std::io::Write;
        print!("{}", handle.banner(None, BENCH_MODEL));
        std::io::stdout().flush().ok();
        let _ = tokio::task::spawn_blocking(|| {
            use std::io::Read;
            let _ = std::io::stdin().read_to_end(&mut Vec::new());
        })
        .await;
        handle.shutdown().await
    });
    std::process::exit(match served {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("bench gateway child: {e}");
            1
        }
    });
}

/// The gateway as a separate process, so its memory can be read alone.
struct GatewayChild {
    child: std::process::Child,
    base_url: String,
    /// What runs in the child.
    kind: &'static str,
}

impl GatewayChild {
    /// Starts this binary as the gateway, the way `how` says.
    async fn start(upstream_url: &str, how: GatewayProcess) -> Result<Self, BenchError> {
        let exe = std::env::current_exe().map_err(BenchError::Child)?;
        let is_cli = how == GatewayProcess::GatewaySubcommand;
        let mut command = std::process::Command::new(&exe);
        if is_cli {
            command.args([
                "gateway",
                "--upstream-url",
                upstream_url,
                "--upstream-model",
                BENCH_MODEL,
                "--upstream-key-env",
                "SWITCHYARD_BENCH_NO_KEY",
                "--listen",
                "127.0.0.1:0",
                "--no-ingress-key",
            ]);
        } else {
            command.env(CHILD_ENV, upstream_url);
        }
        command
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null());
        let mut child = command.spawn().map_err(BenchError::Child)?;
        let stdout = child
            .stdout
            .take()
            .ok_or_else(|| BenchError::Child(std::io::Error::other("stdout is not piped")))?;
        let line = tokio::task::spawn_blocking(move || {
            use std::io::BufRead;
            std::io::BufReader::new(stdout)
                .lines()
                .map_while(Result::ok)
                .find(|l| l.contains("listening on "))
        })
        .await
        .map_err(|e| BenchError::Request(e.to_string()))?;
        let addr = line
            .and_then(|l| {
                l.rsplit("listening on ")
                    .next()
                    .map(|a| a.trim().to_string())
            })
            .filter(|a| !a.is_empty());
        let Some(addr) = addr else {
            let _ = child.kill();
            let _ = child.wait();
            return Err(BenchError::Request(
                "the gateway child printed no address".into(),
            ));
        };
        Ok(Self {
            child,
            base_url: format!("http://{addr}"),
            kind: if is_cli {
                "switchyard gateway"
            } else {
                "benchmark binary as gateway"
            },
        })
    }

    fn status_path(&self) -> String {
        format!("/proc/{}/status", self.child.id())
    }

    fn rss_kib(&self) -> u64 {
        status_kib(&self.status_path(), "VmRSS:")
    }

    fn peak_kib(&self) -> u64 {
        status_kib(&self.status_path(), "VmHWM:")
    }

    fn stop(mut self) {
        // Closing stdin ends the benchmark child; `switchyard gateway` waits for a signal.
        drop(self.child.stdin.take());
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One way of sending the benchmark request: a URL and the body for it.
#[derive(Clone)]
struct Target {
    url: String,
    body: Bytes,
    /// The records of the gateway behind this target: a throughput series ends only once
    /// every exchange it sent is stored (see [`throughput`]).
    records: Option<Recorder>,
}

impl Target {
    /// A Chat Completions request straight to the upstream at `base_url`.
    fn direct(base_url: &str, chat_body: Bytes) -> Self {
        Self {
            url: format!("{base_url}/chat/completions"),
            body: chat_body,
            records: None,
        }
    }

    /// A Chat Completions request through the gateway's ingress at `base_url`.
    fn chat_via_gateway(base_url: &str, chat_body: Bytes) -> Self {
        Self {
            url: format!("{base_url}/v1/chat/completions"),
            body: chat_body,
            records: None,
        }
    }

    /// A guest request through the gateway's ingress at `base_url` + `path`.
    fn ingress_via_gateway(base_url: &str, path: &str, body: Bytes) -> Self {
        Self {
            url: format!("{base_url}{path}"),
            body,
            records: None,
        }
    }

    /// A Google request through the gateway at `base_url` (`streamGenerateContent?alt=sse` when
    /// `stream`, else `generateContent`).
    fn via_gateway(base_url: &str, stream: bool, google_body: Bytes) -> Self {
        let method = if stream {
            "streamGenerateContent?alt=sse"
        } else {
            "generateContent"
        };
        Self {
            url: format!("{base_url}/v1beta/models/gemini-2.5-flash:{method}"),
            body: google_body,
            records: None,
        }
    }

    /// The same target, whose gateway's records (in `recorder`) a series waits for.
    fn recorded_by(self, recorder: &Recorder) -> Self {
        Self {
            records: Some(recorder.clone()),
            ..self
        }
    }

    /// The same destination with another body.
    fn with_body(&self, body: Bytes) -> Self {
        Self {
            url: self.url.clone(),
            body,
            records: self.records.clone(),
        }
    }

    async fn send(&self, client: &reqwest::Client) -> Result<reqwest::Response, reqwest::Error> {
        client
            .post(&self.url)
            .header("content-type", "application/json")
            .body(self.body.clone())
            .send()
            .await
    }
}

fn percentiles(mut samples: Vec<Duration>) -> Percentiles {
    samples.sort();
    let at = |q: f64| {
        samples
            .get(((samples.len() as f64 - 1.0) * q).round() as usize)
            .copied()
            .unwrap_or_default()
    };
    Percentiles {
        p50: at(0.50),
        p99: at(0.99),
    }
}

async fn send_and_drain(client: &reqwest::Client, target: &Target) -> Result<usize, BenchError> {
    let response = target
        .send(client)
        .await
        .map_err(|e| BenchError::Request(describe(e)))?;
    if !response.status().is_success() {
        let status = response.status();
        let text = response.text().await.unwrap_or_default();
        return Err(BenchError::Request(format!("HTTP {status}: {text}")));
    }
    let mut stream = response.bytes_stream();
    let mut n = 0;
    while let Some(chunk) = stream.next().await {
        n += chunk.map_err(|e| BenchError::Request(e.to_string()))?.len();
    }
    Ok(n)
}

/// Latency of `targets` (e.g. direct, records off, records on), measured in [`LATENCY_ROUNDS`]
/// alternating rounds of `latency_requests / LATENCY_ROUNDS` sequential requests each (after
/// `warmup` requests to each), so a slow patch of the machine lands on all of them alike.
async fn latency_rounds<const N: usize>(
    client: &reqwest::Client,
    targets: [&Target; N],
    options: &BenchOptions,
) -> Result<[Percentiles; N], BenchError> {
    for target in targets {
        for _ in 0..options.warmup {
            send_and_drain(client, target).await?;
        }
    }
    let per_round = options.latency_requests.div_ceil(LATENCY_ROUNDS).max(1);
    let mut samples: [Vec<Duration>; N] =
        std::array::from_fn(|_| Vec::with_capacity(per_round * LATENCY_ROUNDS));
    for _ in 0..LATENCY_ROUNDS {
        for (target, samples) in targets.iter().zip(&mut samples) {
            for _ in 0..per_round {
                let started = Instant::now();
                send_and_drain(client, target).await?;
                samples.push(started.elapsed());
            }
            // Untimed: a backlog of records must not slow the next target's round.
            settle_records(target).await?;
        }
    }
    Ok(samples.map(percentiles))
}

/// Waits until the records of every exchange sent to `target` so far are stored (at once for
/// targets without records).
async fn settle_records(target: &Target) -> Result<(), BenchError> {
    match &target.records {
        Some(records) => {
            // A stream's last record is queued just after its last chunk reached the client.
            tokio::time::sleep(Duration::from_millis(5)).await;
            records
                .flush_async()
                .await
                .map_err(|e| BenchError::Request(format!("records flush: {e}")))
        }
        None => Ok(()),
    }
}

/// Rounds the latency series are split into (see [`latency_rounds`]).
const LATENCY_ROUNDS: usize = 4;

/// Requests/s of a throughput series and the CPU time this process spent per request during it
/// (client, upstream, gateway and record threads together; on a saturated machine the CPU per
/// request is the steadier figure, and its difference between two series is the cost of what
/// differs between them).
#[derive(Debug, Clone, Copy, Default)]
pub struct Throughput {
    pub requests_per_sec: f64,
    /// Process CPU time (user + system, all threads) per request, in microseconds.
    pub cpu_us_per_request: f64,
}

/// CPU time this process has used so far (all threads), zero where the clock is unavailable.
fn process_cpu_time() -> Duration {
    nix::time::clock_gettime(nix::time::ClockId::CLOCK_PROCESS_CPUTIME_ID)
        .map(Duration::from)
        .unwrap_or_default()
}

async fn throughput(
    client: &reqwest::Client,
    target: &Target,
    options: &BenchOptions,
) -> Result<Throughput, BenchError> {
    let done = Arc::new(AtomicU64::new(0));
    let deadline = Instant::now() + options.throughput_duration;
    let started = Instant::now();
    let cpu_started = process_cpu_time();
    let mut workers = Vec::new();
    for _ in 0..options.concurrency {
        let (client, target, done) = (client.clone(), target.clone(), done.clone());
        workers.push(tokio::spawn(async move {
            while Instant::now() < deadline {
                send_and_drain(&client, &target).await?;
                done.fetch_add(1, Ordering::Relaxed);
            }
            Ok::<_, BenchError>(())
        }));
    }
    for w in workers {
        w.await.map_err(|e| BenchError::Request(e.to_string()))??;
    }
    // Records still queued were caused by this series: storing them counts in its time and CPU
    // (else the writer's backlog would be paid for by the series after it).
    settle_records(target).await?;
    let requests = done.load(Ordering::Relaxed).max(1) as f64;
    let cpu = process_cpu_time().saturating_sub(cpu_started);
    Ok(Throughput {
        requests_per_sec: requests / started.elapsed().as_secs_f64(),
        cpu_us_per_request: micros(cpu) / requests,
    })
}

/// Rounds the throughput series are split into, alternating direct, records off and records on,
/// so a slow patch of the machine does not land on one of them only.
const THROUGHPUT_ROUNDS: u32 = 3;

/// Throughput of `direct` and of each gateway target: [`THROUGHPUT_ROUNDS`] rounds, each target
/// for a share of `throughput_duration` per round, figures averaged over rounds.
async fn throughput_rounds<const N: usize>(
    client: &reqwest::Client,
    direct: &Target,
    gateways: [&Target; N],
    options: &BenchOptions,
) -> Result<(Throughput, [Throughput; N]), BenchError> {
    let round = BenchOptions {
        throughput_duration: options.throughput_duration / THROUGHPUT_ROUNDS,
        ..options.clone()
    };
    let add = |sum: &mut Throughput, one: Throughput| {
        sum.requests_per_sec += one.requests_per_sec / f64::from(THROUGHPUT_ROUNDS);
        sum.cpu_us_per_request += one.cpu_us_per_request / f64::from(THROUGHPUT_ROUNDS);
    };
    let (mut direct_sum, mut gateway_sums) = (Throughput::default(), [Throughput::default(); N]);
    for _ in 0..THROUGHPUT_ROUNDS {
        add(&mut direct_sum, throughput(client, direct, &round).await?);
        for (target, sum) in gateways.iter().zip(&mut gateway_sums) {
            add(sum, throughput(client, target, &round).await?);
        }
    }
    Ok((direct_sum, gateway_sums))
}

/// Requests/s the paced records series offer by default: the gateway's own throughput target
/// (3,000 requests/s at concurrency 16), so records on and off are compared at the load the
/// gateway is specified for, below saturation.
pub const PACED_RATE: u32 = 3_000;

/// Requests a paced series lets wait at once; beyond it a due request is not sent and counts
/// as `skipped` (the served rate then falls short of the offered one).
pub const PACED_MAX_IN_FLIGHT: usize = 512;

/// A series at a fixed offered rate (open loop: requests are sent on schedule whether or not
/// earlier ones have been answered), unlike [`Throughput`], which measures a saturated closed
/// loop of `concurrency` clients.
#[derive(Debug, Clone, Copy, Default)]
pub struct Paced {
    /// Requests answered per second, from the first send until the last answer (and, with
    /// records on, until every exchange of the series is stored).
    pub served_per_sec: f64,
    /// Latency of each request, from its send to the end of its response.
    pub latency: Percentiles,
    /// Process CPU time per answered request, in microseconds. Below saturation this is the
    /// cleanest cost figure: records on minus records off is what records cost per exchange.
    pub cpu_us_per_request: f64,
    /// Requests due while [`PACED_MAX_IN_FLIGHT`] were still waiting, so never sent.
    pub skipped: u64,
}

/// What one [`paced`] series measured: its latency as samples (percentiles are taken over all
/// rounds), the rest as figures.
struct PacedRound {
    served_per_sec: f64,
    cpu_us_per_request: f64,
    skipped: u64,
    samples: Vec<Duration>,
}

/// Offers `rate` requests/s to `target` for `duration`: every millisecond (the runtime timer's
/// resolution) the requests due by then are started, each on its own task. Requests that find
/// [`PACED_MAX_IN_FLIGHT`] others waiting are skipped, so an overloaded target shows as a served
/// rate below `rate`, not as an ever-growing queue.
async fn paced(
    client: &reqwest::Client,
    target: &Target,
    rate: u32,
    duration: Duration,
) -> Result<PacedRound, BenchError> {
    let in_flight = Arc::new(tokio::sync::Semaphore::new(PACED_MAX_IN_FLIGHT));
    let mut tasks = tokio::task::JoinSet::new();
    let mut ticks = tokio::time::interval(Duration::from_millis(1));
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
    let millis = u64::try_from(duration.as_millis())
        .unwrap_or(u64::MAX)
        .max(1);
    let (mut due, mut skipped) = (0_u64, 0_u64);
    let started = Instant::now();
    let cpu_started = process_cpu_time();
    for tick in 1..=millis {
        ticks.tick().await;
        let due_by_now = tick * u64::from(rate) / 1_000;
        while due < due_by_now {
            due += 1;
            let Ok(permit) = Arc::clone(&in_flight).try_acquire_owned() else {
                skipped += 1;
                continue;
            };
            let (client, target) = (client.clone(), target.clone());
            tasks.spawn(async move {
                let sent = Instant::now();
                send_and_drain(&client, &target).await?;
                drop(permit);
                Ok::<_, BenchError>(sent.elapsed())
            });
        }
    }
    let mut samples = Vec::with_capacity(tasks.len());
    while let Some(joined) = tasks.join_next().await {
        samples.push(joined.map_err(|e| BenchError::Request(e.to_string()))??);
    }
    // As for the throughput series: storing the series' records counts in its time and CPU.
    settle_records(target).await?;
    let answered = samples.len().max(1) as f64;
    let cpu = process_cpu_time().saturating_sub(cpu_started);
    Ok(PacedRound {
        served_per_sec: samples.len() as f64 / started.elapsed().as_secs_f64(),
        cpu_us_per_request: micros(cpu) / answered,
        skipped,
        samples,
    })
}

/// Records off vs on at `options.paced_rate`: [`THROUGHPUT_ROUNDS`] alternating rounds of
/// [`paced`] series, each a share of `throughput_duration`; rates and CPU averaged over rounds,
/// latency percentiles over all samples.
async fn paced_rounds(
    client: &reqwest::Client,
    off: &Target,
    on: &Target,
    options: &BenchOptions,
) -> Result<OffOn<Paced>, BenchError> {
    let round = options.throughput_duration / THROUGHPUT_ROUNDS;
    let mut sums = [Paced::default(); 2];
    let mut samples: [Vec<Duration>; 2] = Default::default();
    for _ in 0..THROUGHPUT_ROUNDS {
        for ((target, sum), all) in [off, on].into_iter().zip(&mut sums).zip(&mut samples) {
            let mut one = paced(client, target, options.paced_rate, round).await?;
            sum.served_per_sec += one.served_per_sec / f64::from(THROUGHPUT_ROUNDS);
            sum.cpu_us_per_request += one.cpu_us_per_request / f64::from(THROUGHPUT_ROUNDS);
            sum.skipped += one.skipped;
            all.append(&mut one.samples);
        }
    }
    let [mut off, mut on] = sums;
    let [off_samples, on_samples] = samples;
    off.latency = percentiles(off_samples);
    on.latency = percentiles(on_samples);
    Ok(OffOn { off, on })
}

/// Open `n` streams whose upstream holds its second chunk until `gate` releases it, wait until
/// every stream delivered its first chunk, sample RSS, then release them and drain.
async fn rss_with_open_streams(
    client: &reqwest::Client,
    target: &Target,
    n: usize,
    release: &tokio::sync::watch::Sender<bool>,
) -> Result<u64, BenchError> {
    rss_of_with_open_streams(client, target, n, release, rss_kib).await
}

/// [`rss_with_open_streams`] with the resident size read by `rss` (e.g. of a child process).
async fn rss_of_with_open_streams(
    client: &reqwest::Client,
    target: &Target,
    n: usize,
    release: &tokio::sync::watch::Sender<bool>,
    rss: impl Fn() -> u64,
) -> Result<u64, BenchError> {
    // Every task reports once: Ok at its first chunk, or the error that stopped it before that.
    let (first_tx, mut first_rx) = tokio::sync::mpsc::channel::<Result<(), BenchError>>(n.max(1));
    let mut tasks = Vec::with_capacity(n);
    for _ in 0..n {
        let (client, target, first_tx) = (client.clone(), target.clone(), first_tx.clone());
        tasks.push(tokio::spawn(async move {
            let result = async {
                let response = target
                    .send(&client)
                    .await
                    .map_err(|e| BenchError::Request(format!("open stream: {}", describe(e))))?;
                let mut stream = response.bytes_stream();
                let mut signalled = false;
                while let Some(chunk) = stream.next().await {
                    chunk.map_err(|e| BenchError::Request(format!("stream: {}", describe(e))))?;
                    if !signalled {
                        signalled = true;
                        let _ = first_tx.send(Ok(())).await;
                    }
                }
                if !signalled {
                    return Err(BenchError::Request("stream ended without data".into()));
                }
                Ok::<_, BenchError>(())
            }
            .await;
            if let Err(e) = &result {
                let _ = first_tx.send(Err(BenchError::Request(e.to_string()))).await;
            }
            result
        }));
    }
    drop(first_tx);
    let mut failure = None;
    for _ in 0..n {
        match first_rx.recv().await {
            Some(Ok(())) => {}
            Some(Err(e)) => {
                failure = Some(e);
                break;
            }
            None => break,
        }
    }
    let rss = rss();
    release.send_replace(true);
    for t in tasks {
        let _ = t.await;
    }
    release.send_replace(false);
    match failure {
        Some(e) => Err(e),
        None => Ok(rss),
    }
}

/// Time from releasing a held upstream chunk until the client has it.
async fn forward_delay(
    client: &reqwest::Client,
    target: &Target,
    gate: &Gate,
    marker: &[u8],
    samples: usize,
) -> Result<Percentiles, BenchError> {
    let mut out = Vec::with_capacity(samples);
    for _ in 0..samples {
        let response = target
            .send(client)
            .await
            .map_err(|e| BenchError::Request(format!("forward: {}", describe(e))))?;
        let mut stream = response.bytes_stream();
        let mut seen = Vec::new();
        let mut released: Option<Instant> = None;
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(|e| BenchError::Request(e.to_string()))?;
            seen.extend_from_slice(&chunk);
            match released {
                None => {
                    // The first chunk ("a") arrived: release the held one and start the clock.
                    released = Some(Instant::now());
                    gate.open();
                }
                Some(at) => {
                    if seen.windows(marker.len()).any(|w| w == marker) {
                        out.push(at.elapsed());
                        break;
                    }
                }
            }
        }
        while let Some(chunk) = stream.next().await {
            chunk.map_err(|e| BenchError::Request(e.to_string()))?;
        }
    }
    Ok(percentiles(out))
}

/// OpenCode's first request, streamed (as OpenCode sends it) or not.
fn opencode_body(stream: bool) -> Result<Bytes, BenchError> {
    let mut body: serde_json::Value =
        serde_json::from_slice(switchyard_testkit::fixtures::OPENCODE_FIRST_REQUEST)
            .map_err(|e| BenchError::Translate(e.to_string()))?;
    body["model"] = BENCH_MODEL.into();
    if !stream && let Some(object) = body.as_object_mut() {
        object.remove("stream_options");
        object.insert("stream".into(), false.into());
    }
    serde_json::to_vec(&body)
        .map(Bytes::from)
        .map_err(|e| BenchError::Translate(e.to_string()))
}

/// A guest's captured first request (`fixture`, streamed as it sends it, or not), and the Chat
/// request the gateway makes of it with `prepare` (what the direct series sends).
fn guest_bodies(
    fixture: &[u8],
    stream: bool,
    prepare: PrepareGuest,
) -> Result<(Bytes, Bytes), BenchError> {
    let fail = |e: &dyn std::fmt::Display| BenchError::Translate(e.to_string());
    let mut body: serde_json::Value = serde_json::from_slice(fixture).map_err(|e| fail(&e))?;
    body["model"] = BENCH_MODEL.into();
    body["stream"] = stream.into();
    let guest = serde_json::to_vec(&body).map_err(|e| fail(&e))?;
    let options = switchyard_translate::chat_ingress::ChatIngressOptions {
        upstream_model: BENCH_MODEL.into(),
        provider: switchyard_translate::ProviderOptions::default(),
        strip: None,
        convert_on_miss: true,
    };
    let (mut chat, mut report) = prepare(&guest, &options).map_err(|e| fail(&e))?;
    switchyard_translate::plan::apply(
        &mut chat,
        &options.provider,
        &mut report,
        switchyard_translate::plan::Schemas::Guest,
    )
    .map_err(|e| fail(&e))?;
    let chat = serde_json::to_vec(&chat).map_err(|e| fail(&e))?;
    Ok((Bytes::from(guest), Bytes::from(chat)))
}

/// How an ingress prepares a guest body: the Chat request and the report.
type PrepareGuest = fn(
    &[u8],
    &switchyard_translate::chat_ingress::ChatIngressOptions<'_>,
) -> Result<
    (
        switchyard_translate::openai::ChatRequest,
        switchyard_translate::TranslationReport,
    ),
    switchyard_translate::TranslateError,
>;

/// The Messages ingress's preparation (Claude Code).
fn prepare_messages(
    body: &[u8],
    options: &switchyard_translate::chat_ingress::ChatIngressOptions<'_>,
) -> Result<
    (
        switchyard_translate::openai::ChatRequest,
        switchyard_translate::TranslationReport,
    ),
    switchyard_translate::TranslateError,
> {
    use switchyard_translate::messages_ingress::{
        parse_messages_request, prepare_messages_request,
    };
    let prepared = prepare_messages_request(parse_messages_request(body)?, options, None)?;
    Ok((prepared.chat, prepared.report))
}

/// The Responses ingress's preparation (Codex).
fn prepare_responses(
    body: &[u8],
    options: &switchyard_translate::chat_ingress::ChatIngressOptions<'_>,
) -> Result<
    (
        switchyard_translate::openai::ChatRequest,
        switchyard_translate::TranslationReport,
    ),
    switchyard_translate::TranslateError,
> {
    use switchyard_translate::responses_ingress::{
        parse_responses_request, prepare_responses_request,
    };
    let prepared = prepare_responses_request(parse_responses_request(body)?, options, None)?;
    Ok((prepared.chat, prepared.report))
}

fn chat_body(stream: bool) -> Result<Bytes, BenchError> {
    let request = switchyard_translate::parse_request(GEMINI_CLI_FIRST_REQUEST)
        .map_err(|e| BenchError::Translate(e.to_string()))?;
    let translated = switchyard_translate::translate_request(
        &request,
        &TranslateOptions::new(BENCH_MODEL, stream),
    )
    .map_err(|e| BenchError::Translate(e.to_string()))?;
    serde_json::to_vec(&translated.chat)
        .map(Bytes::from)
        .map_err(|e| BenchError::Translate(e.to_string()))
}

async fn gateway_for(upstream: &ChatUpstream) -> Result<GatewayHandle, BenchError> {
    gateway_at(&upstream.base_url(), None).await
}

/// A gateway on the upstream at `upstream_url`, recording to `recorder` when given. Both
/// variants send the same (fake) upstream key, so the recorder has a real secret to redact.
async fn gateway_at(
    upstream_url: &str,
    recorder: Option<Recorder>,
) -> Result<GatewayHandle, BenchError> {
    let mut config = GatewayConfig::new(upstream_url, BENCH_MODEL);
    config.upstream_key_env = "SWITCHYARD_BENCH_NO_KEY".into();
    let deps = GatewayDeps {
        recorder: Some(recorder.unwrap_or_else(Recorder::disabled)),
        upstream_key: Some(BENCH_UPSTREAM_KEY.into()),
        run_id: None,
        binding: None,
        telemetry: None,
    };
    Ok(Gateway::start_with(config, deps).await?)
}

/// Upstream key the bench gateways send (a fake; the records-on gateway redacts it).
const BENCH_UPSTREAM_KEY: &str = "sk-switchyard-bench-0123456789abcdef";

fn text_stream_reply() -> Reply {
    Reply::Stream(StreamReply::new(vec![
        StreamEvent::json(chunk::role()),
        StreamEvent::json(chunk::text("Hello")),
        StreamEvent::json(chunk::text(" world")),
        StreamEvent::json(chunk::finish("stop")),
        StreamEvent::json(chunk::usage(12_000, 2)),
    ]))
}

/// A streamed answer whose second text chunk ("b") waits for `gate`.
fn held_stream_reply(gate: &Gate) -> Reply {
    Reply::Stream(StreamReply::new(vec![
        StreamEvent::json(chunk::role()),
        StreamEvent::json(chunk::text("a")),
        StreamEvent::json(chunk::text("b")).after_gate(gate),
        StreamEvent::json(chunk::finish("stop")),
        StreamEvent::json(chunk::usage(12_000, 2)),
    ]))
}

/// The benchmark's HTTP client (every connection kept for reuse).
fn bench_client() -> Result<reqwest::Client, BenchError> {
    reqwest::Client::builder()
        .tcp_nodelay(true)
        .pool_max_idle_per_host(usize::MAX)
        .build()
        .map_err(|e| BenchError::Request(e.to_string()))
}

/// An upstream script answering every request with `reply`, keeping and logging nothing.
fn quiet(reply: Reply) -> Script {
    Script::always(reply)
        .record_bodies(false)
        .log_requests(false)
}

/// Run the whole benchmark (about half a minute with the defaults).
pub async fn bench(options: BenchOptions) -> Result<BenchReport, BenchError> {
    switchyard_gateway::upstream::install_tls_provider();
    let client = bench_client()?;

    let unary_upstream = ChatUpstream::start(quiet(Reply::completion_text("Hello world")))
        .await
        .map_err(BenchError::Upstream)?;
    let stream_upstream = ChatUpstream::start(quiet(text_stream_reply()))
        .await
        .map_err(BenchError::Upstream)?;
    let unary_gateway = gateway_for(&unary_upstream).await?;
    let stream_gateway = gateway_for(&stream_upstream).await?;
    // Records on: a real SQLite store in a temporary directory, or the (empty) PostgreSQL
    // database `SWITCHYARD_BENCH_RECORDS` names; shared by both gateways.
    let records_dir = tempfile::tempdir().map_err(BenchError::Records)?;
    let records = match std::env::var(RECORDS_ENV) {
        Ok(value) if !value.is_empty() => switchyard_records::StoreSpec::parse(&value)
            .map_err(|e| BenchError::Request(format!("{RECORDS_ENV}: {e}")))?,
        _ => switchyard_records::StoreSpec::Sqlite(records_dir.path().to_path_buf()),
    };
    let recorder = Recorder::open(&records, Redactor::default())
        .map_err(|e| BenchError::Request(format!("cannot open bench records {records}: {e}")))?;
    let unary_recorded = gateway_at(&unary_upstream.base_url(), Some(recorder.clone())).await?;
    let stream_recorded = gateway_at(&stream_upstream.base_url(), Some(recorder.clone())).await?;
    let google = Bytes::from_static(GEMINI_CLI_FIRST_REQUEST);
    let unary_direct = Target::direct(&unary_upstream.base_url(), chat_body(false)?);
    let chat_stream_body = chat_body(true)?;
    let stream_direct = Target::direct(&stream_upstream.base_url(), chat_stream_body.clone());
    let unary_via = Target::via_gateway(&unary_gateway.base_url(), false, google.clone());
    let stream_via = Target::via_gateway(&stream_gateway.base_url(), true, google.clone());
    let unary_recorded_via = Target::via_gateway(&unary_recorded.base_url(), false, google.clone())
        .recorded_by(&recorder);
    let stream_recorded_via =
        Target::via_gateway(&stream_recorded.base_url(), true, google.clone())
            .recorded_by(&recorder);

    let mut report = BenchReport {
        request_bytes: GEMINI_CLI_FIRST_REQUEST.len(),
        concurrency: options.concurrency,
        streams: options.streams,
        paced_rate: options.paced_rate,
        ..BenchReport::default()
    };
    // Each figure: direct, gateway (records off), gateway (records on), in alternating rounds.
    eprintln!("bench: latency...");
    let [direct, off, on] = latency_rounds(
        &client,
        [&unary_direct, &unary_via, &unary_recorded_via],
        &options,
    )
    .await?;
    report.latency_unary = Pair {
        direct,
        gateway: off,
    };
    report.records.latency_unary = OffOn { off, on };
    let [direct, off, on] = latency_rounds(
        &client,
        [&stream_direct, &stream_via, &stream_recorded_via],
        &options,
    )
    .await?;
    report.latency_stream = Pair {
        direct,
        gateway: off,
    };
    report.records.latency_stream = OffOn { off, on };
    if options.one_cpu {
        eprintln!("bench: latency on one CPU...");
        let one_cpu = tokio::task::spawn_blocking({
            let options = options.clone();
            move || one_cpu::one_cpu_latency(&options)
        })
        .await
        .map_err(|e| BenchError::Pin(e.to_string()))
        .and_then(|measured| measured);
        match one_cpu {
            Ok(one_cpu) => report.one_cpu = Some(one_cpu),
            Err(e) => report.one_cpu_error = Some(e.to_string()),
        }
    }
    eprintln!("bench: throughput...");
    let (unary_direct_rps, [unary_off, unary_on]) = throughput_rounds(
        &client,
        &unary_direct,
        [&unary_via, &unary_recorded_via],
        &options,
    )
    .await?;
    report.rps_unary = Pair {
        direct: unary_direct_rps,
        gateway: unary_off,
    };
    report.records.rps_unary = OffOn {
        off: unary_off,
        on: unary_on,
    };
    let (stream_direct_rps, [stream_off, stream_on]) = throughput_rounds(
        &client,
        &stream_direct,
        [&stream_via, &stream_recorded_via],
        &options,
    )
    .await?;
    report.rps_stream = Pair {
        direct: stream_direct_rps,
        gateway: stream_off,
    };
    report.records.rps_stream = OffOn {
        off: stream_off,
        on: stream_on,
    };
    if options.paced_rate > 0 {
        eprintln!("bench: records at {} requests/s...", options.paced_rate);
        report.records.paced_unary =
            Some(paced_rounds(&client, &unary_via, &unary_recorded_via, &options).await?);
        report.records.paced_stream =
            Some(paced_rounds(&client, &stream_via, &stream_recorded_via, &options).await?);
    }
    eprintln!("bench: Chat Completions ingress (OpenCode's request)...");
    report.chat.request_bytes = switchyard_testkit::fixtures::OPENCODE_FIRST_REQUEST.len();
    for (stream, upstream, gateway) in [
        (false, &unary_upstream, &unary_gateway),
        (true, &stream_upstream, &stream_gateway),
    ] {
        let body = opencode_body(stream)?;
        let direct = Target::direct(&upstream.base_url(), body.clone());
        let via = Target::chat_via_gateway(&gateway.base_url(), body);
        let [direct, gateway] = latency_rounds(&client, [&direct, &via], &options).await?;
        let pair = Pair { direct, gateway };
        if stream {
            report.chat.latency_stream = pair;
        } else {
            report.chat.latency_unary = pair;
        }
    }
    eprintln!("bench: tracing off vs on...");
    let receiver = switchyard_testkit::otlp::OtlpReceiver::start()
        .await
        .map_err(BenchError::Upstream)?;
    let telemetry =
        switchyard_telemetry::Telemetry::start(&switchyard_telemetry::TelemetryConfig {
            endpoint: Some(format!("{}/v1/traces", receiver.url())),
            service_name: "switchyard-bench".into(),
            content: false,
        })
        .map_err(BenchError::Request)?;
    for (stream, upstream, plain) in [
        (false, &unary_upstream, &unary_gateway),
        (true, &stream_upstream, &stream_gateway),
    ] {
        let mut config = GatewayConfig::new(upstream.base_url(), BENCH_MODEL);
        config.upstream_key_env = "SWITCHYARD_BENCH_NO_KEY".into();
        let traced = Gateway::start_with(
            config,
            GatewayDeps {
                recorder: Some(Recorder::disabled()),
                upstream_key: Some(BENCH_UPSTREAM_KEY.into()),
                telemetry: telemetry.clone().map(|t| (t, None)),
                ..GatewayDeps::default()
            },
        )
        .await?;
        let off = Target::via_gateway(&plain.base_url(), stream, google.clone());
        let on = Target::via_gateway(&traced.base_url(), stream, google.clone());
        let [off, on] = latency_rounds(&client, [&off, &on], &options).await?;
        let pair = OffOn { off, on };
        if stream {
            report.tracing_stream = pair;
        } else {
            report.tracing_unary = pair;
        }
        traced.shutdown().await?;
    }
    if let Some(telemetry) = telemetry {
        let _ = tokio::task::spawn_blocking(move || telemetry.shutdown()).await;
    }
    for (name, fixture, path, prepare, report) in [
        (
            "Messages ingress (Claude Code's request)",
            switchyard_testkit::fixtures::CLAUDE_CODE_FIRST_REQUEST,
            "/v1/messages?beta=true",
            prepare_messages as PrepareGuest,
            &mut report.messages,
        ),
        (
            "Responses ingress (Codex's request)",
            switchyard_testkit::fixtures::CODEX_FIRST_REQUEST,
            "/v1/responses",
            prepare_responses as PrepareGuest,
            &mut report.responses,
        ),
    ] {
        eprintln!("bench: {name}...");
        report.request_bytes = fixture.len();
        for (stream, upstream, gateway) in [
            (false, &unary_upstream, &unary_gateway),
            (true, &stream_upstream, &stream_gateway),
        ] {
            let (guest, chat) = guest_bodies(fixture, stream, prepare)?;
            let direct = Target::direct(&upstream.base_url(), chat);
            let via = Target::ingress_via_gateway(&gateway.base_url(), path, guest);
            let [direct, gateway] = latency_rounds(&client, [&direct, &via], &options).await?;
            let pair = Pair { direct, gateway };
            if stream {
                report.latency_stream = pair;
            } else {
                report.latency_unary = pair;
            }
        }
    }

    for handle in [
        unary_gateway,
        stream_gateway,
        unary_recorded,
        stream_recorded,
    ] {
        handle.shutdown().await?;
    }
    let flushed = recorder.flush_async().await;
    let stats = recorder.stats();
    report.records.written_ops = stats.written_ops;
    report.records.failed_ops = stats.failed_ops;
    report.records.exchanges = records
        .open_existing()
        .and_then(|store| store.exchange_count(switchyard_records::ExchangeFilter::All))
        .map_err(|e| BenchError::Request(format!("counting the recorded exchanges: {e}")))?;
    report.records.writer_cpu = stats.writer_cpu;
    if let Err(e) = flushed {
        eprintln!("bench: records flush reported: {e}");
    }
    drop(recorder);
    drop(records_dir);

    eprintln!("bench: chunk forwarding...");
    // Chunk forwarding delay: the upstream holds "b" until the client opens the gate.
    let gate = Gate::new();
    let forward_upstream = ChatUpstream::start(quiet(held_stream_reply(&gate)))
        .await
        .map_err(BenchError::Upstream)?;
    let forward_gateway = gateway_for(&forward_upstream).await?;
    let fwd_direct = Target::direct(&forward_upstream.base_url(), chat_stream_body.clone());
    let fwd_via = Target::via_gateway(&forward_gateway.base_url(), true, google.clone());
    report.forward_delay = Pair {
        direct: forward_delay(
            &client,
            &fwd_direct,
            &gate,
            br#""content":"b""#,
            options.forward_samples,
        )
        .await?,
        gateway: forward_delay(
            &client,
            &fwd_via,
            &gate,
            br#""text":"b""#,
            options.forward_samples,
        )
        .await?,
    };
    forward_gateway.shutdown().await?;

    eprintln!("bench: memory...");
    // Memory with N open streams: each upstream stream holds its second chunk until released.
    let (release, released) = tokio::sync::watch::channel(false);
    let hold = Reply::Dynamic(Arc::new(move |_req| {
        let mut released = released.clone();
        let gate = Gate::new();
        let opener = gate.clone();
        tokio::spawn(async move {
            let _ = released.wait_for(|r| *r).await;
            opener.open();
        });
        held_stream_reply(&gate)
    }));
    let memory_upstream = ChatUpstream::start(quiet(hold))
        .await
        .map_err(BenchError::Upstream)?;
    let memory_gateway = gateway_for(&memory_upstream).await?;
    let mem_direct = Target::direct(&memory_upstream.base_url(), chat_stream_body);
    let mem_via = Target::via_gateway(&memory_gateway.base_url(), true, google.clone());
    report.rss_idle_kib = rss_kib();
    // Tiny requests first, so their figures are not inflated by memory the big phase leaves in
    // the allocator.
    let tiny_google =
        Bytes::from_static(br#"{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}"#);
    let tiny_chat = Bytes::from_static(
        br#"{"model":"bench-model","messages":[{"role":"user","content":"hi"}],"stream":true,"stream_options":{"include_usage":true}}"#,
    );
    report.rss_small_streams_kib = Pair {
        direct: rss_with_open_streams(
            &client,
            &mem_direct.with_body(tiny_chat),
            options.streams,
            &release,
        )
        .await?,
        gateway: rss_with_open_streams(
            &client,
            &mem_via.with_body(tiny_google.clone()),
            options.streams,
            &release,
        )
        .await?,
    };
    report.rss_streams_kib = Pair {
        direct: rss_with_open_streams(&client, &mem_direct, options.streams, &release).await?,
        gateway: rss_with_open_streams(&client, &mem_via, options.streams, &release).await?,
    };
    memory_gateway.shutdown().await?;

    if options.gateway_process != GatewayProcess::Skip {
        eprintln!("bench: memory of the gateway process...");
        let child =
            match GatewayChild::start(&memory_upstream.base_url(), options.gateway_process).await {
                Ok(child) => child,
                Err(e) => {
                    report.gateway_process_error = Some(e.to_string());
                    return Ok(report);
                }
            };
        let via_child = |body: Bytes| Target::via_gateway(&child.base_url, true, body);
        let measured = async {
            // A few exchanges first, so one-time allocations (image cache, connection
            // pool, runtime) are in the idle figure.
            for _ in 0..3 {
                rss_of_with_open_streams(&client, &via_child(google.clone()), 4, &release, || 0)
                    .await?;
            }
            let idle_kib = child.rss_kib();
            let small_streams_kib = rss_of_with_open_streams(
                &client,
                &via_child(tiny_google.clone()),
                options.streams,
                &release,
                || child.rss_kib(),
            )
            .await?;
            let streams_kib = rss_of_with_open_streams(
                &client,
                &via_child(google.clone()),
                options.streams,
                &release,
                || child.rss_kib(),
            )
            .await?;
            Ok::<_, BenchError>(ProcessMemory {
                kind: child.kind.to_string(),
                idle_kib,
                small_streams_kib,
                streams_kib,
                peak_kib: child.peak_kib(),
            })
        }
        .await;
        child.stop();
        match measured {
            Ok(memory) => report.gateway_process = Some(memory),
            Err(e) => report.gateway_process_error = Some(e.to_string()),
        }
    }
    Ok(report)
}
