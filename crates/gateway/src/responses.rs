//! The gateway's HTTP responses to the guest: Google-shaped errors, SSE bodies, JSON answers.

use axum::body::{Body, Bytes};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use switchyard_translate::google::GoogleErrorBody;
use tokio::sync::mpsc;

use crate::delivery::DeliverySlot;

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

/// The headers of every SSE answer.
const SSE_HEADERS: [(header::HeaderName, &str); 2] = [
    (header::CONTENT_TYPE, "text/event-stream"),
    (header::CACHE_CONTROL, "no-cache"),
];

/// An SSE body from a channel of ready frames. When the channel ends (every frame handed to
/// the connection), `delivery` is confirmed; a body dropped before that revokes it.
pub(crate) fn sse_body(frames: mpsc::Receiver<Bytes>, delivery: DeliverySlot) -> Response {
    let stream =
        futures_util::stream::unfold((frames, delivery), |(mut rx, delivery)| async move {
            match rx.recv().await {
                Some(frame) => Some((Ok::<_, std::convert::Infallible>(frame), (rx, delivery))),
                None => {
                    delivery.confirm();
                    None
                }
            }
        });
    (SSE_HEADERS, Body::from_stream(stream)).into_response()
}

/// `body` as a stream that confirms `delivery` after its last frame was taken.
pub(crate) fn confirming_body(body: Body, delivery: DeliverySlot) -> Body {
    use futures_util::StreamExt;
    let frames = body.into_data_stream().map(Some);
    let end = futures_util::stream::once(async move {
        delivery.confirm();
        None
    });
    Body::from_stream(frames.chain(end).filter_map(|item| async move { item }))
}

/// A 200 `text/event-stream` whose frames are all in `body` already.
pub(crate) fn sse_whole(body: String) -> Response {
    (SSE_HEADERS, body).into_response()
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
