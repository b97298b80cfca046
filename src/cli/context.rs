//! `spectr context`: the running task's prompt again (task, proposal, design,
//! delta specs, learnings, verification, how to report), built by the same
//! builder from the same files, for an agent whose own context was compacted.
//! It finds its task the way the other agent commands find their change:
//! `--task`, else the task the run gave this agent (`SPECTR_RALPH_TASK`),
//! else the one task the run's session has under way.

use crate::cli::args::ContextArgs;
use crate::cli::{CmdResult, target};
use crate::model::{Change, Project, TaskId, TaskSet};
use crate::ralph::learnings;
use crate::ralph::prompt::{self, PromptInput};
use crate::ralph::session::Session;
use miette::{IntoDiagnostic, WrapErr, miette};
use std::process::ExitCode;

pub fn run(args: &ContextArgs) -> CmdResult {
    let cwd = std::env::current_dir()
        .into_diagnostic()
        .wrap_err("could not read the current folder")?;
    let project = Project::discover(&cwd)?;
    let change = target::change(
        &project,
        args.change.as_deref(),
        target::Named::Argument("spectr context"),
    )?;
    // A lane's agent works in a copy of the change: the run's session and
    // learnings are in the change folder the run was started on.
    let run_change = Change {
        id: change.id.clone(),
        dir: target::run_dir(&change),
    };
    let session = Session::load(&Session::path(&run_change.dir), &change.id)?;
    let tasks = TaskSet::load(&change.dir)?;
    let id = which_task(args, &change, session.as_ref())?;
    let Some(task) = tasks.task(&id).filter(|t| !t.is_container()) else {
        let ids: Vec<String> = tasks.leaves().map(|t| t.id.to_string()).collect();
        return Err(miette!(
            help = format!("its tasks are: {}", ids.join(", ")),
            "change '{}' has no task '{id}'",
            change.id
        ));
    };
    let learned = learnings::read(&learnings::path(&run_change.dir)).unwrap_or_default();
    let text = prompt::build(&PromptInput {
        change: &run_change,
        tasks: &tasks,
        task,
        retry_reason: session
            .as_ref()
            .and_then(|s| s.record(&id))
            .and_then(|r| r.last_reason.as_deref()),
        spec_dir: &project.spec_dir,
        verify: session.as_ref().and_then(|s| s.options.verify.as_deref()),
        learnings: &learned,
        spectr: prompt::spectr_command(),
    });
    let newline = if text.ends_with('\n') { "" } else { "\n" };
    crate::cli::print_out(format!("{text}{newline}"))?;
    Ok(ExitCode::SUCCESS)
}

fn which_task(
    args: &ContextArgs,
    change: &Change,
    session: Option<&Session>,
) -> Result<TaskId, miette::Report> {
    if let Some(t) = &args.task {
        return Ok(TaskId::from(t.trim()));
    }
    // The run's own agent: told its task, unless asked about another change.
    let from_run =
        args.change.is_none() || std::env::var(target::CHANGE_ENV).is_ok_and(|c| c == change.id);
    if from_run
        && let Ok(t) = std::env::var(prompt::TASK_ENV)
        && !t.trim().is_empty()
    {
        return Ok(TaskId::from(t.trim()));
    }
    let running: Vec<TaskId> = session
        .map(Session::in_flight)
        .unwrap_or_default()
        .into_iter()
        .map(|(id, _)| id)
        .collect();
    match running.as_slice() {
        [only] => Ok(only.clone()),
        [] => Err(miette!(
            help = "name it: spectr context --task <id>",
            "no task of change '{}' is under way, so which task's context?",
            change.id
        )),
        many => Err(miette!(
            help = "name it: spectr context --task <id>",
            "several tasks of change '{}' are under way ({})",
            change.id,
            many.iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        )),
    }
}
