//! The attempt executor: one agent run at one task, from checkpoint to outcome.
//!
//! It reports what happens as [`LoopEvent`]s and returns its judgement; it never
//! decides what runs next (the run's state machine does).

use crate::agent::receipt::Receipt;
use crate::agent::{AgentExit, CompletionSignal, Ending, SuperviseOptions, SupervisorEvent};
use crate::agent::{provider, supervisor};
use crate::checkpoint::{Checkpoint, Checkpointer, HeadWatch};
use crate::model::spectr_yaml::StoryCompletion;
use crate::model::{TaskId, TaskSet, TaskStatus, TasksFormat};
use crate::ralph::config::RunConfig;
use crate::ralph::control::{ActiveAgents, Control};
use crate::ralph::event::{CompletedVia, LoopEvent, NoticeLevel, Outcome, StopAction};
use crate::ralph::learnings;
use crate::ralph::prompt::{self, PromptInput};
use crate::ralph::verify::{self, VerifyResult};
use crate::ralph::watch::{self, POLL_INTERVAL, TasksWatcher};
use crossbeam_channel::{Receiver, after, never, select, tick};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// What an attempt needs from the run around it; owned by the worker that
/// runs it.
pub struct AttemptEnv<'a> {
    pub cfg: &'a RunConfig,
    /// Of the tree the agent works in: the user's, or its lane's.
    pub checkpointer: Option<Checkpointer>,
    pub controls: Receiver<Control>,
    pub watcher: &'a TasksWatcher,
    pub active: ActiveAgents,
    /// Parallel runs: the lane the attempt runs in.
    pub lane: Option<LaneInfo>,
    /// Parallel runs: brings a completed task's work into the user's tree.
    pub merge: Option<&'a dyn MergeBack>,
    /// Takes the agent's output a read at a time instead of one event at a
    /// time (the worker hands it to the run's thread in one message).
    pub agent_batch: Option<&'a AgentBatch<'a>>,
    /// A resolve attempt in the user's own tree: applies the conflicted
    /// work once the tree is checkpointed (so a revert takes it out again).
    pub prepare: Option<&'a Prepare<'a>>,
}

/// Applies a resolve attempt's work to the just-checkpointed tree: its
/// conflicted files and the retry reason that tells the agent about them
/// (None: nothing to apply). An `Err` ends the attempt as a git error,
/// the tree put back.
pub type Prepare<'a> = dyn Fn(&Checkpoint) -> Result<Option<(ResolveFiles, String)>, String> + 'a;

/// Takes one read's worth of an attempt's agent events.
pub type AgentBatch<'a> = dyn Fn(&TaskId, u32, Vec<crate::agent::AgentEvent>) + 'a;

/// Where a parallel attempt runs.
#[derive(Debug, Clone)]
pub struct LaneInfo {
    /// The task's lane: its top-level prefix.
    pub key: String,
    pub worktree: std::path::PathBuf,
    /// Variables the agent gets on top of spectr's own: those of spectr's
    /// environment that name the user's tree, pointed at the lane instead.
    pub env: Vec<(String, String)>,
}

/// The last step of a completed attempt in a lane: merge its work into the
/// user's tree. An `Err` is the outcome instead (a conflict, a git error).
pub trait MergeBack: Sync {
    fn merge(
        &self,
        task: &TaskId,
        attempt: u32,
        via: CompletedVia,
        emit: &mut dyn FnMut(LoopEvent),
    ) -> Result<(), Outcome>;

    /// Once the agent (and `--verify`) ended, whatever the outcome: puts
    /// right what the attempt changed that every work tree shares (the
    /// stash).
    fn after_agent(
        &self,
        task: &TaskId,
        attempt: u32,
        checkpoint: &Checkpoint,
        emit: &mut dyn FnMut(LoopEvent),
    );
}

pub struct AttemptRequest<'a> {
    pub task: &'a TaskId,
    pub attempt: u32,
    pub max_attempts: u32,
    pub retry_reason: Option<&'a str>,
    /// Task n of m in this run (for the header).
    pub position: (usize, usize),
    /// A resolve attempt: its conflicted files (its work was applied again
    /// before it started).
    pub resolving: Option<&'a ResolveFiles>,
    /// `ralph: fallback:`'s agent this attempt runs on (its index), when
    /// the task's own is at a limit.
    pub fallback: Option<usize>,
}

/// A resolve attempt's conflicted files, by what the agent finds in them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ResolveFiles {
    /// Hold conflict markers.
    pub marked: Vec<String>,
    /// Conflicted as whole files, no markers (binary, `merge=binary`, or
    /// removed on one side): they hold one side's version.
    pub unmarked: Vec<String>,
}

pub struct AttemptReport {
    pub outcome: Outcome,
    /// Set when the tree could not be restored: the run must stop, since the
    /// next attempt would start from a tree nobody vouches for.
    pub fatal: Option<String>,
}

/// Every task's status as last seen, in the tasks files' order: a copy, not
/// a sorted map, since a big change's 10,000 ids would be sorted again for
/// every attempt.
struct Known(Vec<(TaskId, TaskStatus)>);

