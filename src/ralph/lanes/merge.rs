//! A lane's completed work merged back into the user's tree: one merge at
//! a time (the [`super::Gate`]), a checkpoint of the user's tree first, a
//! conflict handed back to the task as its retry's reason.

use super::*;
use crate::ralph::executor::{MergeTurn, TurnAnswer};

/// Merges one completed attempt's work from its lane into the user's tree.
pub(super) struct LaneMerge<'a> {
    pub(super) user: &'a Checkpointer,
    pub(super) lane: &'a Checkpointer,
    pub(super) gate: &'a Gate,
    pub(super) base: String,
    pub(super) skip: Vec<PathBuf>,
    pub(super) change: String,
    pub(super) lane_key: String,
    /// A resolve attempt's files that held conflict markers.
    pub(super) marked: Vec<String>,
    /// Waits until the run lets this merge write its files.
    pub(super) turn: &'a MergeTurn<'a>,
}

impl MergeBack for LaneMerge<'_> {
    fn after_agent(
        &self,
        task: &TaskId,
        _attempt: u32,
        checkpoint: &Checkpoint,
        emit: &mut dyn FnMut(LoopEvent),
    ) {
        // In turn: another lane's claim rewrites the same stash list.
        let _turn = self.gate.turn();
        let user_branch = self.user.head_branch().ok().flatten();
        match self
            .lane
            .claim_agent_stash(checkpoint, user_branch.as_deref())
        {
            Ok(kept) if kept.is_empty() => {}
            Ok(kept) => emit(LoopEvent::Notice {
                level: NoticeLevel::Info,
                message: stash_notice(task, &kept),
            }),
            Err(e) => emit(LoopEvent::Notice {
                level: NoticeLevel::Warn,
                message: format!(
                    "the stash list every work tree shares may hold entries of task {task}'s agent: {e}"
                ),
            }),
        }
    }

    fn merge(
        &self,
        task: &TaskId,
        attempt: u32,
        via: CompletedVia,
        emit: &mut dyn FnMut(LoopEvent),
    ) -> Result<(), Outcome> {
        no_markers_left(task, &self.marked, &on_disk(self.lane.repo_root()))?;
        let theirs = self.lane.snapshot_tree().map_err(|e| Outcome::GitError {
            detail: format!("could not snapshot the lane's work of task {task}: {e}"),
        })?;
        let into = MergeInto {
            user: self.user,
            change: &self.change,
            lane_key: &self.lane_key,
            gate: Some(self.gate),
        };
        into.merge_in_turn(
            self.turn,
            task,
            attempt,
            &merge_work(&self.base, theirs, &self.skip, via),
            emit,
        )
    }
}

pub(super) use crate::ralph::in_place::{no_markers_left, on_disk};

/// What a lane's completed attempt merges: from `base` to `theirs`, the
/// `skip` paths left out.
pub(super) fn merge_work(
    base: &str,
    theirs: String,
    skip: &[PathBuf],
    via: CompletedVia,
) -> MergeWork {
    MergeWork {
        base: base.to_owned(),
        theirs,
        skip: skip
            .iter()
            .map(|p| p.to_string_lossy().into_owned())
            .collect(),
        via,
    }
}

/// Where a merge-back writes: the user's tree, for a change and a lane.
pub struct MergeInto<'a> {
    pub user: &'a Checkpointer,
    pub change: &'a str,
    pub lane_key: &'a str,
    /// Marks the writes for lanes taking a snapshot meanwhile (the caller
    /// holds its turn); none when no lane runs (a resume).
    pub gate: Option<&'a Gate>,
}

