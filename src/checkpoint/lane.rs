//! Parallel lanes: linked git worktrees spectr owns, filled from a snapshot
//! of the user's tree, and the three-way merge of a lane's change back into
//! the user's tree.
//!
//! The user's HEAD, branch, index and stash are only read. A lane's HEAD is
//! always detached (the user's branch is checked out elsewhere), so nothing
//! done in a lane moves a branch. Before a lane is reset or removed, commits
//! made in it and its content are kept reachable under a ref the caller names.

use super::error::CheckpointError;
use super::exclude;
use super::meta::Meta;
use super::snapshot::{check_refname, is_object_id};
use super::{Checkpoint, Checkpointer, escape_component, tree_io};
use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// In a lane's git dir: marks the worktree as spectr's and records the tree
/// and HEAD of its last reset.
const MARKER: &str = "spectr-lane";

pub(crate) fn is_lane_git_dir(git_dir: &Path) -> bool {
    git_dir.join(MARKER).is_file()
}

/// In a lanes folder outside the user's tree: names the work tree whose
/// lanes it holds, so a sweep after a crash knows every folder in it is
/// spectr's (and a folder it does not mark is never touched).
const OWNER_MARK: &str = ".spectr-lanes";

/// A linked git worktree spectr owns (one per parallel lane slot).
#[derive(Debug, Clone)]
pub struct LaneTree {
    pub path: PathBuf,
    /// Discovered at the lane's root, with the parent's (relative) excludes,
    /// git program and timeout.
    pub checkpointer: Checkpointer,
}

/// What [`LaneTree::reset_to`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LaneReset {
    pub files_written: usize,
    pub files_removed: usize,
    /// The ref now keeping the commits made in the lane, when HEAD had moved.
    pub kept_commits: Option<String>,
    /// Things the user should know (a stale index lock removed).
    pub notices: Vec<String>,
}

/// Step 1 of a merge-back ([`Checkpointer::plan_merge`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MergePlan {
    /// Nothing to merge (the lane changed nothing outside `skip`).
    Nothing,
    Clean {
        /// The user's tree before the merge (`revert` undoes the merge).
        checkpoint: Checkpoint,
        ours: String,
        merged: String,
        /// Sorted by path.
        changes: Vec<MergeChange>,
    },
    /// Nothing will be written; the checkpoint ref created for it is deleted.
    Conflict {
        /// Sorted.
        files: Vec<String>,
        /// `git merge-tree`'s informational messages.
        messages: Vec<String>,
    },
}

/// A blob in a tree: git mode (`0o100644`, `0o100755`, `0o120000`) and id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MergeEntry {
    pub mode: u32,
    pub oid: String,
}

/// One path the merge writes or removes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MergeChange {
    /// Repo-relative (lossy for a path that is not UTF-8).
    pub path: String,
    /// In the user's tree at the checkpoint (`None`: the merge adds it).
    pub old: Option<MergeEntry>,
    /// After the merge (`None`: the merge deletes it).
    pub new: Option<MergeEntry>,
    /// Permission bits a new regular file is written with (the user's own
    /// mode when only the content changes).
    pub file_mode: u32,
    raw: Vec<u8>,
}

/// A merge-back a crash cut short ([`Checkpointer::replan_merge`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CutShortMerge {
    /// Paths still holding what the merge found: to write.
    pub pending: Vec<MergeChange>,
    /// Paths the merge wrote before the crash.
    pub done: Vec<MergeChange>,
    /// Paths changed since otherwise (edited after the crash): a conflict.
    /// Sorted.
    pub changed: Vec<String>,
    /// `done` in reverse, to put the original content back.
    undo: Vec<MergeChange>,
    /// Every path the merge changes (where a write killed half way may have
    /// left its temporary file).
    paths: Vec<Vec<u8>>,
}

/// A three-way merge's result.
enum ThreeWay {
    Clean {
        merged: String,
        changes: Vec<MergeChange>,
    },
    Conflict {
        files: Vec<String>,
        messages: Vec<String>,
    },
}

/// Whether `path` is one of (or inside one of) the `skip` paths.
fn is_skipped(skip: &[PathBuf], path: &[u8]) -> bool {
    let p = Path::new(OsStr::from_bytes(path));
    skip.iter().any(|s| p.starts_with(s))
}

/// One path differing between two trees.
struct Diff {
    path: Vec<u8>,
    old: Option<MergeEntry>,
    new: Option<MergeEntry>,
}

const GITLINK: u32 = 0o160000;
const SYMLINK: u32 = 0o120000;

impl Checkpointer {
    /// Creates a detached linked worktree at `path` (or reuses the one
    /// registered there) and makes its content exactly `tree`, HEAD detached
    /// at `head` (the user's HEAD commit).
    pub fn open_lane(
        &self,
        path: &Path,
        tree: &str,
        head: Option<&str>,
    ) -> Result<LaneTree, CheckpointError> {
        let head = head.ok_or(CheckpointError::LanesNeedCommit)?;
        let path = lane_path(path, true)?;
        if let Some(dir) = path.parent() {
            self.claim_lanes_dir(dir)?;
        }
        let registered = self.registered_worktrees()?.contains(&path);
        if registered && path.exists() && !self.is_spectr_lane(&path)? {
            return Err(CheckpointError::Lane {
                path,
                reason: "is a worktree that is not a spectr lane: left alone".into(),
            });
        }
        if !(registered && path.join(".git").exists()) {
            if !registered && dir_has_entries(&path) {
                return Err(CheckpointError::Lane {
                    path,
                    reason: "a folder that is not a registered lane is in the way (remove_stale_lanes keeps and removes it)".into(),
                });
            }
            // A registration whose folder is gone would block the add.
            self.git.cmd(["worktree", "prune"]).run()?;
            self.git
                .cmd(["worktree", "add", "--detach", "--no-checkout", "-q"])
                .arg(&path)
                .arg(head)
                .run()?;
        }
        let lane = LaneTree {
            checkpointer: self.lane_checkpointer(&path)?,
            path,
        };
        lane.reset_to(tree, Some(head), None)?;
        Ok(lane)
    }

