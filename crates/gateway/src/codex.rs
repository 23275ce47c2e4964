//! What points a stock Codex 0.171.0 at this gateway's Responses ingress: the `config.toml`
//! lines of a provider, which `switchyard gateway` prints (a `switchyard run --agent codex`
//! launch writes its own, in `switchyard_backend::codex::launch`, with no Codex retries at all:
//! there the gateway is in the same process). The model-catalog entry they name is
//! `switchyard_protocol::codex_catalog`'s.
//!
//! The provider's retry knobs are low on purpose (one retry: a standalone gateway may be
//! restarted under a running Codex): the gateway retries the upstream itself and
//! answers a failure it gave up on with a status Codex does not retry (`ingress::responses`);
//! `features.unbounded_connection_retries = false` keeps a Codex whose gateway is gone from
//! reconnecting for ever. `[analytics]` and the plugin and app features are off so a stock
//! Codex makes no outside lookups (BRIEF §4).

use serde_json::Value;

/// The variable the printed provider block reads the ingress key from.
pub const CODEX_KEY_ENV: &str = "SWITCHYARD_API_KEY";

/// Requests Codex retries after a transport failure or a 5xx (its default is 4).
pub const CODEX_REQUEST_MAX_RETRIES: u32 = 1;
/// Streams Codex reopens after a cut (its default is 5).
pub const CODEX_STREAM_MAX_RETRIES: u32 = 1;

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
