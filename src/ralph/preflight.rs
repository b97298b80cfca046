//! What a run checks and repairs before its first task, apart from the
//! session (that is [`crate::ralph::recover`]'s): the state folder, tasks
//! files a status can be written to, what lanes need, and lane work trees a
//! killed run left.

use crate::checkpoint::Checkpointer;
use crate::model::TaskSet;
use crate::ralph::config::RunConfig;
use crate::ralph::event::{LoopEvent, NoticeLevel, Reporter};
use std::path::PathBuf;

/// Why a run cannot start. Each names the file or folder and what to do.
#[derive(Debug, thiserror::Error, miette::Diagnostic)]
pub enum PreflightError {
    #[error("could not create {}", path.display())]
    Create {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    #[error("could not write {}", path.display())]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    #[error("could not read {}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    /// The owner's "don't touch": spectr never replaces a read-only file.
    #[error("{} is read-only: the run could not record any task's status in it", path.display())]
    #[diagnostic(help(
        "make it writable (chmod u+w {}) and run again; spectr never replaces a read-only file",
        path.display()
    ))]
    ReadOnly { path: PathBuf },

    /// Immutable, or otherwise refused for writing.
    #[error("{} cannot be written ({cause}): the run could not record any task's status in it", path.display())]
    #[diagnostic(help(
        "make the file writable (for example `chattr -i` if it is immutable) and run again"
    ))]
    Unwritable {
        path: PathBuf,
        /// Said in the message, not as a cause below it.
        cause: std::io::Error,
    },

    /// An atomic write replaces the file: its folder must be writable.
    #[error("{} cannot be replaced: its folder is not writable, so the run could not record any task's status", path.display())]
    #[diagnostic(help("make {} writable and run again", dir.display()))]
    FolderUnwritable { path: PathBuf, dir: PathBuf },

    #[error("--jobs runs each lane in a git work tree, and {} is not in a git repository", workdir.display())]
    #[diagnostic(help("run it inside a git repository, or drop --jobs to run one task at a time"))]
    LanesNeedRepo { workdir: PathBuf },

    #[error(
        "--jobs runs each lane in a git work tree checked out from a commit, and this repository has none yet"
    )]
    #[diagnostic(help("make a first commit, or drop --jobs to run one task at a time"))]
    LanesNeedCommit,

    #[error("--jobs merges each lane's work back onto yours: {detail}")]
    #[diagnostic(help(
        "install a newer git (and put it first on PATH), or drop --jobs to run one task at a time"
    ))]
    LanesNeedNewerGit { detail: String },

    #[error(
        "--commit task commits each task on the branch the run starts on, and HEAD is detached"
    )]
    #[diagnostic(help(
        "switch to a branch (git switch <branch>, or git switch -c <new-branch>), or run with --commit off (`ralph: commit: off`)"
    ))]
    CommitDetached,

    #[error(
        "--commit task commits each task as you, and git has no identity for you here: {detail}"
    )]
    #[diagnostic(help(
        "set one (git config --global user.name \"Your Name\"; git config --global user.email you@example.com), or run with --commit off (`ralph: commit: off`)"
    ))]
    CommitIdentity { detail: String },

    #[error(
        "--commit task: this repository asks for signed commits (commit.gpgsign), and spectr does not sign the commits it makes (a passphrase prompt would stall an unattended run)"
    )]
    #[diagnostic(help(
        "run with --commit off (`ralph: commit: off`) and commit yourself, or turn signing off for this repository (git config commit.gpgsign false)"
    ))]
    CommitSigning,

    /// Every remote attempt goes through the remote: unreachable now, it
    /// would fail them all.
    #[error("the lanes' remote {url} cannot be reached from here: {detail}")]
    #[diagnostic(help(
        "check the URL (--lane-remote, ralph: lanes: remote) and that `git ls-remote {url}` works here and from the lanes"
    ))]
    LaneRemoteUnreachable { url: String, detail: String },
}

