//! Parallel lanes that converge: who may merge into which file, and which
//! lanes take turns.
//!
//! - A task whose merge-back conflicted **reserves** the conflicted files
//!   until it merges (or leaves the run): another task's merge that writes
//!   one of them waits; one that writes none goes ahead. Its resolve
//!   attempt starts only once it holds every file it reserved (tasks
//!   reserve in the order they conflicted, all files at once, so two never
//!   wait on each other) and no merge granted earlier still writes one of
//!   them. So it cannot lose the race again.
//! - Two lanes that conflicted on a file are **hot** on it: while one of
//!   them has a task running (or a resolve is pending on the file), the
//!   other starts nothing new. Racing would only buy another conflict, and
//!   another attempt, for each task. A lane cools once one of its tasks
//!   merges without touching the file.
//!
//! Pure bookkeeping: the machine feeds it what happened and asks.

use crate::model::TaskId;
use crate::ralph::event::{HOT_FILE_CONFLICTS, HotFile};
use std::collections::{BTreeMap, BTreeSet, VecDeque};

/// A merge asking for its turn.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Wanted {
    slot: usize,
    task: TaskId,
    files: Vec<String>,
}

#[derive(Debug, Default)]
pub struct Reservations {
    /// File -> the tasks that reserved it, first in line first.
    queues: BTreeMap<String, VecDeque<TaskId>>,
    /// Merges granted and not yet over, by slot.
    merging: BTreeMap<usize, (TaskId, Vec<String>)>,
    /// Merges waiting for their turn, in the order they asked.
    waiting: Vec<Wanted>,
    /// File -> the lanes hot on it.
    hot: BTreeMap<String, BTreeSet<String>>,
    /// File -> the lane whose merge wrote it last.
    last_writer: BTreeMap<String, String>,
    /// (file, lane, lane) -> conflicts between the two lanes on the file.
    pairs: BTreeMap<(String, String, String), u32>,
}

impl Reservations {
    /// `task` conflicted on `files`: it reserves them, behind whoever
    /// reserved them first. A task that conflicts again gives up its place
    /// and queues again for all its files at once.
    pub fn reserve(&mut self, task: &TaskId, files: &[String]) {
        let mut all: BTreeSet<String> = self.held_by(task).into_iter().collect();
        all.extend(files.iter().cloned());
        self.release(task);
        for f in all {
            self.queues.entry(f).or_default().push_back(task.clone());
        }
    }

    /// `task` merged, or left the run: its files are free for the next.
    pub fn release(&mut self, task: &TaskId) {
        for q in self.queues.values_mut() {
            q.retain(|t| t != task);
        }
        self.queues.retain(|_, q| !q.is_empty());
    }

    /// Drops every reservation of a task not in `live`; whether any was.
    pub fn drop_all_but(&mut self, live: &BTreeSet<TaskId>) -> bool {
        let before: usize = self.queues.values().map(VecDeque::len).sum();
        for q in self.queues.values_mut() {
            q.retain(|t| live.contains(t));
        }
        self.queues.retain(|_, q| !q.is_empty());
        self.queues.values().map(VecDeque::len).sum::<usize>() != before
    }

    /// The files `task` reserved.
    pub fn held_by(&self, task: &TaskId) -> Vec<String> {
        self.queues
            .iter()
            .filter(|(_, q)| q.contains(task))
            .map(|(f, _)| f.clone())
            .collect()
    }

    /// Whether `task` reserved anything.
    pub fn reserves(&self, task: &TaskId) -> bool {
        self.queues.values().any(|q| q.contains(task))
    }

    /// Whether `task`'s resolve attempt may start: it is first in line for
    /// every file it reserved, and no merge granted earlier writes one.
    pub fn may_resolve(&self, task: &TaskId) -> bool {
        let held = self.held_by(task);
        held.iter()
            .all(|f| self.queues.get(f).and_then(|q| q.front()) == Some(task))
            && !self
                .merging
                .values()
                .any(|(other, files)| other != task && files.iter().any(|f| held.contains(f)))
    }

    fn may_merge(&self, task: &TaskId, files: &[String]) -> bool {
        files.iter().all(|f| {
            self.queues
                .get(f)
                .and_then(|q| q.front())
                .is_none_or(|first| first == task)
        })
    }

    /// A merge asks for its turn; the slots that may merge now (this one,
    /// or none while it waits).
    pub fn want(&mut self, slot: usize, task: &TaskId, files: &[String]) -> Vec<usize> {
        self.waiting.push(Wanted {
            slot,
            task: task.clone(),
            files: files.to_vec(),
        });
        self.grants()
    }

    /// The waiting merges that may go now, in the order they asked.
    pub fn grants(&mut self) -> Vec<usize> {
        let mut go = Vec::new();
        let mut still = Vec::new();
        for w in std::mem::take(&mut self.waiting) {
            if self.may_merge(&w.task, &w.files) {
                go.push(w.slot);
                self.merging.insert(w.slot, (w.task, w.files));
            } else {
                still.push(w);
            }
        }
        self.waiting = still;
        go
    }

