//! The routes the gateway serves: `POST /{version}/models/{model}:{method}` for
//! `streamGenerateContent`, `generateContent` and `countTokens`; anything else is a Google-shaped
//! 404. A request must carry the ingress key (when one is set) and a valid session header.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::response::Response;

use crate::auth::ingress_allowed;
use crate::exchange;
use crate::responses::error_response;
use crate::sessions::MAX_SESSION_ID;
use crate::state::AppState;

/// Header that selects the call-id session (set it in the guest with
/// `GEMINI_CLI_CUSTOM_HEADERS="x-switchyard-session: <id>"`); absent = the default session.
pub const SESSION_HEADER: &str = "x-switchyard-session";

pub(crate) async fn not_found() -> Response {
    error_response(
        404,
        "switchyard gateway serves POST /v1beta/models/{model}:streamGenerateContent, \
         :generateContent and :countTokens only",
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
    let session = match headers.get(SESSION_HEADER).map(|v| v.to_str()) {
        None => "default".to_string(),
        Some(Ok(id)) if !id.is_empty() && id.len() <= MAX_SESSION_ID => id.to_string(),
        Some(_) => {
            return error_response(
                400,
                &format!("{SESSION_HEADER} must be 1 to {MAX_SESSION_ID} bytes of visible ASCII"),
            );
        }
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
    // hyper checked `Content-Length` and gives it as the body's exact size (none: chunked).
    let declared_length = http_body::Body::size_hint(&body).exact();
    let guest = match state.intake.read(body, declared_length).await {
        Ok(guest) => guest,
        Err(e) => return error_response(e.status(), &e.to_string()),
    };
    let ctx = exchange::ExchangeContext {
        state,
        guest_model: model.to_string(),
        session,
    };
    match method {
        Method::StreamGenerateContent => exchange::stream_generate(ctx, guest).await,
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