    /// The checkpointer of the lane at `path` (marked as a lane).
    fn lane_checkpointer(&self, path: &Path) -> Result<Checkpointer, CheckpointError> {
        let found =
            Checkpointer::discover_unchecked(path, self.git.timeout, self.git.program.clone())?;
        let Some(mut cp) = found.filter(|cp| cp.root != self.root) else {
            return Err(CheckpointError::Lane {
                path: path.to_owned(),
                reason: "not a git worktree of this repository".into(),
            });
        };
        if !cp.lane {
            let marker = cp.git_dir.join(MARKER);
            std::fs::write(&marker, b"")
                .map_err(|e| CheckpointError::io("cannot mark the lane", &marker, e))?;
            cp.lane = true;
        }
        cp.excludes = self.excludes.clone();
        Ok(cp)
    }

    /// Worktree paths as git lists them (the main one first).
    fn registered_worktrees(&self) -> Result<Vec<PathBuf>, CheckpointError> {
        let out = self
            .git
            .cmd(["worktree", "list", "--porcelain", "-z"])
            .run()?;
        Ok(out
            .split(|&b| b == 0)
            .filter_map(|f| f.strip_prefix(b"worktree "))
            .map(|p| PathBuf::from(OsStr::from_bytes(p)))
            .collect())
    }

    /// Removes a lane worktree, first keeping its content and commits under
    /// `keep_ref` when they differ from its last reset. A missing lane is fine.
    pub fn remove_lane(&self, path: &Path, keep_ref: &str) -> Result<(), CheckpointError> {
        check_refname(keep_ref)?;
        let path = lane_path(path, false)?;
        if path == self.root {
            return Err(CheckpointError::Lane {
                path,
                reason: "is the user's own work tree, not a lane".into(),
            });
        }
        let registered = self.registered_worktrees()?;
        if registered.first() == Some(&path) {
            return Err(CheckpointError::Lane {
                path,
                reason: "is the repository's main work tree, not a lane".into(),
            });
        }
        if !path.exists() {
            // Gone already (its registration, if any, is pruned).
            self.git.cmd(["worktree", "prune"]).run()?;
            return Ok(());
        }
        if !self.is_spectr_lane(&path)? {
            return Err(CheckpointError::Lane {
                path,
                reason: "is not a spectr lane (no lane mark, and not in an ignored or excluded folder of this work tree): left alone".into(),
            });
        }
        let mut removed = Ok(Vec::new());
        if registered.contains(&path) {
            match self.lane_checkpointer(&path) {
                Ok(lane) => lane.keep_lane_work(self, keep_ref)?,
                // Its git link is broken: keep the files as a plain folder's.
                Err(_) if dir_has_entries(&path) => {
                    self.at_folder(&path).keep_folder(self, keep_ref)?
                }
                Err(_) => {}
            }
            // Twice: also when something locked it.
            removed = self
                .git
                .cmd(["worktree", "remove", "--force", "--force"])
                .arg(&path)
                .run();
        } else if dir_has_entries(&path) {
            self.at_folder(&path).keep_folder(self, keep_ref)?;
        }
        // Whatever `worktree remove` left (or could not remove) goes too: its
        // content is kept.
        remove_dir(&path)?;
        self.git.cmd(["worktree", "prune"]).run()?;
        if let Err(e) = removed
            && self.registered_worktrees()?.contains(&path)
        {
            return Err(e);
        }
        Ok(())
    }

    /// After a crash: removes every worktree registered under `dir`, and any
    /// leftover folder there, each kept first under `<keep_prefix>/<name>`.
    /// Returns the names removed, sorted.
    pub fn remove_stale_lanes(
        &self,
        dir: &Path,
        keep_prefix: &str,
    ) -> Result<Vec<String>, CheckpointError> {
        // No lanes folder and no linked work tree at all (git keeps one entry
        // in `worktrees/` per linked work tree): nothing can be left over, and
        // two git commands per run are saved.
        if !dir.exists() && !self.common_dir.join("worktrees").exists() {
            return Ok(Vec::new());
        }
        let dir = match dir.canonicalize() {
            Ok(d) => d,
            Err(_) => lane_path(dir, false)?,
        };
        let mut found: BTreeMap<String, PathBuf> = BTreeMap::new();
        let registered = self.registered_worktrees()?;
        for p in registered.iter().skip(1) {
            if p.starts_with(&dir) && *p != dir && *p != self.root {
                let name = p
                    .strip_prefix(&dir)
                    .map(|r| r.to_string_lossy().into_owned())
                    .unwrap_or_default();
                found.insert(name, p.clone());
            }
        }
        if let Ok(entries) = std::fs::read_dir(&dir) {
            for e in entries.flatten() {
                if e.file_type().is_ok_and(|t| t.is_dir()) {
                    let name = e.file_name().to_string_lossy().into_owned();
                    found.entry(name).or_insert_with(|| e.path());
                }
            }
        }
        // Never someone else's worktree or folder, whatever `dir` is: a
        // folder without a lane mark only in a lanes folder this work tree
        // owns, or in an ignored or excluded `dir` of this work tree.
        let dir_owned = self.owns_lanes_dir(&dir);
        let dir_ignored = !dir_owned && self.in_ignored_place(&dir)?;
        let mut kept = BTreeMap::new();
        for (name, path) in found {
            let marked = admin_dir(&path).is_some_and(|d| is_lane_git_dir(&d));
            let ours = dir_owned && path.parent() == Some(dir.as_path());
            if !path.exists() || marked || ours || (dir_ignored && self.in_ignored_place(&path)?) {
                kept.insert(name, path);
            }
        }
        let found = kept;
        let prefix = keep_prefix.trim_end_matches('/');
        for (name, path) in &found {
            let keep = format!("{prefix}/{}", escape_component(name));
            self.remove_lane(path, &keep)?;
        }
        self.git.cmd(["worktree", "prune"]).run()?;
        self.tidy_lanes_dir(&dir);
        Ok(found.into_keys().collect())
    }

