//! `switchyard-dev capture --agent opencode`: records OpenCode fixtures by running the real, pinned
//! `opencode serve` through Switchyard's gateway (in process) to a scripted Chat Completions
//! upstream on 127.0.0.1.
//!
//! For each scenario it writes `<out>/<scenario>/`:
//! - `notes.jsonl`: the run's notes (the server-sent events as received, the session, the
//!   prompts, Switchyard's permission answers and warnings, the end of each prompt), which
//!   [`switchyard_backend::opencode::notes::replay`] maps to the events;
//! - `events.jsonl`: the raw server-sent event data, one per line; `stderr.txt`; `exit.json`;
//! - `requests.jsonl`: the Chat Completions requests the upstream received (OpenCode's, as the
//!   gateway forwarded them);
//! - `expected.jsonl` and `outcome.json`: the canonical events (without `run_started`) and
//!   the outcome;
//! - `manifest.json`: argv, the OpenCode version, the config, prompts, the permission
//!   answer, redactions.
//!
//! Permission requests get the scenario's fixed answer. Before writing, the redacted notes
//! must replay to the live events.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use serde_json::{Value, json};
use switchyard_backend::driver::{RunItem, RunLimits};
use switchyard_backend::gemini::launch::Secret;
use switchyard_backend::opencode::launch::{
    ConfigInput, GATEWAY_KEY_ENV, OpenCodeLaunchConfig, PROVIDER, config_document, prepare,
};
use switchyard_backend::opencode::notes::{Note, replay};
use switchyard_backend::opencode::run::{OpenCodePlan, opencode};
use switchyard_backend::permission::PermissionRuling;
use switchyard_backend::permission::{PermissionAsk, PermissionHost};
use switchyard_events::event::RunStarted;
use switchyard_gateway::{Gateway, GatewayConfig, GatewayDeps};
use switchyard_testkit::chat_upstream::{
    ChatUpstream, RecordedRequest, Reply, Script, StreamEvent, StreamReply, chunk,
};

use super::capture::{RUN, WS, replayed_as_live, scratch, write_lines};

/// The fixtures' OpenCode version directory.
pub const DEFAULT_OUT: &str = "fixtures/opencode/1.18.33";
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
    /// Runs `touch made.txt` with bash, then answers.
    BashThenText,
    /// Reasoning, then text.
    Reasoning,
    /// HTTP 400 with an OpenAI error body.
    Http400,
    /// HTTP 400 for the first prompt, then text.
    Http400ThenText,
}

/// One OpenCode capture scenario.
pub struct OpenCodeScenario {
    pub name: &'static str,
    pub about: &'static str,
    pub upstream: Upstream,
    pub prompts: &'static [&'static str],
    /// How every permission request is answered.
    pub allow: bool,
}

const fn scenario(name: &'static str, about: &'static str, upstream: Upstream) -> OpenCodeScenario {
    OpenCodeScenario {
        name,
        about,
        upstream,
        prompts: &["Please do the task"],
        allow: true,
    }
}

/// Every OpenCode scenario.
pub fn scenarios() -> Vec<OpenCodeScenario> {
    vec![
        scenario("text", "plain text answer in two deltas", Upstream::Text),
        OpenCodeScenario {
            prompts: &["First task", "Second task"],
            ..scenario("two_prompts", "two prompts in one session", Upstream::Text)
        },
        scenario(
            "tool_read",
            "read asks, is allowed, then text",
            Upstream::ReadThenText,
        ),
        scenario(
            "read_pdf",
            "read of a PDF is allowed, then text",
            Upstream::ReadPdfThenText,
        ),
        scenario(
            "tool_parallel",
            "three reads in one response, two identical",
            Upstream::ParallelReads,
        ),
        scenario(
            "bash_allowed",
            "bash asks and is allowed",
            Upstream::BashThenText,
        ),
        OpenCodeScenario {
            allow: false,
            ..scenario(
                "bash_rejected",
                "bash asks and is rejected with a message; the loop goes on",
                Upstream::BashThenText,
            )
        },
        scenario(
            "reasoning",
            "reasoning deltas, then text",
            Upstream::Reasoning,
        ),
        scenario(
            "api_400",
            "the upstream answers 400: session.error APIError",
            Upstream::Http400,
        ),
        OpenCodeScenario {
            prompts: &["First task", "Second task"],
            ..scenario(
                "error_then_text",
                "the first prompt's upstream answers 400, the second prompt's answers text",
                Upstream::Http400ThenText,
            )
        },
    ]
}

