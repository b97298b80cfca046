//! Branches, tags and the stash read from git's ref files (loose files under
//! `refs/`, then `packed-refs`), as `git for-each-ref` would list them: a
//! checkpoint's probe without a git process. Only where the files say it
//! all plainly: a symbolic ref, a name git would not list, a file that is
//! not one id, or the reftable format, and git is asked instead.

use super::snapshot::is_object_id;
use std::collections::BTreeMap;
use std::path::Path;

/// Every ref under `prefixes` (each ending in `/`) and the exact refs
/// `names`, name -> id, loose files over packed ones; `None`: ask git.
pub(crate) fn read_refs(
    common_dir: &Path,
    prefixes: &[&str],
    names: &[&str],
) -> Option<BTreeMap<String, String>> {
    if common_dir.join("reftable").exists() {
        return None;
    }
    let wanted = |name: &str| prefixes.iter().any(|p| name.starts_with(p)) || names.contains(&name);
    let mut refs = BTreeMap::new();
    // `git pack-refs` writes the packed file, then deletes the loose ones:
    // read across that, a ref would be in neither. The packed file must be
    // the same one after the loose ones were read.
    let packed = common_dir.join("packed-refs");
    let before = stamp(&packed)?;
    match std::fs::read_to_string(&packed) {
        Ok(text) => {
            for line in text.lines() {
                if line.starts_with('#') || line.starts_with('^') || line.is_empty() {
                    continue;
                }
                let (id, name) = line.split_once(' ')?;
                if !is_object_id(id) || !plain_name(name) {
                    return None;
                }
                if wanted(name) {
                    refs.insert(name.to_owned(), id.to_owned());
                }
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(_) => return None,
    }
    for prefix in prefixes {
        let dir = prefix.trim_end_matches('/');
        loose_under(common_dir, dir, &mut refs)?;
    }
    for name in names {
        if name.contains("..") || !name.starts_with("refs/") {
            return None;
        }
        match std::fs::read_to_string(common_dir.join(name)) {
            Ok(text) => {
                let id = text.strip_suffix('\n').unwrap_or(&text);
                if !is_object_id(id) {
                    return None;
                }
                refs.insert((*name).to_owned(), id.to_owned());
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            // A folder where a ref would be (`refs/stash/…`): git's to say.
            Err(_) => return None,
        }
    }
    (stamp(&packed)? == before).then_some(refs)
}

/// A file's inode, modification time and length.
type FileStamp = (u64, i64, i64, u64);

/// The packed file's identity (`Some(None)`: there is none).
fn stamp(path: &Path) -> Option<Option<FileStamp>> {
    use std::os::unix::fs::MetadataExt;
    match std::fs::metadata(path) {
        Ok(m) => Some(Some((m.ino(), m.mtime(), m.mtime_nsec(), m.len()))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Some(None),
        Err(_) => None,
    }
}

/// The loose refs in the folder `rel` (say `refs/heads`), recursively.
fn loose_under(common_dir: &Path, rel: &str, refs: &mut BTreeMap<String, String>) -> Option<()> {
    let entries = match std::fs::read_dir(common_dir.join(rel)) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Some(()),
        Err(_) => return None,
    };
    for entry in entries {
        let entry = entry.ok()?;
        let name = entry.file_name().into_string().ok()?;
        // A git's lock, in a transaction now or left by a killed one: git
        // lists neither.
        if name.ends_with(".lock") {
            continue;
        }
        let full = format!("{rel}/{name}");
        if !plain_name(&full) {
            return None;
        }
        let kind = entry.file_type().ok()?;
        if kind.is_dir() {
            loose_under(common_dir, &full, refs)?;
        } else if kind.is_file() {
            let text = std::fs::read_to_string(entry.path()).ok()?;
            let id = text.strip_suffix('\n').unwrap_or(&text);
            // `ref: …` (symbolic) or anything else: git's to read.
            if !is_object_id(id) {
                return None;
            }
            refs.insert(full, id.to_owned());
        } else {
            return None;
        }
    }
    Some(())
}

/// A ref name git lists as it is: printable ASCII but for the characters
/// and sequences git's ref name rules forbid (anything else: ask git).
fn plain_name(name: &str) -> bool {
    name.bytes()
        .all(|b| b.is_ascii_graphic() && !b"~^:?*[\\".contains(&b))
        && !name.contains("..")
        && !name.contains("@{")
        && !name.contains("//")
        && !name.ends_with('/')
        && !name.ends_with('.')
        && name
            .split('/')
            .all(|c| !c.starts_with('.') && !c.ends_with(".lock"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checkpoint::test_git as git;

    fn listed_by_git(dir: &Path) -> BTreeMap<String, String> {
        git(
            dir,
            &[
                "for-each-ref",
                "--format=%(objectname) %(refname)",
                "refs/heads/",
                "refs/tags/",
                "refs/stash",
            ],
        )
        .lines()
        .filter_map(|l| l.split_once(' '))
        .map(|(id, name)| (name.to_owned(), id.to_owned()))
        .collect()
    }

    fn read(dir: &Path) -> Option<BTreeMap<String, String>> {
        read_refs(
            &dir.join(".git"),
            &["refs/heads/", "refs/tags/"],
            &["refs/stash"],
        )
    }

    #[test]
    fn loose_and_packed_refs_are_what_git_lists() {
        let dir = tempfile::tempdir().expect("tempdir");
        let d = dir.path();
        git(d, &["init", "-q", "-b", "main"]);
        std::fs::write(d.join("a"), "a").expect("write");
        git(d, &["add", "a"]);
        git(d, &["commit", "-qm", "one"]);
        git(d, &["branch", "feature/deep/x"]);
        git(d, &["tag", "v1"]);
        git(d, &["tag", "-a", "-m", "t", "v2"]);
        git(d, &["pack-refs", "--all"]);
        // After packing: a loose one over its packed self, a new loose one.
        std::fs::write(d.join("a"), "b").expect("write");
        git(d, &["commit", "-qam", "two"]);
        git(d, &["branch", "later"]);
        std::fs::write(d.join("a"), "c").expect("write");
        git(d, &["stash", "-q"]);
        // A lock left behind is listed by neither.
        std::fs::write(d.join(".git/refs/heads/main.lock"), "x").expect("write");
        assert_eq!(read(d), Some(listed_by_git(d)));
        assert!(read(d).is_some_and(|r| r.contains_key("refs/stash")));

        // A symbolic ref: git's to read.
        std::fs::write(d.join(".git/refs/heads/alias"), "ref: refs/heads/main\n").expect("write");
        assert_eq!(read(d), None);
    }

    #[test]
    fn names_git_would_not_list_as_they_are_go_to_git() {
        for bad in [
            "refs/heads/a..b",
            "refs/heads/.x",
            "refs/heads/x.",
            "refs/heads/a b",
        ] {
            assert!(!plain_name(bad), "{bad}");
        }
        assert!(plain_name("refs/heads/feature/x-1_2"));
    }
}
