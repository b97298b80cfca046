//! Reverting to a checkpoint: keep the failed attempt's work under its own
//! ref first, then put back the files, HEAD and its branch, and the index.
//!
//! Never `reset --hard` nor `clean`: only paths that differ between the two
//! snapshots are written or removed, so ignored files, excluded paths and
//! `.git` are never touched.

use super::error::CheckpointError;
use super::snapshot::{HeadState, check_refname};
use super::{Checkpoint, Checkpointer, Reverted};
use std::ffi::OsStr;
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

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

impl Checkpointer {
    /// Snapshots the current work tree under `failed_ref` (never lost: its
    /// parents keep the agent's commits reachable, and a commit already at
    /// `failed_ref` too), then restores `cp` exactly: files, HEAD and its
    /// branch, and the user's index. `cp`'s own refs are kept.
    pub fn revert(&self, cp: &Checkpoint, failed_ref: &str) -> Result<Reverted, CheckpointError> {
        check_refname(failed_ref)?;
        if failed_ref == cp.refname || failed_ref == Checkpointer::index_ref_name(&cp.refname) {
            return Err(CheckpointError::InvalidRef {
                refname: failed_ref.to_owned(),
                reason: format!("would overwrite checkpoint {}", cp.refname),
            });
        }
        // Fetch everything the restore needs before changing anything.
        let saved_index = match &cp.index {
            Some(blob) => Some(self.git.cmd(["cat-file", "blob", blob]).run()?),
            None => None,
        };
        // A lock left by the agent's killed git would stop us half way: say
        // so before anything changes.
        let lock = self.git_dir.join("index.lock");
        if lock.exists() && self.read_user_index()? != saved_index {
            return Err(CheckpointError::IndexLocked { path: lock });
        }
        let now = self.head_state()?;
        let branch_tip = match &cp.branch {
            Some(b) => self.resolve_commit(b)?,
            None => None,
        };
        let previous_failed = self.resolve_commit(failed_ref)?;

        // Seeding with the checkpoint's paths keeps files the agent made
        // ignored (by editing .gitignore) in the failed snapshot.
        let tmp = self.temp_index(true)?;
        self.git
            .cmd(["read-tree", "--reset", &cp.commit])
            .index(&tmp.path)
            .run()?;
        let tree = self.add_all_and_write_tree(&tmp)?;
        let mut parents: Vec<String> = Vec::new();
        let moved_tip = branch_tip.clone().filter(|t| Some(t) != cp.head.as_ref());
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
                "spectr ralph: failed attempt\n\ncheckpoint: {}\nref: {failed_ref}\n",
                cp.refname
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

        // The failed work is safe: now restore.
        let changes = self.changes(&failed_commit, &cp.commit)?;
        let (to_write, to_remove): (Vec<Change>, Vec<Change>) =
            changes.into_iter().partition(|c| c.in_checkpoint);
        let mut files_removed = 0;
        for c in &to_remove {
            if self.remove_added(&c.path)? {
                files_removed += 1;
            }
        }
        if !to_write.is_empty() {
            self.git
                .cmd(["read-tree", &cp.commit])
                .index(&tmp.path)
                .run()?;
            let mut stdin = Vec::new();
            for c in &to_write {
                stdin.extend_from_slice(&c.path);
                stdin.push(0);
            }
            self.git
                .cmd(["checkout-index", "-f", "-z", "--stdin"])
                .index(&tmp.path)
                .stdin(stdin)
                .run()?;
        }
        let head_restored = self.restore_head(cp, &now, branch_tip)?;
        self.restore_user_index(saved_index)?;

        Ok(Reverted {
            failed_ref: failed_ref.to_owned(),
            failed_commit,
            files_restored: to_write.len(),
            files_removed,
            head_restored,
        })
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

    fn is_excluded(&self, path: &[u8]) -> bool {
        let path = Path::new(OsStr::from_bytes(path));
        self.excludes.iter().any(|e| path.starts_with(e))
    }

    /// Removes a file the attempt added; then its directories if now empty.
    /// Never follows a symlink out of the work tree.
    fn remove_added(&self, rel: &[u8]) -> Result<bool, CheckpointError> {
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

    fn read_user_index(&self) -> Result<Option<Vec<u8>>, CheckpointError> {
        let path = self.user_index_path();
        match std::fs::read(&path) {
            Ok(bytes) => Ok(Some(bytes)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(CheckpointError::io("cannot read the git index", path, e)),
        }
    }

    /// Puts the user's index file back byte for byte (or removes it if there
    /// was none), through git's own lock file so a concurrent git is noticed.
    fn restore_user_index(&self, saved: Option<Vec<u8>>) -> Result<(), CheckpointError> {
        let path = self.user_index_path();
        if self.read_user_index()? == saved {
            return Ok(());
        }
        let lock = self.git_dir.join("index.lock");
        let mut file = match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&lock)
        {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                return Err(CheckpointError::IndexLocked { path: lock });
            }
            Err(e) => return Err(CheckpointError::io("cannot lock the git index", lock, e)),
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
        result.map_err(|e| CheckpointError::io("cannot restore the git index", path, e))
    }
}
