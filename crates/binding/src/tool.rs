//! The host tool contract and the registry that validates arguments before a tool runs.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// An image a tool returns (base64 data).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolImage {
    pub mime_type: String,
    pub data: String,
}

/// What a tool returns to the model.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolOutput {
    #[serde(default)]
    pub text: String,
    #[serde(default)]
    pub images: Vec<ToolImage>,
}

/// Why a call produced no output; the model is told.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ToolError {
    /// The arguments do not follow the tool's schema (the tool did not run).
    #[error("invalid arguments for {tool}: {problems}")]
    InvalidArguments { tool: String, problems: String },
    /// No tool of that name is registered.
    #[error("no host tool named {0:?}")]
    Unknown(String),
    /// The tool ran and failed.
    #[error("{0}")]
    Failed(String),
    /// The tool did not answer in time (it was stopped).
    #[error("the tool did not answer within {0:?}")]
    TimedOut(Duration),
}

/// The future a tool call returns.
pub type ToolFuture<'a> = Pin<Box<dyn Future<Output = Result<ToolOutput, ToolError>> + Send + 'a>>;

/// A tool the host offers the agent.
pub trait HostTool: Send + Sync {
    fn name(&self) -> &str;
    fn description(&self) -> &str;
    /// JSON Schema of the arguments (an object schema).
    fn input_schema(&self) -> &Value;
    /// Runs the tool with arguments already checked against [`HostTool::input_schema`].
    fn call(&self, arguments: Value) -> ToolFuture<'_>;
}

/// Why a tool cannot be registered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RegistryError {
    #[error(
        "tool name {0:?} must be 1 to 64 characters of letters, digits, '_' and '-' (MCP and \
         the model APIs accept no others)"
    )]
    BadName(String),
    #[error("two tools are named {0:?}")]
    Duplicate(String),
    #[error("the input schema of {tool} is not a valid JSON Schema: {reason}")]
    BadSchema { tool: String, reason: String },
    #[error("the input schema of {0} must describe an object (\"type\": \"object\")")]
    NotAnObject(String),
    #[error(
        "the input schema of {0} declares `{arg}`, which Switchyard reserves for the identity \
         of each delivered call; rename that argument",
        arg = crate::binding::IDENTITY_ARG
    )]
    ReservedArgument(String),
}

struct Registered {
    tool: Arc<dyn HostTool>,
    validator: jsonschema::Validator,
}

/// The host tools of a run, each with its compiled argument schema.
#[derive(Default)]
pub struct ToolRegistry {
    tools: Vec<Registered>,
}

impl std::fmt::Debug for ToolRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.tools.iter().map(|t| t.tool.name()))
            .finish()
    }
}

fn valid_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

impl ToolRegistry {
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a tool: its name must be valid and unique, its schema a valid JSON Schema of an
    /// object.
    pub fn add(&mut self, tool: Arc<dyn HostTool>) -> Result<(), RegistryError> {
        let name = tool.name().to_owned();
        if !valid_name(&name) {
            return Err(RegistryError::BadName(name));
        }
        if self.get(&name).is_some() {
            return Err(RegistryError::Duplicate(name));
        }
        let schema = tool.input_schema();
        if schema.get("type").and_then(Value::as_str) != Some("object") {
            return Err(RegistryError::NotAnObject(name));
        }
        let reserved = crate::binding::IDENTITY_ARG;
        let declared = schema
            .get("properties")
            .and_then(Value::as_object)
            .is_some_and(|p| p.contains_key(reserved))
            || schema
                .get("required")
                .and_then(Value::as_array)
                .is_some_and(|r| r.iter().any(|n| n.as_str() == Some(reserved)));
        if declared {
            return Err(RegistryError::ReservedArgument(name));
        }
        let validator =
            jsonschema::validator_for(schema).map_err(|e| RegistryError::BadSchema {
                tool: name.clone(),
                reason: e.to_string(),
            })?;
        self.tools.push(Registered { tool, validator });
        Ok(())
    }

    /// The tools, in registration order.
    pub fn tools(&self) -> impl Iterator<Item = &Arc<dyn HostTool>> {
        self.tools.iter().map(|r| &r.tool)
    }

    pub fn get(&self, name: &str) -> Option<&Arc<dyn HostTool>> {
        self.find(name).map(|r| &r.tool)
    }

    fn find(&self, name: &str) -> Option<&Registered> {
        self.tools.iter().find(|r| r.tool.name() == name)
    }

    /// Checks `arguments` against the tool's schema; the problems, one per line, if any.
    pub fn check(&self, name: &str, arguments: &Value) -> Result<(), ToolError> {
        let registered = self
            .find(name)
            .ok_or_else(|| ToolError::Unknown(name.to_owned()))?;
        let problems: Vec<String> = registered
            .validator
            .iter_errors(arguments)
            .map(|e| {
                let at = e.instance_path().to_string();
                if at.is_empty() {
                    e.to_string()
                } else {
                    format!("{at}: {e}")
                }
            })
            .collect();
        if problems.is_empty() {
            Ok(())
        } else {
            Err(ToolError::InvalidArguments {
                tool: name.to_owned(),
                problems: problems.join("; "),
            })
        }
    }

    /// Runs the tool `name` if `arguments` follow its schema; otherwise it never runs.
    pub async fn call(&self, name: &str, arguments: Value) -> Result<ToolOutput, ToolError> {
        self.check(name, &arguments)?;
        let registered = self
            .find(name)
            .ok_or_else(|| ToolError::Unknown(name.to_owned()))?;
        registered.tool.call(arguments).await
    }
}
