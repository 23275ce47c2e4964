//! What points a Codex 0.171.0 at this gateway's Responses ingress: the `config.toml` lines of
//! a provider (`switchyard gateway` prints them; a `switchyard run --agent codex` launch writes
//! the same keys) and the model-catalog entry without which Codex gives an unknown model no
//! `apply_patch` tool.
//!
//! The provider's retry knobs are low on purpose: the gateway retries the upstream itself and
//! answers a failure it gave up on with a status Codex does not retry (`ingress::responses`);
//! `features.unbounded_connection_retries = false` keeps a Codex whose gateway is gone from
//! reconnecting for ever. `[analytics]` and the plugin and app features are off so a stock
//! Codex makes no outside lookups (BRIEF §4).

use serde_json::{Value, json};

/// The variable the printed provider block reads the ingress key from.
pub const CODEX_KEY_ENV: &str = "SWITCHYARD_API_KEY";

/// Requests Codex retries after a transport failure or a 5xx (its default is 4).
pub const CODEX_REQUEST_MAX_RETRIES: u32 = 1;
/// Streams Codex reopens after a cut (its default is 5).
pub const CODEX_STREAM_MAX_RETRIES: u32 = 1;

/// The first developer message of a Codex whose model the catalog describes (Codex requires
/// one per entry); short, since every request carries it.
pub const CODEX_BASE_INSTRUCTIONS: &str = "You are a coding agent working in the user's \
workspace through tools. Run shell commands with exec_command, edit files with apply_patch, and \
look at images with view_image. Keep going until the task is done, then answer briefly.";

/// The catalog file (`model_catalog_json`) with one entry for `model`: its context window,
/// reasoning levels, image input, the freeform `apply_patch` tool and
/// [`CODEX_BASE_INSTRUCTIONS`].
pub fn codex_catalog(model: &str, context_window: u64) -> Value {
    let levels: Vec<Value> = ["low", "medium", "high"]
        .iter()
        .map(|effort| json!({"effort": effort, "description": format!("{effort} reasoning")}))
        .collect();
    json!({"models": [{
        "slug": model,
        "display_name": model,
        "description": "A model behind the Switchyard gateway",
        "default_reasoning_level": "medium",
        "supported_reasoning_levels": levels,
        "shell_type": "unified_exec",
        "visibility": "list",
        "supported_in_api": true,
        "priority": 1,
        "additional_speed_tiers": [],
        "service_tiers": [],
        "availability_nux": null,
        "upgrade": null,
        "model_messages": null,
        "include_skills_usage_instructions": false,
        "include_plugin_usage_instructions": false,
        "include_apps_usage_instructions": false,
        "default_reasoning_summary": "none",
        "support_verbosity": false,
        "default_verbosity": null,
        "apply_patch_tool_type": "freeform",
        "web_search_tool_type": "text",
        "truncation_policy": {"mode": "tokens", "limit": 10000},
        "supports_image_detail_original": false,
        "context_window": context_window,
        "max_context_window": context_window,
        "effective_context_window_percent": 95,
        "experimental_supported_tools": [],
        "input_modalities": ["text", "image"],
        "supports_search_tool": false,
        "supports_experimental_context": false,
        "use_responses_lite": false,
        "supports_reasoning_effort_updates": false,
        "node_repl_auto_review_required": false,
        "node_repl_disabled": false,
        "base_instructions": CODEX_BASE_INSTRUCTIONS,
    }]})
}

/// `config.toml` lines that point a stock Codex at `base_url` (the gateway's root) with model
/// `model`, the key read from `key_env`, the catalog at `catalog` (an absolute path).
pub fn codex_config(base_url: &str, model: &str, key_env: &str, catalog: &str) -> String {
    let quote = |s: &str| Value::String(s.to_owned()).to_string();
    format!(
        "model = {model}\n\
         model_provider = \"switchyard\"\n\
         model_catalog_json = {catalog}\n\
         check_for_update_on_startup = false\n\
         web_search = \"disabled\"\n\
         [analytics]\n\
         enabled = false\n\
         [features]\n\
         plugins = false\n\
         apps = false\n\
         unbounded_connection_retries = false\n\
         [model_providers.switchyard]\n\
         name = \"Switchyard gateway\"\n\
         base_url = {base}\n\
         env_key = {key_env}\n\
         wire_api = \"responses\"\n\
         request_max_retries = {CODEX_REQUEST_MAX_RETRIES}\n\
         stream_max_retries = {CODEX_STREAM_MAX_RETRIES}\n\
         requires_openai_auth = false\n\
         supports_websockets = false\n",
        model = quote(model),
        catalog = quote(catalog),
        base = quote(&format!("{base_url}/v1")),
        key_env = quote(key_env),
    )
}
