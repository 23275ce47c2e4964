//! `switchyard-dev capture`: records fixtures by running the real, pinned Gemini CLI against a
//! scripted GenerateContent endpoint on 127.0.0.1.
//!
//! For each scenario it writes `<out>/<scenario>/`:
//! - `stdout.jsonl`: the guest's raw stdout lines (redacted paths, see `manifest.json`);
//! - `stderr.txt`: the guest's stderr lines (redacted);
//! - `exit.json`: how the process ended (`GuestExit`);
//! - `requests.jsonl`: model requests the scripted endpoint received (key header redacted);
//! - `expected.jsonl`: the canonical events (without Switchyard's clock) and `outcome.json`;
//! - `manifest.json`: argv, CLI version, date, scenario, redactions.
//!
//! Before writing, it checks that replaying the redacted transcript gives the same canonical
//! events and outcome as the live run did, so tests that replay fixtures replay the truth.

use anyhow::{Context, Result, ensure};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::time::Duration;
use switchyard_backend::driver::{RunItem, RunLimits};
use switchyard_backend::gemini::launch::{
    GUEST_MAX_ATTEMPTS, GeminiLaunchConfig, PreparedLaunch, Secret, prepare,
};
use switchyard_backend::gemini::run::headless;
use switchyard_backend::gemini::settings::ApprovalMode;
use switchyard_events::event::RunStarted;
use switchyard_events::{Event, GuestExit, RunOutcome};
use switchyard_testkit::genai_upstream::{GenaiScenario, GenaiUpstream};

/// `switchyard-dev capture` flags.
#[derive(Debug, clap::Args)]
pub struct CaptureArgs {
    /// Scenario names (default: all). See `--list`.
    #[arg(long = "scenario")]
    pub scenarios: Vec<String>,
    /// List the scenarios and exit.
    #[arg(long)]
    pub list: bool,
    /// Output directory (default fixtures/gemini-cli/VERSION, and its `acp/` for ACP).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Capture headless stream-json runs, or ACP sessions.
    #[arg(long, value_enum, default_value = "headless")]
    pub protocol: switchyard_runner::ProtocolArg,
    /// The sealed Gemini CLI install to capture from.
    #[arg(long)]
    pub gemini_prefix: Option<PathBuf>,
    /// The guest to capture.
    #[arg(long, value_enum, default_value = "gemini-cli")]
    pub agent: switchyard_runner::Agent,
    /// The sealed OpenCode install to capture from (`--agent opencode`).
    #[arg(long)]
    pub opencode_prefix: Option<PathBuf>,
    /// The sealed Claude Code install to capture from (`--agent claude-code`).
    #[arg(long)]
    pub claude_prefix: Option<PathBuf>,
    /// The sealed Codex install to capture from (`--agent codex`).
    #[arg(long)]
    pub codex_prefix: Option<PathBuf>,
}

/// One capture scenario.
pub struct Scenario {
    pub name: &'static str,
    pub about: &'static str,
    pub upstream: GenaiScenario,
    pub max_turns: Option<u32>,
    /// Cancel the run as soon as the first assistant text arrives.
    pub cancel_on_first_text: bool,
    pub inactivity: Option<Duration>,
    /// The `--model` the guest is given (`auto` makes it call its routing classifier).
    pub model: &'static str,
}

const fn scenario(name: &'static str, about: &'static str, upstream: GenaiScenario) -> Scenario {
    Scenario {
        name,
        about,
        upstream,
        max_turns: None,
        cancel_on_first_text: false,
        inactivity: None,
        model: "gemini-2.5-flash",
    }
}

