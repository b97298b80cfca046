//! Reads the entries of a git index file (versions 2 to 4) without running
//! git: the paths and modes a snapshot holds, for metadata (real modes, empty
//! directories) that git does not keep.

use std::borrow::Cow;

/// One index entry: its git mode (`0o100644`, `0o120000`, ...) and path
/// (borrowed from the index bytes but in version 4, whose paths are
/// prefix-compressed).
pub(crate) struct Entry<'a> {
    pub(crate) mode: u32,
    pub(crate) path: Cow<'a, [u8]>,
    /// The cached stat data (ctime, mtime, dev, ino, mode, uid, gid, size)
    /// git checked against the file: unchanged means the file is untouched.
    pub(crate) stat: [u8; 40],
    /// Where the entry starts in the index bytes.
    pub(crate) offset: usize,
    /// The merge stage (0: not in a conflict).
    pub(crate) stage: u8,
}

/// The entries of an index file, or `None` if the bytes are not an index this
/// reader knows (the caller then does without the metadata).
pub(crate) fn entries(bytes: &[u8], hash_len: usize) -> Option<Vec<Entry<'_>>> {
    parse(bytes, hash_len).map(|(entries, _)| entries)
}

/// The entries, and where the extensions after them start.
fn parse(bytes: &[u8], hash_len: usize) -> Option<(Vec<Entry<'_>>, usize)> {
    if bytes.len() < 12 || &bytes[..4] != b"DIRC" {
        return None;
    }
    let version = be32(bytes, 4)?;
    if !(2..=4).contains(&version) {
        return None;
    }
    let count = be32(bytes, 8)? as usize;
    let mut out = Vec::with_capacity(count.min(1 << 20));
    let mut pos = 12;
    let mut prev: Vec<u8> = Vec::new();
    // ctime, mtime (8 each), dev, ino, mode, uid, gid, size (4 each).
    let fixed = 40 + hash_len + 2;
    for _ in 0..count {
        let start = pos;
        let mode = be32(bytes, pos + 24)?;
        let stat: [u8; 40] = bytes.get(pos..pos + 40)?.try_into().ok()?;
        let flags = u16::from_be_bytes(
            bytes
                .get(pos + 40 + hash_len..pos + fixed)?
                .try_into()
                .ok()?,
        );
        pos += fixed;
        if version >= 3 && flags & 0x4000 != 0 {
            pos += 2;
        }
        let path = if version == 4 {
            let (strip, used) = varint(bytes.get(pos..)?)?;
            pos += used;
            let end = pos + memchr::memchr(0, bytes.get(pos..)?)?;
            let keep = prev.len().checked_sub(strip)?;
            prev.truncate(keep);
            prev.extend_from_slice(&bytes[pos..end]);
            pos = end + 1;
            Cow::Owned(prev.clone())
        } else {
            let end = pos + memchr::memchr(0, bytes.get(pos..)?)?;
            let p = &bytes[pos..end];
            // Entries are NUL-padded to a multiple of 8 bytes.
            let len = end - start;
            pos = start + (len + 8) / 8 * 8;
            Cow::Borrowed(p)
        };
        out.push(Entry {
            mode,
            path,
            stat,
            offset: start,
            stage: ((flags >> 12) & 3) as u8,
        });
    }
    Some((out, pos))
}

/// The entries of an index that holds them all: `None` for a split index
/// (its entries are in another file), a sparse one (an entry may stand for
/// a folder), or bytes this reader does not know.
pub(crate) fn whole(bytes: &[u8], hash_len: usize) -> Option<Vec<Entry<'_>>> {
    let (entries, mut pos) = parse(bytes, hash_len)?;
    let end = bytes.len().checked_sub(hash_len)?;
    while pos + 8 <= end {
        let signature = bytes.get(pos..pos + 4)?;
        if signature == b"link" || signature == b"sdir" {
            return None;
        }
        pos += 8 + usize::try_from(be32(bytes, pos + 4)?).ok()?;
    }
    (pos == end).then_some(entries)
}

