//! Resuming after a crash, before the change's tasks are even read: stop the
//! agents the dead run left behind, settle the attempts it left in flight,
//! and put the tree back to their checkpoints (a crashed attempt may have
//! broken or deleted the tasks file or `proposal.md`).
//!
//! A revert also puts HEAD and its branch back. The moves the attempt was
//! seen to make while it ran (its own commits, a branch switch) are in the
//! session and reverted with it. Any other move since the checkpoint may be
//! the person's own (commits made after the crash), so it is never reset
//! silently: the caller decides (asks, or refuses without a terminal) from a
//! [`MovedHead`] naming only what was not seen.

use crate::agent::receipt::Receipt;
use crate::checkpoint::{Checkpoint, Checkpointer, CutShortMerge, HeadSeen};
use crate::model::{TaskId, TaskSet, TaskStatus};
use crate::process::ProcessTree;
use crate::ralph::event::{CompletedVia, LoopEvent, MergeWork, NoticeLevel, Outcome};
use crate::ralph::outbox::Outbox;
use crate::ralph::session::{AttemptRecord, Session};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// How long a leftover agent gets between TERM and KILL.
const LEFTOVER_GRACE: Duration = Duration::from_secs(3);

/// Stops the agents a crashed run left running (attempts that never ended).
/// Each is signalled only when its recorded pid and start time still match
/// (see [`ProcessTree`]). Returns one line per agent for the person.
pub fn stop_leftover_agents(session: &Session) -> Vec<String> {
    let mut said = Vec::new();
    for (task, record) in session.in_flight() {
        let saved = crate::process::members_file(Path::new(&record.transcript));
        let mut stop = |mut tree: ProcessTree, agent: String| {
            let found = tree.stop(LEFTOVER_GRACE);
            if found > 0 {
                said.push(format!(
                    "stopped {found} process{} left running by the interrupted attempt {} of task {task}{agent}",
                    if found == 1 { "" } else { "es" },
                    record.attempt
                ));
            }
        };
        let Some(pid) = record.agent_pid.filter(|p| *p > 0) else {
            // Killed before the session recorded its agent: the members the
            // supervisor saved at its start still lead to it.
            if let Some(tree) = ProcessTree::from_saved(&saved) {
                stop(tree, String::new());
            }
            continue;
        };
        // No start time recorded (an older session): the members the
        // supervisor saved name the agent with its start time.
        let adopted = ProcessTree::adopt(pid, record.agent_started)
            .or_else(|| ProcessTree::from_saved(&saved).filter(|t| t.pid() == pid));
        match adopted {
            Some(tree) => stop(tree.with_saved_members(&saved), format!(" (agent pid {pid})")),
            None => said.push(format!(
                "the session names pid {pid} as the agent of task {task}, but its identity cannot be verified (no start time recorded, or a pid spectr never signals); nothing was signalled: check `ps -s {pid}` yourself"
            )),
        }
    }
    said
}

/// HEAD or its branch moved since an interrupted attempt's checkpoint.
#[derive(Debug, Clone)]
pub struct MovedHead {
    pub task: TaskId,
    pub attempt: u32,
    /// What changed, one line each: the branch, and the commits (short id and
    /// subject) a revert would take off it.
    pub lines: Vec<String>,
    /// Where those commits stay reachable after a revert.
    pub failed_ref: String,
}

impl MovedHead {
    pub fn describe(&self) -> String {
        format!(
            "HEAD moved since attempt {} of task {} was checkpointed:\n  {}",
            self.attempt,
            self.task,
            self.lines.join("\n  ")
        )
    }
}

/// Why a resume could not settle the interrupted attempts.
#[derive(Debug, Clone)]
pub enum SettleError {
    /// HEAD moved and the answer was to stop; nothing was changed.
    Refused(String),
    /// Git failed (a revert, or reading HEAD).
    Failed(String),
}

/// What to do about a moved HEAD.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MovedChoice {
    /// Revert anyway: HEAD and the branch go back; the commits stay reachable
    /// from the failed ref.
    Rewind,
    /// Leave the tree and HEAD as they are; the attempt counts as ended
    /// abnormally and is not reverted.
    Keep,
    /// Stop without changing anything.
    Refuse,
}