/// Every scenario the capture tool knows.
pub fn scenarios() -> Vec<Scenario> {
    vec![
        scenario(
            "text",
            "plain text answer in two chunks",
            GenaiScenario::Text,
        ),
        scenario(
            "tool_ok",
            "list_directory succeeds, then a text answer",
            GenaiScenario::ToolOk,
        ),
        scenario(
            "tool_fail",
            "read_file outside the workspace fails, run continues",
            GenaiScenario::ToolFail,
        ),
        scenario(
            "tool_parallel",
            "two parallel calls with model ids call_A and call_B",
            GenaiScenario::ToolParallel,
        ),
        scenario(
            "api_400",
            "model API answers 400 INVALID_ARGUMENT",
            GenaiScenario::HttpError(400),
        ),
        scenario(
            "api_429",
            "model API answers 429 RESOURCE_EXHAUSTED (guest retries once)",
            GenaiScenario::HttpError(429),
        ),
        scenario(
            "api_500",
            "model API answers 500 INTERNAL (guest retries once)",
            GenaiScenario::HttpError(500),
        ),
        scenario(
            "empty",
            "empty response with STOP (invalid stream, guest retries)",
            GenaiScenario::Empty,
        ),
        scenario(
            "read_pdf",
            "read_file of a PDF: the guest answers with inlineData application/pdf",
            GenaiScenario::ReadPdf,
        ),
        scenario(
            "web_search",
            "google_web_search: the guest sends a googleSearch built-in tool request",
            GenaiScenario::WebSearch,
        ),
        scenario(
            "thought",
            "thought part and thoughtSignatures, then a tool round",
            GenaiScenario::Thought,
        ),
        Scenario {
            model: "auto",
            ..scenario(
                "auto_model",
                "model `auto`: the guest calls its routing classifier first",
                GenaiScenario::Text,
            )
        },
        scenario(
            "loop",
            "the same tool call forever: loop detection stops it",
            GenaiScenario::Loop,
        ),
        Scenario {
            max_turns: Some(1),
            ..scenario(
                "turn_limit",
                "maxSessionTurns=1 with a tool round",
                GenaiScenario::ToolOk,
            )
        },
        Scenario {
            cancel_on_first_text: true,
            ..scenario(
                "cancel",
                "host cancels after the first text chunk (SIGINT to the group)",
                GenaiScenario::HangAfterFirstChunk,
            )
        },
        Scenario {
            inactivity: Some(Duration::from_secs(3)),
            ..scenario(
                "inactivity",
                "stream stalls after one chunk; the 3 s watchdog stops the guest",
                GenaiScenario::HangAfterFirstChunk,
            )
        },
    ]
}

/// Entry point.
pub async fn run(args: CaptureArgs) -> Result<u8> {
    if args.agent == switchyard_runner::Agent::Opencode {
        return run_opencode(args).await;
    }
    if args.agent == switchyard_runner::Agent::ClaudeCode {
        return run_claude(args).await;
    }
    if args.agent == switchyard_runner::Agent::Codex {
        return run_codex(args).await;
    }
    if args.protocol == switchyard_runner::ProtocolArg::Acp {
        return run_acp(args).await;
    }
    let all = scenarios();
    if args.list {
        for s in &all {
            println!("{:<14} {}", s.name, s.about);
        }
        return Ok(0);
    }
    let entry = verified_entry(&args)?;
    let out = args
        .out
        .clone()
        .unwrap_or_else(|| PathBuf::from(DEFAULT_OUT));
    let selected = select(&all, &args.scenarios, |s| s.name)?;
    std::fs::create_dir_all(&out)?;
    for s in selected {
        eprintln!("capturing {} ...", s.name);
        let outcome = capture_one(s, &entry, &out.join(s.name)).await?;
        eprintln!("  {}", outcome);
    }
    write_index(&out)?;
    Ok(0)
}

const DEFAULT_OUT: &str = "fixtures/gemini-cli/0.61.0";

/// The scenarios `names` asks for (all when empty), in that order.
fn select<'a, T>(all: &'a [T], names: &[String], name: impl Fn(&T) -> &str) -> Result<Vec<&'a T>> {
    if names.is_empty() {
        return Ok(all.iter().collect());
    }
    names
        .iter()
        .map(|n| {
            all.iter()
                .find(|s| name(s) == n)
                .with_context(|| format!("unknown scenario {n:?} (see --list)"))
        })
        .collect()
}

