//! `<change>/.ralph/runs/<started>.jsonl`: the run's events, one JSON
//! object a line as `--json` prints them, appended as they happen and kept
//! after the run ends, so `spectr report` can tell a finished run. One file
//! per session (`<started>` is the session's start, as its transcript
//! folder): a resume appends to it.
//!
//! The agents' own stream (`agent_event`) is left out: it is most of a
//! run's bytes and the transcripts hold it; the attempts' receipts (time,
//! turns, tokens, cost) are in their `task_completed` / `task_failed`.
//! Appending costs one line; nothing is ever rewritten. Each line is the
//! event as `--json` prints it (`ts` included) with one field more, `at_ms`:
//! the same time in milliseconds since the Unix epoch, for the report's
//! timeline.

use crate::ralph::event::LoopEvent;
use std::io::Write;
use std::path::{Path, PathBuf};

/// The folder of a change's run journals.
pub fn runs_dir(change_dir: &Path) -> PathBuf {
    crate::ralph::paths::state_dir(change_dir).join("runs")
}

/// The journal of the session started at `run_id` (file-name safe).
pub fn journal_path(change_dir: &Path, run_id: &str) -> PathBuf {
    runs_dir(change_dir).join(format!("{run_id}.jsonl"))
}

pub struct RunJournal {
    path: PathBuf,
    /// Opened at the first event (a run that never starts leaves no file).
    file: Option<std::fs::File>,
    /// Writing failed: nothing more is tried.
    broken: bool,
    buf: Vec<u8>,
}

impl RunJournal {
    pub fn new(path: PathBuf) -> RunJournal {
        RunJournal {
            path,
            file: None,
            broken: false,
            buf: Vec::new(),
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    fn file(&mut self) -> std::io::Result<&mut std::fs::File> {
        if self.file.is_none() {
            if let Some(dir) = self.path.parent() {
                std::fs::create_dir_all(dir)?;
            }
            let f = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&self.path)?;
            self.file = Some(f);
        }
        self.file
            .as_mut()
            .ok_or_else(|| std::io::Error::other("journal not open"))
    }

    /// Appends `event`; returns the error the first time writing fails.
    pub fn append(&mut self, event: &LoopEvent) -> Option<String> {
        if self.broken || matches!(event, LoopEvent::AgentEvent { .. }) {
            return None;
        }
        let mut buf = std::mem::take(&mut self.buf);
        buf.clear();
        let now = std::time::SystemTime::now();
        let at_ms = now
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis());
        buf.extend_from_slice(format!("{{\"at_ms\":{at_ms},").as_bytes());
        let start = buf.len();
        if serde_json::to_writer(&mut buf, event).is_err() || buf.get(start) != Some(&b'{') {
            self.buf = buf;
            return None;
        }
        // The event's own opening brace gives way to the one before `at_ms`.
        buf.remove(start);
        crate::ralph::event::splice_ts(&mut buf, 0, now);
        buf.push(b'\n');
        // One write per line: a kill leaves at most a torn last line, which
        // the report skips.
        let written = self.file().and_then(|f| f.write_all(&buf));
        self.buf = buf;
        match written {
            Ok(()) => None,
            Err(e) => {
                self.broken = true;
                self.file = None;
                Some(format!("cannot write {}: {e}", self.path.display()))
            }
        }
    }
}

/// One line of a journal: when, and what.
#[derive(Debug, Clone)]
pub struct Entry {
    pub at_ms: Option<u64>,
    pub event: LoopEvent,
}

/// The entries of a journal, in order. A line that does not parse (torn by
/// a kill, or from a newer spectr) is skipped and counted.
pub fn read(path: &Path) -> std::io::Result<(Vec<Entry>, usize)> {
    let text = std::fs::read_to_string(path)?;
    let mut entries = Vec::new();
    let mut skipped = 0;
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let parsed = serde_json::from_str::<serde_json::Value>(line).and_then(|v| {
            let at_ms = v.get("at_ms").and_then(serde_json::Value::as_u64);
            serde_json::from_value::<LoopEvent>(v).map(|event| Entry { at_ms, event })
        });
        match parsed {
            Ok(e) => entries.push(e),
            Err(_) => skipped += 1,
        }
    }
    Ok((entries, skipped))
}

/// The newest journal of a change (names sort as their start times).
pub fn latest(change_dir: &Path) -> Option<PathBuf> {
    let mut names: Vec<PathBuf> = std::fs::read_dir(runs_dir(change_dir))
        .ok()?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
        .collect();
    names.sort();
    names.pop()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_the_events_with_their_time_and_agent_events_are_left_out() {
        let dir = tempfile::tempdir().unwrap();
        let path = journal_path(dir.path(), "2026-01-01T00-00-00Z");
        let mut j = RunJournal::new(path.clone());
        j.append(&LoopEvent::Paused);
        j.append(&LoopEvent::AgentEvent {
            task: "1.1".into(),
            attempt: 1,
            agent: crate::agent::AgentEvent::Text { text: "hi".into() },
        });
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.starts_with("{\"at_ms\":"), "{text}");
        assert!(text.contains(",\"event\":\"paused\",\"ts\":\""), "{text}");
        std::fs::write(&path, format!("{text}{{\"torn")).unwrap();
        let (entries, skipped) = read(&path).unwrap();
        assert_eq!((entries.len(), skipped), (1, 1));
        assert!(entries[0].at_ms.is_some());
        assert_eq!(latest(dir.path()), Some(path));
    }
}
