//! The shell around the run's state machine ([`crate::ralph::machine`]):
//! it owns the threads and the I/O. Workers (one per slot, long-lived) run
//! attempts; a detached thread asks the person's questions; the watcher and
//! a 2 s poll notice edits of the tasks files. Everything they say arrives
//! on channels and goes into [`Machine::handle`] as an input; the effects it
//! returns are performed here, and their results go back in as inputs.
//!
//! ```text
//!  workers ─┐                       ┌─> record (session file, reporter)
//!  keys ────┤                       ├─> start / tell a worker
//!  signals ─┼─> input ─> Machine ─> ├─> write a status, read the tasks
//!  answers ─┤                       └─> ask a question (answer later)
//!  watch ───┤                              │
//!  timers ──┘ <────── results ─────────────┘
//! ```
//!
//! Nothing here waits for a person: the loop only ever blocks on its
//! channels, so a question, a hang-up or a key is handled at once.

use crate::checkpoint::{Checkpointer, CleanScope};
use crate::model::{Task, TaskId, TaskSet};
use crate::ralph::attempt::{StatusWrite, set_status_fresh};
use crate::ralph::config::RunConfig;
use crate::ralph::control::{
    ActiveAgents, Control, ExhaustChoice, Interaction, OpenQuestion, RunningTasks,
};
use crate::ralph::error::RunError;
use crate::ralph::event::{LoopEvent, NoticeLevel, Outcome, RunEnd};
use crate::ralph::executor::{Executor, UserTree, Work};
use crate::ralph::lanes::remote::RemoteLane;
use crate::ralph::lanes::{Gate, Lane};
use crate::ralph::machine::{Effect, Input, Machine, Now, Rules};
use crate::ralph::outbox::{Outbox, Recorder};
use crate::ralph::session::Session;
use crate::ralph::watch::{POLL_INTERVAL, TasksWatcher};
use crate::ralph::worker::{Msg, Worker};
use crossbeam_channel::{Receiver, Sender, at, bounded, never, select, unbounded};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

/// Worker messages waiting for the loop, at most.
const MESSAGES_IN_FLIGHT: usize = 256;

/// What the run needs besides the tasks and the outbox.
pub struct RunSetup {
    /// The user's work tree; None without checkpoints (and without lanes).
    pub checkpointer: Option<Checkpointer>,
    pub controls: Receiver<Control>,
    /// Watches the user's change folder for the attempt without lanes.
    pub watcher: TasksWatcher,
    pub active: ActiveAgents,
    pub running: RunningTasks,
    /// The open question, for answers from elsewhere.
    pub question: OpenQuestion,
    /// How many tasks may run at once (`--jobs`); more than one runs each in
    /// a lane work tree of its own.
    pub slots: usize,
    /// Asks retry / skip / abort (on a terminal with prompting on).
    pub asker: Option<Box<dyn Interaction + Send>>,
    /// `--commit task`: makes each completed task's commit.
    pub committer: Option<crate::ralph::commit::Committer>,
}

/// A slot's channels to its worker: its work, and the running attempt's
/// own channel for keys and stops.
struct SlotLink {
    work: Sender<Box<Work>>,
    controls: std::cell::RefCell<Option<Sender<Control>>>,
    /// The merge-back waiting for its turn on this slot.
    merge_go: std::cell::RefCell<Option<Sender<bool>>>,
}

fn now() -> Now {
    Now {
        at: Instant::now(),
        epoch_secs: SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs()),
    }
}