impl Known {
    fn of(tasks: &TaskSet) -> Known {
        Known(
            tasks
                .tasks
                .iter()
                .map(|t| (t.id.clone(), t.status))
                .collect(),
        )
    }

    fn get(&self, id: &TaskId) -> Option<TaskStatus> {
        self.0.iter().find(|(k, _)| k == id).map(|(_, s)| *s)
    }

    /// The tasks whose status differs from the last look (new tasks too), in
    /// file order; then remembers `tasks` as seen. A task that left the files
    /// keeps its last status.
    fn changes(&mut self, tasks: &TaskSet) -> Vec<(TaskId, TaskStatus)> {
        let same_tasks = self.0.len() == tasks.tasks.len()
            && self
                .0
                .iter()
                .zip(&tasks.tasks)
                .all(|((k, _), t)| *k == t.id);
        if same_tasks {
            // The usual case (a status edit): compared side by side.
            let mut changed = Vec::new();
            for ((_, seen), t) in self.0.iter_mut().zip(&tasks.tasks) {
                if *seen != t.status {
                    *seen = t.status;
                    changed.push((t.id.clone(), t.status));
                }
            }
            return changed;
        }
        let before: BTreeMap<TaskId, TaskStatus> = self.0.drain(..).collect();
        let changed = tasks
            .tasks
            .iter()
            .filter(|t| before.get(&t.id) != Some(&t.status))
            .map(|t| (t.id.clone(), t.status))
            .collect();
        let mut now = Known::of(tasks);
        now.0.extend(
            before
                .into_iter()
                .filter(|(id, _)| tasks.task(id).is_none()),
        );
        *self = now;
        changed
    }
}

pub enum StatusWrite {
    /// The task was already completed (never moved backwards).
    AlreadyCompleted,
    Failed(String),
}

/// Sets a status, re-reading the file once if it changed under us (an agent or a
/// person may be editing it at the same moment). A completed task is never
/// moved back.
pub fn set_status_fresh(
    tasks: &mut TaskSet,
    id: &TaskId,
    status: TaskStatus,
) -> Result<(), StatusWrite> {
    if tasks.set_status(id, status).is_ok() {
        return Ok(());
    }
    tasks
        .refresh()
        .map_err(|e| StatusWrite::Failed(e.to_string()))?;
    // Not written here: tasks.md still follows what the file says.
    match tasks.task(id).map(|t| t.status) {
        Some(s) if s == status => {
            tasks.sync_tasks_md(Some(id));
            Ok(())
        }
        Some(TaskStatus::Completed) => {
            tasks.sync_tasks_md(Some(id));
            Err(StatusWrite::AlreadyCompleted)
        }
        _ => tasks
            .set_status(id, status)
            .map_err(|e| StatusWrite::Failed(e.to_string())),
    }
}

