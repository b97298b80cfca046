//! A lane's change merged back into the user's tree: planned as a three-way
//! merge (nothing written), then applied path by path; a merge cut short is
//! planned again or undone.

use super::error::CheckpointError;
use super::exclude;
use super::merge_attrs::MergeNote;
use super::meta::Meta;
use super::tree_diff::{Diff, GITLINK, MergeEntry, SYMLINK};
use super::{Checkpoint, Checkpointer, tree_io};
use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// Step 1 of a merge-back ([`Checkpointer::plan_merge`]).
// One plan per merge-back, moved a few times: its size does not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MergePlan {
    /// Nothing to merge (the lane changed nothing outside `skip`).
    Nothing,
    Clean {
        /// The user's tree before the merge (`revert` undoes the merge).
        checkpoint: Checkpoint,
        ours: String,
        merged: String,
        /// Sorted by path.
        changes: Vec<MergeChange>,
        /// What the user should know about how it merged (a merge driver
        /// from the repository's config not run).
        notes: Vec<MergeNote>,
    },
    /// Nothing will be written; the checkpoint ref created for it is deleted.
    Conflict {
        /// Sorted.
        files: Vec<String>,
        /// `git merge-tree`'s informational messages.
        messages: Vec<String>,
    },
}

/// One path the merge writes or removes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MergeChange {
    /// Repo-relative (lossy for a path that is not UTF-8).
    pub path: String,
    /// In the user's tree at the checkpoint (`None`: the merge adds it).
    pub old: Option<MergeEntry>,
    /// After the merge (`None`: the merge deletes it).
    pub new: Option<MergeEntry>,
    /// Permission bits a new regular file is written with (the user's own
    /// mode when only the content changes).
    pub file_mode: u32,
    raw: Vec<u8>,
}

/// A merge-back a crash cut short ([`Checkpointer::replan_merge`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CutShortMerge {
    /// Paths still holding what the merge found: to write.
    pub pending: Vec<MergeChange>,
    /// Paths the merge wrote before the crash.
    pub done: Vec<MergeChange>,
    /// Paths changed since otherwise (edited after the crash): a conflict.
    /// Sorted.
    pub changed: Vec<String>,
    /// `done` in reverse, to put the original content back.
    undo: Vec<MergeChange>,
    /// Every path the merge changes (where a write killed half way may have
    /// left its temporary file).
    paths: Vec<Vec<u8>>,
}

/// A resolve attempt's tree ([`Checkpointer::merge_with_markers`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Remerged {
    pub tree: String,
    /// Sorted; a text file holds markers, a binary one (`merge=binary`,
    /// `-merge`, binary content) the `ours` side; the rest of the tree holds
    /// what the merge rules made (a union file unioned).
    pub conflicted: Vec<String>,
    /// git's marker labels: the tree ids it was given.
    pub ours_label: String,
    pub theirs_label: String,
}

/// A three-way merge's result.
enum ThreeWay {
    Clean {
        merged: String,
        changes: Vec<MergeChange>,
        notes: Vec<MergeNote>,
    },
    Conflict {
        files: Vec<String>,
        messages: Vec<String>,
    },
}

/// Whether `path` is one of (or inside one of) the `skip` paths.
pub(super) fn is_skipped(skip: &[PathBuf], path: &[u8]) -> bool {
    let p = Path::new(OsStr::from_bytes(path));
    skip.iter().any(|s| p.starts_with(s))
}

impl Checkpointer {
    /// Merge-back, step 1 (writes nothing to the work tree): three-way merge
    /// of the lane's change (`base` -> `theirs`) onto this work tree's
    /// current content, checkpointed first under `checkpoint_ref`. Changes
    /// the lane made to paths in `skip` are left out.
    pub fn plan_merge(
        &self,
        base: &str,
        theirs: &str,
        checkpoint_ref: &str,
        skip: &[PathBuf],
    ) -> Result<MergePlan, CheckpointError> {
        let Some((theirs, skip)) = self.lane_change(base, theirs, skip)? else {
            return Ok(MergePlan::Nothing);
        };
        let (checkpoint, ours, meta) = self.create_with_tree(checkpoint_ref)?;
        match self.three_way(base, &ours, &theirs, &meta, &skip) {
            Ok(ThreeWay::Clean {
                merged,
                changes,
                notes,
            }) => Ok(MergePlan::Clean {
                checkpoint,
                ours,
                merged,
                changes,
                notes,
            }),
            Ok(ThreeWay::Conflict { files, messages }) => {
                self.drop(&checkpoint)?;
                Ok(MergePlan::Conflict { files, messages })
            }
            Err(e) => {
                let _ = self.drop(&checkpoint);
                Err(e)
            }
        }
    }

