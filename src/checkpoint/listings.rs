//! The subdirectories of the work tree's directories, as last listed, so a
//! checkpoint lists again only the directories that changed: creating,
//! removing or renaming an entry changes a directory's modification time.
//! A listing is kept only when the directory had not changed for a while
//! before it was made, so a change in the same tick of the file system's
//! clock (or of a coarse one) is never taken for none.

use std::collections::HashMap;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::time::{Duration, SystemTime};

/// A directory changed less than this before its listing is listed again
/// next time (file system clocks tick in milliseconds, or 2 s on FAT).
const SETTLED: Duration = Duration::from_secs(3);

/// Directory (repo relative) -> its modification time and subdirectories.
#[derive(Debug, Default)]
pub(crate) struct Listings {
    dirs: HashMap<Vec<u8>, (SystemTime, Vec<Vec<u8>>)>,
}

impl Listings {
    /// The names of `full`'s subdirectories (`rel` in the tree), from the
    /// last listing while the directory has not changed since; else listed
    /// now. `None` when it cannot be read.
    pub(crate) fn subdirs(&mut self, full: &Path, rel: &[u8]) -> Option<Vec<Vec<u8>>> {
        let modified = std::fs::symlink_metadata(full)
            .ok()
            .filter(|m| m.is_dir())
            .and_then(|m| m.modified().ok());
        if let (Some(m), Some((seen, names))) = (modified, self.dirs.get(rel))
            && *seen == m
        {
            return Some(names.clone());
        }
        let listed_at = SystemTime::now();
        let names: Vec<Vec<u8>> = std::fs::read_dir(full)
            .ok()?
            .flatten()
            .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
            .map(|e| e.file_name().as_bytes().to_vec())
            .collect();
        match modified {
            Some(m) if listed_at.duration_since(m).is_ok_and(|age| age >= SETTLED) => {
                self.dirs.insert(rel.to_vec(), (m, names.clone()));
            }
            _ => {
                self.dirs.remove(rel);
            }
        }
        Some(names)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set_old(path: &Path) {
        let old = SystemTime::now() - Duration::from_secs(60);
        std::fs::File::open(path)
            .and_then(|f| f.set_modified(old))
            .expect("set mtime");
    }

    #[test]
    fn a_settled_directory_is_listed_once_and_again_when_it_changes() {
        let dir = tempfile::tempdir().expect("tempdir");
        let d = dir.path().join("d");
        std::fs::create_dir_all(d.join("a")).expect("mkdir");
        std::fs::write(d.join("file"), "x").expect("write");
        set_old(&d);
        let mut l = Listings::default();
        assert_eq!(l.subdirs(&d, b"d"), Some(vec![b"a".to_vec()]));
        assert!(l.dirs.contains_key(&b"d"[..]), "kept");
        // A new subdirectory changes the directory's time: listed again.
        std::fs::create_dir(d.join("b")).expect("mkdir");
        let mut names = l.subdirs(&d, b"d").expect("listed");
        names.sort();
        assert_eq!(names, vec![b"a".to_vec(), b"b".to_vec()]);
        assert!(!l.dirs.contains_key(&b"d"[..]), "just changed: not kept");
    }

    #[test]
    fn a_kept_listing_is_what_the_directory_holds_while_its_time_stands() {
        let dir = tempfile::tempdir().expect("tempdir");
        let d = dir.path().join("d");
        std::fs::create_dir_all(d.join("a")).expect("mkdir");
        set_old(&d);
        let mut l = Listings::default();
        l.subdirs(&d, b"d");
        // Proof that the kept one is used: it is changed behind the time.
        std::fs::create_dir(d.join("b")).expect("mkdir");
        set_old(&d);
        let old = std::fs::metadata(&d)
            .and_then(|m| m.modified())
            .expect("time");
        l.dirs.insert(b"d".to_vec(), (old, vec![b"a".to_vec()]));
        assert_eq!(l.subdirs(&d, b"d"), Some(vec![b"a".to_vec()]));
        // Gone: not read.
        std::fs::remove_dir_all(&d).expect("rm");
        assert_eq!(l.subdirs(&d, b"d"), None);
    }
}
