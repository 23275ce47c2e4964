//! What the gateway tells Prometheus (`GET /metrics`, OpenMetrics text from the
//! `prometheus-client` crate): the GenAI client metrics of the OpenTelemetry semantic
//! conventions as histograms by model, ingress and outcome (`gen_ai_client_token_usage`,
//! `gen_ai_client_operation_duration_seconds`), and the gateway's own counters: responses by
//! status, upstream retries, open streams, bodies refused by a limit, records waiting to be
//! written.

use std::sync::Mutex;
use std::sync::atomic::AtomicI64;
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;
use switchyard_translate::turn::TurnUsage;

/// The token buckets the GenAI conventions recommend: 1, 4, 16, … 4^13.
const TOKEN_BUCKETS: [f64; 14] = [
    1.0, 4.0, 16.0, 64.0, 256.0, 1024.0, 4096.0, 16384.0, 65536.0, 262144.0, 1048576.0, 4194304.0,
    16777216.0, 67108864.0,
];
/// The duration buckets the GenAI conventions recommend: 10 ms doubling to 82 s.
const DURATION_BUCKETS: [f64; 14] = [
    0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92,
];

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct TokenLabels {
    gen_ai_operation_name: &'static str,
    gen_ai_request_model: String,
    switchyard_ingress: String,
    outcome: String,
    gen_ai_token_type: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OperationLabels {
    gen_ai_operation_name: &'static str,
    gen_ai_request_model: String,
    switchyard_ingress: String,
    /// `ok`, or the error kind.
    outcome: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StatusLabels {
    status: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct LimitLabels {
    limit: &'static str,
}

/// The gateway's metrics (cheap to update from any request).
pub(crate) struct Metrics {
    registry: Mutex<Registry>,
    token_usage: Family<TokenLabels, Histogram>,
    operation_duration: Family<OperationLabels, Histogram>,
    responses: Family<StatusLabels, Counter>,
    upstream_retries: Counter,
    active_streams: Gauge,
    refused_bodies: Family<LimitLabels, Counter>,
    recorder_queue: Gauge,
}

fn token_histogram() -> Histogram {
    Histogram::new(TOKEN_BUCKETS)
}

fn duration_histogram() -> Histogram {
    Histogram::new(DURATION_BUCKETS)
}

impl Default for Metrics {
    fn default() -> Self {
        let token_usage =
            Family::<TokenLabels, Histogram>::new_with_constructor(token_histogram as fn() -> _);
        let operation_duration = Family::<OperationLabels, Histogram>::new_with_constructor(
            duration_histogram as fn() -> _,
        );
        let metrics = Self {
            registry: Mutex::new(Registry::default()),
            token_usage: token_usage.clone(),
            operation_duration: operation_duration.clone(),
            responses: Family::default(),
            upstream_retries: Counter::default(),
            active_streams: Gauge::default(),
            refused_bodies: Family::default(),
            recorder_queue: Gauge::default(),
        };
        {
            let mut registry = metrics.registry.lock().unwrap_or_else(|p| p.into_inner());
            registry.register(
                "gen_ai_client_token_usage",
                "Tokens of each model exchange (input and output), as the upstream reported them",
                token_usage,
            );
            registry.register(
                "gen_ai_client_operation_duration_seconds",
                "Duration of each model exchange, from the guest's request to its end",
                operation_duration,
            );
            registry.register(
                "switchyard_gateway_responses",
                "Responses the gateway sent, by HTTP status",
                metrics.responses.clone(),
            );
            registry.register(
                "switchyard_gateway_upstream_retries",
                "Upstream attempts beyond the first",
                metrics.upstream_retries.clone(),
            );
            registry.register(
                "switchyard_gateway_active_streams",
                "Streamed answers being sent now",
                metrics.active_streams.clone(),
            );
            registry.register(
                "switchyard_gateway_refused_bodies",
                "Guest request bodies refused by a limit",
                metrics.refused_bodies.clone(),
            );
            registry.register(
                "switchyard_gateway_recorder_queue",
                "Record writes queued and not yet stored",
                metrics.recorder_queue.clone(),
            );
        }
        metrics
    }
}

/// An open stream, counted until dropped.
pub(crate) struct OpenStream(Gauge<i64, AtomicI64>);

impl Drop for OpenStream {
    fn drop(&mut self) {
        self.0.dec();
    }
}

impl Metrics {
    /// One model exchange ended: its duration, outcome (`ok` or the error kind), tokens and
    /// retries.
    pub fn exchange_ended(
        &self,
        model: &str,
        ingress: &str,
        outcome: &str,
        duration: Duration,
        usage: Option<&TurnUsage>,
        retries: u32,
    ) {
        self.operation_duration
            .get_or_create(&OperationLabels {
                gen_ai_operation_name: "chat",
                gen_ai_request_model: model.to_owned(),
                switchyard_ingress: ingress.to_owned(),
                outcome: outcome.to_owned(),
            })
            .observe(duration.as_secs_f64());
        if let Some(usage) = usage {
            for (kind, tokens) in [("input", usage.input), ("output", usage.output)] {
                self.token_usage
                    .get_or_create(&TokenLabels {
                        gen_ai_operation_name: "chat",
                        gen_ai_request_model: model.to_owned(),
                        switchyard_ingress: ingress.to_owned(),
                        outcome: outcome.to_owned(),
                        gen_ai_token_type: kind,
                    })
                    .observe(f64::from(tokens));
            }
        }
        self.upstream_retries.inc_by(u64::from(retries));
    }

    /// A response left with `status`.
    pub fn responded(&self, status: u16) {
        self.responses
            .get_or_create(&StatusLabels {
                status: status.to_string(),
            })
            .inc();
    }

    /// A guest body refused by `limit` (`size`, `stall`, `time`).
    pub fn refused_body(&self, limit: &'static str) {
        self.refused_bodies
            .get_or_create(&LimitLabels { limit })
            .inc();
    }

    /// A streamed answer starts; it is counted until the returned guard is dropped.
    pub fn stream_opened(&self) -> OpenStream {
        self.active_streams.inc();
        OpenStream(self.active_streams.clone())
    }

    /// The OpenMetrics text of everything, with the recorder's queue as it is now.
    pub fn render(&self, recorder_queue: u64) -> String {
        self.recorder_queue
            .set(i64::try_from(recorder_queue).unwrap_or(i64::MAX));
        let registry = self.registry.lock().unwrap_or_else(|p| p.into_inner());
        let mut text = String::new();
        if prometheus_client::encoding::text::encode(&mut text, &registry).is_err() {
            text.clear();
        }
        text
    }
}
