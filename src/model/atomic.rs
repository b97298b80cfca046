//! Atomic file writes: temp file, fsync, rename, fsync folder.
//!
//! The temp file must be on the target's filesystem for the rename to be
//! atomic, but it must never be committable: an agent running `git add -A`
//! at that moment would commit it (or fail on it vanishing). So it is created
//! in spectr's own state folder (`.ralph/`, ignored by its own `.gitignore`)
//! of the target's folder or the nearest one above it, when that is on the
//! same filesystem; only without one does it go next to the target.
//!
//! A read-only file (no write permission bit) is never replaced: it is the
//! owner's way of saying "don't touch", and a rename would ignore it.

use std::io::Write;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// spectr's state folder in a change folder; its `.gitignore` ignores it all.
const STATE_DIR: &str = ".ralph";

/// The start of a temp file's name; the owner's marker follows it.
const TEMP_PREFIX: &str = ".spectr-tmp-";

/// A temp file an older spectr named without its owner is taken for a
/// leftover only when this old.
const UNOWNED_STALE_AFTER: std::time::Duration = std::time::Duration::from_secs(3600);

/// Removes the temp files a killed spectr left in `dir` (a change's state
/// folder, or the change folder): only ours (by name), only those whose
/// owner process is gone. Returns how many were removed.
pub fn remove_stale_temps(dir: &Path) -> usize {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    let mut removed = 0;
    for entry in entries.flatten() {
        let name = entry.file_name();
        let name = name.to_string_lossy();
        let Some(rest) = name.strip_prefix(TEMP_PREFIX) else {
            continue;
        };
        if !entry.file_type().is_ok_and(|t| t.is_file()) {
            continue;
        }
        let stale = crate::process::owner::name_is_dead(rest).unwrap_or_else(|| {
            entry
                .metadata()
                .and_then(|m| m.modified())
                .ok()
                .and_then(|t| std::time::SystemTime::now().duration_since(t).ok())
                .is_some_and(|age| age > UNOWNED_STALE_AFTER)
        });
        if stale && std::fs::remove_file(entry.path()).is_ok() {
            removed += 1;
        }
    }
    removed
}

/// Replaces `path` with `bytes` so that a reader (or a crash) sees either the old
/// or the new content, never a mix. Refuses (`PermissionDenied`) to replace a
/// read-only file.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    write(path, bytes, true)
}

/// [`write_atomic`] without waiting for the disk: if spectr is killed, a
/// reader still sees the old or the new content (the rename is atomic); only
/// a power loss may lose the last replacement. For state rewritten many times
/// a task that a resume can do without (the session file): each flush to disk
/// costs more than the rest of a task's bookkeeping.
pub fn replace_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    write(path, bytes, false)
}

fn write(path: &Path, bytes: &[u8], durable: bool) -> std::io::Result<()> {
    // Write through a symlink to its target: renaming over the link itself
    // would silently turn it into a plain file.
    let resolved;
    let path = if std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink()) {
        resolved = std::fs::canonicalize(path)?;
        resolved.as_path()
    } else {
        path
    };
    let existing = std::fs::metadata(path).ok();
    if existing
        .as_ref()
        .is_some_and(|m| m.permissions().readonly())
    {
        return Err(std::io::Error::new(
            std::io::ErrorKind::PermissionDenied,
            format!(
                "{} is read-only; spectr does not replace read-only files (make it writable with `chmod u+w`, then run again)",
                path.display()
            ),
        ));
    }
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let private = private_temp_dir(dir);
    let tmp_dir = match private {
        Some(p) => match write_via(&p, path, bytes, durable, existing.as_ref()) {
            // Inside `--sandbox` the state folder is read-only and mounted
            // apart (a rename from it crosses mounts): beside the target then.
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::ReadOnlyFilesystem | std::io::ErrorKind::CrossesDevices
                ) =>
            {
                write_via(dir, path, bytes, durable, existing.as_ref())?;
                dir.to_path_buf()
            }
            other => other.map(|()| p)?,
        },
        None => {
            write_via(dir, path, bytes, durable, existing.as_ref())?;
            dir.to_path_buf()
        }
    };
    if !durable {
        return Ok(());
    }
    for d in [dir, tmp_dir.as_path()] {
        if let Ok(d) = std::fs::File::open(d) {
            // Make the rename itself durable; not every filesystem allows this.
            let _ = d.sync_all();
        }
    }
    Ok(())
}

