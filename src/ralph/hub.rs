//! The run's events for whoever watches from elsewhere (the control
//! socket's subscribers): every event as its `--json` line with a sequence
//! number, kept so a watcher that attaches late sees the run from its start
//! and one that falls behind catches up.
//!
//! The run only ever appends (a short lock, no waiting, no I/O); each
//! watcher pulls at its own pace from a cursor. Memory is bounded whatever
//! the watchers do: the run's own events (few: a handful per attempt) are
//! kept from the start up to [`EVENT_BYTES`], the agents' output lines (many)
//! only the last [`AGENT_LINES`] / [`AGENT_BYTES`]. A watcher whose next
//! lines were let go is told exactly how many it missed.

use crate::ralph::event::LoopEvent;
use crate::ralph::json_line::JsonLines;
use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// The run's own events kept from the start, at most (bytes).
pub const EVENT_BYTES: usize = 32 << 20;
/// Agent output lines kept, at most (count, then bytes).
pub const AGENT_LINES: usize = 8192;
pub const AGENT_BYTES: usize = 8 << 20;

/// One line: its sequence number (from 1) and its JSON text, `seq` spliced
/// in, no newline.
#[derive(Debug, Clone)]
pub struct Line {
    pub seq: u64,
    pub text: Arc<[u8]>,
    /// An agent's line: its task (a thinned reader keeps the last few
    /// of each task's).
    pub agent_task: Option<Arc<str>>,
}

/// What a watcher reads next.
#[derive(Debug, Default)]
pub struct Batch {
    /// Lines let go before the watcher read them, before each of `lines`
    /// (same length): a watcher shows the gap where it is.
    pub missed_before: Vec<u64>,
    pub lines: Vec<Line>,
    /// The cursor to read from next.
    pub next: u64,
    /// The run ended and this is all there is.
    pub ended: bool,
}

#[derive(Default)]
struct Kept {
    lines: VecDeque<Line>,
    bytes: usize,
}

impl Kept {
    fn push(&mut self, line: Line, max_lines: usize, max_bytes: usize) {
        self.bytes += line.text.len();
        self.lines.push_back(line);
        while self.lines.len() > max_lines || self.bytes > max_bytes {
            match self.lines.pop_front() {
                Some(gone) => self.bytes -= gone.text.len(),
                None => break,
            }
        }
    }

    /// Index of the first line after `cursor`.
    fn after(&self, cursor: u64) -> usize {
        self.lines.partition_point(|l| l.seq <= cursor)
    }
}

#[derive(Default)]
struct State {
    format: JsonLines,
    buf: Vec<u8>,
    last_seq: u64,
    events: Kept,
    agent: Kept,
    ended: bool,
}

/// Shared by the run (which appends) and the watchers (which read).
#[derive(Clone, Default)]
pub struct Hub {
    inner: Arc<(Mutex<State>, Condvar)>,
    /// Tells this run apart from an earlier one of the same change (a
    /// watcher reconnecting to a new run starts again from 0).
    pub instance: Arc<str>,
}

