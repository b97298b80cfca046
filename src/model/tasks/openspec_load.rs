//! A task set read from an OpenSpec `tasks.md` (the format is
//! [`crate::model::openspec`]'s): one leaf task per numbered section, and a
//! completed status written back as the section's ticked boxes.

use super::load::read_text;
use super::{Task, TaskSet, TasksFile, TasksFormat};
use crate::model::openspec::{TASKS_MD, numbered_sections, tick_section};
use crate::model::{ModelError, TaskId, TaskStatus};
use std::path::Path;

pub(crate) fn load(change_dir: &Path) -> Result<TaskSet, ModelError> {
    let path = change_dir.join(TASKS_MD);
    if !path.is_file() {
        return Err(ModelError::TasksMdNotFound { path });
    }
    let text = read_text(&path)?;
    let sections = numbered_sections(&path, &text)?;
    let mut tasks: Vec<Task> = sections
        .iter()
        .map(|s| Task {
            id: TaskId::new(s.id.clone()),
            section: s.title.clone(),
            description: s.description.clone(),
            status: s.status(),
            file: 0,
            line: s.line,
            parent: None,
            children: Vec::new(),
        })
        .collect();
    tasks.sort_by(|a, b| a.id.cmp(&b.id));
    Ok(TaskSet::new(
        change_dir.to_path_buf(),
        TasksFormat::OpenSpecMarkdown,
        vec![TasksFile {
            path,
            rel: TASKS_MD.to_string(),
            content: text,
        }],
        tasks,
    ))
}

/// Ticks every checkbox of the task's section for `Completed`; other statuses
/// have no markdown form and change nothing.
pub(crate) fn set_status(
    set: &mut TaskSet,
    pos: usize,
    status: TaskStatus,
) -> Result<(), ModelError> {
    if status != TaskStatus::Completed {
        return Ok(());
    }
    let f = set.tasks[pos].file;
    set.ensure_unchanged(f)?;
    let file = &set.files[f];
    let id = set.tasks[pos].id.as_str();
    let Some((bytes, changed)) = tick_section(&file.content, id) else {
        return Err(ModelError::TaskNotFound {
            id: id.to_string(),
            change: set.change_dir.display().to_string(),
        });
    };
    if changed {
        let new = String::from_utf8(bytes).map_err(|e| {
            ModelError::io("edit", &file.path, std::io::Error::other(e.to_string()))
        })?;
        set.write_file(&file.path, new.as_bytes())
            .map_err(|e| ModelError::io("write", &file.path, e))?;
        set.files[f].content = new;
    }
    set.tasks[pos].status = TaskStatus::Completed;
    Ok(())
}
