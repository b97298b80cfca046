//! Loading tasks.jsonc (v1, v2 split), OpenSpec tasks.md, and the errors every
//! broken input gives: kind, file, line, column, offending text.

mod common;
use common::model::*;
use spectr::model::{ModelError, TaskId, TaskSet, TaskStatus, TasksFormat};
use std::fs;
use std::path::PathBuf;

fn ids<'a>(it: impl Iterator<Item = &'a spectr::model::Task>) -> Vec<String> {
    it.map(|t| t.id.to_string()).collect()
}

fn err(files: &[(&str, &str)]) -> ModelError {
    let (_tmp, dir) = change(files);
    TaskSet::load(&dir).expect_err("load should fail")
}

#[test]
fn v1_fixture_loads_flat() {
    let set = TaskSet::load(&fixture("add-relative-line-numbers")).unwrap();
    assert_eq!(set.format, TasksFormat::SpectrJsonc);
    assert_eq!(set.files.len(), 1);
    assert_eq!(set.files[0].rel, "tasks.jsonc");
    assert_eq!(set.tasks.len(), 13);
    assert_eq!(set.leaves().count(), 13);
    assert_eq!(
        ids(set.tasks.iter()),
        [
            "1.1", "1.2", "1.3", "1.4", "1.5", "1.6", "2.1", "2.2", "3.1", "3.2", "3.3", "3.4",
            "4.1"
        ]
    );
    let t = &set.tasks[0];
    assert_eq!(t.section, "Core Implementation");
    assert!(t.description.starts_with("Add LineNumberMode type"));
    assert_eq!(t.status, TaskStatus::Completed);
    assert_eq!(t.line, 40);
    assert_eq!(t.parent, None);
    assert!(set.tasks.iter().all(|t| !t.is_container()));
}

#[test]
fn v2_fixture_follows_refs() {
    let set = TaskSet::load(&fixture("add-multi-repo-discovery")).unwrap();
    let rels: Vec<&str> = set.files.iter().map(|f| f.rel.as_str()).collect();
    assert_eq!(
        rels,
        [
            "tasks.jsonc",
            "tasks-1.jsonc",
            "tasks-2.jsonc",
            "tasks-3.jsonc",
            "tasks-4.jsonc",
            "tasks-5.jsonc",
            "tasks-6.jsonc"
        ]
    );
    assert_eq!(set.tasks.len(), 28);
    assert_eq!(set.leaves().count(), 22);
    let containers: Vec<String> = ids(set.tasks.iter().filter(|t| t.is_container()));
    assert_eq!(containers, ["1", "2", "3", "4", "5", "6"]);
    // Pre-order: each container right before its children.
    assert_eq!(
        ids(set.tasks.iter().take(8)),
        ["1", "1.1", "1.2", "1.3", "1.4", "1.5", "2", "2.1"]
    );
    let one = set.task(&TaskId::from("1")).unwrap();
    assert_eq!(one.children.len(), 5);
    assert_eq!(set.files[one.file].rel, "tasks.jsonc");
    let leaf = set.task(&TaskId::from("3.4")).unwrap();
    assert_eq!(leaf.parent, Some(TaskId::from("3")));
    assert_eq!(set.file_of(&leaf.id).unwrap().rel, "tasks-3.jsonc");
    assert_eq!(leaf.line, 27);
    // `\u003c` escapes are decoded in the model (and kept on disk).
    assert!(leaf.description.contains("spectr/changes/<id>/proposal.md"));
    let last = set.task(&TaskId::from("6.1")).unwrap();
    assert!(
        last.description
            .starts_with("Output/return: <promise>\"This is")
    );
}

#[test]
fn siblings_sort_numerically_whatever_the_file_order() {
    let (_t, dir) = change(&[(
        "tasks.jsonc",
        r#"{"version": 1, "tasks": [
            {"id": "1.10", "status": "pending"},
            {"id": "2.1", "status": "pending"},
            {"id": "1.2", "status": "pending"},
            {"id": "10.1", "status": "pending"},
            {"id": "1.99.1", "status": "pending"},
            {"id": "1.0.1", "status": "pending"},
        ]}"#,
    )]);
    let set = TaskSet::load(&dir).unwrap();
    assert_eq!(
        ids(set.tasks.iter()),
        ["1.0.1", "1.2", "1.10", "1.99.1", "2.1", "10.1"]
    );
}

