//! The agent registry: one spec per guest agent (its name, pinned package, host-tool prefix,
//! what it can do and how it is launched). Commands read the table instead of matching on the
//! agent, and a flag an agent does not support is a clear error taken from it. A new agent is
//! one entry here, a launch module, and its backend (a launch, a controller and a mapping on
//! `switchyard_backend::driver`).

use std::path::PathBuf;

use anyhow::{Result, bail};

use crate::execute::{Launched, Start};
use crate::settings::{Agent, RunSettings};

/// Where the guest's model traffic goes (the embedded gateway, or a GenerateContent endpoint
/// for tests).
pub(crate) struct Endpoint<'a> {
    pub base_url: &'a str,
    pub gateway: Option<&'a switchyard_gateway::GatewayHandle>,
}

/// What an agent can do; the flags for the rest are refused.
#[derive(Debug, Clone, Copy)]
pub struct Capabilities {
    /// Driven headless or over ACP (`--protocol`); otherwise always one way.
    pub protocols: bool,
    /// `--resume` of a recorded session.
    pub resume: bool,
    /// `--max-turns` (the guest's own turn limit).
    pub max_turns: bool,
    /// `--approval-mode` (the guest's own approval modes).
    pub approval_modes: bool,
    /// `--guest-base-url`: the guest can talk to a GenerateContent endpoint directly.
    pub direct_endpoint: bool,
}

/// One agent.
pub struct AgentSpec {
    pub agent: Agent,
    /// The name events, records and `--agent` use.
    pub name: &'static str,
    /// The pinned npm package and version.
    pub package: &'static str,
    pub version: &'static str,
    /// What the guest calls host tool `t`: `{prefix}{t}`.
    pub host_tool_prefix: &'static str,
    pub caps: Capabilities,
    /// The flag that names another install of it.
    pub binary_flag: &'static str,
    /// Where in the run directory the guest keeps the state `--resume` needs (saved with the
    /// records once a session has a committed turn); `None`: no resume.
    pub session_state: Option<&'static str>,
    /// Starts it for a run.
    pub(crate) launch: fn(Start<'_>, &Endpoint<'_>) -> Result<Launched>,
}

/// Every agent Switchyard runs.
pub static REGISTRY: [AgentSpec; 4] = [
    AgentSpec {
        agent: Agent::GeminiCli,
        name: "gemini-cli",
        package: switchyard_backend::gemini::PACKAGE,
        version: switchyard_backend::gemini::VERSION,
        host_tool_prefix: switchyard_backend::gemini::settings::HOST_TOOL_PREFIX,
        caps: Capabilities {
            protocols: true,
            resume: true,
            max_turns: true,
            approval_modes: true,
            direct_endpoint: true,
        },
        binary_flag: "--gemini-binary",
        session_state: Some("home/.gemini"),
        launch: |start, endpoint| crate::gemini::launch(start, endpoint.base_url),
    },
    AgentSpec {
        agent: Agent::Opencode,
        name: "opencode",
        package: switchyard_backend::opencode::PACKAGE,
        version: switchyard_backend::opencode::VERSION,
        host_tool_prefix: "switchyard_",
        caps: Capabilities {
            protocols: false,
            resume: false,
            max_turns: false,
            approval_modes: false,
            direct_endpoint: false,
        },
        binary_flag: "--opencode-binary",
        session_state: None,
        launch: crate::opencode::launch,
    },
    AgentSpec {
        agent: Agent::ClaudeCode,
        name: "claude-code",
        package: switchyard_backend::claude::PACKAGE,
        version: switchyard_backend::claude::VERSION,
        host_tool_prefix: switchyard_backend::claude::HOST_TOOL_PREFIX,
        caps: Capabilities {
            protocols: false,
            resume: true,
            max_turns: false,
            approval_modes: false,
            direct_endpoint: false,
        },
        binary_flag: "--claude-binary",
        session_state: Some("config"),
        launch: crate::claude::launch,
    },
    AgentSpec {
        agent: Agent::Codex,
        name: "codex",
        package: switchyard_backend::codex::PACKAGE,
        version: switchyard_backend::codex::VERSION,
        host_tool_prefix: switchyard_backend::codex::HOST_TOOL_PREFIX,
        caps: Capabilities {
            protocols: false,
            resume: true,
            max_turns: false,
            approval_modes: false,
            direct_endpoint: false,
        },
        binary_flag: "--codex-binary",
        session_state: Some(switchyard_backend::codex::launch::SESSION_STATE),
        launch: crate::codex::launch,
    },
];

/// The spec of `agent`.
pub fn spec(agent: Agent) -> &'static AgentSpec {
    // Every variant has its entry (checked by a test).
    REGISTRY
        .iter()
        .find(|s| s.agent == agent)
        .unwrap_or(&REGISTRY[0])
}

impl AgentSpec {
    /// Refuses the flags this agent cannot honour (rather than ignoring them).
    pub fn check_flags(&self, a: &RunSettings) -> Result<()> {
        let name = self.name;
        let refused = [
            (
                a.protocol.is_some() && !self.caps.protocols,
                "--protocol (this agent is always driven one way: a session)",
            ),
            (a.resume.is_some() && !self.caps.resume, "--resume"),
            (
                a.guest_base_url.is_some() && !self.caps.direct_endpoint,
                "--guest-base-url",
            ),
            (a.max_turns.is_some() && !self.caps.max_turns, "--max-turns"),
            (
                a.approval_mode.is_some() && !self.caps.approval_modes,
                "--approval-mode (use --permissions)",
            ),
        ];
        if let Some((_, flag)) = refused.iter().find(|(set, _)| *set) {
            bail!("{flag} does not apply to --agent {name}");
        }
        for other in REGISTRY.iter().filter(|s| s.agent != self.agent) {
            let given = match other.agent {
                Agent::GeminiCli => a.gemini_binary.is_some(),
                Agent::Opencode => a.opencode_binary.is_some(),
                Agent::ClaudeCode => a.claude_binary.is_some(),
                Agent::Codex => a.codex_binary.is_some(),
            };
            if given {
                bail!("{} does not apply to --agent {name}", other.binary_flag);
            }
        }
        Ok(())
    }

    /// The sealed install a run uses: the flag's, or the default one.
    pub fn install(&self, a: &RunSettings) -> Result<PathBuf> {
        let given = match self.agent {
            Agent::GeminiCli => a.gemini_binary.as_deref(),
            Agent::Opencode => a.opencode_binary.as_deref(),
            Agent::ClaudeCode => a.claude_binary.as_deref(),
            Agent::Codex => a.codex_binary.as_deref(),
        };
        match given {
            Some(path) => crate::resolve::find_sealed_prefix(path),
            None => Ok(self.default_prefix()),
        }
    }

    /// The pinned npm package and version.
    pub fn pin(&self) -> (&'static str, &'static str) {
        (self.package, self.version)
    }

    /// Where `switchyard install` puts it.
    pub fn default_prefix(&self) -> PathBuf {
        crate::home::switchyard_home()
            .join("guests")
            .join(format!("{}-{}", self.name, self.version))
    }
}

#[cfg(test)]
#[path = "agents_tests.rs"]
mod tests;