/// What a fixture must not show, and the placeholders it shows instead.
pub(super) struct Redaction {
    token: String,
    run: String,
    ws: String,
    prefix: String,
}

impl Redaction {
    /// For a run with key `token` in workspace `ws` and run directory `run_dir`, of the install
    /// whose entry point is `entry`.
    pub(super) fn new(token: &str, ws: &Path, run_dir: &Path, entry: &Path) -> Result<Self> {
        // The npm prefix of the install (the entry is PREFIX/node_modules/@google/gemini-cli/
        // bundle/gemini.js); the guest's system prompt names files below it.
        let prefix = entry.ancestors().nth(5).context("entry path too short")?;
        Ok(Self {
            token: token.to_owned(),
            run: run_dir.to_string_lossy().into_owned(),
            ws: std::fs::canonicalize(ws)?.to_string_lossy().into_owned(),
            prefix: prefix.to_string_lossy().into_owned(),
        })
    }

    pub(super) fn text(&self, t: &str) -> String {
        t.replace(&self.token, "<redacted>")
            .replace(&self.run, RUN)
            .replace(&self.ws, WS)
            .replace(&self.prefix, GUEST_PREFIX)
    }

    pub(super) fn json(&self, v: &Value) -> Result<Value> {
        Ok(serde_json::from_str(&self.text(&v.to_string()))?)
    }

    /// The model requests `upstream` received, one JSON line each, its key header redacted.
    pub(super) fn requests(&self, upstream: &GenaiUpstream) -> Vec<String> {
        upstream
            .requests()
            .iter()
            .map(|r| {
                let headers: serde_json::Map<String, Value> = r
                    .headers
                    .iter()
                    .map(|(k, v)| {
                        let value = if k == "x-goog-api-key" {
                            "<redacted>".to_owned()
                        } else {
                            self.text(v)
                        };
                        (k.clone(), Value::from(value))
                    })
                    .collect();
                self.text(&json!({"path": r.path, "headers": headers, "body": r.body}).to_string())
            })
            .collect()
    }
}

/// The entry point of the verified install `--gemini-prefix` names (or the default one).
fn verified_entry(args: &CaptureArgs) -> Result<PathBuf> {
    let prefix = args.gemini_prefix.clone().unwrap_or_else(|| {
        switchyard_runner::agents::spec(switchyard_runner::Agent::GeminiCli).default_prefix()
    });
    let prefix = std::fs::canonicalize(&prefix)
        .with_context(|| format!("Gemini CLI install {}", prefix.display()))?;
    let install = switchyard_backend::install::verify(
        &prefix,
        switchyard_backend::gemini::PACKAGE,
        switchyard_backend::gemini::VERSION,
    )
    .with_context(|| format!("verifying the Gemini CLI install at {}", prefix.display()))?;
    Ok(install.entry)
}

/// `--protocol acp`: the ACP scenarios into `<out>/acp/`.
async fn run_acp(args: CaptureArgs) -> Result<u8> {
    let all = super::capture_acp::scenarios();
    if args.list {
        for s in &all {
            println!("{:<20} {}", s.name, s.about);
        }
        return Ok(0);
    }
    let entry = verified_entry(&args)?;
    let out = args
        .out
        .clone()
        .unwrap_or_else(|| Path::new(DEFAULT_OUT).join("acp"));
    let selected = select(&all, &args.scenarios, |s| s.name)?;
    std::fs::create_dir_all(&out)?;
    for s in selected {
        eprintln!("capturing {} (acp) ...", s.name);
        let outcome = super::capture_acp::capture_one(s, &entry, &out.join(s.name)).await?;
        eprintln!("  {outcome}");
    }
    write_index(&out)?;
    Ok(0)
}

pub(super) const WS: &str = "/capture/ws";
pub(super) const RUN: &str = "/capture/run";
pub(super) const GUEST_PREFIX: &str = "/capture/gemini-cli";

