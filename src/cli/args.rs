//! The command-line definition (clap derive). Completion scripts in
//! `completions/` are generated from this; a test fails when they drift.

use crate::agent::AgentKind;
use crate::cli::completions::{change_candidates, task_candidates};
use clap::{Args, Parser, Subcommand, ValueEnum};
use clap_complete::engine::ArgValueCandidates;
use std::time::Duration;

const EXIT_CODES: &str = "\
Exit codes:
  0    success
  1    a run that failed (a task failed, or the run was aborted)
  2    usage or input errors (bad arguments, unknown change, broken tasks file)
  3    the run's budget (--budget-usd, --budget-tokens) was reached; the session is kept
  130  interrupted (Ctrl+C, SIGTERM, SIGHUP, or `q`)";

const RALPH_SHORT_HELP: &str = "\
More options (timeouts, graces, per-attempt limits), defaults in spectr.yaml
and exit codes: --help. Steer a run from another shell:
spectr ralph pause|resume|stop|skip|restart|answer <CHANGE_ID>.";

const RALPH_AFTER_HELP: &str = "\
Defaults for these options may be set in spectr.yaml under `ralph:` (snake_case
names: verify, agent, max_retries, task_timeout, on_exhaust, checkpoints, ...);
an option given here wins.

Steering a run from another shell (its keys p, q, s and r):
  spectr ralph pause <CHANGE_ID>     pause once the running tasks end
  spectr ralph resume <CHANGE_ID>    resume
  spectr ralph stop <CHANGE_ID>      stop gracefully, as Ctrl+C (exit 130)
  spectr ralph skip <CHANGE_ID> [--task ID]     skip a task and its dependents
  spectr ralph restart <CHANGE_ID> [--task ID]  revert an attempt, start again
  spectr ralph answer <CHANGE_ID> retry|skip|abort [--task ID]
                                     answer its open question (a task out of
                                     retries); --wait-for-answer keeps one
                                     open for this without a terminal
  (`spectr ralph -- stop` runs a change named `stop`.)

Exit codes:
  0    success
  1    a run that failed (a task failed, or the run was aborted)
  2    usage or input errors (bad arguments, unknown change, broken tasks file)
  3    the run's budget (--budget-usd, --budget-tokens) was reached; the session is kept
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
    /// Change a task's status (for agents run by `spectr ralph`, and people).
    Task(TaskArgs),
    /// Record a learning that every later task of the change is told.
    Learn(LearnArgs),
    /// Show where a change's run stands.
    Status(StatusArgs),
    /// Print a task's context again, as in its prompt (for an agent that lost it).
    Context(ContextArgs),
    /// Report a change's last run: Markdown on stdout, or one HTML page.
    Report(ReportArgs),
    /// Watch a change's run from another terminal, live; q detaches.
    Watch(WatchArgs),
    /// Serve a live page of the project's runs (until Ctrl+C).
    Serve(ServeArgs),
    /// Print a manual page (roff): `spectr man ralph | man -l -`.
    Man(ManArgs),
    /// Run one attempt of a remote lane (started by `spectr ralph
    /// --lane-exec`; its work order on stdin).
    #[command(hide = true)]
    LaneWorker(LaneWorkerArgs),
}

#[derive(Debug, Args)]
pub struct ManArgs {
    /// The command whose page to print (e.g. `ralph`); without it, spectr's.
    pub command: Option<String>,
}

#[derive(Debug, Args)]
pub struct LaneWorkerArgs {
    /// Where the attempt's fresh clone is made (and removed); default: the
    /// system's temporary folder.
    #[arg(long, value_name = "DIR")]
    pub dir: Option<std::path::PathBuf>,
}

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Where to listen; default: 127.0.0.1 and a free port.
    #[arg(value_name = "ADDR")]
    pub addr: Option<String>,
}

