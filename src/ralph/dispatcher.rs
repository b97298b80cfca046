//! The dispatcher owns the run: the task graph, the session, the decisions. It
//! picks what runs next, hands one attempt at a time to the executor, judges
//! retries, skips and stops, and tells the reporters everything as events.

use crate::checkpoint::CleanScope;
use crate::model::{ModelError, TaskGraph, TaskId, TaskSet, TaskStatus};
use crate::ralph::attempt::{self, AttemptEnv, AttemptRequest};
use crate::ralph::config::{ExhaustPolicy, RunConfig};
use crate::ralph::control::{Control, ExhaustChoice, Interaction};
use crate::ralph::event::{
    LoopEvent, NoticeLevel, Outcome, PlanLane, PlanTask, Reporter, RunEnd, StopAction, Totals,
};
use crate::ralph::session::{RunTaskState, Session};
use std::collections::BTreeSet;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// Sends each event to the reporter and the session, saving the session file at
/// every state change.
pub struct Outbox<'a> {
    pub session: Session,
    pub session_path: PathBuf,
    pub reporter: &'a mut dyn Reporter,
    save_failed: bool,
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
            save_failed: false,
        }
    }

    pub fn emit(&mut self, event: LoopEvent) {
        self.session.apply(&event);
        self.reporter.report(&event);
        if Session::is_state_change(&event) {
            self.save();
        }
    }

    pub fn save(&mut self) {
        match self.session.save(&self.session_path) {
            Ok(()) => self.save_failed = false,
            Err(e) if !self.save_failed => {
                // Say it once; keep running: the tasks file still records progress.
                self.save_failed = true;
                self.reporter.report(&LoopEvent::Notice {
                    level: NoticeLevel::Warn,
                    message: format!("{e}; resuming this run may repeat work"),
                });
            }
            Err(_) => {}
        }
    }
}

pub struct Dispatcher<'a> {
    cfg: &'a RunConfig,
    tasks: TaskSet,
    out: Outbox<'a>,
    interaction: &'a mut dyn Interaction,
    /// What each attempt is given: checkpoints, controls, watcher, processes.
    env: AttemptEnv<'a>,
    started: Instant,
    paused: bool,
    /// The last task graph and the tasks structure it was built from.
    graph: Option<(u64, TaskGraph)>,
    /// Tasks this run has started, in order: a task's place is its index here.
    started_tasks: Vec<TaskId>,
    /// How many tasks this run set out to run.
    run_size: usize,
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

impl<'a> Dispatcher<'a> {
    pub fn new(
        tasks: TaskSet,
        out: Outbox<'a>,
        interaction: &'a mut dyn Interaction,
        env: AttemptEnv<'a>,
    ) -> Dispatcher<'a> {
        let skipped = out.session.skipped();
        let run_size = tasks_to_run(&tasks, &TaskGraph::new(&tasks), env.cfg.selection.as_ref())
            .iter()
            .filter(|id| !skipped.contains(*id))
            .count();
        Dispatcher {
            cfg: env.cfg,
            tasks,
            out,
            interaction,
            env,
            started: Instant::now(),
            paused: false,
            graph: None,
            started_tasks: Vec::new(),
            run_size,
        }
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
    /// stopped.
    pub fn run(mut self) -> RunEnd {
        let end = self.run_inner();
        self.finish(end)
    }