impl Hub {
    pub fn new() -> Hub {
        Hub {
            inner: Arc::default(),
            instance: uuid::Uuid::new_v4().simple().to_string().into(),
        }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // A panic while appending left whole lines: still usable.
        self.inner.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Appends `event`; the summary ends the stream.
    pub fn publish(&self, event: &LoopEvent) {
        let mut s = self.state();
        if s.ended {
            return;
        }
        let mut buf = std::mem::take(&mut s.buf);
        buf.clear();
        if !s
            .format
            .write(&mut buf, event, std::time::SystemTime::now())
        {
            s.buf = buf;
            return;
        }
        let seq = s.last_seq + 1;
        s.last_seq = seq;
        crate::ralph::event::splice_field(&mut buf, 0, "seq", seq.to_string().as_bytes());
        let agent_task = match event {
            LoopEvent::AgentEvent { task, .. } => Some(Arc::from(task.as_str())),
            _ => None,
        };
        let line = Line {
            seq,
            text: Arc::from(buf.as_slice()),
            agent_task,
        };
        s.buf = buf;
        if matches!(event, LoopEvent::AgentEvent { .. }) {
            s.agent.push(line, AGENT_LINES, AGENT_BYTES);
        } else {
            s.events.push(line, usize::MAX, EVENT_BYTES);
        }
        if matches!(event, LoopEvent::Summary { .. }) {
            s.ended = true;
        }
        drop(s);
        self.inner.1.notify_all();
    }

    /// No more events (the run is over, summary or not).
    pub fn end(&self) {
        self.state().ended = true;
        self.inner.1.notify_all();
    }

    /// Up to `max` lines after `cursor` (0: from the start), waiting up to
    /// `wait` for one when there is none yet.
    pub fn read(&self, cursor: u64, max: usize, wait: Duration) -> Batch {
        let deadline = Instant::now() + wait;
        let mut s = self.state();
        while s.last_seq <= cursor && !s.ended {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Batch {
                    next: cursor,
                    ..Batch::default()
                };
            }
            s = self
                .inner
                .1
                .wait_timeout(s, left)
                .map(|(g, _)| g)
                .unwrap_or_else(|e| e.into_inner().0);
        }
        let (mut i, mut j) = (s.events.after(cursor), s.agent.after(cursor));
        let mut batch = Batch {
            next: cursor,
            ..Batch::default()
        };
        let mut at = cursor;
        while batch.lines.len() < max {
            let (e, a) = (s.events.lines.get(i), s.agent.lines.get(j));
            let line = match (e, a) {
                (Some(e), Some(a)) if e.seq < a.seq => {
                    i += 1;
                    e
                }
                (Some(e), None) => {
                    i += 1;
                    e
                }
                (_, Some(a)) => {
                    j += 1;
                    a
                }
                (None, None) => break,
            };
            batch.missed_before.push(line.seq - at - 1);
            at = line.seq;
            batch.lines.push(line.clone());
        }
        batch.next = at;
        // Everything up to the last line was let go: said by the next
        // read's first line, or here when the run has ended.
        batch.ended = s.ended && i >= s.events.lines.len() && j >= s.agent.lines.len();
        if batch.ended && at < s.last_seq {
            batch.missed_before.push(s.last_seq - at);
            batch.next = s.last_seq;
        }
        batch
    }

    /// The last sequence number given.
    #[cfg(test)]
    pub fn last_seq(&self) -> u64 {
        self.state().last_seq
    }
}

/// The gap line a watcher is sent for `missed` lines it never got.
pub fn gap_line(missed: u64) -> String {
    format!("{{\"event\":\"gap\",\"missed\":{missed}}}")
}

/// The gap line for `elided` lines of `task`'s agent a thinned reader was
/// not sent (see [`thin`]).
pub fn elided_line(elided: u64, task: &str) -> String {
    let task = serde_json::to_string(task).unwrap_or_else(|_| "\"\"".into());
    format!("{{\"event\":\"gap\",\"missed\":{elided},\"task\":{task},\"elided\":true}}")
}