    /// The lane's change to merge: `theirs` with the paths in `skip` put
    /// back as in `base`, and `skip` relative to the root; `None` when
    /// nothing is left to merge.
    pub(super) fn lane_change(
        &self,
        base: &str,
        theirs: &str,
        skip: &[PathBuf],
    ) -> Result<Option<(String, Vec<PathBuf>)>, CheckpointError> {
        if base == theirs {
            return Ok(None);
        }
        let skip: Vec<PathBuf> = skip
            .iter()
            .filter_map(|p| exclude::repo_relative(&self.root, p))
            .collect();
        let lane_diff = self.diff_trees(base, theirs)?;
        let (skipped_diff, kept_diff): (Vec<&Diff>, Vec<&Diff>) =
            lane_diff.iter().partition(|d| is_skipped(&skip, &d.path));
        if kept_diff.is_empty() {
            return Ok(None);
        }
        let theirs = if skipped_diff.is_empty() {
            theirs.to_owned()
        } else {
            self.tree_with_base_at(theirs, &skipped_diff)?
        };
        Ok(Some((theirs, skip)))
    }

    /// `git merge-tree --write-tree --merge-base=<base> <ours> <theirs>`,
    /// and the paths the merge changes in `ours` (file modes from `meta`,
    /// the metadata of the snapshot whose tree is `ours`).
    fn three_way(
        &self,
        base: &str,
        ours: &str,
        theirs: &str,
        meta: &Meta,
        skip: &[PathBuf],
    ) -> Result<ThreeWay, CheckpointError> {
        let resolved = self.merge_tree(base, ours, theirs)?;
        if !resolved.conflicted.is_empty() {
            let mut messages = resolved.messages;
            messages.extend(resolved.notes.iter().map(MergeNote::to_string));
            return Ok(ThreeWay::Conflict {
                files: resolved.conflicted,
                messages,
            });
        }
        let (merged, notes) = (resolved.tree, resolved.notes);
        let changes = self.changes_between(ours, &merged, meta, skip)?;
        Ok(ThreeWay::Clean {
            merged,
            changes,
            notes,
        })
    }

    /// What writing `merged` over `ours` (the tree of a snapshot with
    /// metadata `meta`) changes in the work tree, sorted; spectr's own
    /// paths, `skip` and submodules left out.
    fn changes_between(
        &self,
        ours: &str,
        merged: &str,
        meta: &Meta,
        skip: &[PathBuf],
    ) -> Result<Vec<MergeChange>, CheckpointError> {
        let mut changes = Vec::new();
        for d in self.diff_trees(ours, merged)? {
            let gitlink = |e: &Option<MergeEntry>| e.as_ref().is_some_and(|e| e.mode == GITLINK);
            if gitlink(&d.old)
                || gitlink(&d.new)
                || self.is_excluded(&d.path)
                || is_skipped(skip, &d.path)
            {
                continue;
            }
            let file_mode = match (&d.old, &d.new) {
                (Some(o), Some(n)) if o.mode == n.mode => meta.mode_of(&d.path, n.mode),
                (_, Some(n)) if n.mode == 0o100755 => meta.default_modes.1,
                (_, Some(_)) => meta.default_modes.0,
                (_, None) => 0,
            };
            changes.push(MergeChange {
                path: String::from_utf8_lossy(&d.path).into_owned(),
                old: d.old,
                new: d.new,
                file_mode,
                raw: d.path,
            });
        }
        changes.sort_by(|a, b| a.raw.cmp(&b.raw));
        Ok(changes)
    }

