//! `--commit task`: one commit per completed task on the branch the run
//! started on, made by spectr in completion order, the same with or without
//! lanes. What goes in it (the task's change, never the user's own work)
//! is the checkpoint layer's ([`Checkpointer::commit_task`]); this module
//! says which trees, which message, and finds a commit a killed run already
//! made instead of making it twice.

use crate::checkpoint::{Checkpointer, NotCommitted, TaskChange};
use crate::model::{TaskId, TaskSet, TaskStatus};
use crate::ralph::event::LoopEvent;
use crate::ralph::session::{AttemptRecord, RunTaskState, Session};
use std::path::{Path, PathBuf};

/// The subject's length at most (git's own advice for a first line).
const SUBJECT_MAX: usize = 72;

/// Makes the run's task commits.
pub struct Committer {
    cp: Checkpointer,
    /// `refs/heads/<name>`.
    branch: String,
    /// The branch's commit when the session began: a commit of this
    /// session is only ever looked for after it.
    base: Option<String>,
    /// The branch's commit the run last saw (it started there or committed
    /// there): the branch must still hold it.
    since: Option<String>,
    /// `since`'s tree, when this run made that commit.
    since_tree: Option<String>,
    change: String,
    agent: String,
    /// `ralph: push:`: the remote the branch goes to after each commit.
    push: Option<String>,
    /// A push failed: the next commit pushes again.
    push_failed: bool,
    /// Said after the last commit: its index update failed.
    notice: Option<String>,
    /// Tasks with an attempt in the session before this process began: a
    /// run killed after committing one but before saving so has left its
    /// commit to be found, not made again.
    ran_before: std::collections::BTreeSet<TaskId>,
    /// Whether an attempt's snapshot may serve the next checkpoint (no
    /// lane merges into the tree between them).
    keep_snapshot: bool,
}

impl Drop for Committer {
    fn drop(&mut self) {
        self.cp.settle();
    }
}

/// Why the run stops instead of committing (nothing is lost: the work is in
/// the tree, the session kept).
#[derive(Debug)]
pub struct CommitStop(pub String);

impl Committer {
    /// For a run on `cp`'s tree: `branch` and `base` as the session
    /// recorded them; the branch's commit now is where the run starts.
    pub fn new(
        cp: Checkpointer,
        session: &Session,
        branch: String,
        base: Option<String>,
        change: String,
        agent: String,
    ) -> Result<Committer, String> {
        let ran_before = session
            .tasks
            .iter()
            .filter(|(_, r)| !r.attempts.is_empty())
            .map(|(id, _)| id.clone())
            .collect();
        let since = cp.commit_of(&branch).map_err(|e| e.to_string())?;
        Ok(Committer {
            cp,
            branch,
            base,
            since,
            since_tree: None,
            change,
            agent,
            push: None,
            push_failed: false,
            notice: None,
            keep_snapshot: false,
            ran_before,
        })
    }

    /// What the last commit has to say beside its event (its index update
    /// failed), once.
    pub fn take_notice(&mut self) -> Option<String> {
        self.notice.take()
    }

    /// Offers each attempt's snapshot to the next checkpoint: only for a
    /// run without lanes (one merging into the tree meanwhile would make
    /// it stale).
    pub fn keeping_snapshots(mut self, keep: bool) -> Committer {
        self.keep_snapshot = keep;
        self
    }

    /// Pushes the branch to `remote` after every commit.
    pub fn pushing_to(mut self, remote: Option<String>) -> Committer {
        self.push = remote;
        self
    }

    /// After a commit: the branch pushed, when asked for; a notice when the
    /// push failed (the run goes on, and the next commit pushes again) or
    /// when it worked again after failing.
    pub fn push(&mut self) -> Option<LoopEvent> {
        let remote = self.push.clone()?;
        let branch = self
            .branch
            .strip_prefix("refs/heads/")
            .unwrap_or(&self.branch);
        match self.cp.push_branch(&remote, &self.branch) {
            Ok(()) if self.push_failed => {
                self.push_failed = false;
                Some(LoopEvent::Notice {
                    level: crate::ralph::event::NoticeLevel::Info,
                    message: format!("pushed {branch} to {remote} again"),
                })
            }
            Ok(()) => None,
            Err(why) => {
                self.push_failed = true;
                Some(LoopEvent::Notice {
                    level: crate::ralph::event::NoticeLevel::Warn,
                    message: format!(
                        "could not push {branch} to {remote} ({why}); the run goes on, and pushes again after its next commit"
                    ),
                })
            }
        }
    }

