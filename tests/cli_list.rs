//! `spectr list` on copies of the upstream fixtures and on generated changes.

mod common;

use common::cli::{Proj, spectr_in, stderr, stdout};
use serde_json::Value;

#[test]
fn fixtures_show_true_leaf_counts() {
    let p = Proj::with_fixtures();
    let out = p.cmd().arg("list").output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    // add-multi-repo-discovery is split into 6 files holding 22 tasks: upstream
    // would say 6/6 (its root entries); we count the leaves.
    assert_eq!(
        stdout(&out),
        "add-multi-repo-discovery   22/22 tasks\nadd-relative-line-numbers  13/13 tasks\n"
    );
}

#[test]
fn json_has_upstream_fields_and_all_counts() {
    let p = Proj::with_fixtures();
    let v1 = p
        .change_dir("add-relative-line-numbers")
        .join("tasks.jsonc");
    let text = std::fs::read_to_string(&v1).unwrap();
    // Two tasks in flight, one back to pending.
    let text = text
        .replacen(
            "\"status\": \"completed\"",
            "\"status\": \"in_progress\"",
            2,
        )
        .replacen("\"status\": \"completed\"", "\"status\": \"pending\"", 1);
    std::fs::write(&v1, text).unwrap();

    let out = p.cmd().args(["list", "--json"]).output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let items = v.as_array().unwrap();
    assert_eq!(items.len(), 2);
    assert_eq!(items[0]["id"], "add-multi-repo-discovery");
    assert_eq!(items[0]["title"], "Add Multi-Repo Project Nesting Support");
    assert_eq!(items[0]["deltaCount"], 2);
    assert_eq!(items[0]["taskStatus"]["total"], 22);
    assert_eq!(items[0]["taskStatus"]["completed"], 22);
    let s = &items[1]["taskStatus"];
    assert_eq!(
        (
            &s["total"],
            &s["completed"],
            &s["in_progress"],
            &s["pending"]
        ),
        (
            &Value::from(13),
            &Value::from(10),
            &Value::from(2),
            &Value::from(1)
        )
    );
    assert!(items[1].get("error").is_none());
    // Two-space indentation, as upstream.
    assert!(stdout(&out).starts_with("[\n  {\n    \"id\""));
}

#[test]
fn long_shows_titles_and_deltas() {
    let p = Proj::with_fixtures();
    p.add_change("add-plain", "Plain title", None);
    let out = p.cmd().args(["list", "--long"]).output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        stdout(&out),
        "add-multi-repo-discovery: Add Multi-Repo Project Nesting Support [deltas 2] [tasks 22/22]\n\
         add-plain: Plain title [deltas 0] [tasks 0/0]\n\
         add-relative-line-numbers: Add Relative Line Numbers to List TUI [deltas 1] [tasks 13/13]\n"
    );
}

#[test]
fn empty_project() {
    let p = Proj::new();
    let out = p.cmd().arg("list").output().unwrap();
    assert!(out.status.success());
    assert_eq!(stdout(&out), "No items found\n");
    let out = p.cmd().args(["list", "--long"]).output().unwrap();
    assert_eq!(stdout(&out), "No items found\n");
    let out = p.cmd().args(["list", "--json"]).output().unwrap();
    assert_eq!(stdout(&out), "[]\n");
}

#[test]
fn no_spectr_folder_is_an_input_error() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::create_dir(tmp.path().join(".git")).unwrap();
    let out = spectr_in(tmp.path()).arg("list").output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty());
    assert!(stderr(&out).contains("no spectr/ or openspec/ folder found"));
}

#[test]
fn changes_without_tasks_jsonc() {
    let p = Proj::new();
    p.add_change(
        "add-md-only",
        "Md only",
        Some("## 1. A\n- [x] one\n- [ ] two\n  - [X] nested\n"),
    );
    p.add_change("add-nothing", "Nothing", None);
    let out = p.cmd().arg("list").output().unwrap();
    assert_eq!(
        stdout(&out),
        "add-md-only  2/3 tasks\nadd-nothing  0/0 tasks\n"
    );
}

#[test]
fn a_broken_tasks_file_is_listed_with_its_error() {
    let p = Proj::with_fixtures();
    let child = p
        .change_dir("add-multi-repo-discovery")
        .join("tasks-3.jsonc");
    let text = std::fs::read_to_string(&child).unwrap();
    std::fs::write(
        &child,
        text.replacen("\"status\": \"completed\"", "\"status\": done", 1),
    )
    .unwrap();

    let out = p.cmd().arg("list").output().unwrap();
    // The listing worked: exit 0, the other change still has its counts.
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 2, "{text}");
    assert!(
        lines[0].starts_with("add-multi-repo-discovery   (error: "),
        "{text}"
    );
    assert!(
        lines[0].contains("tasks-3.jsonc:"),
        "names the file and line: {text}"
    );
    assert!(
        lines[0].contains("syntax error"),
        "says what is wrong: {text}"
    );
    assert_eq!(lines[1], "add-relative-line-numbers  13/13 tasks");
    // The full diagnostic goes to stderr.
    let err = stderr(&out);
    assert!(err.contains("change 'add-multi-repo-discovery'"), "{err}");
    assert!(err.contains("tasks-3.jsonc"), "{err}");

    let out = p.cmd().args(["list", "--json"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(v[0]["error"].as_str().unwrap().contains("tasks-3.jsonc"));
    assert_eq!(v[0]["taskStatus"]["total"], 0);
    assert!(v[1].get("error").is_none());
}

#[test]
fn a_missing_split_file_is_an_error_not_a_smaller_count() {
    let p = Proj::with_fixtures();
    std::fs::remove_file(
        p.change_dir("add-multi-repo-discovery")
            .join("tasks-2.jsonc"),
    )
    .unwrap();
    let out = p.cmd().arg("list").output().unwrap();
    let text = stdout(&out);
    assert!(
        text.starts_with("add-multi-repo-discovery   (error: "),
        "{text}"
    );
    assert!(text.contains("tasks-2.jsonc"), "{text}");
}

#[test]
fn closed_stdout_is_not_an_error() {
    let p = Proj::with_fixtures();
    // `spectr list | head -0`: the reader is gone before we write.
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_spectr"))
        .arg("list")
        .current_dir(p.root())
        .env_remove("SPECTR_ROOT")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    assert!(!String::from_utf8_lossy(&out.stderr).contains("panicked"));
    assert_eq!(out.status.code(), Some(0));
}
