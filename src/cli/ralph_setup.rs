//! What `spectr ralph` settles before a run besides its options (those are
//! [`crate::cli::ralph_config`]'s): the change when none is named, and the
//! settings line of the plan.

use crate::model::Project;
use crate::ralph::sandbox::{SandboxProfile, expand_home, own_binary, private_tmpdir};
use crate::ralph::start::Unanswered;
use crate::ui::prompts::Asked;
use miette::miette;
use std::path::PathBuf;

/// The change to run when no id was given: chosen on a terminal, else an
/// input error listing the ids. Left unanswered (Esc, Ctrl+C, a signal) is
/// not an error: nothing is run and nothing written.
pub fn choose_change(
    project: &Project,
    terminal: bool,
) -> Result<Result<String, Unanswered>, miette::Report> {
    let changes = project.active_changes()?;
    if changes.is_empty() {
        return Err(miette!(
            help = format!(
                "create one under {} (with a proposal.md)",
                project.changes_dir().display()
            ),
            "there is no active change to run"
        ));
    }
    let ids: Vec<&str> = changes.iter().map(|c| c.id.as_str()).collect();
    if !terminal {
        return Err(miette!(
            help = "name one: spectr ralph <change-id>",
            "no change id given, and no terminal to choose one on; active changes: {}",
            ids.join(", ")
        ));
    }
    let width = ids.iter().map(|i| i.chars().count()).max().unwrap_or(0);
    let items: Vec<String> = changes
        .iter()
        .map(|c| {
            let counts = match crate::cli::list::count_tasks(c, &mut Vec::new()) {
                // A person reads this list (`spectr list` keeps upstream's
                // `0/1 tasks` for scripts).
                Ok(n) => format!(
                    "{} of {} done",
                    n.completed,
                    crate::text::count(n.total as u64, "task", "tasks")
                ),
                Err(_) => "(tasks file has errors)".to_string(),
            };
            format!("{:<width$}  {counts}", c.id)
        })
        .collect();
    match crate::ui::prompts::choose_change(&items) {
        Asked::Answer(i) => ids
            .get(i)
            .map(|s| Ok(s.to_string()))
            .ok_or_else(|| miette!("no change chosen")),
        Asked::Cancelled => Ok(Err(Unanswered::Cancelled)),
        Asked::Interrupted => Ok(Err(Unanswered::Interrupted)),
    }
}

/// The settings part of the plan: agent, retries, checkpoints, verification.
pub fn settings_line(
    agent: &str,
    max_retries: u32,
    checkpoints: bool,
    verify: Option<&str>,
    jobs: usize,
    lane_setup: Option<&str>,
) -> String {
    let mut lanes = match jobs {
        1 => String::new(),
        0 => " · jobs: one per lane (up to the CPUs)".to_string(),
        n => format!(" · jobs: up to {n} lanes at once"),
    };
    if let Some(cmd) = lane_setup.filter(|_| jobs != 1) {
        lanes.push_str(&format!(" · lane setup `{cmd}`"));
    }
    format!(
        "Agent {agent} · max retries {max_retries} · checkpoints {} · verify {}{lanes}",
        if checkpoints { "on" } else { "off" },
        verify.map_or("off".to_string(), |v| format!("`{v}`"))
    )
}

/// `--sandbox`: the run's profile, bubblewrap found and tried (its refusal
/// is an input error: exit 2 before anything starts), and the agent's state
/// folders made; `None` when off.
pub fn sandbox_profile(
    settings: &crate::cli::ralph_config::Settings,
    project: &Project,
    change: &crate::model::Change,
) -> Result<Option<SandboxProfile>, crate::ralph::sandbox::SandboxError> {
    if !settings.sandbox_settings.enabled {
        return Ok(None);
    }
    let env = |name: &str| std::env::var_os(name);
    let home = env("HOME").filter(|h| !h.is_empty()).map(PathBuf::from);
    let mut sandbox = settings.sandbox_settings.clone();
    sandbox.writable = sandbox
        .writable
        .iter()
        .map(|p| expand_home(&p.to_string_lossy(), home.as_deref()))
        .collect();
    let agent_dirs = crate::agent::provider::state_dirs(settings.agent.kind, &env);
    // spectr's own files, wherever the project's folder is (a lane's too).
    let rel = change
        .dir
        .strip_prefix(&project.root)
        .unwrap_or(&change.dir);
    let own = vec![
        crate::ralph::paths::state_dir(rel),
        crate::ralph::paths::session_path(rel),
    ];
    let mut profile = SandboxProfile::probe(&sandbox, agent_dirs, own)?;
    // The run's control socket (made once the run starts): no process of
    // the run reaches it.
    profile.masked =
        vec![crate::ralph::paths::state_dir(&change.dir).join(crate::ralph::steer::SOCKET)];
    // What the private /tmp must still show (see the sandbox's module docs).
    let exe = std::env::current_exe().and_then(std::fs::canonicalize);
    let path = env("PATH");
    profile.readable = exe
        .map(|exe| own_binary(&exe, path.as_deref()))
        .unwrap_or_default();
    profile
        .readable
        .extend(crate::agent::provider::config_paths(
            settings.agent.kind,
            &env,
        ));
    profile.tmpdir = private_tmpdir(env("TMPDIR").as_deref());
    // Before the preflight asks the agent's version inside it: a first run
    // writes its state folders (copilot unpacks itself into its cache).
    profile.prepare();
    Ok(Some(profile))
}

/// The plan's line about confinement: the sandbox's rules, or that there is
/// none and how to have one.
pub fn sandbox_line(sandbox: Option<&SandboxProfile>) -> String {
    match sandbox {
        Some(s) => s.line(),
        None => "Sandbox: off · agents run with every permission and can write anywhere you can (--sandbox confines each to its work tree)".to_string(),
    }
}

/// An agent's preflight (found, and its version asked), inside `sandbox`
/// when there is one: an agent the sandbox breaks is refused before any
/// attempt. The run's agent and each route's.
pub fn preflight_route(
    agent: &crate::agent::AgentConfig,
    sandbox: Option<&SandboxProfile>,
    root: &std::path::Path,
) -> Result<crate::agent::provider::Preflight, crate::agent::AgentError> {
    let confine =
        sandbox.map(|s| move |program: &std::path::Path| s.program_command(program, root));
    let confine = confine
        .as_ref()
        .map(|c| c as &dyn Fn(&std::path::Path) -> crate::process::Cmd);
    crate::agent::provider::preflight(agent, confine)
}

/// The run's own agent's preflight; for `spectr ralph` and each remote
/// lane's worker alike.
pub fn preflight_agent(
    settings: &crate::cli::ralph_config::Settings,
    sandbox: Option<&SandboxProfile>,
    root: &std::path::Path,
) -> Result<crate::agent::provider::Preflight, crate::agent::AgentError> {
    preflight_route(&settings.agent, sandbox, root)
}
