//! The OpenCode launch (config, secrets, the server's
//! password); its permission requests go to the run's one host (`host`).

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use switchyard_backend::gemini::launch::Secret;
use switchyard_backend::opencode::launch::{
    ConfigInput, MANAGED_CONFIG_DIR, OpenCodeLaunchConfig, PROVIDER, config_document, prepare,
};
use switchyard_backend::opencode::run::{OpenCodePlan, opencode};
use switchyard_events::event::RunStarted;

use crate::execute::{Launched, Runner, Start};
use crate::home::{random_token, which};
use crate::settings::Agent;

/// Start-up budget: readiness line, health and the event subscription (a cold start takes
/// 3–5 s here).
const STARTUP: Duration = Duration::from_secs(60);
/// After an abort, how long the session has to go idle before the server is stopped.
const CANCEL_GRACE: Duration = Duration::from_secs(5);

/// Prepares and starts `opencode serve`, its provider the gateway's Chat Completions ingress.
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
        bail!("an OpenCode run needs the gateway");
    };
    let provider =
        gateway.opencode_provider(model, switchyard_backend::opencode::launch::GATEWAY_KEY_ENV);
    if Path::new(MANAGED_CONFIG_DIR).exists() {
        eprintln!(
            "switchyard: warning: {MANAGED_CONFIG_DIR} exists; OpenCode applies its managed \
             config after Switchyard's"
        );
    }
    let config = config_document(&ConfigInput {
        provider,
        mcp_url: host_mcp.as_ref().map(|(url, _)| url.clone()),
        ripgrep: which("rg").is_some(),
    });
    let launch = prepare(&OpenCodeLaunchConfig {
        trust_workspace_config: resolved.trust_workspace_config,
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
        more_prompts: resolved.prompts_stdin.then(crate::prompts::stdin_prompts),
        provider: PROVIDER.to_owned(),
        model: model.to_owned(),
        title: format!("switchyard run {run_id}"),
        startup_timeout: STARTUP,
        cancel_grace: CANCEL_GRACE,
    };
    let host = Arc::new(crate::host::PolicyHost {
        binding,
        policy: resolved.permissions.clone(),
    });
    let mut run = opencode(&launch, limits, started, plan, host)?;
    run.host_events = host_events;
    run.launch_events = crate::execute::workspace_events(
        resolved,
        &launch.cwd,
        switchyard_backend::opencode::launch::WORKSPACE_FILES,
    );
    Ok(Launched {
        other_dirs: Vec::new(),
        runner: Runner::OpenCode(Box::new(run)),
        argv: std::iter::once(launch.program.to_string_lossy().into_owned())
            .chain(launch.args.iter().map(|a| a.to_string_lossy().into_owned()))
            .collect(),
        cwd: launch.cwd,
        settings: launch.config,
    })
}