#[derive(Debug, Args)]
pub struct WatchArgs {
    /// The change; default: the one whose run is listening, else as
    /// `spectr report` chooses.
    #[arg(value_name = "CHANGE_ID", add = ArgValueCandidates::new(change_candidates))]
    pub change_id: Option<String>,
}

#[derive(Debug, Args)]
pub struct ReportArgs {
    /// The change; default: the one with a run under way, else the only one.
    #[arg(value_name = "CHANGE_ID", add = ArgValueCandidates::new(change_candidates))]
    pub change: Option<String>,
    /// Also write the report as one self-contained HTML page to FILE.
    #[arg(long, value_name = "FILE")]
    pub html: Option<std::path::PathBuf>,
}

#[derive(Debug, Args)]
pub struct TaskArgs {
    #[command(subcommand)]
    pub command: TaskCommand,
}

#[derive(Debug, Subcommand)]
pub enum TaskCommand {
    /// Mark a task completed (or another status): one value changes, atomically.
    Done {
        /// The task id, e.g. 1.2.
        #[arg(add = ArgValueCandidates::new(task_candidates))]
        id: String,
        /// The change (or `--change`); default: $SPECTR_RALPH_CHANGE, else
        /// the only change with an unfinished run, else the only active one.
        #[arg(
            value_name = "CHANGE_ID",
            add = ArgValueCandidates::new(change_candidates),
            conflicts_with = "change"
        )]
        change_id: Option<String>,
        /// The status to set.
        #[arg(long, value_enum, default_value_t = StatusArg::Completed)]
        status: StatusArg,
        /// The change; default: $SPECTR_RALPH_CHANGE, else the only change
        /// with an unfinished run, else the only active change.
        #[arg(long, value_name = "ID", add = ArgValueCandidates::new(change_candidates))]
        change: Option<String>,
    },
    /// Tick or clear tasks.md's boxes to match tasks.jsonc's statuses.
    Sync {
        /// The change; default: $SPECTR_RALPH_CHANGE, else the only change
        /// with an unfinished run, else the only active change.
        #[arg(long, value_name = "ID", add = ArgValueCandidates::new(change_candidates))]
        change: Option<String>,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
#[value(rename_all = "snake_case")]
pub enum StatusArg {
    Pending,
    InProgress,
    Completed,
}

impl From<StatusArg> for crate::model::TaskStatus {
    fn from(s: StatusArg) -> Self {
        match s {
            StatusArg::Pending => crate::model::TaskStatus::Pending,
            StatusArg::InProgress => crate::model::TaskStatus::InProgress,
            StatusArg::Completed => crate::model::TaskStatus::Completed,
        }
    }
}

#[derive(Debug, Args)]
pub struct LearnArgs {
    /// What later tasks must know (several words are joined with spaces);
    /// a first word that is a change's exact id, with more words after it,
    /// names the change (`spectr learn add-widget "the tests need make
    /// gen"`).
    #[arg(required = true, num_args = 1.., value_name = "[CHANGE_ID] TEXT")]
    pub text: Vec<String>,
    /// The change; default as for `spectr task done`.
    #[arg(long, value_name = "ID", add = ArgValueCandidates::new(change_candidates))]
    pub change: Option<String>,
    /// The task it came from; default: the task the run is working on.
    #[arg(long, value_name = "ID", add = ArgValueCandidates::new(task_candidates))]
    pub task: Option<String>,
}

#[derive(Debug, Args)]
pub struct StatusArgs {
    /// The change (exact, unique prefix or substring); default: the one
    /// with a run under way, else the only active change.
    #[arg(
        value_name = "CHANGE_ID",
        add = ArgValueCandidates::new(change_candidates),
        conflicts_with = "change_flag"
    )]
    pub change: Option<String>,
    /// The change, as an option (as agents' prompts name it).
    #[arg(
        long = "change",
        id = "change_flag",
        value_name = "ID",
        hide_short_help = true,
        add = ArgValueCandidates::new(change_candidates)
    )]
    pub change_flag: Option<String>,
    /// One JSON object instead of lines.
    #[arg(long)]
    pub json: bool,
}

