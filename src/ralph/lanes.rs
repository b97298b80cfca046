//! Parallel lanes (`--jobs N`): each slot runs its attempts in a git worktree
//! of its own outside the user's tree (see [`lanes_dir`]), refreshed from the user's tree
//! before every task, and merges a completed task's work back into the user's
//! tree with a three-way merge. The user's HEAD, branch, index and stash are
//! never touched; every merge checkpoints the user's tree first.
//!
//! One [`Gate`] guards the user's tree between lanes: merges take it one at
//! a time, and a lane never starts from a half-merged tree.

use crate::checkpoint::{
    Checkpoint, CheckpointError, Checkpointer, CutShortMerge, KeptStash, LaneTree, MergePlan,
};
use crate::model::{TaskId, TaskSet};
use crate::ralph::attempt::{self, AttemptEnv, AttemptReport, AttemptRequest, LaneInfo, MergeBack};
use crate::ralph::config::RunConfig;
use crate::ralph::control::{ActiveAgents, Control};
use crate::ralph::error::LaneError;
use crate::ralph::event::{CompletedVia, LoopEvent, MergeWork, NoticeLevel, Outcome};
use crate::ralph::lane_setup::{self, SetupEnd};
use crate::ralph::learnings;
use crate::ralph::watch::TasksWatcher;
use crate::ralph::worker::Work;
use crossbeam_channel::Receiver;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};

/// Where the run's lane work trees live:
/// `$XDG_CACHE_HOME/spectr/lanes/<tree>-<hash>/<change>` (`~/.cache` without
/// it), one folder per user work tree and change. Outside the user's tree
/// on purpose: tools that walk upward from a lane inside it find the user's
/// files (Node resolves the user's `node_modules` and writes its caches
/// there, pyenv reads the user's `.python-version`, cargo the user's
/// `.cargo/config.toml` and its `target-dir`, Claude Code the user's
/// `CLAUDE.md` and `CLAUDE.local.md`). Without a cache folder, or when it
/// lies inside the user's tree, lanes go to the old place,
/// [`legacy_lanes_dir`].
pub fn lanes_dir(cfg: &RunConfig, user: &Checkpointer) -> PathBuf {
    let get = |var: &str| std::env::var_os(var);
    lanes_dir_in(&get, user.repo_root(), &cfg.change.id).unwrap_or_else(|| legacy_lanes_dir(cfg))
}

/// `<change>/.ralph/lanes`: where lanes lived before (ignored, in the
/// user's tree); a crashed older run's lanes are still swept from there.
pub fn legacy_lanes_dir(cfg: &RunConfig) -> PathBuf {
    cfg.state_dir().join("lanes")
}

fn lanes_dir_in(
    get: &dyn Fn(&str) -> Option<std::ffi::OsString>,
    user_root: &Path,
    change: &str,
) -> Option<PathBuf> {
    let absolute = |v: std::ffi::OsString| Some(PathBuf::from(v)).filter(|p| p.is_absolute());
    let cache = get("XDG_CACHE_HOME")
        .and_then(absolute)
        .or_else(|| get("HOME").and_then(absolute).map(|h| h.join(".cache")))?;
    let cache = cache.canonicalize().unwrap_or(cache);
    if cache.starts_with(user_root) {
        return None;
    }
    Some(
        cache
            .join("spectr/lanes")
            .join(tree_key(user_root))
            .join(change),
    )
}

/// `<folder name>-<hash of the path>`: readable, and one per work tree.
fn tree_key(root: &Path) -> String {
    use std::os::unix::ffi::OsStrExt;
    let name: String = root
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "._-".contains(c) {
                c
            } else {
                '_'
            }
        })
        .take(40)
        .collect();
    // FNV-1a: stable across runs, builds and platforms (a lane must be
    // found again by the next run after a crash).
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in root.as_os_str().as_bytes() {
        hash ^= u64::from(b);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    format!("{}-{hash:016x}", name.trim_start_matches('.'))
}

/// The refs namespace of `change` in the user's work tree, e.g.
/// `refs/spectr/ralph/@main/<change>`.
fn change_refs(user: &Checkpointer, change: &str) -> String {
    let probe = user.ref_name(change, "lanes", 0);
    probe
        .strip_suffix("/lanes/0/checkpoint")
        .unwrap_or(&probe)
        .to_string()
}

/// Where a crashed run's lanes are kept when a resume removes them.
pub fn stale_lanes_prefix(user: &Checkpointer, change: &str) -> String {
    format!("{}/lanes", change_refs(user, change))
}

