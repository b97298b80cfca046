//! Atomic file writes: temp file in the same folder, fsync, rename, fsync folder.

use std::io::Write;
use std::path::Path;

/// Replaces `path` with `bytes` so that a reader (or a crash) sees either the old
/// or the new content, never a mix.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    // Write through a symlink to its target: renaming over the link itself
    // would silently turn it into a plain file.
    let resolved;
    let path = if std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink()) {
        resolved = std::fs::canonicalize(path)?;
        resolved.as_path()
    } else {
        path
    };
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let mut tmp = tempfile::Builder::new()
        .prefix(".spectr-tmp-")
        .tempfile_in(dir)?;
    tmp.write_all(bytes)?;
    tmp.as_file().sync_all()?;
    if let Ok(meta) = std::fs::metadata(path) {
        // Keep the file's permissions: a temp file is created 0600.
        tmp.as_file().set_permissions(meta.permissions())?;
    }
    tmp.persist(path).map_err(|e| e.error)?;
    if let Ok(d) = std::fs::File::open(dir) {
        // Make the rename itself durable; not every filesystem allows this.
        let _ = d.sync_all();
    }
    Ok(())
}
