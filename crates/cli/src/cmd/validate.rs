//! `switchyard validate`: the inert validation fixture. The agent observes a generated colour
//! image and a nonce (host tool `observe`), records the nonce twice in one batch (`record`,
//! two identical calls) and finishes with the colour (`finish`). The checks read the run's
//! records: distinct claimed model call ids, the image in the actual upstream requests, call
//! order, the finish result, complete records. `DIR/validation.json` holds every check with its
//! evidence; any failure exits non-zero.
//!
//! With no `--upstream-url`, a scripted model on 127.0.0.1 plays the model (offline, for CI):
//! it reads the nonce from the tool result and the colour from the image it was sent.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use anyhow::{Context, Result};
use base64::Engine;
use serde_json::{Value, json};
use switchyard_binding::{FinishTool, HostTool, ToolFuture, ToolImage, ToolOutput, ToolRegistry};
use switchyard_records::{ExchangeFilter, RecordStore, SqliteStore};
use switchyard_testkit::chat_upstream::{ChatUpstream, RecordedRequest, Reply, Script};

use super::run::{Agent, HostTools, OutputMode, ProtocolArg, RunArgs};

/// Validation failed: at least one check did not pass (details in `validation.json`).
pub const EXIT_VALIDATION_FAILED: u8 = 12;

/// `switchyard validate` flags.
#[derive(Debug, clap::Args)]
pub struct ValidateArgs {
    /// Guest agent CLI.
    #[arg(long, value_enum)]
    pub agent: Agent,
    /// How Switchyard drives the guest (as `switchyard run --protocol`).
    #[arg(long, value_enum)]
    pub protocol: Option<ProtocolArg>,
    /// A real OpenAI-compatible upstream to check (default: a scripted model on 127.0.0.1).
    #[arg(long, requires = "upstream_model")]
    pub upstream_url: Option<String>,
    /// The model at `--upstream-url`.
    #[arg(long)]
    pub upstream_model: Option<String>,
    /// Name of the environment variable holding the upstream API key.
    #[arg(long)]
    pub upstream_key_env: Option<String>,
    /// Where `validation.json`, the records and the workspace go.
    #[arg(long)]
    pub output: PathBuf,
    /// A sealed Gemini CLI install (default: the one `switchyard install gemini-cli` made).
    #[arg(long)]
    pub gemini_binary: Option<PathBuf>,
    /// A sealed OpenCode install (default: the one `switchyard install opencode` made).
    #[arg(long)]
    pub opencode_binary: Option<PathBuf>,
    /// A `switchyard run` config file for the provider's settings (`[translation]` with its
    /// `profile`, `[timeouts]`, `[retries]`); the fixture's own settings win.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Overall timeout in seconds.
    #[arg(long, default_value_t = 300)]
    pub timeout: u64,
    /// Make the scripted model misbehave on purpose (to see the report fail).
    #[arg(long, value_enum, hide = true)]
    pub scripted_fault: Option<Fault>,
}

/// Ways the scripted model can break the fixture.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Fault {
    /// Records the nonce only once.
    RecordOnce,
    /// Finishes with a colour other than the image's.
    WrongColour,
}

const COLOURS: [(&str, [u8; 3]); 3] = [
    ("red", [220, 20, 20]),
    ("green", [20, 200, 40]),
    ("blue", [30, 40, 220]),
];

const PROMPT: &str = "This is a validation task. 1. Call the observe tool. 2. Call the record \
    tool twice in one turn, both times with exactly the nonce observe returned. 3. Call the \
    finish tool with the colour of the image observe returned (red, green or blue). Then stop.";

/// `observe`: the image and the nonce.
struct Observe {
    png_base64: String,
    nonce: String,
    schema: Value,
}

impl HostTool for Observe {
    fn name(&self) -> &str {
        "observe"
    }
    fn description(&self) -> &str {
        "Observe the scene: returns an image and the observation nonce."
    }
    fn input_schema(&self) -> &Value {
        &self.schema
    }
    fn call(&self, _arguments: Value) -> ToolFuture<'_> {
        Box::pin(std::future::ready(Ok(ToolOutput {
            text: format!("Observation nonce: {}", self.nonce),
            images: vec![ToolImage {
                mime_type: "image/png".into(),
                data: self.png_base64.clone(),
            }],
        })))
    }
}

