//! Lanes on other machines (`ralph: lanes: exec`, `--lane-exec`): git moves
//! the code, a command the user already trusts moves the work.
//!
//! For each attempt the user's tree (as a local lane would start from it)
//! is pushed to a git remote as a commit, then the exec template runs
//! `spectr lane-worker` wherever it runs things (`ssh build{lane} {cmd}`,
//! `kubectl run … -- {cmd}`, …) with a work order on its stdin. The worker
//! clones that commit, runs the attempt there as it would run here, pushes
//! its work back under the attempt's refs and says so on its last stdout
//! line; its events stream back the same way. The work is fetched and
//! merged into the user's tree exactly as a local lane's is.
//!
//! A worker that ends without its result (the connection dropped, the pod
//! was evicted, the command is missing) lost the lane, not the attempt: the
//! attempt runs again there, without using a retry, a few times at most.

mod clock;
pub mod order;
mod resume;
pub mod worker;

use super::{Gate, MergeInto, tasks_files_in_repo, user_head};
use crate::agent::receipt::Receipt;
use crate::checkpoint::{Checkpointer, conflict_markers, remote_attempt_prefix};
use crate::model::{TaskId, TaskSet};
use crate::ralph::attempt::{AttemptReport, ResolveFiles};
use crate::ralph::config::RunConfig;
use crate::ralph::control::Control;
use crate::ralph::event::{CompletedVia, LoopEvent, NoticeLevel, Outcome};
use crate::ralph::executor::{Executor, SlotEnv, Work};
use crate::ralph::learnings;
use clock::{Limits, RanOut, WorkerClock};
use crossbeam_channel::{Receiver, select};
use order::{ControlLine, LaneResult, ORDER_VERSION, Order, ResolveOrder, WorkerStarted};
use std::io::{BufRead, Write};
use std::path::PathBuf;
use std::time::Duration;

pub use resume::{Finished, fetch_finished};

/// How many times an attempt's lane may be lost before the run stops (the
/// engine would lose every attempt alike).
pub const MAX_LOST: u32 = 3;

/// Each push or fetch of a lane's work, at most.
pub const TRANSFER_TIMEOUT: Duration = Duration::from_secs(600);

/// How long a worker asked to stop has, beyond the agent's own grace, to
/// push its work and end.
const STOP_GRACE: Duration = Duration::from_secs(60);

/// Taken by each push of an attempt's start.
static PUSHING: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Tests shorten how long a worker may go without its result (ms).
const SILENCE_ENV: &str = "SPECTR_TEST_REMOTE_LIMIT_MS";
/// How long an attempt may wait in its engine's queue before its lane is
/// lost: a cluster's queue can hold a job for hours; a day is a lost one.
const QUEUE_LIMIT: Duration = Duration::from_secs(24 * 3600);
/// Tests shorten [`QUEUE_LIMIT`] with this (milliseconds).
const QUEUE_ENV: &str = "SPECTR_TEST_REMOTE_QUEUE_MS";
/// A worker silent this long after its start was asked for is queued (said
/// once): an engine that starts it at once says nothing of the kind.
const QUEUED_AFTER: Duration = Duration::from_secs(3);
/// Tests shorten [`QUEUED_AFTER`] with this (milliseconds).
const QUEUED_AFTER_ENV: &str = "SPECTR_TEST_REMOTE_QUEUED_AFTER_MS";

/// Lines read from a worker and not yet relayed, at most.
const LINES_IN_FLIGHT: usize = 1024;

/// A lost lane's words kept for the person: the end of its stderr.
const ENGINE_WORDS: usize = 2000;

pub use crate::ralph::config::RemoteLanes;

/// One slot's lane on the engine.
pub struct RemoteLane<'a> {
    pub name: String,
    slot: usize,
    user: Checkpointer,
    gate: &'a Gate,
    cfg: RunConfig,
    lanes: RemoteLanes,
}

/// How one run of the worker ended.
enum Ran {
    /// It said how the attempt ended.
    Result(Box<LaneResult>),
    /// It ended without a result: the engine's words.
    Lost(String),
    /// The attempt could not be handed to the engine (a push that failed,
    /// a template that cannot start): the run stops.
    Failed(String),
}

