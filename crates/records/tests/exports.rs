//! Exports and renderings: JSONL carries everything, SFT examples are validated (broken ones are
//! rejected with a reason), the text timeline and the HTML page show the run with escaped text.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use serde_json::{Value, json};
use switchyard_records::export::{
    SftInvalid, SftMode, export_jsonl, export_sft, sft_example, validate_sft_example,
};
use switchyard_records::html::render_html;
use switchyard_records::timeline::{RunView, render_run_list, render_timeline};
use switchyard_records::{
    ExchangeStatus, Recorder, Redactor, SqliteStore, new_record_id, store_path,
};
use uuid::Uuid;

/// A store with one ended run (events, raw lines, 2 exchanges) and one unattributed exchange.
fn populated() -> (tempfile::TempDir, Uuid, Vec<Uuid>) {
    let dir = tempfile::tempdir().unwrap();
    let recorder = Recorder::open_dir(dir.path(), Redactor::new(["secret-upstream-key"])).unwrap();
    let run_id = new_record_id();
    recorder.record_run(ended(sample_run(run_id))).unwrap();
    sample_events(run_id)
        .into_iter()
        .for_each(|e| recorder.record_event(e).unwrap());
    sample_raw_lines(run_id)
        .into_iter()
        .for_each(|l| recorder.record_raw_line(l).unwrap());
    let mut ids = Vec::new();
    for n in 0..2 {
        let exchange = sample_exchange(new_record_id(), Some(run_id), n);
        ids.push(exchange.id);
        recorder.record_exchange(exchange).unwrap();
    }
    let mut unattributed = sample_exchange(new_record_id(), None, 9);
    unattributed.upstream_message =
        Some(json!({"role": "assistant", "content": "<script>alert(1)</script>"}));
    ids.push(unattributed.id);
    recorder.record_exchange(unattributed).unwrap();
    recorder.close().unwrap();
    (dir, run_id, ids)
}