pub fn run(
    env: &AttemptEnv<'_>,
    tasks: &mut TaskSet,
    req: &AttemptRequest<'_>,
    emit: &mut dyn FnMut(LoopEvent),
) -> AttemptReport {
    let cfg = env.cfg;
    let id = req.task;
    let Some(task) = tasks.task(id).cloned() else {
        return AttemptReport {
            outcome: Outcome::Abnormal {
                detail: format!("task {id} is no longer in the tasks file"),
            },
            fatal: None,
        };
    };
    let transcript = cfg.transcript_path(id, req.attempt);
    emit(LoopEvent::TaskStarted {
        task: id.clone(),
        section: task.section.clone(),
        description: task.description.clone(),
        attempt: req.attempt,
        max_attempts: req.max_attempts,
        transcript: transcript.display().to_string(),
        index: req.position.0,
        count: req.position.1,
        lane: env.lane.as_ref().map(|l| l.key.clone()),
        worktree: env.lane.as_ref().map(|l| l.worktree.display().to_string()),
    });
    if let Some(files) = req.resolving {
        emit(LoopEvent::Resolving {
            task: id.clone(),
            attempt: req.attempt,
            files: files.marked.clone(),
            unmarked: files.unmarked.clone(),
        });
    }

    let checkpoint = match &env.checkpointer {
        None => None,
        Some(cp) => {
            let refname = cp.ref_name(&cfg.change.id, id.as_str(), req.attempt);
            match cp.create(&refname) {
                Ok(c) => {
                    for message in &c.notices {
                        emit(LoopEvent::Notice {
                            level: NoticeLevel::Warn,
                            message: message.clone(),
                        });
                    }
                    emit(LoopEvent::Checkpoint {
                        task: id.clone(),
                        attempt: req.attempt,
                        checkpoint: c.clone(),
                    });
                    Some(c)
                }
                Err(e) => {
                    let detail = format!("checkpoint failed: {e}");
                    return ended_early(req, Outcome::GitError { detail }, emit);
                }
            }
        }
    };

    let mut prepared: Option<(ResolveFiles, String)> = None;
    if let (Some(prepare), Some(c)) = (env.prepare, &checkpoint) {
        match prepare(c) {
            Ok(Some((files, reason))) => {
                emit(LoopEvent::Resolving {
                    task: id.clone(),
                    attempt: req.attempt,
                    files: files.marked.clone(),
                    unmarked: files.unmarked.clone(),
                });
                prepared = Some((files, reason));
            }
            Ok(None) => {}
            Err(detail) => {
                let outcome = Outcome::GitError {
                    detail: format!("could not apply task {id}'s previous work again: {detail}"),
                };
                emit(LoopEvent::TaskFailed {
                    task: id.clone(),
                    attempt: req.attempt,
                    outcome: outcome.clone(),
                    receipt: Receipt::none(),
                });
                let fatal = restore(env, tasks, id, req.attempt, checkpoint.as_ref(), emit);
                return AttemptReport { outcome, fatal };
            }
        }
    }
    let retry_reason = prepared
        .as_ref()
        .map(|(_, reason)| reason.as_str())
        .or(req.retry_reason);

    // Markdown checklists have no in_progress state.
    if task.status == TaskStatus::Pending
        && tasks.format == TasksFormat::SpectrJsonc
        && let Some(report) = mark_in_progress(env, tasks, req, checkpoint.as_ref(), emit)
    {
        return report;
    }
    env.watcher.drain();

    let learnings_path = learnings::path(&cfg.change.dir);
    let learned_before = learnings::read(&learnings_path).unwrap_or_default();
    let text = prompt::build(&PromptInput {
        change: &cfg.change,
        tasks,
        task: &task,
        retry_reason,
        spec_dir: &cfg.project.spec_dir,
        verify: cfg.verify.as_deref(),
        learnings: &learned_before,
        spectr: prompt::spectr_command(),
    });
    let jsonc = tasks.format == TasksFormat::SpectrJsonc;
    let mut run = Running::new(
        Known::of(tasks),
        jsonc,
        jsonc || cfg.story_completion == StoryCompletion::Boxes,
    );
    // In the user's tree, HEAD moves are recorded for a resume (a lane's
    // HEAD is never reverted by one).
    if env.lane.is_none()
        && let (Some(cp), Some(c)) = (&env.checkpointer, &checkpoint)
    {
        run.head = Some(HeadWatch::new(cp, c));
    }
    let exit = run.supervise(env, tasks, req, &text, transcript, emit);
    after_agent(env, req, &exit, &text, &learned_before, emit);
    let mut receipt = Receipt::from_exit(&exit);
    receipt.permissions = (run.permissions.asked > 0).then_some(run.permissions);
    let outcome = verdict(env, req, &exit, &run, checkpoint.as_ref(), emit);

    if outcome.is_completed() {
        let fatal = record_completed(
            env,
            tasks,
            req,
            &outcome,
            receipt,
            checkpoint.as_ref(),
            emit,
        );
        return AttemptReport { outcome, fatal };
    }
    emit(LoopEvent::TaskFailed {
        task: id.clone(),
        attempt: req.attempt,
        outcome: outcome.clone(),
        receipt,
    });
    let fatal = put_back(
        env,
        tasks,
        req,
        checkpoint.as_ref(),
        &run.others_changed,
        emit,
    );
    AttemptReport { outcome, fatal }
}

/// What the agent left besides its work: files it planted for spectr's
/// own git (swept), and its learnings (what it appended to the file, the
/// `<learning>`s of its final answer, a sandboxed agent's inbox).
fn after_agent(
    env: &AttemptEnv<'_>,
    req: &AttemptRequest<'_>,
    exit: &AgentExit,
    prompt: &str,
    learned_before: &str,
    emit: &mut dyn FnMut(LoopEvent),
) {
    let (cfg, id) = (env.cfg, req.task);
    let learnings_path = learnings::path(&cfg.change.dir);
    sweep_planted(&cfg.workdir, id, emit);
    // What grew in the user's file during the attempt is this agent's only in
    // the user's tree: beside a lane, other lanes' learnings arrive there
    // meanwhile (a lane's own come through its lane's file).
    let grown = env.lane.is_none().then_some(learned_before);
    record_learnings(
        &learnings_path,
        grown,
        id,
        exit.final_answer
            .as_deref()
            .map(|a| learnings::extract(a, prompt)),
        emit,
    );
    // A sandboxed agent's `spectr learn` wrote its attempt's inbox.
    if cfg.sandbox.is_some() {
        let inbox = learnings::inbox(&cfg.attempt_dir(id, req.attempt));
        report_imported(
            learnings::import(&inbox, &learnings_path, id),
            &learnings_path,
            id,
            emit,
        );
    }
}

/// The attempt's outcome: the agent's verdict (its signal, its status
/// edit, its exit), then `--verify`, then a lane's merge-back (or the
/// user's-tree put-back), any of which can turn a completion into a
/// failure.
fn verdict(
    env: &AttemptEnv<'_>,
    req: &AttemptRequest<'_>,
    exit: &AgentExit,
    run: &Running,
    checkpoint: Option<&Checkpoint>,
    emit: &mut dyn FnMut(LoopEvent),
) -> Outcome {
    let cfg = env.cfg;
    let id = req.task;
    let mut outcome = judge(exit, run, id, cfg);

    if outcome.is_completed()
        && let Some(cmd) = &cfg.verify
        && let VerifyResult::Failed(reason) = verify::run(
            cmd,
            &cfg.workdir,
            cfg.task_timeout,
            &env.active,
            cfg.sandbox.as_deref(),
        )
    {
        outcome = Outcome::VerifyFailed { reason };
    }

    if let (Some(merge), Some(c)) = (env.merge, checkpoint) {
        merge.after_agent(id, req.attempt, c, emit);
    }
    if let Outcome::Completed { via } = outcome
        && let Some(merge) = env.merge
        && let Err(failed) = merge.merge(id, req.attempt, via, emit)
    {
        outcome = failed;
    }
    outcome
}

