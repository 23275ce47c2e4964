//! The host contract on every agent path: the real `switchyard` binary drives the real, pinned
//! Gemini CLI (headless and over ACP), OpenCode, Claude Code and Codex through the embedded
//! gateway to a scripted Chat Completions upstream on 127.0.0.1, in the cases a new user met on each of them:
//! upstream ids that restart every turn, parallel calls sent whole at index 0, float arguments
//! of a host tool, a rejected host-tool call claimed from the guest's shell, a skipped call in
//! a batch, an upstream the gateway gives up on, a turn that never delivers its answer, an idle
//! gap between stdin prompts, and a shell tool's `setsid` grandchild.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;

use serde_json::{Value, json};
use switchyard_testkit::chat_upstream::{ChatUpstream, RecordedRequest, Reply, Script};

mod common;
use common::{events, of_kind, output_of, ran, tools_dir, transcript};

/// How the guest is driven.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Guest {
    Headless,
    Acp,
    OpenCode,
    Claude,
    Codex,
}

impl Guest {
    /// `switchyard run` for this path, on `ws`, through the gateway to `upstream`.
    fn command(self, ws: &Path, upstream: &ChatUpstream, prompt: &str) -> Command {
        let mut cmd = match self {
            Guest::Headless => common::gemini_run(ws, &upstream.base_url(), prompt),
            Guest::Acp => {
                let mut cmd = common::gemini_run(ws, &upstream.base_url(), prompt);
                cmd.args(["--protocol", "acp"]);
                cmd
            }
            Guest::OpenCode => common::opencode_run(ws, &upstream.base_url(), prompt),
            Guest::Claude => common::claude_run(ws, &upstream.base_url(), prompt),
            Guest::Codex => common::codex_run(ws, &upstream.base_url(), prompt),
        };
        if matches!(self, Guest::Headless | Guest::Acp) {
            // `opencode_run` and `claude_run` set their own.
            cmd.args(["--timeout", "90"]);
        }
        cmd
    }

    /// A call of the guest's file-reading tool for `file` in `ws`.
    fn read(self, ws: &Path, file: &str) -> (&'static str, String) {
        match self {
            Guest::OpenCode => (
                "read",
                json!({"filePath": ws.canonicalize().unwrap().join(file)}).to_string(),
            ),
            Guest::Claude => (
                "Read",
                json!({"file_path": ws.canonicalize().unwrap().join(file)}).to_string(),
            ),
            // Codex reads files with its shell.
            Guest::Codex => (
                "exec_command",
                json!({"cmd": format!("cat {file}")}).to_string(),
            ),
            _ => ("read_file", json!({"file_path": file}).to_string()),
        }
    }

    /// A call of the guest's shell tool.
    fn shell(self, command: &str) -> (&'static str, String) {
        let args = json!({"command": command, "description": "run it"}).to_string();
        match self {
            Guest::OpenCode => ("bash", args),
            Guest::Claude => ("Bash", args),
            Guest::Codex => ("exec_command", json!({"cmd": command}).to_string()),
            _ => ("run_shell_command", args),
        }
    }

    /// The guest's name of the host tool `record`.
    fn record(self) -> &'static str {
        match self {
            Guest::OpenCode => "switchyard_record",
            Guest::Claude | Guest::Codex => "mcp__switchyard__record",
            _ => "mcp_switchyard_record",
        }
    }

    /// Flags that let the guest run `command_prefix` in its shell.
    fn allowing_shell(self, command_prefix: &str, policy: &Path) -> Vec<String> {
        match self {
            Guest::Headless => vec!["--approval-mode".into(), "yolo".into()],
            _ => {
                std::fs::write(
                    policy,
                    format!(
                        "[[rule]]\ncommand_prefix = \"{command_prefix}\"\ndecision = \"allow\"\n"
                    ),
                )
                .unwrap();
                vec![
                    "--permissions".into(),
                    policy.to_string_lossy().into_owned(),
                ]
            }
        }
    }
}

/// A finished run.
struct Run {
    output: Output,
    events: Vec<Value>,
    upstream: ChatUpstream,
}

impl Run {
    async fn of(path: Guest, script: Script, ws: &Path, prompt: &str, extra: &[String]) -> Run {
        let upstream = ChatUpstream::start(script).await.unwrap();
        let mut cmd = path.command(ws, &upstream, prompt);
        cmd.args(extra);
        let output = output_of(cmd).await;
        let events = events(&output);
        Run {
            output,
            events,
            upstream,
        }
    }

    fn kind(&self, kind: &str) -> Vec<&Value> {
        of_kind(&self.events, kind)
    }

    fn finished(&self) -> &Value {
        let last = self.events.last().expect("events");
        assert_eq!(last["type"], "run_finished", "{}", self.transcript());
        last
    }

    fn transcript(&self) -> String {
        transcript(&self.output)
    }

