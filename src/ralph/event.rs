//! The one event type the loop speaks. The human renderer, `--json` NDJSON output
//! and the session file all consume these same facts.

use crate::agent::AgentEvent;
use crate::agent::receipt::Receipt;
use crate::model::{TaskId, TaskStatus};
use serde::{Deserialize, Serialize};

/// How one attempt at a task ended, as the loop judged it.
/// How an attempt the run stopped under (a force quit, a kill -9, a crash)
/// is recorded by the next run: an abnormal end (it counts as a try, so a
/// task that brings spectr down cannot loop forever), said as what it was.
pub const INTERRUPTED: &str = "interrupted";

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Outcome {
    /// The task's status became `completed`, or the agent answered COMPLETE.
    Completed {
        via: CompletedVia,
    },
    /// The agent answered `<promise>FAILED: reason</promise>`.
    Failed {
        reason: String,
    },
    /// `--verify` did not pass after the agent reported completion.
    VerifyFailed {
        reason: String,
    },
    /// The agent ended with neither signal (or exited non-zero, or failed to start).
    Abnormal {
        detail: String,
    },
    TimedOut {
        detail: String,
    },
    /// The provider refused for a rate limit; the attempt is not counted.
    RateLimited {
        resets_at: Option<u64>,
    },
    /// A checkpoint or git command failed (or timed out) around the attempt.
    GitError {
        detail: String,
    },
    /// Stopped by the person at the keyboard or a signal; not the agent's fault.
    Stopped {
        action: StopAction,
    },
    /// Parallel lanes: the task's work could not be merged into the work tree
    /// (another lane, or a person, changed the same lines). Its result is kept
    /// under its failed ref; the next attempt resolves it: the same work is
    /// applied to a refreshed lane with conflict markers where it met the
    /// other change. Not the agent's failure: no retry is used.
    Conflict {
        files: Vec<String>,
        reason: String,
        /// The work that did not merge (absent in sessions of older spectr,
        /// whose next attempt then starts afresh).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        work: Option<ConflictWork>,
    },
}

/// A conflicted attempt's work, as trees: applied again by its resolve
/// attempt.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConflictWork {
    /// The user's tree the lane started from.
    pub base: String,
    /// The lane's tree when the agent was done.
    pub theirs: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CompletedVia {
    /// The task's status in the tasks file.
    Status,
    /// The agent's `<promise>COMPLETE</promise>`.
    Signal,
}

/// Whose doing an attempt's end was ([`Outcome::fault`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// It completed.
    Nobody,
    /// The agent's work failed: another attempt may do better.
    Agent,
    /// The provider refused (a rate limit): wait, then start again, uncounted.
    Provider,
    /// Stopped by request (a key, a signal): not a failure.
    Person,
    /// spectr's own bookkeeping failed (a checkpoint that cannot be taken, a
    /// ref that cannot be written, a lane that cannot be made): every attempt
    /// would fail alike, so the run stops at once, no retry used.
    Spectr,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopAction {
    Restart,
    Skip,
    Quit,
}

impl Outcome {
    pub fn is_completed(&self) -> bool {
        matches!(self, Outcome::Completed { .. })
    }

    /// The reason to hand to the next attempt's prompt, if any.
    pub fn retry_context(&self) -> Option<&str> {
        match self {
            Outcome::Failed { reason }
            | Outcome::VerifyFailed { reason }
            | Outcome::Conflict { reason, .. } => Some(reason),
            _ => None,
        }
    }

    /// Whose doing the end of the attempt was. The one place failures are
    /// sorted: the loop retries only what a retry can mend.
    pub fn fault(&self) -> Fault {
        match self {
            Outcome::Completed { .. } => Fault::Nobody,
            Outcome::Failed { .. }
            | Outcome::VerifyFailed { .. }
            | Outcome::Abnormal { .. }
            | Outcome::TimedOut { .. }
            | Outcome::Conflict { .. } => Fault::Agent,
            Outcome::RateLimited { .. } => Fault::Provider,
            Outcome::Stopped { .. } => Fault::Person,
            Outcome::GitError { .. } => Fault::Spectr,
        }
    }

    /// Whether the attempt uses up one of the task's retries. A conflict
    /// does not: it has its own limit (`--max-conflicts`).
    pub fn counts_as_attempt(&self) -> bool {
        !matches!(self, Outcome::Conflict { .. })
            && matches!(self.fault(), Fault::Nobody | Fault::Agent)
    }

