//! Git moving a lane's work between machines: the tree a remote lane starts
//! from is pushed to a git remote, and what the lane made is fetched back.
//!
//! Transfers name the remote by URL (never a configured remote), and the
//! transport settings a repository's own config could hold are pinned to
//! the user's global ones: an agent may have written `.git/config`, and an
//! `ssh` command or credential helper there would run as the user.

use super::error::CheckpointError;
use super::{Checkpointer, REF_PREFIX, escape_component};
use std::path::Path;
use std::time::Duration;

/// A push that failed is tried this many times more.
const PUSH_TRIES: u32 = 3;

/// Where every remote lane's refs live on the remote.
pub const REMOTE_PREFIX: &str = "refs/spectr/ralph/remote";

/// Keys whose value in a repository's config names a command git runs
/// during a transfer: taken from the user's global config only.
const TRANSPORT_COMMANDS: &[&str] = &["core.sshCommand", "credential.helper"];

/// `refs/spectr/ralph/remote/<run>/<lane>/<task>/<attempt>`: one remote
/// attempt's refs (`/base`, `/result`, `/failed` below it).
pub fn remote_attempt_prefix(run: &str, lane: &str, task: &str, attempt: u32) -> String {
    format!(
        "{REMOTE_PREFIX}/{}/{}/{}/{attempt}",
        escape_component(run),
        escape_component(lane),
        escape_component(task)
    )
}

impl Checkpointer {
    /// A commit of `tree` whose parent is `head` (the user's HEAD): what a
    /// remote lane checks out. Its work tree is `tree`, its HEAD `head`.
    pub fn base_commit(&self, tree: &str, head: &str) -> Result<String, CheckpointError> {
        self.commit_tree(
            tree,
            &[head.to_owned()],
            "spectr ralph: the work tree a remote lane starts from",
        )
    }

    /// A commit of the work tree as it is (tracked and untracked files,
    /// spectr's own left out) on top of HEAD, with `message`: what a remote
    /// lane hands back. Returns the commit and its tree.
    pub fn result_commit(&self, message: &str) -> Result<(String, String), CheckpointError> {
        let tree = self.snapshot_tree()?;
        let parents: Vec<String> = self.resolve_commit("HEAD")?.into_iter().collect();
        let commit = self.commit_tree(&tree, &parents, message)?;
        Ok((commit, tree))
    }

    /// The tree of `rev`.
    pub fn tree_of(&self, rev: &str) -> Result<String, CheckpointError> {
        let spec = format!("{rev}^{{tree}}");
        let out = self.git.cmd(["rev-parse", "--verify", "-q", &spec]).run()?;
        Ok(String::from_utf8_lossy(&out).trim().to_owned())
    }

    /// The message of commit `rev`.
    pub fn commit_message(&self, rev: &str) -> Result<String, CheckpointError> {
        let out = self.git.cmd(["log", "-1", "--format=%B", rev]).run()?;
        Ok(String::from_utf8_lossy(&out).into_owned())
    }

    /// The content of `path` in `rev`; None when it is not there.
    pub fn file_at(&self, rev: &str, path: &str) -> Result<Option<Vec<u8>>, CheckpointError> {
        let spec = format!("{rev}:{path}");
        let out = self.git.cmd(["cat-file", "blob", &spec]).output()?;
        Ok(out.status.success().then_some(out.stdout))
    }

    /// Pushes each `(commit, refname)` to `url`, replacing what is there (an
    /// attempt run again after its lane was lost pushes the same names).
    pub fn push_to(
        &self,
        url: &str,
        refs: &[(String, String)],
        timeout: Duration,
    ) -> Result<(), CheckpointError> {
        let specs: Vec<String> = refs.iter().map(|(c, r)| format!("+{c}:{r}")).collect();
        // Two pushes of the same objects at once (lanes starting together
        // with the same history) can collide in the remote's object store
        // (`.keep … differ in contents`): tried again, it finds them there.
        let mut tries = 0;
        loop {
            match self.transfer(timeout, &["push", "--quiet", "--no-verify", url], &specs) {
                Err(CheckpointError::Git { .. }) if tries < PUSH_TRIES => {
                    tries += 1;
                    std::thread::sleep(Duration::from_millis(150 * u64::from(tries)));
                }
                other => return other,
            }
        }
    }

    /// Fetches each `(remote ref, local ref)` from `url`.
    pub fn fetch_from(
        &self,
        url: &str,
        refs: &[(String, String)],
        timeout: Duration,
    ) -> Result<(), CheckpointError> {
        let specs: Vec<String> = refs.iter().map(|(r, l)| format!("+{r}:{l}")).collect();
        self.transfer(
            timeout,
            &[
                "fetch",
                "--quiet",
                "--no-tags",
                "--no-write-fetch-head",
                url,
            ],
            &specs,
        )
    }

    /// The refs under `prefix` on `url`, as `(object id, refname)`.
    pub fn remote_refs(
        &self,
        url: &str,
        prefix: &str,
        timeout: Duration,
    ) -> Result<Vec<(String, String)>, CheckpointError> {
        let pattern = format!("{prefix}/*");
        let out = self.transfer_output(timeout, &["ls-remote", "--refs", url], &[pattern])?;
        Ok(String::from_utf8_lossy(&out)
            .lines()
            .filter_map(|l| l.split_once('\t'))
            .map(|(oid, name)| (oid.to_owned(), name.to_owned()))
            .collect())
    }

