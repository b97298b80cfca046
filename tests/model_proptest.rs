//! Property tests: no input makes loading panic, and a status edit changes
//! exactly one string literal (every byte outside it is identical).

mod common;
use common::model::*;
use proptest::prelude::*;
use spectr::model::{TaskGraph, TaskId, TaskSet, TaskStatus};
use std::fs;
use std::path::{Path, PathBuf};

fn fixture_dir() -> PathBuf {
    Path::new(FIXTURES).join("add-multi-repo-discovery")
}

const STATUSES: [TaskStatus; 3] = [
    TaskStatus::Pending,
    TaskStatus::InProgress,
    TaskStatus::Completed,
];

/// Loads whatever is there; on success also builds the graph and tries an
/// edit. Only a panic fails the property.
fn exercise(dir: &Path) {
    if let Ok(mut set) = TaskSet::load(dir) {
        let g = TaskGraph::new(&set);
        let _ = g.ready(&|_| TaskStatus::Pending, &Default::default(), None);
        if let Some(first) = g.order().next().cloned() {
            let _ = g.dependents(&first);
            let _ = set.set_status(&first, TaskStatus::InProgress);
        }
    }
}

/// Text that looks like a tasks file often enough to reach deep code paths.
fn jsonish() -> impl Strategy<Value = String> {
    let token = prop_oneof![
        Just("{".to_string()),
        Just("}".to_string()),
        Just("[".to_string()),
        Just("]".to_string()),
        Just(",".to_string()),
        Just(":".to_string()),
        Just("\"tasks\"".to_string()),
        Just("\"id\"".to_string()),
        Just("\"status\"".to_string()),
        Just("\"children\"".to_string()),
        Just("\"parent\"".to_string()),
        Just("\"includes\"".to_string()),
        Just("\"$ref:tasks-1.jsonc\"".to_string()),
        Just("\"$ref:../x\"".to_string()),
        Just("\"$ref:tasks.jsonc\"".to_string()),
        Just("\"tasks-*.jsonc\"".to_string()),
        Just("\"pending\"".to_string()),
        Just("\"completed\"".to_string()),
        Just("\"1\"".to_string()),
        Just("\"1.1\"".to_string()),
        Just("\"\"".to_string()),
        Just("1".to_string()),
        Just("null".to_string()),
        Just("// c\n".to_string()),
        Just("/*".to_string()),
        Just("*/".to_string()),
        Just("\\u00".to_string()),
        Just("\u{feff}".to_string()),
        Just("é".to_string()),
        "[ \n\t\r]{0,2}",
        "\\PC{0,3}",
    ];
    prop::collection::vec(token, 0..60).prop_map(|v| v.concat())
}

/// Applies byte edits to `text`, keeping the result valid UTF-8 by lossy
/// conversion (the loader's own UTF-8 check is tested elsewhere).
fn mutate(text: &str, edits: &[(usize, u8, u8)]) -> String {
    let mut b = text.as_bytes().to_vec();
    for &(pos, kind, byte) in edits {
        if b.is_empty() {
            b.push(byte);
            continue;
        }
        let i = pos % b.len();
        match kind % 3 {
            0 => b[i] = byte,
            1 => {
                b.remove(i);
            }
            _ => b.insert(i, byte),
        }
    }
    String::from_utf8_lossy(&b).into_owned()
}

proptest! {
    #[test]
    fn arbitrary_tasks_jsonc_never_panics(root in jsonish(), child in jsonish(), raw in any::<String>()) {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("spectr/changes/c");
        fs::create_dir_all(&dir).unwrap();
        fs::write(dir.join("tasks-1.jsonc"), &child).unwrap();
        fs::write(dir.join("tasks.jsonc"), &root).unwrap();
        exercise(&dir);
        fs::write(dir.join("tasks.jsonc"), &raw).unwrap();
        exercise(&dir);
    }

    #[test]
    fn mutated_fixture_never_panics(
        file in 0usize..7,
        edits in prop::collection::vec((any::<usize>(), any::<u8>(), any::<u8>()), 1..8),
    ) {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("spectr/changes/c");
        fs::create_dir_all(&dir).unwrap();
        let src = fixture_dir();
        let names = ["tasks.jsonc", "tasks-1.jsonc", "tasks-2.jsonc", "tasks-3.jsonc",
                     "tasks-4.jsonc", "tasks-5.jsonc", "tasks-6.jsonc"];
        for n in names {
            fs::copy(src.join(n), dir.join(n)).unwrap();
        }
        let text = fs::read_to_string(dir.join(names[file])).unwrap();
        fs::write(dir.join(names[file]), mutate(&text, &edits)).unwrap();
        exercise(&dir);
    }

    #[test]
    fn arbitrary_tasks_md_never_panics_and_edits_only_marks(md in "(## [0-9]{0,2}\\.? ?\\PC{0,8}\n|[-*] \\[[ xX]\\] \\PC{0,6}\r?\n|  \\PC{0,5}\n|```\n|\\PC{0,10}\n){0,20}") {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("openspec/changes/c");
        fs::create_dir_all(&dir).unwrap();
        fs::write(dir.join("tasks.md"), &md).unwrap();
        if let Ok(mut set) = TaskSet::load(&dir) {
            let ids: Vec<TaskId> = set.tasks.iter().map(|t| t.id.clone()).collect();
            for id in ids {
                set.set_status(&id, TaskStatus::Completed).unwrap();
            }
            let after = fs::read(dir.join("tasks.md")).unwrap();
            let before = md.as_bytes();
            prop_assert_eq!(after.len(), before.len());
            for (i, (a, b)) in after.iter().zip(before).enumerate() {
                if a != b {
                    prop_assert_eq!((*b, *a), (b' ', b'x'), "byte {} changed", i);
                    prop_assert_eq!(before[i - 1], b'[');
                }
            }
            let again = TaskSet::load(&dir).unwrap();
            prop_assert!(again.tasks.iter().all(|t| t.status == TaskStatus::Completed));
        }
    }
}