/// Settles what the dead run left in flight, in this order: attempts whose
/// task the tasks file already calls `completed` are accepted (the run died
/// between the agent's edit and the judgement; not with `--verify`, which
/// must still pass), the others count as ended abnormally; then every
/// attempt not reverted yet goes back to its checkpoint. A moved HEAD is
/// decided on first, so a refusal changes nothing at all.
pub fn settle(
    out: &mut Outbox<'_>,
    change_dir: &Path,
    checkpointer: Option<&Checkpointer>,
    verify: bool,
    decide: &mut dyn FnMut(&MovedHead) -> MovedChoice,
) -> Result<(), SettleError> {
    let in_flight = out.session.in_flight();
    let accepted = accepted_attempts(&in_flight, change_dir, verify);
    let from_remote = match checkpointer {
        Some(cp) => fetch_remote_work(out, cp, &in_flight, &accepted),
        None => Vec::new(),
    };
    let in_flight: Vec<(TaskId, AttemptRecord)> = in_flight
        .into_iter()
        .filter(|(task, _)| !from_remote.iter().any(|(t, ..)| t == task))
        .collect();
    let finishing = match checkpointer {
        Some(cp) => plan_cut_short_merges(out, cp, &in_flight, &accepted),
        None => Vec::new(),
    };
    // Latest first: each revert restores the whole tree, so the earliest
    // checkpoint is the one that stands. Includes attempts judged but never
    // reverted (the run died in between).
    let mut to_revert: Vec<(TaskId, AttemptRecord)> = out
        .session
        .unreverted()
        .into_iter()
        .filter(|(task, _)| !accepted.contains(task))
        .filter(|(task, _)| !finishing.iter().any(|(t, ..)| t == task))
        .collect();
    to_revert.reverse();
    let (keep, moved_by_attempt) = match checkpointer {
        Some(cp) => decide_moved_heads(cp, &out.session.change, &to_revert, decide)?,
        None => (BTreeSet::new(), Vec::new()),
    };
    if let Some(cp) = checkpointer {
        claim_lane_stashes(out, cp, &in_flight);
    }
    end_in_flight(out, checkpointer, in_flight, &accepted, &finishing);
    say_moves_reverted(out, checkpointer, moved_by_attempt);
    revert_unreverted(out, checkpointer, to_revert, &keep)?;
    if let Some(cp) = checkpointer {
        for (task, record, work, cut) in finishing {
            finish_merge(out, cp, &task, &record, &work, &cut);
        }
        for (task, record, done) in from_remote {
            finish_remote(out, cp, &task, &record, done);
        }
    }
    Ok(())
}

/// A lane's merge the dead run had started: the task, its attempt, the
/// work it merges and the merge planned again.
type CutShort = (TaskId, AttemptRecord, MergeWork, CutShortMerge);

/// Attempts that count as completed: a lane attempt whose work was merged
/// passed everything (verify runs before the merge; reverting it could undo
/// other lanes' merges too), and, without `--verify`, one whose task the
/// tasks file marks completed.
fn accepted_attempts(
    in_flight: &[(TaskId, AttemptRecord)],
    change_dir: &Path,
    verify: bool,
) -> BTreeSet<TaskId> {
    let tasks = TaskSet::load(change_dir).ok();
    in_flight
        .iter()
        .filter(|(task, record)| {
            record.merged
                || !verify
                    && tasks
                        .as_ref()
                        .and_then(|t| t.task(task))
                        .is_some_and(|t| t.status == TaskStatus::Completed)
        })
        .map(|(task, _)| task.clone())
        .collect()
}

