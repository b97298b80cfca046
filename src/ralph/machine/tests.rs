//! The run's rules, as the README states them, against the state machine
//! alone: a fake clock, a fake shell that performs the tasks-file effects on
//! a scratch folder, and attempts that end when the test says so.

use super::*;
use crate::agent::receipt::Receipt;
use crate::ralph::event::{CompletedVia, StopAction};
use crate::ralph::session::SessionOptions;

fn id(s: &str) -> TaskId {
    TaskId::from(s)
}

/// A change with the given leaf ids, all pending.
fn change(ids: &[&str]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let tasks: Vec<String> = ids
        .iter()
        .map(|t| {
            format!(
                r#"{{"id": "{t}", "section": "S{}", "description": "task {t}", "status": "pending"}}"#,
                t.split('.').next().unwrap()
            )
        })
        .collect();
    std::fs::write(
        dir.path().join("tasks.jsonc"),
        format!("{{\"version\": 1, \"tasks\": [{}]}}", tasks.join(",\n")),
    )
    .unwrap();
    dir
}

fn rules(slots: usize, max_retries: u32, on_exhaust: ExhaustPolicy) -> Rules {
    Rules {
        max_retries,
        max_conflicts: 10,
        on_exhaust,
        selection: None,
        slots,
        budget: Budget::default(),
        in_place: true,
        commit: false,
        agents: Agents::default(),
    }
}

struct Sim {
    m: Machine,
    at: Instant,
    epoch: u64,
    dir: tempfile::TempDir,
    /// Tasks lent to the attempt running without lanes.
    lent: Option<TaskSet>,
    events: Vec<LoopEvent>,
    /// (slot, task, attempt) of every start, in order.
    starts: Vec<(usize, TaskId, u32)>,
    /// The attempt running on each slot.
    running: BTreeMap<usize, (TaskId, u32)>,
    tells: Vec<(usize, Control)>,
    asks: Vec<TaskId>,
    withdrawn: Vec<TaskId>,
    /// Each start's task and the fallback it runs on.
    on_agent: Vec<(TaskId, Option<usize>)>,
    reads: usize,
    /// Task n of m, per start.
    places: Vec<(usize, usize)>,
    /// Slots told their merge may go, in order, and those told to wait.
    merge_go: Vec<usize>,
    merge_held: Vec<usize>,
    /// Tasks whose attempt was started as a resolve attempt.
    resolving: Vec<TaskId>,
    /// The files the next completed task's merge writes.
    writes: Vec<String>,
    /// What each attempt's receipt says it cost.
    cost: Option<f64>,
    /// Slots whose attempt runs in the user's tree, and every task started so.
    in_place: BTreeSet<usize>,
    in_place_starts: Vec<TaskId>,
    /// Every effect's kind, in order (`record:<event>`, `commit:<task>`,
    /// `write:<task>`).
    trail: Vec<String>,
    /// The shell's commit fails (the branch moved under the run).
    commit_fails: bool,
}

impl Sim {
    fn new(ids: &[&str], rules: Rules) -> Sim {
        Sim::resumed(ids, rules, &[])
    }

    /// A run resuming a session in which each of `spent` had one attempt,
    /// which failed: with `max_retries` 0, its retries are used up.
    fn resumed(ids: &[&str], rules: Rules, spent: &[&str]) -> Sim {
        Sim::with_ended(ids, rules, spent, Outcome::Failed { reason: "x".into() })
    }

    /// A run resuming a session in which each of `ended` had one attempt,
    /// which ended as `outcome`.
    fn with_ended(ids: &[&str], rules: Rules, ended: &[&str], outcome: Outcome) -> Sim {
        let dir = change(ids);
        let tasks = TaskSet::load(dir.path()).unwrap();
        let mut session = Session::new(
            "c",
            SessionOptions {
                agent: "fake".into(),
                max_retries: rules.max_retries,
                checkpoints: true,
                verify: None,
                commit_branch: None,
                commit_base: None,
            },
            None,
        );
        for t in ended {
            session.apply(&LoopEvent::TaskStarted {
                task: id(t),
                section: String::new(),
                description: String::new(),
                attempt: 1,
                max_attempts: 1,
                transcript: String::new(),
                index: 1,
                count: ids.len(),
                lane: None,
                worktree: None,
            });
            session.apply(&LoopEvent::TaskFailed {
                task: id(t),
                attempt: 1,
                outcome: outcome.clone(),
                receipt: Receipt::none(),
            });
        }
        let mut sim = Sim {
            m: Machine::new(rules, tasks, session),
            at: Instant::now(),
            epoch: 1_000_000,
            dir,
            lent: None,
            events: Vec::new(),
            starts: Vec::new(),
            running: BTreeMap::new(),
            tells: Vec::new(),
            asks: Vec::new(),
            withdrawn: Vec::new(),
            on_agent: Vec::new(),
            reads: 0,
            places: Vec::new(),
            merge_go: Vec::new(),
            merge_held: Vec::new(),
            resolving: Vec::new(),
            writes: Vec::new(),
            cost: None,
            in_place: BTreeSet::new(),
            in_place_starts: Vec::new(),
            trail: Vec::new(),
            commit_fails: false,
        };
        sim.feed(Input::Begin);
        sim
    }

    fn now(&self) -> Now {
        Now {
            at: self.at,
            epoch_secs: self.epoch,
        }
    }

    fn advance(&mut self, d: Duration) {
        self.at += d;
        self.epoch += d.as_secs();
        self.feed(Input::Tick);
    }

    /// Hands `input` to the machine and performs the effects the way the
    /// shell does, feeding their results back.
    fn feed(&mut self, input: Input) {
        let mut inputs = VecDeque::from([input]);
        while let Some(input) = inputs.pop_front() {
            let now = self.now();
            for effect in self.m.handle(input, now) {
                match effect {
                    Effect::Record(e) | Effect::Show(e) => {
                        if let LoopEvent::TaskCompleted { task, .. } = &e {
                            self.trail.push(format!("completed:{task}"));
                        }
                        self.events.push(e);
                    }
                    Effect::Commit { task, .. } => {
                        self.trail.push(format!("commit:{task}"));
                        if self.commit_fails {
                            inputs.push_back(Input::CommitFailed {
                                message: format!("task {task}'s commit: main no longer holds abc"),
                            });
                        }
                    }
                    Effect::Start { slot, mut work } => {
                        if let Some(t) = work.tasks.take() {
                            self.lent = Some(t);
                        }
                        self.starts.push((slot, work.task.clone(), work.attempt));
                        self.on_agent.push((work.task.clone(), work.fallback));
                        if work.resolve.is_some() {
                            self.resolving.push(work.task.clone());
                        }
                        if work.in_place {
                            assert!(self.lent.is_some(), "in place without the tasks lent");
                            self.in_place.insert(slot);
                            self.in_place_starts.push(work.task.clone());
                        }
                        self.places.push(work.position);
                        let prev = self.running.insert(slot, (work.task.clone(), work.attempt));
                        assert!(prev.is_none(), "slot {slot} started twice: {prev:?}");
                    }
                    Effect::Tell { slot, control } => self.tells.push((slot, control)),
                    Effect::MergeGo { slot } => self.merge_go.push(slot),
                    Effect::MergeHeld { slot } => self.merge_held.push(slot),
                    Effect::WriteStatus { task, status } => {
                        self.trail.push(format!("write:{task}:{status}"));
                        self.m.tasks_mut().set_status(&task, status).unwrap();
                        inputs.push_back(Input::StatusWritten);
                    }
                    Effect::ReadTasks => {
                        self.reads += 1;
                        let error = self
                            .m
                            .tasks_mut()
                            .refresh()
                            .err()
                            .map(|source| RunError::TasksUnreadable { source });
                        inputs.push_back(Input::TasksRead { error });
                    }
                    Effect::Ask { task, .. } => self.asks.push(task.id),
                    Effect::Withdraw { task } => self.withdrawn.push(task),
                }
            }
        }
    }

    /// The attempt on `slot` reports its start, as a worker does.
    fn started(&mut self, slot: usize) -> (TaskId, u32) {
        let (task, attempt) = self.running[&slot].clone();
        self.feed(Input::Worker {
            slot,
            event: LoopEvent::TaskStarted {
                task: task.clone(),
                section: String::new(),
                description: String::new(),
                attempt,
                max_attempts: 0,
                transcript: String::new(),
                index: 1,
                count: 1,
                lane: None,
                worktree: None,
            },
        });
        (task, attempt)
    }