/// The change named either way: the positional one, else `--change`.
fn merge_change(positional: &mut Option<String>, flag: &mut Option<String>) {
    if positional.is_none() {
        *positional = flag.take();
    }
}

impl StatusArgs {
    /// The change named either way (positional or `--change`).
    pub fn merge_change(&mut self) {
        merge_change(&mut self.change, &mut self.change_flag);
    }
}

impl ContextArgs {
    /// The change named either way (positional or `--change`).
    pub fn merge_change(&mut self) {
        merge_change(&mut self.change, &mut self.change_flag);
    }
}

#[derive(Debug, Args)]
pub struct ContextArgs {
    /// The change (exact, unique prefix or substring); default: the one
    /// with a run under way, else the only active change.
    #[arg(
        value_name = "CHANGE_ID",
        add = ArgValueCandidates::new(change_candidates),
        conflicts_with = "change_flag"
    )]
    pub change: Option<String>,
    /// The change, as an option (as agents' prompts name it).
    #[arg(
        long = "change",
        id = "change_flag",
        value_name = "ID",
        hide_short_help = true,
        add = ArgValueCandidates::new(change_candidates)
    )]
    pub change_flag: Option<String>,
    /// The task; default: the task the run gave this agent, else the one
    /// task the run has under way.
    #[arg(long, value_name = "ID", add = ArgValueCandidates::new(task_candidates))]
    pub task: Option<String>,
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
    #[arg(add = ArgValueCandidates::new(change_candidates))]
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
pub enum CommitArg {
    /// One commit per completed task on your branch, made by spectr.
    Task,
    /// No commit: every task's work stays uncommitted in your tree.
    Off,
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

/// `spectr ralph pause|resume|stop|skip|restart|answer <CHANGE_ID>`: ask
/// the run of that change, from another shell, what its keys p, q, s and r
/// ask, or answer its open question.
#[derive(Debug, Clone, PartialEq, Eq, clap::Subcommand)]
pub enum SteerCommand {
    /// Pause the run after its running tasks.
    #[command(hide = true)]
    Pause { change_id: String },
    /// Resume a paused run.
    #[command(hide = true)]
    Resume { change_id: String },
    /// Stop the run gracefully (as Ctrl+C): agents stopped, session saved.
    #[command(hide = true)]
    Stop { change_id: String },
    /// Skip a task (and its dependents).
    #[command(hide = true)]
    Skip {
        change_id: String,
        /// The task, when several run.
        #[arg(long)]
        task: Option<String>,
    },
    /// Stop a task's attempt, revert it and start it again.
    #[command(hide = true)]
    Restart {
        change_id: String,
        /// The task, when several run.
        #[arg(long)]
        task: Option<String>,
    },
    /// Answer the run's open question about a task out of retries.
    #[command(hide = true)]
    Answer {
        change_id: String,
        /// retry, skip (and its dependents) or abort the run.
        #[arg(value_enum)]
        answer: AnswerArg,
        /// The task the question must be about (refused if it is another).
        #[arg(long)]
        task: Option<String>,
    },
}

/// An answer to a task out of retries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum AnswerArg {
    Retry,
    Skip,
    Abort,
}

