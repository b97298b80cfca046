//! Noticing tasks-file edits as they happen: file notifications (`notify`) on the
//! folders holding the tasks files, coalesced into one "look again" signal.
//! The loop also polls every 2 s, so a missed notification costs at most that.

use crossbeam_channel::{Receiver, Sender, bounded};
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
    let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
        return false;
    };
    name == "tasks.md" || (name.starts_with("tasks") && name.ends_with(".jsonc"))
}

impl TasksWatcher {
    pub fn start(dirs: &[PathBuf]) -> TasksWatcher {
        let (tx, rx) = bounded::<()>(1);
        let (watcher, unavailable) = match Self::watch(dirs, tx.clone()) {
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

    fn watch(dirs: &[PathBuf], tx: Sender<()>) -> notify::Result<notify::RecommendedWatcher> {
        let mut watcher =
            notify::recommended_watcher(move |res: notify::Result<notify::Event>| {
                if let Ok(event) = res
                    && event.paths.iter().any(|p| is_tasks_file(p))
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
        assert!(!is_tasks_file(Path::new("/x/.ralph-session.json")));
        assert!(!is_tasks_file(Path::new("/x/proposal.md")));
    }
}
