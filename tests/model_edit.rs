//! Status edits change one string literal (plus re-aggregated containers) and
//! not one other byte; writes are atomic and refuse to clobber outside edits.

mod common;
use common::copy_dir;
use common::model::*;
use spectr::model::{ModelError, TaskId, TaskSet, TaskStatus};
use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

const ALL: [TaskStatus; 3] = [
    TaskStatus::Pending,
    TaskStatus::InProgress,
    TaskStatus::Completed,
];

fn fixtures_root() -> PathBuf {
    Path::new(FIXTURES).to_path_buf()
}

/// Every file of a folder, by relative name.
fn snapshot(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    for e in fs::read_dir(dir).unwrap() {
        let e = e.unwrap();
        if e.file_type().unwrap().is_file() {
            out.insert(
                e.file_name().to_string_lossy().into_owned(),
                fs::read(e.path()).unwrap(),
            );
        }
    }
    out
}

/// `text` with the status literal of task `id` replaced, found by plain text
/// search (independent of the parser): the first `"status": "` after `"id": "ID"`.
fn replace_status(text: &str, id: &str, status: TaskStatus) -> String {
    let at = text
        .find(&format!("\"id\": \"{id}\""))
        .unwrap_or_else(|| panic!("id {id} not in text"));
    let key = at + text[at..].find("\"status\": ").unwrap() + "\"status\": ".len();
    let end = key + 1 + text[key + 1..].find('"').unwrap() + 1;
    format!("{}\"{}\"{}", &text[..key], status.as_str(), &text[end..])
}

fn leaf_ids(dir: &Path) -> Vec<(TaskId, Option<TaskId>, String)> {
    let set = TaskSet::load(dir).unwrap();
    set.leaves()
        .map(|t| {
            (
                t.id.clone(),
                t.parent.clone(),
                set.files[t.file].rel.clone(),
            )
        })
        .collect()
}

/// For every fixture change, every leaf and every status: the leaf's file
/// differs only in that literal, the container's file only in the container's
/// literal, tasks.md only in the leaf's box (where tasks.md still lists the
/// tasks of tasks.jsonc: not in `add-relative-line-numbers`, whose tasks.jsonc
/// was rewritten by hand), and every other file not at all.
#[test]
fn every_fixture_edit_changes_exactly_the_status_literals() {
    let mut checked = 0;
    for change in fs::read_dir(fixtures_root()).unwrap() {
        let src = change.unwrap().path();
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp
            .path()
            .join("spectr/changes")
            .join(src.file_name().unwrap());
        copy_dir(&src, &dir);
        let original = snapshot(&dir);
        for (id, parent, rel) in leaf_ids(&dir) {
            for status in ALL {
                let mut set = TaskSet::load(&dir).unwrap();
                set.set_status(&id, status).unwrap();

                let mut want = original.clone();
                let text = String::from_utf8(original[&rel].clone()).unwrap();
                want.insert(
                    rel.clone(),
                    replace_status(&text, id.as_str(), status).into_bytes(),
                );
                let in_step = src.ends_with("add-multi-repo-discovery");
                let md = &original["tasks.md"];
                let line = spectr::model::accept::parse_tasks_md(
                    Path::new("tasks.md"),
                    std::str::from_utf8(md).unwrap(),
                )
                .unwrap()
                .tasks()
                .find(|t| t.id == id.as_str())
                .cloned();
                if let (true, Some(line)) = (in_step, line) {
                    let mut md = md.clone();
                    md[line.mark] = if status == TaskStatus::Completed {
                        b'x'
                    } else {
                        b' '
                    };
                    want.insert("tasks.md".into(), md);
                }
                if let Some(p) = &parent {
                    // Fixture leaves all start completed: the container stays
                    // completed only if this one does.
                    let siblings = set.task(p).unwrap().children.len() - 1;
                    let agg = match status {
                        TaskStatus::Pending if siblings == 0 => TaskStatus::Pending,
                        TaskStatus::Completed => TaskStatus::Completed,
                        _ => TaskStatus::InProgress,
                    };
                    let root = String::from_utf8(want["tasks.jsonc"].clone()).unwrap();
                    want.insert(
                        "tasks.jsonc".into(),
                        replace_status(&root, p.as_str(), agg).into_bytes(),
                    );
                    assert_eq!(set.task(p).unwrap().status, agg);
                }
                let got = snapshot(&dir);
                for (name, bytes) in &want {
                    assert!(
                        got[name] == *bytes,
                        "{}: {name} after {id} -> {status}:\n{}",
                        src.display(),
                        String::from_utf8_lossy(&got[name])
                    );
                }
                assert_eq!(got.len(), want.len(), "no stray files: {:?}", got.keys());
                assert_eq!(set.task(&id).unwrap().status, status);
                for f in &set.files {
                    assert_eq!(fs::read(&f.path).unwrap(), f.content.as_bytes());
                }
                // Restore for the next case.
                for (name, bytes) in &original {
                    fs::write(dir.join(name), bytes).unwrap();
                }
                checked += 1;
            }
        }
    }
    assert_eq!(
        checked,
        (13 + 22) * 3,
        "both fixtures, every leaf, every status"
    );
}

