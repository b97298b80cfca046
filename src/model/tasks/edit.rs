//! Status edits that change nothing else: only the bytes of one `status`
//! string literal per edited task are replaced.

use super::parse::parse_file;
use super::raw::{RawEntry, walk};
use crate::model::ModelError;
use crate::model::TaskStatus;
use std::collections::HashMap;
use std::ops::Range;
use std::path::Path;

/// Returns `text` with the status of each `(id, status)` in `edits` replaced.
/// Bytes outside the edited literals are untouched. A task without a `status`
/// key gets one inserted right after its `id` value.
pub(crate) fn apply_status_edits(
    path: &Path,
    text: &str,
    edits: &[(&str, TaskStatus)],
) -> Result<String, ModelError> {
    let raw = parse_file(path, text)?;
    let mut by_id: HashMap<&str, &RawEntry> = HashMap::new();
    walk(&raw.entries, &mut |e| {
        by_id.insert(e.id.as_str(), e);
    });
    let mut splices: Vec<(Range<usize>, String)> = Vec::with_capacity(edits.len());
    for &(id, status) in edits {
        let Some(entry) = by_id.get(id) else {
            return Err(ModelError::TaskNotFound {
                id: id.to_string(),
                change: path.display().to_string(),
            });
        };
        let literal = format!("\"{}\"", status.as_str());
        match &entry.status_range {
            Some(r) => splices.push((r.clone(), literal)),
            None => {
                let at = entry.id_range.end;
                splices.push((at..at, format!(", \"status\": {literal}")));
            }
        }
    }
    // Back to front, so earlier offsets stay valid.
    splices.sort_by_key(|s| std::cmp::Reverse(s.0.start));
    let mut out = text.to_string();
    for (range, with) in splices {
        out.replace_range(range, &with);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replaces_only_the_literal() {
        let text = "// c \"pending\"\n{\"tasks\": [\n  {\"id\": \"1\", /* x */ \"status\"  :  \"pending\" , \"d\": \"\\u003c\"},\n  {\"id\": \"2\", \"status\": \"pending\"},\n]}\n";
        let out =
            apply_status_edits(Path::new("t"), text, &[("1", TaskStatus::InProgress)]).unwrap();
        assert_eq!(
            out,
            text.replacen(":  \"pending\"", ":  \"in_progress\"", 1)
        );
    }

    #[test]
    fn several_edits_in_one_file() {
        let text = "{\"tasks\": [{\"id\": \"1\", \"status\": \"pending\"}, {\"id\": \"2\", \"status\": \"pending\"}]}";
        let out = apply_status_edits(
            Path::new("t"),
            text,
            &[("1", TaskStatus::Completed), ("2", TaskStatus::InProgress)],
        )
        .unwrap();
        assert_eq!(
            out,
            "{\"tasks\": [{\"id\": \"1\", \"status\": \"completed\"}, {\"id\": \"2\", \"status\": \"in_progress\"}]}"
        );
    }

    #[test]
    fn missing_status_is_inserted_after_id() {
        let text = "{\"tasks\": [{\"id\": \"1\"}, {\"id\": \"2\", \"d\": \"x\"}]}";
        let out = apply_status_edits(
            Path::new("t"),
            text,
            &[("1", TaskStatus::Completed), ("2", TaskStatus::Completed)],
        )
        .unwrap();
        assert_eq!(
            out,
            "{\"tasks\": [{\"id\": \"1\", \"status\": \"completed\"}, {\"id\": \"2\", \"status\": \"completed\", \"d\": \"x\"}]}"
        );
        let again = parse_file(Path::new("t"), &out).unwrap();
        assert!(
            again
                .entries
                .iter()
                .all(|e| e.status == TaskStatus::Completed)
        );
    }
}
