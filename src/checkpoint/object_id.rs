//! Blobs without git, where asking git would cost a process for a few bytes
//! or a slow compression of many: a blob's id is the SHA-1 of `blob <len>\0`
//! and its bytes, and a loose object is that, zlib-compressed, in
//! `objects/<2 hex>/<38 hex>`. Only for SHA-1 repositories; a SHA-256 one
//! gets `None` and asks git.

use sha1::{Digest, Sha1};
use std::io::Write;
use std::path::Path;

/// The id git gives a blob of `bytes` (as `git hash-object --no-filters`).
pub(crate) fn blob_id(bytes: &[u8], hash_len: usize) -> Option<String> {
    object_id("blob", bytes, hash_len)
}

/// The id of an object of `kind` holding `bytes` (SHA-1 only).
fn object_id(kind: &str, bytes: &[u8], hash_len: usize) -> Option<String> {
    if hash_len != 20 {
        return None;
    }
    let mut hasher = Sha1::new();
    hasher.update(format!("{kind} {}\0", bytes.len()).as_bytes());
    hasher.update(bytes);
    Some(hex(&hasher.finalize()))
}

/// Stores the user's index `bytes` as a loose blob in `objects` (a SHA-1
/// repository's) as git would: written to a temporary file beside it, then
/// renamed into place, read-only. Stored, not compressed (zlib's level 0,
/// as git's `core.looseCompression=0` writes): the index is a megabyte at
/// 10,000 files, stored at every checkpoint after a task's commit, and
/// unreachable once the checkpoint is dropped (git's gc prunes it);
/// compressing it cost ~4 ms of CPU a task. Returns its id.
pub(crate) fn write_blob(objects: &Path, bytes: &[u8]) -> std::io::Result<String> {
    write_loose(objects, "blob", bytes, flate2::Compression::none())
}

/// The bytes of a commit of `tree` on `parents` by `author` and
/// `committer` (each `Name <email> <seconds> <zone>`), with `message` as
/// given (a parent named twice written once): what `git commit-tree` writes
/// for them (no encoding header: UTF-8).
pub(crate) fn commit_bytes(
    tree: &str,
    parents: &[String],
    author: &str,
    committer: &str,
    message: &str,
) -> Vec<u8> {
    let mut text = format!("tree {tree}\n");
    // A parent named twice is written once, as git does.
    for (i, p) in parents.iter().enumerate() {
        if !parents[..i].contains(p) {
            text.push_str(&format!("parent {p}\n"));
        }
    }
    text.push_str(&format!(
        "author {author}\ncommitter {committer}\n\n{message}"
    ));
    text.into_bytes()
}

/// Stores `bytes` as a loose object of `kind` (see [`write_blob`]),
/// compressed fast.
pub(crate) fn write_object(objects: &Path, kind: &str, bytes: &[u8]) -> std::io::Result<String> {
    write_loose(objects, kind, bytes, flate2::Compression::fast())
}

fn write_loose(
    objects: &Path,
    kind: &str,
    bytes: &[u8],
    level: flate2::Compression,
) -> std::io::Result<String> {
    use std::os::unix::fs::PermissionsExt;
    let Some(id) = object_id(kind, bytes, 20) else {
        return Err(std::io::Error::other("not a SHA-1 repository"));
    };
    let dir = objects.join(&id[..2]);
    let path = dir.join(&id[2..]);
    if path.is_file() {
        // Freshened as git does, so a prune running now keeps it.
        let _ =
            std::fs::File::open(&path).and_then(|f| f.set_modified(std::time::SystemTime::now()));
        return Ok(id);
    }
    std::fs::create_dir_all(&dir)?;
    let tmp = tempfile::Builder::new()
        .prefix("tmp_obj_")
        .tempfile_in(&dir)?;
    let mut z = flate2::write::ZlibEncoder::new(tmp, level);
    z.write_all(format!("{kind} {}\0", bytes.len()).as_bytes())?;
    z.write_all(bytes)?;
    let tmp = z.finish()?;
    tmp.as_file()
        .set_permissions(std::fs::Permissions::from_mode(0o444))?;
    match tmp.persist_noclobber(&path) {
        Ok(_) => Ok(id),
        // Written meanwhile by another: the same bytes.
        Err(e) if path.is_file() => {
            drop(e);
            Ok(id)
        }
        Err(e) => Err(e.error),
    }
}

/// Lower-case hex, as git prints ids.
pub(crate) fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        out.push(char::from(DIGITS[usize::from(b >> 4)]));
        out.push(char::from(DIGITS[usize::from(b & 0xf)]));
    }
    out
}

