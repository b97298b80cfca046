//! Parallel lanes (`--jobs N`): each slot runs its attempts in a git worktree
//! of its own outside the user's tree (see [`lanes_dir`]), refreshed from the user's tree
//! before every task, and merges a completed task's work back into the user's
//! tree with a three-way merge. The user's HEAD, branch, index and stash are
//! never touched; every merge checkpoints the user's tree first.
//!
//! One [`Gate`] guards the user's tree between lanes: merges take it one at
//! a time, and a lane never starts from a half-merged tree.

use crate::checkpoint::conflict_markers;
use crate::checkpoint::{
    Checkpoint, CheckpointError, Checkpointer, CutShortMerge, KeptStash, LaneTree, MergePlan,
};
use crate::model::{TaskId, TaskSet};
use crate::ralph::attempt::{
    self, AttemptEnv, AttemptReport, AttemptRequest, LaneInfo, MergeBack, ResolveFiles,
};
use crate::ralph::config::RunConfig;
use crate::ralph::control::{ActiveAgents, Control};
use crate::ralph::error::LaneError;
use crate::ralph::event::{CompletedVia, LoopEvent, MergeWork, NoticeLevel, Outcome};
use crate::ralph::executor::{Resolve, SlotEnv, UserTree, Work};
pub use crate::ralph::in_place::in_place_keep_ref;
use crate::ralph::in_place::{InPlaceFinish, change_refs};
use crate::ralph::lane_setup::{self, SetupEnd};
use crate::ralph::learnings;
use crate::ralph::watch::TasksWatcher;
use crossbeam_channel::Receiver;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};

mod merge;
pub mod remote;
use merge::LaneMerge;
pub use merge::{MergeInto, stash_notice};

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

/// Where a crashed run's lanes are kept when a resume removes them.
pub fn stale_lanes_prefix(user: &Checkpointer, change: &str) -> String {
    format!(
        "{}/lanes",
        crate::ralph::in_place::change_refs(user, change)
    )
}

/// Guards the user's tree between lanes. Merges (and lane creation) take
/// turns; a snapshot for a lane's refresh does not wait for them, but is
/// taken again when a merge wrote files while it was being taken.
#[derive(Debug, Default)]
pub struct Gate {
    turn: Mutex<()>,
    /// Odd while a merge writes into the user's tree; bumped twice per write.
    writes: AtomicU64,
    /// Merge drivers from the repository's config the user was told were
    /// not run (told once per run).
    unrun_drivers: Mutex<std::collections::BTreeSet<String>>,
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