    /// `git merge-tree --write-tree` of `base` -> `theirs` onto `ours`, the
    /// user's merge rules (`.gitattributes`, git's built-in drivers only)
    /// applied. Conflicted files hold markers labelled `ours` and `theirs`.
    pub(super) fn merge_tree(
        &self,
        base: &str,
        ours: &str,
        theirs: &str,
    ) -> Result<super::merge_attrs::Resolved, CheckpointError> {
        let base_arg = format!("--merge-base={base}");
        let mut cmd = self
            .git
            .cmd(["merge-tree", "--write-tree", "-z", &base_arg, ours, theirs])
            .c_locale();
        for (key, value) in self.merge_driver_overrides()? {
            cmd = cmd.config(key, value);
        }
        let out = cmd.output()?;
        let parsed = match out.status.code() {
            Some(0 | 1) => parse_merge_tree(&out.stdout),
            _ => None,
        };
        let Some(parsed) = parsed else {
            return Err(CheckpointError::Git {
                command: format!("git merge-tree --write-tree -z {base_arg} {ours} {theirs}"),
                code: out.status.code(),
                stderr: out.stderr_text(),
            });
        };
        self.apply_merge_attributes(base, ours, theirs, parsed)
    }

    /// The paths a merge of the lane's change (`base` -> `theirs`, without
    /// `skip`) would write: what a merge-back must hold its turn for.
    pub fn merge_paths(
        &self,
        base: &str,
        theirs: &str,
        skip: &[PathBuf],
    ) -> Result<Vec<String>, CheckpointError> {
        let Some((theirs, _)) = self.lane_change(base, theirs, skip)? else {
            return Ok(Vec::new());
        };
        let mut paths: Vec<String> = self
            .diff_trees(base, &theirs)?
            .into_iter()
            .filter(|d| !self.is_excluded(&d.path))
            .map(|d| String::from_utf8_lossy(&d.path).into_owned())
            .collect();
        paths.sort();
        paths.dedup();
        Ok(paths)
    }

    /// A resolve attempt's start: the lane's previous change (`base` ->
    /// `theirs`, without `skip`) merged onto `ours` (the lane's tree, fresh
    /// from the user's), conflicts left in as markers. None when the change
    /// holds nothing to merge.
    pub fn merge_with_markers(
        &self,
        base: &str,
        ours: &str,
        theirs: &str,
        skip: &[PathBuf],
    ) -> Result<Option<Remerged>, CheckpointError> {
        let skip: Vec<PathBuf> = skip.to_vec();
        let Some((theirs, _)) = self.lane_change(base, theirs, &skip)? else {
            return Ok(None);
        };
        let resolved = self.merge_tree(base, ours, &theirs)?;
        Ok(Some(Remerged {
            tree: resolved.tree,
            conflicted: resolved.conflicted,
            ours_label: ours.to_owned(),
            theirs_label: theirs,
        }))
    }

    /// A merge-back a crash cut short, planned again: the same three-way
    /// merge (`base` -> `theirs` onto the tree `original`, its checkpoint,
    /// held), each path it changes sorted by what the work tree holds now:
    /// still the original content (to write), already the merged one
    /// (written before the crash), or something else (edited since).
    pub fn replan_merge(
        &self,
        original: &Checkpoint,
        base: &str,
        theirs: &str,
        skip: &[PathBuf],
    ) -> Result<CutShortMerge, CheckpointError> {
        let mut cut = CutShortMerge::default();
        let Some((theirs, skip)) = self.lane_change(base, theirs, skip)? else {
            return Ok(cut);
        };
        let (ours, meta) = self.tree_and_meta(&original.commit)?;
        let changes = match self.three_way(base, &ours, &theirs, &meta, &skip)? {
            ThreeWay::Clean { changes, .. } => changes,
            ThreeWay::Conflict { files, .. } => {
                cut.changed = files;
                return Ok(cut);
            }
        };
        let blobs = self.blobs_of(&changes)?;
        let blob = |e: &Option<MergeEntry>| -> Result<Option<(u32, &[u8])>, CheckpointError> {
            match e {
                None => Ok(None),
                Some(e) => blobs
                    .get(&e.oid)
                    .map(|b| Some((e.mode, b.as_slice())))
                    .ok_or_else(|| CheckpointError::Unexpected {
                        command: "git cat-file --batch".into(),
                        output: format!("missing blob {}", e.oid),
                    }),
            }
        };
        // A file in the way of a path is fine where that file is one of the
        // merge's own paths (in the state checked).
        let files_in = |side: fn(&MergeChange) -> bool| -> BTreeSet<&[u8]> {
            changes
                .iter()
                .filter(|c| side(c))
                .map(|c| c.raw.as_slice())
                .collect()
        };
        let (in_ours, in_merged) = (files_in(|c| c.old.is_some()), files_in(|c| c.new.is_some()));
        let mut sorted: (Vec<usize>, Vec<usize>, Vec<usize>) = Default::default();
        for (i, c) in changes.iter().enumerate() {
            if self.holds(&c.raw, blob(&c.old)?, &in_ours) {
                sorted.0.push(i);
            } else if self.holds(&c.raw, blob(&c.new)?, &in_merged) {
                sorted.1.push(i);
            } else {
                sorted.2.push(i);
            }
        }
        cut.paths = changes.iter().map(|c| c.raw.clone()).collect();
        let pick = |ids: &[usize]| -> Vec<MergeChange> {
            ids.iter().map(|&i| changes[i].clone()).collect()
        };
        cut.pending = pick(&sorted.0);
        cut.done = pick(&sorted.1);
        cut.changed = sorted.2.iter().map(|&i| changes[i].path.clone()).collect();
        // Written back in reverse: the original content, with its mode.
        cut.undo = cut
            .done
            .iter()
            .map(|c| MergeChange {
                path: c.path.clone(),
                old: c.new.clone(),
                new: c.old.clone(),
                file_mode: c.old.as_ref().map_or(0, |o| meta.mode_of(&c.raw, o.mode)),
                raw: c.raw.clone(),
            })
            .collect();
        Ok(cut)
    }