const NESTED: &[(&str, &str)] = &[
    (
        "tasks.jsonc",
        "{\"version\": 2, \"tasks\": [\n  {\"id\": \"1\", \"status\": \"pending\", \"children\": \"$ref:tasks-1.jsonc\"},\n  {\"id\": \"2\", \"status\": \"pending\"}\n]}\n",
    ),
    (
        "tasks-1.jsonc",
        "// child\n{\"parent\": \"1\", \"tasks\": [\n  {\"id\": \"1.1\", \"status\": \"completed\"},\n  {\"id\": \"1.2\", \"status\": \"pending\", \"children\": [\n    {\"id\": \"1.2.1\", \"status\": \"pending\"},\n    {\"id\": \"1.2.2\", \"status\": \"pending\"}\n  ]}\n]}\n",
    ),
];

#[test]
fn containers_are_re_aggregated_in_their_own_files() {
    let (_t, dir) = change(NESTED);
    let mut set = TaskSet::load(&dir).unwrap();
    set.set_status(&TaskId::from("1.2.1"), TaskStatus::Completed)
        .unwrap();
    assert_eq!(status(&set, "1.2"), TaskStatus::InProgress);
    assert_eq!(status(&set, "1"), TaskStatus::InProgress);
    let child = fs::read_to_string(dir.join("tasks-1.jsonc")).unwrap();
    assert_eq!(
        child,
        NESTED[1]
            .1
            .replace(
                "{\"id\": \"1.2\", \"status\": \"pending\"",
                "{\"id\": \"1.2\", \"status\": \"in_progress\""
            )
            .replace(
                "{\"id\": \"1.2.1\", \"status\": \"pending\"",
                "{\"id\": \"1.2.1\", \"status\": \"completed\""
            )
    );
    let root = fs::read_to_string(dir.join("tasks.jsonc")).unwrap();
    assert_eq!(
        root,
        NESTED[0].1.replacen("\"pending\"", "\"in_progress\"", 1)
    );

    set.set_status(&TaskId::from("1.2.2"), TaskStatus::Completed)
        .unwrap();
    assert_eq!(status(&set, "1.2"), TaskStatus::Completed);
    assert_eq!(status(&set, "1"), TaskStatus::Completed);
    assert_eq!(
        set.container_status(&TaskId::from("1")),
        Some(TaskStatus::Completed)
    );
    // Task 2 is untouched.
    assert_eq!(status(&set, "2"), TaskStatus::Pending);

    // And back: one leaf pending again -> containers in progress.
    set.set_status(&TaskId::from("1.1"), TaskStatus::Pending)
        .unwrap();
    assert_eq!(status(&set, "1"), TaskStatus::InProgress);
    assert_eq!(status(&set, "1.2"), TaskStatus::Completed);
    let again = TaskSet::load(&dir).unwrap();
    for t in &set.tasks {
        assert_eq!(again.task(&t.id).unwrap().status, t.status, "{}", t.id);
    }
}

#[test]
fn a_file_changed_on_disk_is_not_clobbered() {
    let (_t, dir) = change(NESTED);
    let mut set = TaskSet::load(&dir).unwrap();
    assert!(!set.changed_on_disk());
    // Someone (the agent) edits the root file: the leaf's edit would also
    // re-aggregate container 1 there, so nothing at all may be written.
    let edited = NESTED[0].1.replace(
        "\"2\", \"status\": \"pending\"",
        "\"2\", \"status\": \"completed\"",
    );
    fs::write(dir.join("tasks.jsonc"), &edited).unwrap();
    assert!(set.changed_on_disk());
    let e = set
        .set_status(&TaskId::from("1.2.1"), TaskStatus::InProgress)
        .unwrap_err();
    assert!(matches!(e, ModelError::Stale { .. }), "{e:?}");
    assert!(e.to_string().contains("tasks.jsonc changed on disk"), "{e}");
    assert_eq!(fs::read_to_string(dir.join("tasks.jsonc")).unwrap(), edited);
    assert_eq!(
        fs::read_to_string(dir.join("tasks-1.jsonc")).unwrap(),
        NESTED[1].1
    );
    assert_eq!(
        status(&set, "1.2.1"),
        TaskStatus::Pending,
        "memory unchanged too"
    );

    set.reload().unwrap();
    assert_eq!(status(&set, "2"), TaskStatus::Completed);
    set.set_status(&TaskId::from("1.2.1"), TaskStatus::InProgress)
        .unwrap();
    let root = fs::read_to_string(dir.join("tasks.jsonc")).unwrap();
    assert!(
        root.contains("\"2\", \"status\": \"completed\""),
        "outside edit kept: {root}"
    );

    // A deleted file is stale too.
    fs::remove_file(dir.join("tasks-1.jsonc")).unwrap();
    let e = set
        .set_status(&TaskId::from("1.2.1"), TaskStatus::Completed)
        .unwrap_err();
    assert!(matches!(e, ModelError::Stale { .. }), "{e:?}");
}