impl MergeInto<'_> {
    /// [`MergeInto::merge`] in its turn: the files it writes may be
    /// reserved for another task's resolve attempt (waits until that task
    /// merged), then the gate. A lane's merge-back, local or remote.
    pub(super) fn merge_in_turn(
        &self,
        turn: &MergeTurn<'_>,
        task: &TaskId,
        attempt: u32,
        work: &MergeWork,
        emit: &mut dyn FnMut(LoopEvent),
    ) -> Result<(), Outcome> {
        let skip: Vec<PathBuf> = work.skip.iter().map(PathBuf::from).collect();
        let files = self
            .user
            .merge_paths(&work.base, &work.theirs, &skip)
            .map_err(|e| Outcome::GitError {
                detail: format!("could not list the files task {task} changed: {e}"),
            })?;
        if let TurnAnswer::Held(wait) = turn(task, &files) {
            // Held for another task's resolve attempt. A merge that
            // conflicts now writes nothing: it ends now instead of holding
            // its slot (its resolve attempt queues for the files), since
            // the resolve would only add to the lines it conflicts with.
            let conflicted = {
                let _turn = self.gate.map(Gate::turn);
                self.conflict_now(task, attempt, work)
            };
            if let Some(conflict) = conflicted {
                return Err(conflict);
            }
            wait();
        }
        let _turn = self.gate.map(Gate::turn);
        self.merge(task, attempt, work, emit)
    }

    /// `work`'s conflict on `files`, the other change shown as a diff.
    fn conflict_of(
        &self,
        task: &TaskId,
        files: &[String],
        messages: &[String],
        work: &MergeWork,
    ) -> Outcome {
        let other = self.other_change(&work.base, files);
        conflict(task, files, messages, other.as_deref(), Some(work))
    }

    /// The conflict `work` meets in the user's tree as it is now, if any
    /// (nothing written; a merge that would go through, or a git error,
    /// is None: it waits for its turn).
    fn conflict_now(&self, task: &TaskId, attempt: u32, work: &MergeWork) -> Option<Outcome> {
        let checkpoint_ref = self.user.ref_name(self.change, task.as_str(), attempt);
        let skip: Vec<PathBuf> = work.skip.iter().map(PathBuf::from).collect();
        let plan = self
            .user
            .plan_merge(&work.base, &work.theirs, &checkpoint_ref, &skip)
            .ok()?;
        match &plan {
            MergePlan::Conflict { files, messages } => {
                Some(self.conflict_of(task, files, messages, work))
            }
            MergePlan::Clean { checkpoint, .. } => {
                let _ = self.user.drop(checkpoint);
                None
            }
            MergePlan::Nothing => None,
        }
    }

    /// Merges `work` into the user's tree: a three-way merge planned on a
    /// checkpoint of the tree, recorded (`merge_started`, with the work)
    /// before the first file is written, then written (`merged`). A
    /// conflict, or a git error, is the outcome instead; a write that fails
    /// half way is undone from the checkpoint.
    pub fn merge(
        &self,
        task: &TaskId,
        attempt: u32,
        work: &MergeWork,
        emit: &mut dyn FnMut(LoopEvent),
    ) -> Result<(), Outcome> {
        let git_error = |what: &str, e: CheckpointError| Outcome::GitError {
            detail: format!("{what} of task {task}: {e}"),
        };
        let checkpoint_ref = self.user.ref_name(self.change, task.as_str(), attempt);
        let skip: Vec<PathBuf> = work.skip.iter().map(PathBuf::from).collect();
        let plan = self
            .user
            .plan_merge(&work.base, &work.theirs, &checkpoint_ref, &skip)
            .map_err(|e| git_error("could not merge the work", e))?;
        let checkpoint = match &plan {
            MergePlan::Nothing => {
                emit(LoopEvent::Merged {
                    task: task.clone(),
                    attempt,
                    lane: self.lane_key.to_string(),
                    files: Vec::new(),
                });
                return Ok(());
            }
            MergePlan::Conflict { files, messages } => {
                return Err(self.conflict_of(task, files, messages, work));
            }
            MergePlan::Clean {
                checkpoint, notes, ..
            } => {
                for note in notes {
                    if self.gate.is_none_or(|g| g.first_unrun(&note.driver)) {
                        emit(LoopEvent::Notice {
                            level: NoticeLevel::Warn,
                            message: note.to_string(),
                        });
                    }
                }
                checkpoint.clone()
            }
        };
        // Saved before the first write: a crash mid-merge is undone exactly,
        // and the merge done again from the work.
        emit(LoopEvent::MergeStarted {
            task: task.clone(),
            attempt,
            checkpoint: checkpoint.clone(),
            work: Some(work.clone()),
        });
        test_pause("merge_started");
        // Marked until the end: a revert below writes too.
        let _writing = self.gate.map(Gate::writing);
        let applied = self.user.apply_merge(&plan);
        match applied {
            Ok(files) => {
                emit(LoopEvent::Merged {
                    task: task.clone(),
                    attempt,
                    lane: self.lane_key.to_string(),
                    files,
                });
                Ok(())
            }
            Err(CheckpointError::ChangedDuringMerge { path }) => {
                let files = vec![path];
                let messages = vec!["the file was edited in the work tree while merging".into()];
                Err(conflict(task, &files, &messages, None, Some(work)))
            }
            Err(e) => {
                // Part of the merge may be written: put the tree back exactly.
                let failed = self
                    .user
                    .failed_ref_name(self.change, task.as_str(), attempt);
                match self.user.revert_leaving_new_refs(&checkpoint, &failed) {
                    Ok(_) => Err(Outcome::GitError {
                        detail: format!(
                            "could not write task {task}'s merged work ({e}); the work tree was put back as it was before the merge"
                        ),
                    }),
                    Err(e2) => Err(Outcome::GitError {
                        detail: format!(
                            "could not write task {task}'s merged work ({e}), nor put the tree back ({e2}); the tree before the merge is at {}",
                            checkpoint.refname
                        ),
                    }),
                }
            }
        }
    }

    /// Finishes a merge-back a crash cut short ([`Checkpointer::replan_merge`]
    /// planned it again): writes what was still to write, the tree
    /// checkpointed and the merge recorded first, as a merge always is. When
    /// the person edited one of its paths since, it is a conflict: what the
    /// cut-short merge wrote is put back path by path, and nothing else of
    /// the tree is touched.
    pub fn finish(
        &self,
        task: &TaskId,
        attempt: u32,
        work: &MergeWork,
        cut: &CutShortMerge,
        emit: &mut dyn FnMut(LoopEvent),
    ) -> Result<(), Outcome> {
        let undo = |why: Outcome| match self.user.undo_cut_short(cut) {
            Ok(_) => why,
            Err(e) => Outcome::GitError {
                detail: format!(
                    "{}; and what the merge of task {task} wrote before the crash could not be put back ({e}): the tree before it is at {}",
                    why.describe(),
                    self.user.ref_name(self.change, task.as_str(), attempt)
                ),
            },
        };
        if !cut.changed.is_empty() {
            let messages = vec![
                "edited in the work tree after the run stopped in the middle of merging this task"
                    .to_string(),
            ];
            let other = self.other_change(&work.base, &cut.changed);
            return Err(undo(conflict(
                task,
                &cut.changed,
                &messages,
                other.as_deref(),
                Some(work),
            )));
        }
        let checkpoint_ref = self.user.ref_name(self.change, task.as_str(), attempt);
        let plan = self
            .user
            .resume_plan(cut, &checkpoint_ref)
            .map_err(|e| Outcome::GitError {
                detail: format!(
                    "could not checkpoint the tree to finish the merge of task {task}: {e}"
                ),
            })?;
        let MergePlan::Clean { checkpoint, .. } = &plan else {
            return Ok(());
        };
        emit(LoopEvent::MergeStarted {
            task: task.clone(),
            attempt,
            checkpoint: checkpoint.clone(),
            work: Some(work.clone()),
        });
        match self.user.apply_merge(&plan) {
            Ok(mut files) => {
                files.extend(cut.done.iter().map(|c| c.path.clone()));
                files.sort();
                files.dedup();
                emit(LoopEvent::Merged {
                    task: task.clone(),
                    attempt,
                    lane: self.lane_key.to_string(),
                    files,
                });
                Ok(())
            }
            Err(CheckpointError::ChangedDuringMerge { path }) => {
                let messages = vec!["the file was edited in the work tree while merging".into()];
                Err(undo(conflict(task, &[path], &messages, None, Some(work))))
            }
            Err(e) => {
                let failed = self
                    .user
                    .failed_ref_name(self.change, task.as_str(), attempt);
                let back = self.user.revert_leaving_new_refs(checkpoint, &failed);
                let why = Outcome::GitError {
                    detail: format!(
                        "could not write task {task}'s merged work ({e}){}",
                        match back {
                            Ok(_) => String::new(),
                            Err(e2) => format!(", nor put the tree back ({e2})"),
                        }
                    ),
                };
                Err(undo(why))
            }
        }
    }

    /// What the user's tree now holds in `files` that the lane did not see:
    /// a diff from the tree the lane started from. Best effort (None when
    /// git cannot say); called with the gate held.
    fn other_change(&self, base: &str, files: &[String]) -> Option<String> {
        let ours = self.user.snapshot_tree().ok()?;
        let diff = self.user.diff_text(base, &ours, files).ok()?;
        if diff.trim().is_empty() {
            return None;
        }
        if diff.len() <= OTHER_CHANGE_MAX {
            return Some(diff);
        }
        let mut end = OTHER_CHANGE_MAX;
        while !diff.is_char_boundary(end) {
            end -= 1;
        }
        Some(format!("{}\n… (cut)\n", &diff[..end]))
    }
}