#[derive(Debug, Args)]
#[command(
    after_help = RALPH_SHORT_HELP,
    after_long_help = RALPH_AFTER_HELP,
    args_conflicts_with_subcommands = true,
    disable_help_subcommand = true
)]
pub struct RalphArgs {
    /// Steering a running run from another shell (hidden verbs: `spectr
    /// ralph -- stop` still runs a change named like one).
    #[command(subcommand)]
    pub steer: Option<SteerCommand>,
    /// The change id (exact, unique prefix or substring); omitted: choose one.
    ///
    /// The change id (exact, unique prefix, or unique substring); without it,
    /// you choose from the active changes (needs a terminal).
    #[arg(add = ArgValueCandidates::new(change_candidates))]
    pub change_id: Option<String>,
    /// Agent CLI to run [default: the first installed].
    ///
    /// Agent CLI to run; default: the first installed of claude, codex, gemini,
    /// opencode, copilot, qwen, pi, amp, cursor.
    #[arg(long, value_enum, hide_possible_values = true, help_heading = "Agent")]
    pub agent: Option<AgentKind>,
    /// `ralph: story_completion` from spectr.yaml (no flag).
    #[arg(skip)]
    pub story_completion: Option<crate::model::spectr_yaml::StoryCompletion>,
    /// Command line for `--agent custom` (implies it).
    ///
    /// Command line for `--agent custom` (implies it): the prompt goes to
    /// stdin, or to a file named where `{prompt_file}` appears.
    #[arg(long, value_name = "CMD", help_heading = "Agent")]
    pub agent_cmd: Option<String>,
    /// Extra argument for the agent CLI (repeatable).
    ///
    /// Extra argument passed to the agent CLI (repeatable).
    #[arg(
        long = "agent-arg",
        value_name = "ARG",
        allow_hyphen_values = true,
        help_heading = "Agent"
    )]
    pub agent_args: Vec<String>,
    /// Model name passed to the agent CLI.
    #[arg(long, help_heading = "Agent")]
    pub model: Option<String>,
    /// Turn limit per attempt (Claude Code's --max-turns).
    ///
    /// Turn limit per attempt (Claude Code's --max-turns), 1 to 10000.
    #[arg(long, value_name = "N", value_parser = parse_max_turns, hide_short_help = true, help_heading = "Agent")]
    pub max_turns: Option<u32>,
    /// Spending limit per attempt in USD (Claude Code's).
    ///
    /// Spending limit per attempt in USD (Claude Code's --max-budget-usd),
    /// above 0.
    #[arg(long, value_name = "USD", value_parser = parse_budget, hide_short_help = true, help_heading = "Agent")]
    pub max_budget_usd: Option<f64>,
    /// Retries per task after its first attempt [default: 3].
    ///
    /// Retries per task after its first attempt, 0 to 1000 [default: 3].
    #[arg(long, value_name = "N", value_parser = parse_max_retries, help_heading = "Task limits")]
    pub max_retries: Option<u32>,
    /// Timeout for one attempt at a task [default: 30m].
    ///
    /// Timeout for one attempt at a task (e.g. 30m, 1h, 90s; 1s to 7d)
    /// [default: 30m].
    #[arg(long, value_name = "DUR", value_parser = parse_timeout, help_heading = "Task limits")]
    pub task_timeout: Option<std::time::Duration>,
    /// Stop an attempt whose agent prints nothing for this long.
    ///
    /// Stop an attempt whose agent prints nothing for this long (e.g. 5m; 1s to
    /// 7d).
    #[arg(long, value_name = "DUR", value_parser = parse_timeout, help_heading = "Task limits")]
    pub idle_timeout: Option<std::time::Duration>,
    /// A command that must pass before a task counts as completed.
    #[arg(long, value_name = "CMD", help_heading = "Task limits")]
    pub verify: Option<String>,
    /// A rate limit further away than this moves a task to `ralph:
    /// fallback:`'s next agent [default: 15m].
    ///
    /// When an attempt ends at a rate, usage or spend limit whose reset is
    /// further away than this (0s to 7d), and spectr.yaml names `ralph:
    /// fallback:` agents, the task's next attempt runs on the next of them
    /// at once (not counted) instead of waiting [default: 15m].
    #[arg(long, value_name = "DUR", value_parser = parse_rate_wait, hide_short_help = true, help_heading = "Task limits")]
    pub max_rate_wait: Option<std::time::Duration>,
    /// When a task's retries run out: prompt, retry, skip or abort.
    #[arg(
        long,
        value_enum,
        value_name = "WHAT",
        hide_possible_values = true,
        help_heading = "Task limits"
    )]
    pub on_exhaust: Option<OnExhaust>,
    /// Without a terminal, keep the retry/skip/abort question open for
    /// `spectr ralph answer`.
    ///
    /// Without a terminal, a task out of retries under `--on-exhaust prompt`
    /// (the default) aborts the run; with this the question stays open, the
    /// other lanes go on, `--notify` is called with the commands that
    /// answer it, and `spectr ralph answer <CHANGE_ID> retry|skip|abort`
    /// answers it from any shell.
    #[arg(long, hide_short_help = true, help_heading = "Task limits")]
    pub wait_for_answer: bool,
    /// Time an agent may run on once its task is done.
    ///
    /// How long an agent may keep running once its task is marked completed (0s
    /// to 1h).
    #[arg(long, default_value = "5s", value_name = "DUR", value_parser = parse_grace, hide_short_help = true, help_heading = "Task limits")]
    pub completion_grace: std::time::Duration,
    /// Time a stopped agent gets before SIGKILL.
    ///
    /// How long a stopped agent gets between SIGTERM and SIGKILL (0s to 1h).
    #[arg(long, default_value = "3s", value_name = "DUR", value_parser = parse_grace, hide_short_help = true, help_heading = "Task limits")]
    pub kill_grace: std::time::Duration,
    /// Tasks run at once, each in a lane of its own [default: 1].
    ///
    /// Tasks run at once: independent groups of tasks (1.x, 2.x, ...) run
    /// side by side, each task in a lane (a git work tree of its own, lane-1,
    /// lane-2, ...), merged back task by task; 0 = one per group, up to the
    /// number of CPUs [default: 1].
    #[arg(short, long, value_name = "N", value_parser = parse_jobs, help_heading = "Lanes")]
    pub jobs: Option<usize>,
    /// Resolve attempts per task after merge conflicts [default: 10].
    ///
    /// With --jobs: resolve attempts per task after merge conflicts between
    /// lanes, 0 to 1000; a conflict uses none of --max-retries [default: 10].
    #[arg(long, value_name = "N", value_parser = parse_max_conflicts, help_heading = "Lanes")]
    pub max_conflicts: Option<u32>,
    /// A command run in each new lane work tree (e.g. `npm ci`).
    ///
    /// With --jobs: a command run with `sh -c` in each new lane work tree
    /// before its first task (e.g. `npm ci`); its failure stops the run.
    #[arg(long, value_name = "CMD", help_heading = "Lanes")]
    pub lane_setup: Option<String>,
    /// Timeout for the lane setup command [default: 10m].
    ///
    /// Timeout for the lane setup command (1s to 7d) [default: 10m].
    #[arg(long, value_name = "DUR", value_parser = parse_timeout, hide_short_help = true, help_heading = "Lanes")]
    pub lane_setup_timeout: Option<std::time::Duration>,
    /// Run each lane's attempt through `sh -c TEMPLATE` (e.g. ssh).
    ///
    /// Run lanes elsewhere: each attempt runs `sh -c TEMPLATE`, where `{cmd}`
    /// is the lane worker's command line and `{lane}` the lane's number (e.g.
    /// `ssh build{lane} {cmd}`); needs --lane-remote.
    #[arg(long, value_name = "TEMPLATE", help_heading = "Remote lanes")]
    pub lane_exec: Option<String>,
    /// The git URL remote lanes exchange work through.
    ///
    /// The git URL remote lanes exchange work through; this machine and the
    /// lanes must both reach it.
    #[arg(long, value_name = "URL", help_heading = "Remote lanes")]
    pub lane_remote: Option<String>,
    /// Run agents and commands in a bubblewrap sandbox (Linux).
    ///
    /// Run every agent, --verify and lane setup command in a bubblewrap sandbox
    /// (Linux): it can write its task's work tree and little else.
    #[arg(long, help_heading = "Safety")]
    pub sandbox: bool,
    /// Run without git checkpoints (no revert on failure).
    #[arg(long, help_heading = "Safety")]
    pub no_checkpoint: bool,
    /// One commit per task (`task`), or `off` [default: task].
    ///
    /// What the run leaves on your branch: `task` (one commit per completed
    /// task) or `off` (the work uncommitted).
    #[arg(
        long,
        value_enum,
        value_name = "WHAT",
        hide_possible_values = true,
        help_heading = "Safety"
    )]
    pub commit: Option<CommitArg>,
    /// Commit the run's tasks on a new branch NAME made from HEAD.
    ///
    /// Make branch NAME from HEAD and commit the run's tasks there, leaving
    /// your branch where it is (with `--commit task`).
    #[arg(long, value_name = "NAME", help_heading = "Safety")]
    pub branch: Option<String>,
    /// Timeout for each git command, in seconds [default: 30].
    ///
    /// Timeout for each git command, in seconds (1 to 604800, i.e. 7 days)
    /// [default: 30].
    #[arg(long, value_name = "SECS", value_parser = parse_command_timeout, hide_short_help = true, help_heading = "Safety")]
    pub command_timeout: Option<u64>,
    /// Stop starting attempts once the run cost this many USD.
    ///
    /// Stop starting attempts once the run's attempts (resumes included) have
    /// cost this many USD; running ones finish, the session is kept, exit 3.
    #[arg(long, value_name = "USD", value_parser = parse_budget, help_heading = "Run control")]
    pub budget_usd: Option<f64>,
    /// The same in input + output tokens.
    ///
    /// The same for input + output tokens, for agents that report no cost.
    #[arg(long, value_name = "N", value_parser = parse_budget_tokens, hide_short_help = true, help_heading = "Run control")]
    pub budget_tokens: Option<u64>,
    /// Run CMD when the run needs a person, and when it ends.
    ///
    /// Run CMD with `sh -c` when the run needs a person (a question, a long
    /// rate-limit wait, the budget reached) and when it ends, with the event as
    /// one JSON object on stdin (the --json schema).
    #[arg(long, value_name = "CMD", help_heading = "Run control")]
    pub notify: Option<String>,
    /// Serve a live page of the run (127.0.0.1, a free port; or ADDR).
    ///
    /// Serve a live page of the run: its tasks, their agents' lines, its
    /// question with buttons, pause and stop. On 127.0.0.1 and a free port
    /// unless ADDR (`--serve=0.0.0.0:8080`) is given; its URL, said on stderr
    /// and kept in `<change>/.ralph/page-url`, holds a random token every
    /// request needs. Implies --wait-for-answer.
    #[arg(
        long,
        value_name = "ADDR",
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "127.0.0.1:0",
        help_heading = "Run control"
    )]
    pub serve: Option<String>,
    /// Choose the tasks to run before starting.
    #[arg(short, long, help_heading = "Run control")]
    pub interactive: bool,
    /// Start without showing the plan and asking `Start? [Y/n]`.
    #[arg(short, long, help_heading = "Run control")]
    pub yes: bool,
    /// Print the plan and exit.
    ///
    /// Print the plan (order, lanes, what would be skipped) and exit.
    #[arg(long, help_heading = "Run control")]
    pub dry_run: bool,
    /// NDJSON events on stdout instead of human output.
    #[arg(long, help_heading = "Output")]
    pub json: bool,
    /// Also show spectr's bookkeeping (paths, refs, merges, retries).
    ///
    /// Also show spectr's bookkeeping: transcript paths, work trees, checkpoint
    /// refs, status changes, merges and retries (always in --json and the
    /// transcripts).
    #[arg(short, long, help_heading = "Output")]
    pub verbose: bool,
    /// Resume the saved session without asking.
    ///
    /// Resume the saved session (`<change>/.ralph-session.json`) without
    /// asking.
    #[arg(long, conflicts_with = "fresh", help_heading = "Session")]
    pub resume: bool,
    /// Discard a saved session without asking.
    #[arg(long, help_heading = "Session")]
    pub fresh: bool,
    /// On resume, revert an interrupted attempt even if HEAD moved.
    ///
    /// On resume, revert an interrupted attempt even when HEAD moved since its
    /// checkpoint (commits made since stay reachable from its failed ref).
    #[arg(long, hide_short_help = true, help_heading = "Session")]
    pub rewind: bool,
}

