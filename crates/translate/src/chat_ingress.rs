//! The request side of the Chat Completions ingress (guests that speak OpenAI's API, such as
//! OpenCode): the guest's `POST /v1/chat/completions` body is checked and prepared for an
//! upstream that speaks the same API.
//!
//! * Every field is modeled ([`GuestChatRequest`] and its parts) or on a forward list
//!   ([`FORWARDED_FIELDS`], [`FORWARDED_MESSAGE_FIELDS`]); anything else is a
//!   [`TranslateError::UnknownField`], never dropped.
//! * `model` becomes the routed upstream model; `n` must be 1.
//! * The private call identity is removed from every declared schema and from the arguments of
//!   every call in the history ([`ChatIngressOptions::strip`]).
//! * `data:image/png` URLs are re-encoded as lossless WebP under the same rules as Google
//!   requests (`png_pass`). Remote image links, `file` and `input_audio` parts follow
//!   [`crate::attachment`] (a link only with `allow_remote_media`; a document or audio only
//!   where the provider takes it, else text or a placeholder).
//! * The request becomes the gateway's typed upstream request ([`ChatRequest`]); the
//!   provider's switches are applied to it by the upstream plan ([`crate::plan`]), as for every
//!   ingress.
//!
//! The call ids of the history and of the tool results are handed back for the gateway's
//! call-id ledger.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::attachment::{self, Origin};
use crate::error::TranslateError;
use crate::image::PngConversion;
use crate::image_cache::ConversionCache;
use crate::openai::{
    ChatFunction, ChatMessage, ChatRequest, ChatTool, ContentPart, FileData, FunctionCallSpec,
    ImageUrl, InputAudio, ToolCall, UserContent,
};
use crate::options::{ProviderOptions, TranslationReport};
use crate::png_pass::PngPass;
use crate::private_argument::strip_from_schema;

/// Top-level request fields forwarded unchanged (sampling and output controls whose meaning
/// does not depend on the gateway).
pub const FORWARDED_FIELDS: &[&str] = &[
    "max_tokens",
    "max_completion_tokens",
    "temperature",
    "top_p",
    "min_p",
    "stop",
    "seed",
    "presence_penalty",
    "frequency_penalty",
    "repetition_penalty",
    "response_format",
    "parallel_tool_calls",
    "user",
];

/// Message fields forwarded unchanged.
pub const FORWARDED_MESSAGE_FIELDS: &[&str] = &["name"];

/// A guest's Chat Completions request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GuestChatRequest {
    /// The model the guest asked for (routed by the gateway).
    pub model: String,
    /// The conversation.
    pub messages: Vec<GuestMessage>,
    /// Function tools.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<Vec<GuestTool>>,
    /// `auto`, `none`, `required` or a named function.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_choice: Option<Value>,
    /// Stream the answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream: Option<bool>,
    /// `{"include_usage": bool}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream_options: Option<GuestStreamOptions>,
    /// Number of choices (only 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub n: Option<u32>,
    /// Non-standard top-k (forwarded when the provider accepts it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub top_k: Option<Value>,
    /// Reasoning effort (forwarded when the provider takes it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_effort: Option<Value>,
    /// Everything else: [`FORWARDED_FIELDS`] only.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `stream_options`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GuestStreamOptions {
    /// Ask for a final usage chunk.
    #[serde(default)]
    pub include_usage: bool,
    /// Nothing else is known.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// One message; which fields a role may carry is checked in [`prepare_chat_request`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GuestMessage {
    /// `system`, `developer`, `user`, `assistant` or `tool`.
    pub role: String,
    /// Text or content parts (`null` for an assistant turn that only calls tools).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<GuestContent>,
    /// An assistant turn's calls.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_calls: Option<Vec<GuestToolCall>>,
    /// The call a tool message answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    /// The reasoning of an assistant turn, sent back.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_content: Option<String>,
    /// Everything else: [`FORWARDED_MESSAGE_FIELDS`] only.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// Message content.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum GuestContent {
    /// Plain text.
    Text(String),
    /// Parts.
    Parts(Vec<GuestPart>),
}