    /// Deletes the refs under `prefix` on `url` (`git push --delete`).
    pub fn delete_remote_refs(
        &self,
        url: &str,
        refs: &[String],
        timeout: Duration,
    ) -> Result<(), CheckpointError> {
        if refs.is_empty() {
            return Ok(());
        }
        let specs: Vec<String> = refs.iter().map(|r| format!(":{r}")).collect();
        self.transfer(timeout, &["push", "--quiet", "--no-verify", url], &specs)
    }

    /// Where this work tree keeps what it fetched of one remote attempt:
    /// `refs/spectr/ralph/@<worktree>/<change>/<task>/<attempt>/remote-<what>`.
    pub fn fetched_ref_name(&self, change: &str, task: &str, attempt: u32, what: &str) -> String {
        let base = self.ref_name(change, task, attempt);
        let stem = base.strip_suffix("/checkpoint").unwrap_or(&base);
        format!("{stem}/remote-{what}")
    }

    fn transfer(
        &self,
        timeout: Duration,
        command: &[&str],
        specs: &[String],
    ) -> Result<(), CheckpointError> {
        self.transfer_output(timeout, command, specs).map(|_| ())
    }

    fn transfer_output(
        &self,
        timeout: Duration,
        command: &[&str],
        specs: &[String],
    ) -> Result<Vec<u8>, CheckpointError> {
        let mut git = self.git.clone();
        git.timeout = timeout;
        let mut cmd = git.cmd(command).args(specs);
        for (key, value) in self.global_transport_settings() {
            cmd = cmd.config(key.as_str(), value.as_str());
        }
        // No `ext::` URL (it runs a command) even if a rewrite rule makes one.
        cmd.config("protocol.ext.allow", "never").run()
    }

    /// The transport commands of the user's global config, pinned over the
    /// repository's (empty where the global config has none). Read once a
    /// process: every attempt pushes and fetches, and the file stays put.
    fn global_transport_settings(&self) -> &'static [(String, String)] {
        static READ: std::sync::OnceLock<Vec<(String, String)>> = std::sync::OnceLock::new();
        READ.get_or_init(|| {
            TRANSPORT_COMMANDS
                .iter()
                .map(|key| {
                    let value = self
                        .git
                        .cmd(["config", "--global", "--get", key])
                        .output()
                        .ok()
                        .filter(|o| o.status.success())
                        .map(|o| o.stdout_line())
                        .unwrap_or_default();
                    ((*key).to_owned(), value)
                })
                .collect()
        })
    }

    /// A new repository at `dir` holding `<prefix>/*` of `url` (under
    /// `refs/spectr/ralph/lane-in/`), HEAD at the
    /// base commit's parent (the user's HEAD), the work tree and index as
    /// a lane's are (the base's tree in the work tree, the index at HEAD, so
    /// the user's uncommitted changes are uncommitted here too).
    pub fn clone_base(
        dir: &Path,
        url: &str,
        prefix: &str,
        timeout: Duration,
    ) -> Result<Checkpointer, CheckpointError> {
        let git = super::git_program();
        let init = crate::process::Cmd::new(&git)
            .args(["init", "--quiet"])
            .arg(dir)
            .output(timeout)
            .map_err(|e| CheckpointError::io("cannot run git init in", dir, e.into_io()))?;
        if !matches!(init.end, crate::process::End::Exited(s) if s.success()) {
            return Err(CheckpointError::Git {
                command: format!("git init {}", dir.display()),
                code: None,
                stderr: String::from_utf8_lossy(&init.stderr).trim().to_owned(),
            });
        }
        let cp = Checkpointer::discover_with_program(dir, timeout, git)?.ok_or_else(|| {
            CheckpointError::Unexpected {
                command: "git init".into(),
                output: format!("no repository at {}", dir.display()),
            }
        })?;
        // Every ref of the attempt: its base, and for a resolve attempt the
        // trees its prompt names.
        let fetched = format!("{REF_PREFIX}/lane-in");
        cp.fetch_from(
            url,
            &[(format!("{prefix}/*"), format!("{fetched}/*"))],
            timeout,
        )?;
        let local = format!("{fetched}/base");
        let base_ref = format!("{prefix}/base");
        let head = cp.resolve_commit(&format!("{local}^"))?.ok_or_else(|| {
            CheckpointError::Unexpected {
                command: format!("git rev-parse {local}^"),
                output: format!("{base_ref} of {url} has no parent commit"),
            }
        })?;
        cp.git
            .cmd(["update-ref", "--no-deref", "HEAD", &head])
            .run()?;
        // The base's tree into index and work tree, then the index back to
        // HEAD: no checkout, so no hook or filter of the fetched content runs.
        cp.git.cmd(["read-tree", "--reset", "-u", &local]).run()?;
        cp.git.cmd(["read-tree", "--reset", "HEAD"]).run()?;
        Ok(cp)
    }
}
