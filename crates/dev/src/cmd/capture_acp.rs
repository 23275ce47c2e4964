//! `switchyard-dev capture --protocol acp`: records ACP fixtures by running the real, pinned Gemini
//! CLI over ACP (`gemini --acp`) against a scripted GenerateContent endpoint on 127.0.0.1.
//!
//! For each scenario it writes `<out>/<scenario>/`:
//! - `notes.jsonl`: the session's notes (what the guest sent, what Switchyard sent and decided),
//!   which [`switchyard_backend::gemini::acp::replay`] maps to the events;
//! - `stdout.jsonl`: the guest's raw stdout lines; `stderr.txt`; `exit.json`;
//! - `requests.jsonl`: the model requests the scripted endpoint received;
//! - `expected.jsonl` and `outcome.json`: the canonical events (without `run_started`) and the
//!   outcome;
//! - `manifest.json`: argv, CLI version, prompts, the permission answer, redactions.
//!
//! There is no gateway here, so no delivered calls: every permission request is answered by the
//! scenario's fixed decision. Before writing, the redacted notes must replay to the live events.

use anyhow::{Context, Result};
use serde_json::{Value, json};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;
use switchyard_backend::driver::{RunItem, RunLimits};
use switchyard_backend::gemini::acp::{AcpPlan, Note, acp, replay};
use switchyard_backend::gemini::launch::{
    GUEST_MAX_ATTEMPTS, GeminiLaunchConfig, Protocol, Secret, prepare,
};
use switchyard_backend::gemini::settings::ApprovalMode;
use switchyard_backend::permission::{PermissionAsk, PermissionHost, PermissionRuling};
use switchyard_events::Event;
use switchyard_events::acp::Delivered;
use switchyard_events::event::RunStarted;
use switchyard_events::gemini::StderrSummary;
use switchyard_testkit::genai_upstream::{GenaiScenario, GenaiUpstream};

use super::capture::{Fixture, Redaction, WS, replayed_as_live, scratch, write_lines};

/// One ACP capture scenario.
pub struct AcpScenario {
    pub name: &'static str,
    pub about: &'static str,
    pub upstream: GenaiScenario,
    pub prompts: &'static [&'static str],
    /// How every permission request is answered.
    pub allow: bool,
    /// Cancel the session as soon as the first assistant text arrives.
    pub cancel_on_first_text: bool,
}

const fn scenario(name: &'static str, about: &'static str, upstream: GenaiScenario) -> AcpScenario {
    AcpScenario {
        name,
        about,
        upstream,
        prompts: &["Please do the task"],
        allow: false,
        cancel_on_first_text: false,
    }
}

/// Every ACP scenario.
pub fn scenarios() -> Vec<AcpScenario> {
    vec![
        scenario(
            "text",
            "plain text answer in two chunks",
            GenaiScenario::Text,
        ),
        AcpScenario {
            prompts: &["First task", "Second task"],
            ..scenario(
                "two_prompts",
                "two prompts in one session",
                GenaiScenario::Text,
            )
        },
        scenario(
            "tool_ok",
            "list_directory runs without asking, then text",
            GenaiScenario::ToolOk,
        ),
        scenario(
            "read_pdf",
            "read_file of a PDF runs without asking: inlineData application/pdf",
            GenaiScenario::ReadPdf,
        ),
        scenario(
            "thought",
            "a thought chunk, text and a tool round",
            GenaiScenario::Thought,
        ),
        scenario(
            "tool_parallel",
            "two parallel calls call_A and call_B",
            GenaiScenario::ToolParallel,
        ),
        AcpScenario {
            allow: true,
            ..scenario(
                "permission_allowed",
                "write_file and run_shell_command ask; both allowed",
                GenaiScenario::WriteAndShell,
            )
        },
        scenario(
            "permission_rejected",
            "write_file and run_shell_command ask; both rejected, the run goes on",
            GenaiScenario::WriteAndShell,
        ),
        scenario(
            "api_400",
            "the model API answers 400: a JSON-RPC error with code 400",
            GenaiScenario::HttpError(400),
        ),
        scenario(
            "api_429",
            "the model API answers 429 (the guest retries once)",
            GenaiScenario::HttpError(429),
        ),
        AcpScenario {
            cancel_on_first_text: true,
            ..scenario(
                "cancel",
                "session/cancel after the first text chunk",
                GenaiScenario::HangAfterFirstChunk,
            )
        },
    ]
}

/// Answers every permission request with the scenario's decision (no gateway: nothing is known
/// to be delivered).
struct FixedAnswer {
    allow: bool,
}

impl PermissionHost for FixedAnswer {
    fn delivered(&self, _: &str) -> Option<Delivered> {
        None
    }

