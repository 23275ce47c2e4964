//! `switchyard-dev capture-upstream`: records how a real OpenAI-compatible server answers the
//! request shapes the gateway sends (and the ones it could send), as fixtures for replay tests.
//!
//! For each case it writes `<out>/<server>-<version>/<case>/`:
//! - `request.json`: the Chat Completions request sent;
//! - `response.txt`: the raw response body (SSE text or JSON), exactly as received;
//! - `response.json`: the HTTP status and content type.
//!
//! and a `manifest.json` with the server, its version, the model, the date and each case's status.
//! `stream_context_overflow` needs a server started with a small context (e.g. `--n_ctx 2048`).

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result};
use serde_json::{Value, json};

/// `switchyard-dev capture-upstream` flags.
#[derive(Debug, clap::Args)]
pub struct CaptureUpstreamArgs {
    /// The server's Chat Completions base URL (e.g. http://127.0.0.1:8000/v1).
    #[arg(long)]
    pub url: String,
    /// The server's name in the fixture path (e.g. llama-cpp-python).
    #[arg(long)]
    pub server: String,
    /// The server's version (e.g. 0.3.36).
    #[arg(long)]
    pub server_version: String,
    /// The model to ask for.
    #[arg(long, default_value = "model")]
    pub model: String,
    /// Where the fixtures go.
    #[arg(long, default_value = "fixtures/upstreams")]
    pub out: PathBuf,
    /// Seconds one request may take.
    #[arg(long, default_value_t = 180)]
    pub timeout: u64,
}

/// The cases: name, what it shows, request body (without `model`).
fn cases() -> Vec<(&'static str, &'static str, Value)> {
    let tools = json!([{"type": "function", "function": {"name": "read_file",
        "description": "Read a file", "parameters": {"type": "object",
            "properties": {"file_path": {"type": "string"}}, "required": ["file_path"]}}}]);
    let user = json!({"role": "user", "content": "Read notes.txt"});
    let call = json!([{"id": "call_1", "type": "function",
        "function": {"name": "read_file", "arguments": "{\"file_path\":\"notes.txt\"}"}}]);
    let tool_turn = |content: Value| {
        json!({"max_tokens": 8, "messages": [user, {"role": "assistant", "content": content,
            "tool_calls": call}, {"role": "tool", "tool_call_id": "call_1", "content": "secret"}]})
    };
    let schema = json!({"type": "object", "properties": {"score": {"type": "integer"}},
        "required": ["score"]});
    let rate = json!({"role": "user", "content": "Rate this from 1 to 5."});
    vec![
        (
            "stream_text",
            "streamed text with stream_options.include_usage",
            json!({"stream": true, "stream_options": {"include_usage": true}, "max_tokens": 12,
                "messages": [{"role": "user", "content": "Say hi"}]}),
        ),
        (
            "stream_tools_auto",
            "streamed, tools offered, tool_choice auto",
            json!({"stream": true, "max_tokens": 40, "tools": tools, "tool_choice": "auto",
                "messages": [user]}),
        ),
        (
            "tools_auto",
            "not streamed, tools offered, tool_choice auto",
            json!({"max_tokens": 40, "tools": tools, "tool_choice": "auto", "messages": [user]}),
        ),
        (
            "stream_tools_named",
            "streamed, one tool forced by name",
            json!({"stream": true, "max_tokens": 60, "tools": tools,
                "tool_choice": {"type": "function", "function": {"name": "read_file"}},
                "messages": [user]}),
        ),
        (
            "stream_tools_required",
            "streamed, tool_choice required",
            json!({"stream": true, "max_tokens": 60, "tools": tools, "tool_choice": "required",
                "messages": [user]}),
        ),
        (
            "tool_turn_content_null",
            "history with an assistant tool-call turn whose content is null",
            tool_turn(Value::Null),
        ),
        (
            "tool_turn_content_empty",
            "the same turn with content \"\"",
            tool_turn(json!("")),
        ),
        (
            "json_schema",
            "response_format json_schema",
            json!({"max_tokens": 20, "messages": [rate], "response_format": {"type": "json_schema",
                "json_schema": {"name": "response", "strict": false, "schema": schema}}}),
        ),
        (
            "json_object_schema",
            "response_format json_object with a schema",
            json!({"max_tokens": 20, "messages": [rate],
                "response_format": {"type": "json_object", "schema": schema}}),
        ),
        (
            "stream_context_overflow",
            "streamed, a prompt longer than the server's context (last: the server may drop its connection after it; capture with a small n_ctx)",
            json!({"stream": true, "max_tokens": 10,
                "messages": [{"role": "user", "content": "word ".repeat(6000)}]}),
        ),
    ]
}

/// Entry point.
pub async fn run(args: CaptureUpstreamArgs) -> Result<u8> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(args.timeout))
        .build()?;
    let dir = args
        .out
        .join(format!("{}-{}", args.server, args.server_version));
    let endpoint = format!("{}/chat/completions", args.url.trim_end_matches('/'));
    let mut captured = Vec::new();
    for (name, about, mut body) in cases() {
        if let Some(object) = body.as_object_mut() {
            object.insert("model".into(), Value::from(args.model.clone()));
        }
        let response = client
            .post(&endpoint)
            .json(&body)
            .send()
            .await
            .with_context(|| format!("{name}: sending to {endpoint}"))?;
        let status = response.status().as_u16();
        let content_type = response
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned();
        let text = response
            .text()
            .await
            .with_context(|| format!("{name}: body"))?;
        let case = dir.join(name);
        std::fs::create_dir_all(&case)?;
        std::fs::write(case.join("request.json"), serde_json::to_vec_pretty(&body)?)?;
        std::fs::write(case.join("response.txt"), &text)?;
        std::fs::write(
            case.join("response.json"),
            serde_json::to_vec_pretty(&json!({"status": status, "content_type": content_type}))?,
        )?;
        eprintln!(
            "[capture-upstream] {name}: HTTP {status}, {} bytes",
            text.len()
        );
        captured.push(json!({"case": name, "about": about, "status": status}));
    }
    let manifest = json!({
        "server": args.server,
        "server_version": args.server_version,
        "model": args.model,
        "captured_at": chrono::Utc::now().to_rfc3339(),
        "switchyard_version": env!("CARGO_PKG_VERSION"),
        "cases": captured,
    });
    std::fs::write(
        dir.join("manifest.json"),
        serde_json::to_vec_pretty(&manifest)?,
    )?;
    eprintln!("[capture-upstream] wrote {}", dir.display());
    Ok(0)
}
