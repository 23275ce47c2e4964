//! The latency series again with every party on one CPU: what the gateway itself adds at
//! concurrency 1, without the machine's cost of waking a thread on another core.
//!
//! In the main latency series the kernel places the client, the gateway and the upstream on
//! either core, as it would in a deployment. An exchange through the gateway makes four socket
//! hops instead of two, and a hop whose reader sleeps on the other, idle core costs what waking
//! that core costs. On a VM whose idle vCPUs halt at once (this machine: `haltpoll` with
//! `guest_halt_poll_ns = 0`) that is tens of microseconds per hop, and it dominates the added
//! figure. Here the client, the gateway and the upstream each run on runtimes of their own
//! threads, as separate processes would (the gateway on a two-worker runtime, as `switchyard
//! gateway` runs), all pinned to the same CPU, so every hop is a context switch on one core.
//! The difference between the two sets of figures is the machine's, not the gateway's.

use std::future::Future;

use bytes::Bytes;
use nix::sched::{CpuSet, sched_getaffinity, sched_setaffinity};
use nix::unistd::Pid;
use switchyard_testkit::chat_upstream::{ChatUpstream, Reply};
use tokio::sync::oneshot;

use super::{
    BenchError, BenchOptions, Pair, Percentiles, Target, bench_client, chat_body, gateway_at,
    latency_rounds, quiet, text_stream_reply,
};
use switchyard_gateway::GatewayHandle;
use switchyard_testkit::fixtures::GEMINI_CLI_FIRST_REQUEST;

/// Latency with the client, the gateway and the upstream pinned to one CPU.
#[derive(Debug, Clone, Copy, Default)]
pub struct OneCpuLatency {
    /// The CPU every party ran on.
    pub cpu: usize,
    pub unary: Pair<Percentiles>,
    pub stream: Pair<Percentiles>,
}

/// Runs the unary and streaming latency series (direct and through a records-off gateway) with
/// every party pinned to the first CPU this thread may run on. Blocks; call it off the runtime.
pub(super) fn one_cpu_latency(options: &BenchOptions) -> Result<OneCpuLatency, BenchError> {
    let cpu = first_allowed_cpu()?;
    let (unary_chat, stream_chat) = (chat_body(false)?, chat_body(true)?);
    let ([unary_upstream, stream_upstream], upstream) = Server::start(
        "bench-upstream",
        cpu,
        Runtime::OneThread,
        |ready, stop| async move {
            let started = async {
                let unary = ChatUpstream::start(quiet(Reply::completion_text("Hello world")));
                let stream = ChatUpstream::start(quiet(text_stream_reply()));
                Ok::<_, std::io::Error>((unary.await?, stream.await?))
            };
            let (unary, stream) = match started.await {
                Ok(upstreams) => upstreams,
                Err(e) => return drop(ready.send(Err(BenchError::Upstream(e)))),
            };
            let _ = ready.send(Ok([unary.base_url(), stream.base_url()]));
            let _ = stop.await;
            unary.stop().await;
            stream.stop().await;
        },
    )?;
    let gateways = Server::start("bench-gateway", cpu, Runtime::TwoWorkers, {
        let (unary_upstream, stream_upstream) = (unary_upstream.clone(), stream_upstream.clone());
        |ready, stop| async move {
            let started = async {
                Ok::<_, BenchError>([
                    gateway_at(&unary_upstream, None).await?,
                    gateway_at(&stream_upstream, None).await?,
                ])
            };
            let gateways = match started.await {
                Ok(gateways) => gateways,
                Err(e) => return drop(ready.send(Err(e))),
            };
            let _ = ready.send(Ok(gateways.each_ref().map(GatewayHandle::base_url)));
            let _ = stop.await;
            for gateway in gateways {
                let _ = gateway.shutdown().await;
            }
        }
    });
    let ([unary_gateway, stream_gateway], gateways) = match gateways {
        Ok(started) => started,
        Err(e) => {
            upstream.stop();
            return Err(e);
        }
    };

    let google = Bytes::from_static(GEMINI_CLI_FIRST_REQUEST);
    let unary = [
        Target::direct(&unary_upstream, unary_chat),
        Target::via_gateway(&unary_gateway, false, google.clone()),
    ];
    let stream = [
        Target::direct(&stream_upstream, stream_chat),
        Target::via_gateway(&stream_gateway, true, google),
    ];
    let options = options.clone();
    let measured = run_on("bench-client", cpu, move || async move {
        let client = bench_client()?;
        let [direct, gateway] = latency_rounds(&client, [&unary[0], &unary[1]], &options).await?;
        let unary = Pair { direct, gateway };
        let [direct, gateway] = latency_rounds(&client, [&stream[0], &stream[1]], &options).await?;
        Ok((unary, Pair { direct, gateway }))
    });
    gateways.stop();
    upstream.stop();
    let (unary, stream) = measured?;
    Ok(OneCpuLatency { cpu, unary, stream })
}

