//! Tool categories by exact whitelist of Gemini CLI 0.61.0 tool names. Never fuzzy matching:
//! a name that is not listed is [`ToolCategory::Unknown`] and the raw name is kept by the caller.

use serde::{Deserialize, Serialize};

/// What kind of action a tool call performs. Derived from the tool name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ToolCategory {
    /// Runs a shell command.
    Command,
    /// Reads files or directory listings.
    FileRead,
    /// Creates or edits files.
    FileWrite,
    /// Asks the user a question.
    AskUser,
    /// Searches or fetches the web.
    Web,
    /// Planning, bookkeeping, skills, subagents and background-process management.
    Planning,
    /// A tool of an MCP server, named `mcp_<server>_<tool>`.
    Mcp {
        /// The part of the name up to the first `_` after `mcp_` (server names should avoid `_`).
        server: String,
        /// The rest of the name.
        tool: String,
    },
    /// Not in the whitelist.
    Unknown,
}

impl ToolCategory {
    /// Every category's name, as [`ToolCategory::name`] spells it (and the events' `kind`).
    pub const NAMES: &[&str] = &[
        "command",
        "file_read",
        "file_write",
        "ask_user",
        "web",
        "planning",
        "mcp",
        "unknown",
    ];

    /// The category's name: its `kind` in the events.
    pub fn name(&self) -> &'static str {
        match self {
            ToolCategory::Command => "command",
            ToolCategory::FileRead => "file_read",
            ToolCategory::FileWrite => "file_write",
            ToolCategory::AskUser => "ask_user",
            ToolCategory::Web => "web",
            ToolCategory::Planning => "planning",
            ToolCategory::Mcp { .. } => "mcp",
            ToolCategory::Unknown => "unknown",
        }
    }
}

const COMMAND: &[&str] = &["run_shell_command"];
const FILE_READ: &[&str] = &[
    "read_file",
    "read_many_files",
    "list_directory",
    "glob",
    "grep_search",
];
const FILE_WRITE: &[&str] = &["replace", "write_file"];
const ASK_USER: &[&str] = &["ask_user"];
const WEB: &[&str] = &["google_web_search", "web_fetch"];
const PLANNING: &[&str] = &[
    "write_todos",
    "enter_plan_mode",
    "exit_plan_mode",
    "complete_task",
    "save_memory",
    "activate_skill",
    "get_internal_docs",
    "update_topic",
    "invoke_agent",
    "list_background_processes",
    "read_background_output",
];

/// Classifies a Gemini CLI tool name.
pub fn gemini_tool_category(name: &str) -> ToolCategory {
    let is = |list: &[&str]| list.contains(&name);
    if is(COMMAND) {
        ToolCategory::Command
    } else if is(FILE_READ) {
        ToolCategory::FileRead
    } else if is(FILE_WRITE) {
        ToolCategory::FileWrite
    } else if is(ASK_USER) {
        ToolCategory::AskUser
    } else if is(WEB) {
        ToolCategory::Web
    } else if is(PLANNING) {
        ToolCategory::Planning
    } else if let Some((server, tool)) = name
        .strip_prefix("mcp_")
        .and_then(|rest| rest.split_once('_'))
        .filter(|(server, tool)| !server.is_empty() && !tool.is_empty())
    {
        ToolCategory::Mcp {
            server: server.to_owned(),
            tool: tool.to_owned(),
        }
    } else {
        ToolCategory::Unknown
    }
}

const OPENCODE_COMMAND: &[&str] = &["bash"];
const OPENCODE_FILE_READ: &[&str] = &["read", "glob", "grep", "list", "lsp"];
const OPENCODE_FILE_WRITE: &[&str] = &["edit", "write", "apply_patch", "multiedit", "patch"];
const OPENCODE_ASK_USER: &[&str] = &["question"];
const OPENCODE_WEB: &[&str] = &["webfetch", "websearch", "codesearch"];
const OPENCODE_PLANNING: &[&str] = &[
    "todowrite",
    "todoread",
    "task",
    "skill",
    "plan_enter",
    "plan_exit",
];

/// The MCP server name Switchyard gives its host tools in an OpenCode config: OpenCode names
/// their tools `switchyard_<tool>`.
pub const OPENCODE_HOST_SERVER: &str = "switchyard";

