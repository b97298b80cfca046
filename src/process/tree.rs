//! A started process's tree: found again and signalled as a whole. Every
//! signal spectr sends (the supervisor's stop, a force-quit, a timeout,
//! stopping what a crashed run left behind) goes through [`ProcessTree`].
//!
//! Who belongs to the tree:
//! - every process in the agent's session or process group (the session
//!   catches background jobs that job-control shells move to new groups);
//! - every descendant of the agent, found through parent links, even one that
//!   started a session of its own (Node's `detached` children, `setsid`);
//! - every process seen as part of the tree before (remembered by pid and
//!   start time, so a reused pid is never mistaken for it), and its
//!   descendants: this keeps an escaped child in reach after its parent died
//!   and it was handed to init. [`ProcessTree::observe`] is called every
//!   second while the agent runs and follows only the tree (through
//!   `/proc/<pid>/task/<tid>/children`, falling back to a scan of /proc where
//!   that file is missing); every signal starts with a full scan.
//!
//! Nothing is signalled without proof of identity: the leader's start time
//! (clock ticks after boot) is recorded when it starts, and a process counts
//! only when its own start time fits (a reused pid never does). pid 0 and 1,
//! spectr itself, its process group and its session are never signalled.
//!
//! Membership is read from /proc (Linux); without it only the process group
//! of a leader we started ourselves is signalled. A daemon that detaches and
//! is re-parented within the same second can still get away.

use super::procfs::{Proc, children_of, is_forbidden, read_proc, scan};
use nix::sys::signal::{Signal, kill, killpg};
use nix::unistd::Pid;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Where an agent's tree members are saved: next to its transcript (in the
/// ignored `.ralph/` folder), since the session records the transcript path.
pub fn members_file(transcript: &Path) -> PathBuf {
    let mut name = transcript.as_os_str().to_owned();
    name.push(".pids");
    PathBuf::from(name)
}

/// The agent's process tree; its id is the agent's pid (also its session and
/// process-group id). Clones share what was observed, so a handle held
/// elsewhere (force-quit) reaches the children the supervisor has seen.
#[derive(Debug, Clone)]
pub struct ProcessTree {
    id: i32,
    /// The leader's start time; `None` only when it could not be read at
    /// start (no /proc).
    leader_start: Option<u64>,
    /// Living members seen at the last look: pid -> start time.
    known: Arc<Mutex<BTreeMap<i32, u64>>>,
    /// Where the members are written whenever they change, so a later run
    /// can still reach escaped children after spectr was killed.
    save_to: Option<PathBuf>,
}

impl ProcessTree {
    /// The tree of a child we just started (not yet waited for, so its pid
    /// cannot have been reused).
    pub fn new(leader_pid: u32) -> ProcessTree {
        let id = i32::try_from(leader_pid).unwrap_or(0);
        ProcessTree {
            id,
            leader_start: read_proc(id).map(|p| p.start),
            known: Arc::default(),
            save_to: None,
        }
    }

    /// Writes the members (`pid start` lines) to `path` whenever they change;
    /// the leader at once, so a run killed before it could record the agent
    /// still leaves a way to it.
    pub fn saving_to(mut self, path: PathBuf) -> ProcessTree {
        if let Some(start) = self.leader_start {
            let tmp = path.with_extension("pids-tmp");
            if std::fs::write(&tmp, format!("{} {start}\n", self.id)).is_ok() {
                let _ = std::fs::rename(&tmp, &path);
            }
        }
        self.save_to = Some(path);
        self
    }

    /// The tree a previous run saved at `path` when it could not record its
    /// agent (killed first): led by its lowest saved pid (the agent, started
    /// before its children), each member still verified by its start time.
    /// `None` when nothing usable was saved.
    pub fn from_saved(path: &Path) -> Option<ProcessTree> {
        let text = std::fs::read_to_string(path).ok()?;
        let (pid, start) = text
            .lines()
            .filter_map(|l| {
                let mut f = l.split_whitespace();
                Some((
                    f.next()?.parse::<u32>().ok()?,
                    f.next()?.parse::<u64>().ok()?,
                ))
            })
            .min()?;
        Some(ProcessTree::adopt(pid, Some(start))?.with_saved_members(path))
    }