/// The tree an index's cache (the `TREE` extension) holds for its root,
/// when valid: then the index's entries are exactly that tree's files.
pub(crate) fn cached_root(bytes: &[u8], hash_len: usize) -> Option<String> {
    let (_, mut pos) = parse(bytes, hash_len)?;
    let end = bytes.len().checked_sub(hash_len)?;
    while pos + 8 <= end {
        let size = usize::try_from(be32(bytes, pos + 4)?).ok()?;
        if bytes.get(pos..pos + 4)? == b"TREE" {
            // The root first: an empty path, `<entries> <subtrees>\n`, its id
            // (absent when invalid: entries -1).
            let data = bytes.get(pos + 8..pos + 8 + size)?.strip_prefix(b"\0")?;
            let nl = data.iter().position(|&b| b == b'\n')?;
            if data.first() == Some(&b'-') {
                return None;
            }
            return Some(super::object_id::hex(data.get(nl + 1..nl + 1 + hash_len)?));
        }
        pos += 8 + size;
    }
    None
}

/// What an entry says of its file besides the cached stat data: mode,
/// object id, flags (stage, assume-valid) and extended flags (skip-worktree,
/// intent-to-add). Two entries with equal identities stage the same thing.
pub(crate) fn identity<'a>(bytes: &'a [u8], e: &Entry, hash_len: usize) -> Option<(u32, &'a [u8])> {
    let flags_end = e.offset + 40 + hash_len + 2;
    let flags = u16::from_be_bytes(bytes.get(flags_end - 2..flags_end)?.try_into().ok()?);
    let end = if flags & 0x4000 != 0 {
        flags_end + 2
    } else {
        flags_end
    };
    Some((e.mode, bytes.get(e.offset + 40..end)?))
}

/// The stage-0 entries of the index `bytes` at `paths`: path -> (mode,
/// object id), as `git ls-files -s` lists them. `None` when the bytes are
/// not a whole index this reader knows: a split index (its entries are in
/// another file) or a sparse one (an entry may stand for a folder).
pub(crate) fn staged_at(
    bytes: &[u8],
    hash_len: usize,
    paths: &[String],
) -> Option<std::collections::BTreeMap<String, (u32, String)>> {
    let entries = whole(bytes, hash_len)?;
    let wanted: std::collections::BTreeSet<&[u8]> = paths.iter().map(|p| p.as_bytes()).collect();
    let mut staged = std::collections::BTreeMap::new();
    for e in entries {
        if e.stage == 0 && wanted.contains(&*e.path) {
            let oid = bytes.get(e.offset + 40..e.offset + 40 + hash_len)?;
            let path = String::from_utf8(e.path.into_owned()).ok()?;
            staged.insert(path, (e.mode, super::object_id::hex(oid)));
        }
    }
    Some(staged)
}

/// Makes git re-read the files of entries whose cached ctime is not older
/// than `written` (the index file's mtime, in seconds): a change in that same
/// second that kept size and mtime (`touch -d`, `cp -p`) shows in no stat git
/// compares at one-second precision, and git's racy check looks at mtime
/// only. Their cached ctime is zeroed, and so the checksum (git takes an
/// all-zero one as "not computed"). Returns how many were smudged and the
/// bytes to use: `bytes` themselves when none was (no copy of a big index
/// for nothing). `None` if the bytes are not an index this reader knows.
pub(crate) fn smudge_recent(
    bytes: &[u8],
    written: u64,
    hash_len: usize,
) -> Option<(usize, Cow<'_, [u8]>)> {
    let recent: Vec<usize> = entries(bytes, hash_len)?
        .iter()
        .filter(|e| u64::from(be32(&e.stat, 0).unwrap_or(u32::MAX)) >= written)
        .map(|e| e.offset)
        .collect();
    if recent.is_empty() {
        return Some((0, Cow::Borrowed(bytes)));
    }
    let mut copy = bytes.to_vec();
    for &at in &recent {
        copy.get_mut(at..at + 8)?.fill(0);
    }
    let len = copy.len();
    copy.get_mut(len.checked_sub(hash_len)?..)?.fill(0);
    Some((recent.len(), Cow::Owned(copy)))
}

