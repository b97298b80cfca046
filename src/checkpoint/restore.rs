//! Reverting to a checkpoint: keep the failed attempt's work under its own
//! ref first, then put back the files, HEAD and its branch, and the index.
//!
//! Never `reset --hard` nor `clean`: only paths that differ between the two
//! snapshots are written or removed, so ignored files, excluded paths and
//! `.git` are never touched.

use super::error::CheckpointError;
use super::exclude::{self, exclude_pathspec};
use super::ignore::{self, IgnoreFile};
use super::meta::Meta;
use super::snapshot::{HeadState, RefsNow, check_refname, nested_notice};
use super::temp_index::distrust_stats;
use super::{Checkpoint, Checkpointer, Reverted, owner, tree_io};
use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsStr;
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// One entry of a checkpoint's tree.
struct TreeEntry {
    mode: u32,
    oid: String,
    path: Vec<u8>,
}

/// Directories a revert must not remove: those holding checkpoint files,
/// and the checkpoint's empty directories with their parents.
fn kept_dirs(files: &[TreeEntry], meta: &Meta) -> BTreeSet<Vec<u8>> {
    let mut keep = BTreeSet::new();
    let paths = files
        .iter()
        .map(|e| e.path.as_slice())
        .chain(meta.empty_dirs.iter().map(|d| {
            // Count the directory itself as a parent.
            d.as_slice()
        }));
    for p in paths {
        let mut end = p.len();
        while let Some(i) = p[..end].iter().rposition(|&b| b == b'/') {
            keep.insert(p[..i].to_vec());
            end = i;
        }
    }
    for d in &meta.empty_dirs {
        keep.insert(d.clone());
    }
    keep
}

/// git's mode for a gitlink (submodule or nested repository): left alone.
const GITLINK: &[u8] = b"160000";

/// One path that differs between the failed snapshot and the checkpoint.
#[derive(Debug)]
struct Change {
    path: Vec<u8>,
    /// Present in the checkpoint (write it back) or only in the failed
    /// snapshot (remove it).
    in_checkpoint: bool,
}

/// The committer timestamp (seconds) of a commit object's text.
fn committer_time(commit: &[u8]) -> Option<i64> {
    let header = commit.split(|&b| b == b'\n').take_while(|l| !l.is_empty());
    for line in header {
        if let Some(rest) = line.strip_prefix(b"committer ") {
            let text = String::from_utf8_lossy(rest);
            let mut fields = text.rsplit(' ');
            let _tz = fields.next()?;
            return fields.next()?.parse().ok();
        }
    }
    None
}

impl Checkpointer {
    /// Snapshots the current work tree under `failed_ref` (never lost: its
    /// parents keep the agent's commits reachable, and a commit already at
    /// `failed_ref` too), then restores `cp` exactly: files (bytes, modes,
    /// symlinks, empty directories), HEAD and its branch, the user's index
    /// and stash. `cp`'s own refs are kept.
    ///
    /// Safe to run again after being killed half way: the failed snapshot is
    /// taken once, and the restore just finishes.
    ///
    /// Branches and tags (`refs/heads/*`, `refs/tags/*`) the attempt deleted
    /// or moved are put back; one it made is removed. Either way what it
    /// moved or made stays under `<failed_ref>-refs/`. Never a branch checked
    /// out in another work tree. In a lane, whose neighbours share every
    /// ref, one made during the attempt is left where it is.
    pub fn revert(&self, cp: &Checkpoint, failed_ref: &str) -> Result<Reverted, CheckpointError> {
        self.revert_with(cp, failed_ref, !self.lane)
    }

    /// [`Checkpointer::revert`] that removes no branch or tag made since the
    /// checkpoint: after a crash it may be the person's (made after the
    /// crash), and while lanes run another lane's.
    pub fn revert_leaving_new_refs(
        &self,
        cp: &Checkpoint,
        failed_ref: &str,
    ) -> Result<Reverted, CheckpointError> {
        self.revert_with(cp, failed_ref, false)
    }