/// Guards the user's tree between lanes. Merges (and lane creation) take
/// turns; a snapshot for a lane's refresh does not wait for them, but is
/// taken again when a merge wrote files while it was being taken.
#[derive(Debug, Default)]
pub struct Gate {
    turn: Mutex<()>,
    /// Odd while a merge writes into the user's tree; bumped twice per write.
    writes: AtomicU64,
}

/// Marks a write into the user's tree for as long as it lives.
struct Writing<'a>(&'a AtomicU64);

impl Drop for Writing<'_> {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

impl Gate {
    fn turn(&self) -> MutexGuard<'_, ()> {
        // A panicking holder left nothing half-done that the lock protects
        // (writes are atomic per file, and a merge's own revert covers the
        // rest); go on.
        self.turn
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Call with the turn held, around the writes.
    fn writing(&self) -> Writing<'_> {
        self.writes.fetch_add(1, Ordering::SeqCst);
        Writing(&self.writes)
    }

    /// `take` (a snapshot of the user's tree) as of a moment no merge was
    /// writing. After a few unlucky tries it waits for its turn instead.
    fn consistent<T, E>(&self, take: &mut dyn FnMut() -> Result<T, E>) -> Result<T, E> {
        for _ in 0..3 {
            let before = self.writes.load(Ordering::SeqCst);
            if before % 2 == 1 {
                drop(self.turn());
                continue;
            }
            let taken = take()?;
            if self.writes.load(Ordering::SeqCst) == before {
                return Ok(taken);
            }
        }
        let _turn = self.turn();
        take()
    }
}

/// The user's HEAD commit; None before the first commit (or when git
/// cannot say, which `--jobs` then refuses the same way).
pub fn user_head(user: &Checkpointer) -> Option<String> {
    user.resolve_commit("HEAD")
        .ok()
        .flatten()
        .filter(|s| !s.is_empty())
}

/// One slot's lane: its work tree and what the next attempt needs.
pub struct Lane<'a> {
    pub name: String,
    pub path: PathBuf,
    user: Checkpointer,
    gate: &'a Gate,
    /// The run's settings with the agent's folder moved into the lane.
    cfg: RunConfig,
    /// The lane's project root and change folder (the user's, mapped).
    change_dir: PathBuf,
    tree: Option<LaneTree>,
    /// The user's tree the lane was last refreshed from: the merge base.
    base: String,
    watcher: Option<TasksWatcher>,
    /// The last attempt run here, whose commits a refresh keeps.
    last: Option<(TaskId, u32)>,
    /// The lane's own work-tree lock: no other run works in it.
    lock: Option<crate::ralph::lock::RunLock>,
    /// What `.worktreeinclude` names was brought into the work tree.
    brought: bool,
    /// The lane setup command ran to its end (or there is none).
    set_up: bool,
}

