//! A slot's worker: a long-lived thread that runs the attempts the dispatcher
//! hands it, one at a time, and reports everything back as messages. It never
//! decides what runs next and never prints.
//!
//! Long-lived on purpose: agents are started with PDEATHSIG, which fires
//! when the *thread* that spawned them exits.

use crate::checkpoint::Checkpointer;
use crate::model::{TaskId, TaskSet};
use crate::ralph::attempt::{self, AttemptEnv, AttemptReport, AttemptRequest};
use crate::ralph::config::RunConfig;
use crate::ralph::control::{ActiveAgents, Control};
use crate::ralph::event::{LoopEvent, Outcome};
use crate::ralph::lanes::Lane;
use crate::ralph::session::Session;
use crate::ralph::watch::TasksWatcher;
use crossbeam_channel::{Receiver, Sender, bounded};

/// One attempt to run.
pub struct Work {
    pub task: TaskId,
    pub section: String,
    pub description: String,
    pub attempt: u32,
    pub max_attempts: u32,
    pub retry_reason: Option<String>,
    /// Task n of m in this run.
    pub position: (usize, usize),
    /// Without lanes: the user's tasks, lent for the attempt (the attempt
    /// writes their statuses) and handed back with [`Msg::Done`].
    pub tasks: Option<TaskSet>,
}

/// What a worker tells the dispatcher.
pub enum Msg {
    /// `saved`: the worker waits on it until the dispatcher has recorded the
    /// event (state changes only), so the session is saved before the
    /// worker's next step, exactly as when the loop ran on one thread.
    Event {
        slot: usize,
        event: LoopEvent,
        saved: Option<Sender<()>>,
    },
    /// An agent's output, one read's worth. `shown`: the worker waits on it
    /// until the dispatcher has passed the output on, so a flooding agent
    /// meets back-pressure here and at most one read's worth per slot waits
    /// in the channel (a read is up to 1 MiB).
    Agent {
        task: TaskId,
        attempt: u32,
        events: Vec<crate::agent::AgentEvent>,
        shown: Sender<()>,
    },
    Done {
        slot: usize,
        task: TaskId,
        report: AttemptReport,
        tasks: Option<TaskSet>,
    },
}

/// Where a worker's agents run. One per worker: its size does not matter.
#[allow(clippy::large_enum_variant)]
pub enum Mode<'a> {
    /// In the user's work tree (`--jobs 1`).
    Direct {
        checkpointer: Option<Checkpointer>,
        watcher: TasksWatcher,
    },
    /// In a lane work tree of its own.
    Lane(Box<Lane<'a>>),
}

pub struct Worker<'a> {
    pub slot: usize,
    pub cfg: &'a RunConfig,
    pub controls: Receiver<Control>,
    pub active: ActiveAgents,
    pub msgs: Sender<Msg>,
    pub mode: Mode<'a>,
}

impl Worker<'_> {
    /// Runs until the dispatcher drops its end of `work`.
    pub fn run(self, work: Receiver<Work>) {
        let Worker {
            slot,
            cfg,
            controls,
            active,
            msgs,
            mut mode,
        } = self;
        let mut emit = |event: LoopEvent| send(&msgs, slot, event);
        let batch = |task: &TaskId, attempt: u32, events: Vec<crate::agent::AgentEvent>| {
            send_and_wait(&msgs, |shown| Msg::Agent {
                task: task.clone(),
                attempt,
                events,
                shown,
            });
        };
        for mut w in work.iter() {
            // A key meant for an earlier attempt must not stop this one.
            while controls.try_recv().is_ok() {}
            let lent = w.tasks.take();
            let (report, tasks) = match &mut mode {
                Mode::Direct {
                    checkpointer,
                    watcher,
                } => {
                    let req = AttemptRequest {
                        task: &w.task,
                        attempt: w.attempt,
                        max_attempts: w.max_attempts,
                        retry_reason: w.retry_reason.as_deref(),
                        position: w.position,
                    };
                    let env = AttemptEnv {
                        cfg,
                        checkpointer: checkpointer.clone(),
                        controls: controls.clone(),
                        watcher,
                        active: active.clone(),
                        lane: None,
                        merge: None,
                        agent_batch: Some(&batch),
                    };
                    direct(&env, lent, &req, &mut emit)
                }
                Mode::Lane(lane) => (
                    lane.attempt(&w, &controls, &active, &batch, &mut emit),
                    None,
                ),
            };
            let done = Msg::Done {
                slot,
                task: w.task,
                report,
                tasks,
            };
            if msgs.send(done).is_err() {
                break;
            }
        }
        if let Mode::Lane(lane) = mode {
            lane.close(&mut emit);
        }
    }
}

fn send(msgs: &Sender<Msg>, slot: usize, event: LoopEvent) {
    if Session::is_state_change(&event) {
        send_and_wait(msgs, |saved| Msg::Event {
            slot,
            event,
            saved: Some(saved),
        });
    } else {
        let _ = msgs.send(Msg::Event {
            slot,
            event,
            saved: None,
        });
    }
}

/// Sends the message `make` builds around a reply sender, then waits until
/// the dispatcher has handled it.
fn send_and_wait(msgs: &Sender<Msg>, make: impl FnOnce(Sender<()>) -> Msg) {
    let (done, wait) = bounded(1);
    if msgs.send(make(done)).is_ok() {
        // Err on either side: the dispatcher is gone, or dropped the
        // message unread while shutting down; nothing left to wait for.
        let _ = wait.recv();
    }
}

/// An attempt in the user's own tree, on the tasks the dispatcher lent.
fn direct(
    env: &AttemptEnv<'_>,
    tasks: Option<TaskSet>,
    req: &AttemptRequest<'_>,
    emit: &mut dyn FnMut(LoopEvent),
) -> (AttemptReport, Option<TaskSet>) {
    let mut tasks = match tasks {
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
    let report = attempt::run(env, &mut tasks, req, emit);
    (report, Some(tasks))
}
