//! A slot's worker: a long-lived thread that runs the attempts the run
//! hands it, one at a time, and reports everything back as messages. It never
//! decides what runs next and never prints.
//!
//! Long-lived on purpose: agents are started with PDEATHSIG, which fires
//! when the *thread* that spawned them exits.

use crate::model::{TaskId, TaskSet};
use crate::ralph::attempt::AttemptReport;
use crate::ralph::config::RunConfig;
use crate::ralph::control::ActiveAgents;
use crate::ralph::event::{LoopEvent, Outcome};
use crate::ralph::executor::{Executor, SlotEnv, TurnAnswer, Work};
use crate::ralph::session::Session;
use crossbeam_channel::{Receiver, Sender, bounded};

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
    /// A lane's merge-back asks for its turn to write `files`: `go` gets
    /// `true` (or is dropped) when it may, `false` first when a file is
    /// reserved for another task and it is held.
    MergeTurn {
        slot: usize,
        task: TaskId,
        files: Vec<String>,
        go: Sender<bool>,
    },
    Done {
        slot: usize,
        task: TaskId,
        report: AttemptReport,
        tasks: Option<TaskSet>,
        /// In the user's tree: the files the completed attempt changed.
        wrote: Option<Vec<String>>,
    },
}

pub struct Worker<'a> {
    pub slot: usize,
    pub cfg: &'a RunConfig,
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
        let merge_turn = |task: &TaskId, files: &[String]| {
            // Room for both answers: held, then go.
            let (go, answer) = bounded(2);
            let asked = msgs.send(Msg::MergeTurn {
                slot,
                task: task.clone(),
                files: files.to_vec(),
                go,
            });
            // Err: the run is gone or shutting down; nothing to wait for.
            match (asked, answer.recv()) {
                (Ok(()), Ok(false)) => TurnAnswer::Held(Box::new(move || {
                    let _ = answer.recv();
                })),
                _ => TurnAnswer::Go,
            }
        };
        for mut w in work.iter() {
            // Each attempt has a channel of its own: a key meant for an
            // earlier attempt can never reach this one, and none meant for
            // this one is lost.
            let controls = w.controls.take().unwrap_or_else(crossbeam_channel::never);
            let env = SlotEnv {
                cfg,
                controls: &controls,
                active: &active,
                agent_batch: &batch,
                merge_turn: &merge_turn,
            };
            // A panic in an attempt must not leave the run waiting for it
            // forever: it ends as spectr's own failure, which stops the run.
            let attempt = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                executor.attempt(&mut w, &env, &mut emit)
            }));
            let (report, tasks) = attempt.unwrap_or_else(|panic| {
                let what = panic
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| panic.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "a panic".into());
                let detail = format!("spectr's worker failed: {what}");
                let report = AttemptReport {
                    outcome: Outcome::Abnormal {
                        detail: detail.clone(),
                    },
                    fatal: Some(detail),
                };
                (report, None)
            });
            let done = Msg::Done {
                slot,
                task: w.task,
                report,
                tasks,
                wrote: w.wrote,
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
