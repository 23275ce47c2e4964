//! `switchyard-dev capture --agent claude-code`: records Claude Code fixtures by running the
//! real, pinned `claude -p` on stream-json through Switchyard's gateway (in process, its
//! Messages ingress) to a scripted Chat Completions upstream on 127.0.0.1.
//!
//! For each scenario it writes `<out>/<scenario>/`:
//! - `notes.jsonl`: the run's notes (the guest's stdout lines as received, the prompts,
//!   Switchyard's permission answers), which [`switchyard_backend::claude::run::replay`] maps to
//!   the events;
//! - `stdin.jsonl`: the lines Switchyard wrote to the guest; `stderr.txt`; `exit.json`;
//! - `requests.jsonl`: the Chat Completions requests the upstream received (Claude Code's, as
//!   the gateway translated them);
//! - `expected.jsonl` and `outcome.json`: the canonical events (without `run_started`) and the
//!   outcome;
//! - `manifest.json`: argv, the Claude Code version, prompts, the permission answer,
//!   redactions.
//!
//! Permission requests get the scenario's fixed answer. Before writing, the redacted notes
//! must replay to the live events.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use serde_json::{Value, json};
use switchyard_backend::claude::launch::{ClaudeLaunchConfig, prepare};
use switchyard_backend::claude::run::{ClaudePlan, Note, claude, replay};
use switchyard_backend::driver::RunLimits;
use switchyard_backend::gemini::launch::Secret;
use switchyard_backend::permission::{PermissionAsk, PermissionHost, PermissionRuling};
use switchyard_events::event::RunStarted;
use switchyard_gateway::{Gateway, GatewayConfig, GatewayDeps};
use switchyard_testkit::chat_upstream::{
    ChatUpstream, RecordedRequest, Reply, Script, StreamEvent, StreamReply, chunk,
};

use super::capture::{
    Driven, NotesFixture, RUN, WS, drive_captured, redact_notes, replayed_as_live, scratch,
};

/// The fixtures' Claude Code version directory.
pub const DEFAULT_OUT: &str = "fixtures/claude-code/2.1.332";
const MODEL: &str = "scripted-model";

/// What the scripted upstream answers.
#[derive(Debug, Clone, Copy)]
pub enum Upstream {
    Text,
    /// Reads `a.txt`, then answers.
    ReadThenText,
    /// Reads `quarterly.pdf`, then answers.
    ReadPdfThenText,
    /// Reads `a.txt` twice (identical calls) and `b.txt` in one response.
    ParallelReads,
    /// Runs `touch made.txt` with Bash, then answers.
    BashThenText,
    /// Reasoning, then text.
    Reasoning,
    /// HTTP 400 with an OpenAI error body.
    Http400,
}

/// One Claude Code capture scenario.
pub struct ClaudeScenario {
    pub name: &'static str,
    pub about: &'static str,
    pub upstream: Upstream,
    pub prompts: &'static [&'static str],
    /// How every permission request is answered.
    pub allow: bool,
}

const fn scenario(name: &'static str, about: &'static str, upstream: Upstream) -> ClaudeScenario {
    ClaudeScenario {
        name,
        about,
        upstream,
        prompts: &["Please do the task"],
        allow: true,
    }
}

/// Every Claude Code scenario.
pub fn scenarios() -> Vec<ClaudeScenario> {
    vec![
        scenario("text", "plain text answer in two deltas", Upstream::Text),
        ClaudeScenario {
            prompts: &["First task", "Second task"],
            ..scenario("two_prompts", "two prompts in one session", Upstream::Text)
        },
        scenario(
            "tool_read",
            "a Read inside the workspace (allowed without asking), then text",
            Upstream::ReadThenText,
        ),
        scenario(
            "read_pdf",
            "a Read of a PDF (a document block in its result), then text",
            Upstream::ReadPdfThenText,
        ),
        scenario(
            "tool_parallel",
            "three reads in one response, two identical",
            Upstream::ParallelReads,
        ),
        scenario(
            "bash_allowed",
            "Bash asks (can_use_tool) and is allowed",
            Upstream::BashThenText,
        ),
        ClaudeScenario {
            allow: false,
            ..scenario(
                "bash_rejected",
                "Bash asks and is denied with a message; the loop goes on",
                Upstream::BashThenText,
            )
        },
        scenario(
            "reasoning",
            "reasoning deltas (thinking blocks), then text",
            Upstream::Reasoning,
        ),
        scenario(
            "api_400",
            "the upstream answers 400: an API error result",
            Upstream::Http400,
        ),
    ]
}

