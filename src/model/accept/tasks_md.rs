//! Reading a change's `tasks.md` checklist.
//!
//! - sections are `## N. Name` (numbered) or `## Name` (previous number + 1);
//!   a section number used twice is an error (the ids would collide);
//! - tasks are `- [ ] text` (pending) and `- [x]` / `- [X]` (completed), with
//!   `-`, `*` or `+` bullets, at any indentation (nested checkboxes are tasks
//!   too); ids are re-derived as `<section>.<n>`, and tasks before any section
//!   get `1`, `2`, ...;
//! - a leading number in the text (`1.1 `, `1.1. `, `2. `) is dropped: the id
//!   replaces it; a bare number (`3 retries`) is kept, it is likely words;
//! - a task's continuation lines (indented text, nested non-checkbox bullets,
//!   or text right below it) stay in its description, joined with one space;
//! - nothing inside a fenced code block starts a section or a task.

use super::error::AcceptError;
use crate::model::TaskStatus;
use miette::{NamedSource, SourceSpan};
use std::collections::BTreeMap;
use std::path::Path;

/// One checkbox of tasks.md.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MdTask {
    pub id: String,
    pub section: String,
    pub description: String,
    pub status: TaskStatus,
    /// 1-based line of the checkbox.
    pub line: usize,
    /// Byte offset in the text of the box's mark (the ` ` or `x` between
    /// the brackets): what keeping tasks.md in step rewrites.
    pub mark: usize,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MdSection {
    pub number: u64,
    pub name: String,
    pub line: usize,
    pub tasks: Vec<MdTask>,
}

/// tasks.md as read: tasks before any section, then the sections in order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TasksMd {
    pub loose: Vec<MdTask>,
    pub sections: Vec<MdSection>,
}

impl TasksMd {
    pub fn tasks(&self) -> impl Iterator<Item = &MdTask> {
        self.loose
            .iter()
            .chain(self.sections.iter().flat_map(|s| s.tasks.iter()))
    }

    pub fn task_count(&self) -> usize {
        self.tasks().count()
    }
}

/// Parses tasks.md (`path` is only used in errors).
pub fn parse_tasks_md(path: &Path, text: &str) -> Result<TasksMd, AcceptError> {
    let mut out = TasksMd::default();
    let mut last_number: u64 = 0;
    let mut used: BTreeMap<u64, usize> = BTreeMap::new();
    let mut loose_seq = 0usize;
    // The task still taking continuation lines, with its indentation.
    let mut open: Option<(usize, Vec<String>)> = None;
    let mut blank_since_open = false;
    let mut fence: Option<&str> = None;
    let mut offset = 0usize;

    for (idx, raw) in text.split_inclusive('\n').enumerate() {
        let line_start = offset;
        offset += raw.len();
        let line = raw.trim_end_matches(['\n', '\r']);
        let lineno = idx + 1;
        let indent = indent_width(line);
        let trimmed = line.trim();

        if let Some(marker) = fence {
            if trimmed.starts_with(marker) {
                fence = None;
            }
            if let Some((task_indent, parts)) = open.as_mut()
                && (indent > *task_indent || trimmed.is_empty())
                && !trimmed.is_empty()
            {
                parts.push(trimmed.to_string());
            }
            continue;
        }
        if trimmed.starts_with("```") || trimmed.starts_with("~~~") {
            fence = Some(&trimmed[..3]);
            match open.as_mut() {
                Some((task_indent, parts)) if indent > *task_indent => {
                    parts.push(trimmed.to_string())
                }
                _ => close(&mut out, &mut open),
            }
            continue;
        }

        if let Some((number, name)) = section_header(line) {
            close(&mut out, &mut open);
            let number = number.unwrap_or(last_number + 1);
            if let Some(&first) = used.get(&number) {
                return Err(AcceptError::DuplicateSection {
                    path: path.to_path_buf(),
                    line: lineno,
                    first,
                    number,
                    src: std::sync::Arc::new(NamedSource::new(
                        path.display().to_string(),
                        crate::model::error::shown(text, true),
                    )),
                    span: SourceSpan::from(line_start..line_start + line.len()),
                });
            }
            used.insert(number, lineno);
            last_number = number;
            out.sections.push(MdSection {
                number,
                name: name.to_string(),
                line: lineno,
                tasks: Vec::new(),
            });
            continue;
        }
        if trimmed.starts_with('#') && is_heading(trimmed) {
            close(&mut out, &mut open);
            continue;
        }
        if let Some((checked, text, mark)) = checkbox(line) {
            close(&mut out, &mut open);
            let text = strip_task_number(text.trim());
            if text.is_empty() {
                continue;
            }
            let status = if checked {
                TaskStatus::Completed
            } else {
                TaskStatus::Pending
            };
            let (id, section) = match out.sections.last() {
                Some(s) => (
                    format!("{}.{}", s.number, s.tasks.len() + 1),
                    s.name.clone(),
                ),
                None => {
                    loose_seq += 1;
                    (loose_seq.to_string(), String::new())
                }
            };
            let task = MdTask {
                id,
                section,
                description: String::new(),
                status,
                line: lineno,
                mark: line_start + mark,
            };
            match out.sections.last_mut() {
                Some(s) => s.tasks.push(task),
                None => out.loose.push(task),
            }
            open = Some((indent, vec![text.to_string()]));
            blank_since_open = false;
            continue;
        }
        if trimmed.is_empty() {
            blank_since_open = true;
            continue;
        }
        // Plain text: part of the open task when indented under it, or right
        // below it with no blank line (markdown's lazy continuation) and not
        // a new bullet of its own.
        let continues = match &open {
            Some((task_indent, _)) => {
                indent > *task_indent || (!blank_since_open && !is_list_item(trimmed))
            }
            None => false,
        };
        if continues {
            if let Some((_, parts)) = open.as_mut() {
                parts.push(trimmed.to_string());
            }
        } else {
            close(&mut out, &mut open);
        }
    }
    close(&mut out, &mut open);
    Ok(out)
}

