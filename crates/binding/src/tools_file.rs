//! `--tools FILE`: a TOML file of `[[tool]]` entries, each with a name, a description, an input
//! schema (inline, or the path of a JSON file) and one handler: `command = [argv…]` (run in the
//! file's folder, arguments on stdin) or `url = "http://…"` (arguments POSTed). `timeout_secs`
//! bounds each call (default 30).
//!
//! ```toml
//! [[tool]]
//! name = "record"
//! description = "Record an observation."
//! input_schema = { type = "object", properties = { nonce = { type = "string" } }, required = ["nonce"] }
//! command = ["python3", "record.py"]
//! timeout_secs = 30
//! ```

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;
use serde_json::Value;

use crate::handlers::{CommandTool, ToolSpec, UrlTool};
use crate::tool::{RegistryError, ToolRegistry};

/// Default bound on one call.
pub const DEFAULT_TIMEOUT_SECS: u64 = 30;

/// Why a tools file cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ToolsFileError {
    #[error("cannot read the tools file {path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("invalid tools file {path}: {reason}")]
    Parse { path: String, reason: String },
    #[error("tool {tool:?}: {reason}")]
    Tool { tool: String, reason: String },
    #[error("cannot read the input schema of {tool:?} from {path}: {reason}")]
    Schema {
        tool: String,
        path: String,
        reason: String,
    },
    #[error(transparent)]
    Registry(#[from] RegistryError),
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileShape {
    #[serde(default)]
    tool: Vec<Entry>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Entry {
    name: String,
    description: String,
    /// A schema table, or the path (relative to the file) of a JSON schema.
    input_schema: Value,
    command: Option<Vec<String>>,
    url: Option<String>,
    timeout_secs: Option<u64>,
}

/// A parsed tools file: its tools, registered.
#[derive(Debug)]
pub struct ToolsFile {
    pub registry: ToolRegistry,
}

impl ToolsFile {
    /// Reads and checks `path`: every entry, its schema and its handler.
    pub fn load(path: &Path) -> Result<Self, ToolsFileError> {
        let text = std::fs::read_to_string(path).map_err(|source| ToolsFileError::Read {
            path: path.display().to_string(),
            source,
        })?;
        let dir = path
            .parent()
            .map_or_else(|| PathBuf::from("."), Path::to_path_buf);
        Self::from_toml(&text, &dir, &path.display().to_string())
    }

    /// Parses tools-file text; relative paths (schemas, commands' folder) are below `dir`.
    pub fn from_toml(text: &str, dir: &Path, shown_as: &str) -> Result<Self, ToolsFileError> {
        let shape: FileShape = toml::from_str(text).map_err(|e| ToolsFileError::Parse {
            path: shown_as.to_owned(),
            reason: e.to_string(),
        })?;
        let mut registry = ToolRegistry::new();
        let mut client: Option<reqwest::Client> = None;
        for entry in shape.tool {
            let tool_error = |reason: &str| ToolsFileError::Tool {
                tool: entry.name.clone(),
                reason: reason.to_owned(),
            };
            let input_schema = match &entry.input_schema {
                Value::String(relative) => read_schema(&entry.name, &dir.join(relative))?,
                Value::Object(_) => entry.input_schema.clone(),
                _ => return Err(tool_error("input_schema must be a table or a path")),
            };
            let timeout_secs = entry.timeout_secs.unwrap_or(DEFAULT_TIMEOUT_SECS);
            if timeout_secs == 0 {
                return Err(tool_error("timeout_secs must be at least 1"));
            }
            let spec = ToolSpec {
                name: entry.name.clone(),
                description: entry.description.clone(),
                input_schema,
                timeout: Duration::from_secs(timeout_secs),
            };
            match (&entry.command, &entry.url) {
                (Some(argv), None) => {
                    if argv.is_empty() || argv[0].is_empty() {
                        return Err(tool_error("command must name a program"));
                    }
                    registry.add(Arc::new(CommandTool {
                        spec,
                        argv: argv.clone(),
                        cwd: dir.to_path_buf(),
                    }))?;
                }
                (None, Some(url)) => {
                    let url = reqwest::Url::parse(url)
                        .ok()
                        .filter(|u| matches!(u.scheme(), "http" | "https"))
                        .ok_or_else(|| tool_error("url must be an http:// or https:// URL"))?;
                    let client = match &client {
                        Some(client) => client.clone(),
                        None => {
                            // reqwest is built without a default TLS provider (the workspace
                            // picks ring); installing it twice is harmless.
                            let _ = rustls::crypto::ring::default_provider().install_default();
                            let built = reqwest::Client::builder()
                                .build()
                                .map_err(|e| tool_error(&format!("no HTTP client: {e}")))?;
                            client.insert(built).clone()
                        }
                    };
                    registry.add(Arc::new(UrlTool { spec, url, client }))?;
                }
                _ => return Err(tool_error("give exactly one handler: command or url")),
            }
        }
        Ok(Self { registry })
    }
}

fn read_schema(tool: &str, path: &Path) -> Result<Value, ToolsFileError> {
    let failed = |reason: String| ToolsFileError::Schema {
        tool: tool.to_owned(),
        path: path.display().to_string(),
        reason,
    };
    let text = std::fs::read_to_string(path).map_err(|e| failed(e.to_string()))?;
    serde_json::from_str(&text).map_err(|e| failed(e.to_string()))
}
