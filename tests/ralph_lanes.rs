//! Parallel lanes (`spectr ralph --jobs N`, issue 9) end to end, with the
//! scripted agent. Nothing here times anything: two agents prove they ran at
//! the same time by each touching a file and waiting for the other's
//! (`touch:` / `wait_for:`); an agent whose partner never runs fails its
//! attempt after the wait's limit, and the test with it.

mod common;

use common::*;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

const SHARED: &str = "l1\nl2\nl3\nl4\nl5\nl6\nl7\nl8\nl9\n";

/// Where the agents' rendezvous files go: outside the project.
fn sync(fx: &Fixture, name: &str) -> String {
    fx.state.join("sync").join(name).display().to_string()
}

/// `n` lanes of two tasks each (k.1, k.2), and shared.txt committed.
fn lanes_fixture(n: usize) -> Fixture {
    let mut tasks = Vec::new();
    let ids: Vec<(String, String)> = (1..=n)
        .flat_map(|k| [(format!("{k}.1"), format!("Lane {k}")), (format!("{k}.2"), format!("Lane {k}"))])
        .collect();
    for (id, section) in &ids {
        tasks.push((id.as_str(), section.as_str(), "pending"));
    }
    let fx = Fixture::new(&tasks_v1(&tasks));
    std::fs::write(fx.root.join("shared.txt"), SHARED).unwrap();
    git(&fx.root, &["add", "shared.txt"]);
    git(&fx.root, &["commit", "-qm", "shared"]);
    fx
}

/// Each k.1 touches its file and waits for every other lane's, then edits
/// its own line of shared.txt (lines 3 apart, so a three-way merge takes
/// them all) and writes a file of its own; k.2 writes another file and
/// only says COMPLETE (the loop writes its status).
fn lanes_script(fx: &Fixture, n: usize) -> Value {
    let mut script = serde_json::Map::new();
    for k in 1..=n {
        let mut steps = vec![format!("touch:{}", sync(fx, &format!("lane{k}")))];
        for other in (1..=n).filter(|o| *o != k) {
            steps.push(format!("wait_for:{}:30", sync(fx, &format!("lane{other}"))));
        }
        steps.push(format!("edit_line:shared.txt:{}=lane {k} was here", 3 * k - 2));
        steps.push(format!("write:out/{k}.txt=work of lane {k}"));
        if k == 1 {
            // What the user had uncommitted and untracked reached the lane.
            steps.push("copy:notes/user.txt=out/untracked-seen.txt".into());
            steps.push("copy:keep.txt=out/uncommitted-seen.txt".into());
        }
        if k == 2 {
            steps.push("delete:README.txt".into());
        }
        steps.extend(["mark:completed".into(), "complete".into()]);
        script.insert(format!("{k}.1"), json!(steps));
        script.insert(
            format!("{k}.2"),
            json!([format!("write:out/{k}-2.txt=second of lane {k}"), "complete"]),
        );
    }
    Value::Object(script)
}

/// The user's state before a run: a stash, a staged file, an uncommitted
/// edit and an untracked file.
fn user_state(fx: &Fixture) {
    std::fs::write(fx.root.join("keep.txt"), "stashed edit\n").unwrap();
    git(&fx.root, &["stash", "-q"]);
    std::fs::write(fx.root.join("staged.txt"), "staged by the user\n").unwrap();
    git(&fx.root, &["add", "staged.txt"]);
    std::fs::write(fx.root.join("keep.txt"), "uncommitted edit\n").unwrap();
    std::fs::create_dir_all(fx.root.join("notes")).unwrap();
    std::fs::write(fx.root.join("notes/user.txt"), "untracked notes\n").unwrap();
}

/// What git says about the user's repository that no run may change.
#[derive(Debug, PartialEq)]
struct GitState {
    head: String,
    branch: String,
    staged: String,
    stash: String,
    stash_list: String,
}

fn git_state(root: &Path) -> GitState {
    GitState {
        head: git(root, &["rev-parse", "HEAD"]),
        branch: git(root, &["symbolic-ref", "HEAD"]),
        staged: git(root, &["diff", "--cached"]),
        stash: git(root, &["rev-parse", "refs/stash"]),
        stash_list: git(root, &["stash", "list", "--format=%H %s"]),
    }
}