// Every number is bounded here, at parse time: an unbounded one overflows
// later (a deadline past what `Instant` can hold panics; `max_retries + 1`
// wraps), long after the run has started and written things.

pub use crate::model::values::{MAX_BUDGET_USD, MAX_JOBS, MAX_RETRIES, MAX_TURNS, MAX_WAIT};

/// `--budget-tokens` at most (a trillion).
pub const MAX_BUDGET_TOKENS: u64 = 1_000_000_000_000;

/// A whole number in `lo..=hi`; the error says the range.
fn bounded<T>(s: &str, lo: T, hi: T, what: &str) -> Result<T, String>
where
    T: std::str::FromStr + PartialOrd + std::fmt::Display + Copy,
{
    match s.trim().parse::<T>() {
        Ok(n) if n >= lo && n <= hi => Ok(n),
        _ => Err(format!("must be a whole number from {lo} to {hi} ({what})")),
    }
}

pub(crate) fn parse_max_retries(s: &str) -> Result<u32, String> {
    bounded(s, 0, MAX_RETRIES, "retries after the first attempt")
}

pub(crate) fn parse_max_conflicts(s: &str) -> Result<u32, String> {
    bounded(s, 0, MAX_RETRIES, "resolve attempts after merge conflicts")
}

pub(crate) fn parse_budget_tokens(s: &str) -> Result<u64, String> {
    bounded(s, 1, MAX_BUDGET_TOKENS, "input + output tokens for the run")
}

