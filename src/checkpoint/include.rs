//! `.worktreeinclude`: the ignored files and folders a new lane gets from
//! the user's tree (`.env`, `node_modules/`, ...). The convention Claude
//! Code, Codex, Conductor and ccmanager share: gitignore syntax at the top of
//! the repository; only paths that are also ignored are brought (the rest is
//! in the lane already).
//!
//! Files are cloned (copy-on-write, where the filesystem offers it) or
//! copied, never hard-linked, so nothing a lane does reaches the user's
//! copy; modes and symlinks are kept. In the lane they are as ignored as in
//! the user's tree, and the lane's checkpointer excludes them besides, so
//! they are never snapshotted, reverted or merged back.

use super::error::CheckpointError;
use super::{Checkpointer, tree_io};
use std::collections::BTreeSet;
use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// At the top of the repository.
pub const INCLUDE_FILE: &str = ".worktreeinclude";

/// What [`Checkpointer::bring_included`] brought into a lane.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Included {
    /// Repo-relative, sorted; a folder ends in `/`.
    pub entries: Vec<String>,
    /// Entries the lane already had: left as they were.
    pub already_there: Vec<String>,
    pub files: u64,
    pub bytes: u64,
    /// Files cloned (copy-on-write) rather than copied.
    pub cloned: u64,
    pub symlinks: u64,
}

impl Checkpointer {
    /// The ignored files and folders of this work tree that
    /// `.worktreeinclude` names (repo-relative, a folder ending in `/`,
    /// sorted), never spectr's own; `None` without such a file.
    pub fn included_ignored(&self) -> Result<Option<Vec<Vec<u8>>>, CheckpointError> {
        let file = self.root.join(INCLUDE_FILE);
        if !file.is_file() {
            return Ok(None);
        }
        let mut from = OsString::from("--exclude-from=");
        from.push(&file);
        let named = self.ls_ignored(&from)?;
        let ignored = self.ls_ignored(OsStr::new("--exclude-standard"))?;
        let entries = intersect(&named, &ignored)
            .into_iter()
            .filter(|e| !self.is_spectrs(e))
            .collect();
        Ok(Some(entries))
    }

    /// Brings what [`Self::included_ignored`] lists into the lane whose
    /// work tree is `lane`, at the same paths. `None` without a
    /// `.worktreeinclude`.
    pub fn bring_included(&self, lane: &Path) -> Result<Option<Included>, CheckpointError> {
        let Some(entries) = self.included_ignored()? else {
            return Ok(None);
        };
        let mut done = Included::default();
        for entry in entries {
            let shown = String::from_utf8_lossy(&entry).into_owned();
            let rel = tree_io::rel_path(entry.strip_suffix(b"/").unwrap_or(&entry));
            let dst = lane.join(&rel);
            if std::fs::symlink_metadata(&dst).is_ok() {
                done.already_there.push(shown);
                continue;
            }
            make_parents(&self.root, lane, &rel)?;
            self.copy_tree(&self.root.join(&rel), &dst, &rel, &mut done)?;
            done.entries.push(shown);
        }
        Ok(Some(done))
    }

    /// `git ls-files` of the untracked files that `exclude` (an
    /// `--exclude*` option) says are ignored, a folder whose content all is
    /// shown as one entry. Reads only: no hook, filter or fsmonitor runs.
    fn ls_ignored(&self, exclude: &OsStr) -> Result<Vec<Vec<u8>>, CheckpointError> {
        let out = self
            .git
            .cmd(["ls-files", "-z", "--others", "--ignored", "--directory"])
            .arg(exclude)
            .run()?;
        Ok(out
            .split(|&b| b == 0)
            .filter(|p| !p.is_empty())
            .map(<[u8]>::to_vec)
            .collect())
    }

    /// spectr's own paths (this run's excludes, any change's `.ralph/`)
    /// are never brought into a lane.
    fn is_spectrs(&self, rel: &[u8]) -> bool {
        let rel = rel.strip_suffix(b"/").unwrap_or(rel);
        self.is_excluded(rel) || rel.split(|&b| b == b'/').any(|c| c == b".ralph")
    }

    /// Copies `src` (a file, symlink or folder) to `dst`, which must not
    /// exist; `rel` is its path in the work tree.
    fn copy_tree(
        &self,
        src: &Path,
        dst: &Path,
        rel: &Path,
        done: &mut Included,
    ) -> Result<(), CheckpointError> {
        if self.is_spectrs(rel.as_os_str().as_bytes()) {
            return Ok(());
        }
        let err = |what: &str, path: &Path, e| CheckpointError::io(what, path, e);
        let meta = std::fs::symlink_metadata(src).map_err(|e| err("cannot read", src, e))?;
        let kind = meta.file_type();
        let mode = meta.permissions().mode() & 0o7777;
        if kind.is_symlink() {
            let target = std::fs::read_link(src).map_err(|e| err("cannot read", src, e))?;
            std::os::unix::fs::symlink(&target, dst)
                .map_err(|e| err("cannot make the symlink", dst, e))?;
            done.symlinks += 1;
        } else if kind.is_file() {
            if clone_or_copy(src, dst, mode)
                .map_err(|e| err("cannot copy into the lane", dst, e))?
            {
                done.cloned += 1;
            }
            done.files += 1;
            done.bytes += meta.len();
        } else if kind.is_dir() {
            std::fs::create_dir(dst).map_err(|e| err("cannot create", dst, e))?;
            let mut names: Vec<OsString> = std::fs::read_dir(src)
                .map_err(|e| err("cannot read", src, e))?
                .map(|e| e.map(|e| e.file_name()))
                .collect::<Result<_, _>>()
                .map_err(|e| err("cannot read", src, e))?;
            names.sort();
            for name in names {
                self.copy_tree(&src.join(&name), &dst.join(&name), &rel.join(&name), done)?;
            }
            // Last: a read-only folder can still be filled first.
            std::fs::set_permissions(dst, std::fs::Permissions::from_mode(mode))
                .map_err(|e| err("cannot set the mode of", dst, e))?;
        }
        // Sockets, pipes and devices are not files to bring.
        Ok(())
    }
}