    /// Whether the user still has to be told `driver` is not run.
    fn first_unrun(&self, driver: &str) -> bool {
        self.unrun_drivers
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(driver.to_owned())
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
            // A merge writing meanwhile can also make the snapshot fail (git
            // finds a merge's temporary gone): taken again, as an
            // inconsistent one is. A failure with no write meanwhile is real.
            let taken = take();
            if self.writes.load(Ordering::SeqCst) == before {
                return taken;
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
    /// Where the slot's attempts in the user's own tree run (lanes taking
    /// turns), made the first time one does.
    in_place: Option<UserTree>,
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
            in_place: None,
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
        slot: &SlotEnv<'_, '_>,
        emit: &mut dyn FnMut(LoopEvent),
    ) -> AttemptReport {
        let (controls, active, agent_batch) = (slot.controls, slot.active, slot.agent_batch);
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
        let mut retry_reason = work.retry_reason.clone();
        let mut resolving = None;
        if let Some(resolve) = &work.resolve {
            match self.apply_previous(&lane_tree, resolve, &work.task, &skip) {
                Ok(Some((files, trees))) => {
                    let last = work.retry_reason.as_deref();
                    let reason = resolve_retry_reason(&work.task, last, resolve, &files, &trees);
                    retry_reason = Some(reason);
                    resolving = Some(files);
                }
                Ok(None) => {}
                Err(e) => emit(LoopEvent::Notice {
                    level: NoticeLevel::Warn,
                    message: format!(
                        "{}: could not apply task {}'s previous work again ({e}); this attempt starts afresh",
                        self.name, work.task
                    ),
                }),
            }
        }
        let merge = LaneMerge {
            user: &self.user,
            lane: &lane_tree.checkpointer,
            gate: self.gate,
            base: self.base.clone(),
            skip,
            change: self.cfg.change.id.clone(),
            lane_key: lane_key(&work.task),
            marked: resolving
                .as_ref()
                .map(|f| f.marked.clone())
                .unwrap_or_default(),
            turn: slot.merge_turn,
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
            prepare: None,
        };
        let req = AttemptRequest {
            task: &work.task,
            attempt: work.attempt,
            max_attempts: work.max_attempts,
            retry_reason: retry_reason.as_deref(),
            position: work.position,
            resolving: resolving.as_ref(),
            fallback: work.fallback,
        };
        let report = attempt::run(&env, &mut tasks, &req, emit);
        drop(env);
        self.last = Some((work.task.clone(), work.attempt));
        self.import_learnings(&lane_learnings, &work.task, emit);
        report
    }

    /// A resolve attempt's start: the work that conflicted, applied to the
    /// lane fresh from the user's tree, conflict markers (labelled in words)
    /// where it meets the other change. The conflicted files and the two
    /// trees merged (the project's, the previous work's), or None when the
    /// work holds nothing to apply.
    fn apply_previous(
        &self,
        lane: &LaneTree,
        resolve: &Resolve,
        task: &TaskId,
        skip: &[PathBuf],
    ) -> Result<Option<(ResolveFiles, merge::Trees)>, CheckpointError> {
        let cp = &lane.checkpointer;
        let Some(remerged) =
            cp.merge_with_markers(&resolve.work.base, &self.base, &resolve.work.theirs, skip)?
        else {
            return Ok(None);
        };
        let head = user_head(&self.user);
        lane.reset_to(&remerged.tree, head.as_deref(), None)?;
        label_conflicts(&lane.path, remerged, task).map(Some)
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
        let user_file = learnings::path(&self.cfg.change.dir);
        attempt::report_imported(
            learnings::import(lane_file, &user_file, task),
            &user_file,
            task,
            emit,
        );
    }

    /// An attempt that ended before its agent could start: still a started
    /// and failed attempt, so it is counted like any other.
    fn failed_to_start(
        &self,
        work: &Work,
        outcome: Outcome,
        emit: &mut dyn FnMut(LoopEvent),
    ) -> AttemptReport {
        emit(work.started(
            &self.cfg,
            Some(lane_key(&work.task)),
            Some(self.path.display().to_string()),
        ));
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
        if work.in_place {
            return self.attempt_in_place(work, env, emit);
        }
        let report = Lane::attempt(self, work, env, emit);
        (report, None)
    }

    fn close(self: Box<Self>, emit: &mut dyn FnMut(LoopEvent)) {
        Lane::close(*self, emit);
    }
}

impl Lane<'_> {
    /// One attempt in the user's own tree, as `--jobs 1` runs it (the run
    /// lets nothing else run or merge meanwhile). It leaves git's state as a
    /// lane's merge would ([`InPlaceFinish`]); a completed one says which
    /// files it changed, as a merge would.
    fn attempt_in_place(
        &mut self,
        work: &mut Work,
        env: &crate::ralph::executor::SlotEnv<'_, '_>,
        emit: &mut dyn FnMut(LoopEvent),
    ) -> (AttemptReport, Option<TaskSet>) {
        let user = self.user.clone();
        let tree = self.in_place.get_or_insert_with(|| UserTree {
            checkpointer: Some(user.clone()),
            watcher: TasksWatcher::start(std::slice::from_ref(&env.cfg.change.dir)),
        });
        let finish = InPlaceFinish::for_run(&user, &self.cfg, &work.task, work.attempt);
        // Which hot files it changes is all the run needs to know (no
        // snapshot of the tree after it): their bytes before and after.
        let root = user.repo_root().to_path_buf();
        let read = |f: &String| std::fs::read(root.join(f)).ok();
        let hot_before: Vec<Option<Vec<u8>>> = work.hot_files.iter().map(read).collect();
        let key = lane_key(&work.task);
        let mut seen = |mut event: LoopEvent| {
            match &mut event {
                LoopEvent::HeadMoved { .. } => finish.seen(&event),
                // Its lane, and no work tree of its own: in the user's tree.
                LoopEvent::TaskStarted {
                    lane,
                    worktree: None,
                    ..
                } => *lane = Some(key.clone()),
                _ => {}
            }
            emit(event);
        };
        let (report, tasks) = match work.resolve.clone() {
            None => tree.attempt_with(work, env, Some(&finish), None, &mut seen),
            Some(resolve) => {
                let skip = work
                    .tasks
                    .as_ref()
                    .map(|t| tasks_files_in_repo(t, user.repo_root()))
                    .unwrap_or_default();
                let (task, last) = (work.task.clone(), work.retry_reason.clone());
                let prepare = |c: &Checkpoint| -> Result<Option<(ResolveFiles, String)>, String> {
                    let base = &resolve.work.base;
                    let applied = user.apply_with_markers(c, base, &resolve.work.theirs, &skip);
                    let Some(remerged) = applied.map_err(|e| e.to_string())? else {
                        return Ok(None);
                    };
                    let (files, trees) = label_conflicts(user.repo_root(), remerged, &task)
                        .map_err(|e| e.to_string())?;
                    let reason =
                        resolve_retry_reason(&task, last.as_deref(), &resolve, &files, &trees);
                    finish.marked(&files.marked);
                    Ok(Some((files, reason)))
                };
                tree.attempt_with(work, env, Some(&finish), Some(&prepare), &mut seen)
            }
        };
        if report.outcome.is_completed() {
            let wrote = work
                .hot_files
                .iter()
                .zip(&hot_before)
                .filter(|(f, before)| read(f) != **before)
                .map(|(f, _)| f.clone())
                .collect();
            work.wrote = Some(wrote);
        }
        (report, tasks)
    }
}

