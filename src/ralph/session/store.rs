//! The session's files: the snapshot, replaced atomically, and the journal
//! of records changed since (see the module above for why).

use super::*;
use crate::ralph::paths;

/// What the saves know of the files.
#[derive(Debug, Clone, Default)]
pub(super) struct Saves {
    /// What the files hold, while a save may append to the journal; none:
    /// the next save writes a snapshot.
    pub(super) disk: Option<OnDisk>,
    /// The records changed since the last save, each once (kept while
    /// `disk` is set: then every record not in it is saved as it is).
    pub(super) dirty: Vec<TaskId>,
}

/// The session's fields but its tasks, as the file's head.
#[derive(Serialize)]
struct Head<'a> {
    version: u32,
    change: &'a str,
    options: &'a SessionOptions,
    started_at: &'a str,
    updated_at: &'a str,
    selection: &'a Option<Vec<TaskId>>,
    run_time_ms: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    slots: Option<u32>,
    journal: &'a str,
}

/// A journal line's head: the session's fields a save may change (the rest
/// are the snapshot's; a change to them writes a snapshot).
#[derive(Serialize, Deserialize)]
struct LineHead<S> {
    journal: S,
    updated_at: S,
    run_time_ms: u64,
    slots: Option<u32>,
}

/// One journal line: its head, and the records it changed, whole.
#[derive(Deserialize)]
struct Line {
    #[serde(flatten)]
    head: LineHead<String>,
    tasks: BTreeMap<TaskId, TaskRecord>,
}

/// The snapshot a journal extends, as this session wrote it.
#[derive(Debug, Clone)]
pub(super) struct OnDisk {
    mark: String,
    /// Device, inode and length: appending is for that very file only (one
    /// deleted or replaced since gets a snapshot again).
    file: (u64, u64, u64),
    journal_bytes: u64,
    /// The head fields a line does not carry, as the snapshot has them.
    fixed: Fixed,
}

#[derive(Debug, Clone, PartialEq)]
struct Fixed {
    version: u32,
    change: String,
    options: SessionOptions,
    started_at: String,
    selection: Option<Vec<TaskId>>,
}

impl Session {
    /// `<change>/.ralph-session.json`.
    pub fn path(change_dir: &Path) -> PathBuf {
        paths::session_path(change_dir)
    }

    /// `<change>/.ralph/session.json`, where the versions that moved it kept it.
    pub fn legacy_path(change_dir: &Path) -> PathBuf {
        paths::legacy_session_path(change_dir)
    }

    /// The journal of the session file at `path` (`.ralph/session-journal.jsonl`
    /// beside it).
    pub fn journal_path(path: &Path) -> PathBuf {
        paths::journal_path(path)
    }

    /// The file to read without changing anything (`--dry-run`): the current
    /// place, else the legacy one.
    pub fn existing_path(change_dir: &Path) -> PathBuf {
        let path = Self::path(change_dir);
        let legacy = Self::legacy_path(change_dir);
        if !path.exists() && legacy.exists() {
            legacy
        } else {
            path
        }
    }

