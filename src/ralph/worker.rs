//! A slot's worker: a long-lived thread that runs the attempts the run
//! hands it, one at a time, and reports everything back as messages. It never
//! decides what runs next and never prints.
//!
//! Long-lived on purpose: agents are started with PDEATHSIG, which fires
//! when the *thread* that spawned them exits.

use crate::model::{TaskId, TaskSet};
use crate::ralph::attempt::AttemptReport;
use crate::ralph::config::RunConfig;
use crate::ralph::control::{ActiveAgents, Control};
use crate::ralph::event::LoopEvent;
use crate::ralph::executor::{Executor, SlotEnv};
use crate::ralph::session::Session;
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

/// What a worker tells the run.
pub enum Msg {
    /// `saved`: the worker waits on it until the run has recorded the
    /// event (state changes only), so the session is saved before the
    /// worker's next step, exactly as when the loop ran on one thread.
    Event {
        slot: usize,
        event: LoopEvent,
        saved: Option<Sender<()>>,
    },
    /// An agent's output, one read's worth. `shown`: the worker waits on it
    /// until the run has passed the output on, so a flooding agent
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

pub struct Worker<'a> {
    pub slot: usize,
    pub cfg: &'a RunConfig,
    pub controls: Receiver<Control>,
    pub active: ActiveAgents,
    pub msgs: Sender<Msg>,
    /// Where its attempts run.
    pub executor: Box<dyn Executor + Send + 'a>,
}

impl Worker<'_> {
    /// Runs until the run drops its end of `work`.
    pub fn run(self, work: Receiver<Box<Work>>) {
        let Worker {
            slot,
            cfg,
            controls,
            active,
            msgs,
            mut executor,
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
        let env = SlotEnv {
            cfg,
            controls: &controls,
            active: &active,
            agent_batch: &batch,
        };
        for mut w in work.iter() {
            // A key meant for an earlier attempt must not stop this one.
            while controls.try_recv().is_ok() {}
            let (report, tasks) = executor.attempt(&mut w, &env, &mut emit);
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
        executor.close(&mut emit);
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
/// the run has handled it.
fn send_and_wait(msgs: &Sender<Msg>, make: impl FnOnce(Sender<()>) -> Msg) {
    let (done, wait) = bounded(1);
    if msgs.send(make(done)).is_ok() {
        // Err on either side: the run is gone, or dropped the
        // message unread while shutting down; nothing left to wait for.
        let _ = wait.recv();
    }
}
