//! `cargo bench -p switchyard-bench --bench gateway`: runs [`switchyard_bench::gateway::bench`]
//! with its defaults (or `SWITCHYARD_BENCH_QUICK=1` for a short run) and prints the report.
//! The same function backs `switchyard-dev bench gateway`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use switchyard_bench::gateway::{BenchOptions, bench};

fn main() {
    // When the benchmark starts this binary as its separate gateway process.
    switchyard_bench::gateway::serve_child_if_requested();
    let mut options = BenchOptions::default();
    if std::env::var_os("SWITCHYARD_BENCH_QUICK").is_some() {
        options.latency_requests = 300;
        options.warmup = 50;
        options.throughput_duration = std::time::Duration::from_secs(1);
        options.forward_samples = 100;
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    match runtime.block_on(bench(options)) {
        Ok(report) => print!("{report}"),
        Err(e) => {
            eprintln!("bench failed: {e}");
            std::process::exit(1);
        }
    }
}