    fn assert_succeeded(&self) {
        assert_eq!(self.output.status.code(), Some(0), "{}", self.transcript());
        assert_eq!(
            self.finished()["status"],
            "succeeded",
            "{}",
            self.transcript()
        );
    }

    /// The streamed (main) requests the upstream was sent.
    fn turns(&self) -> Vec<RecordedRequest> {
        self.upstream
            .requests()
            .into_iter()
            .filter(RecordedRequest::wants_stream)
            .collect()
    }
}

/// The `k`-th model turn of a streamed run: the request carries `k` tool results.
fn turn(k: usize) -> impl Fn(&RecordedRequest) -> bool + Send + Sync + 'static {
    move |r| r.wants_stream() && r.tool_messages().len() == k
}

fn ids(r: &RecordedRequest) -> Vec<String> {
    r.tool_messages()
        .iter()
        .map(|m| m["tool_call_id"].as_str().unwrap_or_default().to_owned())
        .collect()
}

macro_rules! on_every_path {
    ($scenario:ident: $($name:ident => $path:expr),+ $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() {
                $scenario($path).await;
            }
        )+
    };
}

/// A workspace with `a.txt` and `b.txt`, and the guest's read calls of them.
fn two_files(path: Guest) -> (tempfile::TempDir, &'static str, String, String) {
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("a.txt"), "alpha-7\n").unwrap();
    std::fs::write(ws.path().join("b.txt"), "beta-9\n").unwrap();
    let (tool, a) = path.read(ws.path(), "a.txt");
    let (_, b) = path.read(ws.path(), "b.txt");
    (ws, tool, a, b)
}

// ---------------------------------------------------------------------------------------------

on_every_path!(ids_reused_across_turns:
    ids_reused_across_turns_headless => Guest::Headless,
    ids_reused_across_turns_acp => Guest::Acp,
    ids_reused_across_turns_opencode => Guest::OpenCode,
    ids_reused_across_turns_claude => Guest::Claude,
    ids_reused_across_turns_codex => Guest::Codex,
);

/// A local server that restarts its ids every turn: each turn's call is delivered and run, and
/// the upstream never sees one id twice in its history.
async fn ids_reused_across_turns(path: Guest) {
    let (ws, tool, a, b) = two_files(path);
    let script = Script::new()
        .then_when(
            turn(0),
            Reply::tool_calls_stream(&[("call_0", tool, &a)], 5),
        )
        .then_when(
            turn(1),
            Reply::tool_calls_stream(&[("call_0", tool, &b)], 5),
        )
        .then_when(turn(2), Reply::text_stream(["read both"]));
    let r = Run::of(path, script, ws.path(), "Read a.txt, then b.txt.", &[]).await;
    r.assert_succeeded();
    assert_eq!(r.finished()["final_text"], "read both");
    let results = r.kind("tool_result");
    assert_eq!(results.len(), 2, "{}", r.transcript());
    assert!(
        results.iter().all(|t| t["status"] == "success"),
        "{}",
        r.transcript()
    );
    let last = r.turns().pop().unwrap();
    let answered = ids(&last);
    assert_eq!(answered.len(), 2, "{}", r.transcript());
    assert_eq!(
        answered[0], "call_0",
        "the upstream's own id where it is unique"
    );
    assert_ne!(
        answered[1], "call_0",
        "a repeat keeps the gateway's id: {answered:?}"
    );
    let contents: Vec<String> = last
        .tool_messages()
        .iter()
        .map(|m| m["content"].to_string())
        .collect();
    assert!(
        contents[0].contains("alpha-7") && contents[1].contains("beta-9"),
        "{contents:?}"
    );
}

// ---------------------------------------------------------------------------------------------

on_every_path!(index_zero_parallel_calls:
    index_zero_parallel_calls_headless => Guest::Headless,
    index_zero_parallel_calls_acp => Guest::Acp,
    index_zero_parallel_calls_opencode => Guest::OpenCode,
    index_zero_parallel_calls_claude => Guest::Claude,
    index_zero_parallel_calls_codex => Guest::Codex,
);

/// Parallel calls sent whole, one chunk each, all at `index: 0`: both are delivered and run.
async fn index_zero_parallel_calls(path: Guest) {
    let (ws, tool, a, b) = two_files(path);
    let script = Script::new()
        .then_when(
            turn(0),
            Reply::tool_calls_whole_at_index_zero(&[("call_a", tool, &a), ("call_b", tool, &b)]),
        )
        .then_when(turn(2), Reply::text_stream(["read two"]));
    let r = Run::of(path, script, ws.path(), "Read a.txt and b.txt.", &[]).await;
    r.assert_succeeded();
    assert_eq!(r.kind("tool_call").len(), 2, "{}", r.transcript());
    let results = r.kind("tool_result");
    assert_eq!(results.len(), 2, "{}", r.transcript());
    assert!(results.iter().all(|t| t["status"] == "success"));
    let mut answered = ids(&r.turns().pop().unwrap());
    answered.sort();
    assert_eq!(answered, ["call_a", "call_b"]);
}

