//! Loading a change's task list: spectr `tasks.jsonc` (v1 flat, v2 split with
//! `$ref` children) or OpenSpec `tasks.md` (one story per `## N.` section), and
//! editing task statuses in place.
//!
//! Rules, in brief:
//! - `children: "$ref:FILE"` is followed recursively (paths relative to the
//!   change folder, never outside it, no cycles); inline `children: [...]` works too.
//! - Files matched by an `includes` glob and not reached by a `$ref` are hung
//!   under the task their `parent` names; one whose parent is no task is stale
//!   and left out. A `$ref`'d file's `parent`, when given, must name the task
//!   that references it.
//! - Siblings are ordered by numeric id (`1.2` before `1.10`), whatever the
//!   order in the file.

mod edit;
mod fast;
mod load;
pub mod md_sync;
mod openspec_load;
pub(crate) mod parse;
mod raw;

use crate::model::atomic::write_atomic;
use crate::model::id_index::IdIndex;
use crate::model::openspec::is_openspec_change;
use crate::model::{FileDiag, ModelError, TaskId, TaskStatus};
use md_sync::MdSync;
use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};

/// Deepest nesting of tasks (through `$ref`s and inline children) we accept:
/// keeps recursion bounded whatever the input.
pub(crate) const MAX_DEPTH: usize = 64;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TasksFormat {
    /// spectr `tasks.jsonc` (+ `tasks-N.jsonc`).
    SpectrJsonc,
    /// OpenSpec `tasks.md`: each `## N.` section is one task (a story).
    OpenSpecMarkdown,
}

#[derive(Debug, Clone)]
pub struct Task {
    pub id: TaskId,
    pub section: String,
    pub description: String,
    pub status: TaskStatus,
    /// Index into [`TaskSet::files`] of the file that holds this task.
    pub file: usize,
    /// 1-based line of the task's `id` in its file.
    pub line: usize,
    pub parent: Option<TaskId>,
    /// Child task ids in execution order; non-empty means a container.
    pub children: Vec<TaskId>,
}

impl Task {
    pub fn is_container(&self) -> bool {
        !self.children.is_empty()
    }
}

/// One tasks file as read from disk.
#[derive(Debug, Clone)]
pub struct TasksFile {
    pub path: PathBuf,
    /// Path relative to the change folder, e.g. `tasks-1.jsonc`.
    pub rel: String,
    /// The exact bytes read; edits are made against these, and refused if the
    /// file on disk no longer matches them.
    pub content: String,
}

/// Whether a file name is one of a change's tasks files (`tasks.md`,
/// `tasks.jsonc`, `tasks-N.jsonc`).
pub fn is_tasks_file_name(name: &str) -> bool {
    name == "tasks.md" || (name.starts_with("tasks") && name.ends_with(".jsonc"))
}

/// All tasks of one change, depth-first: each container comes right before its
/// children, siblings in numeric id order. Leaves alone are in execution order.
#[derive(Debug, Clone)]
pub struct TaskSet {
    pub change_dir: PathBuf,
    pub format: TasksFormat,
    pub files: Vec<TasksFile>,
    pub tasks: Vec<Task>,
    /// id -> position in `tasks`, built on first lookup (after any sorting).
    /// Lookup only; never iterated.
    positions: OnceLock<IdIndex<u32>>,
    /// The tasks files found in the change folder when this set was read, so
    /// [`TaskSet::refresh`] notices a new split file.
    listing: Vec<OsString>,
    /// Names this set's structure (ids, nesting, files): unchanged by status
    /// edits, new for every load, so a caller can keep what it derived from it.
    structure: u64,
    /// New whenever statuses were read from disk (a load, or a refresh that
    /// found edits): a caller that derived something from the statuses on
    /// disk (the containers' aggregates) knows when to look again.
    statuses_read: u64,
    /// Per file, its metadata when its bytes were last found equal to
    /// `content`: while it stays the same, [`TaskSet::refresh`] need not read
    /// the file again.
    verified: Vec<Option<Stamp>>,
    /// tasks.md kept in step with the statuses ([`md_sync`]).
    md: MdSync,
    /// Where status edits go.
    writes: Writes,
}

