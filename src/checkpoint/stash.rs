//! The user's stash: `refs/stash` and its reflog (the stash list) recorded at
//! the checkpoint and put back exactly by a revert, so an agent's
//! `git stash pop` loses nothing and its own `git stash` leaves nothing. In
//! a lane, whose stash is the user's too, the agent's entries are taken off
//! the list after every attempt and kept under the attempt's refs.

use super::error::CheckpointError;
use super::meta::Meta;
use super::{Checkpoint, Checkpointer};
use std::path::PathBuf;

impl Checkpointer {
    fn stash_log_path(&self) -> PathBuf {
        self.common_dir.join("logs/refs/stash")
    }

    /// Refs are files (not reftable): the reflog can be kept byte for byte.
    fn files_backend(&self) -> bool {
        !self.common_dir.join("reftable").exists()
    }

    pub(crate) fn read_stash_log(&self) -> Result<Option<Vec<u8>>, CheckpointError> {
        if !self.files_backend() {
            return Ok(None);
        }
        let path = self.stash_log_path();
        match std::fs::read(&path) {
            Ok(b) => Ok(Some(b)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(CheckpointError::io("cannot read the stash list", path, e)),
        }
    }

    /// The stash entries to keep reachable: every commit the reflog names.
    pub(crate) fn stash_commits(meta: &Meta) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        if let Some(log) = &meta.stash_log {
            for line in String::from_utf8_lossy(log).lines() {
                if let Some(new) = line.split(' ').nth(1)
                    && new.bytes().all(|b| b.is_ascii_hexdigit())
                    && new.bytes().any(|b| b != b'0')
                    && !out.iter().any(|o| o == new)
                {
                    out.push(new.to_owned());
                }
            }
        }
        if let Some(s) = &meta.stash
            && !out.contains(s)
        {
            out.push(s.clone());
        }
        out
    }

    /// Puts `refs/stash` and its reflog back as `meta` recorded them.
    /// Returns whether anything changed.
    pub(crate) fn restore_stash(
        &self,
        meta: &Meta,
        now: Option<&str>,
    ) -> Result<bool, CheckpointError> {
        let log_now = self.read_stash_log()?;
        let same_log = !self.files_backend() || log_now == meta.stash_log;
        if meta.stash.as_deref() == now && same_log {
            return Ok(false);
        }
        match &meta.stash {
            None => {
                if now.is_some() {
                    // Deleting the ref deletes its reflog too.
                    self.git
                        .cmd([
                            "update-ref",
                            "-m",
                            "spectr ralph: revert",
                            "-d",
                            "refs/stash",
                        ])
                        .run()?;
                }
                let path = self.stash_log_path();
                if path.exists() {
                    std::fs::remove_file(&path).map_err(|e| {
                        CheckpointError::io("cannot restore the stash list", path, e)
                    })?;
                }
            }
            Some(stash) => {
                if now != Some(stash.as_str()) {
                    self.git
                        .cmd([
                            "update-ref",
                            "-m",
                            "spectr ralph: revert",
                            "refs/stash",
                            stash,
                        ])
                        .run()?;
                }
                if let Some(log) = &meta.stash_log
                    && self.files_backend()
                {
                    let path = self.stash_log_path();
                    if let Some(dir) = path.parent() {
                        let _ = std::fs::create_dir_all(dir);
                    }
                    crate::model::atomic::write_atomic(&path, log).map_err(|e| {
                        CheckpointError::io("cannot restore the stash list", path, e)
                    })?;
                }
            }
        }
        Ok(true)
    }
}

/// One line of the stash's reflog: the entry's commit and the line itself.
struct LogLine<'a> {
    old: &'a str,
    new: &'a str,
    /// After the old id: the new id, who, when, and the message.
    rest: &'a str,
    message: &'a str,
}