    fn revert_with(
        &self,
        cp: &Checkpoint,
        failed_ref: &str,
        remove_new_refs: bool,
    ) -> Result<Reverted, CheckpointError> {
        check_refname(failed_ref)?;
        if failed_ref == cp.refname
            || failed_ref == Checkpointer::index_ref_name(&cp.refname)
            || failed_ref.starts_with(&Checkpointer::stash_refs_prefix(&cp.refname))
        {
            return Err(CheckpointError::InvalidRef {
                refname: failed_ref.to_owned(),
                reason: format!("would overwrite checkpoint {}", cp.refname),
            });
        }
        self.forget_kept();
        self.clean_stale_temp_dirs();
        let mut notices = Vec::new();
        notices.extend(self.recover_own_index_lock());

        // Fetch everything the restore needs before changing anything.
        let mut wanted = vec![cp.commit.clone()];
        wanted.extend(cp.index.iter().cloned());
        let objects = self.cat_batch(&wanted)?;
        let object = |oid: &str| -> Result<Vec<u8>, CheckpointError> {
            objects
                .get(oid)
                .map(|b| b.to_vec())
                .ok_or_else(|| CheckpointError::Unexpected {
                    command: format!("git cat-file --batch ({oid})"),
                    output: "missing object".into(),
                })
        };
        let commit_text = object(&cp.commit)?;
        let meta = Meta::parse_commit(&commit_text);
        let taken_at = committer_time(&commit_text);
        let saved_index = match &cp.index {
            Some(blob) => Some(object(blob)?),
            None => None,
        };
        // A lock left by the agent's killed git would stop us half way: say
        // so before anything changes.
        let lock = self.index_lock_path();
        if lock.exists() && self.read_user_index()? != saved_index {
            return Err(CheckpointError::IndexLocked { path: lock });
        }
        let refs_now = self.head_and_stash()?;
        let (now, stash_now) = (&refs_now.head, refs_now.stash.clone());
        let branch_tip = match &cp.branch {
            Some(b) => self.resolve_commit(b)?,
            None => None,
        };
        let checkpoint_files = self.tree_entries(&cp.commit)?;

        // Files untouched since before the checkpoint that it never held.
        let mut predating = Vec::new();
        let mut resumed = false;
        let failed_commit = match self.interrupted_revert(&cp.commit, failed_ref) {
            Some(done) if self.resolve_commit(failed_ref)?.as_deref() == Some(done.as_str()) => {
                resumed = true;
                notices.push(format!(
                    "finished a revert that was interrupted; the failed work was already saved in {failed_ref}"
                ));
                done
            }
            _ => {
                let (commit, nested) = self.snapshot_failed(
                    cp,
                    failed_ref,
                    now,
                    branch_tip.as_ref(),
                    &checkpoint_files,
                    taken_at,
                    &mut predating,
                )?;
                if !nested.is_empty() {
                    notices.push(nested_notice(&nested));
                }
                commit
            }
        };
        self.mark_revert_started(&cp.commit, failed_ref, &failed_commit)?;

        // The failed work is safe: now restore.
        let changes = self.changes(&failed_commit, &cp.commit)?;
        let (to_write, to_remove): (Vec<Change>, Vec<Change>) =
            changes.into_iter().partition(|c| c.in_checkpoint);
        let keep_dirs = kept_dirs(&checkpoint_files, &meta);
        let mut files_removed = 0;
        for c in &to_remove {
            if taken_at.is_some_and(|t| self.unchanged_since_before(&c.path, t)) {
                // Not created by the attempt: it was ignored at the checkpoint
                // by rules the checkpoint does not hold (a `.gitignore` that
                // ignores itself, like a virtualenv's `*`).
                predating.push(String::from_utf8_lossy(&c.path).into_owned());
                continue;
            }
            if self.remove_added(&c.path, &keep_dirs)? {
                files_removed += 1;
            }
        }
        if !predating.is_empty() {
            let count = predating.len();
            predating.truncate(10);
            notices.push(format!(
                "left alone: {} untouched since before the checkpoint and not in it (ignored by rules it does not hold, e.g. a .gitignore that ignores itself, as a virtualenv's): {}{}",
                crate::text::count(count as u64, "file", "files"),
                predating.join(", "),
                if count > 10 { ", ..." } else { "" }
            ));
        }
        let by_path: BTreeMap<&[u8], &TreeEntry> = checkpoint_files
            .iter()
            .map(|e| (e.path.as_slice(), e))
            .collect();
        let writes: Vec<&TreeEntry> = to_write
            .iter()
            .filter_map(|c| by_path.get(c.path.as_slice()).copied())
            .collect();
        if resumed {
            // A write the kill cut short left its temporary file beside its
            // target; the failed work was saved before it, so it is in no diff.
            for c in to_write.iter().chain(&to_remove) {
                tree_io::remove_write_leftovers(&self.root, &c.path);
            }
        }
        self.write_entries(&writes, &meta)?;
        let mut files_restored = writes.len();
        for e in &checkpoint_files {
            if (e.mode == 0o100644 || e.mode == 0o100755)
                && !self.is_excluded(&e.path)
                && tree_io::fix_mode(&self.root, &e.path, meta.mode_of(&e.path, e.mode))?
                && !to_write.iter().any(|c| c.path == e.path)
            {
                files_restored += 1;
            }
        }
        for dir in &meta.empty_dirs {
            tree_io::make_dirs(&self.root, &tree_io::rel_path(dir))?;
        }
        self.remove_new_empty_dirs(&cp.commit, &keep_dirs)?;
        let head_restored = self.restore_head(cp, now, branch_tip)?;
        notices.extend(self.restore_refs(&meta, cp, failed_ref, &refs_now, remove_new_refs));
        if meta.present {
            let ended = self.clear_operation_left_by_attempt();
            if !ended.is_empty() {
                notices.push(format!(
                    "ended what the attempt left in progress ({}), as its --abort would",
                    ended.join(", ")
                ));
            }
        }
        if meta.present && !self.lane && self.restore_stash(&meta, stash_now.as_deref())? {
            notices.push("the stash was put back as it was at the checkpoint".to_owned());
        }
        self.restore_user_index(saved_index)?;
        self.mark_revert_done();

        Ok(Reverted {
            failed_ref: failed_ref.to_owned(),
            failed_commit,
            files_restored,
            files_removed,
            head_restored,
            notices,
        })
    }

