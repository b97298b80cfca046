//! The user's index after a task's commit, written without git when it can
//! be: in a clean tree the commit's tree is the attempt's snapshot, and the
//! snapshot's own index (made from the user's, plus the task's files) is
//! then exactly what the user's index must become. Taking it saves reading
//! and rewriting a large index in a `git update-index` of its own.
//!
//! Only when nothing can be lost: the user's index is still the one the
//! snapshot was made from, the two differ nowhere but at the commit's paths
//! (where the user's entry is the branch's), no conversion could make the
//! snapshot's bytes differ from what `git add` would stage, and git's own
//! lock (`index.lock`) is ours while it is written. Else git does it, entry
//! by entry ([`Checkpointer::commit_task`]).

use super::Checkpointer;
use super::index_file::{self, Entry};
use super::snapshot::digest;
use super::tree_diff::{Diff, MergeEntry};
use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

/// The user's index replaced by the snapshot's: what was there, to put back
/// if the branch cannot move.
pub(crate) struct Adopted {
    old: Vec<u8>,
    new: (u64, u128),
    /// The new index is being stored already (see `diff_from_indexes`).
    pub(crate) storing: bool,
}

/// The user's index and the kept snapshot's, read when the first was found
/// to be exactly the branch's tree and the second exactly `tree`.
pub(crate) struct IndexPair {
    tree: String,
    theirs: Vec<u8>,
    ours: Vec<u8>,
}

impl std::fmt::Debug for IndexPair {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IndexPair")
            .field("tree", &self.tree)
            .finish()
    }
}

/// git's lock on the index, taken as git takes it (`O_EXCL`), our marker
/// naming us beside it (a kill -9 before the rename leaves a lock the next
/// run knows for a dead spectr's: [`Checkpointer::recover_own_index_lock`]);
/// removed on drop unless it became the index.
struct IndexLock {
    path: PathBuf,
    owner: PathBuf,
    file: Option<std::fs::File>,
    /// Renamed over the index: the name is free again, and a lock another
    /// git takes under it the next instant is not ours to remove.
    renamed: bool,
}

impl IndexLock {
    fn take(index: &Path, owner: &Path) -> Option<IndexLock> {
        let mut name = index.as_os_str().to_owned();
        name.push(".lock");
        let path = PathBuf::from(name);
        super::owner::write(owner);
        let file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path);
        let Ok(file) = file else {
            let _ = std::fs::remove_file(owner);
            return None;
        };
        Some(IndexLock {
            path,
            owner: owner.to_owned(),
            file: Some(file),
            renamed: false,
        })
    }

    /// Writes `bytes` and renames the lock over `index`.
    fn commit(mut self, bytes: &[u8], index: &Path) -> bool {
        let written = self
            .file
            .take()
            .is_some_and(|mut f| f.write_all(bytes).is_ok());
        self.renamed = written && std::fs::rename(&self.path, index).is_ok();
        self.renamed
    }
}

impl Drop for IndexLock {
    fn drop(&mut self) {
        if !self.renamed {
            let _ = std::fs::remove_file(&self.path);
        }
        let _ = std::fs::remove_file(&self.owner);
    }
}

impl Checkpointer {
    /// Makes the kept snapshot's index the user's (see the module docs),
    /// when the commit's `tree` is that snapshot's and `diff` (branch ->
    /// commit) holds every difference. `None`: nothing was written.
    pub(crate) fn index_adopt_kept(&self, tree: &str, diff: &[Diff]) -> Option<Adopted> {
        let pair = self.shared.index_pair.lock().ok()?.take();
        if let Some(pair) = pair.filter(|p| p.tree == tree) {
            return self.index_adopt_pair(pair);
        }
        let (ours, seed) = {
            let kept = self.shared.kept.lock().ok()?;
            let kept = kept.as_ref().filter(|k| k.tree == tree)?;
            (std::fs::read(&kept.tmp.path).ok()?, kept.seed?)
        };
        let index = self.user_index_path();
        let lock = IndexLock::take(&index, &self.lock_owner_path())?;
        let theirs = std::fs::read(&index).ok()?;
        if (theirs.len() as u64, digest(&theirs)) != seed
            || self.conversions_possible(&theirs)
            || !differ_only_by(&theirs, &ours, diff, self.hash_len)
        {
            return None;
        }
        let new = (ours.len() as u64, digest(&ours));
        lock.commit(&ours, &index).then_some(Adopted {
            old: theirs,
            new,
            storing: false,
        })
    }

