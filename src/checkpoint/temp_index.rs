//! Our own temporary index (`GIT_INDEX_FILE`) for a snapshot: made in a
//! fresh folder of the git dir, seeded with the user's index when its cached
//! stats can be trusted. Below snapshot, restore and lanes, which all take
//! one; it uses none of them.

use super::error::CheckpointError;
use super::{Checkpointer, index_file, owner, tree_io};
use std::path::{Path, PathBuf};

/// Prefix of our temporary folders in the git dir.
pub(crate) const TEMP_PREFIX: &str = "spectr-ralph-";
/// An index file of our own (`GIT_INDEX_FILE`), deleted on drop. It lives in
/// a fresh directory because git rejects an empty file as an index; inside
/// the git dir so it is on the same file system and never in the work tree.
pub(crate) struct TempIndex {
    _dir: tempfile::TempDir,
    pub(crate) path: PathBuf,
}

/// Dates an index 1970: git then treats every entry as "racily clean" and
/// compares file contents instead of trusting cached stats.
pub(crate) fn distrust_stats(index: &Path) -> Result<(), CheckpointError> {
    std::fs::OpenOptions::new()
        .write(true)
        .open(index)
        .and_then(|f| f.set_modified(std::time::UNIX_EPOCH + std::time::Duration::from_secs(1)))
        .map_err(|e| CheckpointError::io("cannot prepare the temporary index", index, e))
}

/// Whether `needle` occurs in `hay`. Called on the whole index (1 MB at 10k
/// files) several times a checkpoint: a naive scan cost ~3 ms each there.
pub(crate) fn contains(hay: &[u8], needle: &[u8]) -> bool {
    !needle.is_empty() && memchr::memmem::find(hay, needle).is_some()
}

#[cfg(test)]
impl TempIndex {
    /// One in a folder of its own, for tests that only hold it.
    pub(crate) fn for_tests() -> TempIndex {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("index");
        TempIndex { _dir: dir, path }
    }
}

impl Checkpointer {
    /// A temporary index, seeded with the user's index bytes when given: its
    /// cached file stats let `git add -A` skip re-hashing unchanged files.
    /// When git may have converted those files on the user's `add` (line
    /// endings, filters), the stats are made untrustworthy (index dated
    /// 1970: every entry is "racily clean"), so git compares the raw bytes.
    pub(crate) fn temp_index(&self, seed: Option<&[u8]>) -> Result<TempIndex, CheckpointError> {
        self.temp_index_raw(seed)
    }

    /// [`Checkpointer::temp_index`] from an index written at `written`
    /// (seconds): entries git could wrongly trust are smudged
    /// ([`index_file::smudge_recent`]); with no date, or bytes we cannot
    /// read, no cached stat is trusted.
    pub(crate) fn temp_index_dated(
        &self,
        seed: Option<&[u8]>,
        written: Option<u64>,
    ) -> Result<TempIndex, CheckpointError> {
        let Some(bytes) = seed else {
            return self.temp_index_raw(None);
        };
        match written.and_then(|w| index_file::smudge_recent(bytes, w, self.hash_len)) {
            Some((_, seed)) => self.temp_index_raw(Some(&seed)),
            None => {
                let tmp = self.temp_index_raw(Some(bytes))?;
                distrust_stats(&tmp.path)?;
                Ok(tmp)
            }
        }
    }

    fn temp_index_raw(&self, seed: Option<&[u8]>) -> Result<TempIndex, CheckpointError> {
        // Named for its owner: a spectr killed right after making it leaves
        // a folder the next run knows for a leftover.
        let dir = tempfile::Builder::new()
            .prefix(&format!("{TEMP_PREFIX}{}", owner::name_part()))
            .tempdir_in(&self.git_dir)
            .map_err(|e| {
                CheckpointError::io("cannot create a temporary index in", &self.git_dir, e)
            })?;
        let path = dir.path().join("index");
        if let Some(bytes) = seed {
            let write = || -> std::io::Result<()> { std::fs::write(&path, bytes) };
            write().map_err(|e| CheckpointError::io("cannot copy the git index to", &path, e))?;
            if self.conversions_possible(bytes) {
                distrust_stats(&path)?;
            }
        }
        Ok(TempIndex { _dir: dir, path })
    }

    pub(crate) fn conversions_possible(&self, index: &[u8]) -> bool {
        self.conversions_configured
            || std::fs::metadata(self.common_dir.join("info/attributes")).is_ok_and(|m| m.len() > 0)
            || (contains(index, b".gitattributes") && self.attributes_convert(index))
    }

    /// Whether a tracked `.gitattributes` may ask for a conversion (any
    /// mention of one: `binary` or `-diff` alone converts nothing).
    fn attributes_convert(&self, index: &[u8]) -> bool {
        let Some(entries) = index_file::entries(index, self.hash_len) else {
            return true;
        };
        entries
            .iter()
            .filter(|e| *e.path == *b".gitattributes" || e.path.ends_with(b"/.gitattributes"))
            .any(|e| {
                let Ok(text) = std::fs::read(self.root.join(tree_io::rel_path(&e.path))) else {
                    return false;
                };
                [
                    &b"text"[..],
                    b"eol",
                    b"crlf",
                    b"filter",
                    b"ident",
                    b"encoding",
                ]
                .iter()
                .any(|w| contains(&text, w))
            })
    }
}
