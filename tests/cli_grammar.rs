//! One grammar for commands (issue 33): the change id is positional where
//! a command takes it (`status`, `report`, `context`, `task done`; `--change`
//! still works, as agents' prompts use it), resolved alike (exact, unique
//! prefix, unique substring); a miss names the folder it looked in and the
//! nearest ids; discovery takes the nearest project folder.

mod common;

use common::cli::{Proj, spectr_in, stderr, stdout};

const TASKS: &str = "## 1. Work\n- [ ] Do it\n- [ ] Then this\n";

fn two_changes() -> Proj {
    let p = Proj::new();
    for id in ["add-timeline-slash-command", "fix-login"] {
        p.add_change(id, id, Some(TASKS));
        let out = p.cmd().args(["accept", id]).output().unwrap();
        assert!(out.status.success(), "{}", stderr(&out));
    }
    p
}

#[test]
fn the_change_id_is_positional_where_it_is_taken() {
    let p = two_changes();
    for args in [
        &["status", "fix-login"][..],
        &["status", "fix"],
        &["status", "--change", "fix-login"],
        &["context", "fix-login", "--task", "1.1"],
        &["context", "--change", "fix-login", "--task", "1.1"],
    ] {
        let out = p.cmd().args(args).output().unwrap();
        assert!(out.status.success(), "{args:?}: {}", stderr(&out));
    }
    // `report` resolves the same way (no run to report yet, of fix-login).
    let out = p.cmd().args(["report", "fix"]).output().unwrap();
    assert!(
        stderr(&out).contains("no run of fix-login"),
        "{}",
        stderr(&out)
    );
    let out = p
        .cmd()
        .args(["task", "done", "1.1", "fix-login"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let out = p
        .cmd()
        .args(["task", "done", "1.2", "--change", "fix"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let tasks = p.read("spectr/changes/fix-login/tasks.jsonc");
    assert_eq!(
        tasks.matches("\"status\": \"completed\"").count(),
        2,
        "{tasks}"
    );
    // learn: a first word that is a change's exact id names it.
    let out = p
        .cmd()
        .args(["learn", "fix-login", "the tests need", "make gen"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let learned = p.read("spectr/changes/fix-login/.ralph/learnings.md");
    assert!(learned.contains("the tests need make gen"), "{learned}");
    assert!(!learned.contains("fix-login the tests"), "{learned}");
    // One word is a learning, not a change: which change is asked.
    let out = p.cmd().args(["learn", "fix-login"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stdout(&out));
    assert!(stderr(&out).contains("--change <id>"), "{}", stderr(&out));
    // Both at once, naming two changes, is refused.
    let out = p
        .cmd()
        .args(["status", "fix-login", "--change", "add-timeline"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stdout(&out));
    // Which change, when there are two: the way to name it is said.
    let out = p.cmd().args(["status"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("spectr status <change-id>"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn a_typo_in_a_change_id_gets_the_nearest_ids_and_where_it_looked() {
    let p = two_changes();
    for args in [
        &["status", "add-timline-slash-command"][..],
        &["report", "add-timline-slash-command"],
        &[
            "ralph",
            "add-timline-slash-command",
            "--dry-run",
            "--agent-cmd",
            "cat",
        ],
        &[
            "task",
            "done",
            "1.1",
            "--change",
            "add-timline-slash-command",
        ],
    ] {
        let out = p.cmd().args(args).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stdout(&out));
        let err = stderr(&out);
        assert!(
            err.contains("did you mean 'add-timeline-slash-command'?"),
            "{args:?}: {err}"
        );
        assert!(
            err.contains("spectr/changes"),
            "{args:?} names no folder: {err}"
        );
    }
    // Nothing near: `spectr list` is the way.
    let out = p.cmd().args(["status", "zzzzzzzz"]).output().unwrap();
    let err = stderr(&out);
    assert!(
        err.contains("spectr list") && !err.contains("did you mean"),
        "{err}"
    );
}

#[test]
fn the_nearest_project_folder_wins_and_an_empty_listing_says_where_it_looked() {
    // An OpenSpec project inside a folder that holds an unrelated spectr/.
    let p = Proj::new();
    p.add_change("outer-change", "Outer", Some(TASKS));
    let inner = p.root().join("tools/app");
    std::fs::create_dir_all(inner.join("openspec/changes/inner-change")).unwrap();
    std::fs::write(
        inner.join("openspec/changes/inner-change/proposal.md"),
        "# Inner\n",
    )
    .unwrap();
    std::fs::write(inner.join("openspec/changes/inner-change/tasks.md"), TASKS).unwrap();
    let out = spectr_in(&inner).arg("list").output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).contains("inner-change"), "{}", stdout(&out));
    assert!(!stdout(&out).contains("outer-change"), "{}", stdout(&out));
    // No change at all: upstream's words, and the folder it read.
    let empty = p.root().join("empty");
    std::fs::create_dir_all(empty.join("openspec/changes")).unwrap();
    let out = spectr_in(&empty).arg("list").output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out), "No items found\n");
    assert!(
        stderr(&out).contains("empty/openspec/changes"),
        "{}",
        stderr(&out)
    );
}
