//! `<change>/.ralph-session.json`: the run's state, saved at every state
//! change so that a crash leaves the last consistent state behind. It is
//! where the requirements, upstream spectr and its tooling look for it.
//!
//! A save costs what changed, not the whole run: the file is a snapshot,
//! replaced atomically, and the records changed since are appended, one line
//! per save, to a journal beside it (`<change>/.ralph/session-journal.jsonl`).
//! When the journal has grown larger than the snapshot, the next save writes
//! a new snapshot and drops the journal (so each byte is rewritten a bounded
//! number of times). Each snapshot carries a fresh mark and its journal's
//! lines carry the same one: lines of any other snapshot (a kill between the
//! two steps, a file put back by hand) are never read with it. A line cut off
//! by a kill (no newline yet) is ignored; what it recorded was not acted on.
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
pub use crate::ralph::paths::{LEGACY_SESSION_FILE, SESSION_FILE};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

mod apply;
mod store;

use store::Saves;

pub const SESSION_VERSION: u32 = 1;
/// The journal may grow to the snapshot's size, and to at least this much,
/// before a save writes a new snapshot.
const MIN_JOURNAL_BYTES: u64 = 64 * 1024;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionOptions {
    pub agent: String,
    pub max_retries: u32,
    pub checkpoints: bool,
    pub verify: Option<String>,
    /// `--commit task`: the branch the session commits on
    /// (`refs/heads/...`) and its commit when the session began (none for
    /// an unborn branch); set at the session's first commit run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commit_branch: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commit_base: Option<String>,
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

/// Where a remote lane's attempt keeps its work (see
/// [`LoopEvent::RemoteAttempt`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RemoteRecord {
    pub remote: String,
    pub prefix: String,
    pub base: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub skip: Vec<String>,
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
    /// Parallel runs: a resolve attempt (the work of a conflicted attempt
    /// applied again, with markers for the agent to resolve).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub resolving: bool,
    /// Every state HEAD was seen in while the attempt ran, after its
    /// checkpoint: a resume reverts these moves as the attempt's own and
    /// asks only about the others.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub head_moves: Vec<HeadSeen>,
    /// A remote lane's attempt: where its worker pushes its work.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remote: Option<RemoteRecord>,
    /// Parallel runs: the completed work its merge-back was merging (set
    /// with `checkpoint`), so a resume after a crash mid-merge finishes the
    /// merge without running the agent again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub merge_work: Option<MergeWork>,
    /// A remote lane's attempt waiting in its engine's queue: since when
    /// (RFC 3339). Cleared when its worker starts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queued_since: Option<String>,
    /// A remote lane's attempt: how long its engine queued it, once it ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queued_ms: Option<u64>,
}

/// A completed task's commit (`--commit task`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CommitRecord {
    /// `None`: the task left nothing to commit.
    pub id: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TaskRecord {
    pub state: RunTaskState,
    /// Attempts that used up a try (rate limits and user stops don't).
    pub counted_attempts: u32,
    /// `counted_attempts` when the retry budget was last renewed (a "retry"
    /// answer to the exhaustion prompt renews it).
    pub budget_start: u32,
    /// Conflicts of attempts numbered up to this one are no longer counted
    /// (the budget was renewed after them).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub conflicts_from: u32,
    pub attempts: Vec<AttemptRecord>,
    pub last_reason: Option<String>,
    /// `--commit task`: the task's commit is settled (made, found, or none
    /// needed). A completed task without it is committed by the next run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commit: Option<CommitRecord>,
    /// The files hold this record as it is: a save encodes and writes only
    /// the records changed since, so its cost does not grow with the tasks
    /// finished before it (a finished task's record never changes again).
    /// Cleared by every way to change a record ([`Session::record_mut`],
    /// [`Session::apply`]).
    #[serde(skip)]
    saved: bool,
}

impl TaskRecord {
    fn new() -> TaskRecord {
        TaskRecord {
            state: RunTaskState::Pending,
            counted_attempts: 0,
            budget_start: 0,
            conflicts_from: 0,
            attempts: Vec::new(),
            last_reason: None,
            commit: None,
            saved: false,
        }
    }

    /// Retries used since the budget was last renewed (the first try is free).
    pub fn retries_used(&self) -> u32 {
        self.counted_attempts
            .saturating_sub(self.budget_start)
            .saturating_sub(1)
    }

