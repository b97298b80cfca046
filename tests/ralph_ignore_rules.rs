//! Real repositories' ignore rules: a `.gitignore` that ignores spectr's own
//! folder (the first thing people add) must not break a single checkpoint,
//! revert or lane; and a failure of spectr's own bookkeeping stops the run at
//! once instead of burning the agent's retries.

mod common;

use common::*;
use serde_json::json;

/// A fixture whose committed `.gitignore` holds `rule`.
fn ignoring(tasks: &str, rule: &str) -> Fixture {
    let fx = Fixture::new(tasks);
    std::fs::write(fx.root.join(".gitignore"), format!("{rule}\n")).unwrap();
    git(&fx.root, &["add", "-A"]);
    git(&fx.root, &["commit", "-qm", "ignore spectr's folder"]);
    fx
}

fn chain() -> String {
    tasks_v1(&[("1.1", "Core", "pending"), ("1.2", "Core", "pending")])
}

fn two_lanes() -> String {
    tasks_v1(&[
        ("1.1", "Core", "pending"),
        ("1.2", "Core", "pending"),
        ("2.1", "Docs", "pending"),
    ])
}

/// 1.1 fails once (its file must go with the revert), everything else works.
fn script_with_a_failure(fx: &Fixture) {
    let works = |id: &str| {
        json!([[
            format!("write:out-{id}.txt=done"),
            "mark:completed",
            "complete"
        ]])
    };
    fx.script(json!({
        "1.1": [
            ["write:junk.txt=failed attempt", "fail:not yet"],
            ["write:out-1.1.txt=done", "mark:completed", "complete"]
        ],
        "1.2": works("1.2"),
        "2.1": works("2.1"),
    }));
}

#[test]
fn a_gitignore_that_ignores_ralph_fails_no_checkpoint() {
    for rule in [".ralph/", ".ralph", "**/.ralph/", ".ralph*"] {
        let fx = ignoring(&chain(), rule);
        script_with_a_failure(&fx);
        let out = fx.run(&["--json", "--yes"]);
        let text = String::from_utf8_lossy(&out.stdout);
        assert_eq!(out.status.code(), Some(0), "rule {rule:?}:\n{text}");
        assert!(!text.contains("git_error"), "rule {rule:?}:\n{text}");
        assert_eq!(fx.status("1.1"), "completed", "rule {rule:?}");
        assert_eq!(fx.status("1.2"), "completed", "rule {rule:?}");
        assert!(!fx.root.join("junk.txt").exists(), "rule {rule:?}: revert");
        assert!(fx.root.join("out-1.2.txt").exists(), "rule {rule:?}");
        let ev = events(&out);
        assert_eq!(started(&ev), ["1.1#1", "1.1#2", "1.2#1"], "rule {rule:?}");
    }
}

#[test]
fn a_gitignore_that_ignores_ralph_fails_no_lane() {
    for rule in [".ralph/", ".ralph*"] {
        let fx = ignoring(&two_lanes(), rule);
        script_with_a_failure(&fx);
        let out = fx.run(&["--json", "--yes", "--jobs", "2"]);
        let text = String::from_utf8_lossy(&out.stdout);
        assert_eq!(out.status.code(), Some(0), "rule {rule:?}:\n{text}");
        assert!(!text.contains("git_error"), "rule {rule:?}:\n{text}");
        for id in ["1.1", "1.2", "2.1"] {
            assert_eq!(fx.status(id), "completed", "rule {rule:?}: {id}");
            assert!(fx.root.join(format!("out-{id}.txt")).exists());
        }
        assert!(!fx.root.join("junk.txt").exists(), "rule {rule:?}");
    }
}

#[test]
fn spectrs_own_failure_stops_the_run_at_once_without_using_a_retry() {
    let fx = Fixture::new(&chain());
    fx.script(json!({"default": ["write:x.txt=1", "mark:completed", "complete"]}));
    // A ref spectr must write cannot be: `refs/spectr` is a file.
    let refs = fx.root.join(".git/refs/spectr");
    std::fs::write(&refs, "not a folder\n").unwrap();
    let out = fx.run(&["--json", "--yes", "--max-retries", "3"]);
    assert_eq!(out.status.code(), Some(1));
    let ev = events(&out);
    // One attempt, never retried, and the agent never started.
    assert_eq!(started(&ev), ["1.1#1"]);
    assert!(of_kind(&ev, "retry").is_empty());
    assert!(of_kind(&ev, "agent_started").is_empty());
    assert!(fx.prompt("1.1", 1).is_none(), "the agent never ran");
    let errors = of_kind(&ev, "error");
    assert_eq!(errors.len(), 1, "{errors:?}");
    let message = errors[0]["message"].as_str().unwrap();
    assert!(message.contains("checkpoint"), "{message}");
    assert!(message.contains("run the same command again"), "{message}");
    assert_eq!(of_kind(&ev, "summary")[0]["end"], "aborted");
    // The session is kept, and the attempt was not counted against the task.
    let session = fx.session();
    let rec = &session["tasks"]["1.1"];
    assert_eq!(rec["attempts"].as_array().unwrap().len(), 1);
    assert_eq!(rec["counted_attempts"], 0, "{rec}");
    // Fixed, the same command goes on from there.
    std::fs::remove_file(&refs).unwrap();
    let out = fx.run(&["--json", "--yes"]);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(fx.status("1.2"), "completed");
}
