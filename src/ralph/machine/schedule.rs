//! What starts where: picking ready tasks for free slots, lanes taking
//! turns in the user's tree, and the work a slot is handed.

use super::*;

impl Machine {
    /// Starts what may start on free slots: retries and answered questions
    /// first, then ready tasks, one per independent lane.
    pub(super) fn schedule(&mut self) {
        if !self.may_start() {
            return;
        }
        while let Some(slot) = self.free_slot() {
            // A resolve attempt waits until it holds its files, and goes
            // before a retry; a retry leaves a slot to each resolve
            // waiting (it could end up waiting for one's files itself).
            let reserve = &self.reserve;
            let free = self.slots.iter().filter(|s| s.busy.is_none()).count();
            let resolves = self.first.iter().filter(|t| reserve.reserves(t)).count();
            let resolve = self
                .first
                .iter()
                .position(|t| reserve.reserves(t) && reserve.may_resolve(t));
            let retry = || {
                (free > resolves)
                    .then(|| self.first.iter().position(|t| !reserve.reserves(t)))
                    .flatten()
            };
            let Some(at) = resolve.or_else(retry) else {
                break;
            };
            let Some(task) = self.first.remove(at) else {
                break;
            };
            let in_place = if self.reserve.reserves(&task) {
                self.may_resolve_in_place(&task)
            } else {
                self.may_run_in_place(&task)
            };
            self.dispatch(slot, &task, in_place);
            if !self.may_start() {
                return;
            }
        }
        if self.paused {
            return;
        }
        // Picked again while a pick went to a question instead of a slot
        // (a resumed task with its budget spent): the slot is still free.
        // Each round starts a task or queues a question, so it ends.
        loop {
            // A rate-limited task keeps its slot while it waits: the limit
            // is the provider's, so another task would only meet it too.
            let mut free: Vec<usize> = (0..self.slots.len())
                .filter(|&n| self.slots[n].busy.is_none())
                .collect();
            // So does a slot kept for each resolve attempt waiting for its
            // files: were every slot taken by merges waiting on those
            // files, nothing could ever free them.
            let resolves = self
                .first
                .iter()
                .filter(|t| self.reserve.reserves(t))
                .count();
            free.truncate(
                free.len()
                    .saturating_sub(self.waits.len())
                    .saturating_sub(resolves),
            );
            if free.is_empty() {
                return;
            }
            let built_for = self.tasks.structure_id();
            let graph = self.current_graph();
            let starts = self.take_turns(self.pick(&graph, free.len()));
            self.graph = Some((built_for, graph));
            if starts.is_empty() {
                return;
            }
            // The one task that can run, once the merged attempts still
            // finishing are over, runs in the user's tree: it waits for them.
            if matches!(starts.as_slice(), [only] if self.in_place_once_over(only)) {
                return;
            }
            let asked = self.to_ask.len() + usize::from(self.asking.is_some());
            let in_place = matches!(starts.as_slice(), [only] if self.may_run_in_place(only));
            for (slot, id) in free.into_iter().zip(starts) {
                if !self.may_start() {
                    return;
                }
                self.start(slot, &id, in_place);
            }
            if self.to_ask.len() + usize::from(self.asking.is_some()) == asked {
                return;
            }
        }
    }

    /// Lanes hot on a file take turns: of the picked tasks, those whose
    /// lane must wait for another hot lane's running task are left out.
    pub(super) fn take_turns(&self, picked: Vec<TaskId>) -> Vec<TaskId> {
        if !self.parallel() {
            return picked;
        }
        let mut running: Vec<String> = self
            .slots
            .iter()
            .filter(|s| !s.merged)
            .filter_map(|s| s.busy.as_ref().map(lane_key))
            .collect();
        let mut starts = Vec::new();
        for id in picked {
            let lane = lane_key(&id);
            if self.reserve.must_wait(&lane, &running) {
                continue;
            }
            running.push(lane);
            starts.push(id);
        }
        starts
    }

    /// A reservation whose task will not run again soon (gone from the
    /// tasks files, or left the run some other way) must not hold other
    /// lanes' merges: it is dropped.
    pub(super) fn release_orphans(&mut self) {
        let live: BTreeSet<TaskId> = self
            .slots
            .iter()
            .filter_map(|s| s.busy.clone())
            .chain(self.first.iter().cloned())
            .chain(self.waits.keys().cloned())
            .collect();
        if self.reserve.drop_all_but(&live) {
            let go = self.reserve.grants();
            self.merge_go(go);
            self.look = true;
        }
    }

