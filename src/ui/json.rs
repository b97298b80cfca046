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

    /// The lane and work tree of the task an event is about, when it runs
    /// in a lane (`task_started` carries them itself, and is noted here).
    fn lane_of(&mut self, event: &LoopEvent) -> Option<&(String, String)> {
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
        if self.lanes.is_empty() {
            return None;
        }
        self.lanes.get(event.task()?)
    }
}

impl Default for JsonReporter {
    fn default() -> Self {
        JsonReporter::new()
    }
}

impl Reporter for JsonReporter {
    fn report(&mut self, event: &LoopEvent) {
        let mut buf = std::mem::take(&mut self.buf);
        buf.clear();
        if serde_json::to_writer(&mut buf, event).is_ok() {
            // A lane's task: its fields are spliced in before the closing
            // brace, in the event's own order, without a detour through a map.
            if let Some((lane, worktree)) = self.lane_of(event)
                && buf.last() == Some(&b'}')
            {
                buf.pop();
                buf.extend_from_slice(b",\"lane\":");
                let _ = serde_json::to_writer(&mut buf, lane);
                buf.extend_from_slice(b",\"worktree\":");
                let _ = serde_json::to_writer(&mut buf, worktree);
                buf.push(b'}');
            }
            buf.push(b'\n');
            self.out.bytes(&buf);
        }
        self.buf = buf;
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