/// `record`: keeps every nonce it is given.
struct Record {
    schema: Value,
    recorded: Arc<Mutex<Vec<String>>>,
}

impl HostTool for Record {
    fn name(&self) -> &str {
        "record"
    }
    fn description(&self) -> &str {
        "Record an observation nonce."
    }
    fn input_schema(&self) -> &Value {
        &self.schema
    }
    fn call(&self, arguments: Value) -> ToolFuture<'_> {
        let nonce = arguments["nonce"].as_str().unwrap_or_default().to_owned();
        self.recorded
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(nonce.clone());
        Box::pin(std::future::ready(Ok(ToolOutput {
            text: format!("Recorded {nonce}."),
            images: Vec::new(),
        })))
    }
}

/// The scripted model: observe, record twice (once with [`Fault::RecordOnce`]), finish with the
/// colour it reads from the image in its own request, then a closing sentence.
fn scripted_model(fault: Option<Fault>, prefix: &str) -> Script {
    let observe = format!("{prefix}observe");
    let record = format!("{prefix}record");
    let finish = format!("{prefix}finish");
    let reply = move |request: &RecordedRequest| -> Reply {
        let results = request.tool_messages();
        let text_of = |m: &Value| m["content"].to_string();
        match results.len() {
            0 => Reply::tool_calls_stream(&[("call_observe", &observe, "{}")], 8),
            1 => {
                let nonce = text_of(&results[0])
                    .split("Observation nonce: ")
                    .nth(1)
                    .map(|rest| {
                        rest.chars()
                            .take_while(|c| c.is_ascii_alphanumeric() || *c == '-')
                            .collect::<String>()
                    })
                    .unwrap_or_default();
                let args = json!({ "nonce": nonce }).to_string();
                let mut calls = vec![("call_record_1", record.as_str(), args.as_str())];
                if fault != Some(Fault::RecordOnce) {
                    calls.push(("call_record_2", record.as_str(), args.as_str()));
                }
                Reply::tool_calls_stream(&calls, 6)
            }
            n if results
                .iter()
                .all(|m| !text_of(m).contains("Result recorded"))
                && n <= 3 =>
            {
                let seen = image_colours(&request.json());
                let mut colour = seen.first().cloned().unwrap_or_else(|| "none".into());
                if fault == Some(Fault::WrongColour) {
                    colour = COLOURS
                        .iter()
                        .map(|(name, _)| (*name).to_owned())
                        .find(|name| *name != colour)
                        .unwrap_or_default();
                }
                let args = json!({ "colour": colour }).to_string();
                Reply::tool_calls_stream(&[("call_finish", &finish, &args)], 6)
            }
            _ => Reply::text_stream(["Observed, recorded twice, finished."]),
        }
    };
    Script::always(Reply::Dynamic(Arc::new(reply)))
}