/// A content part: `text`, `image_url`, `file` or `input_audio`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GuestPart {
    /// `text`, `image_url`, `file` or `input_audio`.
    #[serde(rename = "type")]
    pub kind: String,
    /// The text of a `text` part.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// The image of an `image_url` part.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_url: Option<GuestImageUrl>,
    /// The document of a `file` part.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<GuestFile>,
    /// The audio of an `input_audio` part.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_audio: Option<GuestAudio>,
    /// Nothing else is known.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
    /// What the part goes upstream as, when the attachment rules replaced it.
    #[serde(skip)]
    pub upstream: Option<ContentPart>,
}

/// `file` of a `file` part.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GuestFile {
    /// The document's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filename: Option<String>,
    /// `data:<mime>;base64,<data>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file_data: Option<String>,
    /// A provider's uploaded-file id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file_id: Option<String>,
    /// Nothing else is known.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `input_audio` of an `input_audio` part.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GuestAudio {
    /// Base64 audio.
    pub data: String,
    /// `wav` or `mp3`.
    pub format: String,
    /// Nothing else is known.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `image_url`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GuestImageUrl {
    /// A data URL or a link.
    pub url: String,
    /// `auto`, `low` or `high`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// Nothing else is known.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// An assistant turn's call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GuestToolCall {
    /// The model's call id.
    pub id: String,
    /// `function`.
    #[serde(rename = "type")]
    pub kind: String,
    /// Name and arguments.
    pub function: GuestFunctionCall,
    /// Nothing else is known.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// A call's function.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GuestFunctionCall {
    /// Tool name.
    pub name: String,
    /// JSON object text.
    pub arguments: String,
    /// Nothing else is known.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// A declared tool.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GuestTool {
    /// `function`.
    #[serde(rename = "type")]
    pub kind: String,
    /// The declaration.
    pub function: GuestFunction,
    /// Nothing else is known.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// A function declaration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GuestFunction {
    /// Name.
    pub name: String,
    /// Description.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// JSON Schema of the arguments.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parameters: Option<Value>,
    /// Strict schema adherence.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub strict: Option<bool>,
    /// Nothing else is known.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// How a guest request is prepared.
#[derive(Debug, Clone)]
pub struct ChatIngressOptions<'a> {
    /// The routed upstream model.
    pub upstream_model: String,
    /// What the upstream accepts.
    pub provider: ProviderOptions,
    /// The private argument to remove (the host-tool call identity).
    pub strip: Option<&'a str>,
    /// Convert a PNG the cache does not hold now (else hand it back, see
    /// [`crate::TranslateOptions::convert_on_miss`]).
    pub convert_on_miss: bool,
}

/// A prepared request.
#[derive(Debug, Clone)]
pub struct PreparedChat {
    /// The upstream request, before the upstream plan.
    pub chat: ChatRequest,
    /// The guest asked for a stream.
    pub stream: bool,
    /// The guest asked for a usage chunk.
    pub include_usage: bool,
    /// Decisions taken.
    pub report: TranslationReport,
    /// Ids of the calls in the history (assistant `tool_calls`), in order.
    pub history_call_ids: Vec<String>,
    /// The `tool_call_id`s of the tool messages, with their paths.
    pub tool_result_ids: Vec<(String, String)>,
    /// Prompt-token estimate of the whole request.
    pub prompt_token_estimate: u32,
    /// PNGs not converted because the cache did not hold them.
    pub unconverted_pngs: Vec<Vec<u8>>,
}

/// Parses a guest body.
pub fn parse_chat_request(body: &[u8]) -> Result<GuestChatRequest, TranslateError> {
    serde_json::from_slice(body).map_err(|e| TranslateError::InvalidBody(e.to_string()))
}