/// Tests stop a run at a chosen point to kill it there:
/// `SPECTR_TEST_PAUSE_AT=merge_started` holds a merge-back once it is
/// recorded, before any file is written, until the process is killed.
fn test_pause(point: &str) {
    if std::env::var_os("SPECTR_TEST_PAUSE_AT").is_some_and(|p| p == point) {
        loop {
            std::thread::sleep(std::time::Duration::from_secs(3600));
        }
    }
}

/// Names the agent's stash entries taken off the user's stash list.
pub fn stash_notice(task: &TaskId, kept: &[KeptStash]) -> String {
    let list: Vec<String> = kept
        .iter()
        .map(|k| format!("{} ({})", k.refname, k.message))
        .collect();
    format!(
        "the agent of task {task} used git stash, whose list every work tree shares: your stash list is as it was, and its entries are kept at {}",
        list.join(", ")
    )
}

/// At most this much of the other change goes into the retry's prompt.
const OTHER_CHANGE_MAX: usize = 4000;

/// The conflict reason's instruction when the next attempt starts afresh;
/// a resolve attempt says instead where its work is ([`resolve_reason`]).
const REDO: &str = "The project now holds that other change. Redo this task on top of it, keeping the other change intact.";

/// The trees a resolve attempt's start merged: where the agent finds each
/// side of a file that holds no markers (`git show <tree>:<path>`).
pub struct Trees {
    /// The project as it is now.
    pub project: String,
    /// The conflicted attempt's work.
    pub previous: String,
}