    /// One line for people.
    pub fn describe(&self) -> String {
        match self {
            Outcome::Completed {
                via: CompletedVia::Status,
            } => "completed (status in tasks file)".into(),
            Outcome::Completed {
                via: CompletedVia::Signal,
            } => "completed (agent answered COMPLETE)".into(),
            Outcome::Failed { reason } => format!("failed: {reason}"),
            Outcome::VerifyFailed { reason } => format!("verify failed: {reason}"),
            // The run stopped under it (a force quit, a kill, a crash):
            // said as what it was, not as the agent's abnormal end.
            Outcome::Abnormal { detail } if detail.starts_with(INTERRUPTED) => detail.clone(),
            Outcome::Abnormal { detail } => format!("ended abnormally: {detail}"),
            Outcome::TimedOut { detail } => format!("timed out: {detail}"),
            Outcome::RateLimited { .. } => "rate limited".into(),
            Outcome::GitError { detail } => format!("git error: {detail}"),
            Outcome::Conflict { files, .. } => {
                format!("merge conflict in {}", files.join(", "))
            }
            Outcome::Stopped { action } => match action {
                StopAction::Restart => "stopped to restart".into(),
                StopAction::Skip => "stopped to skip".into(),
                StopAction::Quit => "stopped to quit".into(),
            },
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NoticeLevel {
    Info,
    Warn,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunEnd {
    /// Every selected task completed.
    Complete,
    /// Nothing left that can run, but some tasks were skipped.
    Incomplete,
    /// Retries ran out and the run stopped (or the user chose abort).
    Aborted,
    /// Stopped by `q`, Ctrl+C or a signal; the session is saved.
    Interrupted,
    /// The run's budget (`--budget-usd`, `--budget-tokens`) was reached:
    /// the running attempts finished, nothing new started; the session is
    /// saved.
    Budget,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Totals {
    pub completed: usize,
    pub failed: usize,
    pub skipped: usize,
    pub remaining: usize,
    pub attempts: usize,
    pub duration_ms: u64,
    /// None when no attempt reported its turns (never a guessed 0).
    pub turns: Option<u64>,
    /// The tokens: None when no attempt reported any.
    pub input_tokens: Option<u64>,
    pub output_tokens: Option<u64>,
    pub cache_tokens: Option<u64>,
    /// None when no attempt reported a cost.
    pub cost_usd: Option<f64>,
    /// Parallel runs: merge conflicts (not failures: they use no retry),
    /// and the attempts that resolved them.
    #[serde(default)]
    pub conflicts: usize,
    #[serde(default)]
    pub resolve_attempts: usize,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlanLane {
    pub lane: String,
    /// Upstream's final section: waits for every other lane.
    pub after_all_others: bool,
    pub tasks: Vec<PlanTask>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlanTask {
    pub task: TaskId,
    /// Its section's title (an OpenSpec story's own title).
    #[serde(default)]
    pub section: String,
    pub description: String,
    /// `run`, `completed` (already done), `not_selected`, `skipped`.
    pub action: String,
    /// The agent a route gives it (`ralph: routes:`); none: the run's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum LoopEvent {
    RunStarted {
        change: String,
        agent: String,
        tasks_total: usize,
        tasks_to_run: Vec<TaskId>,
        max_retries: u32,
        checkpoints: bool,
        resumed: bool,
        state_dir: String,
        /// The session file (`<change>/.ralph-session.json`).
        session_file: String,
        /// The run's budget and what the session had spent when it started.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        budget: Option<crate::ralph::budget::BudgetUse>,
        /// `--sandbox`: bubblewrap's version and what is writable; `null` off.
        #[serde(default)]
        sandbox: Option<crate::ralph::sandbox::SandboxSummary>,
        /// The tasks are OpenSpec stories (`## N.` sections of tasks.md).
        #[serde(default)]
        stories: bool,
    },
    Plan {
        lanes: Vec<PlanLane>,
    },
    Notice {
        level: NoticeLevel,
        message: String,
    },
    TaskStarted {
        task: TaskId,
        section: String,
        description: String,
        attempt: u32,
        max_attempts: u32,
        transcript: String,
        /// The task's place in this run: task `index` (from 1) of `count`.
        index: usize,
        count: usize,
        /// Parallel runs (`--jobs`): the task's lane (its top-level prefix)
        /// and the work tree its agent runs in.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        lane: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        worktree: Option<String>,
    },
    Checkpoint {
        task: TaskId,
        attempt: u32,
        checkpoint: crate::checkpoint::Checkpoint,
    },
    /// The agent process started; `pid` leads its own process group.
    AgentStarted {
        task: TaskId,
        attempt: u32,
        pid: u32,
        /// Its start time (clock ticks after boot), read at spawn: with the
        /// pid, its identity. Read when the event is recorded instead, an
        /// agent that has already ended and been reaped has none, and a
        /// resume could not stop what it left behind.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        start: Option<u64>,
        /// The agent, when it is not the run's own (a route chose it).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        agent: Option<String>,
    },
    AgentEvent {
        task: TaskId,
        attempt: u32,
        agent: AgentEvent,
    },
    StatusChanged {
        task: TaskId,
        status: TaskStatus,
    },
    /// HEAD, its branch or the checkpoint's branch moved while the attempt
    /// ran (the agent committed or switched branches): recorded so a resume
    /// knows these moves were the attempt's.
    HeadMoved {
        task: TaskId,
        attempt: u32,
        /// HEAD's commit and branch, and the checkpoint's branch's tip.
        head: Option<String>,
        branch: Option<String>,
        tip: Option<String>,
    },
    /// Parallel lanes: a completed task's work is about to be merged into the
    /// work tree, which was checkpointed first (a crash mid-merge is undone
    /// from `checkpoint` on resume).
    MergeStarted {
        task: TaskId,
        attempt: u32,
        checkpoint: crate::checkpoint::Checkpoint,
        /// What is merged: a resume after a crash mid-merge merges it again
        /// from these instead of running the agent again.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        work: Option<MergeWork>,
    },
    /// A remote lane (`ralph: lanes: exec`): the attempt's start was pushed
    /// to `remote` at `<prefix>/base` and its worker is being started. A
    /// resume after a crash looks there for its work (`<prefix>/result`)
    /// before running the agent again.
    RemoteAttempt {
        task: TaskId,
        attempt: u32,
        remote: String,
        prefix: String,
        /// The user's tree the attempt started from (the merge base).
        base: String,
        /// Repo-relative paths never merged back (the tasks files).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        skip: Vec<String>,
    },
    /// Parallel lanes: the task's work is in the work tree.
    Merged {
        task: TaskId,
        attempt: u32,
        lane: String,
        /// Paths written or removed, sorted.
        files: Vec<String>,
    },
    TaskCompleted {
        task: TaskId,
        attempt: u32,
        outcome: Outcome,
        receipt: Receipt,
    },
    /// `--commit task`: a completed task's commit on the user's branch.
    TaskCommitted {
        task: TaskId,
        attempt: u32,
        /// `None`: the task left nothing to commit.
        commit: Option<String>,
        /// What the commit changes, sorted.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        files: Vec<String>,
        /// Paths the task changed where your own uncommitted work was:
        /// left out of the commit, uncommitted in your tree.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        left_out: Vec<String>,
        /// Made by a run that was killed before it could say so; found on
        /// the branch by its trailers instead of made twice.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        found: bool,
    },
    TaskFailed {
        task: TaskId,
        attempt: u32,
        outcome: Outcome,
        receipt: Receipt,
    },
    Reverted {
        task: TaskId,
        attempt: u32,
        failed_ref: String,
        files_restored: usize,
        files_removed: usize,
    },
    Retry {
        task: TaskId,
        next_attempt: u32,
        max_attempts: u32,
        reason: Option<String>,
    },
    /// Parallel runs: a resolve attempt begins. The work of the attempt
    /// that conflicted is applied to the refreshed lane; `files` hold
    /// conflict markers for the agent to resolve, `unmarked` conflicted as
    /// whole files and hold none (binary, `merge=binary`, removed on one
    /// side); both empty: it applied cleanly.
    Resolving {
        task: TaskId,
        attempt: u32,
        files: Vec<String>,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        unmarked: Vec<String>,
    },
    RateLimitWait {
        task: TaskId,
        resets_at: Option<u64>,
        wait_secs: u64,
    },
    /// A remote lane's attempt waits in its engine's queue (its worker has
    /// not started): its time there counts against none of its limits.
    AttemptQueued {
        task: TaskId,
        attempt: u32,
        lane: String,
    },
    /// A remote lane's worker started: its attempt runs, after `queued_ms`
    /// in the engine's queue (said when it waited there).
    AttemptRunning {
        task: TaskId,
        attempt: u32,
        queued_ms: u64,
        /// The machine it runs on, as the worker says it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        host: Option<String>,
    },
    /// `ralph: fallback:`: the task's next attempt runs on `to`, as `from`
    /// is at a limit (until `until`, epoch seconds, when known).
    AgentFallback {
        task: TaskId,
        from: String,
        to: String,
        until: Option<u64>,
    },
    TaskSkipped {
        task: TaskId,
        reason: String,
        dependents: Vec<TaskId>,
    },
    /// A learning recorded for later tasks (see `learnings.md`).
    Learning {
        task: TaskId,
        text: String,
    },
    Paused,
    Resumed,
    /// The run's budget is reached: no attempt starts any more; the
    /// running ones finish, then the run ends (`RunEnd::Budget`).
    BudgetReached {
        budget: crate::ralph::budget::Budget,
        spent: crate::ralph::budget::Spent,
    },
    /// A task's work kept conflicting when merged back: past
    /// `--max-conflicts`, no resolve attempt follows on its own. `then`
    /// says what the run does about it: `ask` (a [`LoopEvent::Question`]
    /// follows), `retry`, `skip` or `abort` (`--on-exhaust`).
    ConflictLimit {
        task: TaskId,
        files: Vec<String>,
        conflicts: u32,
        max_conflicts: u32,
        then: String,
    },
    /// A person is asked what to do with `task`, whose retries ran out
    /// (`reason`: how its last attempt ended). The rest of the run goes on
    /// meanwhile.
    Question {
        task: TaskId,
        reason: String,
    },
    /// The answer: `retry`, `skip`, `abort`, or `none` (Ctrl+C at the
    /// question, or the terminal went away: the run stops as for `q`).
    Answered {
        task: TaskId,
        answer: String,
    },
    Error {
        task: Option<TaskId>,
        message: String,
    },
    Summary {
        end: RunEnd,
        totals: Totals,
        /// This session's transcript folder.
        transcripts: String,
        checkpoint_refs: Vec<String>,
        /// Parallel runs: per lane, what merged and what conflicted.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        lanes: Vec<LaneSummary>,
        /// Parallel runs: files that kept two lanes in conflict.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        hot_files: Vec<HotFile>,
        /// What the session file on disk holds when the run stops short
        /// (none when every task completed: the file is deleted).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        session: Option<SessionFile>,
        /// The run's budget and what the session spent against it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        budget: Option<crate::ralph::budget::BudgetUse>,
    },
}

/// The session file as a run leaves it, and so what a resume will do.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SessionFile {
    pub path: String,
    /// Whether the file holds the run as it ended.
    pub saved: bool,
    /// Why it could not be written (when not saved).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// When not saved: when the file on disk was last written (none: there
    /// is no file, a new run starts from the tasks files).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub saved_at: Option<String>,
    /// Tasks completed in this run that neither the file on disk nor the
    /// tasks files record as completed: a resume runs them again.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub runs_again: Vec<TaskId>,
    /// Tasks the file on disk records as completed whose status the tasks
    /// files lack: a resume writes it, without running them again.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub status_to_write: Vec<TaskId>,
    /// Tasks that used up their retries with nothing chosen for them (the
    /// run aborted on them): a resume under the same settings stops on them
    /// again at once.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub out_of_retries: Vec<TaskId>,
}

/// A completed lane attempt's work as its merge-back takes it: enough to
/// merge it again (the same three-way merge) after a crash.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MergeWork {
    /// The user's tree the lane started from (a git tree id): the base.
    pub base: String,
    /// The lane's tree once the task was done (a git tree id).
    pub theirs: String,
    /// Repo-relative paths left out of the merge (the change's tasks files,
    /// whose statuses the loop writes itself).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub skip: Vec<String>,
    /// How the attempt was judged completed.
    pub via: CompletedVia,
}

/// One lane of a parallel run, for the summary.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LaneSummary {
    pub lane: String,
    /// Tasks whose work merged into the work tree.
    pub merged: Vec<TaskId>,
    /// Tasks that hit a merge conflict at least once (each was retried).
    pub conflicted: Vec<TaskId>,
    /// Tasks of this lane that ran in the user's own tree while the lanes
    /// took turns (nothing else could run): nothing to refresh or merge.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub in_place: Vec<TaskId>,
}

/// One file that kept two lanes in conflict (said once it happens
/// [`HOT_FILE_CONFLICTS`] times, and in the summary).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HotFile {
    pub file: String,
    /// The two lanes, in order.
    pub lanes: (String, String),
    pub conflicts: u32,
}

/// Conflicts on one file between the same two lanes before the person is
/// told (a `merge=union` rule, or splitting the work, would end them).
pub const HOT_FILE_CONFLICTS: u32 = 3;

impl LoopEvent {
    /// How an attempt ended: `task_completed` when `outcome` is a
    /// completion, else `task_failed`.
    pub fn attempt_ended(
        task: TaskId,
        attempt: u32,
        outcome: Outcome,
        receipt: Receipt,
    ) -> LoopEvent {
        if outcome.is_completed() {
            LoopEvent::TaskCompleted {
                task,
                attempt,
                outcome,
                receipt,
            }
        } else {
            LoopEvent::TaskFailed {
                task,
                attempt,
                outcome,
                receipt,
            }
        }
    }

    /// The task an event is about, if any.
    pub fn task(&self) -> Option<&TaskId> {
        match self {
            LoopEvent::TaskStarted { task, .. }
            | LoopEvent::Checkpoint { task, .. }
            | LoopEvent::AgentStarted { task, .. }
            | LoopEvent::AgentEvent { task, .. }
            | LoopEvent::StatusChanged { task, .. }
            | LoopEvent::HeadMoved { task, .. }
            | LoopEvent::MergeStarted { task, .. }
            | LoopEvent::RemoteAttempt { task, .. }
            | LoopEvent::Merged { task, .. }
            | LoopEvent::TaskCompleted { task, .. }
            | LoopEvent::TaskCommitted { task, .. }
            | LoopEvent::TaskFailed { task, .. }
            | LoopEvent::Reverted { task, .. }
            | LoopEvent::Retry { task, .. }
            | LoopEvent::AgentFallback { task, .. }
            | LoopEvent::AttemptQueued { task, .. }
            | LoopEvent::AttemptRunning { task, .. }
            | LoopEvent::Resolving { task, .. }
            | LoopEvent::RateLimitWait { task, .. }
            | LoopEvent::TaskSkipped { task, .. }
            | LoopEvent::Learning { task, .. }
            | LoopEvent::Question { task, .. }
            | LoopEvent::ConflictLimit { task, .. }
            | LoopEvent::Answered { task, .. } => Some(task),
            LoopEvent::Error { task, .. } => task.as_ref(),
            LoopEvent::RunStarted { .. }
            | LoopEvent::Plan { .. }
            | LoopEvent::Notice { .. }
            | LoopEvent::Paused
            | LoopEvent::Resumed
            | LoopEvent::BudgetReached { .. }
            | LoopEvent::Summary { .. } => None,
        }
    }
}

/// When an event happened, as every serialized event carries it (`ts`):
/// UTC, RFC 3339 with milliseconds.
pub fn timestamp(at: std::time::SystemTime) -> String {
    humantime::format_rfc3339_millis(at).to_string()
}

/// Adds `"ts":"<time>"` as the last field of the JSON object in
/// `buf[start..]` (an event as serde wrote it); false if it is not one.
pub fn splice_ts(buf: &mut Vec<u8>, start: usize, at: std::time::SystemTime) -> bool {
    let value = format!("\"{}\"", timestamp(at));
    splice_field(buf, start, "ts", value.as_bytes())
}

/// Adds `"key":<value>` (`value`: JSON) as the last field of the JSON
/// object in `buf[start..]`; false if it is not one.
pub fn splice_field(buf: &mut Vec<u8>, start: usize, key: &str, value: &[u8]) -> bool {
    if buf.len() <= start || buf.last() != Some(&b'}') {
        return false;
    }
    buf.pop();
    // `{}` would take no comma; no event serializes to an empty object.
    if buf.len() > start + 1 {
        buf.push(b',');
    }
    buf.push(b'"');
    buf.extend_from_slice(key.as_bytes());
    buf.extend_from_slice(b"\":");
    buf.extend_from_slice(value);
    buf.push(b'}');
    true
}

/// Where loop events go. Implemented by the UI's reporters (human, JSON).
pub trait Reporter {
    fn report(&mut self, event: &LoopEvent);
}

/// Adds one attempt's receipt to the run's totals.
pub fn add_receipt(totals: &mut Totals, receipt: &Receipt) {
    if let Some(turns) = receipt.turns {
        *totals.turns.get_or_insert(0) += turns;
    }
    if let Some(t) = &receipt.tokens {
        *totals.input_tokens.get_or_insert(0) += t.input;
        *totals.output_tokens.get_or_insert(0) += t.output;
        *totals.cache_tokens.get_or_insert(0) += t.cache_read + t.cache_creation;
    }
    if let Some(c) = receipt.cost_usd {
        *totals.cost_usd.get_or_insert(0.0) += c;
    }
}
