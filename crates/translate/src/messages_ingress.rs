//! The request side of the Anthropic Messages ingress (Claude Code): the guest's
//! `POST /v1/messages` body checked and prepared as the gateway's upstream Chat Completions
//! request.
//!
//! * Every field is modeled or refused as [`TranslateError::UnknownField`]; options with no
//!   Chat counterpart are dropped only where they do not change the answer, each noted in the
//!   report (`metadata`, `cache_control`, `safeguards`, `thinking.display`, a
//!   `context_management` edit that keeps all thinking). Context edits that would change the
//!   history, deferred tools (`defer_loading`) and server tools are typed errors: Claude Code
//!   answers a 400 naming `defer_loading` by sending its tools inline.
//! * `system` (a string or text blocks) becomes the leading system message; `role: "system"`
//!   turns inside `messages` stay in place as system messages, empty ones dropped.
//! * Assistant turns: text joined, `tool_use` blocks become `tool_calls` (ids verbatim, input as
//!   compact JSON), `thinking` blocks are never sent upstream, except that with
//!   [`crate::ProviderOptions::echo_reasoning`] one the gateway wrote ([`THINKING_SIGNATURE`]) goes
//!   back as the message's `reasoning_content`.
//! * User turns: `tool_result` blocks become tool messages in the order of the calls they
//!   answer (text joined; `is_error` prefixes `Error: `), then one user message with the results' images (each result's after a
//!   line naming its call) and the turn's own text and images.
//! * Images are base64 (what Claude Code sends); PNG is re-encoded as lossless WebP
//!   (`png_pass`). A base64 `document` (its `Read` of a PDF) follows [`crate::attachment`]: a
//!   file part where the provider takes one, else text or a placeholder the model sees.
//! * `tool_choice` `auto`/`any`/`tool`/`none` map to Chat's, `disable_parallel_tool_use` to
//!   `parallel_tool_calls: false`; `thinking` and `output_config.effort` become
//!   `reasoning_effort` (the upstream plan drops it where the provider takes none).
//! * Block types, sources and options Claude Code 2.1.332 was never seen sending (links,
//!   `redacted_thinking`, server tools) are typed errors, not guesses.
//!
//! The call ids of the history and of the tool results are handed back for the gateway's
//! call-id ledger, as on the other ingresses.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Value, json};

use crate::attachment::{self, Origin};
use crate::error::{TranslateError, invalid, unknown, unsupported};
use crate::image::PngConversion;
use crate::image_cache::ConversionCache;
use crate::openai::{
    ChatFunction, ChatMessage, ChatRequest, ChatTool, ContentPart, FunctionCallSpec, ImageUrl,
    ToolCall, UserContent,
};
use crate::options::TranslationReport;
use crate::png_pass::PngPass;
use crate::private_argument::strip_from_schema;

/// The signature the gateway gives the thinking blocks it writes: a thinking block that
/// carries it is the gateway's own rendering of an upstream's reasoning.
pub const THINKING_SIGNATURE: &str = "switchyard-thinking-v1";

pub use crate::messages_wire::{
    GuestBlock, GuestContent, GuestMessagesRequest, GuestSource, GuestTool, GuestTurn,
};

/// How a guest request is prepared: the same knobs as a Chat guest's.
pub type MessagesIngressOptions<'a> = crate::chat_ingress::ChatIngressOptions<'a>;

/// A prepared request.
#[derive(Debug, Clone)]
pub struct PreparedMessages {
    /// The upstream request, before the upstream plan.
    pub chat: ChatRequest,
    /// The guest asked for a stream.
    pub stream: bool,
    /// Decisions taken.
    pub report: TranslationReport,
    /// Ids of the calls in the history (`tool_use` blocks), in order.
    pub history_call_ids: Vec<String>,
    /// The `tool_use_id`s of the `tool_result` blocks, with their paths.
    pub tool_result_ids: Vec<(String, String)>,
    /// Prompt-token estimate of the whole request.
    pub prompt_token_estimate: u32,
    /// PNGs not converted because the cache did not hold them.
    pub unconverted_pngs: Vec<Vec<u8>>,
}