/// Runs the change until every selected task is done, the run is aborted,
/// or it is stopped.
pub fn run(tasks: TaskSet, out: Outbox<'_>, cfg: &RunConfig, mut setup: RunSetup) -> RunEnd {
    if setup.checkpointer.is_none() {
        // Lanes are git work trees: without a repository, one at a time.
        setup.slots = 1;
    }
    let slots = setup.slots.max(1);
    // Remote lanes run elsewhere even one at a time.
    let parallel = slots > 1 || cfg.remote_lanes.is_some() && setup.checkpointer.is_some();
    let (mut session, mut rec) = out.split();
    session.slots = u32::try_from(slots).ok();
    let rules = Rules {
        max_retries: cfg.max_retries,
        max_conflicts: cfg.max_conflicts,
        on_exhaust: cfg.on_exhaust,
        selection: cfg.selection.clone(),
        slots,
        budget: cfg.budget,
        in_place: cfg.remote_lanes.is_none(),
        commit: setup.committer.is_some(),
        agents: crate::ralph::machine::Agents {
            own: cfg.agent_label.clone(),
            routed: tasks
                .leaves()
                .filter(|t| crate::ralph::routes::route_for(&cfg.routes, t).is_some())
                .map(|t| (t.id.clone(), cfg.primary_label(t)))
                .collect(),
            // Remote lanes run their worker's own agent.
            fallback: match cfg.remote_lanes {
                Some(_) => Vec::new(),
                None => cfg.fallback.iter().map(|f| f.label.clone()).collect(),
            },
            max_rate_wait_secs: cfg.max_rate_wait.as_secs(),
        },
    };
    let mut machine = Machine::new(rules, tasks, session);
    let mut committer = setup.committer.take();
    let started = Instant::now();
    let gate = Gate::default();
    // Bounded: a flooding agent waits for the output to be shown instead
    // of filling memory.
    let (msg_tx, msg_rx) = bounded::<Msg>(MESSAGES_IN_FLIGHT);
    let user = setup.checkpointer.clone();
    let mut direct_watcher = Some(std::mem::replace(&mut setup.watcher, TasksWatcher::inert()));
    // The loop's own watch on the user's tasks files (the attempt without
    // lanes has one of its own).
    let watch = TasksWatcher::start(std::slice::from_ref(&cfg.change.dir));
    let (answer_tx, answer_rx) = unbounded::<(TaskId, Option<ExhaustChoice>)>();
    // The loop keeps a sender: a channel with none is always ready.
    let asker = setup
        .asker
        .take()
        .and_then(|i| start_asker(i, answer_tx.clone()));
    let end = std::thread::scope(|scope| {
        let mut links = Vec::new();
        for n in 0..slots {
            let (work_tx, work_rx) = unbounded::<Box<Work>>();
            let executor: Box<dyn Executor + Send + '_> = match (&user, parallel) {
                (Some(user), true) => match &cfg.remote_lanes {
                    Some(remote) => {
                        Box::new(RemoteLane::new(n, user.clone(), &gate, cfg, remote.clone()))
                    }
                    None => Box::new(Lane::new(n, user.clone(), &gate, cfg)),
                },
                _ => Box::new(UserTree {
                    checkpointer: user.clone(),
                    watcher: direct_watcher.take().unwrap_or_else(TasksWatcher::inert),
                }),
            };
            let worker = Worker {
                slot: n,
                cfg,
                active: setup.active.clone(),
                msgs: msg_tx.clone(),
                executor,
            };
            let spawned = std::thread::Builder::new()
                .name(format!("spectr-slot-{}", n + 1))
                .spawn_scoped(scope, move || worker.run(work_rx));
            if let Err(e) = spawned {
                let event = LoopEvent::Error {
                    task: None,
                    message: RunError::WorkerThread { source: e }.to_string(),
                };
                machine.session.apply(&event);
                rec.record(&mut machine.session, &event);
                links.clear();
                break;
            }
            links.push(SlotLink {
                work: work_tx,
                controls: std::cell::RefCell::new(None),
                merge_go: std::cell::RefCell::new(None),
            });
        }
        drop(msg_tx);
        let end = if links.is_empty() {
            RunEnd::Aborted
        } else {
            let mut shell = Shell {
                cfg,
                rec: &mut rec,
                links: &links,
                active: &setup.active,
                running: &setup.running,
                asker: asker.as_ref(),
                asked: None,
                question: &setup.question,
                containers_synced: None,
                committer: committer.as_mut(),
            };
            shell.drive(&mut machine, &msg_rx, &setup.controls, &answer_rx, &watch)
        };
        // Closing the work channels lets the workers end (lanes are
        // removed); what they still say is reported until they are gone.
        drop(links);
        for msg in msg_rx.iter() {
            if let Msg::Event { event, saved, .. } = msg {
                machine.session.apply(&event);
                rec.record(&mut machine.session, &event);
                if let Some(saved) = saved {
                    let _ = saved.send(());
                }
            }
        }
        end
    });
    drop(answer_tx);
    if let (Some(user), true) = (&user, parallel) {
        user.tidy_lanes_dir(&crate::ralph::lanes::lanes_dir(cfg, user));
    }
    finish(
        &mut machine,
        &mut rec,
        cfg,
        user.as_ref(),
        end,
        started.elapsed(),
    )
}

