//! Private ref names, and listing / deleting a change's refs.
//!
//! Layout: `refs/spectr/ralph/@<worktree>/<change>/<task>/<attempt>/` holding
//! `checkpoint`, `checkpoint-index` (the user's index copy),
//! `checkpoint-stash/<n>` (the stash entries at the checkpoint) and `failed`.
//! `<worktree>` is `main` or a linked worktree's name, so runs in two
//! worktrees never touch each other's refs (`refs/worktree/` would be
//! private too, but `git gc` run from another worktree prunes what only those
//! refs reach). The attempt is a directory, not a ref, because git cannot
//! hold both `a/1` and `a/1/failed`. Refs of the layout before worktrees
//! (`refs/spectr/ralph/<change>/...`) are still listed and cleaned by `All`.

use super::error::CheckpointError;
use super::{Checkpoint, Checkpointer};
use std::fmt::Write as _;

pub const REF_PREFIX: &str = "refs/spectr/ralph";

/// Which of a change's refs [`Checkpointer::clean`] deletes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CleanScope {
    /// Checkpoints and their index copies; failed attempts' work is kept.
    Checkpoints,
    /// Everything, failed attempts included.
    All,
}

pub(crate) fn attempt_ref(
    worktree: &str,
    change: &str,
    task: &str,
    attempt: u32,
    kind: &str,
) -> String {
    format!(
        "{}{}/{attempt}/{kind}",
        change_prefix(worktree, change),
        escape_component(task)
    )
}

/// `@` never starts an escaped change id, so the layouts cannot collide.
pub(crate) fn change_prefix(worktree: &str, change: &str) -> String {
    format!(
        "{REF_PREFIX}/@{}/{}/",
        escape_component(worktree),
        escape_component(change)
    )
}

fn legacy_change_prefix(change: &str) -> String {
    format!("{REF_PREFIX}/{}/", escape_component(change))
}

pub(crate) fn is_checkpoint_ref(r: &str) -> bool {
    r.ends_with("/checkpoint")
        || r.ends_with("/checkpoint-index")
        || r.contains("/checkpoint-stash/")
}