/// The task marked in_progress before its agent starts; a report when the
/// attempt ends there instead (someone completed it meanwhile, or the
/// status cannot be written: no agent runs on a task whose result could
/// not be recorded), its checkpoint dropped.
fn mark_in_progress(
    env: &AttemptEnv<'_>,
    tasks: &mut TaskSet,
    req: &AttemptRequest<'_>,
    checkpoint: Option<&Checkpoint>,
    emit: &mut dyn FnMut(LoopEvent),
) -> Option<AttemptReport> {
    let id = req.task;
    match set_status_fresh(tasks, id, TaskStatus::InProgress) {
        Ok(()) => None,
        Err(StatusWrite::AlreadyCompleted) => {
            // Someone completed it between our read and our write: done.
            if let (Some(cp), Some(c)) = (&env.checkpointer, checkpoint) {
                let _ = cp.drop(c);
            }
            let via = CompletedVia::Status;
            Some(ended_early(req, Outcome::Completed { via }, emit))
        }
        Err(StatusWrite::Failed(e)) => {
            // No agent starts on a task whose result could not be recorded.
            if let (Some(cp), Some(c)) = (&env.checkpointer, checkpoint) {
                let _ = cp.drop(c);
            }
            let message = format!(
                "could not mark task {id} in_progress in its tasks file: {e}. Make the file writable, then run the same command again"
            );
            let mut report = ended_early(
                req,
                Outcome::Stopped {
                    action: StopAction::Quit,
                },
                emit,
            );
            emit(LoopEvent::Error {
                task: Some(id.clone()),
                message: message.clone(),
            });
            report.fatal = Some(message);
            Some(report)
        }
    }
}

/// A completed attempt: the judgement recorded and the status written (in
/// the order a resume honours), the checkpoint dropped meanwhile. What
/// stops the run, if the status cannot be written.
fn record_completed(
    env: &AttemptEnv<'_>,
    tasks: &mut TaskSet,
    req: &AttemptRequest<'_>,
    outcome: &Outcome,
    receipt: Receipt,
    checkpoint: Option<&Checkpoint>,
    emit: &mut dyn FnMut(LoopEvent),
) -> Option<String> {
    let id = req.task;
    let completed = LoopEvent::TaskCompleted {
        task: id.clone(),
        attempt: req.attempt,
        outcome: outcome.clone(),
        receipt,
    };
    // Also when the agent already wrote it: this re-aggregates the
    // containers. The checkpoint is no longer needed: dropped meanwhile.
    let status = if env.lane.is_none() && env.cfg.verify.is_none() {
        // In the user's tree the status goes first, so a task's commit
        // (made as the judgement is recorded) finds the tree as the run
        // leaves it, and the next checkpoint can reuse that snapshot. A
        // crash in between is safe: without `--verify` a resume counts an
        // attempt in flight whose tasks file says completed as completed,
        // never reverting it (with it, the judgement must go first).
        let status = set_status_fresh(tasks, id, TaskStatus::Completed);
        // Its refs go with the next ref transaction (the task's commit, or
        // the next checkpoint): a git command fewer per task.
        if let (Some(cp), Some(c)) = (&env.checkpointer, checkpoint) {
            let _ = cp.drop_soon(c);
        }
        emit(completed);
        status
    } else {
        // The judgement is saved (in the session) before the tasks file is
        // written: a crash in between leaves a completed task that a resume
        // writes, never one it reverts and runs again.
        emit(completed);
        match (&env.checkpointer, checkpoint) {
            (Some(cp), Some(c)) => {
                let done = || set_status_fresh(tasks, id, TaskStatus::Completed);
                crate::checkpoint::both(|| cp.drop(c), done).1
            }
            _ => set_status_fresh(tasks, id, TaskStatus::Completed),
        }
    };
    match status {
        Err(StatusWrite::Failed(e)) => {
            let message = format!(
                "task {id} is completed, but its status could not be written to the tasks file: {e}"
            );
            emit(LoopEvent::Error {
                task: Some(id.clone()),
                message: message.clone(),
            });
            Some(message)
        }
        _ => None,
    }
}

/// A failed attempt's tree put back to its checkpoint, the status edits
/// others made meanwhile written again. What stops the run, if the tree
/// cannot be put back.
fn put_back(
    env: &AttemptEnv<'_>,
    tasks: &mut TaskSet,
    req: &AttemptRequest<'_>,
    checkpoint: Option<&Checkpoint>,
    others_changed: &BTreeMap<TaskId, TaskStatus>,
    emit: &mut dyn FnMut(LoopEvent),
) -> Option<String> {
    let fatal = restore(env, tasks, req.task, req.attempt, checkpoint, emit);
    if fatal.is_none() && checkpoint.is_some() {
        keep_status_edits(tasks, others_changed, emit);
    }
    fatal
}

