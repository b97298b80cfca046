//! Where a slot's attempts run, behind one interface: the worker hands an
//! [`Executor`] each attempt and gets its report back. Two live here: the
//! user's own work tree ([`UserTree`], `--jobs 1`) and a local lane work
//! tree ([`crate::ralph::lanes::Lane`]). Another kind of lane (a container,
//! a CI job, another machine, exchanging its result as git refs) is one
//! more implementation; the state machine never knows which one ran.

use crate::checkpoint::Checkpointer;
use crate::model::{TaskId, TaskSet};
use crate::ralph::attempt::{self, AgentBatch, AttemptEnv, AttemptReport, AttemptRequest};
use crate::ralph::config::RunConfig;
use crate::ralph::control::{ActiveAgents, Control};
use crate::ralph::event::{LoopEvent, Outcome};
use crate::ralph::watch::TasksWatcher;
use crossbeam_channel::Receiver;

/// One attempt to run.
pub struct Work {
    pub task: TaskId,
    pub section: String,
    pub description: String,
    pub attempt: u32,
    pub max_attempts: u32,
    pub retry_reason: Option<String>,
    /// Parallel runs: the task's last work conflicted when merged; this
    /// attempt resolves it.
    pub resolve: Option<Resolve>,
    /// Task n of m in this run.
    pub position: (usize, usize),
    /// This attempt's own channel for keys and stops (the shell keeps its
    /// sender while the attempt runs).
    pub controls: Option<Receiver<Control>>,
    /// Without lanes: the user's tasks, lent for the attempt (the attempt
    /// writes their statuses) and handed back with [`Msg::Done`].
    pub tasks: Option<TaskSet>,
    /// With lanes: run this attempt in the user's own tree (lanes taking
    /// turns, nothing else running); its tasks are lent.
    pub in_place: bool,
    /// In the user's tree: the files its lane is hot on, the ones to tell
    /// the run whether it changed.
    pub hot_files: Vec<String>,
    /// Set by the executor after an attempt in the user's tree completed:
    /// which of `hot_files` it changed.
    pub wrote: Option<Vec<String>>,
    /// `ralph: fallback:`'s agent to run on (its index): the task's own is
    /// at a limit.
    pub fallback: Option<usize>,
}

impl Work {
    /// Its `task_started`, in `lane` and `worktree` (parallel runs).
    pub fn started(
        &self,
        cfg: &RunConfig,
        lane: Option<String>,
        worktree: Option<String>,
    ) -> LoopEvent {
        LoopEvent::TaskStarted {
            task: self.task.clone(),
            section: self.section.clone(),
            description: self.description.clone(),
            attempt: self.attempt,
            max_attempts: self.max_attempts,
            transcript: cfg
                .transcript_path(&self.task, self.attempt)
                .display()
                .to_string(),
            index: self.position.0,
            count: self.position.1,
            lane,
            worktree,
        }
    }
}

/// A resolve attempt's start: the work that conflicted, and why.
#[derive(Debug, Clone)]
pub struct Resolve {
    pub work: crate::ralph::event::ConflictWork,
    /// The conflict's reason (the other change included).
    pub reason: String,
}

/// Asks the run to let a merge-back write `files` into the user's tree.
pub type MergeTurn<'a> = dyn Fn(&TaskId, &[String]) -> TurnAnswer + Sync + 'a;

/// The run's answer to a merge-back asking for its turn.
pub enum TurnAnswer {
    /// It may write now.
    Go,
    /// A file it writes is reserved for another task's resolve attempt:
    /// calling this waits until it may write. (A merge that conflicts
    /// writes nothing, so it may end before that.)
    Held(Box<dyn FnOnce() + Send>),
}

/// What every attempt of a slot shares.
pub struct SlotEnv<'e, 'b> {
    pub cfg: &'e RunConfig,
    pub controls: &'e Receiver<Control>,
    pub active: &'e ActiveAgents,
    pub agent_batch: &'e AgentBatch<'b>,
    pub merge_turn: &'e MergeTurn<'b>,
}

pub trait Executor {
    /// Runs one attempt at `work.task` (creating the place it runs in the
    /// first time) and reports how it ended. The user's tasks come with
    /// the work when the attempt edits them directly, and go back with
    /// the report.
    fn attempt(
        &mut self,
        work: &mut Work,
        env: &SlotEnv<'_, '_>,
        emit: &mut dyn FnMut(LoopEvent),
    ) -> (AttemptReport, Option<TaskSet>);

    /// The run is over: removes what this executor created.
    fn close(self: Box<Self>, emit: &mut dyn FnMut(LoopEvent));
}

/// Attempts in the user's own work tree, one at a time.
pub struct UserTree {
    pub checkpointer: Option<Checkpointer>,
    pub watcher: TasksWatcher,
}

impl Executor for UserTree {
    fn attempt(
        &mut self,
        work: &mut Work,
        env: &SlotEnv<'_, '_>,
        emit: &mut dyn FnMut(LoopEvent),
    ) -> (AttemptReport, Option<TaskSet>) {
        let Some(user) = self.checkpointer.clone() else {
            return self.attempt_with(work, env, None, None, emit);
        };
        // What a run leaves on the branch is spectr's to decide, the same
        // as with lanes: the agent's own commits are kept aside and the
        // branch put back before the completion is recorded (spectr then
        // commits the task itself with `--commit task`).
        let finish = crate::ralph::in_place::InPlaceFinish::for_run(
            &user,
            env.cfg,
            &work.task,
            work.attempt,
        );
        let mut seen = |event: LoopEvent| {
            finish.seen(&event);
            emit(event);
        };
        self.attempt_with(work, env, Some(&finish), None, &mut seen)
    }

    fn close(self: Box<Self>, _emit: &mut dyn FnMut(LoopEvent)) {}
}

impl UserTree {
    /// One attempt; a resolve attempt in the user's tree (lanes taking
    /// turns) applies its work with `prepare` once the tree is checkpointed,
    /// and checks with `merge` that no marker is left.
    pub fn attempt_with(
        &mut self,
        work: &mut Work,
        env: &SlotEnv<'_, '_>,
        merge: Option<&dyn attempt::MergeBack>,
        prepare: Option<&attempt::Prepare<'_>>,
        emit: &mut dyn FnMut(LoopEvent),
    ) -> (AttemptReport, Option<TaskSet>) {
        let req = AttemptRequest {
            task: &work.task,
            attempt: work.attempt,
            max_attempts: work.max_attempts,
            retry_reason: work.retry_reason.as_deref(),
            position: work.position,
            resolving: None,
            fallback: work.fallback,
        };
        let attempt_env = AttemptEnv {
            cfg: env.cfg,
            checkpointer: self.checkpointer.clone(),
            controls: env.controls.clone(),
            watcher: &self.watcher,
            active: env.active.clone(),
            lane: None,
            merge,
            agent_batch: Some(env.agent_batch),
            prepare,
        };
        let mut tasks = match work.tasks.take() {
            Some(t) => t,
            // Not lent (never the case): read them.
            None => match TaskSet::load(&env.cfg.change.dir) {
                Ok(t) => t,
                Err(e) => {
                    let report = AttemptReport {
                        outcome: Outcome::Abnormal {
                            detail: format!("the tasks files do not load: {e}"),
                        },
                        fatal: Some(e.to_string()),
                    };
                    return (report, None);
                }
            },
        };
        let report = attempt::run(&attempt_env, &mut tasks, &req, emit);
        (report, Some(tasks))
    }
}