/// Starts the thread that asks questions. Detached on purpose: a question
/// blocked on a terminal nobody answers must never keep the run from
/// ending (a hang-up, a SIGTERM).
fn start_asker(
    mut interaction: Box<dyn Interaction + Send>,
    answers: Sender<(TaskId, Option<ExhaustChoice>)>,
) -> Option<Sender<Question>> {
    let (tx, rx) = unbounded::<Question>();
    std::thread::Builder::new()
        .name("spectr-questions".into())
        .spawn(move || {
            for (task, last, withdrawn) in rx.iter() {
                // A panic while asking answers "none" (the run stops as for
                // `q`) instead of leaving the question open forever.
                let choice = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    interaction.on_exhausted(&task, &last, &withdrawn)
                }))
                .unwrap_or(None);
                // Answered elsewhere: the loop has its answer already (a
                // "none" from here would stop the run).
                if withdrawn.load(Ordering::SeqCst) {
                    continue;
                }
                if answers.send((task.id.clone(), choice)).is_err() {
                    break;
                }
            }
        })
        .ok()?;
    Some(tx)
}

/// A question for the asker thread, with the flag that withdraws it.
type Question = (Task, Outcome, Arc<AtomicBool>);

struct Shell<'s, 'r> {
    cfg: &'s RunConfig,
    rec: &'s mut Recorder<'r>,
    links: &'s [SlotLink],
    active: &'s ActiveAgents,
    running: &'s RunningTasks,
    asker: Option<&'s Sender<Question>>,
    /// The question the asker has, and its withdrawal flag.
    asked: Option<(TaskId, Arc<AtomicBool>)>,
    question: &'s OpenQuestion,
    /// The tasks' `statuses_read_id` the containers were last synced for.
    containers_synced: Option<u64>,
    committer: Option<&'s mut crate::ralph::commit::Committer>,
}

