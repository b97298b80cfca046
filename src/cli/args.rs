//! The command-line definition (clap derive). Completion scripts in
//! `completions/` are generated from this; a test fails when they drift.

use crate::agent::AgentKind;
use clap::{Args, Parser, Subcommand, ValueEnum};

const EXIT_CODES: &str = "\
Exit codes:
  0    success
  1    a run that failed (a task failed, or the run was aborted)
  2    usage or input errors (bad arguments, unknown change, broken tasks file)
  130  interrupted (Ctrl+C, SIGTERM, SIGHUP, or `q`)";

#[derive(Debug, Parser)]
#[command(
    name = "spectr",
    version,
    about = "Spec-driven development: list and accept changes, and run a coding agent over a change's tasks",
    after_help = EXIT_CODES,
    propagate_version = true
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// List active changes with their task progress.
    List(ListArgs),
    /// Convert a change's tasks.md into tasks.jsonc (and split files).
    Accept(AcceptArgs),
    /// Run a coding agent over a change's tasks, in dependency order.
    Ralph(Box<RalphArgs>),
    /// Print a shell completion script.
    Completions(CompletionsArgs),
}

#[derive(Debug, Args)]
pub struct ListArgs {
    /// Machine-readable output (a JSON array).
    #[arg(long)]
    pub json: bool,
    /// Show each change's title (from proposal.md).
    #[arg(long)]
    pub long: bool,
}

#[derive(Debug, Args)]
pub struct AcceptArgs {
    /// The change id (exact, unique prefix, or unique substring).
    pub change_id: String,
    /// Print what would be written, write nothing.
    #[arg(long)]
    pub dry_run: bool,
}

#[derive(Debug, Args)]
pub struct CompletionsArgs {
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum OnExhaust {
    /// Ask retry / skip / abort (needs a terminal; abort without one).
    Prompt,
    /// Retry the task again, with a fresh retry budget.
    Retry,
    /// Skip the task and the tasks that depend on it.
    Skip,
    /// Stop the run.
    Abort,
}

#[derive(Debug, Args)]
#[command(after_help = EXIT_CODES)]
pub struct RalphArgs {
    /// The change id (exact, unique prefix, or unique substring).
    pub change_id: String,

    /// Agent CLI to run; default: the first installed of claude, codex, gemini,
    /// opencode, amp, cursor.
    #[arg(long, value_enum)]
    pub agent: Option<AgentKind>,
    /// Command line for `--agent custom` (implies it): the prompt goes to stdin,
    /// or to a file named where `{prompt_file}` appears.
    #[arg(long, value_name = "CMD")]
    pub agent_cmd: Option<String>,
    /// Extra argument passed to the agent CLI (repeatable).
    #[arg(long = "agent-arg", value_name = "ARG", allow_hyphen_values = true)]
    pub agent_args: Vec<String>,
    /// Model name passed to the agent CLI.
    #[arg(long)]
    pub model: Option<String>,
    /// Turn limit per attempt (Claude Code's --max-turns).
    #[arg(long, value_name = "N")]
    pub max_turns: Option<u32>,
    /// Spending limit per attempt in USD (Claude Code's --max-budget-usd).
    #[arg(long, value_name = "USD")]
    pub max_budget_usd: Option<f64>,

    /// Retries per task after its first attempt.
    #[arg(long, default_value_t = 3, value_name = "N")]
    pub max_retries: u32,
    /// Timeout for each git command, in seconds.
    #[arg(long, default_value_t = 30, value_name = "SECS")]
    pub command_timeout: u64,
    /// Timeout for one attempt at a task (e.g. 30m, 1h, 90s).
    #[arg(long, default_value = "30m", value_name = "DUR", value_parser = parse_duration)]
    pub task_timeout: std::time::Duration,
    /// Stop an attempt whose agent prints nothing for this long (e.g. 5m).
    #[arg(long, value_name = "DUR", value_parser = parse_duration)]
    pub idle_timeout: Option<std::time::Duration>,
    /// A command that must pass before a task counts as completed.
    #[arg(long, value_name = "CMD")]
    pub verify: Option<String>,
    /// What to do when a task's retries run out.
    #[arg(long, value_enum, value_name = "WHAT")]
    pub on_exhaust: Option<OnExhaust>,
    /// Run without git checkpoints (no revert on failure).
    #[arg(long)]
    pub no_checkpoint: bool,
    /// Print the plan (order, lanes, what would be skipped) and exit.
    #[arg(long)]
    pub dry_run: bool,
    /// NDJSON events on stdout instead of human output.
    #[arg(long)]
    pub json: bool,

    /// Choose the tasks to run before starting.
    #[arg(short, long)]
    pub interactive: bool,
    /// Resume the saved session (`<change>/.ralph/session.json`) without asking.
    #[arg(long, conflicts_with = "fresh")]
    pub resume: bool,
    /// Discard a saved session without asking.
    #[arg(long)]
    pub fresh: bool,
    /// On resume, revert an interrupted attempt even when HEAD moved since
    /// its checkpoint (commits made since stay reachable from its failed ref).
    #[arg(long)]
    pub rewind: bool,
    /// How long an agent may keep running once its task is marked completed.
    #[arg(long, default_value = "5s", value_name = "DUR", value_parser = parse_duration, hide = true)]
    pub completion_grace: std::time::Duration,
}

fn parse_duration(s: &str) -> Result<std::time::Duration, String> {
    if let Ok(secs) = s.parse::<u64>() {
        return Ok(std::time::Duration::from_secs(secs));
    }
    humantime::parse_duration(s).map_err(|e| format!("{e} (examples: 90s, 30m, 1h)"))
}