/// The replayed events of a note transcript as JSON, once they are checked to be the live
/// run's (after its `run_started`, which is the backend's, and redacted like the transcript)
/// and the replayed outcome the live one.
pub(super) fn replayed_as_live(
    live: &[Event],
    replayed: &[Event],
    live_outcome: &RunOutcome,
    outcome: &RunOutcome,
    redact_json: &dyn Fn(&Value) -> Result<Value>,
) -> Result<Vec<Value>> {
    let live: Vec<Value> = live
        .iter()
        .skip(1)
        .map(|e| redact_json(&serde_json::to_value(e)?))
        .collect::<Result<_>>()?;
    let again: Vec<Value> = replayed
        .iter()
        .map(serde_json::to_value)
        .collect::<Result<_, _>>()?;
    if let Some((l, r)) = live.iter().zip(&again).find(|(l, r)| l != r) {
        anyhow::bail!("a replayed event differs from the live run's:\nlive:   {l}\nreplay: {r}");
    }
    anyhow::ensure!(
        live.len() == again.len(),
        "replayed events ({}) differ from the live run ({})",
        again.len(),
        live.len()
    );
    anyhow::ensure!(
        redact_json(&serde_json::to_value(live_outcome)?)? == serde_json::to_value(outcome)?,
        "replayed outcome differs from the live one"
    );
    Ok(again)
}

/// What a captured run left: the lines written to the guest's stdin, its stderr lines, the live
/// events, the run's note transcript and its report.
pub(super) struct Driven<N> {
    pub stdin: Vec<String>,
    pub stderr: Vec<String>,
    pub live: Vec<Event>,
    pub notes: Vec<N>,
    pub report: switchyard_backend::driver::RunReport,
}

/// Drives `run` to its end with a note transcript, keeping what a fixture needs.
pub(super) async fn drive_captured<M: switchyard_backend::driver::Mapping>(
    mut run: switchyard_backend::driver::Driver<M>,
) -> Driven<M::Note> {
    let (tx, mut transcript) = tokio::sync::mpsc::unbounded_channel();
    run.transcript = Some(tx);
    let (mut stdin, mut stderr, mut live) = (Vec::new(), Vec::new(), Vec::new());
    let report = run
        .drive(
            async |item| match item {
                RunItem::RawStdin(l) => stdin.push(l.text),
                RunItem::RawStderr(l) => stderr.push(l.text),
                RunItem::RawStdout(_) | RunItem::RawEvent(_) => {}
                RunItem::Event(e) => live.push(e.event),
            },
            async |outcome| outcome,
        )
        .await;
    let mut notes = Vec::new();
    while let Ok(note) = transcript.try_recv() {
        notes.push(note);
    }
    Driven {
        stdin,
        stderr,
        live,
        notes,
        report,
    }
}

/// `notes` redacted by `redact_json` (each note through its JSON form).
pub(super) fn redact_notes<N: serde::Serialize + serde::de::DeserializeOwned>(
    notes: &[N],
    redact_json: &dyn Fn(&Value) -> Result<Value>,
) -> Result<Vec<N>> {
    notes
        .iter()
        .map(|n| {
            Ok(serde_json::from_value(redact_json(
                &serde_json::to_value(n)?,
            )?)?)
        })
        .collect()
}

/// The files of a fixture recorded as notes (Claude Code, Codex), already redacted.
pub(super) struct NotesFixture<'a, N> {
    pub notes: &'a [N],
    pub stdin: &'a [String],
    pub stderr: &'a [String],
    /// `expected.jsonl`.
    pub expected: &'a [Value],
    pub exit: GuestExit,
    pub outcome: &'a RunOutcome,
    pub requests: &'a [String],
    pub manifest: Value,
}