impl<'a> RemoteLane<'a> {
    pub fn new(
        slot: usize,
        user: Checkpointer,
        gate: &'a Gate,
        cfg: &RunConfig,
        lanes: RemoteLanes,
    ) -> RemoteLane<'a> {
        RemoteLane {
            name: format!("lane-{}", slot + 1),
            slot,
            user,
            gate,
            cfg: cfg.clone(),
            lanes,
        }
    }

    /// The change's tasks files, repo-relative: never merged back (the run
    /// writes their statuses itself).
    fn skip(&self) -> Vec<PathBuf> {
        TaskSet::load(&self.cfg.change.dir)
            .map(|t| tasks_files_in_repo(&t, self.user.repo_root()))
            .unwrap_or_default()
    }

    fn run_attempt(
        &mut self,
        work: &Work,
        env: &SlotEnv<'_, '_>,
        emit: &mut dyn FnMut(LoopEvent),
    ) -> AttemptReport {
        let skip = self.skip();
        let first = remote_attempt_prefix(
            &self.cfg.run_id,
            &self.name,
            work.task.as_str(),
            work.attempt,
        );
        emit(self.started(work));
        let mut lost = 0;
        loop {
            // A lost lane's worker may still be going (a cut connection
            // does not stop it): the next try's refs are its own.
            let prefix = match lost {
                0 => first.clone(),
                n => format!("{first}.{}", n + 1),
            };
            let (base, order) = match self.hand_over(work, &prefix, &skip) {
                Ok(v) => v,
                Err(detail) => return self.failed(work, Outcome::GitError { detail }, emit),
            };
            emit(LoopEvent::RemoteAttempt {
                task: work.task.clone(),
                attempt: work.attempt,
                remote: self.lanes.remote.clone(),
                prefix: prefix.clone(),
                base: base.clone(),
                skip: skip
                    .iter()
                    .map(|p| p.to_string_lossy().into_owned())
                    .collect(),
            });
            match self.run_worker(work, &order, env, emit) {
                Ran::Result(result) => {
                    return self.finish(work, *result, &base, &skip, &order, env, emit);
                }
                Ran::Failed(detail) => {
                    return self.failed(work, Outcome::GitError { detail }, emit);
                }
                Ran::Lost(words) => {
                    lost += 1;
                    if lost >= MAX_LOST {
                        let detail = format!(
                            "{} was lost {lost} times running attempt {} of task {} ({words}); the engine would lose every attempt alike: check the lanes' exec command",
                            self.name, work.attempt, work.task
                        );
                        return self.failed(work, Outcome::GitError { detail }, emit);
                    }
                    emit(LoopEvent::Notice {
                        level: NoticeLevel::Warn,
                        message: format!(
                            "lane lost: {} ended without its result ({words}); attempt {} of task {} runs there again (no retry used)",
                            self.name, work.attempt, work.task
                        ),
                    });
                }
            }
        }
    }

    /// Pushes the tree the attempt starts from; returns its tree id and the
    /// order for the worker.
    fn hand_over(
        &self,
        work: &Work,
        prefix: &str,
        skip: &[PathBuf],
    ) -> Result<(String, Order), String> {
        let user = &self.user;
        let tree = self
            .gate
            .consistent(&mut || user.snapshot_tree())
            .map_err(|e| format!("could not snapshot your work tree for {}: {e}", self.name))?;
        let head = user_head(user)
            .ok_or_else(|| "remote lanes need a repository with a commit".to_string())?;
        let mut start = tree.clone();
        let mut resolve = None;
        // A resolve attempt's trees, for `git show` in its clone: the
        // project now and its previous work.
        let mut shown = Vec::new();
        if let Some(r) = &work.resolve {
            match user.merge_with_markers(&r.work.base, &tree, &r.work.theirs, skip) {
                Ok(Some(remerged)) => {
                    start = remerged.tree.clone();
                    let files = self.classify(&remerged, &work.task);
                    shown = vec![
                        ("project", remerged.ours_label.clone()),
                        ("previous", remerged.theirs_label.clone()),
                    ];
                    resolve = Some(ResolveOrder {
                        marked: files.marked,
                        unmarked: files.unmarked,
                        ours_label: remerged.ours_label,
                        theirs_label: remerged.theirs_label,
                    });
                }
                Ok(None) => {}
                Err(e) => {
                    return Err(format!(
                        "could not apply task {}'s previous work again: {e}",
                        work.task
                    ));
                }
            }
        }
        let record = |tree: &str| {
            user.base_commit(tree, &head)
                .map_err(|e| format!("could not record the tree {} starts from: {e}", self.name))
        };
        let mut refs = vec![(record(&start)?, format!("{prefix}/base"))];
        for (name, tree) in &shown {
            refs.push((record(tree)?, format!("{prefix}/{name}")));
        }
        // One push at a time from here: lanes starting together would send
        // the same history at once.
        let _pushing = PUSHING
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        user.push_to(&self.lanes.remote, &refs, TRANSFER_TIMEOUT)
            .map_err(|e| {
                format!(
                    "cannot push to the lanes' remote {}: {e} (every remote attempt needs it; check `ralph: lanes: remote`)",
                    self.lanes.remote
                )
            })?;
        let retry_reason = match &resolve {
            Some(r) => {
                let reason = work.resolve.as_ref().map_or("", |w| w.reason.as_str());
                let files = r.files();
                let trees = super::merge::Trees {
                    project: r.ours_label.clone(),
                    previous: r.theirs_label.clone(),
                };
                let mut text = super::merge::resolve_reason(reason, &work.task, &files, &trees);
                if let Some(last) = work.retry_reason.as_ref().filter(|l| l.as_str() != reason) {
                    text.push_str("\n\nYour last attempt at this ended: ");
                    text.push_str(last);
                }
                Some(text)
            }
            None => work.retry_reason.clone(),
        };
        let change_dir = self
            .cfg
            .change
            .dir
            .strip_prefix(user.repo_root())
            .map(|p| p.to_string_lossy().into_owned())
            .unwrap_or_default();
        let order = Order {
            version: ORDER_VERSION,
            remote: self.lanes.remote.clone(),
            prefix: prefix.to_owned(),
            change_dir,
            change: self.cfg.change.id.clone(),
            args: self.lanes.args.clone(),
            task: work.task.clone(),
            attempt: work.attempt,
            max_attempts: work.max_attempts,
            retry_reason,
            position: work.position,
            resolve,
            learnings: learnings::read(&learnings::path(&self.cfg.change.dir)).unwrap_or_default(),
        };
        Ok((tree, order))
    }

    /// A resolve attempt's conflicted files, by what the agent will find in
    /// them (as a local lane sorts them from its work tree): markers that
    /// its worker labels in words, or one side's whole version.
    fn classify(&self, remerged: &crate::checkpoint::Remerged, task: &TaskId) -> ResolveFiles {
        let mut files = ResolveFiles::default();
        for file in &remerged.conflicted {
            let text = self
                .user
                .file_at(&remerged.tree, file)
                .ok()
                .flatten()
                .and_then(|b| String::from_utf8(b).ok())
                .unwrap_or_default();
            let relabelled = conflict_markers::relabel(
                &text,
                &remerged.ours_label,
                &remerged.theirs_label,
                task.as_str(),
            );
            if relabelled.is_some() || conflict_markers::has_git_markers(&text) {
                files.marked.push(file.clone());
            } else {
                files.unmarked.push(file.clone());
            }
        }
        files
    }

    /// Runs the exec template once, relaying the worker's events and the
    /// person's keys, until it ends.
    fn run_worker(
        &self,
        work: &Work,
        order: &Order,
        env: &SlotEnv<'_, '_>,
        emit: &mut dyn FnMut(LoopEvent),
    ) -> Ran {
        let dir = self.cfg.transcripts_dir();
        let _ = std::fs::create_dir_all(&dir);
        let stem = format!(
            "{}-attempt-{}",
            crate::checkpoint::escape_component(work.task.as_str()),
            work.attempt
        );
        let engine_log = dir.join(format!("{stem}.engine.log"));
        let stderr = match std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&engine_log)
        {
            Ok(f) => f,
            Err(e) => return Ran::Failed(format!("cannot write {}: {e}", engine_log.display())),
        };
        let transcript = self.cfg.transcript_path(&work.task, work.attempt);
        let mut saved = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&transcript)
            .ok();
        let command = self.lanes.command(self.slot + 1);
        let spawned = crate::process::Cmd::new("sh")
            .args(["-c", &command])
            .current_dir(self.user.repo_root())
            .stdin_pipe()
            .stderr(crate::process::Sink::File(stderr))
            .stop_with_spectr()
            .spawn();
        let mut child = match spawned {
            Ok(c) => c,
            Err(e) => return Ran::Failed(format!("cannot start the lanes' exec command: {e}")),
        };
        env.active.add_group(child.pid());
        let mut stdin = child.take_stdin();
        let order_line = serde_json::to_string(order).unwrap_or_default();
        let handed = stdin.as_mut().map(|s| {
            s.write_all(format!("{order_line}\n").as_bytes())
                .and_then(|()| s.flush())
        });
        let lines = read_lines(child.take_stdout());
        let mut result: Option<LaneResult> = None;
        // A stop the worker was not asked for is its engine's (a pod
        // evicted, a job cancelled): the lane is lost, not the run.
        let mut asked_to_stop = false;
        // Never waits forever on an engine that went silent (a network
        // partition holds an ssh connection open): past the attempt's own
        // limits and two transfers, the lane is lost. Once asked to stop, the
        // worker gets its grace and a minute to push its work.
        let limit = std::env::var(SILENCE_ENV)
            .ok()
            .and_then(|ms| ms.parse().ok())
            .map_or(
                self.cfg.task_timeout * 2 + TRANSFER_TIMEOUT * 2,
                Duration::from_millis,
            );
        // Until its worker says it runs, the attempt waits in its engine's
        // queue: that counts against none of its limits, only this one.
        let queue_limit = std::env::var(QUEUE_ENV)
            .ok()
            .and_then(|ms| ms.parse().ok())
            .map_or(QUEUE_LIMIT, Duration::from_millis);
        let queued_after = std::env::var(QUEUED_AFTER_ENV)
            .ok()
            .and_then(|ms| ms.parse().ok())
            .map_or(QUEUED_AFTER, Duration::from_millis);
        let mut clock = WorkerClock::new(
            Limits {
                silence: limit,
                queue: queue_limit,
                queued_after,
                stop_grace: self.cfg.kill_grace + STOP_GRACE,
            },
            std::time::Instant::now(),
        );
        let mut controls = env.controls.clone();
        let mut silent = false;
        let mut open = true;
        let lane = super::lane_key(&work.task);
        while open {
            let say_queued = clock
                .say_queued_at()
                .map_or_else(crossbeam_channel::never, crossbeam_channel::at);
            select! {
                recv(lines) -> line => match line {
                    Ok(line) => {
                        if let Some(f) = saved.as_mut() {
                            let _ = writeln!(f, "{line}");
                        }
                        // Its first line, whatever it is: it runs.
                        if let Some(queued) = clock.line(std::time::Instant::now()) {
                            emit(LoopEvent::AttemptRunning {
                                task: work.task.clone(),
                                attempt: work.attempt,
                                queued_ms: u64::try_from(queued.as_millis()).unwrap_or(u64::MAX),
                                host: WorkerStarted::parse(&line).and_then(|s| s.host),
                            });
                        }
                        if WorkerStarted::parse(&line).is_some() {
                        } else if let Some(r) = LaneResult::parse(&line) {
                            result = Some(r);
                        } else if let Ok(event) = serde_json::from_str::<LoopEvent>(&line)
                            && let Some(event) = relay(event, &work.task)
                        {
                            emit(event);
                        }
                    }
                    Err(_) => open = false,
                },
                recv(say_queued) -> _ => {
                    clock.said_queued();
                    emit(LoopEvent::AttemptQueued {
                        task: work.task.clone(),
                        attempt: work.attempt,
                        lane: lane.clone(),
                    });
                }
                recv(controls) -> control => {
                    let line = match control {
                        Ok(Control::Quit) => Some(ControlLine::Quit),
                        Ok(Control::Restart(Some(t))) if t == work.task => Some(ControlLine::Restart),
                        Ok(Control::Skip(Some(t))) if t == work.task => Some(ControlLine::Skip),
                        Ok(_) => None,
                        // The run let go of this attempt's keys: none come.
                        Err(_) => {
                            controls = crossbeam_channel::never();
                            None
                        }
                    };
                    if let (Some(line), Some(pipe)) = (line, stdin.as_mut()) {
                        asked_to_stop = true;
                        clock.stop_asked(std::time::Instant::now());
                        let text = serde_json::to_string(&line).unwrap_or_default();
                        let _ = pipe.write_all(format!("{text}\n").as_bytes()).and_then(|()| pipe.flush());
                    }
                }
                recv(crossbeam_channel::at(clock.deadline())) -> _ => {
                    silent = true;
                    child.kill();
                    open = false;
                }
            }
        }
        drop(stdin);
        let status = child.wait();
        env.active.remove_group(child.pid());
        if let Some(r) = result {
            if matches!(r.outcome, Outcome::Stopped { .. }) && !asked_to_stop {
                let kept = r.failed.as_deref().map_or(String::new(), |f| {
                    format!("; its work is kept at {f} on the remote")
                });
                // The engine's own words say why (a time limit, a drain).
                let words = tail_of(&engine_log);
                let words = match words.is_empty() {
                    true => String::new(),
                    false => format!(": {words}"),
                };
                return Ran::Lost(format!(
                    "the worker was stopped on its machine, not by this run{kept}{words}"
                ));
            }
            return Ran::Result(Box::new(r));
        }
        let words = tail_of(&engine_log);
        if silent {
            let words = if words.is_empty() {
                String::new()
            } else {
                format!(": {words}")
            };
            return Ran::Lost(match clock.ran_out() {
                RanOut::NoResult { within } => format!(
                    "no result from its worker within {} s; its command was stopped{words}",
                    within.as_secs()
                ),
                RanOut::NeverStarted { waited } => format!(
                    "its worker did not start within {} s (still queued by its engine?); its command was stopped{words}",
                    waited.as_secs()
                ),
            });
        }
        let how = match status {
            Ok(s) => match s.code() {
                Some(code) => format!("exit {code}"),
                None => "killed by a signal".to_string(),
            },
            Err(e) => format!("cannot wait for it: {e}"),
        };
        let handed = match handed {
            Some(Err(e)) => format!("; its stdin closed before the order was read: {e}"),
            _ => String::new(),
        };
        Ran::Lost(if words.is_empty() {
            format!("{how}{handed}")
        } else {
            format!("{how}{handed}: {words}")
        })
    }

    /// The attempt's start, as this run tells it.
    fn started(&self, work: &Work) -> LoopEvent {
        work.started(
            &self.cfg,
            Some(super::lane_key(&work.task)),
            Some(format!("{} ({})", self.name, self.lanes.remote)),
        )
    }

    /// The worker's result, brought home: its work fetched, merged when it
    /// completed, kept under this work tree's refs when it failed.
    #[allow(clippy::too_many_arguments)]
    fn finish(
        &self,
        work: &Work,
        result: LaneResult,
        base: &str,
        skip: &[PathBuf],
        order: &Order,
        env: &SlotEnv<'_, '_>,
        emit: &mut dyn FnMut(LoopEvent),
    ) -> AttemptReport {
        if let Some(why) = &result.worker_error {
            let detail = format!(
                "{}: the lane worker could not run the attempt: {why}",
                self.name
            );
            return self.failed(work, Outcome::GitError { detail }, emit);
        }
        let task = &work.task;
        let fetched = match resume::fetch_result(&self.user, &self.cfg.change.id, order, &result) {
            Ok(f) => f,
            Err(detail) => return self.failed(work, Outcome::GitError { detail }, emit),
        };
        self.import_learnings(task, &result.learnings, emit);
        if let Some(failed_ref) = &fetched.failed {
            emit(LoopEvent::Reverted {
                task: task.clone(),
                attempt: work.attempt,
                failed_ref: failed_ref.clone(),
                files_restored: 0,
                files_removed: 0,
            });
        }
        let outcome = match &result.outcome {
            Outcome::Completed { via } => {
                match self.merge_back(work, base, &fetched.tree, skip, *via, order, env, emit) {
                    Ok(()) => result.outcome.clone(),
                    Err(outcome) => outcome,
                }
            }
            other => other.clone(),
        };
        let report = AttemptReport {
            outcome: outcome.clone(),
            fatal: None,
        };
        emit(LoopEvent::attempt_ended(
            task.clone(),
            work.attempt,
            outcome,
            result.receipt,
        ));
        report
    }

    /// Merges the lane's work into the user's tree, as a local lane's merge
    /// does (its turn, the gate, a checkpoint first).
    #[allow(clippy::too_many_arguments)]
    fn merge_back(
        &self,
        work: &Work,
        base: &str,
        theirs: &str,
        skip: &[PathBuf],
        via: CompletedVia,
        order: &Order,
        env: &SlotEnv<'_, '_>,
        emit: &mut dyn FnMut(LoopEvent),
    ) -> Result<(), Outcome> {
        let task = &work.task;
        let marked = order
            .resolve
            .as_ref()
            .map_or(&[][..], |r| r.marked.as_slice());
        let in_work = |f: &str| {
            let bytes = self.user.file_at(theirs, f).ok().flatten()?;
            String::from_utf8(bytes).ok()
        };
        super::merge::no_markers_left(task, marked, &in_work)?;
        let lane_key = super::lane_key(task);
        let into = MergeInto {
            user: &self.user,
            change: &self.cfg.change.id,
            lane_key: &lane_key,
            gate: Some(self.gate),
        };
        into.merge_in_turn(
            env.merge_turn,
            task,
            work.attempt,
            &super::merge::merge_work(base, theirs.to_owned(), skip, via),
            emit,
        )
    }

    fn import_learnings(&self, task: &TaskId, added: &[String], emit: &mut dyn FnMut(LoopEvent)) {
        let user_file = learnings::path(&self.cfg.change.dir);
        crate::ralph::attempt::report_imported(
            learnings::import_entries(added.to_vec(), &user_file, task),
            &user_file,
            task,
            emit,
        );
    }

    /// The attempt ended here without the worker's verdict.
    fn failed(
        &self,
        work: &Work,
        outcome: Outcome,
        emit: &mut dyn FnMut(LoopEvent),
    ) -> AttemptReport {
        emit(LoopEvent::TaskFailed {
            task: work.task.clone(),
            attempt: work.attempt,
            outcome: outcome.clone(),
            receipt: Receipt::none(),
        });
        AttemptReport {
            outcome,
            fatal: None,
        }
    }
}

