//! `spectr task done <id>`: the status edit an agent (or a person) would
//! otherwise make by hand in tasks.jsonc. It changes that one value and no
//! other byte, re-aggregates the containers, writes atomically and refuses to
//! overwrite a file changed since it was read (the model's `set_status`).
//! The task's box in the change's tasks.md follows (see `model::tasks::md_sync`).

use crate::cli::args::{TaskArgs, TaskCommand};
use crate::cli::{CmdResult, target};
use crate::model::{Project, TaskId, TaskSet, TaskStatus};
use miette::{IntoDiagnostic, WrapErr, miette};
use std::process::ExitCode;

pub fn run(args: &TaskArgs) -> CmdResult {
    match &args.command {
        TaskCommand::Done {
            id,
            status,
            change_id,
            change,
        } => done(
            id,
            (*status).into(),
            change_id.as_deref().or(change.as_deref()),
        ),
        TaskCommand::Sync { change } => sync(change.as_deref()),
    }
}

/// `spectr task sync`: tasks.md's boxes ticked or cleared to match
/// tasks.jsonc (what `spectr list` says lags), each one byte, atomically.
fn sync(change: Option<&str>) -> CmdResult {
    let cwd = std::env::current_dir()
        .into_diagnostic()
        .wrap_err("could not read the current folder")?;
    let project = Project::discover(&cwd)?;
    let change = target::change(&project, change, target::Named::Flag)?;
    let mut tasks = TaskSet::load(&change.dir)?;
    let md = tasks.tasks_md_in_step();
    let Some(md) = md.filter(|p| p.exists()) else {
        crate::cli::print_out(format!(
            "Change '{}' has no tasks.md kept in step with its tasks.jsonc: nothing to do\n",
            change.id
        ))?;
        return Ok(ExitCode::SUCCESS);
    };
    let lagging = match tasks.tasks_md_lagging() {
        Ok(ids) => ids,
        Err(why) => return Err(miette!("{why}")),
    };
    if lagging.is_empty() {
        crate::cli::print_out(format!("{} is in step already\n", md.display()))?;
        return Ok(ExitCode::SUCCESS);
    }
    tasks.sync_tasks_md(None);
    let warnings = tasks.take_tasks_md_warnings();
    if let Some(first) = warnings.first() {
        return Err(miette!("{first}"));
    }
    let ids: Vec<String> = lagging.iter().map(ToString::to_string).collect();
    crate::cli::print_out(format!(
        "{}: {} box{} set to match tasks.jsonc ({})\n",
        md.display(),
        ids.len(),
        if ids.len() == 1 { "" } else { "es" },
        ids.join(", ")
    ))?;
    Ok(ExitCode::SUCCESS)
}

fn done(id: &str, status: TaskStatus, change: Option<&str>) -> CmdResult {
    let cwd = std::env::current_dir()
        .into_diagnostic()
        .wrap_err("could not read the current folder")?;
    let project = Project::discover(&cwd)?;
    let change = target::change(&project, change, target::Named::Flag)?;
    let mut tasks = TaskSet::load(&change.dir)?;
    let id = TaskId::from(id.trim());
    let Some(task) = tasks.task(&id) else {
        let ids: Vec<String> = tasks.leaves().map(|t| t.id.to_string()).collect();
        return Err(miette!(
            help = format!("its tasks are: {}", ids.join(", ")),
            "change '{}' has no task '{id}'",
            change.id
        ));
    };
    if task.is_container() {
        return Err(miette!(
            help = "mark its tasks; a section follows them (completed when all of them are)",
            "task {id} of '{}' is a section, not a task",
            change.id
        ));
    }
    let file = tasks
        .file_of(&id)
        .map(|f| f.path.display().to_string())
        .unwrap_or_default();
    if task.status == status {
        // Its box in tasks.md may still lag (a hand edit of tasks.jsonc).
        tasks.sync_tasks_md(Some(&id));
        crate::cli::print_out(format!("Task {id} is already {status} in {file}\n"))?;
    } else {
        tasks.set_status(&id, status)?;
        crate::cli::print_out(format!("Task {id} marked {status} in {file}\n"))?;
    }
    crate::cli::print_tasks_md_warnings(&mut tasks);
    Ok(ExitCode::SUCCESS)
}
