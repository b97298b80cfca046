//! Inputs from the person at the keyboard and from signals, as the loop sees them.

use crate::agent::AgentHandle;
use crate::model::Task;
use crate::ralph::event::Outcome;
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

/// The agents running right now, so a force-quit can stop their process groups
/// from the signal handler without waiting for the loop.
#[derive(Debug, Clone, Default)]
pub struct ActiveAgents(Arc<Mutex<Vec<(u32, AgentHandle)>>>);

impl ActiveAgents {
    pub fn add(&self, handle: AgentHandle) {
        if let Ok(mut v) = self.0.lock() {
            v.push((handle.pid(), handle));
        }
    }

    pub fn remove(&self, pid: u32) {
        if let Ok(mut v) = self.0.lock() {
            v.retain(|(p, _)| *p != pid);
        }
    }

    /// Stops every running agent; used on force-quit.
    pub fn stop_all(&self, reason: &str) {
        let handles: Vec<AgentHandle> = match self.0.lock() {
            Ok(v) => v.iter().map(|(_, h)| h.clone()).collect(),
            Err(_) => return,
        };
        for h in handles {
            h.stop(reason);
        }
    }
}
