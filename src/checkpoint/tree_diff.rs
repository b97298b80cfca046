//! Paths differing between two git trees, with both sides: what a lane's
//! reset and a merge-back both start from.

use super::Checkpointer;
use super::error::CheckpointError;

/// A blob in a tree: git mode (`0o100644`, `0o100755`, `0o120000`) and id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MergeEntry {
    pub mode: u32,
    pub oid: String,
}

/// One path differing between two trees.
pub(crate) struct Diff {
    pub(crate) path: Vec<u8>,
    pub(crate) old: Option<MergeEntry>,
    pub(crate) new: Option<MergeEntry>,
}

pub(crate) const GITLINK: u32 = 0o160000;
pub(crate) const SYMLINK: u32 = 0o120000;

/// Whether a tree entry's mode is a folder's.
pub(crate) fn is_tree_mode(mode: u32) -> bool {
    mode == 0o040000
}

impl Checkpointer {
    /// Paths differing between two trees (or commits), with both sides.
    pub(crate) fn diff_trees(&self, a: &str, b: &str) -> Result<Vec<Diff>, CheckpointError> {
        let out = self
            .git
            .cmd(["diff-tree", "-r", "-z", "--no-renames", a, b])
            .run()?;
        let unexpected = || CheckpointError::Unexpected {
            command: format!("git diff-tree -r -z --no-renames {a} {b}"),
            output: String::from_utf8_lossy(&out).chars().take(500).collect(),
        };
        let mut diffs = Vec::new();
        let mut fields = out.split(|&b| b == 0);
        while let Some(head) = fields.next() {
            if head.is_empty() {
                break;
            }
            let path = fields.next().ok_or_else(unexpected)?;
            let head = String::from_utf8_lossy(head.strip_prefix(b":").ok_or_else(unexpected)?)
                .into_owned();
            let parts: Vec<&str> = head.split(' ').collect();
            let [old_mode, new_mode, old_oid, new_oid, _status] = parts.as_slice() else {
                return Err(unexpected());
            };
            let entry = |mode: &str, oid: &str| -> Result<Option<MergeEntry>, CheckpointError> {
                let mode = u32::from_str_radix(mode, 8).map_err(|_| unexpected())?;
                Ok((mode != 0).then(|| MergeEntry {
                    mode,
                    oid: oid.to_owned(),
                }))
            };
            diffs.push(Diff {
                path: path.to_vec(),
                old: entry(old_mode, old_oid)?,
                new: entry(new_mode, new_oid)?,
            });
        }
        Ok(diffs)
    }
}
