//! The run's rules as pure functions: what follows an attempt, which
//! running task a key means, what starts next. No process, file or clock in
//! here, so every rule is unit-tested directly.

use crate::model::{TaskGraph, TaskId, TaskStatus};
use crate::ralph::control::Control;
use crate::ralph::event::{Fault, Outcome, StopAction};
use std::collections::BTreeSet;

/// What the run does once an attempt has ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AfterAttempt {
    /// The task is done; its slot is free.
    Done,
    /// Start the task again at once, not counted (`r`).
    Restart,
    /// Skip the task and what depends on it (`s`).
    Skip,
    /// The run is stopping (`q`, a signal).
    Quit,
    /// Wait for the provider's limit to reset, then start again (not counted).
    RateLimited { resets_at: Option<u64> },
    /// Another counted attempt, with the reason for the prompt.
    Retry { reason: Option<String> },
    /// The work conflicted when merged: a resolve attempt follows, not
    /// counted against the retries (conflicts have their own limit).
    Resolve { reason: String },
    /// The retry budget is spent: the exhaustion policy (or the person) decides.
    Exhausted,
    /// spectr's own failure: it would fail every attempt, so the run stops
    /// at once (the session kept), no retry used.
    Fatal,
}

/// `retries_used`: counted attempts beyond the first since the budget was
/// renewed, including the attempt that just ended.
pub fn after_attempt(outcome: &Outcome, retries_used: u32, max_retries: u32) -> AfterAttempt {
    match outcome {
        Outcome::Completed { .. } => AfterAttempt::Done,
        Outcome::Stopped {
            action: StopAction::Restart,
        } => AfterAttempt::Restart,
        Outcome::Stopped {
            action: StopAction::Skip,
        } => AfterAttempt::Skip,
        Outcome::Stopped {
            action: StopAction::Quit,
        } => AfterAttempt::Quit,
        Outcome::RateLimited { resets_at } => AfterAttempt::RateLimited {
            resets_at: *resets_at,
        },
        own if own.fault() == Fault::Spectr => AfterAttempt::Fatal,
        Outcome::Conflict { reason, .. } => AfterAttempt::Resolve {
            reason: reason.clone(),
        },
        failed if retries_used < max_retries => AfterAttempt::Retry {
            reason: failed.retry_context().map(str::to_string),
        },
        _ => AfterAttempt::Exhausted,
    }
}

/// Whether a task whose merge conflicted for the `conflicts`th time (this
/// one included) has used up `--max-conflicts` (the resolve attempts it may
/// have): then, as when its retries run out, the exhaustion policy (or the
/// person) decides.
pub fn conflicts_spent(conflicts: u32, max_conflicts: u32) -> bool {
    conflicts > max_conflicts
}

/// Said once two lanes have conflicted [`crate::ralph::event::HOT_FILE_CONFLICTS`]
/// times on one file.
pub fn hot_file_notice(hot: &crate::ralph::event::HotFile) -> String {
    format!(
        "{}: {} conflicts between tasks {}.x and {}.x. The two now take turns on it; a `{} merge=union` line in .gitattributes (for a file of independent lines) or splitting the work would let them run side by side",
        hot.file, hot.conflicts, hot.lanes.0, hot.lanes.1, hot.file
    )
}

/// A restart or skip the person asked for while the attempt was ending some
/// other way (during `--verify`, say) still applies, unless the task is done.
pub fn with_request(next: AfterAttempt, requested: Option<&Control>) -> AfterAttempt {
    match (next, requested) {
        (next @ (AfterAttempt::Done | AfterAttempt::Quit), _) => next,
        (_, Some(Control::Skip(_))) => AfterAttempt::Skip,
        (
            next @ (AfterAttempt::Retry { .. } | AfterAttempt::Resolve { .. }),
            Some(Control::Restart(_)),
        ) => next,
        (_, Some(Control::Restart(_))) => AfterAttempt::Restart,
        (next, _) => next,
    }
}

