//! Checkpoint errors: each names the git command (or file) involved so the
//! loop can say plainly what went wrong.

use std::path::PathBuf;
use std::time::Duration;

#[derive(Debug, thiserror::Error, miette::Diagnostic)]
pub enum CheckpointError {
    /// A git command did not finish in time; it (and its process group) was
    /// killed. The loop treats this as a failed attempt.
    #[error("git command timed out after {}: {command}", humantime::format_duration(*after))]
    #[diagnostic(help("raise --command-timeout if the repository is large or the disk is slow"))]
    Timeout { command: String, after: Duration },

    #[error("could not run git ({command})")]
    #[diagnostic(help("is git installed and on PATH?"))]
    Spawn {
        command: String,
        #[source]
        source: std::io::Error,
    },

    #[error("git failed (exit {}): {command}: {stderr}", code.map_or_else(|| "by signal".to_owned(), |c| c.to_string()))]
    Git {
        command: String,
        code: Option<i32>,
        stderr: String,
    },

    #[error("unexpected output from git ({command}): {output:?}")]
    Unexpected { command: String, output: String },

    #[error("{message}: {}", path.display())]
    Io {
        message: String,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    #[error(
        "the git index is locked ({}): another git command is running; if none is, delete that file",
        path.display()
    )]
    #[diagnostic(help(
        "wait for it to finish, or remove the lock file if no git process is running"
    ))]
    IndexLocked { path: PathBuf },

    #[error(
        "{operation} is in progress ({}): a checkpoint cannot restore it; finish or abort it first ({finish}), then run again",
        path.display()
    )]
    OperationInProgress {
        operation: String,
        path: PathBuf,
        finish: String,
    },

    #[error("parallel lanes need at least one commit in the repository: HEAD has none")]
    #[diagnostic(help("commit once (even an empty commit), or run with --jobs 1"))]
    LanesNeedCommit,

    #[error(
        "{path} changed in the work tree after the merge was planned: nothing was written (the lane's work is kept under its ref)"
    )]
    #[diagnostic(help("the task's merge is retried from the current content"))]
    ChangedDuringMerge { path: String },

    #[error("lane work tree {}: {reason}", path.display())]
    Lane { path: PathBuf, reason: String },

    #[error("invalid checkpoint ref '{refname}': {reason}")]
    InvalidRef { refname: String, reason: String },
}

impl CheckpointError {
    pub(crate) fn io(
        message: impl Into<String>,
        path: impl Into<PathBuf>,
        source: std::io::Error,
    ) -> Self {
        CheckpointError::Io {
            message: message.into(),
            path: path.into(),
            source,
        }
    }

    /// True for [`CheckpointError::Timeout`].
    pub fn is_timeout(&self) -> bool {
        matches!(self, CheckpointError::Timeout { .. })
    }
}
