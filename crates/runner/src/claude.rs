//! The Claude Code launch (settings and MCP files, the isolated environment); its permission
//! requests go to the run's one host (`host`).

use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use switchyard_backend::claude::launch::{
    CONFIG_DIR, ClaudeLaunchConfig, WORKSPACE_FILES, prepare,
};
use switchyard_backend::claude::run::{ClaudePlan, claude};
use switchyard_backend::gemini::launch::Secret;
use switchyard_events::event::RunStarted;

use crate::execute::{Launched, Runner, Start};
use crate::settings::Agent;

/// After stdin is closed (every prompt answered), how long the guest has to exit.
const CLOSE_GRACE: Duration = Duration::from_secs(10);
/// After an interrupt, how long the turn has to end before the group is stopped.
const CANCEL_GRACE: Duration = Duration::from_secs(5);

/// Prepares and starts `claude -p` on stream-json, its model the gateway's Messages ingress.
pub(crate) fn launch(start: Start<'_>, endpoint: &crate::agents::Endpoint<'_>) -> Result<Launched> {
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
    let Some(gateway) = endpoint.gateway else {
        bail!("a Claude Code run needs the gateway");
    };
    let launch = prepare(&ClaudeLaunchConfig {
        binary: entry,
        workdir: resolved.workdir.clone(),
        run_dir: run_dir.to_path_buf(),
        gateway_url: gateway.base_url(),
        gateway_key: Secret::new(guest_token),
        model: model.to_owned(),
        mcp: host_mcp,
        resume: resolved.resume.as_ref().map(|(p, _)| p.session_id.clone()),
        host_env: std::env::vars_os().collect(),
        trust_workspace_config: resolved.trust_workspace_config,
    })
    .with_context(|| format!("preparing the run directory {}", run_dir.display()))?;
    if let Some((_, state)) = &resolved.resume {
        // The transcript lives under the config directory, keyed by the workspace path (the
        // same `--workdir` is checked): Claude Code's `--resume` finds it there.
        if state.is_dir() {
            crate::gemini::copy_session_state(state, &launch.run_dir.join(CONFIG_DIR))
                .with_context(|| format!("restoring the session state from {}", state.display()))?;
        } else {
            eprintln!(
                "switchyard: the saved session state {} is missing; the guest will not find \
                 the session",
                state.display()
            );
        }
    }
    let started = RunStarted {
        run_id: run_id.to_string(),
        agent: Agent::ClaudeCode.name().into(),
        agent_version: switchyard_backend::claude::VERSION.into(),
        workdir: launch.cwd.to_string_lossy().into_owned(),
        model: Some(model.to_owned()),
    };
    let plan = ClaudePlan {
        prompts: resolved.prompts.clone(),
        more_prompts: resolved.prompts_stdin.then(crate::prompts::stdin_prompts),
        close_grace: CLOSE_GRACE,
        cancel_grace: CANCEL_GRACE,
    };
    let host = Arc::new(crate::host::PolicyHost {
        binding,
        policy: resolved.permissions.clone(),
    });
    let mut run = claude(&launch, limits, started, plan, host)?;
    run.host_events = host_events;
    run.launch_events = crate::execute::workspace_events(resolved, &launch.cwd, WORKSPACE_FILES);
    Ok(Launched {
        other_dirs: Vec::new(),
        runner: Runner::Claude(Box::new(run)),
        argv: std::iter::once(launch.program.to_string_lossy().into_owned())
            .chain(launch.args.iter().map(|a| a.to_string_lossy().into_owned()))
            .collect(),
        cwd: launch.cwd,
        settings: launch.settings,
    })
}