#[test]
fn nested_refs_inline_children_and_subfolders() {
    let (_t, dir) = change(&[
        (
            "tasks.jsonc",
            r#"{"version": 2, "tasks": [
                {"id": "1", "status": "pending", "children": "$ref:tasks-1.jsonc"},
                {"id": "2", "status": "pending", "children": "$ref:./specs/cap/tasks.jsonc"},
            ]}"#,
        ),
        (
            "tasks-1.jsonc",
            r#"{"parent": "1", "tasks": [
                {"id": "1.2", "status": "pending", "children": "$ref:tasks-1-2.jsonc"},
                {"id": "1.1", "status": "completed"},
            ]}"#,
        ),
        (
            "tasks-1-2.jsonc",
            r#"{"parent": "1.2", "tasks": [{"id": "1.2.1"}, {"id": "1.2.2"}]}"#,
        ),
        (
            "specs/cap/tasks.jsonc",
            r#"{"tasks": [{"id": "2.1", "children": [{"id": "2.1.1"}, {"id": "2.1.2"}]}]}"#,
        ),
    ]);
    let set = TaskSet::load(&dir).unwrap();
    assert_eq!(
        ids(set.leaves()),
        ["1.1", "1.2.1", "1.2.2", "2.1.1", "2.1.2"]
    );
    assert_eq!(
        set.task(&TaskId::from("2.1")).unwrap().children,
        [TaskId::from("2.1.1"), TaskId::from("2.1.2")]
    );
    assert_eq!(
        set.file_of(&TaskId::from("2.1.2")).unwrap().rel,
        "specs/cap/tasks.jsonc"
    );
    // Missing status reads as pending.
    assert_eq!(
        set.task(&TaskId::from("1.2.1")).unwrap().status,
        TaskStatus::Pending
    );
}

#[test]
fn includes_attach_by_parent_and_skip_stale_files() {
    let (_t, dir) = change(&[
        (
            "tasks.jsonc",
            r#"{"version": 2, "tasks": [
                {"id": "1", "status": "pending", "children": "$ref:tasks-1.jsonc"},
                {"id": "2", "status": "pending"},
            ], "includes": ["tasks-*.jsonc", "specs/*/tasks.jsonc"]}"#,
        ),
        (
            "tasks-1.jsonc",
            r#"{"parent": "1", "tasks": [{"id": "1.1"}]}"#,
        ),
        // Reached only through includes: hangs under task 2.
        (
            "specs/b/tasks.jsonc",
            r#"{"parent": "2", "tasks": [{"id": "2.1"}]}"#,
        ),
        // Hangs under a task from another included file.
        (
            "specs/a/tasks.jsonc",
            r#"{"parent": "2.1", "tasks": [{"id": "2.1.1"}]}"#,
        ),
        // Stale: upstream leaves split files behind when sections go away.
        (
            "tasks-7.jsonc",
            r#"{"parent": "7", "tasks": [{"id": "7.1"}]}"#,
        ),
        // Not matched by any pattern.
        (
            "other.jsonc",
            r#"{"parent": "1", "tasks": [{"id": "1.9"}]}"#,
        ),
    ]);
    let set = TaskSet::load(&dir).unwrap();
    assert_eq!(ids(set.leaves()), ["1.1", "2.1.1"]);
    assert!(set.task(&TaskId::from("7.1")).is_none());
}

#[test]
fn unknown_fields_still_load() {
    let (_t, dir) = change(&[(
        "tasks.jsonc",
        r#"// header
        {
          "version": 3, "summary": {"total": 1}, "future": [1, {"a": null}],
          "tasks": [ { "id": "1", "status": "in_progress", "owner": "me", "tags": ["x"], }, ],
        }"#,
    )]);
    let set = TaskSet::load(&dir).unwrap();
    assert_eq!(set.tasks[0].status, TaskStatus::InProgress);
}

fn located(e: &ModelError) -> (&str, usize, usize, &str) {
    let d = e
        .file_diag()
        .unwrap_or_else(|| panic!("not located: {e:?}"));
    let name = d.path.file_name().unwrap().to_str().unwrap();
    (name, d.line, d.column, d.snippet())
}

