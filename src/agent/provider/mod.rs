//! Agent providers: which CLIs we know ([`crate::agent::kind`]), how to find
//! them (`host`), the exact command line that runs each one headless on a
//! prompt (`command`, where the permission choices are explained), and the
//! check before a run (`preflight`).

mod command;
mod host;
pub mod permissions;
mod preflight;
#[cfg(test)]
mod tests;

pub use crate::agent::kind::{
    AgentKind, DETECTION_ORDER, binary, config_paths, display_name, install_hint, label, state_dirs,
};
pub use command::{CommandSpec, build_command, set_agent_env, set_native_policy};
pub use host::detect;
pub use preflight::{Preflight, VERSION_TIMEOUT, preflight};

use std::time::Duration;

/// What the user chose on the command line, for every attempt of a run.
#[derive(Debug, Clone)]
pub struct AgentConfig {
    pub kind: AgentKind,
    /// `--agent-cmd`: the command line for `custom`.
    pub custom_cmd: Option<String>,
    /// `--agent-arg`, passed through in order.
    pub extra_args: Vec<String>,
    pub model: Option<String>,
    pub max_turns: Option<u32>,
    pub max_budget_usd: Option<f64>,
    /// The attempt's time limit (`--task-timeout`), for agents that can bound
    /// themselves too (qwen's `--max-wall-time`).
    pub time_limit: Option<Duration>,
}

pub const DEFAULT_RESULT_GRACE: Duration = Duration::from_secs(10);
