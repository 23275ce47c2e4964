//! The request side of the OpenAI Responses ingress (Codex): the guest's `POST /v1/responses`
//! body checked and prepared as the gateway's upstream Chat Completions request.
//!
//! * Every field is modeled or refused as [`TranslateError::UnknownField`]. Fields with no Chat
//!   counterpart that do not change the answer are dropped and noted (`store`, `include`,
//!   `prompt_cache_key`, `client_metadata` and `metadata`, which carry local paths and ids,
//!   `text.verbosity`, `reasoning.summary`); `previous_response_id` is a typed error (the
//!   gateway keeps no response state, and Codex never sends it).
//! * `instructions` is the leading system message; `developer` and `system` messages stay in
//!   place as system messages. Items: `message` (input and output text, images), calls
//!   (`function_call`, `custom_tool_call`) joined into the assistant message before them, their
//!   outputs as tool messages in order (images in an output follow the batch's tool messages
//!   in one user message, as on the Messages ingress), `reasoning` never sent upstream except
//!   the gateway's own summary with [`crate::ProviderOptions::echo_reasoning`].
//! * Tools: `function` as is; `custom` (Codex's freeform `apply_patch`) as a function with one
//!   string argument `input`, its grammar in the description; each function of a `namespace`
//!   (Codex's MCP servers) as the function [`flat_name`]. [`PreparedResponses::call_shapes`]
//!   maps those names back so the answer's calls come back as `custom_tool_call` and with their
//!   namespace. `web_search` is dropped and noted (the provider has none); other server tools
//!   and `local_shell` (which Codex 0.171.0 was never seen sending) are typed errors.
//! * `text.format` `json_schema` becomes `response_format`, `max_output_tokens` `max_tokens`,
//!   `reasoning.effort` `reasoning_effort`, `tool_choice` and `parallel_tool_calls` map to
//!   Chat's.
//!
//! The call ids of the history and of the outputs are handed back for the gateway's call-id
//! ledger, as on the other ingresses.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Value, json};

use crate::attachment::{self, Origin};
use crate::error::{TranslateError, invalid, unknown, unsupported};
use crate::image::PngConversion;
use crate::image_cache::ConversionCache;
use crate::openai::{
    ChatFunction, ChatMessage, ChatRequest, ChatTool, ContentPart, FunctionCallSpec, ImageUrl,
    JsonSchemaFormat, ResponseFormat, ToolCall, UserContent,
};
use crate::options::TranslationReport;
use crate::png_pass::PngPass;
use crate::private_argument::strip_from_schema;
use crate::turn::{CUSTOM_INPUT_ARG, CallKind, CallShape, CallShapes, flat_name};

pub use crate::responses_wire::{
    GuestContent, GuestInput, GuestItem, GuestPart, GuestResponsesRequest, GuestResponsesTool,
};

/// The id prefix of the reasoning items the gateway writes: a `reasoning` item whose id has it
/// is the gateway's own rendering of an upstream's reasoning.
pub const REASONING_ID_PREFIX: &str = "rs_sy";

/// How a guest request is prepared: the same knobs as a Chat guest's.
pub type ResponsesIngressOptions<'a> = crate::chat_ingress::ChatIngressOptions<'a>;

/// A prepared request.
#[derive(Debug, Clone)]
pub struct PreparedResponses {
    /// The upstream request, before the upstream plan.
    pub chat: ChatRequest,
    /// The guest asked for a stream.
    pub stream: bool,
    /// Decisions taken.
    pub report: TranslationReport,
    /// Ids of the calls in the history, in order.
    pub history_call_ids: Vec<String>,
    /// The `call_id`s of the output items, with their paths.
    pub tool_result_ids: Vec<(String, String)>,
    /// Prompt-token estimate of the whole request.
    pub prompt_token_estimate: u32,
    /// PNGs not converted because the cache did not hold them.
    pub unconverted_pngs: Vec<Vec<u8>>,
    /// Upstream functions that stand for custom and namespaced tools.
    pub call_shapes: CallShapes,
}