    pub(super) fn merge_go(&mut self, slots: Vec<usize>) {
        for slot in slots {
            self.out.push(Effect::MergeGo { slot });
        }
    }

    pub(super) fn free_slot(&self) -> Option<usize> {
        self.slots.iter().position(|s| s.busy.is_none())
    }

    /// Tasks the graph must not hand out again: running, waiting, queued,
    /// or waiting for an answer.
    pub(super) fn taken(&self) -> Vec<TaskId> {
        self.slots
            .iter()
            .filter_map(|s| s.busy.clone())
            .chain(self.waits.keys().cloned())
            .chain(self.first.iter().cloned())
            .chain(self.asking.iter().cloned())
            .chain(self.to_ask.iter().map(|(t, _)| t.clone()))
            .collect()
    }

    /// Task n of m: a retry keeps its task's place.
    pub(super) fn position(&mut self, id: &TaskId) -> (usize, usize) {
        let n = match self.started_tasks.iter().position(|t| t == id) {
            Some(i) => i + 1,
            None => {
                self.started_tasks.push(id.clone());
                self.started_tasks.len()
            }
        };
        (n, self.run_size.max(n))
    }

    /// The last attempt number the current retry budget allows, counting from
    /// `attempt` (uncounted attempts such as restarts push it further out).
    pub(super) fn max_attempts(&self, task: &TaskId, attempt: u32) -> u32 {
        let used = self.session.record(task).map_or(0, |r| r.budget_used());
        // Numbers from a hand-edited session file must not overflow.
        attempt.saturating_add(
            (self.rules.max_retries + 1)
                .saturating_sub(used)
                .saturating_sub(1),
        )
    }

    /// Starts `id` on `slot`, unless a resumed session arrives with its
    /// budget already spent (never a free try): then the exhaustion policy
    /// (or the person) decides first.
    pub(super) fn start(&mut self, slot: usize, id: &TaskId, in_place: bool) {
        let spent = self
            .session
            .record(id)
            .filter(|r| r.budget_used() > self.rules.max_retries)
            .map(|r| {
                r.attempts
                    .iter()
                    .rev()
                    .find_map(|a| a.outcome.clone())
                    .unwrap_or(Outcome::Abnormal {
                        detail: "no attempt left".into(),
                    })
            });
        match spent {
            Some(last) => self.exhausted(id, &last),
            None => self.dispatch(slot, id, in_place),
        }
    }

    /// Whether `id` may run in the user's own tree instead of a lane: its
    /// lane is hot on a file (lanes there only take turns, so a lane would
    /// add its refresh and merge to every turn), and nothing else runs,
    /// waits or holds a file. The tasks it is lent hold every other start
    /// until it ends, so no merge writes the tree meanwhile.
    pub(super) fn may_run_in_place(&self, id: &TaskId) -> bool {
        self.slots.iter().all(|s| s.busy.is_none())
            && self.reserve.is_idle()
            && self.in_place_but_for_slots(id)
    }

    /// Whether the resolve attempt of `id` (out of the queue, holding its
    /// files) may run in the user's own tree: nothing runs or merges, every
    /// other queued resolve waits for its files, and no task could start
    /// beside it (the lanes hot on its files wait for it anyway).
    pub(super) fn may_resolve_in_place(&mut self, id: &TaskId) -> bool {
        let others_wait = self
            .first
            .iter()
            .all(|t| self.reserve.reserves(t) && !self.reserve.may_resolve(t));
        if !(self.in_place_allowed()
            && self.slots.iter().all(|s| s.busy.is_none())
            && self.reserve.nothing_merging()
            && others_wait)
        {
            return false;
        }
        let graph = self.current_graph();
        let lane = [lane_key(id)];
        let beside: Vec<TaskId> = self
            .pick(&graph, self.slots.len())
            .into_iter()
            .filter(|t| t != id && !self.reserve.must_wait(&lane_key(t), &lane))
            .collect();
        self.graph = Some((self.tasks.structure_id(), graph));
        beside.is_empty()
    }