    /// Whether the folder at `path` is spectr's to remove: a worktree marked
    /// as a lane, a folder in a lanes folder this work tree owns, or a folder
    /// in an ignored or excluded part of this work tree (where lanes lived
    /// before; a lane whose mark never got written).
    fn is_spectr_lane(&self, path: &Path) -> Result<bool, CheckpointError> {
        if admin_dir(path).is_some_and(|d| is_lane_git_dir(&d)) {
            return Ok(true);
        }
        if path.parent().is_some_and(|d| self.owns_lanes_dir(d)) {
            return Ok(true);
        }
        self.in_ignored_place(path)
    }

    /// Marks `dir` (a lanes folder outside this work tree) as holding this
    /// work tree's lanes, when it is empty: a folder that holds anything
    /// else is never claimed (its folders stay someone else's), and one
    /// marked for another work tree is refused. A folder inside this work
    /// tree needs no mark (it is ignored).
    fn claim_lanes_dir(&self, dir: &Path) -> Result<(), CheckpointError> {
        if dir.starts_with(&self.root) || self.owns_lanes_dir(dir) {
            return Ok(());
        }
        let mark = dir.join(OWNER_MARK);
        if let Ok(other) = std::fs::read(&mark) {
            return Err(CheckpointError::Lane {
                path: dir.to_owned(),
                reason: format!(
                    "holds the lanes of another work tree ({}): left alone",
                    String::from_utf8_lossy(&other).trim_end()
                ),
            });
        }
        if dir_has_entries(dir) {
            return Ok(());
        }
        let mut text = self.root.as_os_str().as_bytes().to_vec();
        text.push(b'\n');
        let tmp = dir.join(format!("{OWNER_MARK}.tmp"));
        std::fs::write(&tmp, text)
            .and_then(|()| std::fs::rename(&tmp, &mark))
            .map_err(|e| CheckpointError::io("cannot mark the lanes folder", &mark, e))
    }

    /// Whether `dir` carries the mark naming this work tree as its owner.
    fn owns_lanes_dir(&self, dir: &Path) -> bool {
        std::fs::read(dir.join(OWNER_MARK)).is_ok_and(|text| {
            text.strip_suffix(b"\n").unwrap_or(&text) == self.root.as_os_str().as_bytes()
        })
    }

    /// Removes a lanes folder this work tree owns once no lane is left in it
    /// (its mark, the folder, and its parent when that is empty too).
    /// Anything else in it keeps it as it is.
    pub fn tidy_lanes_dir(&self, dir: &Path) {
        if !self.owns_lanes_dir(dir) {
            return;
        }
        let only_mark = std::fs::read_dir(dir).is_ok_and(|entries| {
            entries
                .flatten()
                .all(|e| e.file_name() == std::ffi::OsStr::new(OWNER_MARK))
        });
        if only_mark
            && std::fs::remove_file(dir.join(OWNER_MARK)).is_ok()
            && std::fs::remove_dir(dir).is_ok()
            && let Some(parent) = dir.parent()
        {
            // Only when empty: other changes' lanes may be there.
            let _ = std::fs::remove_dir(parent);
        }
    }

    /// Whether `path` is strictly inside this work tree, in an ignored or
    /// excluded folder (never `.git`).
    fn in_ignored_place(&self, path: &Path) -> Result<bool, CheckpointError> {
        let Ok(rel) = path.strip_prefix(&self.root) else {
            return Ok(false);
        };
        if rel.as_os_str().is_empty() || rel.starts_with(".git") {
            return Ok(false);
        }
        if self.is_excluded(rel.as_os_str().as_bytes()) {
            return Ok(true);
        }
        let out = self
            .git
            .cmd(["check-ignore", "-q", "--no-index", "--"])
            .arg(rel)
            .output()?;
        Ok(out.status.code() == Some(0))
    }

    /// Keeps this lane's content and commits under `keep_ref` (a commit of
    /// the content whose parents are HEAD and what the ref held), unless
    /// nothing changed since the last reset.
    fn keep_lane_work(&self, parent: &Checkpointer, keep_ref: &str) -> Result<(), CheckpointError> {
        let tree = self.snapshot_tree()?;
        let head = self.resolve_commit("HEAD")?;
        let last = read_marker(&self.git_dir);
        if last.tree.as_deref() == Some(tree.as_str()) && last.head == head {
            return Ok(());
        }
        let message = format!(
            "spectr ralph: lane kept on removal\n\nlane: {}\n",
            self.root.display()
        );
        parent.keep_under(keep_ref, &tree, head.as_deref(), &message)?;
        Ok(())
    }

    /// A leftover folder (no longer a registered worktree): its content is
    /// snapshotted with the repository's objects and kept under `keep_ref`.
    fn keep_folder(&self, parent: &Checkpointer, keep_ref: &str) -> Result<(), CheckpointError> {
        let tmp = self.temp_index(None)?;
        self.add_all(&tmp)?;
        let tree = self.write_tree(&tmp)?;
        let message = format!(
            "spectr ralph: leftover lane folder kept on removal\n\nfolder: {}\n",
            self.root.display()
        );
        parent.keep_under(keep_ref, &tree, None, &message)?;
        Ok(())
    }

    /// This repository seen with `folder` as its work tree.
    fn at_folder(&self, folder: &Path) -> Checkpointer {
        let mut cp = self.clone();
        cp.root = folder.to_owned();
        cp.git.cwd = folder.to_owned();
        cp.git.work_tree = Some(folder.to_owned());
        cp.shared = Arc::default();
        cp
    }