/// Every file of the work tree with its content, but `.git` and spectr's
/// own `.ralph/` folders.
fn files(root: &Path) -> BTreeMap<String, String> {
    fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<String, String>) {
        let mut entries: Vec<_> = std::fs::read_dir(dir).unwrap().flatten().collect();
        entries.sort_by_key(|e| e.file_name());
        for e in entries {
            let p = e.path();
            let rel = p.strip_prefix(root).unwrap().to_string_lossy().to_string();
            if rel == ".git" || rel.ends_with(".ralph") {
                continue;
            }
            if p.is_dir() {
                walk(root, &p, out);
            } else {
                out.insert(rel, std::fs::read_to_string(&p).unwrap_or_default());
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(root, root, &mut out);
    out
}

/// Worktrees git knows of, the main one included.
fn worktrees(root: &Path) -> Vec<String> {
    git(root, &["worktree", "list", "--porcelain"])
        .lines()
        .filter_map(|l| l.strip_prefix("worktree "))
        .map(str::to_string)
        .collect()
}

fn lanes_dir(fx: &Fixture) -> PathBuf {
    fx.change_dir.join(".ralph/lanes")
}

/// The lanes folder is gone or empty.
fn no_lane_folders(fx: &Fixture) -> bool {
    std::fs::read_dir(lanes_dir(fx)).map_or(true, |mut d| d.next().is_none())
}

fn all_completed(fx: &Fixture) -> bool {
    let set = spectr::model::TaskSet::load(&fx.change_dir).expect("tasks load");
    set.tasks
        .iter()
        .all(|t| t.status == spectr::model::TaskStatus::Completed)
}

/// Index of the first event matching `pred`.
fn position(ev: &[Value], pred: impl Fn(&Value) -> bool) -> usize {
    ev.iter()
        .position(pred)
        .unwrap_or_else(|| panic!("no such event in {ev:#?}"))
}

fn is(e: &Value, kind: &str, task: &str) -> bool {
    e["event"] == kind && e["task"] == task
}

fn parallel_run_equals_sequential(n: usize) {
    let fx = lanes_fixture(n);
    fx.script(lanes_script(&fx, n));
    user_state(&fx);
    let before = git_state(&fx.root);
    let jobs = n.to_string();

    let out = fx.run(&["--json", "--jobs", &jobs, "--max-retries", "0"]);
    assert_eq!(out.status.code(), Some(0));
    let ev = events(&out);
    // Every first task ran once and completed: each met every other lane's agent.
    let mut got = started(&ev);
    got.sort();
    let mut want: Vec<String> = (1..=n)
        .flat_map(|k| [format!("{k}.1#1"), format!("{k}.2#1")])
        .collect();
    want.sort();
    assert_eq!(got, want, "each task once, no retry");
    for e in of_kind(&ev, "task_started") {
        let task = e["task"].as_str().unwrap();
        assert_eq!(e["lane"], task.split('.').next().unwrap());
        let wt = e["worktree"].as_str().unwrap();
        assert!(
            Path::new(wt).starts_with(lanes_dir(&fx)),
            "{wt} is under the lanes folder"
        );
    }
    // `--json` tags every event of a lane's task with its lane.
    for e in ev.iter().filter(|e| e["event"] == "agent_started") {
        assert!(e["lane"].is_string() && e["worktree"].is_string(), "{e}");
    }
    let merged = of_kind(&ev, "merged");
    assert_eq!(merged.len(), 2 * n, "every task merged: {merged:#?}");
    let summary = &of_kind(&ev, "summary")[0];
    assert_eq!(summary["end"], "complete");
    let lanes = summary["lanes"].as_array().unwrap();
    assert_eq!(lanes.len(), n);
    for (k, lane) in (1..=n).zip(lanes) {
        assert_eq!(lane["lane"], k.to_string());
        assert_eq!(lane["merged"], json!([format!("{k}.1"), format!("{k}.2")]));
        assert_eq!(lane["conflicted"], json!([]));
    }

    // Nothing of the user's was touched; lanes are gone.
    assert_eq!(git_state(&fx.root), before);
    assert!(all_completed(&fx), "{}", fx.tasks_text());
    assert_eq!(worktrees(&fx.root).len(), 1, "{:?}", worktrees(&fx.root));
    assert!(no_lane_folders(&fx));
    let tree = files(&fx.root);
    assert_eq!(tree["notes/user.txt"], "untracked notes\n");
    assert_eq!(tree["keep.txt"], "uncommitted edit\n");
    assert_eq!(tree["out/untracked-seen.txt"], "untracked notes\n");
    assert_eq!(tree["out/uncommitted-seen.txt"], "uncommitted edit\n");
    let shared = &tree["shared.txt"];
    for k in 1..=n {
        assert!(shared.contains(&format!("lane {k} was here")), "{shared}");
    }

    // The same change run one task at a time, on an identical copy (its
    // rendezvous files made in advance), ends with the same tree.
    let seq = lanes_fixture(n);
    seq.script(lanes_script(&seq, n));
    user_state(&seq);
    for k in 1..=n {
        let f = PathBuf::from(sync(&seq, &format!("lane{k}")));
        std::fs::create_dir_all(f.parent().unwrap()).unwrap();
        std::fs::write(f, "").unwrap();
    }
    let out = seq.run(&["--json", "--jobs", "1"]);
    assert_eq!(out.status.code(), Some(0));
    assert!(of_kind(&events(&out), "merged").is_empty());
    assert_eq!(tree, files(&seq.root));
    assert_eq!(
        git(&fx.root, &["status", "--porcelain"]),
        git(&seq.root, &["status", "--porcelain"])
    );
    assert_eq!(fx.tasks_text(), seq.tasks_text());
}

#[test]
fn two_lanes_run_at_once_and_end_with_the_sequential_tree() {
    parallel_run_equals_sequential(2);
}

#[test]
fn three_lanes_run_at_once_and_end_with_the_sequential_tree() {
    parallel_run_equals_sequential(3);
}

#[test]
fn a_conflict_is_retried_with_the_reason_on_top_of_the_other_lanes_work() {
    let fx = Fixture::new(&tasks_v1(&[
        ("1.1", "Core", "pending"),
        ("2.1", "Docs", "pending"),
    ]));
    std::fs::write(fx.root.join("shared.txt"), SHARED).unwrap();
    git(&fx.root, &["add", "shared.txt"]);
    git(&fx.root, &["commit", "-qm", "shared"]);
    // The marker appears in the user's tree only once 1.1 merged.
    let marker = fx.root.join("marker.txt").display().to_string();
    fx.script(json!({
        "1.1": [
            format!("touch:{}", sync(&fx, "one")),
            "edit_line:shared.txt:2=ONE",
            "write:marker.txt=1.1 merged",
            "mark:completed",
            "complete"
        ],
        "2.1": [
            [
                format!("wait_for:{}:30", sync(&fx, "one")),
                format!("wait_for:{marker}:30"),
                "edit_line:shared.txt:2=TWO",
                "mark:completed",
                "complete"
            ],
            ["edit_line:shared.txt:5=TWO", "mark:completed", "complete"]
        ]
    }));
    let out = fx.run(&["--json", "--jobs", "2", "--max-retries", "1"]);
    assert_eq!(out.status.code(), Some(0));
    let ev = events(&out);
    let mut got = started(&ev);
    got.sort();
    assert_eq!(got, ["1.1#1", "2.1#1", "2.1#2"]);

    let failed = of_kind(&ev, "task_failed");
    assert_eq!(failed.len(), 1, "{failed:#?}");
    assert_eq!(failed[0]["task"], "2.1");
    assert_eq!(failed[0]["outcome"]["kind"], "conflict");
    assert_eq!(failed[0]["outcome"]["files"], json!(["shared.txt"]));
    let retry = fx.prompt("2.1", 2).expect("a second attempt");
    assert!(
        retry.contains("could not be merged") && retry.contains("shared.txt"),
        "the reason reaches the next prompt:\n{retry}"
    );

    // Both changes are in the tree; the user's tasks file says completed.
    assert_eq!(
        std::fs::read_to_string(fx.root.join("shared.txt")).unwrap(),
        "l1\nONE\nl3\nl4\nTWO\nl6\nl7\nl8\nl9\n"
    );
    assert!(all_completed(&fx));
    let summary = &of_kind(&ev, "summary")[0];
    let lanes = summary["lanes"].as_array().unwrap();
    let lane2 = lanes.iter().find(|l| l["lane"] == "2").expect("lane 2");
    assert_eq!(lane2["conflicted"], json!(["2.1"]));
    assert_eq!(lane2["merged"], json!(["2.1"]));
    let lane1 = lanes.iter().find(|l| l["lane"] == "1").expect("lane 1");
    assert_eq!(lane1["conflicted"], json!([]));

    // Nothing lost: the conflicting attempt's work is kept under its ref.
    let reverted: Vec<Value> = of_kind(&ev, "reverted")
        .into_iter()
        .filter(|e| e["task"] == "2.1" && e["attempt"] == 1)
        .collect();
    assert_eq!(reverted.len(), 1, "{ev:#?}");
    let failed_ref = reverted[0]["failed_ref"].as_str().unwrap();
    assert_eq!(
        git(&fx.root, &["show", &format!("{failed_ref}:shared.txt")]),
        "l1\nTWO\nl3\nl4\nl5\nl6\nl7\nl8\nl9\n"
    );
    assert_eq!(worktrees(&fx.root).len(), 1);
    assert!(no_lane_folders(&fx));
}

#[test]
fn a_failing_lane_does_not_stop_the_other_and_skips_only_within_itself() {
    let fx = Fixture::new(&tasks_v1(&[
        ("1.1", "Core", "pending"),
        ("1.2", "Core", "pending"),
        ("2.1", "Docs", "pending"),
        ("2.2", "Docs", "pending"),
    ]));
    // 2.1 fails while 1.1 runs (they meet first), every time.
    fx.script(json!({
        "1.1": [
            format!("touch:{}", sync(&fx, "one")),
            format!("wait_for:{}:30", sync(&fx, "two")),
            "write:out/1.1.txt=one",
            "mark:completed",
            "complete"
        ],
        "2.1": [
            format!("touch:{}", sync(&fx, "two")),
            format!("wait_for:{}:30", sync(&fx, "one")),
            "write:out/2.1.txt=half done",
            "fail:the docs tool is broken"
        ],
        "default": ["mark:completed", "complete"]
    }));
    let out = fx.run(&[
        "--json",
        "--jobs",
        "2",
        "--max-retries",
        "0",
        "--on-exhaust",
        "skip",
    ]);
    assert_eq!(out.status.code(), Some(1), "not every task completed");
    let ev = events(&out);
    let mut got = started(&ev);
    got.sort();
    assert_eq!(got, ["1.1#1", "1.2#1", "2.1#1"], "2.2 never starts");
    let skipped = of_kind(&ev, "task_skipped");
    assert_eq!(skipped.len(), 1);
    assert_eq!(skipped[0]["task"], "2.1");
    assert_eq!(skipped[0]["dependents"], json!(["2.2"]));
    for id in ["1.1", "1.2"] {
        assert_eq!(fx.status(id), "completed");
    }
    for id in ["2.1", "2.2"] {
        assert_eq!(fx.status(id), "pending", "skips never reach tasks.jsonc");
    }
    assert_eq!(
        std::fs::read_to_string(fx.root.join("out/1.1.txt")).unwrap(),
        "one"
    );
    assert!(
        !fx.root.join("out/2.1.txt").exists(),
        "the failed work never reached the user's tree"
    );
    let summary = &of_kind(&ev, "summary")[0];
    assert_eq!(summary["end"], "incomplete");
    assert_eq!(summary["totals"]["completed"], 2);
    assert_eq!(worktrees(&fx.root).len(), 1);
    assert!(no_lane_folders(&fx));
}

#[test]
fn the_final_section_starts_after_every_other_lane_completed() {
    let fx = Fixture::new(&tasks_v1(&[
        ("1.1", "Core", "pending"),
        ("1.2", "Core", "pending"),
        ("2.1", "Docs", "pending"),
        ("3.1", "99.99.99 Final section (after all tasks)", "pending"),
    ]));
    fx.script(json!({
        "1.1": [
            format!("touch:{}", sync(&fx, "one")),
            format!("wait_for:{}:30", sync(&fx, "two")),
            "write:out/1.1.txt=one", "mark:completed", "complete"
        ],
        "1.2": ["write:out/1.2.txt=one-two", "mark:completed", "complete"],
        "2.1": [
            format!("touch:{}", sync(&fx, "two")),
            format!("wait_for:{}:30", sync(&fx, "one")),
            "write:out/2.1.txt=two", "mark:completed", "complete"
        ],
        // It sees every lane's merged work in its own lane.
        "3.1": [
            "copy:out/1.2.txt=out/final-saw-1.2.txt",
            "copy:out/2.1.txt=out/final-saw-2.1.txt",
            "mark:completed", "complete"
        ]
    }));
    let out = fx.run(&["--json", "--jobs", "3", "--max-retries", "0"]);
    assert_eq!(out.status.code(), Some(0));
    let ev = events(&out);
    let final_start = position(&ev, |e| is(e, "task_started", "3.1"));
    for other in ["1.1", "1.2", "2.1"] {
        let done = position(&ev, |e| is(e, "task_completed", other));
        let merged = position(&ev, |e| is(e, "merged", other));
        assert!(
            merged < final_start && done < final_start,
            "{other} merged and completed before the final section started"
        );
    }
    assert_eq!(of_kind(&ev, "task_started").len(), 4, "no retries");
    assert_eq!(
        std::fs::read_to_string(fx.root.join("out/final-saw-1.2.txt")).unwrap(),
        "one-two"
    );
    assert_eq!(
        std::fs::read_to_string(fx.root.join("out/final-saw-2.1.txt")).unwrap(),
        "two"
    );
    assert!(all_completed(&fx));
}