/// Seconds to wait for a rate limit: until its reset plus a margin, a minute
/// when the reset is unknown, never more than 6 hours.
pub fn rate_limit_wait(resets_at: Option<u64>, now_epoch: u64) -> u64 {
    resets_at
        .map_or(60, |t| t.saturating_sub(now_epoch).saturating_add(5))
        .min(6 * 3600)
}

/// Which slot a restart or skip request goes to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    Slot(usize),
    /// Several tasks run and the request names none of them.
    Ambiguous,
    /// No task runs (between tasks, or waiting for a rate limit).
    NothingRunning,
}

/// `busy`: (slot, task) of every running attempt.
pub fn route(target: Option<&TaskId>, busy: &[(usize, TaskId)]) -> Route {
    match target {
        Some(id) => busy
            .iter()
            .find(|(_, t)| t == id)
            .map_or(Route::NothingRunning, |(slot, _)| Route::Slot(*slot)),
        None => match busy {
            [] => Route::NothingRunning,
            [(slot, _)] => Route::Slot(*slot),
            _ => Route::Ambiguous,
        },
    }
}

/// The tasks to start now: the ready ones (one per lane, in lane order) that
/// are not already running or waiting, as many as there are free slots.
pub fn to_start(ready: &[TaskId], taken: &[TaskId], free_slots: usize) -> Vec<TaskId> {
    ready
        .iter()
        .filter(|id| !taken.contains(id))
        .take(free_slots)
        .cloned()
        .collect()
}

/// What the run may pick from: the task graph with the statuses, the skipped
/// tasks and the `--interactive` selection.
pub struct Pickable<'a> {
    pub graph: &'a TaskGraph,
    pub status: &'a dyn Fn(&TaskId) -> TaskStatus,
    pub skipped: &'a BTreeSet<TaskId>,
    pub selection: Option<&'a BTreeSet<TaskId>>,
}

/// The loop's pick: the tasks `free_slots` free slots start now, `taken` the
/// ones running or waiting for a rate limit.
pub fn pick(from: &Pickable<'_>, taken: &[TaskId], free_slots: usize) -> Vec<TaskId> {
    let ready = from.graph.ready(from.status, from.skipped, from.selection);
    to_start(&ready, taken, free_slots)
}

/// What the loop starts next (`spectr status`'s Next), by [`pick`] itself:
/// with nothing running, what a run starts first on its `slots`; else what
/// the slots take as the running tasks end, each taken to complete (a
/// failure retries the same task instead).
pub fn next_to_start(from: &Pickable<'_>, running: &[TaskId], slots: usize) -> Vec<TaskId> {
    let status = |id: &TaskId| {
        if running.contains(id) {
            TaskStatus::Completed
        } else {
            (from.status)(id)
        }
    };
    let after = Pickable {
        status: &status,
        ..*from
    };
    pick(&after, running, slots.max(1))
}