/// Ends the open task: its text parts become the description of the last task.
fn close(out: &mut TasksMd, open: &mut Option<(usize, Vec<String>)>) {
    let Some((_, parts)) = open.take() else {
        return;
    };
    let last = match out.sections.last_mut() {
        Some(s) => s.tasks.last_mut(),
        None => out.loose.last_mut(),
    };
    if let Some(task) = last {
        task.description = parts.join(" ");
    }
}

fn indent_width(line: &str) -> usize {
    let mut w = 0;
    for c in line.chars() {
        match c {
            ' ' => w += 1,
            '\t' => w += 4,
            _ => break,
        }
    }
    w
}

/// `## N. Name` -> (Some(N), Name); `## Name` -> (None, Name).
fn section_header(line: &str) -> Option<(Option<u64>, &str)> {
    let rest = line.strip_prefix("## ")?;
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    if digits > 0
        && let Some(name) = rest[digits..].strip_prefix(". ")
        && let Ok(n) = rest[..digits].parse::<u64>()
    {
        let name = name.trim();
        return (!name.is_empty()).then_some((Some(n), name));
    }
    let name = rest.trim();
    (!name.is_empty()).then_some((None, name))
}

fn is_heading(trimmed: &str) -> bool {
    let hashes = trimmed.bytes().take_while(|&b| b == b'#').count();
    (1..=6).contains(&hashes) && trimmed[hashes..].starts_with([' ', '\t'])
        || trimmed.len() == hashes
}

/// `- [ ] text` / `* [x] text` / `+ [X] text` at any indentation: whether
/// ticked, the text after the box, and the byte offset of the mark in `line`.
fn checkbox(line: &str) -> Option<(bool, &str, usize)> {
    let rest = line.trim_start();
    let rest = rest.strip_prefix(['-', '*', '+'])?;
    let rest = rest.strip_prefix([' ', '\t'])?.trim_start();
    let rest = rest.strip_prefix('[')?;
    let mark_at = line.len() - rest.len();
    let mut chars = rest.chars();
    let mark = chars.next()?;
    let rest = chars.as_str().strip_prefix(']')?;
    let checked = match mark {
        ' ' => false,
        'x' | 'X' => true,
        _ => return None,
    };
    if !(rest.is_empty() || rest.starts_with([' ', '\t'])) {
        return None;
    }
    Some((checked, rest, mark_at))
}

fn is_list_item(trimmed: &str) -> bool {
    if trimmed.len() >= 2 && trimmed.starts_with(['-', '*', '+']) && trimmed[1..].starts_with(' ') {
        return true;
    }
    let digits = trimmed.bytes().take_while(u8::is_ascii_digit).count();
    digits > 0 && trimmed[digits..].starts_with(". ")
}

