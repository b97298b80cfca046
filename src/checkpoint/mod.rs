//! Checkpoints of a git working tree that never touch the user's HEAD, branch,
//! index or stash: snapshots built with a temporary index and kept under
//! private refs (`refs/spectr/ralph/@<worktree>/...`, one namespace per work
//! tree so two worktrees running the same change never share a ref).
//!
//! What a snapshot holds: every file git would commit after `git add -A`
//! (tracked files, and untracked files that are not ignored), minus the
//! excluded paths the loop owns, as raw bytes (no clean/smudge filter, no
//! line-ending conversion). The commit message carries what git cannot hold
//! ([`meta`]): real file modes, empty directories, and the stash's reflog.
//! Ignored files and `.git` are neither snapshotted nor ever touched by a
//! revert, and what is ignored is decided by the checkpoint's rules, not by a
//! `.gitignore` the agent edited. Nested repositories and submodules are left
//! alone.
//!
//! A revert first snapshots the failed attempt under its own ref, whose commit
//! keeps any commits the agent made reachable, so a revert never loses work.
//!
//! Every git command runs with a timeout (per command, [`DEFAULT_TIMEOUT`]
//! unless told otherwise) in a process group of its own, killed whole on
//! expiry ([`CheckpointError::Timeout`]). Calls block: the loop runs them off
//! its event thread to stay responsive to a stop request.

mod commit;
mod commit_files;
pub mod conflict_markers;
mod diff;
mod error;
mod exclude;
mod git;
mod head;
mod ident;
mod ignore;
mod include;
mod index_adopt;
mod index_file;
mod kept;
mod lane;
mod listings;
mod merge;
mod merge_attrs;
mod meta;
mod object_id;
pub(crate) use crate::process::owner;
mod planted;
mod ref_files;
mod ref_tx;
mod refs;
mod remote;
mod restore;
mod snapshot;
mod stash;
mod state;
mod temp_index;
mod tree_diff;
mod tree_edit;
mod tree_io;

