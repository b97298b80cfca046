//! What `spectr report` tells about a run: built from its journal
//! ([`crate::ralph::run_journal`]) alone, a pure fold over the entries. The
//! files each attempt changed need git; the caller fills them in with
//! [`RunReport::fill_files`], a function that diffs two trees and one that
//! reads the files a commit changes.

use crate::agent::receipt::Receipt;
use crate::model::TaskId;
use crate::ralph::budget::BudgetUse;
use crate::ralph::event::{LoopEvent, Outcome, RunEnd, Totals};
use crate::ralph::run_journal::Entry;
use serde::Serialize;
use std::collections::BTreeMap;

#[derive(Debug, Clone, Default, Serialize)]
pub struct RunReport {
    pub change: String,
    pub agent: String,
    /// Runs of the session: the first and each resume.
    pub runs: usize,
    /// When each run started.
    pub run_starts_ms: Vec<u64>,
    pub first_ms: Option<u64>,
    pub last_ms: Option<u64>,
    /// Tasks in the order they first started.
    pub tasks: Vec<TaskReport>,
    pub learnings: Vec<(TaskId, String)>,
    /// Parallel runs: per lane, what merged and what conflicted.
    pub lanes: Vec<LaneReport>,
    /// The last run's summary, when it got to one.
    pub totals: Option<Totals>,
    pub end: Option<RunEnd>,
    pub budget: Option<BudgetUse>,
    pub errors: Vec<String>,
    /// Whether any attempt ran in a lane (`--jobs`).
    pub parallel: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct TaskReport {
    pub task: TaskId,
    /// Its section's title (an OpenSpec story's own title).
    pub section: String,
    pub description: String,
    /// The lane it ran in, or its top-level section's number.
    pub lane: String,
    pub attempts: Vec<AttemptReport>,
    /// Why it was skipped, when it was.
    pub skipped: Option<String>,
    /// Its commit on the user's branch (`--commit task`).
    pub commit: Option<String>,
    /// Paths its change overlapped the user's uncommitted work in: left
    /// out of its commit, uncommitted in the user's tree.
    pub left_out: Vec<String>,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct AttemptReport {
    pub attempt: u32,
    /// Which run of the session it belonged to (1: the first).
    pub run: usize,
    pub started_ms: Option<u64>,
    pub ended_ms: Option<u64>,
    pub outcome: Option<Outcome>,
    pub receipt: Option<Receipt>,
    /// The tree before it (its checkpoint's commit).
    pub checkpoint: Option<String>,
    /// Where its work was kept when it failed.
    pub failed_ref: Option<String>,
    /// The files its merge-back wrote (lanes).
    pub merged: Option<Vec<String>>,
    /// The task's commit that holds its work (`--commit task`): its files
    /// are read from it.
    pub commit: Option<String>,
    /// A lane's task run in the user's own tree (lanes taking turns).
    pub in_place: bool,
    /// Run in a lane's work tree: its work reached the user's tree by its
    /// merge alone.
    pub in_lane: bool,
    pub resolving: bool,
    /// Its agent when not the run's (a route's, or a fallback's).
    pub agent: Option<String>,
    /// The agent it was moved from, at a limit (`ralph: fallback:`).
    pub moved_from: Option<String>,
    /// A remote lane's attempt: how long its engine queued it.
    pub queued_ms: Option<u64>,
    /// The files it changed, once filled in.
    pub files: Vec<String>,
    /// Why the files are not known, or what they were compared with.
    pub files_note: Option<String>,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct LaneReport {
    pub lane: String,
    pub merged: Vec<TaskId>,
    pub conflicted: Vec<TaskId>,
    /// Completed in the user's own tree while the lanes took turns.
    pub in_place: Vec<TaskId>,
}

/// The paths that differ between an attempt's checkpoint and what came
/// after it, or why they are not known.
pub type DiffFn<'d> = dyn FnMut(&str, After<'_>) -> Result<Vec<String>, String> + 'd;

/// The paths a commit changes, or why they cannot be read (the commit not
/// in the repository, no repository).
pub type CommitFilesFn<'d> = dyn FnMut(&str) -> Result<Vec<String>, String> + 'd;

/// The other side of an attempt's diff.
pub enum After<'a> {
    /// A commit or ref.
    Rev(&'a str),
    /// The work tree as it is now.
    WorkTree,
}

impl AttemptReport {
    /// A short name of how it ended.
    pub fn kind(&self) -> &'static str {
        match &self.outcome {
            None => "unfinished",
            Some(Outcome::Completed { .. }) => "completed",
            Some(Outcome::Conflict { .. }) => "conflict",
            Some(Outcome::RateLimited { .. }) => "rate_limited",
            Some(Outcome::Stopped { .. }) => "stopped",
            Some(Outcome::GitError { .. }) => "git_error",
            Some(_) => "failed",
        }
    }
}

impl RunReport {
    pub fn build(entries: &[Entry]) -> RunReport {
        let mut r = RunReport::default();
        let mut index: BTreeMap<TaskId, usize> = BTreeMap::new();
        let mut lanes: BTreeMap<String, LaneReport> = BTreeMap::new();
        // A fallback is said before the attempt it moves starts.
        let mut moved: BTreeMap<TaskId, String> = BTreeMap::new();
        for Entry { at_ms, event } in entries {
            if at_ms.is_some() {
                r.first_ms = r.first_ms.or(*at_ms);
                r.last_ms = *at_ms;
            }
            match event {
                LoopEvent::RunStarted { change, agent, .. } => {
                    r.change.clone_from(change);
                    r.agent.clone_from(agent);
                    r.runs += 1;
                    r.run_starts_ms.extend(*at_ms);
                }
                LoopEvent::TaskStarted {
                    task,
                    section,
                    description,
                    attempt,
                    lane,
                    worktree,
                    ..
                } => {
                    r.parallel |= lane.is_some();
                    let in_place = lane.is_some() && worktree.is_none();
                    let at = *index.entry(task.clone()).or_insert_with(|| {
                        r.tasks.push(TaskReport {
                            task: task.clone(),
                            section: section.clone(),
                            description: description.clone(),
                            lane: lane
                                .clone()
                                .unwrap_or_else(|| crate::ralph::lanes::lane_key(task)),
                            attempts: Vec::new(),
                            skipped: None,
                            commit: None,
                            left_out: Vec::new(),
                        });
                        r.tasks.len() - 1
                    });
                    r.tasks[at].attempts.push(AttemptReport {
                        attempt: *attempt,
                        run: r.runs.max(1),
                        started_ms: *at_ms,
                        in_place,
                        in_lane: lane.is_some() && worktree.is_some(),
                        moved_from: moved.remove(task),
                        ..AttemptReport::default()
                    });
                }
                LoopEvent::AttemptRunning {
                    task,
                    attempt,
                    queued_ms,
                    ..
                } => {
                    if let Some(a) = find(&mut r, &index, task, *attempt) {
                        a.queued_ms = Some(*queued_ms);
                    }
                }
                LoopEvent::AgentFallback { task, from, .. } => {
                    moved.insert(task.clone(), from.clone());
                }
                LoopEvent::AgentStarted {
                    task,
                    attempt,
                    agent: Some(agent),
                    ..
                } => {
                    if let Some(a) = find(&mut r, &index, task, *attempt) {
                        a.agent = Some(agent.clone());
                    }
                }
                LoopEvent::Checkpoint {
                    task,
                    attempt,
                    checkpoint,
                } => {
                    if let Some(a) = find(&mut r, &index, task, *attempt) {
                        a.checkpoint = Some(checkpoint.commit.clone());
                    }
                }
                LoopEvent::Resolving { task, attempt, .. } => {
                    if let Some(a) = find(&mut r, &index, task, *attempt) {
                        a.resolving = true;
                    }
                }
                LoopEvent::Merged {
                    task,
                    attempt,
                    lane,
                    files,
                } => {
                    if let Some(a) = find(&mut r, &index, task, *attempt) {
                        a.merged = Some(files.clone());
                    }
                    let l = lanes.entry(lane.clone()).or_default();
                    l.lane.clone_from(lane);
                    if !l.merged.contains(task) {
                        l.merged.push(task.clone());
                    }
                }
                LoopEvent::TaskCompleted {
                    task,
                    attempt,
                    outcome,
                    receipt,
                }
                | LoopEvent::TaskFailed {
                    task,
                    attempt,
                    outcome,
                    receipt,
                } => {
                    if let (Outcome::Conflict { .. }, Some(&at)) = (outcome, index.get(task)) {
                        let lane = r.tasks[at].lane.clone();
                        let l = lanes.entry(lane.clone()).or_default();
                        l.lane = lane;
                        if !l.conflicted.contains(task) {
                            l.conflicted.push(task.clone());
                        }
                    }
                    let mut in_place = false;
                    if let Some(a) = find(&mut r, &index, task, *attempt) {
                        a.outcome = Some(outcome.clone());
                        a.receipt = Some(receipt.clone());
                        a.ended_ms = *at_ms;
                        in_place = a.in_place && outcome.is_completed();
                    }
                    if let (true, Some(&at)) = (in_place, index.get(task)) {
                        let lane = r.tasks[at].lane.clone();
                        let l = lanes.entry(lane.clone()).or_default();
                        l.lane = lane;
                        if !l.in_place.contains(task) {
                            l.in_place.push(task.clone());
                        }
                    }
                }
                LoopEvent::Reverted {
                    task,
                    attempt,
                    failed_ref,
                    ..
                } => {
                    if let Some(a) = find(&mut r, &index, task, *attempt) {
                        a.failed_ref = Some(failed_ref.clone());
                    }
                }
                LoopEvent::TaskSkipped { task, reason, .. } => {
                    if let Some(&at) = index.get(task) {
                        r.tasks[at].skipped = Some(reason.clone());
                    }
                }
                LoopEvent::TaskCommitted {
                    task,
                    attempt,
                    commit: Some(commit),
                    left_out,
                    ..
                } => {
                    if let Some(&at) = index.get(task) {
                        r.tasks[at].commit = Some(commit.clone());
                        r.tasks[at].left_out.clone_from(left_out);
                    }
                    if let Some(a) = find(&mut r, &index, task, *attempt) {
                        a.commit = Some(commit.clone());
                    }
                }
                LoopEvent::Learning { task, text } => {
                    r.learnings.push((task.clone(), text.clone()));
                }
                LoopEvent::Error { message, .. } => r.errors.push(message.clone()),
                LoopEvent::Summary {
                    end,
                    totals,
                    budget,
                    ..
                } => {
                    r.end = Some(*end);
                    r.totals = Some(totals.clone());
                    r.budget = *budget;
                }
                _ => {}
            }
        }
        if r.parallel {
            r.lanes = lanes.into_values().collect();
        }
        if r.totals.is_none() {
            r.totals = Some(r.counted_totals());
        }
        r
    }