/// Parses a guest body.
pub fn parse_messages_request(body: &[u8]) -> Result<GuestMessagesRequest, TranslateError> {
    serde_json::from_slice(body).map_err(|e| TranslateError::InvalidBody(e.to_string()))
}

/// One request's translation state.
struct Pass<'a, 'c> {
    options: &'a MessagesIngressOptions<'a>,
    pngs: PngPass<'c>,
    report: TranslationReport,
    history_call_ids: Vec<String>,
    tool_result_ids: Vec<(String, String)>,
    text_len: usize,
    cache_breakpoints: u32,
    /// Names of the history's calls by id (a tool result's origin).
    call_names: Vec<(String, String)>,
}

/// Checks `request` and builds its upstream body (see the module docs).
pub fn prepare_messages_request(
    request: GuestMessagesRequest,
    options: &MessagesIngressOptions<'_>,
    images: Option<&ConversionCache>,
) -> Result<PreparedMessages, TranslateError> {
    let GuestMessagesRequest {
        model: _,
        messages,
        system,
        tools,
        tool_choice,
        max_tokens,
        stream,
        temperature,
        top_p,
        top_k,
        stop_sequences,
        thinking,
        output_config,
        context_management,
        metadata,
        safeguards,
        extra,
    } = request;
    unknown(&extra, "")?;
    if messages.is_empty() {
        return Err(invalid("messages", "is empty"));
    }
    let mut pass = Pass {
        options,
        pngs: PngPass::new(images, options.convert_on_miss),
        report: TranslationReport::default(),
        history_call_ids: Vec::new(),
        tool_result_ids: Vec::new(),
        text_len: 0,
        cache_breakpoints: 0,
        call_names: Vec::new(),
    };
    let mut chat_messages = Vec::new();
    if let Some(system) = system {
        let text = pass.system_text(system, "system")?;
        if !text.is_empty() {
            chat_messages.push(ChatMessage::System {
                content: text,
                name: None,
            });
        }
    }
    for (ti, turn) in messages.into_iter().enumerate() {
        pass.turn(turn, &format!("messages[{ti}]"), &mut chat_messages)?;
    }
    let tools = tools
        .into_iter()
        .flatten()
        .enumerate()
        .map(|(i, tool)| pass.tool(tool, &format!("tools[{i}]")))
        .collect::<Result<Vec<_>, _>>()?;
    let mut chat = ChatRequest {
        model: options.upstream_model.clone(),
        messages: chat_messages,
        tools,
        temperature,
        top_p,
        max_tokens,
        stop: stop_sequences.unwrap_or_default(),
        stream: stream.unwrap_or(false),
        ..ChatRequest::default()
    };
    if let Some(top_k) = top_k {
        chat.top_k = Some(top_k);
    }
    if let Some(choice) = tool_choice {
        pass.tool_choice(choice, &mut chat)?;
    }
    if let Some(thinking) = thinking {
        pass.thinking(&thinking, &mut chat)?;
    }
    if let Some(config) = output_config {
        pass.output_config(&config, "output_config", &mut chat)?;
    }
    if let Some(edits) = context_management {
        pass.context_management(&edits)?;
    }
    if metadata.is_some() {
        pass.report
            .dropped_options
            .push("metadata (not forwarded: it names the guest's device and session)".into());
    }
    if safeguards.is_some() {
        pass.report
            .dropped_options
            .push("safeguards (Anthropic's own classifier: no provider counterpart)".into());
    }
    if pass.cache_breakpoints > 0 {
        pass.report.notes.push(format!(
            "{} cache_control breakpoint(s) not forwarded (prompt caching is the provider's own)",
            pass.cache_breakpoints
        ));
    }
    Ok(PreparedMessages {
        chat,
        stream: stream.unwrap_or(false),
        prompt_token_estimate: u32::try_from(pass.text_len.div_ceil(4)).unwrap_or(u32::MAX),
        report: pass.report,
        history_call_ids: pass.history_call_ids,
        tool_result_ids: pass.tool_result_ids,
        unconverted_pngs: pass.pngs.unconverted_pngs,
    })
}