/// `--jobs`: 0 means one per independent lane, capped at the CPUs.
pub fn slots_for(jobs: usize, lanes: usize, cpus: usize) -> usize {
    let wanted = if jobs == 0 { lanes.min(cpus) } else { jobs };
    wanted.clamp(1, lanes.max(1))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ralph::event::CompletedVia;

    fn id(s: &str) -> TaskId {
        TaskId::from(s)
    }

    #[test]
    fn a_failure_retries_until_the_budget_is_spent() {
        let failed = Outcome::Failed {
            reason: "tests red".into(),
        };
        assert_eq!(
            after_attempt(&failed, 0, 2),
            AfterAttempt::Retry {
                reason: Some("tests red".into())
            }
        );
        assert_eq!(
            after_attempt(&failed, 1, 2),
            AfterAttempt::Retry {
                reason: Some("tests red".into())
            }
        );
        assert_eq!(after_attempt(&failed, 2, 2), AfterAttempt::Exhausted);
        assert_eq!(after_attempt(&failed, 0, 0), AfterAttempt::Exhausted);
    }

    #[test]
    fn spectrs_own_failure_stops_the_run_whatever_the_budget_and_is_not_counted() {
        let own = Outcome::GitError {
            detail: "checkpoint failed: cannot lock ref".into(),
        };
        for (used, max) in [(0, 3), (0, 0), (5, 3)] {
            assert_eq!(after_attempt(&own, used, max), AfterAttempt::Fatal);
        }
        assert!(!own.counts_as_attempt());
        assert_eq!(own.fault(), Fault::Spectr);
        // The agent's own failures are the only ones its retries are for.
        let agents = [
            Outcome::Failed { reason: "x".into() },
            Outcome::Abnormal { detail: "x".into() },
            Outcome::TimedOut { detail: "x".into() },
            Outcome::VerifyFailed { reason: "x".into() },
        ];
        for o in &agents {
            assert_eq!(o.fault(), Fault::Agent, "{o:?}");
            assert!(o.counts_as_attempt());
        }
    }

    #[test]
    fn a_conflict_is_resolved_without_using_a_retry() {
        let conflict = Outcome::Conflict {
            files: vec!["a.txt".into()],
            reason: "a.txt changed in lane 2".into(),
            work: None,
        };
        let resolve = AfterAttempt::Resolve {
            reason: "a.txt changed in lane 2".into(),
        };
        assert_eq!(after_attempt(&conflict, 0, 1), resolve);
        // Even with the retries spent: a conflict is not the agent's failure.
        assert_eq!(after_attempt(&conflict, 1, 1), resolve);
        assert_eq!(after_attempt(&conflict, 0, 0), resolve);
        assert!(!conflict.counts_as_attempt());
    }

    #[test]
    fn conflicts_have_their_own_limit() {
        assert!(!conflicts_spent(1, 3));
        assert!(!conflicts_spent(3, 3));
        assert!(conflicts_spent(4, 3));
        assert!(conflicts_spent(1, 0));
    }

    #[test]
    fn an_abnormal_end_retries_without_a_reason() {
        let abnormal = Outcome::Abnormal {
            detail: "exit 1".into(),
        };
        assert_eq!(
            after_attempt(&abnormal, 0, 3),
            AfterAttempt::Retry { reason: None }
        );
    }

    #[test]
    fn stops_and_limits_never_use_the_budget() {
        for (action, want) in [
            (StopAction::Restart, AfterAttempt::Restart),
            (StopAction::Skip, AfterAttempt::Skip),
            (StopAction::Quit, AfterAttempt::Quit),
        ] {
            // Even with the budget long spent.
            assert_eq!(after_attempt(&Outcome::Stopped { action }, 9, 0), want);
        }
        assert_eq!(
            after_attempt(&Outcome::RateLimited { resets_at: Some(5) }, 9, 0),
            AfterAttempt::RateLimited { resets_at: Some(5) }
        );
        assert_eq!(
            after_attempt(
                &Outcome::Completed {
                    via: CompletedVia::Signal
                },
                9,
                0
            ),
            AfterAttempt::Done
        );
    }

    #[test]
    fn a_key_pressed_while_the_attempt_ended_otherwise_still_counts() {
        let failed = AfterAttempt::Retry {
            reason: Some("verify: 1 test failed".into()),
        };
        let skip = Control::Skip(None);
        let restart = Control::Restart(None);
        assert_eq!(
            with_request(failed.clone(), Some(&skip)),
            AfterAttempt::Skip
        );
        assert_eq!(
            with_request(AfterAttempt::Exhausted, Some(&skip)),
            AfterAttempt::Skip
        );
        // A retry follows anyway; a restart adds nothing to it.
        assert_eq!(with_request(failed.clone(), Some(&restart)), failed);
        assert_eq!(
            with_request(AfterAttempt::Exhausted, Some(&restart)),
            AfterAttempt::Restart
        );
        // Finished or stopping: the request comes too late.
        assert_eq!(
            with_request(AfterAttempt::Done, Some(&skip)),
            AfterAttempt::Done
        );
        assert_eq!(
            with_request(AfterAttempt::Quit, Some(&restart)),
            AfterAttempt::Quit
        );
        assert_eq!(with_request(failed.clone(), None), failed);
    }

    #[test]
    fn rate_limit_waits_are_bounded() {
        assert_eq!(rate_limit_wait(None, 100), 60);
        assert_eq!(rate_limit_wait(Some(160), 100), 65);
        // A reset in the past: just the margin.
        assert_eq!(rate_limit_wait(Some(10), 100), 5);
        assert_eq!(rate_limit_wait(Some(u64::MAX), 0), 6 * 3600);
    }

    #[test]
    fn keys_go_to_the_only_running_task_or_the_named_one() {
        let busy = vec![(0, id("1.2")), (1, id("2.1"))];
        assert_eq!(route(None, &busy[..1]), Route::Slot(0));
        assert_eq!(route(None, &busy), Route::Ambiguous);
        assert_eq!(route(Some(&id("2.1")), &busy), Route::Slot(1));
        assert_eq!(route(Some(&id("3.1")), &busy), Route::NothingRunning);
        assert_eq!(route(None, &[]), Route::NothingRunning);
    }

    #[test]
    fn free_slots_take_ready_lanes_in_order_once() {
        let ready = vec![id("1.2"), id("2.1"), id("3.1")];
        assert_eq!(to_start(&ready, &[], 2), vec![id("1.2"), id("2.1")]);
        assert_eq!(to_start(&ready, &[id("1.2")], 1), vec![id("2.1")]);
        assert_eq!(to_start(&ready, &[id("1.2")], 0), Vec::<TaskId>::new());
        assert_eq!(
            to_start(&ready, &[id("2.1")], 5),
            vec![id("1.2"), id("3.1")]
        );
    }

    fn three_lanes() -> crate::model::TaskSet {
        let dir = tempfile::tempdir().unwrap();
        let text = r#"{"version": 1, "tasks": [
            {"id": "1.1", "section": "A", "description": "a", "status": "pending"},
            {"id": "1.2", "section": "A", "description": "b", "status": "pending"},
            {"id": "2.1", "section": "B", "description": "c", "status": "pending"},
            {"id": "2.2", "section": "B", "description": "d", "status": "pending"},
            {"id": "3.1", "section": "C", "description": "e", "status": "pending"}
        ]}"#;
        std::fs::write(dir.path().join("tasks.jsonc"), text).unwrap();
        crate::model::TaskSet::load(dir.path()).unwrap()
    }

    #[test]
    fn next_is_what_the_freed_slots_pick() {
        let tasks = three_lanes();
        let graph = TaskGraph::new(&tasks);
        let status = |id: &TaskId| tasks.task(id).map_or(TaskStatus::Completed, |t| t.status);
        let none = BTreeSet::new();
        let from = Pickable {
            graph: &graph,
            status: &status,
            skipped: &none,
            selection: None,
        };
        // Nothing runs: what a run starts first.
        assert_eq!(next_to_start(&from, &[], 1), vec![id("1.1")]);
        assert_eq!(next_to_start(&from, &[], 2), vec![id("1.1"), id("2.1")]);
        // One slot running 1.1: 1.2 follows (lane order), not 2.1.
        assert_eq!(next_to_start(&from, &[id("1.1")], 1), vec![id("1.2")]);
        // Two slots running 1.1 and 2.1: each lane's next, 3.1 after them.
        assert_eq!(
            next_to_start(&from, &[id("1.1"), id("2.1")], 2),
            vec![id("1.2"), id("2.2")]
        );
        // Skipped tasks are never next; the selection limits the pick.
        let skipped: BTreeSet<TaskId> = [id("1.2")].into();
        let only: BTreeSet<TaskId> = [id("1.1"), id("3.1")].into();
        let from = Pickable {
            skipped: &skipped,
            selection: Some(&only),
            ..from
        };
        assert_eq!(next_to_start(&from, &[id("1.1")], 1), vec![id("3.1")]);
        assert_eq!(pick(&from, &[id("1.1")], 1), vec![id("3.1")]);
    }

    #[test]
    fn jobs_zero_means_one_slot_per_lane_up_to_the_cpus() {
        assert_eq!(slots_for(0, 3, 8), 3);
        assert_eq!(slots_for(0, 8, 2), 2);
        assert_eq!(slots_for(4, 2, 8), 2);
        assert_eq!(slots_for(1, 5, 8), 1);
        assert_eq!(slots_for(0, 0, 8), 1);
    }
}