    /// After a completed attempt in this tree that must leave git's state as
    /// a lane's merge would (lanes taking turns): the work tree stays as the
    /// agent left it, while HEAD, its branch and the index go back to what
    /// `cp` recorded. Commits the agent made are kept under `keep_ref`.
    /// Returns the commit kept there, when HEAD or its branch had moved.
    /// `head_moved`: whether HEAD or its branch was seen to move (when not,
    /// only the index is looked at, without a git command when it is the
    /// checkpoint's).
    pub fn keep_tree_put_back_head(
        &self,
        cp: &Checkpoint,
        keep_ref: &str,
        head_moved: bool,
    ) -> Result<Option<String>, CheckpointError> {
        check_refname(keep_ref)?;
        if !head_moved && self.index_is_checkpoints(cp)? {
            return Ok(None);
        }
        let saved_index = cp
            .index
            .as_deref()
            .map(|blob| self.cat_one(blob))
            .transpose()?;
        let refs_now = self.head_and_stash()?;
        let now = &refs_now.head;
        let branch_tip = match &cp.branch {
            Some(b) => self.resolve_commit(b)?,
            None => None,
        };
        let moved = now.branch != cp.branch
            || now.commit != cp.head
            || branch_tip.is_some() && branch_tip != cp.head;
        let mut kept = None;
        if moved {
            // What HEAD (or the branch) points at now: the agent's commits.
            let tip = now.commit.clone().or(branch_tip.clone());
            if let Some(tip) = tip.filter(|t| Some(t) != cp.head.as_ref()) {
                self.git
                    .cmd(["update-ref", "-m", "spectr ralph: keep", keep_ref, &tip])
                    .run()?;
                kept = Some(tip);
            }
            self.restore_head(cp, now, branch_tip)?;
        }
        self.restore_user_index(saved_index)?;
        Ok(kept)
    }

    /// Whether the user's index holds what `cp` recorded, by the bytes this
    /// run stored last (no git command).
    fn index_is_checkpoints(&self, cp: &Checkpoint) -> Result<bool, CheckpointError> {
        let now = self.read_user_index()?;
        Ok(match (now, &cp.index) {
            (None, None) => true,
            (Some(bytes), Some(blob)) => self.stored_index_blob(&bytes).as_ref() == Some(blob),
            _ => false,
        })
    }