/// A worker's event as this run tells it, or None when it is not this
/// run's to tell: the attempt's start and end are told here (its end once
/// its work is merged), and the clone's checkpoints and HEAD are not the
/// user's.
fn relay(event: LoopEvent, task: &TaskId) -> Option<LoopEvent> {
    match event {
        // A pid on another machine: never one to signal here.
        LoopEvent::AgentStarted {
            task,
            attempt,
            agent,
            ..
        } => Some(LoopEvent::AgentStarted {
            task,
            attempt,
            pid: 0,
            start: None,
            agent,
        }),
        LoopEvent::TaskStarted { .. }
        | LoopEvent::Checkpoint { .. }
        | LoopEvent::HeadMoved { .. }
        | LoopEvent::TaskCompleted { .. }
        | LoopEvent::TaskFailed { .. }
        | LoopEvent::Reverted { .. }
        // Told once the learning is in the user's file (see `finish`).
        | LoopEvent::Learning { .. }
        | LoopEvent::RunStarted { .. }
        | LoopEvent::Summary { .. } => None,
        other if other.task().is_some_and(|t| t != task) => None,
        other => Some(other),
    }
}

impl Executor for RemoteLane<'_> {
    fn attempt(
        &mut self,
        work: &mut Work,
        env: &SlotEnv<'_, '_>,
        emit: &mut dyn FnMut(LoopEvent),
    ) -> (AttemptReport, Option<TaskSet>) {
        // One lane at a time (`--jobs 1`) the run lends its tasks, whose
        // statuses the attempt writes: here, once the work is merged.
        let lent = work.tasks.take();
        let report = self.run_attempt(work, env, emit);
        let tasks = lent.map(|mut tasks| {
            if report.outcome.is_completed() {
                match tasks.set_status(&work.task, crate::model::TaskStatus::Completed) {
                    Ok(()) => emit(LoopEvent::StatusChanged {
                        task: work.task.clone(),
                        status: crate::model::TaskStatus::Completed,
                    }),
                    Err(e) => emit(LoopEvent::Notice {
                        level: NoticeLevel::Warn,
                        message: format!(
                            "task {} is completed, but its status could not be written: {e}",
                            work.task
                        ),
                    }),
                }
            }
            tasks
        });
        (report, tasks)
    }

    /// Nothing here to remove: the worker removed its clone, and the
    /// attempts' refs stay on the remote (and fetched, here) by design.
    fn close(self: Box<Self>, _emit: &mut dyn FnMut(LoopEvent)) {}
}

/// The worker's stdout, a line at a time, on a channel closed at its end
/// (at once when there is none to read, or no thread to read it: the lane
/// is then lost, said by its exit).
fn read_lines(out: Option<std::process::ChildStdout>) -> Receiver<String> {
    // Bounded: a flooding agent's worker waits for its lines to be shown.
    let (tx, rx) = crossbeam_channel::bounded(LINES_IN_FLIGHT);
    if let Some(out) = out {
        let _ = std::thread::Builder::new()
            .name("spectr-lane-worker-out".into())
            .spawn(move || {
                for line in std::io::BufReader::new(out).lines() {
                    let Ok(line) = line else { break };
                    if tx.send(line).is_err() {
                        break;
                    }
                }
            });
    }
    rx
}

/// The last words of a lost lane's stderr, on one line.
fn tail_of(path: &std::path::Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let text = text.trim();
    let start = text
        .char_indices()
        .rev()
        .nth(ENGINE_WORDS)
        .map_or(0, |(i, _)| i);
    text[start..]
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join(" / ")
}