/// Refuses the first key of `extra` not in `allowed`, named by its path.
pub(crate) fn unknown(
    extra: &Map<String, Value>,
    allowed: &[&str],
    path: &str,
) -> Result<(), TranslateError> {
    match extra.keys().find(|k| !allowed.contains(&k.as_str())) {
        Some(key) => Err(TranslateError::UnknownField {
            path: format!("{path}{key}"),
        }),
        None => Ok(()),
    }
}

pub(crate) fn invalid(path: String, reason: impl Into<String>) -> TranslateError {
    TranslateError::InvalidValue {
        path,
        reason: reason.into(),
    }
}

/// Checks `request` and builds its upstream body (see the module docs).
pub fn prepare_chat_request(
    mut request: GuestChatRequest,
    options: &ChatIngressOptions<'_>,
    images: Option<&ConversionCache>,
) -> Result<PreparedChat, TranslateError> {
    unknown(&request.extra, FORWARDED_FIELDS, "")?;
    if let Some(stream_options) = &request.stream_options {
        unknown(&stream_options.extra, &[], "stream_options.")?;
    }
    if let Some(n) = request.n
        && n != 1
    {
        return Err(invalid("n".into(), format!("is {n}; only 1 is supported")));
    }
    if request.messages.is_empty() {
        return Err(invalid("messages".into(), "is empty"));
    }
    let mut report = TranslationReport::default();
    let mut pngs = PngPass::new(images, options.convert_on_miss);
    let mut history_call_ids = Vec::new();
    let mut tool_result_ids = Vec::new();
    let mut text_len = 0usize;
    for (mi, message) in request.messages.iter_mut().enumerate() {
        let path = format!("messages[{mi}]");
        unknown(
            &message.extra,
            FORWARDED_MESSAGE_FIELDS,
            &format!("{path}."),
        )?;
        check_role(message, &path)?;
        if let Some(content) = &mut message.content {
            text_len += content_text_len(content);
            convert_parts(content, &mut pngs, &options.provider, &mut report, &path)?;
        }
        if let Some(id) = &message.tool_call_id {
            tool_result_ids.push((id.clone(), format!("{path}.tool_call_id")));
        }
        for (ci, call) in message.tool_calls.iter_mut().flatten().enumerate() {
            let call_path = format!("{path}.tool_calls[{ci}]");
            unknown(&call.extra, &[], &format!("{call_path}."))?;
            unknown(&call.function.extra, &[], &format!("{call_path}.function."))?;
            if call.kind != "function" {
                return Err(invalid(
                    format!("{call_path}.type"),
                    "only `function` calls",
                ));
            }
            text_len += call.function.arguments.len();
            history_call_ids.push(call.id.clone());
            if let Some(name) = options.strip {
                strip_call_argument(&mut call.function.arguments, name);
            }
        }
    }
    for (ti, tool) in request.tools.iter_mut().flatten().enumerate() {
        let path = format!("tools[{ti}]");
        unknown(&tool.extra, &[], &format!("{path}."))?;
        unknown(&tool.function.extra, &[], &format!("{path}.function."))?;
        if tool.kind != "function" {
            return Err(invalid(format!("{path}.type"), "only `function` tools"));
        }
        if let (Some(name), Some(schema)) = (options.strip, tool.function.parameters.as_mut()) {
            strip_from_schema(schema, name);
        }
        text_len += tool.function.description.as_ref().map_or(0, String::len);
        text_len += tool
            .function
            .parameters
            .as_ref()
            .map_or(0, |p| p.to_string().len());
    }
    let stream = request.stream.unwrap_or(false);
    let include_usage = request
        .stream_options
        .as_ref()
        .is_some_and(|o| o.include_usage);
    let chat = to_upstream(request, &options.upstream_model)?;
    Ok(PreparedChat {
        chat,
        stream,
        include_usage,
        report,
        history_call_ids,
        tool_result_ids,
        prompt_token_estimate: u32::try_from(text_len.div_ceil(4)).unwrap_or(u32::MAX),
        unconverted_pngs: pngs.unconverted_pngs,
    })
}

