//! `TaskSet::refresh`: re-reads only what changed, takes status-only edits
//! from the changed file alone, and never re-parses because of its own write.

mod common;
use common::model::*;
use spectr::model::{TaskId, TaskSet, TaskStatus};
use std::fs;

const ROOT: &str = r#"{
  "version": 2,
  "tasks": [
    { "id": "1", "section": "One", "description": "one", "status": "pending", "children": "$ref:tasks-1.jsonc" },
    { "id": "2", "section": "Two", "description": "two", "status": "pending", "children": "$ref:tasks-2.jsonc" }
  ],
  "includes": ["tasks-*.jsonc"]
}"#;

fn child(parent: &str, ids: &[(&str, &str)]) -> String {
    let tasks: Vec<String> = ids
        .iter()
        .map(|(id, status)| {
            format!(
                "    {{ \"id\": \"{id}\", \"section\": \"S\", \"description\": \"do {id}\", \"status\": \"{status}\" }}"
            )
        })
        .collect();
    format!(
        "{{\n  \"version\": 2,\n  \"tasks\": [\n{}\n  ],\n  \"parent\": \"{parent}\"\n}}\n",
        tasks.join(",\n")
    )
}

fn split_change() -> (tempfile::TempDir, std::path::PathBuf) {
    change(&[
        ("tasks.jsonc", ROOT),
        (
            "tasks-1.jsonc",
            &child("1", &[("1.1", "pending"), ("1.2", "pending")]),
        ),
        ("tasks-2.jsonc", &child("2", &[("2.1", "pending")])),
    ])
}

#[test]
fn nothing_changed_means_no_reload() {
    let (_tmp, dir) = split_change();
    let mut set = TaskSet::load(&dir).unwrap();
    assert!(!set.refresh().unwrap());
}

#[test]
fn our_own_status_write_is_not_a_change() {
    let (_tmp, dir) = split_change();
    let mut set = TaskSet::load(&dir).unwrap();
    set.set_status(&TaskId::from("1.1"), TaskStatus::Completed)
        .unwrap();
    assert!(!set.refresh().unwrap(), "our own write caused a reload");
    assert_eq!(status(&set, "1.1"), TaskStatus::Completed);
}

#[test]
fn a_status_edit_by_someone_else_is_taken() {
    let (_tmp, dir) = split_change();
    let mut set = TaskSet::load(&dir).unwrap();
    let path = dir.join("tasks-2.jsonc");
    let text = fs::read_to_string(&path).unwrap();
    fs::write(&path, text.replace("\"pending\"", "\"completed\"")).unwrap();
    assert!(set.refresh().unwrap());
    assert_eq!(status(&set, "2.1"), TaskStatus::Completed);
    // What we now hold is exactly the file: our next write is not refused.
    assert!(!set.refresh().unwrap());
    set.set_status(&TaskId::from("1.2"), TaskStatus::InProgress)
        .unwrap();
    // Same as a full load from disk.
    let fresh = TaskSet::load(&dir).unwrap();
    let view = |s: &TaskSet| -> Vec<(String, TaskStatus)> {
        s.tasks
            .iter()
            .map(|t| (t.id.to_string(), t.status))
            .collect()
    };
    assert_eq!(view(&set), view(&fresh));
}

#[test]
fn other_edits_reload_everything() {
    let (_tmp, dir) = split_change();
    let mut set = TaskSet::load(&dir).unwrap();
    let path = dir.join("tasks-1.jsonc");
    let text = fs::read_to_string(&path).unwrap();
    fs::write(&path, text.replace("do 1.2", "do 1.2 better")).unwrap();
    assert!(set.refresh().unwrap());
    assert_eq!(
        set.task(&TaskId::from("1.2")).unwrap().description,
        "do 1.2 better"
    );
}

#[test]
fn a_new_split_file_is_noticed() {
    let (_tmp, dir) = split_change();
    let mut set = TaskSet::load(&dir).unwrap();
    fs::write(
        dir.join("tasks-3.jsonc"),
        child("2.1", &[("2.1.1", "pending")]),
    )
    .unwrap();
    assert!(set.refresh().unwrap());
    assert!(set.task(&TaskId::from("2.1.1")).is_some());
}

#[test]
fn a_broken_file_is_an_error_and_the_view_is_kept() {
    let (_tmp, dir) = split_change();
    let mut set = TaskSet::load(&dir).unwrap();
    fs::write(dir.join("tasks-1.jsonc"), "{ broken").unwrap();
    assert!(set.refresh().is_err());
    assert_eq!(status(&set, "1.1"), TaskStatus::Pending);
}