    /// The last merge conflict, when no attempt since completed: its work
    /// is still to be resolved (whatever ended the attempts after it: a
    /// failed resolve, a crash, a rate limit).
    pub fn open_conflict(&self) -> Option<&Outcome> {
        let at = self
            .attempts
            .iter()
            .rposition(|a| matches!(a.outcome, Some(Outcome::Conflict { .. })))?;
        let done_since = self.attempts[at + 1..]
            .iter()
            .any(|a| a.merged || matches!(a.outcome, Some(Outcome::Completed { .. })));
        (!done_since)
            .then(|| self.attempts[at].outcome.as_ref())
            .flatten()
    }

    /// Merge conflicts since the budget was last renewed (the attempt
    /// numbered past `conflicts_from`).
    pub fn conflicts(&self) -> u32 {
        let n = self
            .attempts
            .iter()
            .filter(|a| a.attempt > self.conflicts_from)
            .filter(|a| matches!(a.outcome, Some(Outcome::Conflict { .. })))
            .count();
        u32::try_from(n).unwrap_or(u32::MAX)
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
    /// Boxed, as the saves' state is: a session is moved around whole
    /// (`Option`s, enums) and stays small.
    pub options: Box<SessionOptions>,
    pub started_at: String,
    pub updated_at: String,
    /// Tasks chosen with `--interactive`; None means all.
    pub selection: Option<Vec<TaskId>>,
    /// Changed only through [`Session::record_mut`] and [`Session::apply`],
    /// which keep `saved` true.
    pub tasks: BTreeMap<TaskId, TaskRecord>,
    /// Wall-clock time of the runs that ended before this one.
    #[serde(default)]
    pub run_time_ms: u64,
    /// How many tasks the run (the last one, when resumed) runs at once, so
    /// `spectr status` can say what it starts next.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slots: Option<u32>,
    /// What the saves know (boxed: the session stays small).
    #[serde(skip)]
    saves: Box<Saves>,
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
            options: Box::new(options),
            started_at: now.clone(),
            updated_at: now,
            selection,
            tasks: BTreeMap::new(),
            run_time_ms: 0,
            slots: None,
            saves: Box::default(),
        }
    }

    pub fn record(&self, task: &TaskId) -> Option<&TaskRecord> {
        self.tasks.get(task)
    }

    pub fn record_mut(&mut self, task: &TaskId) -> &mut TaskRecord {
        let rec = match self.tasks.entry(task.clone()) {
            std::collections::btree_map::Entry::Vacant(v) => {
                self.saves.dirty.push(task.clone());
                v.insert(TaskRecord::new())
            }
            std::collections::btree_map::Entry::Occupied(o) => o.into_mut(),
        };
        if std::mem::take(&mut rec.saved) {
            self.saves.dirty.push(task.clone());
        }
        rec
    }

    /// What every attempt the session records cost, this run's and its
    /// earlier runs'.
    pub fn spent(&self) -> crate::ralph::budget::Spent {
        let mut spent = crate::ralph::budget::Spent::default();
        for rec in self.tasks.values() {
            for receipt in rec.attempts.iter().filter_map(|a| a.receipt.as_ref()) {
                spent.add(receipt);
            }
        }
        spent
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

    /// The checkpoint refs of every attempt this session knows of (in the
    /// user's tree and in lanes), sorted.
    pub fn checkpoint_refnames(&self) -> Vec<String> {
        let mut refs: Vec<String> = self
            .tasks
            .values()
            .flat_map(|r| r.attempts.iter())
            .flat_map(|a| [&a.checkpoint, &a.lane_checkpoint])
            .filter_map(|c| c.as_ref().map(|c| c.refname.clone()))
            .collect();
        refs.sort();
        refs.dedup();
        refs
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

fn is_zero(n: &u32) -> bool {
    *n == 0
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
            commit_branch: None,
            commit_base: None,
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

    /// An agent that ended (and was reaped) before the run recorded its
    /// start keeps the start time read at spawn: a resume can still stop
    /// what it left behind.
    #[test]
    fn the_start_time_read_at_spawn_is_the_one_recorded() {
        let mut s = Session::new("c", options(), None);
        let task = TaskId::from("1.1");
        s.apply(&first_attempt_started(&task, None));
        // A pid no process has (beyond the kernel's limit).
        s.apply(&LoopEvent::AgentStarted {
            task: task.clone(),
            attempt: 1,
            pid: 4_194_305,
            start: Some(12_345),
            agent: None,
        });
        let a = &s.tasks[&task].attempts[0];
        assert_eq!(a.agent_pid, Some(4_194_305));
        assert_eq!(a.agent_started, Some(12_345));
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
            start: None,
            agent: None,
        });
        assert_eq!(s.tasks[&task].attempts[0].agent_pid, None);
        // Room for the one attempt most tasks have, not for four.
        assert_eq!(s.tasks[&task].attempts.capacity(), 1);
        s.apply(&LoopEvent::AgentStarted {
            task: task.clone(),
            attempt: 1,
            pid: std::process::id(),
            start: None,
            agent: None,
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
            tree: None,
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

    /// What `load` reads says what the whole struct says.
    fn same(path: &Path, s: &Session) {
        let loaded = Session::load(path, "c").unwrap().unwrap();
        assert_eq!(
            serde_json::to_value(&loaded).unwrap(),
            serde_json::to_value(s).unwrap()
        );
    }

    /// A change folder with its state folder, and its session file's path.
    fn change_dir() -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join(".ralph")).unwrap();
        let path = Session::path(dir.path());
        (dir, path)
    }

    /// The files say what the whole struct says, after every change: an
    /// entry saved earlier is never read again once its record changed.
    #[test]
    fn each_save_writes_the_records_as_they_are_now() {
        let (_dir, path) = change_dir();
        let mut s = Session::new("c", options(), Some(vec!["1.1".into(), "1.2".into()]));
        let (a, b) = (TaskId::from("1.1"), TaskId::from("1.2"));
        let same = |s: &Session| same(&path, s);
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
            start: None,
            agent: None,
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
        // A field only the snapshot holds.
        s.options.verify = Some("make check".into());
        s.save(&path).unwrap();
        same(&s);
        s.selection = None;
        s.save(&path).unwrap();
        same(&s);
    }

    /// The journal's last line, cut short by a kill, is left out; a
    /// complete line that does not parse is an error naming the journal
    /// and the line.
    #[test]
    fn a_torn_last_line_is_ignored_and_a_broken_one_reported() {
        let (_dir, path) = change_dir();
        let mut s = Session::new("c", options(), None);
        finish(&mut s, 1);
        s.save(&path).unwrap();
        finish(&mut s, 2);
        s.save(&path).unwrap();
        let saved = serde_json::to_value(&s).unwrap();
        let journal = Session::journal_path(&path);
        let full = std::fs::read(&journal).unwrap();
        assert!(!full.is_empty() && full.ends_with(b"\n"));
        finish(&mut s, 3);
        s.save(&path).unwrap();
        let longer = std::fs::read(&journal).unwrap();
        for cut in [
            full.len() + 1,
            (full.len() + longer.len()) / 2,
            longer.len() - 1,
        ] {
            std::fs::write(&journal, &longer[..cut]).unwrap();
            let loaded = Session::load(&path, "c").unwrap().unwrap();
            assert_eq!(
                serde_json::to_value(&loaded).unwrap(),
                saved,
                "cut at {cut}"
            );
        }
        let mut broken = full.clone();
        broken.extend_from_slice(b"{\"journal\": 1}\n");
        std::fs::write(&journal, &broken).unwrap();
        let err = Session::load(&path, "c").unwrap_err().to_string();
        assert!(
            err.contains("session-journal.jsonl") && err.contains("line 2"),
            "{err}"
        );
    }

    /// Lines of another snapshot are never read with this one: a kill
    /// between a snapshot and the journal's removal, or a session put back
    /// by hand (as shown, it has no mark).
    #[test]
    fn a_journal_is_read_only_with_its_own_snapshot() {
        let (_dir, path) = change_dir();
        let mut s = Session::new("c", options(), None);
        finish(&mut s, 1);
        s.save(&path).unwrap();
        let first = std::fs::read(&path).unwrap();
        finish(&mut s, 2);
        s.save(&path).unwrap();
        assert_eq!(Session::load(&path, "c").unwrap().unwrap().tasks.len(), 2);
        let journal = std::fs::read(Session::journal_path(&path)).unwrap();

        // A later snapshot beside the older one's journal.
        let mut other = Session::load(&path, "c").unwrap().unwrap();
        other.record_mut(&TaskId::from("1.2")).budget_start = 5;
        other.save(&path).unwrap();
        std::fs::write(Session::journal_path(&path), &journal).unwrap();
        same(&path, &other);

        // As shown (no mark), written back by hand.
        let mut shown = serde_json::to_value(&s).unwrap();
        shown["tasks"]["1.1"]["budget_start"] = 9.into();
        std::fs::write(&path, shown.to_string()).unwrap();
        let loaded = Session::load(&path, "c").unwrap().unwrap();
        assert_eq!(serde_json::to_value(&loaded).unwrap(), shown);

        // The first snapshot again, beside its own journal: read together.
        std::fs::write(&path, &first).unwrap();
        same(&path, &s);
    }

    /// The journal never grows past the snapshot (or the least it may
    /// grow to): then a save writes the snapshot and drops the journal.
    #[test]
    fn the_journal_is_folded_into_the_snapshot_once_it_outgrows_it() {
        let (_dir, path) = change_dir();
        let journal = Session::journal_path(&path);
        let mut s = Session::new("c", options(), None);
        s.save(&path).unwrap();
        let mut snapshots = 0;
        let mut inode = std::fs::metadata(&path).unwrap().ino();
        for i in 1..=400 {
            finish(&mut s, i);
            s.save(&path).unwrap();
            let snapshot = std::fs::metadata(&path).unwrap();
            let journal_len = std::fs::metadata(&journal).map_or(0, |m| m.len());
            assert!(journal_len <= snapshot.len().max(MIN_JOURNAL_BYTES));
            if snapshot.ino() != inode {
                inode = snapshot.ino();
                snapshots += 1;
                assert_eq!(journal_len, 0, "the journal went with the new snapshot");
            }
        }
        assert!((2..20).contains(&snapshots), "{snapshots} snapshots");
        same(&path, &s);
    }

    /// A snapshot deleted or replaced behind the session's back is written
    /// again at the next save, not extended by a journal it no longer has.
    #[test]
    fn a_snapshot_gone_is_written_again() {
        let (_dir, path) = change_dir();
        let mut s = Session::new("c", options(), None);
        finish(&mut s, 1);
        s.save(&path).unwrap();
        std::fs::remove_file(&path).unwrap();
        finish(&mut s, 2);
        s.save(&path).unwrap();
        same(&path, &s);
        // Where it cannot be written, the save fails (and says so).
        std::fs::remove_file(&path).unwrap();
        std::fs::create_dir(&path).unwrap();
        finish(&mut s, 3);
        assert!(s.save(&path).is_err());
    }

    #[test]
    fn delete_removes_the_journal_too() {
        let (_dir, path) = change_dir();
        let mut s = Session::new("c", options(), None);
        s.save(&path).unwrap();
        finish(&mut s, 1);
        s.save(&path).unwrap();
        assert!(Session::journal_path(&path).is_file());
        Session::delete(&path).unwrap();
        assert!(!path.exists() && !Session::journal_path(&path).exists());
        assert!(Session::load(&path, "c").unwrap().is_none());
    }

    /// Task `i`'s first attempt, started and completed.
    fn finish(s: &mut Session, i: usize) -> TaskId {
        let task = TaskId::from(format!("1.{i}").as_str());
        s.apply(&first_attempt_started(&task, None));
        s.apply(&LoopEvent::TaskCompleted {
            task: task.clone(),
            attempt: 1,
            outcome: Outcome::Completed {
                via: crate::ralph::event::CompletedVia::Signal,
            },
            receipt: serde_json::from_value(serde_json::json!({
                "duration_ms": 36, "turns": 1, "tokens": null, "cost_usd": null,
                "ending": {"how": "exited", "code": 0}, "signal": null,
                "is_error": false, "rate_limited": null, "session_id": null,
            }))
            .unwrap(),
        });
        task
    }

    /// Every byte under `dir` (the snapshot, and whatever else a save writes).
    fn bytes_under(dir: &Path) -> u64 {
        std::fs::read_dir(dir)
            .unwrap()
            .flatten()
            .map(|e| {
                let meta = e.metadata().unwrap();
                if meta.is_dir() {
                    bytes_under(&e.path())
                } else {
                    meta.len()
                }
            })
            .sum()
    }

    /// Issue 19, item 5: a save's cost does not grow with the tasks finished
    /// before it: it writes the changed record, not the whole run again.
    #[test]
    fn a_save_writes_only_what_changed() {
        let (dir, path) = change_dir();
        let mut s = Session::new("c", options(), None);
        for i in 1..=200 {
            finish(&mut s, i);
        }
        s.save(&path).unwrap();
        let snapshot = std::fs::metadata(&path).unwrap();
        let one_record = snapshot.len() / 200;
        for i in 201..=210 {
            let task = finish(&mut s, i);
            let before = bytes_under(dir.path());
            let changed = s.save_changes(&path, &mut String::new()).unwrap();
            assert_eq!(changed, vec![task]);
            let written = bytes_under(dir.path()) - before;
            assert!(
                written < 3 * one_record,
                "a save of one record wrote {written} bytes (a record is about {one_record})"
            );
            let now = std::fs::metadata(&path).unwrap();
            assert_eq!(
                (now.ino(), now.len()),
                (snapshot.ino(), snapshot.len()),
                "the snapshot is not rewritten"
            );
        }
        let loaded = Session::load(&path, "c").unwrap().unwrap();
        assert_eq!(
            serde_json::to_value(&loaded).unwrap(),
            serde_json::to_value(&s).unwrap()
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
