//! Learnings carried between tasks: `<change>/.ralph/learnings.md`, a plain
//! markdown file that agents append to (`spectr learn`, or `<learning>…</learning>`
//! in their final answer) and people may read and edit. Every later prompt
//! gets its newest part, so agents do not start cold.
//!
//! The file lives in `.ralph/`, which the checkpoints never snapshot or
//! revert: a lesson from a failed attempt survives its revert.

use crate::model::TaskId;
use std::path::{Path, PathBuf};

pub const FILE_NAME: &str = "learnings.md";
/// How much of the file goes into a prompt: the newest part is kept.
pub const PROMPT_LIMIT: usize = 8 * 1024;

const HEADER: &str = "# Learnings\n\nWhat earlier tasks found out, for the tasks after them. Newest last; edit freely.\n\n";

/// `<change>/.ralph/learnings.md`.
pub fn path(change_dir: &Path) -> PathBuf {
    change_dir
        .join(crate::ralph::config::STATE_DIR)
        .join(FILE_NAME)
}

/// The file's content; empty when it does not exist yet.
pub fn read(path: &Path) -> std::io::Result<String> {
    match std::fs::read_to_string(path) {
        Ok(s) => Ok(s),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(String::new()),
        Err(e) => Err(e),
    }
}

/// One entry as written to the file: `- [task] text`, later lines indented.
pub fn entry(task: Option<&TaskId>, text: &str) -> String {
    let text = text.trim();
    let mut lines = text.lines();
    let first = lines.next().unwrap_or_default();
    let mut out = match task {
        Some(t) => format!("- [{t}] {first}\n"),
        None => format!("- {first}\n"),
    };
    for l in lines {
        if l.trim().is_empty() {
            out.push('\n');
        } else {
            out.push_str("  ");
            out.push_str(l);
            out.push('\n');
        }
    }
    out
}

/// Appends one learning (atomically: the file is rewritten whole). Empty text
/// is refused.
pub fn append(path: &Path, task: Option<&TaskId>, text: &str) -> std::io::Result<()> {
    if text.trim().is_empty() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "a learning needs some text",
        ));
    }
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
        // `.ralph/` is spectr's own: never committable by an agent's `git add -A`.
        let ignore = dir.join(".gitignore");
        if !ignore.exists() {
            std::fs::write(&ignore, "*\n")?;
        }
    }
    let mut content = read(path)?;
    if content.trim().is_empty() {
        content = HEADER.to_string();
    } else if !content.ends_with('\n') {
        content.push('\n');
    }
    content.push_str(&entry(task, text));
    crate::model::atomic::write_atomic(path, content.as_bytes())
}

/// The texts of `<learning>…</learning>` blocks in an agent's final answer,
/// ignoring lines that echo the prompt (which explains the tags).
pub fn extract(final_answer: &str, prompt: &str) -> Vec<String> {
    const OPEN: &str = "<learning>";
    const CLOSE: &str = "</learning>";
    if !final_answer.contains(OPEN) {
        return Vec::new();
    }
    let echo: std::collections::BTreeSet<&str> = prompt
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    let own: Vec<&str> = final_answer
        .lines()
        .filter(|l| !echo.contains(l.trim()))
        .collect();
    let own = own.join("\n");
    let mut found = Vec::new();
    let mut rest = own.as_str();
    while let Some(start) = rest.find(OPEN) {
        let after = &rest[start + OPEN.len()..];
        let Some(end) = after.find(CLOSE) else { break };
        let text = after[..end].trim();
        if !text.is_empty() {
            found.push(text.to_string());
        }
        rest = &after[end + CLOSE.len()..];
    }
    found
}

/// What was appended between two readings of the file, when the earlier
/// content is still its start (a person's rewrite is not a new learning).
pub fn appended(before: &str, after: &str) -> Option<String> {
    let added = after.strip_prefix(before)?;
    let added = if before.is_empty() {
        added.strip_prefix(HEADER).unwrap_or(added)
    } else {
        added
    };
    let added = added.trim();
    (!added.is_empty()).then(|| added.to_string())
}