/// A remote lane's attempt whose worker went on after this run died and
/// pushed its work: brought home instead of running the agent again.
fn fetch_remote_work(
    out: &mut Outbox<'_>,
    cp: &Checkpointer,
    in_flight: &[(TaskId, AttemptRecord)],
    accepted: &BTreeSet<TaskId>,
) -> Vec<(TaskId, AttemptRecord, crate::ralph::lanes::remote::Finished)> {
    let mut from_remote = Vec::new();
    for (task, record) in in_flight {
        let Some(remote) = record.remote.as_ref().filter(|_| !accepted.contains(task)) else {
            continue;
        };
        let found = crate::ralph::lanes::remote::fetch_finished(
            cp,
            &out.session.change,
            &remote.remote,
            &remote.prefix,
            task.as_str(),
            record.attempt,
        );
        match found {
                Ok(Some(done)) => from_remote.push((task.clone(), record.clone(), done)),
                Ok(None) => {}
                Err(e) => out.emit(LoopEvent::Notice {
                    level: NoticeLevel::Warn,
                    message: format!(
                        "could not look for the work of task {task}'s remote attempt {} ({e}): the task runs again",
                        record.attempt
                    ),
                }),
            }
    }
    from_remote
}

/// A lane attempt cut short while merging its completed (and verified)
/// work: the same merge is planned again from the work it recorded and
/// finished afterwards, over what it wrote before the crash; its agent does
/// not run again. (Planned only: nothing is written before a moved HEAD is
/// decided on.)
fn plan_cut_short_merges(
    out: &mut Outbox<'_>,
    cp: &Checkpointer,
    in_flight: &[(TaskId, AttemptRecord)],
    accepted: &BTreeSet<TaskId>,
) -> Vec<CutShort> {
    let mut finishing: Vec<CutShort> = Vec::new();
    for (task, record) in in_flight {
        let (Some(work), Some(original)) = (&record.merge_work, &record.checkpoint) else {
            continue;
        };
        if accepted.contains(task) {
            continue;
        }
        let skip: Vec<PathBuf> = work.skip.iter().map(PathBuf::from).collect();
        match cp.replan_merge(original, &work.base, &work.theirs, &skip) {
                Ok(cut) => finishing.push((task.clone(), record.clone(), work.clone(), cut)),
                Err(e) => out.emit(LoopEvent::Notice {
                    level: NoticeLevel::Warn,
                    message: format!(
                        "the merge of task {task} that the last run left unfinished cannot be done again ({e}): it is undone from its checkpoint, and the task runs again"
                    ),
                }),
            }
    }
    finishing
}

/// HEAD moved since an attempt to revert was checkpointed: by the attempt
/// itself (seen and recorded: reverted with it), or by what nobody saw
/// (`decide` says: rewind, keep the tree as it is, or stop). The tasks
/// whose tree is kept, and the attempts whose own moves are reverted.
#[allow(clippy::type_complexity)]
fn decide_moved_heads(
    cp: &Checkpointer,
    change: &str,
    to_revert: &[(TaskId, AttemptRecord)],
    decide: &mut dyn FnMut(&MovedHead) -> MovedChoice,
) -> Result<(BTreeSet<TaskId>, Vec<(TaskId, u32)>), SettleError> {
    let mut keep: BTreeSet<TaskId> = BTreeSet::new();
    let mut moved_by_attempt = Vec::new();
    for (task, record) in to_revert {
        let Some(checkpoint) = &record.checkpoint else {
            continue;
        };
        let failed_ref = cp.failed_ref_name(change, task.as_str(), record.attempt);
        match moved_head(cp, checkpoint, task, record, &failed_ref, change)
            .map_err(SettleError::Failed)?
        {
            HeadCheck::Unmoved => {}
            HeadCheck::MovedByAttempt => moved_by_attempt.push((task.clone(), record.attempt)),
            HeadCheck::Unseen(moved) => match decide(&moved) {
                MovedChoice::Rewind => {}
                MovedChoice::Keep => {
                    keep.insert(task.clone());
                }
                MovedChoice::Refuse => return Err(SettleError::Refused(moved.describe())),
            },
        }
    }
    Ok((keep, moved_by_attempt))
}

