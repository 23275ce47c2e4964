//! The unattended permission policy (`--permissions FILE`): decides each tool call a guest asks
//! permission for, from the exact call the gateway delivered (pure: no I/O but reading the file).
//!
//! ```toml
//! default = "reject"            # what no rule matched gets (the built-in defaults come first)
//! [[rule]]
//! category = "command"          # the events crate's tool categories, exactly
//! command_prefix = "git status" # shell only: the delivered `command` starts with these words
//! decision = "allow"
//! [[rule]]
//! tool = "write_file"
//! decision = "allow"
//! ```
//!
//! Rules are tried in order; the first that matches decides. Then the built-in defaults: the
//! run's own host tools are allowed (the binding admits each callback), file reads are allowed,
//! and everything else takes `default`, which is `reject`. A `command_prefix` never matches a
//! command that chains, substitutes or redirects (`;`, `&`, `|`, `` ` ``, `$`, `<`, `>`, a
//! newline): `git status; rm -rf ~` is not a `git status`.

use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use switchyard_events::tools::{ToolCategory, gemini_tool_category};

/// What a policy answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    Allow,
    Reject,
}

impl Decision {
    /// The ACP permission option kind this decision selects (one call at a time, never
    /// "always").
    pub fn option_kind(self) -> &'static str {
        match self {
            Decision::Allow => "allow_once",
            Decision::Reject => "reject_once",
        }
    }
}

/// One `[[rule]]`.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Rule {
    /// A tool category name (`command`, `file_read`, `file_write`, `ask_user`, `web`,
    /// `planning`, `mcp`, `unknown`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub category: Option<String>,
    /// An exact tool name, as the guest names it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    /// Shell calls only: the command's leading words.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command_prefix: Option<String>,
    pub decision: Decision,
}

/// A permissions file.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Policy {
    #[serde(default, rename = "rule")]
    pub rules: Vec<Rule>,
    /// What no rule and no built-in default decides; `reject` when absent.
    #[serde(default)]
    pub default: Option<Decision>,
}

/// A bad permissions file.
#[derive(Debug, thiserror::Error)]
pub enum PolicyError {
    #[error("reading {path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("parsing {path}: {source}")]
    Parse {
        path: String,
        source: Box<toml::de::Error>,
    },
    #[error("rule {index}: {message}")]
    Rule { index: usize, message: String },
}

/// A decision and why it was made.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Ruling {
    pub decision: Decision,
    /// `rule 2`, `default: host tool`, `default: file read`, `default`.
    pub rule: String,
}

/// Characters that make a shell command more than its leading words.
const SHELL_META: &[char] = &[';', '&', '|', '`', '$', '<', '>', '\n', '\r'];

impl Policy {
    /// Reads and checks a permissions file.
    pub fn load(path: &Path) -> Result<Self, PolicyError> {
        let shown = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| PolicyError::Read {
            path: shown.clone(),
            source,
        })?;
        let policy: Policy = toml::from_str(&text).map_err(|source| PolicyError::Parse {
            path: shown,
            source: Box::new(source),
        })?;
        policy.check()?;
        Ok(policy)
    }

    fn check(&self) -> Result<(), PolicyError> {
        for (i, rule) in self.rules.iter().enumerate() {
            let index = i + 1;
            let err = |message: &str| PolicyError::Rule {
                index,
                message: message.to_owned(),
            };
            if rule.category.is_none() && rule.tool.is_none() && rule.command_prefix.is_none() {
                return Err(err("names no category, tool or command_prefix"));
            }
            if let Some(c) = &rule.category
                && !ToolCategory::NAMES.contains(&c.as_str())
            {
                return Err(err(&format!(
                    "unknown category {c:?} (one of {})",
                    ToolCategory::NAMES.join(", ")
                )));
            }
            if let Some(prefix) = &rule.command_prefix
                && (prefix.trim().is_empty() || prefix.contains(SHELL_META))
            {
                return Err(err("command_prefix must be plain words"));
            }
        }
        Ok(())
    }

    /// Decides the call of Gemini CLI's `tool` with the delivered `arguments`. `host_tool` says
    /// whether it is one of the run's host tools.
    pub fn decide(&self, tool: &str, arguments: &Value, host_tool: bool) -> Ruling {
        self.decide_as(tool, &gemini_tool_category(tool), arguments, host_tool)
    }

    /// [`Policy::decide`] for a guest whose tools are classified as `category`.
    pub fn decide_as(
        &self,
        tool: &str,
        category: &ToolCategory,
        arguments: &Value,
        host_tool: bool,
    ) -> Ruling {
        let category = category.clone();
        for (i, rule) in self.rules.iter().enumerate() {
            if rule.matches(tool, &category, arguments) {
                return Ruling {
                    decision: rule.decision,
                    rule: format!("rule {}", i + 1),
                };
            }
        }
        let (decision, rule) = if host_tool {
            (Decision::Allow, "default: host tool")
        } else if category == ToolCategory::FileRead {
            (Decision::Allow, "default: file read")
        } else {
            (self.default.unwrap_or(Decision::Reject), "default")
        };
        Ruling {
            decision,
            rule: rule.to_owned(),
        }
    }
}

impl Rule {
    fn matches(&self, tool: &str, category: &ToolCategory, arguments: &Value) -> bool {
        if self
            .category
            .as_deref()
            .is_some_and(|c| c != category.name())
        {
            return false;
        }
        if self.tool.as_deref().is_some_and(|t| t != tool) {
            return false;
        }
        match &self.command_prefix {
            None => true,
            Some(prefix) => {
                *category == ToolCategory::Command
                    && arguments
                        .get("command")
                        .and_then(Value::as_str)
                        .is_some_and(|command| starts_with_words(command, prefix))
            }
        }
    }
}

/// Whether `command` is `prefix`'s words followed by nothing or by more words, and is a single
/// plain command.
fn starts_with_words(command: &str, prefix: &str) -> bool {
    if command.contains(SHELL_META) {
        return false;
    }
    let mut words = command.split_whitespace();
    prefix
        .split_whitespace()
        .all(|expected| words.next() == Some(expected))
}

#[cfg(test)]
#[path = "permissions_tests.rs"]
mod tests;
