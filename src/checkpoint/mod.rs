//! Checkpoints of a git working tree that never touch the user's HEAD, branch,
//! index or stash: snapshots built with a temporary index and kept under
//! private refs (`refs/spectr/ralph/...`).
//!
//! STUB: the checkpoint helper fills in.

use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::time::Duration;

#[derive(Debug, thiserror::Error, miette::Diagnostic)]
pub enum CheckpointError {
    #[error("git {command} timed out after {after:?}")]
    Timeout { command: String, after: Duration },
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Checkpoint {
    pub refname: String,
    pub commit: String,
}

#[derive(Debug, Clone)]
pub struct Reverted {
    pub failed_ref: String,
    pub failed_commit: String,
    pub files_restored: usize,
    pub files_removed: usize,
}

pub struct Checkpointer {}

impl Checkpointer {
    pub fn discover(
        dir: &Path,
        timeout: Duration,
    ) -> Result<Option<Checkpointer>, CheckpointError> {
        let _ = (dir, timeout);
        todo!()
    }
    pub fn with_excludes(self, paths: Vec<PathBuf>) -> Self {
        let _ = paths;
        self
    }
    pub fn repo_root(&self) -> &Path {
        todo!()
    }
    pub fn create(&self, refname: &str) -> Result<Checkpoint, CheckpointError> {
        let _ = refname;
        todo!()
    }
    pub fn revert(&self, cp: &Checkpoint, failed_ref: &str) -> Result<Reverted, CheckpointError> {
        let _ = (cp, failed_ref);
        todo!()
    }
    pub fn drop(&self, cp: &Checkpoint) -> Result<(), CheckpointError> {
        let _ = cp;
        todo!()
    }
    pub fn ref_name(change: &str, task: &str, attempt: u32) -> String {
        format!("refs/spectr/ralph/{change}/{task}/{attempt}")
    }
}