fn first(r: &RecordedRequest) -> bool {
    r.tool_messages().is_empty()
}

fn script(upstream: Upstream, ws: &Path) -> Script {
    let read = |name: &str| json!({"file_path": ws.join(name)}).to_string();
    let then_text = Reply::text_stream(["Done", " with the task."]);
    match upstream {
        Upstream::Text => Script::always(Reply::text_stream(["Hello", " there."])),
        Upstream::ReadThenText => Script::new()
            .then_when(
                first,
                Reply::tool_calls_stream(&[("call_read", "Read", &read("a.txt"))], 8),
            )
            .then(then_text),
        Upstream::ReadPdfThenText => Script::new()
            .then_when(
                first,
                Reply::tool_calls_stream(&[("call_pdf", "Read", &read("quarterly.pdf"))], 8),
            )
            .then(then_text),
        Upstream::ParallelReads => Script::new()
            .then_when(
                first,
                Reply::tool_calls_stream(
                    &[
                        ("call_a1", "Read", &read("a.txt")),
                        ("call_a2", "Read", &read("a.txt")),
                        ("call_b", "Read", &read("b.txt")),
                    ],
                    8,
                ),
            )
            .then(then_text),
        Upstream::BashThenText => {
            let args = json!({"command": "touch made.txt", "description": "Make a file"});
            Script::new()
                .then_when(
                    first,
                    Reply::tool_calls_stream(&[("call_sh", "Bash", &args.to_string())], 8),
                )
                .then(then_text)
        }
        Upstream::Reasoning => Script::new().then(Reply::Stream(StreamReply::new(vec![
            StreamEvent::json(chunk::role()),
            StreamEvent::json(chunk::reasoning("Let me think. ")),
            StreamEvent::json(chunk::reasoning("Done thinking.")),
            StreamEvent::json(chunk::text("The answer.")),
            StreamEvent::json(chunk::finish("stop")),
            StreamEvent::json(chunk::usage(30, 9)),
        ]))),
        Upstream::Http400 => Script::always(Reply::Json {
            status: 400,
            body: json!({"error": {"message": "scripted failure 400",
                "type": "invalid_request_error"}}),
        }),
    }
}

/// Answers every permission request with the scenario's decision.
struct FixedAnswer {
    allow: bool,
}

impl PermissionHost for FixedAnswer {
    fn delivered(&self, _: &str) -> Option<switchyard_events::Delivered> {
        None
    }

    fn permission(&self, ask: &PermissionAsk) -> Result<PermissionRuling, String> {
        Ok(PermissionRuling {
            model_call_id: ask.named.clone(),
            call_id: ask.named.clone(),
            tool: ask.tool.clone(),
            arguments: ask.details.get("input").cloned().unwrap_or(Value::Null),
            allow: self.allow,
            rule: if self.allow {
                "capture: allow"
            } else {
                "capture: reject"
            }
            .to_owned(),
        })
    }
}