    /// A checkpoint commit's tree and the metadata it recorded.
    fn tree_and_meta(&self, commit: &str) -> Result<(String, Meta), CheckpointError> {
        let text = self.cat_one(commit)?;
        let tree = std::str::from_utf8(&text)
            .ok()
            .and_then(|t| t.strip_prefix("tree "))
            .and_then(|t| t.split('\n').next())
            .map(str::to_owned)
            .ok_or_else(|| CheckpointError::Unexpected {
                command: format!("git cat-file --batch ({commit})"),
                output: "no tree".into(),
            })?;
        Ok((tree, Meta::parse_commit(&text)))
    }

    /// A resolve attempt in this work tree itself, just checkpointed as
    /// `checkpoint`: the previous change (`base` -> `theirs`, without
    /// `skip`) merged onto the checkpoint's tree and written into the work
    /// tree, conflicts left in as markers (every path checked first to hold
    /// what the checkpoint saw). None when the change holds nothing to
    /// merge.
    pub fn apply_with_markers(
        &self,
        checkpoint: &Checkpoint,
        base: &str,
        theirs: &str,
        skip: &[PathBuf],
    ) -> Result<Option<Remerged>, CheckpointError> {
        let Some((theirs, skip)) = self.lane_change(base, theirs, skip)? else {
            return Ok(None);
        };
        let (ours, meta) = self.tree_and_meta(&checkpoint.commit)?;
        let resolved = self.merge_tree(base, &ours, &theirs)?;
        let changes = self.changes_between(&ours, &resolved.tree, &meta, &skip)?;
        self.write_changes(&changes)?;
        Ok(Some(Remerged {
            tree: resolved.tree,
            conflicted: resolved.conflicted,
            ours_label: ours,
            theirs_label: theirs,
        }))
    }

    /// The plan writing what a cut-short merge still had to write, the
    /// work tree checkpointed first under `checkpoint_ref`.
    pub fn resume_plan(
        &self,
        cut: &CutShortMerge,
        checkpoint_ref: &str,
    ) -> Result<MergePlan, CheckpointError> {
        self.remove_cut_short_leftovers(cut);
        let (checkpoint, ours, _) = self.create_with_tree(checkpoint_ref)?;
        Ok(MergePlan::Clean {
            checkpoint,
            merged: ours.clone(),
            ours,
            changes: cut.pending.clone(),
            notes: Vec::new(),
        })
    }

    /// Puts back, path by path, the original content where a cut-short
    /// merge had written: nothing else in the tree is touched.
    pub fn undo_cut_short(&self, cut: &CutShortMerge) -> Result<Vec<String>, CheckpointError> {
        self.remove_cut_short_leftovers(cut);
        self.write_changes(&cut.undo)
    }

    /// The temporary files of the writes the crash cut short.
    fn remove_cut_short_leftovers(&self, cut: &CutShortMerge) {
        for p in &cut.paths {
            tree_io::remove_write_leftovers(&self.root, p);
        }
    }