/// Reports what the agent appended to the learnings file, then appends the
/// learnings of its final answer (unless already there).
/// `before`: the file as the attempt began, when what was appended since is
/// the agent's; `from_answer`: `<learning>` texts of its final answer.
fn record_learnings(
    path: &std::path::Path,
    before: Option<&str>,
    id: &TaskId,
    from_answer: Option<Vec<String>>,
    emit: &mut dyn FnMut(LoopEvent),
) {
    let after = learnings::read(path).unwrap_or_default();
    let added = before
        .and_then(|b| learnings::appended(b, &after))
        .unwrap_or_default();
    for text in learnings::split_entries(&added) {
        emit(LoopEvent::Learning {
            task: id.clone(),
            text,
        });
    }
    for text in from_answer.unwrap_or_default() {
        if after.contains(&text) {
            continue;
        }
        match learnings::append(path, Some(id), &text) {
            Ok(()) => emit(LoopEvent::Learning {
                task: id.clone(),
                text,
            }),
            Err(e) => emit(LoopEvent::Notice {
                level: NoticeLevel::Warn,
                message: format!(
                    "could not save a learning of task {id} to {}: {e}",
                    path.display()
                ),
            }),
        }
    }
}

/// Says what [`learnings::import`] moved into `into`: each learning, or why
/// it could not be saved.
pub(crate) fn report_imported(
    moved: Vec<(String, std::io::Result<()>)>,
    into: &std::path::Path,
    task: &TaskId,
    emit: &mut dyn FnMut(LoopEvent),
) {
    for (text, written) in moved {
        emit(match written {
            Ok(()) => LoopEvent::Learning {
                task: task.clone(),
                text,
            },
            Err(e) => LoopEvent::Notice {
                level: NoticeLevel::Warn,
                message: format!(
                    "could not save a learning of task {task} to {}: {e}",
                    into.display()
                ),
            },
        });
    }
}

/// The revert put the tasks files back too; status edits made to other tasks
/// while the agent ran (a person marking a task done, say) are written again,
/// so they are not lost with the failed attempt.
fn keep_status_edits(
    tasks: &mut TaskSet,
    edits: &BTreeMap<TaskId, TaskStatus>,
    emit: &mut dyn FnMut(LoopEvent),
) {
    let mut kept = Vec::new();
    for (other, status) in edits {
        let is_leaf = tasks.task(other).is_some_and(|t| !t.is_container());
        if is_leaf && tasks.task(other).is_some_and(|t| t.status != *status) {
            match set_status_fresh(tasks, other, *status) {
                Ok(()) => kept.push(format!("{other} {status}")),
                Err(StatusWrite::AlreadyCompleted) => {}
                Err(StatusWrite::Failed(e)) => emit(LoopEvent::Notice {
                    level: NoticeLevel::Warn,
                    message: format!("could not keep the edit of task {other} ({status}): {e}"),
                }),
            }
        }
    }
    if !kept.is_empty() {
        emit(LoopEvent::Notice {
            level: NoticeLevel::Info,
            message: format!(
                "kept status edits made to other tasks during the attempt: {}",
                kept.join(", ")
            ),
        });
    }
}

/// Reports an attempt that ended before any agent started.
fn ended_early(
    req: &AttemptRequest<'_>,
    outcome: Outcome,
    emit: &mut dyn FnMut(LoopEvent),
) -> AttemptReport {
    emit(LoopEvent::attempt_ended(
        req.task.clone(),
        req.attempt,
        outcome.clone(),
        Receipt::none(),
    ));
    AttemptReport {
        outcome,
        fatal: None,
    }
}

/// Keeps the failed attempt's work under its own ref and puts the tree back.
pub fn restore(
    env: &AttemptEnv<'_>,
    tasks: &mut TaskSet,
    id: &TaskId,
    attempt: u32,
    checkpoint: Option<&Checkpoint>,
    emit: &mut dyn FnMut(LoopEvent),
) -> Option<String> {
    let (Some(cp), Some(c)) = (&env.checkpointer, checkpoint) else {
        return None;
    };
    let failed_ref = cp.failed_ref_name(&env.cfg.change.id, id.as_str(), attempt);
    match cp.revert(c, &failed_ref) {
        Ok(r) => {
            for message in &r.notices {
                emit(LoopEvent::Notice {
                    level: NoticeLevel::Info,
                    message: message.clone(),
                });
            }
            emit(LoopEvent::Reverted {
                task: id.clone(),
                attempt,
                failed_ref: r.failed_ref,
                files_restored: r.files_restored,
                files_removed: r.files_removed,
            });
            if let Ok(fresh) = TaskSet::load(&tasks.change_dir) {
                *tasks = fresh;
            }
            None
        }
        Err(e) => {
            let message = format!(
                "could not restore the checkpoint of task {id} (attempt {attempt}): {e}; the work tree is as the agent left it, and the checkpoint is {}",
                c.refname
            );
            emit(LoopEvent::Error {
                task: Some(id.clone()),
                message: message.clone(),
            });
            Some(message)
        }
    }
}