/// A checked guest request as the gateway's upstream request for `model`.
fn to_upstream(request: GuestChatRequest, model: &str) -> Result<ChatRequest, TranslateError> {
    let GuestChatRequest {
        model: _,
        messages,
        tools,
        tool_choice,
        stream,
        stream_options: _,
        n: _,
        top_k,
        reasoning_effort,
        mut extra,
    } = request;
    let messages = messages
        .into_iter()
        .enumerate()
        .map(|(mi, m)| message(m, &format!("messages[{mi}]")))
        .collect::<Result<Vec<_>, _>>()?;
    let tools = tools
        .into_iter()
        .flatten()
        .map(|t| ChatTool {
            kind: t.kind,
            function: ChatFunction {
                name: t.function.name,
                description: t.function.description,
                parameters: t.function.parameters.unwrap_or(Value::Null),
                strict: t.function.strict,
            },
        })
        .collect();
    let mut take = |key: &str| extra.remove(key);
    let max_tokens = typed(take("max_tokens"), "max_tokens")?;
    let temperature = typed(take("temperature"), "temperature")?;
    let top_p = typed(take("top_p"), "top_p")?;
    let stop = match take("stop") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::String(one)) => vec![one],
        Some(many) => typed(Some(many), "stop")?.unwrap_or_default(),
    };
    let seed = typed(take("seed"), "seed")?;
    let presence_penalty = typed(take("presence_penalty"), "presence_penalty")?;
    let frequency_penalty = typed(take("frequency_penalty"), "frequency_penalty")?;
    let response_format = typed(take("response_format"), "response_format")?;
    let top_k = typed(top_k, "top_k")?;
    let reasoning_effort = typed(reasoning_effort, "reasoning_effort")?;
    Ok(ChatRequest {
        model: model.to_owned(),
        messages,
        tools,
        tool_choice,
        temperature,
        top_p,
        top_k,
        max_tokens,
        stop,
        seed,
        presence_penalty,
        frequency_penalty,
        response_format,
        reasoning_effort,
        stream: stream.unwrap_or(false),
        stream_options: None,
        extra,
    })
}

/// A forwarded value read as the gateway's type for it.
fn typed<T: serde::de::DeserializeOwned>(
    value: Option<Value>,
    path: &str,
) -> Result<Option<T>, TranslateError> {
    match value {
        None | Some(Value::Null) => Ok(None),
        Some(value) => serde_json::from_value(value)
            .map(Some)
            .map_err(|e| invalid(path.to_owned(), e.to_string())),
    }
}

/// The text of message content (parts: their texts joined).
fn text_of(content: Option<GuestContent>, path: &str) -> Result<Option<String>, TranslateError> {
    match content {
        None => Ok(None),
        Some(GuestContent::Text(text)) => Ok(Some(text)),
        Some(GuestContent::Parts(parts)) => {
            let mut text = String::new();
            for (pi, part) in parts.into_iter().enumerate() {
                match (part.kind.as_str(), part.text) {
                    ("text", Some(t)) => text.push_str(&t),
                    (kind, _) => {
                        return Err(TranslateError::Unsupported {
                            path: format!("{path}.content[{pi}]"),
                            feature: format!("`{kind}` content in a message of this role"),
                        });
                    }
                }
            }
            Ok(Some(text))
        }
    }
}

