//! OpenSpec `tasks.md` as a task list: each `## N. Title` (or `## Title`,
//! numbered previous + 1) section holding checkboxes is one leaf task (a story).
//! Completing it ticks every `- [ ]` of the section and changes nothing else.
//!
//! The format alone, on text: a [`crate::model::TaskSet`] is made from it
//! (and written back through it) by `tasks/openspec_load.rs`.

use crate::model::error::FileDiag;
use crate::model::{ModelError, TaskStatus};
use std::collections::HashMap;
use std::path::{Component, Path};

pub(crate) const TASKS_MD: &str = "tasks.md";

/// True when `change_dir` sits in an `openspec/changes/` folder.
pub(crate) fn is_openspec_change(change_dir: &Path) -> bool {
    let dir = std::fs::canonicalize(change_dir).unwrap_or_else(|_| change_dir.to_path_buf());
    let names: Vec<&std::ffi::OsStr> = dir
        .components()
        .filter_map(|c| match c {
            Component::Normal(s) => Some(s),
            _ => None,
        })
        .collect();
    names
        .windows(2)
        .any(|w| w[0] == "openspec" && w[1] == "changes")
}

/// One `## ` section of tasks.md that holds checkboxes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Section {
    pub id: String,
    pub title: String,
    /// 1-based line of the heading.
    pub line: usize,
    /// Byte range of the heading line (for errors).
    pub heading: std::ops::Range<usize>,
    /// Byte offset of the mark inside each checkbox's brackets, and whether it
    /// is ticked.
    pub boxes: Vec<(usize, bool)>,
    /// The checkbox lines and their continuation lines.
    pub description: String,
}

impl Section {
    pub fn status(&self) -> TaskStatus {
        let done = self.boxes.iter().filter(|b| b.1).count();
        if done == self.boxes.len() {
            TaskStatus::Completed
        } else if done > 0 {
            TaskStatus::InProgress
        } else {
            TaskStatus::Pending
        }
    }
}

/// `## N. Title` -> (Some(N), Title); `## Title` -> (None, Title).
fn heading(line: &str) -> Option<(Option<u64>, &str)> {
    let rest = line.strip_prefix("##")?;
    if !rest.starts_with([' ', '\t']) {
        return None; // `###` or `##x`
    }
    let rest = rest.trim();
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    if digits > 0
        && let Some(title) = rest[digits..].strip_prefix('.')
        && (title.is_empty() || title.starts_with([' ', '\t']))
        && let Ok(n) = rest[..digits].parse::<u64>()
    {
        return Some((Some(n), title.trim()));
    }
    Some((None, rest))
}

/// Offset of the mark inside `[ ]` in a checkbox line, and whether it is ticked.
fn checkbox(line: &str) -> Option<(usize, bool)> {
    let indent = line.len() - line.trim_start().len();
    let rest = &line[indent..];
    let mut chars = rest.char_indices();
    let (_, marker) = chars.next()?;
    if !matches!(marker, '-' | '*' | '+') {
        return None;
    }
    let after = rest[1..].trim_start();
    let open = line.len() - after.len();
    let b = after.as_bytes();
    if b.len() >= 3 && b[0] == b'[' && b[2] == b']' && matches!(b[1], b' ' | b'x' | b'X') {
        Some((open + 1, b[1] != b' '))
    } else {
        None
    }
}

/// The sections of `text` that hold at least one checkbox, in file order.
pub(crate) fn parse_sections(text: &str) -> Vec<Section> {
    let mut out: Vec<Section> = Vec::new();
    let mut current: Option<Section> = None;
    let mut prev_number = 0u64;
    let mut in_fence = false;
    let mut in_box = false;
    let mut offset = 0;
    for (i, raw) in text.split_inclusive('\n').enumerate() {
        let start = offset;
        offset += raw.len();
        let line = raw.trim_end_matches(['\n', '\r']);
        let trimmed = line.trim_start();
        if trimmed.starts_with("```") || trimmed.starts_with("~~~") {
            in_fence = !in_fence;
        }
        if !in_fence && (line.starts_with("# ") || line == "#" || heading(line).is_some()) {
            out.extend(current.take().filter(|s| !s.boxes.is_empty()));
            in_box = false;
            if let Some((number, title)) = heading(line) {
                let n = number.unwrap_or(prev_number.saturating_add(1));
                prev_number = n;
                current = Some(Section {
                    id: n.to_string(),
                    title: title.to_string(),
                    line: i + 1,
                    heading: start..start + line.len(),
                    boxes: Vec::new(),
                    description: String::new(),
                });
            }
            continue;
        }
        let Some(sec) = current.as_mut() else {
            continue;
        };
        let boxed = if in_fence { None } else { checkbox(line) };
        if let Some((at, ticked)) = boxed {
            sec.boxes.push((start + at, ticked));
            in_box = true;
        } else if !(in_box && !trimmed.is_empty() && line.starts_with([' ', '\t'])) {
            in_box = false;
            continue;
        }
        if !sec.description.is_empty() {
            sec.description.push('\n');
        }
        sec.description.push_str(line.trim_end());
    }
    out.extend(current.filter(|s| !s.boxes.is_empty()));
    out
}