#[test]
fn syntax_error_names_file_line_column() {
    let e = err(&[(
        "tasks.jsonc",
        "// c\n{\n  \"tasks\": [\n    {\"id\": \"1\" \"status\": \"pending\"}\n  ]\n}\n",
    )]);
    assert!(matches!(e, ModelError::Syntax(_)), "{e:?}");
    let (file, line, col, _) = located(&e);
    assert_eq!((file, line), ("tasks.jsonc", 4));
    assert!(col > 1);
    let msg = e.to_string();
    assert!(msg.contains("tasks.jsonc:4:"), "{msg}");
    assert!(msg.contains("syntax error"), "{msg}");
}

#[test]
fn missing_ref_points_at_the_ref() {
    let e = err(&[(
        "tasks.jsonc",
        "{\"tasks\": [\n  {\"id\": \"1\", \"children\": \"$ref:tasks-1.jsonc\"}\n]}",
    )]);
    assert!(matches!(e, ModelError::RefMissing(_)), "{e:?}");
    assert_eq!(
        located(&e),
        ("tasks.jsonc", 2, 27, "\"$ref:tasks-1.jsonc\"")
    );
    assert!(e.to_string().contains("tasks-1.jsonc not found"), "{e}");
}

#[test]
fn ref_cycle_is_reported_with_its_chain() {
    let e = err(&[
        (
            "tasks.jsonc",
            r#"{"tasks": [{"id": "1", "children": "$ref:tasks-1.jsonc"}]}"#,
        ),
        (
            "tasks-1.jsonc",
            r#"{"tasks": [{"id": "1.1", "children": "$ref:tasks-2.jsonc"}]}"#,
        ),
        (
            "tasks-2.jsonc",
            "{\"tasks\": [\n{\"id\": \"1.1.1\", \"children\": \"$ref:tasks-1.jsonc\"}]}",
        ),
    ]);
    assert!(matches!(e, ModelError::RefCycle(_)), "{e:?}");
    assert_eq!(located(&e).0, "tasks-2.jsonc");
    assert_eq!(located(&e).1, 2);
    assert!(
        e.to_string()
            .contains("tasks-1.jsonc -> tasks-2.jsonc -> tasks-1.jsonc"),
        "{e}"
    );
    // A file that references the root is a cycle too.
    let e = err(&[(
        "tasks.jsonc",
        r#"{"tasks": [{"id": "1", "children": "$ref:tasks.jsonc"}]}"#,
    )]);
    assert!(matches!(e, ModelError::RefCycle(_)), "{e:?}");
}

#[test]
fn ref_leaving_the_change_folder_is_refused() {
    for target in ["../other/tasks.jsonc", "/etc/passwd", "a/../../x.jsonc"] {
        let text = format!(r#"{{"tasks": [{{"id": "1", "children": "$ref:{target}"}}]}}"#);
        let e = err(&[
            ("tasks.jsonc", &text),
            ("../other/tasks.jsonc", "{\"tasks\": []}"),
        ]);
        assert!(matches!(e, ModelError::RefEscapes(_)), "{target}: {e:?}");
        assert!(e.to_string().contains("leaves the change folder"), "{e}");
    }
}

#[cfg(unix)]
#[test]
fn ref_through_a_symlink_out_of_the_folder_is_refused() {
    let (tmp, dir) = change(&[(
        "tasks.jsonc",
        r#"{"tasks": [{"id": "1", "children": "$ref:link.jsonc"}]}"#,
    )]);
    let outside = tmp.path().join("outside.jsonc");
    fs::write(&outside, r#"{"tasks": [{"id": "1.1"}]}"#).unwrap();
    std::os::unix::fs::symlink(&outside, dir.join("link.jsonc")).unwrap();
    let e = TaskSet::load(&dir).unwrap_err();
    assert!(matches!(e, ModelError::RefEscapes(_)), "{e:?}");
}

#[test]
fn duplicate_ids_across_files() {
    let e = err(&[
        (
            "tasks.jsonc",
            r#"{"tasks": [
                {"id": "1", "children": "$ref:tasks-1.jsonc"},
                {"id": "2", "children": "$ref:tasks-2.jsonc"}
            ]}"#,
        ),
        ("tasks-1.jsonc", "{\"tasks\": [{\"id\": \"1.1\"}]}"),
        (
            "tasks-2.jsonc",
            "{\"tasks\": [\n  {\"id\": \"2.1\"},\n  {\"id\": \"1.1\"}\n]}",
        ),
    ]);
    assert!(matches!(e, ModelError::DuplicateId(_)), "{e:?}");
    assert_eq!(located(&e), ("tasks-2.jsonc", 3, 10, "\"1.1\""));
    assert!(
        e.to_string().contains("first defined at tasks-1.jsonc:1"),
        "{e}"
    );
}