/// Where a user turn's parts go.
#[derive(Default)]
struct UserParts {
    tool_messages: Vec<ChatMessage>,
    /// The results' images, each result's after a line naming its call.
    tool_media: Vec<ContentPart>,
    own: Vec<ContentPart>,
}

impl Pass<'_, '_> {
    fn note_cache(&mut self, cache_control: Option<&Value>) {
        self.cache_breakpoints += u32::from(cache_control.is_some());
    }

    /// The text of a system prompt or system turn: text blocks only.
    fn system_text(&mut self, content: GuestContent, path: &str) -> Result<String, TranslateError> {
        let text = match content {
            GuestContent::Text(text) => text,
            GuestContent::Blocks(blocks) => {
                let mut texts = Vec::new();
                for (bi, block) in blocks.into_iter().enumerate() {
                    let block_path = format!("{path}.content[{bi}]");
                    let block_path = if path == "system" {
                        format!("system[{bi}]")
                    } else {
                        block_path
                    };
                    texts.push(self.text_block(block, &block_path)?);
                }
                texts.retain(|t| !t.is_empty());
                texts.join("\n\n")
            }
        };
        self.text_len += text.len();
        Ok(text)
    }

    /// A block that must be `text`: its text.
    fn text_block(&mut self, block: GuestBlock, path: &str) -> Result<String, TranslateError> {
        unknown(&block.extra, &format!("{path}."))?;
        if block.kind != "text" {
            return Err(unsupported(
                path,
                format!("`{}` block in a system prompt", block.kind),
            ));
        }
        self.note_cache(block.cache_control.as_ref());
        only_fields(&block, &["text"], path)?;
        block
            .text
            .ok_or_else(|| invalid(format!("{path}.text"), "a text block needs its text"))
    }

    fn turn(
        &mut self,
        turn: GuestTurn,
        path: &str,
        out: &mut Vec<ChatMessage>,
    ) -> Result<(), TranslateError> {
        unknown(&turn.extra, &format!("{path}."))?;
        if turn.output_config.is_some() && turn.role != "system" {
            return Err(invalid(
                format!("{path}.output_config"),
                "only system turns carry output_config",
            ));
        }
        match turn.role.as_str() {
            "system" => {
                if let Some(config) = &turn.output_config {
                    self.report.dropped_options.push(format!(
                        "{path}.output_config={config} (a per-turn control; the request's own \
                         output_config applies)"
                    ));
                }
                let text = self.system_text(turn.content, path)?;
                if text.is_empty() {
                    self.report
                        .notes
                        .push(format!("{path}: empty system turn dropped"));
                } else {
                    out.push(ChatMessage::System {
                        content: text,
                        name: None,
                    });
                }
                Ok(())
            }
            "assistant" => {
                let message = self.assistant(turn.content, path)?;
                out.push(message);
                Ok(())
            }
            "user" => self.user(turn.content, path, out),
            other => Err(invalid(
                format!("{path}.role"),
                format!("unknown role {other:?}"),
            )),
        }
    }

