//! The run as one state machine: [`Machine::handle`] takes an input (a
//! worker's event, an attempt's end, a key, a signal, a person's answer, a
//! timer, the result of an effect) and returns the effects to perform
//! (record an event, start or stop an attempt, write a status, read the
//! tasks files, ask a question). It does no I/O, never blocks and never
//! reads a clock: the shell ([`crate::ralph::driver`]) performs the effects
//! and feeds their results back as inputs, so a question waiting for a
//! person, a slow disk or a broken tasks file never stops the other lanes,
//! and a signal is always handled.
//!
//! The rules themselves are pure functions in [`crate::ralph::decide`];
//! this module holds the run's state and applies them.

use crate::agent::AgentEvent;
use crate::model::{Task, TaskGraph, TaskId, TaskSet, TaskStatus, TasksFormat};
use crate::ralph::attempt::AttemptReport;
use crate::ralph::budget::{Budget, BudgetUse, Spent};
use crate::ralph::config::ExhaustPolicy;
use crate::ralph::control::{Control, ExhaustChoice};
use crate::ralph::decide::{self, AfterAttempt, Route};
use crate::ralph::error::RunError;
use crate::ralph::event::{LaneSummary, LoopEvent, NoticeLevel, Outcome, RunEnd, Totals};
use crate::ralph::executor::{Resolve, Work};
use crate::ralph::lanes::lane_key;
use crate::ralph::plan::tasks_to_run;
use crate::ralph::session::{RunTaskState, Session};
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::time::{Duration, Instant};

/// A broken tasks file (caught mid-write by an agent or an editor) is read
/// again this often…
pub const BROKEN_RETRY: Duration = Duration::from_millis(500);
/// …for this long, before the run stops with its error.
pub const BROKEN_FOR_AT_MOST: Duration = Duration::from_millis(2500);

/// What the machine decides by: the run's settings that rules read.
#[derive(Debug, Clone)]
pub struct Rules {
    pub max_retries: u32,
    /// Resolve attempts a task may have (each after a merge conflict).
    pub max_conflicts: u32,
    pub on_exhaust: ExhaustPolicy,
    pub selection: Option<BTreeSet<TaskId>>,
    /// Tasks at once; more than one runs each in a lane of its own.
    pub slots: usize,
    /// The run's budget: once spent, no attempt starts.
    pub budget: Budget,
    /// Lanes taking turns may run a task in the user's own tree when it is
    /// the only one that can run (local lanes; a remote lane's agent runs
    /// elsewhere by choice).
    pub in_place: bool,
    /// `--commit task`: a completed task is committed (by the shell) as
    /// soon as its completion is recorded.
    pub commit: bool,
    /// `ralph: fallback:`: where tasks go when their agent is at a limit.
    pub agents: Agents,
}

/// The agents of a run, by label, as the fallback rules need them.
#[derive(Debug, Clone, Default)]
pub struct Agents {
    /// The run's own agent.
    pub own: String,
    /// Tasks a route gives another agent: that agent.
    pub routed: BTreeMap<TaskId, String>,
    /// `ralph: fallback:`, in order.
    pub fallback: Vec<String>,
    /// `--max-rate-wait`: a limit resetting sooner is waited for.
    pub max_rate_wait_secs: u64,
}

/// The time an input arrives at: a monotonic instant for waits, and the
/// wall clock's seconds for a provider's rate-limit reset.
#[derive(Debug, Clone, Copy)]
pub struct Now {
    pub at: Instant,
    pub epoch_secs: u64,
}