    /// Saves the work tree under `failed_ref`. Untracked files are found with
    /// the checkpoint's ignore rules, never the agent's; nested repositories
    /// are left out (and returned), and so are files untouched since before
    /// the checkpoint was taken (`taken_at`): the checkpoint did not hold
    /// them, so rules it does not know ignored them (added to `predating`).
    #[allow(clippy::too_many_arguments)]
    fn snapshot_failed(
        &self,
        cp: &Checkpoint,
        failed_ref: &str,
        now: &HeadState,
        branch_tip: Option<&String>,
        checkpoint_files: &[TreeEntry],
        taken_at: Option<i64>,
        predating: &mut Vec<String>,
    ) -> Result<(String, Vec<String>), CheckpointError> {
        let previous_failed = self.resolve_commit(failed_ref)?;
        let user_index = self.read_user_index()?;
        let tmp = self.temp_index(user_index.as_deref())?;
        // The checkpoint's paths: a file the agent made ignored is still
        // tracked here, so its changes are saved and restored.
        self.git
            .cmd(["read-tree", "--reset", &cp.commit])
            .index(&tmp.path)
            .run()?;
        // Losing the agent's work is worse than hashing every file: no cached
        // stat is trusted here (an edit of the same size within the second
        // the stats were taken would look unchanged).
        distrust_stats(&tmp.path)?;
        if !checkpoint_files.is_empty() {
            // (With an empty index git refuses the "." pathspec.)
            self.git
                .cmd(["add", "-u", "--", "."])
                .args(self.excludes.iter().map(|p| exclude_pathspec(p)))
                .index(&tmp.path)
                .run()?;
        }
        let rules = self.checkpoint_ignore_rules(checkpoint_files)?;
        let rules_path = tmp.path.with_file_name("exclude");
        std::fs::write(&rules_path, rules)
            .map_err(|e| CheckpointError::io("cannot write", &rules_path, e))?;
        let mut exclude_arg = std::ffi::OsString::from("--exclude-from=");
        exclude_arg.push(&rules_path);
        let out = self
            .git
            .cmd(["ls-files", "-z", "-o"])
            .arg(&exclude_arg)
            .args(["--", "."])
            .args(self.excludes.iter().map(|p| exclude_pathspec(p)))
            .index(&tmp.path)
            .run()?;
        let mut nested = Vec::new();
        let mut add = Vec::new();
        for path in out.split(|&b| b == 0).filter(|p| !p.is_empty()) {
            if self.is_excluded(path) {
                continue;
            }
            if path.ends_with(b"/") {
                // A repository inside the work tree: never ours to save or remove.
                nested.push(String::from_utf8_lossy(path).into_owned());
            } else if taken_at.is_some_and(|t| self.unchanged_since_before(path, t)) {
                predating.push(String::from_utf8_lossy(path).into_owned());
            } else {
                add.extend_from_slice(path);
                add.push(0);
            }
        }
        if !add.is_empty() {
            self.git
                .cmd(["update-index", "--add", "-z", "--stdin"])
                .index(&tmp.path)
                .stdin(add)
                .run()?;
        }
        let tree = self.write_tree(&tmp)?;
        let mut parents: Vec<String> = Vec::new();
        let moved_tip = branch_tip.cloned().filter(|t| Some(t) != cp.head.as_ref());
        for p in [now.commit.clone(), moved_tip, previous_failed.clone()]
            .into_iter()
            .flatten()
        {
            if !parents.contains(&p) {
                parents.push(p);
            }
        }
        let failed_commit = self.commit_tree(
            &tree,
            &parents,
            &format!(
                "spectr ralph: failed attempt\n\ncheckpoint: {}\ncheckpoint-commit: {}\nref: {failed_ref}\n",
                cp.refname, cp.commit
            ),
        )?;
        let script = match &previous_failed {
            Some(old) => format!("update {failed_ref} {failed_commit} {old}\n"),
            None => format!("create {failed_ref} {failed_commit}\n"),
        };
        self.git
            .cmd([
                "update-ref",
                "-m",
                "spectr ralph: failed attempt",
                "--stdin",
            ])
            .stdin(script.into_bytes())
            .run()?;
        Ok((failed_commit, nested))
    }

