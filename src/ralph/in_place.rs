//! An attempt in the user's own tree (`--jobs 1`, or lanes taking turns):
//! how it ends in place of a lane's merge (no conflict marker left, HEAD,
//! its branch and the index put back, the agent's commits kept under a
//! ref), and where those commits are kept. Used by the user's-tree
//! executor and by lanes alike, so it belongs to neither.

use crate::checkpoint::{Checkpoint, Checkpointer, conflict_markers};
use crate::model::TaskId;
use crate::ralph::attempt;
use crate::ralph::config::RunConfig;
use crate::ralph::event::{CompletedVia, LoopEvent, NoticeLevel, Outcome};
use std::path::Path;
use std::sync::Mutex;
use std::sync::atomic::Ordering;

/// The refs namespace of `change` in the user's work tree, e.g.
/// `refs/spectr/ralph/@main/<change>`.
pub(crate) fn change_refs(user: &Checkpointer, change: &str) -> String {
    let probe = user.ref_name(change, "lanes", 0);
    probe
        .strip_suffix("/lanes/0/checkpoint")
        .unwrap_or(&probe)
        .to_string()
}

/// Where the commits an agent made while its task ran in the user's tree
/// (lanes taking turns) are kept once HEAD is put back.
pub fn in_place_keep_ref(user: &Checkpointer, change: &str, task: &TaskId, attempt: u32) -> String {
    format!(
        "{}/{}/{attempt}/lane-commits",
        change_refs(user, change),
        crate::checkpoint::escape_component(task.as_str())
    )
}

/// Reads a file's text under `root`, for [`no_markers_left`].
pub(crate) fn on_disk(root: &Path) -> impl Fn(&str) -> Option<String> + '_ {
    move |f| std::fs::read_to_string(root.join(f)).ok()
}

/// A resolve attempt whose agent left conflict markers in one of the
/// `marked` files (their text as `read` finds it) failed: they must not
/// reach the user's tree as its completed work.
pub(crate) fn no_markers_left(
    task: &TaskId,
    marked: &[String],
    read: &dyn Fn(&str) -> Option<String>,
) -> Result<(), Outcome> {
    let still: Vec<&str> = marked
        .iter()
        .filter(|f| {
            read(f).is_some_and(|text| conflict_markers::still_marked(&text, task.as_str()))
        })
        .map(String::as_str)
        .collect();
    if still.is_empty() {
        return Ok(());
    }
    Err(Outcome::Failed {
        reason: format!(
            "{} still hold conflict markers (`{}` … `{}`): resolve every one, keeping what both changes meant to do, and remove the marker lines",
            still.join(", "),
            conflict_markers::OURS,
            conflict_markers::theirs(task.as_str())
        ),
    })
}

/// How an attempt in the user's tree ends, in place of a lane's merge:
/// completed only once no conflict marker is left in the files a resolve
/// found them in, and with HEAD, its branch and the index put back as they
/// were (its agent's commits kept under `keep_ref`, their work left in the
/// tree), before the completion is recorded, so a kill at any moment leaves
/// either the attempt to revert or git's state put back.
pub(crate) struct InPlaceFinish<'u> {
    user: &'u Checkpointer,
    keep_ref: String,
    marked: Mutex<Vec<String>>,
    checkpoint: Mutex<Option<Checkpoint>>,
    head_moved: std::sync::atomic::AtomicBool,
    /// `--commit task`: spectr commits the work itself right after.
    commits: bool,
}

impl<'u> InPlaceFinish<'u> {
    /// For an attempt at `task` in the user's tree (`--jobs 1`): its
    /// agent's commits are kept under a ref and the branch put back, as a
    /// lane's merge leaves it (with `--commit task` the task's commit is
    /// then spectr's one).
    pub(crate) fn for_run(
        user: &'u Checkpointer,
        cfg: &RunConfig,
        task: &TaskId,
        attempt: u32,
    ) -> InPlaceFinish<'u> {
        InPlaceFinish {
            user,
            keep_ref: in_place_keep_ref(user, &cfg.change.id, task, attempt),
            marked: Mutex::new(Vec::new()),
            checkpoint: Mutex::new(None),
            head_moved: std::sync::atomic::AtomicBool::new(false),
            commits: cfg.commit == crate::model::spectr_yaml::CommitMode::Task,
        }
    }

    /// The files a resolve attempt found conflict markers in: none may be
    /// left when it completes.
    pub(crate) fn marked(&self, files: &[String]) {
        if let Ok(mut marked) = self.marked.lock() {
            *marked = files.to_vec();
        }
    }

    /// Takes note of what the attempt says (a HEAD move: the put-back must
    /// look).
    pub(crate) fn seen(&self, event: &LoopEvent) {
        if let LoopEvent::HeadMoved { .. } = event {
            self.head_moved.store(true, Ordering::SeqCst);
        }
    }
}

impl attempt::MergeBack for InPlaceFinish<'_> {
    fn after_agent(
        &self,
        _task: &TaskId,
        _attempt: u32,
        checkpoint: &Checkpoint,
        _emit: &mut dyn FnMut(LoopEvent),
    ) {
        if let Ok(mut c) = self.checkpoint.lock() {
            *c = Some(checkpoint.clone());
        }
    }

    fn merge(
        &self,
        task: &TaskId,
        _attempt: u32,
        _via: CompletedVia,
        emit: &mut dyn FnMut(LoopEvent),
    ) -> Result<(), Outcome> {
        let marked = self
            .marked
            .lock()
            .map(|m| m.clone())
            .unwrap_or_else(|p| p.into_inner().clone());
        no_markers_left(task, &marked, &on_disk(self.user.repo_root()))?;
        let Some(before) = self.checkpoint.lock().ok().and_then(|c| c.clone()) else {
            return Ok(());
        };
        let moved = self.head_moved.load(Ordering::SeqCst);
        match self
            .user
            .keep_tree_put_back_head(&before, &self.keep_ref, moved)
        {
            Ok(None) => Ok(()),
            Ok(Some(_)) => {
                emit(LoopEvent::Notice {
                    level: NoticeLevel::Info,
                    message: if self.commits {
                        format!(
                            "commits the agent of task {task} made in your tree are kept at {}; the task's commit is spectr's, with their work in it",
                            self.keep_ref
                        )
                    } else {
                        format!(
                            "commits the agent of task {task} made in your tree are kept at {}; your branch did not move, and their work is in your tree uncommitted",
                            self.keep_ref
                        )
                    },
                });
                Ok(())
            }
            Err(e) => Err(Outcome::GitError {
                detail: format!(
                    "could not put HEAD and the index back as they were before task {task} ran in your tree: {e}"
                ),
            }),
        }
    }
}
