//! The user's merge rules in a merge-back: the `merge` attribute of each
//! path both sides changed, read from the user's tree (`.gitattributes`, as
//! `git merge` reads the work tree's), with git's built-in drivers applied:
//! `union`, `binary` (and `-merge`), `text`. A driver the repository's
//! config defines is a command an agent could have planted: never run, the
//! path is merged as text and the user told so.

use super::Checkpointer;
use super::error::CheckpointError;
use super::merge::MergeTreeOut;
use super::tree_diff::{GITLINK, MergeEntry, SYMLINK};
use std::collections::{BTreeMap, BTreeSet};

/// What a path's `merge` attribute asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Driver {
    Text,
    Union,
    /// Conflict whenever both sides changed it; ours kept.
    Binary,
    /// A name git would look up in the config: merged as text here.
    Command(String),
}

/// A three-way merge with the attributes applied.
pub(super) struct Resolved {
    pub(super) tree: String,
    /// Still conflicted, sorted (empty: clean).
    pub(super) conflicted: Vec<String>,
    pub(super) messages: Vec<String>,
    pub(super) notes: Vec<MergeNote>,
}

/// A path whose merge driver, a command from the repository's config, was
/// not run (merged as text instead).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MergeNote {
    pub driver: String,
    pub path: String,
}

impl std::fmt::Display for MergeNote {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}: its merge driver `{}` (.gitattributes) would run a command from the repository's config; spectr never runs one, so it is merged as text",
            self.path, self.driver
        )
    }
}

fn is_file(e: &Option<MergeEntry>) -> bool {
    e.as_ref()
        .is_some_and(|e| e.mode != GITLINK && e.mode != SYMLINK)
}

fn lossy(path: &[u8]) -> String {
    String::from_utf8_lossy(path).into_owned()
}

impl Checkpointer {
    /// Settings that keep `git merge-tree` from running any merge driver
    /// the repository's config defines (named by `.git/info/attributes`,
    /// which no attribute source hides, or by `merge.default`): each such
    /// driver's command becomes git's own text merge.
    pub(super) fn merge_driver_overrides(&self) -> Result<Vec<(String, String)>, CheckpointError> {
        let out = self
            .git
            .cmd(["config", "-z", "--get-regexp", r"^merge\..*\.driver$"])
            .output()?;
        let mut names = BTreeSet::new();
        // "<key>\n<value>\0" per entry; exit 1 when there is none.
        for entry in out.stdout.split(|&b| b == 0).filter(|e| !e.is_empty()) {
            let key = entry.split(|&b| b == b'\n').next().unwrap_or_default();
            let key = String::from_utf8_lossy(key);
            if let Some(name) = key
                .strip_prefix("merge.")
                .and_then(|k| k.strip_suffix(".driver"))
            {
                names.insert(name.to_owned());
            }
        }
        // Our own git (the path it was found at), quoted for `sh -c`.
        let program = self.git.program.to_string_lossy().replace('\'', r"'\''");
        let text = format!("'{program}' merge-file --diff-algorithm=histogram -q %A %O %B");
        let mut config = vec![("merge.default".to_owned(), "text".to_owned())];
        config.extend(
            names
                .into_iter()
                .map(|n| (format!("merge.{n}.driver"), text.clone())),
        );
        Ok(config)
    }

