//! The agent's process tree: started in a session of its own, found again,
//! and signalled as a whole.
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
//!   second while the agent runs, and every signal starts with a fresh look.
//!
//! Membership is read from /proc (Linux); without it only the process group
//! is signalled. A daemon that detaches and is re-parented within the same
//! second can still get away.

use nix::sys::signal::{Signal, kill, killpg};
use nix::unistd::Pid;
use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::process::CommandExt;
use std::process::Command;

/// Makes `cmd` start as the leader of a new session (and process group),
/// detached from our terminal, so Ctrl+C reaches us, not the agent, and the
/// agent's whole tree can be signalled at once.
///
/// On Linux the agent also gets SIGTERM if spectr dies without cleaning up
/// (`kill -9`), so it does not go on editing files unsupervised; the next run
/// stops whatever else it left behind. The agent is started from the loop's
/// main thread, which lives as long as spectr, so the signal never fires early.
pub fn start_in_own_session(cmd: &mut Command) {
    // SAFETY: the closure runs in the forked child before exec and calls only
    // setsid(2) and prctl(2), which are async-signal-safe; it touches no memory
    // of ours.
    unsafe {
        cmd.pre_exec(|| {
            nix::unistd::setsid().map_err(std::io::Error::from)?;
            #[cfg(target_os = "linux")]
            nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGTERM)
                .map_err(std::io::Error::from)?;
            Ok(())
        });
    }
}

/// One process as /proc shows it.
#[derive(Debug, Clone, Copy)]
struct Proc {
    pid: i32,
    ppid: i32,
    pgrp: i32,
    session: i32,
    state: char,
    /// Clock ticks after boot: with the pid, a process's identity.
    start: u64,
}

impl Proc {
    fn is_dead(&self) -> bool {
        // Zombies are dead: they wait only for a parent (maybe an init that
        // never reaps) to collect them.
        matches!(self.state, 'Z' | 'X' | 'x')
    }
}

/// The agent's process tree; its id is the agent's pid (also its session and
/// process-group id).
#[derive(Debug, Clone)]
pub struct ProcessTree {
    id: i32,
    /// Living members seen at the last look: pid -> start time.
    known: BTreeMap<i32, u64>,
}

impl ProcessTree {
    pub fn new(leader_pid: u32) -> ProcessTree {
        ProcessTree {
            id: i32::try_from(leader_pid).unwrap_or(i32::MAX),
            known: BTreeMap::new(),
        }
    }

    /// Takes a fresh look and remembers who belongs to the tree.
    pub fn observe(&mut self) {
        let _ = self.members();
    }

    /// Living members (sorted pids), remembered for later looks. `None` when
    /// the system cannot list processes (no /proc).
    pub fn members(&mut self) -> Option<Vec<i32>> {
        let procs = scan()?;
        let live = self.live_members(&procs);
        self.known = live.iter().map(|p| (p.pid, p.start)).collect();
        Some(live.iter().map(|p| p.pid).collect())
    }

    fn live_members(&self, procs: &[Proc]) -> Vec<Proc> {
        let me = std::process::id() as i32;
        let mut children: BTreeMap<i32, Vec<&Proc>> = BTreeMap::new();
        for p in procs {
            children.entry(p.ppid).or_default().push(p);
        }
        let mut members: BTreeSet<i32> = BTreeSet::new();
        let mut queue: Vec<&Proc> = procs
            .iter()
            .filter(|p| {
                p.pid == self.id
                    || p.pgrp == self.id
                    || p.session == self.id
                    || self.known.get(&p.pid) == Some(&p.start)
            })
            .collect();
        while let Some(p) = queue.pop() {
            if p.pid == me || !members.insert(p.pid) {
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
            None => killpg(Pid::from_raw(self.id), None).is_ok(),
        }
    }

    /// Sends `signal` to every living member (and to the group); returns how
    /// many were found. Signals nothing when none is left, so a recycled id
    /// is never hit.
    pub fn signal(&mut self, signal: Signal) -> usize {
        match self.members() {
            Some(members) => {
                if members.is_empty() {
                    return 0;
                }
                let _ = killpg(Pid::from_raw(self.id), signal);
                for pid in &members {
                    // ESRCH: it exited meanwhile, which is what we want.
                    let _ = kill(Pid::from_raw(*pid), signal);
                }
                members.len()
            }
            None => usize::from(killpg(Pid::from_raw(self.id), signal).is_ok()),
        }
    }
}

/// Every process on the system, or `None` without /proc.
fn scan() -> Option<Vec<Proc>> {
    let entries = std::fs::read_dir("/proc").ok()?;
    let mut procs = Vec::new();
    for entry in entries.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<i32>().ok())
        else {
            continue;
        };
        // Gone between listing and reading: not a member any more.
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        if let Some(p) = parse_stat(pid, &stat) {
            procs.push(p);
        }
    }
    Some(procs)
}

/// One /proc/<pid>/stat line. The command name is in parentheses and may
/// itself contain spaces and parentheses, so fields are counted after the
/// last `)`: state is field 3 of stat(5), ppid 4, pgrp 5, session 6, start
/// time 22.
fn parse_stat(pid: i32, stat: &str) -> Option<Proc> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_ascii_whitespace().collect();
    Some(Proc {
        pid,
        state: fields.first()?.chars().next()?,
        ppid: fields.get(1)?.parse().ok()?,
        pgrp: fields.get(2)?.parse().ok()?,
        session: fields.get(3)?.parse().ok()?,
        start: fields.get(19)?.parse().ok()?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_lines_with_odd_names() {
        let tail = "0 -1 4194560 100 0 0 0 0 0 0 0 20 0 1 0 777 1000 10";
        let p = parse_stat(123, &format!("123 (sleep) S 1 123 120 {tail}")).unwrap();
        assert_eq!(
            (p.state, p.ppid, p.pgrp, p.session, p.start),
            ('S', 1, 123, 120, 777)
        );
        let p = parse_stat(7, &format!("7 (a) b (c)) Z 1 5 6 {tail}")).unwrap();
        assert_eq!((p.state, p.pgrp, p.session), ('Z', 5, 6));
        assert!(p.is_dead());
        assert!(parse_stat(1, "garbage").is_none());
        assert!(parse_stat(1, "1 (x) S 1 2").is_none());
    }

    #[test]
    fn a_session_is_found_signalled_and_gone() {
        let mut cmd = Command::new("sh");
        cmd.args(["-c", "sleep 1000 & sleep 1000"]);
        start_in_own_session(&mut cmd);
        let mut child = cmd.spawn().unwrap();
        let mut tree = ProcessTree::new(child.id());
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
