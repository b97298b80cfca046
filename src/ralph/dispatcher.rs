//! The dispatcher owns the run: the task graph, the session, the decisions.
//! One thread (this one) loops over one channel of messages: workers' events
//! and ends, keys and signals, timers. It picks what runs next, hands attempts
//! to the slots' workers ([`crate::ralph::worker`]), judges retries, skips and
//! stops ([`crate::ralph::decide`]), writes the session and tells the
//! reporters everything as events. Workers never decide and never print.

use crate::checkpoint::{Checkpointer, CleanScope};
use crate::model::{ModelError, TaskGraph, TaskId, TaskSet, TaskStatus, TasksFormat};
use crate::ralph::attempt::{StatusWrite, set_status_fresh};
use crate::ralph::config::{ExhaustPolicy, RunConfig};
use crate::ralph::control::{ActiveAgents, Control, ExhaustChoice, Interaction, RunningTasks};
use crate::ralph::decide::{self, AfterAttempt, Route};
use crate::ralph::event::{
    LaneSummary, LoopEvent, NoticeLevel, Outcome, PlanLane, PlanTask, Reporter, RunEnd,
    SessionFile, Totals,
};
use crate::ralph::lanes::{Gate, Lane, lane_key};
use crate::ralph::session::{RunTaskState, Session, SessionError};
use crate::ralph::watch::TasksWatcher;
use crate::ralph::worker::{Mode, Msg, Work, Worker};
use crossbeam_channel::{Receiver, Sender, at, bounded, never, select, unbounded};
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// Sends each event to the reporter and the session, saving the session file at
/// every state change.
pub struct Outbox<'a> {
    pub session: Session,
    pub session_path: PathBuf,
    pub reporter: &'a mut dyn Reporter,
    /// Why the last save failed, while saves fail.
    save_error: Option<String>,
    /// What the file on disk holds: when it was written (none: no file
    /// yet) and which tasks it records as completed.
    on_disk: Option<(String, BTreeSet<TaskId>)>,
    /// The last save's text, kept for its memory (see `save_changes`).
    buffer: String,
}

impl<'a> Outbox<'a> {
    pub fn new(
        session: Session,
        session_path: PathBuf,
        reporter: &'a mut dyn Reporter,
    ) -> Outbox<'a> {
        Outbox {
            session,
            session_path,
            reporter,
            save_error: None,
            on_disk: None,
            buffer: String::new(),
        }
    }

    /// The session was read from its file (a resume): that file is on disk
    /// until the first save replaces it.
    pub fn loaded_from_disk(&mut self) {
        self.on_disk = Some((self.session.updated_at.clone(), self.session.completed()));
    }

    pub fn emit(&mut self, event: LoopEvent) {
        self.session.apply(&event);
        // Saved first: whatever a reporter shows (a `--json` reader may act
        // on it, kill -9 included) is already in the session file.
        if Session::is_state_change(&event) {
            self.save();
        }
        self.reporter.report(&event);
    }

    /// Shows an event without recording it (a lane's view of a status).
    pub fn report_only(&mut self, event: &LoopEvent) {
        self.reporter.report(event);
    }

    pub fn save(&mut self) {
        match self
            .session
            .save_changes(&self.session_path, &mut self.buffer)
        {
            Ok(changed) => {
                self.save_error = None;
                // Only the changed records can have moved in or out of
                // completed: the set is kept up to date without going
                // over every finished task at every save.
                let (at, completed) = self.on_disk.get_or_insert_with(Default::default);
                at.clone_from(&self.session.updated_at);
                for id in changed {
                    let done = self
                        .session
                        .record(&id)
                        .is_some_and(|r| r.state == RunTaskState::Completed);
                    if done {
                        completed.insert(id);
                    } else {
                        completed.remove(&id);
                    }
                }
            }
            Err(e) => {
                let why = match &e {
                    SessionError::Io { source, .. } => source.to_string(),
                    other => other.to_string(),
                };
                if self.save_error.replace(why).is_none() {
                    // Say it once; keep running: the tasks file still records progress.
                    self.reporter.report(&LoopEvent::Notice {
                        level: NoticeLevel::Warn,
                        message: format!("{e}; resuming this run may repeat work"),
                    });
                }
            }
        }
    }

    /// What the session file holds now, and so what a resume will do, given
    /// the tasks files as they are (`tasks`).
    pub fn session_file(&self, tasks: &TaskSet) -> SessionFile {
        let in_tasks_file = |id: &TaskId| {
            tasks
                .task(id)
                .is_some_and(|t| t.status == TaskStatus::Completed)
        };
        let saved = self.save_error.is_none();
        let now = self.session.completed();
        let on_disk = match &self.on_disk {
            _ if saved => now.clone(),
            Some((_, completed)) => completed.clone(),
            None => BTreeSet::new(),
        };
        let runs_again = now
            .into_iter()
            .filter(|id| !on_disk.contains(id) && !in_tasks_file(id))
            .collect();
        SessionFile {
            path: self.session_path.display().to_string(),
            saved,
            error: self.save_error.clone(),
            saved_at: if saved {
                None
            } else {
                self.on_disk.as_ref().map(|(at, _)| at.clone())
            },
            runs_again,
            status_to_write: on_disk
                .into_iter()
                .filter(|id| !in_tasks_file(id))
                .collect(),
        }
    }
}