    /// The attempt on `slot` ends with `outcome`.
    fn end(&mut self, slot: usize, outcome: Outcome) -> TaskId {
        let (task, attempt) = self.started(slot);
        let completed = matches!(outcome, Outcome::Completed { .. });
        let mut tasks = self.lent.take();
        let receipt = Receipt {
            cost_usd: self.cost,
            ..Receipt::none()
        };
        // Without lanes the attempt writes the status itself. It may fail
        // (a broken file): the attempt goes on by its signal.
        if completed && let Some(t) = tasks.as_mut() {
            let _ = t.set_status(&task, TaskStatus::Completed);
        }
        let event = if completed {
            LoopEvent::TaskCompleted {
                task: task.clone(),
                attempt,
                outcome: outcome.clone(),
                receipt,
            }
        } else {
            LoopEvent::TaskFailed {
                task: task.clone(),
                attempt,
                outcome: outcome.clone(),
                receipt,
            }
        };
        self.feed(Input::Worker { slot, event });
        let in_place = self.in_place.remove(&slot);
        let mut wrote = None;
        if completed && in_place {
            wrote = Some(std::mem::take(&mut self.writes));
        } else if completed && self.m.parallel() {
            let files = std::mem::take(&mut self.writes);
            self.feed(Input::Worker {
                slot,
                event: LoopEvent::Merged {
                    task: task.clone(),
                    attempt,
                    lane: lane_key(&task),
                    files,
                },
            });
        }
        self.running.remove(&slot);
        self.feed(Input::AttemptEnded {
            slot,
            task: task.clone(),
            report: AttemptReport {
                outcome,
                fatal: None,
            },
            tasks,
            wrote,
        });
        task
    }

    fn complete(&mut self, slot: usize) -> TaskId {
        self.end(
            slot,
            Outcome::Completed {
                via: CompletedVia::Status,
            },
        )
    }

    fn fail(&mut self, slot: usize) -> TaskId {
        self.end(
            slot,
            Outcome::Failed {
                reason: "tests red".into(),
            },
        )
    }

    fn key(&mut self, control: Control) {
        self.feed(Input::Control(control));
    }

    fn started_ids(&self) -> Vec<String> {
        self.starts.iter().map(|(_, t, _)| t.to_string()).collect()
    }

    fn slot_of(&self, task: &str) -> usize {
        *self
            .running
            .iter()
            .find(|(_, (t, _))| t.as_str() == task)
            .unwrap_or_else(|| panic!("{task} is not running: {:?}", self.running))
            .0
    }

    fn notices(&self) -> Vec<String> {
        self.events
            .iter()
            .filter_map(|e| match e {
                LoopEvent::Notice { message, .. } => Some(message.clone()),
                _ => None,
            })
            .collect()
    }
}

#[test]
fn tasks_run_in_order_one_at_a_time_and_the_run_completes() {
    let mut s = Sim::new(&["1.1", "1.2", "2.1"], rules(1, 2, ExhaustPolicy::Abort));
    assert_eq!(s.started_ids(), ["1.1"]);
    assert_eq!(s.m.finished(), None);
    s.complete(0);
    assert_eq!(s.started_ids(), ["1.1", "1.2"]);
    s.complete(0);
    s.complete(0);
    assert_eq!(s.started_ids(), ["1.1", "1.2", "2.1"]);
    assert_eq!(s.m.finished(), Some(RunEnd::Complete));
}

#[test]
fn without_lanes_the_tasks_are_lent_to_the_attempt_and_nothing_decides_meanwhile() {
    let mut s = Sim::new(&["1.1", "2.1"], rules(1, 2, ExhaustPolicy::Abort));
    assert!(s.lent.is_some(), "the attempt got the tasks");
    // A watch event while lent: read once they are back, not before.
    let reads = s.reads;
    s.feed(Input::TasksMayHaveChanged);
    assert_eq!(s.reads, reads);
    s.complete(0);
    assert_eq!(s.reads, reads + 1, "read once the tasks came back");
    assert_eq!(s.started_ids(), ["1.1", "2.1"]);
}

#[test]
fn the_tasks_are_read_only_when_told_they_may_have_changed() {
    let mut s = Sim::new(&["1.1", "1.2", "1.3"], rules(1, 0, ExhaustPolicy::Abort));
    assert_eq!(s.reads, 1, "once at the start");
    s.complete(0);
    s.complete(0);
    assert_eq!(s.reads, 1, "attempts hand back what they read");
    s.feed(Input::TasksMayHaveChanged);
    assert_eq!(s.reads, 1, "not while 1.3's attempt has them");
    s.complete(0);
    assert_eq!(s.reads, 2);
}

#[test]
fn independent_lanes_run_side_by_side_and_each_lane_in_order() {
    let mut s = Sim::new(
        &["1.1", "1.2", "2.1", "2.2"],
        rules(2, 0, ExhaustPolicy::Abort),
    );
    assert_eq!(s.started_ids(), ["1.1", "2.1"]);
    let slot = s.slot_of("2.1");
    s.complete(slot);
    assert_eq!(s.started_ids(), ["1.1", "2.1", "2.2"], "1.2 waits for 1.1");
    let slot = s.slot_of("1.1");
    s.complete(slot);
    assert_eq!(s.started_ids(), ["1.1", "2.1", "2.2", "1.2"]);
}

#[test]
fn a_lanes_completed_task_is_written_to_the_users_tasks_file_before_its_dependent_starts() {
    let mut s = Sim::new(&["1.1", "1.2", "2.1"], rules(2, 0, ExhaustPolicy::Abort));
    let slot = s.slot_of("1.1");
    s.complete(slot);
    let on_disk = TaskSet::load(s.dir.path()).unwrap();
    assert_eq!(
        on_disk.task(&id("1.1")).unwrap().status,
        TaskStatus::Completed
    );
    assert!(s.started_ids().contains(&"1.2".to_string()));
}

#[test]
fn a_failure_retries_the_same_task_first_until_the_budget_is_spent() {
    let mut s = Sim::new(&["1.1", "2.1"], rules(1, 2, ExhaustPolicy::Abort));
    s.fail(0);
    s.fail(0);
    assert_eq!(s.starts.last().unwrap().1, id("1.1"));
    assert_eq!(s.starts.last().unwrap().2, 3, "third attempt");
    let retries: Vec<u32> = s
        .events
        .iter()
        .filter_map(|e| match e {
            LoopEvent::Retry { next_attempt, .. } => Some(*next_attempt),
            _ => None,
        })
        .collect();
    assert_eq!(retries, [2, 3]);
    s.fail(0);
    assert_eq!(s.m.finished(), Some(RunEnd::Aborted), "abort policy");
    assert_eq!(s.started_ids(), ["1.1", "1.1", "1.1"], "2.1 never started");
}

#[test]
fn exhausted_with_skip_skips_the_task_and_its_dependents_and_goes_on() {
    let mut s = Sim::new(&["1.1", "1.2", "2.1"], rules(1, 0, ExhaustPolicy::Skip));
    s.fail(0);
    let skipped = s.events.iter().find_map(|e| match e {
        LoopEvent::TaskSkipped {
            task, dependents, ..
        } => Some((task.clone(), dependents.clone())),
        _ => None,
    });
    assert_eq!(skipped, Some((id("1.1"), vec![id("1.2")])));
    assert_eq!(s.started_ids(), ["1.1", "2.1"]);
    s.complete(0);
    assert_eq!(s.m.finished(), Some(RunEnd::Incomplete));
}

#[test]
fn exhausted_with_retry_renews_the_budget() {
    let mut s = Sim::new(&["1.1"], rules(1, 0, ExhaustPolicy::Retry));
    s.fail(0);
    s.fail(0);
    assert_eq!(s.started_ids(), ["1.1", "1.1", "1.1"]);
    s.complete(0);
    assert_eq!(s.m.finished(), Some(RunEnd::Complete));
}

