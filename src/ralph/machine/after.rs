//! What an attempt's events and its end change: statuses mirrored, the
//! retry, the skip, the next step after each outcome.

use super::*;

impl Machine {
    /// Records and reports a worker's event. With lanes, the agent edits its
    /// lane's copy of the tasks files: the running task's statuses are
    /// mirrored into the user's files here, and `completed` only once the
    /// task's work is merged (the user's files never claim work that is not
    /// in the user's tree).
    pub(super) fn on_event(&mut self, current: Option<&TaskId>, in_place: bool, event: LoopEvent) {
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
    pub(super) fn mirror(&mut self, task: TaskId, status: TaskStatus) {
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

    pub(super) fn after_attempt(
        &mut self,
        slot: usize,
        id: &TaskId,
        report: AttemptReport,
        now: Now,
    ) {
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
                // Far away and another agent free: on there at once.
                if self.end.is_none() && self.fall_back(id, wait_secs) {
                    return;
                }
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
    pub(super) fn retry(&mut self, id: &TaskId, reason: Option<String>) {
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
    pub(super) fn current_graph(&mut self) -> TaskGraph {
        let built_for = self.tasks.structure_id();
        match self.graph.take() {
            Some((id, g)) if id == built_for => g,
            _ => TaskGraph::new(&self.tasks),
        }
    }

    pub(super) fn skip(&mut self, id: &TaskId, reason: &str) {
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
}
