//! `<change>/.ralph/runs/<started>.jsonl`: the run's events, one JSON
//! object a line as `--json` prints them, appended as they happen and kept
//! after the run ends, so `spectr report` can tell a finished run. One file
//! per session (`<started>` is the session's start, as its transcript
//! folder): a resume appends to it.
//!
//! The agents' own stream (`agent_event`) is left out: it is most of a
//! run's bytes and the transcripts hold it; the attempts' receipts (time,
//! turns, tokens, cost) are in their `task_completed` / `task_failed`.
//! Appending costs one line; nothing is ever rewritten.

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
        if serde_json::to_writer(&mut buf, event).is_err() {
            self.buf = buf;
            return None;
        }
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

/// The events of a journal, in order. A line that does not parse (torn by a
/// kill, or from a newer spectr) is skipped and counted.
pub fn read(path: &Path) -> std::io::Result<(Vec<LoopEvent>, usize)> {
    let text = std::fs::read_to_string(path)?;
    let mut events = Vec::new();
    let mut skipped = 0;
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        match serde_json::from_str::<LoopEvent>(line) {
            Ok(e) => events.push(e),
            Err(_) => skipped += 1,
        }
    }
    Ok((events, skipped))
}