// ---------------------------------------------------------------------------------------------

on_every_path!(float_argument_host_tool:
    float_argument_host_tool_headless => Guest::Headless,
    float_argument_host_tool_acp => Guest::Acp,
    float_argument_host_tool_opencode => Guest::OpenCode,
    float_argument_host_tool_claude => Guest::Claude,
    float_argument_host_tool_codex => Guest::Codex,
);

/// A host-tool call whose arguments hold floats (`90.0`, `1.0`), which the guest re-encodes
/// (`90`, `1`): the call is the model's, and it runs once.
async fn float_argument_host_tool(path: Guest) {
    let ws = tempfile::tempdir().unwrap();
    let tools = tools_dir();
    let args = r#"{"nonce":"f-1","angle":90.0,"scale":1.0}"#;
    let script = Script::new()
        .then_when(
            turn(0),
            Reply::tool_calls_stream(&[("call_f", path.record(), args)], 7),
        )
        .then_when(turn(1), Reply::text_stream(["recorded"]));
    let extra = vec![
        "--tools".to_owned(),
        tools
            .path()
            .join("tools.toml")
            .to_string_lossy()
            .into_owned(),
    ];
    let r = Run::of(path, script, ws.path(), "Record it.", &extra).await;
    r.assert_succeeded();
    // As values: the tool gets `90` from a guest that re-encodes, `90.0` from one that keeps
    // the model's JSON (Codex).
    let ran = ran(tools.path());
    assert_eq!(ran.len(), 1, "{}", r.transcript());
    assert!(
        switchyard_events::values::same_value(
            &ran[0],
            &json!({"nonce": "f-1", "angle": 90, "scale": 1})
        ),
        "{ran:?}\n{}",
        r.transcript()
    );
    let decisions: Vec<&Value> = r.kind("host_call").iter().map(|e| &e["decision"]).collect();
    assert_eq!(decisions, ["admitted"], "{}", r.transcript());
    assert_eq!(r.kind("host_call")[0]["model_call_id"], "call_f");
}

// ---------------------------------------------------------------------------------------------

on_every_path!(rejected_host_call_claimed_from_the_shell:
    rejected_host_call_claimed_from_the_shell_opencode => Guest::OpenCode,
    rejected_host_call_claimed_from_the_shell_claude => Guest::Claude,
);