    fn assistant(
        &mut self,
        content: GuestContent,
        path: &str,
    ) -> Result<ChatMessage, TranslateError> {
        let blocks = match content {
            GuestContent::Text(text) => {
                self.text_len += text.len();
                return Ok(ChatMessage::Assistant {
                    name: None,
                    content: Some(text),
                    tool_calls: Vec::new(),
                    reasoning_content: None,
                });
            }
            GuestContent::Blocks(blocks) => blocks,
        };
        let mut text = String::new();
        let mut calls = Vec::new();
        let mut reasoning = String::new();
        for (bi, block) in blocks.into_iter().enumerate() {
            let block_path = format!("{path}.content[{bi}]");
            unknown(&block.extra, &format!("{block_path}."))?;
            self.note_cache(block.cache_control.as_ref());
            match block.kind.as_str() {
                "text" => {
                    only_fields(&block, &["text"], &block_path)?;
                    let t = block.text.unwrap_or_default();
                    self.text_len += t.len();
                    text.push_str(&t);
                }
                "tool_use" => {
                    only_fields(&block, &["id", "name", "input"], &block_path)?;
                    let (Some(id), Some(name)) = (block.id, block.name) else {
                        return Err(invalid(
                            block_path,
                            "a tool_use block needs its id and name",
                        ));
                    };
                    let mut input = block.input.unwrap_or_else(|| json!({}));
                    if !input.is_object() {
                        return Err(invalid(
                            format!("{block_path}.input"),
                            "a tool_use input is a JSON object",
                        ));
                    }
                    if let (Some(strip), Value::Object(object)) = (self.options.strip, &mut input) {
                        object.remove(strip);
                    }
                    let arguments = input.to_string();
                    self.text_len += arguments.len();
                    self.history_call_ids.push(id.clone());
                    self.call_names.push((id.clone(), name.clone()));
                    calls.push(ToolCall {
                        id,
                        kind: "function".into(),
                        function: FunctionCallSpec { name, arguments },
                    });
                }
                "thinking" => {
                    only_fields(&block, &["thinking", "signature"], &block_path)?;
                    let ours = block.signature.as_deref() == Some(THINKING_SIGNATURE);
                    match block.thinking {
                        Some(t) if ours && self.options.provider.echo_reasoning => {
                            reasoning.push_str(&t);
                        }
                        _ => {
                            self.report.dropped_thought_parts += 1;
                            self.report.stripped_signatures += u32::from(block.signature.is_some());
                        }
                    }
                }
                other => {
                    return Err(unsupported(
                        block_path,
                        format!("`{other}` block in an assistant turn"),
                    ));
                }
            }
        }
        let echoed = !reasoning.is_empty();
        self.report.echoed_reasoning_turns += u32::from(echoed);
        Ok(ChatMessage::Assistant {
            name: None,
            content: (!text.is_empty() || calls.is_empty()).then_some(text),
            tool_calls: calls,
            reasoning_content: echoed.then_some(reasoning),
        })
    }

    fn user(
        &mut self,
        content: GuestContent,
        path: &str,
        out: &mut Vec<ChatMessage>,
    ) -> Result<(), TranslateError> {
        let blocks = match content {
            GuestContent::Text(text) => {
                self.text_len += text.len();
                out.push(ChatMessage::User {
                    content: UserContent::Text(text),
                    name: None,
                });
                return Ok(());
            }
            GuestContent::Blocks(blocks) => blocks,
        };
        let mut parts = UserParts::default();
        for (bi, block) in blocks.into_iter().enumerate() {
            let block_path = format!("{path}.content[{bi}]");
            unknown(&block.extra, &format!("{block_path}."))?;
            self.note_cache(block.cache_control.as_ref());
            if block.kind == "tool_result" {
                self.tool_result(block, &block_path, &mut parts)?;
            } else {
                let part = self.media_or_text(block, &block_path, Origin::Message)?;
                parts.own.push(part);
            }
        }
        // In the order of the calls they answer (Claude Code lists results as its tools
        // finish, and runs read-only tools concurrently): the model's order, as the Google
        // ingress sends them too.
        let order = |message: &ChatMessage| match message {
            ChatMessage::Tool { tool_call_id, .. } => self
                .call_names
                .iter()
                .rposition(|(id, _)| id == tool_call_id)
                .unwrap_or(usize::MAX),
            _ => usize::MAX,
        };
        parts.tool_messages.sort_by_key(order);
        out.append(&mut parts.tool_messages);
        let mut user = parts.tool_media;
        user.append(&mut parts.own);
        if user.is_empty() {
            return Ok(());
        }
        let content = if user.iter().all(|p| matches!(p, ContentPart::Text { .. })) {
            UserContent::Text(
                user.iter()
                    .filter_map(|p| match p {
                        ContentPart::Text { text } => Some(text.as_str()),
                        _ => None,
                    })
                    .collect::<Vec<_>>()
                    .join("\n"),
            )
        } else {
            UserContent::Parts(user)
        };
        out.push(ChatMessage::User {
            content,
            name: None,
        });
        Ok(())
    }

