//! `--json`: one loop event per line (NDJSON) on stdout.

use crate::model::TaskId;
use crate::ralph::event::{LoopEvent, Reporter};
use crate::ui::out::{self, Stdout};
use std::collections::BTreeMap;

pub struct JsonReporter {
    out: Stdout,
    /// Parallel runs: each running task's lane and work tree, added to every
    /// event about it.
    lanes: BTreeMap<TaskId, (String, String)>,
    /// Each event is serialized here, reused: a chatty agent's events cost
    /// no allocation each.
    buf: Vec<u8>,
}

impl JsonReporter {
    pub fn new() -> JsonReporter {
        JsonReporter {
            out: Stdout::for_stdout(),
            lanes: BTreeMap::new(),
            buf: Vec::new(),
        }
    }

    /// The event with `lane` and `worktree` added, when it is about a task
    /// running in a lane (`task_started` carries them itself).
    fn with_lane(&mut self, event: &LoopEvent) -> Option<String> {
        if let LoopEvent::TaskStarted {
            task,
            lane: Some(lane),
            worktree: Some(worktree),
            ..
        } = event
        {
            self.lanes
                .insert(task.clone(), (lane.clone(), worktree.clone()));
            return None;
        }
        let (lane, worktree) = self.lanes.get(event.task()?)?;
        let mut value = serde_json::to_value(event).ok()?;
        let object = value.as_object_mut()?;
        object.insert("lane".into(), lane.clone().into());
        object.insert("worktree".into(), worktree.clone().into());
        Some(value.to_string())
    }
}

impl Default for JsonReporter {
    fn default() -> Self {
        JsonReporter::new()
    }
}

impl Reporter for JsonReporter {
    fn report(&mut self, event: &LoopEvent) {
        let parallel =
            !self.lanes.is_empty() || matches!(event, LoopEvent::TaskStarted { lane: Some(_), .. });
        match parallel.then(|| self.with_lane(event)).flatten() {
            Some(line) => self.out.line(&line),
            None => {
                self.buf.clear();
                if serde_json::to_writer(&mut self.buf, event).is_ok() {
                    self.buf.push(b'\n');
                    self.out.bytes(&self.buf);
                }
            }
        }
        if matches!(event, LoopEvent::Summary { .. } | LoopEvent::Error { .. }) {
            out::flush();
        }
    }
}

impl Drop for JsonReporter {
    fn drop(&mut self) {
        out::flush();
    }
}

/// An `error` event on stdout for a run that could not start (exit 2).
pub fn print_error(message: &str) {
    JsonReporter::new().report(&LoopEvent::Error {
        task: None,
        message: message.to_string(),
    });
}
