//! How the run ends and what it adds up to: the budget, the stop, the
//! totals, the tasks out of retries, the lanes' summary.

use super::*;

impl Machine {
    pub(super) fn over_budget(&self) -> bool {
        self.rules.budget.reached(&self.spent).is_some()
    }

    /// The budget is spent: like a pause, the running attempts finish and
    /// nothing new starts; then the run ends, its session kept.
    pub(super) fn out_of_budget(&mut self) {
        self.record(LoopEvent::BudgetReached {
            budget: self.rules.budget,
            spent: self.spent,
        });
        self.end = Some(RunEnd::Budget);
        self.wind_down();
    }

    /// The budget and what was spent, when the run has one.
    pub fn budget_use(&self) -> Option<BudgetUse> {
        self.rules.budget.is_set().then_some(BudgetUse {
            budget: self.rules.budget,
            spent: self.spent,
        })
    }

    /// Ends the run: nothing new starts, running agents are told to stop.
    pub(super) fn stop(&mut self, end: RunEnd) {
        // A stop or an error while the budget's end waits for the running
        // attempts says more than the budget does.
        if self.end.is_none() || self.end == Some(RunEnd::Budget) {
            self.end = Some(end);
        }
        for slot in 0..self.slots.len() {
            if self.slots[slot].busy.is_some() {
                self.out.push(Effect::Tell {
                    slot,
                    control: Control::Quit,
                });
            }
        }
        self.wind_down();
    }

    /// Nothing waiting starts any more.
    pub(super) fn wind_down(&mut self) {
        self.waits.clear();
        self.first.clear();
        self.to_ask.clear();
        let go = self.reserve.stop();
        self.merge_go(go);
    }

    /// Totals across every run of this session. `elapsed`: this run's time.
    pub fn totals(&self, elapsed: Duration) -> Totals {
        let mut t = Totals {
            duration_ms: self.session.run_time_ms + elapsed.as_millis() as u64,
            ..Totals::default()
        };
        let graph = TaskGraph::new(&self.tasks);
        for rec in self.session.tasks.values() {
            match rec.state {
                RunTaskState::Completed => t.completed += 1,
                RunTaskState::Failed => t.failed += 1,
                RunTaskState::Skipped => t.skipped += 1,
                RunTaskState::Pending | RunTaskState::Running => {}
            }
            for a in &rec.attempts {
                t.attempts += 1;
                t.resolve_attempts += usize::from(a.resolving);
                t.conflicts += usize::from(matches!(a.outcome, Some(Outcome::Conflict { .. })));
                if let Some(r) = &a.receipt {
                    crate::ralph::event::add_receipt(&mut t, r);
                }
            }
        }
        // A task judged completed whose status the tasks file lacks (it could
        // not be written) is counted completed above, not remaining too.
        let done_with = |id: &TaskId| {
            self.session.record(id).is_some_and(|r| {
                matches!(
                    r.state,
                    RunTaskState::Skipped | RunTaskState::Failed | RunTaskState::Completed
                )
            })
        };
        t.remaining = tasks_to_run(&self.tasks, &graph, self.rules.selection.as_ref())
            .iter()
            .filter(|id| !done_with(id))
            .count();
        t
    }

    /// Tasks that failed with their retries used up and nothing chosen for
    /// them: a resume under the same settings meets them first.
    pub fn out_of_retries(&self) -> Vec<TaskId> {
        self.session
            .tasks
            .iter()
            .filter(|(_, r)| {
                r.state == RunTaskState::Failed && r.budget_used() > self.rules.max_retries
            })
            .map(|(id, _)| id.clone())
            .collect()
    }

    /// Files that kept two lanes in conflict, for the summary.
    pub fn hot_files(&self) -> Vec<crate::ralph::event::HotFile> {
        self.reserve.hot_files()
    }

    /// What merged and conflicted per lane, for the summary.
    pub fn take_lanes(&mut self) -> Vec<LaneSummary> {
        std::mem::take(&mut self.lanes).into_values().collect()
    }
}