    /// Whether `id` would run in the user's tree but for attempts whose
    /// work is merged and that are still finishing (their bookkeeping may
    /// still write the user's change folder, the learnings file).
    pub(super) fn in_place_once_over(&self, id: &TaskId) -> bool {
        let busy = self.slots.iter().filter(|s| s.busy.is_some());
        busy.clone().count() > 0
            && busy.clone().all(|s| s.merged)
            && self.reserve.nothing_queued()
            && self.in_place_but_for_slots(id)
    }

    pub(super) fn in_place_but_for_slots(&self, id: &TaskId) -> bool {
        self.in_place_allowed() && self.first.is_empty() && self.reserve.is_hot(&lane_key(id))
    }

    /// Lanes (local ones) and no rate-limited task waiting for a slot.
    pub(super) fn in_place_allowed(&self) -> bool {
        self.parallel() && self.rules.in_place && self.waits.is_empty()
    }

    /// A task ran in the user's tree and completed: the hot files it wrote
    /// count as a merge's would (the lane cools on those it left alone; its
    /// other files are not looked at, which only leaves them without a last
    /// writer). None (an executor that does not say): the lane stays as hot
    /// as it was, which only keeps it taking turns.
    pub(super) fn wrote_in_place(&mut self, task: &TaskId, files: Option<Vec<String>>) {
        let lane = lane_key(task);
        if let Some(files) = files {
            self.reserve.merged(&lane, &files);
        }
        let summary = self.lanes.entry(lane.clone()).or_default();
        summary.lane = lane;
        if !summary.in_place.contains(task) {
            summary.in_place.push(task.clone());
        }
    }

    /// Hands the next attempt at `id` to `slot`'s worker; `in_place`: in the
    /// user's own tree (see [`Machine::may_run_in_place`]).
    pub(super) fn dispatch(&mut self, slot: usize, id: &TaskId, in_place: bool) {
        if self.end.is_some() {
            return;
        }
        // Checked as an attempt would start: a run whose last attempt
        // spent the budget is still complete.
        if self.over_budget() {
            self.out_of_budget();
            return;
        }
        let Some(task) = self.tasks.task(id) else {
            self.record(LoopEvent::Notice {
                level: NoticeLevel::Warn,
                message: format!("task {id} is no longer in the tasks files; moving on"),
            });
            return;
        };
        let (section, description) = (task.section.clone(), task.description.clone());
        let reserved = self.reserve.reserves(id);
        let parallel = self.parallel();
        let rec = self.session.record_mut(id);
        // A resolve attempt: the task's last conflict is still open (a
        // failed resolve, a crash or a rate limit since does not make it
        // start afresh).
        let resolving = parallel && (reserved || rec.open_conflict().is_some());
        let attempt = rec.next_attempt();
        let retry_reason = rec.last_reason.clone();
        // The work that conflicted, applied again for the agent to resolve.
        let resolve = match rec.open_conflict() {
            Some(Outcome::Conflict {
                work: Some(work),
                reason,
                ..
            }) => Some(Resolve {
                work: work.clone(),
                reason: reason.clone(),
            }),
            _ => None,
        }
        .filter(|_| resolving);
        let hot_files = if in_place {
            self.reserve.hot_files_of(&lane_key(id))
        } else {
            Vec::new()
        };
        if in_place && !std::mem::replace(&mut self.told_in_place, true) {
            let files = hot_files.join(", ");
            self.record(LoopEvent::Notice {
                level: NoticeLevel::Info,
                message: format!(
                    "lanes take turns on {files}: while only one task can run, it runs in your tree (no lane to refresh, nothing to merge)"
                ),
            });
        }
        let fallback = self.agent_for(id);
        // Lent as a copy: decisions taken meanwhile (a question answered,
        // a skip) still see the tasks as they were when it started.
        let tasks = (!parallel || in_place).then(|| {
            self.lent = true;
            self.tasks.clone()
        });
        let work = Work {
            task: id.clone(),
            section,
            description,
            attempt,
            max_attempts: self.max_attempts(id, attempt),
            retry_reason,
            resolve,
            position: self.position(id),
            tasks,
            controls: None,
            in_place,
            hot_files,
            wrote: None,
            fallback,
        };
        self.slots[slot].busy = Some(id.clone());
        self.slots[slot].requested = None;
        self.slots[slot].merged = false;
        self.slots[slot].in_place = in_place;
        self.out.push(Effect::Start {
            slot,
            work: Box::new(work),
        });
    }
}
