//! Putting a few paths into a tree without an index: only the trees along
//! the changed paths are read (one `git cat-file --batch`) and written (one
//! `git mktree --batch` per depth), so the cost follows the change, not the
//! repository's size (a temporary index reads and writes every entry).
//!
//! Anything out of the ordinary (a file becoming a folder or the other way
//! round, a path with a newline) is left to the index, which handles it.

use super::Checkpointer;
use super::error::CheckpointError;
use super::tree_diff::{GITLINK, is_tree_mode};
use std::collections::BTreeMap;

/// A folder's entries: name -> (mode, object id).
type Entries = BTreeMap<Vec<u8>, (u32, String)>;

/// One folder along the changed paths.
struct Folder {
    entries: Entries,
    /// It was a tree in the original (else it is new).
    existed: bool,
    changed: bool,
}

impl Checkpointer {
    /// `tree` with `edits` (path, mode, object; mode 0 removes) put in, as
    /// `git update-index --index-info` on its index would: folders made as
    /// needed, and dropped when nothing is left in them. `None` when the
    /// edits need the index (see the module docs).
    pub(super) fn edit_tree(
        &self,
        tree: &str,
        edits: &[(Vec<u8>, u32, String)],
    ) -> Result<Option<String>, CheckpointError> {
        if edits.is_empty() {
            return Ok(Some(tree.to_owned()));
        }
        if edits.iter().any(|(p, _, _)| !plain_path(p)) || nested_edits(edits) {
            return Ok(None);
        }
        let mut folders: BTreeMap<Vec<u8>, Folder> = BTreeMap::new();
        for (path, _, _) in edits {
            for dir in parents(path) {
                folders.entry(dir.to_vec()).or_insert(Folder {
                    entries: Entries::new(),
                    existed: false,
                    changed: false,
                });
            }
        }
        if !self.read_folders(tree, &mut folders)? {
            return Ok(None);
        }
        for (path, mode, oid) in edits {
            let (dir, name) = split_last(path);
            let Some(folder) = folders.get_mut(dir) else {
                return Ok(None);
            };
            let current = folder.entries.get(name).map(|(m, _)| *m);
            if current.is_some_and(is_tree_mode) {
                // A folder where a file goes (or is removed): the index's job.
                return Ok(None);
            }
            if *mode == 0 {
                if current.is_some() {
                    folder.entries.remove(name);
                    folder.changed = true;
                }
            } else if folder.entries.get(name) != Some(&(*mode, oid.clone())) {
                folder.entries.insert(name.to_vec(), (*mode, oid.clone()));
                folder.changed = true;
            }
        }
        // Deepest first: a folder's tree is known before its parent's.
        let mut by_depth: BTreeMap<usize, Vec<Vec<u8>>> = BTreeMap::new();
        for dir in folders.keys() {
            let depth = if dir.is_empty() {
                0
            } else {
                1 + dir.iter().filter(|b| **b == b'/').count()
            };
            by_depth.entry(depth).or_default().push(dir.clone());
        }
        // The root last, below.
        by_depth.remove(&0);
        for (_, dirs) in by_depth.into_iter().rev() {
            let write: Vec<&Vec<u8>> = dirs
                .iter()
                .filter(|d| {
                    folders
                        .get(*d)
                        .is_some_and(|f| f.changed && !f.entries.is_empty())
                })
                .collect();
            let made = self.make_trees(write.iter().map(|d| &folders[*d].entries))?;
            let mut made = made.into_iter();
            for dir in &dirs {
                let folder = &folders[dir];
                if !folder.changed {
                    continue;
                }
                let new = if folder.entries.is_empty() {
                    None
                } else {
                    made.next()
                };
                let existed = folder.existed;
                let (parent, name) = split_last(dir);
                let Some(up) = folders.get_mut(parent) else {
                    return Ok(None);
                };
                match new {
                    Some(oid) => {
                        up.entries.insert(name.to_vec(), (0o040000, oid));
                        up.changed = true;
                    }
                    None if existed => {
                        up.entries.remove(name);
                        up.changed = true;
                    }
                    None => {}
                }
            }
        }
        let Some(root) = folders.get(&Vec::new()) else {
            return Ok(None);
        };
        if !root.changed {
            return Ok(Some(tree.to_owned()));
        }
        if root.entries.is_empty() {
            return Ok(Some(self.empty_tree().to_owned()));
        }
        let mut made = self.make_trees(std::iter::once(&root.entries))?;
        Ok(made.pop())
    }

