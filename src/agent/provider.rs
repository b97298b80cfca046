//! Agent providers: how to start each CLI and how to read its output.
//!
//! STUB: the agent helper fills in.

use std::path::PathBuf;
use std::time::Duration;

#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    clap::ValueEnum,
    serde::Serialize,
    serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum AgentKind {
    Claude,
    Codex,
    Gemini,
    Opencode,
    Amp,
    Cursor,
    Custom,
}

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
}

/// A fully built command: what the supervisor starts.
#[derive(Debug, Clone, PartialEq)]
pub struct CommandSpec {
    pub program: PathBuf,
    pub args: Vec<String>,
    pub env: Vec<(String, String)>,
    pub cwd: PathBuf,
    /// Written to the agent's stdin, which is then closed.
    pub stdin: Option<String>,
}

pub const DEFAULT_RESULT_GRACE: Duration = Duration::from_secs(10);

#[derive(Debug, thiserror::Error, miette::Diagnostic)]
pub enum AgentError {
    #[error("no agent")]
    NoneInstalled,
}

pub fn detect() -> Result<(AgentKind, &'static str), AgentError> {
    todo!("agent helper")
}

pub fn display_name(kind: AgentKind) -> &'static str {
    let _ = kind;
    todo!("agent helper")
}

pub fn build_command(
    cfg: &AgentConfig,
    prompt: &str,
    cwd: &std::path::Path,
    session_dir: &std::path::Path,
) -> Result<CommandSpec, AgentError> {
    let _ = (cfg, prompt, cwd, session_dir);
    todo!("agent helper")
}
