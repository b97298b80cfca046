//! One `--json` line per event, as every reader of the run's events gets
//! it (`--json` on stdout, the control socket's subscribers): the schema of
//! `docs/src/json-events.md`, a lane's task events with their `lane` and
//! `worktree`, and `ts`, the time, last.

use crate::agent::AgentEvent;
use crate::model::TaskId;
use crate::ralph::event::LoopEvent;
use std::collections::BTreeMap;

/// Formats events as lines; remembers which lane each running task is in.
#[derive(Debug, Default)]
pub struct JsonLines {
    /// Parallel runs: each running task's lane and work tree, added to every
    /// event about it.
    lanes: BTreeMap<TaskId, (String, String)>,
}

impl JsonLines {
    pub fn new() -> JsonLines {
        JsonLines::default()
    }

    /// Appends `event`'s line (no newline) to `buf`, stamped `at`; false
    /// (and `buf` as it was) when it cannot be serialized.
    pub fn write(
        &mut self,
        buf: &mut Vec<u8>,
        event: &LoopEvent,
        at: std::time::SystemTime,
    ) -> bool {
        let start = buf.len();
        let written = match event {
            LoopEvent::AgentEvent {
                task,
                attempt,
                agent: AgentEvent::Text { text },
            } => {
                write_text_event(buf, task, *attempt, text);
                true
            }
            _ => serde_json::to_writer(&mut *buf, event).is_ok(),
        };
        if !written {
            buf.truncate(start);
            return false;
        }
        // A lane's task: its fields are spliced in before the closing
        // brace, in the event's own order, without a detour through a map.
        if let Some((lane, worktree)) = self.lane_of(event)
            && buf.last() == Some(&b'}')
        {
            buf.pop();
            buf.extend_from_slice(b",\"lane\":");
            let _ = serde_json::to_writer(&mut *buf, lane);
            buf.extend_from_slice(b",\"worktree\":");
            let _ = serde_json::to_writer(&mut *buf, worktree);
            buf.push(b'}');
        }
        crate::ralph::event::splice_ts(buf, start, at);
        true
    }

    /// The lane and work tree of the task an event is about, when it runs
    /// in a lane (`task_started` carries them itself, and is noted here).
    fn lane_of(&mut self, event: &LoopEvent) -> Option<&(String, String)> {
        if let LoopEvent::TaskStarted {
            task,
            lane,
            worktree,
            ..
        } = event
        {
            // Without them it runs in the user's tree (lanes taking turns).
            match (lane, worktree) {
                (Some(lane), Some(worktree)) => self
                    .lanes
                    .insert(task.clone(), (lane.clone(), worktree.clone())),
                _ => self.lanes.remove(task),
            };
            return None;
        }
        // `merged` and `attempt_queued` name their lane themselves: one
        // `lane` key per object.
        if self.lanes.is_empty()
            || matches!(
                event,
                LoopEvent::Merged { .. } | LoopEvent::AttemptQueued { .. }
            )
        {
            return None;
        }
        self.lanes.get(event.task()?)
    }
}

/// The hot path of a chatty agent: an assistant text event written directly,
/// its text escaped a block at a time (serde_json looks up every byte in a
/// table). Byte for byte what serde_json writes for the event (tested).
fn write_text_event(buf: &mut Vec<u8>, task: &TaskId, attempt: u32, text: &str) {
    use std::io::Write as _;
    buf.extend_from_slice(b"{\"event\":\"agent_event\",\"task\":");
    let _ = serde_json::to_writer(&mut *buf, task);
    let _ = write!(buf, ",\"attempt\":{attempt}");
    buf.extend_from_slice(b",\"agent\":{\"kind\":\"text\",\"text\":\"");
    escape_into(buf, text);
    buf.extend_from_slice(b"\"}}");
}

