//! The paths a commit changes, read from the commit itself: `spectr
//! report`'s files changed for a task's commit. Read-only.

use crate::checkpoint::{CheckpointError, Checkpointer};

impl Checkpointer {
    /// The paths `commit` changes against its first parent (every path of
    /// its tree for a root commit), sorted; `None` when the repository does
    /// not hold that commit (never made here, or collected since) or
    /// `commit` is no object id.
    pub fn commit_files(&self, commit: &str) -> Result<Option<Vec<String>>, CheckpointError> {
        if commit.is_empty() || !commit.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Ok(None);
        }
        let found = self
            .git
            .cmd([
                "rev-parse",
                "--verify",
                "--quiet",
                &format!("{commit}^{{commit}}"),
            ])
            .output()?;
        if !found.status.success() {
            return Ok(None);
        }
        let full = found.stdout_line();
        let listed = self
            .git
            .cmd(["rev-list", "--parents", "-n", "1", &full])
            .run()?;
        let listed = String::from_utf8_lossy(&listed);
        let first_parent = listed.split_whitespace().nth(1);
        let mut args = vec!["diff-tree", "-r", "-z", "--no-renames", "--name-only"];
        match first_parent {
            Some(parent) => args.extend([parent, &full]),
            None => args.extend(["--root", "--no-commit-id", &full]),
        }
        let out = self.git.cmd(&args).run()?;
        let mut paths: Vec<String> = out
            .split(|&b| b == 0)
            .filter(|p| !p.is_empty())
            .map(|p| String::from_utf8_lossy(p).into_owned())
            .collect();
        paths.sort();
        Ok(Some(paths))
    }
}
