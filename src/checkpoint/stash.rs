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
        let now = self.read_stash_log()?.unwrap_or_default();
        let stash_now = self.head_and_stash()?.stash;
        if then == now && stash_now == meta.stash {
            return Ok(Vec::new());
        }
        let (then_lines, now_lines) = (log_lines(&then), log_lines(&now));
        let short = user_branch.map(|b| b.strip_prefix("refs/heads/").unwrap_or(b));
        let pushed: Vec<&LogLine> = now_lines
            .iter()
            .filter(|l| !then_lines.iter().any(|t| t.new == l.new))
            .collect();
        let (users, agents): (Vec<&LogLine>, Vec<&LogLine>) = pushed
            .into_iter()
            .partition(|l| short.is_some() && made_on(l.message) == short);
        // Entries gone since the checkpoint come back, but not another
        // attempt's agent's, which that attempt already took away.
        let dropped: Vec<&LogLine> = then_lines
            .iter()
            .filter(|t| !now_lines.iter().any(|l| l.new == t.new))
            .collect();
        let claimed = if dropped.is_empty() {
            Vec::new()
        } else {
            self.agent_stash_commits()?
        };
        let keep_then: Vec<&LogLine> = then_lines
            .iter()
            .filter(|t| !claimed.iter().any(|c| c == t.new))
            .collect();
        // The list as recorded keeps its bytes when nothing joins or leaves it.
        let log = if users.is_empty() && keep_then.len() == then_lines.len() {
            then.clone()
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

        let prefix = agent_stash_prefix(&cp.refname);
        let mut script = String::new();
        let mut kept = Vec::new();
        for (n, l) in agents.iter().rev().enumerate() {
            let refname = format!("{prefix}{n}");
            script.push_str(&format!("update {refname} {}\n", l.new));
            kept.push(KeptStash {
                refname,
                message: l.message.to_owned(),
            });
        }
        match (&top, &stash_now) {
            (Some(t), Some(s)) if t == s => {}
            (Some(t), _) => script.push_str(&format!("update refs/stash {t}\n")),
            (None, Some(_)) => script.push_str("delete refs/stash\n"),
            (None, None) => {}
        }
        if !script.is_empty() {
            self.git
                .cmd([
                    "update-ref",
                    "-m",
                    "spectr ralph: agent's stash kept",
                    "--stdin",
                ])
                .stdin(script.into_bytes())
                .run()?;
        }
        let path = self.stash_log_path();
        if top.is_some() {
            crate::model::atomic::write_atomic(&path, &log)
                .map_err(|e| CheckpointError::io("cannot restore the stash list", &path, e))?;
        } else if path.exists() {
            std::fs::remove_file(&path)
                .map_err(|e| CheckpointError::io("cannot restore the stash list", &path, e))?;
        }
        Ok(kept)
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
