//! The state every request of a running gateway shares.

use switchyard_records::Redactor;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use crate::config::GatewayConfig;
use crate::images::ImageConverter;
use crate::intake::Intake;
use crate::record_writer::RecordWriter;
use crate::routing::ModelRouter;
use crate::sessions::Sessions;
use crate::translation::RequestTranslator;
use crate::upstream::UpstreamClient;

/// Shared state of a running gateway.
pub(crate) struct AppState {
    pub config: GatewayConfig,
    pub router: ModelRouter,
    pub upstream: UpstreamClient,
    pub translator: RequestTranslator,
    /// Converts new images off the runtime.
    pub images: ImageConverter,
    /// Reads guest request bodies within the shared byte budget.
    pub intake: Intake,
    /// Queues exchange records, built off the request path (`None`: records off).
    pub records: Option<RecordWriter>,
    pub run_id: Option<Uuid>,
    /// Call-id ledgers by session id (bounded).
    pub sessions: Sessions,
    /// Seals the ids of delivered calls, so another replica can check and restore them.
    pub call_ids: crate::call_ids::CallIds,
    /// Where `chat` spans go, and their parent.
    pub telemetry: Option<(
        std::sync::Arc<switchyard_telemetry::Telemetry>,
        Option<switchyard_telemetry::Context>,
    )>,
    /// What `GET /metrics` reports.
    pub metrics: std::sync::Arc<crate::metrics::Metrics>,
    /// Token counts of messages already counted, for the context policy.
    pub token_counts: crate::context::TokenCounts,
    /// Redacts the secrets the gateway knows from upstream text the guest is shown.
    pub guest_redactor: Redactor,
    /// The run's host tools, when it has any: their calls are stamped and entered on delivery,
    /// and the private identity is stripped from what goes upstream.
    pub binding: Option<switchyard_binding::HostBinding>,
    /// The last provider failure the gateway gave up on and passed to the guest (HTTP status,
    /// redacted message).
    pub provider_error: std::sync::Mutex<Option<(Option<u16>, String)>>,
    /// How the main exchanges ended (the host's own evidence for the run's outcome).
    pub verdicts: std::sync::Arc<crate::verdict::Verdicts>,
    pub cancel: CancellationToken,
    /// Each in-flight exchange holds a clone; shutdown waits until all are dropped.
    pub in_flight: mpsc::Sender<()>,
}
