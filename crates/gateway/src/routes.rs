//! The routes the gateway serves: `POST /{version}/models/{model}:{method}` for
//! `streamGenerateContent`, `generateContent` and `countTokens`, and `POST /v1/chat/completions`
//! (also `/chat/completions`) for OpenAI clients, and `POST /v1/messages` for Anthropic clients
//! (Claude Code; the `?beta=true` it adds changes nothing); `GET /health`, `GET /ready` and
//! `GET /metrics` (the ingress key unless `metrics_public`) for whoever runs the gateway;
//! anything else is a Google-shaped 404. A model request must carry the ingress key (when one
//! is set) and a valid session header.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::response::Response;

use crate::auth::{anthropic_allowed, bearer_allowed, ingress_allowed};
use crate::exchange;
use crate::ingress::Ingress;
use crate::ingress::chat::{Chat, chat_error};
use crate::ingress::google::Google;
use crate::ingress::messages::{Messages, messages_error};
use crate::ingress::responses::{Responses, responses_error};
use crate::responses::error_response;
use crate::sessions::MAX_SESSION_ID;
use crate::state::AppState;

/// Header that selects the call-id session (set it in the guest with
/// `GEMINI_CLI_CUSTOM_HEADERS="x-switchyard-session: <id>"`); absent = the default session.
pub const SESSION_HEADER: &str = "x-switchyard-session";

/// The session header OpenCode sends on every model request (its session id): a Chat
/// Completions request without [`SESSION_HEADER`] uses it.
pub const OPENCODE_SESSION_HEADER: &str = "x-session-id";

/// The session header Claude Code sends on every model request (its session id): a Messages
/// request without [`SESSION_HEADER`] uses it.
pub const CLAUDE_CODE_SESSION_HEADER: &str = "x-claude-code-session-id";

/// The session header Codex sends on every model request (its thread id): a Responses
/// guest's call-id session when `x-switchyard-session` is absent.
pub const CODEX_SESSION_HEADER: &str = "session-id";

/// The call-id session a request names, or the message of a 400.
fn session_of(headers: &HeaderMap, fallback: Option<&str>) -> Result<String, String> {
    session_of_any(headers, fallback.as_slice())
}

/// [`session_of`] with several guests' headers, tried in order.
fn session_of_any(headers: &HeaderMap, fallbacks: &[&str]) -> Result<String, String> {
    let named = headers
        .get(SESSION_HEADER)
        .or_else(|| fallbacks.iter().find_map(|name| headers.get(*name)));
    match named.map(|v| v.to_str()) {
        None => Ok("default".to_string()),
        Some(Ok(id)) if !id.is_empty() && id.len() <= MAX_SESSION_ID => Ok(id.to_string()),
        Some(_) => Err(format!(
            "{SESSION_HEADER} must be 1 to {MAX_SESSION_ID} bytes of visible ASCII"
        )),
    }
}

/// `POST /v1/chat/completions`: OpenAI Chat Completions, streamed (`"stream": true`) or not.
pub(crate) async fn chat_completions(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    if !bearer_allowed(state.config.ingress_key.as_deref(), &headers) {
        return chat_error(
            401,
            "missing or wrong API key: this gateway requires its per-run ingress key as \
             `Authorization: Bearer <key>`",
        );
    }
    let session = match session_of(&headers, Some(OPENCODE_SESSION_HEADER)) {
        Ok(session) => session,
        Err(message) => return chat_error(400, &message),
    };
    model_exchange(state, session, body, Chat).await
}

/// `POST /v1/messages`: Anthropic Messages, streamed (`"stream": true`) or not.
pub(crate) async fn messages(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    if !anthropic_allowed(state.config.ingress_key.as_deref(), &headers) {
        return messages_error(
            401,
            "missing or wrong API key: this gateway requires its per-run ingress key in \
             x-api-key (ANTHROPIC_API_KEY) or as a bearer token (ANTHROPIC_AUTH_TOKEN)",
        );
    }
    let session = match session_of(&headers, Some(CLAUDE_CODE_SESSION_HEADER)) {
        Ok(session) => session,
        Err(message) => return messages_error(400, &message),
    };
    model_exchange(state, session, body, Messages).await
}

/// `POST /v1/responses`: OpenAI Responses, streamed (`"stream": true`) or not.
pub(crate) async fn responses(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    if !bearer_allowed(state.config.ingress_key.as_deref(), &headers) {
        return responses_error(
            401,
            "missing or wrong API key: this gateway requires its per-run ingress key as \
             `Authorization: Bearer <key>`",
        );
    }
    // Codex's thread, or OpenCode's session on its `@ai-sdk/openai` provider.
    let session = match session_of_any(&headers, &[CODEX_SESSION_HEADER, OPENCODE_SESSION_HEADER]) {
        Ok(session) => session,
        Err(message) => return responses_error(400, &message),
    };
    model_exchange(state, session, body, Responses).await
}

