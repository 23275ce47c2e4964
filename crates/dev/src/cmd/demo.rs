//! `switchyard-dev demo`: the main job end to end on a machine without a model: the real, pinned
//! Gemini CLI runs a task through Switchyard's gateway against a scripted OpenAI-compatible
//! upstream on 127.0.0.1, whose answer depends on a file the CLI reads with a tool.
//!
//! The script: the first model request is answered with a `read_file("notes.txt")` tool call;
//! the second (which carries the tool result) with a sentence quoting the secret word found in
//! that tool result, or "I could not read the file." when it is not there.

use anyhow::Result;
use std::path::PathBuf;
use switchyard_testkit::chat_upstream::{ChatUpstream, RecordedRequest, Reply, Script};

/// `switchyard-dev demo` flags.
#[derive(Debug, clap::Args)]
pub struct DemoArgs {
    /// Record the run here (inspect with `switchyard records --records DIR list`).
    #[arg(long)]
    pub records: Option<PathBuf>,
    /// Output format of the run.
    #[arg(long, value_enum, default_value = "text")]
    pub output: switchyard_runner::OutputMode,
    /// A sealed Gemini CLI install (default: the one `switchyard install gemini-cli` made).
    #[arg(long)]
    pub gemini_binary: Option<PathBuf>,
}

/// The word the demo's workspace file holds.
pub const SECRET_WORD: &str = "marmalade";

/// The answer the scripted model gives once it has seen the tool result.
pub fn answer_from_tool_result(req: &RecordedRequest) -> Reply {
    let seen = req
        .tool_messages()
        .iter()
        .filter_map(|m| m["content"].as_str().map(str::to_owned))
        .find_map(|content| {
            content.split("secret word is ").nth(1).map(|rest| {
                rest.chars()
                    .take_while(|c| c.is_alphanumeric())
                    .collect::<String>()
            })
        });
    match seen {
        Some(word) => Reply::text_stream(["The secret word in notes.txt ", &format!("is {word}.")]),
        None => Reply::text_stream(["I could not read the file."]),
    }
}

/// The demo's scripted upstream.
pub fn demo_script() -> Script {
    Script::new()
        .then_when(
            |r| r.tool_messages().is_empty(),
            Reply::tool_calls_stream(
                &[("call_demo_1", "read_file", r#"{"file_path":"notes.txt"}"#)],
                7,
            ),
        )
        .then_when(
            |r| !r.tool_messages().is_empty(),
            Reply::Dynamic(std::sync::Arc::new(answer_from_tool_result)),
        )
}

/// Entry point.
pub async fn run(args: DemoArgs) -> Result<u8> {
    let upstream = ChatUpstream::start(demo_script()).await?;
    let workspace = tempfile::tempdir()?;
    std::fs::write(
        workspace.path().join("notes.txt"),
        format!("Meeting notes.\nThe secret word is {SECRET_WORD}.\n"),
    )?;
    eprintln!(
        "[demo] scripted upstream at {}; workspace {}",
        upstream.base_url(),
        workspace.path().display()
    );
    let settings = switchyard_runner::RunSettings {
        workdir: Some(workspace.path().to_path_buf()),
        prompt: vec!["What is the secret word in notes.txt? Read the file to find out.".into()],
        upstream_url: Some(format!("{}/v1", upstream.base_url())),
        upstream_model: Some("scripted-demo-model".into()),
        records: args.records,
        output: Some(args.output),
        timeout: Some(120),
        gemini_binary: args.gemini_binary,
        ..Default::default()
    };
    let code = switchyard::cmd::run::run(switchyard::cmd::run::RunArgs {
        settings,
        validate_config: false,
    })
    .await?;
    upstream.stop().await;
    Ok(code)
}
