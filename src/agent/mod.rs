//! The agent layer: starting a coding-agent CLI on a prompt, reading what it says
//! while it works, stopping it for sure, and accounting for what it cost.
//!
//! It never decides what a task's outcome is (the loop does) and never prints
//! (the UI does).

pub mod acp;
pub mod error;
pub mod event;
pub mod kind;
pub mod lines;
pub mod parse;
pub mod provider;
pub mod ratelimit;
pub mod receipt;
pub mod shellwords;
pub mod signal;
pub mod supervisor;
pub mod version;

pub use error::AgentError;
pub use event::{AgentEvent, FinalResult, RateLimit, TokenUsage};
pub use kind::AgentKind;
pub use provider::{AgentConfig, CommandSpec};
pub use receipt::Receipt;
pub use signal::CompletionSignal;
pub use supervisor::{
    AgentExit, AgentHandle, Ending, RunningAgent, SuperviseOptions, SupervisorEvent,
};
