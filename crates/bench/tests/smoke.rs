//! The benchmark function runs end to end with tiny settings and measures something in every
//! series (numbers themselves are for `switchyard-dev bench gateway`, not for tests).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use switchyard_bench::gateway::{BenchOptions, GatewayProcess, Throughput, bench};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bench_runs_every_series() {
    let report = bench(BenchOptions {
        latency_requests: 20,
        warmup: 2,
        throughput_duration: Duration::from_millis(200),
        concurrency: 4,
        streams: 20,
        paced_rate: 300,
        forward_samples: 10,
        // This test binary cannot serve as the gateway child.
        gateway_process: GatewayProcess::Skip,
        one_cpu: true,
    })
    .await
    .expect("bench runs");
    assert!(report.request_bytes > 40_000);
    assert!(
        report.chat.request_bytes > 20_000,
        "OpenCode's first request"
    );
    assert!(
        report.responses.request_bytes > 20_000,
        "Codex's first request"
    );
    for pair in [
        report.latency_unary,
        report.latency_stream,
        report.forward_delay,
        report.chat.latency_unary,
        report.chat.latency_stream,
        report.messages.latency_unary,
        report.responses.latency_stream,
    ] {
        assert!(pair.direct.p50 > Duration::ZERO && pair.gateway.p50 > Duration::ZERO);
        assert!(pair.direct.p99 >= pair.direct.p50 && pair.gateway.p99 >= pair.gateway.p50);
    }
    let one_cpu = report
        .one_cpu
        .unwrap_or_else(|| panic!("the one-CPU series ran: {:?}", report.one_cpu_error));
    for pair in [one_cpu.unary, one_cpu.stream] {
        assert!(pair.direct.p50 > Duration::ZERO && pair.gateway.p50 > Duration::ZERO);
        assert!(pair.direct.p99 >= pair.direct.p50 && pair.gateway.p99 >= pair.gateway.p50);
    }
    let measured = |t: Throughput| t.requests_per_sec > 0.0 && t.cpu_us_per_request > 0.0;
    for pair in [report.rps_unary, report.rps_stream] {
        assert!(measured(pair.direct) && measured(pair.gateway), "{pair:?}");
        // The gateway series runs the gateway besides the client and upstream.
        assert!(pair.gateway.cpu_us_per_request > pair.direct.cpu_us_per_request);
    }
    assert!(report.rss_streams_kib.direct > 0 && report.rss_streams_kib.gateway > 0);
    assert!(report.rss_small_streams_kib.gateway > 0);
    let records = &report.records;
    assert!(records.latency_unary.on.p50 > Duration::ZERO);
    assert!(records.latency_stream.on.p99 >= records.latency_stream.on.p50);
    assert!(measured(records.rps_unary.on) && measured(records.rps_stream.on));
    for paced in [records.paced_unary, records.paced_stream] {
        let paced = paced.expect("the paced series ran");
        for one in [paced.off, paced.on] {
            assert!(
                one.served_per_sec > 0.0 && one.cpu_us_per_request > 0.0,
                "{one:?}"
            );
            assert!(one.latency.p50 > Duration::ZERO && one.latency.p99 >= one.latency.p50);
            // 300 requests/s never has 512 waiting on an idle machine.
            assert_eq!(one.skipped, 0, "{one:?}");
        }
    }
    assert!(records.written_ops > 0, "the records-on gateway recorded");
    assert_eq!(records.failed_ops, 0);
    assert!(
        records.exchanges > 0 && records.writer_cpu > Duration::ZERO,
        "{records:?}"
    );
    let text = report.to_string();
    assert!(text.contains("req/s unary c=4"), "{text}");
    assert!(text.contains("CPU us/request stream c=4"), "{text}");
    assert!(text.contains("records off vs on"), "{text}");
    assert!(text.contains("one CPU: latency stream (us) p99"), "{text}");
    assert!(text.contains("served req/s stream at 300/s"), "{text}");
    assert!(text.contains("writer thread CPU per exchange"), "{text}");
}