/// Which of `lines` a reader that wants at most `per_task` agent lines of
/// each task per batch is sent: the last ones of each task, and every line
/// that is not an agent's (a page shows a task's last lines; a flood of
/// them costs the run nothing then).
pub fn thin(lines: &[Line], per_task: usize) -> Vec<bool> {
    let mut seen: std::collections::BTreeMap<&str, usize> = std::collections::BTreeMap::new();
    let mut keep = vec![true; lines.len()];
    for (i, line) in lines.iter().enumerate().rev() {
        if let Some(task) = &line.agent_task {
            let n = seen.entry(task).or_default();
            *n += 1;
            keep[i] = *n <= per_task;
        }
    }
    keep
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::AgentEvent;
    use crate::model::TaskId;

    fn notice(n: usize) -> LoopEvent {
        LoopEvent::Notice {
            level: crate::ralph::event::NoticeLevel::Info,
            message: format!("n{n}"),
        }
    }

    fn text(n: usize) -> LoopEvent {
        LoopEvent::AgentEvent {
            task: TaskId::from("1.1"),
            attempt: 1,
            agent: AgentEvent::Text {
                text: format!("t{n}"),
            },
        }
    }

    fn seqs(b: &Batch) -> Vec<u64> {
        b.lines.iter().map(|l| l.seq).collect()
    }

    #[test]
    fn lines_carry_their_seq_and_read_in_order_from_any_cursor() {
        let hub = Hub::new();
        hub.publish(&notice(1));
        hub.publish(&text(2));
        hub.publish(&notice(3));
        let b = hub.read(0, 10, Duration::ZERO);
        assert_eq!(seqs(&b), [1, 2, 3]);
        assert_eq!(b.missed_before, [0, 0, 0]);
        let first: serde_json::Value = serde_json::from_slice(&b.lines[0].text).unwrap();
        assert_eq!(first["seq"], 1);
        assert_eq!(first["message"], "n1");
        assert!(first["ts"].is_string());
        let b = hub.read(1, 1, Duration::ZERO);
        assert_eq!((seqs(&b), b.next), (vec![2], 2));
        // Nothing new: an empty batch at once.
        let b = hub.read(3, 10, Duration::ZERO);
        assert!(b.lines.is_empty() && !b.ended && b.next == 3);
    }

    #[test]
    fn agent_lines_are_bounded_the_runs_events_kept_and_the_gap_counted_exactly() {
        let hub = Hub::new();
        hub.publish(&notice(0));
        for n in 0..AGENT_LINES + 10 {
            hub.publish(&text(n));
        }
        hub.publish(&notice(1));
        // A watcher that never read: the first event, then 10 agent lines
        // missed, then the rest.
        let b = hub.read(0, usize::MAX, Duration::ZERO);
        assert_eq!(b.lines.len(), AGENT_LINES + 2);
        assert_eq!(b.missed_before[0], 0);
        assert_eq!(b.missed_before[1], 10);
        assert!(b.missed_before[2..].iter().all(|&m| m == 0));
        let total: u64 = b.missed_before.iter().sum::<u64>() + b.lines.len() as u64;
        assert_eq!(total, hub.last_seq());
        let s = hub.state();
        assert!(s.agent.lines.len() == AGENT_LINES && s.agent.bytes <= AGENT_BYTES);
    }

    #[test]
    fn a_waiting_reader_wakes_on_a_line_and_the_end_ends_it() {
        let hub = Hub::new();
        let writer = hub.clone();
        let t = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            writer.publish(&notice(1));
        });
        let b = hub.read(0, 10, Duration::from_secs(30));
        assert_eq!(seqs(&b), [1]);
        t.join().unwrap();
        hub.end();
        let b = hub.read(1, 10, Duration::from_secs(30));
        assert!(b.ended && b.lines.is_empty());
        // Nothing after the end.
        hub.publish(&notice(2));
        assert_eq!(hub.last_seq(), 1);
    }

    #[test]
    fn thinning_keeps_every_event_and_the_last_agent_lines_of_each_task() {
        let hub = Hub::new();
        hub.publish(&notice(0));
        for n in 0..5 {
            hub.publish(&text(n));
        }
        hub.publish(&LoopEvent::AgentEvent {
            task: TaskId::from("2.1"),
            attempt: 1,
            agent: AgentEvent::Text {
                text: "other".into(),
            },
        });
        hub.publish(&notice(1));
        let b = hub.read(0, 100, Duration::ZERO);
        let keep = thin(&b.lines, 2);
        // notice, 5 lines of 1.1 (the last 2 kept), 2.1's one, notice.
        assert_eq!(keep, [true, false, false, false, true, true, true, true]);
        let gap: serde_json::Value = serde_json::from_str(&elided_line(3, "1.1")).unwrap();
        assert_eq!(
            (gap["missed"].as_u64(), gap["task"].as_str()),
            (Some(3), Some("1.1"))
        );
    }

    #[test]
    fn the_summary_ends_the_stream_and_lines_let_go_at_the_end_are_counted() {
        let hub = Hub::new();
        for n in 0..AGENT_LINES + 5 {
            hub.publish(&text(n));
        }
        hub.end();
        let b = hub.read(0, usize::MAX, Duration::ZERO);
        assert_eq!(b.missed_before[0], 5);
        assert!(b.ended);
        let b = hub.read(b.next, 10, Duration::ZERO);
        assert!(b.ended && b.lines.is_empty());
    }
}
