//! Why a run stops on its own account, and why a lane could not be made
//! ready: typed, with what they concern (the task, the file, the lane), and
//! turned into words only where they are shown.

use crate::checkpoint::CheckpointError;
use crate::model::{ModelError, TaskId};
use std::path::PathBuf;

/// The run's own reasons to stop (not an agent's failure).
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("the change folder {} is gone; stopping", dir.display())]
    ChangeGone { dir: PathBuf },

    /// Still broken after being read again for a while (an agent or an
    /// editor caught mid-write would have finished by then).
    #[error("{source} (fix the file, then run the same command to resume)")]
    TasksUnreadable { source: ModelError },

    #[error("could not start a worker thread: {source}")]
    WorkerThread { source: std::io::Error },

    #[error("a worker thread is gone; stopping (run the same command to resume)")]
    WorkerGone { task: TaskId },

    #[error("the worker threads stopped unexpectedly; run the same command to resume")]
    WorkersGone,

    #[error(
        "task {task}: {detail}. This is spectr's own failure, not the agent's: every attempt would fail alike, so the run stops here without using a retry. The session is kept: fix the cause, then run the same command again"
    )]
    OwnFailure { task: TaskId, detail: String },

    /// `attempts` counted against the retries; `runs` every agent run (a
    /// restart or a conflict's resolve is a run, not a try).
    #[error("task {task} failed after {}: {last}", tries_words(*attempts, *runs))]
    OutOfRetries {
        task: TaskId,
        attempts: u32,
        runs: u32,
        last: String,
    },
}

impl RunError {
    /// The task the error concerns, if one.
    pub fn task(&self) -> Option<&TaskId> {
        match self {
            RunError::WorkerGone { task }
            | RunError::OwnFailure { task, .. }
            | RunError::OutOfRetries { task, .. } => Some(task),
            RunError::ChangeGone { .. }
            | RunError::TasksUnreadable { .. }
            | RunError::WorkerThread { .. }
            | RunError::WorkersGone => None,
        }
    }
}

/// Why a lane could not be made ready for an attempt.
#[derive(Debug, thiserror::Error)]
pub enum LaneError {
    #[error("could not snapshot the work tree for {lane}: {source}")]
    Snapshot {
        lane: String,
        source: CheckpointError,
    },

    #[error("could not create the lane work tree {}: {source}", path.display())]
    Create {
        path: PathBuf,
        source: CheckpointError,
    },

    #[error("could not lock the lane work tree: {source}")]
    Lock {
        source: crate::ralph::lock::LockError,
    },

    #[error("could not refresh the lane work tree {}: {source}", path.display())]
    Refresh {
        path: PathBuf,
        source: CheckpointError,
    },
}

/// "4 attempts", or "4 tries (5 attempts: …)" when some runs were not tries.
fn tries_words(tries: u32, runs: u32) -> String {
    if runs <= tries {
        return crate::text::count(tries, "attempt", "attempts");
    }
    format!(
        "{} ({runs} attempts: a restart or a conflict's resolve is not a try)",
        crate::text::count(tries, "try", "tries")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_attempt_is_singular() {
        let e = RunError::OutOfRetries {
            task: TaskId::from("1.1"),
            attempts: 1,
            runs: 1,
            last: "no".into(),
        };
        assert_eq!(e.to_string(), "task 1.1 failed after 1 attempt: no");
        // A restart ran the agent once more without using a try.
        let e = RunError::OutOfRetries {
            task: TaskId::from("1.1"),
            attempts: 4,
            runs: 5,
            last: "no".into(),
        };
        assert_eq!(
            e.to_string(),
            "task 1.1 failed after 4 tries (5 attempts: a restart or a conflict's resolve is not a try): no"
        );
    }
}