    /// Commits task `id`'s attempt `attempt` (completed): the trees from
    /// its record, the message from the task. The event to record, or why
    /// the run must stop.
    pub fn commit(
        &mut self,
        session: &Session,
        tasks: &TaskSet,
        id: &TaskId,
        attempt: u32,
    ) -> Result<LoopEvent, CommitStop> {
        let trailers = self.trailers(id);
        let stop = |what: String| CommitStop(format!("task {id}'s commit: {what}"));
        // A killed run may have made it already: only a task it ran can
        // have one.
        let found = match self.ran_before.contains(id) {
            true => self
                .cp
                .find_commit_with(&self.branch, self.base.as_deref(), &trailers)
                .map_err(|e| stop(e.to_string()))?,
            false => None,
        };
        if let Some(commit) = found {
            // The kill may have come before the index followed it.
            self.cp
                .index_follow_commit(&commit)
                .map_err(|e| stop(e.to_string()))?;
            self.since = Some(commit.clone());
            self.since_tree = None;
            return Ok(LoopEvent::TaskCommitted {
                task: id.clone(),
                attempt,
                commit: Some(commit),
                files: Vec::new(),
                left_out: Vec::new(),
                found: true,
            });
        }
        let record = session
            .record(id)
            .and_then(|r| r.attempts.iter().rev().find(|a| a.attempt == attempt));
        let Some((base, after, skip)) = record.and_then(|a| self.trees(a, tasks)) else {
            return Ok(LoopEvent::TaskCommitted {
                task: id.clone(),
                attempt,
                commit: None,
                files: Vec::new(),
                left_out: Vec::new(),
                found: false,
            });
        };
        // In the user's tree (no `after` yet), its base is the checkpoint,
        // whose tree it recorded.
        let after_is_tree = after.is_none();
        let base_tree = record
            .and_then(|a| a.checkpoint.as_ref())
            .and_then(|c| c.tree.clone())
            .filter(|_| after_is_tree);
        let after = match after {
            Some(t) => t,
            // With no lane merging into the tree meanwhile, the next
            // checkpoint can take this snapshot as its own.
            None if self.keep_snapshot => self
                .cp
                .snapshot_tree_for_next(&tasks_files(tasks))
                .map_err(|e| stop(e.to_string()))?,
            None => self.cp.snapshot_tree().map_err(|e| stop(e.to_string()))?,
        };
        let attempts = session.record(id).map_or(1, |r| r.attempts.len());
        let message = self.message(tasks, id, attempts, record.and_then(|a| a.receipt.as_ref()));
        let root = self.cp.repo_root().to_path_buf();
        let change_dir = tasks.change_dir.clone();
        let edit = |files: &[(PathBuf, Vec<u8>)]| status_edit(&root, &change_dir, id, files);
        let change = TaskChange {
            branch: &self.branch,
            since: self.since.as_deref(),
            base: &base,
            after: &after,
            skip: &skip,
            message: &message,
            known: crate::checkpoint::Known {
                since_tree: self.since_tree.as_deref(),
                base_tree: base_tree.as_deref(),
                after_is_tree,
            },
        };
        let r = self.cp.commit_task(&change, &edit);
        match r {
            Ok(Ok(done)) => {
                if let Some(c) = &done.commit {
                    self.since = Some(c.clone());
                    self.since_tree.clone_from(&done.tree);
                }
                if !done.notices.is_empty() {
                    self.notice = Some(done.notices.join("; "));
                }
                if let Some(why) = &done.index_not_updated {
                    // git's first sentence (its advice below it is about
                    // its own commands).
                    let why = why
                        .find("fatal: ")
                        .map(|at| &why[at..])
                        .and_then(|f| {
                            f.char_indices()
                                .zip(f.chars().skip(1))
                                .find(|((_, c), next)| *c == '.' && next.is_whitespace())
                                .map(|((end, _), _)| &f[..=end])
                        })
                        .unwrap_or(why);
                    self.notice = Some(format!(
                        "task {id} is committed, but your git index could not follow the commit ({why}): `git status` shows its files as staged the other way until `git reset -q -- {}` puts them in step (your files stay as they are)",
                        done.files.join(" ")
                    ));
                }
                Ok(LoopEvent::TaskCommitted {
                    task: id.clone(),
                    attempt,
                    commit: done.commit,
                    files: done.files,
                    left_out: done.left_out,
                    found: false,
                })
            }
            Ok(Err(moved)) => Err(stop(moved_words(&moved))),
            Err(e) => Err(stop(e.to_string())),
        }
    }

