use super::*;
use serde_json::json;

struct Host {
    /// Delivered calls: id → tool.
    calls: Vec<(&'static str, &'static str, Value)>,
    allow: &'static [&'static str],
}

impl PermissionHost for Host {
    fn delivered(&self, id: &str) -> Option<Delivered> {
        self.calls
            .iter()
            .find(|(c, _, _)| *c == id)
            .map(|(c, tool, arguments)| Delivered {
                call_id: (*c).to_owned(),
                model_call_id: format!("up_{c}"),
                tool: (*tool).to_owned(),
                arguments: arguments.clone(),
                batch: 0,
            })
    }

    fn permission(&self, ask: &PermissionAsk) -> Result<PermissionRuling, String> {
        let call = self.delivered(&ask.named).ok_or("not delivered")?;
        Ok(PermissionRuling {
            call_id: call.call_id.clone(),
            model_call_id: call.model_call_id,
            tool: ask.tool.clone(),
            arguments: call.arguments,
            allow: self.allow.contains(&call.call_id.as_str()),
            rule: "rule 1".into(),
        })
    }
}

fn host(allow: &'static [&'static str]) -> Arc<Host> {
    Arc::new(Host {
        calls: vec![
            ("call_1", "exec_command", json!({"cmd": "touch ../x"})),
            (
                "call_2",
                "mcp__switchyard__record",
                json!({"n": 1, "_switchyard_call": "id"}),
            ),
        ],
        allow,
    })
}

#[test]
fn approvals_are_decided_on_the_delivered_call_only() {
    let params = json!({"itemId": "call_1"});
    let (allowed, answer) = decide(
        host(&["call_1"]).as_ref(),
        &json!(0),
        Ok("call_1".into()),
        &params,
        Kind::Approval,
        false,
    );
    assert_eq!(allowed.outcome, PermissionOutcome::Allowed);
    assert_eq!(allowed.model_call_id.as_deref(), Some("up_call_1"));
    assert_eq!(answer, json!({"decision": "accept"}));
    let (rejected, answer) = decide(
        host(&[]).as_ref(),
        &json!(0),
        Ok("call_1".into()),
        &params,
        Kind::Approval,
        false,
    );
    assert_eq!(rejected.outcome, PermissionOutcome::Rejected);
    assert_eq!(answer, json!({"decision": "decline"}));
    let (unknown, answer) = decide(
        host(&["call_9"]).as_ref(),
        &json!(0),
        Ok("call_9".into()),
        &params,
        Kind::Approval,
        false,
    );
    assert_eq!(unknown.outcome, PermissionOutcome::Refused);
    assert_eq!(answer, json!({"decision": "decline"}));
    let (cancelled, answer) = decide(
        host(&["call_1"]).as_ref(),
        &json!(0),
        Ok("call_1".into()),
        &params,
        Kind::Approval,
        true,
    );
    assert_eq!(cancelled.outcome, PermissionOutcome::Cancelled);
    assert_eq!(answer, json!({"decision": "cancel"}));
}

#[test]
fn an_elicitation_must_show_the_delivered_arguments() {
    let asked = |arguments: Value| {
        json!({"serverName": "switchyard", "_meta": {"tool_name": "record",
            "tool_params": arguments}})
    };
    let (allowed, answer) = decide(
        host(&["call_2"]).as_ref(),
        &json!(3),
        Ok("call_2".into()),
        &asked(json!({"n": 1})),
        Kind::Elicitation,
        false,
    );
    assert_eq!(allowed.outcome, PermissionOutcome::Allowed);
    assert_eq!(answer, json!({"action": "accept", "content": {}}));
    let (changed, answer) = decide(
        host(&["call_2"]).as_ref(),
        &json!(3),
        Ok("call_2".into()),
        &asked(json!({"n": 2})),
        Kind::Elicitation,
        false,
    );
    assert_eq!(changed.outcome, PermissionOutcome::Refused);
    assert_eq!(answer, json!({"action": "decline"}));
    let (unmatched, _) = decide(
        host(&["call_2"]).as_ref(),
        &json!(3),
        Err("no open call".into()),
        &asked(json!({"n": 1})),
        Kind::Elicitation,
        false,
    );
    assert_eq!(unmatched.outcome, PermissionOutcome::Refused);
}

/// A scripted `codex app-server`: the answers to Switchyard's requests by their order
/// (initialize 0, thread/start 1, turn/start 2), one approval request, one request
/// Switchyard does not serve, then the turn's end; it exits when stdin closes.
const FAKE_SERVER: &str = r#"
read l; echo '{"id":0,"result":{"userAgent":"codex/0.171.0","codexHome":"/h","platformFamily":"unix","platformOs":"linux"}}'
read l
read l; echo '{"id":1,"result":{"thread":{"id":"thr"},"model":"m"}}'
read l; echo '{"id":2,"result":{"turn":{"id":"tu","items":[],"status":"inProgress"}}}'
echo '{"method":"turn/started","params":{"threadId":"thr","turn":{"id":"tu","items":[],"status":"inProgress"}}}'
echo '{"method":"item/started","params":{"threadId":"thr","turnId":"tu","startedAtMs":1,"item":{"type":"commandExecution","id":"call_1","command":"touch ../x","cwd":"/w","commandActions":[],"status":"inProgress"}}}'
echo '{"id":0,"method":"item/commandExecution/requestApproval","params":{"threadId":"thr","turnId":"tu","itemId":"call_1","startedAtMs":1}}'
read answer; echo "approval answer: $answer" >&2
echo '{"method":"item/completed","params":{"threadId":"thr","turnId":"tu","completedAtMs":2,"item":{"type":"commandExecution","id":"call_1","command":"touch ../x","cwd":"/w","commandActions":[],"status":"declined"}}}'
echo '{"id":1,"method":"item/tool/requestUserInput","params":{}}'
read answer; echo "unserved answer: $answer" >&2
echo '{"method":"item/completed","params":{"threadId":"thr","turnId":"tu","completedAtMs":3,"item":{"type":"agentMessage","id":"msg","text":"declined, done"}}}'
echo '{"method":"turn/completed","params":{"threadId":"thr","turn":{"id":"tu","items":[],"status":"completed"}}}'
while read l; do :; done
"#;