    /// `theirs` with the given paths put back as they were in the base (the
    /// lane's changes there are not merged).
    fn tree_with_base_at(&self, theirs: &str, paths: &[&Diff]) -> Result<String, CheckpointError> {
        let zeros = "0".repeat(self.hash_len * 2);
        let entries: Vec<(Vec<u8>, u32, String)> = paths
            .iter()
            .map(|d| match &d.old {
                Some(e) => (d.path.clone(), e.mode, e.oid.clone()),
                None => (d.path.clone(), 0, zeros.clone()),
            })
            .collect();
        self.tree_with(theirs, &entries)
    }

    /// Merge-back, step 2: writes the plan's changes into the work tree
    /// (byte-exact, with modes; deletions included), after checking every
    /// path still holds what the checkpoint saw. Returns the paths written or
    /// removed, sorted.
    pub fn apply_merge(&self, plan: &MergePlan) -> Result<Vec<String>, CheckpointError> {
        let MergePlan::Clean { changes, .. } = plan else {
            return Ok(Vec::new());
        };
        self.write_changes(changes)
    }

    /// The blobs `changes` read or write, with one `git cat-file --batch`.
    fn blobs_of(
        &self,
        changes: &[MergeChange],
    ) -> Result<std::collections::BTreeMap<String, Vec<u8>>, CheckpointError> {
        let mut wanted: Vec<String> = changes
            .iter()
            .flat_map(|c| [&c.old, &c.new])
            .flatten()
            .map(|e| e.oid.clone())
            .collect();
        wanted.sort();
        wanted.dedup();
        self.cat_batch(&wanted)
    }

    /// Writes `changes` (each path checked first to hold its `old`).
    fn write_changes(&self, changes: &[MergeChange]) -> Result<Vec<String>, CheckpointError> {
        if changes.is_empty() {
            return Ok(Vec::new());
        }
        let blobs = self.blobs_of(changes)?;
        let blob = |oid: &str| {
            blobs
                .get(oid)
                .map(Vec::as_slice)
                .ok_or_else(|| CheckpointError::Unexpected {
                    command: "git cat-file --batch".into(),
                    output: format!("missing blob {oid}"),
                })
        };
        let removed: BTreeSet<&[u8]> = changes
            .iter()
            .filter(|c| c.old.is_some())
            .map(|c| c.raw.as_slice())
            .collect();
        // Check everything before writing anything.
        for c in changes {
            let expected = match &c.old {
                Some(e) => Some((e.mode, blob(&e.oid)?)),
                None => None,
            };
            if !self.holds(&c.raw, expected, &removed) {
                return Err(CheckpointError::ChangedDuringMerge {
                    path: c.path.clone(),
                });
            }
        }
        let mut done = Vec::new();
        for c in changes.iter().filter(|c| c.new.is_none()) {
            self.remove_added(&c.raw, &BTreeSet::new())?;
            done.push(c.path.clone());
        }
        for c in changes {
            let Some(new) = &c.new else { continue };
            let bytes = blob(&new.oid)?;
            let content = if new.mode == SYMLINK {
                tree_io::Content::Symlink { target: bytes }
            } else {
                tree_io::Content::File {
                    bytes,
                    mode: c.file_mode,
                }
            };
            let full = self.root.join(tree_io::rel_path(&c.raw));
            if std::fs::symlink_metadata(&full).is_ok_and(|m| m.is_dir()) {
                // Only an empty directory may be replaced (its files were
                // removed above); anything else there is not ours.
                std::fs::remove_dir(&full).map_err(|e| {
                    CheckpointError::io("cannot replace the directory (not empty) at", &full, e)
                })?;
            }
            tree_io::write_entry(&self.root, &c.raw, content)?;
            done.push(c.path.clone());
        }
        done.sort();
        done.dedup();
        Ok(done)
    }

    /// Whether `rel` holds `expected` (git mode and bytes), or nothing (a
    /// directory, or missing with no file in the way) when `None`.
    fn holds(&self, rel: &[u8], expected: Option<(u32, &[u8])>, removed: &BTreeSet<&[u8]>) -> bool {
        let full = self.root.join(tree_io::rel_path(rel));
        let meta = std::fs::symlink_metadata(&full);
        let Some((mode, bytes)) = expected else {
            // Every parent must be a directory, missing, or removed by the plan.
            let mut end = rel.len();
            while let Some(i) = rel[..end].iter().rposition(|&b| b == b'/') {
                let dir = &rel[..i];
                let m = std::fs::symlink_metadata(self.root.join(tree_io::rel_path(dir)));
                if m.is_ok_and(|m| !m.is_dir()) && !removed.contains(dir) {
                    return false;
                }
                end = i;
            }
            return match meta {
                Err(e) => e.kind() == std::io::ErrorKind::NotFound,
                Ok(m) => m.is_dir(),
            };
        };
        let Ok(m) = meta else { return false };
        if mode == SYMLINK {
            return m.is_symlink()
                && std::fs::read_link(&full).is_ok_and(|t| t.as_os_str().as_bytes() == bytes);
        }
        let executable = m.permissions().mode() & 0o100 != 0;
        m.is_file()
            && executable == (mode == 0o100755)
            && std::fs::read(&full).is_ok_and(|b| b == bytes)
    }
}