/// Removes a `commondir` an agent created in the user's git folder, saying
/// so (see [`crate::ralph::sandbox::sweep`]): while it runs, as soon as it is
/// seen (another git there, the user's or an editor's, would follow it), and
/// when it ends.
fn sweep_planted(workdir: &std::path::Path, id: &TaskId, emit: &mut dyn FnMut(LoopEvent)) {
    if let Some(planted) = crate::ralph::sandbox::sweep(workdir) {
        emit(LoopEvent::Notice {
            level: NoticeLevel::Warn,
            message: format!("{id}: {planted}"),
        });
    }
}

/// State of one running agent as the attempt watches it.
struct Running {
    known: Known,
    /// Statuses of other tasks that changed while the agent ran.
    others_changed: BTreeMap<TaskId, TaskStatus>,
    /// Set while the tasks files fail to parse; cleared by a good read.
    load_error: Option<String>,
    /// Whether a completed status ends the attempt early. Not for markdown
    /// checklists: ticking the last box is not a verified finish.
    early_stop: bool,
    /// Whether a completed status completes the task: tasks.jsonc's always;
    /// an OpenSpec story's ticked boxes only with `story_completion: boxes`
    /// (otherwise it takes the agent's completion signal).
    status_completes: bool,
    completion_seen: Option<Instant>,
    stop_action: Option<StopAction>,
    stopping: bool,
    /// HEAD as the attempt last saw it (in the user's tree).
    head: Option<HeadWatch>,
    /// An ACP agent's permission requests: asked, refused.
    permissions: crate::agent::receipt::Permissions,
}

impl Running {
    fn new(known: Known, early_stop: bool, status_completes: bool) -> Running {
        Running {
            known,
            others_changed: BTreeMap::new(),
            load_error: None,
            early_stop,
            status_completes,
            completion_seen: None,
            stop_action: None,
            stopping: false,
            head: None,
            permissions: crate::agent::receipt::Permissions::default(),
        }
    }

    /// Records a move of HEAD or the checkpoint's branch (a failed look is
    /// tried again at the next poll).
    fn check_head(&mut self, req: &AttemptRequest<'_>, emit: &mut dyn FnMut(LoopEvent)) {
        if let Some(watch) = self.head.as_mut()
            && let Ok(Some(seen)) = watch.poll()
        {
            emit(LoopEvent::HeadMoved {
                task: req.task.clone(),
                attempt: req.attempt,
                head: seen.head,
                branch: seen.branch,
                tip: seen.tip,
            });
        }
    }