#[test]
fn an_unknown_status_is_not_taken_silently() {
    let (_tmp, dir) = split_change();
    let mut set = TaskSet::load(&dir).unwrap();
    let path = dir.join("tasks-2.jsonc");
    let text = fs::read_to_string(&path).unwrap();
    fs::write(&path, text.replace("\"pending\"", "\"done\"")).unwrap();
    assert!(set.refresh().is_err());
}

#[test]
fn the_upstream_split_fixture_takes_status_edits() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("c");
    fs::create_dir_all(&dir).unwrap();
    for e in fs::read_dir(fixture("add-multi-repo-discovery")).unwrap() {
        let e = e.unwrap();
        if e.file_type().unwrap().is_file() {
            fs::copy(e.path(), dir.join(e.file_name())).unwrap();
        }
    }
    let mut set = TaskSet::load(&dir).unwrap();
    let leaf = set.leaves().next().unwrap().id.clone();
    let file = set.file_of(&leaf).unwrap().path.clone();
    let before = set.task(&leaf).unwrap().status;
    let mut other = TaskSet::load(&dir).unwrap();
    let next = if before == TaskStatus::Pending {
        TaskStatus::InProgress
    } else {
        TaskStatus::Pending
    };
    other.set_status(&leaf, next).unwrap();
    assert!(set.refresh().unwrap());
    assert_eq!(set.task(&leaf).unwrap().status, next);
    assert_eq!(
        set.files.iter().find(|f| f.path == file).unwrap().content,
        fs::read_to_string(&file).unwrap()
    );
}

#[test]
fn containers_are_synced_from_their_leaves_in_one_write_per_file() {
    let (_tmp, dir) = change(&[
        ("tasks.jsonc", ROOT),
        (
            "tasks-1.jsonc",
            &child("1", &[("1.1", "completed"), ("1.2", "completed")]),
        ),
        ("tasks-2.jsonc", &child("2", &[("2.1", "in_progress")])),
    ]);
    let mut set = TaskSet::load(&dir).unwrap();
    let written = set.sync_containers().unwrap();
    assert_eq!(written, vec![TaskId::from("1"), TaskId::from("2")]);
    assert_eq!(status(&set, "1"), TaskStatus::Completed);
    assert_eq!(status(&set, "2"), TaskStatus::InProgress);
    let fresh = TaskSet::load(&dir).unwrap();
    assert_eq!(status(&fresh, "1"), TaskStatus::Completed);
    assert_eq!(status(&fresh, "2"), TaskStatus::InProgress);
    // Only the two status literals changed.
    let root = fs::read_to_string(dir.join("tasks.jsonc")).unwrap();
    assert_eq!(
        root.replacen("\"completed\"", "\"pending\"", 1).replacen(
            "\"in_progress\"",
            "\"pending\"",
            1
        ),
        ROOT
    );
    assert!(set.sync_containers().unwrap().is_empty());
    assert!(!set.refresh().unwrap());
}

#[test]
fn a_same_size_edit_is_noticed_even_with_the_old_modification_time() {
    let (_tmp, dir) = split_change();
    let path = dir.join("tasks-2.jsonc");
    let old = std::time::SystemTime::now() - std::time::Duration::from_secs(60);
    let set_old_mtime = || {
        fs::File::options()
            .write(true)
            .open(&path)
            .unwrap()
            .set_modified(old)
            .unwrap()
    };
    set_old_mtime();
    // A stamp is trusted once its times are 2 s old (ctime, too).
    std::thread::sleep(std::time::Duration::from_millis(2100));
    let mut set = TaskSet::load(&dir).unwrap();
    assert!(!set.refresh().unwrap()); // the file's stamp is now trusted
    let text = fs::read_to_string(&path).unwrap();
    // "pending" -> "Pending" would not parse; swap two same-size ids' words.
    let edited = text.replace("do 2.1", "do 2.X");
    assert_eq!(edited.len(), text.len());
    fs::write(&path, edited).unwrap();
    set_old_mtime(); // same size, same mtime: only ctime tells
    assert!(set.refresh().unwrap(), "a same-size edit was missed");
    assert_eq!(
        set.task(&TaskId::from("2.1")).unwrap().description,
        "do 2.X"
    );
}