    /// Takes the members a previous run saved (see [`Self::saving_to`]) as
    /// seen before: each still counts only while its start time matches.
    pub fn with_saved_members(self, path: &Path) -> ProcessTree {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        if let Ok(mut k) = self.known.lock() {
            for line in text.lines() {
                let mut f = line.split_whitespace();
                if let (Some(Ok(pid)), Some(Ok(start))) = (
                    f.next().map(str::parse::<i32>),
                    f.next().map(str::parse::<u64>),
                ) && !is_forbidden(pid)
                {
                    k.insert(pid, start);
                }
            }
        }
        self
    }

    /// The tree of an agent a previous run recorded (pid and start time).
    /// `None` when it cannot be verified: no start time was recorded, or the
    /// pid is one spectr never signals.
    pub fn adopt(pid: u32, start: Option<u64>) -> Option<ProcessTree> {
        let id = i32::try_from(pid).ok()?;
        if is_forbidden(id) {
            return None;
        }
        Some(ProcessTree {
            id,
            leader_start: Some(start?),
            known: Arc::default(),
            save_to: None,
        })
    }

    /// The leader's pid.
    pub fn pid(&self) -> u32 {
        u32::try_from(self.id).unwrap_or(0)
    }

    /// The leader's start time, when known.
    pub fn leader_start(&self) -> Option<u64> {
        self.leader_start
    }

    fn known(&self) -> BTreeMap<i32, u64> {
        self.known.lock().map(|k| k.clone()).unwrap_or_default()
    }

    fn remember(&self, live: &[Proc]) {
        let now: BTreeMap<i32, u64> = live.iter().map(|p| (p.pid, p.start)).collect();
        let changed = match self.known.lock() {
            Ok(mut k) => {
                let changed = *k != now;
                *k = now.clone();
                changed
            }
            Err(_) => false,
        };
        if changed && let Some(path) = &self.save_to {
            let text: String = now.iter().map(|(p, s)| format!("{p} {s}\n")).collect();
            // Best effort: without it only a crash loses track of escapees.
            let tmp = path.with_extension("pids-tmp");
            if std::fs::write(&tmp, text).is_ok() {
                let _ = std::fs::rename(&tmp, path);
            }
        }
    }

    /// Takes a look along the tree (not the whole system) and remembers who
    /// belongs to it.
    pub fn observe(&mut self) {
        if is_forbidden(self.id) {
            return;
        }
        match self.walk() {
            Some(live) => self.remember(&live),
            None => {
                let _ = self.members();
            }
        }
    }

    /// The leader and the known members, and their descendants, found
    /// through the kernel's children lists. `None` when those lists are not
    /// available (the caller then scans /proc).
    fn walk(&self) -> Option<Vec<Proc>> {
        let known = self.known();
        let mut queue: Vec<i32> = known.keys().copied().collect();
        match read_proc(self.id) {
            Some(p) if Some(p.start) == self.leader_start || self.leader_start.is_none() => {
                queue.push(p.pid);
            }
            _ => {}
        }
        let me = std::process::id() as i32;
        let mut seen = BTreeSet::new();
        let mut live = Vec::new();
        while let Some(pid) = queue.pop() {
            if pid == me || !seen.insert(pid) {
                continue;
            }
            let Some(p) = read_proc(pid) else { continue };
            if known.get(&pid).is_some_and(|s| *s != p.start) {
                continue; // a reused pid, not the one we saw
            }
            queue.extend(children_of(pid)?);
            if !p.is_dead() {
                live.push(p);
            }
        }
        live.sort_by_key(|p| p.pid);
        Some(live)
    }

    /// Living members (sorted pids), from a scan of /proc, remembered for
    /// later looks. `None` when the system cannot list processes (no /proc).
    pub fn members(&mut self) -> Option<Vec<i32>> {
        if is_forbidden(self.id) {
            return Some(Vec::new());
        }
        let procs = scan()?;
        let live = self.live_members(&procs);
        self.remember(&live);
        Some(live.iter().map(|p| p.pid).collect())
    }