pub(crate) fn parse_jobs(s: &str) -> Result<usize, String> {
    bounded(s, 0, MAX_JOBS, "tasks at once; 0 = one per lane")
}

pub(crate) fn parse_max_turns(s: &str) -> Result<u32, String> {
    bounded(s, 1, MAX_TURNS, "agent turns per attempt")
}

pub(crate) fn parse_command_timeout(s: &str) -> Result<u64, String> {
    bounded(s, 1, MAX_WAIT.as_secs(), "seconds; 604800 is 7 days")
}

pub(crate) fn parse_budget(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(x) if x.is_finite() && x > 0.0 && x <= MAX_BUDGET_USD => Ok(x),
        _ => Err(format!(
            "must be a USD amount above 0 and at most {MAX_BUDGET_USD}, e.g. 2.50"
        )),
    }
}

/// An attempt's time limit: 1s to 7 days.
pub(crate) fn parse_timeout(s: &str) -> Result<Duration, String> {
    let d = parse_duration(s)?;
    check_timeout(d)?;
    Ok(d)
}

pub(crate) fn check_timeout(d: Duration) -> Result<(), String> {
    if d < Duration::from_secs(1) || d > MAX_WAIT {
        return Err("must be from 1s to 7d (e.g. 90s, 30m, 1h)".to_string());
    }
    Ok(())
}