fn log_lines(log: &[u8]) -> Vec<LogLine<'_>> {
    let Ok(text) = std::str::from_utf8(log) else {
        return Vec::new();
    };
    text.lines()
        .filter_map(|line| {
            let (old, rest) = line.split_once(' ')?;
            let new = rest.split(' ').next()?;
            let message = line.split_once('\t').map_or("", |(_, m)| m);
            Some(LogLine {
                old,
                new,
                rest,
                message,
            })
        })
        .collect()
}

/// The branch a stash entry was made on, from its message (`WIP on main:
/// ...`, `On main: ...`); `(no branch)` when HEAD was detached.
fn made_on(message: &str) -> Option<&str> {
    let rest = message
        .strip_prefix("WIP on ")
        .or_else(|| message.strip_prefix("On "))?;
    rest.split_once(": ").map(|(branch, _)| branch)
}

/// The stash list to write back, from the list at the checkpoint (`then`)
/// and now.
struct StashPlan {
    /// The log's bytes (`then`'s exactly when nothing joins or leaves it).
    log: Vec<u8>,
    /// Its newest entry: what `refs/stash` names.
    top: Option<String>,
    /// The agent's entries, oldest first: (commit, message).
    agents: Vec<(String, String)>,
}

/// Entries pushed since `then` stay when made on `user_branch` (the person's
/// own) and are the agent's otherwise; entries gone since come back unless
/// `claimed` (another attempt took them as its agent's).
fn plan_stash(then: &[u8], now: &[u8], user_branch: Option<&str>, claimed: &[String]) -> StashPlan {
    let (then_lines, now_lines) = (log_lines(then), log_lines(now));
    let pushed = now_lines
        .iter()
        .filter(|l| !then_lines.iter().any(|t| t.new == l.new));
    let (users, agents): (Vec<&LogLine>, Vec<&LogLine>) =
        pushed.partition(|l| user_branch.is_some() && made_on(l.message) == user_branch);
    let keep_then: Vec<&LogLine> = then_lines
        .iter()
        .filter(|t| !claimed.iter().any(|c| c == t.new))
        .collect();
    let log = if users.is_empty() && keep_then.len() == then_lines.len() {
        then.to_vec()
    } else {
        let mut log = String::new();
        let mut prev: Option<&str> = None;
        for l in keep_then.into_iter().chain(users) {
            // Each line's old id is the one before's new id.
            log.push_str(&format!("{} {}\n", prev.unwrap_or(l.old), l.rest));
            prev = Some(l.new);
        }
        log.into_bytes()
    };
    let top = log_lines(&log).last().map(|l| l.new.to_owned());
    StashPlan {
        log,
        top,
        agents: agents
            .iter()
            .map(|l| (l.new.to_owned(), l.message.to_owned()))
            .collect(),
    }
}

/// An entry the agent pushed, kept under a ref of its attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeptStash {
    pub refname: String,
    /// The entry's message (`On (no branch): ...`).
    pub message: String,
}