    /// Points `keep_ref` at a commit of `tree` whose parents are `tip` and
    /// the ref's previous commit, so nothing it kept before is lost.
    fn keep_under(
        &self,
        keep_ref: &str,
        tree: &str,
        tip: Option<&str>,
        message: &str,
    ) -> Result<String, CheckpointError> {
        check_refname(keep_ref)?;
        let previous = self.resolve_commit(keep_ref)?;
        let mut parents: Vec<String> = tip.iter().map(|t| (*t).to_owned()).collect();
        if let Some(p) = &previous
            && !parents.contains(p)
        {
            parents.push(p.clone());
        }
        let commit = self.commit_tree(tree, &parents, message)?;
        self.git
            .cmd([
                "update-ref",
                "-m",
                "spectr ralph: lane kept",
                keep_ref,
                &commit,
            ])
            .run()?;
        Ok(commit)
    }

    /// Merge-back, step 1 (writes nothing to the work tree): three-way merge
    /// of the lane's change (`base` -> `theirs`) onto this work tree's
    /// current content, checkpointed first under `checkpoint_ref`. Changes
    /// the lane made to paths in `skip` are left out.
    pub fn plan_merge(
        &self,
        base: &str,
        theirs: &str,
        checkpoint_ref: &str,
        skip: &[PathBuf],
    ) -> Result<MergePlan, CheckpointError> {
        let Some((theirs, skip)) = self.lane_change(base, theirs, skip)? else {
            return Ok(MergePlan::Nothing);
        };
        let (checkpoint, ours, meta) = self.create_with_tree(checkpoint_ref)?;
        match self.three_way(base, &ours, &theirs, &meta, &skip) {
            Ok(ThreeWay::Clean { merged, changes }) => Ok(MergePlan::Clean {
                checkpoint,
                ours,
                merged,
                changes,
            }),
            Ok(ThreeWay::Conflict { files, messages }) => {
                self.drop(&checkpoint)?;
                Ok(MergePlan::Conflict { files, messages })
            }
            Err(e) => {
                let _ = self.drop(&checkpoint);
                Err(e)
            }
        }
    }

    /// The lane's change to merge: `theirs` with the paths in `skip` put
    /// back as in `base`, and `skip` relative to the root; `None` when
    /// nothing is left to merge.
    fn lane_change(
        &self,
        base: &str,
        theirs: &str,
        skip: &[PathBuf],
    ) -> Result<Option<(String, Vec<PathBuf>)>, CheckpointError> {
        if base == theirs {
            return Ok(None);
        }
        let skip: Vec<PathBuf> = skip
            .iter()
            .filter_map(|p| exclude::repo_relative(&self.root, p))
            .collect();
        let lane_diff = self.diff_trees(base, theirs)?;
        let (skipped_diff, kept_diff): (Vec<&Diff>, Vec<&Diff>) =
            lane_diff.iter().partition(|d| is_skipped(&skip, &d.path));
        if kept_diff.is_empty() {
            return Ok(None);
        }
        let theirs = if skipped_diff.is_empty() {
            theirs.to_owned()
        } else {
            self.tree_with_base_at(theirs, &skipped_diff)?
        };
        Ok(Some((theirs, skip)))
    }

    /// `git merge-tree --write-tree --merge-base=<base> <ours> <theirs>`,
    /// and the paths the merge changes in `ours` (file modes from `meta`,
    /// the metadata of the snapshot whose tree is `ours`).
    fn three_way(
        &self,
        base: &str,
        ours: &str,
        theirs: &str,
        meta: &Meta,
        skip: &[PathBuf],
    ) -> Result<ThreeWay, CheckpointError> {
        let base_arg = format!("--merge-base={base}");
        let out = self
            .git
            .cmd(["merge-tree", "--write-tree", "-z", &base_arg, ours, theirs])
            .c_locale()
            .output()?;
        let parsed = match out.status.code() {
            Some(0 | 1) => parse_merge_tree(&out.stdout),
            _ => None,
        };
        let Some((merged, conflicted, messages)) = parsed else {
            return Err(CheckpointError::Git {
                command: format!("git merge-tree --write-tree -z {base_arg} {ours} {theirs}"),
                code: out.status.code(),
                stderr: out.stderr_text(),
            });
        };
        if out.status.code() == Some(1) {
            return Ok(ThreeWay::Conflict {
                files: conflicted.into_iter().collect(),
                messages,
            });
        }
        let mut changes = Vec::new();
        for d in self.diff_trees(ours, &merged)? {
            let gitlink = |e: &Option<MergeEntry>| e.as_ref().is_some_and(|e| e.mode == GITLINK);
            if gitlink(&d.old)
                || gitlink(&d.new)
                || self.is_excluded(&d.path)
                || is_skipped(skip, &d.path)
            {
                continue;
            }
            let file_mode = match (&d.old, &d.new) {
                (Some(o), Some(n)) if o.mode == n.mode => meta.mode_of(&d.path, n.mode),
                (_, Some(n)) if n.mode == 0o100755 => meta.default_modes.1,
                (_, Some(_)) => meta.default_modes.0,
                (_, None) => 0,
            };
            changes.push(MergeChange {
                path: String::from_utf8_lossy(&d.path).into_owned(),
                old: d.old,
                new: d.new,
                file_mode,
                raw: d.path,
            });
        }
        changes.sort_by(|a, b| a.raw.cmp(&b.raw));
        Ok(ThreeWay::Clean { merged, changes })
    }