#[test]
fn jsonl_export_has_every_record_once() {
    let (dir, run_id, ids) = populated();
    let store = SqliteStore::open_existing(store_path(dir.path())).unwrap();
    let mut out = Vec::new();
    let stats = export_jsonl(&store, &mut out).unwrap();
    let lines: Vec<Value> = String::from_utf8(out)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    // 1 run + 4 events + 3 raw lines + 3 exchanges
    assert_eq!(stats.written, 11);
    assert_eq!(lines.len(), 11);
    let kinds: Vec<&str> = lines
        .iter()
        .map(|l| l["record"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds,
        [
            "run", "event", "event", "event", "event", "raw_line", "raw_line", "raw_line",
            "exchange", "exchange", "exchange"
        ]
    );
    assert_eq!(lines[0]["data"]["id"], json!(run_id.to_string()));
    let exchange_ids: Vec<&str> = lines[8..]
        .iter()
        .map(|l| l["data"]["id"].as_str().unwrap())
        .collect();
    assert_eq!(
        exchange_ids,
        ids.iter().map(Uuid::to_string).collect::<Vec<_>>()
    );
    assert_eq!(
        lines[8]["data"]["attempts"][0]["raw_events"][2],
        json!("[DONE]")
    );
}

#[test]
fn sft_example_is_request_messages_plus_upstream_message_with_tools() {
    let exchange = sample_exchange(new_record_id(), None, 1);
    let example = sft_example(&exchange).unwrap();
    let messages = example["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 5);
    assert_eq!(
        messages[..4],
        upstream_request_turn2()["messages"].as_array().unwrap()[..]
    );
    assert_eq!(
        messages[4],
        json!({"role": "assistant", "content": "There are 1 files"})
    );
    assert_eq!(example["tools"], upstream_request_turn2()["tools"]);
}

#[test]
fn sft_final_tool_calls_get_string_arguments_and_need_no_result() {
    let mut exchange = sample_exchange(new_record_id(), None, 1);
    exchange.upstream_message = Some(json!({"role": "assistant", "content": null, "tool_calls": [
        {"index": 0, "id": "call_2", "type": "function", "function": {"name": "read_file", "arguments": {"path": "a.txt"}}}
    ]}));
    let example = sft_example(&exchange).unwrap();
    assert_eq!(
        example["messages"][4]["tool_calls"][0],
        json!(
            {"id": "call_2", "type": "function", "function": {"name": "read_file", "arguments": "{\"path\":\"a.txt\"}"}}
        )
    );
}

#[test]
fn sft_rejects_broken_examples_with_reasons() {
    let base = sft_example(&sample_exchange(new_record_id(), None, 1)).unwrap();
    let broken = |edit: &dyn Fn(&mut Value)| {
        let mut example = base.clone();
        edit(&mut example);
        validate_sft_example(&example).unwrap_err()
    };
    // The tool result is missing.
    assert_eq!(
        broken(&|e| {
            e["messages"].as_array_mut().unwrap().remove(3);
        }),
        SftInvalid::ToolCallWithoutResult("call_1".into())
    );
    // The tool result answers an id nobody called.
    assert_eq!(
        broken(&|e| e["messages"][3]["tool_call_id"] = json!("call_9")),
        SftInvalid::ToolResultWithoutCall {
            index: 3,
            id: "call_9".into()
        }
    );
    // The assistant's arguments are not JSON.
    assert_eq!(
        broken(
            &|e| e["messages"][2]["tool_calls"][0]["function"]["arguments"] =
                json!("{\"dir_path\":")
        ),
        SftInvalid::MalformedArguments {
            id: "call_1".into()
        }
    );
    assert_eq!(
        broken(&|e| e["messages"][1]["content"] = json!("the key was [REDACTED]")),
        SftInvalid::ContainsRedactedMarker
    );
    assert_eq!(
        broken(&|e| e["messages"][1]["content"] = json!("use Authorization: Bearer abcdefghijkl")),
        SftInvalid::ContainsSecret
    );
    assert_eq!(
        broken(&|e| {
            e["messages"].as_array_mut().unwrap().pop();
        }),
        SftInvalid::BadRole {
            index: 3,
            role: "tool".into()
        }
    );

    let mut failed = sample_exchange(new_record_id(), None, 1);
    failed.status = ExchangeStatus::Error;
    assert_eq!(
        sft_example(&failed).unwrap_err(),
        SftInvalid::NotCompleted("error")
    );
}

#[test]
fn sft_export_writes_valid_examples_and_reports_rejects() {
    let dir = tempfile::tempdir().unwrap();
    let recorder = Recorder::open_dir(dir.path(), Redactor::default()).unwrap();
    let good = sample_exchange(new_record_id(), None, 1);
    let mut inconsistent = sample_exchange(new_record_id(), None, 2);
    inconsistent.attempts[0].request["messages"][3]["tool_call_id"] = json!("call_other");
    let mut count_tokens = sample_exchange(new_record_id(), None, 3);
    count_tokens.attempts.clear();
    count_tokens.upstream_message = None;
    for exchange in [&good, &inconsistent, &count_tokens] {
        recorder.record_exchange(exchange.clone()).unwrap();
    }
    recorder.close().unwrap();

    let store = SqliteStore::open_existing(store_path(dir.path())).unwrap();
    let mut out = Vec::new();
    let mut rejects = Vec::new();
    let stats = export_sft(&store, &mut out, SftMode::Conversations, &mut |r| {
        rejects.push(r.clone())
    })
    .unwrap();
    assert_eq!((stats.written, stats.rejected), (1, 1));
    let text = String::from_utf8(out).unwrap();
    let written: Value = serde_json::from_str(text.trim_end()).unwrap();
    assert_eq!(written, sft_example(&good).unwrap());
    assert_eq!(rejects.len(), 1);
    assert_eq!(rejects[0].exchange_id, inconsistent.id);
    assert_eq!(
        rejects[0].reason,
        SftInvalid::ToolResultWithoutCall {
            index: 3,
            id: "call_other".into()
        }
    );
}

#[test]
fn text_list_and_timeline_show_the_run() {
    let (dir, run_id, ids) = populated();
    let store = SqliteStore::open_existing(store_path(dir.path())).unwrap();
    let totals = switchyard_records::timeline::run_token_totals(&store).unwrap();
    let list = render_run_list(
        &switchyard_records::RecordStore::runs(&store).unwrap(),
        &totals,
    );
    let row = list.lines().nth(1).unwrap();
    assert!(row.starts_with(&run_id.to_string()), "{row}");
    // Tokens are the run's exchanges summed (100 + 101 in, 20 + 20 out), not what the guest
    // reported in its own summary.
    for column in ["gemini-cli", "gpt-test", "succeeded", "201/40", "30.000s"] {
        assert!(row.contains(column), "{column} missing in {row}");
    }

    let view = RunView::load(&store, &run_id.simple().to_string()[..20]).unwrap();
    let text = render_timeline(&view);
    let lines: Vec<&str> = text.lines().collect();
    let position = |needle: &str| {
        lines
            .iter()
            .position(|l| l.contains(needle))
            .unwrap_or_else(|| panic!("{needle} missing:\n{text}"))
    };
    assert!(
        position("user: list the files <please>")
            < position("tool call list_directory [c1] {\"dir_path\":\".\"}")
    );
    assert!(
        position(&format!("exchange {}", ids[0]))
            < position("tool result [c1] success: a.txt⏎b.txt")
    );
    assert!(position("tool result") < position("assistant: There are 2 files: a.txt & b.txt"));
    assert!(text.contains("first byte 2.000s total 4.000s  tokens in 100 (cached 10) out 20 reasoning 3  calls list_directory"));
    assert!(
        text.contains("raw lines 3 kept (0 cut at the line cap), 0 dropped"),
        "{text}"
    );
    assert!(
        !text.contains(&ids[2].to_string()),
        "unattributed exchanges are not part of the run"
    );

    let mut view = view;
    let mut finished = view.events[0].clone();
    finished.seq = 9;
    finished.kind = "run_finished".into();
    finished.event = json!({"seq": 9, "at": "x", "type": "run_finished", "status": "failed", "error": {"kind": "turn_limit"}});
    let mut custom = finished.clone();
    custom.seq = 10;
    custom.kind = "something_new".into();
    custom.event = json!({"seq": 10, "at": "x", "type": "something_new", "detail": 1});
    view.events.extend([finished, custom]);
    let text = render_timeline(&view);
    assert!(
        text.contains(r#"#9    run finished: failed {"kind":"turn_limit"}"#),
        "{text}"
    );
    assert!(
        text.contains(r#"#10   something_new: {"detail":1}"#),
        "{text}"
    );
}

#[test]
fn html_timeline_is_self_contained_and_escaped() {
    let (dir, run_id, ids) = populated();
    let store = SqliteStore::open_existing(store_path(dir.path())).unwrap();
    let mut view = RunView::load(&store, &run_id.to_string()).unwrap();
    view.exchanges[1].upstream_message =
        Some(json!({"role": "assistant", "content": "<img src=x onerror=alert(1)>"}));
    let html = render_html(&view);
    assert!(html.starts_with("<!DOCTYPE html>"));
    assert!(html.contains("list the files &lt;please&gt;"));
    assert!(html.contains("There are 2 files: a.txt &amp; b.txt"));
    assert!(html.contains("&lt;img src=x onerror=alert(1)&gt;"));
    assert!(
        !html.contains("<img"),
        "recorded markup never becomes markup"
    );
    assert!(html.contains("<span class=\"kind\">Tool call</span> <code>list_directory</code>"));
    assert!(
        html.contains("&quot;dir_path&quot;: &quot;.&quot;"),
        "tool arguments shown"
    );
    assert!(html.contains(
        "<span class=\"kind\">Tool result</span> <code>c1</code> success <pre>a.txt\nb.txt</pre>"
    ));
    assert!(html.contains(&format!("<td>{}</td>", ids[0])));
    assert!(
        html.contains("<td>100 / 10 / 20 / 3</td>"),
        "per-exchange tokens"
    );
    assert!(
        html.contains("<td>2.000s</td><td>4.000s</td>"),
        "per-exchange latency"
    );
    for external in ["http://", "https://", "<script", "<link", "src="] {
        let outside_text = html.replace("&lt;img src=x", "");
        assert!(!outside_text.contains(external), "{external} in the page");
    }
}

/// The body of the view's first event of `kind`.
fn event_of_kind<'a>(view: &'a mut RunView, kind: &str) -> &'a mut Value {
    &mut view
        .events
        .iter_mut()
        .find(|e| e.kind == kind)
        .unwrap_or_else(|| panic!("no {kind} event"))
        .event
}

/// A tool result whose event carries no output (as Gemini CLI's `read_file` and
/// `list_directory` results do) is shown with what the guest sent the model: the
/// `functionResponse` answering the call, matched by the call's model call id and tool name.
#[test]
fn tool_results_show_what_the_model_was_sent() {
    let (dir, run_id, _) = populated();
    let store = SqliteStore::open_existing(store_path(dir.path())).unwrap();
    let mut view = RunView::load(&store, &run_id.to_string()).unwrap();
    event_of_kind(&mut view, "tool_result")["output"] = json!("");
    // The second request carries the call and its answer, next to a same-id answer of another
    // tool that must not be taken for it.
    view.exchanges[1].guest_request = json!({"contents": [
        {"role": "user", "parts": [{"text": "list the files"}]},
        {"role": "model", "parts": [{"functionCall": {"id": "call_1", "name": "list_directory", "args": {"dir_path": "."}}}]},
        {"role": "user", "parts": [
            {"functionResponse": {"id": "call_1", "name": "other_tool", "response": {"output": "not this"}}},
            {"functionResponse": {"id": "call_1", "name": "list_directory", "response": {"output": "a.txt <1 KB>\nb.txt"}}}
        ]}
    ]});
    let sent = view.tool_results_sent();
    assert_eq!(sent.len(), 1);
    assert_eq!(sent["c1"], &json!({"output": "a.txt <1 KB>\nb.txt"}));

    let text = render_timeline(&view);
    assert!(
        text.contains(
            r#"tool result [c1] success | sent to the model: {"output":"a.txt <1 KB>\nb.txt"}"#
        ),
        "{text}"
    );
    let html = render_html(&view);
    assert!(
        html.contains(
            "<span class=\"kind\">Tool result</span> <code>c1</code> success\
             <div class=\"sent\">sent to the model</div><pre>{\n  &quot;output&quot;: \
             &quot;a.txt &lt;1 KB&gt;\\nb.txt&quot;\n}</pre>"
        ),
        "{html}"
    );

    // No answer for the call's model call id: nothing is shown as sent.
    event_of_kind(&mut view, "tool_call")["model_call_id"] = json!("call_2");
    assert!(view.tool_results_sent().is_empty());
    assert!(!render_html(&view).contains("sent to the model"));
}

/// The Chromium to render with: `CHROMIUM` if set, else `chromium` when it is on `PATH`.
fn chromium() -> Option<std::path::PathBuf> {
    if let Some(path) = std::env::var_os("CHROMIUM") {
        return Some(path.into());
    }
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join("chromium"))
            .find(|candidate| candidate.is_file())
    })
}