/// Everything the machine reacts to.
pub enum Input {
    /// The run begins: read the tasks, then start work.
    Begin,
    /// A worker's event about its attempt.
    Worker { slot: usize, event: LoopEvent },
    /// An agent's output.
    Agent {
        task: TaskId,
        attempt: u32,
        events: Vec<AgentEvent>,
    },
    /// An attempt ended; without lanes (or in the user's tree) it hands
    /// back the lent tasks. `wrote`: which of its lane's hot files a
    /// completed attempt in the user's tree changed (a lane's merge says
    /// what it wrote with `merged`).
    AttemptEnded {
        slot: usize,
        task: TaskId,
        report: AttemptReport,
        tasks: Option<TaskSet>,
        wrote: Option<Vec<String>>,
    },
    /// An attempt could not be handed to its worker (the thread is gone).
    StartFailed {
        slot: usize,
        task: TaskId,
        tasks: Option<TaskSet>,
    },
    /// Every worker thread is gone.
    WorkersGone,
    /// A lane's completed work waits for its turn to merge `files` into the
    /// user's tree; the go comes as [`Effect::MergeGo`].
    MergeWanted {
        slot: usize,
        task: TaskId,
        files: Vec<String>,
    },
    /// A watch event or the poll says the tasks files may have changed.
    TasksMayHaveChanged,
    /// The result of [`Effect::ReadTasks`].
    TasksRead { error: Option<RunError> },
    /// The result of [`Effect::WriteStatus`] (a failure is already shown).
    StatusWritten,
    /// A key or a signal.
    Control(Control),
    /// The answer to [`Effect::Ask`]; None when it could not be answered
    /// (Ctrl+C at the question, the terminal gone).
    Answer {
        task: TaskId,
        choice: Option<ExhaustChoice>,
    },
    /// Time passed (a wait may be over).
    Tick,
    /// [`Effect::Commit`] could not be done (the branch moved under the
    /// run, git failed): the run stops, the session kept.
    CommitFailed { message: String },
}

/// What the shell does for the machine, in order.
pub enum Effect {
    /// Save the session when the event changes the state (the machine has
    /// already applied it to its session), then show the event.
    Record(LoopEvent),
    /// `--commit task`: commit a completed task's work on the user's branch
    /// (before anything else runs in the user's tree).
    Commit { task: TaskId, attempt: u32 },
    /// Show an event without recording it (a lane's view of a status).
    Show(LoopEvent),
    /// Hand an attempt to a slot's worker.
    Start { slot: usize, work: Box<Work> },
    /// Pass a key's request (or a stop) to the attempt running on `slot`.
    Tell { slot: usize, control: Control },
    /// The merge waiting on `slot` may go.
    MergeGo { slot: usize },
    /// The merge asking on `slot` waits: a file it writes is reserved (it
    /// may still end with a conflict, which writes nothing).
    MergeHeld { slot: usize },
    /// Write a status into the user's tasks files ([`Machine::tasks_mut`]),
    /// then send [`Input::StatusWritten`].
    WriteStatus { task: TaskId, status: TaskStatus },
    /// Re-read the tasks files ([`Machine::tasks_mut`]), then send
    /// [`Input::TasksRead`].
    ReadTasks,
    /// Ask the person what to do with a task whose retries ran out; the
    /// answer comes back as [`Input::Answer`]. Nothing waits for it.
    Ask { task: Task, last: Outcome },
    /// The question about `task` was answered elsewhere: take it off the
    /// terminal (its answer there, if any, no longer counts).
    Withdraw { task: TaskId },
}

#[derive(Debug, Clone, Copy)]
struct Broken {
    since: Instant,
    retry_at: Instant,
}

/// A slot as the machine sees it.
#[derive(Debug, Default)]
struct Slot {
    busy: Option<TaskId>,
    /// `r` or `s` sent to the running attempt: if it ends some other way
    /// first (its agent had already exited and `--verify` was running), the
    /// request still applies to its end.
    requested: Option<Control>,
    /// Its task's work is merged: only bookkeeping is left, so a lane
    /// taking turns with it may start.
    merged: bool,
    /// Its attempt runs in the user's own tree (see
    /// [`Machine::may_run_in_place`]).
    in_place: bool,
}

