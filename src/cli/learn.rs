//! `spectr learn "<text>"`: appends a learning to the change's
//! `.ralph/learnings.md`, which every later prompt of the change includes.

use crate::cli::args::LearnArgs;
use crate::cli::{CmdResult, target};
use crate::model::{Project, TaskId};
use crate::ralph::learnings;
use crate::ralph::session::Session;
use miette::{IntoDiagnostic, WrapErr, miette};
use std::process::ExitCode;

pub fn run(args: &LearnArgs) -> CmdResult {
    let cwd = std::env::current_dir()
        .into_diagnostic()
        .wrap_err("could not read the current folder")?;
    let project = Project::discover(&cwd)?;
    // The change positional as elsewhere: a first word that is exactly an
    // active change's id, with text after it (a one-word learning is text).
    let named = match (args.change.as_deref(), args.text.as_slice()) {
        (None, [first, _, ..]) => project
            .active_changes()?
            .into_iter()
            .any(|c| c.id == *first)
            .then_some(first.as_str()),
        _ => None,
    };
    let words = if named.is_some() {
        &args.text[1..]
    } else {
        &args.text[..]
    };
    let text = words.join(" ");
    if text.trim().is_empty() {
        return Err(miette!(
            help = "for example: spectr learn \"the tests need `make fixtures` first\"",
            "a learning needs some text"
        ));
    }
    let change = target::change(
        &project,
        args.change.as_deref().or(named),
        // Its positional change is a convenience; the flag is the way to
        // name one (an agent's prompt uses it).
        target::Named::Flag,
    )?;
    // Labelled with the task the run is working on, when one is.
    let task: Option<TaskId> = match &args.task {
        Some(t) => Some(TaskId::from(t.trim())),
        None => Session::load(&Session::path(&change.dir), &change.id)
            .ok()
            .flatten()
            .and_then(|s| s.in_flight().into_iter().next().map(|(id, _)| id)),
    };
    let file = learnings::path(&change.dir);
    // A sandboxed agent cannot write the learnings file: its run named a
    // file it can (for the run's own change), moved there when it ends.
    let inbox = std::env::var_os(learnings::INBOX_ENV)
        .filter(|v| !v.is_empty())
        .map(std::path::PathBuf::from)
        .filter(|_| std::env::var(target::CHANGE_ENV).is_ok_and(|c| c == change.id));
    let path = inbox.as_deref().unwrap_or(&file);
    learnings::append(path, task.as_ref(), &text)
        .into_diagnostic()
        .wrap_err_with(|| format!("could not write {}", path.display()))?;
    if inbox.is_some() {
        crate::cli::print_out(format!(
            "Learning saved; it is added to {} when this attempt ends\n",
            file.display()
        ))?;
    } else {
        crate::cli::print_out(format!("Learning saved to {}\n", file.display()))?;
    }
    Ok(ExitCode::SUCCESS)
}
