//! The supervisor: runs one agent process in its own process group, drains its
//! output, enforces timeouts and stops the whole group for sure.
//!
//! STUB: the agent helper fills in.

use crate::agent::{AgentEvent, CompletionSignal, FinalResult, RateLimit};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use std::time::Duration;

#[derive(Debug, Clone)]
pub struct SuperviseOptions {
    pub attempt_timeout: Option<Duration>,
    pub idle_timeout: Option<Duration>,
    /// How long the agent may linger after its final `result` line.
    pub result_grace: Duration,
    /// Between TERM and KILL.
    pub kill_grace: Duration,
    pub transcript: PathBuf,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "how", rename_all = "snake_case")]
pub enum Ending {
    Exited {
        code: i32,
    },
    Signaled {
        signal: i32,
    },
    AttemptTimeout,
    IdleTimeout,
    /// Stopped on request (completion seen, user key, shutdown).
    Stopped {
        reason: String,
    },
    SpawnFailed {
        error: String,
    },
}

#[derive(Debug, Clone)]
pub struct AgentExit {
    pub ending: Ending,
    pub duration: Duration,
    pub result: Option<FinalResult>,
    /// The agent's own final answer (where completion signals are read).
    pub final_answer: Option<String>,
    pub signal: Option<CompletionSignal>,
    /// A rejected rate limit seen during the attempt.
    pub rate_limited: Option<RateLimit>,
    /// The last lines of stderr, for failures that need a cause shown.
    pub stderr_tail: String,
}

#[derive(Debug, Clone)]
pub enum SupervisorEvent {
    Agent(AgentEvent),
    Exited(AgentExit),
}

/// A handle that can stop the agent from any thread.
#[derive(Debug, Clone)]
pub struct AgentHandle {}

#[derive(Debug)]
pub struct RunningAgent {
    pub events: crossbeam_channel::Receiver<SupervisorEvent>,
    pub handle: AgentHandle,
}

impl AgentHandle {
    pub fn stop(&self, reason: &str) {
        let _ = reason;
        todo!("agent helper")
    }
    pub fn pid(&self) -> u32 {
        todo!("agent helper")
    }
}

pub fn start(
    spec: crate::agent::CommandSpec,
    kind: crate::agent::AgentKind,
    opts: SuperviseOptions,
) -> Result<RunningAgent, crate::agent::provider::AgentError> {
    let _ = (spec, kind, opts);
    todo!("agent helper")
}