    /// A merge-back a crash cut short, planned again: the same three-way
    /// merge (`base` -> `theirs` onto the tree `original`, its checkpoint,
    /// held), each path it changes sorted by what the work tree holds now:
    /// still the original content (to write), already the merged one
    /// (written before the crash), or something else (edited since).
    pub fn replan_merge(
        &self,
        original: &Checkpoint,
        base: &str,
        theirs: &str,
        skip: &[PathBuf],
    ) -> Result<CutShortMerge, CheckpointError> {
        let mut cut = CutShortMerge::default();
        let Some((theirs, skip)) = self.lane_change(base, theirs, skip)? else {
            return Ok(cut);
        };
        let objects = self.cat_batch(std::slice::from_ref(&original.commit))?;
        let text = objects
            .get(&original.commit)
            .ok_or_else(|| CheckpointError::Unexpected {
                command: format!("git cat-file --batch ({})", original.commit),
                output: "missing object".into(),
            })?;
        let ours = std::str::from_utf8(text)
            .ok()
            .and_then(|t| t.strip_prefix("tree "))
            .and_then(|t| t.split('\n').next())
            .map(str::to_owned)
            .ok_or_else(|| CheckpointError::Unexpected {
                command: format!("git cat-file --batch ({})", original.commit),
                output: "no tree".into(),
            })?;
        let meta = Meta::parse_commit(text);
        let changes = match self.three_way(base, &ours, &theirs, &meta, &skip)? {
            ThreeWay::Clean { changes, .. } => changes,
            ThreeWay::Conflict { files, .. } => {
                cut.changed = files;
                return Ok(cut);
            }
        };
        let blobs = self.blobs_of(&changes)?;
        let blob = |e: &Option<MergeEntry>| -> Result<Option<(u32, &[u8])>, CheckpointError> {
            match e {
                None => Ok(None),
                Some(e) => blobs
                    .get(&e.oid)
                    .map(|b| Some((e.mode, b.as_slice())))
                    .ok_or_else(|| CheckpointError::Unexpected {
                        command: "git cat-file --batch".into(),
                        output: format!("missing blob {}", e.oid),
                    }),
            }
        };
        // A file in the way of a path is fine where that file is one of the
        // merge's own paths (in the state checked).
        let files_in = |side: fn(&MergeChange) -> bool| -> BTreeSet<&[u8]> {
            changes
                .iter()
                .filter(|c| side(c))
                .map(|c| c.raw.as_slice())
                .collect()
        };
        let (in_ours, in_merged) = (files_in(|c| c.old.is_some()), files_in(|c| c.new.is_some()));
        let mut sorted: (Vec<usize>, Vec<usize>, Vec<usize>) = Default::default();
        for (i, c) in changes.iter().enumerate() {
            if self.holds(&c.raw, blob(&c.old)?, &in_ours) {
                sorted.0.push(i);
            } else if self.holds(&c.raw, blob(&c.new)?, &in_merged) {
                sorted.1.push(i);
            } else {
                sorted.2.push(i);
            }
        }
        cut.paths = changes.iter().map(|c| c.raw.clone()).collect();
        let pick = |ids: &[usize]| -> Vec<MergeChange> {
            ids.iter().map(|&i| changes[i].clone()).collect()
        };
        cut.pending = pick(&sorted.0);
        cut.done = pick(&sorted.1);
        cut.changed = sorted.2.iter().map(|&i| changes[i].path.clone()).collect();
        // Written back in reverse: the original content, with its mode.
        cut.undo = cut
            .done
            .iter()
            .map(|c| MergeChange {
                path: c.path.clone(),
                old: c.new.clone(),
                new: c.old.clone(),
                file_mode: c.old.as_ref().map_or(0, |o| meta.mode_of(&c.raw, o.mode)),
                raw: c.raw.clone(),
            })
            .collect();
        Ok(cut)
    }

    /// The plan writing what a cut-short merge still had to write, the
    /// work tree checkpointed first under `checkpoint_ref`.
    pub fn resume_plan(
        &self,
        cut: &CutShortMerge,
        checkpoint_ref: &str,
    ) -> Result<MergePlan, CheckpointError> {
        self.remove_cut_short_leftovers(cut);
        let (checkpoint, ours, _) = self.create_with_tree(checkpoint_ref)?;
        Ok(MergePlan::Clean {
            checkpoint,
            merged: ours.clone(),
            ours,
            changes: cut.pending.clone(),
        })
    }

    /// Puts back, path by path, the original content where a cut-short
    /// merge had written: nothing else in the tree is touched.
    pub fn undo_cut_short(&self, cut: &CutShortMerge) -> Result<Vec<String>, CheckpointError> {
        self.remove_cut_short_leftovers(cut);
        self.write_changes(&cut.undo)
    }

    /// The temporary files of the writes the crash cut short.
    fn remove_cut_short_leftovers(&self, cut: &CutShortMerge) {
        for p in &cut.paths {
            tree_io::remove_write_leftovers(&self.root, p);
        }
    }

    /// `theirs` with the given paths put back as they were in the base (the
    /// lane's changes there are not merged).
    fn tree_with_base_at(&self, theirs: &str, paths: &[&Diff]) -> Result<String, CheckpointError> {
        let tmp = self.temp_index(None)?;
        self.git.cmd(["read-tree", theirs]).index(&tmp.path).run()?;
        let zeros = "0".repeat(self.hash_len * 2);
        let mut input = Vec::new();
        for d in paths {
            let line = match &d.old {
                Some(e) => format!("{:o} {}\t", e.mode, e.oid),
                None => format!("0 {zeros}\t"),
            };
            input.extend_from_slice(line.as_bytes());
            input.extend_from_slice(&d.path);
            input.push(0);
        }
        self.git
            .cmd(["update-index", "-z", "--index-info"])
            .index(&tmp.path)
            .stdin(input)
            .run()?;
        self.write_tree(&tmp)
    }

    /// Merge-back, step 2: writes the plan's changes into the work tree
    /// (byte-exact, with modes; deletions included), after checking every
    /// path still holds what the checkpoint saw. Returns the paths written or
    /// removed, sorted.
    pub fn apply_merge(&self, plan: &MergePlan) -> Result<Vec<String>, CheckpointError> {
        let MergePlan::Clean { changes, .. } = plan else {
            return Ok(Vec::new());
        };
        self.write_changes(changes)
    }