impl Checkpointer {
    /// After an attempt in a lane (the stash belongs to every work tree):
    /// puts the user's stash list back to what it was at `cp`, keeping the
    /// entries pushed since on `user_branch` (the person's own, made in
    /// their tree meanwhile). The entries the agent pushed leave the list
    /// and are kept under `<attempt>/agent-stash/<n>` (`n` from 0, the
    /// newest), which are returned. Entries the attempt dropped come back,
    /// unless another attempt keeps them as its agent's.
    pub fn claim_agent_stash(
        &self,
        cp: &Checkpoint,
        user_branch: Option<&str>,
    ) -> Result<Vec<KeptStash>, CheckpointError> {
        let commit = self.cat_batch(std::slice::from_ref(&cp.commit))?;
        let meta = commit
            .get(&cp.commit)
            .map(|c| Meta::parse_commit(c))
            .unwrap_or_default();
        if !meta.present
            || !self.files_backend()
            || meta.stash.is_some() && meta.stash_log.is_none()
        {
            // Without the list as it was (reftable), nothing is taken off.
            return Ok(Vec::new());
        }
        let then = meta.stash_log.clone().unwrap_or_default();
        if self.read_stash_log()?.unwrap_or_default() == then
            && self.stash_ref_file()? == meta.stash
        {
            return Ok(Vec::new());
        }
        let short = user_branch.map(|b| b.strip_prefix("refs/heads/").unwrap_or(b));
        let prefix = agent_stash_prefix(&cp.refname);
        // Planned and kept first without the lock (git commands take time,
        // and an agent's `git stash` waits for the lock only a moment), then
        // again under it: other lanes' agents may `git stash` meanwhile.
        let first = self.read_stash_log()?.unwrap_or_default();
        let needs_claimed = |now: &[u8]| {
            let now = log_lines(now);
            log_lines(&then)
                .iter()
                .any(|t| !now.iter().any(|l| l.new == t.new))
        };
        let mut claimed = if needs_claimed(&first) {
            self.agent_stash_commits()?
        } else {
            Vec::new()
        };
        let planned = plan_stash(&then, &first, short, &claimed);
        self.keep_agent_stash(&prefix, &planned.agents)?;
        let lock = StashLock::take(self)?;
        let now = self.read_stash_log()?.unwrap_or_default();
        let stash_now = self.stash_ref_file()?;
        if now != first && claimed.is_empty() && needs_claimed(&now) {
            claimed = self.agent_stash_commits()?;
        }
        let plan = plan_stash(&then, &now, short, &claimed);
        if plan.agents != planned.agents {
            // Rare: an agent pushed between the two looks.
            self.keep_agent_stash(&prefix, &plan.agents)?;
        }
        let path = self.stash_log_path();
        let io = |e| CheckpointError::io("cannot restore the stash list", &path, e);
        if plan.top.is_some() {
            crate::model::atomic::write_atomic(&path, &plan.log).map_err(io)?;
        } else if path.exists() {
            std::fs::remove_file(&path).map_err(io)?;
        }
        if plan.top != stash_now {
            lock.set(plan.top.as_deref())?;
        }
        Ok(plan
            .agents
            .iter()
            .rev()
            .enumerate()
            .map(|(n, (_, message))| KeptStash {
                refname: format!("{prefix}{n}"),
                message: message.clone(),
            })
            .collect())
    }

    /// Keeps the agent's entries (oldest first) under `<prefix><n>`, `0` the
    /// newest: an entry leaves the list only once a ref holds it.
    fn keep_agent_stash(
        &self,
        prefix: &str,
        agents: &[(String, String)],
    ) -> Result<(), CheckpointError> {
        if agents.is_empty() {
            return Ok(());
        }
        let script: String = agents
            .iter()
            .rev()
            .enumerate()
            .map(|(n, (commit, _))| format!("update {prefix}{n} {commit}\n"))
            .collect();
        self.git
            .cmd([
                "update-ref",
                "-m",
                "spectr ralph: agent's stash kept",
                "--stdin",
            ])
            .stdin(script.into_bytes())
            .run()?;
        Ok(())
    }

    /// `refs/stash` as its file says (loose, else `packed-refs`).
    fn stash_ref_file(&self) -> Result<Option<String>, CheckpointError> {
        match super::head::read_ref_file(&self.common_dir, "refs/stash") {
            Some(found) => Ok(found),
            None => Ok(self.head_and_stash()?.stash),
        }
    }

    /// Every stash entry an attempt's agent pushed and spectr kept.
    fn agent_stash_commits(&self) -> Result<Vec<String>, CheckpointError> {
        let out = self
            .git
            .cmd([
                "for-each-ref",
                "--format=%(objectname) %(refname)",
                super::REF_PREFIX,
            ])
            .run()?;
        Ok(String::from_utf8_lossy(&out)
            .lines()
            .filter(|l| l.contains("/agent-stash/"))
            .filter_map(|l| l.split(' ').next().map(str::to_owned))
            .collect())
    }
}