/// One checked guest message as an upstream message.
fn message(m: GuestMessage, path: &str) -> Result<ChatMessage, TranslateError> {
    let GuestMessage {
        role,
        content,
        tool_calls,
        tool_call_id,
        reasoning_content,
        mut extra,
    } = m;
    let name: Option<String> = typed(extra.remove("name"), &format!("{path}.name"))?;
    Ok(match role.as_str() {
        "system" => ChatMessage::System {
            content: text_of(content, path)?.unwrap_or_default(),
            name,
        },
        "developer" => ChatMessage::Developer {
            content: text_of(content, path)?.unwrap_or_default(),
            name,
        },
        "user" => ChatMessage::User {
            content: match content {
                None => UserContent::Text(String::new()),
                Some(GuestContent::Text(text)) => UserContent::Text(text),
                Some(GuestContent::Parts(parts)) => {
                    UserContent::Parts(parts.into_iter().filter_map(user_part).collect())
                }
            },
            name,
        },
        "assistant" => ChatMessage::Assistant {
            name,
            content: text_of(content, path)?,
            tool_calls: tool_calls
                .into_iter()
                .flatten()
                .map(|c| ToolCall {
                    id: c.id,
                    kind: c.kind,
                    function: FunctionCallSpec {
                        name: c.function.name,
                        arguments: c.function.arguments,
                    },
                })
                .collect(),
            reasoning_content,
        },
        // `check_role` admitted only these and `tool`, which names its call.
        _ => ChatMessage::Tool {
            tool_call_id: tool_call_id.unwrap_or_default(),
            content: text_of(content, path)?.unwrap_or_default(),
        },
    })
}

/// A checked user part (see [`convert_parts`]).
fn user_part(part: GuestPart) -> Option<ContentPart> {
    if let Some(upstream) = part.upstream {
        return Some(upstream);
    }
    match (part.text, part.image_url, part.file, part.input_audio) {
        (Some(text), None, None, None) => Some(ContentPart::Text { text }),
        (None, Some(image), None, None) => Some(ContentPart::ImageUrl {
            image_url: ImageUrl {
                url: image.url,
                detail: image.detail,
            },
        }),
        (None, None, Some(file), None) => Some(ContentPart::File {
            file: FileData {
                filename: file.filename,
                file_data: file.file_data,
                file_id: file.file_id,
            },
        }),
        (None, None, None, Some(audio)) => Some(ContentPart::InputAudio {
            input_audio: InputAudio {
                data: audio.data,
                format: audio.format,
            },
        }),
        _ => None,
    }
}

fn check_role(message: &GuestMessage, path: &str) -> Result<(), TranslateError> {
    let role = message.role.as_str();
    if !matches!(role, "system" | "developer" | "user" | "assistant" | "tool") {
        return Err(invalid(
            format!("{path}.role"),
            format!("unknown role {role:?}"),
        ));
    }
    if message.tool_calls.is_some() && role != "assistant" {
        return Err(invalid(
            format!("{path}.tool_calls"),
            "only assistant messages carry calls",
        ));
    }
    if message.reasoning_content.is_some() && role != "assistant" {
        return Err(invalid(
            format!("{path}.reasoning_content"),
            "only assistant messages carry reasoning",
        ));
    }
    match (role, &message.tool_call_id) {
        ("tool", None) => Err(invalid(
            format!("{path}.tool_call_id"),
            "a tool message must name the call it answers",
        )),
        ("tool", Some(_)) | (_, None) => Ok(()),
        (_, Some(_)) => Err(invalid(
            format!("{path}.tool_call_id"),
            "only tool messages answer calls",
        )),
    }
}

fn content_text_len(content: &GuestContent) -> usize {
    match content {
        GuestContent::Text(text) => text.len(),
        GuestContent::Parts(parts) => parts
            .iter()
            .map(|p| p.text.as_ref().map_or(0, String::len))
            .sum(),
    }
}