/// A lane's agent may have used the stash every work tree shares: its
/// entries are claimed for it, and said.
fn claim_lane_stashes(
    out: &mut Outbox<'_>,
    cp: &Checkpointer,
    in_flight: &[(TaskId, AttemptRecord)],
) {
    let user_branch = cp.head_branch().ok().flatten();
    for (task, record) in in_flight {
        let Some(lane_cp) = &record.lane_checkpoint else {
            continue;
        };
        match cp.claim_agent_stash(lane_cp, user_branch.as_deref()) {
            Ok(kept) if kept.is_empty() => {}
            Ok(kept) => out.emit(LoopEvent::Notice {
                level: NoticeLevel::Info,
                message: crate::ralph::lanes::stash_notice(task, &kept),
            }),
            Err(e) => out.emit(LoopEvent::Notice {
                level: NoticeLevel::Warn,
                message: format!(
                    "the stash list may hold entries of the interrupted task {task}'s agent: {e}"
                ),
            }),
        }
    }
}

/// Each attempt the dead run left in flight ends: accepted ones as
/// completed (git's state left as a lane's merge leaves it), cut-short
/// merges as finishing, the others as ended abnormally.
fn end_in_flight(
    out: &mut Outbox<'_>,
    checkpointer: Option<&Checkpointer>,
    in_flight: Vec<(TaskId, AttemptRecord)>,
    accepted: &BTreeSet<TaskId>,
    finishing: &[CutShort],
) {
    for (task, record) in in_flight {
        if accepted.contains(&task) {
            let why = if record.merged {
                "its work was already merged into the work tree"
            } else {
                "the tasks file marks the task completed"
            };
            out.emit(LoopEvent::Notice {
                level: NoticeLevel::Info,
                message: format!(
                    "attempt {} of task {task} was in flight when the last run stopped, and {why}: it counts as completed",
                    record.attempt
                ),
            });
            // It ran in the user's tree (one at a time, or while the lanes
            // took turns): git's state is left as a lane's merge leaves it
            // (its commits kept), as the attempt itself would have.
            let in_place = record.worktree.is_none() && !record.merged;
            if let (Some(cp), Some(c), true) = (checkpointer, &record.checkpoint, in_place) {
                let change = out.session.change.clone();
                let keep =
                    crate::ralph::lanes::in_place_keep_ref(cp, &change, &task, record.attempt);
                let moved = !record.head_moves.is_empty();
                match cp.keep_tree_put_back_head(c, &keep, moved) {
                    Ok(None) => {}
                    Ok(Some(_)) => out.emit(LoopEvent::Notice {
                        level: NoticeLevel::Info,
                        message: format!(
                            "commits the agent of task {task} made in your tree are kept at {keep}; your branch is put back, and their work is in your tree uncommitted"
                        ),
                    }),
                    Err(e) => out.emit(LoopEvent::Notice {
                        level: NoticeLevel::Warn,
                        message: format!(
                            "task {task}'s work is in your tree, but HEAD and the index could not be put back as they were ({e}); check `git status` and `git log`"
                        ),
                    }),
                }
            }
            out.emit(LoopEvent::TaskCompleted {
                task: task.clone(),
                attempt: record.attempt,
                outcome: Outcome::Completed {
                    via: CompletedVia::Status,
                },
                receipt: Receipt::none(),
            });
            if let (Some(cp), Some(c)) = (checkpointer, &record.checkpoint) {
                let _ = cp.drop(c);
            }
            continue;
        }
        if finishing.iter().any(|(t, ..)| *t == task) {
            out.emit(LoopEvent::Notice {
                level: NoticeLevel::Info,
                message: format!(
                    "attempt {} of task {task} was merging its completed work into the work tree when the last run stopped: that merge is finished from the work it recorded, without running the agent again",
                    record.attempt
                ),
            });
            continue;
        }
        out.emit(LoopEvent::Notice {
            level: NoticeLevel::Warn,
            message: format!(
                "attempt {} of task {task} was in flight when the last run stopped (a force quit, a kill or a crash); it counts as interrupted, one of the task's tries",
                record.attempt
            ),
        });
        out.emit(LoopEvent::TaskFailed {
            task: task.clone(),
            attempt: record.attempt,
            outcome: Outcome::Abnormal {
                detail: format!(
                    "{}: the run stopped (a force quit, a kill or a crash) while this attempt was running",
                    crate::ralph::event::INTERRUPTED
                ),
            },
            receipt: Receipt::none(),
        });
    }
}

