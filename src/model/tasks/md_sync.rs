//! A change's `tasks.md` kept in step with its `tasks.jsonc`. Upstream's users
//! read tasks.md (on their forge, in review) and take the two files to agree,
//! so whenever spectr writes a status, the box of the same task in tasks.md is
//! ticked (`completed`) or cleared (anything else): that one byte, no other,
//! written atomically.
//!
//! Lines are matched to tasks the way `spectr accept` numbered them, with its
//! own parser: the n-th checkbox of section S is task `S.n`, whatever number
//! the line shows (accept renumbers: `2.6` with sub-items `2.6a`..`2.6e`, then
//! `2.7`, are tasks 2.6..2.11 and 2.12). That mapping is trusted only while
//! tasks.md still reads as the tasks.jsonc it made: each checkbox is a task of
//! tasks.jsonc with the same text (upstream's accept kept only a task's first
//! line, so that is enough), and no task numbered in a tasks.md section lacks
//! its line. Otherwise tasks.md is left alone, with one warning saying why.
//!
//! OpenSpec's tasks.md is the tasks file itself: its format writes it, never
//! this. A tasks.md problem never fails a status write; it becomes a warning
//! the caller takes ([`crate::model::TaskSet::take_tasks_md_warnings`]).

use crate::model::accept::tasks_md::{TasksMd, parse_tasks_md};
use crate::model::{TaskId, TaskSet, TaskStatus, TasksFormat};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// The checklist next to a spectr change's tasks.jsonc.
pub const TASKS_MD: &str = "tasks.md";

/// What a task set keeps between syncs.
#[derive(Debug, Clone, Default)]
pub(crate) struct MdSync {
    /// The boxes as last mapped, with what they were mapped from.
    map: Option<Mapped>,
    /// Warnings already given: each is given once.
    given: BTreeSet<String>,
    /// Warnings not yet taken by the caller.
    warnings: Vec<String>,
}

#[derive(Debug, Clone)]
struct Mapped {
    text: String,
    structure: u64,
    /// Each task's box (the byte offset of its mark), or why the mapping is
    /// unsure.
    boxes: Result<BTreeMap<TaskId, usize>, String>,
}

impl MdSync {
    pub(crate) fn take_warnings(&mut self) -> Vec<String> {
        std::mem::take(&mut self.warnings)
    }

    fn warn(&mut self, message: String) {
        if self.given.insert(message.clone()) {
            self.warnings.push(message);
        }
    }
}

/// Ticks or clears the box of `only` (every mapped task when `None`) to match
/// its status in `set`.
pub(crate) fn sync(set: &TaskSet, state: &mut MdSync, only: Option<&TaskId>) {
    if set.format != TasksFormat::SpectrJsonc {
        return;
    }
    let path = set.change_dir.join(TASKS_MD);
    // A second round only when tasks.md changed between reading and writing.
    for _ in 0..2 {
        let text = match set.read_file(&path) {
            Ok(bytes) => match String::from_utf8(bytes) {
                Ok(text) => text,
                Err(_) => {
                    state.warn(unsure(set, &path, "it is not UTF-8"));
                    return;
                }
            },
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                state.map = None;
                return;
            }
            Err(e) => {
                state.warn(format!(
                    "could not read {} to tick its boxes: {e}",
                    path.display()
                ));
                return;
            }
        };
        let mapped = match state.map.take() {
            Some(m) if m.text == text && m.structure == set.structure_id() => m,
            _ => Mapped {
                boxes: map_boxes(set, &path, &text),
                text,
                structure: set.structure_id(),
            },
        };
        let boxes = match &mapped.boxes {
            Ok(boxes) => boxes,
            Err(reason) => {
                state.warn(unsure(set, &path, reason));
                state.map = Some(mapped);
                return;
            }
        };
        let Some(bytes) = with_boxes_set(set, &mapped.text, boxes, only) else {
            state.map = Some(mapped);
            return;
        };
        // Written only over the text the boxes were found in.
        if set.read_file(&path).ok().as_deref() != Some(mapped.text.as_bytes()) {
            continue;
        }
        if let Err(e) = set.write_file(&path, &bytes) {
            state.warn(format!(
                "could not tick the boxes of {} (tasks.jsonc is updated): {e}",
                path.display()
            ));
            state.map = Some(mapped);
            return;
        }
        // Only ASCII marks were swapped: still UTF-8.
        if let Ok(text) = String::from_utf8(bytes) {
            state.map = Some(Mapped { text, ..mapped });
        }
        return;
    }
}

/// The tasks whose box in tasks.md says otherwise than their status in
/// `set`, read only (a listing must not write tracked files). `Ok` and
/// empty without a tasks.md; `Err` with the warning when its boxes cannot
/// be matched to the tasks.
pub(crate) fn lagging(set: &TaskSet) -> Result<Vec<TaskId>, String> {
    if set.format != TasksFormat::SpectrJsonc {
        return Ok(Vec::new());
    }
    let path = set.change_dir.join(TASKS_MD);
    let text = match std::fs::read(&path) {
        Ok(bytes) => String::from_utf8(bytes).map_err(|_| unsure(set, &path, "it is not UTF-8"))?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(format!("could not read {}: {e}", path.display())),
    };
    let boxes = map_boxes(set, &path, &text).map_err(|reason| unsure(set, &path, &reason))?;
    let bytes = text.as_bytes();
    Ok(boxes
        .iter()
        .filter(|(id, at)| {
            let want = set
                .task(id)
                .is_some_and(|t| t.status == TaskStatus::Completed);
            want != matches!(bytes.get(**at), Some(b'x' | b'X'))
        })
        .map(|(id, _)| id.clone())
        .collect())
}