/// git for unit tests in scratch repositories: no global or system config,
/// a fixed identity; stdout, trimmed, once it succeeded.
#[cfg(test)]
pub(crate) fn test_git(dir: &Path, args: &[&str]) -> String {
    let out = crate::process::Cmd::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_AUTHOR_NAME", "u")
        .env("GIT_AUTHOR_EMAIL", "u@x")
        .env("GIT_COMMITTER_NAME", "u")
        .env("GIT_COMMITTER_EMAIL", "u@x")
        .output(Duration::from_secs(60))
        .expect("git");
    assert!(out.success(), "git {args:?}: {out:?}");
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

pub use commit::{Committed, EditSkipped, Known, NotCommitted, TaskChange};
pub use error::CheckpointError;
pub use head::{HeadSeen, HeadWatch};
pub use include::{INCLUDE_FILE, Included};
pub use lane::{LaneReset, LaneTree};
pub use merge::{CutShortMerge, MergeChange, MergePlan, Remerged};
pub use merge_attrs::MergeNote;
pub use refs::{CleanScope, REF_PREFIX, escape_component};
pub use remote::{REMOTE_PREFIX, remote_attempt_prefix};
pub(crate) use snapshot::both;
pub use stash::KeptStash;
pub use tree_diff::MergeEntry;

use git::Git;
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The default time allowed to each git command.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

/// Takes and restores checkpoints of one repository's work tree.
#[derive(Debug, Clone)]
pub struct Checkpointer {
    git: Git,
    root: PathBuf,
    git_dir: PathBuf,
    /// Shared by all worktrees: refs, objects, the stash and its reflog.
    common_dir: PathBuf,
    /// `main`, or the linked worktree's name: namespaces our refs.
    worktree: String,
    /// Repo-relative paths the loop owns (session file, lock, transcripts).
    excludes: Vec<PathBuf>,
    /// `core.autocrlf` or a global attributes file may have converted the
    /// blobs of the user's index: their cached stats cannot be trusted.
    conversions_configured: bool,
    /// Blobs may be written without git ([`object_id::write_blob`]): a
    /// SHA-1 repository whose objects git would not give shared permissions.
    writes_objects: bool,
    /// `core.excludesFile` or its default location (may not exist).
    excludes_file: Option<PathBuf>,
    /// Object id length in bytes (20 for SHA-1, 32 for SHA-256).
    hash_len: usize,
    /// A parallel lane's worktree (spectr's marker in its git dir): its
    /// reverts leave the stash alone, which every worktree shares.
    lane: bool,
    shared: Arc<Shared>,
}

/// State kept across checkpoints of one run (clones share it).
#[derive(Debug, Default)]
struct Shared {
    /// The user's index last stored: (length, digest, blob id).
    index_blob: Mutex<Option<(u64, u128, String)>>,
    /// Stale temporary folders were cleaned (once per run).
    cleaned: Mutex<bool>,
    /// Large untracked files already warned about.
    warned_large: Mutex<BTreeSet<PathBuf>>,
    /// Per path: the index stat data seen with its real mode and size, so
    /// an untouched file is not stat'ed again.
    /// Keyed by a hash of the path (small at 50k files; a collision cannot
    /// match, the stats differ).
    modes: Mutex<std::collections::HashMap<u64, SeenFile>>,
    /// Checkpoint refs this run created where none existed: ref -> (commit,
    /// number of stash refs written with it), so a drop needs no listing.
    created: Mutex<std::collections::HashMap<String, (String, usize)>>,
    /// The snapshot taken for the last task commit, for the next
    /// checkpoint ([`kept`]).
    kept: Mutex<Option<kept::Kept>>,
    /// Storing the user's index after a task commit ([`Checkpointer::settle`]).
    index_storing: Mutex<Vec<std::thread::JoinHandle<()>>>,
    /// The skipped files (the change's tasks files) in the last task
    /// commit's tree, so the next commit need not read them from git.
    skipped_in: Mutex<Option<commit::SkippedIn>>,
    /// The indexes the last in-process diff read, for the commit's index.
    index_pair: Mutex<Option<index_adopt::IndexPair>>,
    /// Refs of completed attempts' checkpoints to delete with the next ref
    /// transaction this run makes ([`Checkpointer::drop_soon`]), each as
    /// `<ref> <value it must still hold>` or `<ref>`.
    doomed: Mutex<Vec<String>>,
    /// The user's identities for task commits made without git, asked
    /// once ([`ident`]); `None` inside: git makes them.
    idents: std::sync::OnceLock<Option<ident::UserIdents>>,
    /// The work tree's folders as last listed ([`listings`]).
    listings: Mutex<listings::Listings>,
    /// `git version`, asked once.
    git_version: std::sync::OnceLock<Option<(u32, u32)>>,
}

/// A file's index stat data when last seen, with its real mode and size.
type SeenFile = ([u8; 40], u32, u64);

/// The state recorded before an attempt. Stored in the session file so a
/// checkpoint can still be reverted after a crash.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Checkpoint {
    /// The private ref holding `commit`.
    pub refname: String,
    /// Snapshot commit of the work tree (parent: `head`, when there was one).
    pub commit: String,
    /// HEAD's commit; `None` in a repository with no commits yet.
    pub head: Option<String>,
    /// HEAD's branch (`refs/heads/...`); `None` when HEAD was detached.
    pub branch: Option<String>,
    /// Blob id of the user's index file bytes (kept reachable by the ref
    /// [`Checkpointer::index_ref_name`]); `None` when there was no index file.
    pub index: Option<String>,
    /// The snapshot's tree (`commit`'s): a task's commit made from it needs
    /// no git command to find it. Absent in sessions from before it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tree: Option<String>,
    /// Things the user should know about this checkpoint (large untracked
    /// files snapshotted, nested repositories left out). Not persisted.
    #[serde(skip)]
    pub notices: Vec<String>,
}