    fn live_members(&self, procs: &[Proc]) -> Vec<Proc> {
        let me = std::process::id() as i32;
        let my_group = nix::unistd::getpgrp().as_raw();
        let known = self.known();
        // The id was handed to another process: the tree's session and
        // group are gone (an id in use is never reused); only processes
        // seen before, by pid and start time, are left to find.
        let reused = procs
            .iter()
            .find(|p| p.pid == self.id)
            .is_some_and(|p| self.leader_start.is_some_and(|s| s != p.start));
        let started_with_tree = |p: &Proc| self.leader_start.is_none_or(|s| p.start >= s);
        let mut children: BTreeMap<i32, Vec<&Proc>> = BTreeMap::new();
        for p in procs {
            children.entry(p.ppid).or_default().push(p);
        }
        let mut members: BTreeSet<i32> = BTreeSet::new();
        let mut queue: Vec<&Proc> = procs
            .iter()
            .filter(|p| {
                known.get(&p.pid) == Some(&p.start)
                    || (!reused
                        && (p.pid == self.id || p.pgrp == self.id || p.session == self.id)
                        && started_with_tree(p))
            })
            .collect();
        while let Some(p) = queue.pop() {
            if p.pid == me || p.pgrp == my_group || !members.insert(p.pid) {
                continue;
            }
            if let Some(kids) = children.get(&p.pid) {
                queue.extend(kids.iter().copied());
            }
        }
        procs
            .iter()
            .filter(|p| members.contains(&p.pid) && !p.is_dead())
            .copied()
            .collect()
    }

    /// Whether any process of the tree is still alive.
    pub fn is_alive(&mut self) -> bool {
        match self.members() {
            Some(m) => !m.is_empty(),
            // Without /proc, a group that still has members (zombies too)
            // accepts signal 0.
            None => self
                .group_without_proc()
                .is_some_and(|g| killpg(g, None).is_ok()),
        }
    }

    /// Without /proc nothing can be verified: only a leader we started
    /// ourselves (no recorded start time to check) is signalled, by group.
    fn group_without_proc(&self) -> Option<Pid> {
        (self.leader_start.is_none() && !is_forbidden(self.id)).then(|| Pid::from_raw(self.id))
    }

    /// Sends `signal` to every living member (and to the group while it is
    /// ours); returns how many were found. Signals nothing when none is left,
    /// so a recycled id is never hit.
    pub fn signal(&mut self, signal: Signal) -> usize {
        match self.members() {
            Some(members) => {
                if members.is_empty() {
                    return 0;
                }
                if members.contains(&self.id) {
                    // The verified leader is alive: the group is ours, and
                    // killpg also reaches a member forked since the scan.
                    let _ = killpg(Pid::from_raw(self.id), signal);
                }
                for pid in &members {
                    // ESRCH: it exited meanwhile, which is what we want.
                    let _ = kill(Pid::from_raw(*pid), signal);
                }
                members.len()
            }
            None => self
                .group_without_proc()
                .map_or(0, |g| usize::from(killpg(g, signal).is_ok())),
        }
    }