impl<'a> Lane<'a> {
    pub fn new(slot: usize, user: Checkpointer, gate: &'a Gate, cfg: &RunConfig) -> Lane<'a> {
        let name = format!("lane-{}", slot + 1);
        let path = lanes_dir(cfg, &user).join(&name);
        let map = |p: &Path| match p.strip_prefix(user.repo_root()) {
            Ok(rel) if !rel.as_os_str().is_empty() => path.join(rel),
            _ => path.clone(),
        };
        let mut lane_cfg = cfg.clone();
        lane_cfg.workdir = map(&cfg.workdir);
        let change_dir = map(&cfg.change.dir);
        Lane {
            name,
            path,
            user,
            gate,
            cfg: lane_cfg,
            change_dir,
            tree: None,
            base: String::new(),
            watcher: None,
            last: None,
            lock: None,
            brought: false,
            set_up: false,
        }
    }

    /// Makes the lane's tree the user's tree as it is now (merged work of
    /// other lanes included).
    fn refresh(&mut self, emit: &mut dyn FnMut(LoopEvent)) -> Result<(), LaneError> {
        let (user, name) = (&self.user, &self.name);
        let tree = self.gate.consistent(&mut || {
            user.snapshot_tree().map_err(|source| LaneError::Snapshot {
                lane: name.clone(),
                source,
            })
        })?;
        let head = user_head(&self.user);
        match &self.tree {
            // Created in turn: two `git worktree add` at once race on
            // creating `.git/worktrees/`.
            None => {
                let turn = self.gate.turn();
                let lane = self
                    .user
                    .open_lane(&self.path, &tree, head.as_deref())
                    .map_err(|source| LaneError::Create {
                        path: self.path.clone(),
                        source,
                    })?;
                let lock = crate::ralph::lock::RunLock::acquire_tree(
                    lane.checkpointer.git_dir(),
                    &self.cfg.change.id,
                )
                .map_err(|source| LaneError::Lock { source })?;
                self.lock = Some(lock);
                self.tree = Some(lane);
                drop(turn);
            }
            Some(lane) => {
                let keep = self.last.as_ref().map(|(task, n)| {
                    format!(
                        "{}/{}/{n}/lane-commits",
                        change_refs(&self.user, &self.cfg.change.id),
                        crate::checkpoint::escape_component(task.as_str())
                    )
                });
                let reset = lane
                    .reset_to(&tree, head.as_deref(), keep.as_deref())
                    .map_err(|source| LaneError::Refresh {
                        path: self.path.clone(),
                        source,
                    })?;
                for message in reset.notices {
                    emit(LoopEvent::Notice {
                        level: NoticeLevel::Info,
                        message: format!("{}: {message}", self.name),
                    });
                }
                if let Some(kept) = reset.kept_commits {
                    emit(LoopEvent::Notice {
                        level: NoticeLevel::Info,
                        message: format!(
                            "commits the agent made in {} are kept at {kept} (your branch did not move)",
                            self.name
                        ),
                    });
                }
            }
        }
        self.base = tree;
        Ok(())
    }

    /// One attempt at `work.task` in this lane.
    pub fn attempt(
        &mut self,
        work: &Work,
        controls: &Receiver<Control>,
        active: &ActiveAgents,
        agent_batch: &attempt::AgentBatch<'_>,
        emit: &mut dyn FnMut(LoopEvent),
    ) -> AttemptReport {
        if let Err(e) = self.refresh(emit) {
            let detail = e.to_string();
            return self.failed_to_start(work, Outcome::GitError { detail }, emit);
        }
        if let Some(report) = self.prepare(work, controls, active, agent_batch, emit) {
            return report;
        }
        let mut tasks = match TaskSet::load(&self.change_dir) {
            Ok(t) => t,
            Err(e) => {
                let detail = format!("the lane's tasks files do not load: {e}");
                return self.failed_to_start(work, Outcome::Abnormal { detail }, emit);
            }
        };
        let Some(lane_tree) = self.tree.clone() else {
            let detail = "the lane has no work tree".to_string();
            return self.failed_to_start(work, Outcome::GitError { detail }, emit);
        };
        let skip = tasks_files_in_repo(&tasks, &lane_tree.path);
        let merge = LaneMerge {
            user: &self.user,
            lane: &lane_tree.checkpointer,
            gate: self.gate,
            base: self.base.clone(),
            skip,
            change: self.cfg.change.id.clone(),
            lane_key: lane_key(&work.task),
        };
        let agent_env = self.agent_env(&lane_tree);
        let change_dir = &self.change_dir;
        let watcher: &TasksWatcher = self
            .watcher
            .get_or_insert_with(|| TasksWatcher::start(std::slice::from_ref(change_dir)));
        let lane_learnings = learnings::path(&self.change_dir);
        let _ = std::fs::remove_file(&lane_learnings);
        let env = AttemptEnv {
            cfg: &self.cfg,
            checkpointer: Some(lane_tree.checkpointer.clone()),
            controls: controls.clone(),
            watcher,
            active: active.clone(),
            lane: Some(LaneInfo {
                key: lane_key(&work.task),
                worktree: self.path.clone(),
                env: agent_env,
            }),
            merge: Some(&merge),
            agent_batch: Some(agent_batch),
        };
        let req = AttemptRequest {
            task: &work.task,
            attempt: work.attempt,
            max_attempts: work.max_attempts,
            retry_reason: work.retry_reason.as_deref(),
            position: work.position,
        };
        let report = attempt::run(&env, &mut tasks, &req, emit);
        drop(env);
        self.last = Some((work.task.clone(), work.attempt));
        self.import_learnings(&lane_learnings, &work.task, emit);
        report
    }

    /// Variables an agent (or the setup command) in this lane gets on top
    /// of spectr's own.
    fn agent_env(&self, lane: &LaneTree) -> Vec<(String, String)> {
        lane_env(
            &|var| std::env::var_os(var),
            self.user.repo_root(),
            &lane.path,
            lane.checkpointer.git_dir(),
        )
    }

    /// Once per lane, before its first task: brings what `.worktreeinclude`
    /// names into the new work tree, then runs the lane setup command.
    /// `Some` when the attempt must not start: the setup was stopped on
    /// request, or failed (which stops the run: it is spectr's own failure,
    /// not the agent's attempt, and would fail again for every task).
    fn prepare(
        &mut self,
        work: &Work,
        controls: &Receiver<Control>,
        active: &ActiveAgents,
        agent_batch: &attempt::AgentBatch<'_>,
        emit: &mut dyn FnMut(LoopEvent),
    ) -> Option<AttemptReport> {
        let lane = self.tree.clone()?;
        if !self.brought {
            self.brought = true;
            // The lane's `.ralph/` (where the prompt's learnings file is)
            // exists and ignores itself, as the user's does. Best effort:
            // `spectr learn` makes it too.
            let state = self.change_dir.join(crate::ralph::config::STATE_DIR);
            if !state.join(".gitignore").exists() {
                let _ = std::fs::create_dir_all(&state)
                    .and_then(|()| std::fs::write(state.join(".gitignore"), "*\n"));
            }
            let started = std::time::Instant::now();
            match self.user.bring_included(&lane.path) {
                Ok(None) => {}
                Ok(Some(brought)) => {
                    // Nothing more to do for checkpoints and merge-back:
                    // only ignored paths are brought, and they are as
                    // ignored in the lane as in the user's tree.
                    emit(LoopEvent::Notice {
                        level: NoticeLevel::Info,
                        message: format!(
                            "{}: {}",
                            self.name,
                            lane_setup::included_summary(&brought, started.elapsed())
                        ),
                    });
                }
                Err(e) => {
                    let message = format!(
                        "could not bring the files {} names into {} ({}): {e}",
                        crate::checkpoint::INCLUDE_FILE,
                        self.name,
                        lane.path.display()
                    );
                    return Some(lane_setup::stopped(&work.task, message, emit));
                }
            }
        }
        if self.set_up {
            return None;
        }
        let Some(cmd) = self.cfg.lane_setup.clone() else {
            self.set_up = true;
            return None;
        };
        emit(LoopEvent::Notice {
            level: NoticeLevel::Info,
            message: format!(
                "{}: lane setup `{cmd}` (before task {}; output under [{}])",
                self.name, work.task, work.task
            ),
        });
        let started = std::time::Instant::now();
        let setup = lane_setup::Setup {
            cmd: &cmd,
            dir: &self.cfg.workdir,
            lane: &self.name,
            env: self.agent_env(&lane),
            task: &work.task,
            attempt: work.attempt,
        };
        match lane_setup::run(&setup, &self.cfg, controls, active, Some(agent_batch), emit) {
            SetupEnd::Done => {
                self.set_up = true;
                emit(LoopEvent::Notice {
                    level: NoticeLevel::Info,
                    message: format!(
                        "{}: lane setup done in {}",
                        self.name,
                        lane_setup::short_duration(started.elapsed())
                    ),
                });
                None
            }
            SetupEnd::Stopped(action) => Some(AttemptReport {
                outcome: Outcome::Stopped { action },
                fatal: None,
            }),
            SetupEnd::Failed(message) => Some(lane_setup::stopped(&work.task, message, emit)),
        }
    }

    /// `spectr learn` run by an agent in the lane wrote the lane's copy of
    /// the learnings file: its entries go to the user's.
    fn import_learnings(&self, lane_file: &Path, task: &TaskId, emit: &mut dyn FnMut(LoopEvent)) {
        let Ok(text) = learnings::read(lane_file) else {
            return;
        };
        let user_file = learnings::path(&self.cfg.change.dir);
        let have = learnings::read(&user_file).unwrap_or_default();
        for entry in learnings::entries(&text) {
            if have.contains(&entry) {
                continue;
            }
            match learnings::append(&user_file, Some(task), &entry) {
                Ok(()) => emit(LoopEvent::Learning {
                    task: task.clone(),
                    text: entry,
                }),
                Err(e) => emit(LoopEvent::Notice {
                    level: NoticeLevel::Warn,
                    message: format!(
                        "could not save a learning of task {task} to {}: {e}",
                        user_file.display()
                    ),
                }),
            }
        }
        let _ = std::fs::remove_file(lane_file);
    }

    /// An attempt that ended before its agent could start: still a started
    /// and failed attempt, so it is counted like any other.
    fn failed_to_start(
        &self,
        work: &Work,
        outcome: Outcome,
        emit: &mut dyn FnMut(LoopEvent),
    ) -> AttemptReport {
        emit(LoopEvent::TaskStarted {
            task: work.task.clone(),
            section: work.section.clone(),
            description: work.description.clone(),
            attempt: work.attempt,
            max_attempts: work.max_attempts,
            transcript: self
                .cfg
                .transcript_path(&work.task, work.attempt)
                .display()
                .to_string(),
            index: work.position.0,
            count: work.position.1,
            lane: Some(lane_key(&work.task)),
            worktree: Some(self.path.display().to_string()),
        });
        emit(LoopEvent::TaskFailed {
            task: work.task.clone(),
            attempt: work.attempt,
            outcome: outcome.clone(),
            receipt: crate::agent::receipt::Receipt::none(),
        });
        AttemptReport {
            outcome,
            fatal: None,
        }
    }

    /// Removes the lane's work tree at the end of the run. What it holds is
    /// either merged or reverted by now; it is kept under a ref anyway.
    pub fn close(self, emit: &mut dyn FnMut(LoopEvent)) {
        drop(self.lock);
        let Some(tree) = self.tree else {
            return;
        };
        let _ = tree.checkpointer.clean(
            &self.cfg.change.id,
            crate::checkpoint::CleanScope::Checkpoints,
        );
        // Not a checkpoint ref: the end of a successful run removes those,
        // and this one may hold the commits of the lane's last task.
        let keep = format!(
            "{}/{}",
            stale_lanes_prefix(&self.user, &self.cfg.change.id),
            crate::checkpoint::escape_component(&self.name)
        );
        if let Err(e) = self.user.remove_lane(&self.path, &keep) {
            emit(LoopEvent::Notice {
                level: NoticeLevel::Warn,
                message: format!(
                    "could not remove the lane work tree {}: {e} (the next run removes it)",
                    self.path.display()
                ),
            });
        }
    }
}

impl crate::ralph::executor::Executor for Lane<'_> {
    fn attempt(
        &mut self,
        work: &mut Work,
        env: &crate::ralph::executor::SlotEnv<'_, '_>,
        emit: &mut dyn FnMut(LoopEvent),
    ) -> (AttemptReport, Option<TaskSet>) {
        let report = Lane::attempt(self, work, env.controls, env.active, env.agent_batch, emit);
        (report, None)
    }