/// What [`Checkpointer::revert`] did.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reverted {
    /// Where the failed attempt's work is kept.
    pub failed_ref: String,
    pub failed_commit: String,
    /// Files written back from the checkpoint (modified, deleted, mode changed).
    pub files_restored: usize,
    /// Files the attempt added, now removed (they remain in `failed_commit`).
    pub files_removed: usize,
    /// HEAD or its branch had moved (e.g. the agent committed) and was put back.
    pub head_restored: bool,
    /// Things the user should know (nested repositories left alone, a stale
    /// lock removed, the stash put back).
    #[serde(default)]
    pub notices: Vec<String>,
}

/// git, found on PATH once: every git command then starts without a search
/// through PATH (each miss is a failed exec, a few per command on a long
/// PATH, and a checkpoint runs several).
pub(crate) fn git_program() -> PathBuf {
    which::which("git").unwrap_or_else(|_| PathBuf::from("git"))
}

impl Checkpointer {
    /// Whether this git merges onto a given base ([`git::MERGE_BASE_GIT`]);
    /// else which git it is, in words. A git whose version cannot be read
    /// is given the benefit of the doubt.
    pub fn merges_onto_a_base(&self) -> Result<(), String> {
        match self.git.version() {
            Some(v) if v < git::MERGE_BASE_GIT => Err(format!(
                "{} is git {}.{}, and spectr needs git {}.{} or newer for this (git merge-tree --merge-base)",
                self.git.program.display(),
                v.0,
                v.1,
                git::MERGE_BASE_GIT.0,
                git::MERGE_BASE_GIT.1
            )),
            _ => Ok(()),
        }
    }

    /// `Ok(None)` when `dir` is not inside a git work tree (the loop then runs
    /// without checkpoints).
    pub fn discover(
        dir: &Path,
        timeout: Duration,
    ) -> Result<Option<Checkpointer>, CheckpointError> {
        Self::discover_with_program(dir, timeout, git_program())
    }

    /// [`Checkpointer::discover`] with another git executable.
    pub fn discover_with_program(
        dir: &Path,
        timeout: Duration,
        program: PathBuf,
    ) -> Result<Option<Checkpointer>, CheckpointError> {
        let cp = Self::discover_unchecked(dir, timeout, program)?;
        if let Some(cp) = &cp {
            // A merge or rebase in progress cannot be checkpointed faithfully:
            // refuse before the loop starts.
            cp.check_no_operation_in_progress()?;
        }
        Ok(cp)
    }

    /// [`Checkpointer::discover_with_program`] without refusing an operation
    /// in progress (a lane being removed may have one).
    pub(crate) fn discover_unchecked(
        dir: &Path,
        timeout: Duration,
        program: PathBuf,
    ) -> Result<Option<Checkpointer>, CheckpointError> {
        if let Err(source) = std::fs::metadata(dir) {
            return Err(CheckpointError::io(
                "cannot look for a git repository in",
                dir,
                source,
            ));
        }
        let probe = Git {
            program,
            timeout,
            cwd: dir.to_owned(),
            git_dir: None,
            common_dir: None,
            work_tree: None,
            attr_source: None,
        };
        // The one command that honours GIT_DIR / GIT_WORK_TREE: a repository
        // used through them gets checkpoints; every later command is pinned
        // to what this finds.
        let out = probe
            .cmd(DISCOVER_ARGS)
            .inherit_repo_env()
            .c_locale()
            .output()?;
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        let mut lines = stdout.lines();
        let inside = lines.next();
        // Inside `.git` or a bare repository git says "false": no work tree.
        if inside == Some("false") {
            return Ok(None);
        }
        if !out.status.success() {
            let stderr = out.stderr_text();
            if stderr.contains("not a git repository") {
                return Ok(None);
            }
            return Err(CheckpointError::Git {
                command: format!("git {}", DISCOVER_ARGS.join(" ")),
                code: out.status.code(),
                stderr,
            });
        }
        let (Some("true"), Some(root), Some(git_dir), Some(common_dir), Some(format)) = (
            inside,
            lines.next(),
            lines.next(),
            lines.next(),
            lines.next(),
        ) else {
            return Err(CheckpointError::Unexpected {
                command: format!("git {}", DISCOVER_ARGS.join(" ")),
                output: stdout,
            });
        };
        let (root, git_dir) = (PathBuf::from(root), PathBuf::from(git_dir));
        let common_dir = PathBuf::from(common_dir);
        let empty_tree = match format {
            "sha256" => "6ef19b41225c5369f1c104d45d8d85efa9b057b53b14b4b9b939dd74decc5321",
            _ => "4b825dc642cb6eb9a060e54bf8d69288fbee4904",
        };
        let worktree = if same_dir(&git_dir, &common_dir) {
            "main".to_owned()
        } else {
            git_dir
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_else(|| "main".to_owned())
        };
        let git = Git {
            cwd: root.clone(),
            git_dir: Some(git_dir.clone()),
            common_dir: Some(common_dir.clone()),
            work_tree: Some(root.clone()),
            attr_source: Some(empty_tree.to_owned()),
            ..probe
        };
        let config = user_config(&git);
        let cp = Checkpointer {
            git,
            root,
            common_dir,
            worktree,
            excludes: Vec::new(),
            conversions_configured: config.conversions,
            writes_objects: format != "sha256" && !config.shared,
            excludes_file: config.excludes_file,
            hash_len: if format == "sha256" { 32 } else { 20 },
            lane: lane::is_lane_git_dir(&git_dir),
            git_dir,
            shared: Arc::default(),
        };
        Ok(Some(cp))
    }