/// Drops a leading `1.1 `, `1.1. ` or `2. ` (ids are re-derived); keeps a bare
/// `3 ` (likely a count in the sentence).
fn strip_task_number(text: &str) -> &str {
    let b = text.as_bytes();
    let mut i = 0;
    let mut groups = 0;
    let mut trailing_dot = false;
    loop {
        let start = i;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
        if i == start {
            break;
        }
        groups += 1;
        trailing_dot = false;
        if i < b.len() && b[i] == b'.' {
            i += 1;
            trailing_dot = true;
            continue;
        }
        break;
    }
    let numbered = groups >= 2 || (groups == 1 && trailing_dot);
    if numbered && i < b.len() && (b[i] == b' ' || b[i] == b'\t') {
        text[i..].trim_start()
    } else {
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> TasksMd {
        parse_tasks_md(Path::new("tasks.md"), text).unwrap()
    }

    fn summary(md: &TasksMd) -> Vec<(String, String, String, TaskStatus)> {
        md.tasks()
            .map(|t| {
                (
                    t.id.clone(),
                    t.section.clone(),
                    t.description.clone(),
                    t.status,
                )
            })
            .collect()
    }

    #[test]
    fn sections_ids_statuses() {
        let md = parse(
            "# Tasks\n\n## 1. Core\n\n- [ ] 1.1 First\n- [x] 1.2. Second\n- [X] Third\n\n## Styling\n- [ ] a\n  - [ ] nested\n## 5. Later\n* [ ] star\n+ [x] plus\n",
        );
        let s = summary(&md);
        let ids: Vec<&str> = s.iter().map(|t| t.0.as_str()).collect();
        assert_eq!(ids, ["1.1", "1.2", "1.3", "2.1", "2.2", "5.1", "5.2"]);
        assert_eq!(s[0].2, "First");
        assert_eq!(s[1].2, "Second");
        assert_eq!(s[1].3, TaskStatus::Completed);
        assert_eq!(s[2].3, TaskStatus::Completed);
        assert_eq!(s[3].1, "Styling");
        assert_eq!(s[4].2, "nested");
        assert_eq!(s[6].3, TaskStatus::Completed);
        assert_eq!(md.sections[1].number, 2);
    }

    #[test]
    fn marks_point_at_the_box_character() {
        let text = "## 1. A\r\n- [ ] one\r\n\t* [X] two\n  +  [x] three\n";
        let md = parse(text);
        let marks: Vec<u8> = md.tasks().map(|t| text.as_bytes()[t.mark]).collect();
        assert_eq!(marks, b" Xx");
        assert_eq!(md.tasks().map(|t| t.mark).collect::<Vec<_>>(), [12, 24, 37]);
    }

    #[test]
    fn continuation_lines_are_kept() {
        let md = parse(
            "## 1. A\n- [ ] 1.1 Create `X` with fields:\n  `Path` (absolute), `Rel`\n  more\n- [ ] 1.2 Next\nlazy line\n\n- [ ] 1.3 Third\n\n  after blank, indented\n\nNot part of it\n- [ ] 1.4 Four\n  - detail bullet\n",
        );
        let d: Vec<String> = md.tasks().map(|t| t.description.clone()).collect();
        assert_eq!(
            d,
            [
                "Create `X` with fields: `Path` (absolute), `Rel` more",
                "Next lazy line",
                "Third after blank, indented",
                "Four - detail bullet",
            ]
        );
    }

    #[test]
    fn loose_tasks_and_numbers() {
        let md = parse("- [ ] one\n- [ ] 3 retries\n- [ ] 2. two\n- [ ]\n- [ ] 1.1\n");
        let s = summary(&md);
        assert_eq!(
            s.iter()
                .map(|t| (t.0.as_str(), t.2.as_str()))
                .collect::<Vec<_>>(),
            [("1", "one"), ("2", "3 retries"), ("3", "two"), ("4", "1.1")]
        );
        // An empty checkbox is no task; "- [ ] 1.1" with nothing after the
        // number keeps the number as its text.
        assert!(md.sections.is_empty());
    }

    #[test]
    fn not_tasks() {
        let md = parse(
            "## 1. A\n-[ ] no space\n- [y] other mark\n- [ ]x glued\n```\n- [ ] in a fence\n## 2. not a section\n```\n- [ ] real\n",
        );
        let s = summary(&md);
        assert_eq!(s.len(), 1, "{s:?}");
        assert_eq!(s[0].0, "1.1");
        assert_eq!(md.sections.len(), 1);
    }

    #[test]
    fn duplicate_section_is_an_error() {
        let err =
            parse_tasks_md(Path::new("t.md"), "## 1. A\n- [ ] x\n## B\n## 2. C\n").unwrap_err();
        assert!(
            matches!(
                err,
                AcceptError::DuplicateSection {
                    line: 4,
                    first: 3,
                    number: 2,
                    ..
                }
            ),
            "{err:?}"
        );
        assert!(err.to_string().starts_with("t.md:4:"));
    }

    #[test]
    fn strip_numbers() {
        assert_eq!(strip_task_number("1.1 Foo"), "Foo");
        assert_eq!(strip_task_number("1.1. Foo"), "Foo");
        assert_eq!(strip_task_number("12. Foo"), "Foo");
        assert_eq!(strip_task_number("1.2.3 Foo"), "Foo");
        assert_eq!(strip_task_number("3 retries"), "3 retries");
        assert_eq!(strip_task_number("2.5x faster"), "2.5x faster");
        assert_eq!(strip_task_number("1.1"), "1.1");
        assert_eq!(strip_task_number("v1.1 Foo"), "v1.1 Foo");
    }
}