/// `file` loaded in headless Chromium: the DOM after the page loaded, serialized.
fn rendered_dom(chromium: &std::path::Path, file: &std::path::Path) -> String {
    let profile = tempfile::tempdir().unwrap();
    let mut child = std::process::Command::new(chromium)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .arg("--dump-dom")
        .arg(format!("file://{}", file.display()))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("chromium starts");
    let mut stdout = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut dom = String::new();
        std::io::Read::read_to_string(&mut stdout, &mut dom).map(|_| dom)
    });
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            panic!("chromium did not render the page within 60 s");
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    assert!(status.success(), "chromium exited with {status}");
    reader.join().unwrap().expect("chromium's output is text")
}

/// The HTML timeline loaded in a real browser: Chromium parses it into exactly the entries, rows
/// and code elements the page was written with (broken nesting would make its parser move or
/// close them elsewhere), recorded markup stays text, and the page has its title. Runs where
/// Chromium is installed; CI installs it and sets `SWITCHYARD_REQUIRE_CHROMIUM=1`, so there it
/// cannot be skipped.
#[test]
fn html_timeline_renders_in_headless_chromium() {
    let Some(chromium) = chromium() else {
        assert!(
            std::env::var_os("SWITCHYARD_REQUIRE_CHROMIUM").is_none(),
            "SWITCHYARD_REQUIRE_CHROMIUM is set but no chromium was found"
        );
        eprintln!("skipped: no chromium on PATH (set CHROMIUM to its path)");
        return;
    };
    let (dir, run_id, _) = populated();
    let store = SqliteStore::open_existing(store_path(dir.path())).unwrap();
    let mut view = RunView::load(&store, &run_id.to_string()).unwrap();
    view.exchanges[1].upstream_message =
        Some(json!({"role": "assistant", "content": "</pre><img src=x onerror=alert(1)>"}));
    let html = render_html(&view);
    let page = dir.path().join("timeline.html");
    std::fs::write(&page, &html).unwrap();

    let dom = rendered_dom(&chromium, &page);
    let count = |text: &str, needle: &str| text.matches(needle).count();
    assert!(dom.contains("<title>"), "{dom}");
    for element in [
        "class=\"entry",
        "<tr>",
        "<code>",
        "<pre>",
        "<table ",
        "<h2>",
    ] {
        assert!(count(&html, element) > 0, "the page has {element}");
        assert_eq!(
            count(&dom, element),
            count(&html, element),
            "{element} as written and as rendered"
        );
    }
    assert!(dom.contains("&lt;/pre&gt;&lt;img src=x onerror=alert(1)&gt;"));
    assert!(
        !dom.contains("<img"),
        "recorded markup never becomes an element"
    );
    assert!(dom.contains("list the files &lt;please&gt;"));
    assert!(
        dom.contains("<td>100 / 10 / 20 / 3</td>"),
        "per-exchange tokens"
    );
}

