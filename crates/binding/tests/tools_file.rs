//! `--tools FILE` end to end: the file is checked, command and URL handlers really run (a
//! Python script that writes down what it ran, an HTTP tool on 127.0.0.1), arguments that do not
//! follow the schema never reach a tool, and failures and timeouts are tool errors.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};
use switchyard_binding::{ToolError, ToolsFile, ToolsFileError};

/// A tool script: appends its stdin to `ran.log`, then answers as the mode in argv says.
const SCRIPT: &str = r#"
import json, sys, time
args = sys.stdin.read()
with open("ran.log", "a") as log:
    log.write(args + "\n")
mode = sys.argv[1]
if mode == "json":
    nonce = json.loads(args)["nonce"]
    print(json.dumps({"text": "recorded " + nonce, "images": [{"mime_type": "image/png", "data": "iVBORw0KGgo="}]}))
elif mode == "text":
    print("plain answer")
elif mode == "fail":
    sys.stderr.write("disk full\n")
    sys.exit(3)
elif mode == "slow":
    time.sleep(30)
"#;

fn tools_dir(extra: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("tool.py"), SCRIPT).unwrap();
    std::fs::write(
        dir.path().join("schema.json"),
        r#"{"type": "object", "properties": {"nonce": {"type": "string"}}, "required": ["nonce"]}"#,
    )
    .unwrap();
    let mut text = String::new();
    for (name, mode, timeout) in [
        ("record", "json", 30),
        ("say", "text", 30),
        ("broken", "fail", 30),
        ("slow", "slow", 1),
    ] {
        text.push_str(&format!(
            "[[tool]]\nname = \"{name}\"\ndescription = \"{name} things\"\n\
             input_schema = {{ type = \"object\", properties = {{ nonce = {{ type = \"string\" }} }}, required = [\"nonce\"] }}\n\
             command = [\"python3\", \"tool.py\", \"{mode}\"]\ntimeout_secs = {timeout}\n\n"
        ));
    }
    text.push_str(extra);
    std::fs::write(dir.path().join("tools.toml"), text).unwrap();
    dir
}

