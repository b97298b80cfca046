//! Checkpoints of a git working tree that never touch the user's HEAD, branch,
//! index or stash: snapshots built with a temporary index and kept under
//! private refs (`refs/spectr/ralph/...`).
//!
//! What a snapshot holds: every file git would commit after `git add -A`
//! (tracked files, and untracked files that are not ignored), minus the
//! excluded paths the loop owns. Ignored files and `.git` are neither
//! snapshotted nor ever touched by a revert; nested repositories and
//! submodules (gitlinks) are left alone too. Contents are compared as git
//! stores them, so a change git's clean filters erase (line endings under
//! `core.autocrlf`) is not a change; empty directories are not tracked.
//!
//! A revert first snapshots the failed attempt under its own ref, whose commit
//! keeps any commits the agent made reachable, so a revert never loses work.
//!
//! Every git command runs with a timeout (per command, [`DEFAULT_TIMEOUT`]
//! unless told otherwise) in a process group of its own, killed whole on
//! expiry ([`CheckpointError::Timeout`]). Calls block: the loop runs them off
//! its event thread to stay responsive to a stop request.

mod error;
mod exclude;
mod git;
mod refs;
mod restore;
mod snapshot;

pub use error::CheckpointError;
pub use refs::{CleanScope, REF_PREFIX, escape_component};

use git::Git;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The default time allowed to each git command.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

/// Takes and restores checkpoints of one repository's work tree.
#[derive(Debug, Clone)]
pub struct Checkpointer {
    git: Git,
    root: PathBuf,
    git_dir: PathBuf,
    /// Repo-relative paths the loop owns (session file, lock, transcripts).
    excludes: Vec<PathBuf>,
}

/// The state recorded before an attempt. Stored in the session file so a
/// checkpoint can still be reverted after a crash.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Checkpoint {
    /// The private ref holding `commit`.
    pub refname: String,
    /// Snapshot commit of the work tree (parent: `head`, when there was one).
    pub commit: String,
    /// HEAD's commit; `None` in a repository with no commits yet.
    pub head: Option<String>,
    /// HEAD's branch (`refs/heads/...`); `None` when HEAD was detached.
    pub branch: Option<String>,
    /// Blob id of the user's index file bytes (kept reachable by the ref
    /// [`Checkpointer::index_ref_name`]); `None` when there was no index file.
    pub index: Option<String>,
}

/// What [`Checkpointer::revert`] did.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reverted {
    /// Where the failed attempt's work is kept.
    pub failed_ref: String,
    pub failed_commit: String,
    /// Files written back from the checkpoint (modified, deleted, mode changed).
    pub files_restored: usize,
    /// Files the attempt added, now removed (they remain in `failed_commit`).
    pub files_removed: usize,
    /// HEAD or its branch had moved (e.g. the agent committed) and was put back.
    pub head_restored: bool,
}

impl Checkpointer {
    /// `Ok(None)` when `dir` is not inside a git work tree (the loop then runs
    /// without checkpoints).
    pub fn discover(
        dir: &Path,
        timeout: Duration,
    ) -> Result<Option<Checkpointer>, CheckpointError> {
        Self::discover_with_program(dir, timeout, PathBuf::from("git"))
    }

    /// [`Checkpointer::discover`] with another git executable.
    pub fn discover_with_program(
        dir: &Path,
        timeout: Duration,
        program: PathBuf,
    ) -> Result<Option<Checkpointer>, CheckpointError> {
        if let Err(source) = std::fs::metadata(dir) {
            return Err(CheckpointError::io(
                "cannot look for a git repository in",
                dir,
                source,
            ));
        }
        let probe = Git {
            program,
            timeout,
            cwd: dir.to_owned(),
            git_dir: None,
            work_tree: None,
        };
        let out = probe
            .cmd([
                "rev-parse",
                "--is-inside-work-tree",
                "--show-toplevel",
                "--absolute-git-dir",
            ])
            .c_locale()
            .output()?;
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        let mut lines = stdout.lines();
        let inside = lines.next();
        // Inside `.git` or a bare repository git says "false": no work tree.
        if inside == Some("false") {
            return Ok(None);
        }
        if !out.status.success() {
            let stderr = out.stderr_text();
            if stderr.contains("not a git repository") {
                return Ok(None);
            }
            return Err(CheckpointError::Git {
                command: "git rev-parse --is-inside-work-tree --show-toplevel --absolute-git-dir"
                    .into(),
                code: out.status.code(),
                stderr,
            });
        }
        let (Some("true"), Some(root), Some(git_dir)) = (inside, lines.next(), lines.next()) else {
            return Err(CheckpointError::Unexpected {
                command: "git rev-parse --is-inside-work-tree --show-toplevel --absolute-git-dir"
                    .into(),
                output: stdout,
            });
        };
        let (root, git_dir) = (PathBuf::from(root), PathBuf::from(git_dir));
        let git = Git {
            cwd: root.clone(),
            git_dir: Some(git_dir.clone()),
            work_tree: Some(root.clone()),
            ..probe
        };
        Ok(Some(Checkpointer {
            git,
            root,
            git_dir,
            excludes: Vec::new(),
        }))
    }

    /// Use another git executable (tests inject a slow one).
    pub fn with_git_program(mut self, program: PathBuf) -> Self {
        self.git.program = program;
        self
    }

    /// Change the time allowed to each git command.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.git.timeout = timeout;
        self
    }

    /// Paths never snapshotted nor reverted: absolute, or relative to the repo
    /// root; they need not exist yet. Paths outside the work tree are ignored.
    pub fn with_excludes(mut self, paths: Vec<PathBuf>) -> Self {
        self.excludes = paths
            .iter()
            .filter_map(|p| exclude::repo_relative(&self.root, p))
            .collect();
        self.excludes.sort();
        self.excludes.dedup();
        self
    }

    /// The work tree's top directory (as git reports it, symlinks resolved).
    pub fn repo_root(&self) -> &Path {
        &self.root
    }

    /// The repository's git directory (per work tree for linked worktrees).
    pub fn git_dir(&self) -> &Path {
        &self.git_dir
    }

    /// The excluded paths, repo-relative.
    pub fn excludes(&self) -> &[PathBuf] {
        &self.excludes
    }

    pub fn timeout(&self) -> Duration {
        self.git.timeout
    }

    /// `refs/spectr/ralph/<change>/<task>/<attempt>/checkpoint`, with the ids
    /// escaped so any id makes a valid, distinct ref name.
    pub fn ref_name(change: &str, task: &str, attempt: u32) -> String {
        refs::attempt_ref(change, task, attempt, "checkpoint")
    }

    /// `refs/spectr/ralph/<change>/<task>/<attempt>/failed`: where a reverted
    /// attempt's work is kept.
    pub fn failed_ref_name(change: &str, task: &str, attempt: u32) -> String {
        refs::attempt_ref(change, task, attempt, "failed")
    }

    /// The ref keeping a checkpoint's copy of the user's index reachable.
    pub fn index_ref_name(checkpoint_ref: &str) -> String {
        format!("{checkpoint_ref}-index")
    }
}