/// Captures `s` into `dir`; a one-line summary of the outcome.
pub async fn capture_one(s: &ClaudeScenario, entry: &Path, dir: &Path) -> Result<String> {
    let (scratch, ws) = scratch()?;
    std::fs::write(ws.join("b.txt"), "beta\n")?;
    if matches!(s.upstream, Upstream::ReadPdfThenText) {
        std::fs::write(ws.join("quarterly.pdf"), switchyard_testkit::QUARTERLY_PDF)?;
    }
    let ws = std::fs::canonicalize(&ws)?;
    let upstream = ChatUpstream::start(script(s.upstream, &ws)).await?;
    let token = switchyard_runner::random_token();
    let mut config = GatewayConfig::new(format!("{}/v1", upstream.base_url()), MODEL);
    config.ingress_key = Some(token.clone());
    config.upstream_key_env = "SWITCHYARD_CAPTURE_NO_KEY".into();
    let gateway = Gateway::start_with(config, GatewayDeps::default())
        .await
        .context("starting the gateway")?;
    let run_dir = scratch.path().join("run");
    let launch = prepare(&ClaudeLaunchConfig {
        binary: entry.to_path_buf(),
        workdir: ws.clone(),
        run_dir: run_dir.clone(),
        gateway_url: gateway.base_url(),
        gateway_key: Secret::new(token.clone()),
        model: MODEL.into(),
        mcp: None,
        resume: None,
        host_env: std::env::vars_os().collect(),
        trust_workspace_config: false,
    })?;
    let started = RunStarted {
        run_id: "capture".into(),
        agent: "claude-code".into(),
        agent_version: switchyard_backend::claude::VERSION.into(),
        workdir: WS.into(),
        model: Some(MODEL.into()),
    };
    let plan = ClaudePlan {
        prompts: s.prompts.iter().map(|p| (*p).to_owned()).collect(),
        more_prompts: None,
        close_grace: Duration::from_secs(10),
        cancel_grace: Duration::from_secs(5),
    };
    let limits = RunLimits {
        timeout: Some(Duration::from_secs(120)),
        ..RunLimits::default()
    };
    let host = Arc::new(FixedAnswer { allow: s.allow });
    let run = claude(&launch, &limits, started, plan, host)?;
    let Driven {
        stdin,
        stderr,
        live,
        notes,
        report,
    } = drive_captured(run).await;
    gateway.shutdown().await?;
    let exit = report.outcome.exit;

    let ws_text = ws.to_string_lossy().into_owned();
    let run_text = std::fs::canonicalize(&run_dir)?
        .to_string_lossy()
        .into_owned();
    // Claude Code names its project folder after the workspace path, `/` turned into `-`.
    let ws_slug = ws_text.replace(['/', '.'], "-");
    let redact = |t: &str| -> String {
        t.replace(&token, "<redacted>")
            .replace(&run_text, RUN)
            .replace(&ws_text, WS)
            .replace(&ws_slug, "-workspace")
    };
    let redact_json =
        |v: &Value| -> Result<Value> { Ok(serde_json::from_str(&redact(&v.to_string()))?) };
    let notes: Vec<Note> = redact_notes(&notes, &redact_json)?;
    let stderr: Vec<String> = stderr.iter().map(|l| redact(l)).collect();
    let hint = stderr.iter().rev().find(|l| !l.trim().is_empty()).cloned();
    let expected = u32::try_from(s.prompts.len()).unwrap_or(u32::MAX);
    let (replayed, outcome) = replay(notes.iter().cloned(), expected, exit, hint.as_deref());
    let again = replayed_as_live(&live, &replayed, &report.outcome, &outcome, &redact_json)?;

    let stdin: Vec<String> = stdin.iter().map(|l| redact(l)).collect();
    let requests: Vec<String> = upstream
        .requests()
        .iter()
        .map(|r| redact(&json!({"path": r.path, "body": r.json()}).to_string()))
        .collect();
    let argv: Vec<String> = std::iter::once("claude".to_owned())
        .chain(launch.args.iter().map(|a| redact(&a.to_string_lossy())))
        .collect();
    let manifest = json!({
        "scenario": s.name,
        "about": s.about,
        "cli": {"package": switchyard_backend::claude::PACKAGE, "version": switchyard_backend::claude::VERSION},
        "captured_at": chrono::Utc::now().to_rfc3339(),
        "argv": argv,
        "settings": redact_json(&launch.settings)?,
        "model": MODEL,
        "prompts": s.prompts,
        "permission_answer": if s.allow { "allow" } else { "deny (with a message)" },
        "redactions": [
            {"what": "per-run gateway key", "replacement": "<redacted>"},
            {"what": "run directory", "replacement": RUN},
            {"what": "workspace directory", "replacement": WS},
            {"what": "Claude Code's project folder name (the workspace path)", "replacement": "-workspace"},
        ],
        "exit": exit,
        "outcome_status": outcome.status,
    });
    NotesFixture {
        notes: &notes,
        stdin: &stdin,
        stderr: &stderr,
        expected: &again,
        exit,
        outcome: &outcome,
        requests: &requests,
        manifest,
    }
    .write(dir)?;
    Ok(format!("{:?}", outcome.status))
}
