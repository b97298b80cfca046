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

    fn parallel(&self) -> bool {
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
    fn anything_ready(&self) -> bool {
        let graph = match &self.graph {
            Some((id, g)) if *id == self.tasks.structure_id() => std::borrow::Cow::Borrowed(g),
            _ => std::borrow::Cow::Owned(TaskGraph::new(&self.tasks)),
        };
        !self.pick(&graph, 1).is_empty()
    }

    /// The tasks `free` free slots would start now by the graph (not the
    /// ones already running, waiting, queued or asked about).
    fn pick(&self, graph: &TaskGraph, free: usize) -> Vec<TaskId> {
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

    fn record(&mut self, event: LoopEvent) {
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
    fn take_back(&mut self, tasks: Option<TaskSet>) {
        if let Some(tasks) = tasks {
            self.tasks = tasks;
        }
        if std::mem::take(&mut self.lent) && self.read_wanted {
            self.want_read();
        }
    }

    fn want_read(&mut self) {
        if self.lent || self.reading {
            // Read once they are back (or this read is done).
            self.read_wanted = true;
            return;
        }
        self.read_wanted = false;
        self.reading = true;
        self.out.push(Effect::ReadTasks);
    }

    fn on_read(&mut self, error: Option<RunError>, now: Now) {
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
    fn fail(&mut self, error: RunError) {
        self.record(LoopEvent::Error {
            task: error.task().cloned(),
            message: error.to_string(),
        });
        self.stop(RunEnd::Aborted);
    }

    /// After every input: start what may start, announce a pause.
    fn settle(&mut self, now: Now) {
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

    fn may_start(&self) -> bool {
        self.end.is_none()
            && !self.holding
            && !self.lent
            && !self.reading
            && self.broken.is_none()
            && self.writes_pending == 0
    }

    /// Rate-limited tasks whose wait is over go first (unless paused).
    fn wake(&mut self, now: Now) {
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

    /// Starts what may start on free slots: retries and answered questions
    /// first, then ready tasks, one per independent lane.
    fn schedule(&mut self) {
        if !self.may_start() {
            return;
        }
        while let Some(slot) = self.free_slot() {
            // A resolve attempt waits until it holds its files, and goes
            // before a retry; a retry leaves a slot to each resolve
            // waiting (it could end up waiting for one's files itself).
            let reserve = &self.reserve;
            let free = self.slots.iter().filter(|s| s.busy.is_none()).count();
            let resolves = self.first.iter().filter(|t| reserve.reserves(t)).count();
            let resolve = self
                .first
                .iter()
                .position(|t| reserve.reserves(t) && reserve.may_resolve(t));
            let retry = || {
                (free > resolves)
                    .then(|| self.first.iter().position(|t| !reserve.reserves(t)))
                    .flatten()
            };
            let Some(at) = resolve.or_else(retry) else {
                break;
            };
            let Some(task) = self.first.remove(at) else {
                break;
            };
            let in_place = if self.reserve.reserves(&task) {
                self.may_resolve_in_place(&task)
            } else {
                self.may_run_in_place(&task)
            };
            self.dispatch(slot, &task, in_place);
            if !self.may_start() {
                return;
            }
        }
        if self.paused {
            return;
        }
        // Picked again while a pick went to a question instead of a slot
        // (a resumed task with its budget spent): the slot is still free.
        // Each round starts a task or queues a question, so it ends.
        loop {
            // A rate-limited task keeps its slot while it waits: the limit
            // is the provider's, so another task would only meet it too.
            let mut free: Vec<usize> = (0..self.slots.len())
                .filter(|&n| self.slots[n].busy.is_none())
                .collect();
            // So does a slot kept for each resolve attempt waiting for its
            // files: were every slot taken by merges waiting on those
            // files, nothing could ever free them.
            let resolves = self
                .first
                .iter()
                .filter(|t| self.reserve.reserves(t))
                .count();
            free.truncate(
                free.len()
                    .saturating_sub(self.waits.len())
                    .saturating_sub(resolves),
            );
            if free.is_empty() {
                return;
            }
            let built_for = self.tasks.structure_id();
            let graph = self.current_graph();
            let starts = self.take_turns(self.pick(&graph, free.len()));
            self.graph = Some((built_for, graph));
            if starts.is_empty() {
                return;
            }
            // The one task that can run, once the merged attempts still
            // finishing are over, runs in the user's tree: it waits for them.
            if matches!(starts.as_slice(), [only] if self.in_place_once_over(only)) {
                return;
            }
            let asked = self.to_ask.len() + usize::from(self.asking.is_some());
            let in_place = matches!(starts.as_slice(), [only] if self.may_run_in_place(only));
            for (slot, id) in free.into_iter().zip(starts) {
                if !self.may_start() {
                    return;
                }
                self.start(slot, &id, in_place);
            }
            if self.to_ask.len() + usize::from(self.asking.is_some()) == asked {
                return;
            }
        }
    }

    /// Lanes hot on a file take turns: of the picked tasks, those whose
    /// lane must wait for another hot lane's running task are left out.
    fn take_turns(&self, picked: Vec<TaskId>) -> Vec<TaskId> {
        if !self.parallel() {
            return picked;
        }
        let mut running: Vec<String> = self
            .slots
            .iter()
            .filter(|s| !s.merged)
            .filter_map(|s| s.busy.as_ref().map(lane_key))
            .collect();
        let mut starts = Vec::new();
        for id in picked {
            let lane = lane_key(&id);
            if self.reserve.must_wait(&lane, &running) {
                continue;
            }
            running.push(lane);
            starts.push(id);
        }
        starts
    }

    /// A reservation whose task will not run again soon (gone from the
    /// tasks files, or left the run some other way) must not hold other
    /// lanes' merges: it is dropped.
    fn release_orphans(&mut self) {
        let live: BTreeSet<TaskId> = self
            .slots
            .iter()
            .filter_map(|s| s.busy.clone())
            .chain(self.first.iter().cloned())
            .chain(self.waits.keys().cloned())
            .collect();
        if self.reserve.drop_all_but(&live) {
            let go = self.reserve.grants();
            self.merge_go(go);
            self.look = true;
        }
    }

    fn merge_go(&mut self, slots: Vec<usize>) {
        for slot in slots {
            self.out.push(Effect::MergeGo { slot });
        }
    }

    fn free_slot(&self) -> Option<usize> {
        self.slots.iter().position(|s| s.busy.is_none())
    }

    /// Tasks the graph must not hand out again: running, waiting, queued,
    /// or waiting for an answer.
    fn taken(&self) -> Vec<TaskId> {
        self.slots
            .iter()
            .filter_map(|s| s.busy.clone())
            .chain(self.waits.keys().cloned())
            .chain(self.first.iter().cloned())
            .chain(self.asking.iter().cloned())
            .chain(self.to_ask.iter().map(|(t, _)| t.clone()))
            .collect()
    }

    /// Task n of m: a retry keeps its task's place.
    fn position(&mut self, id: &TaskId) -> (usize, usize) {
        let n = match self.started_tasks.iter().position(|t| t == id) {
            Some(i) => i + 1,
            None => {
                self.started_tasks.push(id.clone());
                self.started_tasks.len()
            }
        };
        (n, self.run_size.max(n))
    }

    /// The last attempt number the current retry budget allows, counting from
    /// `attempt` (uncounted attempts such as restarts push it further out).
    fn max_attempts(&self, task: &TaskId, attempt: u32) -> u32 {
        let used = self.session.record(task).map_or(0, |r| r.budget_used());
        // Numbers from a hand-edited session file must not overflow.
        attempt.saturating_add(
            (self.rules.max_retries + 1)
                .saturating_sub(used)
                .saturating_sub(1),
        )
    }

    /// Starts `id` on `slot`, unless a resumed session arrives with its
    /// budget already spent (never a free try): then the exhaustion policy
    /// (or the person) decides first.
    fn start(&mut self, slot: usize, id: &TaskId, in_place: bool) {
        let spent = self
            .session
            .record(id)
            .filter(|r| r.budget_used() > self.rules.max_retries)
            .map(|r| {
                r.attempts
                    .iter()
                    .rev()
                    .find_map(|a| a.outcome.clone())
                    .unwrap_or(Outcome::Abnormal {
                        detail: "no attempt left".into(),
                    })
            });
        match spent {
            Some(last) => self.exhausted(id, &last),
            None => self.dispatch(slot, id, in_place),
        }
    }

    /// Whether `id` may run in the user's own tree instead of a lane: its
    /// lane is hot on a file (lanes there only take turns, so a lane would
    /// add its refresh and merge to every turn), and nothing else runs,
    /// waits or holds a file. The tasks it is lent hold every other start
    /// until it ends, so no merge writes the tree meanwhile.
    fn may_run_in_place(&self, id: &TaskId) -> bool {
        self.slots.iter().all(|s| s.busy.is_none())
            && self.reserve.is_idle()
            && self.in_place_but_for_slots(id)
    }

    /// Whether the resolve attempt of `id` (out of the queue, holding its
    /// files) may run in the user's own tree: nothing runs or merges, every
    /// other queued resolve waits for its files, and no task could start
    /// beside it (the lanes hot on its files wait for it anyway).
    fn may_resolve_in_place(&mut self, id: &TaskId) -> bool {
        let others_wait = self
            .first
            .iter()
            .all(|t| self.reserve.reserves(t) && !self.reserve.may_resolve(t));
        if !(self.in_place_allowed()
            && self.slots.iter().all(|s| s.busy.is_none())
            && self.reserve.nothing_merging()
            && others_wait)
        {
            return false;
        }
        let graph = self.current_graph();
        let lane = [lane_key(id)];
        let beside: Vec<TaskId> = self
            .pick(&graph, self.slots.len())
            .into_iter()
            .filter(|t| t != id && !self.reserve.must_wait(&lane_key(t), &lane))
            .collect();
        self.graph = Some((self.tasks.structure_id(), graph));
        beside.is_empty()
    }

    /// Whether `id` would run in the user's tree but for attempts whose
    /// work is merged and that are still finishing (their bookkeeping may
    /// still write the user's change folder, the learnings file).
    fn in_place_once_over(&self, id: &TaskId) -> bool {
        let busy = self.slots.iter().filter(|s| s.busy.is_some());
        busy.clone().count() > 0
            && busy.clone().all(|s| s.merged)
            && self.reserve.nothing_queued()
            && self.in_place_but_for_slots(id)
    }

    fn in_place_but_for_slots(&self, id: &TaskId) -> bool {
        self.in_place_allowed() && self.first.is_empty() && self.reserve.is_hot(&lane_key(id))
    }

    /// Lanes (local ones) and no rate-limited task waiting for a slot.
    fn in_place_allowed(&self) -> bool {
        self.parallel() && self.rules.in_place && self.waits.is_empty()
    }

    /// A task ran in the user's tree and completed: the hot files it wrote
    /// count as a merge's would (the lane cools on those it left alone; its
    /// other files are not looked at, which only leaves them without a last
    /// writer). None (an executor that does not say): the lane stays as hot
    /// as it was, which only keeps it taking turns.
    fn wrote_in_place(&mut self, task: &TaskId, files: Option<Vec<String>>) {
        let lane = lane_key(task);
        if let Some(files) = files {
            self.reserve.merged(&lane, &files);
        }
        let summary = self.lanes.entry(lane.clone()).or_default();
        summary.lane = lane;
        if !summary.in_place.contains(task) {
            summary.in_place.push(task.clone());
        }
    }

    /// Hands the next attempt at `id` to `slot`'s worker; `in_place`: in the
    /// user's own tree (see [`Machine::may_run_in_place`]).
    fn dispatch(&mut self, slot: usize, id: &TaskId, in_place: bool) {
        if self.end.is_some() {
            return;
        }
        // Checked as an attempt would start: a run whose last attempt
        // spent the budget is still complete.
        if self.over_budget() {
            self.out_of_budget();
            return;
        }
        let Some(task) = self.tasks.task(id) else {
            self.record(LoopEvent::Notice {
                level: NoticeLevel::Warn,
                message: format!("task {id} is no longer in the tasks files; moving on"),
            });
            return;
        };
        let (section, description) = (task.section.clone(), task.description.clone());
        let reserved = self.reserve.reserves(id);
        let parallel = self.parallel();
        let rec = self.session.record_mut(id);
        // A resolve attempt: the task's last conflict is still open (a
        // failed resolve, a crash or a rate limit since does not make it
        // start afresh).
        let resolving = parallel && (reserved || rec.open_conflict().is_some());
        let attempt = rec.next_attempt();
        let retry_reason = rec.last_reason.clone();
        // The work that conflicted, applied again for the agent to resolve.
        let resolve = match rec.open_conflict() {
            Some(Outcome::Conflict {
                work: Some(work),
                reason,
                ..
            }) => Some(Resolve {
                work: work.clone(),
                reason: reason.clone(),
            }),
            _ => None,
        }
        .filter(|_| resolving);
        let hot_files = if in_place {
            self.reserve.hot_files_of(&lane_key(id))
        } else {
            Vec::new()
        };
        if in_place && !std::mem::replace(&mut self.told_in_place, true) {
            let files = hot_files.join(", ");
            self.record(LoopEvent::Notice {
                level: NoticeLevel::Info,
                message: format!(
                    "lanes take turns on {files}: while only one task can run, it runs in your tree (no lane to refresh, nothing to merge)"
                ),
            });
        }
        // Lent as a copy: decisions taken meanwhile (a question answered,
        // a skip) still see the tasks as they were when it started.
        let tasks = (!parallel || in_place).then(|| {
            self.lent = true;
            self.tasks.clone()
        });
        let work = Work {
            task: id.clone(),
            section,
            description,
            attempt,
            max_attempts: self.max_attempts(id, attempt),
            retry_reason,
            resolve,
            position: self.position(id),
            tasks,
            controls: None,
            in_place,
            hot_files,
            wrote: None,
        };
        self.slots[slot].busy = Some(id.clone());
        self.slots[slot].requested = None;
        self.slots[slot].merged = false;
        self.slots[slot].in_place = in_place;
        self.out.push(Effect::Start {
            slot,
            work: Box::new(work),
        });
    }

    /// Records and reports a worker's event. With lanes, the agent edits its
    /// lane's copy of the tasks files: the running task's statuses are
    /// mirrored into the user's files here, and `completed` only once the
    /// task's work is merged (the user's files never claim work that is not
    /// in the user's tree).
    fn on_event(&mut self, current: Option<&TaskId>, in_place: bool, event: LoopEvent) {
        if !self.parallel() || in_place {
            self.record(event);
            return;
        }
        let mirror = match &event {
            LoopEvent::TaskStarted { task, .. } => Some((task.clone(), TaskStatus::InProgress)),
            LoopEvent::StatusChanged { task, status } => {
                if Some(task) != current || *status == TaskStatus::Completed {
                    // Seen in the lane only: shown, not recorded.
                    self.out.push(Effect::Show(event));
                    return;
                }
                Some((task.clone(), *status))
            }
            LoopEvent::TaskCompleted { task, .. } => Some((task.clone(), TaskStatus::Completed)),
            LoopEvent::TaskFailed { task, outcome, .. } => {
                if let Outcome::Conflict { .. } = outcome {
                    let lane = self.lanes.entry(lane_key(task)).or_default();
                    lane.lane = lane_key(task);
                    if !lane.conflicted.contains(task) {
                        lane.conflicted.push(task.clone());
                    }
                }
                let in_progress = self
                    .tasks
                    .task(task)
                    .is_some_and(|t| t.status == TaskStatus::InProgress);
                in_progress.then(|| (task.clone(), TaskStatus::Pending))
            }
            LoopEvent::Merged {
                task, lane, files, ..
            } => {
                self.reserve.merged(lane, files);
                // In the user's tree: its files are free for the next.
                self.reserve.release(task);
                let go = self.reserve.grants();
                self.merge_go(go);
                if let Some(slot) = self
                    .slots
                    .iter_mut()
                    .find(|s| s.busy.as_ref() == Some(task))
                {
                    slot.merged = true;
                    self.look = true;
                }
                let summary = self.lanes.entry(lane.clone()).or_default();
                summary.lane = lane.clone();
                if !summary.merged.contains(task) {
                    summary.merged.push(task.clone());
                }
                None
            }
            _ => None,
        };
        // Record, then say: the user's tasks file holds the status before
        // the event is shown (a kill in between must not leave a merged
        // task in_progress for a --fresh run to do again).
        if let Some((task, status)) = mirror {
            self.mirror(task, status);
        }
        self.record(event);
    }

    /// Asks the shell to write a lane's status into the user's tasks files.
    fn mirror(&mut self, task: TaskId, status: TaskStatus) {
        let markdown = self.tasks.format == TasksFormat::OpenSpecMarkdown;
        if markdown && status != TaskStatus::Completed {
            // Checklists only know done and not done.
            return;
        }
        if self.tasks.task(&task).is_some_and(|t| t.status == status) {
            return;
        }
        self.writes_pending += 1;
        self.out.push(Effect::WriteStatus { task, status });
    }

    fn after_attempt(&mut self, slot: usize, id: &TaskId, report: AttemptReport, now: Now) {
        if report.fatal.is_some() {
            // Already reported as an Error event by the executor.
            self.stop(RunEnd::Aborted);
            return;
        }
        match &report.outcome {
            Outcome::Completed { .. } => self.reserve.release(id),
            Outcome::Conflict { files, .. } if self.parallel() => {
                self.reserve.reserve(id, files);
                for hot in self.reserve.conflicted(&lane_key(id), files) {
                    self.record(LoopEvent::Notice {
                        level: NoticeLevel::Warn,
                        message: decide::hot_file_notice(&hot),
                    });
                }
            }
            _ => {}
        }
        let retries_used = self.session.record(id).map_or(0, |r| r.retries_used());
        let requested = self.slots.get_mut(slot).and_then(|s| s.requested.take());
        let next = decide::after_attempt(&report.outcome, retries_used, self.rules.max_retries);
        if let (AfterAttempt::Done, Some(request)) = (&next, &requested) {
            let (what, verb) = match request {
                Control::Skip(_) => ("skipped", "skip"),
                _ => ("restarted", "restart"),
            };
            self.record(LoopEvent::Notice {
                level: NoticeLevel::Info,
                message: format!(
                    "task {id} completed before it could be {what}; nothing to {verb}"
                ),
            });
        }
        match decide::with_request(next, requested.as_ref()) {
            AfterAttempt::Done => {}
            AfterAttempt::Restart => {
                self.retry(id, Some("restarted by request (not counted)".into()));
            }
            AfterAttempt::Skip => self.skip(id, "skipped by request"),
            AfterAttempt::Quit => self.stop(RunEnd::Interrupted),
            AfterAttempt::RateLimited { resets_at } => {
                // A provider's wait can last hours: other lanes' merges do
                // not wait that long for a reserved file (the resolve
                // attempt after the wait reserves it again if need be).
                self.reserve.release(id);
                let go = self.reserve.grants();
                self.merge_go(go);
                let wait_secs = decide::rate_limit_wait(resets_at, now.epoch_secs);
                self.record(LoopEvent::RateLimitWait {
                    task: id.clone(),
                    resets_at,
                    wait_secs,
                });
                if self.end.is_none() {
                    self.waits
                        .insert(id.clone(), now.at + Duration::from_secs(wait_secs));
                }
            }
            AfterAttempt::Retry { reason } => self.retry(id, reason),
            AfterAttempt::Resolve { reason } => {
                let conflicts = self.session.record(id).map_or(0, |r| r.conflicts());
                if decide::conflicts_spent(conflicts, self.rules.max_conflicts) {
                    let files = match &report.outcome {
                        Outcome::Conflict { files, .. } => files.clone(),
                        _ => Vec::new(),
                    };
                    let then = match self.rules.on_exhaust {
                        ExhaustPolicy::Prompt => "ask",
                        ExhaustPolicy::Retry => "retry",
                        ExhaustPolicy::Skip => "skip",
                        ExhaustPolicy::Abort => "abort",
                    };
                    self.record(LoopEvent::ConflictLimit {
                        task: id.clone(),
                        files,
                        conflicts,
                        max_conflicts: self.rules.max_conflicts,
                        then: then.into(),
                    });
                    self.exhausted(id, &report.outcome);
                } else {
                    self.retry(id, Some(reason));
                }
            }
            AfterAttempt::Fatal => self.fail(RunError::OwnFailure {
                task: id.clone(),
                detail: report.outcome.describe(),
            }),
            AfterAttempt::Exhausted => self.exhausted(id, &report.outcome),
        }
    }

    /// Announces the next attempt at `id`; it starts before anything new.
    fn retry(&mut self, id: &TaskId, reason: Option<String>) {
        let next = self.session.record_mut(id).next_attempt();
        let max_attempts = self.max_attempts(id, next);
        self.record(LoopEvent::Retry {
            task: id.clone(),
            next_attempt: next,
            max_attempts,
            reason,
        });
        self.first.push_front(id.clone());
        self.look = true;
    }

    /// The graph depends on the tasks' structure only: statuses change every
    /// task, the structure hardly ever, so it is built again only then.
    fn current_graph(&mut self) -> TaskGraph {
        let built_for = self.tasks.structure_id();
        match self.graph.take() {
            Some((id, g)) if id == built_for => g,
            _ => TaskGraph::new(&self.tasks),
        }
    }

    fn skip(&mut self, id: &TaskId, reason: &str) {
        let built_for = self.tasks.structure_id();
        let graph = self.current_graph();
        let dependents: Vec<TaskId> = graph
            .dependents(id)
            .into_iter()
            .filter(|d| {
                self.tasks
                    .task(d)
                    .is_some_and(|t| t.status != TaskStatus::Completed)
            })
            .collect();
        self.graph = Some((built_for, graph));
        self.reserve.release(id);
        let go = self.reserve.grants();
        self.merge_go(go);
        self.record(LoopEvent::TaskSkipped {
            task: id.clone(),
            reason: reason.to_string(),
            dependents,
        });
        self.look = true;
    }

    fn over_budget(&self) -> bool {
        self.rules.budget.reached(&self.spent).is_some()
    }

    /// The budget is spent: like a pause, the running attempts finish and
    /// nothing new starts; then the run ends, its session kept.
    fn out_of_budget(&mut self) {
        self.record(LoopEvent::BudgetReached {
            budget: self.rules.budget,
            spent: self.spent,
        });
        self.end = Some(RunEnd::Budget);
        self.wind_down();
    }

    /// The budget and what was spent, when the run has one.
    pub fn budget_use(&self) -> Option<BudgetUse> {
        self.rules.budget.is_set().then_some(BudgetUse {
            budget: self.rules.budget,
            spent: self.spent,
        })
    }

    /// Ends the run: nothing new starts, running agents are told to stop.
    fn stop(&mut self, end: RunEnd) {
        // A stop or an error while the budget's end waits for the running
        // attempts says more than the budget does.
        if self.end.is_none() || self.end == Some(RunEnd::Budget) {
            self.end = Some(end);
        }
        for slot in 0..self.slots.len() {
            if self.slots[slot].busy.is_some() {
                self.out.push(Effect::Tell {
                    slot,
                    control: Control::Quit,
                });
            }
        }
        self.wind_down();
    }

    /// Nothing waiting starts any more.
    fn wind_down(&mut self) {
        self.waits.clear();
        self.first.clear();
        self.to_ask.clear();
        let go = self.reserve.stop();
        self.merge_go(go);
    }

    /// Totals across every run of this session. `elapsed`: this run's time.
    pub fn totals(&self, elapsed: Duration) -> Totals {
        let mut t = Totals {
            duration_ms: self.session.run_time_ms + elapsed.as_millis() as u64,
            ..Totals::default()
        };
        let graph = TaskGraph::new(&self.tasks);
        for rec in self.session.tasks.values() {
            match rec.state {
                RunTaskState::Completed => t.completed += 1,
                RunTaskState::Failed => t.failed += 1,
                RunTaskState::Skipped => t.skipped += 1,
                RunTaskState::Pending | RunTaskState::Running => {}
            }
            for a in &rec.attempts {
                t.attempts += 1;
                t.resolve_attempts += usize::from(a.resolving);
                t.conflicts += usize::from(matches!(a.outcome, Some(Outcome::Conflict { .. })));
                if let Some(r) = &a.receipt {
                    crate::ralph::event::add_receipt(&mut t, r);
                }
            }
        }
        // A task judged completed whose status the tasks file lacks (it could
        // not be written) is counted completed above, not remaining too.
        let done_with = |id: &TaskId| {
            self.session.record(id).is_some_and(|r| {
                matches!(
                    r.state,
                    RunTaskState::Skipped | RunTaskState::Failed | RunTaskState::Completed
                )
            })
        };
        t.remaining = tasks_to_run(&self.tasks, &graph, self.rules.selection.as_ref())
            .iter()
            .filter(|id| !done_with(id))
            .count();
        t
    }

    /// Tasks that failed with their retries used up and nothing chosen for
    /// them: a resume under the same settings meets them first.
    pub fn out_of_retries(&self) -> Vec<TaskId> {
        self.session
            .tasks
            .iter()
            .filter(|(_, r)| {
                r.state == RunTaskState::Failed && r.budget_used() > self.rules.max_retries
            })
            .map(|(id, _)| id.clone())
            .collect()
    }

    /// Files that kept two lanes in conflict, for the summary.
    pub fn hot_files(&self) -> Vec<crate::ralph::event::HotFile> {
        self.reserve.hot_files()
    }

    /// What merged and conflicted per lane, for the summary.
    pub fn take_lanes(&mut self) -> Vec<LaneSummary> {
        std::mem::take(&mut self.lanes).into_values().collect()
    }
}

mod controls;
mod questions;
mod reserve;
#[cfg(test)]
mod tests;