/// The conflict's reason told to a resolve attempt: its previous work is in
/// its tree again, with markers in `files.marked` where it met the other
/// change; `files.unmarked` hold one side's version (never claimed to hold
/// markers), both versions named.
pub fn resolve_reason(reason: &str, task: &TaskId, files: &ResolveFiles, trees: &Trees) -> String {
    if files.marked.is_empty() && files.unmarked.is_empty() {
        let clean = "Your previous work is applied to your work tree again, on top of the project as it is now, and it applied cleanly this time: check that it still does what the task asks alongside the other change, then finish the task.";
        return reason.replacen(REDO, clean, 1);
    }
    let mut instead = String::from(
        "Your previous work is applied to your work tree again, on top of the project as it is now.",
    );
    if !files.marked.is_empty() {
        instead.push_str(&format!(
            " Where it met the other change, {} hold conflict markers:\n\n{}\n(the project now)\n=======\n(your previous work)\n{}\n\nResolve every one: keep what both changes meant to do, and remove the marker lines.",
            files.marked.join(", "),
            crate::checkpoint::conflict_markers::OURS,
            crate::checkpoint::conflict_markers::theirs(task.as_str()),
        ));
    }
    if !files.unmarked.is_empty() {
        instead.push_str(&format!(
            "{}{} could not be merged line by line (a binary file, a `merge=binary` rule, or a file one side removed) and hold no conflict markers: each is as the project has it now (or, where one side removed it, as the other side left it). Make each what both changes meant to do; both versions are at hand:\n",
            if files.marked.is_empty() { " " } else { "\n\n" },
            files.unmarked.join(", "),
        ));
        for f in &files.unmarked {
            instead.push_str(&format!(
                "\n- {f} (the project's: `git show {}:{f}`; your previous version: `git show {}:{f}`)",
                trees.project, trees.previous
            ));
        }
    }
    instead.push_str("\n\nThen check the task is complete and finish it as usual.");
    reason.replacen(REDO, &instead, 1)
}

