//! `switchyard-dev capture --agent codex`: records Codex fixtures by running the real, pinned
//! `codex app-server` through Switchyard's gateway (in process, its Responses ingress) to a
//! scripted Chat Completions upstream on 127.0.0.1.
//!
//! For each scenario it writes `<out>/<scenario>/`:
//! - `notes.jsonl`: the run's notes (the server's stdout lines as received, the prompts, the
//!   thread, what the gateway delivered, Switchyard's approval answers), which
//!   [`switchyard_backend::codex::run::replay`] maps to the events;
//! - `stdin.jsonl`: the lines Switchyard wrote to the server; `stderr.txt`; `exit.json`;
//! - `requests.jsonl`: the Chat Completions requests the upstream received (Codex's, as the
//!   gateway translated them);
//! - `expected.jsonl` and `outcome.json`: the canonical events (without `run_started`) and the
//!   outcome;
//! - `manifest.json`: argv, the Codex version, the generated `config.toml`, prompts, the
//!   approval answer, redactions.
//!
//! Approval requests get the scenario's fixed answer, on the call the gateway delivered (the
//! run's binding knows it). Before writing, the redacted notes must replay to the live events.
//! The scratch directory is under `.cache/` (Codex refuses to make its helper links under
//! `/tmp`).

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use serde_json::{Value, json};
use switchyard_backend::codex::launch::{CodexLaunchConfig, prepare};
use switchyard_backend::codex::run::{CodexPlan, Note, codex, replay};
use switchyard_backend::driver::RunLimits;
use switchyard_backend::gemini::launch::Secret;
use switchyard_backend::permission::{PermissionAsk, PermissionHost, PermissionRuling};
use switchyard_binding::{BindingLimits, HostBinding, ToolRegistry};
use switchyard_events::event::RunStarted;
use switchyard_gateway::{Gateway, GatewayConfig, GatewayDeps};
use switchyard_testkit::chat_upstream::{
    ChatUpstream, RecordedRequest, Reply, Script, StreamEvent, StreamReply, chunk,
};

use super::capture::{
    Driven, NotesFixture, RUN, WS, drive_captured, redact_notes, replayed_as_live,
};

/// The fixtures' Codex version directory.
pub const DEFAULT_OUT: &str = "fixtures/codex/0.171.0";
const MODEL: &str = "scripted-model";

/// What the scripted upstream answers.
#[derive(Debug, Clone, Copy)]
pub enum Upstream {
    Text,
    /// `cat a.txt` with `exec_command`, then an answer.
    ShellThenText,
    /// An `apply_patch` that adds `made.txt`, then an answer.
    PatchThenText,
    /// `echo A` twice (identical calls) and `echo B` in one response.
    ParallelShell,
    /// A command that asks for escalated permissions (an approval request), then an answer.
    EscalatedThenText,
    /// Reasoning, then text.
    Reasoning,
    /// HTTP 400 with an OpenAI error body.
    Http400,
}

/// One Codex capture scenario.
pub struct CodexScenario {
    pub name: &'static str,
    pub about: &'static str,
    pub upstream: Upstream,
    pub prompts: &'static [&'static str],
    /// How every approval request is answered.
    pub allow: bool,
}

const fn scenario(name: &'static str, about: &'static str, upstream: Upstream) -> CodexScenario {
    CodexScenario {
        name,
        about,
        upstream,
        prompts: &["Please do the task"],
        allow: true,
    }
}

/// Every Codex scenario.
pub fn scenarios() -> Vec<CodexScenario> {
    vec![
        scenario("text", "plain text answer in two deltas", Upstream::Text),
        CodexScenario {
            prompts: &["First task", "Second task"],
            ..scenario("two_prompts", "two turns in one thread", Upstream::Text)
        },
        scenario(
            "shell",
            "exec_command in the sandbox (no approval), then text",
            Upstream::ShellThenText,
        ),
        scenario(
            "apply_patch",
            "a freeform apply_patch that adds a file, then text",
            Upstream::PatchThenText,
        ),
        scenario(
            "parallel",
            "three commands in one response, two identical",
            Upstream::ParallelShell,
        ),
        scenario(
            "escalated_allowed",
            "a command asking for escalated permissions is approved",
            Upstream::EscalatedThenText,
        ),
        CodexScenario {
            allow: false,
            ..scenario(
                "escalated_declined",
                "the same command is declined; the turn goes on",
                Upstream::EscalatedThenText,
            )
        },
        scenario(
            "reasoning",
            "reasoning deltas (a reasoning item), then text",
            Upstream::Reasoning,
        ),
        scenario(
            "api_400",
            "the upstream answers 400: a failed turn",
            Upstream::Http400,
        ),
    ]
}

fn first(r: &RecordedRequest) -> bool {
    r.tool_messages().is_empty()
}