    /// The checkpoint's ignore rules as one exclude file's bytes.
    fn checkpoint_ignore_rules(&self, files: &[TreeEntry]) -> Result<Vec<u8>, CheckpointError> {
        let gitignores: Vec<&TreeEntry> = files
            .iter()
            .filter(|e| {
                (e.mode == 0o100644 || e.mode == 0o100755)
                    && (e.path == b".gitignore" || e.path.ends_with(b"/.gitignore"))
            })
            .collect();
        let oids: Vec<String> = gitignores.iter().map(|e| e.oid.clone()).collect();
        let blobs = self.cat_batch(&oids)?;
        let ignore_files = gitignores
            .iter()
            .filter_map(|e| {
                let content = blobs.get(&e.oid)?.to_vec();
                let dir = e.path[..e.path.len() - b".gitignore".len()].to_vec();
                Some(IgnoreFile { dir, content })
            })
            .collect();
        let global = self
            .excludes_file
            .as_ref()
            .and_then(|p| std::fs::read(p).ok());
        let info = std::fs::read(self.common_dir.join("info/exclude")).ok();
        Ok(ignore::assemble(
            global.as_deref(),
            info.as_deref(),
            ignore_files,
        ))
    }

    /// Every entry of a commit's tree (recursively).
    fn tree_entries(&self, commit: &str) -> Result<Vec<TreeEntry>, CheckpointError> {
        let out = self
            .git
            .cmd(["ls-tree", "-r", "-z", "--full-tree", commit])
            .run()?;
        let mut entries = Vec::new();
        for item in out.split(|&b| b == 0).filter(|i| !i.is_empty()) {
            let bad = || CheckpointError::Unexpected {
                command: format!("git ls-tree -r -z {commit}"),
                output: String::from_utf8_lossy(item).into_owned(),
            };
            let (words, path) = super::tree_io::split_entry(item).ok_or_else(bad)?;
            let [mode, _, oid] = words.as_slice() else {
                return Err(bad());
            };
            entries.push(TreeEntry {
                mode: u32::from_str_radix(mode, 8).map_err(|_| bad())?,
                oid: oid.clone(),
                path: path.to_vec(),
            });
        }
        Ok(entries)
    }

    /// Objects by id, with one `git cat-file --batch`.
    pub(crate) fn cat_batch(
        &self,
        oids: &[String],
    ) -> Result<BTreeMap<String, Vec<u8>>, CheckpointError> {
        if oids.is_empty() {
            return Ok(BTreeMap::new());
        }
        let input: String = oids.iter().map(|o| format!("{o}\n")).collect();
        let out = self
            .git
            .cmd(["cat-file", "--batch", "--buffer"])
            .stdin(input.into_bytes())
            .run()?;
        let parsed = tree_io::parse_batch(&out).ok_or_else(|| CheckpointError::Unexpected {
            command: "git cat-file --batch".into(),
            output: String::from_utf8_lossy(&out[..out.len().min(200)]).into_owned(),
        })?;
        Ok(parsed.into_iter().map(|(k, v)| (k, v.to_vec())).collect())
    }

    /// One object's bytes (`git cat-file --batch`); a missing one is an error.
    pub(crate) fn cat_one(&self, oid: &str) -> Result<Vec<u8>, CheckpointError> {
        self.cat_batch(&[oid.to_owned()])?
            .remove(oid)
            .ok_or_else(|| CheckpointError::Unexpected {
                command: format!("git cat-file --batch ({oid})"),
                output: "missing object".into(),
            })
    }

