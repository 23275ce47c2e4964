//! `switchyard validate`: the inert validation fixture. The agent observes a generated colour
//! image and a nonce (host tool `observe`), records the nonce twice in one batch (`record`,
//! two identical calls) and finishes with the colour (`finish`). The checks read the run's
//! records: distinct claimed model call ids, the image in the actual upstream requests, call
//! order, the finish result, complete records. `DIR/validation.json` holds every check with its
//! evidence; any failure exits non-zero.
//!
//! The model is the one `--upstream-url` names; `switchyard-dev validate` runs the same check
//! offline against a scripted model.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use anyhow::{Context, Result};
use base64::Engine;
use serde_json::{Value, json};
use switchyard_binding::{FinishTool, HostTool, ToolFuture, ToolImage, ToolOutput, ToolRegistry};
use switchyard_records::{ExchangeFilter, StoreSpec};

use switchyard_runner::{Agent, HostTools, OutputMode, ProtocolArg, RunSettings};

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
    /// The OpenAI-compatible upstream to check (required; `switchyard-dev validate` without it
    /// runs a scripted model on 127.0.0.1).
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
    /// Where the run's records go instead of OUTPUT/records: a directory, or a PostgreSQL URL
    /// (`postgres://user@host/db`).
    #[arg(long, value_name = "DIR|URL")]
    pub records: Option<PathBuf>,
    /// A sealed Gemini CLI install (default: the one `switchyard install gemini-cli` made).
    #[arg(long)]
    pub gemini_binary: Option<PathBuf>,
    /// A sealed OpenCode install (default: the one `switchyard install opencode` made).
    #[arg(long)]
    pub opencode_binary: Option<PathBuf>,
    /// A sealed Claude Code install (default: the one `switchyard install claude-code` made).
    #[arg(long)]
    pub claude_binary: Option<PathBuf>,
    /// A sealed Codex install (default: the one `switchyard install codex` made).
    #[arg(long)]
    pub codex_binary: Option<PathBuf>,
    /// A `switchyard run` config file for the provider's settings (`[translation]` with its
    /// `profile`, `[timeouts]`, `[retries]`); the fixture's own settings win.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Overall timeout in seconds.
    #[arg(long, default_value_t = 300)]
    pub timeout: u64,
}

/// The fixture's colours, by name.
pub const COLOURS: [(&str, [u8; 3]); 3] = [
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
pub fn image_colours(chat: &Value) -> Vec<String> {
    image_urls(chat)
        .iter()
        .filter_map(|url| decode_colour(url))
        .collect()
}

/// Longest image data URL decoded: the fixture's image is a few hundred bytes; anything larger
/// in the records is not it, and is not decoded.
const MAX_DECODED_URL: usize = 1024 * 1024;

/// The named colour of an image data URL (PNG or WebP), when it is one of [`COLOURS`].
pub fn decode_colour(url: &str) -> Option<String> {
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

/// The model the fixture runs against.
pub struct Model {
    /// Its OpenAI-compatible base URL.
    pub url: String,
    pub name: String,
    /// A scripted model (`switchyard-dev validate`), not the provider's.
    pub scripted: bool,
}

/// Entry point: the fixture against `--upstream-url`.
pub async fn run(args: ValidateArgs) -> Result<u8> {
    let (Some(url), Some(name)) = (args.upstream_url.clone(), args.upstream_model.clone()) else {
        eprintln!(
            "switchyard: invalid configuration: validate needs --upstream-url and \
             --upstream-model (`switchyard-dev validate` checks offline, against a scripted model)"
        );
        return Ok(super::EXIT_CONFIG);
    };
    validate(
        &args,
        Model {
            url,
            name,
            scripted: false,
        },
    )
    .await
}

/// Runs the fixture with `model` and writes the report; 0 when every check passed.
pub async fn validate(args: &ValidateArgs, model: Model) -> Result<u8> {
    std::fs::create_dir_all(&args.output)
        .with_context(|| format!("creating {}", args.output.display()))?;
    let output = std::path::absolute(&args.output)?;
    let records = args
        .records
        .clone()
        .unwrap_or_else(|| output.join("records"));
    let workspace = output.join("workspace");
    std::fs::create_dir_all(&workspace)?;

    let pick = uuid::Uuid::new_v4();
    let (colour, rgb) = COLOURS[usize::from(pick.as_bytes()[0]) % COLOURS.len()];
    let nonce = format!("nonce-{}", &pick.simple().to_string()[..12]);
    let pixels: Vec<u8> = (0..48 * 48).flat_map(|_| rgb).collect();
    let png = rgb_png(48, 48, &pixels)?;
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

    let settings = RunSettings {
        config: args.config.clone(),
        agent: Some(args.agent),
        protocol: args.protocol,
        workdir: Some(workspace.clone()),
        prompt: vec![PROMPT.into()],
        upstream_url: Some(model.url.clone()),
        upstream_model: Some(model.name.clone()),
        upstream_key_env: args.upstream_key_env.clone(),
        records: Some(records.clone()),
        output: Some(OutputMode::Text),
        timeout: Some(args.timeout),
        gemini_binary: args.gemini_binary.clone(),
        opencode_binary: args.opencode_binary.clone(),
        claude_binary: args.claude_binary.clone(),
        codex_binary: args.codex_binary.clone(),
        ..Default::default()
    };
    let (mut resolved, entry) = match super::run::checked(settings) {
        Ok(checked) => checked,
        Err(code) => return Ok(code),
    };
    resolved.host_tools = Some(HostTools {
        registry,
        finish: Some(slot),
    });
    let mut printer = super::view::Printer::new(OutputMode::Text);
    let executed = switchyard_runner::execute(resolved, entry, &mut printer).await?;
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
        "upstream": if model.scripted { "scripted" } else { "given" },
        "upstream_model": model.name,
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
    let store = StoreSpec::from_path(records)?.open_existing()?;
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

/// An 8-bit RGB PNG of `pixels` (3 bytes each, row by row): the image `observe` returns.
pub fn rgb_png(width: u32, height: u32, pixels: &[u8]) -> Result<Vec<u8>, png::EncodingError> {
    let mut out = Vec::new();
    let mut encoder = png::Encoder::new(&mut out, width, height);
    encoder.set_color(png::ColorType::Rgb);
    encoder.set_depth(png::BitDepth::Eight);
    encoder.write_header()?.write_image_data(pixels)?;
    Ok(out)
}

#[cfg(test)]
#[path = "validate_tests.rs"]
mod tests;
