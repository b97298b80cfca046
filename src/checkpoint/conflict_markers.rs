//! The conflict markers a resolve attempt finds in its tree: labelled in
//! words the agent understands (git labels them with tree ids), and found
//! again afterwards, so work still holding them never merges.

/// The first line of a conflicted hunk: the project as it is now.
pub const OURS: &str = "<<<<<<< the project now";

/// The last line of a conflicted hunk: the task's previous work.
pub fn theirs(task: &str) -> String {
    format!(">>>>>>> your previous work on task {task}")
}

/// `text` with git's tree-id labels (`ours`, `theirs` as given to
/// `git merge-tree`) replaced by [`OURS`] and [`theirs`]; None when it
/// holds none.
pub fn relabel(text: &str, ours: &str, theirs_id: &str, task: &str) -> Option<String> {
    let (from_ours, from_theirs) = (format!("<<<<<<< {ours}"), format!(">>>>>>> {theirs_id}"));
    let mut changed = false;
    let mut out = String::with_capacity(text.len());
    for line in text.split_inclusive('\n') {
        let (body, end) = match line.strip_suffix('\n') {
            Some(b) => (b, "\n"),
            None => (line, ""),
        };
        let body = body.strip_suffix('\r').unwrap_or(body);
        let cr = if line.ends_with("\r\n") { "\r" } else { "" };
        if body == from_ours {
            out.push_str(OURS);
        } else if body == from_theirs {
            out.push_str(&theirs(task));
        } else {
            out.push_str(line);
            continue;
        }
        changed = true;
        out.push_str(cr);
        out.push_str(end);
    }
    changed.then_some(out)
}

/// Whether `text` still holds a marker line spectr wrote for `task`.
pub fn still_marked(text: &str, task: &str) -> bool {
    let end = theirs(task);
    text.lines()
        .map(|l| l.strip_suffix('\r').unwrap_or(l))
        .any(|l| l == OURS || l == end)
}

/// Whether `text` holds git's own conflict markers (any labels): a
/// `<<<<<<< ` line and, after it, a `>>>>>>> ` line.
pub fn has_git_markers(text: &str) -> bool {
    let mut lines = text.lines();
    lines.any(|l| l.starts_with("<<<<<<< ")) && lines.any(|l| l.starts_with(">>>>>>> "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn git_labels_become_words_and_are_found_again() {
        let text = "a\n<<<<<<< 0a5b\nours\n=======\ntheirs\n>>>>>>> 62f8\nend";
        let out = relabel(text, "0a5b", "62f8", "1.2").unwrap();
        assert_eq!(
            out,
            "a\n<<<<<<< the project now\nours\n=======\ntheirs\n>>>>>>> your previous work on task 1.2\nend"
        );
        assert!(still_marked(&out, "1.2"));
        assert!(!still_marked("a\n=======\nb\n", "1.2"));
        assert!(!still_marked("a\nours\ntheirs\n", "1.2"));
        assert!(has_git_markers(text) && has_git_markers(&out));
        assert!(!has_git_markers(">>>>>>> b\n<<<<<<< a\n"));
        assert!(!has_git_markers("a\n=======\nb\n"));
    }

    #[test]
    fn crlf_files_keep_their_line_ends_and_unmarked_text_is_left_alone() {
        let out = relabel("<<<<<<< t1\r\nx\r\n>>>>>>> t2\r\n", "t1", "t2", "2").unwrap();
        assert_eq!(
            out,
            "<<<<<<< the project now\r\nx\r\n>>>>>>> your previous work on task 2\r\n"
        );
        assert!(still_marked(&out, "2"));
        assert_eq!(relabel("<<<<<<< other\n", "t1", "t2", "2"), None);
    }
}
