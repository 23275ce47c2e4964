//! `switchyard run --agent opencode`: the OpenCode launch (config, secrets, the server's
//! password), and the host side of its permission requests (the run's policy, decided on the
//! exact call the gateway delivered).

use std::collections::HashSet;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context, Result};
use serde_json::Value;
use switchyard_backend::gemini::launch::Secret;
use switchyard_backend::opencode::launch::{
    ConfigInput, MANAGED_CONFIG_DIR, OpenCodeLaunchConfig, PROVIDER, config_document, prepare,
};
use switchyard_backend::opencode::run::{OpenCodeHost, OpenCodePlan, OpenCodeRun};
use switchyard_backend::permission::PermissionRuling;
use switchyard_binding::{Decision, HostBinding, Policy};
use switchyard_events::ToolCategory;
use switchyard_events::event::RunStarted;
use switchyard_events::tools::opencode_tool_category;

use super::run::{Agent, Launched, Runner, Start, random_token};

/// Start-up budget: readiness line, health and the event subscription (a cold start takes
/// 3–5 s here).
const STARTUP: Duration = Duration::from_secs(60);
/// After an abort, how long the session has to go idle before the server is stopped.
const CANCEL_GRACE: Duration = Duration::from_secs(5);

/// Prepares and starts `opencode serve`, its provider the gateway's snippet `provider`.
pub(crate) fn launch(start: Start<'_>, provider: Value) -> Result<Launched> {
    let Start {
        resolved,
        entry,
        run_id,
        run_dir,
        model,
        guest_token,
        host_mcp,
        limits,
        binding,
        host_events,
    } = start;
    if Path::new(MANAGED_CONFIG_DIR).exists() {
        eprintln!(
            "switchyard: warning: {MANAGED_CONFIG_DIR} exists; OpenCode applies its managed \
             config after Switchyard's"
        );
    }
    let config = config_document(&ConfigInput {
        provider,
        mcp_url: host_mcp.as_ref().map(|(url, _)| url.clone()),
        ripgrep: super::which("rg").is_some(),
    });
    let launch = prepare(&OpenCodeLaunchConfig {
        binary: entry,
        workdir: resolved.workdir.clone(),
        run_dir: run_dir.to_path_buf(),
        config,
        password: Secret::new(random_token()),
        gateway_key: Secret::new(guest_token),
        mcp_token: host_mcp.map(|(_, token)| token),
        host_env: std::env::vars_os().collect(),
    })
    .with_context(|| format!("preparing the run directory {}", run_dir.display()))?;
    let started = RunStarted {
        run_id: run_id.to_string(),
        agent: Agent::Opencode.name().into(),
        agent_version: switchyard_backend::opencode::VERSION.into(),
        workdir: launch.cwd.to_string_lossy().into_owned(),
        model: Some(model.to_owned()),
    };
    let plan = OpenCodePlan {
        prompts: resolved.prompts.clone(),
        more_prompts: resolved.prompts_stdin.then(super::run::stdin_prompts),
        provider: PROVIDER.to_owned(),
        model: model.to_owned(),
        title: format!("switchyard run {run_id}"),
        startup_timeout: STARTUP,
        cancel_grace: CANCEL_GRACE,
    };
    let host = Arc::new(OpenCodePolicy {
        binding,
        policy: resolved.permissions.clone(),
        decided: Mutex::default(),
    });
    let mut run = OpenCodeRun::start(&launch, limits, started, plan, host)?;
    if let Some(events) = host_events {
        run = run.with_host_events(events);
    }
    Ok(Launched {
        runner: Runner::OpenCode(Box::new(run)),
        argv: std::iter::once(launch.program.to_string_lossy().into_owned())
            .chain(launch.args.iter().map(|a| a.to_string_lossy().into_owned()))
            .collect(),
        cwd: launch.cwd,
        settings: launch.config,
    })
}

/// OpenCode's permission requests, decided by the run's policy on the call the gateway
/// delivered. OpenCode may ask more than once for one call, under different permissions (a
/// read outside the workspace asks `external_directory`, then `read`); each (call,
/// permission) is decided once. A permission that is the call's own (`bash` for bash, `edit`
/// for the file-writing tools, the tool's name otherwise) is decided as that tool with the
/// delivered arguments; any other (`external_directory`, `doom_loop`) as a tool of that name,
/// which only an explicit rule allows.
struct OpenCodePolicy {
    binding: Option<HostBinding>,
    policy: Policy,
    decided: Mutex<HashSet<(String, String)>>,
}

impl OpenCodeHost for OpenCodePolicy {
    fn delivered(&self, call_id: &str) -> Option<switchyard_events::Delivered> {
        super::run::delivered_of(self.binding.as_ref()?, call_id)
    }

    fn permission(
        &self,
        permission: &str,
        call_id: Option<&str>,
        _metadata: &Value,
    ) -> std::result::Result<PermissionRuling, String> {
        let binding = self
            .binding
            .as_ref()
            .ok_or("no gateway: the run cannot tell which calls were delivered")?;
        let call_id = call_id.ok_or("the request names no model call")?;
        let (call, _) = binding
            .delivered_call(call_id)
            .ok_or_else(|| format!("call {call_id:?} is not one the gateway delivered"))?;
        let first = self
            .decided
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert((call_id.to_owned(), permission.to_owned()));
        if !first {
            return Err(format!(
                "permission {permission:?} of call {call_id:?} was decided already"
            ));
        }
        // Marks the call decided in the delivered table (a replayed request for it then fails
        // there too); a call asked for under a second permission is decided already.
        let _ = binding.permission_for(&format!("{}__{call_id}", call.tool));
        let category = opencode_tool_category(&call.tool);
        let own = permission == call.tool
            || (permission == "edit" && category == ToolCategory::FileWrite);
        let (tool, category) = if own {
            (call.tool.clone(), category)
        } else {
            (permission.to_owned(), ToolCategory::Unknown)
        };
        let host_tool = own && binding.host_tool(&call.tool).is_some();
        let ruling = self
            .policy
            .decide_as(&tool, &category, &call.arguments, host_tool);
        if ruling.decision != Decision::Allow {
            // The guest is told not to run it; no callback of it may run either.
            binding.reject(&call.call_id);
        }
        Ok(PermissionRuling {
            call_id: call.call_id,
            model_call_id: call.model_call_id,
            tool,
            arguments: call.arguments,
            allow: ruling.decision == Decision::Allow,
            rule: ruling.rule,
        })
    }
}
