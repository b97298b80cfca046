//! Noticing tasks-file edits as they happen: file notifications (`notify`) on the
//! folders holding the tasks files, coalesced into one "look again" signal.
//! The loop also polls every 2 s, so a missed notification costs at most that.

use crossbeam_channel::{Receiver, Sender, bounded};
use notify::event::{AccessKind, AccessMode, EventKind, MetadataKind, ModifyKind};
use notify::{RecursiveMode, Watcher};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The floor: statuses are re-read at least this often while an agent runs.
pub const POLL_INTERVAL: Duration = Duration::from_secs(2);

pub struct TasksWatcher {
    _watcher: Option<notify::RecommendedWatcher>,
    /// Kept so `changed` never disconnects (a disconnected channel is always
    /// ready, and the loop would spin) even when notifications are unavailable.
    _keep: Sender<()>,
    pub changed: Receiver<()>,
    /// Why notifications are unavailable, if they are (polling still works).
    pub unavailable: Option<String>,
}

fn is_tasks_file(path: &Path) -> bool {
    path.file_name()
        .and_then(|n| n.to_str())
        .is_some_and(crate::model::is_tasks_file_name)
}

/// `HEAD` in a git dir, its reflog `logs/HEAD`, or a branch's file under
/// `refs/heads/`: one of them is written at every move of HEAD or of the
/// branch it is on (git's own `.lock` files are not: their rename is).
pub fn is_head_file(path: &Path) -> bool {
    let Some(name) = path.file_name() else {
        return false;
    };
    name == "HEAD"
        || !name.as_encoded_bytes().ends_with(b".lock")
            && path.ancestors().skip(1).any(|a| a.ends_with("refs/heads"))
}

/// Whether an event can mean new content. Opening or reading a file is not a
/// change: inotify reports our own reads of the tasks files, and reacting to
/// them made every re-read trigger the next one (a busy loop).
fn may_change_content(kind: &EventKind) -> bool {
    match kind {
        EventKind::Access(AccessKind::Close(AccessMode::Write)) => true,
        EventKind::Access(_) => false,
        EventKind::Modify(ModifyKind::Metadata(MetadataKind::AccessTime)) => false,
        EventKind::Any
        | EventKind::Create(_)
        | EventKind::Modify(_)
        | EventKind::Remove(_)
        | EventKind::Other => true,
    }
}

impl TasksWatcher {
    /// A watcher that never fires (the loop's 2 s poll still reads).
    pub fn inert() -> TasksWatcher {
        let (tx, rx) = bounded::<()>(1);
        TasksWatcher {
            _watcher: None,
            _keep: tx,
            changed: rx,
            unavailable: None,
        }
    }

    pub fn start(dirs: &[PathBuf]) -> TasksWatcher {
        Self::start_matching(dirs, is_tasks_file)
    }

    /// A watcher of the files in `dirs` that `wanted` accepts (the loop
    /// also watches HEAD this way).
    pub fn start_matching(dirs: &[PathBuf], wanted: fn(&Path) -> bool) -> TasksWatcher {
        let (tx, rx) = bounded::<()>(1);
        let (watcher, unavailable) = match Self::watch(dirs, tx.clone(), wanted) {
            Ok(w) => (Some(w), None),
            Err(e) => (None, Some(e.to_string())),
        };
        TasksWatcher {
            _watcher: watcher,
            _keep: tx,
            changed: rx,
            unavailable,
        }
    }

    fn watch(
        dirs: &[PathBuf],
        tx: Sender<()>,
        wanted: fn(&Path) -> bool,
    ) -> notify::Result<notify::RecommendedWatcher> {
        let mut watcher =
            notify::recommended_watcher(move |res: notify::Result<notify::Event>| {
                if let Ok(event) = res
                    && may_change_content(&event.kind)
                    && event.paths.iter().any(|p| wanted(p))
                {
                    // A full channel already holds a pending "look again": coalesce.
                    let _ = tx.try_send(());
                }
            })?;
        for dir in dirs {
            watcher.watch(dir, RecursiveMode::NonRecursive)?;
        }
        Ok(watcher)
    }