    /// Totals counted from the attempts recorded, for a run that never got
    /// to its summary (killed): what the journal shows was spent and done.
    fn counted_totals(&self) -> Totals {
        let mut t = Totals::default();
        for task in &self.tasks {
            let last = task.attempts.iter().rev().find_map(|a| a.outcome.as_ref());
            match last {
                Some(Outcome::Completed { .. }) => t.completed += 1,
                _ if task.skipped.is_some() => t.skipped += 1,
                // Failed so far, maybe retried later: not done.
                _ => t.remaining += 1,
            }
            for a in &task.attempts {
                t.attempts += 1;
                if matches!(a.outcome, Some(Outcome::Conflict { .. })) {
                    t.conflicts += 1;
                }
                if a.resolving {
                    t.resolve_attempts += 1;
                }
                if let Some(receipt) = &a.receipt {
                    crate::ralph::event::add_receipt(&mut t, receipt);
                }
            }
        }
        if let (Some(first), Some(last)) = (self.first_ms, self.last_ms) {
            t.duration_ms = last.saturating_sub(first);
        }
        t
    }

    /// Fills in the files each attempt changed: a committed task's are its
    /// commit's (`commit_files` reads them, or says why it cannot); a
    /// lane's merge-back says them; otherwise they are the difference
    /// between its checkpoint and what came after it (its failed ref when
    /// it failed, else the next attempt's checkpoint, else the work tree
    /// now). `diff` returns the paths that differ, or why it cannot. A
    /// commit that cannot be read falls back to the rest, and says so.
    pub fn fill_files(&mut self, diff: &mut DiffFn<'_>, commit_files: &mut CommitFilesFn<'_>) {
        // Checkpoints in the order they were taken (without lanes one
        // attempt at a time: the next checkpoint is the tree this one left).
        let mut order: Vec<(u64, String)> = self
            .tasks
            .iter()
            .flat_map(|t| &t.attempts)
            .filter_map(|a| Some((a.started_ms?, a.checkpoint.clone()?)))
            .collect();
        order.sort();
        for a in self.tasks.iter_mut().flat_map(|t| t.attempts.iter_mut()) {
            let Some(commit) = a.commit.clone() else {
                fill_from_checkpoints(a, &order, diff);
                continue;
            };
            match commit_files(&commit) {
                Ok(files) => {
                    a.files = files;
                    a.files_note = Some("in its commit".into());
                }
                Err(why) => {
                    fill_from_checkpoints(a, &order, diff);
                    let unread = format!("its commit could not be read: {why}");
                    a.files_note = Some(match a.files_note.take() {
                        // The checkpoints could not be read either, and
                        // for the same reason (no repository): said once.
                        Some(note) if note == why => note,
                        Some(note) => format!("{unread}; {note}"),
                        None => unread,
                    });
                }
            }
        }
    }
}

/// An attempt's files from its merge-back or its checkpoints (see
/// [`RunReport::fill_files`]); `order`: every checkpoint, by its start.
fn fill_from_checkpoints(a: &mut AttemptReport, order: &[(u64, String)], diff: &mut DiffFn<'_>) {
    if let Some(files) = &a.merged {
        a.files.clone_from(files);
        return;
    }
    let Some(base) = a.checkpoint.clone() else {
        a.files_note = Some("no checkpoint".into());
        return;
    };
    let next = a.started_ms.and_then(|at| {
        order
            .iter()
            .find(|(t, c)| *t > at && *c != base)
            .map(|(_, c)| c.clone())
    });
    let completed = matches!(a.outcome, Some(Outcome::Completed { .. }));
    let after = match (&a.failed_ref, completed, &next) {
        (Some(r), _, _) => After::Rev(r),
        // A lane's completed work is known by its merge alone (an attempt
        // of the same session run one at a time, or in the user's tree, is
        // known by the checkpoints like any other).
        (None, true, _) if a.in_lane => {
            a.files_note = Some("not merged".into());
            return;
        }
        (None, true, Some(n)) => After::Rev(n),
        (None, true, None) => {
            a.files_note = Some("compared with the work tree now".into());
            After::WorkTree
        }
        (None, false, _) => return,
    };
    match diff(&base, after) {
        Ok(files) => a.files = files,
        Err(why) => a.files_note = Some(why),
    }
}

fn find<'r>(
    r: &'r mut RunReport,
    index: &BTreeMap<TaskId, usize>,
    task: &TaskId,
    attempt: u32,
) -> Option<&'r mut AttemptReport> {
    let at = *index.get(task)?;
    r.tasks[at]
        .attempts
        .iter_mut()
        .rev()
        .find(|a| a.attempt == attempt)
}
