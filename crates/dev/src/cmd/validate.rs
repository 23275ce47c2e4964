//! `switchyard-dev validate`: `switchyard validate`, and without `--upstream-url` offline, for
//! CI: a scripted model on 127.0.0.1 plays the model. It reads the nonce from the tool result
//! and the colour from the image it was sent, and `--scripted-fault` breaks it on purpose.

use std::sync::Arc;

use anyhow::Result;
use serde_json::{Value, json};
use switchyard::cmd::validate::{COLOURS, Model, ValidateArgs, image_colours, validate};
use switchyard_testkit::chat_upstream::{ChatUpstream, RecordedRequest, Reply, Script};

/// `switchyard-dev validate` flags.
#[derive(Debug, clap::Args)]
pub struct DevValidateArgs {
    #[command(flatten)]
    pub validate: ValidateArgs,
    /// Make the scripted model misbehave on purpose (to see the report fail).
    #[arg(long, value_enum, conflicts_with = "upstream_url")]
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

/// Entry point.
pub async fn run(args: DevValidateArgs) -> Result<u8> {
    let DevValidateArgs {
        validate: args,
        scripted_fault,
    } = args;
    if args.upstream_url.is_some() {
        return switchyard::cmd::validate::run(args).await;
    }
    let prefix = switchyard_runner::agents::spec(args.agent).host_tool_prefix;
    let scripted = ChatUpstream::start(scripted_model(scripted_fault, prefix)).await?;
    let model = Model {
        url: format!("{}/v1", scripted.base_url()),
        name: "scripted-validation-model".to_owned(),
        scripted: true,
    };
    let code = validate(&args, model).await;
    scripted.stop().await;
    code
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
