//! One run at a time: an OS file lock on `.ralph/lock` in the change folder, and
//! (with checkpoints) one on `spectr-ralph.lock` in the git folder, since a
//! revert restores the whole work tree and would undo another run's work there.
//!
//! Every run takes the work-tree lock, with or without checkpoints: a
//! checkpointed run would otherwise revert a `--no-checkpoint` run's work.
//!
//! The OS drops a lock when its holder dies, however it dies, so a lock file
//! left by a dead process is simply taken over; the pid written inside is only
//! there to name the running process in the refusal. One subtlety: a child
//! the dead run was starting holds the lock too until it has called exec (a
//! moment, longer on a loaded machine), so when the pid written inside is
//! dead, or none is written (a clean release empties the file, and a child
//! forked that instant still holds it), the lock is tried again for a little
//! while before giving up; a living holder's pid refuses at once.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

pub const LOCK_FILE: &str = "lock";
pub const TREE_LOCK_FILE: &str = "spectr-ralph.lock";

#[derive(Debug, thiserror::Error, miette::Diagnostic)]
pub enum LockError {
    #[error("another `spectr ralph` is already running on change '{change}' ({holder})")]
    #[diagnostic(help(
        "wait for it to finish, or stop it (press q in its terminal, or kill {pid})"
    ))]
    Held {
        change: String,
        holder: String,
        pid: String,
    },
    #[error(
        "another `spectr ralph` is already running in this work tree, on change '{other}' ({holder})"
    )]
    #[diagnostic(help(
        "runs in one work tree would revert each other's work: wait for it, or run this change in another clone or `git worktree`"
    ))]
    TreeHeld { other: String, holder: String },
    #[error("could not lock {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// Held for the whole run; released on drop and by the OS on any exit. The file
/// itself stays (removing it would let two runs lock two different files); a
/// clean exit empties it, so a pid left inside marks a run that died.
#[derive(Debug)]
pub struct RunLock {
    file: File,
    /// The pid a previous, dead holder left behind, if any.
    pub took_over_from: Option<String>,
}

/// `key=value` lines a holder writes into its lock file.
fn field(info: &str, key: &str) -> Option<String> {
    info.lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix('='))
        .map(str::to_string)
}

fn describe_holder(info: &str) -> String {
    match (field(info, "pid"), field(info, "started")) {
        (Some(pid), Some(started)) => format!("pid {pid}, started {started}"),
        (Some(pid), None) => format!("pid {pid}"),
        _ => "process unknown".to_string(),
    }
}

impl RunLock {
    /// The lock of one change: `<state_dir>/lock`.
    pub fn acquire(state_dir: &Path, change: &str) -> Result<RunLock, LockError> {
        Self::take(state_dir.join(LOCK_FILE), change).map_err(|held| match held {
            Refused::Held(info) => LockError::Held {
                change: change.to_string(),
                holder: describe_holder(&info),
                pid: field(&info, "pid").unwrap_or_else(|| "the process".into()),
            },
            Refused::Io(e) => e,
        })
    }

    /// The lock of one work tree: `<git_dir>/spectr-ralph.lock`.
    pub fn acquire_tree(git_dir: &Path, change: &str) -> Result<RunLock, LockError> {
        Self::take(git_dir.join(TREE_LOCK_FILE), change).map_err(|held| match held {
            Refused::Held(info) => LockError::TreeHeld {
                other: field(&info, "change").unwrap_or_else(|| "unknown".into()),
                holder: describe_holder(&info),
            },
            Refused::Io(e) => e,
        })
    }