/// `.../<task>/<attempt>/agent-stash/`, beside the attempt's checkpoint.
fn agent_stash_prefix(checkpoint_ref: &str) -> String {
    let attempt = checkpoint_ref
        .strip_suffix("checkpoint")
        .unwrap_or(checkpoint_ref);
    let attempt = if attempt.ends_with('/') {
        attempt.to_owned()
    } else {
        format!("{attempt}/")
    };
    format!("{attempt}agent-stash/")
}

/// git's own lock on `refs/stash` (`refs/stash.lock`), taken the way git
/// takes it (a git waiting on it retries for a moment), with a marker naming
/// us so a lock left by a killed spectr is recognised and removed.
struct StashLock<'a> {
    cp: &'a Checkpointer,
    lock: PathBuf,
    owner: PathBuf,
    held: bool,
}

/// Next to `refs/stash.lock` while we hold it.
const STASH_LOCK_OWNER: &str = "spectr-ralph-stash.lock.owner";

impl<'a> StashLock<'a> {
    fn take(cp: &'a Checkpointer) -> Result<StashLock<'a>, CheckpointError> {
        let lock = cp.common_dir.join("refs/stash.lock");
        let owner = cp.common_dir.join(STASH_LOCK_OWNER);
        remove_stale_stash_lock(&cp.common_dir);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        loop {
            super::owner::write(&owner);
            match std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&lock)
            {
                Ok(_) => {
                    return Ok(StashLock {
                        cp,
                        lock,
                        owner,
                        held: true,
                    });
                }
                Err(e)
                    if e.kind() == std::io::ErrorKind::AlreadyExists
                        && std::time::Instant::now() < deadline =>
                {
                    std::thread::sleep(std::time::Duration::from_millis(10));
                }
                Err(e) => {
                    let _ = std::fs::remove_file(&owner);
                    return Err(CheckpointError::io("cannot lock the stash", lock, e));
                }
            }
        }
    }

    /// Points `refs/stash` at `commit` (or deletes it), releasing the lock.
    fn set(mut self, commit: Option<&str>) -> Result<(), CheckpointError> {
        let path = self.cp.common_dir.join("refs/stash");
        match commit {
            Some(c) => {
                std::fs::write(&self.lock, format!("{c}\n"))
                    .and_then(|()| std::fs::rename(&self.lock, &path))
                    .map_err(|e| CheckpointError::io("cannot restore the stash", &path, e))?;
                self.held = false;
            }
            None => {
                match std::fs::remove_file(&path) {
                    Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                        return Err(CheckpointError::io("cannot restore the stash", path, e));
                    }
                    _ => {}
                }
                let packed = std::fs::read_to_string(self.cp.common_dir.join("packed-refs"))
                    .unwrap_or_default();
                if packed.lines().any(|l| l.ends_with(" refs/stash")) {
                    // Packed (a gc ran meanwhile): git deletes it there.
                    let cp = self.cp;
                    drop(self);
                    cp.git
                        .cmd([
                            "update-ref",
                            "-m",
                            "spectr ralph: agent's stash kept",
                            "-d",
                            "refs/stash",
                        ])
                        .run()?;
                }
            }
        }
        Ok(())
    }
}

impl Drop for StashLock<'_> {
    fn drop(&mut self) {
        if self.held {
            let _ = std::fs::remove_file(&self.lock);
        }
        let _ = std::fs::remove_file(&self.owner);
    }
}

/// Removes `refs/stash.lock` when the spectr that took it is gone (killed
/// while holding it: every `git stash` would fail on it).
pub(crate) fn remove_stale_stash_lock(common_dir: &std::path::Path) {
    let owner = common_dir.join(STASH_LOCK_OWNER);
    let Ok(marker) = std::fs::read_to_string(&owner) else {
        return;
    };
    if super::owner::is_dead(&marker) {
        let _ = std::fs::remove_file(common_dir.join("refs/stash.lock"));
        let _ = std::fs::remove_file(&owner);
    }
}