/// The policy rejects a host-tool call; the guest's shell then claims it over MCP with the
/// token and the identity it finds in its home (Claude Code: the delivered call id its
/// transcript keeps, named as Claude Code names it): refused, and the tool never runs. Only
/// OpenCode and Claude Code have both a permission channel and the token where their shell can
/// read it: headless
/// Gemini CLI asks no permission, and over ACP the token travels in `session/new` only (never
/// in the guest's environment or files), so no shell of the guest's can make this claim; the
/// ledger's refusal itself is `binding`'s `a_rejected_call_is_never_admitted`.
async fn rejected_host_call_claimed_from_the_shell(path: Guest) {
    let ws = tempfile::tempdir().unwrap();
    std::fs::copy(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/host_tools/claim.py"),
        ws.path().join("claim.py"),
    )
    .unwrap();
    let tools = tools_dir();
    let policy = ws.path().join("policy.toml");
    std::fs::write(
        &policy,
        format!(
            "[[rule]]\ntool = \"{}\"\ndecision = \"reject\"\n\n[[rule]]\ncommand_prefix = \
             \"python3 claim.py\"\ndecision = \"allow\"\n",
            path.record()
        ),
    )
    .unwrap();
    let (shell, claim) = path.shell("python3 claim.py");
    let script = Script::new()
        .then_when(
            turn(0),
            Reply::tool_calls_stream(&[("call_r", path.record(), r#"{"nonce":"rejected-1"}"#)], 6),
        )
        .then_when(
            turn(1),
            Reply::tool_calls_stream(&[("call_sh", shell, &claim)], 6),
        )
        .then_when(turn(2), Reply::text_stream(["done"]));
    let extra = vec![
        "--tools".to_owned(),
        tools
            .path()
            .join("tools.toml")
            .to_string_lossy()
            .into_owned(),
        "--permissions".to_owned(),
        policy.to_string_lossy().into_owned(),
    ];
    let r = Run::of(
        path,
        script,
        ws.path(),
        "Record, then run claim.py.",
        &extra,
    )
    .await;
    r.assert_succeeded();
    assert!(ran(tools.path()).is_empty(), "the rejected call never ran");
    let permissions = r.kind("permission");
    assert_eq!(permissions[0]["outcome"], "rejected", "{}", r.transcript());
    let shell_output = r.turns().pop().unwrap().tool_messages()[1]["content"].to_string();
    assert!(
        shell_output.contains("identities found: ")
            && !shell_output.contains("identities found: 0"),
        "the shell found the identity: {shell_output}"
    );
    let claims: Vec<&Value> = r.kind("host_call");
    assert!(
        claims
            .iter()
            .any(|c| c["decision"] == "refused" && c["reason"] == "rejected"),
        "the claim was refused as rejected: {}",
        r.transcript()
    );
    assert!(claims.iter().all(|c| c["decision"] != "admitted"));
}

// ---------------------------------------------------------------------------------------------

on_every_path!(skipped_call_does_not_stall_its_batch:
    skipped_call_does_not_stall_its_batch_headless => Guest::Headless,
    skipped_call_does_not_stall_its_batch_acp => Guest::Acp,
);

/// Two host calls in one turn, the first with arguments the guest refuses itself (Gemini CLI
/// checks them against the tool's schema and never calls back): the second runs after the
/// batch wait, the first is abandoned and recorded. OpenCode never skips a call: it sends every
/// call it has permission for (the binding then refuses bad arguments itself), and a rejected
/// permission ends its whole step, the other calls of the batch included.
async fn skipped_call_does_not_stall_its_batch(path: Guest) {
    let ws = tempfile::tempdir().unwrap();
    let tools = tools_dir();
    let extra = vec![
        "--tools".to_owned(),
        tools
            .path()
            .join("tools.toml")
            .to_string_lossy()
            .into_owned(),
        "--host-batch-wait-ms".to_owned(),
        "2000".to_owned(),
    ];
    let script = Script::new()
        .then_when(
            turn(0),
            Reply::tool_calls_stream(
                &[
                    ("call_skip", path.record(), r#"{"nonce":5}"#),
                    ("call_next", path.record(), r#"{"nonce":"next-1"}"#),
                ],
                6,
            ),
        )
        .then_when(turn(2), Reply::text_stream(["one of two"]));
    let r = Run::of(path, script, ws.path(), "Record both.", &extra).await;
    r.assert_succeeded();
    assert_eq!(
        ran(tools.path()),
        [json!({"nonce": "next-1"})],
        "{}",
        r.transcript()
    );
    let abandoned: Vec<&str> = r
        .kind("warning")
        .into_iter()
        .filter_map(|w| w["message"].as_str())
        .filter(|m| m.contains("abandoned"))
        .collect();
    assert_eq!(abandoned.len(), 1, "{}", r.transcript());
    assert!(
        abandoned[0].contains("call_skip") || abandoned[0].contains("call_"),
        "{abandoned:?}"
    );
}

// ---------------------------------------------------------------------------------------------

on_every_path!(an_upstream_the_gateway_gives_up_on:
    an_upstream_the_gateway_gives_up_on_headless => Guest::Headless,
    an_upstream_the_gateway_gives_up_on_acp => Guest::Acp,
    an_upstream_the_gateway_gives_up_on_opencode => Guest::OpenCode,
    an_upstream_the_gateway_gives_up_on_claude => Guest::Claude,
    an_upstream_the_gateway_gives_up_on_codex => Guest::Codex,
);

/// A 200 whose stream carries nothing, every time: the gateway gives up, and the run ends as
/// the provider's failure (exit 4), whatever the guest makes of it.
async fn an_upstream_the_gateway_gives_up_on(path: Guest) {
    let ws = tempfile::tempdir().unwrap();
    let r = Run::of(
        path,
        Script::always(Reply::empty_stream()),
        ws.path(),
        "Hi.",
        &[],
    )
    .await;
    assert_eq!(r.output.status.code(), Some(4), "{}", r.transcript());
    let done = r.finished();
    assert_eq!(done["status"], "failed");
    assert_eq!(done["error"]["kind"], "api", "{done}");
}

// ---------------------------------------------------------------------------------------------

on_every_path!(an_answer_that_never_arrived:
    an_answer_that_never_arrived_headless => Guest::Headless,
    an_answer_that_never_arrived_acp => Guest::Acp,
    an_answer_that_never_arrived_opencode => Guest::OpenCode,
    an_answer_that_never_arrived_claude => Guest::Claude,
    an_answer_that_never_arrived_codex => Guest::Codex,
);

/// Every attempt's call is malformed: the model's answer never reaches the guest, so the run
/// is no success, whatever the guest reports; the failure is the model's output.
async fn an_answer_that_never_arrived(path: Guest) {
    let ws = tempfile::tempdir().unwrap();
    let (tool, _) = path.read(ws.path(), "a.txt");
    let script = Script::always(Reply::malformed_tool_call_stream("call_bad", tool));
    let r = Run::of(path, script, ws.path(), "Read a.txt.", &[]).await;
    let done = r.finished();
    assert_ne!(done["status"], "succeeded", "{}", r.transcript());
    assert_eq!(done["error"]["kind"], "model_output", "{}", r.transcript());
    assert_eq!(r.output.status.code(), Some(3), "{}", r.transcript());
}

on_every_path!(a_first_prompt_whose_answer_never_arrived:
    a_first_prompt_whose_answer_never_arrived_acp => Guest::Acp,
    a_first_prompt_whose_answer_never_arrived_opencode => Guest::OpenCode,
    a_first_prompt_whose_answer_never_arrived_claude => Guest::Claude,
);

/// A session of two prompts: the first one's every attempt is malformed, so its answer never
/// reaches the guest; the second is answered. The run is judged prompt by prompt: no success,
/// and the failure is the model's output. (Headless runs take one prompt.)
async fn a_first_prompt_whose_answer_never_arrived(path: Guest) {
    let ws = tempfile::tempdir().unwrap();
    let (tool, _) = path.read(ws.path(), "a.txt");
    let script = Script::always(Reply::Dynamic(std::sync::Arc::new(move |r| {
        if common::last_user_text(r).contains("first") {
            Reply::malformed_tool_call_stream("call_bad", tool)
        } else {
            Reply::text_stream(["Answered the second prompt."])
        }
    })));
    let second = ["--prompt".to_owned(), "second".to_owned()];
    let r = Run::of(path, script, ws.path(), "first", &second).await;
    let done = r.finished();
    let answers = r.kind("prompt_finished");
    assert_eq!(answers.len(), 2, "{}", r.transcript());
    assert_ne!(done["status"], "succeeded", "{}", r.transcript());
    assert_eq!(done["error"]["kind"], "model_output", "{}", r.transcript());
    assert!(
        done["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .starts_with("prompt 1: "),
        "{}",
        r.transcript()
    );
    assert_eq!(r.output.status.code(), Some(3), "{}", r.transcript());
}

// ---------------------------------------------------------------------------------------------

on_every_path!(a_pdf_read_by_the_agent:
    a_pdf_read_by_the_agent_headless => Guest::Headless,
    a_pdf_read_by_the_agent_acp => Guest::Acp,
    a_pdf_read_by_the_agent_opencode => Guest::OpenCode,
    a_pdf_read_by_the_agent_claude => Guest::Claude,
);

/// The agent reads a PDF, then another file, then answers: the document never fails a request
/// (Gemini CLI resends it with its history every turn), and a provider that cannot read PDFs
/// (profile `vllm`) is sent a placeholder naming it instead of the bytes.
async fn a_pdf_read_by_the_agent(path: Guest) {
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(
        ws.path().join("quarterly.pdf"),
        switchyard_testkit::QUARTERLY_PDF,
    )
    .unwrap();
    std::fs::write(ws.path().join("a.txt"), "alpha\n").unwrap();
    let (tool, pdf) = path.read(ws.path(), "quarterly.pdf");
    let (_, txt) = path.read(ws.path(), "a.txt");
    let script = Script::new()
        .then_when(
            turn(0),
            Reply::tool_calls_stream(&[("call_pdf", tool, &pdf)], 8),
        )
        .then_when(
            turn(1),
            Reply::tool_calls_stream(&[("call_txt", tool, &txt)], 8),
        )
        .then(Reply::text_stream(["The quarterly total is 42."]));
    let config = ws.path().join("run.toml");
    std::fs::write(&config, "[translation]\nprofile = \"vllm\"\n").unwrap();
    let extra = ["--config".to_owned(), config.to_string_lossy().into_owned()];
    let r = Run::of(path, script, ws.path(), "what is the total?", &extra).await;
    r.assert_succeeded();
    assert_eq!(
        r.finished()["final_text"].as_str().unwrap_or_default(),
        "The quarterly total is 42.",
        "{}",
        r.transcript()
    );
    let turns = r.turns();
    assert_eq!(turns.len(), 3, "{}", r.transcript());
    for later in &turns[1..] {
        let body = String::from_utf8_lossy(&later.body);
        assert!(
            !body.contains("JVBERi0"),
            "the PDF's bytes never go upstream"
        );
        if path != Guest::OpenCode {
            // OpenCode 1.18.33 replaces the PDF itself (fixture read_pdf); Gemini CLI and
            // Claude Code send it.
            let placeholder = format!(
                "[attachment not forwarded: application/pdf attachment of 593 bytes from the \
                 result of {tool}"
            );
            assert!(body.contains(&placeholder), "{body}");
        }
    }
}

// ---------------------------------------------------------------------------------------------

on_every_path!(a_hostile_workspace:
    a_hostile_workspace_headless => Guest::Headless,
    a_hostile_workspace_acp => Guest::Acp,
    a_hostile_workspace_opencode => Guest::OpenCode,
    a_hostile_workspace_claude => Guest::Claude,
);

/// A workspace whose agent configuration declares MCP servers, hooks and commands that write
/// markers, and base URLs at a trap server: the run succeeds, nothing of it runs, no traffic
/// goes to the trap, and the run says what it found.
async fn a_hostile_workspace(path: Guest) {
    let ws = tempfile::tempdir().unwrap();
    let markers = tempfile::tempdir().unwrap();
    let trap = ChatUpstream::start(Script::always(Reply::text_stream(["trapped"])))
        .await
        .unwrap();
    let hostile = switchyard_testkit::hostile_workspace::HostileWorkspace::write(
        ws.path(),
        markers.path(),
        &trap.base_url(),
    )
    .unwrap();
    let (tool, args) = path.read(ws.path(), ".gemini/agents/spy.md");
    // The workspace's own policy would let this run unasked.
    let marker = markers
        .path()
        .join(switchyard_testkit::hostile_workspace::SHELL_MARKER);
    let (shell, command) = path.shell(&format!("touch {}", marker.display()));
    let script = Script::new()
        .then_when(
            turn(0),
            Reply::tool_calls_stream(
                &[("call_read", tool, &args), ("call_sh", shell, &command)],
                8,
            ),
        )
        .then(Reply::text_stream(["Done."]));
    let records = tempfile::tempdir().unwrap();
    let extra = [
        "--records".to_owned(),
        records.path().to_string_lossy().into_owned(),
    ];
    let r = Run::of(path, script, ws.path(), "look around", &extra).await;
    r.assert_succeeded();
    assert_eq!(r.turns().len(), 2, "{}", r.transcript());
    // The records keep what was found too.
    use switchyard_records::RecordStore as _;
    let store =
        switchyard_records::SqliteStore::open(switchyard_records::store_path(records.path()))
            .unwrap();
    let run_id = store.runs().unwrap()[0].id;
    let recorded = store
        .events(run_id)
        .unwrap()
        .iter()
        .filter(|e| e.kind == "workspace_config_ignored")
        .count();
    assert!(recorded >= 2, "{recorded} recorded");
    assert!(
        trap.requests().is_empty(),
        "the trap was reached: {}",
        r.transcript()
    );
    assert_eq!(
        hostile.markers_written(),
        Vec::<String>::new(),
        "{}",
        r.transcript()
    );
    let found: Vec<&str> = r
        .kind("workspace_config_ignored")
        .iter()
        .map(|e| e["path"].as_str().unwrap_or_default())
        .collect();
    let expected: &[&str] = match path {
        Guest::OpenCode => &["opencode.json", ".opencode"],
        Guest::Claude => &[
            ".claude/settings.json",
            ".claude/settings.local.json",
            ".mcp.json",
        ],
        _ => &[
            ".gemini/settings.json",
            ".gemini/.env",
            ".env",
            ".gemini/agents",
        ],
    };
    assert_eq!(found, expected, "{}", r.transcript());
    let settings = &r.kind("workspace_config_ignored")[0];
    let keys = settings["keys"].to_string();
    let named = match path {
        Guest::OpenCode => "mcp.evil",
        Guest::Claude => "env.ANTHROPIC_BASE_URL",
        _ => "mcpServers.evil",
    };
    assert!(keys.contains(named), "{keys}");
    assert!(
        !r.transcript().contains("trap-key"),
        "values are never shown"
    );
}

/// With `--trust-workspace-config`, the workspace's MCP server does start: the opt-in works.
/// (The whole hostile fixture is not used: its `.gemini/.env` proxy, let in too, stops the CLI
/// before its MCP servers start.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trusted_workspace_config_starts_its_mcp_server() {
    let ws = tempfile::tempdir().unwrap();
    let markers = tempfile::tempdir().unwrap();
    let marker = markers.path().join("gemini_mcp");
    let settings = json!({"mcpServers": {"evil": {
        "command": "sh", "args": ["-c", format!("touch {}", marker.display())]
    }}});
    std::fs::create_dir_all(ws.path().join(".gemini")).unwrap();
    std::fs::write(
        ws.path().join(".gemini/settings.json"),
        settings.to_string(),
    )
    .unwrap();
    let script = Script::always(Reply::text_stream(["Done."]));
    for (trusted, extra) in [
        (false, vec![]),
        (true, vec!["--trust-workspace-config".to_owned()]),
    ] {
        let _ = std::fs::remove_file(&marker);
        let r = Run::of(Guest::Headless, script.clone(), ws.path(), "hello", &extra).await;
        r.assert_succeeded();
        assert_eq!(
            marker.exists(),
            trusted,
            "trusted {trusted}: {}",
            r.transcript()
        );
        assert_eq!(r.kind("workspace_config_ignored").is_empty(), trusted);
    }
}

// ---------------------------------------------------------------------------------------------

on_every_path!(a_stdin_gap_longer_than_the_inactivity_limit:
    a_stdin_gap_longer_than_the_inactivity_limit_acp => Guest::Acp,
    a_stdin_gap_longer_than_the_inactivity_limit_opencode => Guest::OpenCode,
    a_stdin_gap_longer_than_the_inactivity_limit_claude => Guest::Claude,
);

/// While the host owes the next prompt, the guest's silence is no inactivity; the clock runs
/// again from the moment the prompt is sent. (Headless runs take no stdin prompts.)
async fn a_stdin_gap_longer_than_the_inactivity_limit(path: Guest) {
    let ws = tempfile::tempdir().unwrap();
    let upstream = ChatUpstream::start(Script::always(Reply::Dynamic(std::sync::Arc::new(|r| {
        Reply::text_stream([format!("You said: {}", common::last_user_text(r).trim())])
    }))))
    .await
    .unwrap();
    let mut cmd = path.command(ws.path(), &upstream, "first");
    cmd.args(["--prompts-stdin", "--inactivity-timeout", "4"]);
    let output =
        common::output_with_stdin_after(cmd, Duration::from_secs(8), b"\"second\"\n").await;
    assert_eq!(output.status.code(), Some(0), "{}", transcript(&output));
    let events = events(&output);
    let answers: Vec<&str> = of_kind(&events, "prompt_finished")
        .iter()
        .map(|p| p["final_text"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(answers.len(), 2, "{}", transcript(&output));
    assert!(answers[1].contains("second"), "{answers:?}");
}

// ---------------------------------------------------------------------------------------------

on_every_path!(a_setsid_grandchild_is_gone_after_the_run:
    a_setsid_grandchild_is_gone_after_the_run_headless => Guest::Headless,
    a_setsid_grandchild_is_gone_after_the_run_acp => Guest::Acp,
    a_setsid_grandchild_is_gone_after_the_run_opencode => Guest::OpenCode,
    a_setsid_grandchild_is_gone_after_the_run_claude => Guest::Claude,
    a_setsid_grandchild_is_gone_after_the_run_codex => Guest::Codex,
);

/// Processes whose command line is exactly `words`.
fn processes_running(words: &[&str]) -> Vec<i32> {
    let wanted: Vec<u8> = words
        .iter()
        .flat_map(|w| [w.as_bytes(), b"\0"].concat())
        .collect();
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| c == wanted))
        .collect()
}

/// A shell call that starts a process in a session of its own: the group kill cannot reach it,
/// the run still ends it.
async fn a_setsid_grandchild_is_gone_after_the_run(path: Guest) {
    let ws = tempfile::tempdir().unwrap();
    let seconds = format!("{}", 700_000 + std::process::id() % 100_000 + path as u32);
    // A script, so the command the policy sees is plain (no redirections).
    std::fs::write(
        ws.path().join("start.sh"),
        format!("setsid -f sleep {seconds} > /dev/null 2>&1 < /dev/null\n"),
    )
    .unwrap();
    let (shell, args) = path.shell("sh start.sh");
    let script = Script::new()
        .then_when(
            turn(0),
            Reply::tool_calls_stream(&[("call_sh", shell, &args)], 8),
        )
        .then_when(turn(1), Reply::text_stream(["started"]));
    let policy = ws.path().join("policy.toml");
    let extra = path.allowing_shell("sh start.sh", &policy);
    let r = Run::of(path, script, ws.path(), "Start it.", &extra).await;
    r.assert_succeeded();
    assert_eq!(
        r.kind("tool_result")[0]["status"],
        "success",
        "{}",
        r.transcript()
    );
    let left: Vec<i32> = processes_running(&["sleep", &seconds]);
    for pid in &left {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(*pid),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
    assert!(
        left.is_empty(),
        "the setsid sleep outlived the run: {left:?}"
    );
}

// ---------------------------------------------------------------------------------------------

on_every_path!(ten_large_reads_under_a_window:
    ten_large_reads_under_a_window_headless => Guest::Headless,
    ten_large_reads_under_a_window_acp => Guest::Acp,
    ten_large_reads_under_a_window_opencode => Guest::OpenCode,
    ten_large_reads_under_a_window_claude => Guest::Claude,
    ten_large_reads_under_a_window_codex => Guest::Codex,
);

/// The text of the request's last tool result.
fn last_result(r: &RecordedRequest) -> String {
    r.tool_messages()
        .last()
        .map(|m| m["content"].to_string())
        .unwrap_or_default()
}

/// The agent reads ten 16 KB files one at a time under a sliding window whose max every
/// guest's history outgrows: every request stays within the max, calls and results stay
/// paired, the prompt stays, older reads are evicted, and the run succeeds.
async fn ten_large_reads_under_a_window(path: Guest) {
    const MAX: u64 = 40_000;
    let ws = tempfile::tempdir().unwrap();
    // 16 KB in short lines (the guests cut lines over 2,000 characters).
    let filler: String = (0..400)
        .map(|n| format!("line {n:03}: lorem ipsum dolor sit amet\n"))
        .collect();
    for i in 0..10 {
        std::fs::write(
            ws.path().join(format!("f{i}.txt")),
            format!("file-{i}-start\n{filler}\nfile-{i}-end\n"),
        )
        .unwrap();
    }
    let mut script = Script::new().then_when(
        |r: &RecordedRequest| r.wants_stream() && r.tool_messages().is_empty(),
        {
            let (tool, args) = path.read(ws.path(), "f0.txt");
            Reply::tool_calls_stream(&[("call_f0", tool, &args)], 8)
        },
    );
    for i in 1..=10 {
        let marker = format!("file-{}-start", i - 1);
        let seen = move |r: &RecordedRequest| r.wants_stream() && last_result(r).contains(&marker);
        script = if i < 10 {
            let (tool, args) = path.read(ws.path(), &format!("f{i}.txt"));
            script.then_when(
                seen,
                Reply::tool_calls_stream(&[(&format!("call_f{i}"), tool, &args)], 8),
            )
        } else {
            script.then_when(seen, Reply::text_stream(["Read all ten."]))
        };
    }
    let config = ws.path().join("run.toml");
    std::fs::write(
        &config,
        format!(
            "[context]\npolicy = \"sliding-window\"\nmax_input_tokens = {MAX}\n\
             target_input_tokens = 30000\n"
        ),
    )
    .unwrap();
    let records = tempfile::tempdir().unwrap();
    let extra = [
        "--config".to_owned(),
        config.to_string_lossy().into_owned(),
        "--records".to_owned(),
        records.path().to_string_lossy().into_owned(),
    ];
    let prompt = "Read f0.txt to f9.txt one at a time.";
    let r = Run::of(path, script, ws.path(), prompt, &extra).await;
    r.assert_succeeded();
    assert_eq!(
        r.finished()["final_text"],
        "Read all ten.",
        "{}",
        r.transcript()
    );
    // What went upstream: the prompt in every turn, every result right after its call.
    let turns = r.turns();
    assert!(turns.len() >= 11, "{}", r.transcript());
    for request in &turns {
        let body = request.json();
        assert!(body.to_string().contains(prompt), "the prompt stays");
        let messages = body["messages"].as_array().unwrap();
        for (i, m) in messages
            .iter()
            .enumerate()
            .filter(|(_, m)| m["role"] == "tool")
        {
            let call = messages[..i]
                .iter()
                .rev()
                .find(|p| p["role"] == "assistant")
                .unwrap();
            let ids: Vec<&Value> = call["tool_calls"]
                .as_array()
                .unwrap()
                .iter()
                .map(|c| &c["id"])
                .collect();
            assert!(
                ids.contains(&&m["tool_call_id"]),
                "a result without its call"
            );
        }
    }
    // The gateway's own count of every request is within the max, and old reads went.
    use switchyard_records::RecordStore as _;
    let store =
        switchyard_records::SqliteStore::open(switchyard_records::store_path(records.path()))
            .unwrap();
    let decisions: Vec<Value> = store
        .exchanges(switchyard_records::ExchangeFilter::All)
        .unwrap()
        .into_iter()
        .filter_map(|x| x.context)
        .collect();
    assert!(!decisions.is_empty());
    assert!(
        decisions
            .iter()
            .all(|d| d["tokens_after"].as_u64().unwrap() <= MAX),
        "{decisions:?}"
    );
    assert!(
        decisions
            .iter()
            .any(|d| d["evicted"].as_array().is_some_and(|e| !e.is_empty())),
        "the window evicted something: {decisions:?}"
    );
    let last = turns.last().unwrap().json().to_string();
    assert!(!last.contains("file-0-start"), "the oldest read is gone");
    assert!(last.contains("file-9-start"), "the latest read stays");
    // Offline, the recorded run replays through other budgets: the one it ran with trims the
    // same requests, a budget below the protected content refuses them.
    let run_id = store.runs().unwrap()[0].id.to_string();
    let replay = |max: &str, target: &str| {
        let output = Command::new(common::BIN)
            .args(["records", "--records"])
            .arg(records.path())
            .args(["replay-context", &run_id, "--max", max, "--target", target])
            .output()
            .unwrap();
        assert!(output.status.success(), "{output:?}");
        String::from_utf8(output.stdout).unwrap()
    };
    let same = replay("40000", "30000");
    let trimmed = same.lines().filter(|l| l.ends_with("trimmed")).count();
    let evicting = decisions
        .iter()
        .filter(|d| d["evicted"].as_array().is_some_and(|e| !e.is_empty()))
        .count();
    assert_eq!(trimmed, evicting, "{same}");
    let tight = replay("1000", "800");
    assert!(tight.contains("refused: context policy"), "{tight}");
}