/// Set for a sandboxed agent (where the learnings file is read-only): the
/// file `spectr learn` writes instead, in the attempt's own writable folder;
/// the run moves what it holds into the learnings file when the attempt ends.
pub const INBOX_ENV: &str = "SPECTR_RALPH_LEARNINGS";

/// A sandboxed attempt's inbox (see [`INBOX_ENV`]), in its own folder.
pub fn inbox(attempt_dir: &Path) -> PathBuf {
    attempt_dir.join(FILE_NAME)
}

/// Moves the learnings a file written by `append` holds (a lane's copy of
/// the learnings file, a sandboxed attempt's inbox) into `into`, labelled
/// with `task`, but those `into` has already; removes `from`. Each learning
/// moved, with whether it could be written.
pub fn import(from: &Path, into: &Path, task: &TaskId) -> Vec<(String, std::io::Result<()>)> {
    let Ok(text) = read(from) else {
        return Vec::new();
    };
    let moved = import_entries(entries(&text), into, task);
    let _ = std::fs::remove_file(from);
    moved
}

/// Appends each of `learned` (a remote lane's, say) to `into`, labelled
/// with `task`, but those `into` has already. Each learning appended, with
/// whether it could be written.
pub fn import_entries(
    learned: Vec<String>,
    into: &Path,
    task: &TaskId,
) -> Vec<(String, std::io::Result<()>)> {
    let have = read(into).unwrap_or_default();
    learned
        .into_iter()
        .filter(|entry| !have.contains(entry.as_str()))
        .map(|entry| {
            let written = append(into, Some(task), &entry);
            (entry, written)
        })
        .collect()
}

/// The learnings a whole file holds (a lane's copy, written by `append`):
/// its entries, never the header `append` starts a new file with.
pub fn entries(content: &str) -> Vec<String> {
    split_entries(without_header(content))
}

/// The file's content after the header `append` writes, if it starts with
/// it (its blank lines may have been trimmed).
fn without_header(content: &str) -> &str {
    let header = HEADER.trim_end();
    match content.trim_start().strip_prefix(header) {
        Some(rest) if rest.is_empty() || rest.starts_with('\n') => rest,
        _ => content,
    }
}

/// The learnings in appended text, one per `- ` entry, without the bullet and
/// the `[task]` label `append` writes; text that is not a list is one learning.
pub fn split_entries(added: &str) -> Vec<String> {
    let mut entries: Vec<String> = Vec::new();
    for line in added.lines() {
        if let Some(rest) = line.strip_prefix("- ") {
            let rest = match rest.strip_prefix('[').and_then(|r| r.split_once("] ")) {
                Some((label, text)) if !label.contains(' ') => text,
                _ => rest,
            };
            entries.push(rest.to_string());
        } else if let Some(last) = entries.last_mut() {
            last.push('\n');
            last.push_str(line.strip_prefix("  ").unwrap_or(line));
        } else {
            entries.push(line.to_string());
        }
    }
    entries
        .into_iter()
        .map(|e| e.trim().to_string())
        .filter(|e| !e.is_empty())
        .collect()
}