fn script(upstream: Upstream) -> Script {
    let shell = |cmd: &str| json!({"cmd": cmd}).to_string();
    let then_text = Reply::text_stream(["Done", " with the task."]);
    match upstream {
        Upstream::Text => Script::always(Reply::text_stream(["Hello", " there."])),
        Upstream::ShellThenText => Script::new()
            .then_when(
                first,
                Reply::tool_calls_stream(&[("call_sh", "exec_command", &shell("cat a.txt"))], 8),
            )
            .then(then_text),
        Upstream::PatchThenText => {
            let patch =
                "*** Begin Patch\n*** Add File: made.txt\n+made by the patch\n*** End Patch\n";
            let args = json!({"input": patch}).to_string();
            Script::new()
                .then_when(
                    first,
                    Reply::tool_calls_stream(&[("call_patch", "apply_patch", &args)], 8),
                )
                .then(then_text)
        }
        Upstream::ParallelShell => Script::new()
            .then_when(
                first,
                Reply::tool_calls_stream(
                    &[
                        ("call_a1", "exec_command", &shell("echo A")),
                        ("call_a2", "exec_command", &shell("echo A")),
                        ("call_b", "exec_command", &shell("echo B")),
                    ],
                    8,
                ),
            )
            .then(then_text),
        Upstream::EscalatedThenText => {
            let args = json!({"cmd": "touch made.txt", "sandbox_permissions": "require_escalated",
                "justification": "The task needs a file"});
            Script::new()
                .then_when(
                    first,
                    Reply::tool_calls_stream(&[("call_esc", "exec_command", &args.to_string())], 8),
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

/// Answers every approval request with the scenario's decision, on the call the gateway
/// delivered (from the run's binding).
struct FixedAnswer {
    binding: HostBinding,
    allow: bool,
}

impl PermissionHost for FixedAnswer {
    fn delivered(&self, call_id: &str) -> Option<switchyard_events::Delivered> {
        let (call, batch) = self.binding.delivered_call(call_id)?;
        Some(switchyard_events::Delivered {
            call_id: call.call_id,
            model_call_id: call.model_call_id,
            tool: call.tool,
            arguments: call.arguments,
            batch,
        })
    }

    fn confirmed(&self, call_id: &str) -> bool {
        self.binding.delivery_confirmed(call_id)
    }

    fn permission(&self, ask: &PermissionAsk) -> Result<PermissionRuling, String> {
        let call_id = ask.call_id.as_deref().unwrap_or(&ask.named);
        let call = self
            .binding
            .ask_permission(call_id, &ask.tool)
            .map_err(|refusal| refusal.to_string())?;
        Ok(PermissionRuling {
            model_call_id: call.model_call_id,
            call_id: call.call_id,
            tool: ask.tool.clone(),
            arguments: call.arguments,
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
pub async fn capture_one(s: &CodexScenario, entry: &Path, dir: &Path) -> Result<String> {
    std::fs::create_dir_all(".cache/capture")?;
    let scratch = tempfile::tempdir_in(".cache/capture")?;
    let ws = scratch.path().join("ws");
    std::fs::create_dir_all(&ws)?;
    std::fs::write(ws.join("a.txt"), "alpha\n")?;
    let ws = std::fs::canonicalize(&ws)?;
    let upstream = ChatUpstream::start(script(s.upstream)).await?;
    let token = switchyard_runner::random_token();
    let mut config = GatewayConfig::new(format!("{}/v1", upstream.base_url()), MODEL);
    config.ingress_key = Some(token.clone());
    config.upstream_key_env = "SWITCHYARD_CAPTURE_NO_KEY".into();
    let (binding, _host_events) = HostBinding::new(
        ToolRegistry::new(),
        switchyard_backend::codex::HOST_TOOL_PREFIX,
        BindingLimits::default(),
    );
    let gateway = Gateway::start_with(
        config,
        GatewayDeps {
            binding: Some(binding.clone()),
            ..GatewayDeps::default()
        },
    )
    .await
    .context("starting the gateway")?;
    let run_dir = scratch.path().join("run");
    let launch = prepare(&CodexLaunchConfig {
        binary: entry.to_path_buf(),
        workdir: ws.clone(),
        run_dir: run_dir.clone(),
        gateway_url: gateway.base_url(),
        gateway_key: Secret::new(token.clone()),
        model: MODEL.into(),
        mcp: None,
        host_env: std::env::vars_os().collect(),
        trust_workspace_config: false,
    })?;
    let started = RunStarted {
        run_id: "capture".into(),
        agent: "codex".into(),
        agent_version: switchyard_backend::codex::VERSION.into(),
        workdir: WS.into(),
        model: Some(MODEL.into()),
    };
    let plan = CodexPlan {
        prompts: s.prompts.iter().map(|p| (*p).to_owned()).collect(),
        more_prompts: None,
        resume: None,
        close_grace: Duration::from_secs(10),
        cancel_grace: Duration::from_secs(5),
    };
    let limits = RunLimits {
        timeout: Some(Duration::from_secs(120)),
        ..RunLimits::default()
    };
    let host = Arc::new(FixedAnswer {
        binding,
        allow: s.allow,
    });
    let run = codex(&launch, &limits, started, plan, host)?;
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
    let redact = |t: &str| -> String {
        t.replace(&token, "<redacted>")
            .replace(&run_text, RUN)
            .replace(&ws_text, WS)
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
    let argv: Vec<String> = std::iter::once("codex".to_owned())
        .chain(launch.args.iter().map(|a| redact(&a.to_string_lossy())))
        .collect();
    let manifest = json!({
        "scenario": s.name,
        "about": s.about,
        "cli": {"package": switchyard_backend::codex::PACKAGE, "version": switchyard_backend::codex::VERSION},
        "captured_at": chrono::Utc::now().to_rfc3339(),
        "argv": argv,
        "settings": redact_json(&launch.settings)?,
        "model": MODEL,
        "prompts": s.prompts,
        "approval_answer": if s.allow { "accept" } else { "decline" },
        "redactions": [
            {"what": "per-run gateway key", "replacement": "<redacted>"},
            {"what": "run directory (CODEX_HOME is inside it)", "replacement": RUN},
            {"what": "workspace directory", "replacement": WS},
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