    fn close(self: Box<Self>, emit: &mut dyn FnMut(LoopEvent)) {
        Lane::close(*self, emit);
    }
}

/// What an agent in the lane at `lane` (git dir `lane_git_dir`) gets
/// instead of spectr's own values, which name the user's tree: the git
/// variables that pick a repository (a run through `GIT_DIR` and
/// `GIT_WORK_TREE` would have the lane's agent work on the user's tree and
/// index), and `SPECTR_ROOT` (which `spectr task done` would follow to the
/// user's tasks file). Only variables spectr itself has are set.
fn lane_env(
    get: &dyn Fn(&str) -> Option<std::ffi::OsString>,
    user_root: &Path,
    lane: &Path,
    lane_git_dir: &Path,
) -> Vec<(String, String)> {
    let mut env = Vec::new();
    let text = |p: &Path| p.display().to_string();
    for (var, value) in [
        ("GIT_DIR", text(lane_git_dir)),
        ("GIT_WORK_TREE", text(lane)),
        ("GIT_INDEX_FILE", text(&lane_git_dir.join("index"))),
    ] {
        if get(var).is_some() {
            env.push((var.to_string(), value));
        }
    }
    if let Some(root) = get(crate::model::project::SPECTR_ROOT_ENV) {
        let root = PathBuf::from(root);
        let root = std::path::absolute(&root).unwrap_or(root);
        let inside = root
            .strip_prefix(user_root)
            .ok()
            .map(Path::to_path_buf)
            .or_else(|| {
                let real = root.canonicalize().ok()?;
                real.strip_prefix(user_root).ok().map(Path::to_path_buf)
            });
        if let Some(rel) = inside {
            env.push((
                crate::model::project::SPECTR_ROOT_ENV.to_string(),
                text(&lane.join(rel)),
            ));
        }
    }
    env
}