    /// Reads each folder's entries from `tree`; a folder it does not hold
    /// starts empty. `false` when one of them is not a folder there.
    fn read_folders(
        &self,
        tree: &str,
        folders: &mut BTreeMap<Vec<u8>, Folder>,
    ) -> Result<bool, CheckpointError> {
        let mut input = Vec::new();
        for dir in folders.keys() {
            input.extend_from_slice(tree.as_bytes());
            if !dir.is_empty() {
                input.push(b':');
                input.extend_from_slice(dir);
            }
            input.push(b'\n');
        }
        let out = self
            .git
            .cmd(["cat-file", "--batch", "--buffer"])
            .stdin(input)
            .run()?;
        let unexpected = || CheckpointError::Unexpected {
            command: "git cat-file --batch (folders)".into(),
            output: String::from_utf8_lossy(&out[..out.len().min(200)]).into_owned(),
        };
        let mut pos = 0;
        for folder in folders.values_mut() {
            let nl = pos
                + out[pos..]
                    .iter()
                    .position(|&b| b == b'\n')
                    .ok_or_else(unexpected)?;
            let header = String::from_utf8_lossy(&out[pos..nl]).into_owned();
            pos = nl + 1;
            if header.ends_with(" missing") {
                continue;
            }
            let words: Vec<&str> = header.split(' ').collect();
            let [_, kind, size] = words.as_slice() else {
                return Err(unexpected());
            };
            let size: usize = size.parse().map_err(|_| unexpected())?;
            let body = out.get(pos..pos + size).ok_or_else(unexpected)?;
            pos += size + 1;
            if *kind != "tree" {
                return Ok(false);
            }
            folder.entries = parse_tree(body, self.hash_len).ok_or_else(unexpected)?;
            folder.existed = true;
        }
        Ok(true)
    }

    /// Writes each folder's tree (one `git mktree --batch`), in order.
    fn make_trees<'a>(
        &self,
        folders: impl Iterator<Item = &'a Entries>,
    ) -> Result<Vec<String>, CheckpointError> {
        let mut input = Vec::new();
        let mut count = 0;
        for entries in folders {
            for (name, (mode, oid)) in entries {
                let kind = if is_tree_mode(*mode) {
                    "tree"
                } else if *mode == GITLINK {
                    "commit"
                } else {
                    "blob"
                };
                input.extend_from_slice(format!("{mode:o} {kind} {oid}\t").as_bytes());
                input.extend_from_slice(name);
                input.push(0);
            }
            // An empty entry ends a tree.
            input.push(0);
            count += 1;
        }
        if count == 0 {
            return Ok(Vec::new());
        }
        let out = self
            .git
            .cmd(["mktree", "-z", "--missing", "--batch"])
            .stdin(input)
            .run()?;
        let made: Vec<String> = String::from_utf8_lossy(&out)
            .lines()
            .map(|l| l.trim().to_owned())
            .filter(|l| !l.is_empty())
            .collect();
        if made.len() != count {
            return Err(CheckpointError::Unexpected {
                command: "git mktree -z --missing --batch".into(),
                output: format!("{} trees for {count}", made.len()),
            });
        }
        Ok(made)
    }

    /// The empty tree's id (found at discovery, for this repository's
    /// hash).
    pub(super) fn empty_tree(&self) -> &str {
        self.git.attr_source.as_deref().unwrap_or_default()
    }
}

/// A path git keeps as given: no empty, `.` or `..` component, no newline
/// (the batch protocol's separator), not absolute.
fn plain_path(path: &[u8]) -> bool {
    !path.is_empty()
        && !path.contains(&b'\n')
        && !path.contains(&0)
        && path
            .split(|b| *b == b'/')
            .all(|c| !c.is_empty() && c != b"." && c != b"..")
}

/// Whether one edited path is a folder of another (a file and a folder at
/// once: the index decides).
fn nested_edits(edits: &[(Vec<u8>, u32, String)]) -> bool {
    let mut paths: Vec<&[u8]> = edits.iter().map(|(p, _, _)| p.as_slice()).collect();
    paths.sort_unstable();
    paths.windows(2).any(|w| {
        w[1].len() > w[0].len() && w[1].starts_with(w[0]) && w[1][w[0].len()] == b'/'
            || w[0] == w[1]
    })
}

/// Every folder above `path`, the root (empty) first.
fn parents(path: &[u8]) -> impl Iterator<Item = &[u8]> {
    std::iter::once(&path[..0]).chain(
        path.iter()
            .enumerate()
            .filter(|(_, b)| **b == b'/')
            .map(move |(i, _)| &path[..i]),
    )
}

/// (folder, name) of a path; the folder of a top-level name is empty.
fn split_last(path: &[u8]) -> (&[u8], &[u8]) {
    match path.iter().rposition(|b| *b == b'/') {
        Some(i) => (&path[..i], &path[i + 1..]),
        None => (&path[..0], path),
    }
}

