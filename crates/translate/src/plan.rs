//! The upstream plan: what the provider's switches ([`ProviderOptions`]) make of an upstream
//! Chat Completions request, whichever guest API it came from. Every ingress hands its request
//! here before it goes upstream, so a provider profile means the same for Gemini CLI, OpenCode
//! and every later guest.
//!
//! In order: `developer` messages become `system` unless the upstream knows the role; tool
//! schemas are cleaned ([`crate::schema::clean_schema`]); `tool_choice: "required"` becomes
//! `auto` where it is not accepted; an assistant turn that only calls tools gets the `content`
//! the provider wants; more stop sequences than the provider takes is a typed error; a JSON
//! Schema answer format is sent in the provider's form; `max_tokens` gets the provider's
//! default when the guest set none; `top_k` and `reasoning_effort` are dropped where not
//! accepted; a request with tools is not streamed upstream where the provider's streams with
//! tools break; a streamed request asks for usage. Each change is noted in the report. A
//! request already in the provider's form (the GenerateContent translation builds it so) passes
//! unchanged, with no note.

use serde_json::{Value, json};

use crate::error::TranslateError;
use crate::openai::{ChatMessage, ChatRequest, JsonSchemaFormat, ResponseFormat, StreamOptions};
use crate::options::{
    JsonSchemaMode, ProviderOptions, SchemaChange, ThinkingMode, ToolCallContent, TranslationReport,
};
use crate::schema::clean_schema;

/// Whether the request's tool schemas are cleaned already.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Schemas {
    /// The ingress built them cleaned (the GenerateContent translation converts Google's
    /// schemas with [`clean_schema`]): cleaning again would find nothing, at the cost of a walk
    /// of every schema on every request.
    Clean,
    /// As the guest sent them.
    Guest,
}

/// Applies `provider`'s switches to `chat` (see the module docs).
pub fn apply(
    chat: &mut ChatRequest,
    provider: &ProviderOptions,
    report: &mut TranslationReport,
    schemas: Schemas,
) -> Result<(), TranslateError> {
    developer_messages(chat, provider, report);
    if schemas == Schemas::Guest {
        tool_schemas(chat, report);
    }
    tool_choice(chat, provider, report);
    tool_call_content(chat, provider);
    if chat.stop.len() > provider.max_stop_sequences {
        return Err(TranslateError::TooManyStopSequences {
            count: chat.stop.len(),
            max: provider.max_stop_sequences,
        });
    }
    response_format(chat, provider, report);
    if chat.max_tokens.is_none()
        && !chat.extra.contains_key("max_completion_tokens")
        && provider.default_max_tokens > 0
    {
        // Without a cap a local server generates until its context is full.
        chat.max_tokens = Some(provider.default_max_tokens);
        report.mapped_options.push(format!(
            "no output limit: max_tokens={} (default_max_tokens)",
            provider.default_max_tokens
        ));
    }
    if let Some(top_k) = &chat.top_k
        && !provider.forward_top_k
    {
        report.dropped_options.push(format!("top_k={top_k}"));
        chat.top_k = None;
    }
    if let Some(effort) = &chat.reasoning_effort
        && provider.thinking != ThinkingMode::ReasoningEffort
    {
        report
            .dropped_options
            .push(format!("reasoning_effort={}", json!(effort)));
        chat.reasoning_effort = None;
    }
    if chat.stream && !chat.tools.is_empty() && !provider.stream_tools {
        chat.stream = false;
        chat.stream_options = None;
        report
            .mapped_options
            .push("tools offered and stream_tools off: asked without streaming".into());
    }
    if chat.stream
        && !chat
            .stream_options
            .as_ref()
            .is_some_and(|o| o.include_usage)
    {
        // The gateway always reads usage when the upstream has it; the guest gets it only if
        // it asked.
        chat.stream_options = Some(StreamOptions {
            include_usage: true,
        });
        report
            .mapped_options
            .push("stream_options.include_usage=true (read by the gateway)".into());
    }
    Ok(())
}