/// The lowest-numbered CPU this thread may run on.
fn first_allowed_cpu() -> Result<usize, BenchError> {
    let allowed = sched_getaffinity(Pid::from_raw(0)).map_err(pin_error)?;
    (0..CpuSet::count())
        .find(|&cpu| allowed.is_set(cpu).unwrap_or(false))
        .ok_or_else(|| BenchError::Pin("no CPU in this thread's affinity mask".into()))
}

fn pin_error(e: nix::Error) -> BenchError {
    BenchError::Pin(e.to_string())
}

/// The runtime a party's thread runs.
#[derive(Clone, Copy)]
enum Runtime {
    /// A current-thread runtime (the client, the upstream).
    OneThread,
    /// Two worker threads (the gateway, as `switchyard gateway` runs it). They are started from
    /// the pinned thread and inherit its CPU.
    TwoWorkers,
}

/// A server task on a thread of its own, pinned to one CPU, running until [`Server::stop`].
struct Server {
    stop: oneshot::Sender<()>,
    thread: std::thread::JoinHandle<()>,
}

impl Server {
    /// Starts `task` on a pinned thread and waits until it reports itself ready (with what
    /// clients need, e.g. its URLs) or failed. The task ends once its stop receiver fires.
    fn start<T, F, Fut>(
        name: &str,
        cpu: usize,
        runtime: Runtime,
        task: F,
    ) -> Result<(T, Self), BenchError>
    where
        T: Send + 'static,
        F: FnOnce(oneshot::Sender<Result<T, BenchError>>, oneshot::Receiver<()>) -> Fut
            + Send
            + 'static,
        Fut: Future<Output = ()>,
    {
        let (ready_tx, ready_rx) = oneshot::channel();
        let (stop, stopped) = oneshot::channel();
        let thread = spawn_pinned(name, cpu, runtime, ready_tx, move |ready| {
            task(ready, stopped)
        })?;
        let ready = ready_rx
            .blocking_recv()
            .unwrap_or_else(|_| Err(BenchError::Pin(format!("{name} ended before it started"))));
        let server = Self { stop, thread };
        match ready {
            Ok(ready) => Ok((ready, server)),
            Err(e) => {
                server.stop();
                Err(e)
            }
        }
    }

    /// Tells the task to end and waits for its thread.
    fn stop(self) {
        let _ = self.stop.send(());
        let _ = self.thread.join();
    }
}

/// Runs the future `make` returns to its end on a current-thread runtime on a thread pinned to
/// `cpu`, and returns its output.
fn run_on<R, F, Fut>(name: &str, cpu: usize, make: F) -> Result<R, BenchError>
where
    R: Send + 'static,
    F: FnOnce() -> Fut + Send + 'static,
    Fut: Future<Output = Result<R, BenchError>>,
{
    let (done_tx, done_rx) = oneshot::channel();
    let thread = spawn_pinned(name, cpu, Runtime::OneThread, done_tx, |done| async move {
        let _ = done.send(make().await);
    })?;
    let _ = thread.join();
    done_rx
        .blocking_recv()
        .unwrap_or_else(|_| Err(BenchError::Pin(format!("{name} ended without a result"))))
}

/// Starts a thread that pins itself to `cpu`, builds `runtime` and runs `task(report)` on it;
/// when pinning or building fails, the error goes to `report` instead.
fn spawn_pinned<T, F, Fut>(
    name: &str,
    cpu: usize,
    runtime: Runtime,
    report: oneshot::Sender<Result<T, BenchError>>,
    task: F,
) -> Result<std::thread::JoinHandle<()>, BenchError>
where
    T: Send + 'static,
    F: FnOnce(oneshot::Sender<Result<T, BenchError>>) -> Fut + Send + 'static,
    Fut: Future<Output = ()>,
{
    std::thread::Builder::new()
        .name(name.into())
        .spawn(move || match pin_to(cpu).and_then(|()| build(runtime)) {
            Ok(runtime) => runtime.block_on(task(report)),
            Err(e) => drop(report.send(Err(e))),
        })
        .map_err(|e| BenchError::Pin(format!("cannot start a thread: {e}")))
}

/// Pins the calling thread (and the threads it starts later) to `cpu`.
fn pin_to(cpu: usize) -> Result<(), BenchError> {
    let mut set = CpuSet::new();
    set.set(cpu).map_err(pin_error)?;
    sched_setaffinity(Pid::from_raw(0), &set).map_err(pin_error)
}

fn build(runtime: Runtime) -> Result<tokio::runtime::Runtime, BenchError> {
    let mut builder = match runtime {
        Runtime::OneThread => tokio::runtime::Builder::new_current_thread(),
        Runtime::TwoWorkers => {
            let mut builder = tokio::runtime::Builder::new_multi_thread();
            builder.worker_threads(2);
            builder
        }
    };
    builder
        .enable_all()
        .build()
        .map_err(|e| BenchError::Pin(format!("cannot build a runtime: {e}")))
}