    /// The attempt on `slot` is over (its merge, if any, with it).
    pub fn attempt_over(&mut self, slot: usize) {
        self.merging.remove(&slot);
        self.waiting.retain(|w| w.slot != slot);
    }

    /// The run stops: every waiting merge goes (a merge that conflicts is
    /// resolved next run; none is dropped).
    pub fn stop(&mut self) -> Vec<usize> {
        self.queues.clear();
        self.grants()
    }

    /// A lane's merge wrote `files`: the lane cools on the hot files it
    /// left alone.
    pub fn merged(&mut self, lane: &str, files: &[String]) {
        for f in files {
            self.last_writer.insert(f.clone(), lane.to_owned());
        }
        for (file, lanes) in &mut self.hot {
            if !files.contains(file) {
                lanes.remove(lane);
            }
        }
        self.hot.retain(|_, lanes| !lanes.is_empty());
    }

    /// `lane`'s merge conflicted on `files`: it and the lane that wrote
    /// each file last are hot on it. Returns the files whose conflicts
    /// between the same two lanes just reached [`HOT_FILE_CONFLICTS`].
    pub fn conflicted(&mut self, lane: &str, files: &[String]) -> Vec<HotFile> {
        let mut told = Vec::new();
        for f in files {
            let lanes = self.hot.entry(f.clone()).or_default();
            lanes.insert(lane.to_owned());
            let Some(other) = self.last_writer.get(f).filter(|o| *o != lane) else {
                continue;
            };
            lanes.insert(other.clone());
            let (a, b) = ordered(lane, other);
            let n = self
                .pairs
                .entry((f.clone(), a.clone(), b.clone()))
                .or_default();
            *n += 1;
            if *n == HOT_FILE_CONFLICTS {
                told.push(HotFile {
                    file: f.clone(),
                    lanes: (a, b),
                    conflicts: *n,
                });
            }
        }
        told
    }

    /// Nothing reserved, merging or waiting to merge.
    pub fn is_idle(&self) -> bool {
        self.queues.is_empty() && self.nothing_merging()
    }

    /// Nothing reserved, and no merge waiting for its turn.
    pub fn nothing_queued(&self) -> bool {
        self.queues.is_empty() && self.waiting.is_empty()
    }

    /// No merge granted or waiting for its turn.
    pub fn nothing_merging(&self) -> bool {
        self.merging.is_empty() && self.waiting.is_empty()
    }

    /// Whether `lane` is hot on some file.
    pub fn is_hot(&self, lane: &str) -> bool {
        self.hot.values().any(|lanes| lanes.contains(lane))
    }

    /// The files `lane` is hot on, sorted.
    pub fn hot_files_of(&self, lane: &str) -> Vec<String> {
        self.hot
            .iter()
            .filter(|(_, lanes)| lanes.contains(lane))
            .map(|(file, _)| file.clone())
            .collect()
    }

    /// Whether a new task of `lane` must wait its turn: the lane is hot on
    /// a file that another running lane is hot on too, or that a resolve
    /// is pending on.
    pub fn must_wait(&self, lane: &str, running: &[String]) -> bool {
        self.hot.iter().any(|(file, lanes)| {
            lanes.contains(lane)
                && (self.queues.contains_key(file)
                    || running.iter().any(|r| r != lane && lanes.contains(r)))
        })
    }

    /// The files the run said kept two lanes in conflict (those that
    /// reached [`HOT_FILE_CONFLICTS`]), with their counts now, for the
    /// summary (most conflicts first): the summary names no pair the run
    /// did not.
    pub fn hot_files(&self) -> Vec<HotFile> {
        let mut out: Vec<HotFile> = self
            .pairs
            .iter()
            .filter(|(_, n)| **n >= HOT_FILE_CONFLICTS)
            .map(|((file, a, b), n)| HotFile {
                file: file.clone(),
                lanes: (a.clone(), b.clone()),
                conflicts: *n,
            })
            .collect();
        out.sort_by_key(|h| std::cmp::Reverse(h.conflicts));
        out
    }
}