    /// Moves a session file left by an older version to its place (once).
    /// Returns the old path when it moved one. When both exist the new one
    /// wins and the old one is left alone.
    pub fn migrate_legacy(change_dir: &Path) -> Result<Option<PathBuf>, SessionError> {
        let legacy = Self::legacy_path(change_dir);
        let path = Self::path(change_dir);
        if !legacy.is_file() || path.exists() {
            return Ok(None);
        }
        let io = |action, source| SessionError::Io {
            action,
            path: legacy.clone(),
            source,
        };
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(|e| io("move", e))?;
        }
        std::fs::rename(&legacy, &path).map_err(|e| io("move", e))?;
        Ok(Some(legacy))
    }

    /// Ok(None) when there is no session file. The journal's lines of this
    /// snapshot are applied on top of it.
    pub fn load(path: &Path, change: &str) -> Result<Option<Session>, SessionError> {
        let text = match std::fs::read(path) {
            // Not UTF-8: say where (line, column) and what to do.
            Ok(bytes) => crate::model::error::decode_utf8(path, bytes).map_err(|d| {
                SessionError::Corrupt {
                    path: path.to_path_buf(),
                    detail: format!(
                        "line {}, column {}: {}; {}",
                        d.line, d.column, d.message, d.help
                    ),
                }
            })?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(source) => {
                return Err(SessionError::Io {
                    action: "read",
                    path: path.to_path_buf(),
                    source,
                });
            }
        };
        let value: serde_json::Value =
            serde_json::from_str(&text).map_err(|e| SessionError::Corrupt {
                path: path.to_path_buf(),
                detail: e.to_string(),
            })?;
        let version = value.get("version").and_then(serde_json::Value::as_u64);
        match version {
            Some(v) if v == u64::from(SESSION_VERSION) => {}
            Some(found) => {
                return Err(SessionError::UnknownVersion {
                    path: path.to_path_buf(),
                    found,
                });
            }
            None => {
                return Err(SessionError::Corrupt {
                    path: path.to_path_buf(),
                    detail: "no \"version\" field".into(),
                });
            }
        }
        // From the text, not the value: serde then names the line and column.
        let mut session: Session =
            serde_json::from_str(&text).map_err(|e| SessionError::Corrupt {
                path: path.to_path_buf(),
                detail: e.to_string(),
            })?;
        if session.change != change {
            return Err(SessionError::WrongChange {
                path: path.to_path_buf(),
                found: session.change,
                expected: change.to_string(),
            });
        }
        // The snapshot's mark: its journal's lines carry it. A session put
        // back by hand from one as loaded has none: no journal is read.
        if let Some(mark) = value.get("journal").and_then(serde_json::Value::as_str) {
            session.replay(&Self::journal_path(path), mark)?;
        }
        Ok(Some(session))
    }

    /// Applies the journal's complete lines that carry `mark`, in order.
    fn replay(&mut self, journal: &Path, mark: &str) -> Result<(), SessionError> {
        let bytes = match std::fs::read(journal) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(source) => {
                return Err(SessionError::Io {
                    action: "read",
                    path: journal.to_path_buf(),
                    source,
                });
            }
        };
        let corrupt = |n: usize, detail: String| SessionError::Corrupt {
            path: journal.to_path_buf(),
            detail: format!("line {n}: {detail}"),
        };
        // What follows the last newline is a line a kill cut short: its
        // save never returned, so nothing acted on it.
        let end = bytes.iter().rposition(|b| *b == b'\n').unwrap_or(0);
        let complete = &bytes[..end];
        for (i, line) in complete.split(|b| *b == b'\n').enumerate() {
            if line.is_empty() {
                continue;
            }
            let line: Line =
                serde_json::from_slice(line).map_err(|e| corrupt(i + 1, e.to_string()))?;
            if line.head.journal != mark {
                continue;
            }
            self.updated_at = line.head.updated_at;
            self.run_time_ms = line.head.run_time_ms;
            self.slots = line.head.slots;
            self.tasks.extend(line.tasks);
        }
        Ok(())
    }

    pub fn save(&mut self, path: &Path) -> Result<(), SessionError> {
        self.save_changes(path, &mut String::new()).map(drop)
    }

    /// Saves, and returns the tasks whose records changed since the last
    /// save (all of them the first time). `buffer`: the text is built there;
    /// a buffer kept from save to save spares asking the system for fresh
    /// pages each time. Appends the changed records to the journal, or
    /// writes a snapshot (the first save, once the journal outgrew the
    /// snapshot, or when appending is not possible).
    pub fn save_changes(
        &mut self,
        path: &Path,
        buffer: &mut String,
    ) -> Result<Vec<TaskId>, SessionError> {
        self.updated_at = now_rfc3339();
        let encode_error = |e: serde_json::Error| SessionError::Io {
            action: "encode",
            path: path.to_path_buf(),
            source: std::io::Error::other(e),
        };
        // A failed append (it may have left part of a line) is made good by
        // the snapshot, which drops the journal.
        if self.append(path, buffer).map_err(encode_error)? {
            return Ok(std::mem::take(&mut self.saves.dirty));
        }
        let mark = new_mark();
        let changed = self.encode(buffer, &mark).map_err(encode_error)?;
        self.saves.dirty.clear();
        if let Err(source) = replace_atomic(path, buffer.as_bytes()) {
            // Written again in full next time.
            self.tasks.values_mut().for_each(|r| r.saved = false);
            self.saves.disk = None;
            return Err(SessionError::Io {
                action: "write",
                path: path.to_path_buf(),
                source,
            });
        }
        // The journal's lines are in the new snapshot (and carry the old
        // mark). If it cannot go, the next save writes a snapshot again.
        let dropped = remove_if_there(&Self::journal_path(path)).is_ok();
        self.saves.disk = std::fs::metadata(path)
            .ok()
            .filter(|_| dropped)
            .map(|meta| OnDisk {
                mark,
                file: (meta.dev(), meta.ino(), meta.len()),
                journal_bytes: 0,
                fixed: self.fixed(),
            });
        Ok(changed)
    }

    fn fixed(&self) -> Fixed {
        Fixed {
            version: self.version,
            change: self.change.clone(),
            options: (*self.options).clone(),
            started_at: self.started_at.clone(),
            selection: self.selection.clone(),
        }
    }

    /// Appends one line with the records changed since the last save to the
    /// journal. False when a snapshot is due instead: none yet, it is no
    /// longer the file on disk, a field only a snapshot holds changed, the
    /// journal would outgrow it, or the write failed.
    fn append(&mut self, path: &Path, line: &mut String) -> Result<bool, serde_json::Error> {
        let Some(disk) = &self.saves.disk else {
            return Ok(false);
        };
        let same_file =
            std::fs::metadata(path).is_ok_and(|m| (m.dev(), m.ino(), m.len()) == disk.file);
        if !same_file
            || disk.fixed.version != self.version
            || disk.fixed.change != self.change
            || disk.fixed.options != *self.options
            || disk.fixed.started_at != self.started_at
            || disk.fixed.selection != self.selection
        {
            return Ok(false);
        }
        let head = serde_json::to_string(&LineHead {
            journal: disk.mark.as_str(),
            updated_at: self.updated_at.as_str(),
            run_time_ms: self.run_time_ms,
            slots: self.slots,
        })?;
        line.clear();
        line.push_str(head.strip_suffix('}').unwrap_or(&head));
        line.push_str(",\"tasks\":{");
        for (i, id) in self.saves.dirty.iter().enumerate() {
            if let Some(rec) = self.tasks.get(id) {
                if i > 0 {
                    line.push(',');
                }
                encode_entry(line, id, rec)?;
            }
        }
        line.push_str("}}\n");
        let len = line.len() as u64;
        if disk.journal_bytes + len > disk.file.2.max(MIN_JOURNAL_BYTES) {
            return Ok(false);
        }
        let written = std::fs::OpenOptions::new()
            .append(true)
            .create(true)
            .open(Self::journal_path(path))
            .and_then(|mut f| f.write_all(line.as_bytes()));
        if written.is_err() {
            return Ok(false);
        }
        if let Some(disk) = &mut self.saves.disk {
            disk.journal_bytes += len;
        }
        for id in &self.saves.dirty {
            if let Some(rec) = self.tasks.get_mut(id) {
                rec.saved = true;
            }
        }
        Ok(true)
    }

    /// The snapshot's text: the head, then one line per task (the same JSON
    /// a whole-struct encoding gives, as `load` reads it). Every record is
    /// encoded again (keeping each one's text would double the session's
    /// memory, and a snapshot is written once per journal its size).
    fn encode(&mut self, text: &mut String, mark: &str) -> Result<Vec<TaskId>, serde_json::Error> {
        let head = serde_json::to_string(&Head {
            version: self.version,
            change: &self.change,
            options: &self.options,
            started_at: &self.started_at,
            updated_at: &self.updated_at,
            selection: &self.selection,
            run_time_ms: self.run_time_ms,
            slots: self.slots,
            journal: mark,
        })?;
        text.clear();
        // The head is an object: reopen it for the tasks.
        text.push_str(head.strip_suffix('}').unwrap_or(&head));
        text.push_str(",\"tasks\":{");
        let mut changed = Vec::new();
        for (i, (id, rec)) in self.tasks.iter_mut().enumerate() {
            text.push_str(if i == 0 { "\n" } else { ",\n" });
            if !rec.saved {
                rec.saved = true;
                changed.push(id.clone());
            }
            encode_entry(text, id, rec)?;
        }
        text.push_str("\n}}\n");
        Ok(changed)
    }

    /// Deletes the session file and its journal.
    pub fn delete(path: &Path) -> Result<(), SessionError> {
        for file in [path.to_path_buf(), Self::journal_path(path)] {
            remove_if_there(&file).map_err(|source| SessionError::Io {
                action: "delete",
                path: file.clone(),
                source,
            })?;
        }
        Ok(())
    }
}

fn encode_entry(text: &mut String, id: &TaskId, rec: &TaskRecord) -> Result<(), serde_json::Error> {
    text.push_str(&serde_json::to_string(id)?);
    text.push(':');
    text.push_str(&serde_json::to_string(rec)?);
    Ok(())
}

/// A mark no other snapshot has: this process, the time, and a count.
fn new_mark() -> String {
    static COUNT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let n = COUNT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    format!("{:x}.{nanos:x}.{n}", std::process::id())
}

fn remove_if_there(path: &Path) -> std::io::Result<()> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}
