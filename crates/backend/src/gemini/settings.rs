//! The settings Switchyard writes for every Gemini CLI run (pure: builds JSON, writes nothing).
//!
//! The same document is installed as the user settings of the private `GEMINI_CLI_HOME` and as
//! the *system* settings file (`GEMINI_CLI_SYSTEM_SETTINGS_PATH`), which has the highest
//! precedence: a workspace's own `.gemini/settings.json` cannot override what is set here.

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::path::Path;

/// Gemini CLI approval modes usable headless.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum ApprovalMode {
    /// The CLI's safest headless mode: tools that would ask (shell, writes, web fetch) are not
    /// offered to the model at all.
    #[default]
    Default,
    /// File edits run without asking; shell still unavailable.
    AutoEdit,
    /// Every tool runs without asking.
    Yolo,
    /// Read-only planning mode.
    Plan,
}

impl ApprovalMode {
    /// The CLI's `--approval-mode` value.
    pub fn as_flag(self) -> &'static str {
        match self {
            ApprovalMode::Default => "default",
            ApprovalMode::AutoEdit => "auto_edit",
            ApprovalMode::Yolo => "yolo",
            ApprovalMode::Plan => "plan",
        }
    }
}

/// Inputs to [`settings_json`].
#[derive(Debug, Clone)]
pub struct SettingsInput<'a> {
    /// The model name the CLI requests (the gateway routes it to the upstream).
    pub model: &'a str,
    /// `model.maxSessionTurns`; `None` = unlimited (-1).
    pub max_turns: Option<u32>,
    /// `general.maxAttempts` for the CLI's own retries (the gateway retries too: keep small).
    pub max_attempts: u32,
    /// Where OpenTelemetry output goes (a file in the run directory).
    pub telemetry_file: &'a Path,
    /// The host tools' MCP server (Streamable HTTP URL), if the run has host tools.
    pub host_mcp_url: Option<&'a str>,
    /// `security.auth.selectedType`; `None` leaves it to ACP's `authenticate`.
    pub auth: Option<&'a str>,
    /// Let the workspace's own settings start programs (`--trust-workspace-config`); otherwise
    /// [`neutralise_workspace`] is applied.
    pub trust_workspace_config: bool,
}

/// The name of the host tools' MCP server in the guest's settings (no `_`: Gemini CLI parses
/// `mcp_<server>_<tool>`).
pub const HOST_MCP_SERVER: &str = "switchyard";

/// What Gemini CLI calls host tool `t`: `mcp_switchyard_t`.
pub const HOST_TOOL_PREFIX: &str = "mcp_switchyard_";

/// The variable that carries the MCP bearer token to the guest; the settings refer to it, so the
/// token is in no file.
pub const HOST_MCP_TOKEN_ENV: &str = "SWITCHYARD_MCP_TOKEN";

/// The settings document.
pub fn settings_json(input: &SettingsInput<'_>) -> Value {
    let mut settings = base_settings(input);
    if let Some(auth) = input.auth {
        settings["security"]["auth"] = json!({ "selectedType": auth });
    }
    if let (Some(url), Some(object)) = (input.host_mcp_url, settings.as_object_mut()) {
        // Trusted: its tools are offered in the headless default mode and run without asking
        // (admission is Switchyard's, per call).
        object.insert(
            "mcpServers".into(),
            json!({ HOST_MCP_SERVER: {
                "httpUrl": url,
                "headers": { "Authorization": format!("Bearer ${{{HOST_MCP_TOKEN_ENV}}}") },
                "trust": true
            }}),
        );
    }
    if !input.trust_workspace_config {
        neutralise_workspace(&mut settings);
        // The one name let through must be Switchyard's own at system precedence, or a
        // workspace could declare a server by that name (a same-name entry is replaced whole).
        // (`mcp.excluded` does not stop it: the launch's `--allowed-mcp-server-names` wins.)
        if settings.get("mcpServers").is_none() {
            // Never reachable (port 1 refuses at once); over ACP the session's server replaces it.
            settings["mcpServers"] = json!({ HOST_MCP_SERVER: {
                "httpUrl": "http://127.0.0.1:1/switchyard-placeholder"
            }});
        }
    }
    settings
}

/// The settings, at system precedence, that keep a workspace's `.gemini/settings.json` from
/// starting a program: the merge lets a later scope's defined value win (an empty string
/// included), so these beat the workspace's. Only Switchyard's MCP server may start
/// (`mcp.allowed`; the launch also passes `--allowed-mcp-server-names`, since the CLI
/// intersects every scope's allowlist and an empty intersection allows all), no hook runs, no
/// discovery or call command, no tool allowed unasked (`tools.allowed`), no project agent, no
/// IDE companion, no sandbox launcher. (Policy files are replaced by the launch's flags.)
pub fn neutralise_workspace(settings: &mut Value) {
    let patches = [
        (
            "mcp",
            json!({ "allowed": [HOST_MCP_SERVER], "serverCommand": "" }),
        ),
        ("hooksConfig", json!({ "enabled": false })),
        (
            "tools",
            json!({ "discoveryCommand": "", "callCommand": "", "sandbox": false, "allowed": [] }),
        ),
        ("experimental", json!({ "enableAgents": false })),
        ("ide", json!({ "enabled": false })),
    ];
    if let Some(object) = settings.as_object_mut() {
        for (key, value) in patches {
            object.insert(key.to_owned(), value);
        }
    }
}

