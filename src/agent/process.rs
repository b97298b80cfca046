//! The agent's process tree: started in a session of its own, found again by
//! session and group id, and signalled as a whole.
//!
//! Why a session (`setsid`) rather than only a process group: shells with job
//! control put their background jobs in new process groups, which a group
//! kill misses, but they stay in the session. On Linux we list the session's
//! members from /proc and signal each one, plus the group; elsewhere we fall
//! back to the group alone. A process that starts a session of its own has
//! left on purpose and cannot be found this way.

use nix::sys::signal::{Signal, kill, killpg};
use nix::unistd::Pid;
use std::os::unix::process::CommandExt;
use std::process::Command;

/// Makes `cmd` start as the leader of a new session (and process group),
/// detached from our terminal, so Ctrl+C reaches us, not the agent, and the
/// agent's whole tree can be signalled at once.
pub fn start_in_own_session(cmd: &mut Command) {
    // SAFETY: the closure runs in the forked child before exec and calls only
    // setsid(2), which is async-signal-safe; it touches no memory of ours.
    unsafe {
        cmd.pre_exec(|| {
            nix::unistd::setsid()
                .map(drop)
                .map_err(std::io::Error::from)
        });
    }
}

/// The session (and process group) the agent leads; its id is the agent's pid.
#[derive(Debug, Clone, Copy)]
pub struct ProcessTree {
    id: i32,
}

impl ProcessTree {
    pub fn new(leader_pid: u32) -> ProcessTree {
        ProcessTree {
            id: i32::try_from(leader_pid).unwrap_or(i32::MAX),
        }
    }

    /// Living members of the session or group (zombies are dead: they wait
    /// only for a parent, maybe an init that never reaps, to collect them).
    /// `None` when the system cannot list processes (no /proc).
    pub fn members(&self) -> Option<Vec<i32>> {
        let entries = std::fs::read_dir("/proc").ok()?;
        let me = std::process::id() as i32;
        let mut found = Vec::new();
        for entry in entries.flatten() {
            let Some(pid) = entry
                .file_name()
                .to_str()
                .and_then(|s| s.parse::<i32>().ok())
            else {
                continue;
            };
            if pid == me {
                continue;
            }
            let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
                continue;
            };
            if let Some((state, pgrp, session)) = parse_stat(&stat)
                && (pgrp == self.id || session == self.id)
                && state != 'Z'
                && state != 'X'
            {
                found.push(pid);
            }
        }
        found.sort_unstable();
        Some(found)
    }

    /// Whether any process of the tree is still alive.
    pub fn is_alive(&self) -> bool {
        match self.members() {
            Some(m) => !m.is_empty(),
            // Without /proc, a group that still has members (zombies too)
            // accepts signal 0.
            None => killpg(Pid::from_raw(self.id), None).is_ok(),
        }
    }

    /// Sends `signal` to every living member and to the group; returns how
    /// many members were found. Signals nothing when none is left, so a
    /// recycled id is never hit.
    pub fn signal(&self, signal: Signal) -> usize {
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

/// `(state, pgrp, session)` from a /proc/<pid>/stat line. The command name is
/// in parentheses and may itself contain spaces and parentheses.
fn parse_stat(stat: &str) -> Option<(char, i32, i32)> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut fields = rest.split_ascii_whitespace();
    let state = fields.next()?.chars().next()?;
    let _ppid = fields.next()?;
    let pgrp = fields.next()?.parse().ok()?;
    let session = fields.next()?.parse().ok()?;
    Some((state, pgrp, session))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_lines_with_odd_names() {
        assert_eq!(
            parse_stat("123 (sleep) S 1 123 120 0 -1 4194560"),
            Some(('S', 123, 120))
        );
        assert_eq!(parse_stat("7 (a) b (c)) Z 1 5 6 0"), Some(('Z', 5, 6)));
        assert_eq!(parse_stat("garbage"), None);
    }

    #[test]
    fn a_session_is_found_signalled_and_gone() {
        let mut cmd = Command::new("sh");
        cmd.args(["-c", "sleep 1000 & sleep 1000"]);
        start_in_own_session(&mut cmd);
        let mut child = cmd.spawn().unwrap();
        let tree = ProcessTree::new(child.id());
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