/// A tree object's entries (`<mode> <name>\0<raw id>` each).
fn parse_tree(body: &[u8], hash_len: usize) -> Option<Entries> {
    let mut entries = Entries::new();
    let mut pos = 0;
    while pos < body.len() {
        let space = pos + body[pos..].iter().position(|b| *b == b' ')?;
        let mode = u32::from_str_radix(std::str::from_utf8(&body[pos..space]).ok()?, 8).ok()?;
        let nul = space + 1 + body[space + 1..].iter().position(|b| *b == 0)?;
        let name = body[space + 1..nul].to_vec();
        let raw = body.get(nul + 1..nul + 1 + hash_len)?;
        let oid: String = raw.iter().map(|b| format!("{b:02x}")).collect();
        entries.insert(name, (mode, oid));
        pos = nul + 1 + hash_len;
    }
    Some(entries)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::time::Duration;
    fn git(dir: &std::path::Path, args: &[&str]) -> String {
        let out = crate::process::Cmd::new("git")
            .args(args)
            .current_dir(dir)
            .env_remove("GIT_DIR")
            .env_remove("GIT_WORK_TREE")
            .output(Duration::from_secs(60))
            .expect("git runs");
        assert!(out.success(), "git {args:?}");
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    }

    /// Any edits (files set, files removed, folders made and emptied, modes
    /// changed) give the tree the index gives.
    #[test]
    fn edits_give_the_tree_the_index_gives() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let root = tmp.path();
        git(root, &["init", "-q"]);
        for p in ["a/x", "a/y", "a/b/z", "c", "d/e/f/g", "h i/j"] {
            let path = root.join(p);
            std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
            std::fs::write(&path, p).expect("write");
        }
        git(root, &["add", "-A"]);
        let tree = git(root, &["write-tree"]);
        let blob = git(root, &["hash-object", "-w", "c"]);
        let cp = Checkpointer::discover(root, Duration::from_secs(30))
            .expect("discover")
            .expect("a repository");
        let paths = [
            "a/x",
            "a/y",
            "a/b/z",
            "a/b/n",
            "c",
            "n",
            "d/e/f/g",
            "d/e/n",
            "h i/j",
            "new/deep/f",
            "a/b",
            "d",
        ];
        let edit = (0..paths.len(), 0..4u8);
        let direct_used = std::cell::Cell::new(0);
        let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig {
            cases: 48,
            ..ProptestConfig::default()
        });
        runner
            .run(&proptest::collection::vec(edit, 1..6), |picked| {
                let zeros = "0".repeat(40);
                let mut seen = std::collections::BTreeSet::new();
                let edits: Vec<(Vec<u8>, u32, String)> = picked
                    .iter()
                    .filter(|(i, _)| seen.insert(*i))
                    .map(|(i, how)| {
                        let (mode, oid) = match how {
                            0 => (0, zeros.clone()),
                            1 => (0o100755, blob.clone()),
                            _ => (0o100644, blob.clone()),
                        };
                        (paths[*i].as_bytes().to_vec(), mode, oid)
                    })
                    .collect();
                let by_index = cp.tree_with_index(&tree, &edits).expect("index");
                let direct = cp.tree_with(&tree, &edits).expect("direct");
                if cp.edit_tree(&tree, &edits).expect("edit").is_some() {
                    direct_used.set(direct_used.get() + 1);
                }
                prop_assert_eq!(direct, by_index, "edits {:?}", picked);
                Ok(())
            })
            .expect("the same trees");
        assert!(direct_used.get() > 20, "{} direct", direct_used.get());
    }

    #[test]
    fn parents_lists_the_root_and_each_folder() {
        let got: Vec<&[u8]> = parents(b"a/b/c.txt").collect();
        assert_eq!(got, vec![&b""[..], b"a", b"a/b"]);
        let top: Vec<&[u8]> = parents(b"c.txt").collect();
        assert_eq!(top, vec![&b""[..]]);
    }

    #[test]
    fn a_file_and_a_folder_at_once_is_left_to_the_index() {
        let e = |p: &str| (p.as_bytes().to_vec(), 0o100644, "0".repeat(40));
        assert!(nested_edits(&[e("a"), e("a/b")]));
        assert!(nested_edits(&[e("a"), e("a")]));
        assert!(!nested_edits(&[e("a"), e("ab/c"), e("a.b")]));
        assert!(!plain_path(b"a//b"));
        assert!(!plain_path(b"a/../b"));
        assert!(!plain_path(b"a\nb"));
        assert!(plain_path(b"a/b c/d"));
    }
}