/// What Gemini CLI reads from its workspace that can start a program or redirect traffic
/// (reported, neutralised unless `--trust-workspace-config`).
pub const WORKSPACE_FILES: &[crate::workspace::WorkspaceFile] = {
    use crate::workspace::{Shape, WorkspaceFile};
    &[
        WorkspaceFile {
            path: ".gemini/settings.json",
            shape: Shape::Json {
                nested: &[
                    "mcpServers",
                    "hooks",
                    "mcp",
                    "tools",
                    "hooksConfig",
                    "experimental",
                ],
            },
        },
        WorkspaceFile {
            path: ".gemini/.env",
            shape: Shape::Env,
        },
        WorkspaceFile {
            path: ".env",
            shape: Shape::Env,
        },
        WorkspaceFile {
            path: ".gemini/agents",
            shape: Shape::Folder,
        },
        WorkspaceFile {
            path: ".gemini/extensions",
            shape: Shape::Folder,
        },
    ]
};

/// Variables the guest always has set, so a workspace `.env` (which never overrides a set
/// variable; Gemini CLI loads `.gemini/.env` of a trusted folder whatever
/// `advanced.ignoreLocalEnv` says) cannot send traffic through a proxy, load code into the
/// guest's children or start an IDE companion.
pub const PINNED_ENV: &[(&str, &str)] = &[
    ("HTTPS_PROXY", ""),
    ("HTTP_PROXY", ""),
    ("https_proxy", ""),
    ("http_proxy", ""),
    ("ALL_PROXY", ""),
    ("NODE_OPTIONS", ""),
    ("LD_PRELOAD", ""),
    ("BASH_ENV", ""),
    ("ENV", ""),
    ("OTEL_EXPORTER_OTLP_ENDPOINT", ""),
    ("GEMINI_TELEMETRY_OTLP_ENDPOINT", ""),
    ("GEMINI_CLI_IDE_SERVER_STDIO_COMMAND", ""),
    ("GEMINI_SANDBOX", "false"),
];

fn base_settings(input: &SettingsInput<'_>) -> Value {
    json!({
        "security": {
            "folderTrust": { "enabled": true }
        },
        "privacy": { "usageStatisticsEnabled": false },
        "model": {
            "name": input.model,
            "maxSessionTurns": input.max_turns.map_or(-1, i64::from),
            "skipNextSpeakerCheck": true
        },
        "general": {
            "maxAttempts": input.max_attempts,
            "checkpointing": { "enabled": false },
            "enableAutoUpdate": false,
            "enableAutoUpdateNotification": false
        },
        "advanced": { "ignoreLocalEnv": true },
        "telemetry": {
            "enabled": true,
            "target": "local",
            "outfile": input.telemetry_file.to_string_lossy(),
            "logPrompts": false
        }
    })
}

/// The private trusted-folders document: exactly the run's workspace is trusted.
pub fn trusted_folders_json(workdir: &Path) -> Value {
    let mut map = serde_json::Map::new();
    map.insert(
        workdir.to_string_lossy().into_owned(),
        Value::from("TRUST_FOLDER"),
    );
    Value::Object(map)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_pin_auth_retries_turns_and_privacy() {
        let s = settings_json(&SettingsInput {
            trust_workspace_config: false,
            model: "qwen",
            max_turns: Some(7),
            max_attempts: 2,
            telemetry_file: Path::new("/r/telemetry.json"),
            host_mcp_url: None,
            auth: Some("gemini-api-key"),
        });
        // No host tools: only the never-reachable placeholder holds Switchyard's server name.
        let servers = s["mcpServers"].as_object().unwrap();
        assert_eq!(servers.len(), 1);
        assert!(
            servers[HOST_MCP_SERVER]["httpUrl"]
                .as_str()
                .unwrap()
                .starts_with("http://127.0.0.1:1/")
        );
        assert_eq!(s["security"]["auth"]["selectedType"], "gemini-api-key");
        assert_eq!(s["model"]["maxSessionTurns"], 7);
        assert_eq!(s["general"]["maxAttempts"], 2);
        assert_eq!(s["privacy"]["usageStatisticsEnabled"], false);
        assert_eq!(s["advanced"]["ignoreLocalEnv"], true);
        assert_eq!(s["telemetry"]["outfile"], "/r/telemetry.json");
        let unlimited = settings_json(&SettingsInput {
            trust_workspace_config: false,
            model: "m",
            max_turns: None,
            max_attempts: 1,
            telemetry_file: Path::new("/t"),
            host_mcp_url: Some("http://127.0.0.1:9/mcp"),
            auth: None,
        });
        assert!(unlimited.pointer("/security/auth").is_none());
        let host = &unlimited["mcpServers"][HOST_MCP_SERVER];
        assert_eq!(host["httpUrl"], "http://127.0.0.1:9/mcp");
        assert_eq!(host["trust"], true);
        assert_eq!(
            host["headers"]["Authorization"], "Bearer ${SWITCHYARD_MCP_TOKEN}",
            "the token itself is in no file"
        );
        assert_eq!(unlimited["model"]["maxSessionTurns"], -1);
    }

    #[test]
    fn only_the_workspace_is_trusted() {
        let t = trusted_folders_json(Path::new("/w/ws"));
        assert_eq!(t.as_object().unwrap().len(), 1);
        assert_eq!(t["/w/ws"], "TRUST_FOLDER");
    }
}