/// The newest part of the learnings for a prompt: at most `limit` bytes, cut
/// at a line start, with a note when older ones were left out. None when
/// nothing was recorded.
pub fn for_prompt(content: &str, limit: usize) -> Option<String> {
    let body = without_header(content).trim();
    if body.is_empty() {
        return None;
    }
    if body.len() <= limit {
        return Some(body.to_string());
    }
    let mut cut = body.len() - limit;
    while !body.is_char_boundary(cut) {
        cut += 1;
    }
    let tail = &body[cut..];
    // Start at a whole line (unless one line is longer than the limit).
    let tail = match tail.find('\n') {
        Some(i) if i + 1 < tail.len() => &tail[i + 1..],
        _ => tail,
    };
    Some(format!(
        "(older learnings are left out here; the whole file has them)\n{tail}"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extract_finds_every_block() {
        let answer = "Done.\n<learning>use tabs</learning>\nmore <learning>\n two\nlines \n</learning><learning></learning>\n<learning>open";
        assert_eq!(extract(answer, ""), ["use tabs", "two\nlines"]);
        let prompt = "put it between `<learning>` and `</learning>`.";
        let echoed = format!("  {prompt}\n<learning>mine</learning>");
        assert_eq!(extract(&echoed, prompt), ["mine"]);
    }

    #[test]
    fn append_creates_with_header_and_indents_continuations() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join(".ralph").join(FILE_NAME);
        append(&p, Some(&TaskId::from("1.1")), "first\nsecond").unwrap();
        append(&p, None, "third").unwrap();
        let text = read(&p).unwrap();
        assert_eq!(text, format!("{HEADER}- [1.1] first\n  second\n- third\n"));
        assert!(append(&p, None, "  ").is_err());
        assert_eq!(
            appended("", &text).unwrap(),
            "- [1.1] first\n  second\n- third"
        );
        assert_eq!(appended(&text, &text), None);
        assert_eq!(appended("other", &text), None);
    }

    #[test]
    fn entries_lose_their_bullet_and_label() {
        assert_eq!(
            split_entries("- [1.1] one\n  two\n- three\n- [a b] c"),
            ["one\ntwo", "three", "[a b] c"]
        );
        assert_eq!(split_entries("prose\nmore"), ["prose\nmore"]);
    }

    #[test]
    fn a_whole_file_gives_its_entries_without_the_header() {
        let file = format!("{HEADER}- [1.1] one\n  two\n- three\n");
        assert_eq!(entries(&file), ["one\ntwo", "three"]);
        assert!(entries(HEADER).is_empty());
        assert!(entries(HEADER.trim_end()).is_empty());
        // Text that is not the header is kept: a person's own heading too.
        assert_eq!(entries("# Notes\n- x\n"), ["# Notes", "x"]);
        assert_eq!(entries("plain note\n"), ["plain note"]);
    }

    #[test]
    fn prompt_keeps_the_newest_whole_lines() {
        assert_eq!(for_prompt("", 100), None);
        assert_eq!(for_prompt(HEADER, 100), None);
        let content: String = (0..100).map(|i| format!("- learning {i}\n")).collect();
        let p = for_prompt(&content, 64).unwrap();
        assert!(p.starts_with("(older learnings"), "{p}");
        assert!(p.ends_with("- learning 99"), "{p}");
        assert!(!p.contains("learning 1\n"));
        let body = p.split_once('\n').unwrap().1;
        assert!(body.len() <= 64 && body.starts_with("- learning"), "{body}");
    }

    #[test]
    fn import_moves_new_learnings_and_removes_the_inbox() {
        let dir = tempfile::tempdir().unwrap();
        let into = dir.path().join(".ralph").join(FILE_NAME);
        let from = inbox(&dir.path().join("1.1-attempt-1"));
        append(&into, Some(&TaskId::from("1.0")), "known").unwrap();
        append(&from, None, "known").unwrap();
        append(&from, None, "new\nsecond line").unwrap();
        let moved = import(&from, &into, &TaskId::from("1.1"));
        let texts: Vec<&str> = moved.iter().map(|(t, _)| t.as_str()).collect();
        assert_eq!(texts, ["new\nsecond line"]);
        assert!(moved.iter().all(|(_, r)| r.is_ok()));
        assert!(!from.exists());
        let text = read(&into).unwrap();
        assert!(
            text.ends_with("- [1.0] known\n- [1.1] new\n  second line\n"),
            "{text}"
        );
        // Nothing there: nothing moved.
        assert!(import(&from, &into, &TaskId::from("1.1")).is_empty());
    }
}