impl Shell<'_, '_> {
    fn drive(
        &mut self,
        machine: &mut Machine,
        msgs: &Receiver<Msg>,
        controls: &Receiver<Control>,
        answers: &Receiver<(TaskId, Option<ExhaustChoice>)>,
        watch: &TasksWatcher,
    ) -> RunEnd {
        let mut pending = vec![Input::Begin];
        // Completed before a kill, not yet committed: first, in order.
        if self.committer.is_some() {
            for (task, attempt) in crate::ralph::commit::pending(&machine.session) {
                if let Some(failed) = self.commit(machine, &task, attempt) {
                    pending.insert(0, failed);
                    break;
                }
            }
        }
        // A channel whose senders are all gone is always ready: it is
        // swapped for one that never is.
        let (mut controls, mut answers) = (controls.clone(), answers.clone());
        let mut next_poll = Instant::now() + POLL_INTERVAL;
        loop {
            // A quit seen by the signal handler goes first: nothing may
            // start after it.
            if self.active.quit_requested() && machine.finished().is_none() {
                pending.insert(0, Input::Control(Control::Quit));
            }
            for input in std::mem::take(&mut pending) {
                let effects = machine.handle(input, now());
                self.perform(machine, effects, &mut pending);
            }
            // Whatever keeping tasks.md in step had to say, at once (the
            // attempt without lanes hands its warnings back with the tasks).
            self.tasks_md_warnings(machine);
            if !pending.is_empty() {
                continue;
            }
            self.running.set(machine.running());
            self.question.set(machine.question_open().cloned());
            if let Some(end) = machine.finished() {
                return end;
            }
            let timer = machine.next_deadline().map_or_else(never, at);
            let poll = at(next_poll);
            select! {
                recv(msgs) -> msg => match msg {
                    Ok(msg) => self.on_message(machine, msg, &mut pending),
                    Err(_) => pending.push(Input::WorkersGone),
                },
                recv(controls) -> control => match control {
                    Ok(control) => pending.push(Input::Control(control)),
                    Err(_) => controls = never(),
                },
                recv(answers) -> answer => match answer {
                    Ok((task, choice)) => pending.push(Input::Answer { task, choice }),
                    Err(_) => answers = never(),
                },
                recv(watch.changed) -> _ => pending.push(Input::TasksMayHaveChanged),
                recv(timer) -> _ => pending.push(Input::Tick),
                recv(poll) -> _ => {
                    next_poll = Instant::now() + POLL_INTERVAL;
                    pending.push(Input::TasksMayHaveChanged);
                },
            }
        }
    }

    /// A worker's message as an input. Its acknowledgement (the session is
    /// saved, the output shown) is sent once the input is handled.
    fn on_message(&mut self, machine: &mut Machine, msg: Msg, pending: &mut Vec<Input>) {
        match msg {
            Msg::Event { slot, event, saved } => {
                let effects = machine.handle(Input::Worker { slot, event }, now());
                self.perform(machine, effects, pending);
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
                let input = Input::Agent {
                    task,
                    attempt,
                    events,
                };
                let effects = machine.handle(input, now());
                self.perform(machine, effects, pending);
                let _ = shown.send(());
            }
            Msg::MergeTurn {
                slot,
                task,
                files,
                go,
            } => {
                if let Some(link) = self.links.get(slot) {
                    link.merge_go.replace(Some(go));
                }
                pending.push(Input::MergeWanted { slot, task, files });
            }
            Msg::Done {
                slot,
                task,
                report,
                tasks,
                wrote,
            } => pending.push(Input::AttemptEnded {
                slot,
                task,
                report,
                tasks,
                wrote,
            }),
        }
    }

    /// Makes (or finds) a completed task's commit and records it; the input
    /// that stops the run when it cannot be made.
    fn commit(&mut self, machine: &mut Machine, task: &TaskId, attempt: u32) -> Option<Input> {
        let committer = self.committer.as_mut()?;
        match committer.commit(&machine.session, machine.tasks(), task, attempt) {
            Ok(event) => {
                let made = matches!(
                    &event,
                    LoopEvent::TaskCommitted {
                        commit: Some(_),
                        found: false,
                        ..
                    }
                );
                machine.session.apply(&event);
                self.rec.record(&mut machine.session, &event);
                if let Some(message) = committer.take_notice() {
                    self.rec.report(&LoopEvent::Notice {
                        level: NoticeLevel::Warn,
                        message,
                    });
                }
                if let Some(notice) = made.then(|| committer.push()).flatten() {
                    self.rec.report(&notice);
                }
                None
            }
            Err(stop) => Some(Input::CommitFailed { message: stop.0 }),
        }
    }

