//! Traces of what Switchyard does, exported over OTLP/HTTP (protobuf) with the OpenTelemetry
//! SDK, following the GenAI semantic conventions: `invoke_agent {agent}` per run, `chat
//! {model}` per model exchange (a client span whose context goes upstream as `traceparent`),
//! `execute_tool {name}` per tool call, one span per host-tool callback, permission decisions
//! as span events. Off unless an endpoint is given (`--otlp-endpoint`, or the standard
//! `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` / `OTEL_EXPORTER_OTLP_ENDPOINT`).
//!
//! Export never blocks or fails a run: spans wait in the SDK's bounded batch queue and are
//! sent from its own thread; when the collector is down, each failed batch's spans are
//! counted ([`Telemetry::dropped`]) and gone. No prompt or completion text is put on a span
//! unless `content` is set, and no secret ever is (none reaches a span's attributes).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use opentelemetry::propagation::TextMapPropagator as _;
use opentelemetry::trace::TracerProvider as _;
pub use opentelemetry::trace::{Span, SpanKind, Status, TraceContextExt, Tracer};
pub use opentelemetry::{Array, Context, KeyValue, Value};
use opentelemetry_otlp::{Protocol, WithExportConfig as _};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::{
    BatchConfigBuilder, BatchSpanProcessor, SdkTracer, SdkTracerProvider, SpanData, SpanExporter,
};

/// Spans waiting to be exported, at most.
const QUEUE: usize = 2048;

/// Where traces go, from the flag or the standard variables.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TelemetryConfig {
    /// The OTLP/HTTP traces URL (`…/v1/traces`); `None`: tracing off.
    pub endpoint: Option<String>,
    pub service_name: String,
    /// Put the answer's text on `chat` spans (`--otlp-content`).
    pub content: bool,
}

impl TelemetryConfig {
    /// `flag` (a base URL or a `/v1/traces` URL), else `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`,
    /// else `OTEL_EXPORTER_OTLP_ENDPOINT` + `/v1/traces`; the service `OTEL_SERVICE_NAME`, else
    /// `default_service`.
    pub fn from_env(flag: Option<&str>, content: bool, default_service: &str) -> Self {
        let var = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
        let traces = |base: String| {
            if base.trim_end_matches('/').ends_with("/v1/traces") {
                base
            } else {
                format!("{}/v1/traces", base.trim_end_matches('/'))
            }
        };
        let endpoint = flag
            .map(|f| traces(f.to_owned()))
            .or_else(|| var("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"))
            .or_else(|| var("OTEL_EXPORTER_OTLP_ENDPOINT").map(traces));
        Self {
            endpoint,
            service_name: var("OTEL_SERVICE_NAME").unwrap_or_else(|| default_service.to_owned()),
            content,
        }
    }
}

/// The exporter, counting the spans of every batch it could not deliver.
#[derive(Debug)]
struct Counting {
    inner: opentelemetry_otlp::SpanExporter,
    dropped: Arc<AtomicU64>,
}

impl SpanExporter for Counting {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        let spans = batch.len() as u64;
        let result = self.inner.export(batch).await;
        if result.is_err() {
            self.dropped.fetch_add(spans, Ordering::Relaxed);
        }
        result
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }

    fn set_resource(&mut self, resource: &Resource) {
        self.inner.set_resource(resource);
    }
}

/// A running tracer.
pub struct Telemetry {
    provider: SdkTracerProvider,
    tracer: SdkTracer,
    /// Whether answer text may go on spans.
    pub content: bool,
    dropped: Arc<AtomicU64>,
}

impl std::fmt::Debug for Telemetry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Telemetry")
            .field("content", &self.content)
            .finish_non_exhaustive()
    }
}

impl Telemetry {
    /// Starts the exporter (`None` when tracing is off).
    pub fn start(config: &TelemetryConfig) -> Result<Option<Arc<Self>>, String> {
        let Some(endpoint) = &config.endpoint else {
            return Ok(None);
        };
        // reqwest is built with `rustls-no-provider`: the process's provider is ring.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let inner = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_protocol(Protocol::HttpBinary)
            .with_endpoint(endpoint.clone())
            .with_timeout(Duration::from_secs(5))
            .build()
            .map_err(|e| format!("the OTLP exporter for {endpoint}: {e}"))?;
        let dropped = Arc::new(AtomicU64::new(0));
        let exporter = Counting {
            inner,
            dropped: dropped.clone(),
        };
        let processor = BatchSpanProcessor::builder(exporter)
            .with_batch_config(
                BatchConfigBuilder::default()
                    .with_max_queue_size(QUEUE)
                    .with_scheduled_delay(Duration::from_millis(200))
                    .build(),
            )
            .build();
        let provider = SdkTracerProvider::builder()
            .with_span_processor(processor)
            .with_resource(
                Resource::builder()
                    .with_service_name(config.service_name.clone())
                    .build(),
            )
            .build();
        let tracer = provider.tracer("switchyard");
        Ok(Some(Arc::new(Self {
            provider,
            tracer,
            content: config.content,
            dropped,
        })))
    }

    pub fn tracer(&self) -> &SdkTracer {
        &self.tracer
    }

    /// Spans that could not be delivered so far.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    /// Sends what is queued (bounded by the exporter's timeout) and stops.
    pub fn shutdown(&self) {
        let _ = self.provider.shutdown();
    }
}

/// The W3C `traceparent` of the span in `context`.
pub fn traceparent(context: &Context) -> Option<String> {
    let mut carrier = std::collections::HashMap::new();
    TraceContextPropagator::new().inject_context(context, &mut carrier);
    carrier.remove("traceparent")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_endpoint_is_the_flag_or_the_standard_variables() {
        let config = TelemetryConfig::from_env(Some("http://127.0.0.1:4318"), false, "s");
        assert_eq!(
            config.endpoint.as_deref(),
            Some("http://127.0.0.1:4318/v1/traces")
        );
        let config = TelemetryConfig::from_env(Some("http://c:4318/v1/traces"), false, "s");
        assert_eq!(config.endpoint.as_deref(), Some("http://c:4318/v1/traces"));
    }

    #[test]
    fn a_span_context_becomes_a_traceparent() {
        let config = TelemetryConfig {
            endpoint: Some("http://127.0.0.1:1/v1/traces".into()),
            service_name: "t".into(),
            content: false,
        };
        let telemetry = Telemetry::start(&config).unwrap().unwrap();
        let span = telemetry.tracer().start("chat m");
        let context = Context::current_with_span(span);
        let parent = traceparent(&context).unwrap();
        let id = context.span().span_context().trace_id().to_string();
        assert!(parent.starts_with(&format!("00-{id}-")), "{parent}");
        assert!(traceparent(&Context::new()).is_none());
        telemetry.shutdown();
    }
}
