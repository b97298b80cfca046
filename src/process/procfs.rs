//! Reading processes from /proc (Linux): who a process is (pid and start
//! time), its parent, group and session, and which pids must never be
//! signalled. Everything here only reads.

use nix::unistd::Pid;

/// One process as /proc shows it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Proc {
    pub(crate) pid: i32,
    pub(crate) ppid: i32,
    pub(crate) pgrp: i32,
    pub(crate) session: i32,
    pub(crate) state: char,
    /// Clock ticks after boot: with the pid, a process's identity.
    pub(crate) start: u64,
}

impl Proc {
    pub(crate) fn is_dead(&self) -> bool {
        // Zombies are dead: they wait only for a parent (maybe an init that
        // never reaps) to collect them.
        matches!(self.state, 'Z' | 'X' | 'x')
    }
}

/// A process's start time in clock ticks after boot (Linux); `None`
/// elsewhere or when the process is gone.
pub fn start_time(pid: u32) -> Option<u64> {
    let pid = i32::try_from(pid).ok()?;
    read_proc(pid).map(|p| p.start)
}

/// Whether `pid` must never be signalled: init, "every process", spectr
/// itself, its process group or its session.
pub fn is_forbidden(pid: i32) -> bool {
    if pid <= 1 || pid == std::process::id() as i32 {
        return true;
    }
    let me = Pid::from_raw(0);
    nix::unistd::getpgid(Some(me)).is_ok_and(|g| g.as_raw() == pid)
        || nix::unistd::getsid(Some(me)).is_ok_and(|s| s.as_raw() == pid)
}

/// One process's /proc entry, when it exists.
pub(crate) fn read_proc(pid: i32) -> Option<Proc> {
    if pid <= 0 {
        return None;
    }
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    parse_stat(pid, &stat)
}

/// The children of every thread of `pid`. `None` when the kernel offers no
/// children lists; an exited process has none.
pub(crate) fn children_of(pid: i32) -> Option<Vec<i32>> {
    let tasks = match std::fs::read_dir(format!("/proc/{pid}/task")) {
        Ok(t) => t,
        Err(_) => return Some(Vec::new()),
    };
    let mut kids = Vec::new();
    for task in tasks.flatten() {
        match std::fs::read_to_string(task.path().join("children")) {
            Ok(text) => kids.extend(
                text.split_whitespace()
                    .filter_map(|s| s.parse::<i32>().ok()),
            ),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && task.path().exists() => {
                return None;
            }
            Err(_) => {}
        }
    }
    Some(kids)
}

/// Every process on the system, or `None` without /proc.
pub(crate) fn scan() -> Option<Vec<Proc>> {
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
pub(crate) fn parse_stat(pid: i32, stat: &str) -> Option<Proc> {
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
}