    fn perform(&mut self, machine: &mut Machine, effects: Vec<Effect>, pending: &mut Vec<Input>) {
        for effect in effects {
            match effect {
                Effect::Record(event) => self.rec.record(&mut machine.session, &event),
                Effect::Commit { task, attempt } => {
                    if let Some(failed) = self.commit(machine, &task, attempt) {
                        pending.push(failed);
                    }
                }
                Effect::Show(event) => self.rec.report(&event),
                Effect::Start { slot, mut work } => {
                    let task = work.task.clone();
                    let (tx, rx) = unbounded::<Control>();
                    work.controls = Some(rx);
                    if let Some(link) = self.links.get(slot) {
                        link.controls.replace(Some(tx));
                    }
                    let sent = self.links.get(slot).map(|l| l.work.send(work));
                    match sent {
                        Some(Ok(())) => {}
                        Some(Err(e)) => pending.push(Input::StartFailed {
                            slot,
                            task,
                            tasks: e.into_inner().tasks.take(),
                        }),
                        None => pending.push(Input::StartFailed {
                            slot,
                            task,
                            tasks: None,
                        }),
                    }
                }
                Effect::Tell { slot, control } => {
                    if let Some(link) = self.links.get(slot)
                        && let Some(tx) = link.controls.borrow().as_ref()
                    {
                        let _ = tx.send(control);
                    }
                }
                Effect::MergeGo { slot } => {
                    let go = self.links.get(slot).and_then(|l| l.merge_go.take());
                    if let Some(go) = go {
                        let _ = go.send(true);
                    }
                }
                Effect::MergeHeld { slot } => {
                    if let Some(link) = self.links.get(slot)
                        && let Some(go) = link.merge_go.borrow().as_ref()
                    {
                        let _ = go.send(false);
                    }
                }
                Effect::WriteStatus { task, status } => {
                    match set_status_fresh(machine.tasks_mut(), &task, status) {
                        Ok(()) | Err(StatusWrite::AlreadyCompleted) => {}
                        Err(StatusWrite::Failed(e)) => self.rec.report(&LoopEvent::Notice {
                            level: NoticeLevel::Warn,
                            message: format!(
                                "could not write task {task}'s status ({status}) to the tasks file: {e}"
                            ),
                        }),
                    }
                    self.tasks_md_warnings(machine);
                    pending.push(Input::StatusWritten);
                }
                Effect::ReadTasks => {
                    let input = self.read_tasks(machine);
                    self.tasks_md_warnings(machine);
                    pending.push(input);
                }
                Effect::Ask { task, last } => {
                    let id = task.id.clone();
                    let withdrawn = Arc::new(AtomicBool::new(false));
                    let asked = self
                        .asker
                        .is_some_and(|a| a.send((task, last, withdrawn.clone())).is_ok());
                    if asked {
                        self.asked = Some((id, withdrawn));
                    } else if self.cfg.wait_for_answer {
                        // No terminal: the question stays open for an answer
                        // from elsewhere (`--notify` names the commands).
                        self.rec.report(&LoopEvent::Notice {
                            level: NoticeLevel::Info,
                            message: format!(
                                "waiting for an answer: spectr ralph answer {} retry|skip|abort --task {}",
                                crate::ralph::prompt::shell_quote(&self.cfg.change.id),
                                crate::ralph::prompt::shell_quote(id.as_str())
                            ),
                        });
                    } else {
                        pending.push(Input::Answer {
                            task: id,
                            choice: Some(ExhaustChoice::Abort),
                        });
                    }
                }
                Effect::Withdraw { task } => {
                    if let Some((asked, withdrawn)) = &self.asked
                        && *asked == task
                    {
                        withdrawn.store(true, Ordering::SeqCst);
                    }
                }
            }
        }
    }