/// A task's lane: its top-level prefix.
pub fn lane_key(task: &TaskId) -> String {
    task.prefix().to_string()
}

/// The change's tasks files (and the tasks.md whose boxes follow them) as
/// paths inside the repository: their statuses are mirrored by the loop,
/// never merged (two lanes ticking neighbouring boxes would conflict).
fn tasks_files_in_repo(tasks: &TaskSet, lane_root: &Path) -> Vec<PathBuf> {
    tasks
        .files
        .iter()
        .map(|f| f.path.clone())
        .chain(tasks.tasks_md_in_step())
        .filter_map(|p| p.strip_prefix(lane_root).ok().map(Path::to_path_buf))
        .collect()
}

/// Merges one completed attempt's work from its lane into the user's tree.
struct LaneMerge<'a> {
    user: &'a Checkpointer,
    lane: &'a Checkpointer,
    gate: &'a Gate,
    base: String,
    skip: Vec<PathBuf>,
    change: String,
    lane_key: String,
}

impl MergeBack for LaneMerge<'_> {
    fn after_agent(
        &self,
        task: &TaskId,
        _attempt: u32,
        checkpoint: &Checkpoint,
        emit: &mut dyn FnMut(LoopEvent),
    ) {
        // In turn: another lane's claim rewrites the same stash list.
        let _turn = self.gate.turn();
        let user_branch = self.user.head_branch().ok().flatten();
        match self
            .lane
            .claim_agent_stash(checkpoint, user_branch.as_deref())
        {
            Ok(kept) if kept.is_empty() => {}
            Ok(kept) => emit(LoopEvent::Notice {
                level: NoticeLevel::Info,
                message: stash_notice(task, &kept),
            }),
            Err(e) => emit(LoopEvent::Notice {
                level: NoticeLevel::Warn,
                message: format!(
                    "the stash list every work tree shares may hold entries of task {task}'s agent: {e}"
                ),
            }),
        }
    }

    fn merge(
        &self,
        task: &TaskId,
        attempt: u32,
        via: CompletedVia,
        emit: &mut dyn FnMut(LoopEvent),
    ) -> Result<(), Outcome> {
        let theirs = self.lane.snapshot_tree().map_err(|e| Outcome::GitError {
            detail: format!("could not snapshot the lane's work of task {task}: {e}"),
        })?;
        let work = MergeWork {
            base: self.base.clone(),
            theirs,
            skip: self
                .skip
                .iter()
                .map(|p| p.to_string_lossy().into_owned())
                .collect(),
            via,
        };
        let _turn = self.gate.turn();
        let into = MergeInto {
            user: self.user,
            change: &self.change,
            lane_key: &self.lane_key,
            gate: Some(self.gate),
        };
        into.merge(task, attempt, &work, emit)
    }
}

