//! Taking snapshots with a temporary index: the user's index, HEAD, branches
//! and stash are only read.

use super::error::CheckpointError;
use super::exclude::{exclude_pathspec, literal_pathspec};
use super::{Checkpoint, Checkpointer};
use std::path::PathBuf;

/// An index file of our own (`GIT_INDEX_FILE`), deleted on drop. It lives in
/// a fresh directory because git rejects an empty file as an index; inside
/// the git dir so it is on the same file system and never in the work tree.
pub(crate) struct TempIndex {
    _dir: tempfile::TempDir,
    pub(crate) path: PathBuf,
}

/// HEAD as found: its commit (none before the first commit) and branch (none
/// when detached).
pub(crate) struct HeadState {
    pub(crate) commit: Option<String>,
    pub(crate) branch: Option<String>,
}

impl Checkpointer {
    /// Snapshots the work tree under `refname` and records HEAD and the
    /// user's index, so [`Checkpointer::revert`] can put all three back.
    pub fn create(&self, refname: &str) -> Result<Checkpoint, CheckpointError> {
        check_refname(refname)?;
        let head = self.head_state()?;
        let index = self.save_user_index()?;
        let tmp = self.temp_index(true)?;
        if !self.excludes.is_empty() {
            // Loop files the user's index happens to track stay out too.
            self.git
                .cmd(["rm", "--cached", "-r", "-f", "-q", "--ignore-unmatch", "--"])
                .args(self.excludes.iter().map(|p| literal_pathspec(p)))
                .index(&tmp.path)
                .run()?;
        }
        let tree = self.add_all_and_write_tree(&tmp)?;
        let parents: Vec<String> = head.commit.iter().cloned().collect();
        let commit = self.commit_tree(
            &tree,
            &parents,
            &format!("spectr ralph: checkpoint\n\nref: {refname}\n"),
        )?;

        let index_ref = Checkpointer::index_ref_name(refname);
        let mut script = format!("update {refname} {commit}\n");
        match &index {
            Some(blob) => script.push_str(&format!("update {index_ref} {blob}\n")),
            None => script.push_str(&format!("delete {index_ref}\n")),
        }
        self.git
            .cmd(["update-ref", "-m", "spectr ralph: checkpoint", "--stdin"])
            .stdin(script.into_bytes())
            .run()?;

        Ok(Checkpoint {
            refname: refname.to_owned(),
            commit,
            head: head.commit,
            branch: head.branch,
            index,
        })
    }

    pub(crate) fn head_state(&self) -> Result<HeadState, CheckpointError> {
        let commit = self.resolve_commit("HEAD")?;
        let out = self.git.cmd(["symbolic-ref", "-q", "HEAD"]).output()?;
        let branch = match out.status.code() {
            Some(0) => Some(out.stdout_line()),
            // Exit 1: HEAD is detached.
            Some(1) => None,
            code => {
                return Err(CheckpointError::Git {
                    command: "git symbolic-ref -q HEAD".into(),
                    code,
                    stderr: out.stderr_text(),
                });
            }
        };
        Ok(HeadState { commit, branch })
    }

    /// The commit `rev` names, or `None` when it names nothing (an unborn
    /// branch, a missing ref).
    pub(crate) fn resolve_commit(&self, rev: &str) -> Result<Option<String>, CheckpointError> {
        let spec = format!("{rev}^{{commit}}");
        let out = self
            .git
            .cmd(["rev-parse", "-q", "--verify", &spec])
            .output()?;
        match out.status.code() {
            Some(0) => Ok(Some(out.stdout_line())),
            Some(1) if out.stdout.is_empty() => Ok(None),
            code => Err(CheckpointError::Git {
                command: format!("git rev-parse -q --verify {spec}"),
                code,
                stderr: out.stderr_text(),
            }),
        }
    }

    pub(crate) fn user_index_path(&self) -> PathBuf {
        self.git_dir.join("index")
    }

    /// Stores the user's index file bytes as a blob (it survives a crash).
    fn save_user_index(&self) -> Result<Option<String>, CheckpointError> {
        let path = self.user_index_path();
        match std::fs::symlink_metadata(&path) {
            Ok(m) if m.is_file() => {}
            Ok(_) => return Ok(None),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(CheckpointError::io("cannot read the git index", path, e)),
        }
        // --no-filters: the bytes exactly, whatever .gitattributes says.
        let out = self
            .git
            .cmd(["hash-object", "-w", "--no-filters", "--"])
            .arg(&path)
            .run()?;
        Ok(Some(String::from_utf8_lossy(&out).trim().to_owned()))
    }

    /// A temporary index, seeded with a copy of the user's index when asked:
    /// its cached file stats let `git add -A` skip re-hashing unchanged files.
    pub(crate) fn temp_index(&self, seed_from_user: bool) -> Result<TempIndex, CheckpointError> {
        let dir = tempfile::Builder::new()
            .prefix("spectr-ralph-")
            .tempdir_in(&self.git_dir)
            .map_err(|e| {
                CheckpointError::io("cannot create a temporary index in", &self.git_dir, e)
            })?;
        let path = dir.path().join("index");
        if seed_from_user {
            let user = self.user_index_path();
            match std::fs::copy(&user, &path) {
                Ok(_) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(CheckpointError::io("cannot copy the git index", user, e)),
            }
        }
        Ok(TempIndex { _dir: dir, path })
    }

    /// `git add -A` (minus the excluded paths) into `tmp`, then `write-tree`.
    pub(crate) fn add_all_and_write_tree(
        &self,
        tmp: &TempIndex,
    ) -> Result<String, CheckpointError> {
        self.git
            .cmd(["add", "-A", "--", "."])
            .args(self.excludes.iter().map(|p| exclude_pathspec(p)))
            .index(&tmp.path)
            .run()?;
        let out = self.git.cmd(["write-tree"]).index(&tmp.path).run()?;
        Ok(String::from_utf8_lossy(&out).trim().to_owned())
    }

    pub(crate) fn commit_tree(
        &self,
        tree: &str,
        parents: &[String],
        message: &str,
    ) -> Result<String, CheckpointError> {
        let mut cmd = self.git.cmd(["commit-tree", "--no-gpg-sign"]);
        for p in parents {
            cmd = cmd.args(["-p", p]);
        }
        let out = cmd.args(["-m", message, tree]).run()?;
        Ok(String::from_utf8_lossy(&out).trim().to_owned())
    }
}

/// Our refs live under `refs/`; git checks the rest when it writes them.
pub(crate) fn check_refname(refname: &str) -> Result<(), CheckpointError> {
    let bad = |reason: &str| {
        Err(CheckpointError::InvalidRef {
            refname: refname.to_owned(),
            reason: reason.to_owned(),
        })
    };
    if !refname.starts_with("refs/") {
        return bad("must start with refs/");
    }
    if refname.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return bad("must not contain whitespace");
    }
    Ok(())
}