#[test]
fn unknown_status_and_empty_id() {
    let e = err(&[(
        "tasks.jsonc",
        "{\"tasks\": [\n  {\"id\": \"1\", \"status\": \"done\"}\n]}",
    )]);
    assert!(matches!(e, ModelError::UnknownStatus(_)), "{e:?}");
    assert_eq!(located(&e), ("tasks.jsonc", 2, 25, "\"done\""));
    // Run-only states never belong in the file.
    let e = err(&[(
        "tasks.jsonc",
        r#"{"tasks": [{"id": "1", "status": "failed"}]}"#,
    )]);
    assert!(matches!(e, ModelError::UnknownStatus(_)), "{e:?}");

    let e = err(&[("tasks.jsonc", "{\"tasks\": [\n  {\"id\": \"\"}\n]}")]);
    assert!(matches!(e, ModelError::EmptyId(_)), "{e:?}");
    assert_eq!(located(&e), ("tasks.jsonc", 2, 10, "\"\""));
}

#[test]
fn wrong_shapes_say_what_was_expected() {
    let cases = [
        ("{\"version\": 1}", "expected an array `tasks`"),
        ("{\"tasks\": {\"id\": \"1\"}}", "expected an array `tasks`"),
        (
            "[{\"id\": \"1\"}]",
            "expected an object with a `tasks` array",
        ),
        ("{\"tasks\": [\"1.1\"]}", "expected a task object"),
        (
            "{\"tasks\": [{\"status\": \"pending\"}]}",
            "task has no `id`",
        ),
        (
            "{\"tasks\": [{\"id\": \"1\", \"description\": 5}]}",
            "`description` must be a string",
        ),
        (
            "{\"tasks\": [], \"includes\": \"tasks-*.jsonc\"}",
            "expected an array of strings",
        ),
        ("   ", "the file is empty"),
    ];
    for (text, want) in cases {
        let e = err(&[("tasks.jsonc", text)]);
        assert!(matches!(e, ModelError::Invalid(_)), "{text}: {e:?}");
        let msg = e.to_string();
        assert!(msg.contains(want), "{text}: {msg}");
        assert!(msg.contains("tasks.jsonc:1:"), "{text}: {msg}");
    }
}

#[test]
fn parent_must_match_the_referencing_task() {
    let e = err(&[
        (
            "tasks.jsonc",
            r#"{"tasks": [{"id": "1", "children": "$ref:tasks-1.jsonc"}]}"#,
        ),
        (
            "tasks-1.jsonc",
            r#"{"parent": "2", "tasks": [{"id": "1.1"}]}"#,
        ),
    ]);
    assert!(matches!(e, ModelError::Invalid(_)), "{e:?}");
    assert_eq!(located(&e).0, "tasks-1.jsonc");
    assert!(
        e.to_string()
            .contains("parent \"2\" does not match task \"1\""),
        "{e}"
    );
}

#[test]
fn the_rendered_error_shows_the_offending_text_and_help() {
    let e = err(&[(
        "tasks.jsonc",
        "{\"tasks\": [\n  {\"id\": \"1\", \"status\": \"finished\"}\n]}",
    )]);
    let mut out = String::new();
    miette::GraphicalReportHandler::new_themed(miette::GraphicalTheme::unicode_nocolor())
        .render_report(&mut out, &e)
        .unwrap();
    assert!(out.contains("\"status\": \"finished\""), "{out}");
    assert!(
        out.contains("pending"),
        "help lists the valid values: {out}"
    );
    assert!(out.contains("tasks.jsonc"), "{out}");
}

#[test]
fn spectr_change_without_tasks_jsonc_is_tasks_not_found() {
    let (_t, dir) = change(&[("tasks.md", "## 1. A\n- [ ] x\n"), ("proposal.md", "# x")]);
    let e = TaskSet::load(&dir).unwrap_err();
    assert!(
        matches!(e, ModelError::TasksNotFound { ref id } if id == "add-thing"),
        "{e:?}"
    );
    let e = TaskSet::load(&dir.join("nope")).unwrap_err();
    assert!(matches!(e, ModelError::ChangeNotFound { .. }), "{e:?}");
}