/// Writes `bytes` to a temp file in `tmp_dir` and renames it to `path`.
fn write_via(
    tmp_dir: &Path,
    path: &Path,
    bytes: &[u8],
    durable: bool,
    existing: Option<&std::fs::Metadata>,
) -> std::io::Result<()> {
    // Named for its owner, so a killed spectr's is known for a leftover.
    let mut tmp = tempfile::Builder::new()
        .prefix(&format!(
            "{TEMP_PREFIX}{}",
            crate::process::owner::name_part()
        ))
        .tempfile_in(tmp_dir)?;
    tmp.write_all(bytes)?;
    if durable {
        tmp.as_file().sync_all()?;
    }
    if let Some(meta) = existing {
        // Keep the file's permissions: a temp file is created 0600.
        tmp.as_file().set_permissions(meta.permissions())?;
    }
    tmp.persist(path).map_err(|e| e.error)?;
    Ok(())
}

/// The nearest `.ralph/` folder at or above `dir` (not above the work tree's
/// top, the folder holding `.git`) that is on `dir`'s filesystem.
fn private_temp_dir(dir: &Path) -> Option<PathBuf> {
    let dev = std::fs::metadata(dir).ok()?.dev();
    let mut at = Some(dir);
    while let Some(d) = at {
        let candidate = d.join(STATE_DIR);
        if let Ok(meta) = std::fs::metadata(&candidate)
            && meta.is_dir()
        {
            return (meta.dev() == dev).then_some(candidate);
        }
        if d.join(".git").exists() {
            return None;
        }
        at = d.parent().filter(|p| !p.as_os_str().is_empty());
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_temp_file_goes_into_the_state_folder() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join(".git")).unwrap();
        let change = dir.path().join("c");
        std::fs::create_dir_all(change.join(".ralph")).unwrap();
        assert_eq!(private_temp_dir(&change), Some(change.join(".ralph")));
        let split = change.join("parts");
        std::fs::create_dir(&split).unwrap();
        assert_eq!(private_temp_dir(&split), Some(change.join(".ralph")));
        // Never above the work tree's top.
        let other = dir.path().join("d");
        std::fs::create_dir(&other).unwrap();
        assert_eq!(private_temp_dir(&other), None);
        write_atomic(&change.join("tasks.jsonc"), b"x").unwrap();
        assert_eq!(std::fs::read(change.join("tasks.jsonc")).unwrap(), b"x");
        let leftovers: Vec<_> = std::fs::read_dir(&change)
            .unwrap()
            .chain(std::fs::read_dir(change.join(".ralph")).unwrap())
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().starts_with(".spectr-tmp"))
            .collect();
        assert!(leftovers.is_empty());
    }

    #[test]
    fn a_killed_writers_temp_files_are_removed_and_a_live_ones_kept() {
        let dir = tempfile::tempdir().unwrap();
        let mut child = crate::process::Cmd::new("true").spawn().unwrap();
        let pid = child.pid();
        let start = crate::process::start_time(pid).unwrap_or(1);
        child.wait().unwrap();
        let dead = dir
            .path()
            .join(format!("{TEMP_PREFIX}{pid}-{start}-aB3dE9"));
        let live = dir.path().join(format!(
            "{TEMP_PREFIX}{}aB3dE9",
            crate::process::owner::name_part()
        ));
        let young_unowned = dir.path().join(format!("{TEMP_PREFIX}aB3dE9"));
        let other = dir.path().join("tasks.jsonc");
        for p in [&dead, &live, &young_unowned, &other] {
            std::fs::write(p, "x").unwrap();
        }
        assert_eq!(remove_stale_temps(dir.path()), 1);
        assert!(!dead.exists());
        assert!(live.exists() && young_unowned.exists() && other.exists());
    }

    #[test]
    fn a_read_only_file_is_not_replaced() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("t");
        std::fs::write(&p, "old").unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o444)).unwrap();
        let err = write_atomic(&p, b"new").unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::PermissionDenied);
        assert!(err.to_string().contains("read-only"), "{err}");
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "old");
    }
}