/// Says, for each attempt that moved HEAD itself, that the move is
/// reverted with it and where its commits stay.
fn say_moves_reverted(
    out: &mut Outbox<'_>,
    checkpointer: Option<&Checkpointer>,
    moved_by_attempt: Vec<(TaskId, u32)>,
) {
    for (task, attempt) in moved_by_attempt {
        let failed = checkpointer
            .map(|cp| cp.failed_ref_name(&out.session.change, task.as_str(), attempt))
            .unwrap_or_default();
        out.emit(LoopEvent::Notice {
            level: NoticeLevel::Info,
            message: format!(
                "attempt {attempt} of task {task} had moved HEAD (it committed or switched branches while it ran, as recorded then): that is reverted with it, and its commits stay reachable from {failed}"
            ),
        });
    }
}

/// Puts the tree back to each unreverted attempt's checkpoint (latest
/// first), unless its tree is kept (or there is no repository): then it
/// says so and marks it kept.
fn revert_unreverted(
    out: &mut Outbox<'_>,
    checkpointer: Option<&Checkpointer>,
    to_revert: Vec<(TaskId, AttemptRecord)>,
    keep: &BTreeSet<TaskId>,
) -> Result<(), SettleError> {
    for (task, record) in to_revert {
        let Some(checkpoint) = record.checkpoint.clone() else {
            continue;
        };
        let kept = match checkpointer {
            None => Some(format!(
                "attempt {} of task {task} was never reverted, and this run has no git repository to do it: the tree is as the agent left it (its checkpoint is {})",
                record.attempt, checkpoint.refname
            )),
            Some(_) if keep.contains(&task) => Some(format!(
                "kept the tree and HEAD as they are; attempt {} of task {task} is not reverted (its checkpoint stays at {})",
                record.attempt, checkpoint.refname
            )),
            Some(_) => None,
        };
        if let Some(message) = kept {
            out.emit(LoopEvent::Notice {
                level: NoticeLevel::Warn,
                message,
            });
            if let Some(a) = out.session.record_mut(&task).attempts.last_mut() {
                a.kept_tree = true;
            }
            out.save();
            continue;
        }
        let Some(cp) = checkpointer else { continue };
        let failed_ref = cp.failed_ref_name(&out.session.change, task.as_str(), record.attempt);
        match cp.revert_leaving_new_refs(&checkpoint, &failed_ref) {
            Ok(r) => {
                for message in r.notices {
                    out.emit(LoopEvent::Notice {
                        level: NoticeLevel::Info,
                        message,
                    });
                }
                out.emit(LoopEvent::Reverted {
                    task: task.clone(),
                    attempt: record.attempt,
                    failed_ref: r.failed_ref,
                    files_restored: r.files_restored,
                    files_removed: r.files_removed,
                });
            }
            Err(e) => {
                let message = format!(
                    "could not restore the checkpoint of task {task} (attempt {}): {e}; the work tree is as the agent left it, and the checkpoint is {}",
                    record.attempt, checkpoint.refname
                );
                return Err(SettleError::Failed(message));
            }
        }
    }
    Ok(())
}

/// A remote attempt that ended on its lane after this run died: its work,
/// fetched from the remote, is merged (it completed) or kept (it failed).
fn finish_remote(
    out: &mut Outbox<'_>,
    cp: &Checkpointer,
    task: &TaskId,
    record: &AttemptRecord,
    done: crate::ralph::lanes::remote::Finished,
) {
    let Some(remote) = &record.remote else {
        return;
    };
    out.emit(LoopEvent::Notice {
        level: NoticeLevel::Info,
        message: format!(
            "attempt {} of task {task} went on in its remote lane after the last run stopped and ended there ({}): its work is fetched from {}, not run again",
            record.attempt,
            done.outcome.describe(),
            remote.remote
        ),
    });
    if let Some(failed_ref) = &done.fetched.failed {
        out.emit(LoopEvent::Reverted {
            task: task.clone(),
            attempt: record.attempt,
            failed_ref: failed_ref.clone(),
            files_restored: 0,
            files_removed: 0,
        });
    }
    let Outcome::Completed { via } = done.outcome else {
        out.emit(LoopEvent::TaskFailed {
            task: task.clone(),
            attempt: record.attempt,
            outcome: done.outcome,
            receipt: Receipt::none(),
        });
        return;
    };
    let work = MergeWork {
        base: remote.base.clone(),
        theirs: done.fetched.tree.clone(),
        skip: remote.skip.clone(),
        via,
    };
    let lane_key = crate::ralph::lanes::lane_key(task);
    merge_left_over(
        out,
        cp,
        task,
        record.attempt,
        &lane_key,
        via,
        &|into, emit| into.merge(task, record.attempt, &work, emit),
    );
}

