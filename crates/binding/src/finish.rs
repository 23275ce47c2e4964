//! The `finish` host tool (`--finish-schema FILE`): its arguments, once valid, are the run's
//! structured result. The registry validates them against the schema before this tool runs, so
//! an invalid finish is a tool error the model sees; a second valid finish is refused.

use std::path::Path;
use std::sync::{Arc, Mutex};

use serde_json::Value;

use crate::tool::{HostTool, ToolError, ToolFuture, ToolOutput};

/// The finish tool's name (the guest sees it under its MCP prefix).
pub const FINISH_TOOL: &str = "finish";

/// Where the run's result lands.
#[derive(Debug, Clone, Default)]
pub struct FinishSlot(Arc<Mutex<Option<Value>>>);

impl FinishSlot {
    /// The valid finish call's arguments, if one was made.
    pub fn result(&self) -> Option<Value> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }
}

/// The `finish` tool of one run.
#[derive(Debug)]
pub struct FinishTool {
    schema: Value,
    description: String,
    slot: FinishSlot,
}

/// Why a finish schema file cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum FinishSchemaError {
    #[error("reading the finish schema {path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("the finish schema {path} is not JSON: {source}")]
    Json {
        path: String,
        source: serde_json::Error,
    },
}

impl FinishTool {
    /// A finish tool whose arguments follow `schema`; the result lands in the returned slot.
    pub fn new(schema: Value) -> (Self, FinishSlot) {
        let slot = FinishSlot::default();
        let description = schema
            .get("description")
            .and_then(Value::as_str)
            .map(str::to_owned)
            .unwrap_or_else(|| {
                "Submit the task's final result. Call it exactly once, when the task is done; \
                 its arguments are the result."
                    .to_owned()
            });
        (
            Self {
                schema,
                description,
                slot: slot.clone(),
            },
            slot,
        )
    }

    /// Reads the schema from a JSON file.
    pub fn from_file(path: &Path) -> Result<(Self, FinishSlot), FinishSchemaError> {
        let shown = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| FinishSchemaError::Read {
            path: shown.clone(),
            source,
        })?;
        let schema = serde_json::from_str(&text).map_err(|source| FinishSchemaError::Json {
            path: shown,
            source,
        })?;
        Ok(Self::new(schema))
    }
}

impl HostTool for FinishTool {
    fn name(&self) -> &str {
        FINISH_TOOL
    }

    fn description(&self) -> &str {
        &self.description
    }

    fn input_schema(&self) -> &Value {
        &self.schema
    }

    fn call(&self, arguments: Value) -> ToolFuture<'_> {
        let mut slot = self
            .slot
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let outcome = if slot.is_some() {
            Err(ToolError::Failed(
                "the run already has its finish result; a second finish is refused".into(),
            ))
        } else {
            *slot = Some(arguments);
            Ok(ToolOutput {
                text: "Result recorded. The task is finished: stop here.".into(),
                images: Vec::new(),
            })
        };
        Box::pin(std::future::ready(outcome))
    }
}