#[test]
fn a_question_never_stalls_the_other_lanes() {
    let mut s = Sim::new(
        &["1.1", "1.2", "2.1", "2.2", "2.3"],
        rules(2, 0, ExhaustPolicy::Prompt),
    );
    let one = s.slot_of("1.1");
    s.fail(one);
    assert_eq!(s.asks, [id("1.1")]);
    assert!(
        s.events
            .iter()
            .any(|e| matches!(e, LoopEvent::Question { task, .. } if task.as_str() == "1.1"))
    );
    // Nobody answers; lane 2 goes on to its end.
    for _ in 0..3 {
        let slot = s.running.keys().next().copied().unwrap();
        s.complete(slot);
    }
    assert_eq!(s.started_ids(), ["1.1", "2.1", "2.2", "2.3"]);
    assert_eq!(s.m.finished(), None, "the question is still open");
    s.feed(Input::Answer {
        task: id("1.1"),
        choice: Some(ExhaustChoice::Skip),
    });
    assert_eq!(s.m.finished(), Some(RunEnd::Incomplete));
}

#[test]
fn an_answered_retry_starts_with_a_renewed_budget() {
    let mut s = Sim::new(&["1.1"], rules(1, 0, ExhaustPolicy::Prompt));
    s.fail(0);
    assert!(s.running.is_empty());
    s.feed(Input::Answer {
        task: id("1.1"),
        choice: Some(ExhaustChoice::Retry),
    });
    assert_eq!(s.started_ids(), ["1.1", "1.1"]);
    assert_eq!(s.starts[1].2, 2);
}

#[test]
fn a_signal_during_a_question_stops_the_run_without_waiting_for_the_answer() {
    let mut s = Sim::new(&["1.1", "2.1", "2.2"], rules(2, 0, ExhaustPolicy::Prompt));
    let one = s.slot_of("1.1");
    s.fail(one);
    assert_eq!(s.asks.len(), 1);
    s.key(Control::Quit);
    let two = s.slot_of("2.1");
    assert!(
        s.tells.contains(&(two, Control::Quit)),
        "the running agent is told to stop"
    );
    s.end(
        two,
        Outcome::Stopped {
            action: StopAction::Quit,
        },
    );
    assert_eq!(s.m.finished(), Some(RunEnd::Interrupted));
    assert_eq!(s.m.question_open(), Some(&id("1.1")), "left unanswered");
    assert_eq!(s.started_ids(), ["1.1", "2.1"]);
}

#[test]
fn an_unanswerable_question_stops_the_run_as_q_does() {
    let mut s = Sim::new(&["1.1", "2.1"], rules(1, 0, ExhaustPolicy::Prompt));
    s.fail(0);
    // 2.1 took the free slot meanwhile.
    assert_eq!(s.started_ids(), ["1.1", "2.1"]);
    s.feed(Input::Answer {
        task: id("1.1"),
        choice: None,
    });
    assert!(s.tells.contains(&(0, Control::Quit)));
    s.end(
        0,
        Outcome::Stopped {
            action: StopAction::Quit,
        },
    );
    assert_eq!(s.m.finished(), Some(RunEnd::Interrupted));
}

#[test]
fn two_questions_are_asked_one_after_the_other() {
    let mut s = Sim::new(&["1.1", "2.1"], rules(2, 0, ExhaustPolicy::Prompt));
    let a = s.slot_of("1.1");
    s.fail(a);
    let b = s.slot_of("2.1");
    s.fail(b);
    assert_eq!(s.asks, [id("1.1")], "one question at a time");
    s.feed(Input::Answer {
        task: id("1.1"),
        choice: Some(ExhaustChoice::Skip),
    });
    assert_eq!(s.asks, [id("1.1"), id("2.1")]);
    s.feed(Input::Answer {
        task: id("2.1"),
        choice: Some(ExhaustChoice::Abort),
    });
    assert_eq!(s.m.finished(), Some(RunEnd::Aborted));
}

#[test]
fn a_question_answered_elsewhere_is_withdrawn_and_a_stale_answer_counts_for_nothing() {
    let mut s = Sim::new(&["1.1", "2.1", "2.2"], rules(2, 0, ExhaustPolicy::Prompt));
    let a = s.slot_of("1.1");
    s.fail(a);
    assert_eq!(s.asks, [id("1.1")]);
    // An answer about a task nobody asked about changes nothing.
    s.key(Control::Answer {
        task: id("2.1"),
        choice: ExhaustChoice::Abort,
    });
    assert!(s.withdrawn.is_empty());
    assert_eq!(s.m.question_open(), Some(&id("1.1")));
    s.key(Control::Answer {
        task: id("1.1"),
        choice: ExhaustChoice::Skip,
    });
    assert_eq!(s.withdrawn, [id("1.1")]);
    assert_eq!(s.m.question_open(), None);
    assert!(s.events.iter().any(|e| matches!(e,
        LoopEvent::Answered { task, answer } if *task == id("1.1") && answer == "skip")));
    // The terminal's own answer, late: the question is no longer open.
    s.feed(Input::Answer {
        task: id("1.1"),
        choice: None,
    });
    assert_eq!(
        s.m.finished(),
        None,
        "a withdrawn question's answer stops nothing"
    );
    let b = s.slot_of("2.1");
    s.complete(b);
    let c = s.slot_of("2.2");
    s.complete(c);
    assert_eq!(s.m.finished(), Some(RunEnd::Incomplete));
}

fn with_fallback(mut r: Rules) -> Rules {
    r.agents = Agents {
        own: "claude".into(),
        routed: BTreeMap::from([(id("3.1"), "qwen".into())]),
        fallback: vec!["codex".into(), "gemini".into()],
        max_rate_wait_secs: 900,
    };
    r
}

#[test]
fn a_limit_an_hour_away_moves_the_task_to_the_next_agent_and_back_after_its_reset() {
    let mut s = Sim::new(
        &["1.1", "1.2", "1.3"],
        with_fallback(rules(1, 0, ExhaustPolicy::Abort)),
    );
    let reset = s.epoch + 3600;
    s.end(
        0,
        Outcome::RateLimited {
            resets_at: Some(reset),
        },
    );
    // On codex at once, not counted: no retry used (max retries 0).
    assert!(s.events.iter().any(|e| matches!(e,
        LoopEvent::AgentFallback { task, from, to, until }
            if *task == id("1.1") && from == "claude" && to == "codex" && *until == Some(reset + 5))));
    assert!(
        !s.events
            .iter()
            .any(|e| matches!(e, LoopEvent::RateLimitWait { .. }))
    );
    assert_eq!(s.on_agent, [(id("1.1"), None), (id("1.1"), Some(0))]);
    s.complete(0);
    // The next task starts before the reset: codex too.
    assert_eq!(s.on_agent.last(), Some(&(id("1.2"), Some(0))));
    // After claude's reset (the clock moved, nothing waited), the next
    // task starts on claude again.
    s.at += Duration::from_secs(3700);
    s.epoch += 3700;
    s.complete(0);
    assert_eq!(s.on_agent.last(), Some(&(id("1.3"), None)));
    s.complete(0);
    assert_eq!(s.m.finished(), Some(RunEnd::Complete));
}

#[test]
fn a_limit_resetting_soon_is_waited_for_and_a_routed_task_keeps_its_own_agent() {
    let mut s = Sim::new(
        &["1.1", "3.1"],
        with_fallback(rules(2, 0, ExhaustPolicy::Abort)),
    );
    let a = s.slot_of("1.1");
    let soon = s.epoch + 300;
    s.end(
        a,
        Outcome::RateLimited {
            resets_at: Some(soon),
        },
    );
    assert!(
        s.events
            .iter()
            .any(|e| matches!(e, LoopEvent::RateLimitWait { .. }))
    );
    assert!(
        !s.events
            .iter()
            .any(|e| matches!(e, LoopEvent::AgentFallback { .. }))
    );
    // 3.1 runs on qwen (its route): claude's limit is not qwen's.
    assert!(
        s.on_agent
            .iter()
            .any(|(t, f)| *t == id("3.1") && f.is_none())
    );
}