/// `text` with the boxes of `only` (or all) set from `set`'s statuses, or
/// `None` when every box already agrees.
fn with_boxes_set(
    set: &TaskSet,
    text: &str,
    boxes: &BTreeMap<TaskId, usize>,
    only: Option<&TaskId>,
) -> Option<Vec<u8>> {
    let mut bytes = text.as_bytes().to_vec();
    let mut changed = false;
    let chosen: Vec<(&TaskId, &usize)> = match only {
        Some(id) => boxes.get_key_value(id).into_iter().collect(),
        None => boxes.iter().collect(),
    };
    for (id, &at) in chosen {
        let want = set
            .task(id)
            .is_some_and(|t| t.status == TaskStatus::Completed);
        let ticked = matches!(bytes.get(at), Some(b'x' | b'X'));
        if ticked != want && at < bytes.len() {
            bytes[at] = if want { b'x' } else { b' ' };
            changed = true;
        }
    }
    changed.then_some(bytes)
}

/// Each task's box, when tasks.md still reads as the tasks.jsonc accept made
/// from it; else why not.
fn map_boxes(set: &TaskSet, path: &Path, text: &str) -> Result<BTreeMap<TaskId, usize>, String> {
    let md = parse_tasks_md(path, text).map_err(|e| format!("it no longer reads: {e}"))?;
    let mut boxes = BTreeMap::new();
    for line in md.tasks() {
        let id = TaskId::from(line.id.as_str());
        let Some(task) = set.task(&id).filter(|t| !t.is_container()) else {
            return Err(format!(
                "its checkbox on line {} (\"{}\") would be task {id}, which tasks.jsonc does not have",
                line.line,
                short(&line.description)
            ));
        };
        if !same_text(&task.description, &line.description) {
            return Err(format!(
                "its checkbox on line {} reads \"{}\" where task {id} of tasks.jsonc is \"{}\"",
                line.line,
                short(&line.description),
                short(&task.description)
            ));
        }
        boxes.insert(id, line.mark);
    }
    if let Some(lost) = set
        .leaves()
        .find(|t| !boxes.contains_key(&t.id) && numbered_from(&md, &t.id))
    {
        return Err(format!(
            "task {} of tasks.jsonc (\"{}\") has no checkbox in it",
            lost.id,
            short(&lost.description)
        ));
    }
    Ok(boxes)
}

/// Whether accept would have made task `id` from a line of `md` (`S.n` of one
/// of its sections, or `n` of the tasks before them), rather than from
/// spectr.yaml (`append_tasks`' own section, `refs_always_*`'s `S.0.i` and
/// `S.99.i`).
fn numbered_from(md: &TasksMd, id: &TaskId) -> bool {
    let parts: Vec<&str> = id.segments().collect();
    match parts.as_slice() {
        [_] => !md.loose.is_empty(),
        [section, _] => section
            .parse::<u64>()
            .is_ok_and(|n| md.sections.iter().any(|s| s.number == n)),
        _ => false,
    }
}

/// The same task text: equal but for spacing, or tasks.jsonc holding only the
/// first line of a longer task (upstream's accept drops continuation lines).
fn same_text(jsonc: &str, md: &str) -> bool {
    let norm = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
    let (j, m) = (norm(jsonc), norm(md));
    j == m || (!j.is_empty() && m.strip_prefix(&j).is_some_and(|r| r.starts_with(' ')))
}

fn short(text: &str) -> String {
    const MAX: usize = 48;
    match text.char_indices().nth(MAX) {
        Some((at, _)) => format!("{}...", &text[..at]),
        None => text.to_string(),
    }
}

fn unsure(set: &TaskSet, path: &Path, reason: &str) -> String {
    let change = set
        .change_dir
        .file_name()
        .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
    format!(
        "{} is left as it is: {reason}. The two files no longer list the same tasks, so its boxes cannot be matched to tasks.jsonc's statuses; run `spectr accept {change}` to make tasks.jsonc from tasks.md again (statuses are kept), or tick tasks.md by hand",
        path.display()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn texts_match_whole_or_by_their_first_line() {
        assert!(same_text("Add the parser", "Add  the parser"));
        assert!(same_text(
            "Create X with fields:",
            "Create X with fields: `a`, `b`"
        ));
        assert!(!same_text("Create X", "Create Xylophone"));
        assert!(!same_text("", "anything"));
        assert!(!same_text("Add the parser", "Add the lexer"));
    }

    #[test]
    fn short_cuts_long_text_on_a_char_boundary() {
        assert_eq!(short("abc"), "abc");
        let long = "é".repeat(60);
        assert_eq!(short(&long), format!("{}...", "é".repeat(48)));
    }
}