    /// The blobs `changes` read or write, with one `git cat-file --batch`.
    fn blobs_of(
        &self,
        changes: &[MergeChange],
    ) -> Result<std::collections::BTreeMap<String, Vec<u8>>, CheckpointError> {
        let mut wanted: Vec<String> = changes
            .iter()
            .flat_map(|c| [&c.old, &c.new])
            .flatten()
            .map(|e| e.oid.clone())
            .collect();
        wanted.sort();
        wanted.dedup();
        self.cat_batch(&wanted)
    }

    /// Writes `changes` (each path checked first to hold its `old`).
    fn write_changes(&self, changes: &[MergeChange]) -> Result<Vec<String>, CheckpointError> {
        if changes.is_empty() {
            return Ok(Vec::new());
        }
        let blobs = self.blobs_of(changes)?;
        let blob = |oid: &str| {
            blobs
                .get(oid)
                .map(Vec::as_slice)
                .ok_or_else(|| CheckpointError::Unexpected {
                    command: "git cat-file --batch".into(),
                    output: format!("missing blob {oid}"),
                })
        };
        let removed: BTreeSet<&[u8]> = changes
            .iter()
            .filter(|c| c.old.is_some())
            .map(|c| c.raw.as_slice())
            .collect();
        // Check everything before writing anything.
        for c in changes {
            let expected = match &c.old {
                Some(e) => Some((e.mode, blob(&e.oid)?)),
                None => None,
            };
            if !self.holds(&c.raw, expected, &removed) {
                return Err(CheckpointError::ChangedDuringMerge {
                    path: c.path.clone(),
                });
            }
        }
        let mut done = Vec::new();
        for c in changes.iter().filter(|c| c.new.is_none()) {
            self.remove_added(&c.raw, &BTreeSet::new())?;
            done.push(c.path.clone());
        }
        for c in changes {
            let Some(new) = &c.new else { continue };
            let bytes = blob(&new.oid)?;
            let content = if new.mode == SYMLINK {
                tree_io::Content::Symlink { target: bytes }
            } else {
                tree_io::Content::File {
                    bytes,
                    mode: c.file_mode,
                }
            };
            let full = self.root.join(tree_io::rel_path(&c.raw));
            if std::fs::symlink_metadata(&full).is_ok_and(|m| m.is_dir()) {
                // Only an empty directory may be replaced (its files were
                // removed above); anything else there is not ours.
                std::fs::remove_dir(&full).map_err(|e| {
                    CheckpointError::io("cannot replace the directory (not empty) at", &full, e)
                })?;
            }
            tree_io::write_entry(&self.root, &c.raw, content)?;
            done.push(c.path.clone());
        }
        done.sort();
        done.dedup();
        Ok(done)
    }

    /// Whether `rel` holds `expected` (git mode and bytes), or nothing (a
    /// directory, or missing with no file in the way) when `None`.
    fn holds(&self, rel: &[u8], expected: Option<(u32, &[u8])>, removed: &BTreeSet<&[u8]>) -> bool {
        let full = self.root.join(tree_io::rel_path(rel));
        let meta = std::fs::symlink_metadata(&full);
        let Some((mode, bytes)) = expected else {
            // Every parent must be a directory, missing, or removed by the plan.
            let mut end = rel.len();
            while let Some(i) = rel[..end].iter().rposition(|&b| b == b'/') {
                let dir = &rel[..i];
                let m = std::fs::symlink_metadata(self.root.join(tree_io::rel_path(dir)));
                if m.is_ok_and(|m| !m.is_dir()) && !removed.contains(dir) {
                    return false;
                }
                end = i;
            }
            return match meta {
                Err(e) => e.kind() == std::io::ErrorKind::NotFound,
                Ok(m) => m.is_dir(),
            };
        };
        let Ok(m) = meta else { return false };
        if mode == SYMLINK {
            return m.is_symlink()
                && std::fs::read_link(&full).is_ok_and(|t| t.as_os_str().as_bytes() == bytes);
        }
        let executable = m.permissions().mode() & 0o100 != 0;
        m.is_file()
            && executable == (mode == 0o100755)
            && std::fs::read(&full).is_ok_and(|b| b == bytes)
    }

    /// Paths differing between two trees (or commits), with both sides.
    fn diff_trees(&self, a: &str, b: &str) -> Result<Vec<Diff>, CheckpointError> {
        let out = self
            .git
            .cmd(["diff-tree", "-r", "-z", "--no-renames", a, b])
            .run()?;
        let unexpected = || CheckpointError::Unexpected {
            command: format!("git diff-tree -r -z --no-renames {a} {b}"),
            output: String::from_utf8_lossy(&out).chars().take(500).collect(),
        };
        let mut diffs = Vec::new();
        let mut fields = out.split(|&b| b == 0);
        while let Some(head) = fields.next() {
            if head.is_empty() {
                break;
            }
            let path = fields.next().ok_or_else(unexpected)?;
            let head = String::from_utf8_lossy(head.strip_prefix(b":").ok_or_else(unexpected)?)
                .into_owned();
            let parts: Vec<&str> = head.split(' ').collect();
            let [old_mode, new_mode, old_oid, new_oid, _status] = parts.as_slice() else {
                return Err(unexpected());
            };
            let entry = |mode: &str, oid: &str| -> Result<Option<MergeEntry>, CheckpointError> {
                let mode = u32::from_str_radix(mode, 8).map_err(|_| unexpected())?;
                Ok((mode != 0).then(|| MergeEntry {
                    mode,
                    oid: oid.to_owned(),
                }))
            };
            diffs.push(Diff {
                path: path.to_vec(),
                old: entry(old_mode, old_oid)?,
                new: entry(new_mode, new_oid)?,
            });
        }
        Ok(diffs)
    }
}

