//! `switchyard-dev bench endless`: the gateway's memory while an upstream streams without end.
//!
//! A scripted upstream answers every request with the same small text delta for ever (a model
//! that never stops, `Reply::Endless`). Guests keep asking through an in-process gateway with
//! records on, until the upstream has streamed the asked-for total; each answer is cut at
//! `limits.max_answer_bytes`. Reported: the bytes streamed, the answers, and the process's
//! resident memory before and at its peak (`VmHWM`). The control run (`--control`) lifts the
//! answer and record bounds and streams the same total as one answer, in the same process
//! afterwards, so its peak is what the bounds prevent.

use std::time::{Duration, Instant};

use futures_util::StreamExt;
use serde_json::json;
use switchyard_gateway::{Gateway, GatewayConfig};
use switchyard_testkit::chat_upstream::{ChatUpstream, Reply, Script, chunk};

use crate::gateway::status_kib;

/// What to run.
#[derive(Debug, Clone)]
pub struct EndlessOptions {
    /// Bytes the upstream streams in all.
    pub total_bytes: u64,
    /// Guests asking at once.
    pub concurrency: usize,
    /// Bytes of text in each upstream event (a real model sends a few per event).
    pub delta_bytes: usize,
    /// Also run the unbounded control.
    pub control: bool,
    /// Record every exchange (a SQLite store in a temporary directory).
    pub records: bool,
}

/// One series' figures.
#[derive(Debug, Clone)]
pub struct EndlessSeries {
    pub streamed_bytes: u64,
    pub answers: u64,
    pub guest_bytes: u64,
    pub elapsed: Duration,
    pub peak_rss_kib: u64,
}

/// The probe's report.
#[derive(Debug, Clone)]
pub struct EndlessReport {
    pub options: EndlessOptions,
    pub rss_before_kib: u64,
    pub bounded: EndlessSeries,
    pub control: Option<EndlessSeries>,
}

/// Runs the probe.
pub async fn probe(options: EndlessOptions) -> Result<EndlessReport, Box<dyn std::error::Error>> {
    let rss_before_kib = status_kib("/proc/self/status", "VmRSS:");
    let bounded = series(&options, |_| {}, options.concurrency).await?;
    let control = if options.control {
        let unbounded = |c: &mut GatewayConfig| {
            c.limits.max_answer_bytes = usize::MAX;
            c.limits.max_answer_tool_calls = usize::MAX;
            c.limits.max_recorded_stream_bytes = usize::MAX;
        };
        Some(series(&options, unbounded, 1).await?)
    } else {
        None
    };
    Ok(EndlessReport {
        options,
        rss_before_kib,
        bounded,
        control,
    })
}

async fn series(
    options: &EndlessOptions,
    configure: impl FnOnce(&mut GatewayConfig),
    concurrency: usize,
) -> Result<EndlessSeries, Box<dyn std::error::Error>> {
    let delta = chunk::text(&"x".repeat(options.delta_bytes.max(1)));
    let upstream =
        std::sync::Arc::new(ChatUpstream::start(Script::always(Reply::Endless(delta))).await?);
    let records = tempfile::tempdir()?;
    let mut config = GatewayConfig::new(upstream.base_url(), "scripted-model");
    if options.records {
        config.records_dir = Some(records.path().to_path_buf());
    }
    config.upstream_key_env = "SWITCHYARD_BENCH_NO_KEY".into();
    configure(&mut config);
    let gateway = Gateway::start(config).await?;
    let url = format!(
        "{}/v1beta/models/m:streamGenerateContent?alt=sse",
        gateway.base_url()
    );
    let request = json!({"contents": [{"role": "user", "parts": [{"text": "go on"}]}]});
    let client = reqwest::Client::new();
    let started = Instant::now();
    let answers = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let guest_bytes = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let total = options.total_bytes;
    let guests: Vec<_> = (0..concurrency.max(1))
        .map(|_| {
            let (client, url, request) = (client.clone(), url.clone(), request.clone());
            let (answers, guest_bytes) = (answers.clone(), guest_bytes.clone());
            let upstream = upstream.clone();
            tokio::spawn(async move {
                while upstream.endless_bytes() < total {
                    let Ok(response) = client.post(&url).json(&request).send().await else {
                        return;
                    };
                    let mut body = response.bytes_stream();
                    while let Some(Ok(piece)) = body.next().await {
                        guest_bytes
                            .fetch_add(piece.len() as u64, std::sync::atomic::Ordering::Relaxed);
                        if upstream.endless_bytes() >= total {
                            break;
                        }
                    }
                    answers.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                }
            })
        })
        .collect();
    for guest in guests {
        let _ = guest.await;
    }
    let elapsed = started.elapsed();
    let peak_rss_kib = status_kib("/proc/self/status", "VmHWM:");
    gateway.shutdown().await?;
    Ok(EndlessSeries {
        streamed_bytes: upstream.endless_bytes(),
        answers: answers.load(std::sync::atomic::Ordering::Relaxed),
        guest_bytes: guest_bytes.load(std::sync::atomic::Ordering::Relaxed),
        elapsed,
        peak_rss_kib,
    })
}

impl std::fmt::Display for EndlessReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mib = |b: u64| b as f64 / (1024.0 * 1024.0);
        writeln!(
            f,
            "endless upstream: {:.0} MiB in {}-byte text deltas, records {}",
            mib(self.options.total_bytes),
            self.options.delta_bytes,
            if self.options.records { "on" } else { "off" }
        )?;
        writeln!(
            f,
            "process RSS before: {:.1} MiB",
            mib(self.rss_before_kib * 1024)
        )?;
        let mut line = |name: &str, s: &EndlessSeries| {
            writeln!(
                f,
                "{name:<9} streamed {:>7.1} MiB in {:>6.1} s, {:>4} answers, {:>7.1} MiB to guests, \
                 peak RSS {:>7.1} MiB",
                mib(s.streamed_bytes),
                s.elapsed.as_secs_f64(),
                s.answers,
                mib(s.guest_bytes),
                mib(s.peak_rss_kib * 1024)
            )
        };
        line("bounded", &self.bounded)?;
        if let Some(control) = &self.control {
            line("control", control)?;
            writeln!(
                f,
                "(control: answer and record bounds lifted, one answer; peak is the process's \
                 since start)"
            )?;
        }
        Ok(())
    }
}
