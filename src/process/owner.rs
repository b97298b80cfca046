//! "Who made this file?": a marker holding a process id and that process's
//! start time, so a later run can tell a leftover of a killed spectr (safe to
//! clean) from something a live process is using.

use super::start_time;
use std::path::Path;

/// This process's marker text: `<pid> <start time>`.
pub(crate) fn current() -> String {
    let pid = std::process::id();
    format!("{pid} {}", start_time(pid).unwrap_or(0))
}

/// Writes our marker to `path` (best effort: a missing marker only means a
/// leftover is recognised later by age instead).
pub(crate) fn write(path: &Path) {
    let _ = std::fs::write(path, current());
}

/// This process's marker as part of a file name, `<pid>-<start time>-`:
/// a temporary named with it is known for a killed spectr's leftover even
/// when it was killed before writing anything into it.
pub(crate) fn name_part() -> String {
    current().replace(' ', "-") + "-"
}

/// Whether the process a name made with [`name_part`] names is gone (`rest`
/// is the name after its prefix); `None` when it carries no marker (a name
/// from an older spectr).
pub(crate) fn name_is_dead(rest: &str) -> Option<bool> {
    let mut parts = rest.splitn(3, '-');
    let (pid, start) = (parts.next()?, parts.next()?);
    parts.next()?;
    if pid.is_empty() || start.is_empty() {
        return None;
    }
    if !pid.bytes().chain(start.bytes()).all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some(is_dead(&format!("{pid} {start}")))
}

/// Whether the process a marker names is gone (a pid reused by another
/// process has another start time). Unreadable markers count as alive.
pub(crate) fn is_dead(marker: &str) -> bool {
    let mut it = marker.split_whitespace();
    let (Some(pid), Some(start)) = (
        it.next().and_then(|p| p.parse::<u32>().ok()),
        it.next().and_then(|s| s.parse::<u64>().ok()),
    ) else {
        return false;
    };
    if pid == std::process::id() {
        return false;
    }
    match start_time(pid) {
        None => !process_exists(pid),
        Some(now) => start != 0 && now != start,
    }
}

fn process_exists(pid: u32) -> bool {
    let Ok(pid) = i32::try_from(pid) else {
        return false;
    };
    // Signal 0 only checks; EPERM means it exists (someone else's).
    !matches!(
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None),
        Err(nix::errno::Errno::ESRCH)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn we_are_alive_and_a_finished_child_is_dead() {
        assert!(!is_dead(&current()));
        let mut child = crate::process::Cmd::new("true").spawn().unwrap();
        let pid = child.pid();
        let start = start_time(pid).unwrap_or(1);
        child.wait().unwrap();
        assert!(is_dead(&format!("{pid} {start}")));
        assert!(!is_dead("garbage"));
        assert_eq!(name_is_dead(&format!("{}x1Yz", name_part())), Some(false));
        assert_eq!(name_is_dead(&format!("{pid}-{start}-x1Yz")), Some(true));
        assert_eq!(name_is_dead("x1Yz9a"), None);
    }
}