/// Whether an entry of the index `bytes` is one of `paths` (relative to
/// the work tree) or lies under one. Bytes this reader does not know count
/// as holding one, the safe side for a caller that then takes them out.
pub(crate) fn holds_any(bytes: &[u8], hash_len: usize, paths: &[std::path::PathBuf]) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let raw = |p: &std::path::PathBuf| p.as_os_str().as_bytes().to_vec();
    // Before version 4 every path is stored whole: one that appears nowhere
    // in the bytes is in no entry, and the common case ends here.
    if be32(bytes, 4) != Some(4)
        && !paths
            .iter()
            .any(|p| memchr::memmem::find(bytes, &raw(p)).is_some())
    {
        return false;
    }
    let Some(entries) = entries(bytes, hash_len) else {
        return true;
    };
    entries.iter().any(|e| {
        paths.iter().any(|p| {
            let p = raw(p);
            e.path.starts_with(&p) && matches!(e.path.get(p.len()), None | Some(b'/'))
        })
    })
}

fn be32(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_be_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

/// git's offset varint (`varint.c`): 7 bits a byte, each continuation adds 1.
fn varint(b: &[u8]) -> Option<(usize, usize)> {
    let mut i = 0;
    let mut c = *b.first()?;
    let mut val = usize::from(c & 0x7f);
    while c & 0x80 != 0 {
        i += 1;
        c = *b.get(i)?;
        val = val.checked_add(1)?.checked_mul(128)? | usize::from(c & 0x7f);
    }
    Some((val, i + 1))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::process::Cmd;
    use std::time::Duration;

    /// Each entry's path and mode.
    fn index_of(version: &str) -> Vec<(Vec<u8>, u32)> {
        let bytes = index_bytes(version);
        let entries = entries(&bytes, 20).unwrap();
        entries.iter().map(|e| (e.path.to_vec(), e.mode)).collect()
    }

    /// `git` in `dir`, with no global config; it must succeed.
    fn git_in(dir: &std::path::Path, args: &[&str]) {
        let out = Cmd::new("git")
            .args(args)
            .current_dir(dir)
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .output(Duration::from_secs(60))
            .unwrap();
        assert!(out.success(), "{out:?}");
    }

    fn index_bytes(version: &str) -> Vec<u8> {
        let dir = tempfile::tempdir().unwrap();
        let git = |args: &[&str]| git_in(dir.path(), args);
        git(&["init", "-q"]);
        for p in ["a", "dir/b", "dir/bb", "dir/sub/c", "z z"] {
            let path = dir.path().join(p);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, p).unwrap();
        }
        git(&["update-index", "--index-version", version]);
        git(&["add", "-A"]);
        git(&["update-index", "--chmod=+x", "a"]);
        git(&["update-index", "--index-version", version]);
        std::fs::read(dir.path().join(".git/index")).unwrap()
    }

    #[test]
    fn holds_any_finds_paths_and_what_is_under_them_in_every_version() {
        use std::path::PathBuf;
        let p = |s: &str| vec![PathBuf::from(s)];
        for v in ["2", "3", "4"] {
            let bytes = index_bytes(v);
            assert!(holds_any(&bytes, 20, &p("dir")), "v{v}");
            assert!(holds_any(&bytes, 20, &p("dir/sub")), "v{v}");
            assert!(holds_any(&bytes, 20, &p("dir/bb")), "v{v}");
            assert!(holds_any(&bytes, 20, &p("z z")), "v{v}");
            // A path that is only a prefix of an entry's name holds nothing.
            assert!(!holds_any(&bytes, 20, &p("di")), "v{v}");
            assert!(!holds_any(&bytes, 20, &p("dir/s")), "v{v}");
            assert!(!holds_any(&bytes, 20, &p(".ralph")), "v{v}");
            assert!(!holds_any(&bytes, 20, &[]), "v{v}");
        }
        // Bytes that are no index count as holding one (the safe side).
        assert!(holds_any(b"DIRC\0\0\0\x04garbage", 20, &p("x")));
    }

    #[test]
    fn reads_versions_2_3_and_4() {
        for v in ["2", "3", "4"] {
            let e = index_of(v);
            let paths: Vec<_> = e
                .iter()
                .map(|(p, _)| String::from_utf8_lossy(p).into_owned())
                .collect();
            assert_eq!(paths, ["a", "dir/b", "dir/bb", "dir/sub/c", "z z"], "v{v}");
            assert_eq!(e[0].1, 0o100755);
            assert_eq!(e[1].1, 0o100644);
        }
    }

    #[test]
    fn smudges_only_entries_as_new_as_the_index() {
        let dir = tempfile::tempdir().unwrap();
        let git = |args: &[&str], index: &std::path::Path| {
            let out = Cmd::new("git")
                .args(args)
                .current_dir(dir.path())
                .env("GIT_CONFIG_GLOBAL", "/dev/null")
                .env("GIT_INDEX_FILE", index)
                .output(Duration::from_secs(60))
                .unwrap();
            assert!(out.success(), "{out:?}");
            out.stdout
        };
        let index = dir.path().join(".git/index");
        git(&["init", "-q"], &index);
        std::fs::write(dir.path().join("a"), "a").unwrap();
        std::fs::write(dir.path().join("b"), "b").unwrap();
        git(&["add", "-A"], &index);
        let bytes = std::fs::read(&index).unwrap();
        let ctime = |b: &[u8]| -> Vec<u32> {
            entries(b, 20)
                .unwrap()
                .iter()
                .map(|e| be32(&e.stat, 0).unwrap())
                .collect()
        };
        let newest = u64::from(*ctime(&bytes).iter().max().unwrap());

        let (count, old) = smudge_recent(&bytes, newest + 1, 20).unwrap();
        assert_eq!(count, 0);
        assert_eq!(&*old, &bytes[..], "nothing as new as the index: untouched");

        let (count, smudged) = smudge_recent(&bytes, newest, 20).unwrap();
        assert_eq!(count, 2);
        assert_eq!(ctime(&smudged), [0, 0]);
        assert!(smudged[smudged.len() - 20..].iter().all(|&b| b == 0));
        // git still reads it (an all-zero checksum means "not computed").
        let copy = dir.path().join("smudged");
        std::fs::write(&copy, &smudged).unwrap();
        assert_eq!(git(&["ls-files"], &copy), b"a\nb\n");
    }

    #[test]
    fn staged_entries_are_what_ls_files_lists_and_a_split_index_is_left_to_git() {
        for v in ["2", "3", "4"] {
            let bytes = index_bytes(v);
            let paths: Vec<String> = ["a", "dir/bb", "dir", "nope"].map(String::from).into();
            let staged = staged_at(&bytes, 20, &paths).unwrap();
            let found: Vec<(&str, u32)> =
                staged.iter().map(|(p, (m, _))| (p.as_str(), *m)).collect();
            // A folder is no entry: only files are listed, as ls-files does.
            assert_eq!(found, [("a", 0o100755), ("dir/bb", 0o100644)], "v{v}");
            // `git hash-object` of "dir/bb" (the file holds its own name).
            assert_eq!(
                staged["dir/bb"].1,
                crate::checkpoint::object_id::blob_id(b"dir/bb", 20).unwrap()
            );
        }
        let dir = tempfile::tempdir().unwrap();
        let git = |args: &[&str]| git_in(dir.path(), args);
        git(&["init", "-q"]);
        std::fs::write(dir.path().join("a"), "a").unwrap();
        git(&["add", "a"]);
        git(&["update-index", "--split-index"]);
        let split = std::fs::read(dir.path().join(".git/index")).unwrap();
        assert!(staged_at(&split, 20, &["a".to_owned()]).is_none());
        assert!(staged_at(b"DIRC\0\0\0\x02\0\0\0\x05short", 20, &[]).is_none());
    }

    #[test]
    fn garbage_is_refused_not_a_panic() {
        assert!(entries(b"DIRC\0\0\0\x02\0\0\0\x05short", 20).is_none());
        assert!(entries(b"nope", 20).is_none());
    }
}