    fn supervise(
        &mut self,
        env: &AttemptEnv<'_>,
        tasks: &mut TaskSet,
        req: &AttemptRequest<'_>,
        prompt_text: &str,
        transcript: std::path::PathBuf,
        emit: &mut dyn FnMut(LoopEvent),
    ) -> AgentExit {
        let cfg = env.cfg;
        let (agent, routed) = cfg.agent_for(tasks.task(req.task), req.fallback);
        let spawn_failed = |detail: String| AgentExit {
            ending: Ending::SpawnFailed { error: detail },
            duration: Duration::ZERO,
            result: None,
            final_answer: None,
            signal: None,
            rate_limited: None,
            stderr_tail: String::new(),
            session_id: None,
            model: None,
        };
        let mut spec = match provider::build_command(
            agent,
            prompt_text,
            &cfg.workdir,
            &cfg.attempt_dir(req.task, req.attempt),
        ) {
            Ok(s) => s,
            Err(e) => return spawn_failed(e.to_string()),
        };
        // Its task, for `spectr context` inside the agent.
        spec.env.push((
            crate::ralph::prompt::TASK_ENV.to_string(),
            req.task.to_string(),
        ));
        if let Some(lane) = &env.lane {
            spec.env.extend(lane.env.iter().cloned());
        }
        if let Some(sandbox) = &cfg.sandbox {
            // The attempt's own folder (a usage file, a prompt file, the
            // learnings inbox) stays writable inside spectr's read-only state
            // folder; made now, since only a folder that exists is bound.
            let dir = cfg.attempt_dir(req.task, req.attempt);
            let _ = std::fs::create_dir_all(&dir);
            spec.env.push((
                learnings::INBOX_ENV.to_string(),
                learnings::inbox(&dir).display().to_string(),
            ));
            spec = sandbox.wrap(spec, &[dir]);
        }
        let opts = SuperviseOptions {
            attempt_timeout: Some(cfg.task_timeout),
            idle_timeout: cfg.idle_timeout,
            result_grace: cfg.result_grace,
            kill_grace: cfg.kill_grace,
            transcript,
        };
        let running = match supervisor::start(spec, agent.kind, opts) {
            Ok(r) => r,
            Err(e) => return spawn_failed(e.to_string()),
        };
        let handle = running.handle.clone();
        let pid = handle.pid();
        env.active.add(handle.clone());
        // pid 0: the agent never started (its exit says why); there is no
        // process to record.
        if pid > 0 {
            emit(LoopEvent::AgentStarted {
                task: req.task.clone(),
                attempt: req.attempt,
                pid,
                start: handle.start_time(),
                agent: routed.map(str::to_owned),
            });
        }
        let poll = tick(POLL_INTERVAL);
        // Wakes the loop the moment HEAD or its reflog is written, or a
        // `commondir` appears in the git folder.
        let head_watcher = self.head.as_ref().map(|h| {
            TasksWatcher::shared_matching(&h.dirs(), |p| {
                watch::is_head_file(p) || p.file_name().is_some_and(|n| n == "commondir")
            })
        });
        let head_moved = head_watcher
            .as_ref()
            .map_or_else(never, |w| w.changed.clone());
        let exit = loop {
            // Wake on events and deadlines only: an idle agent costs nothing.
            let grace_over = match self.completion_seen {
                Some(seen) if !self.stopping => {
                    after(cfg.completion_grace.saturating_sub(seen.elapsed()))
                }
                _ => never(),
            };
            select! {
                recv(running.events) -> msg => match msg {
                    Ok(SupervisorEvent::Agents(events)) => {
                        // What an agent prints after a commit (its tool's
                        // result) is shown only once the commit is recorded:
                        // whoever acts on that output finds it in the session.
                        self.check_head(req, emit);
                        for event in &events {
                            if let crate::agent::AgentEvent::Permission { allowed, .. } = event {
                                self.permissions.asked += 1;
                                self.permissions.refused += u32::from(!allowed);
                            }
                        }
                        if let Some(batch) = env.agent_batch {
                            batch(req.task, req.attempt, events);
                        } else {
                            for event in events {
                                emit(LoopEvent::AgentEvent {
                                    task: req.task.clone(),
                                    attempt: req.attempt,
                                    agent: event,
                                });
                            }
                        }
                    }
                    Ok(SupervisorEvent::Exited(exit)) => break exit,
                    Err(_) => break spawn_failed("the agent supervisor stopped without reporting an exit".into()),
                },
                recv(env.watcher.changed) -> _ => self.rescan(tasks, req.task, emit),
                recv(head_moved) -> _ => {
                    self.check_head(req, emit);
                    sweep_planted(&cfg.workdir, req.task, emit);
                }
                recv(poll) -> _ => {
                    self.rescan(tasks, req.task, emit);
                    self.check_head(req, emit);
                    sweep_planted(&cfg.workdir, req.task, emit);
                }
                recv(&env.controls) -> c => if let Ok(c) = c {
                    // Pause and the like are the run's own business; never sent here.
                    let action = c.stop_action();
                    if let Some(a) = action && self.stop_action.is_none() {
                        self.stop_action = Some(a);
                        self.stopping = true;
                        handle.stop(match a {
                            StopAction::Quit => "quit requested",
                            StopAction::Restart => "restart requested",
                            StopAction::Skip => "skip requested",
                        });
                    }
                },
                recv(grace_over) -> _ => {}
            }
            if let Some(seen) = self.completion_seen
                && !self.stopping
                && seen.elapsed() >= cfg.completion_grace
            {
                self.stopping = true;
                handle.stop("task completed; the agent did not exit");
            }
        };
        env.active.remove(pid);
        self.rescan(tasks, req.task, emit);
        self.check_head(req, emit);
        exit
    }

    /// Re-reads the tasks files, if they changed, and reports every status
    /// that changed.
    fn rescan(&mut self, tasks: &mut TaskSet, current: &TaskId, emit: &mut dyn FnMut(LoopEvent)) {
        // A file caught mid-write fails to parse: keep the last good view and
        // look again at the next notification or poll.
        match tasks.refresh() {
            Ok(false) => {
                self.load_error = None;
                return;
            }
            Ok(true) => self.load_error = None,
            Err(e) => {
                self.load_error = Some(e.to_string());
                return;
            }
        }
        for (id, status) in self.known.changes(tasks) {
            // Completion alone ends a markdown story only once the agent exits.
            if !self.early_stop && &id == current {
                continue;
            }
            emit(LoopEvent::StatusChanged {
                task: id.clone(),
                status,
            });
            if &id != current {
                self.others_changed.insert(id, status);
            } else if status == TaskStatus::Completed && self.completion_seen.is_none() {
                self.completion_seen = Some(Instant::now());
            }
        }
    }
}