/// Checks a message's parts and applies the media rules: PNG data URLs re-encoded, remote
/// image links and attachments by [`crate::attachment`] (the part's `upstream`).
fn convert_parts(
    content: &mut GuestContent,
    pngs: &mut PngPass<'_>,
    provider: &ProviderOptions,
    report: &mut TranslationReport,
    path: &str,
) -> Result<(), TranslateError> {
    let GuestContent::Parts(parts) = content else {
        return Ok(());
    };
    for (pi, part) in parts.iter_mut().enumerate() {
        let part_path = format!("{path}.content[{pi}]");
        unknown(&part.extra, &[], &format!("{part_path}."))?;
        let fields = (
            part.text.is_some(),
            part.image_url.is_some(),
            part.file.is_some(),
            part.input_audio.is_some(),
        );
        let origin = Origin::Message;
        match (part.kind.as_str(), fields) {
            ("text", (true, false, false, false)) => {}
            ("image_url", (false, true, false, false)) => {
                let Some(image) = &mut part.image_url else {
                    continue;
                };
                unknown(&image.extra, &[], &format!("{part_path}.image_url."))?;
                let url_path = format!("{part_path}.image_url.url");
                if !image.url.starts_with("data:") {
                    let replaced =
                        attachment::remote(None, &image.url, origin, provider, report, &url_path);
                    if matches!(replaced, ContentPart::ImageUrl { .. }) {
                        report.images_forwarded += 1;
                    } else {
                        part.upstream = Some(replaced);
                    }
                    continue;
                }
                report.images_forwarded += 1;
                let Some(data) = image.url.strip_prefix("data:image/png;base64,") else {
                    continue;
                };
                let bytes =
                    STANDARD
                        .decode(data.trim())
                        .map_err(|_| TranslateError::InvalidBase64 {
                            path: url_path.clone(),
                        })?;
                if let Some(conversion) = pngs.webp(&bytes, provider, report, &url_path)
                    && let PngConversion::Reencoded { webp } = conversion.as_ref()
                {
                    image.url = format!("data:image/webp;base64,{}", STANDARD.encode(webp));
                }
            }
            ("file", (false, false, true, false)) => {
                let Some(file) = &part.file else { continue };
                unknown(&file.extra, &[], &format!("{part_path}.file."))?;
                let file_path = format!("{part_path}.file");
                let data_url = file
                    .file_data
                    .as_deref()
                    .and_then(|d| d.strip_prefix("data:"))
                    .and_then(|d| d.split_once(";base64,"));
                part.upstream = Some(match (data_url, &file.file_id) {
                    (Some((mime, data)), _) => {
                        match attachment::inline(mime, data, origin, provider, report, &file_path) {
                            ContentPart::File { file: mut sent } if file.filename.is_some() => {
                                sent.filename.clone_from(&file.filename);
                                ContentPart::File { file: sent }
                            }
                            other => other,
                        }
                    }
                    (None, Some(id)) => attachment::placeholder(
                        report,
                        &file_path,
                        &format!("a file stored with another provider (id {id:?})"),
                    ),
                    (None, None) => attachment::placeholder(
                        report,
                        &file_path,
                        "a file part without base64 data",
                    ),
                });
            }
            ("input_audio", (false, false, false, true)) => {
                let Some(audio) = &part.input_audio else {
                    continue;
                };
                unknown(&audio.extra, &[], &format!("{part_path}.input_audio."))?;
                let mime = match audio.format.as_str() {
                    "mp3" => "audio/mpeg".to_owned(),
                    other => format!("audio/{other}"),
                };
                let audio_path = format!("{part_path}.input_audio");
                part.upstream = Some(attachment::inline(
                    &mime,
                    &audio.data,
                    origin,
                    provider,
                    report,
                    &audio_path,
                ));
            }
            (kind @ ("text" | "image_url" | "file" | "input_audio"), _) => {
                return Err(invalid(
                    part_path,
                    format!("a `{kind}` part needs its `{kind}` field, and no other"),
                ));
            }
            (kind, _) => {
                return Err(TranslateError::Unsupported {
                    path: part_path,
                    feature: format!("`{kind}` content part"),
                });
            }
        }
    }
    Ok(())
}

/// Removes `name` from a call's JSON arguments (text left as it was when it is not there).
fn strip_call_argument(arguments: &mut String, name: &str) {
    if let Ok(Value::Object(mut object)) = serde_json::from_str::<Value>(arguments)
        && object.remove(name).is_some()
    {
        *arguments = Value::Object(object).to_string();
    }
}

#[cfg(test)]
#[path = "chat_ingress_tests.rs"]
mod tests;
