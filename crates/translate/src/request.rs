//! Request translation: GenerateContent body -> Chat Completions request.
//!
//! Mapping (every decision that changes or drops something is recorded in [`TranslationReport`]):
//! * `systemInstruction` -> one leading system message, text parts joined with `"\n"`.
//! * Consecutive contents of the same role are coalesced first (Gemini CLI does this too).
//! * `model` -> assistant: text parts concatenated; `functionCall` parts -> `tool_calls`
//!   (`id` = `functionCall.id`, arguments = compact JSON of `args`, `{}` when absent). A history
//!   call without id gets the deterministic id `hist_<content index>_<part index>`.
//! * `user` (and `function`) -> first one tool message per `functionResponse`, in the call order
//!   of the preceding assistant message (content = compact JSON of the whole `response` object,
//!   e.g. `{"output":"..."}` or `{"error":"..."}`), then one user message holding tool-result
//!   images (each call's images preceded by a text part `Images returned by function call <id>
//!   (<name>):`) followed by the user's own text and images. Text-only user messages are a plain
//!   string (text parts joined with `"\n"`).
//! * Responses pair with calls by id; a response without id takes the first unanswered call with
//!   the same name. A response matching no call, an id used twice, or a call left unanswered
//!   while the conversation continues is a typed error.
//! * `thought: true` parts are dropped; `thoughtSignature`s are stripped (never sent upstream).
//!   With [`crate::ProviderOptions::echo_reasoning`], the reasoning a signature of ours carries on
//!   a model turn's call becomes that assistant message's `reasoning_content`
//!   ([`crate::reasoning`]).
//! * `inlineData` `image/*` becomes an `image_url` data URL; PNG is re-encoded as lossless WebP
//!   when [`crate::ProviderOptions::reencode_png`] (16-bit/animated PNG pass unchanged, noted).
//!   Any other `inlineData` (PDF, audio, video, text) and every `fileData` follow
//!   [`crate::attachment`]: text inlined, a file or audio part where the provider takes it,
//!   else a placeholder; never an error. `executableCode`, `codeExecutionResult`,
//!   `videoMetadata`: typed errors.
//! * `tools[].functionDeclarations` -> function tools with [`crate::schema::clean_schema`]ed
//!   parameters (`parametersJsonSchema` or `parameters`; none -> empty object schema). Google
//!   built-in tools (`googleSearch`, `urlContext`, ...) -> [`TranslateError::UnsupportedTool`].
//! * `toolConfig.functionCallingConfig`: AUTO/VALIDATED -> `auto` (not sent), ANY -> `required`,
//!   NONE -> `none`; `allowedFunctionNames` with ANY and one name -> a named `tool_choice`,
//!   otherwise the tool list is restricted to the allowed names.
//! * `generationConfig`: temperature, topP -> top_p, maxOutputTokens -> max_tokens,
//!   stopSequences -> stop (more than [`crate::ProviderOptions::max_stop_sequences`] is an error),
//!   candidateCount must be 1, seed, presencePenalty, frequencyPenalty, responseModalities must be
//!   TEXT, responseMimeType `application/json` + responseJsonSchema/responseSchema ->
//!   `response_format` json_schema (name `response`, strict false; no schema -> json_object),
//!   topK -> `top_k` only with [`crate::ProviderOptions::forward_top_k`] (else dropped, noted),
//!   thinkingConfig per [`ThinkingMode`].
//! * `safetySettings`, `labels` are dropped and noted; `cachedContent` is a typed error.
//! * Any other field anywhere -> [`TranslateError::UnknownField`] naming its JSON path.

use std::collections::HashSet;

use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use serde_json::{Value, json};

use crate::attachment::{self, Origin};
use crate::error::TranslateError;
use crate::google::{
    Blob, Content, Extra, FunctionResponse, GenerateContentRequest, GenerationConfig, Part, Tool,
    ToolConfig,
};
use crate::image::PngConversion;
use crate::image_cache::ConversionCache;
use crate::openai::{
    ChatFunction, ChatMessage, ChatRequest, ChatTool, ContentPart, FunctionCallSpec, ImageUrl,
    ResponseFormat, StreamOptions, ToolCall, UserContent,
};
use crate::options::{
    SchemaChange, ThinkingMode, ToolCallContent, TranslateOptions, TranslationReport,
};
use crate::png_pass::PngPass;
use crate::schema::clean_schema;

/// The `thoughtSignature` Gemini CLI injects when it has no real signature.
pub const SKIP_SIGNATURE_SENTINEL: &str = "skip_thought_signature_validator";

