//! A snapshot kept for the next checkpoint. `--commit task` snapshots the
//! work tree when an attempt ends (its commit's tree); the next attempt's
//! checkpoint, moments later with no agent run between, would snapshot the
//! same tree again. Kept, it skips `git add -A` and `git write-tree`, the
//! bulk of a checkpoint's cost in a large tree.
//!
//! It is only reused when nothing spectr knows of can have changed the tree
//! since: it is young and no restore or merge-back ran (each of those drops
//! it). The files spectr itself writes between two attempts (the change's
//! tasks files: the completed status) are stamped, and those written since
//! are added to it again.

use super::meta::Meta;
use super::temp_index::TempIndex;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// Older than this, a kept snapshot is not used: a person may have been
/// editing while the run waited (on a question, a rate limit).
const FRESH_FOR: Duration = Duration::from_secs(2);

/// What identifies a file's version without reading it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Stamp {
    modified: Option<std::time::SystemTime>,
    len: u64,
    inode: u64,
}

fn stamp(path: &std::path::Path) -> Option<Stamp> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::symlink_metadata(path).ok()?;
    Some(Stamp {
        modified: m.modified().ok(),
        len: m.len(),
        inode: m.ino(),
    })
}

/// A snapshot's index and tree, and what must hold for it to stand for the
/// work tree later.
pub(crate) struct Kept {
    pub(crate) tmp: TempIndex,
    pub(crate) tree: String,
    pub(crate) nested: Vec<String>,
    /// Its metadata (real modes, empty folders) and notices, being
    /// collected on a thread of their own.
    pub(crate) meta: Option<std::thread::JoinHandle<(Meta, Vec<String>)>>,
    taken: Instant,
    guard: Vec<(PathBuf, Option<Stamp>)>,
    /// The user's index the snapshot was made from: (length, digest).
    pub(crate) seed: Option<(u64, u128)>,
}

impl std::fmt::Debug for Kept {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Kept").field("tree", &self.tree).finish()
    }
}

impl Kept {
    /// Stamps `guard` now; call before the snapshot is taken, so a write
    /// during it shows as a change.
    pub(crate) fn stamps(guard: &[PathBuf]) -> (Instant, Vec<(PathBuf, Option<Stamp>)>) {
        let taken = Instant::now();
        let stamps = guard.iter().map(|p| (p.clone(), stamp(p))).collect();
        (taken, stamps)
    }

    pub(crate) fn new(
        tmp: TempIndex,
        tree: String,
        nested: Vec<String>,
        (taken, guard): (Instant, Vec<(PathBuf, Option<Stamp>)>),
        meta: Option<std::thread::JoinHandle<(Meta, Vec<String>)>>,
        seed: Option<(u64, u128)>,
    ) -> Kept {
        Kept {
            tmp,
            tree,
            nested,
            meta,
            taken,
            guard,
            seed,
        }
    }

    /// Young enough to stand for the work tree (see the module docs).
    pub(crate) fn young(&self) -> bool {
        self.taken.elapsed() < FRESH_FOR
    }

    /// The guarded files written (or removed) since it was taken.
    pub(crate) fn changed(&self) -> Vec<PathBuf> {
        self.guard
            .iter()
            .filter(|(p, s)| stamp(p) != *s)
            .map(|(p, _)| p.clone())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_guarded_file_rewritten_or_removed_breaks_it() {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("tasks.jsonc");
        std::fs::write(&file, "a").expect("write");
        let (taken, stamps) = Kept::stamps(std::slice::from_ref(&file));
        let fresh = |stamps: Vec<(PathBuf, Option<Stamp>)>| Kept {
            tmp: TempIndex::for_tests(),
            tree: String::new(),
            nested: Vec::new(),
            meta: None,
            taken,
            guard: stamps,
            seed: None,
        };
        assert!(fresh(stamps.clone()).changed().is_empty());
        // An atomic rewrite (a new inode), as spectr writes tasks files.
        let next = dir.path().join("next");
        std::fs::write(&next, "bb").expect("write");
        std::fs::rename(&next, &file).expect("rename");
        assert_eq!(fresh(stamps.clone()).changed(), vec![file.clone()]);
        std::fs::remove_file(&file).expect("remove");
        assert_eq!(fresh(stamps).changed(), vec![file.clone()]);
        // A file absent then and now holds.
        let (_, none) = Kept::stamps(std::slice::from_ref(&file));
        assert!(fresh(none).changed().is_empty());
    }

    #[test]
    fn an_old_one_is_not_used() {
        let kept = Kept {
            tmp: TempIndex::for_tests(),
            tree: String::new(),
            nested: Vec::new(),
            meta: None,
            taken: Instant::now() - FRESH_FOR,
            guard: Vec::new(),
            seed: None,
        };
        assert!(!kept.young());
    }
}