/// Reads a JSON body with `model` and `stream` at its top (Chat Completions, Messages,
/// Responses) and
/// runs its exchange.
async fn model_exchange<I: Ingress>(
    state: Arc<AppState>,
    session: String,
    body: Body,
    api: I,
) -> Response {
    let guest = match state.intake.read_request(body).await {
        Ok(guest) => guest,
        Err(e) => {
            state.metrics.refused_body(e.limit());
            return api.error(e.status(), &e.to_string());
        }
    };
    // The model and the stream flag are read here to pick the route; the body is checked
    // whole when it is prepared.
    #[derive(serde::Deserialize)]
    struct Head {
        model: Option<String>,
        stream: Option<bool>,
    }
    let bytes = guest.bytes.clone();
    let head =
        crate::ingress::parse_work(bytes.len(), move || serde_json::from_slice::<Head>(&bytes))
            .await;
    let head: Head = match head {
        Some(Ok(head)) => head,
        Some(Err(e)) => return api.error(400, &format!("invalid request body: {e}")),
        None => return api.error(503, "the gateway is shutting down"),
    };
    let Some(model) = head.model else {
        return api.error(400, "invalid request body: missing field `model`");
    };
    let ctx = exchange::ExchangeContext {
        state,
        guest_model: model,
        session,
        api,
    };
    if head.stream.unwrap_or(false) {
        exchange::stream(ctx, guest).await
    } else {
        exchange::generate(ctx, guest).await
    }
}

pub(crate) async fn not_found() -> Response {
    error_response(
        404,
        "switchyard gateway serves POST /v1beta/models/{model}:streamGenerateContent, \
         :generateContent and :countTokens, POST /v1/chat/completions and POST /v1/messages \
         only",
    )
}

pub(crate) async fn models(
    State(state): State<Arc<AppState>>,
    Path((_version, rest)): Path<(String, String)>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    if !ingress_allowed(state.config.ingress_key.as_deref(), &headers) {
        return error_response(
            401,
            "missing or wrong API key: this gateway requires its per-run ingress key in \
             x-goog-api-key (GEMINI_API_KEY)",
        );
    }
    let Some((model, method)) = rest.rsplit_once(':') else {
        return error_response(
            404,
            &format!("expected models/{{model}}:{{method}}, got models/{rest}"),
        );
    };
    let session = match session_of(&headers, None) {
        Ok(session) => session,
        Err(message) => return error_response(400, &message),
    };
    let method = match method {
        "streamGenerateContent" => Method::StreamGenerateContent,
        "generateContent" => Method::GenerateContent,
        "countTokens" => Method::CountTokens,
        other => {
            return error_response(
                404,
                &format!("method {other:?} is not served by switchyard gateway"),
            );
        }
    };
    let guest = match state.intake.read_request(body).await {
        Ok(guest) => guest,
        Err(e) => {
            state.metrics.refused_body(e.limit());
            return error_response(e.status(), &e.to_string());
        }
    };
    let ctx = exchange::ExchangeContext {
        state,
        guest_model: model.to_string(),
        session,
        api: Google,
    };
    match method {
        Method::StreamGenerateContent => exchange::stream(ctx, guest).await,
        Method::GenerateContent => exchange::generate(ctx, guest).await,
        Method::CountTokens => exchange::count_tokens(ctx, guest).await,
    }
}

/// The model methods the gateway serves.
enum Method {
    StreamGenerateContent,
    GenerateContent,
    CountTokens,
}

/// `GET /health`: the gateway is up.
pub(crate) async fn health() -> Response {
    crate::responses::json_response(r#"{"status":"ok"}"#.to_owned())
}

/// `GET /ready`: the upstream answers HTTP (any status) and the records are being written.
pub(crate) async fn ready(State(state): State<Arc<AppState>>) -> Response {
    let upstream = state
        .upstream
        .reachable(std::time::Duration::from_secs(2))
        .await;
    let records = match &state.records {
        None => Ok("off"),
        Some(writer) if writer.recorder().stats().failed_ops == 0 => Ok("ok"),
        Some(_) => Err("failing: some records could not be stored"),
    };
    let ready = upstream.is_ok() && records.is_ok();
    let body = serde_json::json!({
        "status": if ready { "ready" } else { "not ready" },
        "upstream": upstream.map_or_else(|e| format!("unreachable: {e}"), |()| "reachable".into()),
        "records": records.unwrap_or_else(|e| e),
    });
    let mut response = crate::responses::json_response(body.to_string());
    if !ready {
        *response.status_mut() = axum::http::StatusCode::SERVICE_UNAVAILABLE;
    }
    response
}

/// `GET /metrics`: OpenMetrics text; with an ingress key, only for a request carrying it
/// (in any header a guest would), unless `metrics_public`.
pub(crate) async fn metrics(State(state): State<Arc<AppState>>, headers: HeaderMap) -> Response {
    let key = state.config.ingress_key.as_deref();
    let allowed = state.config.metrics_public
        || anthropic_allowed(key, &headers)
        || ingress_allowed(key, &headers);
    if !allowed {
        return error_response(
            401,
            "/metrics needs the ingress key (or metrics_public = true)",
        );
    }
    let queued = state
        .records
        .as_ref()
        .map_or(0, |w| w.recorder().queued() as u64);
    let mut response = Response::new(Body::from(state.metrics.render(queued)));
    response.headers_mut().insert(
        axum::http::header::CONTENT_TYPE,
        axum::http::HeaderValue::from_static(
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        ),
    );
    response
}

/// Counts every response by status (the Host guard's refusals included).
pub(crate) async fn count_status(
    State(metrics): State<Arc<crate::metrics::Metrics>>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    let response = next.run(request).await;
    metrics.responded(response.status().as_u16());
    response
}