fn developer_messages(
    chat: &mut ChatRequest,
    provider: &ProviderOptions,
    report: &mut TranslationReport,
) {
    if provider.developer_role {
        return;
    }
    let mut mapped = 0;
    for message in &mut chat.messages {
        if let ChatMessage::Developer { content, name } = message {
            *message = ChatMessage::System {
                content: std::mem::take(content),
                name: name.take(),
            };
            mapped += 1;
        }
    }
    if mapped > 0 {
        report.mapped_options.push(format!(
            "{mapped} developer message(s) sent as system (developer_role off)"
        ));
    }
}

fn tool_schemas(chat: &mut ChatRequest, report: &mut TranslationReport) {
    for tool in &mut chat.tools {
        let parameters = &mut tool.function.parameters;
        if parameters.is_null() {
            continue;
        }
        let cleaned = clean_schema(parameters);
        // A schema cleaned before (the GenerateContent translation's) comes back unchanged; the
        // `$ref`s it could not inline were reported then.
        if !cleaned.dropped_keys.is_empty() || cleaned.rewrites > 0 {
            *parameters = cleaned.schema;
            report.schema_changes.push(SchemaChange {
                target: tool.function.name.clone(),
                dropped_keys: cleaned.dropped_keys,
                unresolved_refs: cleaned.unresolved_refs,
                rewrites: cleaned.rewrites,
            });
        }
    }
}

fn tool_choice(chat: &mut ChatRequest, provider: &ProviderOptions, report: &mut TranslationReport) {
    if provider.tool_choice_required {
        return;
    }
    let forced = match &chat.tool_choice {
        Some(Value::String(s)) => s == "required",
        // A named function is a forced call as well.
        Some(Value::Object(o)) => o.get("type").and_then(Value::as_str) == Some("function"),
        _ => false,
    };
    if forced {
        chat.tool_choice = Some(json!("auto"));
        report.mapped_options.push(
            "tool_choice required -> auto (the upstream does not accept \"required\")".into(),
        );
    }
}

fn tool_call_content(chat: &mut ChatRequest, provider: &ProviderOptions) {
    for message in &mut chat.messages {
        if let ChatMessage::Assistant {
            content,
            tool_calls,
            ..
        } = message
            && !tool_calls.is_empty()
            && content.as_deref().is_none_or(str::is_empty)
        {
            *content = match provider.tool_call_content {
                ToolCallContent::Null => None,
                ToolCallContent::Empty => Some(String::new()),
            };
        }
    }
}

fn response_format(
    chat: &mut ChatRequest,
    provider: &ProviderOptions,
    report: &mut TranslationReport,
) {
    let Some(ResponseFormat::JsonSchema { json_schema }) = &chat.response_format else {
        return;
    };
    if provider.json_schema == JsonSchemaMode::JsonSchema {
        return;
    }
    let schema = json_schema.schema.clone();
    chat.response_format = Some(json_format(
        schema,
        provider.json_schema,
        &mut chat.messages,
    ));
    report.mapped_options.push(format!(
        "response_format json_schema sent as {:?} (json_schema switch)",
        provider.json_schema
    ));
}

/// The answer format for JSON following `schema`, in the form `mode` names (the schema goes
/// into the system prompt for [`JsonSchemaMode::PromptOnly`]).
pub fn json_format(
    schema: Value,
    mode: JsonSchemaMode,
    messages: &mut Vec<ChatMessage>,
) -> ResponseFormat {
    match mode {
        JsonSchemaMode::JsonSchema => ResponseFormat::JsonSchema {
            json_schema: JsonSchemaFormat {
                name: "response".into(),
                schema,
                strict: false,
            },
        },
        JsonSchemaMode::JsonObjectSchema => ResponseFormat::JsonObject {
            schema: Some(schema),
        },
        JsonSchemaMode::PromptOnly => {
            crate::request::schema_in_system_prompt(messages, &schema);
            ResponseFormat::JsonObject { schema: None }
        }
    }
}

#[cfg(test)]
#[path = "plan_tests.rs"]
mod tests;