/// Parses a guest body.
pub fn parse_responses_request(body: &[u8]) -> Result<GuestResponsesRequest, TranslateError> {
    serde_json::from_slice(body).map_err(|e| TranslateError::InvalidBody(e.to_string()))
}

/// One request's translation state.
struct Pass<'a, 'c> {
    options: &'a ResponsesIngressOptions<'a>,
    pngs: PngPass<'c>,
    report: TranslationReport,
    history_call_ids: Vec<String>,
    tool_result_ids: Vec<(String, String)>,
    text_len: usize,
    /// Names of the history's calls by id (an output's origin).
    call_names: Vec<(String, String)>,
    /// Images and files of the outputs since the last tool message, for the user message
    /// that follows the batch.
    pending_media: Vec<ContentPart>,
    /// The gateway's own reasoning, for the next assistant message (echo).
    pending_reasoning: String,
    shapes: CallShapes,
    /// Upstream names of the declared tools.
    declared: Vec<String>,
}

/// Checks `request` and builds its upstream body (see the module docs).
pub fn prepare_responses_request(
    request: GuestResponsesRequest,
    options: &ResponsesIngressOptions<'_>,
    images: Option<&ConversionCache>,
) -> Result<PreparedResponses, TranslateError> {
    let GuestResponsesRequest {
        model: _,
        input,
        instructions,
        tools,
        tool_choice,
        parallel_tool_calls,
        stream,
        max_output_tokens,
        temperature,
        top_p,
        reasoning,
        text,
        store,
        include,
        prompt_cache_key,
        client_metadata,
        metadata,
        previous_response_id,
        extra,
    } = request;
    unknown(&extra, "")?;
    if previous_response_id.is_some() {
        return Err(unsupported(
            "previous_response_id",
            "a stored response (the gateway keeps no response state: send the whole input)",
        ));
    }
    let mut pass = Pass {
        options,
        pngs: PngPass::new(images, options.convert_on_miss),
        report: TranslationReport::default(),
        history_call_ids: Vec::new(),
        tool_result_ids: Vec::new(),
        text_len: 0,
        call_names: Vec::new(),
        pending_media: Vec::new(),
        pending_reasoning: String::new(),
        shapes: CallShapes::default(),
        declared: Vec::new(),
    };
    // Tools first: the history's calls are flattened by the same names.
    let mut chat_tools = Vec::new();
    for (i, tool) in tools.into_iter().flatten().enumerate() {
        pass.tool(tool, &format!("tools[{i}]"), &mut chat_tools)?;
    }
    let mut messages = Vec::new();
    if let Some(instructions) = instructions.filter(|t| !t.is_empty()) {
        pass.text_len += instructions.len();
        messages.push(ChatMessage::System {
            content: instructions,
            name: None,
        });
    }
    match input {
        GuestInput::Text(text) => {
            pass.text_len += text.len();
            messages.push(ChatMessage::User {
                content: UserContent::Text(text),
                name: None,
            });
        }
        GuestInput::Items(items) => {
            if items.is_empty() {
                return Err(invalid("input", "is empty"));
            }
            for (i, item) in items.into_iter().enumerate() {
                pass.item(item, &format!("input[{i}]"), &mut messages)?;
            }
            pass.flush_media(&mut messages);
        }
    }
    let mut chat = ChatRequest {
        model: options.upstream_model.clone(),
        messages,
        tools: chat_tools,
        temperature,
        top_p,
        max_tokens: max_output_tokens,
        stream: stream.unwrap_or(false),
        ..ChatRequest::default()
    };
    if let Some(choice) = tool_choice {
        pass.tool_choice(choice, &mut chat)?;
    }
    if parallel_tool_calls == Some(false) {
        chat.extra
            .insert("parallel_tool_calls".into(), json!(false));
    }
    if let Some(reasoning) = reasoning {
        pass.reasoning(&reasoning, &mut chat)?;
    }
    if let Some(text) = text {
        pass.text(&text, &mut chat)?;
    }
    let dropped = [
        (
            store == Some(true),
            "store=true (the gateway keeps no response state)",
        ),
        (
            include.as_ref().is_some_and(|i| !i.is_empty()),
            "include (encrypted reasoning: the provider's reasoning is shown as a summary)",
        ),
        (
            prompt_cache_key.is_some(),
            "prompt_cache_key (prompt caching is the provider's own)",
        ),
        (
            client_metadata.is_some(),
            "client_metadata (not forwarded: it names the guest's installation, paths and commit)",
        ),
        (metadata.is_some(), "metadata (not forwarded)"),
    ];
    for (_, what) in dropped.iter().filter(|(set, _)| *set) {
        pass.report.dropped_options.push((*what).to_owned());
    }
    Ok(PreparedResponses {
        chat,
        stream: stream.unwrap_or(false),
        prompt_token_estimate: u32::try_from(pass.text_len.div_ceil(4)).unwrap_or(u32::MAX),
        report: pass.report,
        history_call_ids: pass.history_call_ids,
        tool_result_ids: pass.tool_result_ids,
        unconverted_pngs: pass.pngs.unconverted_pngs,
        call_shapes: pass.shapes,
    })
}

