//! The repository's state around a checkpoint: operations that forbid one
//! (a merge, a rebase, ...), and our own leftovers after a kill -9 (temporary
//! index folders, the user's index lock, a revert cut short).

use super::error::CheckpointError;
use super::temp_index::TEMP_PREFIX;
use super::{Checkpointer, owner};
use std::path::PathBuf;
use std::time::{Duration, SystemTime};

/// Next to `index.lock` while we write it: names us as its maker.
const LOCK_OWNER: &str = "spectr-ralph-index.lock.owner";
/// Written before a revert changes the work tree, removed when it is done.
const REVERT_MARKER: &str = "spectr-ralph-revert";
/// A temporary folder without an owner marker (older spectr) is stale after this.
const UNOWNED_STALE_AFTER: Duration = Duration::from_secs(3600);

/// (file or folder in the git dir, what is in progress, how to finish it).
const IN_PROGRESS: &[(&str, &str, &str)] = &[
    (
        "MERGE_HEAD",
        "a merge",
        "git commit (to conclude it) or git merge --abort",
    ),
    (
        "rebase-merge",
        "a rebase",
        "git rebase --continue or git rebase --abort",
    ),
    (
        "rebase-apply",
        "a rebase or git am",
        "git rebase --continue / git am --continue, or --abort",
    ),
    (
        "CHERRY_PICK_HEAD",
        "a cherry-pick",
        "git cherry-pick --continue or git cherry-pick --abort",
    ),
    (
        "REVERT_HEAD",
        "a git revert",
        "git revert --continue or git revert --abort",
    ),
    (
        "sequencer",
        "a cherry-pick or revert sequence",
        "git cherry-pick --continue or --abort",
    ),
    ("BISECT_LOG", "a bisect", "git bisect reset"),
];

impl Checkpointer {
    /// A merge, rebase, cherry-pick, revert or bisect in progress keeps state
    /// (`MERGE_HEAD`, `rebase-merge/`, ...) a checkpoint cannot restore: refuse.
    pub fn check_no_operation_in_progress(&self) -> Result<(), CheckpointError> {
        for (name, what, finish) in IN_PROGRESS {
            let path = self.git_dir.join(name);
            if path.symlink_metadata().is_ok() {
                return Err(CheckpointError::OperationInProgress {
                    operation: (*what).to_owned(),
                    path,
                    finish: (*finish).to_owned(),
                });
            }
        }
        Ok(())
    }

    /// Removes the merge / rebase / cherry-pick / revert / bisect state an
    /// attempt left (none existed at the checkpoint: creating one refuses),
    /// as their `--abort` would once HEAD, index and files are restored, so
    /// the user's next commit is not silently a merge. Returns what it removed.
    pub(crate) fn clear_operation_left_by_attempt(&self) -> Vec<String> {
        const COMPANIONS: &[&str] = &[
            "MERGE_MSG",
            "MERGE_MODE",
            "AUTO_MERGE",
            "BISECT_START",
            "BISECT_TERMS",
            "BISECT_NAMES",
            "BISECT_EXPECTED_REV",
            "BISECT_ANCESTORS_OK",
            "BISECT_HEAD",
        ];
        let mut removed = Vec::new();
        for (name, what, _) in IN_PROGRESS {
            let path = self.git_dir.join(name);
            let Ok(m) = path.symlink_metadata() else {
                continue;
            };
            let gone = if m.is_dir() {
                std::fs::remove_dir_all(&path)
            } else {
                std::fs::remove_file(&path)
            };
            if gone.is_ok() {
                removed.push((*what).to_owned());
            }
        }
        if !removed.is_empty() {
            for name in COMPANIONS {
                let _ = std::fs::remove_file(self.git_dir.join(name));
            }
        }
        removed
    }

    /// [`Checkpointer::clean_stale_temp_dirs`], for a run that may take no
    /// checkpoint at all (everything already done); also the index lock a spectr killed while restoring the index left
    /// (whether or not this run reverts anything: an index left locked
    /// fails every later git of the agents' and every index update of the
    /// task commits). What was removed, in words.
    pub fn remove_stale_temporaries(&self) -> Vec<String> {
        self.clean_stale_temp_dirs();
        self.recover_own_index_lock().into_iter().collect()
    }