    /// Use another git executable (tests inject a slow one).
    pub fn with_git_program(mut self, program: PathBuf) -> Self {
        self.git.program = program;
        self
    }

    /// Change the time allowed to each git command.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.git.timeout = timeout;
        self
    }

    /// Paths never snapshotted nor reverted: absolute, or relative to the repo
    /// root; they need not exist yet. Paths outside the work tree are ignored.
    pub fn with_excludes(mut self, paths: Vec<PathBuf>) -> Self {
        self.excludes = paths
            .iter()
            .filter_map(|p| exclude::repo_relative(&self.root, p))
            .collect();
        self.excludes.sort();
        self.excludes.dedup();
        self
    }

    /// Makes git ignore files named `name` anywhere in the repository (all
    /// its work trees) through `info/exclude`, without touching the user's
    /// `.gitignore`. Written once: true when the entry was added now.
    pub fn ignore_everywhere(&self, name: &str, why: &str) -> Result<bool, CheckpointError> {
        let path = self.common_dir.join("info").join("exclude");
        exclude::add_info_exclude(&path, name, why)
            .map_err(|e| CheckpointError::io("cannot add an entry to", &path, e))
    }

    /// The work tree's top directory (as git reports it, symlinks resolved).
    pub fn repo_root(&self) -> &Path {
        &self.root
    }

    /// The repository's git directory (per work tree for linked worktrees).
    pub fn git_dir(&self) -> &Path {
        &self.git_dir
    }

    /// The excluded paths, repo-relative.
    pub fn excludes(&self) -> &[PathBuf] {
        &self.excludes
    }

    pub fn timeout(&self) -> Duration {
        self.git.timeout
    }

    /// A read-only git command (`git log`, for a person to read) run the way
    /// every command of ours is: no hook, fsmonitor, pager, signature
    /// program or filter of the repository's. A non-zero exit with nothing
    /// on stderr (no such ref) is an empty answer.
    pub fn read_git(&self, args: &[&str]) -> Result<String, CheckpointError> {
        let out = self.git.cmd(args).c_locale().output()?;
        let stderr = out.stderr_text();
        if !out.status.success() && !stderr.is_empty() {
            return Err(CheckpointError::Git {
                command: format!("git {}", args.join(" ")),
                code: out.status.code(),
                stderr,
            });
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// This work tree's name in our ref layout: `main`, or the linked
    /// worktree's name (as under `.git/worktrees/`).
    pub fn worktree_name(&self) -> &str {
        &self.worktree
    }

    /// `refs/spectr/ralph/@<worktree>/<change>/<task>/<attempt>/checkpoint`,
    /// with the ids escaped so any id makes a valid, distinct ref name.
    pub fn ref_name(&self, change: &str, task: &str, attempt: u32) -> String {
        refs::attempt_ref(&self.worktree, change, task, attempt, "checkpoint")
    }

    /// `refs/spectr/ralph/@<worktree>/<change>/<task>/<attempt>/failed`:
    /// where a reverted attempt's work is kept.
    pub fn failed_ref_name(&self, change: &str, task: &str, attempt: u32) -> String {
        refs::attempt_ref(&self.worktree, change, task, attempt, "failed")
    }

    /// The ref keeping a checkpoint's copy of the user's index reachable.
    pub fn index_ref_name(checkpoint_ref: &str) -> String {
        format!("{checkpoint_ref}-index")
    }

    /// The folder of refs keeping the checkpoint's stash entries reachable.
    pub fn stash_refs_prefix(checkpoint_ref: &str) -> String {
        format!("{checkpoint_ref}-stash/")
    }
}

const DISCOVER_ARGS: &[&str] = &[
    "rev-parse",
    "--is-inside-work-tree",
    "--show-toplevel",
    "--absolute-git-dir",
    "--path-format=absolute",
    "--git-common-dir",
    "--show-object-format",
];

/// What the user's git config says about conversions and ignore rules.
struct UserConfig {
    /// `core.autocrlf`, or a global attributes file, may convert files on
    /// `git add` beyond what `.gitattributes` files say.
    conversions: bool,
    /// `core.excludesFile` (or its default), for the checkpoint's ignore rules.
    excludes_file: Option<PathBuf>,
    /// `core.sharedRepository` is set (objects get group permissions), or
    /// `extensions.compatObjectFormat` (git maps every object it writes):
    /// objects are written by git only.
    shared: bool,
}

fn user_config(git: &Git) -> UserConfig {
    let out = git
        .cmd([
            "config",
            "-z",
            "--type=path",
            "--get-regexp",
            r"^(core\.(autocrlf|attributesfile|excludesfile|sharedrepository)|extensions\.compatobjectformat)$",
        ])
        .user_config()
        .output();
    let (mut autocrlf, mut attributes_file, mut excludes_file) = (false, None, None);
    let mut shared = false;
    if let Ok(out) = &out {
        for item in out.stdout.split(|&b| b == 0).filter(|i| !i.is_empty()) {
            let text = String::from_utf8_lossy(item);
            let (key, value) = text.split_once('\n').unwrap_or((&text, ""));
            match key {
                "core.autocrlf" => autocrlf = !matches!(value, "false" | "no" | "off" | "0"),
                "core.attributesfile" => attributes_file = Some(PathBuf::from(value)),
                "core.excludesfile" => excludes_file = Some(PathBuf::from(value)),
                "core.sharedrepository" => {
                    shared = !matches!(value, "false" | "no" | "off" | "0" | "umask");
                }
                // Git keeps a second id for every object it writes there:
                // objects are git's to write.
                "extensions.compatobjectformat" => shared = true,
                _ => {}
            }
        }
    }
    let xdg = |name: &str| {
        std::env::var_os("XDG_CONFIG_HOME")
            .filter(|x| !x.is_empty())
            .map(|x| PathBuf::from(x).join("git").join(name))
            .or_else(|| {
                std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".config/git").join(name))
            })
    };
    let attributes = attributes_file.or_else(|| xdg("attributes"));
    UserConfig {
        conversions: out.is_err()
            || autocrlf
            || attributes.is_some_and(|p| std::fs::metadata(p).is_ok_and(|m| m.len() > 0)),
        excludes_file: excludes_file.or_else(|| xdg("ignore")),
        shared: out.is_err() || shared,
    }
}

fn same_dir(a: &Path, b: &Path) -> bool {
    a == b || matches!((a.canonicalize(), b.canonicalize()), (Ok(x), Ok(y)) if x == y)
}
