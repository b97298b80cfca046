//! Reading and writing the work tree ourselves, without git's filters: files
//! are written byte for byte with their recorded mode, never through a
//! symlink, and replaced atomically (temporary file, then rename).

use super::error::CheckpointError;
use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsStr;
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

pub(crate) fn rel_path(rel: &[u8]) -> PathBuf {
    PathBuf::from(OsStr::from_bytes(rel))
}

/// Makes every directory of `rel` (below `root`) a real directory: a symlink
/// or file in the way is removed (it belongs to the failed attempt, saved in
/// its snapshot), so nothing is ever written outside the work tree.
pub(crate) fn make_dirs(root: &Path, rel: &Path) -> Result<(), CheckpointError> {
    let mut dir = root.to_path_buf();
    for c in rel.components() {
        dir.push(c);
        match std::fs::symlink_metadata(&dir) {
            Ok(m) if m.is_dir() => continue,
            Ok(_) => std::fs::remove_file(&dir)
                .map_err(|e| CheckpointError::io("cannot remove what is in the way at", &dir, e))?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(CheckpointError::io("cannot inspect", &dir, e)),
        }
        match std::fs::create_dir(&dir) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(CheckpointError::io("cannot create the directory", &dir, e)),
        }
    }
    Ok(())
}

/// What to put at a path.
pub(crate) enum Content<'a> {
    File { bytes: &'a [u8], mode: u32 },
    Symlink { target: &'a [u8] },
}

/// Writes one checkpoint entry at `root/rel`, replacing whatever is there.
pub(crate) fn write_entry(
    root: &Path,
    rel: &[u8],
    content: Content<'_>,
) -> Result<(), CheckpointError> {
    let rel = rel_path(rel);
    let (Some(parent), Some(name)) = (rel.parent(), rel.file_name()) else {
        return Ok(());
    };
    make_dirs(root, parent)?;
    let full = root.join(&rel);
    if let Ok(m) = std::fs::symlink_metadata(&full)
        && m.is_dir()
    {
        // The attempt made a directory of a file; its content is saved.
        std::fs::remove_dir_all(&full).map_err(|e| {
            CheckpointError::io("cannot remove the directory in the way at", &full, e)
        })?;
    }
    let mut tmp_name = std::ffi::OsString::from(".");
    tmp_name.push(name);
    tmp_name.push(format!(".spectr-tmp-{}", uuid::Uuid::new_v4().simple()));
    let tmp = root.join(parent).join(tmp_name);
    let written = match content {
        Content::File { bytes, mode } => write_file(&tmp, bytes, mode),
        Content::Symlink { target } => std::os::unix::fs::symlink(OsStr::from_bytes(target), &tmp),
    };
    let result = written.and_then(|()| std::fs::rename(&tmp, &full));
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result.map_err(|e| CheckpointError::io("cannot restore", &full, e))
}

/// Removes what a [`write_entry`] of `root/rel` killed half way left: its
/// temporary file (`.<name>.spectr-tmp-<32 hex digits>` beside it).
/// Returns how many were removed.
pub(crate) fn remove_write_leftovers(root: &Path, rel: &[u8]) -> usize {
    let rel = rel_path(rel);
    let (Some(parent), Some(name)) = (rel.parent(), rel.file_name()) else {
        return 0;
    };
    let mut prefix = b".".to_vec();
    prefix.extend_from_slice(name.as_bytes());
    prefix.extend_from_slice(b".spectr-tmp-");
    let Ok(entries) = std::fs::read_dir(root.join(parent)) else {
        return 0;
    };
    let mut removed = 0;
    for e in entries.flatten() {
        let file = e.file_name();
        let ours = file
            .as_bytes()
            .strip_prefix(prefix.as_slice())
            .is_some_and(|id| id.len() == 32 && id.iter().all(u8::is_ascii_hexdigit));
        if ours && std::fs::remove_file(e.path()).is_ok() {
            removed += 1;
        }
    }
    removed
}

fn write_file(path: &Path, bytes: &[u8], mode: u32) -> std::io::Result<()> {
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)?;
    f.write_all(bytes)?;
    // After writing: a read-only mode must not stop the write.
    f.set_permissions(std::fs::Permissions::from_mode(mode))?;
    Ok(())
}

/// Sets a regular file's mode if it differs; symlinks and missing paths are
/// left alone. Returns whether it changed anything.
pub(crate) fn fix_mode(root: &Path, rel: &[u8], mode: u32) -> Result<bool, CheckpointError> {
    let full = root.join(rel_path(rel));
    match std::fs::symlink_metadata(&full) {
        Ok(m) if m.is_file() && m.permissions().mode() & 0o7777 != mode => {
            std::fs::set_permissions(&full, std::fs::Permissions::from_mode(mode))
                .map_err(|e| CheckpointError::io("cannot restore the mode of", &full, e))?;
            Ok(true)
        }
        _ => Ok(false),
    }
}

