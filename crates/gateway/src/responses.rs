//! The gateway's HTTP responses to the guest: Google-shaped errors, SSE bodies, JSON answers.

use axum::body::{Body, Bytes};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use switchyard_translate::google::GoogleErrorBody;
use tokio::sync::mpsc;

/// A Google-shaped error response.
pub(crate) fn google_error_response(body: &GoogleErrorBody) -> Response {
    let status = StatusCode::from_u16(body.error.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    (
        status,
        [(header::CONTENT_TYPE, "application/json; charset=utf-8")],
        body.to_json_line(),
    )
        .into_response()
}

pub(crate) fn error_response(status: u16, message: &str) -> Response {
    google_error_response(&switchyard_translate::google_error(status, message, None))
}

/// An SSE body from a channel of ready frames.
pub(crate) fn sse_body(frames: mpsc::Receiver<Bytes>) -> Response {
    let stream = futures_util::stream::unfold(frames, |mut rx| async move {
        rx.recv()
            .await
            .map(|frame| (Ok::<_, std::convert::Infallible>(frame), rx))
    });
    (
        [
            (header::CONTENT_TYPE, "text/event-stream"),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        Body::from_stream(stream),
    )
        .into_response()
}

/// A 200 with a JSON body.
pub(crate) fn json_response(body: String) -> Response {
    (
        [(
            axum::http::header::CONTENT_TYPE,
            "application/json; charset=utf-8",
        )],
        body,
    )
        .into_response()
}