#[test]
fn sft_assembles_the_upstream_message_from_raw_stream_events_when_none_was_stored() {
    use switchyard_records::export::assemble_chat_message;
    let stream: Vec<String> = [
        r#"{"choices":[{"index":0,"delta":{"role":"assistant","content":"Reading "}}]}"#,
        r#"{"choices":[{"index":0,"delta":{"content":"it."}}]}"#,
        r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_7","type":"function","function":{"name":"read_file","arguments":"{\"pa"}}]}}]}"#,
        r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"th\":\"a.txt\"}"}}]}}]}"#,
        r#"{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}"#,
        r#"{"choices":[],"usage":{"prompt_tokens":5}}"#,
        "[DONE]",
    ]
    .map(String::from)
    .to_vec();
    let expected = json!({"role": "assistant", "content": "Reading it.", "tool_calls": [
        {"id": "call_7", "type": "function", "function": {"name": "read_file", "arguments": "{\"path\":\"a.txt\"}"}}
    ]});
    assert_eq!(assemble_chat_message(&stream), Some(expected.clone()));

    let mut exchange = sample_exchange(new_record_id(), None, 1);
    exchange.upstream_message = None;
    exchange.attempts[0].raw_events = stream;
    assert_eq!(sft_example(&exchange).unwrap()["messages"][4], expected);

    // A non-streamed body is taken as is; unreadable events produce nothing.
    let body = vec![
        r#"{"choices":[{"index":0,"message":{"role":"assistant","content":"hi"}}]}"#.to_owned(),
    ];
    assert_eq!(
        assemble_chat_message(&body),
        Some(json!({"role": "assistant", "content": "hi"}))
    );
    exchange.attempts[0].raw_events = vec!["{not json".into()];
    assert_eq!(
        sft_example(&exchange).unwrap_err(),
        SftInvalid::NoUpstreamMessage
    );
}