    /// TERM to the whole tree, then KILL to whatever is left after `grace`;
    /// waits until it is gone (or a few seconds more). Returns how many
    /// processes were found at first.
    pub fn stop(&mut self, grace: Duration) -> usize {
        let found = self.signal(Signal::SIGTERM);
        if found == 0 {
            return 0;
        }
        let deadline = Instant::now() + grace;
        while Instant::now() < deadline {
            if !self.is_alive() {
                return found;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let hard_deadline = Instant::now() + Duration::from_secs(5);
        while self.signal(Signal::SIGKILL) > 0 && Instant::now() < hard_deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
        found
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::process::{Cmd, start_time};

    #[test]
    fn never_init_nor_ourselves() {
        assert!(is_forbidden(0));
        assert!(is_forbidden(1));
        assert!(is_forbidden(-5));
        assert!(is_forbidden(std::process::id() as i32));
        assert!(is_forbidden(nix::unistd::getpgrp().as_raw()));
        assert!(ProcessTree::adopt(0, Some(1)).is_none());
        assert!(ProcessTree::adopt(1, Some(1)).is_none());
        assert!(ProcessTree::adopt(std::process::id(), start_time(std::process::id())).is_none());
        let mut own = ProcessTree::new(std::process::id());
        assert_eq!(
            own.signal(Signal::SIGCONT),
            0,
            "spectr's own tree is never signalled"
        );
    }

    #[test]
    fn a_recorded_pid_is_signalled_only_with_its_start_time() {
        let mut child = Cmd::new("sleep").arg("1000").own_session().spawn().unwrap();
        let pid = child.pid();
        let start = start_time(pid).unwrap();
        // No start time recorded, or another one: not ours to signal.
        assert!(ProcessTree::adopt(pid, None).is_none());
        let mut other = ProcessTree::adopt(pid, Some(start + 1)).unwrap();
        assert_eq!(other.signal(Signal::SIGKILL), 0);
        assert!(child.try_wait().unwrap().is_none(), "still running");
        let mut ours = ProcessTree::adopt(pid, Some(start)).unwrap();
        assert_eq!(ours.signal(Signal::SIGKILL), 1);
        child.wait().unwrap();
    }

    #[test]
    fn observing_follows_the_tree_and_keeps_escaped_children() {
        // sh starts a child in a session of its own (escaped), then waits.
        let mut child = Cmd::new("sh")
            .args(["-c", "setsid sleep 1000 & sleep 1000"])
            .own_session()
            .spawn()
            .unwrap();
        let mut tree = ProcessTree::new(child.pid());
        let leader = child.pid() as i32;
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        // Three processes are not enough: the setsid child may be seen
        // before it has left the session. Wait until it has.
        let escaped = loop {
            tree.observe();
            let found = tree
                .known()
                .keys()
                .copied()
                .find(|p| read_proc(*p).is_some_and(|p| p.session != leader));
            if let Some(p) = found {
                break p;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "the setsid child was followed: {:?}",
                tree.known()
            );
            std::thread::sleep(std::time::Duration::from_millis(10));
        };
        let seen = tree.known();
        assert!(seen.len() >= 3, "sh and both sleeps: {seen:?}");
        // The parent dies; the escaped child is handed to init and stays ours.
        let _ = kill(Pid::from_raw(child.pid() as i32), Signal::SIGKILL);
        child.wait().unwrap();
        tree.observe();
        assert!(tree.signal(Signal::SIGKILL) >= 1);
        while tree.is_alive() && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert!(!tree.is_alive());
        assert!(read_proc(escaped).is_none_or(|p| p.is_dead()));
    }

    #[test]
    fn saved_members_reach_an_escaped_child_after_a_crash() {
        let dir = tempfile::tempdir().unwrap();
        let saved = dir.path().join("t.log.pids");
        let mut child = Cmd::new("sh")
            .args(["-c", "setsid sleep 1000 & sleep 1000"])
            .own_session()
            .spawn()
            .unwrap();
        let leader = child.pid();
        let start = start_time(leader).unwrap();
        let mut tree = ProcessTree::new(leader).saving_to(saved.clone());
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        let escaped = loop {
            tree.observe();
            let found = tree
                .known()
                .keys()
                .copied()
                .find(|p| read_proc(*p).is_some_and(|p| p.session != leader as i32));
            if let Some(p) = found {
                break p;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "no escaped child seen"
            );
            std::thread::sleep(std::time::Duration::from_millis(10));
        };
        assert!(
            std::fs::read_to_string(&saved)
                .unwrap()
                .contains(&format!("{escaped} "))
        );
        // "spectr dies": the tree in memory is gone. The agent dies too.
        drop(tree);
        let _ = kill(Pid::from_raw(leader as i32), Signal::SIGKILL);
        child.wait().unwrap();
        // Without the saved members the escaped child is out of reach...
        let mut blind = ProcessTree::adopt(leader, Some(start)).unwrap();
        blind.signal(Signal::SIGKILL);
        std::thread::sleep(std::time::Duration::from_millis(50));
        assert!(read_proc(escaped).is_some_and(|p| !p.is_dead()));
        // ...with them, the next run stops it.
        let mut next = ProcessTree::adopt(leader, Some(start))
            .unwrap()
            .with_saved_members(&saved);
        next.stop(std::time::Duration::from_millis(100));
        assert!(read_proc(escaped).is_none_or(|p| p.is_dead()));
    }

    #[test]
    fn a_session_is_found_signalled_and_gone() {
        let mut child = Cmd::new("sh")
            .args(["-c", "sleep 1000 & sleep 1000"])
            .own_session()
            .spawn()
            .unwrap();
        let mut tree = ProcessTree::new(child.pid());
        // Both sleeps (and maybe sh) appear once sh has forked.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while tree.members().unwrap().len() < 2 && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert!(tree.members().unwrap().len() >= 2);
        assert!(tree.signal(Signal::SIGKILL) >= 2);
        child.wait().unwrap();
        while tree.is_alive() && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert!(!tree.is_alive());
        assert_eq!(tree.signal(Signal::SIGKILL), 0);
    }
}