fn openspec_change(md: &str) -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("openspec/changes/add-story");
    fs::create_dir_all(&dir).unwrap();
    fs::write(dir.join("tasks.md"), md).unwrap();
    (tmp, dir)
}

#[test]
fn openspec_sections_are_stories() {
    let (_t, dir) = openspec_change(
        "# Tasks\n\n## 1. Setup\n- [x] 1.1 a\n- [ ] 1.2 b\n  continued\n\n## 2. Build\n- [ ] 2.1 c\n\n## Ship\n- [x] done\n- [X] done too\n",
    );
    let set = TaskSet::load(&dir).unwrap();
    assert_eq!(set.format, TasksFormat::OpenSpecMarkdown);
    assert_eq!(set.files[0].rel, "tasks.md");
    assert_eq!(ids(set.leaves()), ["1", "2", "3"]);
    let s: Vec<TaskStatus> = set.tasks.iter().map(|t| t.status).collect();
    assert_eq!(
        s,
        [
            TaskStatus::InProgress,
            TaskStatus::Pending,
            TaskStatus::Completed
        ]
    );
    assert_eq!(set.tasks[0].section, "Setup");
    assert_eq!(set.tasks[0].line, 3);
    assert_eq!(
        set.tasks[0].description,
        "- [x] 1.1 a\n- [ ] 1.2 b\n  continued"
    );
    assert_eq!(set.tasks[2].section, "Ship");
}

#[test]
fn openspec_jsonc_wins_and_missing_md_is_explained() {
    let (_t, dir) = openspec_change("## 1. A\n- [ ] x\n");
    fs::write(dir.join("tasks.jsonc"), r#"{"tasks": [{"id": "9"}]}"#).unwrap();
    let set = TaskSet::load(&dir).unwrap();
    assert_eq!(set.format, TasksFormat::SpectrJsonc);
    fs::remove_file(dir.join("tasks.jsonc")).unwrap();
    fs::remove_file(dir.join("tasks.md")).unwrap();
    let e = TaskSet::load(&dir).unwrap_err();
    assert!(matches!(e, ModelError::TasksMdNotFound { .. }), "{e:?}");
}

#[test]
fn openspec_duplicate_numbers_are_an_error() {
    let (_t, dir) = openspec_change("## 1. A\n- [ ] x\n## 1. B\n- [ ] y\n");
    let e = TaskSet::load(&dir).unwrap_err();
    assert!(matches!(e, ModelError::DuplicateId(_)), "{e:?}");
    assert_eq!(located(&e), ("tasks.md", 3, 1, "## 1. B"));
}

#[test]
fn not_utf8_names_file_line_column_and_what_to_do() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("c");
    fs::create_dir_all(&dir).unwrap();
    fs::write(dir.join("tasks.jsonc"), b"{\n  \"tasks\": [\xff]}").unwrap();
    let e = TaskSet::load(&dir).unwrap_err();
    assert!(matches!(e, ModelError::Encoding(_)), "{e:?}");
    assert!(
        e.to_string()
            .contains("tasks.jsonc:2:13: not valid UTF-8 (byte 0xFF"),
        "{e}"
    );
    let help = e.file_diag().map(|d| d.help.clone()).unwrap_or_default();
    assert!(help.contains("save the file as UTF-8"), "{help}");
    // The same in a `$ref`'d split file and in OpenSpec's tasks.md.
    fs::write(
        dir.join("tasks.jsonc"),
        "{\"tasks\": [{\"id\": \"1\", \"children\": \"$ref:tasks-1.jsonc\"}]}",
    )
    .unwrap();
    fs::write(
        dir.join("tasks-1.jsonc"),
        b"{\"tasks\": [{\"id\": \"1.1\", \"description\": \"caf\xe9\"}]}",
    )
    .unwrap();
    let e = TaskSet::load(&dir).unwrap_err();
    assert!(
        e.to_string()
            .contains("tasks-1.jsonc:1:45: not valid UTF-8 (byte 0xE9"),
        "{e}"
    );
    let os = tmp.path().join("openspec/changes/c");
    fs::create_dir_all(&os).unwrap();
    fs::write(os.join("tasks.md"), b"## 1. A\n- [ ] x\xc3(\n").unwrap();
    let e = TaskSet::load(&os).unwrap_err();
    assert!(
        e.to_string()
            .contains("tasks.md:2:8: not valid UTF-8 (byte 0xC3"),
        "{e}"
    );
}