pub struct Machine {
    rules: Rules,
    /// The user's tasks files as last read. Without lanes a copy is lent
    /// to the attempt (it writes the statuses) and replaces this one when
    /// it comes back; meanwhile nothing reads or writes them here.
    tasks: TaskSet,
    lent: bool,
    pub session: Session,
    slots: Vec<Slot>,
    /// Tasks to start before anything new: retries, restarts, answered
    /// questions (the task keeps its place in the run).
    first: VecDeque<TaskId>,
    /// Rate-limited tasks and when they start again.
    waits: BTreeMap<TaskId, Instant>,
    /// Agents at a limit (by label) and when it resets (epoch seconds).
    limited: BTreeMap<String, u64>,
    /// The fallback each task's last attempt ran on (none: its own agent).
    on_fallback: BTreeMap<TaskId, Option<usize>>,
    /// The wall clock at the input being handled (epoch seconds).
    epoch_now: u64,
    /// The question on screen, and the ones waiting for it.
    asking: Option<TaskId>,
    to_ask: VecDeque<(TaskId, Outcome)>,
    paused: bool,
    /// `Paused` was announced (nothing runs while paused).
    pause_shown: bool,
    /// `Quit? [y/N]` is on screen: nothing new starts until it is answered.
    holding: bool,
    /// Set once the run is ending: nothing new starts.
    end: Option<RunEnd>,
    /// The workers are gone: nothing can run any more.
    workers_gone: bool,
    /// A read of the tasks files is under way, or wanted once they are back.
    reading: bool,
    read_wanted: bool,
    /// Since when the tasks files do not load, and when to read again.
    broken: Option<Broken>,
    /// Status writes not yet confirmed: decisions wait for them.
    writes_pending: usize,
    /// The last task graph and the tasks structure it was built from.
    graph: Option<(u64, TaskGraph)>,
    /// Tasks this run has started, in order: a task's place is its index here.
    started_tasks: Vec<TaskId>,
    run_size: usize,
    /// Parallel runs: what merged and what conflicted, per lane.
    lanes: BTreeMap<String, LaneSummary>,
    /// The session's skipped tasks, kept as they are recorded (the
    /// session would walk every record to say).
    skipped: BTreeSet<TaskId>,
    /// Parallel runs: conflicted files reserved for their resolve attempts,
    /// merges waiting for their turn, lanes taking turns.
    reserve: reserve::Reservations,
    /// What the session's attempts spent, its earlier runs' included;
    /// kept as receipts are recorded (the session would walk every record).
    spent: Spent,
    /// Something happened that may let a task start.
    look: bool,
    /// The user was told lanes taking turns run in their tree.
    told_in_place: bool,
    out: Vec<Effect>,
}

impl Machine {
    pub fn new(rules: Rules, tasks: TaskSet, session: Session) -> Machine {
        let skipped = session.skipped();
        let run_size = tasks_to_run(&tasks, &TaskGraph::new(&tasks), rules.selection.as_ref())
            .iter()
            .filter(|id| !skipped.contains(*id))
            .count();
        let slots = (0..rules.slots.max(1)).map(|_| Slot::default()).collect();
        // A resumed run's conflicted tasks hold their files again, in task
        // order, and their resolve attempts come first.
        let mut reserve = reserve::Reservations::default();
        let mut first = VecDeque::new();
        if rules.slots > 1 {
            for (id, rec) in &session.tasks {
                let runs = rules.selection.as_ref().is_none_or(|s| s.contains(id))
                    && tasks
                        .task(id)
                        .is_some_and(|t| t.status != TaskStatus::Completed);
                let open = !matches!(rec.state, RunTaskState::Completed | RunTaskState::Skipped);
                if let (Some(Outcome::Conflict { files, .. }), true, true) =
                    (rec.open_conflict(), open, runs)
                {
                    reserve.reserve(id, files);
                    first.push_back(id.clone());
                }
            }
        }
        let spent = session.spent();
        Machine {
            rules,
            tasks,
            lent: false,
            session,
            slots,
            first,
            waits: BTreeMap::new(),
            limited: BTreeMap::new(),
            on_fallback: BTreeMap::new(),
            epoch_now: 0,
            asking: None,
            to_ask: VecDeque::new(),
            paused: false,
            pause_shown: false,
            holding: false,
            end: None,
            workers_gone: false,
            reading: false,
            read_wanted: false,
            broken: None,
            writes_pending: 0,
            graph: None,
            started_tasks: Vec::new(),
            run_size,
            lanes: BTreeMap::new(),
            skipped,
            reserve,
            spent,
            look: true,
            told_in_place: false,
            out: Vec::new(),
        }
    }