/// Where a merge-back writes: the user's tree, for a change and a lane.
pub struct MergeInto<'a> {
    pub user: &'a Checkpointer,
    pub change: &'a str,
    pub lane_key: &'a str,
    /// Marks the writes for lanes taking a snapshot meanwhile (the caller
    /// holds its turn); none when no lane runs (a resume).
    pub gate: Option<&'a Gate>,
}

impl MergeInto<'_> {
    /// Merges `work` into the user's tree: a three-way merge planned on a
    /// checkpoint of the tree, recorded (`merge_started`, with the work)
    /// before the first file is written, then written (`merged`). A
    /// conflict, or a git error, is the outcome instead; a write that fails
    /// half way is undone from the checkpoint.
    pub fn merge(
        &self,
        task: &TaskId,
        attempt: u32,
        work: &MergeWork,
        emit: &mut dyn FnMut(LoopEvent),
    ) -> Result<(), Outcome> {
        let git_error = |what: &str, e: CheckpointError| Outcome::GitError {
            detail: format!("{what} of task {task}: {e}"),
        };
        let checkpoint_ref = self.user.ref_name(self.change, task.as_str(), attempt);
        let skip: Vec<PathBuf> = work.skip.iter().map(PathBuf::from).collect();
        let plan = self
            .user
            .plan_merge(&work.base, &work.theirs, &checkpoint_ref, &skip)
            .map_err(|e| git_error("could not merge the work", e))?;
        let checkpoint = match &plan {
            MergePlan::Nothing => {
                emit(LoopEvent::Merged {
                    task: task.clone(),
                    attempt,
                    lane: self.lane_key.to_string(),
                    files: Vec::new(),
                });
                return Ok(());
            }
            MergePlan::Conflict { files, messages } => {
                let other = self.other_change(&work.base, files);
                return Err(conflict(task, files, messages, other.as_deref()));
            }
            MergePlan::Clean { checkpoint, .. } => checkpoint.clone(),
        };
        // Saved before the first write: a crash mid-merge is undone exactly,
        // and the merge done again from the work.
        emit(LoopEvent::MergeStarted {
            task: task.clone(),
            attempt,
            checkpoint: checkpoint.clone(),
            work: Some(work.clone()),
        });
        test_pause("merge_started");
        // Marked until the end: a revert below writes too.
        let _writing = self.gate.map(Gate::writing);
        let applied = self.user.apply_merge(&plan);
        match applied {
            Ok(files) => {
                emit(LoopEvent::Merged {
                    task: task.clone(),
                    attempt,
                    lane: self.lane_key.to_string(),
                    files,
                });
                Ok(())
            }
            Err(CheckpointError::ChangedDuringMerge { path }) => {
                let files = vec![path];
                let messages = vec!["the file was edited in the work tree while merging".into()];
                Err(conflict(task, &files, &messages, None))
            }
            Err(e) => {
                // Part of the merge may be written: put the tree back exactly.
                let failed = self
                    .user
                    .failed_ref_name(self.change, task.as_str(), attempt);
                match self.user.revert_leaving_new_refs(&checkpoint, &failed) {
                    Ok(_) => Err(Outcome::GitError {
                        detail: format!(
                            "could not write task {task}'s merged work ({e}); the work tree was put back as it was before the merge"
                        ),
                    }),
                    Err(e2) => Err(Outcome::GitError {
                        detail: format!(
                            "could not write task {task}'s merged work ({e}), nor put the tree back ({e2}); the tree before the merge is at {}",
                            checkpoint.refname
                        ),
                    }),
                }
            }
        }
    }

    /// Finishes a merge-back a crash cut short ([`Checkpointer::replan_merge`]
    /// planned it again): writes what was still to write, the tree
    /// checkpointed and the merge recorded first, as a merge always is. When
    /// the person edited one of its paths since, it is a conflict: what the
    /// cut-short merge wrote is put back path by path, and nothing else of
    /// the tree is touched.
    pub fn finish(
        &self,
        task: &TaskId,
        attempt: u32,
        work: &MergeWork,
        cut: &CutShortMerge,
        emit: &mut dyn FnMut(LoopEvent),
    ) -> Result<(), Outcome> {
        let undo = |why: Outcome| match self.user.undo_cut_short(cut) {
            Ok(_) => why,
            Err(e) => Outcome::GitError {
                detail: format!(
                    "{}; and what the merge of task {task} wrote before the crash could not be put back ({e}): the tree before it is at {}",
                    why.describe(),
                    self.user.ref_name(self.change, task.as_str(), attempt)
                ),
            },
        };
        if !cut.changed.is_empty() {
            let messages = vec![
                "edited in the work tree after the run stopped in the middle of merging this task"
                    .to_string(),
            ];
            let other = self.other_change(&work.base, &cut.changed);
            return Err(undo(conflict(
                task,
                &cut.changed,
                &messages,
                other.as_deref(),
            )));
        }
        let checkpoint_ref = self.user.ref_name(self.change, task.as_str(), attempt);
        let plan = self
            .user
            .resume_plan(cut, &checkpoint_ref)
            .map_err(|e| Outcome::GitError {
                detail: format!(
                    "could not checkpoint the tree to finish the merge of task {task}: {e}"
                ),
            })?;
        let MergePlan::Clean { checkpoint, .. } = &plan else {
            return Ok(());
        };
        emit(LoopEvent::MergeStarted {
            task: task.clone(),
            attempt,
            checkpoint: checkpoint.clone(),
            work: Some(work.clone()),
        });
        match self.user.apply_merge(&plan) {
            Ok(mut files) => {
                files.extend(cut.done.iter().map(|c| c.path.clone()));
                files.sort();
                files.dedup();
                emit(LoopEvent::Merged {
                    task: task.clone(),
                    attempt,
                    lane: self.lane_key.to_string(),
                    files,
                });
                Ok(())
            }
            Err(CheckpointError::ChangedDuringMerge { path }) => {
                let messages = vec!["the file was edited in the work tree while merging".into()];
                Err(undo(conflict(task, &[path], &messages, None)))
            }
            Err(e) => {
                let failed = self
                    .user
                    .failed_ref_name(self.change, task.as_str(), attempt);
                let back = self.user.revert_leaving_new_refs(checkpoint, &failed);
                let why = Outcome::GitError {
                    detail: format!(
                        "could not write task {task}'s merged work ({e}){}",
                        match back {
                            Ok(_) => String::new(),
                            Err(e2) => format!(", nor put the tree back ({e2})"),
                        }
                    ),
                };
                Err(undo(why))
            }
        }
    }

    /// What the user's tree now holds in `files` that the lane did not see:
    /// a diff from the tree the lane started from. Best effort (None when
    /// git cannot say); called with the gate held.
    fn other_change(&self, base: &str, files: &[String]) -> Option<String> {
        let ours = self.user.snapshot_tree().ok()?;
        let mut args = vec![
            "diff".to_string(),
            "--no-color".into(),
            "--no-ext-diff".into(),
            "--no-renames".into(),
            base.to_string(),
            ours,
            "--".into(),
        ];
        args.extend(files.iter().map(|f| format!(":(literal){f}")));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let diff =
            crate::ralph::recover::git(self.user.repo_root(), &args, self.user.timeout()).ok()?;
        if diff.trim().is_empty() {
            return None;
        }
        if diff.len() <= OTHER_CHANGE_MAX {
            return Some(diff);
        }
        let mut end = OTHER_CHANGE_MAX;
        while !diff.is_char_boundary(end) {
            end -= 1;
        }
        Some(format!("{}\n… (cut)\n", &diff[..end]))
    }
}