/// Prepares `<change>/.ralph/` with a `.gitignore` so its files never show up in
/// the user's `git status`.
pub(crate) fn prepare_state_dir(cfg: &RunConfig) -> Result<(), PreflightError> {
    let dir = cfg.state_dir();
    std::fs::create_dir_all(dir.join("transcripts")).map_err(|source| PreflightError::Create {
        path: dir.clone(),
        source,
    })?;
    // A tasks file write's temporary a killed run left (its owner gone).
    crate::model::atomic::remove_stale_temps(&dir);
    crate::model::atomic::remove_stale_temps(&cfg.change.dir);
    let ignore = dir.join(".gitignore");
    // Rewritten when anyone changed it: everything in here must stay ignored.
    if std::fs::read_to_string(&ignore).ok().as_deref() != Some("*\n") {
        crate::model::atomic::write_atomic(&ignore, b"*\n").map_err(|source| {
            PreflightError::Write {
                path: ignore.clone(),
                source,
            }
        })?;
    }
    Ok(())
}

/// Removes `<change>/.ralph/` again when this run made it and it holds only
/// what [`prepare_state_dir`] and the run's lock put there: a run cancelled
/// before it started leaves nothing behind. Called while the lock is still
/// held; anything else found in the folder (another run's files) keeps it.
pub(crate) fn remove_unused_state_dir(cfg: &RunConfig) {
    let dir = cfg.state_dir();
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return;
    };
    let ours = [crate::ralph::lock::LOCK_FILE, ".gitignore", "transcripts"];
    for entry in entries {
        match entry {
            Ok(e) if ours.iter().any(|o| e.file_name() == *o) => {}
            _ => return,
        }
    }
    // remove_dir refuses a folder that is not empty: a transcript is kept.
    let transcripts = dir.join("transcripts");
    if transcripts.exists() && std::fs::remove_dir(&transcripts).is_err() {
        return;
    }
    let _ = std::fs::remove_file(dir.join(".gitignore"));
    let _ = std::fs::remove_file(dir.join(crate::ralph::lock::LOCK_FILE));
    let _ = std::fs::remove_dir(&dir);
}

/// Refuses tasks files the run could not write a status to, before anything
/// starts: a read-only file is the owner's "don't touch"; an immutable file
/// or an unwritable folder would make every attempt's result unrecordable.
pub(crate) fn check_writable(tasks: &TaskSet) -> Result<(), PreflightError> {
    for file in &tasks.files {
        let path = &file.path;
        let meta = std::fs::metadata(path).map_err(|source| PreflightError::Read {
            path: path.clone(),
            source,
        })?;
        if meta.permissions().readonly() {
            return Err(PreflightError::ReadOnly { path: path.clone() });
        }
        if let Err(cause) = std::fs::OpenOptions::new().append(true).open(path) {
            return Err(PreflightError::Unwritable {
                path: path.clone(),
                cause,
            });
        }
        let dir = path.parent().unwrap_or(&tasks.change_dir);
        if nix::unistd::access(dir, nix::unistd::AccessFlags::W_OK).is_err() {
            return Err(PreflightError::FolderUnwritable {
                path: path.clone(),
                dir: dir.to_path_buf(),
            });
        }
    }
    Ok(())
}

/// `--jobs` above 1 runs lanes in git work trees: they need a repository with
/// at least one commit (a work tree is checked out from one).
pub(crate) fn check_lanes_possible(
    repo: Option<&Checkpointer>,
    cfg: &RunConfig,
) -> Result<(), PreflightError> {
    let Some(cp) = repo else {
        return Err(PreflightError::LanesNeedRepo {
            workdir: cfg.workdir.clone(),
        });
    };
    if crate::ralph::lanes::user_head(cp).is_none() {
        return Err(PreflightError::LanesNeedCommit);
    }
    cp.merges_onto_a_base()
        .map_err(|detail| PreflightError::LanesNeedNewerGit { detail })?;
    if let Some(remote) = &cfg.remote_lanes {
        cp.remote_refs(
            &remote.remote,
            crate::checkpoint::REMOTE_PREFIX,
            crate::ralph::lanes::remote::TRANSFER_TIMEOUT,
        )
        .map_err(|e| PreflightError::LaneRemoteUnreachable {
            url: remote.remote.clone(),
            detail: e.to_string(),
        })?;
    }
    Ok(())
}