    /// Re-reads the tasks files when they changed on disk, and writes back
    /// the containers whose children were completed outside the loop (a
    /// person's edit), so a container is completed when its children are.
    fn read_tasks(&mut self, machine: &mut Machine) -> Input {
        if !self.cfg.change.dir.is_dir() {
            return Input::TasksRead {
                error: Some(RunError::ChangeGone {
                    dir: self.cfg.change.dir.clone(),
                }),
            };
        }
        let tasks = machine.tasks_mut();
        if let Err(source) = tasks.refresh() {
            return Input::TasksRead {
                error: Some(RunError::TasksUnreadable { source }),
            };
        }
        // Only statuses read from disk can leave a container (or tasks.md)
        // behind: our own status writes keep both as they go.
        if self.containers_synced != Some(tasks.statuses_read_id()) {
            tasks.sync_tasks_md(None);
            let mut result = tasks.sync_containers();
            if matches!(result, Err(crate::model::ModelError::Stale { .. })) {
                // Edited while we looked: read it again and retry once.
                result = tasks.refresh().and_then(|_| tasks.sync_containers());
            }
            match result {
                Ok(_) => self.containers_synced = Some(tasks.statuses_read_id()),
                // Tried again at the next read.
                Err(e) => self.rec.report(&LoopEvent::Notice {
                    level: NoticeLevel::Warn,
                    message: format!("could not update the containers' statuses: {e}"),
                }),
            }
        }
        Input::TasksRead { error: None }
    }

    fn tasks_md_warnings(&mut self, machine: &mut Machine) {
        tasks_md_warnings(machine, self.rec);
    }
}

/// Shows what keeping tasks.md in step had to say (each thing once).
fn tasks_md_warnings(machine: &mut Machine, rec: &mut Recorder<'_>) {
    for message in machine.tasks_mut().take_tasks_md_warnings() {
        rec.report(&LoopEvent::Notice {
            level: NoticeLevel::Warn,
            message,
        });
    }
}

fn finish(
    machine: &mut Machine,
    rec: &mut Recorder<'_>,
    cfg: &RunConfig,
    user: Option<&Checkpointer>,
    end: RunEnd,
    elapsed: std::time::Duration,
) -> RunEnd {
    tasks_md_warnings(machine, rec);
    if let Some(cp) = user {
        // Completed attempts' checkpoint refs not yet dropped.
        cp.settle();
    }
    if let Some(task) = machine.question_open().cloned() {
        // The run ended (a stop, a hang-up) with the question unanswered.
        let event = LoopEvent::Answered {
            task,
            answer: "none".into(),
        };
        rec.report(&event);
    }
    let totals = machine.totals(elapsed);
    machine.session.run_time_ms = totals.duration_ms;
    let checkpoint_refs = machine.session.refs();
    // Saved before the summary, so the summary can say what the file holds.
    let session = (end != RunEnd::Complete).then(|| {
        rec.save(&mut machine.session);
        let mut file = rec.session_file(&machine.session, machine.tasks());
        if end == RunEnd::Aborted {
            file.out_of_retries = machine.out_of_retries();
        }
        file
    });
    let summary = LoopEvent::Summary {
        end,
        totals,
        transcripts: cfg.transcripts_dir().display().to_string(),
        checkpoint_refs,
        hot_files: machine.hot_files(),
        lanes: machine.take_lanes(),
        session,
        budget: machine.budget_use(),
    };
    machine.session.apply(&summary);
    rec.record(&mut machine.session, &summary);
    if end == RunEnd::Complete {
        // Success: checkpoints are no longer needed; failed attempts' refs stay.
        // Lanes' included: one killed mid-attempt did not drop its own.
        let known = machine.session.checkpoint_refnames();
        if let Some(cp) = user
            && let Err(e) = cp
                .clean(&cfg.change.id, CleanScope::Checkpoints)
                .and_then(|_| cp.drop_checkpoints_of(&known))
        {
            rec.report(&LoopEvent::Notice {
                level: NoticeLevel::Warn,
                message: format!("could not remove the run's checkpoint refs: {e}"),
            });
        }
        if let Err(e) = Session::delete(&rec.session_path) {
            rec.report(&LoopEvent::Notice {
                level: NoticeLevel::Warn,
                message: e.to_string(),
            });
        }
    }
    end
}
