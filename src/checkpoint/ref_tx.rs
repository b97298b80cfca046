//! A branch's move made ready while a task's commit is still being checked:
//! `git update-ref --stdin` in transaction mode (git 2.27 and newer) starts,
//! locks the branch and checks its value beside the check, and the move is
//! then one `commit` line away instead of a git process. Git itself moves
//! the branch and writes its reflogs.
//!
//! Not committed, the transaction is aborted by git when its stdin closes
//! (a transaction never commits at the end of its input), so dropping one,
//! or spectr being killed, leaves the branch as it was and no lock behind.

use super::Checkpointer;
use super::error::CheckpointError;
use crate::process::Child;
use crossbeam_channel::Receiver;
use std::io::{BufRead, Write};
use std::process::ChildStdin;
use std::time::{Duration, Instant};

/// The first git whose `update-ref --stdin` has `start` and `prepare`.
const TRANSACTION_VERBS: (u32, u32) = (2, 27);

/// A prepared move of a branch, to commit or drop.
pub(crate) struct PreparedMove {
    child: Option<Child>,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
    timeout: Duration,
    command: String,
}

impl Checkpointer {
    /// Moves `branch` from `old` to `new` as far as `git update-ref`'s
    /// `prepare` (locked, its value checked); `None` when that cannot be
    /// done (an older git, or git refused: the caller's own move then says
    /// why).
    pub(crate) fn prepare_move(
        &self,
        branch: &str,
        new: &str,
        old: &str,
        reason: &str,
    ) -> Option<PreparedMove> {
        let version = *self.shared.git_version.get_or_init(|| self.git.version());
        if version.is_none_or(|v| v < TRANSACTION_VERBS) {
            return None;
        }
        let mut child = self
            .git
            .cmd(["update-ref", "-m", reason, "--stdin"])
            .spawn_talking()
            .ok()?;
        let (stdin, stdout) = (child.take_stdin(), child.take_stdout());
        let (tx, lines) = crossbeam_channel::unbounded();
        if let Some(stdout) = stdout {
            let read = std::thread::Builder::new()
                .name("git-update-ref".into())
                .spawn(move || {
                    for line in std::io::BufReader::new(stdout).lines() {
                        let Ok(line) = line else { break };
                        if tx.send(line).is_err() {
                            break;
                        }
                    }
                });
            read.ok()?;
        }
        let mut prepared = PreparedMove {
            child: Some(child),
            stdin,
            lines,
            timeout: self.git.timeout,
            command: "git update-ref --stdin".into(),
        };
        prepared
            .say(&format!("start\nupdate {branch} {new} {old}\nprepare\n"))
            .ok()?;
        prepared.expect(&["start: ok", "prepare: ok"]).ok()?;
        Some(prepared)
    }
}

impl PreparedMove {
    /// Moves the branch: the transaction committed, git's exit awaited.
    pub(crate) fn commit(mut self) -> Result<(), CheckpointError> {
        self.say("commit\n")?;
        self.expect(&["commit: ok"])?;
        // Its input ends: git exits.
        self.stdin = None;
        let command = self.command.clone();
        let failed = |what: &str| CheckpointError::Unexpected {
            command: command.clone(),
            output: what.to_owned(),
        };
        match self.wait_exit() {
            Some(status) if status.success() => Ok(()),
            Some(status) => Err(failed(&format!("exited with {status} after its commit"))),
            None => Err(failed("did not exit after its commit")),
        }
    }

    fn say(&mut self, text: &str) -> Result<(), CheckpointError> {
        let stdin = self
            .stdin
            .as_mut()
            .ok_or_else(|| CheckpointError::Unexpected {
                command: self.command.clone(),
                output: "its input is closed".into(),
            })?;
        stdin
            .write_all(text.as_bytes())
            .and_then(|()| stdin.flush())
            .map_err(|e| CheckpointError::io("cannot write to git update-ref", "stdin", e))
    }

    /// The next lines are exactly `wanted`, each within the timeout.
    fn expect(&mut self, wanted: &[&str]) -> Result<(), CheckpointError> {
        for want in wanted {
            match self.lines.recv_timeout(self.timeout) {
                Ok(line) if line == *want => {}
                Ok(line) => {
                    return Err(CheckpointError::Unexpected {
                        command: self.command.clone(),
                        output: line,
                    });
                }
                Err(_) => {
                    return Err(CheckpointError::Timeout {
                        command: self.command.clone(),
                        after: self.timeout,
                    });
                }
            }
        }
        Ok(())
    }

    /// Its exit status once it exited by itself, within the timeout.
    fn wait_exit(&mut self) -> Option<std::process::ExitStatus> {
        let child = self.child.as_mut()?;
        let deadline = Instant::now() + self.timeout;
        let mut pause = Duration::from_micros(100);
        loop {
            if let Ok(Some(status)) = child.try_wait() {
                return Some(status);
            }
            if Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(pause);
            pause = (pause * 2).min(Duration::from_millis(20));
        }
    }
}

impl Drop for PreparedMove {
    /// Not committed: its input closes and git aborts the transaction (its
    /// lock removed by git itself); only a git that does not exit in time
    /// is stopped (dropping the child kills its group).
    fn drop(&mut self) {
        self.stdin = None;
        let _ = self.wait_exit();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checkpoint::test_git as git;

    fn repo() -> (tempfile::TempDir, Checkpointer, String, String) {
        let dir = tempfile::tempdir().expect("tempdir");
        let d = dir.path();
        git(d, &["init", "-q", "-b", "main"]);
        git(d, &["commit", "-q", "--allow-empty", "-m", "one"]);
        let one = git(d, &["rev-parse", "HEAD"]);
        git(d, &["commit", "-q", "--allow-empty", "-m", "two"]);
        let two = git(d, &["rev-parse", "HEAD"]);
        git(d, &["update-ref", "refs/heads/main", &one]);
        let cp = Checkpointer::discover(d, Duration::from_secs(60))
            .expect("discover")
            .expect("a repository");
        (dir, cp, one, two)
    }

    #[test]
    fn a_committed_move_moves_the_branch_and_logs_it() {
        let (dir, cp, one, two) = repo();
        let moved = cp
            .prepare_move("refs/heads/main", &two, &one, "spectr ralph: 1.1 d")
            .expect("prepared");
        assert_eq!(git(dir.path(), &["rev-parse", "main"]), one, "not before");
        moved.commit().expect("committed");
        assert_eq!(git(dir.path(), &["rev-parse", "main"]), two);
        let log = git(dir.path(), &["reflog", "-1", "--format=%gs", "main"]);
        assert_eq!(log, "spectr ralph: 1.1 d");
        assert!(!dir.path().join(".git/refs/heads/main.lock").exists());
    }

    #[test]
    fn a_dropped_move_leaves_the_branch_and_no_lock() {
        let (dir, cp, one, two) = repo();
        let moved = cp.prepare_move("refs/heads/main", &two, &one, "r");
        assert!(moved.is_some());
        drop(moved);
        assert_eq!(git(dir.path(), &["rev-parse", "main"]), one);
        assert!(!dir.path().join(".git/refs/heads/main.lock").exists());
        // A branch that is not where it was expected: not prepared.
        assert!(
            cp.prepare_move("refs/heads/main", &one, &two, "r")
                .is_none()
        );
        assert_eq!(git(dir.path(), &["rev-parse", "main"]), one);
        assert!(!dir.path().join(".git/refs/heads/main.lock").exists());
    }
}