/// Tasks the run will give to an agent, in order: leaves not completed and
/// selected.
pub fn tasks_to_run(
    tasks: &TaskSet,
    graph: &TaskGraph,
    selection: Option<&BTreeSet<TaskId>>,
) -> Vec<TaskId> {
    graph
        .lanes()
        .iter()
        .flat_map(|l| l.tasks.iter())
        .filter(|id| selection.is_none_or(|s| s.contains(*id)))
        .filter(|id| {
            tasks
                .task(id)
                .is_some_and(|t| t.status != TaskStatus::Completed)
        })
        .cloned()
        .collect()
}

/// The plan `--dry-run` prints: every lane with what would happen to each task.
pub fn plan(
    tasks: &TaskSet,
    selection: Option<&BTreeSet<TaskId>>,
    skipped: &BTreeSet<TaskId>,
) -> LoopEvent {
    let graph = TaskGraph::new(tasks);
    let lanes = graph
        .lanes()
        .iter()
        .map(|lane| PlanLane {
            lane: lane.key.clone(),
            after_all_others: graph.runs_last(lane),
            tasks: lane
                .tasks
                .iter()
                .map(|id| {
                    let task = tasks.task(id);
                    let action = if task.is_some_and(|t| t.status == TaskStatus::Completed) {
                        "completed"
                    } else if skipped.contains(id) {
                        "skipped"
                    } else if selection.is_some_and(|s| !s.contains(id)) {
                        "not_selected"
                    } else {
                        "run"
                    };
                    PlanTask {
                        task: id.clone(),
                        description: task.map(|t| t.description.clone()).unwrap_or_default(),
                        action: action.to_string(),
                    }
                })
                .collect(),
        })
        .collect();
    LoopEvent::Plan { lanes }
}

/// Worker messages waiting for the dispatcher, at most.
const MESSAGES_IN_FLIGHT: usize = 256;

/// What the dispatcher runs with, besides the tasks and the outbox.
pub struct RunSetup {
    /// The user's work tree; None without checkpoints (and without lanes).
    pub checkpointer: Option<Checkpointer>,
    pub controls: Receiver<Control>,
    /// The user's change folder, for the attempt without lanes.
    pub watcher: TasksWatcher,
    pub active: ActiveAgents,
    pub running: RunningTasks,
    /// How many tasks may run at once (`--jobs`); more than one runs each in
    /// a lane work tree of its own.
    pub slots: usize,
}

/// A worker slot as the dispatcher sees it.
struct Slot {
    work: Sender<Work>,
    controls: Sender<Control>,
    busy: Option<TaskId>,
    /// `r` or `s` sent to the running attempt: if it ends some other way
    /// first (its agent had already exited and `--verify` was running), the
    /// request still applies to its end.
    requested: Option<Control>,
    /// A rate-limited task waiting here to start again.
    waiting: Option<(TaskId, Instant)>,
}

pub struct Dispatcher<'a> {
    cfg: &'a RunConfig,
    /// The user's tasks files. Without lanes they are lent to the worker
    /// for each attempt (it writes the statuses) and come back with its end.
    tasks: TaskSet,
    out: Outbox<'a>,
    interaction: &'a mut dyn Interaction,
    setup: RunSetup,
    started: Instant,
    paused: bool,
    /// Set once the run is ending: nothing new starts.
    end: Option<RunEnd>,
    /// The last task graph and the tasks structure it was built from.
    graph: Option<(u64, TaskGraph)>,
    /// Tasks this run has started, in order: a task's place is its index here.
    started_tasks: Vec<TaskId>,
    /// How many tasks this run set out to run.
    run_size: usize,
    /// Parallel runs: what merged and what conflicted, per lane.
    lanes: BTreeMap<String, LaneSummary>,
    /// Something happened that may let a task start (an attempt ended, a
    /// key, a wait ran out): look for work. Not on every agent line.
    look: bool,
    /// The tasks' `statuses_read_id` the containers were last synced for.
    containers_synced: Option<u64>,
}