impl LaneTree {
    /// Makes the lane's work tree exactly `tree` (only differing paths are
    /// written or removed; ignored files stay), HEAD detached at `head` (or
    /// where it is), and the lane's index HEAD's tree, refreshed. Commits
    /// made in the lane since the last reset are first kept under `keep_ref`.
    pub fn reset_to(
        &self,
        tree: &str,
        head: Option<&str>,
        keep_ref: Option<&str>,
    ) -> Result<LaneReset, CheckpointError> {
        let cp = &self.checkpointer;
        if let Some(k) = keep_ref {
            check_refname(k)?;
        }
        let mut notices = Vec::new();
        let marker = read_marker(&cp.git_dir);
        // A detached HEAD names its commit in its file: no git command.
        let detached = std::fs::read_to_string(cp.git_dir.join("HEAD"))
            .ok()
            .map(|t| t.trim().to_owned())
            .filter(|t| is_object_id(t));
        let head_now = match &detached {
            Some(h) => Some(h.clone()),
            None => cp.resolve_commit("HEAD")?,
        };
        let mut kept_commits = None;
        if let (Some(k), Some(now), Some(last)) = (keep_ref, &head_now, &marker.head)
            && now != last
        {
            let now_tree = format!("{now}^{{tree}}");
            let message = format!(
                "spectr ralph: commits made in lane {}\n\nlane: {}\n",
                cp.worktree,
                self.path.display()
            );
            cp.keep_under(k, &now_tree, Some(now), &message)?;
            kept_commits = Some(k.to_owned());
        }
        // What the agent left in progress would make the next checkpoint
        // refuse; a lock its killed git left would stop the index reset. No
        // agent runs in the lane during a reset (the caller's contract).
        cp.clear_operation_left_by_attempt();
        let lock = cp.index_lock_path();
        if lock.exists() && std::fs::remove_file(&lock).is_ok() {
            notices.push(format!(
                "removed a stale git index lock in the lane ({})",
                lock.display()
            ));
        }

        let (mut files_written, mut files_removed, ignore_rules) = cp.sync_to(tree)?;
        if ignore_rules {
            // A restored ignore file may unhide files the agent had made
            // ignored: they are not in `tree` either.
            let (w, r, _) = cp.sync_to(tree)?;
            files_written += w;
            files_removed += r;
        }

        let head = head.map(str::to_owned).or(head_now.clone());
        let index_path = cp.git_dir.join("index");
        if let Some(h) = &head {
            let moved = detached.is_none() || head_now.as_deref() != Some(h.as_str());
            if moved {
                cp.git
                    .cmd([
                        "update-ref",
                        "--no-deref",
                        "-m",
                        "spectr ralph: lane reset",
                        "HEAD",
                        h,
                    ])
                    .run()?;
            }
            // The index file as this reset left it last time, for the same
            // HEAD, still holds HEAD's tree: nothing to check.
            let untouched = !moved
                && marker.head.as_deref() == Some(h.as_str())
                && marker.index.is_some()
                && marker.index == index_fingerprint(&index_path);
            let holds_head = untouched || (!moved && cp.index_holds_tree_of(h)?);
            if !holds_head {
                // One tree: entries that match keep their stat data, so the
                // refresh hashes only what differs from HEAD.
                cp.git.cmd(["read-tree", "--reset", h.as_str()]).run()?;
                // Exits 1 when files differ from HEAD (the user's uncommitted work).
                cp.git.cmd(["update-index", "-q", "--refresh"]).output()?;
            }
        }
        let marker = Marker {
            tree: Some(tree.to_owned()),
            head: head.clone(),
            index: index_fingerprint(&index_path),
        };
        write_marker(&cp.git_dir, &marker)?;
        Ok(LaneReset {
            files_written,
            files_removed,
            kept_commits,
            notices,
        })
    }
}

impl Checkpointer {
    /// Whether the index holds exactly `commit`'s tree (no unmerged entry,
    /// nothing staged).
    fn index_holds_tree_of(&self, commit: &str) -> Result<bool, CheckpointError> {
        let index_tree = self.git.cmd(["write-tree"]).output()?;
        if !index_tree.status.success() {
            return Ok(false);
        }
        let tree = format!("{commit}^{{tree}}");
        let out = self
            .git
            .cmd(["rev-parse", "-q", "--verify", &tree])
            .output()?;
        Ok(out.status.success() && out.stdout_line() == index_tree.stdout_line())
    }

    /// Makes the work tree's content `tree`: writes and removes only the
    /// paths where a fresh snapshot differs. Returns (written, removed,
    /// whether an ignore file changed).
    fn sync_to(&self, tree: &str) -> Result<(usize, usize, bool), CheckpointError> {
        let current = self.snapshot_tree()?;
        if current == tree {
            return Ok((0, 0, false));
        }
        let diffs = self.diff_trees(&current, tree)?;
        let mut removed = 0;
        for d in diffs.iter().filter(|d| d.new.is_none()) {
            if self.remove_added(&d.path, &BTreeSet::new())? {
                removed += 1;
            }
        }
        let writes: Vec<(&Diff, &MergeEntry)> = diffs
            .iter()
            .filter_map(|d| d.new.as_ref().map(|n| (d, n)))
            .filter(|(_, n)| n.mode != GITLINK)
            .collect();
        let oids: Vec<String> = writes.iter().map(|(_, n)| n.oid.clone()).collect();
        let blobs = self.cat_batch(&oids)?;
        for (d, n) in &writes {
            let Some(bytes) = blobs.get(&n.oid) else {
                return Err(CheckpointError::Unexpected {
                    command: "git cat-file --batch".into(),
                    output: format!("missing blob {}", n.oid),
                });
            };
            let content = match n.mode {
                SYMLINK => tree_io::Content::Symlink { target: bytes },
                0o100755 => tree_io::Content::File { bytes, mode: 0o755 },
                _ => tree_io::Content::File { bytes, mode: 0o644 },
            };
            tree_io::write_entry(&self.root, &d.path, content)?;
        }
        let ignore_rules = diffs
            .iter()
            .any(|d| d.path == b".gitignore" || d.path.ends_with(b"/.gitignore"));
        Ok((writes.len(), removed, ignore_rules))
    }
}

