//! Parallel lanes: linked git worktrees spectr owns, filled from a snapshot
//! of the user's tree (their merge back is `merge.rs`).
//!
//! The user's HEAD, branch, index and stash are only read. A lane's HEAD is
//! always detached (the user's branch is checked out elsewhere), so nothing
//! done in a lane moves a branch. Before a lane is reset or removed, commits
//! made in it and its content are kept reachable under a ref the caller names.

use super::error::CheckpointError;
use super::snapshot::{check_refname, is_object_id};
use super::tree_diff::{Diff, GITLINK, MergeEntry, SYMLINK};
use super::{Checkpointer, escape_component, tree_io};
use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
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
        self.remove_stale_lanes_of(dir, keep_prefix, None)
    }

    /// [`Checkpointer::remove_stale_lanes`] for the lanes of `change`: the
    /// checkpoint refs each one's killed attempt may have taken before the
    /// run could record them go too (the lane is gone, nothing reverts it).
    pub fn remove_stale_lanes_of(
        &self,
        dir: &Path,
        keep_prefix: &str,
        change: Option<&str>,
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
            let git_name = admin_dir(path)
                .and_then(|d| d.file_name().map(|n| n.to_string_lossy().into_owned()));
            let keep = format!("{prefix}/{}", escape_component(name));
            self.remove_lane(path, &keep)?;
            if let (Some(change), Some(git_name)) = (change, git_name) {
                let doomed: Vec<String> = self
                    .refs_under(&[super::refs::change_prefix(&git_name, change)])?
                    .into_iter()
                    .filter(|r| super::refs::is_checkpoint_ref(r))
                    .collect();
                self.delete_refs(&doomed)?;
            }
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

#[cfg(test)]
mod tests {
    use super::*;

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