#[test]
fn containers_and_unknown_ids_are_refused() {
    let (_t, dir) = change(NESTED);
    let mut set = TaskSet::load(&dir).unwrap();
    let e = set
        .set_status(&TaskId::from("1.2"), TaskStatus::Completed)
        .unwrap_err();
    assert!(matches!(e, ModelError::ContainerStatus { .. }), "{e:?}");
    let e = set
        .set_status(&TaskId::from("9"), TaskStatus::Completed)
        .unwrap_err();
    assert!(matches!(e, ModelError::TaskNotFound { .. }), "{e:?}");
    assert_eq!(
        fs::read_to_string(dir.join("tasks-1.jsonc")).unwrap(),
        NESTED[1].1
    );
}

#[test]
fn crlf_comments_escapes_and_missing_status_survive() {
    let text = "\u{feff}// c: \"status\": \"pending\"\r\n{\r\n\t\"tasks\" : [ /* a */ {\"id\":\"1\" , \"description\": \"\\u003cb\\u003e \\\"q\\\" \u{e9}\",\"status\"\t:\"pending\" /* b */},\r\n {\"id\": \"2\"},\r\n ],\r\n}\r\n";
    let (_t, dir) = change(&[("tasks.jsonc", text)]);
    let mut set = TaskSet::load(&dir).unwrap();
    assert_eq!(set.tasks[0].description, "<b> \"q\" \u{e9}");
    set.set_status(&TaskId::from("1"), TaskStatus::InProgress)
        .unwrap();
    let want = text.replacen(":\"pending\" /* b */", ":\"in_progress\" /* b */", 1);
    assert_eq!(fs::read_to_string(dir.join("tasks.jsonc")).unwrap(), want);
    set.set_status(&TaskId::from("2"), TaskStatus::Completed)
        .unwrap();
    let want = want.replacen(
        "{\"id\": \"2\"}",
        "{\"id\": \"2\", \"status\": \"completed\"}",
        1,
    );
    assert_eq!(fs::read_to_string(dir.join("tasks.jsonc")).unwrap(), want);
    assert_eq!(
        TaskSet::load(&dir).unwrap().tasks[1].status,
        TaskStatus::Completed
    );
}

#[cfg(unix)]
#[test]
fn no_change_writes_nothing_and_no_temp_files_remain() {
    use std::os::unix::fs::MetadataExt;
    let (_t, dir) = change(NESTED);
    let mut set = TaskSet::load(&dir).unwrap();
    // NESTED's container 1 says pending though 1.1 is completed: the first
    // edit re-aggregates it.
    set.set_status(&TaskId::from("1.2.1"), TaskStatus::InProgress)
        .unwrap();
    let root = fs::read_to_string(dir.join("tasks.jsonc")).unwrap();
    assert_eq!(
        root,
        NESTED[0].1.replacen("\"pending\"", "\"in_progress\"", 1)
    );
    // Now consistent: setting a status a task already has writes no file (a
    // write would replace the inode).
    let inodes =
        |d: &Path| ["tasks.jsonc", "tasks-1.jsonc"].map(|n| fs::metadata(d.join(n)).unwrap().ino());
    let before = inodes(&dir);
    set.set_status(&TaskId::from("1.2.1"), TaskStatus::InProgress)
        .unwrap();
    set.set_status(&TaskId::from("1.1"), TaskStatus::Completed)
        .unwrap();
    assert_eq!(inodes(&dir), before);
    let names: Vec<String> = fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names.len(), 2, "no temp files left: {names:?}");
}

#[cfg(unix)]
#[test]
fn permissions_are_kept() {
    use std::os::unix::fs::PermissionsExt;
    let (_t, dir) = change(NESTED);
    let p = dir.join("tasks-1.jsonc");
    fs::set_permissions(&p, fs::Permissions::from_mode(0o640)).unwrap();
    let mut set = TaskSet::load(&dir).unwrap();
    set.set_status(&TaskId::from("1.2.1"), TaskStatus::InProgress)
        .unwrap();
    assert_eq!(
        fs::metadata(&p).unwrap().permissions().mode() & 0o777,
        0o640
    );
}