/// A merge [`merge_left_over`] does into the user's tree.
type LeftOverMerge<'a> = dyn Fn(&crate::ralph::lanes::MergeInto<'_>, &mut dyn FnMut(LoopEvent)) -> Result<(), Outcome>
    + 'a;

/// Ends the attempt of a merge this run does for a dead one (without the
/// lanes' gate: no lane runs yet): completed once `merge` wrote its work,
/// or what stopped it.
fn merge_left_over(
    out: &mut Outbox<'_>,
    cp: &Checkpointer,
    task: &TaskId,
    attempt: u32,
    lane_key: &str,
    via: CompletedVia,
    merge: &LeftOverMerge<'_>,
) {
    let change = out.session.change.clone();
    let into = crate::ralph::lanes::MergeInto {
        user: cp,
        change: &change,
        lane_key,
        gate: None,
    };
    let outcome = match merge(&into, &mut |e| out.emit(e)) {
        Ok(()) => Outcome::Completed { via },
        Err(outcome) => outcome,
    };
    out.emit(LoopEvent::attempt_ended(
        task.clone(),
        attempt,
        outcome,
        Receipt::none(),
    ));
}

/// Finishes the merge-back of a lane attempt that a crash cut short, from
/// the work it recorded. A conflict (the person edited one of its paths
/// since) is the attempt's outcome, retried like any other.
fn finish_merge(
    out: &mut Outbox<'_>,
    cp: &Checkpointer,
    task: &TaskId,
    record: &AttemptRecord,
    work: &MergeWork,
    cut: &CutShortMerge,
) {
    let lane_key = record
        .lane
        .clone()
        .unwrap_or_else(|| crate::ralph::lanes::lane_key(task));
    merge_left_over(
        out,
        cp,
        task,
        record.attempt,
        &lane_key,
        work.via,
        &|into, emit| into.finish(task, record.attempt, work, cut, emit),
    );
}

/// Writes `completed` for tasks the session judged completed whose status
/// the run had no time to write (it died in between): the tasks file still
/// says `in_progress`. A task someone set back to `pending` is left alone.
pub fn write_judged_statuses(out: &mut Outbox<'_>, tasks: &mut TaskSet) -> Result<(), String> {
    let judged: Vec<TaskId> = out
        .session
        .tasks
        .iter()
        .filter(|(_, r)| {
            r.attempts
                .last()
                .and_then(|a| a.outcome.as_ref())
                .is_some_and(Outcome::is_completed)
        })
        .map(|(id, _)| id.clone())
        .collect();
    // A markdown checklist has no in_progress: an unticked story is the
    // same crash window there.
    let unwritten = if tasks.format == crate::model::TasksFormat::OpenSpecMarkdown {
        TaskStatus::Pending
    } else {
        TaskStatus::InProgress
    };
    for id in judged {
        if tasks.task(&id).map(|t| t.status) != Some(unwritten) {
            continue;
        }
        tasks.set_status(&id, TaskStatus::Completed).map_err(|e| {
            format!("task {id} was judged completed, but its status could not be written: {e}")
        })?;
        out.emit(LoopEvent::Notice {
            level: NoticeLevel::Info,
            message: format!(
                "task {id} was judged completed before the last run stopped; its status is now written to the tasks file"
            ),
        });
    }
    Ok(())
}