/// The run header's word on lanes: where they live and what a new one gets
/// besides your tracked and untracked files.
pub(crate) fn lanes_notice(slots: usize, repo: Option<&Checkpointer>, cfg: &RunConfig) -> String {
    let dir = repo.map_or_else(
        || crate::ralph::lanes::legacy_lanes_dir(cfg),
        |cp| crate::ralph::lanes::lanes_dir(cfg, cp),
    );
    let mut text = format!(
        "running up to {slots} tasks at once, each lane in a git work tree of its own under {}; completed work is merged into your tree task by task",
        dir.display()
    );
    let root = repo.map_or(cfg.workdir.as_path(), |cp| cp.repo_root());
    let include = root.join(crate::checkpoint::INCLUDE_FILE);
    let mut gets = Vec::new();
    if include.is_file() {
        gets.push(format!(
            "the ignored files {} names",
            crate::checkpoint::INCLUDE_FILE
        ));
    }
    if let Some(cmd) = &cfg.lane_setup {
        gets.push(format!("runs the lane setup `{cmd}` before its first task"));
    }
    if gets.is_empty() {
        text.push_str(&format!(
            " (a lane has none of your ignored files: name them in {} or give a --lane-setup command)",
            crate::checkpoint::INCLUDE_FILE
        ));
    } else {
        text.push_str(&format!("; each new lane gets {}", gets.join(" and ")));
    }
    text
}

/// A run that died (kill -9) leaves its lanes' work trees behind: their
/// content is kept under refs, then they are removed. Before the tasks are
/// read, like every other repair.
pub(crate) fn remove_stale_lanes(cp: &Checkpointer, cfg: &RunConfig, say: &mut dyn Reporter) {
    let dir = crate::ralph::lanes::lanes_dir(cfg, cp);
    let legacy = crate::ralph::lanes::legacy_lanes_dir(cfg);
    if legacy != dir {
        // An older spectr's lanes, in the change's .ralph/.
        sweep_lanes(cp, cfg, &legacy, say);
    }
    sweep_lanes(cp, cfg, &dir, say);
}

fn sweep_lanes(cp: &Checkpointer, cfg: &RunConfig, dir: &std::path::Path, say: &mut dyn Reporter) {
    let prefix = crate::ralph::lanes::stale_lanes_prefix(cp, &cfg.change.id);
    match cp.remove_stale_lanes_of(dir, &prefix, Some(&cfg.change.id)) {
        Ok(names) if names.is_empty() => {}
        Ok(names) => say.report(&LoopEvent::Notice {
            level: NoticeLevel::Info,
            message: format!(
                "removed the lane work trees an interrupted run left ({}); what they held is kept under {prefix}/",
                names.join(", ")
            ),
        }),
        Err(e) => say.report(&LoopEvent::Notice {
            level: NoticeLevel::Warn,
            message: format!(
                "could not remove the lane work trees an interrupted run left in {}: {e}",
                dir.display()
            ),
        }),
    }
}

/// `--commit task`, before anything is written or run: HEAD on a branch
/// (an unborn one is fine), an identity to commit as, no signing asked
/// for. The branch (`refs/heads/...`) the run commits on.
pub(crate) fn check_commits(cp: &Checkpointer) -> Result<String, PreflightError> {
    let branch = match cp.current_branch() {
        Ok(Some(b)) => b,
        Ok(None) => return Err(PreflightError::CommitDetached),
        Err(e) => {
            return Err(PreflightError::CommitIdentity {
                detail: e.to_string(),
            });
        }
    };
    if let Err(detail) = cp.user_ident() {
        let detail = detail
            .lines()
            .find(|l| l.starts_with("fatal:"))
            .unwrap_or(detail.lines().last().unwrap_or("unknown"))
            .trim()
            .to_string();
        return Err(PreflightError::CommitIdentity { detail });
    }
    if cp.signing_asked() {
        return Err(PreflightError::CommitSigning);
    }
    Ok(branch)
}