/// One exchange of a run: `request` messages sent upstream, `answer` the assembled reply.
fn turn(run_id: Uuid, request: Value, answer: Value) -> switchyard_records::ExchangeRecord {
    let mut exchange = sample_exchange(new_record_id(), Some(run_id), 0);
    exchange.attempts[0].request = json!({"model": "m", "messages": request});
    exchange.upstream_message = Some(answer);
    exchange
}

#[test]
fn sft_exports_one_example_per_conversation_unless_asked_per_exchange() {
    let dir = tempfile::tempdir().unwrap();
    let recorder = Recorder::open_dir(dir.path(), Redactor::default()).unwrap();
    let run_id = new_record_id();
    let system = json!({"role": "system", "content": "be brief"});
    let user = json!({"role": "user", "content": "what is in the folder?"});
    let call = json!({"role": "assistant", "content": null, "tool_calls": [{"id": "c1",
        "type": "function", "function": {"name": "ls", "arguments": "{\"dir\":\".\"}"}}]});
    let result = json!({"role": "tool", "tool_call_id": "c1", "content": "a.txt"});
    let answer = json!({"role": "assistant", "content": "One file, a.txt."});
    let thanks = json!({"role": "user", "content": "thanks"});
    let bye = json!({"role": "assistant", "content": "You are welcome."});
    let turns = [
        turn(run_id, json!([system, user]), call.clone()),
        turn(run_id, json!([system, user, call, result]), answer.clone()),
        // An auxiliary request of the same run: a conversation of its own.
        turn(
            run_id,
            json!([{"role": "user", "content": "classify"}]),
            json!({"role": "assistant", "content": "simple"}),
        ),
        turn(
            run_id,
            json!([system, user, call, result, answer, thanks]),
            bye,
        ),
    ];
    for exchange in &turns {
        recorder.record_exchange(exchange.clone()).unwrap();
    }
    recorder.close().unwrap();
    let store = SqliteStore::open_existing(store_path(dir.path())).unwrap();
    let export = |mode| {
        let mut out = Vec::new();
        let stats = export_sft(&store, &mut out, mode, &mut |r| panic!("rejected: {r:?}")).unwrap();
        let examples: Vec<Value> = String::from_utf8(out)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        (stats, examples)
    };
    let (stats, examples) = export(SftMode::Conversations);
    assert_eq!((stats.written, stats.folded), (2, 2));
    assert_eq!(examples[0], sft_example(&turns[2]).unwrap());
    assert_eq!(
        examples[1],
        sft_example(&turns[3]).unwrap(),
        "the whole conversation, once"
    );
    let (stats, examples) = export(SftMode::PerExchange);
    assert_eq!((stats.written, stats.folded), (4, 0));
    // The first exchange alone ends on the assistant's tool-call turn.
    assert_eq!(
        examples[0]["messages"].as_array().unwrap().last().unwrap()["tool_calls"][0]["id"],
        "c1"
    );
}