    fn take(path: PathBuf, change: &str) -> Result<RunLock, Refused> {
        let io = |source| {
            Refused::Io(LockError::Io {
                path: path.clone(),
                source,
            })
        };
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(io)?;
        let mut previous = String::new();
        let deadline = std::time::Instant::now() + DEAD_HOLDER_WAIT;
        loop {
            match file.try_lock() {
                Ok(()) => break,
                Err(TryLockError::WouldBlock) => {
                    previous.clear();
                    let _ = file.seek(SeekFrom::Start(0));
                    let _ = file.read_to_string(&mut previous);
                    let holder_gone = match field(&previous, "pid") {
                        Some(pid) => pid.parse::<i32>().is_ok_and(|p| !is_alive(p)),
                        None => true,
                    };
                    if !holder_gone || std::time::Instant::now() >= deadline {
                        return Err(Refused::Held(previous));
                    }
                    std::thread::sleep(std::time::Duration::from_millis(50));
                }
                Err(TryLockError::Error(e)) => return Err(io(e)),
            }
        }
        previous.clear();
        let _ = file.seek(SeekFrom::Start(0));
        let _ = file.read_to_string(&mut previous);
        let took_over_from =
            field(&previous, "pid").filter(|pid| *pid != std::process::id().to_string());
        let info = format!(
            "pid={}\nstarted={}\nchange={change}\n",
            std::process::id(),
            crate::ralph::session::now_rfc3339()
        );
        file.set_len(0).map_err(io)?;
        file.seek(SeekFrom::Start(0)).map_err(io)?;
        file.write_all(info.as_bytes()).map_err(io)?;
        let _ = file.sync_all();
        Ok(RunLock {
            file,
            took_over_from,
        })
    }
}

/// How long a lock whose recorded holder is dead may still be held (by a
/// child of that holder on its way to exec).
const DEAD_HOLDER_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// Whether `pid` names a living process (not a zombie).
fn is_alive(pid: i32) -> bool {
    if pid <= 0 {
        return false;
    }
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat
            .rfind(')')
            .and_then(|i| stat[i + 1..].split_whitespace().next())
            .is_some_and(|state| state != "Z" && state != "X"),
        // Without /proc: signal 0 says whether it exists.
        Err(_) => nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None).is_ok(),
    }
}

enum Refused {
    /// Someone holds it; what they wrote in the file.
    Held(String),
    Io(LockError),
}

impl Drop for RunLock {
    fn drop(&mut self) {
        let _ = self.file.set_len(0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn second_lock_is_refused_and_names_the_holder() {
        let dir = tempfile::tempdir().unwrap();
        let first = RunLock::acquire(dir.path(), "c").unwrap();
        let err = RunLock::acquire(dir.path(), "c").unwrap_err();
        let msg = err.to_string();
        assert!(
            msg.contains(&format!("pid {}", std::process::id())),
            "{msg}"
        );
        drop(first);
        assert!(RunLock::acquire(dir.path(), "c").is_ok());
    }

    #[test]
    fn a_lock_released_but_still_held_by_a_forked_copy_is_waited_for() {
        let dir = tempfile::tempdir().unwrap();
        let first = RunLock::acquire(dir.path(), "c").unwrap();
        // What a child forked by another thread holds until its exec: the
        // same open file, and with it the lock, after the run let go.
        let forked_copy = first.file.try_clone().unwrap();
        drop(first);
        let exec = std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(300));
            drop(forked_copy);
        });
        let lock = RunLock::acquire(dir.path(), "c");
        exec.join().unwrap();
        assert!(lock.is_ok(), "{:?}", lock.err());
    }

    #[test]
    fn the_tree_lock_names_the_other_change() {
        let dir = tempfile::tempdir().unwrap();
        let _first = RunLock::acquire_tree(dir.path(), "add-a").unwrap();
        let msg = RunLock::acquire_tree(dir.path(), "add-b")
            .unwrap_err()
            .to_string();
        assert!(
            msg.contains("change 'add-a'") && msg.contains("work tree"),
            "{msg}"
        );
    }

    #[test]
    fn a_clean_release_leaves_nothing_to_take_over() {
        let dir = tempfile::tempdir().unwrap();
        drop(RunLock::acquire(dir.path(), "c").unwrap());
        let again = RunLock::acquire(dir.path(), "c").unwrap();
        assert_eq!(again.took_over_from, None);
    }

    #[test]
    fn stale_lock_file_is_taken_over() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(LOCK_FILE), "pid=999999\n").unwrap();
        let lock = RunLock::acquire(dir.path(), "c").unwrap();
        assert_eq!(lock.took_over_from.as_deref(), Some("999999"));
    }
}