    fn tool_result(
        &mut self,
        block: GuestBlock,
        path: &str,
        parts: &mut UserParts,
    ) -> Result<(), TranslateError> {
        only_fields(&block, &["tool_use_id", "content", "is_error"], path)?;
        let Some(id) = block.tool_use_id else {
            return Err(invalid(
                format!("{path}.tool_use_id"),
                "a tool_result must name the call it answers",
            ));
        };
        self.tool_result_ids
            .push((id.clone(), format!("{path}.tool_use_id")));
        let name = self
            .call_names
            .iter()
            .rev()
            .find(|(call, _)| *call == id)
            .map_or_else(String::new, |(_, name)| name.clone());
        let mut texts = Vec::new();
        let mut media = Vec::new();
        match block.content {
            None => {}
            Some(GuestContent::Text(text)) => texts.push(text),
            Some(GuestContent::Blocks(blocks)) => {
                for (ci, inner) in blocks.into_iter().enumerate() {
                    let inner_path = format!("{path}.content[{ci}]");
                    unknown(&inner.extra, &format!("{inner_path}."))?;
                    self.note_cache(inner.cache_control.as_ref());
                    let origin = Origin::ToolResult {
                        name: &name,
                        id: &id,
                    };
                    match self.media_or_text(inner, &inner_path, origin)? {
                        ContentPart::Text { text } => texts.push(text),
                        other => media.push(other),
                    }
                }
            }
        }
        let mut content = texts.join("\n");
        self.text_len += content.len();
        if block.is_error == Some(true) {
            content = format!("Error: {content}");
        }
        parts.tool_messages.push(ChatMessage::Tool {
            tool_call_id: id.clone(),
            content,
        });
        if !media.is_empty() {
            let what = if media
                .iter()
                .all(|p| matches!(p, ContentPart::ImageUrl { .. }))
            {
                "Images"
            } else {
                "Attachments"
            };
            parts.tool_media.push(ContentPart::Text {
                text: format!("{what} returned by function call {id} ({name}):"),
            });
            parts.tool_media.append(&mut media);
        }
        Ok(())
    }

    /// A `text`, `image` or `document` block as the part it goes upstream as.
    fn media_or_text(
        &mut self,
        block: GuestBlock,
        path: &str,
        origin: Origin<'_>,
    ) -> Result<ContentPart, TranslateError> {
        match block.kind.as_str() {
            "text" => {
                only_fields(&block, &["text"], path)?;
                let text = block.text.unwrap_or_default();
                self.text_len += text.len();
                Ok(ContentPart::Text { text })
            }
            "image" => {
                only_fields(&block, &["source"], path)?;
                let source = source_of(block.source, path)?;
                self.image(source, &format!("{path}.source"))
            }
            "document" => {
                // Claude Code's `Read` of a PDF (fixture `read_pdf`): the attachment rules.
                only_fields(&block, &["source"], path)?;
                let source = source_of(block.source, path)?;
                let source_path = format!("{path}.source");
                match (source.kind.as_str(), source.media_type, source.data) {
                    ("base64", Some(mime), Some(data)) => Ok(attachment::inline(
                        &mime,
                        &data,
                        origin,
                        &self.options.provider,
                        &mut self.report,
                        &source_path,
                    )),
                    (kind, ..) => Err(invalid(
                        source_path,
                        format!("a `{kind}` document source needs media_type and data"),
                    )),
                }
            }
            other => Err(unsupported(path, format!("`{other}` block in a user turn"))),
        }
    }

    fn image(&mut self, source: GuestSource, path: &str) -> Result<ContentPart, TranslateError> {
        let provider = &self.options.provider;
        match (source.kind.as_str(), source.media_type, source.data) {
            ("base64", Some(mime), Some(data)) => {
                self.report.images_forwarded += 1;
                let mime = mime.to_ascii_lowercase();
                if mime == "image/png" {
                    let bytes = STANDARD.decode(data.trim()).map_err(|_| {
                        TranslateError::InvalidBase64 {
                            path: format!("{path}.data"),
                        }
                    })?;
                    if let Some(conversion) =
                        self.pngs.webp(&bytes, provider, &mut self.report, path)
                        && let PngConversion::Reencoded { webp } = conversion.as_ref()
                    {
                        return Ok(image_part(format!(
                            "data:image/webp;base64,{}",
                            STANDARD.encode(webp)
                        )));
                    }
                }
                Ok(image_part(format!("data:{mime};base64,{data}")))
            }
            (kind, ..) => Err(invalid(
                path,
                format!("a `{kind}` image source needs its own fields only"),
            )),
        }
    }

