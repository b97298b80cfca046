//! The far side of a remote lane (`spectr lane-worker`): one attempt of one
//! task, run exactly as an attempt in the user's tree runs (checkpoint,
//! agent, completion, verify, revert on failure), in a fresh clone of the
//! tree the coordinator pushed; then its work goes back to the remote as
//! refs.

use super::order::{ControlLine, LaneResult, Order, RESULT_EVENT};
use crate::agent::receipt::Receipt;
use crate::checkpoint::{Checkpointer, conflict_markers};
use crate::model::{TaskId, TaskSet};
use crate::ralph::attempt::{self, AttemptEnv, AttemptRequest};
use crate::ralph::config::RunConfig;
use crate::ralph::control::{ActiveAgents, Control};
use crate::ralph::event::{LoopEvent, Outcome};
use crate::ralph::learnings;
use crate::ralph::watch::TasksWatcher;
use crossbeam_channel::Receiver;
use std::time::Duration;

/// A control line's meaning for the attempt at `task`.
pub fn control_for(line: ControlLine, task: &TaskId) -> Control {
    match line {
        ControlLine::Quit => Control::Quit,
        ControlLine::Restart => Control::Restart(Some(task.clone())),
        ControlLine::Skip => Control::Skip(Some(task.clone())),
    }
}

/// A result that says the worker could not do its job.
pub fn worker_failed(order: &Order, why: String) -> LaneResult {
    LaneResult {
        event: RESULT_EVENT.into(),
        task: order.task.clone(),
        attempt: order.attempt,
        outcome: Outcome::GitError {
            detail: why.clone(),
        },
        receipt: Receipt::none(),
        result: None,
        failed: None,
        learnings: Vec::new(),
        worker_error: Some(why),
    }
}

/// Runs the order's attempt in `clone` (made by
/// [`Checkpointer::clone_base`]) and pushes its work back. Every event goes
/// to `emit`; the result is the worker's last line.
pub fn run_attempt(
    cfg: &RunConfig,
    clone: &Checkpointer,
    order: &Order,
    controls: Receiver<Control>,
    transfer_timeout: Duration,
    emit: &mut dyn FnMut(LoopEvent),
) -> LaneResult {
    let learnings_file = learnings::path(&cfg.change.dir);
    if let Err(e) = seed_learnings(&learnings_file, &order.learnings) {
        return worker_failed(
            order,
            format!("cannot write {}: {e}", learnings_file.display()),
        );
    }
    if let Some(resolve) = &order.resolve {
        for file in &resolve.marked {
            let path = clone.repo_root().join(file);
            let Ok(text) = std::fs::read_to_string(&path) else {
                continue;
            };
            let words = conflict_markers::relabel(
                &text,
                &resolve.ours_label,
                &resolve.theirs_label,
                order.task.as_str(),
            );
            if let Some(words) = words
                && let Err(e) = crate::model::atomic::write_atomic(&path, words.as_bytes())
            {
                return worker_failed(order, format!("cannot write {}: {e}", path.display()));
            }
        }
    }
    let mut tasks = match TaskSet::load(&cfg.change.dir) {
        Ok(t) => t,
        Err(e) => return worker_failed(order, format!("the tasks files do not load: {e}")),
    };
    let watcher = TasksWatcher::start(std::slice::from_ref(&cfg.change.dir));
    let env = AttemptEnv {
        cfg,
        checkpointer: Some(clone.clone().with_excludes(cfg.owned_paths())),
        controls,
        watcher: &watcher,
        active: ActiveAgents::default(),
        lane: None,
        merge: None,
        agent_batch: None,
        prepare: None,
    };
    let resolving = order.resolve.as_ref().map(|r| r.files());
    let req = AttemptRequest {
        task: &order.task,
        attempt: order.attempt,
        max_attempts: order.max_attempts,
        retry_reason: order.retry_reason.as_deref(),
        position: order.position,
        resolving: resolving.as_ref(),
        // Remote lanes run the worker's own agent.
        fallback: None,
    };
    let mut receipt = Receipt::none();
    let mut failed_local: Option<String> = None;
    let report = attempt::run(&env, &mut tasks, &req, &mut |event| {
        match &event {
            LoopEvent::TaskCompleted { receipt: r, .. }
            | LoopEvent::TaskFailed { receipt: r, .. } => {
                receipt = r.clone();
            }
            LoopEvent::Reverted { failed_ref, .. } => failed_local = Some(failed_ref.clone()),
            _ => {}
        }
        emit(event);
    });
    drop(env);
    // The completed attempt's checkpoint refs, dropped before the result.
    clone.settle();
    let added = learnings::read(&learnings_file)
        .ok()
        .and_then(|after| learnings::appended(&order.learnings, &after))
        .map(|added| learnings::split_entries(&added))
        .unwrap_or_default();

    // The tree as the attempt left it (reverted when it failed), on top of
    // the agent's commits; its outcome in the message, for a resume that
    // finds it without this line.
    let message = format!(
        "spectr ralph: task {} attempt {} in a remote lane\n\n{}\n",
        order.task,
        order.attempt,
        serde_json::to_string(&report.outcome).unwrap_or_default()
    );
    let (result, _tree) = match clone.result_commit(&message) {
        Ok(r) => r,
        Err(e) => return worker_failed(order, format!("cannot record the lane's work: {e}")),
    };
    let mut push = vec![(result.clone(), format!("{}/result", order.prefix))];
    let failed = failed_local.and_then(|local| {
        let commit = clone.resolve_commit(&local).ok().flatten()?;
        push.push((commit, format!("{}/failed", order.prefix)));
        Some(format!("{}/failed", order.prefix))
    });
    if let Err(e) = clone.push_to(&order.remote, &push, transfer_timeout) {
        return worker_failed(
            order,
            format!("cannot push the lane's work to {}: {e}", order.remote),
        );
    }
    LaneResult {
        event: RESULT_EVENT.into(),
        task: order.task.clone(),
        attempt: order.attempt,
        outcome: report.outcome,
        receipt,
        result: Some(result),
        failed,
        learnings: added,
        worker_error: report.fatal,
    }
}

/// The change's learnings as the coordinator has them, where the prompt
/// reads them; the state folder ignores itself as the user's does.
fn seed_learnings(file: &std::path::Path, text: &str) -> std::io::Result<()> {
    if let Some(dir) = file.parent() {
        std::fs::create_dir_all(dir)?;
        let ignore = dir.join(".gitignore");
        if !ignore.exists() {
            std::fs::write(ignore, "*\n")?;
        }
    }
    if text.is_empty() {
        return Ok(());
    }
    std::fs::write(file, text)
}
