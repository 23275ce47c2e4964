//! A self-contained HTML timeline of one run: messages, tool calls with arguments and results,
//! and per-exchange latency and tokens. Inline CSS only, no scripts, no external resources;
//! every piece of recorded text is HTML-escaped.

use std::fmt::Write as _;

use serde_json::Value;

use crate::model::{EventRecord, ExchangeRecord};
use crate::timeline::{
    RunView, TimelineEntry, ended_label, event_payload, first_byte_latency, outcome_label,
    seconds_between, sent_result, summary_line, total_latency, usage_text,
};

const STYLE: &str = "
body{font:14px/1.45 system-ui,sans-serif;margin:2em auto;max-width:70em;color:#1d1d1f;background:#fafafa}
h1{font-size:1.4em}h2{font-size:1.15em;margin-top:2em}
table{border-collapse:collapse}td,th{border:1px solid #ddd;padding:.25em .6em;text-align:left;vertical-align:top}
.entry{border-left:4px solid #bbb;background:#fff;margin:.6em 0;padding:.4em .8em}
.at{color:#777;font-size:.85em;margin-right:.6em;overflow-wrap:anywhere}
.user{border-color:#2b6cb0}.assistant{border-color:#2f855a}.tool-call{border-color:#b7791f}
.tool-result{border-color:#805ad5}.exchange{border-color:#718096;background:#f4f6f8}.problem{border-color:#c53030}
pre{white-space:pre-wrap;word-break:break-word;background:#f0f0f0;padding:.5em;margin:.3em 0}
.kind{font-weight:600}.sent{color:#555;font-size:.85em;margin-top:.3em}
";

/// HTML-escapes `text` for element content and attribute values.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            _ => out.push(c),
        }
    }
    out
}

fn pretty(value: &Value) -> String {
    serde_json::to_string_pretty(value).unwrap_or_else(|_| value.to_string())
}

/// Renders the whole run as one HTML document.
pub fn render_html(view: &RunView) -> String {
    let run = &view.run;
    let mut out = String::new();
    let _ = write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width\">\
         <title>Run {id}</title><style>{STYLE}</style></head><body>\n<h1>Run {id}</h1>\n<table class=\"run\">",
        id = escape(&run.id.to_string())
    );
    let ended = ended_label(run);
    let rows = [
        ("Agent", format!("{} {}", run.agent, run.agent_version)),
        (
            "Model",
            run.upstream_model.clone().unwrap_or_else(|| "-".into()),
        ),
        ("Command", run.argv.join(" ")),
        ("Workdir", run.workdir.clone()),
        ("Started", run.started_at.to_rfc3339()),
        ("Ended", ended),
        ("Outcome", outcome_label(run)),
        ("Summary", summary_line(&run.summary)),
        ("Settings digest", run.settings_digest.clone()),
    ];
    for (name, value) in rows {
        let _ = write!(
            out,
            "<tr><th>{}</th><td>{}</td></tr>",
            escape(name),
            escape(&value)
        );
    }
    out.push_str("</table>\n<h2>Timeline</h2>\n");
    let sent = view.tool_results_sent();
    for entry in view.entries() {
        let at = escape(&seconds_between(run.started_at, entry.at()));
        match entry {
            TimelineEntry::Event(event) => {
                render_event(&mut out, &at, event, sent_result(&sent, event));
            }
            TimelineEntry::Exchange(exchange) => render_exchange(&mut out, &at, exchange),
        }
    }
    out.push_str("<h2>Exchanges</h2>\n<table class=\"exchanges\"><tr><th>Exchange</th><th>API</th>\
                   <th>Model</th><th>Status</th><th>First byte</th><th>Total</th><th>Tokens in / cached / out / reasoning</th>\
                   <th>Retries</th></tr>");
    for exchange in &view.exchanges {
        let usage = exchange.usage;
        let _ = write!(
            out,
            "<tr><td>{}</td><td>{}</td><td>{} → {}</td><td>{}</td><td>{}</td><td>{}</td><td>{} / {} / {} / {}{}</td><td>{}</td></tr>",
            escape(&exchange.id.to_string()),
            escape(&exchange.ingress_api),
            escape(&exchange.requested_model),
            escape(&exchange.upstream_model),
            escape(exchange.status.as_str()),
            escape(&first_byte_latency(exchange)),
            escape(&total_latency(exchange)),
            usage.input,
            usage.cached,
            usage.output,
            usage.reasoning,
            if usage.estimated { " (estimated)" } else { "" },
            exchange.retries
        );
    }
    out.push_str("</table>\n</body></html>\n");
    out
}

/// One event; `sent` is what the model was sent as a tool result's result, when known.
fn render_event(out: &mut String, at: &str, event: &EventRecord, sent: Option<&Value>) {
    let body = &event.event;
    let text = |key: &str| escape(body.get(key).and_then(Value::as_str).unwrap_or(""));
    let (class, inner) = match event.kind.as_str() {
        "user_message" => (
            "user",
            format!(
                "<span class=\"kind\">User</span><pre>{}</pre>",
                text("text")
            ),
        ),
        "assistant_message" => (
            "assistant",
            format!(
                "<span class=\"kind\">Assistant</span><pre>{}</pre>",
                text("text")
            ),
        ),
        "tool_call" => (
            "tool-call",
            format!(
                "<span class=\"kind\">Tool call</span> <code>{}</code> <span class=\"at\">{}</span><pre>{}</pre>",
                text("tool_name"),
                text("call_id"),
                escape(&body.get("arguments").map(pretty).unwrap_or_default())
            ),
        ),
        "tool_result" => {
            let detail = body
                .get("output")
                .and_then(Value::as_str)
                .map(str::to_owned)
                .or_else(|| body.get("error").map(pretty))
                .unwrap_or_default();
            let sent_block = sent
                .map(|result| {
                    format!(
                        "<div class=\"sent\">sent to the model</div><pre>{}</pre>",
                        escape(&pretty(result))
                    )
                })
                .unwrap_or_default();
            (
                "tool-result",
                format!(
                    "<span class=\"kind\">Tool result</span> <code>{}</code> {}{}{sent_block}",
                    text("call_id"),
                    text("status"),
                    if detail.is_empty() {
                        String::new()
                    } else {
                        format!(" <pre>{}</pre>", escape(&detail))
                    }
                ),
            )
        }
        "warning" | "error" => (
            "problem",
            format!(
                "<span class=\"kind\">{}</span> {}",
                escape(&event.kind),
                text("message")
            ),
        ),
        "host_call" | "host_result" => (
            "host",
            format!(
                "<details><summary><span class=\"kind\">Host</span> {}</summary><pre>{}</pre></details>",
                escape(&crate::timeline::host_line(event)),
                escape(&pretty(&event_payload(body)))
            ),
        ),
        "permission" => (
            "host",
            format!(
                "<details><summary><span class=\"kind\">Permission</span> {}</summary><pre>{}</pre></details>",
                escape(&crate::timeline::permission_line(event)),
                escape(&pretty(&event_payload(body)))
            ),
        ),
        _ => (
            "other",
            format!(
                "<details><summary><span class=\"kind\">{}</span></summary><pre>{}</pre></details>",
                escape(&event.kind),
                escape(&pretty(&event_payload(body)))
            ),
        ),
    };
    let _ = writeln!(
        out,
        "<div class=\"entry {class}\"><span class=\"at\">+{at} #{}</span>{inner}</div>",
        event.seq
    );
}

fn render_exchange(out: &mut String, at: &str, exchange: &ExchangeRecord) {
    let _ = write!(
        out,
        "<div class=\"entry exchange\"><span class=\"at\">+{at}</span><span class=\"kind\">Model exchange</span> \
         {} {} → {} <b>{}</b> · first byte {} · total {} · {}",
        escape(&exchange.ingress_api),
        escape(&exchange.requested_model),
        escape(&exchange.upstream_model),
        escape(exchange.status.as_str()),
        escape(&first_byte_latency(exchange)),
        escape(&total_latency(exchange)),
        usage_text(&exchange.usage)
    );
    if let Some(billed) = crate::timeline::billed_text(exchange) {
        let _ = write!(out, " · {billed}");
    }
    if exchange.retries > 0 {
        let _ = write!(out, " · retries {}", exchange.retries);
    }
    if let Some(context) = crate::timeline::context_text(exchange) {
        let _ = write!(out, "<div class=\"at\">{}</div>", escape(&context));
    }
    if let Some(error) = &exchange.error {
        let _ = write!(
            out,
            "<pre>{}: {}</pre>",
            escape(&error.kind),
            escape(&error.message)
        );
    }
    for call in &exchange.function_calls {
        let _ = write!(
            out,
            "<div>call <code>{}</code> <span class=\"at\">{}</span><pre>{}</pre></div>",
            escape(&call.name),
            escape(&call.id),
            escape(&pretty(&call.arguments))
        );
    }
    if let Some(message) = &exchange.upstream_message {
        let _ = write!(
            out,
            "<details><summary>upstream message</summary><pre>{}</pre></details>",
            escape(&pretty(message))
        );
    }
    for note in &exchange.notes {
        let _ = write!(out, "<div class=\"at\">note: {}</div>", escape(note));
    }
    out.push_str("</div>\n");
}