#[test]
fn deep_nesting_is_an_error_not_a_crash() {
    let e = err(&[("tasks.jsonc", &"[".repeat(100_000))]);
    assert!(matches!(e, ModelError::Syntax(_)), "{e:?}");
    // Inline children nested past the limit.
    let mut text = String::from("{\"tasks\": [");
    for i in 0..200 {
        text.push_str(&format!("{{\"id\": \"{i}\", \"children\": ["));
    }
    text.push_str(&"]}".repeat(200));
    text.push_str("]}");
    let e = err(&[("tasks.jsonc", &text)]);
    assert!(
        matches!(e, ModelError::Invalid(_) | ModelError::Syntax(_)),
        "{e:?}"
    );
    assert!(e.to_string().contains("tasks.jsonc:1:"), "{e}");
}

/// Ten sections: enough `$ref`s for the loader to read them ahead on several
/// threads. Results and errors must be those of reading in order.
fn ten_sections(skip: Option<usize>, broken: Option<usize>) -> Result<TaskSet, ModelError> {
    let mut root = String::from("{\"version\": 2, \"tasks\": [\n");
    let mut files: Vec<(String, String)> = Vec::new();
    for s in 1..=10 {
        root.push_str(&format!(
            "  {{\"id\": \"{s}\", \"status\": \"pending\", \"children\": \"$ref:tasks-{s}.jsonc\"}},\n"
        ));
        if Some(s) == skip {
            continue;
        }
        let body = if Some(s) == broken {
            format!("{{\"parent\": \"{s}\", \"tasks\": [{{\"id\": \"{s}.1\" \"status\": 1}}]}}")
        } else {
            format!(
                "{{\"parent\": \"{s}\", \"tasks\": [{{\"id\": \"{s}.2\"}}, {{\"id\": \"{s}.1\"}}]}}"
            )
        };
        files.push((format!("tasks-{s}.jsonc"), body));
    }
    root.push_str("]}");
    let mut all: Vec<(&str, &str)> = vec![("tasks.jsonc", root.as_str())];
    all.extend(files.iter().map(|(n, t)| (n.as_str(), t.as_str())));
    let (_t, dir) = change(&all);
    TaskSet::load(&dir)
}

#[test]
fn many_refs_load_in_order_with_the_first_error() {
    let set = ten_sections(None, None).unwrap();
    let leaves = ids(set.leaves());
    assert_eq!(leaves.len(), 20);
    assert_eq!(&leaves[..4], ["1.1", "1.2", "2.1", "2.2"]);
    assert_eq!(&leaves[18..], ["10.1", "10.2"]);
    let rels: Vec<&str> = set.files.iter().map(|f| f.rel.as_str()).collect();
    assert_eq!(rels[1..3], ["tasks-1.jsonc", "tasks-2.jsonc"]);
    assert_eq!(rels[10], "tasks-10.jsonc");

    let e = ten_sections(Some(3), Some(7)).unwrap_err();
    assert!(matches!(e, ModelError::RefMissing(_)), "{e:?}");
    assert!(e.to_string().contains("tasks-3.jsonc not found"), "{e}");
    let e = ten_sections(Some(8), Some(2)).unwrap_err();
    assert!(matches!(e, ModelError::Syntax(_)), "{e:?}");
    assert!(e.to_string().contains("tasks-2.jsonc:1:"), "{e}");
}

#[test]
fn lines_are_right_whatever_the_key_order() {
    let (_t, dir) = change(&[(
        "tasks.jsonc",
        "{\"tasks\": [\n  {\"children\": [\n    {\"id\": \"1.1\"},\n    {\"id\": \"1.2\"}\n  ],\n  \"id\": \"1\"},\n  {\"id\": \"2\"}\n]}",
    )]);
    let set = TaskSet::load(&dir).unwrap();
    let lines: Vec<(String, usize)> = set
        .tasks
        .iter()
        .map(|t| (t.id.to_string(), t.line))
        .collect();
    assert_eq!(
        lines,
        [
            ("1".into(), 6),
            ("1.1".into(), 3),
            ("1.2".into(), 4),
            ("2".into(), 7)
        ]
    );
}