/// Appends `text` escaped for a JSON string literal, as serde_json does:
/// `"`, `\\` and control characters only; everything else as it is.
fn escape_into(out: &mut Vec<u8>, text: &str) {
    const BLOCK: usize = 16;
    let needs = |b: u8| (b < 0x20) | (b == b'"') | (b == b'\\');
    let bytes = text.as_bytes();
    let mut start = 0;
    let mut i = 0;
    while i < bytes.len() {
        // Branch-free over a block (vectorised): most blocks are clean.
        if let Some(block) = bytes.get(i..i + BLOCK)
            && !block.iter().fold(false, |bad, &b| bad | needs(b))
        {
            i += BLOCK;
            continue;
        }
        let b = bytes[i];
        if needs(b) {
            out.extend_from_slice(&bytes[start..i]);
            match b {
                b'"' => out.extend_from_slice(b"\\\""),
                b'\\' => out.extend_from_slice(b"\\\\"),
                b'\n' => out.extend_from_slice(b"\\n"),
                b'\r' => out.extend_from_slice(b"\\r"),
                b'\t' => out.extend_from_slice(b"\\t"),
                0x08 => out.extend_from_slice(b"\\b"),
                0x0c => out.extend_from_slice(b"\\f"),
                _ => {
                    const HEX: &[u8; 16] = b"0123456789abcdef";
                    out.extend_from_slice(b"\\u00");
                    out.push(HEX[usize::from(b >> 4)]);
                    out.push(HEX[usize::from(b & 0xf)]);
                }
            }
            start = i + 1;
        }
        i += 1;
    }
    out.extend_from_slice(&bytes[start..]);
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn direct(task: &str, attempt: u32, text: &str) -> Vec<u8> {
        let mut buf = Vec::new();
        write_text_event(&mut buf, &TaskId::from(task), attempt, text);
        buf
    }

    fn serde(task: &str, attempt: u32, text: &str) -> Vec<u8> {
        serde_json::to_vec(&LoopEvent::AgentEvent {
            task: TaskId::from(task),
            attempt,
            agent: AgentEvent::Text {
                text: text.to_string(),
            },
        })
        .unwrap()
    }

    #[test]
    fn text_events_are_written_as_serde_json_writes_them() {
        let long = "a line of text that is long enough for blocks\n".repeat(20);
        for text in [
            "",
            "plain",
            "quote \" and backslash \\ and slash /",
            "lines\nand\r\ntabs\there",
            "\u{0}\u{1}\u{8}\u{b}\u{c}\u{1f}\u{7f} controls",
            "ünïcödé ✓ \u{2028} 🦀",
            "exactly sixteen!",
            "sixteen then esc\"",
            long.as_str(),
        ] {
            assert_eq!(
                String::from_utf8(direct("1.2", 3, text)).unwrap(),
                String::from_utf8(serde("1.2", 3, text)).unwrap()
            );
        }
        assert_eq!(direct("a\"b", 0, "x"), serde("a\"b", 0, "x"));
    }

    #[test]
    fn an_event_naming_its_lane_gets_no_second_lane_key() {
        let mut lines = JsonLines::new();
        let mut buf = Vec::new();
        let started = LoopEvent::TaskStarted {
            task: TaskId::from("3.1"),
            section: String::new(),
            description: String::new(),
            attempt: 1,
            max_attempts: 1,
            transcript: String::new(),
            index: 1,
            count: 1,
            lane: Some("3".into()),
            worktree: Some("lane-3".into()),
        };
        assert!(lines.write(&mut buf, &started, std::time::SystemTime::now()));
        for event in [
            LoopEvent::AttemptQueued {
                task: TaskId::from("3.1"),
                attempt: 1,
                lane: "3".into(),
            },
            LoopEvent::Paused,
        ] {
            buf.clear();
            assert!(lines.write(&mut buf, &event, std::time::SystemTime::now()));
            let text = String::from_utf8(buf.clone()).unwrap();
            assert!(text.matches("\"lane\":").count() <= 1, "{text}");
        }
        buf.clear();
        let status = LoopEvent::StatusChanged {
            task: TaskId::from("3.1"),
            status: crate::model::TaskStatus::Completed,
        };
        assert!(lines.write(&mut buf, &status, std::time::SystemTime::now()));
        let text = String::from_utf8(buf.clone()).unwrap();
        assert_eq!(text.matches("\"lane\":\"3\"").count(), 1, "{text}");
    }

    proptest! {
        #[test]
        fn any_text_is_written_as_serde_json_writes_it(text in any::<String>(), attempt in any::<u32>()) {
            prop_assert_eq!(direct("4.10", attempt, &text), serde("4.10", attempt, &text));
        }
    }
}
