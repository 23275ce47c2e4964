use std::sync::Mutex;

use tokio::io::{AsyncBufReadExt, BufReader};

use super::*;

/// A pump whose lines land in a duplex; returns it, the lines it wrote, and the guest's end.
fn pump(
    version_field: bool,
) -> (
    Pump<JsonRpc>,
    Arc<Mutex<Vec<String>>>,
    tokio::io::DuplexStream,
) {
    let (ours, theirs) = tokio::io::duplex(64 * 1024);
    let sent = Arc::new(Mutex::new(Vec::new()));
    let record = sent.clone();
    let pump = Pump::new(JsonRpc { version_field }, ours, move |line| {
        record.lock().unwrap().push(line.to_owned());
    });
    (pump, sent, theirs)
}

#[tokio::test]
async fn answers_reach_their_requests_in_any_order_and_the_rest_is_the_controllers() {
    let (pump, sent, theirs) = pump(false);
    let guest = BufReader::new(theirs);
    let mut lines = guest.lines();
    let a = tokio::spawn({
        let pump = pump.clone();
        async move { pump.request("thread/start", json!({"cwd": "/w"})).await }
    });
    let first = lines.next_line().await.unwrap().unwrap();
    let b = tokio::spawn({
        let pump = pump.clone();
        async move { pump.request("turn/start", json!({})).await }
    });
    let second = lines.next_line().await.unwrap().unwrap();
    let first: Value = serde_json::from_str(&first).unwrap();
    let second: Value = serde_json::from_str(&second).unwrap();
    assert!(first.get("jsonrpc").is_none(), "Codex's framing: {first}");
    assert_eq!(first["method"], "thread/start");
    // The guest answers the second first, and the first with an error.
    let answer_b = json!({"id": second["id"], "result": {"turn": {"id": "t1"}}}).to_string();
    assert!(matches!(pump.receive(&answer_b), Incoming::Response { .. }));
    let answer_a =
        json!({"id": first["id"], "error": {"code": -32600, "message": "Not initialized"}})
            .to_string();
    pump.receive(&answer_a);
    assert_eq!(b.await.unwrap(), Ok(json!({"turn": {"id": "t1"}})));
    assert!(matches!(
        a.await.unwrap(),
        Err(RpcError::Answered { code: -32600, .. })
    ));
    // The guest's own requests and notifications, and what is not JSON, are the controller's.
    assert!(matches!(
        pump.receive(r#"{"id": 0, "method": "item/commandExecution/requestApproval", "params": {}}"#),
        Incoming::Request { method, .. } if method == "item/commandExecution/requestApproval"
    ));
    assert!(matches!(
        pump.receive(r#"{"method": "turn/started", "params": {"turn": {}}, "emittedAtMs": 1}"#),
        Incoming::Notification { method, .. } if method == "turn/started"
    ));
    assert!(matches!(
        pump.receive("not json"),
        Incoming::Other(Value::String(_))
    ));
    assert!(
        matches!(
            pump.receive(r#"{"id": 99, "result": 1}"#),
            Incoming::Response { .. }
        ),
        "an answer nobody waits for is still an answer"
    );
    pump.respond(&json!(0), Ok(json!({"decision": "accept"})))
        .await
        .unwrap();
    let answer: Value = serde_json::from_str(&lines.next_line().await.unwrap().unwrap()).unwrap();
    assert_eq!(answer, json!({"id": 0, "result": {"decision": "accept"}}));
    assert_eq!(
        sent.lock().unwrap().len(),
        3,
        "every written line is recorded"
    );
}

#[tokio::test]
async fn a_closed_connection_answers_every_waiting_request() {
    let (pump, _, theirs) = pump(true);
    let waiting = tokio::spawn({
        let pump = pump.clone();
        async move { pump.request("initialize", json!({})).await }
    });
    let mut lines = BufReader::new(theirs).lines();
    let line: Value = serde_json::from_str(&lines.next_line().await.unwrap().unwrap()).unwrap();
    assert_eq!(line["jsonrpc"], "2.0");
    pump.close();
    assert_eq!(waiting.await.unwrap(), Err(RpcError::Closed));
}