/// Classifies an OpenCode 1.18.33 tool name (its built-in tools, and `<server>_<tool>` for
/// the tools of Switchyard's MCP server).
pub fn opencode_tool_category(name: &str) -> ToolCategory {
    let is = |list: &[&str]| list.contains(&name);
    if is(OPENCODE_COMMAND) {
        ToolCategory::Command
    } else if is(OPENCODE_FILE_READ) {
        ToolCategory::FileRead
    } else if is(OPENCODE_FILE_WRITE) {
        ToolCategory::FileWrite
    } else if is(OPENCODE_ASK_USER) {
        ToolCategory::AskUser
    } else if is(OPENCODE_WEB) {
        ToolCategory::Web
    } else if is(OPENCODE_PLANNING) {
        ToolCategory::Planning
    } else if let Some(tool) = name
        .strip_prefix(OPENCODE_HOST_SERVER)
        .and_then(|rest| rest.strip_prefix('_'))
        .filter(|tool| !tool.is_empty())
    {
        ToolCategory::Mcp {
            server: OPENCODE_HOST_SERVER.to_owned(),
            tool: tool.to_owned(),
        }
    } else {
        ToolCategory::Unknown
    }
}

const CLAUDE_COMMAND: &[&str] = &["Bash", "Monitor", "TaskStop"];
const CLAUDE_FILE_READ: &[&str] = &["Read", "Glob", "Grep"];
const CLAUDE_FILE_WRITE: &[&str] = &["Edit", "Write", "NotebookEdit"];
const CLAUDE_ASK_USER: &[&str] = &["AskUserQuestion"];
const CLAUDE_WEB: &[&str] = &["WebFetch", "WebSearch"];
const CLAUDE_PLANNING: &[&str] = &[
    "Agent",
    "Task",
    "EnterPlanMode",
    "ExitPlanMode",
    "ListAgents",
    "ReportFindings",
    "ScheduleWakeup",
    "SendMessage",
    "Skill",
    "ToolSearch",
    "Workflow",
    "CronCreate",
    "CronDelete",
    "CronList",
    "EnterWorktree",
    "ExitWorktree",
];

/// Classifies a Claude Code 2.1.332 tool name (the built-ins its requests and `system/init`
/// declared in the captures, and `mcp__<server>__<tool>` for MCP tools).
pub fn claude_tool_category(name: &str) -> ToolCategory {
    let is = |list: &[&str]| list.contains(&name);
    if is(CLAUDE_COMMAND) {
        ToolCategory::Command
    } else if is(CLAUDE_FILE_READ) {
        ToolCategory::FileRead
    } else if is(CLAUDE_FILE_WRITE) {
        ToolCategory::FileWrite
    } else if is(CLAUDE_ASK_USER) {
        ToolCategory::AskUser
    } else if is(CLAUDE_WEB) {
        ToolCategory::Web
    } else if is(CLAUDE_PLANNING) {
        ToolCategory::Planning
    } else if let Some((server, tool)) = name
        .strip_prefix("mcp__")
        .and_then(|rest| rest.split_once("__"))
        .filter(|(server, tool)| !server.is_empty() && !tool.is_empty())
    {
        ToolCategory::Mcp {
            server: server.to_owned(),
            tool: tool.to_owned(),
        }
    } else {
        ToolCategory::Unknown
    }
}

const CODEX_COMMAND: &[&str] = &["exec_command", "write_stdin"];
const CODEX_FILE_READ: &[&str] = &[
    "view_image",
    "list_mcp_resources",
    "list_mcp_resource_templates",
    "read_mcp_resource",
];
const CODEX_FILE_WRITE: &[&str] = &["apply_patch"];
const CODEX_ASK_USER: &[&str] = &["request_user_input"];
const CODEX_WEB: &[&str] = &["web_search"];
const CODEX_PLANNING: &[&str] = &[
    "update_plan",
    "get_goal",
    "create_goal",
    "update_goal",
    "tool_search",
];

