//! The user's stash: `refs/stash` and its reflog (the stash list) recorded at
//! the checkpoint and put back exactly by a revert, so an agent's
//! `git stash pop` loses nothing and its own `git stash` leaves nothing.

use super::Checkpointer;
use super::error::CheckpointError;
use super::meta::Meta;
use std::path::PathBuf;

impl Checkpointer {
    fn stash_log_path(&self) -> PathBuf {
        self.common_dir.join("logs/refs/stash")
    }

    /// Refs are files (not reftable): the reflog can be kept byte for byte.
    fn files_backend(&self) -> bool {
        !self.common_dir.join("reftable").exists()
    }

    pub(crate) fn read_stash_log(&self) -> Result<Option<Vec<u8>>, CheckpointError> {
        if !self.files_backend() {
            return Ok(None);
        }
        let path = self.stash_log_path();
        match std::fs::read(&path) {
            Ok(b) => Ok(Some(b)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(CheckpointError::io("cannot read the stash list", path, e)),
        }
    }

    /// The stash entries to keep reachable: every commit the reflog names.
    pub(crate) fn stash_commits(meta: &Meta) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        if let Some(log) = &meta.stash_log {
            for line in String::from_utf8_lossy(log).lines() {
                if let Some(new) = line.split(' ').nth(1)
                    && new.bytes().all(|b| b.is_ascii_hexdigit())
                    && new.bytes().any(|b| b != b'0')
                    && !out.iter().any(|o| o == new)
                {
                    out.push(new.to_owned());
                }
            }
        }
        if let Some(s) = &meta.stash
            && !out.contains(s)
        {
            out.push(s.clone());
        }
        out
    }

    /// Puts `refs/stash` and its reflog back as `meta` recorded them.
    /// Returns whether anything changed.
    pub(crate) fn restore_stash(
        &self,
        meta: &Meta,
        now: Option<&str>,
    ) -> Result<bool, CheckpointError> {
        let log_now = self.read_stash_log()?;
        let same_log = !self.files_backend() || log_now == meta.stash_log;
        if meta.stash.as_deref() == now && same_log {
            return Ok(false);
        }
        match &meta.stash {
            None => {
                if now.is_some() {
                    // Deleting the ref deletes its reflog too.
                    self.git
                        .cmd([
                            "update-ref",
                            "-m",
                            "spectr ralph: revert",
                            "-d",
                            "refs/stash",
                        ])
                        .run()?;
                }
                let path = self.stash_log_path();
                if path.exists() {
                    std::fs::remove_file(&path).map_err(|e| {
                        CheckpointError::io("cannot restore the stash list", path, e)
                    })?;
                }
            }
            Some(stash) => {
                if now != Some(stash.as_str()) {
                    self.git
                        .cmd([
                            "update-ref",
                            "-m",
                            "spectr ralph: revert",
                            "refs/stash",
                            stash,
                        ])
                        .run()?;
                }
                if let Some(log) = &meta.stash_log
                    && self.files_backend()
                {
                    let path = self.stash_log_path();
                    if let Some(dir) = path.parent() {
                        let _ = std::fs::create_dir_all(dir);
                    }
                    crate::model::atomic::write_atomic(&path, log).map_err(|e| {
                        CheckpointError::io("cannot restore the stash list", path, e)
                    })?;
                }
            }
        }
        Ok(true)
    }
}