    /// [`Checkpointer::index_adopt_kept`] for a pair that
    /// [`Checkpointer::diff_from_indexes`] read: the user's index must still
    /// be the bytes it read.
    fn index_adopt_pair(&self, pair: IndexPair) -> Option<Adopted> {
        let index = self.user_index_path();
        let lock = IndexLock::take(&index, &self.lock_owner_path())?;
        let theirs = std::fs::read(&index).ok()?;
        if theirs != pair.theirs || self.conversions_possible(&theirs) {
            return None;
        }
        let new = (pair.ours.len() as u64, digest(&pair.ours));
        lock.commit(&pair.ours, &index).then_some(Adopted {
            old: theirs,
            new,
            storing: true,
        })
    }

    /// The diff `base` -> `after` without git, when the user's index is
    /// exactly `base` (its cached root tree says so) and the kept snapshot's
    /// index is exactly `after` (it was written from it): the entries that
    /// differ. `None` when that is not known.
    pub(crate) fn diff_from_indexes(&self, base: &str, after: &str) -> Option<Vec<Diff>> {
        let ours = {
            let kept = self.shared.kept.lock().ok()?;
            let kept = kept.as_ref().filter(|k| k.tree == after)?;
            std::fs::read(&kept.tmp.path).ok()?
        };
        let theirs = self.read_user_index().ok()??;
        if index_file::cached_root(&theirs, self.hash_len).as_deref() != Some(base) {
            return None;
        }
        let entry = |e: Option<&Entry>, bytes| -> Option<Option<MergeEntry>> {
            let Some(e) = e else {
                return Some(None);
            };
            let (mode, id) = index_file::identity(bytes, e, self.hash_len)?;
            // In a conflict, or intent-to-add (in no tree): not a tree's.
            if e.stage != 0 || !plain(Some((mode, id)), self.hash_len) {
                return None;
            }
            let oid = hex_id(id, self.hash_len);
            Some(Some(MergeEntry { mode, oid }))
        };
        let mut diff = Vec::new();
        walk(&theirs, &ours, self.hash_len, &mut |path, was, now| {
            let same =
                |e: Option<&Entry>, bytes| e.map(|e| index_file::identity(bytes, e, self.hash_len));
            // Alike in both (most of them): in neither tree's diff.
            if was.is_some_and(|e| e.stage == 0) && same(was, &theirs) == same(now, &ours) {
                return Some(());
            }
            let (old, new) = (entry(was, &theirs)?, entry(now, &ours)?);
            if old != new {
                diff.push(Diff {
                    path: path.to_vec(),
                    old,
                    new,
                });
            }
            Some(())
        })?;
        // The user's index is the branch's tree and the snapshot's is the
        // commit's: it can become the user's as it is, while unchanged. The
        // next checkpoint stores it: stored now, beside the commit's making.
        self.store_index_bytes_soon(ours.clone());
        if let Ok(mut pair) = self.shared.index_pair.lock() {
            *pair = Some(IndexPair {
                tree: after.to_owned(),
                theirs,
                ours,
            });
        }
        Some(diff)
    }

    /// Puts back the index [`Checkpointer::index_adopt_kept`] replaced, if
    /// nobody wrote it since.
    pub(crate) fn index_unadopt(&self, adopted: &Adopted) {
        let index = self.user_index_path();
        let Some(lock) = IndexLock::take(&index, &self.lock_owner_path()) else {
            return;
        };
        if let Ok(now) = std::fs::read(&index)
            && (now.len() as u64, digest(&now)) == adopted.new
        {
            lock.commit(&adopted.old, &index);
        }
    }
}

/// What [`walk`] calls with a path and its entry in either index.
type EachPath<'a> = dyn FnMut(&[u8], Option<&Entry>, Option<&Entry>) -> Option<()> + 'a;