#[tokio::test]
async fn a_scripted_server_runs_a_turn_with_a_declined_approval() {
    let dir = tempfile::tempdir().unwrap();
    let launch = PreparedCodex {
        program: "/bin/sh".into(),
        args: vec!["-c".into(), FAKE_SERVER.into()],
        env: vec![("PATH".into(), "/usr/bin:/bin".into())],
        cwd: dir.path().to_owned(),
        run_dir: dir.path().to_owned(),
        codex_home: dir.path().to_owned(),
        model: "m".into(),
        settings: Value::Null,
        warnings: vec!["a launch warning".into()],
        mount_points: vec![dir.path().join(".aws"), dir.path().join(".codex")],
    };
    // What an interrupted sandbox leaves: an empty mount point, and one the run must keep.
    std::fs::create_dir(dir.path().join(".aws")).unwrap();
    std::fs::create_dir_all(dir.path().join(".codex/kept")).unwrap();
    let plan = CodexPlan {
        prompts: vec!["touch ../x".into()],
        more_prompts: None,
        resume: None,
        close_grace: Duration::from_secs(5),
        cancel_grace: Duration::from_secs(5),
    };
    let started = RunStarted {
        run_id: "r".into(),
        agent: "codex".into(),
        agent_version: "0.171.0".into(),
        workdir: "/w".into(),
        model: None,
    };
    let limits = RunLimits {
        timeout: Some(Duration::from_secs(30)),
        ..RunLimits::default()
    };
    let driver = codex(&launch, &limits, started, plan, host(&[])).unwrap();
    let mut events = Vec::new();
    let mut stdin = Vec::new();
    let report = driver
        .drive(
            async |item| match item {
                RunItem::Event(e) => events.push(e.event),
                RunItem::RawStdin(line) => stdin.push(line.text),
                _ => {}
            },
            async |o| o,
        )
        .await;
    let kinds: Vec<&str> = events.iter().map(Event::kind).collect();
    assert_eq!(
        kinds,
        [
            "run_started",
            "warning",
            "session_started",
            "user_message",
            "tool_call",
            "permission",
            "tool_result",
            "unrecognized",
            "assistant_delta",
            "assistant_message",
            "prompt_finished",
            "usage",
            "run_finished"
        ],
        "{events:#?}\n{}",
        report.stderr_tail
    );
    assert_eq!(
        report.outcome.status,
        OutcomeStatus::Succeeded,
        "{report:?}"
    );
    assert_eq!(report.final_text.as_deref(), Some("declined, done"));
    let Event::ToolCall(call) = &events[4] else {
        panic!()
    };
    assert_eq!(call.model_call_id, "up_call_1");
    assert!(
        stdin.contains(&r#"{"id":0,"result":{"decision":"decline"}}"#.to_owned()),
        "{stdin:?}"
    );
    let unserved = stdin.iter().any(|l| {
        let v: Value = serde_json::from_str(l).unwrap();
        v["id"] == 1 && v["error"]["code"] == -32601
    });
    assert!(unserved, "{stdin:?}");
    assert!(
        !dir.path().join(".aws").exists(),
        "the empty mount point is removed"
    );
    assert!(
        dir.path().join(".codex/kept").exists(),
        "content is never removed"
    );
    assert!(stdin[0].contains(r#""method":"initialize""#));
    assert!(
        stdin[2].contains(r#""method":"thread/start""#)
            && stdin[2].contains(r#""sandbox":"workspace-write""#)
    );
}

#[test]
fn a_note_transcript_replays_to_the_same_events() {
    let notes = vec![
        Note::Thread {
            thread_id: "thr".into(),
            model: "m".into(),
        },
        Note::PromptSent("hi".into()),
        Note::Line(
            r#"{"method":"turn/started","params":{"threadId":"thr","turn":{"id":"tu","items":[],"status":"inProgress"}}}"#
                .into(),
        ),
        Note::Line(r#"{"id":7,"result":{}}"#.into()),
        Note::Line("not json".into()),
        Note::Line(
            r#"{"method":"item/completed","params":{"threadId":"thr","turnId":"tu","completedAtMs":3,"item":{"type":"agentMessage","id":"msg","text":"hello"}}}"#
                .into(),
        ),
        Note::Line(
            r#"{"method":"turn/completed","params":{"threadId":"thr","turn":{"id":"tu","items":[],"status":"completed"}}}"#
                .into(),
        ),
    ];
    let encoded = serde_json::to_string(&notes).unwrap();
    let decoded: Vec<Note> = serde_json::from_str(&encoded).unwrap();
    let (a, outcome) = replay(notes, 1, GuestExit::default(), None);
    let (b, _) = replay(decoded, 1, GuestExit::default(), None);
    assert_eq!(a, b);
    assert_eq!(outcome.status, OutcomeStatus::Succeeded);
    let kinds: Vec<&str> = a.iter().map(Event::kind).collect();
    assert_eq!(
        kinds,
        [
            "session_started",
            "user_message",
            "unrecognized",
            "assistant_delta",
            "assistant_message",
            "prompt_finished",
            "usage",
            "run_finished"
        ]
    );
}
