//! The Codex launch (a private `CODEX_HOME` with the generated config, the isolated
//! environment); its approval requests go to the run's one host (`host`).

use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use switchyard_backend::codex::launch::{
    CodexLaunchConfig, SESSION_STATE, WORKSPACE_FILES, prepare,
};
use switchyard_backend::codex::run::{CodexPlan, codex};
use switchyard_backend::gemini::launch::Secret;
use switchyard_events::event::RunStarted;

use crate::execute::{Launched, Runner, Start};
use crate::settings::Agent;

/// After stdin is closed (every prompt answered), how long the server has to exit.
const CLOSE_GRACE: Duration = Duration::from_secs(10);
/// After `turn/interrupt`, how long the turn has to end before the group is stopped.
const CANCEL_GRACE: Duration = Duration::from_secs(5);

/// Prepares and starts `codex app-server`, its model the gateway's Responses ingress.
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
        bail!("a Codex run needs the gateway");
    };
    if let Some((_, state)) = &resolved.resume {
        // The thread's rollouts, back under the new CODEX_HOME: `thread/resume` finds the
        // thread by its rollout file.
        if state.is_dir() {
            crate::gemini::copy_session_state(state, &run_dir.join(SESSION_STATE))
                .with_context(|| format!("restoring the session state from {}", state.display()))?;
        } else {
            eprintln!(
                "switchyard: the saved session state {} is missing; the guest will not find \
                 the thread",
                state.display()
            );
        }
    }
    let launch = prepare(&CodexLaunchConfig {
        binary: entry,
        workdir: resolved.workdir.clone(),
        run_dir: run_dir.to_path_buf(),
        gateway_url: gateway.base_url(),
        gateway_key: Secret::new(guest_token),
        model: model.to_owned(),
        mcp: host_mcp,
        host_env: std::env::vars_os().collect(),
        trust_workspace_config: resolved.trust_workspace_config,
    })
    .with_context(|| format!("preparing the run directory {}", run_dir.display()))?;
    let started = RunStarted {
        run_id: run_id.to_string(),
        agent: Agent::Codex.name().into(),
        agent_version: switchyard_backend::codex::VERSION.into(),
        workdir: launch.cwd.to_string_lossy().into_owned(),
        model: Some(model.to_owned()),
    };
    let plan = CodexPlan {
        prompts: resolved.prompts.clone(),
        more_prompts: resolved.prompts_stdin.then(crate::prompts::stdin_prompts),
        resume: resolved.resume.as_ref().map(|(p, _)| p.session_id.clone()),
        close_grace: CLOSE_GRACE,
        cancel_grace: CANCEL_GRACE,
    };
    let host = Arc::new(crate::host::PolicyHost {
        binding,
        policy: resolved.permissions.clone(),
    });
    let mut run = codex(&launch, limits, started, plan, host)?;
    run.host_events = host_events;
    let mut events = crate::execute::workspace_events(resolved, &launch.cwd, WORKSPACE_FILES);
    events.append(&mut run.launch_events);
    run.launch_events = events;
    Ok(Launched {
        other_dirs: Vec::new(),
        runner: Runner::Codex(Box::new(run)),
        argv: std::iter::once(launch.program.to_string_lossy().into_owned())
            .chain(launch.args.iter().map(|a| a.to_string_lossy().into_owned()))
            .collect(),
        cwd: launch.cwd,
        settings: launch.settings,
    })
}