    /// Removes temporary index folders left by a killed spectr (once a run):
    /// only ours (by name), only those whose owner process is gone.
    pub(crate) fn clean_stale_temp_dirs(&self) {
        {
            let Ok(mut done) = self.shared.cleaned.lock() else {
                return;
            };
            if *done {
                return;
            }
            *done = true;
        }
        super::stash::remove_stale_stash_lock(&self.common_dir);
        let Ok(dir) = std::fs::read_dir(&self.git_dir) else {
            return;
        };
        for entry in dir.flatten() {
            let name = entry.file_name();
            let is_ours = name.to_string_lossy().starts_with(TEMP_PREFIX);
            if !is_ours || !entry.file_type().is_ok_and(|t| t.is_dir()) {
                continue;
            }
            let path = entry.path();
            let named = name
                .to_string_lossy()
                .strip_prefix(TEMP_PREFIX)
                .and_then(owner::name_is_dead);
            let stale = match named {
                Some(dead) => dead,
                // An older spectr's folder: its `owner` file names the
                // owner, else its age tells.
                None => match std::fs::read_to_string(path.join("owner")) {
                    Ok(marker) => owner::is_dead(&marker),
                    Err(_) => entry
                        .metadata()
                        .and_then(|m| m.modified())
                        .ok()
                        .and_then(|t| SystemTime::now().duration_since(t).ok())
                        .is_some_and(|age| age > UNOWNED_STALE_AFTER),
                },
            };
            if stale {
                let _ = std::fs::remove_dir_all(&path);
            }
        }
    }

    pub(crate) fn index_lock_path(&self) -> PathBuf {
        self.git_dir.join("index.lock")
    }

    pub(crate) fn lock_owner_path(&self) -> PathBuf {
        self.git_dir.join(LOCK_OWNER)
    }

    /// If `index.lock` was left by a spectr killed while restoring the index
    /// (our owner marker names a dead process), removes it and says so.
    pub(crate) fn recover_own_index_lock(&self) -> Option<String> {
        let lock = self.index_lock_path();
        let owner_path = self.lock_owner_path();
        let marker = std::fs::read_to_string(&owner_path).ok()?;
        if !owner::is_dead(&marker) {
            return None;
        }
        let had_lock = lock.symlink_metadata().is_ok();
        if had_lock && std::fs::remove_file(&lock).is_err() {
            return None;
        }
        let _ = std::fs::remove_file(&owner_path);
        had_lock.then(|| {
            format!(
                "removed {}, left by a spectr run killed while it restored the index",
                lock.display()
            )
        })
    }

    fn revert_marker_path(&self) -> PathBuf {
        self.git_dir.join(REVERT_MARKER)
    }

    /// The failed commit of a revert of `checkpoint` into `failed_ref` that
    /// was cut short after the failed work was saved.
    pub(crate) fn interrupted_revert(&self, checkpoint: &str, failed_ref: &str) -> Option<String> {
        let text = std::fs::read_to_string(self.revert_marker_path()).ok()?;
        let mut it = text.lines();
        let (Some(cp), Some(r), Some(failed)) = (it.next(), it.next(), it.next()) else {
            return None;
        };
        (cp == checkpoint && r == failed_ref).then(|| failed.to_owned())
    }

    pub(crate) fn mark_revert_started(
        &self,
        checkpoint: &str,
        failed_ref: &str,
        failed_commit: &str,
    ) -> Result<(), CheckpointError> {
        let path = self.revert_marker_path();
        crate::model::atomic::write_atomic(
            &path,
            format!("{checkpoint}\n{failed_ref}\n{failed_commit}\n").as_bytes(),
        )
        .map_err(|e| CheckpointError::io("cannot record the revert in", &path, e))
    }

    pub(crate) fn mark_revert_done(&self) {
        let _ = std::fs::remove_file(self.revert_marker_path());
    }
}
