//! The Gemini CLI launch, headless or over ACP, and its session state: what `--resume` saves
//! from a run's `home/.gemini` and puts back into the next run's.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use switchyard_backend::gemini::acp::{AcpPlan, acp};
use switchyard_backend::gemini::launch::{
    GUEST_MAX_ATTEMPTS, GeminiLaunchConfig, Protocol, Secret, prepare,
};
use switchyard_backend::gemini::run::headless;
use switchyard_events::event::RunStarted;

use crate::execute::{Launched, Runner, Start};
use crate::home::which;
use crate::prompts::stdin_prompts;
use crate::settings::Agent;

/// Prepares and starts Gemini CLI, headless or over ACP, its model calls going to `base_url`.
pub(crate) fn launch(start: Start<'_>, base_url: &str) -> Result<Launched> {
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
    let node = which("node").context("`node` (Node.js >= 20) must be on PATH to run Gemini CLI")?;
    let launch = prepare(&GeminiLaunchConfig {
        trust_workspace_config: resolved.trust_workspace_config,
        node,
        entry,
        workdir: resolved.workdir.clone(),
        run_dir: run_dir.to_path_buf(),
        prompt: resolved.prompts.first().cloned().unwrap_or_default(),
        model: model.to_owned(),
        base_url: base_url.to_owned(),
        api_key: Secret::new(guest_token),
        approval_mode: resolved.approval_mode,
        max_turns: resolved.max_turns,
        max_attempts: GUEST_MAX_ATTEMPTS,
        host_env: std::env::vars_os().collect(),
        host_mcp: host_mcp.clone(),
        protocol: resolved.protocol,
    })
    .with_context(|| format!("preparing the run directory {}", run_dir.display()))?;
    if let Some((point, state)) = &resolved.resume {
        if state.is_dir() {
            restore_session_state(state, &run_dir.join("home/.gemini"), &point.session_id)
                .with_context(|| format!("restoring the session state from {}", state.display()))?;
        } else {
            // The guest's `session/load` fails then: the run's typed outcome says so.
            eprintln!(
                "switchyard: the saved state of session {} is missing ({})",
                point.session_id,
                state.display()
            );
        }
    }
    let started = RunStarted {
        run_id: run_id.to_string(),
        agent: Agent::GeminiCli.name().into(),
        agent_version: switchyard_backend::gemini::VERSION.into(),
        workdir: launch.cwd.to_string_lossy().into_owned(),
        model: Some(model.to_owned()),
    };
    let host = Arc::new(crate::host::PolicyHost {
        binding,
        policy: resolved.permissions.clone(),
    });
    let workspace = crate::execute::workspace_events(
        resolved,
        &launch.cwd,
        switchyard_backend::gemini::settings::WORKSPACE_FILES,
    );
    if launch.system_settings_dir.is_none() && !workspace.is_empty() {
        let found: Vec<String> = workspace
            .iter()
            .filter_map(|e| match e {
                switchyard_events::Event::WorkspaceConfigIgnored(w) => Some(w.path.clone()),
                _ => None,
            })
            .collect();
        anyhow::bail!(
            "the workspace carries Gemini CLI configuration ({}) that Switchyard cannot \
             neutralise here: Gemini CLI loads Switchyard's system settings only from a folder \
             owned by root and writable by nobody else, and none was available (run Switchyard \
             as root, or pass --trust-workspace-config to let the workspace's configuration \
             apply)",
            found.join(", ")
        );
    }
    let other_dirs: Vec<std::path::PathBuf> = launch
        .system_settings_dir
        .iter()
        .filter(|dir| **dir != launch.run_dir)
        .cloned()
        .collect();
    let runner = match resolved.protocol {
        Protocol::Headless => {
            let mut run = headless(&launch, limits, started, host)?;
            run.host_events = host_events;
            run.launch_events = workspace;
            Runner::Headless(Box::new(run))
        }
        Protocol::Acp => {
            let plan = AcpPlan {
                prompts: resolved.prompts.clone(),
                more_prompts: resolved.prompts_stdin.then(stdin_prompts),
                cwd: launch.cwd.clone(),
                gateway_url: base_url.to_owned(),
                gateway_key: Secret::new(guest_token),
                mcp: host_mcp,
                resume: resolved.resume.as_ref().map(|(p, _)| p.session_id.clone()),
                startup_timeout: ACP_STARTUP,
                cancel_grace: ACP_CANCEL_GRACE,
                close_grace: ACP_CLOSE_GRACE,
            };
            let mut run = acp(&launch, limits, started, plan, host)?;
            run.host_events = host_events;
            run.launch_events = workspace;
            Runner::Acp(Box::new(run))
        }
    };
    Ok(Launched {
        other_dirs,
        runner,
        argv: launch
            .args
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect(),
        cwd: launch.cwd,
        settings: launch.settings,
    })
}