impl<'a> Dispatcher<'a> {
    pub fn new(
        tasks: TaskSet,
        out: Outbox<'a>,
        interaction: &'a mut dyn Interaction,
        cfg: &'a RunConfig,
        setup: RunSetup,
    ) -> Dispatcher<'a> {
        let skipped = out.session.skipped();
        let run_size = tasks_to_run(&tasks, &TaskGraph::new(&tasks), cfg.selection.as_ref())
            .iter()
            .filter(|id| !skipped.contains(*id))
            .count();
        Dispatcher {
            cfg,
            tasks,
            out,
            interaction,
            setup,
            started: Instant::now(),
            paused: false,
            end: None,
            graph: None,
            started_tasks: Vec::new(),
            run_size,
            lanes: BTreeMap::new(),
            look: true,
            containers_synced: None,
        }
    }

    fn parallel(&self) -> bool {
        self.setup.slots > 1
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

    /// Runs until every selected task is done, the run is aborted, or it is
    /// stopped. Workers live on threads of their own for the whole run.
    pub fn run(mut self) -> RunEnd {
        let cfg = self.cfg;
        if self.setup.checkpointer.is_none() {
            // Lanes are git work trees: without a repository, one at a time.
            self.setup.slots = 1;
        }
        self.out.session.slots = u32::try_from(self.setup.slots).ok();
        let gate = Gate::default();
        // Bounded: a flooding agent waits for the output to be shown
        // instead of filling memory.
        let (msg_tx, msg_rx) = bounded::<Msg>(MESSAGES_IN_FLIGHT);
        let parallel = self.parallel();
        let user = self.setup.checkpointer.clone();
        let direct_watcher = std::mem::replace(&mut self.setup.watcher, TasksWatcher::inert());
        let mut direct_watcher = Some(direct_watcher);
        let end = std::thread::scope(|scope| {
            let mut slots = Vec::new();
            for n in 0..self.setup.slots {
                let (work_tx, work_rx) = unbounded::<Work>();
                let (ctl_tx, ctl_rx) = unbounded::<Control>();
                let mode = match (&user, parallel) {
                    (Some(user), true) => {
                        Mode::Lane(Box::new(Lane::new(n, user.clone(), &gate, cfg)))
                    }
                    _ => Mode::Direct {
                        checkpointer: user.clone(),
                        watcher: direct_watcher.take().unwrap_or_else(TasksWatcher::inert),
                    },
                };
                let worker = Worker {
                    slot: n,
                    cfg,
                    controls: ctl_rx,
                    active: self.setup.active.clone(),
                    msgs: msg_tx.clone(),
                    mode,
                };
                let spawned = std::thread::Builder::new()
                    .name(format!("spectr-slot-{}", n + 1))
                    .spawn_scoped(scope, move || worker.run(work_rx));
                if let Err(e) = spawned {
                    self.out.emit(LoopEvent::Error {
                        task: None,
                        message: format!("could not start a worker thread: {e}"),
                    });
                    self.end = Some(RunEnd::Aborted);
                    break;
                }
                slots.push(Slot {
                    work: work_tx,
                    controls: ctl_tx,
                    busy: None,
                    requested: None,
                    waiting: None,
                });
            }
            drop(msg_tx);
            let end = if slots.is_empty() {
                RunEnd::Aborted
            } else {
                self.event_loop(&msg_rx, &mut slots)
            };
            // Closing the work channels lets the workers end (lanes are
            // removed); what they still say is reported until they are gone.
            drop(slots);
            for msg in msg_rx.iter() {
                if let Msg::Event { event, saved, .. } = msg {
                    self.out.emit(event);
                    if let Some(saved) = saved {
                        let _ = saved.send(());
                    }
                }
            }
            // (Agent output and ends cannot come now: no attempt runs.)
            end
        });
        if let (Some(user), true) = (&user, parallel) {
            user.tidy_lanes_dir(&crate::ralph::lanes::lanes_dir(cfg, user));
        }
        self.finish(end)
    }

    fn event_loop(&mut self, msgs: &Receiver<Msg>, slots: &mut [Slot]) -> RunEnd {
        loop {
            self.report_tasks_md();
            if self.end.is_none() && !self.paused && std::mem::take(&mut self.look) {
                self.schedule(slots);
            }
            let busy: Vec<TaskId> = slots.iter().filter_map(|s| s.busy.clone()).collect();
            self.setup.running.set(busy.clone());
            let waiting = slots
                .iter()
                .filter_map(|s| s.waiting.as_ref().map(|w| w.1))
                .min();
            if busy.is_empty() && waiting.is_none() {
                if let Some(end) = self.end {
                    return end;
                }
                if self.paused {
                    if let Some(end) = self.wait_while_paused() {
                        return end;
                    }
                    self.look = true;
                    continue;
                }
                // Nothing runs and nothing could start: done.
                return if self.out.session.skipped().is_empty() {
                    RunEnd::Complete
                } else {
                    RunEnd::Incomplete
                };
            }
            let timer = waiting.map_or_else(never, at);
            select! {
                recv(msgs) -> msg => match msg {
                    Ok(msg) => self.on_message(msg, slots),
                    Err(_) => {
                        // Every worker is gone (a panic): nothing is running.
                        self.out.emit(LoopEvent::Error {
                            task: None,
                            message: "the worker threads stopped unexpectedly; run the same command to resume".into(),
                        });
                        return RunEnd::Aborted;
                    }
                },
                recv(self.setup.controls) -> control => {
                    if let Ok(control) = control {
                        self.on_control(control, slots);
                    }
                    self.look = true;
                },
                recv(timer) -> _ => {
                    self.wake_waiting(slots);
                    self.look = true;
                },
            }
        }
    }

    /// Starts ready tasks on free slots: one per independent lane.
    fn schedule(&mut self, slots: &mut [Slot]) {
        let free: Vec<usize> = (0..slots.len())
            .filter(|&n| slots[n].busy.is_none() && slots[n].waiting.is_none())
            .collect();
        if free.is_empty() {
            return;
        }
        if self.setup.active.quit_requested() {
            self.stop(slots, RunEnd::Interrupted);
            return;
        }
        if let Err(message) = self.reload_tasks() {
            self.out.emit(LoopEvent::Error {
                task: None,
                message,
            });
            self.stop(slots, RunEnd::Aborted);
            return;
        }
        let built_for = self.tasks.structure_id();
        let graph = self.current_graph();
        let skipped = self.out.session.skipped();
        let status = |id: &TaskId| {
            self.tasks
                .task(id)
                .map_or(TaskStatus::Completed, |t| t.status)
        };
        let taken: Vec<TaskId> = slots
            .iter()
            .flat_map(|s| s.busy.iter().chain(s.waiting.iter().map(|w| &w.0)))
            .cloned()
            .collect();
        let from = decide::Pickable {
            graph: &graph,
            status: &status,
            skipped: &skipped,
            selection: self.cfg.selection.as_ref(),
        };
        let starts = decide::pick(&from, &taken, free.len());
        for (slot, id) in free.into_iter().zip(starts) {
            if self.end.is_some() {
                break;
            }
            self.start(slot, slots, &id, &graph);
        }
        // Keyed before any lending: a lent set is a stand-in.
        self.graph = Some((built_for, graph));
    }

    /// Re-reads the tasks files, giving a file caught mid-write (by an agent or
    /// an editor) a moment before calling it broken.
    fn reload_tasks(&mut self) -> Result<(), String> {
        let mut last = String::new();
        for _ in 0..5 {
            if !self.cfg.change.dir.is_dir() {
                return Err(format!(
                    "the change folder {} is gone; stopping",
                    self.cfg.change.dir.display()
                ));
            }
            match self.tasks.refresh() {
                Ok(_) => {
                    // Only statuses read from disk can leave a container (or
                    // tasks.md) behind: our own status writes keep both as
                    // they go.
                    if self.containers_synced != Some(self.tasks.statuses_read_id()) {
                        self.tasks.sync_tasks_md(None);
                        if self.sync_containers() {
                            self.containers_synced = Some(self.tasks.statuses_read_id());
                        }
                    }
                    return Ok(());
                }
                Err(e) => last = format!("{e}"),
            }
            std::thread::sleep(Duration::from_millis(500));
        }
        Err(format!(
            "{last} (fix the file, then run the same command to resume)"
        ))
    }

    /// Writes back containers whose children were completed outside the loop
    /// (a person's edit), so a container is completed when its children are.
    /// Returns whether that worked (else it is tried again at the next look).
    fn sync_containers(&mut self) -> bool {
        let mut result = self.tasks.sync_containers();
        if matches!(result, Err(ModelError::Stale { .. })) {
            // Edited while we looked: read it again and retry once.
            result = self
                .tasks
                .refresh()
                .and_then(|_| self.tasks.sync_containers());
        }
        match result {
            Ok(_) => true,
            Err(e) => {
                self.out.emit(LoopEvent::Notice {
                    level: NoticeLevel::Warn,
                    message: format!("could not update the containers' statuses: {e}"),
                });
                false
            }
        }
    }

    /// Shows what keeping tasks.md in step had to say (each thing once).
    fn report_tasks_md(&mut self) {
        for message in self.tasks.take_tasks_md_warnings() {
            self.out.emit(LoopEvent::Notice {
                level: NoticeLevel::Warn,
                message,
            });
        }
    }

    /// Waits while paused with nothing running.
    fn wait_while_paused(&mut self) -> Option<RunEnd> {
        self.out.emit(LoopEvent::Paused);
        loop {
            match self.setup.controls.recv() {
                Ok(Control::TogglePause) => {
                    self.paused = false;
                    self.out.emit(LoopEvent::Resumed);
                    return None;
                }
                Ok(Control::Quit) | Err(_) => return Some(RunEnd::Interrupted),
                Ok(_) => {}
            }
        }
    }

    /// The last attempt number the current retry budget allows, counting from
    /// `attempt` (uncounted attempts such as restarts push it further out).
    fn max_attempts(&self, task: &TaskId, attempt: u32) -> u32 {
        let used = self.out.session.record(task).map_or(0, |r| r.budget_used());
        // Numbers from a hand-edited session file must not overflow.
        attempt.saturating_add(
            (self.cfg.max_retries + 1)
                .saturating_sub(used)
                .saturating_sub(1),
        )
    }

    /// Starts `id` on `slot`, first asking what to do when a resumed
    /// session arrives with its budget already spent (never a free try).
    fn start(&mut self, slot: usize, slots: &mut [Slot], id: &TaskId, graph: &TaskGraph) {
        let rec = self.out.session.record_mut(id).clone();
        if rec.budget_used() > self.cfg.max_retries {
            let last = rec
                .attempts
                .iter()
                .rev()
                .find_map(|a| a.outcome.clone())
                .unwrap_or(Outcome::Abnormal {
                    detail: "no attempt left".into(),
                });
            if !self.on_budget_spent(id, graph, &last, slots) {
                return;
            }
        }
        self.dispatch(slot, slots, id);
    }

    /// Hands the next attempt at `id` to `slot`'s worker.
    fn dispatch(&mut self, slot: usize, slots: &mut [Slot], id: &TaskId) {
        if self.end.is_some() || self.setup.active.quit_requested() {
            return;
        }
        let Some(task) = self.tasks.task(id) else {
            self.out.emit(LoopEvent::Notice {
                level: NoticeLevel::Warn,
                message: format!("task {id} is no longer in the tasks files; moving on"),
            });
            return;
        };
        let (section, description) = (task.section.clone(), task.description.clone());
        let rec = self.out.session.record_mut(id).clone();
        let attempt = rec.next_attempt();
        let work = Work {
            task: id.clone(),
            section,
            description,
            attempt,
            max_attempts: self.max_attempts(id, attempt),
            retry_reason: rec.last_reason.clone(),
            position: self.position(id),
            tasks: (!self.parallel()).then(|| {
                let stand_in = TaskSet::placeholder(&self.tasks);
                std::mem::replace(&mut self.tasks, stand_in)
            }),
        };
        match slots[slot].work.send(work) {
            Ok(()) => {
                slots[slot].busy = Some(id.clone());
                slots[slot].requested = None;
            }
            Err(e) => {
                if let Some(tasks) = e.into_inner().tasks {
                    self.tasks = tasks;
                }
                self.out.emit(LoopEvent::Error {
                    task: Some(id.clone()),
                    message: "a worker thread is gone; stopping (run the same command to resume)"
                        .into(),
                });
                self.stop(slots, RunEnd::Aborted);
            }
        }
    }

    fn on_message(&mut self, msg: Msg, slots: &mut [Slot]) {
        match msg {
            Msg::Event { slot, event, saved } => {
                let current = slots.get(slot).and_then(|s| s.busy.clone());
                self.on_event(current.as_ref(), event);
                if let Some(saved) = saved {
                    let _ = saved.send(());
                }
            }
            Msg::Agent {
                task,
                attempt,
                events,
                shown,
            } => {
                for agent in events {
                    self.out.emit(LoopEvent::AgentEvent {
                        task: task.clone(),
                        attempt,
                        agent,
                    });
                }
                let _ = shown.send(());
            }
            Msg::Done {
                slot,
                task,
                report,
                tasks,
            } => {
                if let Some(tasks) = tasks {
                    self.tasks = tasks;
                }
                if let Some(s) = slots.get_mut(slot) {
                    s.busy = None;
                }
                self.look = true;
                self.after_attempt(slot, slots, &task, report);
            }
        }
    }

    /// Records and reports a worker's event. With lanes, the agent edits its
    /// lane's copy of the tasks files: the running task's statuses are
    /// mirrored into the user's files here, and `completed` only once the
    /// task's work is merged (the user's files never claim work that is not
    /// in the user's tree).
    fn on_event(&mut self, current: Option<&TaskId>, event: LoopEvent) {
        if !self.parallel() {
            self.out.emit(event);
            return;
        }
        let mirror = match &event {
            LoopEvent::TaskStarted { task, .. } => Some((task.clone(), TaskStatus::InProgress)),
            LoopEvent::StatusChanged { task, status } => {
                if Some(task) != current || *status == TaskStatus::Completed {
                    // Seen in the lane only: shown, not recorded.
                    self.out.report_only(&event);
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
            LoopEvent::Merged { task, lane, .. } => {
                let summary = self.lanes.entry(lane.clone()).or_default();
                summary.lane = lane.clone();
                if !summary.merged.contains(task) {
                    summary.merged.push(task.clone());
                }
                None
            }
            _ => None,
        };
        self.out.emit(event);
        if let Some((task, status)) = mirror {
            self.mirror(&task, status);
        }
    }

    /// Writes a lane's status into the user's tasks files.
    fn mirror(&mut self, task: &TaskId, status: TaskStatus) {
        let markdown = self.tasks.format == TasksFormat::OpenSpecMarkdown;
        if markdown && status != TaskStatus::Completed {
            // Checklists only know done and not done.
            return;
        }
        if self.tasks.task(task).is_some_and(|t| t.status == status) {
            return;
        }
        match set_status_fresh(&mut self.tasks, task, status) {
            Ok(()) | Err(StatusWrite::AlreadyCompleted) => {}
            Err(StatusWrite::Failed(e)) => self.out.emit(LoopEvent::Notice {
                level: NoticeLevel::Warn,
                message: format!(
                    "could not write task {task}'s status ({status}) to the tasks file: {e}"
                ),
            }),
        }
    }

    fn after_attempt(
        &mut self,
        slot: usize,
        slots: &mut [Slot],
        id: &TaskId,
        report: crate::ralph::attempt::AttemptReport,
    ) {
        if report.fatal.is_some() {
            // Already reported as an Error event by the executor.
            self.stop(slots, RunEnd::Aborted);
            return;
        }
        let retries_used = self.out.session.record(id).map_or(0, |r| r.retries_used());
        let requested = slots.get_mut(slot).and_then(|s| s.requested.take());
        let next = decide::after_attempt(&report.outcome, retries_used, self.cfg.max_retries);
        match decide::with_request(next, requested.as_ref()) {
            AfterAttempt::Done => {}
            AfterAttempt::Restart => {
                let reason = Some("restarted by request (not counted)".into());
                self.retry(slot, slots, id, reason);
            }
            AfterAttempt::Skip => self.skip(id, "skipped by request"),
            AfterAttempt::Quit => self.stop(slots, RunEnd::Interrupted),
            AfterAttempt::RateLimited { resets_at } => {
                let now = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_secs());
                let wait_secs = decide::rate_limit_wait(resets_at, now);
                self.out.emit(LoopEvent::RateLimitWait {
                    task: id.clone(),
                    resets_at,
                    wait_secs,
                });
                if self.end.is_none() {
                    slots[slot].waiting =
                        Some((id.clone(), Instant::now() + Duration::from_secs(wait_secs)));
                }
            }
            AfterAttempt::Retry { reason } => self.retry(slot, slots, id, reason),
            AfterAttempt::Fatal => {
                self.out.emit(LoopEvent::Error {
                    task: Some(id.clone()),
                    message: format!(
                        "task {id}: {}. This is spectr's own failure, not the agent's: every attempt would fail alike, so the run stops here without using a retry. The session is kept: fix the cause, then run the same command again",
                        report.outcome.describe()
                    ),
                });
                self.stop(slots, RunEnd::Aborted);
            }
            AfterAttempt::Exhausted => {
                let built_for = self.tasks.structure_id();
                let graph = self.current_graph();
                let again = self.on_budget_spent(id, &graph, &report.outcome, slots);
                self.graph = Some((built_for, graph));
                if again {
                    self.dispatch(slot, slots, id);
                }
            }
        }
    }

    /// Announces the next attempt at `id` and hands it to `slot`.
    fn retry(&mut self, slot: usize, slots: &mut [Slot], id: &TaskId, reason: Option<String>) {
        let next = self.out.session.record_mut(id).next_attempt();
        self.out.emit(LoopEvent::Retry {
            task: id.clone(),
            next_attempt: next,
            max_attempts: self.max_attempts(id, next),
            reason,
        });
        self.dispatch(slot, slots, id);
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

    /// Retries ran out: retry (a renewed budget), skip, or abort. True means
    /// "attempt again".
    fn on_budget_spent(
        &mut self,
        id: &TaskId,
        graph: &TaskGraph,
        outcome: &Outcome,
        slots: &mut [Slot],
    ) -> bool {
        match self.exhausted(id, outcome) {
            ExhaustChoice::Retry => {
                let rec = self.out.session.record_mut(id);
                rec.budget_start = rec.counted_attempts;
                let next = rec.next_attempt();
                self.out.emit(LoopEvent::Retry {
                    task: id.clone(),
                    next_attempt: next,
                    max_attempts: self.max_attempts(id, next),
                    reason: outcome.retry_context().map(str::to_string),
                });
                true
            }
            ExhaustChoice::Skip => {
                let reason = format!("retries exhausted ({})", outcome.describe());
                self.skip_in(id, graph, &reason);
                false
            }
            ExhaustChoice::Abort => {
                self.out.emit(LoopEvent::Error {
                    task: Some(id.clone()),
                    message: format!(
                        "task {id} failed after {} attempts: {}",
                        self.out
                            .session
                            .record(id)
                            .map_or(0, |r| r.counted_attempts),
                        outcome.describe()
                    ),
                });
                self.stop(slots, RunEnd::Aborted);
                false
            }
        }
    }

    fn exhausted(&mut self, id: &TaskId, outcome: &Outcome) -> ExhaustChoice {
        match self.cfg.on_exhaust {
            ExhaustPolicy::Retry => ExhaustChoice::Retry,
            ExhaustPolicy::Skip => ExhaustChoice::Skip,
            ExhaustPolicy::Abort => ExhaustChoice::Abort,
            ExhaustPolicy::Prompt => match self.tasks.task(id) {
                Some(task) => {
                    let task = task.clone();
                    self.interaction.on_exhausted(&task, outcome)
                }
                None => ExhaustChoice::Abort,
            },
        }
    }

    fn skip(&mut self, id: &TaskId, reason: &str) {
        let graph = self.current_graph();
        self.skip_in(id, &graph, reason);
        self.graph = Some((self.tasks.structure_id(), graph));
    }

    fn skip_in(&mut self, id: &TaskId, graph: &TaskGraph, reason: &str) {
        let dependents: Vec<TaskId> = graph
            .dependents(id)
            .into_iter()
            .filter(|d| {
                self.tasks
                    .task(d)
                    .is_some_and(|t| t.status != TaskStatus::Completed)
            })
            .collect();
        self.out.emit(LoopEvent::TaskSkipped {
            task: id.clone(),
            reason: reason.to_string(),
            dependents,
        });
    }

    /// Ends the run: nothing new starts, running agents are told to stop.
    fn stop(&mut self, slots: &mut [Slot], end: RunEnd) {
        if self.end.is_none() {
            self.end = Some(end);
        }
        for s in slots.iter_mut() {
            if s.busy.is_some() {
                let _ = s.controls.send(Control::Quit);
            }
            s.waiting = None;
        }
    }

    fn on_control(&mut self, control: Control, slots: &mut [Slot]) {
        match control {
            Control::Quit => self.stop(slots, RunEnd::Interrupted),
            Control::TogglePause => {
                self.paused = !self.paused;
                let running = slots.iter().filter(|s| s.busy.is_some()).count();
                if running > 0 {
                    self.out.emit(LoopEvent::Notice {
                        level: NoticeLevel::Info,
                        message: match (self.paused, running) {
                            (true, 1) => "will pause after the current task (press p again to cancel)".into(),
                            (true, _) => "will pause once the running tasks finish; no new task starts (press p again to cancel)".into(),
                            (false, _) => "pause cancelled".into(),
                        },
                    });
                }
            }
            Control::Restart(ref target) | Control::Skip(ref target) => {
                let busy: Vec<(usize, TaskId)> = slots
                    .iter()
                    .enumerate()
                    .filter_map(|(n, s)| s.busy.clone().map(|t| (n, t)))
                    .collect();
                match decide::route(target.as_ref(), &busy) {
                    Route::Slot(n) => {
                        let _ = slots[n].controls.send(control.clone());
                        slots[n].requested = Some(control.clone());
                    }
                    Route::Ambiguous => self.out.emit(LoopEvent::Notice {
                        level: NoticeLevel::Info,
                        message: "several tasks are running: press the key again and pick one"
                            .into(),
                    }),
                    Route::NothingRunning => self.on_waiting_control(&control, slots),
                }
            }
        }
    }

    /// `r` or `s` while a task only waits for a rate limit.
    fn on_waiting_control(&mut self, control: &Control, slots: &mut [Slot]) {
        let target = match control {
            Control::Restart(t) | Control::Skip(t) => t.clone(),
            _ => None,
        };
        let Some(n) = slots.iter().position(|s| {
            s.waiting
                .as_ref()
                .is_some_and(|(t, _)| target.as_ref().is_none_or(|want| want == t))
        }) else {
            return;
        };
        let Some((task, _)) = slots[n].waiting.take() else {
            return;
        };
        match control {
            Control::Skip(_) => self.skip(&task, "skipped by request"),
            _ => self.dispatch(n, slots, &task),
        }
    }

    /// Starts again the rate-limited tasks whose wait is over.
    fn wake_waiting(&mut self, slots: &mut [Slot]) {
        let now = Instant::now();
        for n in 0..slots.len() {
            let due = slots[n].waiting.as_ref().is_some_and(|(_, t)| *t <= now);
            if !due {
                continue;
            }
            if let Some((task, _)) = slots[n].waiting.take()
                && !self.paused
            {
                self.dispatch(n, slots, &task);
            }
        }
    }

    fn totals(&self) -> Totals {
        // Time across every run of this session, like the attempts and cost.
        let mut t = Totals {
            duration_ms: self.out.session.run_time_ms + self.started.elapsed().as_millis() as u64,
            ..Totals::default()
        };
        let graph = TaskGraph::new(&self.tasks);
        let selection = self.cfg.selection.as_ref();
        for rec in self.out.session.tasks.values() {
            match rec.state {
                RunTaskState::Completed => t.completed += 1,
                RunTaskState::Failed => t.failed += 1,
                RunTaskState::Skipped => t.skipped += 1,
                RunTaskState::Pending | RunTaskState::Running => {}
            }
            for a in &rec.attempts {
                t.attempts += 1;
                if let Some(r) = &a.receipt {
                    crate::ralph::event::add_receipt(&mut t, r);
                }
            }
        }
        // A task judged completed whose status the tasks file lacks (it could
        // not be written) is counted completed above, not remaining too.
        let done_with = |id: &TaskId| {
            self.out.session.record(id).is_some_and(|r| {
                matches!(
                    r.state,
                    RunTaskState::Skipped | RunTaskState::Failed | RunTaskState::Completed
                )
            })
        };
        t.remaining = tasks_to_run(&self.tasks, &graph, selection)
            .iter()
            .filter(|id| !done_with(id))
            .count();
        t
    }

    fn finish(mut self, end: RunEnd) -> RunEnd {
        self.report_tasks_md();
        let totals = self.totals();
        self.out.session.run_time_ms = totals.duration_ms;
        let checkpoint_refs = self.out.session.refs();
        // Saved before the summary, so the summary can say what the file holds.
        let session = (end != RunEnd::Complete).then(|| {
            self.out.save();
            self.out.session_file(&self.tasks)
        });
        self.out.emit(LoopEvent::Summary {
            end,
            totals,
            transcripts: self.cfg.transcripts_dir().display().to_string(),
            checkpoint_refs,
            lanes: std::mem::take(&mut self.lanes).into_values().collect(),
            session,
        });
        if end == RunEnd::Complete {
            // Success: checkpoints are no longer needed; failed attempts' refs stay.
            if let Some(cp) = &self.setup.checkpointer
                && let Err(e) = cp.clean(&self.cfg.change.id, CleanScope::Checkpoints)
            {
                self.out.emit(LoopEvent::Notice {
                    level: NoticeLevel::Warn,
                    message: format!("could not remove the run's checkpoint refs: {e}"),
                });
            }
            if let Err(e) = Session::delete(&self.out.session_path) {
                self.out.emit(LoopEvent::Notice {
                    level: NoticeLevel::Warn,
                    message: e.to_string(),
                });
            }
        }
        end
    }
}
