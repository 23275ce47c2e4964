//! `switchyard records replay-context RUN`: every recorded model request of a run translated
//! again from the guest's own request, as the gateway would, and put through a context policy
//! offline, printing each request's tokens before and after (estimated: JSON bytes / 4, images
//! by patches). How a user chooses budgets for a model: replay a representative run at a few
//! `--max`/`--target` pairs and see where the requests land.

use std::fmt::Write as _;

use anyhow::{Context, Result};
use switchyard_records::model::ingress;
use switchyard_records::{ExchangeFilter, ExchangeRecord, RecordStore};
use switchyard_translate::context::{
    ContextConfig, ContextDecision, ContextPolicy, apply, estimate_message, estimate_tools,
};
use switchyard_translate::openai::ChatRequest;
use switchyard_translate::{ProviderOptions, TranslateOptions};

/// `replay-context` flags.
#[derive(Debug, clap::Args)]
pub struct ReplayContextArgs {
    /// Run id, or a unique prefix of it.
    pub run: String,
    /// The policy to replay.
    #[arg(long, value_parser = switchyard_runner::parse_context_policy, default_value = "sliding-window")]
    pub policy: ContextPolicy,
    /// The most input tokens a request may have.
    #[arg(long)]
    pub max: u32,
    /// Once over the max, evict down to this many (default: 80% of the max).
    #[arg(long)]
    pub target: Option<u32>,
    /// Tool-result images always kept.
    #[arg(long, default_value_t = 6)]
    pub min_recent_tool_images: u32,
    /// Tool-result images omitted this many at a time.
    #[arg(long, default_value_t = 2)]
    pub image_eviction_batch_size: u32,
}

/// The neutral upstream request the gateway builds from `exchange`'s guest request (PNGs left
/// as they were: the estimate reads their size from the header). `None`: not a model request.
fn neutral_request(exchange: &ExchangeRecord) -> Result<Option<ChatRequest>> {
    let body = serde_json::to_vec(&exchange.guest_request)?;
    let model = exchange.upstream_model.clone();
    let provider = ProviderOptions {
        reencode_png: false,
        ..ProviderOptions::default()
    };
    let chat = match exchange.ingress_api.as_str() {
        ingress::STREAM_GENERATE_CONTENT | ingress::GENERATE_CONTENT => {
            let request = switchyard_translate::parse_request(&body)?;
            let options = TranslateOptions {
                provider,
                ..TranslateOptions::new(model, true)
            };
            switchyard_translate::translate_request(&request, &options)?.chat
        }
        api @ (ingress::CHAT_COMPLETIONS | ingress::MESSAGES | ingress::RESPONSES) => {
            use switchyard_translate::{chat_ingress, messages_ingress, responses_ingress};
            // The three guests' ingresses take the same options.
            let options = chat_ingress::ChatIngressOptions {
                upstream_model: model,
                provider,
                strip: None,
                convert_on_miss: false,
            };
            match api {
                ingress::CHAT_COMPLETIONS => {
                    let request = chat_ingress::parse_chat_request(&body)?;
                    chat_ingress::prepare_chat_request(request, &options, None)?.chat
                }
                ingress::MESSAGES => {
                    let request = messages_ingress::parse_messages_request(&body)?;
                    messages_ingress::prepare_messages_request(request, &options, None)?.chat
                }
                _ => {
                    let request = responses_ingress::parse_responses_request(&body)?;
                    responses_ingress::prepare_responses_request(request, &options, None)?.chat
                }
            }
        }
        _ => return Ok(None),
    };
    Ok(Some(chat))
}

/// One replayed request's line.
fn line(exchange: &ExchangeRecord, outcome: &Result<ContextDecision, String>) -> String {
    let id = exchange.id.to_string();
    match outcome {
        Ok(d) => format!(
            "{:<10} {:>9} {:>9} {:>8} {:>7}  {}",
            &id[..8],
            d.tokens_before,
            d.tokens_after,
            d.evicted.len(),
            d.images_omitted.len(),
            if d.changed() { "trimmed" } else { "unchanged" }
        ),
        Err(why) => format!("{:<10} refused: {why}", &id[..8]),
    }
}

/// Entry point: the table, or an error.
pub fn run(store: &dyn RecordStore, args: &ReplayContextArgs) -> Result<String> {
    let config = ContextConfig {
        policy: args.policy,
        max_input_tokens: args.max,
        target_input_tokens: args.target.unwrap_or(args.max / 5 * 4),
        min_recent_tool_images: args.min_recent_tool_images,
        image_eviction_batch_size: args.image_eviction_batch_size,
        ..ContextConfig::default()
    };
    config.validate().map_err(|e| anyhow::anyhow!(e))?;
    let run = store
        .resolve_run(&args.run)
        .with_context(|| format!("finding run {}", args.run))?;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "run {} under {:?}: max {}, target {}, images kept {} (batches of {}); tokens estimated",
        run.id,
        config.policy,
        config.max_input_tokens,
        config.target_input_tokens,
        config.min_recent_tool_images,
        config.image_eviction_batch_size
    );
    let _ = writeln!(
        out,
        "{:<10} {:>9} {:>9} {:>8} {:>7}  result",
        "exchange", "before", "after", "evicted", "images"
    );
    let (mut over, mut refused, mut replayed) = (0, 0, 0);
    for exchange in store.exchanges(ExchangeFilter::Run(run.id))? {
        let Some(mut chat) = neutral_request(&exchange)
            .with_context(|| format!("translating exchange {}", exchange.id))?
        else {
            continue;
        };
        replayed += 1;
        let counts: Vec<u32> = chat.messages.iter().map(estimate_message).collect();
        let tools = estimate_tools(&chat);
        let outcome =
            apply(&mut chat, &config, &counts, tools, "estimate").map_err(|e| e.to_string());
        match &outcome {
            Ok(d) if d.tokens_before > config.max_input_tokens => over += 1,
            Ok(_) => {}
            Err(_) => refused += 1,
        }
        let _ = writeln!(out, "{}", line(&exchange, &outcome));
    }
    let _ = writeln!(
        out,
        "{replayed} request(s): {over} over the max and trimmed, {refused} refused (protected \
         content alone over the max)"
    );
    Ok(out)
}