    pub(super) fn parallel(&self) -> bool {
        self.slots.len() > 1
    }

    /// The user's tasks, for the shell to read and write them (the effects
    /// [`Effect::ReadTasks`] and [`Effect::WriteStatus`]).
    pub fn tasks_mut(&mut self) -> &mut TaskSet {
        &mut self.tasks
    }

    pub fn tasks(&self) -> &TaskSet {
        &self.tasks
    }

    /// The tasks running now (for the key reader's "which task?").
    pub fn running(&self) -> Vec<TaskId> {
        self.slots.iter().filter_map(|s| s.busy.clone()).collect()
    }

    /// A question waits for an answer.
    pub fn question_open(&self) -> Option<&TaskId> {
        self.asking.as_ref()
    }

    /// When the machine next wants a [`Input::Tick`], if ever.
    pub fn next_deadline(&self) -> Option<Instant> {
        let broken = self.broken.filter(|_| !self.reading).map(|b| b.retry_at);
        // A wait that is over is only acted on when not paused (nor
        // stopping): a deadline past meanwhile would wake the loop forever.
        let waits = (!self.paused && self.end.is_none())
            .then(|| self.waits.values().copied().min())
            .flatten();
        waits.into_iter().chain(broken).min()
    }

    /// The run's end, once it has one: nothing runs and nothing can start.
    pub fn finished(&self) -> Option<RunEnd> {
        if self.workers_gone {
            return Some(self.end.unwrap_or(RunEnd::Aborted));
        }
        let idle = self.slots.iter().all(|s| s.busy.is_none()) && !self.lent;
        if !idle || self.writes_pending > 0 {
            return None;
        }
        if let Some(end) = self.end {
            return Some(end);
        }
        let waiting = !self.waits.is_empty()
            || !self.first.is_empty()
            || self.asking.is_some()
            || !self.to_ask.is_empty()
            || self.reading
            || self.broken.is_some()
            || self.paused
            || (self.holding && self.anything_ready());
        if waiting || self.look {
            return None;
        }
        Some(if self.skipped.is_empty() {
            RunEnd::Complete
        } else {
            RunEnd::Incomplete
        })
    }

    /// Whether a task could start now, were starts not held.
    pub(super) fn anything_ready(&self) -> bool {
        let graph = match &self.graph {
            Some((id, g)) if *id == self.tasks.structure_id() => std::borrow::Cow::Borrowed(g),
            _ => std::borrow::Cow::Owned(TaskGraph::new(&self.tasks)),
        };
        !self.pick(&graph, 1).is_empty()
    }

    /// The tasks `free` free slots would start now by the graph (not the
    /// ones already running, waiting, queued or asked about).
    pub(super) fn pick(&self, graph: &TaskGraph, free: usize) -> Vec<TaskId> {
        let (tasks, session) = (&self.tasks, &self.session);
        let parallel = self.parallel();
        let status = |id: &TaskId| {
            // With lanes the session's word counts too: a merged task
            // whose status could not be written is done.
            let done = parallel
                && session
                    .record(id)
                    .is_some_and(|r| r.state == RunTaskState::Completed);
            if done {
                return TaskStatus::Completed;
            }
            tasks.task(id).map_or(TaskStatus::Completed, |t| t.status)
        };
        let from = decide::Pickable {
            graph,
            status: &status,
            skipped: &self.skipped,
            selection: self.rules.selection.as_ref(),
        };
        decide::pick(&from, &self.taken(), free)
    }