fn first(r: &RecordedRequest) -> bool {
    r.tool_messages().is_empty()
}

fn script(upstream: Upstream, ws: &Path) -> Script {
    let read = |name: &str| json!({"filePath": ws.join(name)}).to_string();
    let then_text = Reply::text_stream(["Done", " with the task."]);
    match upstream {
        Upstream::Text => Script::always(Reply::text_stream(["Hello", " there."])),
        Upstream::ReadThenText => Script::new()
            .then_when(
                first,
                Reply::tool_calls_stream(&[("call_read", "read", &read("a.txt"))], 8),
            )
            .then(then_text),
        Upstream::ReadPdfThenText => Script::new()
            .then_when(
                first,
                Reply::tool_calls_stream(&[("call_pdf", "read", &read("quarterly.pdf"))], 8),
            )
            .then(then_text),
        Upstream::ParallelReads => Script::new()
            .then_when(
                first,
                Reply::tool_calls_stream(
                    &[
                        ("call_a1", "read", &read("a.txt")),
                        ("call_a2", "read", &read("a.txt")),
                        ("call_b", "read", &read("b.txt")),
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
                    Reply::tool_calls_stream(&[("call_sh", "bash", &args.to_string())], 8),
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
        Upstream::Http400 => Script::new().then(http_400()),
        Upstream::Http400ThenText => Script::new()
            .then_when(
                |r| {
                    r.json()["messages"].to_string().contains("First task")
                        && !r.json()["messages"].to_string().contains("Second task")
                },
                http_400(),
            )
            .step(
                switchyard_testkit::chat_upstream::Step::once(Reply::text_stream([
                    "Second", " answer.",
                ]))
                .times(switchyard_testkit::chat_upstream::Times::Always),
            ),
    }
}

fn http_400() -> Reply {
    Reply::Json {
        status: 400,
        body: json!({"error": {"message": "scripted failure 400",
            "type": "invalid_request_error"}}),
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
        if ask.named.is_empty() {
            return Err("no call".to_owned());
        }
        Ok(PermissionRuling {
            model_call_id: ask.named.clone(),
            call_id: ask.named.clone(),
            tool: ask.tool.clone(),
            arguments: ask.details.clone(),
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
pub async fn capture_one(s: &OpenCodeScenario, entry: &Path, dir: &Path) -> Result<String> {
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
    let launch = prepare(&OpenCodeLaunchConfig {
        trust_workspace_config: false,
        binary: entry.to_path_buf(),
        workdir: ws.clone(),
        run_dir: run_dir.clone(),
        config: config_document(&ConfigInput {
            provider: gateway.opencode_provider(MODEL, GATEWAY_KEY_ENV),
            mcp_url: None,
            ripgrep: switchyard_runner::home::which("rg").is_some(),
        }),
        password: Secret::new(switchyard_runner::random_token()),
        gateway_key: Secret::new(token.clone()),
        mcp_token: None,
        host_env: std::env::vars_os().collect(),
    })?;
    let started = RunStarted {
        run_id: "capture".into(),
        agent: "opencode".into(),
        agent_version: switchyard_backend::opencode::VERSION.into(),
        workdir: WS.into(),
        model: Some(MODEL.into()),
    };
    let plan = OpenCodePlan {
        prompts: s.prompts.iter().map(|p| (*p).to_owned()).collect(),
        more_prompts: None,
        provider: PROVIDER.into(),
        model: MODEL.into(),
        title: format!("switchyard capture {}", s.name),
        startup_timeout: Duration::from_secs(60),
        cancel_grace: Duration::from_secs(5),
    };
    let limits = RunLimits {
        timeout: Some(Duration::from_secs(120)),
        ..RunLimits::default()
    };
    let (tx, mut transcript) = tokio::sync::mpsc::unbounded_channel();
    let host = Arc::new(FixedAnswer { allow: s.allow });
    let mut run = opencode(&launch, &limits, started, plan, host)?;
    run.transcript = Some(tx);
    let (mut raw, mut stderr, mut live) = (Vec::new(), Vec::new(), Vec::new());
    let report = run
        .drive(
            async |item| match item {
                RunItem::RawEvent(l) => raw.push(l.text),
                RunItem::RawStderr(l) => stderr.push(l.text),
                RunItem::RawStdout(_) | RunItem::RawStdin(_) => {}
                RunItem::Event(e) => live.push(e.event),
            },
            async |outcome| outcome,
        )
        .await;
    gateway.shutdown().await?;
    let mut notes = Vec::new();
    while let Ok(note) = transcript.try_recv() {
        notes.push(note);
    }
    let exit = report.outcome.exit;

    let ws_text = ws.to_string_lossy().into_owned();
    let run_text = std::fs::canonicalize(&run_dir)?
        .to_string_lossy()
        .into_owned();
    let redact = |t: &str| -> String {
        t.replace(&token, "<redacted>")
            .replace(&run_text, RUN)
            .replace(&ws_text, WS)
    };
    let redact_json =
        |v: &Value| -> Result<Value> { Ok(serde_json::from_str(&redact(&v.to_string()))?) };
    let notes: Vec<Note> = notes
        .iter()
        .map(|n| {
            Ok(serde_json::from_value(redact_json(
                &serde_json::to_value(n)?,
            )?)?)
        })
        .collect::<Result<_>>()?;
    let stderr: Vec<String> = stderr.iter().map(|l| redact(l)).collect();
    let hint = stderr.iter().rev().find(|l| !l.trim().is_empty()).cloned();
    let expected = u32::try_from(s.prompts.len()).unwrap_or(u32::MAX);
    let (replayed, outcome) = replay(notes.iter().cloned(), expected, exit, hint.as_deref());
    let again = replayed_as_live(&live, &replayed, &report.outcome, &outcome, &redact_json)?;

    std::fs::create_dir_all(dir)?;
    let lines = |items: &[Value]| -> Vec<String> { items.iter().map(Value::to_string).collect() };
    let notes_text: Vec<String> = notes
        .iter()
        .map(|n| Ok(serde_json::to_string(n)?))
        .collect::<Result<_>>()?;
    write_lines(&dir.join("notes.jsonl"), &notes_text)?;
    let raw: Vec<String> = raw.iter().map(|l| redact(l)).collect();
    write_lines(&dir.join("events.jsonl"), &raw)?;
    write_lines(&dir.join("stderr.txt"), &stderr)?;
    write_lines(&dir.join("expected.jsonl"), &lines(&again))?;
    std::fs::write(dir.join("exit.json"), serde_json::to_vec_pretty(&exit)?)?;
    std::fs::write(
        dir.join("outcome.json"),
        serde_json::to_vec_pretty(&outcome)?,
    )?;
    let requests: Vec<String> = upstream
        .requests()
        .iter()
        .map(|r| redact(&json!({"path": r.path, "body": r.json()}).to_string()))
        .collect();
    write_lines(&dir.join("requests.jsonl"), &requests)?;
    let argv: Vec<String> = std::iter::once("opencode".to_owned())
        .chain(launch.args.iter().map(|a| a.to_string_lossy().into_owned()))
        .collect();
    let manifest = json!({
        "scenario": s.name,
        "about": s.about,
        "cli": {"package": switchyard_backend::opencode::PACKAGE, "version": switchyard_backend::opencode::VERSION},
        "captured_at": chrono::Utc::now().to_rfc3339(),
        "argv": argv,
        "config": redact_json(&launch.config)?,
        "model": MODEL,
        "prompts": s.prompts,
        "permission_answer": if s.allow { "once" } else { "reject (with a message)" },
        "redactions": [
            {"what": "per-run gateway key", "replacement": "<redacted>"},
            {"what": "run directory", "replacement": RUN},
            {"what": "workspace directory", "replacement": WS},
        ],
        "exit": exit,
        "outcome_status": outcome.status,
    });
    std::fs::write(
        dir.join("manifest.json"),
        serde_json::to_vec_pretty(&manifest)?,
    )?;
    Ok(format!("{:?}", outcome.status))
}
