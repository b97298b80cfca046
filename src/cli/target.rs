//! Which change an agent-facing command (`task done`, `learn`, `status`) is
//! about: `--change`, else `SPECTR_RALPH_CHANGE` (set by `spectr ralph` for
//! its agents), else the only change with an unfinished run, else the only
//! active change.

use crate::model::{Change, Project};
use miette::miette;

/// Set in every agent's environment by `spectr ralph`.
pub const CHANGE_ENV: &str = "SPECTR_RALPH_CHANGE";

/// Set in every agent's environment by `spectr ralph`: the folder of the
/// change the run was started on, which holds the run's session and
/// learnings (an agent in a lane works in a copy of the change).
pub const CHANGE_DIR_ENV: &str = "SPECTR_RALPH_CHANGE_DIR";

/// Where `change`'s run keeps its state: the folder `spectr ralph` named to
/// its agents when it is that change's, else the change's own folder.
pub fn run_dir(change: &Change) -> std::path::PathBuf {
    std::env::var_os(CHANGE_DIR_ENV)
        .map(std::path::PathBuf::from)
        .filter(|d| d.file_name() == Some(std::ffi::OsStr::new(&change.id)) && d.is_dir())
        .unwrap_or_else(|| change.dir.clone())
}

/// How a command takes the change, for the question of which one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Named {
    /// `--change <id>` (task, learn, status, context).
    Flag,
    /// As its argument: `spectr report <change-id>`.
    Argument(&'static str),
}

pub fn change(
    project: &Project,
    flag: Option<&str>,
    named: Named,
) -> Result<Change, miette::Report> {
    let from_env = std::env::var(CHANGE_ENV)
        .ok()
        .filter(|v| !v.trim().is_empty());
    if let Some(typed) = flag.or(from_env.as_deref()) {
        return Ok(project.resolve_change(typed)?.change);
    }
    let active = project.active_changes()?;
    let running: Vec<&Change> = active
        .iter()
        .filter(|c| crate::ralph::session::Session::path(&c.dir).is_file())
        .collect();
    if let [only] = running.as_slice() {
        return Ok((*only).clone());
    }
    match active.as_slice() {
        [only] => Ok(only.clone()),
        [] => Err(miette!(
            help = "create a change folder with a proposal.md first",
            "there is no active change in {}",
            project.changes_dir().display()
        )),
        many => {
            let ids: Vec<&str> = if running.len() > 1 {
                running.iter().map(|c| c.id.as_str()).collect()
            } else {
                many.iter().map(|c| c.id.as_str()).collect()
            };
            let help = match named {
                Named::Flag => format!("name it with --change <id> (or set {CHANGE_ENV})"),
                Named::Argument(command) => {
                    format!("name it: {command} <change-id> (or set {CHANGE_ENV})")
                }
            };
            Err(miette!(
                help = help,
                "which change? {} ({})",
                if running.len() > 1 {
                    "several changes have an unfinished run"
                } else {
                    "there are several active changes"
                },
                ids.join(", ")
            ))
        }
    }
}

/// So `spectr task done` / `learn` / `status` inside an agent find the
/// change it works on.
pub(crate) fn tell_agents(change: &crate::model::Change) {
    crate::agent::provider::set_agent_env(vec![
        (CHANGE_ENV.to_string(), change.id.clone()),
        (CHANGE_DIR_ENV.to_string(), change.dir.display().to_string()),
    ]);
}