/// Tests stop a run at a chosen point to kill it there:
/// `SPECTR_TEST_PAUSE_AT=merge_started` holds a merge-back once it is
/// recorded, before any file is written, until the process is killed.
fn test_pause(point: &str) {
    if std::env::var_os("SPECTR_TEST_PAUSE_AT").is_some_and(|p| p == point) {
        loop {
            std::thread::sleep(std::time::Duration::from_secs(3600));
        }
    }
}

/// Names the agent's stash entries taken off the user's stash list.
pub fn stash_notice(task: &TaskId, kept: &[KeptStash]) -> String {
    let list: Vec<String> = kept
        .iter()
        .map(|k| format!("{} ({})", k.refname, k.message))
        .collect();
    format!(
        "the agent of task {task} used git stash, whose list every work tree shares: your stash list is as it was, and its entries are kept at {}",
        list.join(", ")
    )
}

/// At most this much of the other change goes into the retry's prompt.
const OTHER_CHANGE_MAX: usize = 4000;

fn conflict(task: &TaskId, files: &[String], messages: &[String], other: Option<&str>) -> Outcome {
    let mut reason = format!(
        "Your previous work on task {task} could not be merged into the project: {} changed in the meantime (another task running in parallel, or a person, edited the same lines). The project now holds that other change. Redo this task on top of it, keeping the other change intact.",
        files.join(", ")
    );
    if !messages.is_empty() {
        reason.push_str("\n\ngit says:");
    }
    for m in messages.iter().take(10) {
        reason.push_str("\n- ");
        reason.push_str(m);
    }
    if let Some(diff) = other {
        reason.push_str(
            "\n\nThe other change, as a diff from the project your previous work started from:\n\n```diff\n",
        );
        reason.push_str(diff.trim_end());
        reason.push_str("\n```");
    }
    Outcome::Conflict {
        files: files.to_vec(),
        reason,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lanes_live_in_the_cache_folder_one_per_work_tree_and_change() {
        let root = Path::new("/home/u/my proj");
        let xdg = |var: &str| (var == "XDG_CACHE_HOME").then(|| "/var/cache/u".into());
        let dir = lanes_dir_in(&xdg, root, "add-x").unwrap();
        assert_eq!(
            dir,
            lanes_dir_in(&xdg, root, "add-x").unwrap(),
            "deterministic"
        );
        let key = dir.parent().unwrap().file_name().unwrap().to_str().unwrap();
        assert!(
            dir.starts_with("/var/cache/u/spectr/lanes/"),
            "{}",
            dir.display()
        );
        assert!(
            key.starts_with("my_proj-") && key.len() == "my_proj-".len() + 16,
            "{key}"
        );
        assert!(dir.ends_with("add-x"));
        let other = lanes_dir_in(&xdg, Path::new("/home/u/other/my proj"), "add-x").unwrap();
        assert_ne!(dir, other, "another work tree of the same name");
        let home = |var: &str| (var == "HOME").then(|| "/home/u".into());
        assert!(
            lanes_dir_in(&home, Path::new("/srv/p"), "c")
                .unwrap()
                .starts_with("/home/u/.cache/spectr/lanes")
        );
        let relative = |var: &str| (var == "XDG_CACHE_HOME").then(|| "cache".into());
        assert_eq!(
            lanes_dir_in(&relative, root, "c"),
            None,
            "only an absolute folder"
        );
        assert_eq!(
            lanes_dir_in(&home, Path::new("/home/u"), "c"),
            None,
            "never inside the user's tree"
        );
    }

    #[test]
    fn an_agent_in_a_lane_gets_the_lane_where_spectr_had_the_user_tree() {
        let user = Path::new("/home/u/proj");
        let (lane, git_dir) = (
            Path::new("/c/lane-1"),
            Path::new("/home/u/proj/.git/worktrees/lane-1"),
        );
        let none = |_: &str| None;
        assert!(
            lane_env(&none, user, lane, git_dir).is_empty(),
            "nothing set, nothing added"
        );
        let all = |var: &str| match var {
            "GIT_DIR" => Some("/home/u/proj/.git".into()),
            "GIT_WORK_TREE" => Some("/home/u/proj".into()),
            "SPECTR_ROOT" => Some("/home/u/proj/spectr".into()),
            _ => None,
        };
        assert_eq!(
            lane_env(&all, user, lane, git_dir),
            [
                ("GIT_DIR".to_string(), git_dir.display().to_string()),
                ("GIT_WORK_TREE".to_string(), "/c/lane-1".to_string()),
                ("SPECTR_ROOT".to_string(), "/c/lane-1/spectr".to_string()),
            ]
        );
        let elsewhere = |var: &str| (var == "SPECTR_ROOT").then(|| "/other/project".into());
        assert!(
            lane_env(&elsewhere, user, lane, git_dir).is_empty(),
            "a SPECTR_ROOT outside the user's tree is left as it is"
        );
    }
}
