//! Codex 0.171.0's model catalog file (`model_catalog_json` in its `config.toml`): one entry
//! for a model Codex does not know. Without one Codex uses "fallback metadata" and gives the
//! model no `apply_patch` tool; only the `freeform` apply_patch type is accepted, and the entry
//! must carry `base_instructions` (the first developer message of every request). Shared by the
//! run's launch (`switchyard_backend::codex::launch`) and the standalone gateway's printed config.

use serde_json::{Value, json};

/// The context window an entry declares when the host names none.
pub const DEFAULT_CONTEXT_WINDOW: u64 = 128_000;

/// The first developer message of a Codex whose model the catalog describes; short, since
/// every request carries it.
pub const BASE_INSTRUCTIONS: &str = "You are a coding agent working in the user's workspace \
through tools. Run shell commands with exec_command, edit files with apply_patch, and look at \
images with view_image. Keep going until the task is done, then answer briefly.";

/// The catalog with one entry for `model`: its context window, low/medium/high reasoning,
/// text and image input (Codex drops a tool's image for a text-only model), the freeform
/// `apply_patch` tool and [`BASE_INSTRUCTIONS`].
pub fn model_catalog(model: &str, context_window: u64) -> Value {
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
        "comp_hash": "switchyard",
        "effective_context_window_percent": 95,
        "experimental_supported_tools": [],
        "input_modalities": ["text", "image"],
        "supports_search_tool": false,
        "supports_experimental_context": false,
        "use_responses_lite": false,
        "supports_reasoning_effort_updates": false,
        "node_repl_auto_review_required": false,
        "node_repl_disabled": false,
        "base_instructions": BASE_INSTRUCTIONS,
    }]})
}
