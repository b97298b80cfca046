//! `ralph: fallback:`: a task whose agent hit a rate, usage or spend limit
//! resetting further away than `--max-rate-wait` runs its next attempt on
//! the next agent of the list at once, not counted; each attempt starts on
//! the first agent of [its own, the fallbacks...] not at a limit, so its
//! own agent is used again once its limit has reset.

use super::*;

impl Machine {
    /// The label of `id`'s own agent (its route's, else the run's).
    fn own_agent(&self, id: &TaskId) -> &str {
        self.rules
            .agents
            .routed
            .get(id)
            .map_or(self.rules.agents.own.as_str(), String::as_str)
    }

    fn free(&self, label: &str) -> bool {
        self.limited
            .get(label)
            .is_none_or(|&until| until <= self.epoch_now)
    }

    /// The agent the next attempt at `id` runs on: None, its own (also when
    /// every agent is at a limit: the wait is then its own's), or the
    /// first fallback not at one. Said when it moves to another agent.
    pub(super) fn agent_for(&mut self, id: &TaskId) -> Option<usize> {
        let own = self.own_agent(id).to_owned();
        let choice = if self.rules.agents.fallback.is_empty() || self.free(&own) {
            None
        } else {
            (0..self.rules.agents.fallback.len())
                .find(|&i| self.free(&self.rules.agents.fallback[i]))
        };
        let before = self.on_fallback.insert(id.clone(), choice).flatten();
        if let Some(i) = choice
            && before != Some(i)
        {
            let from = match before {
                Some(b) => self.rules.agents.fallback[b].clone(),
                None => own.clone(),
            };
            self.record(LoopEvent::AgentFallback {
                task: id.clone(),
                from: from.clone(),
                to: self.rules.agents.fallback[i].clone(),
                until: self.limited.get(&from).copied(),
            });
        }
        choice
    }

    /// `id`'s attempt ended at a limit `wait_secs` away: when that is
    /// further than `--max-rate-wait` and another agent is free, the task
    /// goes on there at once (true); else it waits (false).
    pub(super) fn fall_back(&mut self, id: &TaskId, wait_secs: u64) -> bool {
        let agents = &self.rules.agents;
        if agents.fallback.is_empty() || wait_secs <= agents.max_rate_wait_secs {
            return false;
        }
        let used = match self.on_fallback.get(id).copied().flatten() {
            Some(i) => agents.fallback[i].clone(),
            None => self.own_agent(id).to_owned(),
        };
        let until = self.epoch_now.saturating_add(wait_secs);
        self.limited.insert(used.clone(), until);
        let own = self.own_agent(id).to_owned();
        let elsewhere = std::iter::once(&own)
            .chain(&self.rules.agents.fallback)
            .any(|label| self.free(label));
        if !elsewhere {
            return false;
        }
        self.retry(
            id,
            Some(format!(
                "{used} is at its limit for {}; another agent goes on (not counted)",
                wait_words(wait_secs)
            )),
        );
        true
    }
}

/// `1h 5m`, `58m`, `40s`.
fn wait_words(secs: u64) -> String {
    match (secs / 3600, secs % 3600 / 60) {
        (0, 0) => format!("{secs}s"),
        (0, m) => format!("{m}m"),
        (h, m) => format!("{h}h {m}m"),
    }
}