#[test]
fn openspec_completion_ticks_only_that_section() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("openspec/changes/add-story");
    fs::create_dir_all(&dir).unwrap();
    let md = "# T\r\n\r\n## 1. A\r\n- [ ] a1\r\n  - [x] a2\r\n- [ ] a3 `[ ]` kept\r\n\r\n## 2. B\r\n- [ ] b1\r\n";
    fs::write(dir.join("tasks.md"), md).unwrap();
    let mut set = TaskSet::load(&dir).unwrap();
    set.set_status(&TaskId::from("1"), TaskStatus::InProgress)
        .unwrap();
    set.set_status(&TaskId::from("1"), TaskStatus::Pending)
        .unwrap();
    assert_eq!(
        fs::read_to_string(dir.join("tasks.md")).unwrap(),
        md,
        "no-op"
    );
    set.set_status(&TaskId::from("1"), TaskStatus::Completed)
        .unwrap();
    let want = md
        .replacen("- [ ] a1", "- [x] a1", 1)
        .replacen("- [ ] a3", "- [x] a3", 1);
    assert_eq!(fs::read_to_string(dir.join("tasks.md")).unwrap(), want);
    assert_eq!(status(&set, "1"), TaskStatus::Completed);
    assert_eq!(status(&set, "2"), TaskStatus::Pending);
    let again = TaskSet::load(&dir).unwrap();
    assert_eq!(status(&again, "1"), TaskStatus::Completed);

    fs::write(dir.join("tasks.md"), "changed").unwrap();
    let e = set
        .set_status(&TaskId::from("2"), TaskStatus::Completed)
        .unwrap_err();
    assert!(matches!(e, ModelError::Stale { .. }), "{e:?}");
}

#[cfg(unix)]
#[test]
fn a_symlinked_tasks_file_stays_a_symlink() {
    let (_t, dir) = change(&[
        (
            "tasks.jsonc",
            r#"{"tasks": [{"id": "1", "children": "$ref:tasks-1.jsonc"}]}"#,
        ),
        (
            "real-1.jsonc",
            r#"{"tasks": [{"id": "1.1", "status": "pending"}]}"#,
        ),
    ]);
    std::os::unix::fs::symlink("real-1.jsonc", dir.join("tasks-1.jsonc")).unwrap();
    let mut set = TaskSet::load(&dir).unwrap();
    set.set_status(&TaskId::from("1.1"), TaskStatus::Completed)
        .unwrap();
    let link = fs::symlink_metadata(dir.join("tasks-1.jsonc")).unwrap();
    assert!(link.file_type().is_symlink());
    assert_eq!(
        fs::read_to_string(dir.join("real-1.jsonc")).unwrap(),
        r#"{"tasks": [{"id": "1.1", "status": "completed"}]}"#
    );
}

/// An in-memory set (a commit's version of the files, edited to be
/// compared) writes what a set on disk writes, and leaves the disk alone.
#[test]
fn an_in_memory_edit_writes_nothing_and_holds_what_the_disk_edit_writes() {
    let mut checked = 0;
    for change in fs::read_dir(fixtures_root()).unwrap() {
        let src = change.unwrap().path();
        let (mem, disk) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let name = src.file_name().unwrap();
        let mem_dir = mem.path().join("spectr/changes").join(name);
        let disk_dir = disk.path().join("spectr/changes").join(name);
        copy_dir(&src, &mem_dir);
        let original = snapshot(&mem_dir);
        for (id, _, _) in leaf_ids(&mem_dir) {
            copy_dir(&src, &disk_dir);
            let mut on_disk = TaskSet::load(&disk_dir).unwrap();
            on_disk.set_status(&id, TaskStatus::Pending).unwrap();
            let mut in_memory = TaskSet::load(&mem_dir).unwrap().in_memory();
            in_memory.set_status(&id, TaskStatus::Pending).unwrap();
            assert_eq!(snapshot(&mem_dir), original, "{id}: the disk is left alone");
            let mut want = original.clone();
            want.extend(snapshot(&disk_dir));
            let mut got = original.clone();
            for (path, bytes) in in_memory.written() {
                let rel = path
                    .strip_prefix(&mem_dir)
                    .unwrap()
                    .to_string_lossy()
                    .into_owned();
                got.insert(rel, bytes);
            }
            assert!(got == want, "{}: {id}", src.display());
            checked += 1;
        }
    }
    assert!(checked > 10, "only {checked} edits checked");
}
