//! The app-server types against the JSON Schema the pinned binary generated
//! (`fixtures/codex/0.171.0/app-server-schema/`): every sample of a type validates, a value
//! the type serializes validates, and every property the schema requires is a field of the
//! type (never left in `extra`), so a schema change of the pinned version shows here.
//!
//! The samples (`testdata/codex_app_server_samples.jsonl`) are messages of real app-server
//! sessions of 0.171.0 (paths rewritten).

use super::*;
use serde::de::DeserializeOwned;
use serde_json::json;

fn schema(file: &str) -> Value {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/codex/0.171.0/app-server-schema")
        .join(file);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
    serde_json::from_str(&text).unwrap()
}

/// Validates `instance` against `schema`, with the errors in the panic.
fn assert_valid(schema: &Value, instance: &Value, what: &str) {
    let validator = jsonschema::validator_for(schema).unwrap();
    let errors: Vec<String> = validator
        .iter_errors(instance)
        .map(|e| format!("{e} at {}", e.instance_path()))
        .collect();
    assert!(errors.is_empty(), "{what}: {errors:#?}\n{instance:#}");
}

/// The `required` list of a schema object.
fn required(schema: &Value) -> Vec<String> {
    schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| {
            r.iter()
                .filter_map(|v| v.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// Every property `object_schema` requires is a field of `value`'s type: present in `value`'s
/// serialization and not only kept in its `extra`.
fn assert_declares(object_schema: &Value, value: &(impl Serialize + Extra), what: &str) {
    let serialized = serde_json::to_value(value).unwrap();
    assert_declares_in(object_schema, &serialized, value.extra(), what);
}

/// [`assert_declares`] with the serialization given (an item's includes its `type` tag).
fn assert_declares_in(
    object_schema: &Value,
    serialized: &Value,
    extra: &Map<String, Value>,
    what: &str,
) {
    for property in required(object_schema) {
        assert!(
            !extra.contains_key(&property),
            "{what}: the schema requires {property:?}, which the type leaves in `extra`"
        );
        assert!(
            serialized.get(&property).is_some(),
            "{what}: the schema requires {property:?}, which the type does not serialize"
        );
    }
}

/// A received sample: valid, typed, every required property declared, and still valid once
/// the type serializes it again.
fn check_read<T: DeserializeOwned + Serialize + Extra>(file: &str, sample: &Value) -> T {
    let schema = schema(file);
    assert_valid(&schema, sample, &format!("{file} sample"));
    let typed: T = serde_json::from_value(sample.clone())
        .unwrap_or_else(|e| panic!("{file}: {e}\n{sample:#}"));
    assert_declares(&schema, &typed, file);
    assert_valid(
        &schema,
        &serde_json::to_value(&typed).unwrap(),
        &format!("{file} round trip"),
    );
    typed
}

/// A value Switchyard sends: valid, with every required property.
fn check_sent(file: &str, value: &impl Serialize) {
    let schema = schema(file);
    let serialized = serde_json::to_value(value).unwrap();
    assert_valid(&schema, &serialized, file);
    for property in required(&schema) {
        assert!(serialized.get(&property).is_some(), "{file}: {property}");
    }
}

fn samples() -> Vec<Value> {
    include_str!("../testdata/codex_app_server_samples.jsonl")
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// The params of the first sample with `method` (and, for items, item type `kind`).
fn sample(method: &str, kind: Option<&str>) -> Value {
    samples()
        .into_iter()
        .find(|m| m["method"] == method && kind.is_none_or(|k| m["params"]["item"]["type"] == k))
        .map(|m| m["params"].clone())
        .unwrap_or_else(|| panic!("no sample of {method} {kind:?}"))
}

fn result_with(key: &str) -> Value {
    samples()
        .into_iter()
        .find(|m| m.get("result").and_then(|r| r.get(key)).is_some())
        .map(|m| m["result"].clone())
        .unwrap_or_else(|| panic!("no result with {key}"))
}

/// The definition `name` of a schema file.
fn definition(file: &str, name: &str) -> Value {
    schema(file)["definitions"][name].clone()
}

/// The `oneOf` branch of `ThreadItem` whose `type` is `kind`.
fn item_schema(kind: &str) -> Value {
    definition("v2/ItemStartedNotification.json", "ThreadItem")["oneOf"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["properties"]["type"]["enum"][0] == kind)
        .cloned()
        .unwrap_or_else(|| panic!("no ThreadItem {kind}"))
}

fn assert_item_declares(item: &ThreadItem) {
    let ThreadItem::Known(known) = item else {
        panic!("not a known item: {item:?}");
    };
    let schema = item_schema(known.kind());
    let what = format!("ThreadItem {}", known.kind());
    let serialized = serde_json::to_value(known).unwrap();
    let check = |extra: &Map<String, Value>| assert_declares_in(&schema, &serialized, extra, &what);
    match known.as_ref() {
        KnownItem::UserMessage(i) => check(i.extra()),
        KnownItem::AgentMessage(i) => check(i.extra()),
        KnownItem::Reasoning(i) => check(i.extra()),
        KnownItem::CommandExecution(i) => check(i.extra()),
        KnownItem::FileChange(i) => {
            check(i.extra());
            let change = definition("v2/ItemStartedNotification.json", "FileUpdateChange");
            for c in &i.changes {
                assert_declares(&change, c, "FileUpdateChange");
            }
        }
        KnownItem::McpToolCall(i) => check(i.extra()),
        KnownItem::DynamicToolCall(i) => check(i.extra()),
        KnownItem::WebSearch(i) => check(i.extra()),
        KnownItem::ImageView(i) => check(i.extra()),
        KnownItem::ContextCompaction(i) => check(i.extra()),
    }
}

#[test]
fn what_switchyard_sends_validates() {
    check_sent(
        "v1/InitializeParams.json",
        &InitializeParams {
            client_info: ClientInfo {
                name: "switchyard".into(),
                title: Some("Switchyard".into()),
                version: "0.1.0".into(),
                extra: Map::new(),
            },
            capabilities: Some(InitializeCapabilities {
                experimental_api: false,
                opt_out_notification_methods: Some(vec!["account/rateLimits/updated".into()]),
                extra: Map::new(),
            }),
            extra: Map::new(),
        },
    );
    check_sent(
        "v2/ThreadStartParams.json",
        &ThreadStartParams {
            cwd: Some("/work".into()),
            approval_policy: Some(json!("on-request")),
            sandbox: Some("workspace-write".into()),
            model: Some("m".into()),
            model_provider: Some("switchyard".into()),
            ephemeral: Some(false),
            ..ThreadStartParams::default()
        },
    );
    check_sent(
        "v2/ThreadResumeParams.json",
        &ThreadResumeParams {
            thread_id: "t".into(),
            cwd: Some("/work".into()),
            approval_policy: Some(json!("on-request")),
            sandbox: Some("read-only".into()),
            model: Some("m".into()),
            model_provider: Some("switchyard".into()),
            exclude_turns: Some(true),
            extra: Map::new(),
        },
    );
    check_sent(
        "v2/TurnStartParams.json",
        &TurnStartParams {
            thread_id: "t".into(),
            input: vec![UserInput::Text {
                text: "hello".into(),
                text_elements: Vec::new(),
            }],
            extra: Map::new(),
        },
    );
    check_sent(
        "v2/TurnInterruptParams.json",
        &TurnInterruptParams {
            thread_id: "t".into(),
            turn_id: "u".into(),
            extra: Map::new(),
        },
    );
    for decision in [
        ApprovalDecision::Accept,
        ApprovalDecision::AcceptForSession,
        ApprovalDecision::Decline,
        ApprovalDecision::Cancel,
    ] {
        check_sent(
            "CommandExecutionRequestApprovalResponse.json",
            &ApprovalResponse { decision },
        );
        check_sent(
            "FileChangeRequestApprovalResponse.json",
            &ApprovalResponse { decision },
        );
    }
    for action in [
        ElicitationAction::Accept,
        ElicitationAction::Decline,
        ElicitationAction::Cancel,
    ] {
        check_sent(
            "McpServerElicitationRequestResponse.json",
            &ElicitationResponse {
                action,
                content: (action == ElicitationAction::Accept).then(|| json!({})),
                meta: None,
            },
        );
    }
}

#[test]
fn answers_validate_and_declare_what_the_schema_requires() {
    check_read::<InitializeResponse>("v1/InitializeResponse.json", &result_with("userAgent"));
    let thread_def = definition("v2/ThreadStartResponse.json", "Thread");
    let started =
        check_read::<ThreadResponse>("v2/ThreadStartResponse.json", &result_with("thread"));
    assert_declares(&thread_def, &started.thread, "Thread");
    let resumed = samples()
        .into_iter()
        .filter_map(|m| m.get("result").cloned())
        .filter(|r| r.get("thread").is_some())
        .nth(1)
        .unwrap();
    let resumed = check_read::<ThreadResponse>("v2/ThreadResumeResponse.json", &resumed);
    assert_declares(&thread_def, &resumed.thread, "Thread (resume)");
    let turn = check_read::<TurnStartResponse>("v2/TurnStartResponse.json", &result_with("turn"));
    assert_declares(
        &definition("v2/TurnStartResponse.json", "Turn"),
        &turn.turn,
        "Turn",
    );
    check_sent("v2/TurnInterruptResponse.json", &json!({}));
}

#[test]
fn notifications_validate_and_declare_what_the_schema_requires() {
    let started = check_read::<ThreadStartedNotification>(
        "v2/ThreadStartedNotification.json",
        &sample("thread/started", None),
    );
    assert_eq!(started.thread.id, started.thread.session_id);
    check_read::<TurnNotification>(
        "v2/TurnStartedNotification.json",
        &sample("turn/started", None),
    );
    let turn_def = definition("v2/TurnCompletedNotification.json", "Turn");
    let error_def = definition("v2/TurnCompletedNotification.json", "TurnError");
    for completed in samples()
        .into_iter()
        .filter(|m| m["method"] == "turn/completed")
    {
        let n = check_read::<TurnNotification>(
            "v2/TurnCompletedNotification.json",
            &completed["params"],
        );
        assert_declares(&turn_def, &n.turn, "Turn");
        if let Some(error) = &n.turn.error {
            assert_declares(&error_def, error, "TurnError");
        }
    }
    for kind in [
        "userMessage",
        "commandExecution",
        "fileChange",
        "agentMessage",
        "mcpToolCall",
        "contextCompaction",
        "dynamicToolCall",
    ] {
        let s = check_read::<ItemStartedNotification>(
            "v2/ItemStartedNotification.json",
            &sample("item/started", Some(kind)),
        );
        assert_item_declares(&s.item);
        let c = check_read::<ItemCompletedNotification>(
            "v2/ItemCompletedNotification.json",
            &sample("item/completed", Some(kind)),
        );
        assert_item_declares(&c.item);
    }
    check_read::<DeltaNotification>(
        "v2/AgentMessageDeltaNotification.json",
        &sample("item/agentMessage/delta", None),
    );
    check_read::<DeltaNotification>(
        "v2/CommandExecutionOutputDeltaNotification.json",
        &sample("item/commandExecution/outputDelta", None),
    );
    let usage = check_read::<TokenUsageNotification>(
        "v2/ThreadTokenUsageUpdatedNotification.json",
        &sample("thread/tokenUsage/updated", None),
    );
    let breakdown = definition(
        "v2/ThreadTokenUsageUpdatedNotification.json",
        "TokenUsageBreakdown",
    );
    assert_declares(&breakdown, &usage.token_usage.total, "TokenUsageBreakdown");
    assert_declares(
        &definition(
            "v2/ThreadTokenUsageUpdatedNotification.json",
            "ThreadTokenUsage",
        ),
        &usage.token_usage,
        "ThreadTokenUsage",
    );
    for error in samples().into_iter().filter(|m| m["method"] == "error") {
        let n = check_read::<ErrorNotification>("v2/ErrorNotification.json", &error["params"]);
        assert_declares(
            &definition("v2/ErrorNotification.json", "TurnError"),
            &n.error,
            "TurnError",
        );
    }
    // Reasoning was not in the sessions sampled: samples with every required property.
    let ids = json!({"threadId": "t", "turnId": "u", "itemId": "rs_1", "delta": "think"});
    let mut summary = ids.clone();
    summary["summaryIndex"] = json!(0);
    check_read::<ReasoningSummaryDeltaNotification>(
        "v2/ReasoningSummaryTextDeltaNotification.json",
        &summary,
    );
    let mut text = ids;
    text["contentIndex"] = json!(0);
    check_read::<ReasoningTextDeltaNotification>("v2/ReasoningTextDeltaNotification.json", &text);
    let reasoning = json!({"item": {"type": "reasoning", "id": "rs_1", "summary": ["s"],
        "content": []}, "threadId": "t", "turnId": "u", "completedAtMs": 1});
    let n =
        check_read::<ItemCompletedNotification>("v2/ItemCompletedNotification.json", &reasoning);
    assert_item_declares(&n.item);
}

#[test]
fn server_requests_validate_and_declare_what_the_schema_requires() {
    check_read::<CommandApprovalParams>(
        "CommandExecutionRequestApprovalParams.json",
        &sample("item/commandExecution/requestApproval", None),
    );
    check_read::<FileChangeApprovalParams>(
        "FileChangeRequestApprovalParams.json",
        &sample("item/fileChange/requestApproval", None),
    );
    let elicitation = sample("mcpServer/elicitation/request", None);
    let typed =
        check_read::<ElicitationParams>("McpServerElicitationRequestParams.json", &elicitation);
    // The form branch's required properties are fields too.
    let form = schema("McpServerElicitationRequestParams.json")["oneOf"][0].clone();
    assert_declares(&form, &typed, "elicitation (form)");
}

#[test]
fn unknown_methods_and_fields_are_kept() {
    let n = parse_notification("thread/status/changed", &json!({"threadId": "t"}));
    assert!(
        matches!(n, Notification::Unknown { ref method, .. } if method == "thread/status/changed")
    );
    let n = parse_notification("item/agentMessage/delta", &json!({"delta": 3}));
    assert!(matches!(n, Notification::Invalid { .. }), "{n:?}");
    let n = parse_notification(
        "item/agentMessage/delta",
        &json!({"threadId": "t", "turnId": "u", "itemId": "i", "delta": "x", "new": 1}),
    );
    let Notification::AgentMessageDelta(delta) = n else {
        panic!("{n:?}")
    };
    assert_eq!(delta.extra.get("new"), Some(&json!(1)));
    let item: ThreadItem =
        serde_json::from_value(json!({"type": "hologram", "id": "h1", "x": 1})).unwrap();
    assert_eq!((item.kind(), item.id()), (Some("hologram"), Some("h1")));
    assert!(matches!(item, ThreadItem::Other(_)));
    let r = parse_server_request("item/tool/requestUserInput", &json!({}));
    assert!(matches!(r, ServerRequest::Unknown { .. }));
    let r = parse_server_request("item/fileChange/requestApproval", &json!({}));
    assert!(matches!(r, ServerRequest::Invalid { .. }));
}