    pub fn handle(&mut self, input: Input, now: Now) -> Vec<Effect> {
        self.epoch_now = now.epoch_secs;
        match input {
            Input::Begin => self.want_read(),
            Input::Worker { slot, event } => {
                let current = self.slots.get(slot).and_then(|s| s.busy.clone());
                let in_place = self.slots.get(slot).is_some_and(|s| s.in_place);
                self.on_event(current.as_ref(), in_place, event);
            }
            Input::Agent {
                task,
                attempt,
                events,
            } => {
                for agent in events {
                    self.record(LoopEvent::AgentEvent {
                        task: task.clone(),
                        attempt,
                        agent,
                    });
                }
            }
            Input::AttemptEnded {
                slot,
                task,
                report,
                tasks,
                wrote,
            } => {
                self.take_back(tasks);
                let mut in_place = false;
                if let Some(s) = self.slots.get_mut(slot) {
                    s.busy = None;
                    in_place = std::mem::take(&mut s.in_place);
                }
                if in_place && report.outcome.is_completed() {
                    self.wrote_in_place(&task, wrote);
                }
                self.look = true;
                self.reserve.attempt_over(slot);
                self.after_attempt(slot, &task, report, now);
                let go = self.reserve.grants();
                self.merge_go(go);
            }
            Input::StartFailed { slot, task, tasks } => {
                self.take_back(tasks);
                if let Some(s) = self.slots.get_mut(slot) {
                    s.busy = None;
                }
                self.fail(RunError::WorkerGone { task });
            }
            Input::MergeWanted { slot, task, files } => {
                let go = self.reserve.want(slot, &task, &files);
                if !go.contains(&slot) {
                    self.out.push(Effect::MergeHeld { slot });
                }
                self.merge_go(go);
            }
            Input::WorkersGone => {
                self.workers_gone = true;
                self.fail(RunError::WorkersGone);
            }
            Input::TasksMayHaveChanged => self.want_read(),
            Input::TasksRead { error } => self.on_read(error, now),
            Input::StatusWritten => {
                self.writes_pending = self.writes_pending.saturating_sub(1);
                self.look = true;
            }
            Input::Control(control) => {
                self.on_control(control, now);
                self.look = true;
            }
            Input::Answer { task, choice } => self.on_answer(&task, choice),
            Input::CommitFailed { message } => {
                self.record(LoopEvent::Error {
                    task: None,
                    message,
                });
                self.stop(RunEnd::Aborted);
            }
            Input::Tick => {
                if self.broken.is_some_and(|b| b.retry_at <= now.at) {
                    self.want_read();
                }
            }
        }
        self.settle(now);
        std::mem::take(&mut self.out)
    }

    pub(super) fn record(&mut self, event: LoopEvent) {
        self.session.apply(&event);
        if let LoopEvent::TaskSkipped {
            task, dependents, ..
        } = &event
        {
            self.skipped.insert(task.clone());
            self.skipped.extend(dependents.iter().cloned());
        }
        if let LoopEvent::StatusChanged {
            task,
            status: TaskStatus::Completed,
        }
        | LoopEvent::TaskCompleted { task, .. } = &event
        {
            self.skipped.remove(task);
        }
        if let LoopEvent::TaskCompleted { receipt, .. } | LoopEvent::TaskFailed { receipt, .. } =
            &event
        {
            self.spent.add(receipt);
        }
        let commit = match &event {
            LoopEvent::TaskCompleted { task, attempt, .. } if self.rules.commit => {
                Some(Effect::Commit {
                    task: task.clone(),
                    attempt: *attempt,
                })
            }
            _ => None,
        };
        self.out.push(Effect::Record(event));
        self.out.extend(commit);
    }