impl Pass<'_, '_> {
    fn item(
        &mut self,
        item: GuestItem,
        path: &str,
        out: &mut Vec<ChatMessage>,
    ) -> Result<(), TranslateError> {
        unknown(&item.extra, &format!("{path}."))?;
        let kind = item.kind.clone().unwrap_or_else(|| "message".to_owned());
        if !matches!(
            kind.as_str(),
            "function_call_output" | "custom_tool_call_output"
        ) {
            self.flush_media(out);
        }
        match kind.as_str() {
            "message" => self.message(item, path, out),
            "function_call" => {
                only_fields(&item, &["call_id", "name", "namespace", "arguments"], path)?;
                let (Some(call_id), Some(name)) = (item.call_id, item.name) else {
                    return Err(invalid(path, "a function_call needs its call_id and name"));
                };
                let name = flat_name(item.namespace.as_deref(), &name);
                let arguments = self.history_arguments(item.arguments, path)?;
                self.call(call_id, name, arguments, out);
                Ok(())
            }
            "custom_tool_call" => {
                only_fields(&item, &["call_id", "name", "input"], path)?;
                let (Some(call_id), Some(name)) = (item.call_id, item.name) else {
                    return Err(invalid(
                        path,
                        "a custom_tool_call needs its call_id and name",
                    ));
                };
                let input = item.input.unwrap_or_default();
                let arguments = json!({CUSTOM_INPUT_ARG: input}).to_string();
                self.call(call_id, name, arguments, out);
                Ok(())
            }
            "function_call_output" | "custom_tool_call_output" => {
                only_fields(&item, &["call_id", "output"], path)?;
                let Some(call_id) = item.call_id else {
                    return Err(invalid(
                        format!("{path}.call_id"),
                        "an output must name the call it answers",
                    ));
                };
                self.output(call_id, item.output, path, out)
            }
            "reasoning" => {
                only_fields(&item, &["summary", "content", "encrypted_content"], path)?;
                let ours = item
                    .id
                    .as_deref()
                    .is_some_and(|id| id.starts_with(REASONING_ID_PREFIX));
                let summary: String = item
                    .summary
                    .iter()
                    .flatten()
                    .filter_map(|p| p.text.as_deref())
                    .collect();
                if ours && self.options.provider.echo_reasoning && !summary.is_empty() {
                    self.pending_reasoning.push_str(&summary);
                } else {
                    self.report.dropped_thought_parts += 1;
                }
                Ok(())
            }
            other => Err(unsupported(
                format!("{path}.type"),
                format!("`{other}` input item"),
            )),
        }
    }

    /// A history call's arguments: JSON object text, the private argument removed.
    fn history_arguments(
        &mut self,
        arguments: Option<String>,
        path: &str,
    ) -> Result<String, TranslateError> {
        let text = arguments.unwrap_or_default();
        if text.trim().is_empty() {
            return Ok("{}".to_owned());
        }
        let mut value: Value = serde_json::from_str(&text).map_err(|_| {
            invalid(
                format!("{path}.arguments"),
                "a function_call's arguments are a JSON object",
            )
        })?;
        let Value::Object(object) = &mut value else {
            return Err(invalid(
                format!("{path}.arguments"),
                "a function_call's arguments are a JSON object",
            ));
        };
        // The guest's own text goes upstream unless the private argument had to come out.
        match self.options.strip.and_then(|strip| object.remove(strip)) {
            Some(_) => Ok(value.to_string()),
            None => Ok(text),
        }
    }