    /// [`TasksWatcher::start_matching`], kept for the rest of the run and
    /// handed out again (drained) for the same folders: watching a folder
    /// makes the kernel walk every name it remembers there, and a `.git`
    /// that spectr's temporary folders passed through holds thousands
    /// (~5 ms of CPU at every attempt's start). The folders are known by
    /// device and inode too (one removed and made again is watched anew),
    /// and a watcher that could not start is not kept. One user at a time.
    pub fn shared_matching(
        dirs: &[PathBuf],
        wanted: fn(&Path) -> bool,
    ) -> std::sync::Arc<TasksWatcher> {
        type Key = (Vec<(PathBuf, u64, u64)>, usize);
        static KEPT: std::sync::Mutex<Vec<(Key, std::sync::Arc<TasksWatcher>)>> =
            std::sync::Mutex::new(Vec::new());
        use std::os::unix::fs::MetadataExt;
        let folders: Option<Vec<(PathBuf, u64, u64)>> = dirs
            .iter()
            .map(|d| {
                let m = std::fs::metadata(d).ok()?;
                Some((d.clone(), m.dev(), m.ino()))
            })
            .collect();
        let Some(folders) = folders else {
            return std::sync::Arc::new(Self::start_matching(dirs, wanted));
        };
        let key: Key = (folders, wanted as usize);
        let mut kept = KEPT.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((_, w)) = kept.iter().find(|(k, _)| *k == key) {
            w.drain();
            return w.clone();
        }
        let watcher = std::sync::Arc::new(Self::start_matching(dirs, wanted));
        if watcher.unavailable.is_none() {
            // A few work trees at most (lanes'); the oldest goes past that.
            if kept.len() >= 16 {
                kept.remove(0);
            }
            kept.push((key, watcher.clone()));
        }
        watcher
    }

    /// Drops a pending notification (used after the loop's own writes).
    pub fn drain(&self) {
        while self.changed.try_recv().is_ok() {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_tasks_files_count() {
        assert!(is_tasks_file(Path::new("/x/tasks.jsonc")));
        assert!(is_tasks_file(Path::new("/x/tasks-12.jsonc")));
        assert!(is_tasks_file(Path::new("tasks.md")));
        assert!(!is_tasks_file(Path::new("/x/.ralph/session.json")));
        assert!(!is_tasks_file(Path::new("/x/proposal.md")));
    }

    #[test]
    fn head_its_reflog_and_branches_count() {
        for yes in [
            "/r/.git/HEAD",
            "/r/.git/logs/HEAD",
            "/r/.git/refs/heads/main",
            "/r/.git/refs/heads/feature/x",
        ] {
            assert!(is_head_file(Path::new(yes)), "{yes}");
        }
        for no in [
            "/r/.git/index",
            "/r/.git/ORIG_HEAD",
            "/r/.git/refs/heads/main.lock",
            "/r/.git/refs/tags/v1",
        ] {
            assert!(!is_head_file(Path::new(no)), "{no}");
        }
    }

    #[test]
    fn reads_are_not_changes() {
        use notify::event::{CreateKind, DataChange, RemoveKind, RenameMode};
        for kind in [
            EventKind::Access(AccessKind::Open(AccessMode::Any)),
            EventKind::Access(AccessKind::Close(AccessMode::Read)),
            EventKind::Access(AccessKind::Read),
            EventKind::Modify(ModifyKind::Metadata(MetadataKind::AccessTime)),
        ] {
            assert!(!may_change_content(&kind), "{kind:?}");
        }
        for kind in [
            EventKind::Access(AccessKind::Close(AccessMode::Write)),
            EventKind::Create(CreateKind::File),
            EventKind::Modify(ModifyKind::Data(DataChange::Any)),
            EventKind::Modify(ModifyKind::Name(RenameMode::To)),
            EventKind::Remove(RemoveKind::File),
        ] {
            assert!(may_change_content(&kind), "{kind:?}");
        }
    }

    /// Reading a watched tasks file must not wake the watcher: the loop
    /// re-reads the files whenever it wakes, so a read that woke it would spin.
    #[test]
    fn reading_the_files_does_not_wake_the_watcher() {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("tasks.jsonc");
        std::fs::write(&file, "{}").expect("write");
        let watcher = TasksWatcher::start(&[dir.path().to_path_buf()]);
        if watcher.unavailable.is_some() {
            return; // no inotify here: nothing to prove
        }
        for _ in 0..20 {
            std::fs::read(&file).expect("read");
        }
        // Events are delivered asynchronously: give a wrong wake-up every
        // chance to show (this is a bound on a negative, not a speed test).
        std::thread::sleep(Duration::from_millis(300));
        assert!(
            watcher.changed.try_recv().is_err(),
            "a read woke the watcher"
        );
        std::fs::write(&file, "{ }").expect("write");
        assert!(
            watcher
                .changed
                .recv_timeout(Duration::from_secs(10))
                .is_ok(),
            "a write did not wake the watcher"
        );
    }
}