fn conflict(
    task: &TaskId,
    files: &[String],
    messages: &[String],
    other: Option<&str>,
    work: Option<&MergeWork>,
) -> Outcome {
    let mut reason = format!(
        "Your previous work on task {task} could not be merged into the project: {} changed in the meantime (another task running in parallel, or a person, edited the same lines). {REDO}",
        files.join(", ")
    );
    if !messages.is_empty() {
        reason.push_str("\n\ngit says:");
    }
    for m in messages.iter().take(10) {
        reason.push_str("\n- ");
        reason.push_str(m);
    }
    if let Some(diff) = other {
        reason.push_str(
            "\n\nThe other change, as a diff from the project your previous work started from:\n\n```diff\n",
        );
        reason.push_str(diff.trim_end());
        reason.push_str("\n```");
    }
    Outcome::Conflict {
        files: files.to_vec(),
        reason,
        work: work.map(|w| crate::ralph::event::ConflictWork {
            base: w.base.clone(),
            theirs: w.theirs.clone(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reason() -> String {
        format!("Your previous work on task 2.1 could not be merged. {REDO}\n\ngit says: x")
    }

    #[test]
    fn a_resolve_reason_claims_markers_only_where_there_are_some() {
        let trees = Trees {
            project: "t1".into(),
            previous: "t2".into(),
        };
        let task = TaskId::from("2.1");
        let files = |marked: &[&str], unmarked: &[&str]| ResolveFiles {
            marked: marked.iter().map(|s| s.to_string()).collect(),
            unmarked: unmarked.iter().map(|s| s.to_string()).collect(),
        };
        let only_binary = resolve_reason(&reason(), &task, &files(&[], &["logo.png"]), &trees);
        assert!(
            !only_binary.contains("hold conflict markers"),
            "{only_binary}"
        );
        assert!(
            only_binary.contains("logo.png could not be merged line by line")
                && only_binary.contains("hold no conflict markers")
                && only_binary.contains(
                    "- logo.png (the project's: `git show t1:logo.png`; your previous version: `git show t2:logo.png`)"
                )
                && only_binary.ends_with("finish it as usual.\n\ngit says: x"),
            "{only_binary}"
        );
        let both = resolve_reason(&reason(), &task, &files(&["a.rs"], &["logo.png"]), &trees);
        assert!(
            both.contains("a.rs hold conflict markers") && both.contains("`git show t2:logo.png`"),
            "{both}"
        );
        assert!(!both.contains("git show t2:a.rs"), "{both}");
        let clean = resolve_reason(&reason(), &task, &files(&[], &[]), &trees);
        assert!(clean.contains("applied cleanly"), "{clean}");
    }
}