/// The grace after completion: 0s (stop at once) to 1 hour.
fn parse_grace(s: &str) -> Result<Duration, String> {
    let d = parse_duration(s)?;
    if d > Duration::from_secs(3600) {
        return Err("must be from 0s to 1h".to_string());
    }
    Ok(d)
}

/// `--max-rate-wait`: 0s (never wait when a fallback is there) to 7d.
pub(crate) fn parse_rate_wait(s: &str) -> Result<Duration, String> {
    let d = parse_duration(s)?;
    if d > MAX_WAIT {
        return Err("must be from 0s to 7d (e.g. 15m, 2h)".to_string());
    }
    Ok(d)
}

fn parse_duration(s: &str) -> Result<Duration, String> {
    crate::model::values::parse_duration(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    fn ralph(extra: &[&str]) -> Result<RalphArgs, clap::Error> {
        let mut argv = vec!["spectr", "ralph", "c"];
        argv.extend_from_slice(extra);
        Cli::try_parse_from(argv).map(|cli| match cli.command {
            Command::Ralph(a) => *a,
            _ => unreachable!("parsed `ralph`"),
        })
    }

    fn refused(extra: &[&str], says: &str) {
        let e = ralph(extra).expect_err("out of range");
        assert_eq!(e.kind(), clap::error::ErrorKind::ValueValidation, "{e}");
        assert!(e.to_string().contains(says), "{e}");
    }

    #[test]
    fn numbers_are_bounded_at_parse_time() {
        refused(
            &["--command-timeout", "18446744073709551615"],
            "from 1 to 604800",
        );
        refused(&["--command-timeout", "0"], "from 1 to 604800");
        refused(&["--max-retries", "4294967295"], "from 0 to 1000");
        refused(&["--max-retries=-1"], "from 0 to 1000");
        refused(&["--max-turns", "0"], "from 1 to 10000");
        refused(&["--max-budget-usd", "NaN"], "above 0");
        refused(&["--max-budget-usd", "inf"], "above 0");
        refused(&["--max-budget-usd", "0"], "above 0");
        refused(&["--max-budget-usd=-2"], "above 0");
        refused(&["--max-budget-usd", "1e12"], "at most 1000000");
        refused(&["--task-timeout", "0s"], "from 1s to 7d");
        refused(&["--task-timeout", "604801s"], "from 1s to 7d");
        refused(&["--task-timeout", "8d"], "from 1s to 7d");
        refused(
            &["--task-timeout", "999999999999999999999y"],
            "is not a duration",
        );
        refused(&["--idle-timeout", "500ms"], "from 1s to 7d");
        refused(&["--lane-setup-timeout", "0s"], "from 1s to 7d");
        refused(&["--lane-setup-timeout", "8d"], "from 1s to 7d");
        refused(&["--task-timeout", "18446744073709551615"], "needs a unit");
        refused(&["--completion-grace", "2h"], "from 0s to 1h");
    }

    #[test]
    fn values_are_refused_in_plain_words() {
        refused(
            &["--task-timeout", "10"],
            "`10` needs a unit: 10s, 10m or 10h",
        );
        refused(&["--completion-grace", "0"], "`0` needs a unit");
        refused(
            &["--idle-timeout", "banana"],
            "`banana` is not a duration: write a number and a unit, such as 90s, 30m or 1h",
        );
        let e = ralph(&["--idle-timeout", "banana"])
            .unwrap_err()
            .to_string();
        assert!(!e.contains("expected number at 0"), "{e}");
        refused(
            &["--max-retries", "lots"],
            "must be a whole number from 0 to 1000",
        );
        refused(&["--jobs", "2.5"], "must be a whole number from 0 to 64");
    }

    #[test]
    fn bounds_themselves_are_accepted() {
        let a = ralph(&[
            "--command-timeout",
            "604800",
            "--max-retries",
            "1000",
            "--max-turns",
            "10000",
            "--max-budget-usd",
            "0.01",
            "--task-timeout",
            "7d",
            "--idle-timeout",
            "1s",
        ])
        .unwrap();
        assert_eq!(a.command_timeout, Some(604_800));
        assert_eq!(a.max_retries, Some(1000));
        assert_eq!(a.max_turns, Some(10_000));
        assert_eq!(a.task_timeout, Some(MAX_WAIT));
        assert_eq!(a.idle_timeout, Some(Duration::from_secs(1)));
        // Unset stays unset: spectr.yaml may fill it before the defaults.
        let d = ralph(&[]).unwrap();
        assert_eq!((d.max_retries, d.command_timeout), (None, None));
        assert_eq!(d.task_timeout, None);
    }
}