/// Escapes an id into one valid ref-name component, injectively: bytes other
/// than ASCII letters, digits, `-`, `_` and well-placed dots become `%XX`
/// (`%` itself included), so distinct ids never share a ref.
pub fn escape_component(id: &str) -> String {
    if id.is_empty() {
        // `%` alone cannot come out of escaping anything else.
        return "%".to_owned();
    }
    let bytes = id.as_bytes();
    let mut out = String::with_capacity(bytes.len());
    for (i, &b) in bytes.iter().enumerate() {
        let keep = match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'-' | b'_' => true,
            // git refuses a component starting or ending with '.', "..", and
            // a trailing ".lock".
            b'.' => {
                i != 0 && i + 1 != bytes.len() && bytes[i + 1] != b'.' && &bytes[i..] != b".lock"
            }
            _ => false,
        };
        if keep {
            out.push(char::from(b));
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}

impl Checkpointer {
    /// Deletes a checkpoint's refs (after its attempt succeeded). The failed
    /// ref of the attempt, if any, is kept.
    pub fn drop(&self, cp: &Checkpoint) -> Result<(), CheckpointError> {
        if let Some(doomed) = self.known_refs_of(cp)
            && self.delete_refs(&doomed).is_ok()
        {
            return Ok(());
        }
        self.drop_listed(cp)
    }

    /// [`Checkpointer::drop`], with the next ref transaction this run
    /// makes (a task commit's branch move, the next checkpoint) or at
    /// [`Checkpointer::settle`]: a git command fewer per task. At once
    /// when its refs are not known exactly. A kill before leaves the refs
    /// of an attempt the session says completed: the next run's start
    /// drops them.
    pub fn drop_soon(&self, cp: &Checkpoint) -> Result<(), CheckpointError> {
        match self.known_refs_of(cp) {
            Some(refs) => {
                match self.shared.doomed.lock() {
                    Ok(mut doomed) => doomed.extend(refs),
                    Err(_) => return self.delete_refs(&refs),
                }
                Ok(())
            }
            None => self.drop_listed(cp),
        }
    }

    /// The deletions [`Checkpointer::drop_soon`] left for now, taken.
    pub(crate) fn take_doomed(&self) -> Vec<String> {
        self.shared
            .doomed
            .lock()
            .map(|mut d| std::mem::take(&mut *d))
            .unwrap_or_default()
    }

    /// Deletions taken by [`Checkpointer::take_doomed`] whose transaction
    /// failed: made on their own (missing refs are fine; one that no longer
    /// holds its value is someone else's now and stays).
    pub(crate) fn delete_doomed_alone(&self, doomed: &[String]) {
        if self.delete_refs(doomed).is_err() {
            for one in doomed {
                let _ = self.delete_refs(std::slice::from_ref(one));
            }
        }
    }

    /// A checkpoint's refs when this run made it where no ref was: its
    /// stash refs are the ones it wrote, as long as the ref still holds its
    /// commit (`<ref> <old value>`: deleted only while it holds that, in
    /// the same transaction; a re-made checkpoint is a new commit).
    fn known_refs_of(&self, cp: &Checkpoint) -> Option<Vec<String>> {
        let n = self.forget_created(&cp.refname, &cp.commit)?;
        let stash_prefix = Checkpointer::stash_refs_prefix(&cp.refname);
        let index_ref = Checkpointer::index_ref_name(&cp.refname);
        let mut doomed = vec![format!("{} {}", cp.refname, cp.commit), index_ref];
        doomed.extend((0..n).map(|i| format!("{stash_prefix}{i}")));
        Some(doomed)
    }

    /// A checkpoint's refs deleted as listed by git now.
    fn drop_listed(&self, cp: &Checkpoint) -> Result<(), CheckpointError> {
        let stash_prefix = Checkpointer::stash_refs_prefix(&cp.refname);
        let index_ref = Checkpointer::index_ref_name(&cp.refname);
        let out = self
            .git
            .cmd(["for-each-ref", "--format=%(refname)", &stash_prefix])
            .run()?;
        let mut doomed = vec![cp.refname.clone(), index_ref];
        doomed.extend(
            String::from_utf8_lossy(&out)
                .lines()
                .filter(|l| !l.is_empty())
                .map(str::to_owned),
        );
        self.delete_refs(&doomed)
    }

    /// Records that `refname` now holds `commit` with `stash_refs` stash refs
    /// under it and nothing else (`None`: unknown, e.g. the ref existed).
    pub(crate) fn remember_created(&self, refname: &str, commit: &str, stash_refs: Option<usize>) {
        if let Ok(mut created) = self.shared.created.lock() {
            match stash_refs {
                Some(n) => {
                    created.insert(refname.to_owned(), (commit.to_owned(), n));
                }
                None => {
                    created.remove(refname);
                }
            }
        }
    }

    /// The stash refs count recorded for `refname` if it still names the
    /// checkpoint `commit` this run made; forgets it either way.
    fn forget_created(&self, refname: &str, commit: &str) -> Option<usize> {
        let mut created = self.shared.created.lock().ok()?;
        let (c, n) = created.remove(refname)?;
        (c == commit).then_some(n)
    }

    /// The refs kept for `change` in this work tree (and in the layout
    /// before worktrees), sorted by name.
    pub fn list_refs(&self, change: &str) -> Result<Vec<String>, CheckpointError> {
        self.refs_under(&[
            change_prefix(&self.worktree, change),
            legacy_change_prefix(change),
        ])
    }

    /// Deletes `change`'s refs within `scope`; returns how many were deleted.
    pub fn clean(&self, change: &str, scope: CleanScope) -> Result<usize, CheckpointError> {
        let doomed: Vec<String> = self
            .list_refs(change)?
            .into_iter()
            .filter(|r| match scope {
                CleanScope::All => true,
                // Old-layout checkpoints may be another worktree's live ones.
                CleanScope::Checkpoints => {
                    is_checkpoint_ref(r) && r.starts_with(&change_prefix(&self.worktree, change))
                }
            })
            .collect();
        self.delete_refs(&doomed)?;
        Ok(doomed.len())
    }

    /// Every ref under any of `prefixes` (each ending in `/`), sorted, once.
    pub(crate) fn refs_under(&self, prefixes: &[String]) -> Result<Vec<String>, CheckpointError> {
        let out = self
            .git
            .cmd(["for-each-ref", "--format=%(refname)"])
            .args(prefixes)
            .run()?;
        let mut refs: Vec<String> = String::from_utf8_lossy(&out)
            .lines()
            .filter(|l| !l.is_empty())
            .map(str::to_owned)
            .collect();
        refs.sort();
        refs.dedup();
        Ok(refs)
    }

    /// Deletes the checkpoint refs (with their index copies and stash refs)
    /// of the attempts whose checkpoints are `refnames`, in whichever work
    /// tree they were taken: a lane's, killed before it could drop them, is
    /// no longer there to do it. Refs of failed attempts' work are kept.
    pub fn drop_checkpoints_of(&self, refnames: &[String]) -> Result<usize, CheckpointError> {
        let prefixes: Vec<String> = refnames
            .iter()
            .filter(|r| r.starts_with(REF_PREFIX))
            .filter_map(|r| r.strip_suffix("/checkpoint"))
            .map(|p| format!("{p}/"))
            .collect();
        if prefixes.is_empty() {
            return Ok(0);
        }
        let mut doomed = self.refs_under(&prefixes)?;
        doomed.retain(|r| is_checkpoint_ref(r));
        self.delete_refs(&doomed)?;
        Ok(doomed.len())
    }

    /// Deletes refs in one transaction; missing refs are fine. An entry may
    /// carry the value the ref must still hold (`<ref> <old value>`).
    pub(crate) fn delete_refs(&self, refs: &[String]) -> Result<(), CheckpointError> {
        if refs.is_empty() {
            return Ok(());
        }
        let script: String = refs.iter().map(|r| format!("delete {r}\n")).collect();
        self.git
            .cmd(["update-ref", "-m", "spectr ralph: drop", "--stdin"])
            .stdin(script.into_bytes())
            .run()?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_ids_stay_readable() {
        assert_eq!(escape_component("add-feature_x"), "add-feature_x");
        assert_eq!(escape_component("1.2.3"), "1.2.3");
    }

    #[test]
    fn awkward_ids_are_escaped() {
        assert_eq!(escape_component(".hidden"), "%2Ehidden");
        assert_eq!(escape_component("a..b"), "a%2E.b");
        assert_eq!(escape_component("end."), "end%2E");
        assert_eq!(escape_component("x.lock"), "x%2Elock");
        assert_eq!(escape_component("a/b c"), "a%2Fb%20c");
        assert_eq!(escape_component("50%"), "50%25");
        assert_eq!(escape_component(""), "%");
        assert_eq!(escape_component("é"), "%C3%A9");
    }

    #[test]
    fn attempt_refs_nest_under_the_change() {
        assert_eq!(
            attempt_ref("main", "chg", "1.2", 3, "failed"),
            "refs/spectr/ralph/@main/chg/1.2/3/failed"
        );
    }
}
