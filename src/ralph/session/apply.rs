//! The session follows the run by applying its [`LoopEvent`]s, and only so:
//! it records exactly the facts the reporters saw.

use super::*;

impl Session {
    /// Whether this event changes what the file must say (so it must be saved).
    pub fn is_state_change(event: &LoopEvent) -> bool {
        !matches!(
            event,
            LoopEvent::AgentEvent { .. }
                | LoopEvent::Notice { .. }
                | LoopEvent::Plan { .. }
                | LoopEvent::RateLimitWait { .. }
                | LoopEvent::Paused
                | LoopEvent::Resumed
                | LoopEvent::BudgetReached { .. }
                | LoopEvent::Question { .. }
                | LoopEvent::ConflictLimit { .. }
                | LoopEvent::Answered { .. }
        )
    }

    /// Updates the records from one loop event.
    pub fn apply(&mut self, event: &LoopEvent) {
        match event {
            LoopEvent::TaskStarted {
                task,
                attempt,
                transcript,
                lane,
                worktree,
                ..
            } => {
                let rec = self.record_mut(task);
                rec.state = RunTaskState::Running;
                // An attempt record is large: a first push would make room
                // for four, kept as long as the session (most tasks have one).
                rec.attempts.reserve_exact(1);
                rec.attempts.push(AttemptRecord {
                    attempt: *attempt,
                    started_at: now_rfc3339(),
                    ended_at: None,
                    transcript: transcript.clone(),
                    checkpoint: None,
                    outcome: None,
                    receipt: None,
                    failed_ref: None,
                    agent_pid: None,
                    agent_started: None,
                    kept_tree: false,
                    lane: lane.clone(),
                    worktree: worktree.clone(),
                    lane_checkpoint: None,
                    merged: false,
                    resolving: false,
                    head_moves: Vec::new(),
                    merge_work: None,
                    remote: None,
                    queued_since: None,
                    queued_ms: None,
                });
            }
            LoopEvent::RemoteAttempt {
                task,
                attempt,
                remote,
                prefix,
                base,
                skip,
            } => {
                if let Some(a) = self.attempt_mut(task, *attempt) {
                    a.remote = Some(RemoteRecord {
                        remote: remote.clone(),
                        prefix: prefix.clone(),
                        base: base.clone(),
                        skip: skip.clone(),
                    });
                }
            }
            LoopEvent::Checkpoint {
                task,
                attempt,
                checkpoint,
            } => {
                if let Some(a) = self.attempt_mut(task, *attempt) {
                    if a.worktree.is_some() {
                        a.lane_checkpoint = Some(checkpoint.clone());
                    } else {
                        a.checkpoint = Some(checkpoint.clone());
                    }
                }
            }
            LoopEvent::MergeStarted {
                task,
                attempt,
                checkpoint,
                work,
            } => {
                if let Some(a) = self.attempt_mut(task, *attempt) {
                    a.checkpoint = Some(checkpoint.clone());
                    if work.is_some() {
                        a.merge_work = work.clone();
                    }
                }
            }
            LoopEvent::HeadMoved {
                task,
                attempt,
                head,
                branch,
                tip,
            } => {
                if let Some(a) = self.attempt_mut(task, *attempt) {
                    let seen = HeadSeen {
                        head: head.clone(),
                        branch: branch.clone(),
                        tip: tip.clone(),
                    };
                    if !a.head_moves.contains(&seen) {
                        a.head_moves.push(seen);
                    }
                }
            }
            LoopEvent::AttemptQueued { task, attempt, .. } => {
                if let Some(a) = self.attempt_mut(task, *attempt) {
                    a.queued_since = Some(now_rfc3339());
                }
            }
            LoopEvent::AttemptRunning {
                task,
                attempt,
                queued_ms,
                ..
            } => {
                if let Some(a) = self.attempt_mut(task, *attempt) {
                    a.queued_since = None;
                    a.queued_ms = Some(*queued_ms);
                }
            }
            LoopEvent::Merged { task, attempt, .. } => {
                if let Some(a) = self.attempt_mut(task, *attempt) {
                    a.merged = true;
                }
            }
            LoopEvent::TaskCompleted {
                task,
                attempt,
                outcome,
                receipt,
            } => {
                self.finish_attempt(task, *attempt, outcome, receipt);
                let rec = self.record_mut(task);
                rec.state = RunTaskState::Completed;
                // Put back to pending and run again, the task starts with
                // fresh tries: a completed attempt used none.
                rec.budget_start = rec.counted_attempts;
                rec.conflicts_from = *attempt;
            }
            LoopEvent::TaskCommitted { task, commit, .. } => {
                self.record_mut(task).commit = Some(CommitRecord { id: commit.clone() });
            }
            LoopEvent::TaskFailed {
                task,
                attempt,
                outcome,
                receipt,
            } => {
                self.finish_attempt(task, *attempt, outcome, receipt);
                let rec = self.record_mut(task);
                // A stop by request is not a failure: the task is still to do.
                rec.state = if matches!(outcome, Outcome::Stopped { .. }) {
                    RunTaskState::Pending
                } else {
                    RunTaskState::Failed
                };
                if let Some(reason) = outcome.retry_context() {
                    rec.last_reason = Some(reason.to_string());
                } else if outcome.counts_as_attempt() {
                    rec.last_reason = None;
                }
            }
            // pid 0 means no process: never recorded (a resume would
            // signal it as "my own process group").
            LoopEvent::AgentStarted {
                task,
                attempt,
                pid,
                start,
                ..
            } if *pid > 0 => {
                // Read at spawn; an event of an older spectr has none.
                let started = start.or_else(|| crate::process::start_time(*pid));
                if let Some(a) = self.attempt_mut(task, *attempt) {
                    a.agent_pid = Some(*pid);
                    a.agent_started = started;
                }
            }
            LoopEvent::Resolving { task, attempt, .. } => {
                if let Some(a) = self.attempt_mut(task, *attempt) {
                    a.resolving = true;
                }
            }
            LoopEvent::Reverted {
                task,
                attempt,
                failed_ref,
                ..
            } => {
                if let Some(a) = self.attempt_mut(task, *attempt) {
                    a.failed_ref = Some(failed_ref.clone());
                }
            }
            LoopEvent::TaskSkipped {
                task, dependents, ..
            } => {
                for t in std::iter::once(task).chain(dependents) {
                    self.record_mut(t).state = RunTaskState::Skipped;
                }
            }
            LoopEvent::StatusChanged { task, status }
                if *status == crate::model::TaskStatus::Completed =>
            {
                self.record_mut(task).state = RunTaskState::Completed;
            }
            _ => {}
        }
    }

    fn attempt_mut(&mut self, task: &TaskId, attempt: u32) -> Option<&mut AttemptRecord> {
        let rec = self.tasks.get_mut(task)?;
        if std::mem::take(&mut rec.saved) {
            self.saves.dirty.push(task.clone());
        }
        rec.attempts.iter_mut().rev().find(|a| a.attempt == attempt)
    }

    fn finish_attempt(
        &mut self,
        task: &TaskId,
        attempt: u32,
        outcome: &Outcome,
        receipt: &Receipt,
    ) {
        let counted = outcome.counts_as_attempt();
        if let Some(a) = self.attempt_mut(task, attempt) {
            a.ended_at = Some(now_rfc3339());
            a.outcome = Some(outcome.clone());
            a.receipt = Some(receipt.clone());
        }
        if counted {
            self.record_mut(task).counted_attempts += 1;
        }
    }
}