/// Classifies a Codex 0.171.0 tool name (the tools its Responses requests declared in the
/// reference captures, and `mcp__<server>__<tool>`: the namespace `mcp__<server>` and the
/// function joined as the gateway flattens them).
pub fn codex_tool_category(name: &str) -> ToolCategory {
    let is = |list: &[&str]| list.contains(&name);
    if is(CODEX_COMMAND) {
        ToolCategory::Command
    } else if is(CODEX_FILE_READ) {
        ToolCategory::FileRead
    } else if is(CODEX_FILE_WRITE) {
        ToolCategory::FileWrite
    } else if is(CODEX_ASK_USER) {
        ToolCategory::AskUser
    } else if is(CODEX_WEB) {
        ToolCategory::Web
    } else if is(CODEX_PLANNING) {
        ToolCategory::Planning
    } else if let Some((server, tool)) = name
        .strip_prefix("mcp__")
        .and_then(|rest| rest.split_once("__"))
        .filter(|(server, tool)| !server.is_empty() && !tool.is_empty())
    {
        ToolCategory::Mcp {
            server: server.to_owned(),
            tool: tool.to_owned(),
        }
    } else {
        ToolCategory::Unknown
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_whitelist() {
        assert_eq!(
            gemini_tool_category("run_shell_command"),
            ToolCategory::Command
        );
        assert_eq!(gemini_tool_category("grep_search"), ToolCategory::FileRead);
        assert_eq!(gemini_tool_category("replace"), ToolCategory::FileWrite);
        assert_eq!(gemini_tool_category("ask_user"), ToolCategory::AskUser);
        assert_eq!(gemini_tool_category("web_fetch"), ToolCategory::Web);
        assert_eq!(
            gemini_tool_category("read_background_output"),
            ToolCategory::Planning
        );
    }

    #[test]
    fn opencode_whitelist() {
        assert_eq!(opencode_tool_category("bash"), ToolCategory::Command);
        assert_eq!(opencode_tool_category("read"), ToolCategory::FileRead);
        assert_eq!(opencode_tool_category("write"), ToolCategory::FileWrite);
        assert_eq!(opencode_tool_category("question"), ToolCategory::AskUser);
        assert_eq!(opencode_tool_category("todowrite"), ToolCategory::Planning);
        assert_eq!(
            opencode_tool_category("switchyard_record"),
            ToolCategory::Mcp {
                server: "switchyard".into(),
                tool: "record".into()
            }
        );
        assert_eq!(
            opencode_tool_category("other_record"),
            ToolCategory::Unknown
        );
        assert_eq!(
            opencode_tool_category("run_shell_command"),
            ToolCategory::Unknown
        );
    }

    #[test]
    fn names_are_the_event_kinds_and_all_listed() {
        for category in [
            ToolCategory::Command,
            ToolCategory::FileRead,
            ToolCategory::FileWrite,
            ToolCategory::AskUser,
            ToolCategory::Web,
            ToolCategory::Planning,
            ToolCategory::Mcp {
                server: "s".into(),
                tool: "t".into(),
            },
            ToolCategory::Unknown,
        ] {
            let kind = serde_json::to_value(&category).unwrap()["kind"].clone();
            assert_eq!(kind, category.name());
            assert!(ToolCategory::NAMES.contains(&category.name()));
        }
        assert_eq!(ToolCategory::NAMES.len(), 8);
    }

    #[test]
    fn no_fuzzy_matching() {
        for name in [
            "run_shell",
            "Read_File",
            "read_file ",
            "shell",
            "write_file2",
            "",
        ] {
            assert_eq!(
                gemini_tool_category(name),
                ToolCategory::Unknown,
                "{name:?}"
            );
        }
    }

    #[test]
    fn mcp_names_split_server_and_tool() {
        assert_eq!(
            gemini_tool_category("mcp_echo_echo_twice"),
            ToolCategory::Mcp {
                server: "echo".into(),
                tool: "echo_twice".into()
            }
        );
        assert_eq!(gemini_tool_category("mcp__x"), ToolCategory::Unknown);
        assert_eq!(gemini_tool_category("mcp_echo"), ToolCategory::Unknown);
    }

    #[test]
    fn claude_code_names_by_their_own_whitelist() {
        for (name, category) in [
            ("Bash", ToolCategory::Command),
            ("Read", ToolCategory::FileRead),
            ("Write", ToolCategory::FileWrite),
            ("AskUserQuestion", ToolCategory::AskUser),
            ("WebFetch", ToolCategory::Web),
            ("Task", ToolCategory::Planning),
            ("read", ToolCategory::Unknown),
            ("mcp__", ToolCategory::Unknown),
            ("mcp__switchyard__", ToolCategory::Unknown),
        ] {
            assert_eq!(claude_tool_category(name), category, "{name}");
        }
        assert_eq!(
            claude_tool_category("mcp__switchyard__record_twice"),
            ToolCategory::Mcp {
                server: "switchyard".into(),
                tool: "record_twice".into()
            }
        );
    }

    #[test]
    fn codex_names_by_their_own_whitelist() {
        for (name, category) in [
            ("exec_command", ToolCategory::Command),
            ("write_stdin", ToolCategory::Command),
            ("apply_patch", ToolCategory::FileWrite),
            ("view_image", ToolCategory::FileRead),
            ("request_user_input", ToolCategory::AskUser),
            ("web_search", ToolCategory::Web),
            ("update_plan", ToolCategory::Planning),
            ("shell", ToolCategory::Unknown),
            ("Bash", ToolCategory::Unknown),
            ("mcp__switchyard__", ToolCategory::Unknown),
        ] {
            assert_eq!(codex_tool_category(name), category, "{name}");
        }
        assert_eq!(
            codex_tool_category("mcp__switchyard__record"),
            ToolCategory::Mcp {
                server: "switchyard".into(),
                tool: "record".into()
            }
        );
    }
}
