//! Keys and signals: quit, the `Quit?` hold, pause, restart and skip.

use super::*;

impl Machine {
    pub(super) fn on_control(&mut self, control: Control, now: Now) {
        match control {
            Control::Quit => {
                self.holding = false;
                self.stop(RunEnd::Interrupted);
            }
            Control::QuitAsked => self.holding = true,
            Control::QuitDeclined => {
                self.holding = false;
                self.ask_next();
            }
            Control::TogglePause => self.toggle_pause("press p again to cancel"),
            Control::Pause | Control::Resume => {
                let wanted = control == Control::Pause;
                if self.paused == wanted {
                    self.record(LoopEvent::Notice {
                        level: NoticeLevel::Info,
                        message: if wanted {
                            "already pausing"
                        } else {
                            "not paused"
                        }
                        .into(),
                    });
                } else {
                    self.toggle_pause("`spectr ralph resume` cancels it");
                }
            }
            Control::Answer { task, choice } => {
                if self.asking.as_ref() == Some(&task) {
                    self.out.push(Effect::Withdraw { task: task.clone() });
                    self.on_answer(&task, Some(choice));
                } else {
                    self.record(LoopEvent::Notice {
                        level: NoticeLevel::Info,
                        message: format!(
                            "no question about task {task} is open: nothing to answer"
                        ),
                    });
                }
            }
            Control::Steered { by, what, control } => {
                self.record(LoopEvent::Notice {
                    level: NoticeLevel::Info,
                    message: format!("{by}: {what}"),
                });
                if let Some(control) = control {
                    self.on_control(*control, now);
                }
            }
            Control::Restart(_) | Control::Skip(_) if self.end.is_some() => {
                self.record(LoopEvent::Notice {
                    level: NoticeLevel::Info,
                    message: "the run is stopping; nothing more starts".into(),
                });
            }
            Control::Restart(ref target) | Control::Skip(ref target) => {
                let busy: Vec<(usize, TaskId)> = self
                    .slots
                    .iter()
                    .enumerate()
                    .filter_map(|(n, s)| s.busy.clone().map(|t| (n, t)))
                    .collect();
                match decide::route(target.as_ref(), &busy) {
                    Route::Slot(n) => {
                        // Its completion is recorded, its attempt not ended
                        // yet (a lane merging back): nothing left to stop.
                        if let Some(task) = self.completed_on(n) {
                            let verb = match control {
                                Control::Skip(_) => "skip",
                                _ => "restart",
                            };
                            self.record(LoopEvent::Notice {
                                level: NoticeLevel::Info,
                                message: format!(
                                    "task {task} is no longer running: it completed; nothing to {verb}"
                                ),
                            });
                            return;
                        }
                        if let Some(task) = self.slots[n].busy.clone() {
                            let doing = match control {
                                Control::Skip(_) => "skipping",
                                _ => "restarting",
                            };
                            self.record(LoopEvent::Notice {
                                level: NoticeLevel::Info,
                                message: format!("{doing} task {task}..."),
                            });
                        }
                        self.slots[n].requested = Some(control.clone());
                        self.out.push(Effect::Tell { slot: n, control });
                    }
                    Route::Ambiguous => self.record(LoopEvent::Notice {
                        level: NoticeLevel::Info,
                        message: "several tasks are running: press the key again and pick one"
                            .into(),
                    }),
                    Route::NothingRunning => self.on_idle_control(&control, now),
                }
            }
        }
    }

    /// `cancel`: how the person takes the pause back (the key, or the
    /// command from another shell).
    fn toggle_pause(&mut self, cancel: &str) {
        self.paused = !self.paused;
        if !self.paused {
            if std::mem::take(&mut self.pause_shown) {
                self.record(LoopEvent::Resumed);
            } else if self.slots.iter().any(|s| s.busy.is_some()) {
                self.record(LoopEvent::Notice {
                    level: NoticeLevel::Info,
                    message: "pause cancelled".into(),
                });
            }
            return;
        }
        let running = self.slots.iter().filter(|s| s.busy.is_some()).count();
        if running > 0 {
            self.record(LoopEvent::Notice {
                level: NoticeLevel::Info,
                message: if running == 1 {
                    format!("will pause after the current task ({cancel})")
                } else {
                    format!(
                        "will pause once the running tasks finish; no new task starts ({cancel})"
                    )
                },
            });
        }
    }

    /// `r` or `s` while the task meant is not running: one waiting for a
    /// rate limit or queued to start is restarted or skipped; otherwise the
    /// person is told plainly that nothing happened.
    fn on_idle_control(&mut self, control: &Control, now: Now) {
        let (target, skip) = match control {
            Control::Restart(t) => (t.clone(), false),
            Control::Skip(t) => (t.clone(), true),
            _ => return,
        };
        let waiting = self
            .waits
            .keys()
            .find(|t| target.as_ref().is_none_or(|want| want == *t))
            .cloned();
        if let Some(task) = waiting {
            self.waits.remove(&task);
            if skip {
                self.skip(&task, "skipped by request");
            } else {
                self.waits.insert(task, now.at);
                self.look = true;
            }
            return;
        }
        let verb = if skip { "skip" } else { "restart" };
        let message = match target {
            Some(t) => format!("task {t} is no longer running; nothing to {verb}"),
            None => format!("no task is running; nothing to {verb}"),
        };
        self.record(LoopEvent::Notice {
            level: NoticeLevel::Info,
            message,
        });
    }

    /// The task on `slot` when the session already records it completed.
    fn completed_on(&self, slot: usize) -> Option<TaskId> {
        self.slots[slot].busy.clone().filter(|t| {
            self.session
                .record(t)
                .is_some_and(|r| r.state == RunTaskState::Completed)
        })
    }
}