    /// `merge-tree`'s result (`base` -> `theirs` onto `ours`) with the
    /// `merge` attribute of each path both sides changed applied.
    pub(super) fn apply_merge_attributes(
        &self,
        base: &str,
        ours: &str,
        theirs: &str,
        out: MergeTreeOut,
    ) -> Result<Resolved, CheckpointError> {
        // Paths both sides changed to different content, merged cleanly.
        let theirs_diff: BTreeMap<Vec<u8>, Option<MergeEntry>> = self
            .diff_trees(base, theirs)?
            .into_iter()
            .map(|d| (d.path, d.new))
            .collect();
        let mut both: BTreeSet<Vec<u8>> = out.conflicted.keys().cloned().collect();
        // Each path's side in `ours`, for a driver that keeps it.
        let mut ours_side: BTreeMap<Vec<u8>, Option<MergeEntry>> = BTreeMap::new();
        for d in self.diff_trees(base, ours)? {
            if let Some(t) = theirs_diff.get(&d.path)
                && *t != d.new
                && (is_file(t) || is_file(&d.new))
                && !self.is_excluded(&d.path)
            {
                both.insert(d.path.clone());
                ours_side.insert(d.path, d.new);
            }
        }
        let mut resolved = Resolved {
            tree: out.tree,
            conflicted: Vec::new(),
            messages: Vec::new(),
            notes: Vec::new(),
        };
        let paths: Vec<Vec<u8>> = both.into_iter().collect();
        let drivers = self.merge_drivers(ours, &paths)?;
        let mut conflicted: BTreeSet<Vec<u8>> = out.conflicted.keys().cloned().collect();
        // What the drivers wrote, put in the tree whether or not other paths
        // still conflict: a resolve attempt starts from this tree, and the
        // text merge git did in their place left markers no one is told of.
        let mut driven = Vec::new();
        for (path, driver) in paths.iter().zip(&drivers) {
            let stages = out.conflicted.get(path);
            match driver {
                Driver::Text => {}
                Driver::Command(name) => resolved.notes.push(MergeNote {
                    driver: name.clone(),
                    path: lossy(path),
                }),
                Driver::Binary => {
                    if conflicted.insert(path.clone()) {
                        resolved.messages.push(format!(
                            "CONFLICT (binary): both sides changed {} (merge=binary or -merge in .gitattributes)",
                            lossy(path)
                        ));
                    }
                    // Ours kept, as git's binary driver does (no markers);
                    // a side that is no file is git's own conflict.
                    let (o, t) = match stages {
                        Some([_, o, t]) => (Some(o), Some(t)),
                        None => (ours_side.get(path), theirs_diff.get(path)),
                    };
                    if let (Some(o), Some(t)) = (o, t)
                        && is_file(o)
                        && is_file(t)
                        && let Some(o) = o
                    {
                        driven.push((path.clone(), o.mode, o.oid.clone()));
                    }
                }
                Driver::Union => {
                    if let Some(entry) = stages.and_then(union_modes) {
                        let [b, o, t] = stages.cloned().unwrap_or_default();
                        let oid = self.union_blob(b, o, t)?;
                        driven.push((path.clone(), entry, oid));
                        conflicted.remove(path);
                    }
                }
            }
        }
        let still = |paths: &[Vec<u8>]| paths.iter().any(|p| conflicted.contains(p));
        let mut messages: Vec<String> = out
            .messages
            .into_iter()
            .filter(|(paths, _)| paths.is_empty() || still(paths))
            .map(|(_, m)| m)
            .collect();
        messages.append(&mut resolved.messages);
        resolved.messages = messages;
        resolved.conflicted = conflicted.iter().map(|p| lossy(p)).collect();
        if !driven.is_empty() {
            resolved.tree = self.tree_with(&resolved.tree, &driven)?;
        }
        Ok(resolved)
    }

    /// The `merge` attribute of each path, from `tree`'s `.gitattributes`
    /// files (and `.git/info/attributes`, the user's global file).
    fn merge_drivers(&self, tree: &str, paths: &[Vec<u8>]) -> Result<Vec<Driver>, CheckpointError> {
        if paths.is_empty() {
            return Ok(Vec::new());
        }
        let mut input = Vec::new();
        for p in paths {
            input.extend_from_slice(p);
            input.push(0);
        }
        let source = format!("--source={tree}");
        let out = self
            .git
            .cmd(["check-attr", "-z", "--stdin", &source, "merge"])
            .user_config()
            .stdin(input)
            .run()?;
        // "<path>\0merge\0<value>\0" per path, in the order asked.
        let fields: Vec<&[u8]> = out.split(|&b| b == 0).collect();
        let mut by_path: BTreeMap<&[u8], Driver> = BTreeMap::new();
        for f in fields.chunks_exact(3) {
            let driver = match f[2] {
                b"unspecified" | b"set" | b"text" => Driver::Text,
                b"unset" | b"binary" => Driver::Binary,
                b"union" => Driver::Union,
                other => Driver::Command(lossy(other)),
            };
            by_path.insert(f[0], driver);
        }
        Ok(paths
            .iter()
            .map(|p| by_path.get(p.as_slice()).cloned().unwrap_or(Driver::Text))
            .collect())
    }