/// A resolve attempt's reason: the conflict and its files, and why the
/// last resolve failed, if one did.
fn resolve_retry_reason(
    task: &TaskId,
    last: Option<&str>,
    resolve: &Resolve,
    files: &ResolveFiles,
    trees: &merge::Trees,
) -> String {
    let mut reason = merge::resolve_reason(&resolve.reason, task, files, trees);
    if let Some(last) = last.filter(|r| *r != resolve.reason) {
        reason.push_str("\n\nYour last attempt at this ended: ");
        reason.push_str(last);
    }
    reason
}

/// Labels in words the markers git left in `remerged`'s conflicted files
/// under `root` (a resolve attempt's tree), and sorts them by what the
/// agent finds in them; with the two trees merged (the project's, the
/// previous work's), for the prompt.
fn label_conflicts(
    root: &Path,
    remerged: crate::checkpoint::Remerged,
    task: &TaskId,
) -> Result<(ResolveFiles, merge::Trees), CheckpointError> {
    let mut files = ResolveFiles::default();
    for file in &remerged.conflicted {
        let path = root.join(file);
        // Binary, gone, or a directory: no markers, one side's version.
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        let words = conflict_markers::relabel(
            &text,
            &remerged.ours_label,
            &remerged.theirs_label,
            task.as_str(),
        );
        if let Some(words) = words {
            crate::model::atomic::write_atomic(&path, words.as_bytes()).map_err(|source| {
                CheckpointError::io("could not label the conflict markers in", &path, source)
            })?;
            files.marked.push(file.clone());
        } else if conflict_markers::has_git_markers(&text) {
            // Labelled otherwise by git (a rename's `tree:path`).
            files.marked.push(file.clone());
        } else {
            files.unmarked.push(file.clone());
        }
    }
    let trees = merge::Trees {
        project: remerged.ours_label,
        previous: remerged.theirs_label,
    };
    Ok((files, trees))
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
