//! `spectr status`: where a change's run stands, from its tasks files and its
//! session file (`.ralph-session.json`): counts, the task being worked on, what
//! was skipped or failed, each task's commit (`--commit task`), what runs
//! next, and the learnings file.

use crate::cli::args::StatusArgs;
use crate::cli::{CmdResult, target};
use crate::model::spectr_yaml;
use crate::model::{Project, TaskGraph, TaskId, TaskSet, TaskStatus};
use crate::ralph::session::{RunTaskState, Session};
use crate::ralph::{decide, learnings};
use miette::{IntoDiagnostic, WrapErr};
use serde::Serialize;
use std::collections::BTreeMap;
use std::process::ExitCode;

#[derive(Debug, Serialize)]
struct Status {
    change: String,
    total: usize,
    completed: usize,
    in_progress: usize,
    pending: usize,
    /// Whether a session file exists (a run started and did not finish).
    session: bool,
    started_at: Option<String>,
    updated_at: Option<String>,
    /// Tasks with an attempt under way (or cut off by a crash): `[task, attempt]`.
    running: Vec<(TaskId, u32)>,
    /// Running attempts of remote lanes still waiting in their engine's
    /// queue (their worker has not started): since when, by task id.
    queued: BTreeMap<TaskId, String>,
    skipped: Vec<TaskId>,
    failed: Vec<TaskId>,
    /// The commit of each task the session has one for (`--commit task`),
    /// by task id: the full id (the human lines show its first 10).
    commits: BTreeMap<TaskId, String>,
    /// What the loop starts next, in order: as the running tasks end (taken
    /// to complete), or, with none running, what a run starts first.
    next: Vec<TaskId>,
    attempts: usize,
    learnings: String,
    learnings_count: usize,
}

pub fn run(args: &StatusArgs) -> CmdResult {
    let cwd = std::env::current_dir()
        .into_diagnostic()
        .wrap_err("could not read the current folder")?;
    let project = Project::discover(&cwd)?;
    let change = target::change(
        &project,
        args.change.as_deref(),
        target::Named::Argument("spectr status"),
    )?;
    let tasks = TaskSet::load(&change.dir)?;
    // Read only: a tasks.md left behind by hand edits of tasks.jsonc is
    // said, never ticked here.
    if let Some(note) = crate::cli::tasks_md_lag_note(&change.id, &tasks) {
        crate::cli::print_err(format_args!("warning: {note}"));
    }
    let session = Session::load(&Session::path(&change.dir), &change.id)?;
    let count = |s: TaskStatus| tasks.leaves().filter(|t| t.status == s).count();
    let in_state = |state: RunTaskState| -> Vec<TaskId> {
        session
            .iter()
            .flat_map(|s| s.tasks.iter())
            .filter(|(_, r)| r.state == state)
            .map(|(id, _)| id.clone())
            .collect()
    };
    let skipped = session.as_ref().map(Session::skipped).unwrap_or_default();
    let selection = session
        .as_ref()
        .and_then(|s| s.selection.as_ref())
        .map(|v| v.iter().cloned().collect());
    let graph = TaskGraph::new(&tasks);
    let status_of = |id: &TaskId| tasks.task(id).map_or(TaskStatus::Completed, |t| t.status);
    // The run's own slot count; without a run, what `spectr ralph` would use.
    let slots = match session.as_ref().and_then(|s| s.slots) {
        Some(n) => n as usize,
        None => {
            let cpus = std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get);
            decide::slots_for(configured_jobs(&project), graph.lanes().len(), cpus)
        }
    };
    let learnings_path = learnings::path(&change.dir);
    let learned = learnings::read(&learnings_path).unwrap_or_default();
    let running_ids: Vec<TaskId> = session
        .as_ref()
        .map(|s| s.in_flight().into_iter().map(|(id, _)| id).collect())
        .unwrap_or_default();
    let st = Status {
        change: change.id.clone(),
        total: tasks.leaves().count(),
        completed: count(TaskStatus::Completed),
        in_progress: count(TaskStatus::InProgress),
        pending: count(TaskStatus::Pending),
        session: session.is_some(),
        started_at: session.as_ref().map(|s| s.started_at.clone()),
        updated_at: session.as_ref().map(|s| s.updated_at.clone()),
        running: session
            .as_ref()
            .map(|s| {
                s.in_flight()
                    .into_iter()
                    .map(|(id, a)| (id, a.attempt))
                    .collect()
            })
            .unwrap_or_default(),
        queued: session
            .as_ref()
            .map(|s| {
                s.in_flight()
                    .into_iter()
                    .filter_map(|(id, a)| Some((id, a.queued_since.clone()?)))
                    .collect()
            })
            .unwrap_or_default(),
        skipped: skipped.iter().cloned().collect(),
        failed: in_state(RunTaskState::Failed),
        commits: session
            .iter()
            .flat_map(|s| s.tasks.iter())
            .filter_map(|(id, r)| Some((id.clone(), r.commit.as_ref()?.id.clone()?)))
            .collect(),
        next: decide::next_to_start(
            &decide::Pickable {
                graph: &graph,
                status: &status_of,
                skipped: &skipped,
                selection: selection.as_ref(),
            },
            &running_ids,
            slots,
        ),
        attempts: session
            .as_ref()
            .map_or(0, |s| s.tasks.values().map(|r| r.attempts.len()).sum()),
        learnings_count: learned.lines().filter(|l| l.starts_with("- ")).count(),
        learnings: learnings_path.display().to_string(),
    };
    if args.json {
        let line = serde_json::to_string(&st).into_diagnostic()?;
        crate::cli::print_out(format!("{line}\n"))?;
    } else {
        crate::cli::print_out(render(&st))?;
    }
    Ok(ExitCode::SUCCESS)
}

