//! Watching HEAD while an attempt runs: where HEAD, its branch and the
//! checkpoint's branch point, looked up only when a file that changes with
//! them did (a few `stat`s per look), so a poll costs nothing while the
//! agent leaves HEAD alone; then read from the ref files themselves where
//! refs are files, else asked of git.

use super::error::CheckpointError;
use super::snapshot::is_object_id;
use super::{Checkpoint, Checkpointer};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// HEAD and the checkpoint's branch as seen at one moment.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HeadSeen {
    /// HEAD's commit (`None`: on a branch not born yet).
    pub head: Option<String>,
    /// HEAD's branch (`None`: detached).
    pub branch: Option<String>,
    /// The tip of the checkpoint's branch (`None`: it has none, or it is gone).
    pub tip: Option<String>,
}

impl HeadSeen {
    /// The state a checkpoint recorded.
    pub fn of(cp: &Checkpoint) -> HeadSeen {
        HeadSeen {
            head: cp.head.clone(),
            branch: cp.branch.clone(),
            tip: cp.branch.as_ref().and(cp.head.clone()),
        }
    }
}

/// Notices HEAD and branch moves in one work tree, relative to a checkpoint.
#[derive(Debug)]
pub struct HeadWatch {
    cp: Checkpointer,
    /// The checkpoint's branch, whose tip is followed wherever HEAD goes.
    branch: Option<String>,
    last: HeadSeen,
    stamp: Vec<Option<Stamp>>,
    /// The branch HEAD's file names, read again only when that file changed
    /// (a look runs before every batch of the agent's output).
    on: (Option<Stamp>, Option<String>),
}

/// A file's identity: size, modification and change times (ns), inode.
type Stamp = (u64, i128, i128, u64);

fn stamp(path: &std::path::Path) -> Option<Stamp> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::symlink_metadata(path).ok()?;
    let ns = |s: i64, n: i64| i128::from(s) * 1_000_000_000 + i128::from(n);
    Some((
        m.len(),
        ns(m.mtime(), m.mtime_nsec()),
        ns(m.ctime(), m.ctime_nsec()),
        m.ino(),
    ))
}

impl HeadWatch {
    /// Starts from the state `checkpoint` recorded (taken just now, before
    /// the agent started).
    pub fn new(cp: &Checkpointer, checkpoint: &Checkpoint) -> HeadWatch {
        let mut watch = HeadWatch {
            cp: cp.clone(),
            branch: checkpoint.branch.clone(),
            last: HeadSeen::of(checkpoint),
            stamp: Vec::new(),
            on: (None, None),
        };
        watch.stamp = watch.stamps();
        watch
    }

    /// The folders whose entries change when HEAD moves (`HEAD` itself,
    /// its reflog `logs/HEAD`, and the folders of the branches it is on):
    /// a file watcher there wakes the loop at once. (git writes a branch's
    /// reflog before the branch itself: the reflog alone would wake the
    /// loop a moment too early.)
    pub fn dirs(&self) -> Vec<PathBuf> {
        let git_dir = self.cp.git_dir();
        let mut dirs = vec![
            git_dir.to_path_buf(),
            git_dir.join("logs"),
            self.cp.common_dir.join("refs/heads"),
        ];
        for branch in self.branch.iter().chain(self.on.1.as_ref()) {
            if let Some(parent) = self.cp.common_dir.join(branch).parent() {
                dirs.push(parent.to_path_buf());
            }
        }
        dirs.sort();
        dirs.dedup();
        dirs.retain(|d| d.is_dir());
        dirs
    }

    /// The identities of files one of which changes with every move of
    /// HEAD or of a branch HEAD is on (whatever the ref storage: loose,
    /// packed or reftable): `HEAD` first.
    fn stamps(&mut self) -> Vec<Option<Stamp>> {
        let (git_dir, common) = (self.cp.git_dir().to_path_buf(), &self.cp.common_dir);
        let head = stamp(&git_dir.join("HEAD"));
        if head != self.on.0 || head.is_none() {
            let on = std::fs::read_to_string(git_dir.join("HEAD"))
                .ok()
                .and_then(|t| t.trim_end().strip_prefix("ref: ").map(str::to_owned));
            self.on = (head, on);
        }
        let mut files = vec![
            git_dir.join("logs/HEAD"),
            common.join("packed-refs"),
            common.join("reftable/tables.list"),
        ];
        for branch in self.branch.iter().chain(self.on.1.as_ref()) {
            files.push(common.join(branch));
        }
        std::iter::once(head)
            .chain(files.iter().map(|f| stamp(f)))
            .collect()
    }

    /// The new state when HEAD or the checkpoint's branch moved since the
    /// last look. Looks only when one of the files changed, reading the ref
    /// files themselves where it can (no process to start: the sooner a
    /// move is recorded, the less a kill -9 can come between), else asking
    /// git.
    pub fn poll(&mut self) -> Result<Option<HeadSeen>, CheckpointError> {
        let now = self.stamps();
        if now == self.stamp {
            return Ok(None);
        }
        let seen = match self.read_files() {
            Some(seen) => seen,
            None => self.cp.head_seen(self.branch.as_deref())?,
        };
        // Stamped after git looked would miss a move in between; before it,
        // a move in between is seen again next time, which is harmless.
        self.stamp = now;
        if seen == self.last {
            return Ok(None);
        }
        self.last = seen.clone();
        Ok(Some(seen))
    }
}