impl<N: serde::Serialize> NotesFixture<'_, N> {
    /// Writes `notes.jsonl`, `stdin.jsonl`, `stderr.txt`, `expected.jsonl`, `exit.json`,
    /// `outcome.json`, `requests.jsonl` and `manifest.json` into `dir`.
    pub(super) fn write(&self, dir: &Path) -> Result<()> {
        std::fs::create_dir_all(dir)?;
        let notes: Vec<String> = self
            .notes
            .iter()
            .map(|n| Ok(serde_json::to_string(n)?))
            .collect::<Result<_>>()?;
        write_lines(&dir.join("notes.jsonl"), &notes)?;
        write_lines(&dir.join("stdin.jsonl"), self.stdin)?;
        write_lines(&dir.join("stderr.txt"), self.stderr)?;
        let expected: Vec<String> = self.expected.iter().map(Value::to_string).collect();
        write_lines(&dir.join("expected.jsonl"), &expected)?;
        std::fs::write(
            dir.join("exit.json"),
            serde_json::to_vec_pretty(&self.exit)?,
        )?;
        std::fs::write(
            dir.join("outcome.json"),
            serde_json::to_vec_pretty(self.outcome)?,
        )?;
        write_lines(&dir.join("requests.jsonl"), self.requests)?;
        std::fs::write(
            dir.join("manifest.json"),
            serde_json::to_vec_pretty(&self.manifest)?,
        )?;
        Ok(())
    }
}

/// A capture's scratch directory: the workspace `ws/` (holding `a.txt` to read) and the run
/// directory `run/` below it.
pub(super) fn scratch() -> Result<(tempfile::TempDir, PathBuf)> {
    let scratch = tempfile::tempdir()?;
    let ws = scratch.path().join("ws");
    std::fs::create_dir_all(&ws)?;
    std::fs::write(ws.join("a.txt"), "alpha\n")?;
    Ok((scratch, ws))
}

/// The files a scenario's model asks for, beside [`scratch`]'s own.
pub(super) fn scenario_files(upstream: GenaiScenario, ws: &Path) -> Result<()> {
    if matches!(upstream, GenaiScenario::ReadPdf) {
        std::fs::write(ws.join("quarterly.pdf"), switchyard_testkit::QUARTERLY_PDF)?;
    }
    Ok(())
}

/// The files every fixture has, already redacted; each protocol writes its own besides.
pub(super) struct Fixture<'a> {
    pub name: &'a str,
    pub about: &'a str,
    pub stdout: &'a [String],
    pub stderr: &'a [String],
    pub exit: GuestExit,
    pub outcome: &'a RunOutcome,
    /// `expected.jsonl`.
    pub expected: &'a [Value],
    pub requests: Vec<String>,
    /// What the per-run key was, for the manifest's redactions.
    pub key_was: &'a str,
    /// The protocol's own manifest fields.
    pub extra: Value,
}

impl Fixture<'_> {
    /// Writes the fixture's files and its manifest into `dir`.
    pub(super) fn write(
        &self,
        dir: &Path,
        launch: &PreparedLaunch,
        redaction: &Redaction,
    ) -> Result<()> {
        std::fs::create_dir_all(dir)?;
        write_lines(&dir.join("stdout.jsonl"), self.stdout)?;
        write_lines(&dir.join("stderr.txt"), self.stderr)?;
        std::fs::write(
            dir.join("exit.json"),
            serde_json::to_vec_pretty(&self.exit)?,
        )?;
        std::fs::write(
            dir.join("outcome.json"),
            serde_json::to_vec_pretty(self.outcome)?,
        )?;
        let expected: Vec<String> = self.expected.iter().map(Value::to_string).collect();
        write_lines(&dir.join("expected.jsonl"), &expected)?;
        write_lines(&dir.join("requests.jsonl"), &self.requests)?;
        let argv: Vec<String> = std::iter::once("node".to_owned())
            .chain(
                launch
                    .args
                    .iter()
                    .map(|a| redaction.text(&a.to_string_lossy())),
            )
            .collect();
        let mut manifest = json!({
            "scenario": self.name,
            "about": self.about,
            "cli": {"package": switchyard_backend::gemini::PACKAGE, "version": switchyard_backend::gemini::VERSION},
            "node": node_version(),
            "captured_at": chrono::Utc::now().to_rfc3339(),
            "argv": argv,
            "settings": redaction.json(&launch.settings)?,
            "redactions": [
                {"what": self.key_was, "replacement": "<redacted>"},
                {"what": "run directory", "replacement": RUN},
                {"what": "workspace directory", "replacement": WS},
                {"what": "Gemini CLI install prefix (argv, system prompt)", "replacement": GUEST_PREFIX}
            ],
            "exit": self.exit,
            "outcome_status": self.outcome.status,
        });
        if let (Some(manifest), Value::Object(extra)) = (manifest.as_object_mut(), &self.extra) {
            manifest.extend(extra.clone());
        }
        std::fs::write(
            dir.join("manifest.json"),
            serde_json::to_vec_pretty(&manifest)?,
        )?;
        Ok(())
    }
}