    /// Writes checkpoint entries byte for byte (no smudge filter, no line
    /// ending conversion) with their recorded modes.
    fn write_entries(&self, entries: &[&TreeEntry], meta: &Meta) -> Result<(), CheckpointError> {
        let oids: Vec<String> = entries.iter().map(|e| e.oid.clone()).collect();
        let blobs = self.cat_batch(&oids)?;
        for e in entries {
            let Some(bytes) = blobs.get(&e.oid) else {
                return Err(CheckpointError::Unexpected {
                    command: "git cat-file --batch".into(),
                    output: format!("missing blob {}", e.oid),
                });
            };
            let content = if e.mode == 0o120000 {
                tree_io::Content::Symlink { target: bytes }
            } else {
                tree_io::Content::File {
                    bytes,
                    mode: meta.mode_of(&e.path, e.mode),
                }
            };
            tree_io::write_entry(&self.root, &e.path, content)?;
        }
        Ok(())
    }

    /// Removes empty directories the attempt created (not ignored by the
    /// checkpoint's rules, not the checkpoint's own empty directories).
    fn remove_new_empty_dirs(
        &self,
        checkpoint: &str,
        keep: &BTreeSet<Vec<u8>>,
    ) -> Result<(), CheckpointError> {
        let tmp = self.temp_index(None)?;
        self.git
            .cmd(["read-tree", checkpoint])
            .index(&tmp.path)
            .run()?;
        let out = self
            .git
            .cmd([
                "ls-files",
                "-z",
                "-o",
                "--directory",
                "--exclude-standard",
                "--",
                ".",
            ])
            .args(self.excludes.iter().map(|p| exclude_pathspec(p)))
            .index(&tmp.path)
            .run()?;
        for entry in out
            .split(|&b| b == 0)
            .filter(|p| p.ends_with(b"/") && !self.is_excluded(p))
        {
            tree_io::prune_empty(&self.root, &entry[..entry.len() - 1], keep);
        }
        Ok(())
    }

    /// Paths differing between two snapshot commits, gitlinks and excluded
    /// paths left out.
    fn changes(&self, failed: &str, checkpoint: &str) -> Result<Vec<Change>, CheckpointError> {
        let out = self
            .git
            .cmd(["diff-tree", "-r", "-z", "--no-renames", failed, checkpoint])
            .run()?;
        let unexpected = || CheckpointError::Unexpected {
            command: format!("git diff-tree -r -z --no-renames {failed} {checkpoint}"),
            output: String::from_utf8_lossy(&out).chars().take(500).collect(),
        };
        let mut changes = Vec::new();
        let mut fields = out.split(|&b| b == 0);
        while let Some(meta) = fields.next() {
            if meta.is_empty() {
                break;
            }
            let path = fields.next().ok_or_else(unexpected)?;
            // ":<old mode> <new mode> <old id> <new id> <status>"
            let meta: Vec<&[u8]> = meta
                .strip_prefix(b":")
                .ok_or_else(unexpected)?
                .split(|&b| b == b' ')
                .collect();
            let [old_mode, new_mode, _, _, status] = meta.as_slice() else {
                return Err(unexpected());
            };
            if *old_mode == GITLINK || *new_mode == GITLINK || self.is_excluded(path) {
                continue;
            }
            let in_checkpoint = match status.first() {
                Some(b'D') => false,
                Some(b'A' | b'M' | b'T') => true,
                _ => return Err(unexpected()),
            };
            changes.push(Change {
                path: path.to_vec(),
                in_checkpoint,
            });
        }
        Ok(changes)
    }

    /// The loop's own paths, and every change's run state: never saved as
    /// an attempt's work, never written or removed, never named to the user.
    pub(crate) fn is_excluded(&self, path: &[u8]) -> bool {
        let rel = Path::new(OsStr::from_bytes(path));
        self.excludes.iter().any(|e| rel.starts_with(e)) || exclude::is_run_state(path)
    }

    /// Whether the file at `rel` was last created, written, renamed or
    /// chmod'ed before the second `taken_at` began (its ctime, which no
    /// program can set back): then the attempt did not make it.
    fn unchanged_since_before(&self, rel: &[u8], taken_at: i64) -> bool {
        use std::os::unix::fs::MetadataExt;
        std::fs::symlink_metadata(self.root.join(tree_io::rel_path(rel)))
            .is_ok_and(|m| !m.is_dir() && m.ctime() < taken_at)
    }