/// Where a set's status edits go: the disk, durably (the user's files), or
/// memory only (a version of the files edited to be compared: the disk's
/// costs, a rename over a file, are not paid).
#[derive(Debug, Clone)]
enum Writes {
    Durable,
    Memory(std::sync::Arc<std::sync::Mutex<BTreeMap<PathBuf, Vec<u8>>>>),
}

/// What `stat` says about a file, enough to tell a rewrite.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Stamp {
    dev: u64,
    ino: u64,
    len: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

impl Stamp {
    fn of(path: &Path) -> Option<Stamp> {
        use std::os::unix::fs::MetadataExt;
        let m = std::fs::metadata(path).ok()?;
        Some(Stamp {
            dev: m.dev(),
            ino: m.ino(),
            len: m.len(),
            mtime: (m.mtime(), m.mtime_nsec()),
            ctime: (m.ctime(), m.ctime_nsec()),
        })
    }

    /// File times tick coarsely (a few ms): a file written again within the
    /// same tick, at the same size, keeps its stamp. A stamp is trusted only
    /// once it is older than any such tick (git's "racily clean" rule).
    fn settled(&self) -> bool {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs() as i64);
        self.mtime.0 + 2 <= now && self.ctime.0 + 2 <= now
    }
}

static STRUCTURES: AtomicU64 = AtomicU64::new(1);

impl TaskSet {
    pub(crate) fn new(
        change_dir: PathBuf,
        format: TasksFormat,
        files: Vec<TasksFile>,
        tasks: Vec<Task>,
    ) -> TaskSet {
        TaskSet {
            change_dir,
            format,
            files,
            tasks,
            positions: OnceLock::new(),
            listing: Vec::new(),
            structure: STRUCTURES.fetch_add(1, Ordering::Relaxed),
            statuses_read: STRUCTURES.fetch_add(1, Ordering::Relaxed),
            verified: Vec::new(),
            md: MdSync::default(),
            writes: Writes::Durable,
        }
    }

    /// Equal for two views of the same load, whatever their statuses: a task
    /// graph built from one serves the other.
    pub fn structure_id(&self) -> u64 {
        self.structure
    }

    /// Changes whenever statuses were read from disk; our own status writes
    /// leave it alone.
    pub fn statuses_read_id(&self) -> u64 {
        self.statuses_read
    }