    /// Both sides' lines, no markers: `git merge-file --union` (git's own
    /// code, no driver), written as a blob. No base: an empty one.
    fn union_blob(
        &self,
        base: Option<MergeEntry>,
        ours: Option<MergeEntry>,
        theirs: Option<MergeEntry>,
    ) -> Result<String, CheckpointError> {
        let base = match base {
            Some(b) => b.oid,
            None => {
                let out = self
                    .git
                    .cmd(["hash-object", "-w", "-t", "blob", "--stdin"])
                    .stdin(Vec::new())
                    .run()?;
                String::from_utf8_lossy(&out).trim().to_owned()
            }
        };
        let (Some(ours), Some(theirs)) = (ours, theirs) else {
            return Err(CheckpointError::Unexpected {
                command: "git merge-file --union".into(),
                output: "a side is missing".into(),
            });
        };
        let out = self
            .git
            .cmd([
                "merge-file",
                "--object-id",
                "--union",
                "--diff-algorithm=histogram",
                &ours.oid,
                &base,
                &theirs.oid,
            ])
            .run()?;
        Ok(String::from_utf8_lossy(&out).trim().to_owned())
    }

    /// `tree` with the given paths set to (mode, blob); mode 0 with the
    /// all-zero id removes the path (`git update-index --index-info`).
    pub(super) fn tree_with(
        &self,
        tree: &str,
        entries: &[(Vec<u8>, u32, String)],
    ) -> Result<String, CheckpointError> {
        match self.edit_tree(tree, entries)? {
            Some(edited) => Ok(edited),
            None => self.tree_with_index(tree, entries),
        }
    }

    /// [`Self::tree_with`] through a temporary index: every case, at the
    /// cost of reading and writing the whole tree.
    pub(super) fn tree_with_index(
        &self,
        tree: &str,
        entries: &[(Vec<u8>, u32, String)],
    ) -> Result<String, CheckpointError> {
        let tmp = self.temp_index(None)?;
        self.git.cmd(["read-tree", tree]).index(&tmp.path).run()?;
        let mut input = Vec::new();
        for (path, mode, oid) in entries {
            input.extend_from_slice(format!("{mode:o} {oid}\t").as_bytes());
            input.extend_from_slice(path);
            input.push(0);
        }
        self.git
            .cmd(["update-index", "-z", "--index-info"])
            .index(&tmp.path)
            .stdin(input)
            .run()?;
        self.write_tree(&tmp)
    }
}

/// The mode a union of a content conflict gets (`None`: not a content
/// conflict of two regular files, or the modes conflict too).
fn union_modes(stages: &[Option<MergeEntry>; 3]) -> Option<u32> {
    let [base, ours, theirs] = stages;
    if !(is_file(ours) && is_file(theirs)) || base.is_some() && !is_file(base) {
        return None;
    }
    let (o, t) = (ours.as_ref()?.mode, theirs.as_ref()?.mode);
    match base.as_ref().map(|b| b.mode) {
        _ if o == t => Some(o),
        Some(b) if o == b => Some(t),
        Some(b) if t == b => Some(o),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn e(mode: u32) -> Option<MergeEntry> {
        Some(MergeEntry {
            mode,
            oid: "1".into(),
        })
    }

    #[test]
    fn a_union_takes_the_mode_the_sides_agree_on_or_the_one_that_changed() {
        assert_eq!(
            union_modes(&[e(0o100644), e(0o100644), e(0o100644)]),
            Some(0o100644)
        );
        assert_eq!(
            union_modes(&[e(0o100644), e(0o100755), e(0o100644)]),
            Some(0o100755)
        );
        assert_eq!(
            union_modes(&[e(0o100644), e(0o100644), e(0o100755)]),
            Some(0o100755)
        );
        assert_eq!(
            union_modes(&[None, e(0o100644), e(0o100644)]),
            Some(0o100644)
        );
        assert_eq!(union_modes(&[None, e(0o100644), e(0o100755)]), None);
        // Not two files: a symlink, a submodule, a side deleted.
        assert_eq!(union_modes(&[e(0o100644), e(SYMLINK), e(0o100644)]), None);
        assert_eq!(union_modes(&[e(0o100644), e(0o100644), e(GITLINK)]), None);
        assert_eq!(union_modes(&[e(0o100644), None, e(0o100644)]), None);
    }
}
