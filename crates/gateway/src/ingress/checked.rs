//! The request side every ingress whose guest keeps its own call ids shares (Chat Completions,
//! Messages, Responses): the body translated where its size belongs (`parse_work`), translated again once
//! the PNGs the cache did not hold are converted (the body's budget charge dropped first), then
//! the session's call-id ledger: every tool result must answer a delivered call, and the
//! history gets the upstream's own ids back.

use std::collections::HashMap;
use std::sync::Arc;

use bytes::Bytes;
use switchyard_translate::openai::{ChatMessage, ChatRequest};
use switchyard_translate::{CallLedger, LedgerError, TranslateError};

use super::{Ingress, Prepared, Refused, parse_work};
use crate::exchange::ExchangeContext;
use crate::intake::BodyPermit;
use crate::sessions::adopt_and_map;
use crate::state::AppState;
use switchyard_translate::turn::CallShapes;

/// A guest request translated for the upstream, with what the ledger checks.
pub(crate) trait Translated: Send + 'static {
    fn chat_mut(&mut self) -> &mut ChatRequest;
    /// Ids of the calls in the history, in order.
    fn history_call_ids(&self) -> &[String];
    /// The call ids the tool results answer, with their paths.
    fn tool_result_ids(&self) -> &[(String, String)];
    /// PNGs not converted because the cache did not hold them.
    fn unconverted_pngs(&mut self) -> &mut Vec<Vec<u8>>;
    /// What the exchange goes on with.
    fn into_prepared(self) -> Prepared;
}

/// How an ingress translates a body: the state, the body, the routed upstream model and the
/// private argument to strip.
pub(crate) type Translate<T> =
    fn(&AppState, &[u8], String, Option<&'static str>) -> Result<T, TranslateError>;

/// Translates `body` with `translate` and checks it against the session's ledger (see the
/// module docs); refusals are in the ingress's shape.
pub(crate) async fn translate_checked<I: Ingress, T: Translated>(
    ctx: &ExchangeContext<I>,
    body: &Bytes,
    upstream_model: &str,
    strip: Option<&'static str>,
    permit: BodyPermit,
    translate: Translate<T>,
) -> Result<T, Refused> {
    let state = &ctx.state;
    let api = ctx.api;
    let refused = |e: TranslateError| Box::new(api.error(e.http_status(), &e.to_string()));
    let shutting_down = || Box::new(api.error(503, "the gateway is shutting down"));
    let run = || {
        let (state, body) = (Arc::clone(state), body.clone());
        let upstream_model = upstream_model.to_string();
        parse_work(body.len(), move || {
            translate(&state, &body, upstream_model, strip)
        })
    };
    let mut translated = run().await.ok_or_else(shutting_down)?.map_err(refused)?;
    if !translated.unconverted_pngs().is_empty() {
        // The body is parsed: its budget charge is not held across the conversion.
        drop(permit);
        let pngs = std::mem::take(translated.unconverted_pngs());
        let max_pixels = state.config.translation.max_image_pixels;
        let cache = state.translator.images();
        state.images.convert_into(cache, pngs, max_pixels).await;
        translated = run().await.ok_or_else(shutting_down)?.map_err(refused)?;
    }
    let history: Vec<String> = translated.history_call_ids().to_vec();
    let answers: Vec<(String, String)> = translated.tool_result_ids().to_vec();
    let checked = state.sessions.with(
        &ctx.session,
        || {
            let mut ledger = CallLedger::new();
            ledger.adopt_ids(history.iter().map(String::as_str));
            ledger
        },
        |ledger| {
            let ids = history.iter().chain(answers.iter().map(|(id, _)| id));
            let upstream = adopt_and_map(
                &state.call_ids,
                &ctx.session,
                ledger,
                ids.map(String::as_str),
            );
            ledger.check_answers(
                answers
                    .iter()
                    .map(|(id, path)| (id.as_str(), path.as_str())),
            )?;
            restore_upstream_ids(&upstream, translated.chat_mut());
            Ok::<_, LedgerError>(())
        },
    );
    match checked {
        Ok(()) => Ok(translated),
        Err(e) => Err(Box::new(api.error(400, &e.to_string()))),
    }
}

/// The delivered ids of a history put back to the upstream's own (`upstream`: see
/// `sessions::adopt_and_map`).
fn restore_upstream_ids(upstream: &HashMap<String, String>, chat: &mut ChatRequest) {
    for message in &mut chat.messages {
        let ids: Vec<&mut String> = match message {
            ChatMessage::Assistant { tool_calls, .. } => {
                tool_calls.iter_mut().map(|c| &mut c.id).collect()
            }
            ChatMessage::Tool { tool_call_id, .. } => vec![tool_call_id],
            _ => Vec::new(),
        };
        for id in ids {
            if let Some(restored) = upstream.get(id.as_str()) {
                id.clone_from(restored);
            }
        }
    }
}

/// `Translated` (and the `Prepared` it becomes) for an ingress's prepared request type: the
/// fields are the same in each; `usage` and `shapes` name the fields only some carry.
macro_rules! translated {
    ($ty:ty $(, usage = $usage:ident)? $(, shapes = $shapes:ident)?) => {
        impl Translated for $ty {
            fn chat_mut(&mut self) -> &mut ChatRequest {
                &mut self.chat
            }
            fn history_call_ids(&self) -> &[String] {
                &self.history_call_ids
            }
            fn tool_result_ids(&self) -> &[(String, String)] {
                &self.tool_result_ids
            }
            fn unconverted_pngs(&mut self) -> &mut Vec<Vec<u8>> {
                &mut self.unconverted_pngs
            }
            fn into_prepared(self) -> Prepared {
                #[allow(unused_mut)]
                let mut prepared = Prepared {
                    chat: self.chat,
                    report: self.report,
                    json_response: false,
                    prompt_token_estimate: self.prompt_token_estimate,
                    include_usage: false,
                    schemas: switchyard_translate::plan::Schemas::Guest,
                    call_shapes: CallShapes::default(),
                };
                $(prepared.include_usage = self.$usage;)?
                $(prepared.call_shapes = self.$shapes;)?
                prepared
            }
        }
    };
}

translated!(
    switchyard_translate::chat_ingress::PreparedChat,
    usage = include_usage
);
translated!(switchyard_translate::messages_ingress::PreparedMessages);
translated!(
    switchyard_translate::responses_ingress::PreparedResponses,
    shapes = call_shapes
);