fn ordered(a: &str, b: &str) -> (String, String) {
    let key = |s: &str| {
        s.split('.')
            .map(|p| p.parse::<u64>().unwrap_or(u64::MAX))
            .collect::<Vec<_>>()
    };
    if (key(a), a) <= (key(b), b) {
        (a.to_owned(), b.to_owned())
    } else {
        (b.to_owned(), a.to_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(s: &str) -> TaskId {
        TaskId::new(s)
    }
    fn files(f: &[&str]) -> Vec<String> {
        f.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn a_merge_touching_a_reserved_file_waits_and_one_that_does_not_goes() {
        let mut r = Reservations::default();
        r.reserve(&id("2.1"), &files(&["NOTES.md"]));
        assert_eq!(
            r.want(0, &id("1.2"), &files(&["NOTES.md", "a.rs"])),
            Vec::<usize>::new()
        );
        assert_eq!(r.want(2, &id("3.1"), &files(&["b.rs"])), vec![2]);
        // The holder's own merge goes.
        assert_eq!(
            r.want(1, &id("2.1"), &files(&["NOTES.md", "c.rs"])),
            vec![1]
        );
        r.attempt_over(1);
        // Still reserved until the holder merged.
        assert_eq!(r.grants(), Vec::<usize>::new());
        r.release(&id("2.1"));
        assert_eq!(r.grants(), vec![0]);
    }

    #[test]
    fn a_resolve_waits_for_its_turn_and_for_merges_granted_before_it() {
        let mut r = Reservations::default();
        assert_eq!(r.want(3, &id("4.1"), &files(&["NOTES.md"])), vec![3]);
        r.reserve(&id("2.1"), &files(&["NOTES.md"]));
        r.reserve(&id("3.1"), &files(&["NOTES.md", "x"]));
        // 4.1's merge, granted before, still writes NOTES.md.
        assert!(!r.may_resolve(&id("2.1")));
        r.attempt_over(3);
        assert!(r.may_resolve(&id("2.1")));
        assert!(!r.may_resolve(&id("3.1")), "second in line for NOTES.md");
        r.release(&id("2.1"));
        assert!(r.may_resolve(&id("3.1")));
        assert_eq!(r.held_by(&id("3.1")), files(&["NOTES.md", "x"]));
    }

    #[test]
    fn conflicting_again_queues_again_for_every_file_at_once() {
        let mut r = Reservations::default();
        r.reserve(&id("1.1"), &files(&["a"]));
        r.reserve(&id("2.1"), &files(&["b"]));
        // 1.1's resolve met a person's edit of b: it queues behind 2.1 for
        // both, so the two never wait on each other.
        r.reserve(&id("1.1"), &files(&["b"]));
        assert_eq!(r.held_by(&id("1.1")), files(&["a", "b"]));
        assert!(r.may_resolve(&id("2.1")));
        assert!(!r.may_resolve(&id("1.1")));
        r.release(&id("2.1"));
        assert!(r.may_resolve(&id("1.1")));
    }

    #[test]
    fn stopping_lets_every_waiting_merge_go() {
        let mut r = Reservations::default();
        r.reserve(&id("2.1"), &files(&["N"]));
        assert!(r.want(0, &id("1.2"), &files(&["N"])).is_empty());
        assert_eq!(r.stop(), vec![0]);
    }

    #[test]
    fn lanes_that_conflicted_take_turns_until_one_leaves_the_file_alone() {
        let mut r = Reservations::default();
        r.merged("1", &files(&["N", "a"]));
        assert!(r.conflicted("2", &files(&["N"])).is_empty());
        let running = |l: &[&str]| l.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        // A resolve is pending on N: neither hot lane starts anything new.
        r.reserve(&id("2.1"), &files(&["N"]));
        assert!(r.must_wait("1", &running(&[])));
        assert!(
            !r.must_wait("3", &running(&["1", "2"])),
            "lane 3 is not hot"
        );
        r.release(&id("2.1"));
        assert!(r.must_wait("1", &running(&["2"])));
        assert!(!r.must_wait("1", &running(&["3"])));
        // Lane 2 merges without N: it cools, lane 1 runs freely beside it.
        r.merged("2", &files(&["b"]));
        assert!(!r.must_wait("1", &running(&["2"])));
    }

    #[test]
    fn the_third_conflict_between_two_lanes_on_a_file_is_told_once() {
        let mut r = Reservations::default();
        r.merged("5", &files(&["N"]));
        assert!(r.conflicted("2", &files(&["N"])).is_empty());
        assert!(r.conflicted("2", &files(&["N"])).is_empty());
        assert!(r.hot_files().is_empty(), "not said, so not in the summary");
        let told = r.conflicted("2", &files(&["N"]));
        assert_eq!(
            told,
            vec![HotFile {
                file: "N".into(),
                lanes: ("2".into(), "5".into()),
                conflicts: 3
            }]
        );
        assert_eq!(r.hot_files(), told, "the summary lists what was said");
        assert!(r.conflicted("2", &files(&["N"])).is_empty());
        assert_eq!(r.hot_files()[0].conflicts, 4);
        // Another pair on the same file, twice: not said, not listed.
        r.merged("7", &files(&["N"]));
        assert!(r.conflicted("3", &files(&["N"])).is_empty());
        assert!(r.conflicted("3", &files(&["N"])).is_empty());
        assert_eq!(r.hot_files().len(), 1);
        assert_eq!(ordered("10", "9"), ("9".into(), "10".into()));
    }
}
