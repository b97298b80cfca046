//! The agent layer: starting a coding-agent CLI on a prompt, reading what it says
//! while it works, stopping it for sure, and accounting for what it cost.
//!
//! It never decides what a task's outcome is (the loop does) and never prints
//! (the UI does).

pub mod event;
pub mod provider;
pub mod receipt;
pub mod signal;
pub mod supervisor;

pub use event::{AgentEvent, FinalResult, RateLimit, TokenUsage};
pub use provider::{AgentConfig, AgentKind, CommandSpec};
pub use signal::CompletionSignal;
pub use supervisor::{
    AgentExit, AgentHandle, Ending, RunningAgent, SuperviseOptions, SupervisorEvent,
};