    /// Removes a file the attempt added; then its directories if now empty
    /// (but not those the checkpoint has). Never follows a symlink out of
    /// the work tree.
    pub(crate) fn remove_added(
        &self,
        rel: &[u8],
        keep: &BTreeSet<Vec<u8>>,
    ) -> Result<bool, CheckpointError> {
        let rel = PathBuf::from(OsStr::from_bytes(rel));
        let Some(parent) = rel.parent() else {
            return Ok(false);
        };
        let mut dir = self.root.clone();
        for c in parent.components() {
            dir.push(c);
            match std::fs::symlink_metadata(&dir) {
                Ok(m) if m.is_dir() => {}
                // A symlink or file in the way: the path is not there as such.
                Ok(_) => return Ok(false),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
                Err(e) => return Err(CheckpointError::io("cannot inspect", dir, e)),
            }
        }
        let full = self.root.join(&rel);
        match std::fs::symlink_metadata(&full) {
            Ok(m) if m.is_dir() => return Ok(false),
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
            Err(e) => return Err(CheckpointError::io("cannot inspect", full, e)),
        }
        std::fs::remove_file(&full).map_err(|e| {
            CheckpointError::io("cannot remove a file the failed attempt added", &full, e)
        })?;
        let mut up = rel.parent();
        while let Some(d) = up.filter(|d| !d.as_os_str().is_empty()) {
            if keep.contains(d.as_os_str().as_bytes()) {
                break;
            }
            // Fails (and stops) at the first directory that is not empty.
            if std::fs::remove_dir(self.root.join(d)).is_err() {
                break;
            }
            up = d.parent();
        }
        Ok(true)
    }

    /// Moves HEAD's recorded branch back to the recorded commit (keeping the
    /// agent's commits reachable is the failed ref's job) and re-attaches
    /// HEAD. Returns whether anything moved.
    fn restore_head(
        &self,
        cp: &Checkpoint,
        now: &HeadState,
        branch_tip: Option<String>,
    ) -> Result<bool, CheckpointError> {
        let mut moved = false;
        match (&cp.branch, &cp.head) {
            (Some(branch), head) => {
                let script = match (head, &branch_tip) {
                    (Some(h), Some(t)) if h != t => Some(format!("update {branch} {h} {t}\n")),
                    (Some(h), None) => Some(format!("create {branch} {h}\n")),
                    // The branch was born during the attempt: unborn again.
                    (None, Some(t)) => Some(format!("delete {branch} {t}\n")),
                    _ => None,
                };
                if let Some(script) = script {
                    self.git
                        .cmd(["update-ref", "-m", "spectr ralph: revert", "--stdin"])
                        .stdin(script.into_bytes())
                        .run()?;
                    moved = true;
                }
                if now.branch.as_deref() != Some(branch.as_str()) {
                    self.git
                        .cmd(["symbolic-ref", "-m", "spectr ralph: revert", "HEAD", branch])
                        .run()?;
                    moved = true;
                }
            }
            (None, Some(h)) => {
                if now.branch.is_some() || now.commit.as_deref() != Some(h.as_str()) {
                    self.git
                        .cmd([
                            "update-ref",
                            "--no-deref",
                            "-m",
                            "spectr ralph: revert",
                            "HEAD",
                            h,
                        ])
                        .run()?;
                    moved = true;
                }
            }
            // An unborn HEAD is always symbolic; nothing recorded to restore.
            (None, None) => {}
        }
        Ok(moved)
    }