async fn capture_one(s: &Scenario, entry: &Path, dir: &Path) -> Result<String> {
    let upstream = GenaiUpstream::start(s.upstream).await?;
    let (scratch, ws) = scratch()?;
    scenario_files(s.upstream, &ws)?;
    let token = switchyard_runner::random_token();
    let node = switchyard_runner::home::which("node").context("node not on PATH")?;
    let model = s.model;
    let launch = prepare(&GeminiLaunchConfig {
        trust_workspace_config: false,
        node,
        entry: entry.to_path_buf(),
        workdir: ws.clone(),
        run_dir: scratch.path().join("run"),
        prompt: "Please do the task".into(),
        model: model.into(),
        base_url: upstream.base_url(),
        api_key: Secret::new(token.clone()),
        approval_mode: ApprovalMode::Default,
        max_turns: s.max_turns,
        max_attempts: GUEST_MAX_ATTEMPTS,
        host_env: std::env::vars_os().collect(),
        host_mcp: None,
        protocol: Default::default(),
    })?;
    let limits = RunLimits {
        timeout: Some(Duration::from_secs(120)),
        inactivity: s.inactivity,
        stop_policy: switchyard_backend::process::StopPolicy {
            grace_after_int: Duration::from_secs(5),
            grace_after_term: Duration::from_secs(2),
        },
        max_line_bytes: None,
    };
    let started = RunStarted {
        run_id: "capture".into(),
        agent: "gemini-cli".into(),
        agent_version: "0.61.0".into(),
        workdir: WS.into(),
        model: Some(model.into()),
    };
    let run = headless(
        &launch,
        &limits,
        started,
        std::sync::Arc::new(switchyard_backend::permission::NoHost),
    )?;
    let stop = run.cancel.clone();
    let cancel_on_text = s.cancel_on_first_text;
    let (mut stdout, mut stderr, mut live_events) = (Vec::new(), Vec::new(), Vec::new());
    let report = run
        .drive(
            async |item| match item {
                RunItem::RawStdout(l) => stdout.push(l.text),
                RunItem::RawStderr(l) => stderr.push(l.text),
                // Headless guests get no stdin.
                RunItem::RawStdin(_) | RunItem::RawEvent(_) => {}
                RunItem::Event(e) => {
                    if cancel_on_text && matches!(e.event, Event::AssistantDelta(_)) {
                        stop.cancel();
                    }
                    live_events.push(e);
                }
            },
            async |outcome| outcome,
        )
        .await;
    let exit = report.outcome.exit;

    // Redact: real paths → fixed placeholders, the per-run key → <redacted>.
    let redaction = Redaction::new(&token, &ws, &launch.run_dir, entry)?;
    let redact = |t: &str| redaction.text(t);
    let stdout: Vec<String> = stdout.iter().map(|l| redact(l)).collect();
    let stderr: Vec<String> = stderr.iter().map(|l| redact(l)).collect();

    // The replay of the redacted transcript must match the live run (modulo redaction).
    let (replayed, outcome) = switchyard_events::gemini::replay(
        stdout.iter().map(String::as_str),
        stderr.iter().map(String::as_str),
        exit,
    );
    // Compare as JSON after redacting the live side, so only redaction may differ.
    let redacted = |v: Value| redaction.json(&v);
    ensure!(
        redacted(serde_json::to_value(&report.outcome)?)? == serde_json::to_value(&outcome)?,
        "replayed outcome differs from the live one: {outcome:?} vs {:?}",
        report.outcome
    );
    let live: Vec<Value> = live_events
        .iter()
        .skip(1) // RunStarted is added by the backend, not the normalizer
        .map(|e| redacted(json!({"event": e.event, "guest_timestamp": e.guest_timestamp})))
        .collect::<Result<_>>()?;
    let again: Vec<Value> = replayed
        .iter()
        .map(serde_json::to_value)
        .collect::<Result<_, _>>()?;
    ensure!(
        live == again,
        "replayed events ({}) differ from the live run ({})",
        again.len(),
        live.len()
    );

    Fixture {
        name: s.name,
        about: s.about,
        stdout: &stdout,
        stderr: &stderr,
        exit,
        outcome: &outcome,
        expected: &again,
        requests: redaction.requests(&upstream),
        key_was: "per-run guest API key (env GEMINI_API_KEY, header x-goog-api-key)",
        extra: json!({
            "max_turns": s.max_turns,
            "cancel_on_first_text": s.cancel_on_first_text,
            "inactivity_secs": s.inactivity.map(|d| d.as_secs()),
        }),
    }
    .write(dir, &launch, &redaction)?;
    launch.remove_system_settings();
    Ok(format!(
        "{:?} {}",
        outcome.status,
        outcome
            .error
            .map(|e| e.message)
            .unwrap_or_default()
            .lines()
            .next()
            .unwrap_or("")
    ))
}

