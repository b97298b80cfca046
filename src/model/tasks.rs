//! Loading a change's task list: spectr `tasks.jsonc` (v1 flat, v2 split with
//! `$ref` children) or OpenSpec `tasks.md` (one story per `## N.` section).
//!
//! STUB: the public surface below is the contract the loop codes against.

use crate::model::{ModelError, TaskId, TaskStatus};
use std::path::{Path, PathBuf};

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

/// All tasks of one change, in execution (depth-first, numeric) order.
#[derive(Debug, Clone)]
pub struct TaskSet {
    pub change_dir: PathBuf,
    pub format: TasksFormat,
    pub files: Vec<TasksFile>,
    pub tasks: Vec<Task>,
}

impl TaskSet {
    /// Loads the change's tasks: `tasks.jsonc` when present, else OpenSpec's
    /// `tasks.md` when `format_hint` allows it. Errors name file, line, column.
    pub fn load(change_dir: &Path) -> Result<TaskSet, ModelError> {
        let _ = change_dir;
        todo!("model helper")
    }

    pub fn task(&self, id: &TaskId) -> Option<&Task> {
        self.tasks.iter().find(|t| &t.id == id)
    }

    pub fn file_of(&self, id: &TaskId) -> Option<&TasksFile> {
        self.task(id).map(|t| &self.files[t.file])
    }

    /// Leaf tasks (the ones given to an agent), in execution order.
    pub fn leaves(&self) -> impl Iterator<Item = &Task> {
        self.tasks.iter().filter(|t| !t.is_container())
    }

    /// Sets one task's status on disk, changing no other byte of the file, then
    /// re-aggregates its containers' statuses. Atomic; refuses to clobber a file
    /// changed on disk since it was read. Updates `self` to match.
    pub fn set_status(&mut self, id: &TaskId, status: TaskStatus) -> Result<(), ModelError> {
        let _ = (id, status);
        todo!("model helper")
    }
}