/// The image data URLs of a Chat Completions request.
fn image_urls(chat: &Value) -> Vec<String> {
    chat["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|m| m["content"].as_array().cloned().unwrap_or_default())
        .filter_map(|p| p["image_url"]["url"].as_str().map(str::to_owned))
        .collect()
}

/// The named colour of each decodable image in a Chat Completions request.
fn image_colours(chat: &Value) -> Vec<String> {
    image_urls(chat)
        .iter()
        .filter_map(|url| decode_colour(url))
        .collect()
}

/// Longest image data URL decoded: the fixture's image is a few hundred bytes; anything larger
/// in the records is not it, and is not decoded.
const MAX_DECODED_URL: usize = 1024 * 1024;

fn decode_colour(url: &str) -> Option<String> {
    if url.len() > MAX_DECODED_URL {
        return None;
    }
    let (mime, data) = url.strip_prefix("data:")?.split_once(";base64,")?;
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(data)
        .ok()?;
    let pixels = match mime {
        "image/webp" => switchyard_translate::image::decode_webp(&bytes).ok()?,
        "image/png" => switchyard_translate::image::decode_png_8bit(
            &bytes,
            switchyard_translate::image::DEFAULT_MAX_IMAGE_PIXELS,
        )
        .ok()?
        .ok()?,
        _ => return None,
    };
    let rgb = pixels.data.get(..3)?;
    COLOURS
        .iter()
        .find(|(_, c)| c.as_slice() == rgb)
        .map(|(name, _)| (*name).to_owned())
}

/// One check, what it saw, and (when it failed) why in a sentence.
fn check(name: &str, passed: bool, evidence: Value, why: impl FnOnce() -> String) -> Value {
    let mut check = json!({ "check": name, "passed": passed, "evidence": evidence });
    if !passed {
        check["why"] = Value::from(why());
    }
    check
}

/// Entry point.
pub async fn run(args: ValidateArgs) -> Result<u8> {
    std::fs::create_dir_all(&args.output)
        .with_context(|| format!("creating {}", args.output.display()))?;
    let output = std::path::absolute(&args.output)?;
    let records = output.join("records");
    let workspace = output.join("workspace");
    std::fs::create_dir_all(&workspace)?;

    let pick = uuid::Uuid::new_v4();
    let (colour, rgb) = COLOURS[usize::from(pick.as_bytes()[0]) % COLOURS.len()];
    let nonce = format!("nonce-{}", &pick.simple().to_string()[..12]);
    let pixels: Vec<u8> = (0..48 * 48).flat_map(|_| rgb).collect();
    let png = switchyard_testkit::fixtures::rgb_png(48, 48, &pixels)?;
    let recorded = Arc::new(Mutex::new(Vec::new()));
    let mut registry = ToolRegistry::new();
    registry.add(Arc::new(Observe {
        png_base64: base64::engine::general_purpose::STANDARD.encode(&png),
        nonce: nonce.clone(),
        schema: json!({"type": "object", "properties": {}}),
    }))?;
    registry.add(Arc::new(Record {
        schema: json!({"type": "object", "properties": {"nonce": {"type": "string"}},
                       "required": ["nonce"], "additionalProperties": false}),
        recorded: recorded.clone(),
    }))?;
    let (finish, slot) = FinishTool::new(json!({
        "type": "object",
        "properties": {"colour": {"type": "string", "enum": ["red", "green", "blue"]}},
        "required": ["colour"],
        "additionalProperties": false
    }));
    registry.add(Arc::new(finish))?;

    let (scripted, upstream_url, upstream_model) = match &args.upstream_url {
        Some(url) => (
            None,
            url.clone(),
            args.upstream_model.clone().unwrap_or_default(),
        ),
        None => {
            let prefix = super::agents::spec(args.agent).host_tool_prefix;
            let scripted = ChatUpstream::start(scripted_model(args.scripted_fault, prefix)).await?;
            let url = format!("{}/v1", scripted.base_url());
            (Some(scripted), url, "scripted-validation-model".to_owned())
        }
    };
    let run_args = RunArgs {
        config: args.config.clone(),
        agent: Some(args.agent),
        protocol: args.protocol,
        workdir: Some(workspace.clone()),
        prompt: vec![PROMPT.into()],
        upstream_url: Some(upstream_url.clone()),
        upstream_model: Some(upstream_model.clone()),
        upstream_key_env: args.upstream_key_env.clone(),
        records: Some(records.clone()),
        output: Some(OutputMode::Text),
        timeout: Some(args.timeout),
        gemini_binary: args.gemini_binary.clone(),
        opencode_binary: args.opencode_binary.clone(),
        ..Default::default()
    };
    let (mut resolved, entry) = match super::run::checked(run_args) {
        Ok(checked) => checked,
        Err(code) => return Ok(code),
    };
    resolved.host_tools = Some(HostTools {
        registry,
        finish: Some(slot),
    });
    let executed = super::run::execute(resolved, entry).await?;
    if let Some(s) = scripted {
        s.stop().await;
    }
    let recorded = recorded
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .clone();
    let checks = checks(
        &records,
        executed.run_id,
        colour,
        &nonce,
        &recorded,
        &executed.outcome,
    )?;
    let passed = checks.iter().all(|c| c["passed"] == true);
    let report = json!({
        "passed": passed,
        "agent": args.agent.name(),
        "agent_version": args.agent.pin().1,
        "upstream": if args.upstream_url.is_some() { "given" } else { "scripted" },
        "upstream_model": upstream_model,
        "run_id": executed.run_id.to_string(),
        "fixture": { "colour": colour, "nonce": nonce },
        "outcome": executed.outcome,
        "checks": checks,
    });
    let path = output.join("validation.json");
    std::fs::write(&path, serde_json::to_vec_pretty(&report)?)
        .with_context(|| format!("writing {}", path.display()))?;
    for c in &checks {
        let name = c["check"].as_str().unwrap_or_default();
        match c["why"].as_str() {
            None => eprintln!("[validate] pass {name}"),
            Some(why) => eprintln!("[validate] FAIL {name}: {why}"),
        }
    }
    eprintln!("[validate] report: {}", path.display());
    Ok(if passed { 0 } else { EXIT_VALIDATION_FAILED })
}

/// The checks, from the run's records.
fn checks(
    records: &Path,
    run_id: uuid::Uuid,
    colour: &str,
    nonce: &str,
    recorded: &[String],
    outcome: &switchyard_events::RunOutcome,
) -> Result<Vec<Value>> {
    let store = SqliteStore::open_existing(records.join("switchyard.sqlite3"))?;
    let events: Vec<Value> = store.events(run_id)?.into_iter().map(|e| e.event).collect();
    let exchanges = store.exchanges(ExchangeFilter::Run(run_id))?;
    let of = |kind: &str, tool: &str| -> Vec<&Value> {
        events
            .iter()
            .filter(|e| e["type"] == kind && e["tool"] == tool)
            .collect()
    };
    let admitted_records: Vec<&Value> = of("host_call", "record")
        .into_iter()
        .filter(|e| e["decision"] == "admitted")
        .collect();
    // The delivered ids: distinct even when the upstream gives two calls one id.
    let record_ids: Vec<&str> = admitted_records
        .iter()
        .filter_map(|e| e["call_id"].as_str())
        .collect();
    let distinct: std::collections::BTreeSet<&str> = record_ids.iter().copied().collect();
    let mut out = vec![check(
        "distinct_claimed_ids",
        record_ids.len() == 2
            && distinct.len() == 2
            && admitted_records
                .iter()
                .all(|e| e["arguments"]["nonce"] == nonce)
            && recorded == [nonce, nonce],
        json!({ "claimed_record_ids": record_ids, "recorded_nonces": recorded, "nonce": nonce }),
        || {
            format!(
                "{} record call(s) were claimed ({} distinct ids) and the tool recorded {:?}; \
                 two identical calls with the nonce {nonce} were expected",
                record_ids.len(),
                distinct.len(),
                recorded
            )
        },
    )];
    let observed = events
        .iter()
        .any(|e| e["type"] == "host_result" && e["tool"] == "observe");

    let mut images = Vec::new();
    for exchange in &exchanges {
        for attempt in &exchange.attempts {
            for url in image_urls(&attempt.request) {
                let mime = url
                    .strip_prefix("data:")
                    .and_then(|u| u.split(';').next())
                    .unwrap_or_default()
                    .to_owned();
                images.push(json!({
                    "exchange": exchange.id.to_string(),
                    "mime_type": mime,
                    "colour": decode_colour(&url),
                    "data_url_bytes": url.len(),
                }));
            }
        }
    }
    out.push(check(
        "image_in_upstream_requests",
        images
            .iter()
            .any(|i| i["mime_type"] == "image/webp" && i["colour"] == colour),
        json!({ "images": images, "expected_colour": colour, "expected_mime_type": "image/webp" }),
        || {
            if observed {
                format!(
                    "{} image(s) reached the upstream, none a {colour} WebP: {images:?}",
                    images.len()
                )
            } else {
                "no image reached the upstream: the model never called observe".to_owned()
            }
        },
    ));

    let order: Vec<(String, String)> = events
        .iter()
        .filter(|e| e["type"] == "host_result")
        .map(|e| {
            (
                e["tool"].as_str().unwrap_or_default().to_owned(),
                e["call_id"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect();
    let tools: Vec<&str> = order.iter().map(|(t, _)| t.as_str()).collect();
    let finish_at = tools.iter().position(|t| *t == "finish");
    out.push(check(
        "call_order",
        tools.first() == Some(&"observe")
            && tools.iter().filter(|t| **t == "record").count() == 2
            && finish_at
                .is_some_and(|f| tools[..f].iter().filter(|t| **t == "record").count() == 2)
            && admitted_records
                .iter()
                .map(|e| e["position"].as_u64())
                .collect::<std::collections::BTreeSet<_>>()
                .len()
                == 2,
        json!({ "host_results_in_order": order }),
        || {
            format!(
                "host tools returned in the order {tools:?}; expected observe, record, record \
                 (one batch), then finish"
            )
        },
    ));

    out.push(check(
        "finish_result",
        outcome.result == Some(json!({ "colour": colour }))
            && outcome.status == switchyard_events::OutcomeStatus::Succeeded,
        json!({ "result": outcome.result, "expected": { "colour": colour }, "status": outcome.status, "error": outcome.error }),
        || match (&outcome.result, &outcome.error) {
            (Some(result), _) => {
                format!("the finish result was {result}, expected {{\"colour\": \"{colour}\"}}")
            }
            (None, Some(error)) => format!("no valid finish: {}", error.message),
            (None, None) => "no valid finish".to_owned(),
        },
    ));

    let statuses: Vec<Value> = exchanges
        .iter()
        .map(|e| {
            json!({ "exchange": e.id.to_string(), "status": e.status, "attempts": e.attempts.len(),
                    "error": e.error.as_ref().map(|x| format!("{}: {}", x.kind, x.message)) })
        })
        .collect();
    let run = store.run(run_id)?;
    let every_admitted_has_a_result = events
        .iter()
        .filter(|e| e["type"] == "host_call" && e["decision"] == "admitted")
        .all(|call| {
            order
                .iter()
                .any(|(_, id)| Some(id.as_str()) == call["call_id"].as_str())
        });
    let ended = run
        .as_ref()
        .is_some_and(|r| r.state == switchyard_records::model::RunState::Ended);
    out.push(check(
        "complete_records",
        ended
            && exchanges.len() >= 4
            && exchanges
                .iter()
                .all(|e| e.status == switchyard_records::model::ExchangeStatus::Ok)
            && events.last().is_some_and(|e| e["type"] == "run_finished")
            && every_admitted_has_a_result,
        json!({ "run_ended": ended, "exchanges": statuses, "events": events.len(),
                "every_admitted_call_has_a_result": every_admitted_has_a_result }),
        || {
            let failed: Vec<String> = exchanges
                .iter()
                .filter(|e| e.status != switchyard_records::model::ExchangeStatus::Ok)
                .map(|e| match &e.error {
                    Some(x) => format!("{} ({}: {})", e.id, x.kind, x.message),
                    None => format!("{} ({:?})", e.id, e.status),
                })
                .collect();
            format!(
                "{} exchange(s), at least 4 expected; not ok: {}; run ended: {ended}; every \
                 admitted call has a result: {every_admitted_has_a_result}",
                exchanges.len(),
                if failed.is_empty() {
                    "none".to_owned()
                } else {
                    failed.join("; ")
                }
            )
        },
    ));
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_scripted_model_reads_the_colour_back_from_a_png_or_webp() {
        for (name, rgb) in COLOURS {
            let pixels: Vec<u8> = (0..16).flat_map(|_| rgb).collect();
            let png = switchyard_testkit::fixtures::rgb_png(4, 4, &pixels).unwrap();
            let b64 = |b: &[u8]| base64::engine::general_purpose::STANDARD.encode(b);
            let png_url = format!("data:image/png;base64,{}", b64(&png));
            assert_eq!(decode_colour(&png_url).as_deref(), Some(name));
            let switchyard_translate::image::PngConversion::Reencoded { webp } =
                switchyard_translate::image::png_to_lossless_webp(&png, u64::MAX)
            else {
                panic!("converts")
            };
            let webp_url = format!("data:image/webp;base64,{}", b64(&webp));
            assert_eq!(decode_colour(&webp_url).as_deref(), Some(name));
        }
        assert_eq!(decode_colour("data:image/gif;base64,AAAA"), None);
    }
}