/// `git merge-tree --write-tree -z` output.
pub(super) struct MergeTreeOut {
    /// The merged tree (conflicted files with markers in it).
    pub(super) tree: String,
    /// Each conflicted path's stages: base, ours, theirs (`None`: absent).
    pub(super) conflicted: BTreeMap<Vec<u8>, [Option<MergeEntry>; 3]>,
    /// Informational messages, each with the paths it is about.
    pub(super) messages: Vec<(Vec<Vec<u8>>, String)>,
}

fn parse_merge_tree(out: &[u8]) -> Option<MergeTreeOut> {
    let mut fields = out.split(|&b| b == 0);
    let tree = String::from_utf8_lossy(fields.next()?).trim().to_owned();
    if tree.is_empty() {
        return None;
    }
    let mut conflicted: BTreeMap<Vec<u8>, [Option<MergeEntry>; 3]> = BTreeMap::new();
    // "<mode> <object> <stage>\t<path>" until an empty field.
    for f in fields.by_ref() {
        if f.is_empty() {
            break;
        }
        let tab = f.iter().position(|&b| b == b'\t')?;
        let head = std::str::from_utf8(&f[..tab]).ok()?;
        let mut parts = head.split(' ');
        let (mode, oid, stage) = (parts.next()?, parts.next()?, parts.next()?);
        let mode = u32::from_str_radix(mode, 8).ok()?;
        let stage: usize = stage.parse().ok()?;
        let slot = conflicted
            .entry(f[tab + 1..].to_vec())
            .or_default()
            .get_mut(stage.checked_sub(1)?)?;
        *slot = Some(MergeEntry {
            mode,
            oid: oid.to_owned(),
        });
    }
    // "<count>\0<path>...\0<type>\0<message>\0" per message.
    let mut messages = Vec::new();
    while let Some(count) = fields.next() {
        if count.is_empty() {
            continue;
        }
        let n: usize = std::str::from_utf8(count).ok()?.parse().ok()?;
        let mut paths = Vec::with_capacity(n);
        for _ in 0..n {
            paths.push(fields.next()?.to_vec());
        }
        let _kind = fields.next()?;
        let message = fields.next()?;
        messages.push((
            paths,
            String::from_utf8_lossy(message).trim_end().to_owned(),
        ));
    }
    Some(MergeTreeOut {
        tree,
        conflicted,
        messages,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merge_tree_output_with_conflicts_is_parsed() {
        let out = b"f21f\x00100644 de98 1\tf\x00100644 4f21 2\tf\x00100644 bdfb 3\tf\x00\x001\x00f\x00Auto-merging\x00Auto-merging f\n\x001\x00f\x00CONFLICT (contents)\x00CONFLICT (content): Merge conflict in f\n\x00";
        let out = parse_merge_tree(out).unwrap();
        assert_eq!(out.tree, "f21f");
        let stages = &out.conflicted[&b"f"[..]];
        let oids: Vec<_> = stages
            .iter()
            .map(|e| e.as_ref().unwrap().oid.as_str())
            .collect();
        assert_eq!(oids, ["de98", "4f21", "bdfb"]);
        assert_eq!(out.conflicted.len(), 1);
        let messages: Vec<_> = out.messages.iter().map(|(_, m)| m.as_str()).collect();
        assert_eq!(
            messages,
            ["Auto-merging f", "CONFLICT (content): Merge conflict in f"]
        );
        assert!(out.messages.iter().all(|(p, _)| p == &[b"f".to_vec()]));
    }

    #[test]
    fn clean_merge_tree_output_is_parsed() {
        let out = parse_merge_tree(b"47dd\x00").unwrap();
        assert_eq!(out.tree, "47dd");
        assert!(out.conflicted.is_empty() && out.messages.is_empty());
    }
}