/// Empty directories below the directories holding `files` (a snapshot's
/// paths): each known directory is listed once; an unknown subdirectory is
/// recorded when it holds nothing but (recursively) empty directories. A
/// nested repository (`.git` inside) is never one.
pub(crate) fn empty_dirs<'a>(
    root: &Path,
    files: impl Iterator<Item = &'a [u8]>,
    listings: &mut super::listings::Listings,
) -> Vec<Vec<u8>> {
    let mut known: BTreeSet<Vec<u8>> = BTreeSet::new();
    known.insert(Vec::new());
    // Files come sorted: most share the folder of the one before.
    let mut last: &[u8] = &[];
    for f in files {
        let dir = f
            .iter()
            .rposition(|&b| b == b'/')
            .map_or(&f[..0], |i| &f[..i]);
        if dir == last {
            continue;
        }
        last = dir;
        let mut end = f.len();
        while let Some(i) = f[..end].iter().rposition(|&b| b == b'/') {
            if known.contains(&f[..i]) || !known.insert(f[..i].to_vec()) {
                break;
            }
            end = i;
        }
    }
    let mut out = Vec::new();
    for dir in &known {
        let full = root.join(rel_path(dir));
        let Some(names) = listings.subdirs(&full, dir) else {
            continue;
        };
        for name in names {
            if dir.is_empty() && name == b".git" {
                continue;
            }
            let mut rel = dir.clone();
            if !rel.is_empty() {
                rel.push(b'/');
            }
            rel.extend_from_slice(&name);
            if !known.contains(&rel) {
                collect_empty(&full.join(OsStr::from_bytes(&name)), rel, &mut out, 0);
            }
        }
    }
    out.sort();
    out
}

/// Records the leaves of a tree of empty directories; false if `path` holds
/// anything else.
fn collect_empty(path: &Path, rel: Vec<u8>, out: &mut Vec<Vec<u8>>, depth: usize) -> bool {
    let Ok(entries) = std::fs::read_dir(path) else {
        return false;
    };
    let mut subdirs = Vec::new();
    for e in entries.flatten() {
        if depth > 32 || !e.file_type().is_ok_and(|t| t.is_dir()) || e.file_name() == ".git" {
            return false;
        }
        subdirs.push(e);
    }
    let mut found = Vec::new();
    for e in subdirs {
        let mut r = rel.clone();
        r.push(b'/');
        r.extend_from_slice(e.file_name().as_bytes());
        if !collect_empty(&e.path(), r, &mut found, depth + 1) {
            return false;
        }
    }
    if found.is_empty() {
        out.push(rel);
    } else {
        out.extend(found);
    }
    true
}

/// Removes the empty directories at and below `rel` (bottom up), except
/// those in `keep`; anything else (a file, a symlink, a nested `.git`) stays.
/// Returns whether `rel` is gone.
pub(crate) fn prune_empty(root: &Path, rel: &[u8], keep: &BTreeSet<Vec<u8>>) -> bool {
    let full = root.join(rel_path(rel));
    match std::fs::symlink_metadata(&full) {
        Ok(m) if m.is_dir() => {}
        Ok(_) => return false,
        Err(_) => return true,
    }
    let Ok(entries) = std::fs::read_dir(&full) else {
        return false;
    };
    let mut empty = true;
    for e in entries.flatten() {
        let mut child = rel.to_vec();
        child.push(b'/');
        child.extend_from_slice(e.file_name().as_bytes());
        let is_dir = e.file_type().is_ok_and(|t| t.is_dir());
        if !is_dir || e.file_name() == ".git" || !prune_empty(root, &child, keep) {
            empty = false;
        }
    }
    empty && !keep.contains(rel) && std::fs::remove_dir(&full).is_ok()
}

/// Parses `git cat-file --batch` output: `<oid> <type> <size>\n<bytes>\n`.
pub(crate) fn parse_batch(out: &[u8]) -> Option<BTreeMap<String, &[u8]>> {
    let mut map = BTreeMap::new();
    let mut pos = 0;
    while pos < out.len() {
        let nl = pos + out[pos..].iter().position(|&b| b == b'\n')?;
        let header = std::str::from_utf8(&out[pos..nl]).ok()?;
        let mut it = header.split(' ');
        let (Some(oid), Some(_), Some(size)) = (it.next(), it.next(), it.next()) else {
            // "<name> missing": skip the line.
            pos = nl + 1;
            continue;
        };
        let size: usize = size.parse().ok()?;
        let start = nl + 1;
        let body = out.get(start..start + size)?;
        map.insert(oid.to_owned(), body);
        pos = start + size + 1;
    }
    Some(map)
}

/// One `-z` entry of `git ls-tree` or `git ls-files -s`: the words before
/// the tab (`mode type oid`, or `mode oid stage`) and the path after it.
pub(crate) fn split_entry(item: &[u8]) -> Option<(Vec<String>, &[u8])> {
    let tab = item.iter().position(|&b| b == b'\t')?;
    let words = String::from_utf8_lossy(&item[..tab])
        .split_whitespace()
        .map(str::to_owned)
        .collect();
    Some((words, &item[tab + 1..]))
}