    /// Loads the change's tasks: `tasks.jsonc` when present, else OpenSpec's
    /// `tasks.md` when the change folder is under `openspec/changes/`.
    /// Errors name file, line, column.
    pub fn load(change_dir: &Path) -> Result<TaskSet, ModelError> {
        let id = change_dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| change_dir.display().to_string());
        if !change_dir.is_dir() {
            return Err(ModelError::change_not_found(&id, change_dir.parent(), &[]));
        }
        // Listed before reading: a file added meanwhile shows up as new at
        // the next refresh rather than being missed.
        let listing = tasks_file_listing(change_dir);
        for name in [load::ROOT_FILE, crate::model::openspec::TASKS_MD] {
            if let Some(e) = crate::model::error::not_a_file(&change_dir.join(name)) {
                return Err(e);
            }
        }
        let mut set = if change_dir.join(load::ROOT_FILE).is_file() {
            load::load_jsonc(change_dir)?
        } else if is_openspec_change(change_dir) {
            openspec_load::load(change_dir)?
        } else {
            return Err(ModelError::TasksNotFound { id });
        };
        set.listing = listing;
        Ok(set)
    }

    /// [`TaskSet::load`] for reading only (`spectr list`): an unknown
    /// `status` counts as pending instead of failing the load, as upstream
    /// counts it; each one is returned (file, line, the value) for a warning.
    pub fn load_lenient(change_dir: &Path) -> Result<(TaskSet, Vec<FileDiag>), ModelError> {
        if change_dir.join(load::ROOT_FILE).is_file() {
            let (set, unknown) = load::load_jsonc_with(change_dir, raw::Statuses::Lenient)?;
            return Ok((set, unknown));
        }
        TaskSet::load(change_dir).map(|set| (set, Vec::new()))
    }

    /// Reads the change again from disk, replacing `self`.
    pub fn reload(&mut self) -> Result<(), ModelError> {
        let md = std::mem::take(&mut self.md);
        *self = TaskSet::load(&self.change_dir)?;
        // The warnings given stay given.
        self.md = md;
        Ok(())
    }

    /// Reloads only when a tasks file changed on disk since it was read (or a
    /// new one appeared); returns whether it reloaded. Comparing bytes is
    /// cheap next to parsing, and exact: our own writes update what we hold,
    /// so they never cause a re-parse.
    pub fn refresh(&mut self) -> Result<bool, ModelError> {
        let listing = tasks_file_listing(&self.change_dir);
        let mut changed = Vec::new();
        self.verified.resize(self.files.len(), None);
        for (f, file) in self.files.iter().enumerate() {
            // Stat before reading: a write after the stat changes the stamp.
            let stamp = Stamp::of(&file.path);
            if stamp.is_some() && stamp == self.verified[f] {
                continue;
            }
            match std::fs::read(&file.path) {
                Ok(bytes) if bytes == file.content.as_bytes() => {
                    self.verified[f] = stamp.filter(Stamp::settled);
                }
                Ok(bytes) => changed.push((f, bytes)),
                // Gone or unreadable: the full load says what is wrong.
                Err(_) => {
                    self.reload()?;
                    return Ok(true);
                }
            }
        }
        if changed.is_empty() && listing == self.listing {
            return Ok(false);
        }
        if listing == self.listing && self.take_status_edits(&changed) {
            self.statuses_read = STRUCTURES.fetch_add(1, Ordering::Relaxed);
            return Ok(true);
        }
        self.reload()?;
        Ok(true)
    }

    /// Takes the new statuses from changed files whose text differs from what
    /// we hold only inside status literals: the usual edit (an agent marking
    /// its task) then costs one file's parse, not the whole change's. Returns
    /// false, changing nothing, for any other edit.
    fn take_status_edits(&mut self, changed: &[(usize, Vec<u8>)]) -> bool {
        if self.format != TasksFormat::SpectrJsonc {
            return false;
        }
        let mut updates: Vec<(usize, TaskStatus)> = Vec::new();
        let mut contents = Vec::new();
        for (f, bytes) in changed {
            let Ok(text) = std::str::from_utf8(bytes) else {
                return false;
            };
            let file = &self.files[*f];
            let (Ok(old), Ok(new)) = (
                parse::parse_file(&file.path, &file.content),
                parse::parse_file(&file.path, text),
            ) else {
                return false;
            };
            if skeleton(&file.content, &old) != skeleton(text, &new) {
                return false;
            }
            let mut ids = Vec::new();
            raw::walk(&new.entries, &mut |e| ids.push((e.id.clone(), e.status)));
            for (id, status) in ids {
                match self.position(&TaskId::new(id)) {
                    Some(p) if self.tasks[p].file == *f => updates.push((p, status)),
                    _ => return false,
                }
            }
            contents.push((*f, text.to_owned()));
        }
        for (p, status) in updates {
            self.tasks[p].status = status;
        }
        for (f, text) in contents {
            self.files[f].content = text;
        }
        true
    }

    /// True when any file read differs from what is on disk now (or is gone):
    /// someone else edited the tasks since they were loaded.
    pub fn changed_on_disk(&self) -> bool {
        self.files
            .iter()
            .any(|f| std::fs::read(&f.path).map_or(true, |b| b != f.content.as_bytes()))
    }

    pub fn task(&self, id: &TaskId) -> Option<&Task> {
        self.position(id).map(|p| &self.tasks[p])
    }

    /// Where `id` is in `tasks`. Indexed; `tasks` is public, so when it no
    /// longer has the length it was indexed at (a caller added or removed
    /// tasks) this falls back to a search.
    pub(crate) fn position(&self, id: &TaskId) -> Option<usize> {
        let id_at = |p: u32| self.tasks.get(p as usize).map(|t| &t.id);
        let positions = self.positions.get_or_init(|| {
            IdIndex::build(0..self.tasks.len() as u32, |p: u32| {
                &self.tasks[p as usize].id
            })
        });
        match positions.get(id, id_at) {
            Some(p) => Some(p as usize),
            // Not a task.
            None if positions.len() == self.tasks.len() => None,
            None => self.tasks.iter().position(|t| &t.id == id),
        }
    }

    pub fn file_of(&self, id: &TaskId) -> Option<&TasksFile> {
        self.task(id).map(|t| &self.files[t.file])
    }

    /// Leaf tasks (the ones given to an agent), in execution order.
    pub fn leaves(&self) -> impl Iterator<Item = &Task> {
        self.tasks.iter().filter(|t| !t.is_container())
    }

    /// A container's status from its leaves (all completed -> completed, any
    /// started -> in_progress, else pending); a leaf's own status.
    pub fn container_status(&self, id: &TaskId) -> Option<TaskStatus> {
        let task = self.task(id)?;
        Some(aggregate_from(self, task, &|t| t.status))
    }

    /// Sets one task's status on disk, changing no other byte of the file, then
    /// re-aggregates its containers' statuses. Atomic; refuses to clobber a file
    /// changed on disk since it was read. Updates `self` to match.
    ///
    /// For an OpenSpec `tasks.md`, `Completed` ticks every `- [ ]` of the
    /// section; `Pending` and `InProgress` change nothing.
    pub fn set_status(&mut self, id: &TaskId, status: TaskStatus) -> Result<(), ModelError> {
        let Some(pos) = self.position(id) else {
            return Err(ModelError::TaskNotFound {
                id: id.to_string(),
                change: self.change_dir.display().to_string(),
            });
        };
        if self.tasks[pos].is_container() {
            return Err(ModelError::ContainerStatus {
                id: id.to_string(),
                path: self.files[self.tasks[pos].file].path.clone(),
            });
        }
        match self.format {
            TasksFormat::OpenSpecMarkdown => openspec_load::set_status(self, pos, status),
            TasksFormat::SpectrJsonc => {
                self.set_status_jsonc(pos, status)?;
                // Also when the file already said so (an agent's own edit).
                self.sync_tasks_md(Some(id));
                Ok(())
            }
        }
    }

    /// Ticks or clears the box of `only` (or of every task) in the change's
    /// tasks.md to match the statuses held here, when the change has one
    /// that `spectr accept` made tasks.jsonc from. Never fails: a problem
    /// is a warning for [`TaskSet::take_tasks_md_warnings`].
    pub fn sync_tasks_md(&mut self, only: Option<&TaskId>) {
        let mut md = std::mem::take(&mut self.md);
        md_sync::sync(self, &mut md, only);
        self.md = md;
    }

    /// The tasks whose box in tasks.md lags their status here (nothing is
    /// written); `Err` with a warning when the boxes cannot be matched.
    pub fn tasks_md_lagging(&self) -> Result<Vec<TaskId>, String> {
        md_sync::lagging(self)
    }

    /// Warnings from keeping tasks.md in step, each given once.
    pub fn take_tasks_md_warnings(&mut self) -> Vec<String> {
        self.md.take_warnings()
    }

    /// The tasks.md whose boxes follow these statuses (spectr's own format
    /// only), whether or not it exists: like the tasks files, a lane's edits
    /// of it are mirrored, never merged.
    pub fn tasks_md_in_step(&self) -> Option<PathBuf> {
        (self.format == TasksFormat::SpectrJsonc).then(|| self.change_dir.join(md_sync::TASKS_MD))
    }

    fn set_status_jsonc(&mut self, pos: usize, status: TaskStatus) -> Result<(), ModelError> {
        // The new status of every task that changes: the leaf, then each
        // ancestor whose aggregate moves.
        let mut changes: BTreeMap<usize, TaskStatus> = BTreeMap::new();
        if self.tasks[pos].status != status {
            changes.insert(pos, status);
        }
        let status_of = |t: &Task| {
            if t.id == self.tasks[pos].id {
                status
            } else {
                t.status
            }
        };
        let mut up = self.tasks[pos].parent.clone();
        let mut guard = 0;
        while let Some(pid) = up {
            guard += 1;
            let Some(ppos) = self.position(&pid) else {
                break;
            };
            let ptask = &self.tasks[ppos];
            if guard > self.tasks.len() {
                break; // a hand-built set with a parent loop
            }
            let agg = aggregate_from(self, ptask, &status_of);
            if agg != ptask.status {
                changes.insert(ppos, agg);
            }
            up = ptask.parent.clone();
        }
        let leaf_file = self.tasks[pos].file;
        self.write_status_changes(&changes, leaf_file)
    }

    /// Writes each container whose status in the file differs from what its
    /// leaves say (someone completed children by hand), all of one file in a
    /// single write. Returns the containers written. Markdown has none.
    pub fn sync_containers(&mut self) -> Result<Vec<TaskId>, ModelError> {
        if self.format != TasksFormat::SpectrJsonc {
            return Ok(Vec::new());
        }
        let changes: BTreeMap<usize, TaskStatus> = self
            .tasks
            .iter()
            .enumerate()
            .filter(|(_, t)| t.is_container())
            .filter_map(|(p, t)| {
                let agg = aggregate_from(self, t, &|t| t.status);
                (agg != t.status).then_some((p, agg))
            })
            .collect();
        let written = changes.keys().map(|&p| self.tasks[p].id.clone()).collect();
        self.write_status_changes(&changes, usize::MAX)?;
        Ok(written)
    }

    /// Writes new statuses (by position), one write per file, `first_file`
    /// first.
    fn write_status_changes(
        &mut self,
        changes: &BTreeMap<usize, TaskStatus>,
        first_file: usize,
    ) -> Result<(), ModelError> {
        if changes.is_empty() {
            return Ok(());
        }
        let mut by_file: BTreeMap<usize, Vec<(usize, TaskStatus)>> = BTreeMap::new();
        for (&p, &s) in changes {
            by_file.entry(self.tasks[p].file).or_default().push((p, s));
        }
        // Check every file first so a stale one stops us before any write.
        for &f in by_file.keys() {
            self.ensure_unchanged(f)?;
        }
        // The leaf's own file first: if a later write fails, the task's status
        // (the part that matters) is already on disk.
        let mut order: Vec<usize> = by_file.keys().copied().collect();
        order.sort_by_key(|&f| f != first_file);
        for f in order {
            let edits: Vec<(&str, TaskStatus)> = by_file[&f]
                .iter()
                .map(|&(p, s)| (self.tasks[p].id.as_str(), s))
                .collect();
            let file = &self.files[f];
            let new = edit::apply_status_edits(&file.path, &file.content, &edits)?;
            self.write_file(&file.path, new.as_bytes())
                .map_err(|e| ModelError::io("write", &file.path, e))?;
            self.files[f].content = new;
            for &(p, s) in &by_file[&f] {
                self.tasks[p].status = s;
            }
        }
        Ok(())
    }

    /// A set whose edits stay in memory ([`TaskSet::written`]): the files
    /// on disk are never touched.
    pub fn in_memory(mut self) -> TaskSet {
        self.writes = Writes::Memory(Default::default());
        self
    }

    /// The files an [`TaskSet::in_memory`] set wrote, with their bytes.
    pub fn written(&self) -> Vec<(PathBuf, Vec<u8>)> {
        match &self.writes {
            Writes::Memory(files) => files
                .lock()
                .map(|f| f.iter().map(|(p, b)| (p.clone(), b.clone())).collect())
                .unwrap_or_default(),
            _ => Vec::new(),
        }
    }

    /// Replaces a tasks file atomically and durably (or in memory).
    pub(crate) fn write_file(&self, path: &Path, bytes: &[u8]) -> std::io::Result<()> {
        match &self.writes {
            Writes::Durable => write_atomic(path, bytes),
            Writes::Memory(files) => {
                files
                    .lock()
                    .map_err(|_| std::io::Error::other("a poisoned lock"))?
                    .insert(path.to_path_buf(), bytes.to_vec());
                Ok(())
            }
        }
    }

    /// A file's bytes as this set last wrote or read them: from memory for
    /// an [`TaskSet::in_memory`] set that wrote it.
    pub(crate) fn read_file(&self, path: &Path) -> std::io::Result<Vec<u8>> {
        if let Writes::Memory(files) = &self.writes
            && let Some(bytes) = files.lock().ok().and_then(|f| f.get(path).cloned())
        {
            return Ok(bytes);
        }
        std::fs::read(path)
    }

    /// Errors with [`ModelError::Stale`] unless file `f` on disk still holds
    /// exactly the bytes we read.
    pub(crate) fn ensure_unchanged(&self, f: usize) -> Result<(), ModelError> {
        let file = &self.files[f];
        match self.read_file(&file.path) {
            Ok(bytes) if bytes == file.content.as_bytes() => Ok(()),
            Ok(_) => Err(ModelError::Stale {
                path: file.path.clone(),
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(ModelError::Stale {
                path: file.path.clone(),
            }),
            Err(e) => Err(ModelError::io("read", &file.path, e)),
        }
    }
}

/// Aggregate status of `task` over its leaves, reading each leaf's status with
/// `status_of`. A leaf is its own aggregate.
fn aggregate_from(
    set: &TaskSet,
    task: &Task,
    status_of: &dyn Fn(&Task) -> TaskStatus,
) -> TaskStatus {
    let mut leaves = Vec::new();
    let mut stack = vec![task];
    let mut seen = 0usize;
    while let Some(t) = stack.pop() {
        seen += 1;
        if seen > set.tasks.len() + 1 {
            break; // a hand-built set with a child loop
        }
        if t.children.is_empty() {
            leaves.push(status_of(t));
        } else {
            stack.extend(t.children.iter().filter_map(|c| set.task(c)));
        }
    }
    TaskStatus::aggregate(leaves)
}

/// The tasks files directly in a change folder, sorted (empty if unreadable).
fn tasks_file_listing(change_dir: &Path) -> Vec<OsString> {
    let Ok(entries) = std::fs::read_dir(change_dir) else {
        return Vec::new();
    };
    let mut names: Vec<OsString> = entries
        .filter_map(|e| e.ok())
        .map(|e| e.file_name())
        .filter(|n| n.to_str().is_some_and(is_tasks_file_name))
        .collect();
    names.sort();
    names
}

/// A tasks file's text with every status literal blanked: two files with the
/// same skeleton differ in statuses only.
fn skeleton(text: &str, raw: &raw::RawFile) -> String {
    let mut ranges = Vec::new();
    raw::walk(&raw.entries, &mut |e| ranges.extend(e.status_range.clone()));
    ranges.sort_by_key(|r| r.start);
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    for r in ranges {
        match text.get(at..r.start) {
            Some(between) if r.end <= text.len() => out.push_str(between),
            // Never expected: mark it so the skeletons cannot match.
            _ => {
                out.push('\u{1}');
                continue;
            }
        }
        out.push('\0');
        at = r.end;
    }
    out.push_str(&text[at..]);
    out
}