pub(super) fn write_lines(path: &Path, lines: &[String]) -> Result<()> {
    let mut text = lines.join("\n");
    if !lines.is_empty() {
        text.push('\n');
    }
    std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))
}

pub(super) fn node_version() -> Option<String> {
    std::process::Command::new("node")
        .arg("--version")
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
}

/// `--agent opencode`: the OpenCode scenarios into `fixtures/opencode/VERSION/`.
async fn run_opencode(args: CaptureArgs) -> Result<u8> {
    let all = super::capture_opencode::scenarios();
    if args.list {
        for s in &all {
            println!("{:<14} {}", s.name, s.about);
        }
        return Ok(0);
    }
    let (package, version) = switchyard_runner::Agent::Opencode.pin();
    let prefix = args.opencode_prefix.clone().unwrap_or_else(|| {
        switchyard_runner::agents::spec(switchyard_runner::Agent::Opencode).default_prefix()
    });
    let prefix = std::fs::canonicalize(&prefix)
        .with_context(|| format!("OpenCode install {}", prefix.display()))?;
    let install = switchyard_backend::install::verify(&prefix, package, version)
        .with_context(|| format!("verifying the OpenCode install at {}", prefix.display()))?;
    let out = args
        .out
        .clone()
        .unwrap_or_else(|| PathBuf::from(super::capture_opencode::DEFAULT_OUT));
    let selected = select(&all, &args.scenarios, |s| s.name)?;
    std::fs::create_dir_all(&out)?;
    for s in selected {
        eprintln!("capturing {} (opencode) ...", s.name);
        let outcome =
            super::capture_opencode::capture_one(s, &install.entry, &out.join(s.name)).await?;
        eprintln!("  {outcome}");
    }
    write_index_of(&out, package, version)?;
    Ok(0)
}

/// `--agent claude-code`: the Claude Code scenarios into `fixtures/claude-code/VERSION/`.
async fn run_claude(args: CaptureArgs) -> Result<u8> {
    use super::capture_claude::{DEFAULT_OUT, capture_one, scenarios};
    let prefix = args.claude_prefix.clone();
    let all = scenarios();
    let named = |s: &super::capture_claude::ClaudeScenario| (s.name, s.about);
    let agent = switchyard_runner::Agent::ClaudeCode;
    run_notes_agent(&args, agent, prefix, DEFAULT_OUT, &all, named, capture_one).await
}