    /// Base and after trees of a completed attempt, and the paths left out
    /// of its change: a lane's merged work as its merge took it; an attempt
    /// in the user's tree from its checkpoint to the tree now (`None`).
    fn trees(
        &self,
        a: &AttemptRecord,
        tasks: &TaskSet,
    ) -> Option<(String, Option<String>, Vec<PathBuf>)> {
        let root = self.cp.repo_root();
        let tasks_files = tasks_files(tasks);
        if let Some(w) = &a.merge_work {
            let mut skip: Vec<PathBuf> = w.skip.iter().map(|s| root.join(s)).collect();
            skip.extend(tasks_files);
            return Some((w.base.clone(), Some(w.theirs.clone()), skip));
        }
        if a.worktree.is_some() {
            // A lane's attempt with nothing to merge (or none recorded):
            // its status edit, mirrored into the user's tree, is its whole
            // change here.
            return Some(("HEAD".to_string(), Some("HEAD".to_string()), tasks_files));
        }
        let c = a.checkpoint.as_ref()?;
        Some((c.commit.clone(), None, tasks_files))
    }

    /// `<id> <description's first line>`, the run's facts as trailers.
    fn message(
        &self,
        tasks: &TaskSet,
        id: &TaskId,
        attempts: usize,
        receipt: Option<&crate::agent::receipt::Receipt>,
    ) -> String {
        // An OpenSpec story by its title; a task by its description.
        let first = tasks
            .task(id)
            .map(|t| {
                if crate::text::story_line(&t.section, &t.description).is_some() {
                    crate::text::clean(&t.section).into_owned()
                } else {
                    crate::text::clean(&t.description).into_owned()
                }
            })
            .unwrap_or_default();
        let subject = cut(&format!("{id} {}", first.trim()), SUBJECT_MAX);
        // The agent's own account of the work, when it gave one.
        let mut body = String::new();
        if let Some(summary) = receipt.and_then(|r| r.summary.as_deref()) {
            body.push_str(summary);
            body.push_str("\n\n");
        }
        let mut trailers = self.trailers(id);
        trailers.push(format!("Spectr-Attempts: {attempts}"));
        let mut agent = self.agent.clone();
        if let Some(model) = receipt.and_then(|r| r.model.as_deref()) {
            agent.push_str(&format!(", {model}"));
        }
        trailers.push(format!("Spectr-Agent: {agent}"));
        if let Some(cost) = receipt.and_then(|r| r.cost_usd) {
            trailers.push(format!("Spectr-Cost: ${cost:.4}"));
        }
        if let Some(t) = receipt.and_then(|r| r.tokens.as_ref()) {
            trailers.push(format!("Spectr-Tokens: {} in / {} out", t.input, t.output));
        }
        format!("{subject}\n\n{body}{}\n", trailers.join("\n"))
    }

    /// The trailers that name a task's commit.
    fn trailers(&self, id: &TaskId) -> Vec<String> {
        vec![
            format!("Spectr-Change: {}", self.change),
            format!("Spectr-Task: {id}"),
        ]
    }
}