/// Calls `each` with every path of two indexes (both whole, of one
/// version) and its entry in each, in git's order; stops at its `None`.
fn walk(theirs: &[u8], ours: &[u8], hash_len: usize, each: &mut EachPath<'_>) -> Option<()> {
    let a = index_file::whole(theirs, hash_len)?;
    let b = index_file::whole(ours, hash_len)?;
    if theirs.get(4..8) != ours.get(4..8) {
        return None;
    }
    // Both lists are in git's order (by path): one walk side by side.
    let (mut a, mut b) = (a.iter().peekable(), b.iter().peekable());
    loop {
        let (was, now) = match (a.peek(), b.peek()) {
            (None, None) => return Some(()),
            (Some(x), Some(y)) if x.path == y.path => (a.next(), b.next()),
            (Some(x), Some(y)) if x.path < y.path => (a.next(), None),
            (Some(_), None) => (a.next(), None),
            _ => (None, b.next()),
        };
        let path = was.or(now).map(|e| &*e.path)?;
        each(path, was, now)?;
    }
}

/// Whether the index `ours` is the index `theirs` with `diff` staged: every
/// entry alike (but its cached stat data) except at `diff`'s paths, where
/// `theirs` holds the old side (or the new one already) and `ours` the new.
fn differ_only_by(theirs: &[u8], ours: &[u8], diff: &[Diff], hash_len: usize) -> bool {
    let changed: BTreeMap<&[u8], &Diff> = diff.iter().map(|d| (d.path.as_slice(), d)).collect();
    let identity = |e: Option<&Entry>, bytes| match e {
        None => Some(None),
        Some(e) => index_file::identity(bytes, e, hash_len).map(Some),
    };
    let mut check = |path: &[u8], was: Option<&Entry>, now: Option<&Entry>| -> Option<()> {
        // A path in a conflict (several stages): git's to settle.
        if was.is_some_and(|e| e.stage != 0) || now.is_some_and(|e| e.stage != 0) {
            return None;
        }
        let (was, now) = (identity(was, theirs)?, identity(now, ours)?);
        if was == now {
            return Some(());
        }
        let d = changed.get(path)?;
        let side = |e: Option<(u32, &[u8])>| e.map(|(m, id)| (m, hex_id(id, hash_len)));
        let entry = |e: &Option<MergeEntry>| e.as_ref().map(|e| (e.mode, e.oid.clone()));
        let alike = side(was) == entry(&d.old)
            && side(now) == entry(&d.new)
            && plain(was, hash_len)
            && plain(now, hash_len);
        alike.then_some(())
    };
    walk(theirs, ours, hash_len, &mut check).is_some()
}

/// The object id at the start of an entry's identity, in hex.
fn hex_id(id: &[u8], hash_len: usize) -> String {
    super::object_id::hex(id.get(..hash_len).unwrap_or(id))
}

/// An entry with no flags beyond its name's length (no stage, no
/// assume-valid, skip-worktree or intent-to-add): what git stages for a
/// file it adds.
fn plain(e: Option<(u32, &[u8])>, hash_len: usize) -> bool {
    e.is_none_or(|(_, id)| match id.get(hash_len..) {
        Some(&[hi, lo]) => u16::from_be_bytes([hi, lo]) & 0xf000 == 0,
        _ => false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lock_is_gits_own_protocol() {
        let dir = tempfile::tempdir().unwrap();
        let index = dir.path().join("index");
        let owner = dir.path().join("owner");
        std::fs::write(&index, "old").unwrap();
        let lock = IndexLock::take(&index, &owner).expect("free");
        assert!(owner.exists(), "named ours");
        assert!(
            IndexLock::take(&index, &dir.path().join("owner2")).is_none(),
            "held: a second git waits"
        );
        drop(lock);
        assert!(
            !dir.path().join("index.lock").exists(),
            "let go unused: removed"
        );
        assert!(!owner.exists());
        let lock = IndexLock::take(&index, &owner).expect("free again");
        assert!(lock.commit(b"new", &index));
        assert_eq!(std::fs::read(&index).unwrap(), b"new");
        assert!(!dir.path().join("index.lock").exists());
        assert!(!owner.exists());
        assert!(
            IndexLock::take(&index, &owner).is_some(),
            "free after the rename"
        );
    }
}
