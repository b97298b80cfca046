//! A process we started: its pipes, its exit, and stopping it with the
//! whole group it leads.

use super::error::ProcessError;
use super::tree::ProcessTree;
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use std::io::Write;
use std::process::{ChildStderr, ChildStdin, ChildStdout, ExitStatus};
use std::time::Duration;

/// A started process, leader of its own group. Until it is reaped its pid,
/// which is also its group's id, cannot be handed to anyone else, so its
/// group is signalled directly; afterwards only through its
/// [`ProcessTree`], which checks every member's identity.
///
/// Dropped before it was waited for, it is killed with its group and
/// reaped: nothing we start outlives its handle unnoticed.
#[derive(Debug)]
pub struct Child {
    inner: std::process::Child,
    tree: ProcessTree,
    status: Option<ExitStatus>,
    program: String,
    /// Kept open for [`Child::take_stdin`] when it was given no input.
    stdin: Option<ChildStdin>,
}

impl Child {
    pub(super) fn started(
        mut inner: std::process::Child,
        program: String,
        input: Option<Vec<u8>>,
    ) -> Result<Child, ProcessError> {
        // Its identity is taken now, before it can be reaped.
        let tree = ProcessTree::new(inner.id());
        let stdin = inner.stdin.take();
        let (stdin, kept) = match input {
            Some(_) => (stdin, None),
            None => (None, stdin),
        };
        let child = Child {
            inner,
            tree,
            status: None,
            program,
            stdin: kept,
        };
        if let (Some(bytes), Some(mut pipe)) = (input, stdin) {
            let wrote = std::thread::Builder::new()
                .name("process-stdin".into())
                .spawn(move || {
                    // EPIPE when it exits without reading: its exit says so.
                    let _ = pipe.write_all(&bytes);
                });
            if let Err(source) = wrote {
                return Err(child.fail_thread("write its input", source));
            }
        }
        Ok(child)
    }

    /// Kills and reaps it (dropping it does), and says which thread failed.
    pub(super) fn fail_thread(self, what: &'static str, source: std::io::Error) -> ProcessError {
        ProcessError::Thread {
            program: self.program.clone(),
            what,
            source,
        }
    }

    /// Replaces its tree, as if its pid had been handed to that one's leader.
    #[cfg(test)]
    pub(super) fn pretend_tree(&mut self, tree: ProcessTree) {
        self.tree = tree;
    }

    pub(super) fn program(&self) -> &str {
        &self.program
    }

    /// Its pid, also the id of the group (and session) it leads.
    pub fn pid(&self) -> u32 {
        self.inner.id()
    }

    /// Its process tree (a handle that shares what is observed), for stopping
    /// it from elsewhere or after it was reaped.
    pub fn tree(&self) -> &ProcessTree {
        &self.tree
    }

    /// Its stdout, to stream it (when it was [`super::Sink::Pipe`]).
    /// Its stdin, when it was started with [`super::Cmd::stdin_pipe`].
    pub fn take_stdin(&mut self) -> Option<ChildStdin> {
        self.stdin.take()
    }

    pub fn take_stdout(&mut self) -> Option<ChildStdout> {
        self.inner.stdout.take()
    }

    pub fn take_stderr(&mut self) -> Option<ChildStderr> {
        self.inner.stderr.take()
    }

    /// Its exit status when it has exited (reaping it), without blocking.
    pub fn try_wait(&mut self) -> std::io::Result<Option<ExitStatus>> {
        if self.status.is_none() {
            self.status = self.inner.try_wait()?;
        }
        Ok(self.status)
    }

    /// Waits for it to exit and reaps it.
    pub fn wait(&mut self) -> std::io::Result<ExitStatus> {
        if let Some(status) = self.status {
            return Ok(status);
        }
        let status = self.inner.wait()?;
        self.status = Some(status);
        Ok(status)
    }

    /// Sends `signal` to its group while the leader is not reaped (its group
    /// id is then provably ours). Returns whether it was sent.
    fn signal_group(&self, signal: Signal) -> bool {
        if self.status.is_some() {
            return false;
        }
        match i32::try_from(self.inner.id()) {
            Ok(pid) if pid > 1 => killpg(Pid::from_raw(pid), signal).is_ok(),
            _ => false,
        }
    }

    /// SIGKILL to its group and to every member of its tree (identity
    /// checked), without waiting.
    pub fn kill(&mut self) {
        self.signal_group(Signal::SIGKILL);
        self.tree.signal(Signal::SIGKILL);
    }

    /// Stops it with everything it started: SIGTERM, up to `grace` for them
    /// to go, then SIGKILL to whatever is left; reaps it. A zero grace kills
    /// at once.
    pub fn stop(&mut self, grace: Duration) -> std::io::Result<ExitStatus> {
        if !grace.is_zero() {
            self.signal_group(Signal::SIGTERM);
            // TERM to the tree, waiting up to `grace`, KILL the rest; an
            // unreaped leader counts as gone (a zombie).
            self.tree.stop(grace);
        }
        self.kill();
        self.wait()
    }
}

impl Drop for Child {
    fn drop(&mut self) {
        if self.status.is_none() {
            self.signal_group(Signal::SIGKILL);
            let _ = self.inner.kill();
            let _ = self.inner.wait();
        }
    }
}