/// One generated task: its description characters and status.
#[derive(Debug, Clone)]
struct GenTask {
    desc: Vec<(char, bool)>,
    status: usize,
}

fn gen_task() -> impl Strategy<Value = GenTask> {
    (
        prop::collection::vec((any::<char>(), any::<bool>()), 0..12),
        0usize..3,
    )
        .prop_map(|(desc, status)| GenTask { desc, status })
}

/// Whitespace and comments that may sit between any two tokens.
const GAPS: [&str; 9] = [
    "",
    " ",
    "\n",
    "\r\n",
    "\t",
    "/* c */",
    "// x \"status\": \"pending\"\n",
    "/* \"id\": \"1.1\", \"status\": \"completed\" */",
    "\n    ",
];

/// A JSON string literal for `chars`; `escape` picks `\uXXXX` over the raw
/// character where both are valid (upstream writes `<` as `\u003c`).
fn literal(chars: &[(char, bool)]) -> String {
    let mut s = String::from("\"");
    for &(c, escape) in chars {
        match c {
            '"' => s.push_str("\\\""),
            '\\' => s.push_str("\\\\"),
            c if (c as u32) < 0x20 => s.push_str(&format!("\\u{:04x}", c as u32)),
            c if escape && (c as u32) < 0x10000 => s.push_str(&format!("\\u{:04x}", c as u32)),
            c => s.push(c),
        }
    }
    s.push('"');
    s
}

/// Builds a v1 tasks file; returns the text and each task's status literal
/// range, recorded while writing (independent of the parser).
fn build(
    tasks: &[GenTask],
    gaps: &[usize],
    trailing: bool,
) -> (String, Vec<std::ops::Range<usize>>) {
    let mut gi = 0;
    let mut gap = |out: &mut String| {
        let g = gaps.get(gi).copied().unwrap_or(0);
        gi += 1;
        out.push_str(GAPS[g % GAPS.len()]);
    };
    let mut out = String::from("// Spectr Tasks File (JSONC)\n");
    let mut ranges = Vec::new();
    out.push('{');
    gap(&mut out);
    out.push_str("\"version\":");
    gap(&mut out);
    out.push_str("1,");
    gap(&mut out);
    out.push_str("\"tasks\":");
    gap(&mut out);
    out.push('[');
    for (i, t) in tasks.iter().enumerate() {
        gap(&mut out);
        out.push('{');
        gap(&mut out);
        out.push_str(&format!("\"id\":\"1.{}\",", i + 1));
        gap(&mut out);
        out.push_str("\"description\":");
        gap(&mut out);
        out.push_str(&literal(&t.desc));
        out.push(',');
        gap(&mut out);
        out.push_str("\"status\"");
        gap(&mut out);
        out.push(':');
        gap(&mut out);
        let start = out.len();
        out.push_str(&format!("\"{}\"", STATUSES[t.status].as_str()));
        ranges.push(start..out.len());
        gap(&mut out);
        if trailing {
            out.push(',');
        }
        out.push('}');
        if i + 1 < tasks.len() || trailing {
            out.push(',');
        }
    }
    gap(&mut out);
    out.push_str("]}");
    gap(&mut out);
    (out, ranges)
}

proptest! {
    #[test]
    fn status_edit_changes_exactly_one_literal(
        tasks in prop::collection::vec(gen_task(), 1..12),
        gaps in prop::collection::vec(0usize..GAPS.len(), 0..200),
        trailing in any::<bool>(),
        pick in any::<prop::sample::Index>(),
        new in 0usize..3,
    ) {
        let (text, ranges) = build(&tasks, &gaps, trailing);
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("spectr/changes/c");
        fs::create_dir_all(&dir).unwrap();
        fs::write(dir.join("tasks.jsonc"), &text).unwrap();

        let mut set = TaskSet::load(&dir).unwrap();
        prop_assert_eq!(set.tasks.len(), tasks.len());
        for (t, g) in set.tasks.iter().zip(&tasks) {
            let want: String = g.desc.iter().map(|d| d.0).collect();
            prop_assert_eq!(&t.description, &want);
        }
        let k = pick.index(tasks.len());
        let id = TaskId::new(format!("1.{}", k + 1));
        let status = STATUSES[new];
        set.set_status(&id, status).unwrap();

        let after = fs::read_to_string(dir.join("tasks.jsonc")).unwrap();
        let r = ranges[k].clone();
        let want = format!("{}\"{}\"{}", &text[..r.start], status.as_str(), &text[r.end..]);
        prop_assert_eq!(&after, &want);
        let again = TaskSet::load(&dir).unwrap();
        for (i, t) in again.tasks.iter().enumerate() {
            let s = if i == k { status } else { STATUSES[tasks[i].status] };
            prop_assert_eq!(t.status, s);
        }
    }
}