/// `--agent codex`: the Codex scenarios into `fixtures/codex/VERSION/`.
async fn run_codex(args: CaptureArgs) -> Result<u8> {
    use super::capture_codex::{DEFAULT_OUT, capture_one, scenarios};
    let prefix = args.codex_prefix.clone();
    let all = scenarios();
    let named = |s: &super::capture_codex::CodexScenario| (s.name, s.about);
    let agent = switchyard_runner::Agent::Codex;
    run_notes_agent(&args, agent, prefix, DEFAULT_OUT, &all, named, capture_one).await
}

/// The scenarios `args` selects of an agent whose fixtures are note transcripts, each captured
/// with `capture` into its folder of the output (`prefix`'s install, or the default one), and
/// the folder's index; with `--list`, their names only.
async fn run_notes_agent<S>(
    args: &CaptureArgs,
    agent: switchyard_runner::Agent,
    prefix: Option<PathBuf>,
    default_out: &str,
    all: &[S],
    named: impl Fn(&S) -> (&'static str, &'static str),
    capture: impl AsyncFn(&S, &Path, &Path) -> Result<String>,
) -> Result<u8> {
    if args.list {
        for s in all {
            let (name, about) = named(s);
            println!("{name:<18} {about}");
        }
        return Ok(0);
    }
    let (entry, out) = notes_install(agent, prefix, args.out.clone(), default_out)?;
    for s in select(all, &args.scenarios, |s| named(s).0)? {
        let name = named(s).0;
        eprintln!("capturing {name} ({}) ...", agent.name());
        let outcome = capture(s, &entry, &out.join(name)).await?;
        eprintln!("  {outcome}");
    }
    let (package, version) = agent.pin();
    write_index_of(&out, package, version)?;
    Ok(0)
}

/// The verified entry of `agent`'s sealed install (`prefix`, else the default one) and the
/// output directory (`out`, else `default_out`), created.
fn notes_install(
    agent: switchyard_runner::Agent,
    prefix: Option<PathBuf>,
    out: Option<PathBuf>,
    default_out: &str,
) -> Result<(PathBuf, PathBuf)> {
    let (package, version) = agent.pin();
    let prefix = prefix.unwrap_or_else(|| switchyard_runner::agents::spec(agent).default_prefix());
    let prefix = std::fs::canonicalize(&prefix)
        .with_context(|| format!("{} install {}", agent.name(), prefix.display()))?;
    let install =
        switchyard_backend::install::verify(&prefix, package, version).with_context(|| {
            format!(
                "verifying the {} install at {}",
                agent.name(),
                prefix.display()
            )
        })?;
    let out = out.unwrap_or_else(|| PathBuf::from(default_out));
    std::fs::create_dir_all(&out)?;
    Ok((install.entry, out))
}

fn write_index(out: &Path) -> Result<()> {
    write_index_of(
        out,
        switchyard_backend::gemini::PACKAGE,
        switchyard_backend::gemini::VERSION,
    )
}

/// `manifest.json` of a fixtures directory: the guest and every scenario in it.
fn write_index_of(out: &Path, package: &str, version: &str) -> Result<()> {
    let mut scenarios = Vec::new();
    for entry in std::fs::read_dir(out)? {
        let entry = entry?;
        let manifest = entry.path().join("manifest.json");
        if manifest.is_file() {
            let m: Value = serde_json::from_slice(&std::fs::read(&manifest)?)?;
            // A nested index (the headless folder holds `acp/`) is not a scenario.
            if m.get("scenario").is_none() {
                continue;
            }
            scenarios.push(json!({"scenario": m["scenario"], "about": m["about"], "captured_at": m["captured_at"], "outcome_status": m["outcome_status"]}));
        }
    }
    scenarios.sort_by(|a, b| a["scenario"].as_str().cmp(&b["scenario"].as_str()));
    let index = json!({
                "cli": {"package": package, "version": version},
        "tool": "switchyard capture",
        "scenarios": scenarios,
    });
    std::fs::write(
        out.join("manifest.json"),
        serde_json::to_vec_pretty(&index)?,
    )?;
    Ok(())
}