    fn tool(&mut self, tool: GuestTool, path: &str) -> Result<ChatTool, TranslateError> {
        unknown(&tool.extra, &format!("{path}."))?;
        self.note_cache(tool.cache_control.as_ref());
        if let Some(kind) = tool.kind.as_deref().filter(|k| *k != "custom") {
            return Err(unsupported(
                format!("{path}.type"),
                format!("server tool `{kind}` (only client tools reach a Chat upstream)"),
            ));
        }
        if tool.defer_loading == Some(true) {
            return Err(unsupported(
                format!("{path}.defer_loading"),
                "a deferred tool (defer_loading: the gateway sends every tool inline)",
            ));
        }
        let mut parameters = tool
            .input_schema
            .ok_or_else(|| invalid(format!("{path}.input_schema"), "a tool needs its schema"))?;
        if let Some(name) = self.options.strip {
            strip_from_schema(&mut parameters, name);
        }
        self.text_len += tool.name.len()
            + tool.description.as_ref().map_or(0, String::len)
            + parameters.to_string().len();
        Ok(ChatTool {
            kind: "function".into(),
            function: ChatFunction {
                name: tool.name,
                description: tool.description,
                parameters,
                strict: tool.strict,
            },
        })
    }

    fn tool_choice(&mut self, choice: Value, chat: &mut ChatRequest) -> Result<(), TranslateError> {
        let Value::Object(mut choice) = choice else {
            return Err(invalid("tool_choice", "is an object"));
        };
        let kind = choice.remove("type");
        let name = choice.remove("name");
        let parallel = choice.remove("disable_parallel_tool_use");
        unknown(&choice, "tool_choice.")?;
        chat.tool_choice = match (kind.as_ref().and_then(Value::as_str), name) {
            (Some("auto"), None) => None,
            (Some("any"), None) => Some(json!("required")),
            (Some("none"), None) => Some(json!("none")),
            (Some("tool"), Some(Value::String(name))) => {
                Some(json!({"type": "function", "function": {"name": name}}))
            }
            _ => {
                return Err(invalid(
                    "tool_choice",
                    "is {type: auto|any|none} or {type: tool, name}",
                ));
            }
        };
        match parallel {
            None | Some(Value::Bool(false)) => {}
            Some(Value::Bool(true)) => {
                chat.extra
                    .insert("parallel_tool_calls".into(), json!(false));
            }
            Some(_) => {
                return Err(invalid(
                    "tool_choice.disable_parallel_tool_use",
                    "is a boolean",
                ));
            }
        }
        Ok(())
    }

    /// `thinking`: `disabled` asks for the least reasoning, `enabled` maps its budget like a
    /// Gemini `thinkingBudget`, `adaptive` leaves it to the model; `display` is the gateway's
    /// to decide (`forward_reasoning`).
    fn thinking(&mut self, thinking: &Value, chat: &mut ChatRequest) -> Result<(), TranslateError> {
        let Some(object) = thinking.as_object() else {
            return Err(invalid("thinking", "is an object"));
        };
        if let Some(key) = object
            .keys()
            .find(|k| !matches!(k.as_str(), "type" | "budget_tokens" | "display"))
        {
            return Err(TranslateError::UnknownField {
                path: format!("thinking.{key}"),
            });
        }
        if let Some(display) = object.get("display") {
            self.report.dropped_options.push(format!(
                "thinking.display={display} (reasoning is shown per the gateway's \
                 forward_reasoning)"
            ));
        }
        let effort = match (
            object.get("type").and_then(Value::as_str),
            object.get("budget_tokens"),
        ) {
            (Some("adaptive"), None) => None,
            (Some("disabled"), None) => Some("minimal"),
            (Some("enabled"), Some(budget)) => match budget.as_u64() {
                Some(0..=1024) => Some("low"),
                Some(1025..=8192) => Some("medium"),
                Some(_) => Some("high"),
                None => return Err(invalid("thinking.budget_tokens", "is a whole number")),
            },
            _ => {
                return Err(invalid(
                    "thinking",
                    "is {type: adaptive|disabled} or {type: enabled, budget_tokens}",
                ));
            }
        };
        if let Some(effort) = effort {
            self.report
                .mapped_options
                .push(format!("thinking={thinking} -> reasoning_effort={effort}"));
            chat.reasoning_effort = Some(effort.to_owned());
        }
        Ok(())
    }