#[test]
fn every_agent_at_a_limit_waits_as_without_a_fallback() {
    let mut s = Sim::new(&["1.1"], with_fallback(rules(1, 0, ExhaustPolicy::Abort)));
    let far = s.epoch + 7200;
    s.end(
        0,
        Outcome::RateLimited {
            resets_at: Some(far),
        },
    );
    s.end(
        0,
        Outcome::RateLimited {
            resets_at: Some(far),
        },
    );
    s.end(
        0,
        Outcome::RateLimited {
            resets_at: Some(far),
        },
    );
    // claude, codex, gemini: all at a limit now; the last one is waited for.
    let moved: Vec<String> = s
        .events
        .iter()
        .filter_map(|e| match e {
            LoopEvent::AgentFallback { to, .. } => Some(to.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(moved, ["codex", "gemini"]);
    assert!(
        s.events
            .iter()
            .any(|e| matches!(e, LoopEvent::RateLimitWait { .. }))
    );
}

#[test]
fn an_open_quit_question_holds_new_starts_and_no_lets_them_go() {
    let mut s = Sim::new(&["1.1", "1.2", "1.3"], rules(1, 0, ExhaustPolicy::Abort));
    s.key(Control::QuitAsked);
    s.complete(0);
    assert_eq!(s.started_ids(), ["1.1"], "nothing new while Quit? is open");
    assert_eq!(s.m.finished(), None);
    s.key(Control::QuitDeclined);
    assert_eq!(s.started_ids(), ["1.1", "1.2"]);
}

#[test]
fn an_open_quit_question_also_holds_a_retry_and_yes_stops() {
    let mut s = Sim::new(&["1.1", "1.2"], rules(1, 3, ExhaustPolicy::Abort));
    s.key(Control::QuitAsked);
    s.fail(0);
    assert_eq!(s.started_ids(), ["1.1"]);
    s.key(Control::Quit);
    assert_eq!(s.m.finished(), Some(RunEnd::Interrupted));
    assert_eq!(s.started_ids(), ["1.1"]);
}

#[test]
fn quit_stops_every_running_agent_and_starts_nothing_more() {
    let mut s = Sim::new(&["1.1", "2.1", "3.1"], rules(2, 0, ExhaustPolicy::Abort));
    s.key(Control::Quit);
    assert_eq!(s.tells.len(), 2);
    for slot in [0, 1] {
        s.end(
            slot,
            Outcome::Stopped {
                action: StopAction::Quit,
            },
        );
    }
    assert_eq!(s.started_ids(), ["1.1", "2.1"]);
    assert_eq!(s.m.finished(), Some(RunEnd::Interrupted));
}

#[test]
fn restart_goes_to_the_running_task_and_is_not_counted() {
    let mut s = Sim::new(&["1.1"], rules(1, 0, ExhaustPolicy::Abort));
    s.key(Control::Restart(None));
    assert_eq!(s.tells, [(0, Control::Restart(None))]);
    s.end(
        0,
        Outcome::Stopped {
            action: StopAction::Restart,
        },
    );
    assert_eq!(s.started_ids(), ["1.1", "1.1"]);
    // With max retries 0 a counted failure would have ended the run: a
    // restart is not counted.
    s.complete(0);
    assert_eq!(s.m.finished(), Some(RunEnd::Complete));
}

#[test]
fn a_restart_requested_while_the_attempt_ends_otherwise_still_applies() {
    let mut s = Sim::new(&["1.1"], rules(1, 0, ExhaustPolicy::Abort));
    s.key(Control::Restart(None));
    // The agent had already failed (verify was running): the request wins.
    s.fail(0);
    assert_eq!(s.started_ids(), ["1.1", "1.1"]);
}

#[test]
fn a_restart_that_cannot_happen_is_said_plainly() {
    let mut s = Sim::new(&["1.1", "2.1"], rules(1, 0, ExhaustPolicy::Abort));
    s.key(Control::Restart(Some(id("2.1"))));
    assert!(
        s.notices()
            .iter()
            .any(|n| n == "task 2.1 is no longer running; nothing to restart"),
        "{:?}",
        s.notices()
    );
    s.key(Control::Restart(None));
    s.complete(0);
    assert!(
        s.notices()
            .iter()
            .any(|n| n == "task 1.1 completed before it could be restarted; nothing to restart"),
        "{:?}",
        s.notices()
    );
    s.complete(0);
    s.key(Control::Skip(None));
    assert!(
        s.notices()
            .iter()
            .any(|n| n == "no task is running; nothing to skip"),
        "{:?}",
        s.notices()
    );
}

#[test]
fn a_request_for_a_task_whose_completion_is_recorded_is_not_sent() {
    let mut s = Sim::new(&["1.1", "2.1"], rules(2, 0, ExhaustPolicy::Abort));
    let slot = s.slot_of("1.1");
    s.started(slot);
    // The lane said it completed; its attempt (the merge back) has not ended.
    s.feed(Input::Worker {
        slot,
        event: LoopEvent::TaskCompleted {
            task: id("1.1"),
            attempt: 1,
            outcome: Outcome::Completed {
                via: CompletedVia::Status,
            },
            receipt: Receipt::none(),
        },
    });
    s.key(Control::Restart(Some(id("1.1"))));
    assert!(s.tells.is_empty(), "nothing told: {:?}", s.tells);
    assert!(
        s.notices()
            .iter()
            .any(|n| n == "task 1.1 is no longer running: it completed; nothing to restart"),
        "{:?}",
        s.notices()
    );
}

#[test]
fn restart_with_several_running_asks_which() {
    let mut s = Sim::new(&["1.1", "2.1"], rules(2, 0, ExhaustPolicy::Abort));
    s.key(Control::Restart(None));
    assert!(s.tells.is_empty());
    assert!(
        s.notices()
            .iter()
            .any(|n| n.contains("press the key again"))
    );
    s.key(Control::Restart(Some(id("2.1"))));
    assert_eq!(
        s.tells,
        [(s.slot_of("2.1"), Control::Restart(Some(id("2.1"))))]
    );
}

#[test]
fn skip_by_request_skips_dependents_too() {
    let mut s = Sim::new(&["1.1", "1.2", "2.1"], rules(1, 0, ExhaustPolicy::Abort));
    s.key(Control::Skip(None));
    s.end(
        0,
        Outcome::Stopped {
            action: StopAction::Skip,
        },
    );
    assert_eq!(s.started_ids(), ["1.1", "2.1"]);
    s.complete(0);
    assert_eq!(s.m.finished(), Some(RunEnd::Incomplete));
}

#[test]
fn pause_waits_for_the_running_task_then_nothing_starts_until_resumed() {
    let mut s = Sim::new(&["1.1", "1.2"], rules(1, 0, ExhaustPolicy::Abort));
    s.key(Control::TogglePause);
    assert!(s.notices().iter().any(|n| n.contains("will pause after")));
    s.complete(0);
    assert!(s.events.iter().any(|e| matches!(e, LoopEvent::Paused)));
    assert_eq!(s.started_ids(), ["1.1"]);
    assert_eq!(s.m.finished(), None, "paused is not finished");
    s.key(Control::TogglePause);
    assert!(s.events.iter().any(|e| matches!(e, LoopEvent::Resumed)));
    assert_eq!(s.started_ids(), ["1.1", "1.2"]);
}

#[test]
fn pause_and_resume_from_another_shell_say_who_and_do_nothing_twice() {
    let mut s = Sim::new(&["1.1", "1.2"], rules(1, 0, ExhaustPolicy::Abort));
    let steer = |control: Control, what: &str| Control::Steered {
        by: "spectr ralph pause (pid 7)".into(),
        what: what.into(),
        control: Some(Box::new(control)),
    };
    s.key(steer(Control::Pause, "pause"));
    let notices = s.notices();
    assert!(
        notices
            .iter()
            .any(|n| n == "spectr ralph pause (pid 7): pause"),
        "{notices:?}"
    );
    assert!(
        notices
            .iter()
            .any(|n| n
                .contains("will pause after the current task (`spectr ralph resume` cancels it)")),
        "{notices:?}"
    );
    s.key(Control::Pause);
    assert!(s.notices().iter().any(|n| n == "already pausing"));
    s.complete(0);
    assert!(s.events.iter().any(|e| matches!(e, LoopEvent::Paused)));
    assert_eq!(s.started_ids(), ["1.1"]);
    s.key(Control::Resume);
    assert!(s.events.iter().any(|e| matches!(e, LoopEvent::Resumed)));
    assert_eq!(s.started_ids(), ["1.1", "1.2"]);
    s.key(Control::Resume);
    assert!(s.notices().iter().any(|n| n == "not paused"));
}

#[test]
fn quit_while_paused_ends_the_run() {
    let mut s = Sim::new(&["1.1", "1.2"], rules(1, 0, ExhaustPolicy::Abort));
    s.key(Control::TogglePause);
    s.complete(0);
    s.key(Control::Quit);
    assert_eq!(s.m.finished(), Some(RunEnd::Interrupted));
}

#[test]
fn a_rate_limit_waits_until_its_reset_without_using_a_retry() {
    let mut s = Sim::new(&["1.1"], rules(1, 0, ExhaustPolicy::Abort));
    let resets_at = s.epoch + 100;
    s.end(
        0,
        Outcome::RateLimited {
            resets_at: Some(resets_at),
        },
    );
    let wait = s.events.iter().find_map(|e| match e {
        LoopEvent::RateLimitWait { wait_secs, .. } => Some(*wait_secs),
        _ => None,
    });
    assert_eq!(wait, Some(105), "until the reset plus a margin");
    assert_eq!(s.m.next_deadline(), Some(s.at + Duration::from_secs(105)));
    s.advance(Duration::from_secs(104));
    assert_eq!(s.started_ids(), ["1.1"]);
    s.advance(Duration::from_secs(1));
    assert_eq!(s.started_ids(), ["1.1", "1.1"]);
    s.complete(0);
    assert_eq!(s.m.finished(), Some(RunEnd::Complete));
}

#[test]
fn a_rate_limited_task_keeps_its_slot_restart_starts_it_at_once_and_skip_skips() {
    let mut s = Sim::new(&["1.1", "2.1"], rules(1, 0, ExhaustPolicy::Abort));
    s.end(0, Outcome::RateLimited { resets_at: None });
    // The limit is the provider's: 2.1 would only meet it too.
    assert_eq!(s.started_ids(), ["1.1"]);
    s.key(Control::Restart(None));
    assert_eq!(s.started_ids(), ["1.1", "1.1"]);
    s.end(0, Outcome::RateLimited { resets_at: None });
    s.key(Control::Skip(None));
    assert_eq!(s.started_ids(), ["1.1", "1.1", "2.1"]);
    s.complete(0);
    assert_eq!(s.m.finished(), Some(RunEnd::Incomplete));
}

#[test]
fn with_lanes_a_rate_limit_holds_one_slot_and_the_others_go_on() {
    let mut s = Sim::new(&["1.1", "2.1", "3.1"], rules(2, 0, ExhaustPolicy::Abort));
    let one = s.slot_of("1.1");
    s.end(one, Outcome::RateLimited { resets_at: None });
    assert_eq!(
        s.started_ids(),
        ["1.1", "2.1"],
        "3.1 waits: 1.1 holds a slot"
    );
    let two = s.slot_of("2.1");
    s.complete(two);
    assert_eq!(s.started_ids(), ["1.1", "2.1", "3.1"]);
}

#[test]
fn a_wait_over_while_paused_does_not_wake_the_loop_until_resumed() {
    let mut s = Sim::new(&["1.1"], rules(1, 0, ExhaustPolicy::Abort));
    s.end(0, Outcome::RateLimited { resets_at: None });
    s.key(Control::TogglePause);
    assert_eq!(s.m.next_deadline(), None, "no deadline while paused");
    s.advance(Duration::from_secs(120));
    assert_eq!(s.started_ids(), ["1.1"]);
    assert_eq!(
        s.m.next_deadline(),
        None,
        "nothing to wake for: no busy loop"
    );
    s.key(Control::TogglePause);
    assert_eq!(s.started_ids(), ["1.1", "1.1"]);
}

#[test]
fn a_question_waits_for_an_open_quit_question_to_be_answered() {
    let mut s = Sim::new(&["1.1", "2.1"], rules(2, 0, ExhaustPolicy::Prompt));
    s.key(Control::QuitAsked);
    let one = s.slot_of("1.1");
    s.fail(one);
    assert!(s.asks.is_empty(), "not over Quit?");
    s.key(Control::QuitDeclined);
    assert_eq!(s.asks, [id("1.1")]);
}

#[test]
fn an_open_quit_question_does_not_keep_a_finished_run_from_ending() {
    let mut s = Sim::new(&["1.1"], rules(1, 0, ExhaustPolicy::Abort));
    s.key(Control::QuitAsked);
    s.complete(0);
    assert_eq!(s.m.finished(), Some(RunEnd::Complete));
}

#[test]
fn a_request_during_a_stop_is_not_announced_as_done() {
    let mut s = Sim::new(&["1.1"], rules(1, 0, ExhaustPolicy::Abort));
    s.key(Control::Quit);
    s.key(Control::Restart(None));
    assert!(
        s.notices()
            .iter()
            .any(|n| n == "the run is stopping; nothing more starts")
    );
    assert!(!s.notices().iter().any(|n| n.starts_with("restarting")));
}

#[test]
fn a_skipped_task_completed_by_hand_no_longer_makes_the_run_incomplete() {
    let mut s = Sim::new(&["1.1", "1.2"], rules(1, 0, ExhaustPolicy::Skip));
    s.fail(0);
    assert!(s.m.skipped.contains(&id("1.2")));
    s.feed(Input::Worker {
        slot: 0,
        event: LoopEvent::StatusChanged {
            task: id("1.2"),
            status: TaskStatus::Completed,
        },
    });
    assert!(!s.m.skipped.contains(&id("1.2")));
}

#[test]
fn resumed_tasks_out_of_retries_skipped_by_policy_do_not_wait_for_the_poll() {
    let s = Sim::resumed(
        &["1.1", "2.1", "3.1"],
        rules(1, 0, ExhaustPolicy::Skip),
        &["1.1", "2.1"],
    );
    assert_eq!(
        s.started_ids(),
        ["3.1"],
        "both skipped, 3.1 started at once"
    );
}

#[test]
fn an_attempt_that_could_not_hand_the_tasks_back_still_lets_the_run_end() {
    let mut s = Sim::new(&["1.1", "2.1"], rules(1, 0, ExhaustPolicy::Abort));
    s.lent = None;
    s.running.clear();
    s.feed(Input::AttemptEnded {
        slot: 0,
        task: id("1.1"),
        report: AttemptReport {
            outcome: Outcome::Abnormal {
                detail: "spectr's worker failed: boom".into(),
            },
            fatal: Some("spectr's worker failed: boom".into()),
        },
        tasks: None,
        wrote: None,
    });
    assert_eq!(s.m.finished(), Some(RunEnd::Aborted));
}

#[test]
fn spectrs_own_failure_stops_the_run_without_a_retry() {
    let mut s = Sim::new(&["1.1", "2.1"], rules(1, 3, ExhaustPolicy::Retry));
    s.end(
        0,
        Outcome::GitError {
            detail: "cannot lock ref".into(),
        },
    );
    assert_eq!(s.started_ids(), ["1.1"]);
    assert_eq!(s.m.finished(), Some(RunEnd::Aborted));
}

#[test]
fn a_broken_tasks_file_is_read_again_then_stops_the_run() {
    let mut s = Sim::new(&["1.1", "2.1"], rules(2, 0, ExhaustPolicy::Abort));
    let path = s.dir.path().join("tasks.jsonc");
    let good = std::fs::read_to_string(&path).unwrap();
    std::fs::write(&path, "{ broken").unwrap();
    s.feed(Input::TasksMayHaveChanged);
    assert_eq!(s.reads, 2);
    assert_eq!(s.m.finished(), None, "not yet: it may be mid-write");
    assert_eq!(s.m.next_deadline(), Some(s.at + BROKEN_RETRY));
    s.advance(BROKEN_RETRY);
    s.advance(BROKEN_RETRY);
    assert_eq!(s.reads, 4, "read again every {BROKEN_RETRY:?}");
    assert!(s.tells.is_empty(), "nothing stopped yet");
    // Fixed in time: the run goes on.
    std::fs::write(&path, &good).unwrap();
    s.advance(BROKEN_RETRY);
    assert_eq!(s.m.next_deadline(), None);
    s.complete(0);
    s.complete(1);
    assert_eq!(s.m.finished(), Some(RunEnd::Complete));

    let mut s = Sim::new(&["1.1", "2.1"], rules(2, 0, ExhaustPolicy::Abort));
    std::fs::write(s.dir.path().join("tasks.jsonc"), "{ broken").unwrap();
    s.feed(Input::TasksMayHaveChanged);
    for _ in 0..5 {
        s.advance(BROKEN_RETRY);
    }
    assert_eq!(s.tells.len(), 2, "both agents told to stop");
    assert!(s.events.iter().any(
        |e| matches!(e, LoopEvent::Error { message, .. } if message.contains("run the same command to resume"))
    ));
    s.running.clear();
    for slot in [0, 1] {
        s.feed(Input::AttemptEnded {
            slot,
            task: id(if slot == 0 { "1.1" } else { "2.1" }),
            report: AttemptReport {
                outcome: Outcome::Stopped {
                    action: StopAction::Quit,
                },
                fatal: None,
            },
            tasks: None,
            wrote: None,
        });
    }
    assert_eq!(s.m.finished(), Some(RunEnd::Aborted));
}

#[test]
fn a_task_keeps_its_place_in_the_run_across_retries() {
    let mut s = Sim::new(&["1.1", "2.1"], rules(1, 1, ExhaustPolicy::Abort));
    s.fail(0);
    s.complete(0);
    s.complete(0);
    assert_eq!(s.places, [(1, 2), (1, 2), (2, 2)]);
}

#[test]
fn a_resumed_task_whose_budget_is_spent_is_never_given_a_free_try() {
    let s = Sim::resumed(
        &["1.1", "2.1"],
        rules(1, 0, ExhaustPolicy::Prompt),
        &["1.1"],
    );
    assert_eq!(s.asks, [id("1.1")], "asked first");
    assert_eq!(s.started_ids(), ["2.1"], "the other lane went on");
}

#[test]
fn a_worker_thread_gone_ends_the_run() {
    let mut s = Sim::new(&["1.1"], rules(1, 0, ExhaustPolicy::Abort));
    s.feed(Input::WorkersGone);
    assert_eq!(s.m.finished(), Some(RunEnd::Aborted));
}

#[test]
fn conflicts_and_merges_are_counted_per_lane() {
    let mut s = Sim::new(&["1.1", "2.1"], rules(2, 1, ExhaustPolicy::Abort));
    let slot = s.slot_of("1.1");
    s.end(
        slot,
        Outcome::Conflict {
            files: vec!["a".into()],
            reason: "a changed".into(),
            work: None,
        },
    );
    let slot = s
        .running
        .iter()
        .find(|(_, (t, _))| t.as_str() == "1.1")
        .map(|(n, _)| *n)
        .unwrap();
    s.complete(slot);
    let lanes = s.m.take_lanes();
    let lane1 = lanes
        .iter()
        .find(|l| l.lane == lane_key(&id("1.1")))
        .unwrap();
    assert_eq!(lane1.conflicted, [id("1.1")]);
    assert_eq!(lane1.merged, [id("1.1")]);
}

fn conflict_on(files: &[&str]) -> Outcome {
    Outcome::Conflict {
        files: files.iter().map(|f| f.to_string()).collect(),
        reason: "changed meanwhile".into(),
        work: Some(crate::ralph::event::ConflictWork {
            base: "b".into(),
            theirs: "t".into(),
        }),
    }
}

impl Sim {
    /// The task on `slot` asks for its merge turn for `files`; whether the
    /// go came at once.
    fn want_merge(&mut self, task: &str, files: &[&str]) -> bool {
        let slot = self.slot_of(task);
        let before = self.merge_go.len();
        self.feed(Input::MergeWanted {
            slot,
            task: id(task),
            files: files.iter().map(|f| f.to_string()).collect(),
        });
        self.merge_go[before..].contains(&slot)
    }

    fn running_ids(&self) -> Vec<String> {
        self.running.values().map(|(t, _)| t.to_string()).collect()
    }
}

#[test]
fn a_merge_touching_a_reserved_file_waits_and_one_that_does_not_goes() {
    let mut s = Sim::new(&["1.1", "2.1", "3.1"], rules(3, 3, ExhaustPolicy::Abort));
    assert!(s.want_merge("1.1", &["NOTES.md", "one.txt"]));
    let slot = s.slot_of("1.1");
    s.end(slot, conflict_on(&["NOTES.md"]));
    // Its resolve attempt starts at once, the work applied again.
    assert_eq!(s.resolving, [id("1.1")]);
    let (_, attempt) = s.running[&s.slot_of("1.1")].clone();
    assert_eq!(attempt, 2);
    // 2.1 writes NOTES.md too: it waits, and is told it is held (it may
    // end with a conflict meanwhile). 3.1 does not: it goes.
    assert!(!s.want_merge("2.1", &["NOTES.md", "two.txt"]));
    assert_eq!(s.merge_held, [s.slot_of("2.1")]);
    assert!(s.want_merge("3.1", &["three.txt"]));
    assert_eq!(s.merge_held.len(), 1);
    // The resolve attempt holds the file: its own merge goes.
    assert!(s.want_merge("1.1", &["NOTES.md", "one.txt"]));
    let waiting = s.slot_of("2.1");
    assert!(!s.merge_go.contains(&waiting));
    let slot = s.slot_of("1.1");
    s.complete(slot);
    assert_eq!(
        s.merge_go.last(),
        Some(&waiting),
        "2.1 goes once 1.1 merged"
    );
}

#[test]
fn a_held_merge_that_ends_in_a_conflict_queues_behind_the_first() {
    let mut s = Sim::new(&["1.1", "2.1", "3.1"], rules(3, 3, ExhaustPolicy::Abort));
    let slot = s.slot_of("1.1");
    s.end(slot, conflict_on(&["N"]));
    assert_eq!(s.resolving, [id("1.1")]);
    assert!(!s.want_merge("2.1", &["N"]));
    // Held, it found a conflict now: its attempt ends, its slot is free,
    // and its resolve waits for 1.1's.
    let slot = s.slot_of("2.1");
    s.end(slot, conflict_on(&["N"]));
    assert_eq!(s.resolving, [id("1.1")], "2.1's resolve waits for N");
    assert!(s.m.reserve.reserves(&id("2.1")));
    s.writes = vec!["N".into()];
    let slot = s.slot_of("1.1");
    s.complete(slot);
    assert_eq!(s.resolving, [id("1.1"), id("2.1")]);
}

#[test]
fn a_resolve_attempt_waits_for_a_merge_granted_before_the_conflict() {
    let mut s = Sim::new(&["1.1", "2.1"], rules(2, 3, ExhaustPolicy::Abort));
    assert!(s.want_merge("1.1", &["N"]));
    assert!(s.want_merge("2.1", &["N"]));
    let slot = s.slot_of("1.1");
    s.end(slot, conflict_on(&["N"]));
    // 2.1's merge still writes N: the resolve would start from a tree
    // about to change.
    assert!(s.resolving.is_empty());
    let slot = s.slot_of("2.1");
    s.complete(slot);
    assert_eq!(s.resolving, [id("1.1")]);
}

#[test]
fn a_conflict_uses_no_retry_and_has_a_limit_of_its_own() {
    let mut r = rules(2, 0, ExhaustPolicy::Prompt);
    r.max_conflicts = 2;
    let mut s = Sim::new(&["1.1", "2.1"], r);
    for round in 1..=2 {
        let slot = s.slot_of("1.1");
        s.end(slot, conflict_on(&["N"]));
        assert_eq!(s.asks, Vec::<TaskId>::new(), "conflict {round} is resolved");
        assert_eq!(s.resolving.len(), round);
    }
    let slot = s.slot_of("1.1");
    s.end(slot, conflict_on(&["N"]));
    assert_eq!(
        s.asks,
        [id("1.1")],
        "the third conflict is past --max-conflicts 2"
    );
    let totals = s.m.totals(Duration::ZERO);
    assert_eq!((totals.conflicts, totals.attempts), (3, 3));
}

#[test]
fn lanes_that_conflicted_on_a_file_take_turns_on_it() {
    let mut s = Sim::new(
        &["1.1", "1.2", "1.3", "2.1", "2.2", "3.1", "3.2"],
        rules(3, 3, ExhaustPolicy::Abort),
    );
    s.writes = vec!["N".into()];
    let slot = s.slot_of("1.1");
    s.complete(slot);
    assert!(s.running_ids().contains(&"1.2".to_string()));
    let slot = s.slot_of("2.1");
    s.end(slot, conflict_on(&["N"]));
    // Lanes 1 and 2 are hot on N: 2.1's resolve runs beside 1.2 (already
    // running) and lane 3, but once 1.2 ends lane 1 waits for lane 2.
    assert_eq!(s.resolving, [id("2.1")]);
    let slot = s.slot_of("3.1");
    s.complete(slot);
    assert!(
        s.running_ids().contains(&"3.2".to_string()),
        "lane 3 is not hot"
    );
    s.writes = vec!["N".into()];
    let slot = s.slot_of("1.2");
    s.complete(slot);
    assert!(
        !s.running_ids().contains(&"1.3".to_string()),
        "{:?}",
        s.running_ids()
    );
    s.writes = vec!["N".into()];
    let slot = s.slot_of("2.1");
    s.complete(slot);
    // Lane 1 and lane 2 now take turns: one of them starts, not both.
    let hot: Vec<String> = s
        .running_ids()
        .into_iter()
        .filter(|t| t == "1.3" || t == "2.2")
        .collect();
    assert_eq!(hot.len(), 1, "{:?}", s.running_ids());
}

#[test]
fn stopping_lets_a_waiting_merge_go() {
    let mut s = Sim::new(&["1.1", "2.1", "3.1"], rules(3, 3, ExhaustPolicy::Abort));
    assert!(s.want_merge("1.1", &["N"]));
    let slot = s.slot_of("1.1");
    s.end(slot, conflict_on(&["N"]));
    assert!(!s.want_merge("2.1", &["N"]));
    let waiting = s.slot_of("2.1");
    s.key(Control::Quit);
    assert!(s.merge_go.contains(&waiting));
}

#[test]
fn a_resumed_conflicted_task_is_resolved_first_and_holds_its_files() {
    let mut s = Sim::with_ended(
        &["1.1", "2.1", "2.2"],
        rules(2, 3, ExhaustPolicy::Abort),
        &["2.1"],
        conflict_on(&["N"]),
    );
    assert_eq!(s.starts[0].1, id("2.1"), "{:?}", s.starts);
    assert_eq!(s.resolving, [id("2.1")]);
    assert!(!s.want_merge("1.1", &["N"]), "N is 2.1's until it merged");
    assert!(s.want_merge("2.1", &["N"]));
}

#[test]
fn a_reservation_whose_task_is_gone_frees_the_waiting_merges() {
    let mut s = Sim::new(&["1.1", "2.1", "3.1"], rules(3, 3, ExhaustPolicy::Abort));
    let slot = s.slot_of("1.1");
    s.end(slot, conflict_on(&["N"]));
    // Its resolve attempt is skipped by a key before it merged.
    assert!(!s.want_merge("2.1", &["N"]));
    let waiting = s.slot_of("2.1");
    s.key(Control::Skip(Some(id("1.1"))));
    let slot = s.slot_of("1.1");
    s.end(
        slot,
        Outcome::Stopped {
            action: StopAction::Skip,
        },
    );
    assert!(s.merge_go.contains(&waiting), "{:?}", s.merge_go);
}

#[test]
fn a_retry_never_takes_the_last_slot_a_waiting_resolve_needs() {
    let mut s = Sim::new(&["1.1", "2.1"], rules(2, 3, ExhaustPolicy::Abort));
    // 2.1 is done and waits to merge N; 1.1 conflicted on N before it.
    let slot = s.slot_of("1.1");
    s.end(slot, conflict_on(&["N"]));
    assert!(!s.want_merge("2.1", &["N"]));
    // 1.1's resolve runs, and fails for the agent's reasons: its retry
    // resolves again (it still holds N), so nothing can wait on it forever.
    let slot = s.slot_of("1.1");
    s.fail(slot);
    assert!(
        s.running_ids().contains(&"1.1".to_string()),
        "{:?}",
        s.running_ids()
    );
    assert_eq!(s.resolving, [id("1.1"), id("1.1")]);
    assert!(s.want_merge("1.1", &["N"]));
    let slot = s.slot_of("1.1");
    let waiting = s.slot_of("2.1");
    s.complete(slot);
    assert!(s.merge_go.contains(&waiting));
}

fn budget_usd(slots: usize, usd: f64) -> Rules {
    Rules {
        budget: Budget {
            usd: Some(usd),
            tokens: None,
        },
        ..rules(slots, 0, ExhaustPolicy::Abort)
    }
}

#[test]
fn the_budget_stops_after_exactly_the_attempts_it_allows() {
    let mut s = Sim::new(&["1.1", "1.2", "1.3", "1.4", "1.5"], budget_usd(1, 1.0));
    s.cost = Some(0.4);
    s.complete(0);
    s.complete(0);
    assert_eq!(s.m.finished(), None, "$0.80 of $1.00: the run goes on");
    s.complete(0);
    // $1.20 spent: the third attempt was allowed to start, no fourth.
    assert_eq!(s.started_ids(), ["1.1", "1.2", "1.3"]);
    assert_eq!(s.m.finished(), Some(RunEnd::Budget));
    let reached: Vec<_> = s
        .events
        .iter()
        .filter_map(|e| match e {
            LoopEvent::BudgetReached { spent, .. } => Some(spent.usd),
            _ => None,
        })
        .collect();
    assert_eq!(reached.len(), 1, "said once");
    assert!((reached[0] - 1.2).abs() < 1e-9, "{reached:?}");
    assert!(s.tells.is_empty(), "nothing was stopped");
}

#[test]
fn a_run_whose_last_attempt_spends_the_budget_is_complete() {
    let mut s = Sim::new(&["1.1", "1.2"], budget_usd(1, 1.0));
    s.cost = Some(0.5);
    s.complete(0);
    s.complete(0);
    assert_eq!(s.m.finished(), Some(RunEnd::Complete));
}

#[test]
fn a_rate_limit_wait_does_not_hold_a_spent_run_open() {
    let mut s = Sim::new(&["1.1", "1.2"], budget_usd(1, 1.0));
    s.cost = Some(1.0);
    s.end(0, Outcome::RateLimited { resets_at: None });
    assert_eq!(s.m.finished(), Some(RunEnd::Budget));
}

#[test]
fn a_failed_attempt_counts_against_the_budget_and_its_retry_does_not_start() {
    let mut s = Sim::new(
        &["1.1", "1.2"],
        Rules {
            max_retries: 3,
            ..budget_usd(1, 0.5)
        },
    );
    s.cost = Some(0.5);
    s.fail(0);
    assert_eq!(s.started_ids(), ["1.1"]);
    assert_eq!(s.m.finished(), Some(RunEnd::Budget));
}

#[test]
fn the_budget_lets_running_attempts_finish_and_starts_nothing_more() {
    let mut s = Sim::new(&["1.1", "2.1", "3.1"], budget_usd(2, 1.0));
    assert_eq!(s.started_ids(), ["1.1", "2.1"]);
    s.cost = Some(1.0);
    let slot = s.slot_of("1.1");
    s.complete(slot);
    assert!(s.tells.is_empty(), "2.1 is not stopped: {:?}", s.tells);
    assert_eq!(s.started_ids(), ["1.1", "2.1"], "3.1 does not start");
    assert_eq!(s.m.finished(), None, "2.1 still runs");
    let slot = s.slot_of("2.1");
    s.complete(slot);
    assert_eq!(s.m.finished(), Some(RunEnd::Budget));
}

#[test]
fn a_resumed_run_remembers_what_was_spent() {
    let dir = change(&["1.1", "1.2"]);
    let tasks = TaskSet::load(dir.path()).unwrap();
    let mut session = Session::new(
        "c",
        SessionOptions {
            agent: "fake".into(),
            max_retries: 0,
            checkpoints: true,
            verify: None,
            commit_branch: None,
            commit_base: None,
        },
        None,
    );
    session.apply(&LoopEvent::TaskStarted {
        task: id("1.1"),
        section: String::new(),
        description: String::new(),
        attempt: 1,
        max_attempts: 1,
        transcript: String::new(),
        index: 1,
        count: 2,
        lane: None,
        worktree: None,
    });
    session.apply(&LoopEvent::TaskCompleted {
        task: id("1.1"),
        attempt: 1,
        outcome: Outcome::Completed {
            via: CompletedVia::Signal,
        },
        receipt: Receipt {
            cost_usd: Some(1.5),
            ..Receipt::none()
        },
    });
    let rules = Rules {
        max_retries: 3,
        ..budget_usd(1, 1.0)
    };
    let mut m = Machine::new(rules, tasks, session);
    let now = Now {
        at: Instant::now(),
        epoch_secs: 0,
    };
    let mut effects = m.handle(Input::Begin, now);
    effects.extend(m.handle(Input::TasksRead { error: None }, now));
    assert!(
        !effects.iter().any(|e| matches!(e, Effect::Start { .. })),
        "no attempt starts once the budget is spent"
    );
    assert!(effects.iter().any(|e| matches!(
        e,
        Effect::Record(LoopEvent::BudgetReached { spent, .. }) if spent.usd == 1.5
    )));
    assert_eq!(m.finished(), Some(RunEnd::Budget));
    assert_eq!(m.budget_use().map(|b| b.spent.usd), Some(1.5));
}

/// Lanes 1 and 2 hot on N, every slot free: where the run stands after
/// 2.1's conflict is resolved.
fn hot_pair(in_place: bool) -> Sim {
    let mut s = Sim::new(
        &["1.1", "1.2", "1.3", "1.4", "2.1", "2.2", "2.3", "2.4"],
        Rules {
            in_place,
            ..rules(2, 3, ExhaustPolicy::Abort)
        },
    );
    s.writes = vec!["N".into()];
    let slot = s.slot_of("1.1");
    s.complete(slot);
    let slot = s.slot_of("2.1");
    s.end(slot, conflict_on(&["N"]));
    assert_eq!(s.resolving, [id("2.1")]);
    assert!(s.in_place_starts.is_empty(), "a resolve runs in its lane");
    s.writes = vec!["N".into()];
    let slot = s.slot_of("1.2");
    s.complete(slot);
    s.writes = vec!["N".into()];
    let slot = s.slot_of("2.1");
    s.complete(slot);
    s
}

#[test]
fn lanes_taking_turns_run_the_one_task_that_can_run_in_the_users_tree() {
    let mut s = hot_pair(true);
    // 1.3 and 2.2 are ready, but lanes 1 and 2 take turns on N: the one
    // that starts runs in the user's tree, with the tasks lent.
    assert_eq!(s.running.len(), 1, "{:?}", s.running_ids());
    let first = s.running_ids()[0].clone();
    assert_eq!(s.in_place_starts, [id(&first)]);
    assert!(s.lent.is_some());
    assert!(s.events.iter().any(|e| matches!(e,
        LoopEvent::Notice { message, .. } if message.contains("lanes take turns on N") && message.contains("runs in your tree"))));
    // Nothing else starts while it runs, not even a retry.
    s.feed(Input::TasksMayHaveChanged);
    assert_eq!(s.running.len(), 1);
    // It wrote N: its lane stays hot, and the next runs in place too.
    s.writes = vec!["N".into()];
    let slot = s.slot_of(&first);
    s.complete(slot);
    assert_eq!(s.running.len(), 1, "{:?}", s.running_ids());
    assert_eq!(s.in_place_starts.len(), 2);
    let told = s
        .events
        .iter()
        .filter(|e| matches!(e, LoopEvent::Notice { message, .. } if message.contains("runs in your tree")))
        .count();
    assert_eq!(told, 1, "said once");
    // A failed attempt in place is retried, again in place (nothing else
    // can run).
    let second = s.running_ids()[0].clone();
    let slot = s.slot_of(&second);
    s.fail(slot);
    assert_eq!(s.running_ids(), std::slice::from_ref(&second));
    assert_eq!(s.in_place_starts.last(), Some(&id(&second)));
    let summary = s.m.take_lanes();
    let lane = |l: &str| {
        summary
            .iter()
            .find(|x| x.lane == l)
            .unwrap()
            .in_place
            .clone()
    };
    assert_eq!(lane(first.split('.').next().unwrap()), [id(&first)]);
}

#[test]
fn a_task_in_place_that_left_the_hot_file_alone_cools_its_lane() {
    let mut s = hot_pair(true);
    let first = s.running_ids()[0].clone();
    s.writes = vec!["own.txt".into()];
    let slot = s.slot_of(&first);
    s.complete(slot);
    // Its lane cooled: both lanes run side by side again, each in a lane.
    assert_eq!(s.running.len(), 2, "{:?}", s.running_ids());
    assert_eq!(s.in_place_starts, [id(&first)]);
    assert!(s.lent.is_none());
}

#[test]
fn without_in_place_turns_run_in_lanes() {
    let s = hot_pair(false);
    assert_eq!(s.running.len(), 1);
    assert!(s.in_place_starts.is_empty());
    assert!(s.lent.is_none());
}

#[test]
fn a_resolve_attempt_that_nothing_runs_beside_runs_in_the_users_tree() {
    let mut s = Sim::new(&["1.1", "2.1"], rules(2, 3, ExhaustPolicy::Abort));
    s.writes = vec!["N".into()];
    let slot = s.slot_of("1.1");
    s.complete(slot);
    let slot = s.slot_of("2.1");
    s.end(slot, conflict_on(&["N"]));
    assert_eq!(s.resolving, [id("2.1")]);
    assert_eq!(s.in_place_starts, [id("2.1")], "{:?}", s.starts);
    assert!(s.lent.is_some());
    // Its files stay reserved until it completes, then the run ends.
    assert!(s.m.reserve.reserves(&id("2.1")));
    s.writes = vec!["N".into()];
    let slot = s.slot_of("2.1");
    s.complete(slot);
    assert!(!s.m.reserve.reserves(&id("2.1")));
    assert_eq!(s.m.finished(), Some(RunEnd::Complete));
}

#[test]
fn a_resolve_attempt_runs_in_its_lane_while_another_task_runs() {
    let mut s = Sim::new(&["1.1", "1.2", "2.1"], rules(2, 3, ExhaustPolicy::Abort));
    s.writes = vec!["N".into()];
    let slot = s.slot_of("1.1");
    s.complete(slot);
    assert!(s.running_ids().contains(&"1.2".to_string()));
    let slot = s.slot_of("2.1");
    s.end(slot, conflict_on(&["N"]));
    assert_eq!(s.resolving, [id("2.1")]);
    assert!(s.in_place_starts.is_empty());
}

#[test]
fn with_commits_each_completed_task_is_committed_once_after_its_status_is_recorded() {
    let mut r = rules(2, 0, ExhaustPolicy::Abort);
    r.commit = true;
    let mut s = Sim::new(&["1.1", "2.1"], r);
    s.started(0);
    s.started(1);
    s.complete(1);
    s.complete(0);
    let trail: Vec<&str> = s
        .trail
        .iter()
        .map(String::as_str)
        .filter(|t| !t.ends_with(":in_progress"))
        .collect();
    assert_eq!(
        trail,
        [
            "write:2.1:completed",
            "completed:2.1",
            "commit:2.1",
            "write:1.1:completed",
            "completed:1.1",
            "commit:1.1"
        ]
    );
    assert_eq!(s.m.finished(), Some(RunEnd::Complete));
}

#[test]
fn without_commits_no_commit_is_asked_for() {
    let mut s = Sim::new(&["1.1"], rules(1, 0, ExhaustPolicy::Abort));
    s.complete(0);
    assert!(
        !s.trail.iter().any(|t| t.starts_with("commit:")),
        "{:?}",
        s.trail
    );
}

#[test]
fn a_commit_that_cannot_be_made_stops_the_run_and_starts_nothing() {
    let mut r = rules(1, 0, ExhaustPolicy::Abort);
    r.commit = true;
    let mut s = Sim::new(&["1.1", "1.2"], r);
    s.commit_fails = true;
    s.complete(0);
    assert_eq!(s.started_ids(), ["1.1"]);
    assert_eq!(s.m.finished(), Some(RunEnd::Aborted));
    assert!(s.events.iter().any(
        |e| matches!(e, LoopEvent::Error { message, .. } if message.contains("no longer holds"))
    ));
}