    fn permission(&self, ask: &PermissionAsk) -> Result<PermissionRuling, String> {
        let (tool, id) = ask
            .named
            .split_once("__")
            .ok_or("not a <tool>__<id> tool call id")?;
        Ok(PermissionRuling {
            call_id: id.to_owned(),
            model_call_id: id.to_owned(),
            tool: tool.to_owned(),
            arguments: Value::Null,
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

const MODEL: &str = "gemini-2.5-flash";

/// Captures `s` into `dir`; a one-line summary of the outcome.
pub async fn capture_one(s: &AcpScenario, entry: &Path, dir: &Path) -> Result<String> {
    let upstream = GenaiUpstream::start(s.upstream).await?;
    let (scratch, ws) = scratch()?;
    super::capture::scenario_files(s.upstream, &ws)?;
    let token = switchyard_runner::random_token();
    let node = switchyard_runner::home::which("node").context("node not on PATH")?;
    let launch = prepare(&GeminiLaunchConfig {
        trust_workspace_config: false,
        node,
        entry: entry.to_path_buf(),
        workdir: ws.clone(),
        run_dir: scratch.path().join("run"),
        prompt: String::new(),
        model: MODEL.into(),
        base_url: upstream.base_url(),
        api_key: Secret::new(token.clone()),
        approval_mode: ApprovalMode::Default,
        max_turns: None,
        max_attempts: GUEST_MAX_ATTEMPTS,
        host_env: std::env::vars_os().collect(),
        host_mcp: None,
        protocol: Protocol::Acp,
    })?;
    let limits = RunLimits {
        timeout: Some(Duration::from_secs(120)),
        ..RunLimits::default()
    };
    let started = RunStarted {
        run_id: "capture".into(),
        agent: "gemini-cli".into(),
        agent_version: switchyard_backend::gemini::VERSION.into(),
        workdir: WS.into(),
        model: Some(MODEL.into()),
    };
    let plan = AcpPlan {
        prompts: s.prompts.iter().map(|p| (*p).to_owned()).collect(),
        more_prompts: None,
        cwd: launch.cwd.clone(),
        gateway_url: upstream.base_url(),
        gateway_key: Secret::new(token.clone()),
        mcp: None,
        resume: None,
        startup_timeout: Duration::from_secs(60),
        cancel_grace: Duration::from_secs(5),
        close_grace: Duration::from_secs(5),
    };
    let (tx, mut transcript) = tokio::sync::mpsc::unbounded_channel();
    let host = Arc::new(FixedAnswer { allow: s.allow });
    let mut run = acp(&launch, &limits, started, plan, host)?;
    run.transcript = Some(tx);
    let cancel = run.cancel.clone();
    let (mut stdout, mut stderr, mut live) = (Vec::new(), Vec::new(), Vec::new());
    let report = run
        .drive(
            async |item| match item {
                RunItem::RawStdout(l) => stdout.push(l.text),
                RunItem::RawStderr(l) => stderr.push(l.text),
                RunItem::RawStdin(_) | RunItem::RawEvent(_) => {}
                RunItem::Event(e) => {
                    if s.cancel_on_first_text && matches!(e.event, Event::AssistantDelta(_)) {
                        cancel.cancel();
                    }
                    live.push(e.event);
                }
            },
            async |outcome| outcome,
        )
        .await;
    let mut notes = Vec::new();
    while let Ok(note) = transcript.try_recv() {
        notes.push(note);
    }
    let exit = report.outcome.exit;

    let redaction = Redaction::new(&token, &ws, &launch.run_dir, entry)?;
    let redact = |t: &str| redaction.text(t);
    let redact_json = |v: &Value| redaction.json(v);
    let notes: Vec<Note> = notes
        .iter()
        .map(|n| {
            Ok(serde_json::from_value(redact_json(
                &serde_json::to_value(n)?,
            )?)?)
        })
        .collect::<Result<_>>()?;
    let stderr: Vec<String> = stderr.iter().map(|l| redact(l)).collect();
    let mut summary = StderrSummary::default();
    for line in &stderr {
        summary.push(line);
    }
    let expected = u32::try_from(s.prompts.len()).unwrap_or(u32::MAX);
    let (replayed, outcome) = replay(
        MODEL,
        notes.iter().cloned(),
        expected,
        exit,
        summary.message().as_deref(),
    );
    let again = replayed_as_live(&live, &replayed, &report.outcome, &outcome, &redact_json)?;

    let stdout: Vec<String> = stdout.iter().map(|l| redact(l)).collect();
    Fixture {
        name: s.name,
        about: s.about,
        stdout: &stdout,
        stderr: &stderr,
        exit,
        outcome: &outcome,
        expected: &again,
        requests: redaction.requests(&upstream),
        key_was: "per-run key (authenticate _meta api-key, header x-goog-api-key)",
        extra: json!({
            "protocol": "acp",
            "model": MODEL,
            "prompts": s.prompts,
            "permission_answer": if s.allow { "allow_once" } else { "reject_once" },
            "cancel_on_first_text": s.cancel_on_first_text,
        }),
    }
    .write(dir, &launch, &redaction)?;
    let notes: Vec<String> = notes
        .iter()
        .map(|n| Ok(serde_json::to_string(n)?))
        .collect::<Result<_>>()?;
    write_lines(&dir.join("notes.jsonl"), &notes)?;
    launch.remove_system_settings();
    Ok(format!("{:?}", outcome.status))
}
