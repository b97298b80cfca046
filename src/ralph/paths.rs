//! Where a run keeps its state in the change folder. Below both the run's
//! configuration and the session, which both need these names, so that
//! neither imports the other.

use std::path::{Path, PathBuf};

/// The folder (inside the change folder) holding the lock, the transcripts
/// and the session's journal. Its own `.gitignore` ignores all of it.
pub const STATE_DIR: &str = ".ralph";
/// The session file (its snapshot) in the change folder.
pub const SESSION_FILE: &str = ".ralph-session.json";
/// Where the versions that moved it kept the session: in the state folder,
/// under this name.
pub const LEGACY_SESSION_FILE: &str = "session.json";
/// The session's journal, in the state folder beside the session file.
pub const SESSION_JOURNAL: &str = "session-journal.jsonl";

/// `<change>/.ralph`.
pub fn state_dir(change_dir: &Path) -> PathBuf {
    change_dir.join(STATE_DIR)
}

/// `<change>/.ralph-session.json`.
pub fn session_path(change_dir: &Path) -> PathBuf {
    change_dir.join(SESSION_FILE)
}

/// `<change>/.ralph/session.json`, where the versions that moved it kept it.
pub fn legacy_session_path(change_dir: &Path) -> PathBuf {
    state_dir(change_dir).join(LEGACY_SESSION_FILE)
}

/// The journal of the session file at `session`: in the state folder of the
/// folder holding it (there it is never committable nor checkpointed).
pub fn journal_path(session: &Path) -> PathBuf {
    let dir = match session.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    state_dir(dir).join(SESSION_JOURNAL)
}