/// Where HEAD stands against an interrupted attempt's checkpoint.
enum HeadCheck {
    /// As the checkpoint found it.
    Unmoved,
    /// Where the attempt was seen to move it (its own commits or branch
    /// switch, recorded while it ran): reverted with the attempt.
    MovedByAttempt,
    /// Somewhere the attempt was never seen to put it.
    Unseen(MovedHead),
}

/// Compares HEAD and the checkpoint's branch with the checkpoint and with
/// every state the attempt was seen in.
fn moved_head(
    cp: &Checkpointer,
    checkpoint: &Checkpoint,
    task: &TaskId,
    record: &AttemptRecord,
    failed_ref: &str,
    change: &str,
) -> Result<HeadCheck, String> {
    let now = cp
        .head_seen(checkpoint.branch.as_deref())
        .map_err(|e| format!("could not read HEAD: {e}"))?;
    if now == HeadSeen::of(checkpoint) {
        return Ok(HeadCheck::Unmoved);
    }
    if record.head_moves.contains(&now) {
        return Ok(HeadCheck::MovedByAttempt);
    }
    // Moved on the same branch by spectr's own task commits of this change
    // alone (one the killed run made but could not record): the attempt's
    // doing, reverted with it (the task runs again and is committed once).
    if now.branch == checkpoint.branch
        && let (Some(was), Some(head)) = (&checkpoint.head, &now.head)
        && cp
            .only_commits_with(was, head, &format!("Spectr-Change: {change}"))
            .unwrap_or(false)
    {
        return Ok(HeadCheck::MovedByAttempt);
    }
    let (head, branch, branch_tip) = (&now.head, &now.branch, &now.tip);
    let head_moved = *head != checkpoint.head;
    let branch_moved = *branch != checkpoint.branch;
    let tip_moved = checkpoint.branch.is_some() && *branch_tip != checkpoint.head;
    let mut lines = Vec::new();
    if branch_moved {
        lines.push(format!(
            "HEAD is now {} (it was {})",
            branch.as_deref().map_or("detached".into(), short_branch),
            checkpoint
                .branch
                .as_deref()
                .map_or("detached".into(), short_branch)
        ));
    }
    let mut tips: Vec<(String, Option<String>)> = Vec::new();
    if head_moved {
        tips.push(("HEAD".into(), head.clone()));
    }
    if let Some(b) = &checkpoint.branch
        && tip_moved
        && (branch.as_ref() != Some(b) || !head_moved)
    {
        tips.push((short_branch(b), branch_tip.clone()));
    }
    // Commits the attempt was seen to make are not asked about.
    let mut known: Vec<String> = checkpoint.head.iter().cloned().collect();
    for seen in &record.head_moves {
        for c in seen.head.iter().chain(seen.tip.iter()) {
            if !known.contains(c) {
                known.push(c.clone());
            }
        }
    }
    for (name, tip) in tips {
        let Some(tip) = tip else {
            lines.push(format!("{name} no longer exists"));
            continue;
        };
        let mut args = vec!["log", "--no-color", "--format=%h %s", "-n", "20", &tip];
        if !known.is_empty() {
            args.push("--not");
            args.extend(known.iter().map(String::as_str));
        }
        let log = cp.read_git(&args).map_err(|e| e.to_string())?;
        if log.trim().is_empty() {
            lines.push(format!(
                "{name} is at {} (was {}); no new commits on it",
                short(&tip),
                checkpoint.head.as_deref().map_or("none", short)
            ));
        } else {
            let whose = if record.head_moves.is_empty() {
                ""
            } else {
                ", besides the interrupted attempt's own"
            };
            lines.push(format!("commits on {name} since the checkpoint{whose}:"));
            lines.extend(log.lines().map(|l| format!("  {l}")));
        }
    }
    Ok(HeadCheck::Unseen(MovedHead {
        task: task.clone(),
        attempt: record.attempt,
        lines,
        failed_ref: failed_ref.to_string(),
    }))
}

fn short(id: &str) -> &str {
    id.get(..10).unwrap_or(id)
}

fn short_branch(b: &str) -> String {
    b.strip_prefix("refs/heads/").unwrap_or(b).to_string()
}