/// A translated request plus the decisions taken.
#[derive(Debug, Clone, PartialEq)]
pub struct TranslatedRequest {
    /// Body to POST upstream.
    pub chat: ChatRequest,
    /// Decisions and notes.
    pub report: TranslationReport,
    /// The guest asked for `application/json` (set [`crate::ResponseConfig::json_response`]).
    pub json_response: bool,
    /// PNGs passed unchanged because the conversion cache did not hold them and
    /// [`crate::TranslateOptions::convert_on_miss`] was off (distinct, in request order).
    pub unconverted_pngs: Vec<Vec<u8>>,
}

/// Puts the answer's JSON Schema into the system prompt (for servers that take no schema in
/// `response_format`).
pub(crate) fn schema_in_system_prompt(messages: &mut Vec<ChatMessage>, schema: &serde_json::Value) {
    let instruction =
        format!("Answer with one JSON value only, no prose, following this JSON Schema:\n{schema}");
    match messages.first_mut() {
        Some(ChatMessage::System { content, .. }) => {
            content.push_str("\n\n");
            content.push_str(&instruction);
        }
        _ => messages.insert(
            0,
            ChatMessage::System {
                content: instruction,
                name: None,
            },
        ),
    }
}

/// Parses a guest body (JSON syntax or shape errors -> [`TranslateError::InvalidBody`]).
pub fn parse_request(body: &[u8]) -> Result<GenerateContentRequest, TranslateError> {
    serde_json::from_slice(body).map_err(|e| TranslateError::InvalidBody(e.to_string()))
}

/// Whether the guest asked for a JSON answer (`responseMimeType: application/json`).
pub fn is_json_response(req: &GenerateContentRequest) -> bool {
    req.generation_config
        .as_ref()
        .and_then(|g| g.response_mime_type.as_deref())
        .is_some_and(|m| m.trim().eq_ignore_ascii_case("application/json"))
}

/// Translates a guest request (see the module docs for the mapping).
pub fn translate_request(
    req: &GenerateContentRequest,
    opts: &TranslateOptions,
) -> Result<TranslatedRequest, TranslateError> {
    translate_request_with(req, opts, None)
}

/// [`translate_request`], with PNG re-encodings remembered in (and taken from) `images`, so an
/// image that stays in the history is not re-encoded on every turn.
pub fn translate_request_with(
    req: &GenerateContentRequest,
    opts: &TranslateOptions,
    images: Option<&ConversionCache>,
) -> Result<TranslatedRequest, TranslateError> {
    let mut tr = Translator {
        opts,
        report: TranslationReport::default(),
        pngs: PngPass::new(images, opts.convert_on_miss),
    };
    reject_extra(&req.extra, "")?;
    if req.cached_content.is_some() {
        return Err(TranslateError::Unsupported {
            path: "cachedContent".into(),
            feature: "Google context caching".into(),
        });
    }
    if let Some(v) = &req.safety_settings {
        tr.report
            .dropped_options
            .push(format!("safetySettings={}", compact(v)));
    }
    if let Some(v) = &req.labels {
        tr.report
            .dropped_options
            .push(format!("labels={}", compact(v)));
    }

    let mut messages = Vec::new();
    if let Some(system) = &req.system_instruction
        && let Some(text) = tr.system_text(system)?
    {
        messages.push(ChatMessage::System {
            content: text,
            name: None,
        });
    }
    messages.extend(tr.contents(&req.contents)?);

    let mut tools = tr.tools(req.tools.as_deref().unwrap_or_default())?;
    let tool_choice = match &req.tool_config {
        Some(cfg) => tr.tool_choice(cfg, &mut tools)?,
        None => None,
    };

    // A server whose streams with tools break is asked without streaming (the gateway still
    // streams the answer to the guest).
    let stream = opts.stream && (tools.is_empty() || opts.provider.stream_tools);
    if stream != opts.stream {
        tr.report
            .mapped_options
            .push("tools offered and stream_tools off: asked without streaming".into());
    }
    let mut chat = ChatRequest {
        model: opts.upstream_model.clone(),
        messages,
        tools,
        tool_choice,
        stream,
        stream_options: stream.then_some(StreamOptions {
            include_usage: true,
        }),
        ..ChatRequest::default()
    };
    if let Some(cfg) = &req.generation_config {
        tr.generation_config(cfg, &mut chat)?;
    }
    let default_max_tokens = opts.provider.default_max_tokens;
    if chat.max_tokens.is_none() && default_max_tokens > 0 {
        // Without a cap a local server generates until its context is full.
        chat.max_tokens = Some(default_max_tokens);
        tr.report.mapped_options.push(format!(
            "no maxOutputTokens: max_tokens={default_max_tokens} (default_max_tokens)"
        ));
    }
    Ok(TranslatedRequest {
        chat,
        report: tr.report,
        json_response: is_json_response(req),
        unconverted_pngs: tr.pngs.unconverted_pngs,
    })
}