fn ran(dir: &Path) -> Vec<Value> {
    std::fs::read_to_string(dir.join("ran.log"))
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[tokio::test]
async fn command_tools_run_with_their_arguments_and_answer_in_json_or_text() {
    let dir = tools_dir("");
    let file = ToolsFile::load(&dir.path().join("tools.toml")).unwrap();
    let names: Vec<&str> = file.registry.tools().map(|t| t.name()).collect();
    assert_eq!(names, ["record", "say", "broken", "slow"]);
    let out = file
        .registry
        .call("record", json!({"nonce": "n-42"}))
        .await
        .unwrap();
    assert_eq!(out.text, "recorded n-42");
    assert_eq!(out.images[0].mime_type, "image/png");
    let out = file
        .registry
        .call("say", json!({"nonce": "x"}))
        .await
        .unwrap();
    assert_eq!(out.text.trim(), "plain answer");
    assert!(out.images.is_empty());
    assert_eq!(
        ran(dir.path()),
        [json!({"nonce": "n-42"}), json!({"nonce": "x"})]
    );
}

#[tokio::test]
async fn arguments_that_break_the_schema_never_reach_the_tool() {
    let dir = tools_dir("");
    let file = ToolsFile::load(&dir.path().join("tools.toml")).unwrap();
    for bad in [json!({}), json!({"nonce": 7}), json!("nonce")] {
        match file.registry.call("record", bad.clone()).await {
            Err(ToolError::InvalidArguments { tool, problems }) => {
                assert_eq!(tool, "record");
                assert!(!problems.is_empty(), "{bad}");
            }
            other => panic!("{bad}: {other:?}"),
        }
    }
    assert!(ran(dir.path()).is_empty(), "the script never ran");
    assert!(matches!(
        file.registry.call("nope", json!({})).await,
        Err(ToolError::Unknown(_))
    ));
}

#[tokio::test]
async fn a_failing_tool_reports_its_stderr_and_a_slow_one_is_stopped() {
    let dir = tools_dir("");
    let file = ToolsFile::load(&dir.path().join("tools.toml")).unwrap();
    match file.registry.call("broken", json!({"nonce": "a"})).await {
        Err(ToolError::Failed(message)) => {
            assert!(
                message.contains("exit code 3") && message.contains("disk full"),
                "{message}"
            )
        }
        other => panic!("{other:?}"),
    }
    let started = std::time::Instant::now();
    assert_eq!(
        file.registry.call("slow", json!({"nonce": "b"})).await,
        Err(ToolError::TimedOut(Duration::from_secs(1)))
    );
    // Not a timing assertion of the tool: the call returned at its bound, not after the
    // script's 30 s.
    assert!(started.elapsed() < Duration::from_secs(20));
}

#[tokio::test]
async fn url_tools_post_their_arguments() {
    use axum::routing::post;
    let app = axum::Router::new().route(
        "/tool",
        post(|axum::Json(args): axum::Json<Value>| async move {
            axum::Json(json!({"text": format!("seen {}", args["nonce"])}))
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    let extra = format!(
        "[[tool]]\nname = \"remote\"\ndescription = \"d\"\ninput_schema = \"schema.json\"\nurl = \"http://{addr}/tool\"\n"
    );
    let dir = tools_dir(&extra);
    let file = ToolsFile::load(&dir.path().join("tools.toml")).unwrap();
    let out = file
        .registry
        .call("remote", json!({"nonce": "u-1"}))
        .await
        .unwrap();
    assert_eq!(out.text, "seen \"u-1\"");
}

#[test]
fn bad_tools_files_get_clear_errors() {
    let dir = tempfile::tempdir().unwrap();
    let load = |text: &str| {
        std::fs::write(dir.path().join("t.toml"), text).unwrap();
        ToolsFile::load(&dir.path().join("t.toml"))
            .unwrap_err()
            .to_string()
    };
    let head = "[[tool]]\nname = \"t\"\ndescription = \"d\"\n";
    let object = "input_schema = { type = \"object\" }\n";
    for (text, expected) in [
        (format!("{head}{object}"), "exactly one handler"),
        (
            format!("{head}{object}command = [\"a\"]\nurl = \"http://x\"\n"),
            "exactly one handler",
        ),
        (
            format!("{head}{object}command = []\n"),
            "must name a program",
        ),
        (
            format!("{head}{object}url = \"ftp://x\"\n"),
            "http:// or https://",
        ),
        (
            format!("{head}{object}command = [\"a\"]\ncolor = 1\n"),
            "unknown field",
        ),
        (
            format!("{head}input_schema = {{ type = \"string\" }}\ncommand = [\"a\"]\n"),
            "must describe an object",
        ),
        (
            format!(
                "{head}input_schema = {{ type = \"object\", properties = 5 }}\ncommand = [\"a\"]\n"
            ),
            "not a valid JSON Schema",
        ),
        (
            format!("{head}input_schema = \"missing.json\"\ncommand = [\"a\"]\n"),
            "cannot read the input schema",
        ),
        (
            format!("{head}{object}command = [\"a\"]\ntimeout_secs = 0\n"),
            "at least 1",
        ),
        (
            format!("{head}{object}command = [\"a\"]\n{head}{object}command = [\"b\"]\n"),
            "two tools are named",
        ),
        (
            format!(
                "[[tool]]\nname = \"has space\"\ndescription = \"d\"\n{object}command = [\"a\"]\n"
            ),
            "letters, digits",
        ),
        (
            format!(
                "{head}input_schema = {{ type = \"object\", properties = {{ _switchyard_call = {{ type = \"string\" }} }} }}\ncommand = [\"a\"]\n"
            ),
            "reserves for the identity",
        ),
        ("[[tool]\n".to_owned(), "invalid tools file"),
    ] {
        let message = load(&text);
        assert!(message.contains(expected), "{text:?}: {message}");
    }
    assert!(matches!(
        ToolsFile::load(&dir.path().join("absent.toml")),
        Err(ToolsFileError::Read { .. })
    ));
}
