//! `<change>/.ralph-session.json`: the run's state, rewritten atomically at
//! every state change so that a crash leaves the last consistent state behind.
//! It is where the requirements, upstream spectr and its tooling look for it.
//! An entry in the repository's `info/exclude` keeps it out of `git status`
//! and of an agent's `git add -A` without touching the user's `.gitignore`;
//! checkpoints leave it out whatever the ignore rules say. (Versions 0.2 to
//! 0.4 kept it as `<change>/.ralph/session.json`; that file is moved once,
//! see [`Session::migrate_legacy`].)
//!
//! The session is updated only by applying [`LoopEvent`]s, so it records exactly
//! the facts the reporters saw.

use crate::agent::receipt::Receipt;
use crate::checkpoint::{Checkpoint, HeadSeen};
use crate::model::TaskId;
use crate::model::atomic::replace_atomic;
use crate::ralph::event::{LoopEvent, MergeWork, Outcome};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The file name in the change folder.
pub const SESSION_FILE: &str = ".ralph-session.json";
/// Where the versions that moved it kept the session: in the state folder
/// (`.ralph/`), under this name.
pub const LEGACY_SESSION_FILE: &str = "session.json";
pub const SESSION_VERSION: u32 = 1;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionOptions {
    pub agent: String,
    pub max_retries: u32,
    pub checkpoints: bool,
    pub verify: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunTaskState {
    Pending,
    /// An attempt is in flight (a crash leaves this behind).
    Running,
    Completed,
    /// The last attempt failed; a retry may follow.
    Failed,
    Skipped,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AttemptRecord {
    pub attempt: u32,
    pub started_at: String,
    pub ended_at: Option<String>,
    pub transcript: String,
    pub checkpoint: Option<Checkpoint>,
    pub outcome: Option<Outcome>,
    pub receipt: Option<Receipt>,
    /// Where a failed attempt's work was kept.
    pub failed_ref: Option<String>,
    /// The agent's process group, so a resume can stop what a crash left running.
    #[serde(default)]
    pub agent_pid: Option<u32>,
    /// The agent's start time (clock ticks since boot, from /proc): with the
    /// pid its identity, so a recycled pid is never mistaken for our agent.
    /// Without it the pid is never signalled.
    #[serde(default)]
    pub agent_started: Option<u64>,
    /// Set when a resume left the tree as it was instead of reverting this
    /// attempt (the person chose to keep commits made since).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub kept_tree: bool,
    /// Parallel runs: the attempt's lane and the lane's work tree. Its
    /// per-attempt checkpoint is of that work tree (`lane_checkpoint`);
    /// `checkpoint` is then the user's tree before the merge-back, set only
    /// while merging, so a resume never reverts the user's tree to a lane's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lane: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worktree: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lane_checkpoint: Option<Checkpoint>,
    /// Parallel runs: the attempt's work is in the user's tree. From then on
    /// it counts as completed, even if the run died before saying so: its
    /// merge is never reverted (other lanes may have merged on top of it).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub merged: bool,
    /// Every state HEAD was seen in while the attempt ran, after its
    /// checkpoint: a resume reverts these moves as the attempt's own and
    /// asks only about the others.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub head_moves: Vec<HeadSeen>,
    /// Parallel runs: the completed work its merge-back was merging (set
    /// with `checkpoint`), so a resume after a crash mid-merge finishes the
    /// merge without running the agent again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub merge_work: Option<MergeWork>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TaskRecord {
    pub state: RunTaskState,
    /// Attempts that used up a try (rate limits and user stops don't).
    pub counted_attempts: u32,
    /// `counted_attempts` when the retry budget was last renewed (a "retry"
    /// answer to the exhaustion prompt renews it).
    pub budget_start: u32,
    pub attempts: Vec<AttemptRecord>,
    pub last_reason: Option<String>,
    /// This record's entry in the file (`"id":{record}`) as last saved,
    /// while the record is unchanged: a save encodes only what changed, so
    /// its cost does not grow with the tasks finished before it (a finished
    /// task's record never changes again). Cleared by every way to change
    /// a record ([`Session::record_mut`], [`Session::apply`]).
    #[serde(skip)]
    encoded: Option<String>,
}

impl TaskRecord {
    fn new() -> TaskRecord {
        TaskRecord {
            state: RunTaskState::Pending,
            counted_attempts: 0,
            budget_start: 0,
            attempts: Vec::new(),
            last_reason: None,
            encoded: None,
        }
    }

    /// Retries used since the budget was last renewed (the first try is free).
    pub fn retries_used(&self) -> u32 {
        self.counted_attempts
            .saturating_sub(self.budget_start)
            .saturating_sub(1)
    }

    /// Counted attempts since the budget was last renewed.
    pub fn budget_used(&self) -> u32 {
        self.counted_attempts.saturating_sub(self.budget_start)
    }

    /// The attempt number the next start will have.
    pub fn next_attempt(&self) -> u32 {
        self.attempts
            .last()
            .map_or(1, |a| a.attempt.saturating_add(1))
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Session {
    pub version: u32,
    pub change: String,
    pub options: SessionOptions,
    pub started_at: String,
    pub updated_at: String,
    /// Tasks chosen with `--interactive`; None means all.
    pub selection: Option<Vec<TaskId>>,
    /// Changed only through [`Session::record_mut`] and [`Session::apply`],
    /// which keep `encoded` true.
    pub tasks: BTreeMap<TaskId, TaskRecord>,
    /// Wall-clock time of the runs that ended before this one.
    #[serde(default)]
    pub run_time_ms: u64,
    /// How many tasks the run (the last one, when resumed) runs at once, so
    /// `spectr status` can say what it starts next.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slots: Option<u32>,
}

/// The session's fields but its tasks, as the file's head.
#[derive(Serialize)]
struct Head<'a> {
    version: u32,
    change: &'a str,
    options: &'a SessionOptions,
    started_at: &'a str,
    updated_at: &'a str,
    selection: &'a Option<Vec<TaskId>>,
    run_time_ms: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    slots: Option<u32>,
}

#[derive(Debug, thiserror::Error, miette::Diagnostic)]
pub enum SessionError {
    #[error("session file {path} is corrupt: {detail}")]
    #[diagnostic(help(
        "answer 'no' to the resume question or pass --fresh to start over; the file will be replaced"
    ))]
    Corrupt { path: PathBuf, detail: String },
    #[error("session file {path} has version {found}, this spectr reads version {SESSION_VERSION}")]
    #[diagnostic(help("pass --fresh to start over, or use the spectr version that wrote it"))]
    UnknownVersion { path: PathBuf, found: u64 },
    #[error("session file {path} belongs to change '{found}', not '{expected}'")]
    #[diagnostic(help("pass --fresh to start over"))]
    WrongChange {
        path: PathBuf,
        found: String,
        expected: String,
    },
    #[error("could not {action} session file {path}: {source}")]
    Io {
        action: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

pub fn now_rfc3339() -> String {
    humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string()
}

impl Session {
    pub fn new(change: &str, options: SessionOptions, selection: Option<Vec<TaskId>>) -> Session {
        let now = now_rfc3339();
        Session {
            version: SESSION_VERSION,
            change: change.to_string(),
            options,
            started_at: now.clone(),
            updated_at: now,
            selection,
            tasks: BTreeMap::new(),
            run_time_ms: 0,
            slots: None,
        }
    }

    /// `<change>/.ralph-session.json`.
    pub fn path(change_dir: &Path) -> PathBuf {
        change_dir.join(SESSION_FILE)
    }

    /// `<change>/.ralph/session.json`, where the versions that moved it kept it.
    pub fn legacy_path(change_dir: &Path) -> PathBuf {
        change_dir
            .join(crate::ralph::config::STATE_DIR)
            .join(LEGACY_SESSION_FILE)
    }

    /// The file to read without changing anything (`--dry-run`): the current
    /// place, else the legacy one.
    pub fn existing_path(change_dir: &Path) -> PathBuf {
        let path = Self::path(change_dir);
        let legacy = Self::legacy_path(change_dir);
        if !path.exists() && legacy.exists() {
            legacy
        } else {
            path
        }
    }

    /// Moves a session file left by an older version to its place (once).
    /// Returns the old path when it moved one. When both exist the new one
    /// wins and the old one is left alone.
    pub fn migrate_legacy(change_dir: &Path) -> Result<Option<PathBuf>, SessionError> {
        let legacy = Self::legacy_path(change_dir);
        let path = Self::path(change_dir);
        if !legacy.is_file() || path.exists() {
            return Ok(None);
        }
        let io = |action, source| SessionError::Io {
            action,
            path: legacy.clone(),
            source,
        };
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(|e| io("move", e))?;
        }
        std::fs::rename(&legacy, &path).map_err(|e| io("move", e))?;
        Ok(Some(legacy))
    }

    /// Ok(None) when there is no session file.
    pub fn load(path: &Path, change: &str) -> Result<Option<Session>, SessionError> {
        let text = match std::fs::read(path) {
            // Not UTF-8: say where (line, column) and what to do.
            Ok(bytes) => crate::model::error::decode_utf8(path, bytes).map_err(|d| {
                SessionError::Corrupt {
                    path: path.to_path_buf(),
                    detail: format!(
                        "line {}, column {}: {}; {}",
                        d.line, d.column, d.message, d.help
                    ),
                }
            })?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(source) => {
                return Err(SessionError::Io {
                    action: "read",
                    path: path.to_path_buf(),
                    source,
                });
            }
        };
        let value: serde_json::Value =
            serde_json::from_str(&text).map_err(|e| SessionError::Corrupt {
                path: path.to_path_buf(),
                detail: e.to_string(),
            })?;
        let version = value.get("version").and_then(serde_json::Value::as_u64);
        match version {
            Some(v) if v == u64::from(SESSION_VERSION) => {}
            Some(found) => {
                return Err(SessionError::UnknownVersion {
                    path: path.to_path_buf(),
                    found,
                });
            }
            None => {
                return Err(SessionError::Corrupt {
                    path: path.to_path_buf(),
                    detail: "no \"version\" field".into(),
                });
            }
        }
        // From the text, not the value: serde then names the line and column.
        let session: Session = serde_json::from_str(&text).map_err(|e| SessionError::Corrupt {
            path: path.to_path_buf(),
            detail: e.to_string(),
        })?;
        if session.change != change {
            return Err(SessionError::WrongChange {
                path: path.to_path_buf(),
                found: session.change,
                expected: change.to_string(),
            });
        }
        Ok(Some(session))
    }

    pub fn save(&mut self, path: &Path) -> Result<(), SessionError> {
        self.save_changes(path, &mut String::new()).map(drop)
    }

    /// Saves, and returns the tasks whose records changed since the last
    /// save (all of them the first time). `buffer`: the text is built there;
    /// a buffer kept from save to save spares asking the system for fresh
    /// pages each time.
    pub fn save_changes(
        &mut self,
        path: &Path,
        buffer: &mut String,
    ) -> Result<Vec<TaskId>, SessionError> {
        self.updated_at = now_rfc3339();
        let changed = self.encode(buffer).map_err(|e| SessionError::Io {
            action: "encode",
            path: path.to_path_buf(),
            source: std::io::Error::other(e),
        })?;
        if let Err(source) = replace_atomic(path, buffer.as_bytes()) {
            // Written again in full next time.
            self.tasks.values_mut().for_each(|r| r.encoded = None);
            return Err(SessionError::Io {
                action: "write",
                path: path.to_path_buf(),
                source,
            });
        }
        Ok(changed)
    }

    /// The file's text: the head, then one line per task (the same JSON a
    /// whole-struct encoding gives, as `load` reads it), reusing the entries
    /// of records unchanged since the last save.
    fn encode(&mut self, text: &mut String) -> Result<Vec<TaskId>, serde_json::Error> {
        let head = serde_json::to_string(&Head {
            version: self.version,
            change: &self.change,
            options: &self.options,
            started_at: &self.started_at,
            updated_at: &self.updated_at,
            selection: &self.selection,
            run_time_ms: self.run_time_ms,
            slots: self.slots,
        })?;
        text.clear();
        // The head is an object: reopen it for the tasks.
        text.push_str(head.strip_suffix('}').unwrap_or(&head));
        text.push_str(",\"tasks\":{");
        let mut changed = Vec::new();
        for (i, (id, rec)) in self.tasks.iter_mut().enumerate() {
            text.push_str(if i == 0 { "\n" } else { ",\n" });
            if rec.encoded.is_none() {
                let entry = format!(
                    "{}:{}",
                    serde_json::to_string(id)?,
                    serde_json::to_string(&*rec)?
                );
                rec.encoded = Some(entry);
                changed.push(id.clone());
            }
            text.push_str(rec.encoded.as_deref().unwrap_or_default());
        }
        text.push_str("\n}}\n");
        Ok(changed)
    }

    pub fn delete(path: &Path) -> Result<(), SessionError> {
        match std::fs::remove_file(path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(source) => Err(SessionError::Io {
                action: "delete",
                path: path.to_path_buf(),
                source,
            }),
        }
    }

    pub fn record(&self, task: &TaskId) -> Option<&TaskRecord> {
        self.tasks.get(task)
    }

    pub fn record_mut(&mut self, task: &TaskId) -> &mut TaskRecord {
        let rec = self
            .tasks
            .entry(task.clone())
            .or_insert_with(TaskRecord::new);
        rec.encoded = None;
        rec
    }

    /// Whether this event changes what the file must say (so it must be saved).
    pub fn is_state_change(event: &LoopEvent) -> bool {
        !matches!(
            event,
            LoopEvent::AgentEvent { .. }
                | LoopEvent::Notice { .. }
                | LoopEvent::Plan { .. }
                | LoopEvent::RateLimitWait { .. }
                | LoopEvent::Paused
                | LoopEvent::Resumed
                | LoopEvent::Question { .. }
                | LoopEvent::Answered { .. }
        )
    }

    /// Updates the records from one loop event.
    pub fn apply(&mut self, event: &LoopEvent) {
        match event {
            LoopEvent::TaskStarted {
                task,
                attempt,
                transcript,
                lane,
                worktree,
                ..
            } => {
                let rec = self.record_mut(task);
                rec.state = RunTaskState::Running;
                rec.attempts.push(AttemptRecord {
                    attempt: *attempt,
                    started_at: now_rfc3339(),
                    ended_at: None,
                    transcript: transcript.clone(),
                    checkpoint: None,
                    outcome: None,
                    receipt: None,
                    failed_ref: None,
                    agent_pid: None,
                    agent_started: None,
                    kept_tree: false,
                    lane: lane.clone(),
                    worktree: worktree.clone(),
                    lane_checkpoint: None,
                    merged: false,
                    head_moves: Vec::new(),
                    merge_work: None,
                });
            }
            LoopEvent::Checkpoint {
                task,
                attempt,
                checkpoint,
            } => {
                if let Some(a) = self.attempt_mut(task, *attempt) {
                    if a.worktree.is_some() {
                        a.lane_checkpoint = Some(checkpoint.clone());
                    } else {
                        a.checkpoint = Some(checkpoint.clone());
                    }
                }
            }
            LoopEvent::MergeStarted {
                task,
                attempt,
                checkpoint,
                work,
            } => {
                if let Some(a) = self.attempt_mut(task, *attempt) {
                    a.checkpoint = Some(checkpoint.clone());
                    if work.is_some() {
                        a.merge_work = work.clone();
                    }
                }
            }
            LoopEvent::HeadMoved {
                task,
                attempt,
                head,
                branch,
                tip,
            } => {
                if let Some(a) = self.attempt_mut(task, *attempt) {
                    let seen = HeadSeen {
                        head: head.clone(),
                        branch: branch.clone(),
                        tip: tip.clone(),
                    };
                    if !a.head_moves.contains(&seen) {
                        a.head_moves.push(seen);
                    }
                }
            }
            LoopEvent::Merged { task, attempt, .. } => {
                if let Some(a) = self.attempt_mut(task, *attempt) {
                    a.merged = true;
                }
            }
            LoopEvent::TaskCompleted {
                task,
                attempt,
                outcome,
                receipt,
            } => {
                self.finish_attempt(task, *attempt, outcome, receipt);
                self.record_mut(task).state = RunTaskState::Completed;
            }
            LoopEvent::TaskFailed {
                task,
                attempt,
                outcome,
                receipt,
            } => {
                self.finish_attempt(task, *attempt, outcome, receipt);
                let rec = self.record_mut(task);
                // A stop by request is not a failure: the task is still to do.
                rec.state = if matches!(outcome, Outcome::Stopped { .. }) {
                    RunTaskState::Pending
                } else {
                    RunTaskState::Failed
                };
                if let Some(reason) = outcome.retry_context() {
                    rec.last_reason = Some(reason.to_string());
                } else if outcome.counts_as_attempt() {
                    rec.last_reason = None;
                }
            }
            // pid 0 means no process: never recorded (a resume would
            // signal it as "my own process group").
            LoopEvent::AgentStarted { task, attempt, pid } if *pid > 0 => {
                let started = crate::agent::process::start_time(*pid);
                if let Some(a) = self.attempt_mut(task, *attempt) {
                    a.agent_pid = Some(*pid);
                    a.agent_started = started;
                }
            }
            LoopEvent::Reverted {
                task,
                attempt,
                failed_ref,
                ..
            } => {
                if let Some(a) = self.attempt_mut(task, *attempt) {
                    a.failed_ref = Some(failed_ref.clone());
                }
            }
            LoopEvent::TaskSkipped {
                task, dependents, ..
            } => {
                for t in std::iter::once(task).chain(dependents) {
                    self.record_mut(t).state = RunTaskState::Skipped;
                }
            }
            LoopEvent::StatusChanged { task, status }
                if *status == crate::model::TaskStatus::Completed =>
            {
                self.record_mut(task).state = RunTaskState::Completed;
            }
            _ => {}
        }
    }

    fn attempt_mut(&mut self, task: &TaskId, attempt: u32) -> Option<&mut AttemptRecord> {
        let rec = self.tasks.get_mut(task)?;
        rec.encoded = None;
        rec.attempts.iter_mut().rev().find(|a| a.attempt == attempt)
    }

    fn finish_attempt(
        &mut self,
        task: &TaskId,
        attempt: u32,
        outcome: &Outcome,
        receipt: &Receipt,
    ) {
        let counted = outcome.counts_as_attempt();
        if let Some(a) = self.attempt_mut(task, attempt) {
            a.ended_at = Some(now_rfc3339());
            a.outcome = Some(outcome.clone());
            a.receipt = Some(receipt.clone());
        }
        if counted {
            self.record_mut(task).counted_attempts += 1;
        }
    }

    /// Tasks this session skipped (they block the rest of their lane).
    pub fn skipped(&self) -> BTreeSet<TaskId> {
        self.tasks
            .iter()
            .filter(|(_, r)| r.state == RunTaskState::Skipped)
            .map(|(id, _)| id.clone())
            .collect()
    }

    /// Tasks this session judged completed.
    pub fn completed(&self) -> BTreeSet<TaskId> {
        self.tasks
            .iter()
            .filter(|(_, r)| r.state == RunTaskState::Completed)
            .map(|(id, _)| id.clone())
            .collect()
    }

    /// Attempts that were in flight when the run died: (task, attempt record).
    pub fn in_flight(&self) -> Vec<(TaskId, AttemptRecord)> {
        self.last_attempts(|a| a.outcome.is_none())
    }

    /// Attempts that ended without success but whose tree was never restored
    /// (the run died between judging and reverting), in flight ones included.
    pub fn unreverted(&self) -> Vec<(TaskId, AttemptRecord)> {
        self.last_attempts(|a| {
            a.checkpoint.is_some()
                && a.failed_ref.is_none()
                && !a.kept_tree
                && !a.merged
                && !a.outcome.as_ref().is_some_and(Outcome::is_completed)
        })
    }

    fn last_attempts(&self, keep: impl Fn(&AttemptRecord) -> bool) -> Vec<(TaskId, AttemptRecord)> {
        self.tasks
            .iter()
            .filter_map(|(id, rec)| {
                let last = rec.attempts.last()?;
                keep(last).then(|| (id.clone(), last.clone()))
            })
            .collect()
    }

    /// Every checkpoint or failed-attempt ref this session knows of, sorted.
    pub fn refs(&self) -> Vec<String> {
        let mut refs: Vec<String> = self
            .tasks
            .values()
            .flat_map(|r| r.attempts.iter())
            .filter_map(|a| a.failed_ref.clone())
            .collect();
        refs.sort();
        refs.dedup();
        refs
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options() -> SessionOptions {
        SessionOptions {
            agent: "claude".into(),
            max_retries: 3,
            checkpoints: true,
            verify: None,
        }
    }

    /// `task`'s first attempt started, in `lane` (its worktree
    /// `/w/lane-<lane>`) or in the user's tree.
    fn first_attempt_started(task: &TaskId, lane: Option<&str>) -> LoopEvent {
        LoopEvent::TaskStarted {
            task: task.clone(),
            section: "S".into(),
            description: "d".into(),
            attempt: 1,
            max_attempts: 4,
            transcript: "t".into(),
            index: 1,
            count: 1,
            lane: lane.map(Into::into),
            worktree: lane.map(|l| format!("/w/lane-{l}")),
        }
    }

    #[test]
    fn a_pid_of_zero_is_never_recorded() {
        let mut s = Session::new("c", options(), None);
        let task = TaskId::from("1.1");
        s.apply(&first_attempt_started(&task, None));
        s.apply(&LoopEvent::AgentStarted {
            task: task.clone(),
            attempt: 1,
            pid: 0,
        });
        assert_eq!(s.tasks[&task].attempts[0].agent_pid, None);
        s.apply(&LoopEvent::AgentStarted {
            task: task.clone(),
            attempt: 1,
            pid: std::process::id(),
        });
        let a = &s.tasks[&task].attempts[0];
        assert_eq!(a.agent_pid, Some(std::process::id()));
        assert!(
            a.agent_started.is_some(),
            "the identity is recorded with the pid"
        );
    }

    #[test]
    fn a_merged_lane_attempt_is_never_reverted_even_before_its_judgement() {
        let mut s = Session::new("c", options(), None);
        let task = TaskId::from("2.1");
        s.apply(&first_attempt_started(&task, Some("2")));
        let checkpoint = Checkpoint {
            refname: "refs/spectr/ralph/@main/c/2.1/1/checkpoint".into(),
            commit: "0".repeat(40),
            head: None,
            branch: None,
            index: None,
            notices: Vec::new(),
        };
        s.apply(&LoopEvent::MergeStarted {
            task: task.clone(),
            attempt: 1,
            checkpoint,
            work: None,
        });
        // Died mid-merge: the user's tree goes back to the checkpoint.
        assert_eq!(s.unreverted().len(), 1);
        s.apply(&LoopEvent::Merged {
            task: task.clone(),
            attempt: 1,
            lane: "2".into(),
            files: vec!["a.txt".into()],
        });
        // Died after the merge, before the judgement: in flight, not reverted.
        assert!(s.unreverted().is_empty());
        assert_eq!(s.in_flight().len(), 1);
        assert!(s.in_flight()[0].1.merged);
    }

    /// The file says what the whole struct says, after every change: an
    /// entry saved earlier is never written again once its record changed.
    #[test]
    fn each_save_writes_the_records_as_they_are_now() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(SESSION_FILE);
        let mut s = Session::new("c", options(), Some(vec!["1.1".into(), "1.2".into()]));
        let (a, b) = (TaskId::from("1.1"), TaskId::from("1.2"));
        let same = |s: &Session| {
            let text = std::fs::read_to_string(&path).unwrap();
            let on_disk: serde_json::Value = serde_json::from_str(&text).unwrap();
            assert_eq!(on_disk, serde_json::to_value(s).unwrap(), "{text}");
            assert!(Session::load(&path, "c").unwrap().is_some());
        };
        s.save(&path).unwrap();
        same(&s);
        s.apply(&first_attempt_started(&a, None));
        s.save(&path).unwrap();
        same(&s);
        s.apply(&first_attempt_started(&b, None));
        s.apply(&LoopEvent::AgentStarted {
            task: a.clone(),
            attempt: 1,
            pid: std::process::id(),
        });
        s.save(&path).unwrap();
        same(&s);
        s.record_mut(&b).budget_start = 7;
        s.slots = Some(2);
        s.save(&path).unwrap();
        same(&s);
        assert_eq!(
            Session::load(&path, "c").unwrap().unwrap().tasks[&b].budget_start,
            7
        );
    }

    #[test]
    fn a_session_in_the_old_place_is_moved_once() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = Session::new("c", options(), None);
        std::fs::create_dir_all(dir.path().join(".ralph")).unwrap();
        s.save(&Session::legacy_path(dir.path())).unwrap();
        assert_eq!(
            Session::existing_path(dir.path()),
            Session::legacy_path(dir.path())
        );
        let moved = Session::migrate_legacy(dir.path()).unwrap();
        assert_eq!(moved, Some(Session::legacy_path(dir.path())));
        assert!(!Session::legacy_path(dir.path()).exists());
        let path = Session::path(dir.path());
        assert_eq!(path, dir.path().join(".ralph-session.json"));
        assert!(Session::load(&path, "c").unwrap().is_some());
        assert_eq!(Session::migrate_legacy(dir.path()).unwrap(), None);
    }
}