/// The sections of tasks.md (`text`, read from `path`): an error when two
/// share a number.
pub(crate) fn numbered_sections(path: &Path, text: &str) -> Result<Vec<Section>, ModelError> {
    let sections = parse_sections(text);
    let mut seen: HashMap<&str, usize> = HashMap::new();
    for s in &sections {
        if let Some(first) = seen.insert(&s.id, s.line) {
            return Err(ModelError::DuplicateId(Box::new(FileDiag::new(
                path,
                text,
                s.heading.start,
                s.heading.end,
                format!("duplicate section number {} (first at line {first})", s.id),
                "numbered again here",
                "number each `## N.` section differently",
            ))));
        }
    }
    Ok(sections)
}

/// `text`'s bytes with every checkbox of section `id` ticked, and whether any
/// was not ticked already; `None` when no section has that number.
pub(crate) fn tick_section(text: &str, id: &str) -> Option<(Vec<u8>, bool)> {
    let section = parse_sections(text).into_iter().find(|s| s.id == id)?;
    let mut bytes = text.as_bytes().to_vec();
    let mut changed = false;
    for &(at, ticked) in &section.boxes {
        if !ticked {
            // `[ ]` -> `[x]`: one ASCII byte for another, nothing else moves.
            bytes[at] = b'x';
            changed = true;
        }
    }
    Some((bytes, changed))
}

#[cfg(test)]
mod tests {
    use super::*;

    const MD: &str = "# Tasks\n\n- [ ] orphan\n\n## 1. Setup\n- [x] 1.1 a\n  more of a\n- [ ] 1.2 b\n\nprose\n## Build it\n* [X] 2.1 c\n```\n## 9. not a heading\n- [ ] not a box\n```\n## 3. Empty\ntext only\n## 5. Last\n- [ ] x\r\n";

    #[test]
    fn sections_numbers_and_statuses() {
        let s = parse_sections(MD);
        let ids: Vec<&str> = s.iter().map(|s| s.id.as_str()).collect();
        assert_eq!(ids, ["1", "2", "5"]);
        assert_eq!(s[0].title, "Setup");
        assert_eq!(s[0].line, 5);
        assert_eq!(s[0].description, "- [x] 1.1 a\n  more of a\n- [ ] 1.2 b");
        assert_eq!(s[0].status(), TaskStatus::InProgress);
        assert_eq!(s[1].title, "Build it");
        assert_eq!(s[1].status(), TaskStatus::Completed);
        assert_eq!(s[1].boxes.len(), 1, "boxes inside a code fence don't count");
        assert_eq!(s[2].status(), TaskStatus::Pending);
        for sec in &s {
            for &(at, _) in &sec.boxes {
                assert!(matches!(MD.as_bytes()[at], b' ' | b'x' | b'X'));
                assert_eq!(MD.as_bytes()[at - 1], b'[');
            }
        }
    }

    #[test]
    fn heading_forms() {
        assert_eq!(heading("## 1. A"), Some((Some(1), "A")));
        assert_eq!(heading("## 12.  B c "), Some((Some(12), "B c")));
        assert_eq!(heading("## Title"), Some((None, "Title")));
        assert_eq!(heading("## 1.2 Title"), Some((None, "1.2 Title")));
        assert_eq!(heading("### 1. A"), None);
        assert_eq!(heading("##x"), None);
    }

    #[test]
    fn openspec_detection() {
        assert!(is_openspec_change(Path::new("/p/openspec/changes/add-x")));
        assert!(!is_openspec_change(Path::new("/p/spectr/changes/add-x")));
    }
}