fn judge(exit: &AgentExit, run: &Running, id: &TaskId, cfg: &RunConfig) -> Outcome {
    let status_done = run.known.get(id) == Some(TaskStatus::Completed);
    let failed_signal = match &exit.signal {
        Some(CompletionSignal::Failed(reason)) => Some(reason.clone()),
        _ => None,
    };
    if let Some(err) = &run.load_error {
        // Judged broken so the revert repairs the file for the next attempt.
        return Outcome::Abnormal {
            detail: format!("the tasks file no longer parses after the attempt: {err}"),
        };
    }
    if status_done && run.status_completes && failed_signal.is_none() {
        return Outcome::Completed {
            via: CompletedVia::Status,
        };
    }
    if let Some(action) = run.stop_action {
        return Outcome::Stopped { action };
    }
    if let Some(reason) = failed_signal {
        return Outcome::Failed { reason };
    }
    // Its tools were denied or withheld: whatever it claims, it did nothing.
    if let Some(reason) = exit.result.as_ref().and_then(|r| r.tools_denied()) {
        return Outcome::Failed {
            reason: reason.to_string(),
        };
    }
    // COMPLETE counts when the agent ended cleanly (or we stopped it after its
    // result); a crash after the words is not a finished task.
    let clean_end = matches!(
        exit.ending,
        Ending::Exited { code: 0 } | Ending::Stopped { .. }
    );
    if exit.signal == Some(CompletionSignal::Complete) && clean_end {
        return Outcome::Completed {
            via: CompletedVia::Signal,
        };
    }
    if let Some(limit) = &exit.rate_limited {
        return Outcome::RateLimited {
            resets_at: limit.resets_at,
        };
    }
    // The agent's own words: its failed result's message, else its last stderr lines.
    let said = exit.agent_error();
    let with_stderr = |s: String| match &said {
        Some(said) => format!("{s}: {said}"),
        None => s,
    };
    match &exit.ending {
        Ending::AttemptTimeout => Outcome::TimedOut {
            detail: format!(
                "no completion within --task-timeout {}",
                humantime::format_duration(cfg.task_timeout)
            ),
        },
        Ending::IdleTimeout => Outcome::TimedOut {
            detail: format!(
                "no output for --idle-timeout {}",
                cfg.idle_timeout
                    .map(|d| humantime::format_duration(d).to_string())
                    .unwrap_or_default()
            ),
        },
        Ending::SpawnFailed { error } => Outcome::Abnormal {
            detail: format!("the agent could not start: {error}"),
        },
        Ending::Exited { code } if *code != 0 => Outcome::Abnormal {
            detail: with_stderr(format!(
                "the agent exited with code {code} and no completion signal"
            )),
        },
        // pi exits 0 when every model call failed: its result says so.
        Ending::Exited { .. } if exit.result.as_ref().is_some_and(|r| r.is_error) => {
            Outcome::Abnormal {
                detail: with_stderr("the agent exited with code 0 but its run failed".to_string()),
            }
        }
        // A failure with a reason, so the retry's prompt says what was missing.
        Ending::Exited { .. } if status_done => Outcome::Failed {
            reason: "the story's boxes are ticked, but the agent ended without a completion \
signal: a story completes when the agent, having verified its work, ends its final answer with \
<promise>COMPLETE</promise>"
                .to_string(),
        },
        Ending::Exited { .. } => Outcome::Abnormal {
            detail: with_stderr("the agent exited without a completion signal".to_string()),
        },
        Ending::Signaled { signal } => Outcome::Abnormal {
            detail: format!("the agent was killed by signal {signal}"),
        },
        Ending::Stopped { reason } => Outcome::Abnormal {
            detail: format!("the agent was stopped: {reason}"),
        },
    }
}

#[cfg(test)]
mod known_tests {
    use super::*;

    fn write(dir: &std::path::Path, tasks: &[(&str, &str)]) {
        let list: Vec<String> = tasks
            .iter()
            .map(|(id, s)| {
                format!("{{\"id\": \"{id}\", \"section\": \"S\", \"description\": \"d\", \"status\": \"{s}\"}}")
            })
            .collect();
        let text = format!("{{\"version\": 1, \"tasks\": [{}]}}", list.join(", "));
        std::fs::write(dir.join("tasks.jsonc"), text).unwrap();
    }

    #[test]
    fn status_edits_and_reshaped_files_are_both_seen() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), &[("1.1", "pending"), ("1.2", "pending")]);
        let mut tasks = TaskSet::load(dir.path()).unwrap();
        let mut known = Known::of(&tasks);
        assert!(known.changes(&tasks).is_empty());

        // A status edit: the same tasks side by side.
        write(dir.path(), &[("1.1", "pending"), ("1.2", "completed")]);
        tasks.reload().unwrap();
        let changed = known.changes(&tasks);
        assert_eq!(changed, vec![(TaskId::from("1.2"), TaskStatus::Completed)]);
        assert!(known.changes(&tasks).is_empty(), "seen once, not again");

        // Tasks added and removed: a new task counts as changed, a removed
        // one keeps its last status.
        write(dir.path(), &[("1.1", "in_progress"), ("1.3", "pending")]);
        tasks.reload().unwrap();
        let changed = known.changes(&tasks);
        assert_eq!(
            changed,
            vec![
                (TaskId::from("1.1"), TaskStatus::InProgress),
                (TaskId::from("1.3"), TaskStatus::Pending)
            ]
        );
        assert_eq!(known.get(&TaskId::from("1.2")), Some(TaskStatus::Completed));
        assert_eq!(
            known.get(&TaskId::from("1.1")),
            Some(TaskStatus::InProgress)
        );
        assert!(known.changes(&tasks).is_empty());
    }
}