/// `ralph.jobs` from spectr.yaml, else 1 (`spectr ralph`'s default). A file
/// that does not load is `spectr ralph`'s to report, not status's.
fn configured_jobs(project: &Project) -> usize {
    spectr_yaml::load(&project.root)
        .ok()
        .and_then(|(_, c)| c.ralph)
        .and_then(|r| r.jobs)
        .unwrap_or(crate::ralph::config::DEFAULT_JOBS)
}

fn ids(v: &[TaskId]) -> String {
    v.iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

fn render(st: &Status) -> String {
    let mut out = format!(
        "{}: {} of {} completed, {} in progress, {} pending\n",
        st.change,
        st.completed,
        crate::text::count(st.total as u64, "task", "tasks"),
        st.in_progress,
        st.pending
    );
    match (&st.started_at, &st.updated_at) {
        (Some(start), Some(update)) => out.push_str(&format!(
            "Run: session started {start}, last update {update}, {}\n",
            crate::text::count(st.attempts as u64, "attempt", "attempts")
        )),
        _ => out.push_str("Run: no session (no run started, or the last one finished)\n"),
    }
    if !st.commits.is_empty() {
        let commits: Vec<String> = st
            .commits
            .iter()
            .map(|(id, c)| format!("{id} {}", crate::text::short_commit(c)))
            .collect();
        out.push_str(&format!("Committed: {}\n", commits.join(", ")));
    }
    for (id, attempt) in &st.running {
        match st.queued.get(id) {
            Some(since) => out.push_str(&format!(
                "Working on: {id} (attempt {attempt}, queued by its lane's engine since {since}; its limits count from its start)\n"
            )),
            None => out.push_str(&format!("Working on: {id} (attempt {attempt})\n")),
        }
    }
    if !st.failed.is_empty() {
        out.push_str(&format!("Last attempt failed: {}\n", ids(&st.failed)));
    }
    if !st.skipped.is_empty() {
        out.push_str(&format!("Skipped: {}\n", ids(&st.skipped)));
    }
    if st.next.is_empty() && st.completed == st.total {
        out.push_str("Next: nothing; every task is completed\n");
    } else if st.next.is_empty() && !st.running.is_empty() {
        let running: Vec<TaskId> = st.running.iter().map(|(id, _)| id.clone()).collect();
        out.push_str(&format!(
            "Next: nothing after {} (what is left waits for it or was skipped)\n",
            ids(&running)
        ));
    } else if st.next.is_empty() {
        out.push_str("Next: nothing left that can run\n");
    } else {
        out.push_str(&format!("Next: {}\n", ids(&st.next)));
    }
    out.push_str(&format!(
        "Learnings: {} ({} recorded)\n",
        st.learnings, st.learnings_count
    ));
    out
}