/// How long an ACP guest may take from `initialize` to an open session (a cold start of the CLI
/// takes about 2 s).
const ACP_STARTUP: Duration = Duration::from_secs(60);
/// After `session/cancel`, how long the ACP guest has to answer before its group is stopped.
const ACP_CANCEL_GRACE: Duration = Duration::from_secs(5);
/// After its last answer and stdin's end, how long the ACP guest has to exit on its own.
const ACP_CLOSE_GRACE: Duration = Duration::from_secs(5);

/// The guest's files Switchyard writes itself for every run (never carried between runs).
const GENERATED_STATE: &[&str] = &["settings.json", "trustedFolders.json"];

/// Copies the guest's state directory (`home/.gemini`: its chats, projects map, history)
/// from `from` into `to`, except the files Switchyard generates; symlinks are not followed.
pub(crate) fn copy_session_state(from: &Path, to: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let name = entry.file_name();
        if GENERATED_STATE.iter().any(|g| name == *g) {
            continue;
        }
        let kind = entry.file_type()?;
        let target = to.join(&name);
        if kind.is_dir() {
            copy_session_state(&entry.path(), &target)?;
        } else if kind.is_file() {
            std::fs::copy(entry.path(), &target)?;
        }
    }
    Ok(())
}

/// Puts a saved session state into a new run's `home/.gemini`, so `session/load` finds it.
///
/// Gemini CLI 0.61.0 starts a loaded session's recording as a new session with the same id, in
/// `chats/session-<current UTC minute>-<id8>.jsonl`. When that is the very file the session was
/// saved in (a resume within the same minute), its opening `$set` replaces the saved messages
/// and the load finds no resumable session. So the resumed session's files are renamed to
/// earlier minutes, which the new recording can never be named after.
fn restore_session_state(state: &Path, gemini_dir: &Path, session_id: &str) -> std::io::Result<()> {
    copy_session_state(state, gemini_dir)?;
    let short: String = session_id.chars().take(8).collect();
    let suffix = format!("-{short}.jsonl");
    let Ok(projects) = std::fs::read_dir(gemini_dir.join("tmp")) else {
        return Ok(());
    };
    for project in projects {
        let chats = project?.path().join("chats");
        let Ok(entries) = std::fs::read_dir(&chats) else {
            continue;
        };
        let mut files: Vec<String> = entries
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .filter(|name| name.starts_with("session-") && name.ends_with(&suffix))
            .collect();
        files.sort();
        let now = chrono::Utc::now();
        let count = files.len();
        for (i, name) in files.iter().enumerate() {
            let at = i64::try_from(count - i)
                .ok()
                .and_then(chrono::TimeDelta::try_minutes)
                .and_then(|back| now.checked_sub_signed(back))
                .ok_or_else(|| std::io::Error::other("too many saved session files"))?;
            let renamed = format!("session-{}{suffix}", at.format("%Y-%m-%dT%H-%M"));
            std::fs::rename(chats.join(name), chats.join(renamed))?;
        }
    }
    Ok(())
}

#[cfg(test)]
#[path = "gemini_tests.rs"]
mod tests;