    fn run_inner(&mut self) -> RunEnd {
        loop {
            // Controls (and a pause) first, then read the files: a person may
            // well edit statuses while the run is paused.
            if let Some(end) = self.between_tasks() {
                return end;
            }
            if let Err(message) = self.reload_tasks() {
                self.out.emit(LoopEvent::Error {
                    task: None,
                    message,
                });
                return RunEnd::Aborted;
            }
            // The graph depends on the tasks' structure only: statuses change
            // every task, the structure hardly ever.
            let built_for = self.tasks.structure_id();
            let graph = match self.graph.take() {
                Some((id, g)) if id == built_for => g,
                _ => TaskGraph::new(&self.tasks),
            };
            let skipped = self.out.session.skipped();
            let status = |id: &TaskId| {
                self.tasks
                    .task(id)
                    .map_or(TaskStatus::Completed, |t| t.status)
            };
            let ready = graph.ready(&status, &skipped, self.cfg.selection.as_ref());
            let Some(next) = ready.first().cloned() else {
                return if skipped.is_empty() {
                    RunEnd::Complete
                } else {
                    RunEnd::Incomplete
                };
            };
            let end = self.run_task(&next, &graph);
            self.graph = Some((built_for, graph));
            match end {
                TaskEnd::Done => {}
                TaskEnd::Stop(end) => return end,
            }
        }
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
                    self.sync_containers();
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
    fn sync_containers(&mut self) {
        let mut result = self.tasks.sync_containers();
        if matches!(result, Err(ModelError::Stale { .. })) {
            // Edited while we looked: read it again and retry once.
            result = self
                .tasks
                .refresh()
                .and_then(|_| self.tasks.sync_containers());
        }
        if let Err(e) = result {
            self.out.emit(LoopEvent::Notice {
                level: NoticeLevel::Warn,
                message: format!("could not update the containers' statuses: {e}"),
            });
        }
    }

    /// Handles controls that arrived between tasks, and waits while paused.
    fn between_tasks(&mut self) -> Option<RunEnd> {
        while let Ok(c) = self.env.controls.try_recv() {
            match c {
                Control::Quit => return Some(RunEnd::Interrupted),
                Control::TogglePause => self.paused = !self.paused,
                Control::Restart | Control::Skip => {}
            }
        }
        if !self.paused {
            return None;
        }
        self.out.emit(LoopEvent::Paused);
        loop {
            match self.env.controls.recv() {
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

    fn run_task(&mut self, id: &TaskId, graph: &TaskGraph) -> TaskEnd {
        loop {
            if self.env.active.quit_requested() {
                return TaskEnd::Stop(RunEnd::Interrupted);
            }
            if self.tasks.task(id).is_none() {
                self.out.emit(LoopEvent::Notice {
                    level: NoticeLevel::Warn,
                    message: format!("task {id} is no longer in the tasks files; moving on"),
                });
                return TaskEnd::Done;
            }
            let rec = self.out.session.record_mut(id).clone();
            // A resumed session may arrive with the budget already spent: ask
            // before starting anything, never hand out a free extra try.
            if rec.budget_used() > self.cfg.max_retries {
                let last = rec
                    .attempts
                    .iter()
                    .rev()
                    .find_map(|a| a.outcome.clone())
                    .unwrap_or(Outcome::Abnormal {
                        detail: "no attempt left".into(),
                    });
                match self.on_budget_spent(id, graph, &last) {
                    Some(end) => return end,
                    None => continue,
                }
            }
            let attempt_no = rec.next_attempt();
            let reason = rec.last_reason.clone();
            let max_attempts = self.max_attempts(id, attempt_no);
            let req = AttemptRequest {
                task: id,
                attempt: attempt_no,
                max_attempts,
                retry_reason: reason.as_deref(),
                position: self.position(id),
            };
            let out = &mut self.out;
            let report = attempt::run(&self.env, &mut self.tasks, &req, &mut |e| out.emit(e));
            if report.pause_toggles % 2 == 1 {
                self.paused = !self.paused;
            }
            if report.fatal.is_some() {
                // Already reported as an Error event by the executor.
                return TaskEnd::Stop(RunEnd::Aborted);
            }
            match report.outcome {
                Outcome::Completed { .. } => return TaskEnd::Done,
                Outcome::Stopped {
                    action: StopAction::Restart,
                } => {
                    self.out.emit(LoopEvent::Retry {
                        task: id.clone(),
                        next_attempt: attempt_no.saturating_add(1),
                        max_attempts: self.max_attempts(id, attempt_no.saturating_add(1)),
                        reason: Some("restarted by request (not counted)".into()),
                    });
                    continue;
                }
                Outcome::Stopped {
                    action: StopAction::Skip,
                } => {
                    self.skip(id, graph, "skipped by request");
                    return TaskEnd::Done;
                }
                Outcome::Stopped {
                    action: StopAction::Quit,
                } => return TaskEnd::Stop(RunEnd::Interrupted),
                Outcome::RateLimited { resets_at } => {
                    if let Some(end) = self.wait_for_rate_limit(id, resets_at) {
                        return TaskEnd::Stop(end);
                    }
                    continue;
                }
                outcome => {
                    let rec = self.out.session.record_mut(id);
                    if rec.retries_used() < self.cfg.max_retries {
                        let next = rec.next_attempt();
                        let reason = outcome.retry_context().map(str::to_string);
                        self.out.emit(LoopEvent::Retry {
                            task: id.clone(),
                            next_attempt: next,
                            max_attempts: self.max_attempts(id, next),
                            reason,
                        });
                        continue;
                    }
                    match self.on_budget_spent(id, graph, &outcome) {
                        Some(end) => return end,
                        None => continue,
                    }
                }
            }
        }
    }

    /// Retries ran out: retry (a renewed budget), skip, or abort. None means
    /// "attempt again".
    fn on_budget_spent(
        &mut self,
        id: &TaskId,
        graph: &TaskGraph,
        outcome: &Outcome,
    ) -> Option<TaskEnd> {
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
                None
            }
            ExhaustChoice::Skip => {
                self.skip(
                    id,
                    graph,
                    &format!("retries exhausted ({})", outcome.describe()),
                );
                Some(TaskEnd::Done)
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
                Some(TaskEnd::Stop(RunEnd::Aborted))
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

    fn skip(&mut self, id: &TaskId, graph: &TaskGraph, reason: &str) {
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

    /// Waits for a rate limit to reset without counting an attempt. Returns an
    /// end when the person quits while waiting.
    fn wait_for_rate_limit(&mut self, id: &TaskId, resets_at: Option<u64>) -> Option<RunEnd> {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        // Unknown reset time: wait a minute; a few seconds of margin either way.
        let wait_secs = resets_at
            .map_or(60, |t| t.saturating_sub(now) + 5)
            .min(6 * 3600);
        self.out.emit(LoopEvent::RateLimitWait {
            task: id.clone(),
            resets_at,
            wait_secs,
        });
        let deadline = Instant::now() + Duration::from_secs(wait_secs);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return None;
            }
            match self.env.controls.recv_timeout(left) {
                Ok(Control::Quit) => return Some(RunEnd::Interrupted),
                Ok(Control::TogglePause) => self.paused = !self.paused,
                Ok(_) | Err(crossbeam_channel::RecvTimeoutError::Timeout) => {}
                Err(crossbeam_channel::RecvTimeoutError::Disconnected) => {
                    std::thread::sleep(left);
                }
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
        let done_with = |id: &TaskId| {
            self.out
                .session
                .record(id)
                .is_some_and(|r| matches!(r.state, RunTaskState::Skipped | RunTaskState::Failed))
        };
        t.remaining = tasks_to_run(&self.tasks, &graph, selection)
            .iter()
            .filter(|id| !done_with(id))
            .count();
        t
    }

    fn finish(mut self, end: RunEnd) -> RunEnd {
        let totals = self.totals();
        self.out.session.run_time_ms = totals.duration_ms;
        let checkpoint_refs = self.out.session.refs();
        self.out.emit(LoopEvent::Summary {
            end,
            totals,
            transcripts: self.cfg.transcripts_dir().display().to_string(),
            checkpoint_refs,
        });
        if end == RunEnd::Complete {
            // Success: checkpoints are no longer needed; failed attempts' refs stay.
            if let Some(cp) = &self.env.checkpointer
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
        } else {
            self.out.save();
        }
        end
    }
}

enum TaskEnd {
    Done,
    Stop(RunEnd),
}
