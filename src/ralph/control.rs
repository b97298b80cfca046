//! Inputs from the person at the keyboard and from signals, as the loop sees them.

use crate::agent::AgentHandle;
use crate::model::{Task, TaskId};
use crate::process::ProcessTree;
use crate::ralph::event::{Outcome, StopAction};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

/// A request from outside the loop: a key press or a signal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Control {
    /// `q` (confirmed), Ctrl+C, SIGTERM or SIGHUP: stop gracefully, save, exit 130.
    Quit,
    /// `r`: stop an attempt, revert, start it again (not counted). `None`:
    /// the running task (when several run, the key reader asks which).
    Restart(Option<TaskId>),
    /// `s`: stop a task, mark it skipped, skip its dependents.
    Skip(Option<TaskId>),
    /// `p`: pause after the running tasks / resume.
    TogglePause,
    /// Pause after the running tasks (from elsewhere: nothing if paused).
    Pause,
    /// Resume (from elsewhere: nothing if not paused).
    Resume,
    /// The answer to the open retry / skip / abort question of `task`,
    /// given elsewhere (`spectr ralph answer`): the question asked at the
    /// terminal, if any, is withdrawn.
    Answer { task: TaskId, choice: ExhaustChoice },
    /// Steering from another shell (`spectr ralph pause <change>`): shown
    /// as `{by}: {what}`, then `control` is done.
    Steered {
        by: String,
        what: String,
        control: Option<Box<Control>>,
    },
    /// `q` asked `Quit? [y/N]`: nothing new starts until it is answered.
    QuitAsked,
    /// The answer was no: the run goes on.
    QuitDeclined,
}

impl Control {
    /// What a control sent to a running attempt asks of it; the loop's own
    /// business (pause, the quit question, steering notices) asks nothing.
    pub fn stop_action(&self) -> Option<StopAction> {
        match self {
            Control::Quit => Some(StopAction::Quit),
            Control::Restart(_) => Some(StopAction::Restart),
            Control::Skip(_) => Some(StopAction::Skip),
            Control::TogglePause
            | Control::Pause
            | Control::Resume
            | Control::Answer { .. }
            | Control::Steered { .. }
            | Control::QuitAsked
            | Control::QuitDeclined => None,
        }
    }
}

/// The tasks running right now, shared with the key reader so `r` and `s`
/// can ask which one when there are several.
#[derive(Debug, Clone, Default)]
pub struct RunningTasks(Arc<Mutex<Vec<TaskId>>>);

impl RunningTasks {
    pub fn set(&self, tasks: Vec<TaskId>) {
        if let Ok(mut v) = self.0.lock() {
            *v = tasks;
        }
    }

    pub fn get(&self) -> Vec<TaskId> {
        self.0.lock().map(|v| v.clone()).unwrap_or_default()
    }
}

/// The task whose retry / skip / abort question is open, if any, shared
/// with the control socket so an answer from elsewhere can name it.
#[derive(Debug, Clone, Default)]
pub struct OpenQuestion(Arc<Mutex<Option<TaskId>>>);

impl OpenQuestion {
    pub fn set(&self, task: Option<TaskId>) {
        if let Ok(mut v) = self.0.lock() {
            *v = task;
        }
    }

    pub fn get(&self) -> Option<TaskId> {
        self.0.lock().ok().and_then(|v| v.clone())
    }
}

/// What to do when a task's retries run out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExhaustChoice {
    Retry,
    Skip,
    Abort,
}

/// Questions the loop asks a person during a run. Asked on a thread of
/// their own: the run goes on while the question waits.
pub trait Interaction {
    /// None: the question could not be answered (Ctrl+C at it, the
    /// terminal gone); the run then stops as it does for `q`. Once
    /// `withdrawn` is set (answered elsewhere) the question is taken off
    /// the screen and whatever is returned is ignored.
    fn on_exhausted(
        &mut self,
        task: &Task,
        last: &Outcome,
        withdrawn: &Arc<AtomicBool>,
    ) -> Option<ExhaustChoice>;
}

/// The process groups running right now (agents, `--verify` commands) and
/// whether a quit was requested, shared with the signal handler and the key
/// reader so a quit is seen everywhere and a force-quit can kill them at once.
#[derive(Debug, Clone, Default)]
pub struct ActiveAgents {
    agents: Arc<Mutex<Vec<(u32, AgentHandle)>>>,
    /// Process groups that are not agents (a `--verify` command), each
    /// with the identity of its leader.
    groups: Arc<Mutex<Vec<ProcessTree>>>,
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

    /// Registers a child we just started (not yet waited for) as the leader
    /// of its own process group.
    pub fn add_group(&self, pgid: u32) {
        if let Ok(mut v) = self.groups.lock() {
            v.push(ProcessTree::new(pgid));
        }
    }

    pub fn remove_group(&self, pgid: u32) {
        if let Ok(mut v) = self.groups.lock() {
            v.retain(|t| t.pid() != pgid);
        }
    }

    /// The running agents' process ids: each leads a session of its own.
    pub fn pids(&self) -> Vec<u32> {
        self.agents
            .lock()
            .map(|v| v.iter().map(|(pid, _)| *pid).collect())
            .unwrap_or_default()
    }

    pub fn request_quit(&self) {
        self.quit.store(true, Ordering::SeqCst);
    }

    pub fn quit_requested(&self) -> bool {
        self.quit.load(Ordering::SeqCst)
    }

    /// SIGKILL to every known process tree, without waiting: the force-quit
    /// path. Goes through the same verified-identity API as every other kill
    /// (see [`ProcessTree`]), so it reaches an agent's escaped children and
    /// never a process that is not ours.
    pub fn kill_all_now(&self) {
        let agents: Vec<AgentHandle> = match self.agents.lock() {
            Ok(v) => v.iter().map(|(_, h)| h.clone()).collect(),
            Err(_) => Vec::new(),
        };
        for handle in agents {
            handle.kill_now();
        }
        let groups: Vec<ProcessTree> = match self.groups.lock() {
            Ok(v) => v.clone(),
            Err(_) => Vec::new(),
        };
        for mut tree in groups {
            tree.signal(nix::sys::signal::Signal::SIGKILL);
        }
    }
}