    /// Puts back the branches and tags the attempt deleted or moved (not
    /// HEAD's branch, which [`Checkpointer::restore_head`] handles, nor one
    /// checked out in another work tree); one it made is removed when
    /// `remove_new`. What it moved or made is kept under `<failed_ref>-refs/`.
    /// A failure is a warning: the files are back, which matters most.
    fn restore_refs(
        &self,
        meta: &Meta,
        cp: &Checkpoint,
        failed_ref: &str,
        now: &RefsNow,
        remove_new: bool,
    ) -> Vec<String> {
        let Some(recorded) = &meta.tips else {
            return Vec::new();
        };
        // Never a branch another work tree has checked out: its work is there.
        let elsewhere = self.branches_checked_out_elsewhere();
        let ours = |name: &str| cp.branch.as_deref() != Some(name) && !elsewhere.contains(name);
        let short = |name: &str| name.strip_prefix("refs/").unwrap_or(name).to_owned();
        let keep_prefix = format!("{failed_ref}-refs/");
        let (mut deletes, mut writes) = (String::new(), String::new());
        let (mut put_back, mut kept, mut left) = (Vec::new(), Vec::new(), Vec::new());
        for (name, oid) in recorded.iter().filter(|(n, _)| ours(n)) {
            match now.tips.get(name) {
                None => {
                    writes.push_str(&format!("create {name} {oid}\n"));
                    put_back.push(short(name));
                }
                Some(moved) if moved != oid => {
                    writes.push_str(&format!("update {name} {oid} {moved}\n"));
                    writes.push_str(&format!("update {keep_prefix}{} {moved}\n", short(name)));
                    put_back.push(short(name));
                    kept.push(short(name));
                }
                Some(_) => {}
            }
        }
        for (name, oid) in &now.tips {
            if !ours(name) || recorded.contains_key(name) {
                continue;
            }
            if remove_new {
                deletes.push_str(&format!("delete {name} {oid}\n"));
                writes.push_str(&format!("update {keep_prefix}{} {oid}\n", short(name)));
                kept.push(short(name));
            } else {
                left.push(short(name));
            }
        }
        let mut notices = Vec::new();
        if !deletes.is_empty() || !writes.is_empty() {
            let update = |script: String| {
                self.git
                    .cmd(["update-ref", "-m", "spectr ralph: revert", "--stdin"])
                    .stdin(script.into_bytes())
                    .run()
            };
            // One transaction; when a name made by the attempt is in the way
            // of one to put back (`a/b` and `a`), the removals go first.
            let done = update(format!("{deletes}{writes}")).or_else(|_| {
                update(deletes)?;
                update(writes)
            });
            if let Err(e) = done {
                notices.push(format!(
                    "could not put back the branches and tags the attempt deleted or moved ({}): {e}",
                    put_back.join(", ")
                ));
                return notices;
            }
        }
        if !put_back.is_empty() {
            notices.push(format!(
                "put back the branches and tags the attempt deleted or moved: {}",
                put_back.join(", ")
            ));
        }
        if !kept.is_empty() {
            notices.push(format!(
                "what the attempt moved or made of branches and tags is kept under {keep_prefix}: {}",
                kept.join(", ")
            ));
        }
        if !left.is_empty() {
            notices.push(format!(
                "left as they are: branches and tags made since the checkpoint (by the attempt, or by someone else meanwhile): {}",
                left.join(", ")
            ));
        }
        notices
    }

    /// Puts the user's index file back byte for byte (or removes it if there
    /// was none), through git's own lock file so a concurrent git is noticed.
    fn restore_user_index(&self, saved: Option<Vec<u8>>) -> Result<(), CheckpointError> {
        let path = self.user_index_path();
        if self.read_user_index()? == saved {
            return Ok(());
        }
        let lock = self.index_lock_path();
        // Names us as the lock's maker, so a kill -9 before the rename leaves
        // a lock the next run recognises and removes.
        owner::write(&self.lock_owner_path());
        let mut file = match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&lock)
        {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                let _ = std::fs::remove_file(self.lock_owner_path());
                return Err(CheckpointError::IndexLocked { path: lock });
            }
            Err(e) => {
                let _ = std::fs::remove_file(self.lock_owner_path());
                return Err(CheckpointError::io("cannot lock the git index", lock, e));
            }
        };
        let result = match &saved {
            Some(bytes) => file
                .write_all(bytes)
                .and_then(|()| file.sync_all())
                .and_then(|()| std::fs::rename(&lock, &path)),
            None => std::fs::remove_file(&path)
                .or_else(|e| match e.kind() {
                    std::io::ErrorKind::NotFound => Ok(()),
                    _ => Err(e),
                })
                .and_then(|()| std::fs::remove_file(&lock)),
        };
        drop(file);
        if result.is_err() {
            // Never leave our lock behind; after a successful rename it is gone
            // and the name may already be another git's lock.
            let _ = std::fs::remove_file(&lock);
        }
        let _ = std::fs::remove_file(self.lock_owner_path());
        result.map_err(|e| CheckpointError::io("cannot restore the git index", path, e))
    }
}