/// The bytes of a lower-case hex id; `None` if it is not one.
pub(crate) fn unhex(id: &str) -> Option<Vec<u8>> {
    if !id.len().is_multiple_of(2) {
        return None;
    }
    (0..id.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(id.get(i..i + 2)?, 16).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::process::Cmd;
    use std::time::Duration;

    fn git(dir: &Path, args: &[&str]) -> Vec<u8> {
        let out = Cmd::new("git")
            .args(args)
            .current_dir(dir)
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .output(Duration::from_secs(60))
            .expect("git");
        assert!(out.success(), "{out:?}");
        out.stdout
    }

    #[test]
    fn hex_and_back() {
        let id = "0123456789abcdef00ff";
        assert_eq!(unhex(id).map(|b| hex(&b)).as_deref(), Some(id));
        assert_eq!(unhex("abc"), None);
        assert_eq!(unhex("zz"), None);
    }

    #[test]
    fn a_blob_id_is_gits() {
        let dir = tempfile::tempdir().unwrap();
        for bytes in [
            &b""[..],
            b"a",
            b"{ \"version\": 1 }\n",
            &[0, 159, 255, 10][..],
        ] {
            let file = dir.path().join("bytes");
            std::fs::write(&file, bytes).unwrap();
            let out = git(dir.path(), &["hash-object", "--no-filters", "bytes"]);
            let id = String::from_utf8_lossy(&out).trim().to_owned();
            assert_eq!(
                blob_id(bytes, 20).as_deref(),
                Some(id.as_str()),
                "{bytes:?}"
            );
        }
        assert_eq!(blob_id(b"a", 32), None, "SHA-256: git is asked");
    }

    #[test]
    fn a_written_commit_is_the_one_git_commit_tree_makes() {
        let dir = tempfile::tempdir().unwrap();
        git(dir.path(), &["init", "-q"]);
        let objects = dir.path().join(".git/objects");
        let tree = String::from_utf8(git(dir.path(), &["write-tree"])).unwrap();
        let tree = tree.trim();
        let (author, committer) = ("Ann <ann@x.invalid>", "Bob Bee <bob@x.invalid>");
        let (author_date, committer_date) = ("1795940000 +0530", "1795940001 -0230");
        let by_git = |parents: &[String], message: &str| {
            let mut cmd = Cmd::new("git").args(["commit-tree", "--no-gpg-sign"]);
            for p in parents {
                cmd = cmd.args(["-p", p]);
            }
            let out = cmd
                .args(["-F", "-", tree])
                .current_dir(dir.path())
                .env("GIT_CONFIG_GLOBAL", "/dev/null")
                .env("GIT_AUTHOR_NAME", "Ann")
                .env("GIT_AUTHOR_EMAIL", "ann@x.invalid")
                .env("GIT_COMMITTER_NAME", "Bob Bee")
                .env("GIT_COMMITTER_EMAIL", "bob@x.invalid")
                .env("GIT_AUTHOR_DATE", author_date)
                .env("GIT_COMMITTER_DATE", committer_date)
                .input(message.as_bytes().to_vec())
                .output(Duration::from_secs(60))
                .unwrap();
            assert!(out.success(), "{out:?}");
            String::from_utf8_lossy(&out.stdout).trim().to_owned()
        };
        let first = by_git(&[], "spectr ralph: checkpoint\n\nref: r\n");
        for (parents, message) in [
            (vec![], "spectr ralph: checkpoint\n\nref: r\n"),
            (vec![first.clone()], "one line, no newline at its end"),
            (vec![first.clone(), first.clone()], "\n\nblank lines\n\n\n"),
            (
                vec![first.clone()],
                "1.1 Ünïcode ✓ 🦀\n\nSpectr-Task: 1.1\n",
            ),
        ] {
            let bytes = commit_bytes(
                tree,
                &parents,
                &format!("{author} {author_date}"),
                &format!("{committer} {committer_date}"),
                message,
            );
            let id = write_object(&objects, "commit", &bytes).unwrap();
            assert_eq!(id, by_git(&parents, message), "{message:?}");
        }
        git(dir.path(), &["fsck", "--strict"]);
    }

    #[test]
    fn a_written_blob_is_one_git_reads() {
        let dir = tempfile::tempdir().unwrap();
        git(dir.path(), &["init", "-q"]);
        let objects = dir.path().join(".git/objects");
        let bytes: Vec<u8> = (0..100_000u32).flat_map(|i| i.to_le_bytes()).collect();
        let id = write_blob(&objects, &bytes).unwrap();
        assert_eq!(git(dir.path(), &["cat-file", "blob", &id]), bytes);
        git(dir.path(), &["fsck", "--strict"]);
        // Written again: the same object, nothing left behind.
        assert_eq!(write_blob(&objects, &bytes).unwrap(), id);
        let leftovers = std::fs::read_dir(objects.join(&id[..2])).unwrap().count();
        assert_eq!(leftovers, 1);
    }
}