    /// An attempt ended: the tasks it was lent are back (or, when it
    /// could not hand them back, the copy kept here stands).
    pub(super) fn take_back(&mut self, tasks: Option<TaskSet>) {
        if let Some(tasks) = tasks {
            self.tasks = tasks;
        }
        if std::mem::take(&mut self.lent) && self.read_wanted {
            self.want_read();
        }
    }

    pub(super) fn want_read(&mut self) {
        if self.lent || self.reading {
            // Read once they are back (or this read is done).
            self.read_wanted = true;
            return;
        }
        self.read_wanted = false;
        self.reading = true;
        self.out.push(Effect::ReadTasks);
    }

    pub(super) fn on_read(&mut self, error: Option<RunError>, now: Now) {
        self.reading = false;
        self.look = true;
        match error {
            None => self.broken = None,
            Some(e @ RunError::TasksUnreadable { .. }) => {
                let since = self.broken.map_or(now.at, |b| b.since);
                if now.at.duration_since(since) >= BROKEN_FOR_AT_MOST {
                    self.broken = None;
                    self.fail(e);
                } else {
                    self.broken = Some(Broken {
                        since,
                        retry_at: now.at + BROKEN_RETRY,
                    });
                }
            }
            Some(other) => {
                self.broken = None;
                self.fail(other);
            }
        }
        if self.read_wanted {
            self.want_read();
        }
    }

    /// The run stops on its own account: said once, as an error.
    pub(super) fn fail(&mut self, error: RunError) {
        self.record(LoopEvent::Error {
            task: error.task().cloned(),
            message: error.to_string(),
        });
        self.stop(RunEnd::Aborted);
    }

    /// After every input: start what may start, announce a pause.
    pub(super) fn settle(&mut self, now: Now) {
        self.wake(now);
        self.release_orphans();
        // A pick settled by policy (a resumed task out of retries skipped
        // or retried) asks to look again; each round settles a task, so
        // this ends.
        let mut rounds = self.slots.len() + self.tasks.tasks.len() + 1;
        while std::mem::take(&mut self.look) && rounds > 0 {
            rounds -= 1;
            self.schedule();
        }
        let idle = self.slots.iter().all(|s| s.busy.is_none());
        // Spent while what is left only waits (a rate limit, a question, a
        // pause): it would not start anyway, so the run ends now.
        let only_waiting = !self.waits.is_empty()
            || !self.first.is_empty()
            || self.asking.is_some()
            || !self.to_ask.is_empty()
            || self.paused;
        let settled = !self.lent && self.writes_pending == 0 && !self.reading;
        if self.end.is_none() && idle && settled && only_waiting && self.over_budget() {
            self.out_of_budget();
        }
        if self.paused && idle && self.end.is_none() && self.first.is_empty() && !self.pause_shown {
            self.pause_shown = true;
            self.record(LoopEvent::Paused);
        }
    }

    pub(super) fn may_start(&self) -> bool {
        self.end.is_none()
            && !self.holding
            && !self.lent
            && !self.reading
            && self.broken.is_none()
            && self.writes_pending == 0
    }

    /// Rate-limited tasks whose wait is over go first (unless paused).
    pub(super) fn wake(&mut self, now: Now) {
        if self.paused || self.end.is_some() {
            return;
        }
        let due: Vec<TaskId> = self
            .waits
            .iter()
            .filter(|(_, at)| **at <= now.at)
            .map(|(t, _)| t.clone())
            .collect();
        for task in due {
            self.waits.remove(&task);
            self.first.push_back(task);
            self.look = true;
        }
    }
}

mod after;
mod controls;
mod ending;
mod fallback;
mod questions;
mod reserve;
mod schedule;
#[cfg(test)]
mod tests;
