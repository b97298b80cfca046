//! Which change an agent-facing command (`task done`, `learn`, `status`) is
//! about: `--change`, else `SPECTR_RALPH_CHANGE` (set by `spectr ralph` for
//! its agents), else the only change with an unfinished run, else the only
//! active change.

use crate::model::{Change, Project};
use miette::miette;

/// Set in every agent's environment by `spectr ralph`.
pub const CHANGE_ENV: &str = "SPECTR_RALPH_CHANGE";

pub fn change(project: &Project, flag: Option<&str>) -> Result<Change, miette::Report> {
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
            Err(miette!(
                help = "name it with --change <id> (or set {CHANGE_ENV})",
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