impl HeadWatch {
    /// [`Checkpointer::head_seen`] from the files (`HEAD`, loose refs,
    /// `packed-refs`); `None` when they cannot say for sure (reftable, a
    /// symbolic ref outside `refs/heads/`, a file caught unreadable).
    fn read_files(&self) -> Option<HeadSeen> {
        let common = &self.cp.common_dir;
        if common.join("reftable").exists() {
            return None;
        }
        let head = std::fs::read_to_string(self.cp.git_dir().join("HEAD")).ok()?;
        let head = head.trim_end();
        let resolve = |name: &str| read_ref_file(common, name);
        let (commit, branch) = match head.strip_prefix("ref: ") {
            Some(b) if b.starts_with("refs/heads/") => (resolve(b)?, Some(b.to_owned())),
            Some(_) => return None,
            None if is_object_id(head) => (Some(head.to_owned()), None),
            None => return None,
        };
        let tip = match &self.branch {
            Some(b) if Some(b) == branch.as_ref() => commit.clone(),
            Some(b) if b.starts_with("refs/heads/") => resolve(b)?,
            Some(_) => return None,
            None => None,
        };
        Some(HeadSeen {
            head: commit,
            branch,
            tip,
        })
    }
}

/// A ref's object id from its loose file, else `packed-refs` (`Some(None)`:
/// it does not exist); `None` when the files cannot say (a symbolic ref, a
/// file that cannot be read). Refs as files only, not reftable.
pub(crate) fn read_ref_file(common_dir: &std::path::Path, name: &str) -> Option<Option<String>> {
    match std::fs::read_to_string(common_dir.join(name)) {
        Ok(text) => {
            let text = text.trim_end();
            is_object_id(text).then(|| Some(text.to_owned()))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let packed = match std::fs::read_to_string(common_dir.join("packed-refs")) {
                Ok(p) => p,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
                Err(_) => return None,
            };
            let found = packed
                .lines()
                .filter_map(|l| l.split_once(' '))
                .find(|(_, n)| *n == name)
                .map(|(id, _)| id.to_owned());
            Some(found.filter(|id| is_object_id(id)))
        }
        Err(_) => None,
    }
}

impl Checkpointer {
    /// HEAD's commit and branch, and the tip of `branch`, as git says now
    /// (one git command).
    pub fn head_seen(&self, branch: Option<&str>) -> Result<HeadSeen, CheckpointError> {
        let mut input = "HEAD^{commit}\n".to_owned();
        if let Some(b) = branch {
            input.push_str(&format!("{b}^{{commit}}\n"));
        }
        let out = self
            .git
            .cmd(["cat-file", "--batch-check=%(objectname) %(objecttype)"])
            .stdin(input.into_bytes())
            .run()?;
        let text = String::from_utf8_lossy(&out);
        let mut lines = text.lines();
        let found = |line: Option<&str>| {
            line.and_then(|l| l.strip_suffix(" commit"))
                .filter(|id| is_object_id(id))
                .map(str::to_owned)
        };
        let head = found(lines.next());
        let tip = branch.and_then(|_| found(lines.next()));
        Ok(HeadSeen {
            head,
            branch: self.head_branch()?,
            tip,
        })
    }

    /// HEAD's branch (`None`: detached), from its file where refs are files.
    pub fn head_branch(&self) -> Result<Option<String>, CheckpointError> {
        match std::fs::read_to_string(self.git_dir.join("HEAD")) {
            Ok(text) if !text.starts_with("ref: refs/heads/.invalid") => {
                Ok(text.trim_end().strip_prefix("ref: ").map(str::to_owned))
            }
            _ => Ok(self.head_state()?.branch),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;
    use std::time::Duration;

    fn git(dir: &Path, args: &[&str]) {
        let ok = crate::process::Cmd::new("git")
            .args([
                "-c",
                "user.name=t",
                "-c",
                "user.email=t@t",
                "-c",
                "commit.gpgsign=false",
            ])
            .args(args)
            .current_dir(dir)
            .env_remove("GIT_DIR")
            .env_remove("GIT_WORK_TREE")
            .output(Duration::from_secs(60))
            .expect("git runs")
            .success();
        assert!(ok, "git {args:?}");
    }

    /// Reading the ref files says what git says, whatever HEAD and the
    /// refs' storage are.
    #[test]
    fn the_files_say_what_git_says() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        git(root, &["init", "-q", "-b", "main"]);
        let cp = Checkpointer::discover(root, Duration::from_secs(30))
            .unwrap()
            .unwrap();
        let checkpoint = |head: Option<&str>| Checkpoint {
            refname: "refs/x".into(),
            commit: String::new(),
            head: head.map(str::to_owned),
            branch: Some("refs/heads/main".into()),
            index: None,
            tree: None,
            notices: Vec::new(),
        };
        let same = |watch: &HeadWatch, what: &str| {
            let from_git = cp.head_seen(Some("refs/heads/main")).unwrap();
            assert_eq!(watch.read_files(), Some(from_git), "{what}");
        };
        let watch = HeadWatch::new(&cp, &checkpoint(None));
        same(&watch, "unborn");
        git(root, &["commit", "-q", "--allow-empty", "-m", "one"]);
        same(&watch, "a loose branch");
        git(root, &["pack-refs", "--all"]);
        same(&watch, "a packed branch");
        git(root, &["checkout", "-q", "-b", "side"]);
        git(root, &["commit", "-q", "--allow-empty", "-m", "two"]);
        same(&watch, "on another branch");
        git(root, &["checkout", "-q", "--detach", "main"]);
        same(&watch, "detached");
        git(root, &["branch", "-D", "-q", "main"]);
        same(&watch, "the checkpoint's branch gone");
    }
}
