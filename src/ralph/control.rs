//! Inputs from the person at the keyboard and from signals, as the loop sees them.

use crate::agent::AgentHandle;
use crate::model::Task;
use crate::ralph::event::Outcome;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

/// A request from outside the loop: a key press or a signal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Control {
    /// `q` (confirmed), Ctrl+C, SIGTERM or SIGHUP: stop gracefully, save, exit 130.
    Quit,
    /// `r`: stop the current attempt, revert, start it again (not counted).
    Restart,
    /// `s`: stop the current task, mark it skipped, skip its dependents.
    Skip,
    /// `p`: pause after the current task / resume.
    TogglePause,
}

/// What to do when a task's retries run out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExhaustChoice {
    Retry,
    Skip,
    Abort,
}

/// Questions the loop asks a person during a run.
pub trait Interaction {
    fn on_exhausted(&mut self, task: &Task, last: &Outcome) -> ExhaustChoice;
}

/// A fixed answer, for runs without a terminal or with `--on-exhaust`.
pub struct FixedAnswer(pub ExhaustChoice);

impl Interaction for FixedAnswer {
    fn on_exhausted(&mut self, _task: &Task, _last: &Outcome) -> ExhaustChoice {
        self.0
    }
}

/// The process groups running right now (agents, `--verify` commands) and
/// whether a quit was requested, shared with the signal handler and the key
/// reader so a quit is seen everywhere and a force-quit can kill them at once.
#[derive(Debug, Clone, Default)]
pub struct ActiveAgents {
    agents: Arc<Mutex<Vec<(u32, AgentHandle)>>>,
    /// Process groups that are not agents (a `--verify` command).
    groups: Arc<Mutex<Vec<u32>>>,
    quit: Arc<AtomicBool>,
}

impl ActiveAgents {
    pub fn add(&self, handle: AgentHandle) {
        if let Ok(mut v) = self.agents.lock() {
            v.push((handle.pid(), handle));
        }
    }

    pub fn remove(&self, pid: u32) {
        if let Ok(mut v) = self.agents.lock() {
            v.retain(|(p, _)| *p != pid);
        }
    }

    pub fn add_group(&self, pgid: u32) {
        if let Ok(mut v) = self.groups.lock() {
            v.push(pgid);
        }
    }

    pub fn remove_group(&self, pgid: u32) {
        if let Ok(mut v) = self.groups.lock() {
            v.retain(|p| *p != pgid);
        }
    }

    pub fn request_quit(&self) {
        self.quit.store(true, Ordering::SeqCst);
    }

    pub fn quit_requested(&self) -> bool {
        self.quit.load(Ordering::SeqCst)
    }

    /// SIGKILL to every known process group, without waiting: the force-quit path.
    pub fn kill_all_now(&self) {
        let mut pgids: Vec<u32> = match self.agents.lock() {
            Ok(v) => v.iter().map(|(p, _)| *p).collect(),
            Err(_) => Vec::new(),
        };
        if let Ok(v) = self.groups.lock() {
            pgids.extend(v.iter().copied());
        }
        for pgid in pgids {
            if let Ok(raw) = i32::try_from(pgid) {
                let _ = nix::sys::signal::killpg(
                    nix::unistd::Pid::from_raw(raw),
                    nix::sys::signal::Signal::SIGKILL,
                );
            }
        }
    }
}