/// `path` absolute with its parent's symlinks resolved (as git records a
/// worktree's path); parents created when asked.
fn lane_path(path: &Path, create: bool) -> Result<PathBuf, CheckpointError> {
    let abs = if path.is_absolute() {
        path.to_owned()
    } else {
        std::env::current_dir()
            .map_err(|e| CheckpointError::io("cannot read the current directory", path, e))?
            .join(path)
    };
    let (Some(parent), Some(name)) = (abs.parent(), abs.file_name()) else {
        return Err(CheckpointError::Lane {
            path: abs,
            reason: "not a folder path".into(),
        });
    };
    if create {
        std::fs::create_dir_all(parent)
            .map_err(|e| CheckpointError::io("cannot create the lanes folder", parent, e))?;
    }
    Ok(match parent.canonicalize() {
        Ok(p) => p.join(name),
        Err(_) => abs,
    })
}

/// A linked worktree's git dir, from the `gitdir:` line of its `.git` file.
fn admin_dir(worktree: &Path) -> Option<PathBuf> {
    let text = std::fs::read(worktree.join(".git")).ok()?;
    let line = text.strip_prefix(b"gitdir: ")?;
    let end = line.iter().position(|&b| b == b'\n').unwrap_or(line.len());
    let dir = Path::new(OsStr::from_bytes(&line[..end]));
    Some(worktree.join(dir))
}

fn dir_has_entries(path: &Path) -> bool {
    std::fs::read_dir(path).is_ok_and(|mut d| d.next().is_some())
}

fn remove_dir(path: &Path) -> Result<(), CheckpointError> {
    match std::fs::remove_dir_all(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(CheckpointError::io(
            "cannot remove the lane folder",
            path,
            e,
        )),
        _ => Ok(()),
    }
}

/// What the lane's last reset left: its tree, HEAD, and the index file's
/// identity (size, times, inode) right after.
#[derive(Debug, Default, PartialEq, Eq)]
struct Marker {
    tree: Option<String>,
    head: Option<String>,
    index: Option<String>,
}

fn read_marker(git_dir: &Path) -> Marker {
    let text = std::fs::read_to_string(git_dir.join(MARKER)).unwrap_or_default();
    let field = |key: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(key))
            .map(str::to_owned)
    };
    Marker {
        tree: field("tree "),
        head: field("head "),
        index: field("index "),
    }
}

fn write_marker(git_dir: &Path, marker: &Marker) -> Result<(), CheckpointError> {
    let mut text = String::new();
    for (key, value) in [
        ("tree", &marker.tree),
        ("head", &marker.head),
        ("index", &marker.index),
    ] {
        if let Some(v) = value {
            text.push_str(&format!("{key} {v}\n"));
        }
    }
    let path = git_dir.join(MARKER);
    let tmp = git_dir.join(format!("{MARKER}.tmp"));
    std::fs::write(&tmp, text)
        .and_then(|()| std::fs::rename(&tmp, &path))
        .map_err(|e| CheckpointError::io("cannot record the lane's reset", path, e))
}

/// A file's size, modification and change times (ns) and inode: any
/// rewrite changes one of them.
fn index_fingerprint(path: &Path) -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::symlink_metadata(path).ok()?;
    Some(format!(
        "{} {}.{} {}.{} {}",
        m.len(),
        m.mtime(),
        m.mtime_nsec(),
        m.ctime(),
        m.ctime_nsec(),
        m.ino()
    ))
}

/// `git merge-tree --write-tree -z` output: the merged tree, the conflicted
/// paths, and the informational messages.
fn parse_merge_tree(out: &[u8]) -> Option<(String, BTreeSet<String>, Vec<String>)> {
    let mut fields = out.split(|&b| b == 0);
    let tree = String::from_utf8_lossy(fields.next()?).trim().to_owned();
    if tree.is_empty() {
        return None;
    }
    let mut conflicted = BTreeSet::new();
    // "<mode> <object> <stage>\t<path>" until an empty field.
    for f in fields.by_ref() {
        if f.is_empty() {
            break;
        }
        let tab = f.iter().position(|&b| b == b'\t')?;
        conflicted.insert(String::from_utf8_lossy(&f[tab + 1..]).into_owned());
    }
    // "<count>\0<path>...\0<type>\0<message>\0" per message.
    let mut messages = Vec::new();
    while let Some(count) = fields.next() {
        if count.is_empty() {
            continue;
        }
        let n: usize = std::str::from_utf8(count).ok()?.parse().ok()?;
        for _ in 0..n {
            fields.next()?;
        }
        let _kind = fields.next()?;
        let message = fields.next()?;
        messages.push(String::from_utf8_lossy(message).trim_end().to_owned());
    }
    Some((tree, conflicted, messages))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merge_tree_output_with_conflicts_is_parsed() {
        let out = b"f21f\x00100644 de98 1\tf\x00100644 4f21 2\tf\x00100644 bdfb 3\tf\x00\x001\x00f\x00Auto-merging\x00Auto-merging f\n\x001\x00f\x00CONFLICT (contents)\x00CONFLICT (content): Merge conflict in f\n\x00";
        let (tree, files, messages) = parse_merge_tree(out).unwrap();
        assert_eq!(tree, "f21f");
        assert_eq!(files.into_iter().collect::<Vec<_>>(), ["f"]);
        assert_eq!(
            messages,
            ["Auto-merging f", "CONFLICT (content): Merge conflict in f"]
        );
    }

    #[test]
    fn clean_merge_tree_output_is_parsed() {
        let (tree, files, messages) = parse_merge_tree(b"47dd\x00").unwrap();
        assert_eq!(tree, "47dd");
        assert!(files.is_empty() && messages.is_empty());
    }

    #[test]
    fn the_marker_round_trips() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(read_marker(dir.path()), Marker::default());
        let marker = Marker {
            tree: Some("t1".into()),
            head: Some("h1".into()),
            index: Some("1 2.3 4.5 6".into()),
        };
        write_marker(dir.path(), &marker).unwrap();
        assert_eq!(read_marker(dir.path()), marker);
    }
}
