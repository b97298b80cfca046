//! A task out of retries: the policy decides, or a person is asked, one
//! question at a time, while the rest of the run goes on.

use super::*;

impl Machine {
    /// Retries ran out: the policy decides, or the person is asked (and the
    /// run goes on meanwhile).
    pub(super) fn exhausted(&mut self, id: &TaskId, outcome: &Outcome) {
        // Waiting for a person (or leaving): the files it reserved are free.
        self.reserve.release(id);
        let go = self.reserve.grants();
        self.merge_go(go);
        let choice = match self.rules.on_exhaust {
            ExhaustPolicy::Retry => ExhaustChoice::Retry,
            ExhaustPolicy::Skip => ExhaustChoice::Skip,
            ExhaustPolicy::Abort => ExhaustChoice::Abort,
            ExhaustPolicy::Prompt => {
                if self.tasks.task(id).is_none() {
                    ExhaustChoice::Abort
                } else {
                    self.to_ask.push_back((id.clone(), outcome.clone()));
                    self.ask_next();
                    return;
                }
            }
        };
        self.apply_choice(id, choice, outcome);
    }

    pub(super) fn ask_next(&mut self) {
        // Not over an open `Quit?`: it is asked once that is answered.
        if self.asking.is_some() || self.end.is_some() || self.holding {
            return;
        }
        while let Some((id, last)) = self.to_ask.pop_front() {
            let Some(task) = self.tasks.task(&id).cloned() else {
                continue;
            };
            self.record(LoopEvent::Question {
                task: id.clone(),
                reason: last.describe(),
            });
            self.asking = Some(id);
            self.out.push(Effect::Ask { task, last });
            return;
        }
    }

    pub(super) fn on_answer(&mut self, id: &TaskId, choice: Option<ExhaustChoice>) {
        if self.asking.as_ref() != Some(id) {
            return;
        }
        self.asking = None;
        self.look = true;
        let answer = match choice {
            Some(ExhaustChoice::Retry) => "retry",
            Some(ExhaustChoice::Skip) => "skip",
            Some(ExhaustChoice::Abort) => "abort",
            None => "none",
        };
        self.record(LoopEvent::Answered {
            task: id.clone(),
            answer: answer.into(),
        });
        if self.end.is_some() {
            return;
        }
        let last = self
            .session
            .record(id)
            .and_then(|r| r.attempts.iter().rev().find_map(|a| a.outcome.clone()))
            .unwrap_or(Outcome::Abnormal {
                detail: "no attempt left".into(),
            });
        match choice {
            Some(choice) => self.apply_choice(id, choice, &last),
            // Ctrl+C at the question, or the terminal went away: a stop,
            // as `q` is; the session is kept.
            None => self.stop(RunEnd::Interrupted),
        }
        self.ask_next();
    }

    fn apply_choice(&mut self, id: &TaskId, choice: ExhaustChoice, outcome: &Outcome) {
        match choice {
            ExhaustChoice::Retry => {
                let rec = self.session.record_mut(id);
                rec.budget_start = rec.counted_attempts;
                rec.conflicts_from = rec.attempts.last().map_or(0, |a| a.attempt);
                self.retry(id, outcome.retry_context().map(str::to_string));
            }
            ExhaustChoice::Skip => {
                // A conflict uses no retry: name the limit that ran out.
                let conflicts = self.session.record(id).map_or(0, |r| r.conflicts());
                let reason = if matches!(outcome, Outcome::Conflict { .. })
                    && decide::conflicts_spent(conflicts, self.rules.max_conflicts)
                {
                    format!(
                        "resolve attempts exhausted (--max-conflicts {}): {}",
                        self.rules.max_conflicts,
                        outcome.describe()
                    )
                } else {
                    format!("retries exhausted ({})", outcome.describe())
                };
                self.skip(id, &reason);
            }
            ExhaustChoice::Abort => {
                let record = self.session.record(id);
                let attempts = record.map_or(0, |r| r.counted_attempts);
                let runs =
                    record.map_or(0, |r| u32::try_from(r.attempts.len()).unwrap_or(u32::MAX));
                self.fail(RunError::OutOfRetries {
                    task: id.clone(),
                    attempts,
                    runs,
                    last: outcome.describe(),
                });
            }
        }
    }
}