/// The change's tasks files: what spectr itself writes in the tree.
fn tasks_files(tasks: &TaskSet) -> Vec<PathBuf> {
    tasks
        .files
        .iter()
        .map(|f| f.path.clone())
        .chain(tasks.tasks_md_in_step())
        .collect()
}

/// Tasks the session holds completed whose commit is not settled yet, in
/// the order they completed: a kill came between the two.
pub fn pending(session: &Session) -> Vec<(TaskId, u32)> {
    let mut done: Vec<(String, TaskId, u32)> = session
        .tasks
        .iter()
        .filter(|(_, r)| r.state == RunTaskState::Completed && r.commit.is_none())
        .filter_map(|(id, r)| {
            let last = r.attempts.last()?;
            Some((
                last.ended_at.clone().unwrap_or_default(),
                id.clone(),
                last.attempt,
            ))
        })
        .collect();
    done.sort();
    done.into_iter().map(|(_, id, a)| (id, a)).collect()
}

fn moved_words(moved: &NotCommitted) -> String {
    format!(
        "{moved}. Nothing was committed and nothing is lost: the task's work is in your tree and the session is kept. Put the branch back (git switch, or git reset to the commit named), or run again with --commit off"
    )
}

/// `text` cut to `max` characters, `…` at the cut.
fn cut(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_owned();
    }
    let mut s: String = text.chars().take(max - 1).collect();
    s.push('…');
    s
}

/// The branch's versions of the change's tasks files with task `id`
/// completed, as spectr edits them (one status, the containers, tasks.md's
/// box): loaded from a scratch copy, edited in memory (a rename over a
/// file would wait for the disk).
fn status_edit(
    root: &Path,
    change_dir: &Path,
    id: &TaskId,
    files: &[(PathBuf, Vec<u8>)],
) -> Vec<(PathBuf, Vec<u8>)> {
    let Some(rel_change) = change_dir.strip_prefix(root).ok() else {
        return Vec::new();
    };
    // The change's files are all in its folder; the copy keeps its path
    // (an OpenSpec change is known by where it is).
    let mut names = Vec::with_capacity(files.len());
    for (rel, _) in files {
        match (rel.parent(), rel.file_name()) {
            (Some(parent), Some(name)) if parent == rel_change => names.push(name),
            _ => return Vec::new(),
        }
    }
    // In memory where there is a tmpfs: this is on the way of every task's
    // commit, and a disk's folder costs milliseconds to remove.
    let shm = std::path::Path::new("/dev/shm");
    let scratch = match shm.is_dir() {
        true => tempfile::Builder::new()
            .prefix(".spectr-edit-")
            .tempdir_in(shm)
            .or_else(|_| tempfile::tempdir()),
        false => tempfile::tempdir(),
    };
    let Ok(scratch) = scratch else {
        return Vec::new();
    };
    let dir = scratch.path().join(rel_change);
    if std::fs::create_dir_all(&dir).is_err() {
        return Vec::new();
    }
    for (name, (_, bytes)) in names.iter().zip(files) {
        if std::fs::write(dir.join(name), bytes).is_err() {
            return Vec::new();
        }
    }
    // Edited in memory: read from the copy, nothing written back to it.
    let Ok(mut set) = TaskSet::load(&dir).map(TaskSet::in_memory) else {
        return Vec::new();
    };
    let done = set
        .task(id)
        .is_some_and(|t| t.status == TaskStatus::Completed);
    if !done && set.set_status(id, TaskStatus::Completed).is_err() {
        return Vec::new();
    }
    let written = set.written();
    names
        .iter()
        .zip(files)
        .filter_map(|(name, (rel, before))| {
            let path = dir.join(name);
            let (_, now) = written.iter().find(|(p, _)| *p == path)?;
            (now != before).then(|| (rel.clone(), now.clone()))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_subject_is_cut_at_72_characters() {
        let long = "x".repeat(100);
        let s = cut(&format!("1.1 {long}"), SUBJECT_MAX);
        assert_eq!(s.chars().count(), SUBJECT_MAX);
        assert!(s.ends_with('…'));
        assert_eq!(cut("1.1 short", SUBJECT_MAX), "1.1 short");
    }
}