fn reject_extra(extra: &Extra, prefix: &str) -> Result<(), TranslateError> {
    match extra.keys().next() {
        Some(key) => Err(TranslateError::UnknownField {
            path: if prefix.is_empty() {
                key.clone()
            } else {
                format!("{prefix}.{key}")
            },
        }),
        None => Ok(()),
    }
}

fn compact(v: &Value) -> String {
    serde_json::to_string(v).unwrap_or_default()
}

/// A call of the preceding assistant message waiting for its response.
struct OpenCall {
    id: String,
    name: String,
    path: String,
    response: Option<String>,
    images: Vec<ContentPart>,
}

struct Translator<'a> {
    opts: &'a TranslateOptions,
    report: TranslationReport,
    pngs: PngPass<'a>,
}

impl Translator<'_> {
    fn system_text(&mut self, system: &Content) -> Result<Option<String>, TranslateError> {
        reject_extra(&system.extra, "systemInstruction")?;
        let mut texts = Vec::new();
        for (pi, part) in system.parts.iter().enumerate() {
            let path = format!("systemInstruction.parts[{pi}]");
            self.check_part_common(part, &path)?;
            if part.thought == Some(true) {
                self.report.dropped_thought_parts += 1;
                continue;
            }
            if part.function_call.is_some()
                || part.function_response.is_some()
                || part.inline_data.is_some()
            {
                return Err(TranslateError::Unsupported {
                    path,
                    feature: "non-text part in systemInstruction".into(),
                });
            }
            if let Some(text) = &part.text {
                texts.push(text.as_str());
            }
        }
        Ok((!texts.is_empty()).then(|| texts.join("\n")))
    }

    /// Checks shared by every part: unknown keys, unsupported kinds, signatures.
    fn check_part_common(&mut self, part: &Part, path: &str) -> Result<(), TranslateError> {
        reject_extra(&part.extra, path)?;
        for (present, key, feature) in [
            (
                part.executable_code.is_some(),
                "executableCode",
                "executableCode part (Google code execution)",
            ),
            (
                part.code_execution_result.is_some(),
                "codeExecutionResult",
                "codeExecutionResult part (Google code execution)",
            ),
            (
                part.video_metadata.is_some(),
                "videoMetadata",
                "videoMetadata",
            ),
        ] {
            if present {
                return Err(TranslateError::Unsupported {
                    path: format!("{path}.{key}"),
                    feature: feature.into(),
                });
            }
        }
        if let Some(sig) = &part.thought_signature {
            self.report.stripped_signatures += 1;
            if sig == SKIP_SIGNATURE_SENTINEL {
                self.report.stripped_skip_validator_signatures += 1;
            }
        }
        Ok(())
    }

    fn contents(&mut self, contents: &[Content]) -> Result<Vec<ChatMessage>, TranslateError> {
        // Coalesce consecutive contents of the same role, keeping their indices for paths.
        let mut groups: Vec<(bool, Vec<(usize, &Content)>)> = Vec::new();
        for (ci, content) in contents.iter().enumerate() {
            reject_extra(&content.extra, &format!("contents[{ci}]"))?;
            let is_model = match content.role.as_deref().unwrap_or("user") {
                "user" | "function" => false,
                "model" => true,
                other => {
                    return Err(TranslateError::InvalidValue {
                        path: format!("contents[{ci}].role"),
                        reason: format!("unknown role {other:?} (expected user or model)"),
                    });
                }
            };
            match groups.last_mut() {
                Some((last_is_model, members)) if *last_is_model == is_model => {
                    members.push((ci, content));
                }
                _ => groups.push((is_model, vec![(ci, content)])),
            }
        }

        let mut messages = Vec::new();
        let mut seen_ids: HashSet<String> = HashSet::new();
        let mut open: Vec<OpenCall> = Vec::new();
        for (is_model, members) in groups {
            if is_model {
                if let Some(call) = open.first() {
                    return Err(TranslateError::MissingFunctionResponse {
                        path: call.path.clone(),
                        id: call.id.clone(),
                    });
                }
                if let Some((message, calls)) = self.model_turn(&members, &mut seen_ids)? {
                    messages.push(message);
                    open = calls;
                }
            } else {
                messages.extend(self.user_turn(&members, &mut open)?);
                if let Some(call) = open.iter().find(|c| c.response.is_none()) {
                    return Err(TranslateError::MissingFunctionResponse {
                        path: call.path.clone(),
                        id: call.id.clone(),
                    });
                }
                open.clear();
            }
        }
        if !open.is_empty() {
            self.report.notes.push(format!(
                "conversation ends with {} unanswered function call(s)",
                open.len()
            ));
        }
        Ok(messages)
    }

    fn model_turn(
        &mut self,
        members: &[(usize, &Content)],
        seen_ids: &mut HashSet<String>,
    ) -> Result<Option<(ChatMessage, Vec<OpenCall>)>, TranslateError> {
        let mut text = String::new();
        let mut tool_calls = Vec::new();
        let mut open = Vec::new();
        let mut reasoning: Option<String> = None;
        for &(ci, content) in members {
            for (pi, part) in content.parts.iter().enumerate() {
                let path = format!("contents[{ci}].parts[{pi}]");
                self.check_part_common(part, &path)?;
                if part.thought == Some(true) {
                    self.report.dropped_thought_parts += 1;
                    continue;
                }
                if self.opts.provider.echo_reasoning
                    && reasoning.is_none()
                    && part.function_call.is_some()
                {
                    reasoning = part
                        .thought_signature
                        .as_deref()
                        .and_then(crate::reasoning::reasoning_from_signature);
                }
                if part.inline_data.is_some() || part.function_response.is_some() {
                    return Err(TranslateError::Unsupported {
                        path,
                        feature: "inlineData or functionResponse in a model turn".into(),
                    });
                }
                if let Some(t) = &part.text {
                    text.push_str(t);
                }
                if let Some(call) = &part.function_call {
                    let call_path = format!("{path}.functionCall");
                    reject_extra(&call.extra, &call_path)?;
                    if call.name.trim().is_empty() {
                        return Err(TranslateError::InvalidValue {
                            path: format!("{call_path}.name"),
                            reason: "empty function name".into(),
                        });
                    }
                    let id = match call.id.as_deref().filter(|s| !s.is_empty()) {
                        Some(id) => id.to_string(),
                        None => {
                            self.report.synthesized_history_ids += 1;
                            format!("hist_{ci}_{pi}")
                        }
                    };
                    if !seen_ids.insert(id.clone()) {
                        return Err(TranslateError::DuplicateCallId {
                            path: format!("{call_path}.id"),
                            id,
                        });
                    }
                    let arguments = match &call.args {
                        None | Some(Value::Null) => "{}".to_string(),
                        Some(v @ Value::Object(_)) => compact(v),
                        Some(_) => {
                            return Err(TranslateError::InvalidValue {
                                path: format!("{call_path}.args"),
                                reason: "function call arguments must be a JSON object".into(),
                            });
                        }
                    };
                    tool_calls.push(ToolCall {
                        id: id.clone(),
                        kind: "function".into(),
                        function: FunctionCallSpec {
                            name: call.name.clone(),
                            arguments,
                        },
                    });
                    open.push(OpenCall {
                        id,
                        name: call.name.clone(),
                        path: call_path,
                        response: None,
                        images: Vec::new(),
                    });
                }
            }
        }
        if text.is_empty() && tool_calls.is_empty() {
            self.report.notes.push(format!(
                "model turn at contents[{}] had nothing to send (only thoughts or empty) and was left out",
                members[0].0
            ));
            return Ok(None);
        }
        if reasoning.is_some() {
            self.report.echoed_reasoning_turns += 1;
        }
        Ok(Some((
            ChatMessage::Assistant {
                name: None,
                content: match self.opts.provider.tool_call_content {
                    _ if !text.is_empty() => Some(text),
                    ToolCallContent::Null => None,
                    ToolCallContent::Empty => Some(String::new()),
                },
                tool_calls,
                reasoning_content: reasoning,
            },
            open,
        )))
    }

    fn user_turn(
        &mut self,
        members: &[(usize, &Content)],
        open: &mut [OpenCall],
    ) -> Result<Vec<ChatMessage>, TranslateError> {
        let mut user_parts: Vec<ContentPart> = Vec::new();
        // Index into `open` of the last response seen: later inlineData parts belong to it.
        let mut last_response: Option<usize> = None;
        for &(ci, content) in members {
            for (pi, part) in content.parts.iter().enumerate() {
                let path = format!("contents[{ci}].parts[{pi}]");
                self.check_part_common(part, &path)?;
                if part.thought == Some(true) {
                    self.report.dropped_thought_parts += 1;
                    continue;
                }
                if part.function_call.is_some() {
                    return Err(TranslateError::Unsupported {
                        path,
                        feature: "functionCall in a user turn".into(),
                    });
                }
                if let Some(resp) = &part.function_response {
                    let slot =
                        self.function_response(resp, &format!("{path}.functionResponse"), open)?;
                    last_response = Some(slot);
                }
                if let Some(text) = &part.text {
                    user_parts.push(ContentPart::Text { text: text.clone() });
                }
                let media = match (&part.inline_data, &part.file_data) {
                    (Some(blob), _) => {
                        let origin = last_response.map(|slot| &open[slot]);
                        Some(self.media(blob, &format!("{path}.inlineData"), origin)?)
                    }
                    (None, Some(file)) => {
                        let origin = last_response.map(|slot| &open[slot]);
                        Some(self.file_reference(file, &format!("{path}.fileData"), origin))
                    }
                    (None, None) => None,
                };
                if let Some(media) = media {
                    match last_response {
                        Some(slot) => open[slot].images.push(media),
                        None => user_parts.push(media),
                    }
                }
            }
        }

        let mut messages = Vec::new();
        let mut tool_images = Vec::new();
        for call in open.iter_mut() {
            if let Some(content) = call.response.clone() {
                messages.push(ChatMessage::Tool {
                    tool_call_id: call.id.clone(),
                    content,
                });
            }
            if !call.images.is_empty() {
                let what = if call
                    .images
                    .iter()
                    .all(|p| matches!(p, ContentPart::ImageUrl { .. }))
                {
                    "Images"
                } else {
                    "Attachments"
                };
                tool_images.push(ContentPart::Text {
                    text: format!(
                        "{what} returned by function call {} ({}):",
                        call.id, call.name
                    ),
                });
                tool_images.append(&mut call.images);
            }
        }
        tool_images.extend(user_parts);
        if tool_images.is_empty() {
            return Ok(messages);
        }
        let all_text = tool_images
            .iter()
            .all(|p| matches!(p, ContentPart::Text { .. }));
        let content = if all_text {
            UserContent::Text(
                tool_images
                    .iter()
                    .filter_map(|p| match p {
                        ContentPart::Text { text } => Some(text.as_str()),
                        ContentPart::ImageUrl { .. }
                        | ContentPart::File { .. }
                        | ContentPart::InputAudio { .. } => None,
                    })
                    .collect::<Vec<_>>()
                    .join("\n"),
            )
        } else {
            UserContent::Parts(tool_images)
        };
        messages.push(ChatMessage::User {
            content,
            name: None,
        });
        Ok(messages)
    }

    /// Pairs a response with an open call; returns the call's slot.
    fn function_response(
        &mut self,
        resp: &FunctionResponse,
        path: &str,
        open: &mut [OpenCall],
    ) -> Result<usize, TranslateError> {
        reject_extra(&resp.extra, path)?;
        if resp.will_continue == Some(true) {
            return Err(TranslateError::Unsupported {
                path: format!("{path}.willContinue"),
                feature: "streamed (willContinue) function responses".into(),
            });
        }
        if let Some(s) = &resp.scheduling {
            self.report
                .dropped_options
                .push(format!("{path}.scheduling={}", compact(s)));
        }
        let unmatched = || TranslateError::UnmatchedFunctionResponse {
            path: path.to_string(),
            id: resp.id.clone(),
            name: resp.name.clone(),
        };
        let slot = match resp.id.as_deref().filter(|s| !s.is_empty()) {
            Some(id) => {
                let slot = open.iter().position(|c| c.id == id).ok_or_else(unmatched)?;
                if open[slot].response.is_some() {
                    return Err(TranslateError::DuplicateCallId {
                        path: format!("{path}.id"),
                        id: id.to_string(),
                    });
                }
                slot
            }
            None => {
                let slot = open
                    .iter()
                    .position(|c| c.response.is_none() && c.name == resp.name)
                    .ok_or_else(unmatched)?;
                self.report.responses_paired_by_name += 1;
                slot
            }
        };
        if open[slot].name != resp.name {
            self.report.notes.push(format!(
                "{path}: name {:?} differs from the call's name {:?} (paired by id)",
                resp.name, open[slot].name
            ));
        }
        open[slot].response = Some(match &resp.response {
            Value::Null => "{}".to_string(),
            v => compact(v),
        });
        for (mi, media) in resp.parts.iter().flatten().enumerate() {
            let media_path = format!("{path}.parts[{mi}]");
            reject_extra(&media.extra, &media_path)?;
            let part = match (&media.inline_data, &media.file_data) {
                (Some(blob), _) => {
                    self.media(blob, &format!("{media_path}.inlineData"), Some(&open[slot]))?
                }
                (None, Some(file)) => {
                    self.file_reference(file, &format!("{media_path}.fileData"), Some(&open[slot]))
                }
                (None, None) => continue,
            };
            open[slot].images.push(part);
        }
        Ok(slot)
    }

    /// An `inlineData` blob: an image, or an attachment of another type.
    fn media(
        &mut self,
        blob: &Blob,
        path: &str,
        call: Option<&OpenCall>,
    ) -> Result<ContentPart, TranslateError> {
        reject_extra(&blob.extra, path)?;
        if blob
            .mime_type
            .trim()
            .to_ascii_lowercase()
            .starts_with("image/")
        {
            return self.image(blob, path);
        }
        Ok(attachment::inline(
            &blob.mime_type,
            &blob.data,
            origin(call),
            &self.opts.provider,
            &mut self.report,
            path,
        ))
    }

    /// A `fileData` reference (`{mimeType?, fileUri}`): never fetched by the gateway.
    fn file_reference(&mut self, file: &Value, path: &str, call: Option<&OpenCall>) -> ContentPart {
        let mime = file.get("mimeType").and_then(Value::as_str);
        let uri = file
            .get("fileUri")
            .and_then(Value::as_str)
            .unwrap_or_default();
        attachment::remote(
            mime,
            uri,
            origin(call),
            &self.opts.provider,
            &mut self.report,
            path,
        )
    }

    fn image(&mut self, blob: &Blob, path: &str) -> Result<ContentPart, TranslateError> {
        let mime = blob.mime_type.trim().to_ascii_lowercase();
        let data = blob.data.trim();
        // A successful padded standard decode means `data` is already the canonical encoding of
        // `bytes` (the engine rejects non-canonical padding and trailing bits), so it can be
        // forwarded as is; URL-safe input is re-encoded.
        let (bytes, standard) = match STANDARD.decode(data) {
            Ok(bytes) => (bytes, true),
            Err(_) => (
                URL_SAFE_NO_PAD
                    .decode(data.trim_end_matches('='))
                    .map_err(|_| TranslateError::InvalidBase64 {
                        path: format!("{path}.data"),
                    })?,
                false,
            ),
        };
        self.report.images_forwarded += 1;
        if mime == "image/png"
            && let Some(conversion) =
                self.pngs
                    .webp(&bytes, &self.opts.provider, &mut self.report, path)
            && let PngConversion::Reencoded { webp } = conversion.as_ref()
        {
            return Ok(data_url_part("image/webp", webp.as_slice()));
        }
        if standard {
            return Ok(data_url(&mime, data));
        }
        Ok(data_url_part(&mime, &bytes))
    }

    fn tools(&mut self, tools: &[Tool]) -> Result<Vec<ChatTool>, TranslateError> {
        let mut out = Vec::new();
        let mut names = HashSet::new();
        for (ti, tool) in tools.iter().enumerate() {
            let path = format!("tools[{ti}]");
            reject_extra(&tool.extra, &path)?;
            for (present, key) in [
                (tool.google_search.is_some(), "googleSearch"),
                (
                    tool.google_search_retrieval.is_some(),
                    "googleSearchRetrieval",
                ),
                (tool.url_context.is_some(), "urlContext"),
                (tool.code_execution.is_some(), "codeExecution"),
                (tool.google_maps.is_some(), "googleMaps"),
                (tool.computer_use.is_some(), "computerUse"),
                (tool.file_search.is_some(), "fileSearch"),
                (tool.retrieval.is_some(), "retrieval"),
            ] {
                if present {
                    return Err(TranslateError::UnsupportedTool {
                        path: format!("{path}.{key}"),
                        tool: key.into(),
                    });
                }
            }
            for (fi, decl) in tool.function_declarations.iter().flatten().enumerate() {
                let decl_path = format!("{path}.functionDeclarations[{fi}]");
                reject_extra(&decl.extra, &decl_path)?;
                if decl.name.trim().is_empty() {
                    return Err(TranslateError::InvalidValue {
                        path: format!("{decl_path}.name"),
                        reason: "empty function name".into(),
                    });
                }
                if !names.insert(decl.name.clone()) {
                    return Err(TranslateError::InvalidValue {
                        path: format!("{decl_path}.name"),
                        reason: format!("function {:?} declared twice", decl.name),
                    });
                }
                for (v, key) in [
                    (&decl.response, "response"),
                    (&decl.response_json_schema, "responseJsonSchema"),
                    (&decl.behavior, "behavior"),
                ] {
                    if v.is_some() {
                        self.report.dropped_options.push(format!(
                            "{decl_path}.{key} (no Chat Completions counterpart)"
                        ));
                    }
                }
                let schema = match (&decl.parameters_json_schema, &decl.parameters) {
                    (Some(_), Some(_)) => {
                        return Err(TranslateError::InvalidValue {
                            path: decl_path,
                            reason: "set only one of parameters and parametersJsonSchema".into(),
                        });
                    }
                    (Some(s), None) | (None, Some(s)) => Some(s),
                    (None, None) => None,
                };
                let parameters = match schema {
                    None => json!({"type": "object", "properties": {}}),
                    Some(s) => self.cleaned_schema(s, &decl.name, &decl_path, true)?,
                };
                out.push(ChatTool {
                    kind: "function".into(),
                    function: ChatFunction {
                        name: decl.name.clone(),
                        description: decl.description.clone(),
                        parameters,
                        strict: None,
                    },
                });
            }
        }
        Ok(out)
    }

    fn cleaned_schema(
        &mut self,
        schema: &Value,
        target: &str,
        path: &str,
        must_be_object: bool,
    ) -> Result<Value, TranslateError> {
        let cleaned = clean_schema(schema);
        let mut out = cleaned.schema;
        if must_be_object {
            let Some(obj) = out.as_object_mut() else {
                return Err(TranslateError::InvalidValue {
                    path: path.into(),
                    reason: "parameters schema must be a JSON object".into(),
                });
            };
            match obj.get("type") {
                None => {
                    obj.insert("type".into(), json!("object"));
                }
                Some(Value::String(t)) if t == "object" => {}
                Some(other) => {
                    return Err(TranslateError::InvalidValue {
                        path: path.into(),
                        reason: format!("parameters schema must have type object, not {other}"),
                    });
                }
            }
        }
        if !cleaned.dropped_keys.is_empty()
            || !cleaned.unresolved_refs.is_empty()
            || cleaned.rewrites > 0
        {
            self.report.schema_changes.push(SchemaChange {
                target: target.into(),
                dropped_keys: cleaned.dropped_keys,
                unresolved_refs: cleaned.unresolved_refs,
                rewrites: cleaned.rewrites,
            });
        }
        Ok(out)
    }

    fn tool_choice(
        &mut self,
        cfg: &ToolConfig,
        tools: &mut Vec<ChatTool>,
    ) -> Result<Option<Value>, TranslateError> {
        reject_extra(&cfg.extra, "toolConfig")?;
        if let Some(v) = &cfg.retrieval_config {
            self.report
                .dropped_options
                .push(format!("toolConfig.retrievalConfig={}", compact(v)));
        }
        let Some(fcc) = &cfg.function_calling_config else {
            return Ok(None);
        };
        let path = "toolConfig.functionCallingConfig";
        reject_extra(&fcc.extra, path)?;
        let mode = fcc.mode.as_deref().unwrap_or("AUTO").to_ascii_uppercase();
        let mut choice = match mode.as_str() {
            "AUTO" | "MODE_UNSPECIFIED" => None,
            "VALIDATED" => {
                self.report
                    .mapped_options
                    .push("toolConfig mode VALIDATED -> tool_choice auto".into());
                None
            }
            "ANY" if self.opts.provider.tool_choice_required => Some(json!("required")),
            "ANY" => {
                self.report.mapped_options.push(
                    "toolConfig mode ANY -> tool_choice auto (the upstream does not accept \"required\")"
                        .into(),
                );
                None
            }
            "NONE" => Some(json!("none")),
            other => {
                return Err(TranslateError::InvalidValue {
                    path: format!("{path}.mode"),
                    reason: format!("unknown mode {other:?}"),
                });
            }
        };
        if let Some(allowed) = &fcc.allowed_function_names {
            for name in allowed {
                if !tools.iter().any(|t| &t.function.name == name) {
                    return Err(TranslateError::InvalidValue {
                        path: format!("{path}.allowedFunctionNames"),
                        reason: format!("function {name:?} is not declared"),
                    });
                }
            }
            if mode == "ANY" && allowed.len() == 1 {
                choice = Some(json!({"type": "function", "function": {"name": allowed[0]}}));
                self.report.mapped_options.push(format!(
                    "allowedFunctionNames=[{:?}] with ANY -> named tool_choice",
                    allowed[0]
                ));
            } else {
                let before = tools.len();
                tools.retain(|t| allowed.contains(&t.function.name));
                self.report.mapped_options.push(format!(
                    "allowedFunctionNames -> tool list restricted from {before} to {} tools",
                    tools.len()
                ));
            }
        }
        if tools.is_empty() {
            return Ok(None);
        }
        Ok(choice)
    }

    fn generation_config(
        &mut self,
        cfg: &GenerationConfig,
        chat: &mut ChatRequest,
    ) -> Result<(), TranslateError> {
        const P: &str = "generationConfig";
        reject_extra(&cfg.extra, P)?;
        chat.temperature = cfg.temperature;
        chat.top_p = cfg.top_p;
        chat.max_tokens = cfg.max_output_tokens;
        chat.seed = cfg.seed;
        chat.presence_penalty = cfg.presence_penalty;
        chat.frequency_penalty = cfg.frequency_penalty;
        if let Some(top_k) = &cfg.top_k {
            if self.opts.provider.forward_top_k {
                chat.top_k = Some(top_k.clone());
            } else {
                self.report.dropped_options.push(format!(
                    "{P}.topK={top_k} (provider not marked as accepting top_k)"
                ));
            }
        }
        if let Some(stops) = &cfg.stop_sequences {
            if stops.len() > self.opts.provider.max_stop_sequences {
                return Err(TranslateError::TooManyStopSequences {
                    count: stops.len(),
                    max: self.opts.provider.max_stop_sequences,
                });
            }
            chat.stop = stops.clone();
        }
        if let Some(n) = cfg.candidate_count
            && n != 1
        {
            return Err(TranslateError::CandidateCount(n));
        }
        if let Some(modalities) = &cfg.response_modalities
            && let Some(bad) = modalities.iter().find(|m| !m.eq_ignore_ascii_case("TEXT"))
        {
            return Err(TranslateError::Unsupported {
                path: format!("{P}.responseModalities"),
                feature: format!("response modality {bad}"),
            });
        }
        let schema = match (&cfg.response_json_schema, &cfg.response_schema) {
            (Some(_), Some(_)) => {
                return Err(TranslateError::InvalidValue {
                    path: P.into(),
                    reason: "set only one of responseSchema and responseJsonSchema".into(),
                });
            }
            (Some(s), None) | (None, Some(s)) => Some(s),
            (None, None) => None,
        };
        let mime = cfg
            .response_mime_type
            .as_deref()
            .map(|m| m.trim().to_ascii_lowercase());
        match mime.as_deref() {
            None | Some("text/plain") => {
                if schema.is_some() {
                    return Err(TranslateError::InvalidValue {
                        path: P.into(),
                        reason: "a response schema requires responseMimeType application/json"
                            .into(),
                    });
                }
            }
            Some("application/json") => {
                let schema = match schema {
                    Some(s) => Some(self.cleaned_schema(s, "responseSchema", P, false)?),
                    None => None,
                };
                chat.response_format = Some(match schema {
                    None => ResponseFormat::JsonObject { schema: None },
                    Some(schema) => crate::plan::json_format(
                        schema,
                        self.opts.provider.json_schema,
                        &mut chat.messages,
                    ),
                });
            }
            Some(other) => {
                return Err(TranslateError::Unsupported {
                    path: format!("{P}.responseMimeType"),
                    feature: format!("response MIME type {other}"),
                });
            }
        }
        if let Some(thinking) = &cfg.thinking_config {
            reject_extra(&thinking.extra, &format!("{P}.thinkingConfig"))?;
            let text = compact(&serde_json::to_value(thinking).unwrap_or_default());
            match self.opts.provider.thinking {
                ThinkingMode::Drop => self
                    .report
                    .dropped_options
                    .push(format!("{P}.thinkingConfig={text}")),
                ThinkingMode::ReasoningEffort => {
                    let effort = match (&thinking.thinking_level, thinking.thinking_budget) {
                        (Some(level), _) => {
                            let level = level.to_ascii_lowercase();
                            match level.as_str() {
                                "minimal" | "low" | "medium" | "high" => Some(level),
                                "thinking_level_unspecified" => None,
                                _ => {
                                    return Err(TranslateError::InvalidValue {
                                        path: format!("{P}.thinkingConfig.thinkingLevel"),
                                        reason: format!("unknown level {level:?}"),
                                    });
                                }
                            }
                        }
                        (None, Some(0)) => Some("minimal".to_string()),
                        (None, Some(b)) if (1..=1024).contains(&b) => Some("low".into()),
                        (None, Some(b)) if (1025..=8192).contains(&b) => Some("medium".into()),
                        (None, Some(b)) if b > 8192 => Some("high".into()),
                        _ => None,
                    };
                    match &effort {
                        Some(e) => self
                            .report
                            .mapped_options
                            .push(format!("{P}.thinkingConfig={text} -> reasoning_effort={e}")),
                        None => self
                            .report
                            .dropped_options
                            .push(format!("{P}.thinkingConfig={text} (no effort implied)")),
                    }
                    chat.reasoning_effort = effort;
                }
            }
        }
        Ok(())
    }
}

fn data_url_part(mime: &str, bytes: &[u8]) -> ContentPart {
    data_url(mime, &STANDARD.encode(bytes))
}

/// Where a call's attachment came from (`None`: the user's message).
fn origin(call: Option<&OpenCall>) -> Origin<'_> {
    call.map_or(Origin::Message, |c| Origin::ToolResult {
        name: &c.name,
        id: &c.id,
    })
}

/// An image part from already standard-base64 data.
fn data_url(mime: &str, base64: &str) -> ContentPart {
    ContentPart::ImageUrl {
        image_url: ImageUrl {
            url: format!("data:{mime};base64,{base64}"),
            detail: None,
        },
    }
}