    fn output_config(
        &mut self,
        config: &Value,
        path: &str,
        chat: &mut ChatRequest,
    ) -> Result<(), TranslateError> {
        let Some(object) = config.as_object() else {
            return Err(invalid(path, "is an object"));
        };
        for (key, value) in object {
            match key.as_str() {
                "effort" => {
                    let effort = match value.as_str() {
                        Some(e @ ("low" | "medium" | "high")) => e,
                        Some("max" | "xhigh") => "high",
                        _ => {
                            return Err(invalid(
                                format!("{path}.effort"),
                                "is low, medium, high or max",
                            ));
                        }
                    };
                    self.report.mapped_options.push(format!(
                        "{path}.effort={value} -> reasoning_effort={effort}"
                    ));
                    chat.reasoning_effort = Some(effort.to_owned());
                }
                other => {
                    return Err(TranslateError::UnknownField {
                        path: format!("{path}.{other}"),
                    });
                }
            }
        }
        Ok(())
    }

    /// Only edits that keep the history as sent are accepted: the gateway does not edit a
    /// guest's context.
    fn context_management(&mut self, config: &Value) -> Result<(), TranslateError> {
        let edits = config
            .get("edits")
            .and_then(Value::as_array)
            .ok_or_else(|| invalid("context_management", "is {edits: [...]}"))?;
        if let Some(key) = config
            .as_object()
            .and_then(|o| o.keys().find(|k| *k != "edits"))
        {
            return Err(TranslateError::UnknownField {
                path: format!("context_management.{key}"),
            });
        }
        for (ei, edit) in edits.iter().enumerate() {
            let kind = edit.get("type").and_then(Value::as_str).unwrap_or_default();
            let keeps_all = edit.get("keep").and_then(Value::as_str) == Some("all");
            if kind.starts_with("clear_thinking") && keeps_all {
                self.report.notes.push(format!(
                    "context_management.edits[{ei}]: {kind} keeping all thinking (nothing to edit)"
                ));
            } else {
                return Err(unsupported(
                    format!("context_management.edits[{ei}]"),
                    format!("context edit `{kind}` (the gateway does not edit a guest's history)"),
                ));
            }
        }
        Ok(())
    }
}

fn image_part(url: String) -> ContentPart {
    ContentPart::ImageUrl {
        image_url: ImageUrl { url, detail: None },
    }
}

fn source_of(source: Option<GuestSource>, path: &str) -> Result<GuestSource, TranslateError> {
    let source = source.ok_or_else(|| invalid(format!("{path}.source"), "is required"))?;
    unknown(&source.extra, &format!("{path}.source."))?;
    Ok(source)
}

/// Refuses a block field its `type` does not carry (`cache_control` is allowed on every block).
fn only_fields(block: &GuestBlock, allowed: &[&str], path: &str) -> Result<(), TranslateError> {
    let set = [
        ("text", block.text.is_some()),
        ("id", block.id.is_some()),
        ("name", block.name.is_some()),
        ("input", block.input.is_some()),
        ("tool_use_id", block.tool_use_id.is_some()),
        ("content", block.content.is_some()),
        ("is_error", block.is_error.is_some()),
        ("source", block.source.is_some()),
        ("thinking", block.thinking.is_some()),
        ("signature", block.signature.is_some()),
    ];
    match set
        .iter()
        .find(|(name, present)| *present && !allowed.contains(name))
    {
        Some((name, _)) => Err(invalid(
            format!("{path}.{name}"),
            format!("a `{}` block has no `{name}`", block.kind),
        )),
        None => Ok(()),
    }
}

#[cfg(test)]
#[path = "messages_ingress_tests.rs"]
mod tests;
