//! The subdirectories of the work tree's directories, as last listed, so a
//! checkpoint lists again only the directories that changed: creating,
//! removing or renaming an entry changes a directory's modification time,
//! and so its change time, which no tool can set back (`touch -d`, `cp -a`
//! and `tar` set the modification time only). A listing is kept only when
//! the directory had not changed for a while before it was made, so a
//! change in the same tick of the file system's clock (or of a coarse one)
//! is never taken for none.

use std::collections::HashMap;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::time::{Duration, SystemTime};

/// A directory changed less than this before its listing is listed again
/// next time (file system clocks tick in milliseconds, or 2 s on FAT).
const SETTLED: Duration = Duration::from_secs(3);

/// What identifies a directory's version: its inode, modification and
/// change times (seconds, nanoseconds).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp {
    inode: u64,
    modified: (i64, i64),
    changed: (i64, i64),
}

impl Stamp {
    fn of(m: &std::fs::Metadata) -> Stamp {
        Stamp {
            inode: m.ino(),
            modified: (m.mtime(), m.mtime_nsec()),
            changed: (m.ctime(), m.ctime_nsec()),
        }
    }

    /// Unchanged for [`SETTLED`] before `at`.
    fn settled_at(&self, at: SystemTime) -> bool {
        let Ok(now) = at.duration_since(SystemTime::UNIX_EPOCH) else {
            return false;
        };
        let changed = Duration::new(
            u64::try_from(self.changed.0).unwrap_or(u64::MAX),
            u32::try_from(self.changed.1).unwrap_or(0),
        );
        now.checked_sub(changed).is_some_and(|age| age >= SETTLED)
    }
}

/// Directory (repo relative) -> its stamp and subdirectories.
#[derive(Debug, Default)]
pub(crate) struct Listings {
    dirs: HashMap<Vec<u8>, (Stamp, Vec<Vec<u8>>)>,
}

impl Listings {
    /// The names of `full`'s subdirectories (`rel` in the tree), from the
    /// last listing while the directory has not changed since; else listed
    /// now. `None` when it cannot be read.
    pub(crate) fn subdirs(&mut self, full: &Path, rel: &[u8]) -> Option<Vec<Vec<u8>>> {
        let stamp = std::fs::symlink_metadata(full)
            .ok()
            .filter(|m| m.is_dir())
            .map(|m| Stamp::of(&m));
        if let (Some(now), Some((seen, names))) = (stamp, self.dirs.get(rel))
            && *seen == now
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
        match stamp {
            Some(stamp) if stamp.settled_at(listed_at) => {
                self.dirs.insert(rel.to_vec(), (stamp, names.clone()));
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

    fn stamp(path: &Path) -> Stamp {
        Stamp::of(&std::fs::symlink_metadata(path).expect("stat"))
    }

    #[test]
    fn a_directory_just_changed_is_listed_again_every_time() {
        let dir = tempfile::tempdir().expect("tempdir");
        let d = dir.path().join("d");
        std::fs::create_dir_all(d.join("a")).expect("mkdir");
        std::fs::write(d.join("file"), "x").expect("write");
        let mut l = Listings::default();
        assert_eq!(l.subdirs(&d, b"d"), Some(vec![b"a".to_vec()]));
        assert!(!l.dirs.contains_key(&b"d"[..]), "just changed: not kept");
        std::fs::create_dir(d.join("b")).expect("mkdir");
        let mut names = l.subdirs(&d, b"d").expect("listed");
        names.sort();
        assert_eq!(names, vec![b"a".to_vec(), b"b".to_vec()]);
    }

    #[test]
    fn a_kept_listing_stands_while_the_stamp_does() {
        let dir = tempfile::tempdir().expect("tempdir");
        let d = dir.path().join("d");
        std::fs::create_dir_all(d.join("a")).expect("mkdir");
        let mut l = Listings::default();
        // As kept from a listing a while ago (the stamp as it is now).
        l.dirs
            .insert(b"d".to_vec(), (stamp(&d), vec![b"kept".to_vec()]));
        assert_eq!(l.subdirs(&d, b"d"), Some(vec![b"kept".to_vec()]));
        // A new folder, its modification time set back as `touch -d` or
        // `tar` would: the change time tells.
        let before = std::fs::metadata(&d)
            .and_then(|m| m.modified())
            .expect("time");
        std::fs::create_dir(d.join("b")).expect("mkdir");
        std::fs::File::open(&d)
            .and_then(|f| f.set_modified(before))
            .expect("set mtime");
        let mut names = l.subdirs(&d, b"d").expect("listed");
        names.sort();
        assert_eq!(names, vec![b"a".to_vec(), b"b".to_vec()]);
        // Gone: not read.
        std::fs::remove_dir_all(&d).expect("rm");
        assert_eq!(l.subdirs(&d, b"d"), None);
    }

    #[test]
    fn settled_means_unchanged_for_a_while() {
        let dir = tempfile::tempdir().expect("tempdir");
        let s = stamp(dir.path());
        assert!(!s.settled_at(SystemTime::now()));
        assert!(s.settled_at(SystemTime::now() + SETTLED + Duration::from_millis(10)));
    }
}