/// The outermost of `paths`: an entry inside a listed folder is dropped.
fn outermost(paths: &[Vec<u8>]) -> Vec<&[u8]> {
    let mut sorted: Vec<&[u8]> = paths.iter().map(Vec::as_slice).collect();
    sorted.sort();
    sorted.dedup();
    let mut out: Vec<&[u8]> = Vec::new();
    for p in sorted {
        // Sorted: a folder comes right before what is inside it.
        if out
            .last()
            .is_some_and(|last| last.ends_with(b"/") && p.starts_with(last))
        {
            continue;
        }
        out.push(p);
    }
    out
}

/// What is both named (by `.worktreeinclude`) and ignored, each listing
/// giving whole folders as `dir/`: a named entry inside (or equal to) an
/// ignored one, or an ignored entry inside a named folder.
fn intersect(named: &[Vec<u8>], ignored: &[Vec<u8>]) -> Vec<Vec<u8>> {
    let ignored = outermost(ignored);
    let mut out = BTreeSet::new();
    for n in outermost(named) {
        let inside =
            |outer: &[u8], p: &[u8]| outer == p || (outer.ends_with(b"/") && p.starts_with(outer));
        if ignored.iter().any(|i| inside(i, n)) {
            out.insert(n.to_vec());
        } else {
            out.extend(ignored.iter().filter(|i| inside(n, i)).map(|i| i.to_vec()));
        }
    }
    out.into_iter().collect()
}

/// Creates the folders above `rel` in `lane` that it lacks, with the
/// modes they have in `root`.
fn make_parents(root: &Path, lane: &Path, rel: &Path) -> Result<(), CheckpointError> {
    let mut missing: Vec<PathBuf> = Vec::new();
    let mut at = rel.parent();
    while let Some(p) = at.filter(|p| !p.as_os_str().is_empty()) {
        if lane.join(p).is_dir() {
            break;
        }
        missing.push(p.to_owned());
        at = p.parent();
    }
    for p in missing.iter().rev() {
        let dst = lane.join(p);
        std::fs::create_dir(&dst).map_err(|e| CheckpointError::io("cannot create", &dst, e))?;
        if let Ok(m) = std::fs::metadata(root.join(p)) {
            let _ = std::fs::set_permissions(&dst, m.permissions());
        }
    }
    Ok(())
}

/// A clone where the filesystem can share the blocks (Linux `FICLONE`:
/// btrfs, XFS, bcachefs), else a copy; never a hard link. `Ok(true)` when
/// cloned. The new file gets `mode` once it is written.
fn clone_or_copy(src: &Path, dst: &Path, mode: u32) -> std::io::Result<bool> {
    let mut from = File::open(src)?;
    let mut to = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(dst)?;
    let cloned = ficlone(&from, &to);
    if !cloned {
        std::io::copy(&mut from, &mut to)?;
    }
    to.set_permissions(std::fs::Permissions::from_mode(mode))?;
    Ok(cloned)
}

#[cfg(target_os = "linux")]
fn ficlone(from: &File, to: &File) -> bool {
    use std::os::fd::AsRawFd;
    /// `_IOW(0x94, 9, int)`.
    const FICLONE: u64 = 0x4004_9409;
    // SAFETY: both descriptors are open files we own for the whole call;
    // FICLONE reads the source descriptor and changes only the target file.
    let r = unsafe { nix::libc::ioctl(to.as_raw_fd(), FICLONE as _, from.as_raw_fd()) };
    r == 0
}

#[cfg(not(target_os = "linux"))]
fn ficlone(_from: &File, _to: &File) -> bool {
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(items: &[&str]) -> Vec<Vec<u8>> {
        items.iter().map(|s| s.as_bytes().to_vec()).collect()
    }

    #[test]
    fn named_and_ignored_meet_at_the_file_level() {
        let ignored = v(&[".env", "build/", "config/a.local", "node_modules/"]);
        // Whole entries named.
        assert_eq!(
            intersect(&v(&[".env", "node_modules/"]), &ignored),
            v(&[".env", "node_modules/"])
        );
        // A file inside an ignored folder (git also lists its folder).
        assert_eq!(
            intersect(
                &v(&["node_modules/x/", "node_modules/x/index.js"]),
                &ignored
            ),
            v(&["node_modules/x/"])
        );
        // A named folder that is not ignored as a whole: its ignored files.
        assert_eq!(
            intersect(&v(&["config/"]), &ignored),
            v(&["config/a.local"])
        );
        // Named but not ignored: already in the lane.
        assert!(intersect(&v(&["untracked_dir/", "notes.txt"]), &ignored).is_empty());
    }

    #[test]
    fn nested_entries_collapse_into_their_folder() {
        assert_eq!(
            outermost(&v(&["build/sub/", "build/", "a", "build/sub/x"])),
            [b"a".as_slice(), b"build/".as_slice()]
        );
    }
}