    /// Adds a call to the assistant message it belongs to (the one just before it, if it is
    /// an assistant's), else to a new one.
    fn call(&mut self, id: String, name: String, arguments: String, out: &mut Vec<ChatMessage>) {
        self.text_len += name.len() + arguments.len();
        self.history_call_ids.push(id.clone());
        self.call_names.push((id.clone(), name.clone()));
        let call = ToolCall {
            id,
            kind: "function".into(),
            function: FunctionCallSpec { name, arguments },
        };
        if let Some(ChatMessage::Assistant { tool_calls, .. }) = out.last_mut() {
            tool_calls.push(call);
            return;
        }
        let reasoning = std::mem::take(&mut self.pending_reasoning);
        self.report.echoed_reasoning_turns += u32::from(!reasoning.is_empty());
        out.push(ChatMessage::Assistant {
            name: None,
            content: None,
            tool_calls: vec![call],
            reasoning_content: (!reasoning.is_empty()).then_some(reasoning),
        });
    }

    fn output(
        &mut self,
        call_id: String,
        output: Option<GuestContent>,
        path: &str,
        out: &mut Vec<ChatMessage>,
    ) -> Result<(), TranslateError> {
        self.tool_result_ids
            .push((call_id.clone(), format!("{path}.call_id")));
        let name = self
            .call_names
            .iter()
            .rev()
            .find(|(call, _)| *call == call_id)
            .map_or_else(String::new, |(_, name)| name.clone());
        let mut texts = Vec::new();
        let mut media = Vec::new();
        match output {
            None => {}
            Some(GuestContent::Text(text)) => texts.push(text),
            Some(GuestContent::Parts(parts)) => {
                for (pi, part) in parts.into_iter().enumerate() {
                    let part_path = format!("{path}.output[{pi}]");
                    let origin = Origin::ToolResult {
                        name: &name,
                        id: &call_id,
                    };
                    match self.part(part, &part_path, origin)? {
                        ContentPart::Text { text } => texts.push(text),
                        other => media.push(other),
                    }
                }
            }
        }
        let content = texts.join("\n");
        self.text_len += content.len();
        out.push(ChatMessage::Tool {
            tool_call_id: call_id.clone(),
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
            self.pending_media.push(ContentPart::Text {
                text: format!("{what} returned by function call {call_id} ({name}):"),
            });
            self.pending_media.append(&mut media);
        }
        Ok(())
    }

    /// The outputs' images and files, as one user message after the batch's tool messages.
    fn flush_media(&mut self, out: &mut Vec<ChatMessage>) {
        if self.pending_media.is_empty() {
            return;
        }
        out.push(ChatMessage::User {
            content: UserContent::Parts(std::mem::take(&mut self.pending_media)),
            name: None,
        });
    }

    fn message(
        &mut self,
        item: GuestItem,
        path: &str,
        out: &mut Vec<ChatMessage>,
    ) -> Result<(), TranslateError> {
        only_fields(&item, &["role", "content"], path)?;
        let Some(role) = item.role else {
            return Err(invalid(format!("{path}.role"), "a message needs its role"));
        };
        let parts = match item.content {
            None => Vec::new(),
            Some(GuestContent::Text(text)) => vec![ContentPart::Text { text }],
            Some(GuestContent::Parts(parts)) => {
                let mut converted = Vec::with_capacity(parts.len());
                for (pi, part) in parts.into_iter().enumerate() {
                    let part_path = format!("{path}.content[{pi}]");
                    converted.push(self.part(part, &part_path, Origin::Message)?);
                }
                converted
            }
        };
        let all_text = parts.iter().all(|p| matches!(p, ContentPart::Text { .. }));
        let text = || -> String {
            parts
                .iter()
                .filter_map(|p| match p {
                    ContentPart::Text { text } => Some(text.as_str()),
                    _ => None,
                })
                .collect::<Vec<_>>()
                .join("\n")
        };
        match role.as_str() {
            "developer" | "system" => {
                if !all_text {
                    return Err(unsupported(
                        format!("{path}.content"),
                        "an image or file in a developer message",
                    ));
                }
                let content = text();
                self.text_len += content.len();
                out.push(ChatMessage::System {
                    content,
                    name: None,
                });
            }
            "assistant" => {
                if !all_text {
                    return Err(unsupported(
                        format!("{path}.content"),
                        "an image or file in an assistant message",
                    ));
                }
                let content = text();
                self.text_len += content.len();
                let reasoning = std::mem::take(&mut self.pending_reasoning);
                self.report.echoed_reasoning_turns += u32::from(!reasoning.is_empty());
                out.push(ChatMessage::Assistant {
                    name: None,
                    content: Some(content),
                    tool_calls: Vec::new(),
                    reasoning_content: (!reasoning.is_empty()).then_some(reasoning),
                });
            }
            "user" => {
                let content = if all_text {
                    let content = text();
                    self.text_len += content.len();
                    UserContent::Text(content)
                } else {
                    UserContent::Parts(parts)
                };
                out.push(ChatMessage::User {
                    content,
                    name: None,
                });
            }
            other => {
                return Err(invalid(
                    format!("{path}.role"),
                    format!("unknown role {other:?}"),
                ));
            }
        }
        Ok(())
    }

    /// A content part as the part it goes upstream as.
    fn part(
        &mut self,
        part: GuestPart,
        path: &str,
        origin: Origin<'_>,
    ) -> Result<ContentPart, TranslateError> {
        unknown(&part.extra, &format!("{path}."))?;
        match part.kind.as_str() {
            "input_text" | "output_text" => {
                part_fields(&part, &["text", "annotations", "logprobs"], path)?;
                let text = part.text.unwrap_or_default();
                self.text_len += text.len();
                Ok(ContentPart::Text { text })
            }
            "input_image" => {
                part_fields(&part, &["image_url", "detail"], path)?;
                let Some(url) = part.image_url else {
                    return Err(invalid(
                        format!("{path}.image_url"),
                        "an input_image needs its image_url (file ids are not served)",
                    ));
                };
                Ok(self.image(url, &format!("{path}.image_url"), origin))
            }
            "input_file" => {
                part_fields(&part, &["file_data", "filename"], path)?;
                let data_url = part
                    .file_data
                    .as_deref()
                    .and_then(|d| d.strip_prefix("data:"))
                    .and_then(|d| d.split_once(";base64,"));
                let Some((mime, data)) = data_url else {
                    return Err(invalid(
                        format!("{path}.file_data"),
                        "an input_file needs a base64 data URL (file ids are not served)",
                    ));
                };
                let inlined = attachment::inline(
                    mime,
                    data,
                    origin,
                    &self.options.provider,
                    &mut self.report,
                    &format!("{path}.file_data"),
                );
                // A file part keeps the name the guest gave it, as on the Chat ingress.
                Ok(match inlined {
                    ContentPart::File { file: mut sent } if part.filename.is_some() => {
                        sent.filename = part.filename;
                        ContentPart::File { file: sent }
                    }
                    other => other,
                })
            }
            other => Err(unsupported(path, format!("`{other}` content part"))),
        }
    }

    /// An image URL by the image rules: a PNG data URL re-encoded as lossless WebP, a link
    /// only with `allow_remote_media`.
    fn image(&mut self, url: String, path: &str, origin: Origin<'_>) -> ContentPart {
        let provider = &self.options.provider;
        if !url.starts_with("data:") {
            let replaced = attachment::remote(None, &url, origin, provider, &mut self.report, path);
            if matches!(replaced, ContentPart::ImageUrl { .. }) {
                self.report.images_forwarded += 1;
            }
            return replaced;
        }
        self.report.images_forwarded += 1;
        if let Some(data) = url.strip_prefix("data:image/png;base64,")
            && let Some(bytes) = attachment::decode_base64(data)
            && let Some(conversion) = self.pngs.webp(&bytes, provider, &mut self.report, path)
            && let PngConversion::Reencoded { webp } = conversion.as_ref()
        {
            return image_part(format!("data:image/webp;base64,{}", STANDARD.encode(webp)));
        }
        image_part(url)
    }

    fn tool(
        &mut self,
        tool: GuestResponsesTool,
        path: &str,
        out: &mut Vec<ChatTool>,
    ) -> Result<(), TranslateError> {
        if matches!(tool.kind.as_str(), "web_search" | "web_search_preview") {
            // Codex declares it unless `web_search = "disabled"`; its options are the server's.
            self.report.dropped_options.push(format!(
                "{path}: `{}` (a server tool the provider does not have)",
                tool.kind
            ));
            return Ok(());
        }
        unknown(&tool.extra, &format!("{path}."))?;
        match tool.kind.as_str() {
            "function" => {
                let chat = self.function(tool, None, path)?;
                out.push(chat);
            }
            "custom" => {
                let Some(name) = tool.name else {
                    return Err(invalid(
                        format!("{path}.name"),
                        "a custom tool needs its name",
                    ));
                };
                let mut description = tool.description.unwrap_or_default();
                match tool.format.as_ref() {
                    None => {}
                    Some(format) if format.get("type") == Some(&json!("text")) => {}
                    Some(format) if format.get("type") == Some(&json!("grammar")) => {
                        let syntax = format.get("syntax").and_then(Value::as_str);
                        let definition = format.get("definition").and_then(Value::as_str);
                        let Some(definition) = definition else {
                            return Err(invalid(
                                format!("{path}.format.definition"),
                                "a grammar format needs its definition",
                            ));
                        };
                        description.push_str(&format!(
                            "\n\nThe tool's input is free text following this {} grammar:\n{definition}",
                            syntax.unwrap_or("")
                        ));
                    }
                    Some(other) => {
                        return Err(unsupported(
                            format!("{path}.format"),
                            format!("custom tool format {other}"),
                        ));
                    }
                }
                description.push_str(&format!(
                    "\n\nCall it with one string argument `{CUSTOM_INPUT_ARG}`: the whole input."
                ));
                self.report.mapped_options.push(format!(
                    "{path}: custom tool `{name}` offered as a function with one string \
                     argument `{CUSTOM_INPUT_ARG}`"
                ));
                self.text_len += name.len() + description.len();
                self.claim(&name, path)?;
                self.shapes.insert(
                    name.clone(),
                    CallShape {
                        kind: CallKind::Custom,
                        namespace: None,
                        name: name.clone(),
                    },
                );
                out.push(ChatTool {
                    kind: "function".into(),
                    function: ChatFunction {
                        name,
                        description: Some(description),
                        parameters: json!({
                            "type": "object",
                            "properties": {CUSTOM_INPUT_ARG: {"type": "string"}},
                            "required": [CUSTOM_INPUT_ARG],
                            "additionalProperties": false,
                        }),
                        strict: None,
                    },
                });
            }
            "namespace" => {
                let Some(namespace) = tool.name else {
                    return Err(invalid(
                        format!("{path}.name"),
                        "a namespace needs its name",
                    ));
                };
                for (i, inner) in tool.tools.into_iter().flatten().enumerate() {
                    let inner_path = format!("{path}.tools[{i}]");
                    unknown(&inner.extra, &format!("{inner_path}."))?;
                    if inner.kind != "function" {
                        return Err(unsupported(
                            format!("{inner_path}.type"),
                            format!("`{}` tool in a namespace", inner.kind),
                        ));
                    }
                    let chat = self.function(inner, Some(&namespace), &inner_path)?;
                    out.push(chat);
                }
            }
            other => {
                return Err(unsupported(
                    format!("{path}.type"),
                    format!("`{other}` tool (only functions, custom tools and namespaces)"),
                ));
            }
        }
        Ok(())
    }

    fn function(
        &mut self,
        tool: GuestResponsesTool,
        namespace: Option<&str>,
        path: &str,
    ) -> Result<ChatTool, TranslateError> {
        if tool.format.is_some() || tool.tools.is_some() {
            return Err(invalid(path, "a function has no format or tools"));
        }
        let Some(name) = tool.name else {
            return Err(invalid(format!("{path}.name"), "a function needs its name"));
        };
        let mut parameters = tool
            .parameters
            .unwrap_or_else(|| json!({"type": "object", "properties": {}}));
        if let Some(strip) = self.options.strip {
            strip_from_schema(&mut parameters, strip);
        }
        let upstream = flat_name(namespace, &name);
        self.claim(&upstream, path)?;
        if let Some(namespace) = namespace {
            self.shapes.insert(
                upstream.clone(),
                CallShape {
                    kind: CallKind::Function,
                    namespace: Some(namespace.to_owned()),
                    name,
                },
            );
        }
        self.text_len += upstream.len()
            + tool.description.as_ref().map_or(0, String::len)
            + parameters.to_string().len();
        Ok(ChatTool {
            kind: "function".into(),
            function: ChatFunction {
                name: upstream,
                description: tool.description,
                parameters,
                strict: tool.strict,
            },
        })
    }

    /// Refuses a second tool under one upstream name.
    fn claim(&mut self, upstream: &str, path: &str) -> Result<(), TranslateError> {
        if self.declared.iter().any(|n| n == upstream) {
            return Err(invalid(
                path,
                format!("two tools would be called `{upstream}` upstream"),
            ));
        }
        self.declared.push(upstream.to_owned());
        Ok(())
    }

    /// `auto`, `none`, `required`, or one tool by `{type, name}` (a namespaced function by
    /// its namespace too).
    fn tool_choice(&mut self, choice: Value, chat: &mut ChatRequest) -> Result<(), TranslateError> {
        chat.tool_choice = match &choice {
            Value::String(mode) => match mode.as_str() {
                "auto" => None,
                "none" | "required" => Some(choice.clone()),
                _ => {
                    return Err(invalid(
                        "tool_choice",
                        "is auto, none, required or {type, name}",
                    ));
                }
            },
            Value::Object(object) => {
                let kind = object.get("type").and_then(Value::as_str);
                let name = object.get("name").and_then(Value::as_str);
                let namespace = object.get("namespace").and_then(Value::as_str);
                if let Some(key) = object
                    .keys()
                    .find(|k| !matches!(k.as_str(), "type" | "name" | "namespace"))
                {
                    return Err(TranslateError::UnknownField {
                        path: format!("tool_choice.{key}"),
                    });
                }
                match (kind, name) {
                    (Some("function" | "custom"), Some(name)) => Some(
                        json!({"type": "function", "function": {"name": flat_name(namespace, name)}}),
                    ),
                    _ => {
                        return Err(unsupported("tool_choice", format!("tool choice {choice}")));
                    }
                }
            }
            _ => return Err(invalid("tool_choice", "is a string or an object")),
        };
        Ok(())
    }

    /// `reasoning.effort` becomes `reasoning_effort` (the upstream plan drops it where the
    /// provider takes none); `summary` is the gateway's to decide (`forward_reasoning`).
    fn reasoning(
        &mut self,
        reasoning: &Value,
        chat: &mut ChatRequest,
    ) -> Result<(), TranslateError> {
        let Some(object) = reasoning.as_object() else {
            return Err(invalid("reasoning", "is an object"));
        };
        for (key, value) in object {
            match key.as_str() {
                "effort" => {
                    let effort = match value.as_str() {
                        None if value.is_null() => continue,
                        Some("none" | "minimal") => "minimal",
                        Some(e @ ("low" | "medium" | "high")) => e,
                        Some("xhigh") => "high",
                        _ => {
                            return Err(invalid(
                                "reasoning.effort",
                                "is none, minimal, low, medium, high or xhigh",
                            ));
                        }
                    };
                    self.report.mapped_options.push(format!(
                        "reasoning.effort={value} -> reasoning_effort={effort}"
                    ));
                    chat.reasoning_effort = Some(effort.to_owned());
                }
                "summary" | "generate_summary" => {
                    self.report.dropped_options.push(format!(
                        "reasoning.{key}={value} (reasoning is shown per the gateway's \
                         forward_reasoning)"
                    ));
                }
                other => {
                    return Err(TranslateError::UnknownField {
                        path: format!("reasoning.{other}"),
                    });
                }
            }
        }
        Ok(())
    }

    /// `text.format` (`text`, `json_object`, `json_schema`) and `text.verbosity` (dropped).
    fn text(&mut self, text: &Value, chat: &mut ChatRequest) -> Result<(), TranslateError> {
        let Some(object) = text.as_object() else {
            return Err(invalid("text", "is an object"));
        };
        for (key, value) in object {
            match key.as_str() {
                "verbosity" => self
                    .report
                    .dropped_options
                    .push(format!("text.verbosity={value} (no Chat counterpart)")),
                "format" => chat.response_format = self.format(value)?,
                other => {
                    return Err(TranslateError::UnknownField {
                        path: format!("text.{other}"),
                    });
                }
            }
        }
        Ok(())
    }

    fn format(&mut self, format: &Value) -> Result<Option<ResponseFormat>, TranslateError> {
        let Some(object) = format.as_object() else {
            return Err(invalid("text.format", "is an object"));
        };
        if let Some(key) = object.keys().find(|k| {
            !matches!(
                k.as_str(),
                "type" | "name" | "schema" | "strict" | "description"
            )
        }) {
            return Err(TranslateError::UnknownField {
                path: format!("text.format.{key}"),
            });
        }
        match object.get("type").and_then(Value::as_str) {
            Some("text") => Ok(None),
            Some("json_object") => Ok(Some(ResponseFormat::JsonObject { schema: None })),
            Some("json_schema") => {
                let Some(schema) = object.get("schema") else {
                    return Err(invalid(
                        "text.format.schema",
                        "a json_schema format needs it",
                    ));
                };
                self.report
                    .mapped_options
                    .push("text.format json_schema -> response_format".into());
                Ok(Some(ResponseFormat::JsonSchema {
                    json_schema: JsonSchemaFormat {
                        name: "response".to_owned(),
                        schema: schema.clone(),
                        strict: false,
                    },
                }))
            }
            _ => Err(invalid(
                "text.format.type",
                "is text, json_object or json_schema",
            )),
        }
    }
}

fn image_part(url: String) -> ContentPart {
    ContentPart::ImageUrl {
        image_url: ImageUrl { url, detail: None },
    }
}

/// Refuses an item field its `type` does not carry (`id` and `status` are allowed on every
/// item: Codex sends them and they change nothing).
fn only_fields(item: &GuestItem, allowed: &[&str], path: &str) -> Result<(), TranslateError> {
    let set = [
        ("role", item.role.is_some()),
        ("content", item.content.is_some()),
        ("call_id", item.call_id.is_some()),
        ("name", item.name.is_some()),
        ("namespace", item.namespace.is_some()),
        ("arguments", item.arguments.is_some()),
        ("input", item.input.is_some()),
        ("output", item.output.is_some()),
        ("summary", item.summary.is_some()),
        ("encrypted_content", item.encrypted_content.is_some()),
    ];
    match set
        .iter()
        .find(|(name, present)| *present && !allowed.contains(name))
    {
        Some((name, _)) => Err(invalid(
            format!("{path}.{name}"),
            format!(
                "a `{}` item has no `{name}`",
                item.kind.as_deref().unwrap_or("message")
            ),
        )),
        None => Ok(()),
    }
}

/// Refuses a content part field its `type` does not carry.
fn part_fields(part: &GuestPart, allowed: &[&str], path: &str) -> Result<(), TranslateError> {
    let set = [
        ("text", part.text.is_some()),
        ("image_url", part.image_url.is_some()),
        ("detail", part.detail.is_some()),
        ("file_data", part.file_data.is_some()),
        ("filename", part.filename.is_some()),
        ("annotations", part.annotations.is_some()),
        ("logprobs", part.logprobs.is_some()),
    ];
    match set
        .iter()
        .find(|(name, present)| *present && !allowed.contains(name))
    {
        Some((name, _)) => Err(invalid(
            format!("{path}.{name}"),
            format!("an `{}` part has no `{name}`", part.kind),
        )),
        None => Ok(()),
    }
}

#[cfg(test)]
#[path = "responses_ingress_tests.rs"]
mod tests;
