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

/// Creates the rendezvous file `name` as an agent's `touch:` would.
fn touch_sync(fx: &Fixture, name: &str) {
    let f = PathBuf::from(sync(fx, name));
    std::fs::create_dir_all(f.parent().unwrap()).unwrap();
    std::fs::write(f, "").unwrap();
}

/// An agent's steps that first meet another agent (touch `me`, wait for
/// `other`: both ran at once, or this attempt fails), then do `then`.
fn meet_then(fx: &Fixture, me: &str, other: &str, then: &[&str]) -> Value {
    let mut steps = vec![
        format!("touch:{}", sync(fx, me)),
        format!("wait_for:{}:30", sync(fx, other)),
    ];
    steps.extend(then.iter().map(|s| s.to_string()));
    json!(steps)
}

/// Attempts of `id`: the first writes half its work to wip/ and waits on
/// `never` (until it is killed), the second writes `out/<id>.txt` and
/// completes.
fn stuck_then_done(never: &str, id: &str, out: &str) -> Value {
    json!([
        [format!("write:wip/{id}.txt=half of {id}"), never],
        [
            format!("write:out/{id}.txt={out}"),
            "mark:completed",
            "complete"
        ]
    ])
}

/// Commits shared.txt (lines three apart merge cleanly) in the fixture.
fn commit_shared(fx: &Fixture) {
    std::fs::write(fx.root.join("shared.txt"), SHARED).unwrap();
    git(&fx.root, &["add", "shared.txt"]);
    git(&fx.root, &["commit", "-qm", "shared"]);
}

/// `n` lanes of two tasks each (k.1, k.2), and shared.txt committed.
fn lanes_fixture(n: usize) -> Fixture {
    let mut tasks = Vec::new();
    let ids: Vec<(String, String)> = (1..=n)
        .flat_map(|k| {
            [
                (format!("{k}.1"), format!("Lane {k}")),
                (format!("{k}.2"), format!("Lane {k}")),
            ]
        })
        .collect();
    for (id, section) in &ids {
        tasks.push((id.as_str(), section.as_str(), "pending"));
    }
    let fx = Fixture::new(&tasks_v1(&tasks));
    commit_shared(&fx);
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
        steps.push(format!(
            "edit_line:shared.txt:{}=lane {k} was here",
            3 * k - 2
        ));
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
            json!([
                format!("write:out/{k}-2.txt=second of lane {k}"),
                "complete"
            ]),
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
    work_tree_files(root, &|rel| {
        rel.ends_with(".ralph") || rel.ends_with(".ralph-session.json")
    })
}

/// Worktrees git knows of, the main one included.
fn worktrees(root: &Path) -> Vec<String> {
    git(root, &["worktree", "list", "--porcelain"])
        .lines()
        .filter_map(|l| l.strip_prefix("worktree "))
        .map(str::to_string)
        .collect()
}

/// Tasks 1.1 and 2.1: two lanes of one task.
fn two_lanes() -> Fixture {
    Fixture::new(&tasks_v1(&[
        ("1.1", "Core", "pending"),
        ("2.1", "Docs", "pending"),
    ]))
}

/// Where every lane of the fixture's runs lives (outside its tree).
fn lanes_dir(fx: &Fixture) -> PathBuf {
    fx.lanes_home()
}

/// No lane is left: git knows only the user's worktree, and the lanes
/// folder is gone or empty.
fn assert_no_lanes_left(fx: &Fixture) {
    assert_eq!(worktrees(&fx.root).len(), 1, "{:?}", worktrees(&fx.root));
    assert!(
        std::fs::read_dir(lanes_dir(fx)).map_or(true, |mut d| d.next().is_none()),
        "the lanes folder is empty"
    );
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

/// The `reverted` events of `task`'s attempt `attempt`.
fn reverted_of(ev: &[Value], task: &str, attempt: u32) -> Vec<Value> {
    of_kind(ev, "reverted")
        .into_iter()
        .filter(|e| e["task"] == task && e["attempt"] == attempt)
        .collect()
}

/// The checkpointer a `--jobs` run uses on the fixture (spectr's own
/// `.ralph/` excluded).
fn checkpointer(fx: &Fixture) -> spectr::checkpoint::Checkpointer {
    spectr::checkpoint::Checkpointer::discover(&fx.root, std::time::Duration::from_secs(30))
        .unwrap()
        .unwrap()
        .with_excludes(vec![fx.change_dir.join(".ralph")])
}

fn parallel_run_equals_sequential(n: usize) {
    let fx = lanes_fixture(n);
    fx.script(lanes_script(&fx, n));
    user_state(&fx);
    let before = git_state(&fx.root);
    let jobs = n.to_string();

    let out = fx.run(&[
        "--json",
        "--jobs",
        &jobs,
        "--max-retries",
        "0",
        "--commit",
        "off",
    ]);
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
    assert_no_lanes_left(&fx);
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
        touch_sync(&seq, &format!("lane{k}"));
    }
    let out = seq.run(&["--json", "--jobs", "1", "--commit", "off"]);
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

/// A resolve attempt while another task runs goes to its lane: the work
/// applied there with markers, merged back once resolved; and one whose
/// agent leaves a marker fails, the user's tree never holding it.
#[test]
fn a_resolve_beside_a_running_task_runs_in_its_lane_and_a_marker_left_fails_it() {
    let fx = Fixture::new(&tasks_v1(&[
        ("1.1", "Core", "pending"),
        ("1.2", "Core", "pending"),
        ("2.1", "Docs", "pending"),
    ]));
    commit_shared(&fx);
    let resolving = sync(&fx, "resolving");
    let mut script = line_two_script(
        &fx,
        vec![
            // Leaves the markers in: not resolved.
            json!([format!("touch:{resolving}1"), "mark:completed", "complete"]),
            json!([
                format!("touch:{resolving}2"),
                "resolve:shared.txt",
                "mark:completed",
                "complete"
            ]),
        ],
    );
    // Runs until 2.1's second resolve started.
    script.insert(
        "1.2".into(),
        json!([
            format!("wait_for:{resolving}2:30"),
            "write:own.txt=1.2",
            "mark:completed",
            "complete"
        ]),
    );
    fx.script(Value::Object(script));
    let out = fx.run(&["--json", "--jobs", "2", "--max-retries", "1"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let ev = events(&out);
    for attempt in [2, 3] {
        let start = of_kind(&ev, "task_started")
            .into_iter()
            .find(|e| e["task"] == "2.1" && e["attempt"] == attempt)
            .unwrap();
        assert!(start["worktree"].is_string(), "in its lane: {start}");
    }
    assert_failed_with_markers_left(&ev, 2);
    assert_eq!(
        std::fs::read_to_string(fx.root.join("shared.txt")).unwrap(),
        BOTH_LINES
    );
    assert!(all_completed(&fx));
    let summary = &of_kind(&ev, "summary")[0];
    let lane2 = summary["lanes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["lane"] == "2")
        .cloned()
        .unwrap();
    assert_eq!(lane2["merged"], json!(["2.1"]));
    assert_no_lanes_left(&fx);
}

/// A resolve attempt in the user's tree whose agent leaves a marker fails
/// and is put back: the markers never stay in the user's tree.
#[test]
fn a_resolve_in_place_that_leaves_a_marker_fails_and_is_put_back() {
    let fx = line_two_conflict_with(|_| {
        vec![
            json!(["mark:completed", "complete"]),
            json!(["resolve:shared.txt", "mark:completed", "complete"]),
        ]
    });
    let out = fx.run(&["--json", "--jobs", "2", "--max-retries", "1"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let ev = events(&out);
    assert_failed_with_markers_left(&ev, 2);
    assert_eq!(reverted_of(&ev, "2.1", 2).len(), 1, "{ev:#?}");
    let second = fx.prompt("2.1", 3).expect("a third attempt");
    assert!(second.contains("still hold conflict markers"), "{second}");
    assert_eq!(
        std::fs::read_to_string(fx.root.join("shared.txt")).unwrap(),
        BOTH_LINES
    );
    assert!(all_completed(&fx));
}

/// Two lanes editing line 2 of shared.txt: 1.1 merges first (ONE), then
/// 2.1's first attempt (TWO) conflicts; `later(fx)` are 2.1's next attempts.
fn line_two_conflict_with(later: impl Fn(&Fixture) -> Vec<Value>) -> Fixture {
    let fx = two_lanes();
    commit_shared(&fx);
    let script = line_two_script(&fx, later(&fx));
    fx.script(Value::Object(script));
    fx
}

/// The scripts of [`line_two_conflict_with`]: 1.1's, and 2.1's first
/// attempt followed by `later`.
fn line_two_script(fx: &Fixture, later: Vec<Value>) -> serde_json::Map<String, Value> {
    // The marker appears in the user's tree only once 1.1 merged.
    let marker = fx.root.join("marker.txt").display().to_string();
    let mut attempts = vec![json!([
        format!("wait_for:{}:30", sync(fx, "one")),
        format!("wait_for:{marker}:30"),
        "edit_line:shared.txt:2=TWO",
        "mark:completed",
        "complete"
    ])];
    attempts.extend(later);
    let script = json!({
        "1.1": [
            format!("touch:{}", sync(fx, "one")),
            "edit_line:shared.txt:2=ONE",
            "write:marker.txt=1.1 merged",
            "mark:completed",
            "complete"
        ],
        "2.1": attempts
    });
    match script {
        Value::Object(map) => map,
        _ => unreachable!("a JSON object literal"),
    }
}

/// shared.txt once both line-2 changes are in, as a resolve keeps them.
const BOTH_LINES: &str = "l1\nONE\nTWO\nl3\nl4\nl5\nl6\nl7\nl8\nl9\n";

/// The task's `attempt` failed because its agent left conflict markers.
fn assert_failed_with_markers_left(ev: &[Value], attempt: u32) {
    let failed = of_kind(ev, "task_failed");
    let marked = failed
        .iter()
        .find(|e| e["attempt"] == attempt)
        .unwrap_or_else(|| panic!("{failed:#?}"));
    assert!(
        marked["outcome"]["reason"]
            .as_str()
            .unwrap()
            .contains("still hold conflict markers"),
        "{marked}"
    );
}

#[test]
fn a_conflict_is_resolved_by_an_attempt_given_its_work_back_with_markers() {
    let fx = line_two_conflict_with(|_| {
        vec![json!(["resolve:shared.txt", "mark:completed", "complete"])]
    });
    let out = fx.run(&["--json", "--jobs", "2", "--max-retries", "0"]);
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
    // With the other lane's change, as a diff from where 2.1 started.
    assert!(
        retry.contains("-l2") && retry.contains("+ONE"),
        "the other change is shown:\n{retry}"
    );
    // Its work is back in the lane, markers where it met the other change.
    assert!(
        retry.contains("shared.txt hold conflict markers"),
        "the prompt names the marked files:\n{retry}"
    );
    let resolving = of_kind(&ev, "resolving");
    assert_eq!(resolving.len(), 1, "{ev:#?}");
    assert_eq!(resolving[0]["files"], json!(["shared.txt"]));

    // Nothing else could run: the resolve ran in the user's tree (its
    // lane named, no work tree), as lanes taking turns do.
    let resolve = of_kind(&ev, "task_started")
        .into_iter()
        .find(|e| e["task"] == "2.1" && e["attempt"] == 2)
        .unwrap();
    assert_eq!(
        (&resolve["lane"], &resolve["worktree"]),
        (&json!("2"), &Value::Null)
    );

    // Both changes are in the tree, as the resolve kept them; the user's
    // tasks file says completed.
    assert_eq!(
        std::fs::read_to_string(fx.root.join("shared.txt")).unwrap(),
        BOTH_LINES
    );
    assert!(all_completed(&fx));
    let summary = &of_kind(&ev, "summary")[0];
    let lanes = summary["lanes"].as_array().unwrap();
    let lane2 = lanes.iter().find(|l| l["lane"] == "2").expect("lane 2");
    assert_eq!(lane2["conflicted"], json!(["2.1"]));
    assert_eq!(lane2["in_place"], json!(["2.1"]));
    let lane1 = lanes.iter().find(|l| l["lane"] == "1").expect("lane 1");
    assert_eq!(lane1["conflicted"], json!([]));

    // Nothing lost: the conflicting attempt's work is kept under its ref.
    let reverted = reverted_of(&ev, "2.1", 1);
    assert_eq!(reverted.len(), 1, "{ev:#?}");
    let failed_ref = reverted[0]["failed_ref"].as_str().unwrap();
    assert_eq!(
        git(&fx.root, &["show", &format!("{failed_ref}:shared.txt")]),
        "l1\nTWO\nl3\nl4\nl5\nl6\nl7\nl8\nl9\n"
    );
    assert_no_lanes_left(&fx);
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
        "1.1": meet_then(&fx, "one", "two", &["write:out/1.1.txt=one", "mark:completed", "complete"]),
        "2.1": meet_then(&fx, "two", "one", &["write:out/2.1.txt=half done", "fail:the docs tool is broken"]),
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
    assert_no_lanes_left(&fx);
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
        "1.1": meet_then(&fx, "one", "two", &["write:out/1.1.txt=one", "mark:completed", "complete"]),
        "1.2": ["write:out/1.2.txt=one-two", "mark:completed", "complete"],
        "2.1": meet_then(&fx, "two", "one", &["write:out/2.1.txt=two", "mark:completed", "complete"]),
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

/// A `--json` run in the background whose events arrive on a channel.
struct Streamed {
    run: Background,
    events: crossbeam_channel::Receiver<Value>,
    seen: Vec<Value>,
}

impl Streamed {
    fn spawn(fx: &Fixture, extra: &[&str]) -> Streamed {
        let mut cmd = fx.ralph();
        cmd.arg("--json")
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        let mut child = cmd.spawn().expect("spectr starts");
        let stdout = child.stdout.take().expect("piped");
        let (tx, rx) = crossbeam_channel::unbounded();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if let Ok(v) = serde_json::from_str::<Value>(&line) {
                    let _ = tx.send(v);
                }
            }
        });
        Streamed {
            run: Background::from_child(child),
            events: rx,
            seen: Vec::new(),
        }
    }

    /// Waits (a hang guard of 60 s, nothing timed) until `cond` holds for
    /// the events seen so far.
    fn until(&mut self, what: &str, cond: impl Fn(&[Value]) -> bool) {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while !cond(&self.seen) {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            match self.events.recv_timeout(left) {
                Ok(v) => self.seen.push(v),
                Err(_) => panic!("timed out waiting for {what}; saw {:#?}", self.seen),
            }
        }
    }

    /// Waits until every one of `tasks` has its agent started.
    fn until_running(&mut self, tasks: &[&str]) {
        let what = format!("{} all running", tasks.join(" and "));
        self.until(&what, |ev| {
            tasks
                .iter()
                .all(|t| ev.iter().any(|e| is(e, "agent_started", t)))
        });
    }

    /// Waits until the run's summary was printed.
    fn until_summary(&mut self) {
        self.until("the summary", |ev| {
            ev.iter().any(|e| e["event"] == "summary")
        });
    }

    /// Sends `sig` to spectr itself (not its agents).
    fn signal(&self, sig: nix::sys::signal::Signal) {
        let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(self.run.id() as i32), sig);
    }
}

#[test]
fn kill_9_with_two_agents_running_then_resume_loses_nothing_and_redoes_nothing() {
    let fx = Fixture::new(&tasks_v1(&[
        ("1.1", "Core", "pending"),
        ("1.2", "Core", "pending"),
        ("2.1", "Docs", "pending"),
    ]));
    let never = format!("wait_for:{}:120", sync(&fx, "never"));
    fx.script(json!({
        "1.1": ["write:out/1.1.txt=one", "mark:completed", "complete"],
        "1.2": stuck_then_done(&never, "1.2", "one-two"),
        "2.1": stuck_then_done(&never, "2.1", "two")
    }));
    user_state(&fx);
    let before = git_state(&fx.root);
    let mut run = Streamed::spawn(&fx, &["--jobs", "2", "--commit", "off"]);
    run.until_running(&["1.2", "2.1"]);
    // Their half-done work is written before the agents wait. Its content,
    // not just the file: the kill takes the agents down with spectr, maybe
    // between creating the file and writing it.
    let written = |lane: &str, id: &str| {
        std::fs::read_to_string(fx.lane_path(lane).join(format!("wip/{id}.txt")))
            .is_ok_and(|t| t == format!("half of {id}"))
    };
    fx.wait_for("both agents' work in their lanes", || {
        written("lane-1", "1.2") && written("lane-2", "2.1")
            || written("lane-2", "1.2") && written("lane-1", "2.1")
    });
    run.signal(nix::sys::signal::Signal::SIGKILL);
    run.run.wait();
    let first = run.seen.clone();
    assert_eq!(fx.status("1.1"), "completed", "merged before the kill");
    assert!(worktrees(&fx.root).len() > 1, "the crash left its lanes");

    let out = fx.run(&[
        "--json", "--resume", "--yes", "--jobs", "2", "--commit", "off",
    ]);
    assert_eq!(out.status.code(), Some(0));
    let ev = events(&out);

    // No orphans: every agent that ever ran is gone.
    let agents = pids(&fx.state, "agents.pid");
    assert_eq!(agents.len(), 5, "1.1, then 1.2 and 2.1 twice");
    fx.wait_for("every agent gone", || agents.iter().all(|p| !alive(*p)));

    // No stale lanes; the user's git state untouched.
    assert_no_lanes_left(&fx);
    assert_eq!(git_state(&fx.root), before);

    // Nothing done twice: each task completed once, 1.1 never prompted again.
    let mut completed: Vec<String> = first
        .iter()
        .chain(ev.iter())
        .filter(|e| e["event"] == "task_completed")
        .map(|e| e["task"].as_str().unwrap().to_string())
        .collect();
    completed.sort();
    assert_eq!(completed, ["1.1", "1.2", "2.1"]);
    assert!(fx.prompt("1.1", 2).is_none(), "1.1 was not run again");
    let mut resumed = started(&ev);
    resumed.sort();
    assert_eq!(resumed, ["1.2#2", "2.1#2"]);
    assert!(all_completed(&fx), "{}", fx.tasks_text());

    // The tree holds exactly the completed work; the interrupted attempts'
    // half-done work is not in it but kept under a ref.
    let tree = files(&fx.root);
    assert_eq!(tree["keep.txt"], "uncommitted edit\n");
    assert_eq!(tree["notes/user.txt"], "untracked notes\n");
    assert_eq!(tree["out/1.1.txt"], "one");
    assert_eq!(tree["out/1.2.txt"], "one-two");
    assert_eq!(tree["out/2.1.txt"], "two");
    assert!(!tree.contains_key("wip/1.2.txt") && !tree.contains_key("wip/2.1.txt"));
    let refs = git(&fx.root, &["for-each-ref", "--format=%(refname)"]);
    for (wip, text) in [
        ("wip/1.2.txt", "half of 1.2"),
        ("wip/2.1.txt", "half of 2.1"),
    ] {
        // Reachable from a ref (a lane's ref keeps its history as parents).
        let kept = refs.lines().any(|r| {
            git(&fx.root, &["rev-list", "-n", "20", r])
                .lines()
                .any(|c| {
                    Command::new("git")
                        .args(["show", &format!("{c}:{wip}")])
                        .current_dir(&fx.root)
                        .stderr(Stdio::null())
                        .output()
                        .is_ok_and(|o| o.status.success() && o.stdout == text.as_bytes())
                })
        });
        assert!(kept, "{wip} is kept under a ref: {refs}");
    }
}

/// Kills a `--jobs 2` run of 1.1 and 2.1 once both agents run; their first
/// attempts wait forever, the second ones complete.
fn killed_with_two_agents_running(fx: &Fixture) {
    let never = format!("wait_for:{}:120", sync(fx, "never"));
    fx.script(json!({
        "1.1": stuck_then_done(&never, "1.1", "one"),
        "2.1": stuck_then_done(&never, "2.1", "two")
    }));
    let mut run = Streamed::spawn(fx, &["--jobs", "2", "--commit", "off"]);
    run.until_running(&["1.1", "2.1"]);
    // Both agents have their prompt (the fake agent counts its attempts by
    // them): the resume's attempts are the second ones, as for a real
    // agent, not a replay of the stuck first that waits out its 120 s.
    fx.wait_for("both agents' prompts", || {
        fx.prompt("1.1", 1).is_some() && fx.prompt("2.1", 1).is_some()
    });
    run.signal(nix::sys::signal::Signal::SIGKILL);
    run.run.wait();
}

/// kill -9 in the middle of a merge-back is hard to hit on purpose: this
/// builds the state it leaves instead. The session of a killed run is given
/// what `merge_started` records (the user's tree checkpointed, with the
/// same API the merge uses) and the tree a half-written merge; the resume
/// puts the user's tree back exactly and keeps the half merge under a ref.
#[test]
fn a_merge_cut_short_by_a_crash_is_reverted_from_its_checkpoint_on_resume() {
    let fx = two_lanes();
    user_state(&fx);
    killed_with_two_agents_running(&fx);
    let before = files(&fx.root);
    let git_before = git_state(&fx.root);

    let cp = checkpointer(&fx);
    let checkpoint = cp.create(&cp.ref_name(CHANGE, "2.1", 1)).unwrap();
    let mut session = fx.session();
    let attempts = session["tasks"]["2.1"]["attempts"].as_array_mut().unwrap();
    let last = attempts.last_mut().unwrap();
    assert!(
        last["outcome"].is_null() && last["worktree"].is_string(),
        "{last}"
    );
    last["checkpoint"] = serde_json::to_value(&checkpoint).unwrap();
    std::fs::write(fx.session_path(), session.to_string()).unwrap();
    // Half of 2.1's merge was written when spectr died.
    std::fs::create_dir_all(fx.root.join("out")).unwrap();
    std::fs::write(fx.root.join("out/2.1.txt"), "half merged").unwrap();
    std::fs::write(fx.root.join("keep.txt"), "half merged too\n").unwrap();

    let out = fx.run(&[
        "--json", "--resume", "--yes", "--jobs", "2", "--commit", "off",
    ]);
    assert_eq!(out.status.code(), Some(0));
    let ev = events(&out);
    let reverted = reverted_of(&ev, "2.1", 1);
    assert_eq!(reverted.len(), 1, "{ev:#?}");
    let failed_ref = reverted[0]["failed_ref"].as_str().unwrap();
    assert_eq!(
        git(&fx.root, &["show", &format!("{failed_ref}:out/2.1.txt")]),
        "half merged"
    );
    // Reverted before the second attempts ran: the tree is the user's plus
    // exactly what they merged.
    let revert_at = position(&ev, |e| is(e, "reverted", "2.1"));
    let first_start = position(&ev, |e| e["event"] == "task_started");
    assert!(revert_at < first_start);
    let mut want = before;
    let tasks_file = format!("spectr/changes/{CHANGE}/tasks.jsonc");
    want.insert(tasks_file, fx.tasks_text());
    want.insert("out/1.1.txt".into(), "one".into());
    want.insert("out/2.1.txt".into(), "two".into());
    assert_eq!(files(&fx.root), want);
    assert_eq!(git_state(&fx.root), git_before);
    assert!(all_completed(&fx));
    assert_no_lanes_left(&fx);
}

fn stderr_of(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).to_string()
}

#[test]
fn jobs_needs_a_repository_with_a_commit_and_is_bounded() {
    let two = tasks_v1(&[("1.1", "Core", "pending"), ("2.1", "Docs", "pending")]);

    let no_repo = Fixture::with_files(&[("tasks.jsonc", &two)], false);
    let out = no_repo.run(&["--jobs", "2"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr_of(&out).contains("not in a git repository"),
        "{}",
        stderr_of(&out)
    );
    assert!(no_repo.prompt("1.1", 1).is_none(), "nothing ran");

    let no_commit = Fixture::with_files(&[("tasks.jsonc", &two)], false);
    git(&no_commit.root, &["init", "-q", "-b", "main"]);
    git(&no_commit.root, &["config", "user.name", "Spectr Tests"]);
    git(
        &no_commit.root,
        &["config", "user.email", "tests@spectr.invalid"],
    );
    let out = no_commit.run(&["--jobs", "2"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr_of(&out).contains("first commit"),
        "{}",
        stderr_of(&out)
    );
    assert!(no_commit.prompt("1.1", 1).is_none(), "nothing ran");
    // Without --jobs both run as before.
    no_commit.script(json!({"default": ["mark:completed", "complete"]}));
    assert_eq!(no_commit.run(&["--json"]).status.code(), Some(0));

    let fx = Fixture::new(&two);
    let out = fx.run(&["--jobs", "65"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr_of(&out).contains("from 0 to 64"),
        "{}",
        stderr_of(&out)
    );
    assert!(fx.prompt("1.1", 1).is_none(), "nothing ran");
}

#[test]
fn jobs_from_spectr_yaml_runs_lanes_at_once() {
    let fx = two_lanes();
    std::fs::write(fx.root.join("spectr.yaml"), "ralph:\n  jobs: 2\n").unwrap();
    fx.script(json!({
        "1.1": meet_then(&fx, "one", "two", &["mark:completed", "complete"]),
        "2.1": meet_then(&fx, "two", "one", &["mark:completed", "complete"])
    }));
    let out = fx.run(&["--json", "--max-retries", "0"]);
    assert_eq!(out.status.code(), Some(0));
    let ev = events(&out);
    assert_eq!(of_kind(&ev, "merged").len(), 2);
    assert!(
        of_kind(&ev, "task_started")
            .iter()
            .all(|e| e["lane"].is_string())
    );
    assert!(all_completed(&fx));
}

#[test]
fn jobs_on_a_single_lane_change_runs_as_one_job() {
    let fx = Fixture::new(&tasks_v1(&[
        ("1.1", "Core", "pending"),
        ("1.2", "Core", "pending"),
    ]));
    fx.script(json!({"default": ["write:out/x.txt=x", "mark:completed", "complete"]}));
    let out = fx.run(&["--json", "--jobs", "2"]);
    assert_eq!(out.status.code(), Some(0));
    let ev = events(&out);
    assert_eq!(started(&ev), ["1.1#1", "1.2#1"]);
    assert!(of_kind(&ev, "merged").is_empty());
    for e in of_kind(&ev, "task_started") {
        assert!(
            e.get("lane").is_none() && e.get("worktree").is_none(),
            "{e}"
        );
    }
    assert!(of_kind(&ev, "summary")[0].get("lanes").is_none());
    assert!(!lanes_dir(&fx).exists(), "no lanes folder");
    assert_eq!(worktrees(&fx.root).len(), 1);
    assert!(all_completed(&fx));
}

/// A lane's merge finished (`merged` recorded) but spectr died before the
/// task was judged completed, and meanwhile another lane merged and
/// completed on top of it. A resume must not revert the first merge from
/// its checkpoint: that would wipe the second lane's completed work, which
/// is never run again. The merged attempt counts as completed instead.
#[test]
fn a_finished_merge_is_not_reverted_on_resume_even_if_its_task_was_not_judged_yet() {
    let fx = two_lanes();
    killed_with_two_agents_running(&fx);
    let cp = checkpointer(&fx);
    // 2.1: merge started (checkpoint), then written and recorded as merged.
    let before_2_1 = cp.create(&cp.ref_name(CHANGE, "2.1", 1)).unwrap();
    std::fs::create_dir_all(fx.root.join("out")).unwrap();
    std::fs::write(fx.root.join("out/2.1.txt"), "two").unwrap();
    // 1.1: merged on top of it and completed (its status mirrored).
    let before_1_1 = cp.create(&cp.ref_name(CHANGE, "1.1", 1)).unwrap();
    std::fs::write(fx.root.join("out/1.1.txt"), "one").unwrap();
    let text = fx.tasks_text();
    let at = text.find("\"1.1\"").unwrap();
    let status = at + text[at..].find("\"in_progress\"").unwrap();
    let text = format!(
        "{}\"completed\"{}",
        &text[..status],
        &text[status + "\"in_progress\"".len()..]
    );
    std::fs::write(fx.change_dir.join("tasks.jsonc"), text).unwrap();

    let mut session = fx.session();
    {
        let a = session["tasks"]["2.1"]["attempts"].as_array_mut().unwrap();
        let last = a.last_mut().unwrap();
        last["checkpoint"] = serde_json::to_value(&before_2_1).unwrap();
        last["merged"] = json!(true);
    }
    {
        let rec = &mut session["tasks"]["1.1"];
        rec["state"] = json!("completed");
        let a = rec["attempts"].as_array_mut().unwrap();
        let last = a.last_mut().unwrap();
        last["checkpoint"] = serde_json::to_value(&before_1_1).unwrap();
        last["merged"] = json!(true);
        last["outcome"] = json!({"kind": "completed", "via": "status"});
    }
    std::fs::write(fx.session_path(), session.to_string()).unwrap();

    let out = fx.run(&["--json", "--resume", "--yes", "--jobs", "2"]);
    assert_eq!(out.status.code(), Some(0));
    let ev = events(&out);
    assert!(
        of_kind(&ev, "reverted").is_empty(),
        "nothing merged is reverted"
    );
    assert_eq!(
        std::fs::read_to_string(fx.root.join("out/1.1.txt"))
            .ok()
            .as_deref(),
        Some("one"),
        "1.1's completed work is still there"
    );
    assert_eq!(
        std::fs::read_to_string(fx.root.join("out/2.1.txt"))
            .ok()
            .as_deref(),
        Some("two")
    );
    assert!(
        started(&ev).is_empty(),
        "nothing is run again: {:?}",
        started(&ev)
    );
    assert!(all_completed(&fx), "{}", fx.tasks_text());
}

#[test]
fn sigterm_with_two_agents_running_stops_both_removes_the_lanes_and_resumes() {
    let fx = two_lanes();
    user_state(&fx);
    let before = git_state(&fx.root);
    let never = format!("wait_for:{}:120", sync(&fx, "never"));
    fx.script(json!({
        "1.1": stuck_then_done(&never, "1.1", "one"),
        "2.1": stuck_then_done(&never, "2.1", "two")
    }));
    let mut run = Streamed::spawn(&fx, &["--jobs", "2"]);
    run.until_running(&["1.1", "2.1"]);
    // Running is not yet noted: each agent writes its pid once it has read
    // its prompt, and the check below counts those.
    fx.wait_for("both agents to note their pids", || {
        pids(&fx.state, "agents.pid").len() == 2
    });
    run.signal(nix::sys::signal::Signal::SIGTERM);
    let status = run.run.wait();
    assert!(!status.success());
    run.until_summary();
    let summary = run.seen.iter().find(|e| e["event"] == "summary").unwrap();
    assert_eq!(summary["end"], "interrupted");
    for t in ["1.1", "2.1"] {
        assert!(
            run.seen.iter().any(|e| is(e, "task_failed", t)),
            "{t} was stopped and reported"
        );
    }
    let agents = pids(&fx.state, "agents.pid");
    assert_eq!(agents.len(), 2);
    assert!(agents.iter().all(|p| !alive(*p)), "both agents stopped");
    assert_no_lanes_left(&fx);
    assert_eq!(git_state(&fx.root), before);
    assert!(
        !fx.root.join("wip").exists(),
        "no lane work in the user's tree"
    );

    let out = fx.run(&["--json", "--resume", "--yes", "--jobs", "2"]);
    assert_eq!(out.status.code(), Some(0));
    let mut resumed = started(&events(&out));
    resumed.sort();
    assert_eq!(resumed, ["1.1#2", "2.1#2"]);
    assert!(all_completed(&fx));
    assert_eq!(worktrees(&fx.root).len(), 1);
}

#[test]
fn commits_an_agent_makes_in_a_lane_stay_reachable_and_the_branch_does_not_move() {
    let fx = Fixture::new(&tasks_v1(&[
        ("1.1", "Core", "pending"),
        ("1.2", "Core", "pending"),
        ("2.1", "Docs", "pending"),
    ]));
    fx.script(json!({
        "1.1": ["write:out/1.1.txt=one", "git_commit:agent commit of 1.1", "mark:completed", "complete"],
        "2.1": ["write:out/2.1.txt=two", "git_commit:agent commit of 2.1", "mark:completed", "complete"],
        "default": ["mark:completed", "complete"]
    }));
    user_state(&fx);
    let before = git_state(&fx.root);
    let out = fx.run(&["--json", "--jobs", "2", "--commit", "off"]);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(
        git_state(&fx.root),
        before,
        "the user's branch did not move"
    );
    assert_eq!(
        std::fs::read_to_string(fx.root.join("out/1.1.txt")).unwrap(),
        "one"
    );
    assert_eq!(
        std::fs::read_to_string(fx.root.join("out/2.1.txt")).unwrap(),
        "two"
    );
    // Reachable from a ref (reflogs aside), both the one followed by another
    // task in its lane and the one made by its lane's last task.
    let subjects = git(&fx.root, &["log", "--all", "--format=%s"]);
    for s in ["agent commit of 1.1", "agent commit of 2.1"] {
        assert!(subjects.contains(s), "{s} is kept:\n{subjects}");
    }
}

#[test]
fn verify_runs_in_the_lane_and_a_rate_limited_lane_waits_without_stopping_the_other() {
    let fx = two_lanes();
    fx.script(json!({
        // Attempt 1 says COMPLETE without the work: verify (in the lane) fails.
        "1.1": [
            ["write:out/1.1.txt=one", "complete"],
            ["write:out/1.1.txt=one", "write:out/ok-1.1=", "complete"]
        ],
        "2.1": [
            ["rate_limit:1"],
            ["write:out/2.1.txt=two", "write:out/ok-2.1=", "complete"]
        ]
    }));
    let out = fx.run(&[
        "--json",
        "--jobs",
        "2",
        "--verify",
        // Passes once the lane holds a marker: its own (or a merged one).
        "ls out/ok-* >/dev/null 2>&1",
    ]);
    assert_eq!(out.status.code(), Some(0));
    let ev = events(&out);
    let failed = of_kind(&ev, "task_failed");
    let kinds: Vec<(String, String)> = failed
        .iter()
        .map(|e| {
            (
                e["task"].as_str().unwrap().to_string(),
                e["outcome"]["kind"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert!(
        kinds.contains(&("1.1".into(), "verify_failed".into())),
        "{kinds:?}"
    );
    assert!(
        kinds.contains(&("2.1".into(), "rate_limited".into())),
        "{kinds:?}"
    );
    assert_eq!(of_kind(&ev, "rate_limit_wait").len(), 1);
    assert!(all_completed(&fx));
    assert!(fx.root.join("out/ok-1.1").exists() && fx.root.join("out/ok-2.1").exists());
}

/// Sets `id`'s status in the user's tasks file the way a person's editor
/// would (a plain text edit).
fn edit_status(fx: &Fixture, id: &str, status: &str) {
    let text = fx.tasks_text();
    let at = text.find(&format!("\"id\": \"{id}\"")).unwrap();
    let key = at + text[at..].find("\"status\": \"").unwrap() + "\"status\": \"".len();
    let end = key + text[key..].find('"').unwrap();
    let edited = format!("{}{status}{}", &text[..key], &text[end..]);
    let tmp = fx.change_dir.join("tasks.jsonc.edit");
    std::fs::write(&tmp, edited).unwrap();
    std::fs::rename(tmp, fx.change_dir.join("tasks.jsonc")).unwrap();
}

#[test]
fn a_persons_status_edit_in_the_real_tasks_file_is_respected_by_the_lanes() {
    let fx = Fixture::new(&tasks_v1(&[
        ("1.1", "Core", "pending"),
        ("1.2", "Core", "pending"),
        ("2.1", "Docs", "pending"),
        ("2.2", "Docs", "pending"),
    ]));
    // Both first tasks wait until the person has edited the file.
    let go = format!("wait_for:{}:30", sync(&fx, "go"));
    fx.script(json!({
        "1.1": [go.as_str(), "write:out/1.1.txt=one", "mark:completed", "complete"],
        "2.1": [go.as_str(), "write:out/2.1.txt=two", "mark:completed", "complete"],
        "default": ["mark:completed", "complete"]
    }));
    let mut run = Streamed::spawn(&fx, &["--jobs", "2"]);
    run.until_running(&["1.1", "2.1"]);
    edit_status(&fx, "2.2", "completed");
    touch_sync(&fx, "go");
    run.until_summary();
    let status = run.run.wait();
    assert!(status.success());
    let mut got = started(&run.seen);
    got.sort();
    assert_eq!(
        got,
        ["1.1#1", "1.2#1", "2.1#1"],
        "2.2 was done by the person"
    );
    assert!(all_completed(&fx), "{}", fx.tasks_text());
    assert!(!fx.root.join("out/2.2.txt").exists());
}

#[test]
fn openspec_stories_run_in_lanes_and_their_boxes_are_ticked_once_merged() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("proj");
    let change = root.join("openspec/changes/add-thing");
    std::fs::create_dir_all(&change).unwrap();
    std::fs::write(change.join("proposal.md"), "# Add thing\n").unwrap();
    let md = "# Tasks\n\n## 1. First story\n\n- [ ] 1.1 one\n- [x] 1.2 two\n\n## 2. Second story\n\n- [ ] 2.1 three\n";
    std::fs::write(change.join("tasks.md"), md).unwrap();
    git(&root, &["init", "-q", "-b", "main"]);
    git(&root, &["config", "user.name", "Spectr Tests"]);
    git(&root, &["config", "user.email", "tests@spectr.invalid"]);
    git(&root, &["add", "-A"]);
    git(&root, &["commit", "-qm", "init"]);
    let fx = Fixture::with_files(&[], false);
    fx.script(json!({
        "1": meet_then(&fx, "one", "two", &["write:out/1.txt=one", "complete"]),
        "2": meet_then(&fx, "two", "one", &["write:out/2.txt=two", "complete"])
    }));
    let mut cmd = Command::new(spectr_bin());
    cmd.current_dir(&root)
        .env("PATH", fx.path_env())
        .env("SPECTR_FAKE_SCRIPT", fx.state.join("script.json"))
        .env("SPECTR_FAKE_STATE", &fx.state)
        .env("XDG_CACHE_HOME", fx.cache_home())
        .args([
            "ralph",
            "add-thing",
            "--agent",
            "claude",
            "--json",
            "--jobs",
            "2",
        ])
        .args(["--max-retries", "0"])
        .stdin(Stdio::null());
    let out = output_shown(cmd);
    assert_eq!(out.status.code(), Some(0));
    let ev = events(&out);
    let mut got = started(&ev);
    got.sort();
    assert_eq!(got, ["1#1", "2#1"]);
    assert_eq!(of_kind(&ev, "merged").len(), 2);
    let md = std::fs::read_to_string(change.join("tasks.md")).unwrap();
    assert_eq!(
        md,
        "# Tasks\n\n## 1. First story\n\n- [x] 1.1 one\n- [x] 1.2 two\n\n## 2. Second story\n\n- [x] 2.1 three\n"
    );
    assert_eq!(
        std::fs::read_to_string(root.join("out/1.txt")).unwrap(),
        "one"
    );
    assert_eq!(
        std::fs::read_to_string(root.join("out/2.txt")).unwrap(),
        "two"
    );
    assert_eq!(worktrees(&root).len(), 1);
}

/// Issue 23: `sections` lanes of `per` tasks, each task appending its line
/// to NOTES.md and writing a file of its own; every lane's first task waits
/// for all the others, so the lanes start from the same tree and each merge
/// after the first meets the others' lines at the same place. With
/// `union`, `NOTES.md merge=union` is in `.gitattributes`.
fn appending_lanes(sections: usize, per: usize, union: bool) -> (Fixture, std::process::Output) {
    let fx = appending_fixture(sections, per, union, &|_, _| None);
    let jobs = sections.to_string();
    let out = fx.run(&["--json", "--jobs", &jobs, "--max-retries", "0"]);
    (fx, out)
}

/// The change of [`appending_lanes`]; `first` may give a task a first
/// attempt of its own (its usual attempts follow it).
fn appending_fixture(
    sections: usize,
    per: usize,
    union: bool,
    first: &dyn Fn(&Fixture, &str) -> Option<Value>,
) -> Fixture {
    appending_fixture_with(sections, per, union, first, false)
}

/// [`appending_fixture`]; with `commit`, every task but a lane's first
/// commits its work (`git add -A`, `git commit`) before marking it done.
fn appending_fixture_with(
    sections: usize,
    per: usize,
    union: bool,
    first: &dyn Fn(&Fixture, &str) -> Option<Value>,
    commit: bool,
) -> Fixture {
    let mut ids = Vec::new();
    for k in 1..=sections {
        for t in 1..=per {
            ids.push((format!("{k}.{t}"), format!("Lane {k}")));
        }
    }
    let tasks: Vec<(&str, &str, &str)> = ids
        .iter()
        .map(|(id, section)| (id.as_str(), section.as_str(), "pending"))
        .collect();
    let fx = Fixture::new(&tasks_v1(&tasks));
    std::fs::write(fx.root.join("NOTES.md"), "# Notes\n").unwrap();
    let rules = if union { "NOTES.md merge=union\n" } else { "" };
    std::fs::write(fx.root.join(".gitattributes"), rules).unwrap();
    git(&fx.root, &["add", "NOTES.md", ".gitattributes"]);
    git(&fx.root, &["commit", "-qm", "notes"]);
    let mut script = serde_json::Map::new();
    for (id, _) in &ids {
        let (k, t) = id.split_once('.').unwrap();
        let mut steps = Vec::new();
        if t == "1" {
            steps.push(format!("touch:{}", sync(&fx, &format!("lane{k}"))));
            for other in (1..=sections).map(|o| o.to_string()).filter(|o| o != k) {
                steps.push(format!(
                    "wait_for:{}:30",
                    sync(&fx, &format!("lane{other}"))
                ));
            }
        }
        steps.push(format!("write:out/{id}.txt=work of {id}"));
        steps.push(format!("append:NOTES.md=- note from task {id}"));
        if commit && t != "1" {
            steps.push(format!("git_commit:task {id}"));
        }
        steps.extend(["mark:completed".into(), "complete".into()]);
        // A resolve attempt finds its work applied again with markers where
        // it met the other lanes' lines: it keeps both, as a person would.
        let resolve = ["resolve:NOTES.md", "mark:completed", "complete"];
        let attempts = match first(&fx, id) {
            Some(own) => json!([own, steps, resolve]),
            None => json!([steps, resolve]),
        };
        script.insert(id.clone(), attempts);
    }
    fx.script(Value::Object(script));
    fx
}

#[test]
fn with_merge_union_lanes_appending_to_one_file_never_conflict() {
    let (sections, per) = (4, 3);
    let (fx, out) = appending_lanes(sections, per, true);
    let ev = events(&out);
    assert!(of_kind(&ev, "task_failed").is_empty(), "{ev:#?}");
    assert_eq!(out.status.code(), Some(0));
    // Attempts = tasks: each ran once.
    let mut got = started(&ev);
    got.sort();
    let mut want: Vec<String> = (1..=sections)
        .flat_map(|k| (1..=per).map(move |t| format!("{k}.{t}#1")))
        .collect();
    want.sort();
    assert_eq!(got, want);
    let summary = &of_kind(&ev, "summary")[0];
    for lane in summary["lanes"].as_array().unwrap() {
        assert_eq!(lane["conflicted"], json!([]), "{lane}");
    }
    // Every task's line once, no markers, the header kept; every own file there.
    let notes = std::fs::read_to_string(fx.root.join("NOTES.md")).unwrap();
    assert!(
        notes.starts_with("# Notes\n") && notes.ends_with('\n'),
        "{notes}"
    );
    assert_eq!(notes.lines().count(), 1 + sections * per, "{notes}");
    for k in 1..=sections {
        for t in 1..=per {
            let line = format!("- note from task {k}.{t}");
            assert_eq!(notes.lines().filter(|l| *l == line).count(), 1, "{notes}");
            assert!(fx.root.join(format!("out/{k}.{t}.txt")).exists());
        }
    }
    assert!(
        !notes.contains("<<<<<<<") && !notes.contains(">>>>>>>"),
        "{notes}"
    );
    assert!(all_completed(&fx), "{}", fx.tasks_text());
    assert_no_lanes_left(&fx);
}

/// Every task's line once, no markers, the header kept, every own file.
fn assert_every_line_once(fx: &Fixture, sections: usize, per: usize) {
    let notes = std::fs::read_to_string(fx.root.join("NOTES.md")).unwrap();
    assert!(
        notes.starts_with("# Notes\n") && notes.ends_with('\n'),
        "{notes}"
    );
    assert_eq!(notes.lines().count(), 1 + sections * per, "{notes}");
    for k in 1..=sections {
        for t in 1..=per {
            let line = format!("- note from task {k}.{t}");
            assert_eq!(notes.lines().filter(|l| *l == line).count(), 1, "{notes}");
            assert!(fx.root.join(format!("out/{k}.{t}.txt")).exists());
        }
    }
    assert!(
        !notes.contains("<<<<<<<") && !notes.contains(">>>>>>>") && !notes.contains("\n=======\n")
    );
}

#[test]
fn without_the_union_rule_a_conflict_costs_one_resolve_attempt_and_no_retry() {
    let (fx, out) = appending_lanes(2, 1, false);
    let ev = events(&out);
    assert_eq!(out.status.code(), Some(0), "{ev:#?}");
    let failed = of_kind(&ev, "task_failed");
    assert_eq!(failed.len(), 1, "{failed:#?}");
    assert_eq!(failed[0]["outcome"]["kind"], "conflict");
    assert_eq!(failed[0]["outcome"]["files"], json!(["NOTES.md"]));
    let loser = failed[0]["task"].as_str().unwrap();
    // --max-retries 0, yet the task had its resolve attempt.
    let resolving = of_kind(&ev, "resolving");
    assert_eq!(resolving.len(), 1, "{ev:#?}");
    assert_eq!(resolving[0]["task"], loser);
    assert_eq!(resolving[0]["files"], json!(["NOTES.md"]));
    let prompt = fx.prompt(loser, 2).expect("a resolve attempt");
    assert!(
        prompt.contains("hold conflict markers")
            && prompt.contains("<<<<<<< the project now")
            && prompt.contains(&format!(">>>>>>> your previous work on task {loser}")),
        "the prompt says what to resolve:\n{prompt}"
    );
    let summary = &of_kind(&ev, "summary")[0];
    assert_eq!(summary["totals"]["conflicts"], 1);
    assert_eq!(summary["totals"]["resolve_attempts"], 1);
    assert_eq!(summary["totals"]["failed"], 0);
    assert_every_line_once(&fx, 2, 1);
    assert!(all_completed(&fx), "{}", fx.tasks_text());
}

/// The run's makespan in attempts, independent of the clock: each attempt
/// takes one unit and starts at 1 + the latest end among the attempts that
/// ended before it started (in event order). `--jobs 1` takes as many units
/// as attempts.
fn makespan_in_attempts(ev: &[Value]) -> u32 {
    let key = |e: &Value| {
        (
            e["task"].as_str().unwrap_or("").to_owned(),
            e["attempt"].clone().to_string(),
        )
    };
    let mut ends_at: BTreeMap<(String, String), u32> = BTreeMap::new();
    let (mut latest_end, mut makespan) = (0, 0);
    for e in ev {
        match e["event"].as_str() {
            Some("task_started") => {
                ends_at.insert(key(e), latest_end + 1);
                makespan = makespan.max(latest_end + 1);
            }
            Some("task_completed" | "task_failed") => {
                let end = ends_at
                    .get(&key(e))
                    .copied()
                    .unwrap_or_else(|| panic!("{e} never started"));
                latest_end = latest_end.max(end);
            }
            _ => {}
        }
    }
    makespan
}

/// Issue 23's stress test: 8 lanes of 5 tasks, every task appending to one
/// file. Every line once, no markers, at most 1.5 agent attempts per task,
/// and no longer than `--jobs 1` in attempts one after another.
#[test]
fn eight_lanes_appending_to_one_file_converge_in_few_attempts() {
    let (sections, per) = (8, 5);
    let (fx, out) = appending_lanes(sections, per, false);
    let ev = events(&out);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let attempts = started(&ev).len();
    let tasks = sections * per;
    assert!(
        attempts * 2 <= tasks * 3,
        "{attempts} attempts for {tasks} tasks"
    );
    // `--jobs 1` runs each task once: 40 attempts in a row.
    let makespan = makespan_in_attempts(&ev);
    assert!(
        makespan as usize <= tasks,
        "a chain of {makespan} attempts, longer than --jobs 1's {tasks}"
    );
    let summary = &of_kind(&ev, "summary")[0];
    assert_eq!(summary["totals"]["attempts"], attempts);
    assert_eq!(
        summary["totals"]["conflicts"], summary["totals"]["resolve_attempts"],
        "{summary}"
    );
    // Once the lanes only take turns, the one task that can run runs in
    // the user's tree (no lane, nothing to merge), said once.
    let in_place = of_kind(&ev, "task_started")
        .iter()
        .filter(|e| !e["lane"].is_null() && e["worktree"].is_null())
        .count();
    assert!(in_place > 0, "no task ran in place: {ev:#?}");
    let told = of_kind(&ev, "notice")
        .iter()
        .filter(|e| e["message"].as_str().unwrap().contains("runs in your tree"))
        .count();
    assert_eq!(told, 1);
    let lanes = summary["lanes"].as_array().unwrap();
    let count = |key: &str| -> usize {
        lanes
            .iter()
            .map(|l| l[key].as_array().map_or(0, Vec::len))
            .sum()
    };
    assert_eq!(count("merged") + count("in_place"), tasks, "{summary}");
    assert_every_line_once(&fx, sections, per);
    assert!(all_completed(&fx), "{}", fx.tasks_text());
    assert_no_lanes_left(&fx);
}

#[test]
fn eight_lanes_with_merge_union_never_conflict() {
    let (sections, per) = (8, 5);
    let (fx, out) = appending_lanes(sections, per, true);
    let ev = events(&out);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert_eq!(started(&ev).len(), sections * per, "attempts = tasks");
    assert!(of_kind(&ev, "task_failed").is_empty());
    assert_every_line_once(&fx, sections, per);
}

/// A task that runs in the user's tree and leaves the hot file alone cools
/// its lane: the lanes run side by side in their work trees again.
#[test]
fn a_task_in_place_that_leaves_the_hot_file_alone_lets_the_lanes_run_side_by_side() {
    let (sections, per) = (2, 5);
    let fx = appending_fixture(sections, per, false, &|_, id| {
        let t: u32 = id.split_once('.').unwrap().1.parse().unwrap();
        (t >= 3).then(|| {
            json!([
                format!("write:out/{id}.txt=work of {id}"),
                format!("append:NOTES.md.{id}=- note from task {id}"),
                "mark:completed",
                "complete"
            ])
        })
    });
    let out = fx.run(&["--json", "--jobs", "2", "--max-retries", "0"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let ev = events(&out);
    let starts = of_kind(&ev, "task_started");
    let first_in_place = starts
        .iter()
        .position(|e| e["worktree"].is_null())
        .unwrap_or_else(|| panic!("nothing ran in place: {starts:#?}"));
    assert!(
        starts[first_in_place..]
            .iter()
            .any(|e| e["worktree"].is_string()),
        "the lanes never ran side by side again: {starts:#?}"
    );
    assert!(all_completed(&fx), "{}", fx.tasks_text());
}

/// Agents that commit while their task runs in the user's tree (lanes
/// taking turns): as in a lane, the user's branch and index never move;
/// the work is in the tree uncommitted, the commits kept under a ref.
#[test]
fn commits_made_in_place_leave_the_users_branch_and_index_alone() {
    let (sections, per) = (2, 3);
    let fx = appending_fixture_with(sections, per, false, &|_, _| None, true);
    let head = git(&fx.root, &["rev-parse", "HEAD"]);
    let out = fx.run(&[
        "--json",
        "--jobs",
        "2",
        "--max-retries",
        "0",
        "--commit",
        "off",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let ev = events(&out);
    // First attempts in place commit (a resolve attempt does not).
    let in_place: Vec<String> = of_kind(&ev, "task_started")
        .iter()
        .filter(|e| e["worktree"].is_null() && e["attempt"] == 1)
        .map(|e| e["task"].as_str().unwrap().to_string())
        .collect();
    assert!(!in_place.is_empty(), "{ev:#?}");
    assert_eq!(
        git(&fx.root, &["rev-parse", "HEAD"]),
        head,
        "the branch moved"
    );
    assert_eq!(
        git(&fx.root, &["symbolic-ref", "HEAD"]).trim(),
        "refs/heads/main"
    );
    assert_eq!(git(&fx.root, &["diff", "--cached", "--name-only"]), "");
    for task in &in_place {
        assert_commits_kept(&fx, task);
    }
    let notices = of_kind(&ev, "notice");
    assert!(
        notices.iter().any(|n| n["message"]
            .as_str()
            .unwrap()
            .contains("your branch did not move")),
        "{notices:#?}"
    );
    assert_every_line_once(&fx, sections, per);
    assert!(all_completed(&fx), "{}", fx.tasks_text());
}

/// Runs `--jobs 2` until the agent of a lane's third task touched the sync
/// file `reached`, checks that task runs in the user's tree, and returns
/// its `task_started` with the run still going.
fn third_task_in_place(fx: &Fixture, reached: &str) -> (Streamed, Value) {
    let mut run = Streamed::spawn(
        fx,
        &["--jobs", "2", "--max-retries", "0", "--commit", "off"],
    );
    fx.wait_for("a third task's agent there", || {
        Path::new(&sync(fx, reached)).exists()
    });
    let third =
        |e: &Value| e["event"] == "task_started" && e["task"].as_str().unwrap().ends_with(".3");
    run.until("its start", |seen| seen.iter().any(third));
    let start = run.seen.iter().find(|e| third(e)).unwrap().clone();
    assert!(
        !start["lane"].is_null() && start["worktree"].is_null(),
        "not in place: {start}"
    );
    (run, start)
}

/// kill -9 of `run`, then a resume with `--jobs 2` to its end (exit 0),
/// the agents waiting on the sync file `released` let go first (on resume
/// they give up at once, with no signal, and are retried); its events.
fn kill_and_resume(fx: &Fixture, mut run: Streamed) -> Vec<Value> {
    run.signal(nix::sys::signal::Signal::SIGKILL);
    run.run.wait();
    std::fs::write(sync(fx, "released"), "").unwrap();
    let out = fx.run(&[
        "--json", "--resume", "--yes", "--jobs", "2", "--commit", "off",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    events(&out)
}

/// The commits the agent of `task`'s first attempt made in the user's tree
/// are kept under its `lane-commits` ref.
fn assert_commits_kept(fx: &Fixture, task: &str) {
    let kept = git(
        &fx.root,
        &["for-each-ref", "--format=%(refname)", "refs/spectr/"],
    );
    assert!(
        kept.lines()
            .any(|r| r.contains(&format!("/{task}/1/")) && r.ends_with("/lane-commits")),
        "no commits kept for {task}: {kept}"
    );
}

/// kill -9 once an agent in the user's tree committed and marked its task
/// completed, before spectr put HEAD back: the resume counts the task
/// completed and still puts the user's branch back (the commits kept).
#[test]
fn a_completed_attempt_in_place_killed_before_its_end_leaves_the_branch_alone_on_resume() {
    let (sections, per) = (2, 3);
    let fx = appending_fixture(sections, per, false, &|fx, id| {
        id.ends_with(".3").then(|| {
            json!([
                format!("write:out/{id}.txt=work of {id}"),
                format!("append:NOTES.md=- note from task {id}"),
                format!("git_commit:task {id}"),
                "mark:completed",
                format!("touch:{}", sync(fx, "committed")),
                format!("wait_for:{}:120", sync(fx, "released")),
                "complete"
            ])
        })
    });
    let head = git(&fx.root, &["rev-parse", "HEAD"]);
    let (run, start) = third_task_in_place(&fx, "committed");
    let task = start["task"].as_str().unwrap().to_string();
    assert_ne!(
        git(&fx.root, &["rev-parse", "HEAD"]),
        head,
        "the agent committed"
    );
    let ev = kill_and_resume(&fx, run);
    assert!(
        !started(&ev).contains(&format!("{task}#2")),
        "redone: {ev:#?}"
    );
    assert_eq!(
        git(&fx.root, &["rev-parse", "HEAD"]),
        head,
        "the branch moved"
    );
    assert_eq!(git(&fx.root, &["diff", "--cached", "--name-only"]), "");
    assert_commits_kept(&fx, &task);
    assert_every_line_once(&fx, sections, per);
    assert!(all_completed(&fx), "{}", fx.tasks_text());
}

/// kill -9 in the middle of an attempt that runs in the user's tree while
/// the lanes take turns, its line already appended: the resumed run puts
/// the tree back to that attempt's checkpoint and runs the task again, and
/// every line ends up there once.
#[test]
fn an_attempt_in_place_killed_mid_way_is_reverted_and_run_again_on_resume() {
    let (sections, per) = (2, 3);
    let fx = appending_fixture(sections, per, false, &|fx, id| {
        id.ends_with(".3").then(|| {
            json!([
                format!("append:NOTES.md=- half done by {id}"),
                format!("touch:{}", sync(fx, "in-place")),
                format!("wait_for:{}:120", sync(fx, "released")),
            ])
        })
    });
    let (run, start) = third_task_in_place(&fx, "in-place");
    let notes = std::fs::read_to_string(fx.root.join("NOTES.md")).unwrap();
    assert!(
        notes.contains("half done"),
        "it works in the user's tree: {notes}"
    );
    let ev = kill_and_resume(&fx, run);
    let task = start["task"].as_str().unwrap();
    // Put back from its checkpoint in the user's tree, before anything ran.
    let first = &of_kind(&ev, "reverted")[0];
    assert_eq!(
        (first["task"].as_str(), &first["attempt"]),
        (Some(task), &json!(1))
    );
    let notes = std::fs::read_to_string(fx.root.join("NOTES.md")).unwrap();
    assert!(!notes.contains("half done"), "{notes}");
    assert_every_line_once(&fx, sections, per);
    assert!(all_completed(&fx), "{}", fx.tasks_text());
    assert_no_lanes_left(&fx);
    let agents = pids(&fx.state, "agents.pid");
    fx.wait_for("every agent gone", || agents.iter().all(|p| !alive(*p)));
}

/// kill -9 in the middle of a resolve attempt: the resumed run resolves
/// again (the conflicted work applied with markers once more), and the
/// tree ends with both changes.
#[test]
fn a_resolve_attempt_killed_mid_way_is_resolved_again_on_resume() {
    let fx = line_two_conflict_with(|fx| {
        let never = format!("wait_for:{}:120", sync(fx, "never"));
        vec![
            json!([format!("touch:{}", sync(fx, "resolving")), never]),
            json!(["resolve:shared.txt", "mark:completed", "complete"]),
        ]
    });
    let mut run = Streamed::spawn(&fx, &["--jobs", "2", "--max-retries", "0"]);
    fx.wait_for("the resolve attempt running", || {
        Path::new(&sync(&fx, "resolving")).exists()
    });
    run.signal(nix::sys::signal::Signal::SIGKILL);
    run.run.wait();
    // Nothing ran beside it: it resolved in the user's tree, which holds
    // the markers when it dies.
    let shared = std::fs::read_to_string(fx.root.join("shared.txt")).unwrap();
    assert!(shared.contains("<<<<<<<"), "{shared}");

    let out = fx.run(&["--json", "--resume", "--yes", "--jobs", "2"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let ev = events(&out);
    assert_eq!(started(&ev), ["2.1#3"]);
    let resolving = of_kind(&ev, "resolving");
    assert_eq!(resolving.len(), 1, "{ev:#?}");
    assert_eq!(resolving[0]["files"], json!(["shared.txt"]));
    assert_eq!(
        std::fs::read_to_string(fx.root.join("shared.txt")).unwrap(),
        BOTH_LINES
    );
    assert!(all_completed(&fx), "{}", fx.tasks_text());
    assert_no_lanes_left(&fx);
}

/// A task whose merge meets the other lane in a `merge=union` file and in
/// a plain one: the plain file conflicts, and the union file must still be
/// unioned (never left with git's markers) in the resolve attempt's tree,
/// where nothing tells the agent to look at it.
#[test]
fn a_union_file_beside_a_conflicting_one_is_unioned_in_the_resolve_attempt() {
    let fx = two_lanes();
    commit_shared(&fx);
    std::fs::write(fx.root.join("NOTES.md"), "# Notes\n").unwrap();
    std::fs::write(fx.root.join(".gitattributes"), "NOTES.md merge=union\n").unwrap();
    git(&fx.root, &["add", "NOTES.md", ".gitattributes"]);
    git(&fx.root, &["commit", "-qm", "notes"]);
    let marker = fx.root.join("marker.txt").display().to_string();
    fx.script(json!({
        "1.1": [
            format!("touch:{}", sync(&fx, "one")),
            "edit_line:shared.txt:2=ONE",
            "append:NOTES.md=- note from task 1.1",
            "write:marker.txt=1.1 merged",
            "mark:completed",
            "complete"
        ],
        "2.1": [
            [
                format!("wait_for:{}:30", sync(&fx, "one")),
                format!("wait_for:{marker}:30"),
                "edit_line:shared.txt:2=TWO",
                "append:NOTES.md=- note from task 2.1",
                "mark:completed",
                "complete"
            ],
            ["resolve:shared.txt", "mark:completed", "complete"]
        ]
    }));
    let out = fx.run(&["--json", "--jobs", "2", "--max-retries", "0"]);
    let ev = events(&out);
    assert_eq!(out.status.code(), Some(0), "{ev:#?}");
    let failed = of_kind(&ev, "task_failed");
    assert_eq!(failed.len(), 1, "{failed:#?}");
    assert_eq!(failed[0]["outcome"]["files"], json!(["shared.txt"]));
    let resolving = of_kind(&ev, "resolving");
    assert_eq!(resolving.len(), 1, "{ev:#?}");
    assert_eq!(resolving[0]["files"], json!(["shared.txt"]));
    let tree = files(&fx.root);
    for (path, text) in &tree {
        assert!(
            !text
                .lines()
                .any(|l| l.starts_with("<<<<<<<") || l.starts_with(">>>>>>>") || l == "======="),
            "{path} holds conflict markers:\n{text}"
        );
    }
    assert_eq!(
        tree["NOTES.md"],
        "# Notes\n- note from task 1.1\n- note from task 2.1\n"
    );
    assert_eq!(tree["shared.txt"], BOTH_LINES);
    assert!(all_completed(&fx), "{}", fx.tasks_text());
    assert_no_lanes_left(&fx);
}

/// Lanes 1 and 2 race on NOTES.md `rounds` times (tasks k.1, k.3, k.5…;
/// k.2, k.4… write only their own file, so both lanes cool down between
/// rounds): each round 2.x starts before 1.x merges and appends after it,
/// so 2.x conflicts with lane 1 and resolves. 1.x waits for 2.x to start,
/// and lane 1's next task for 2.x's work to be merged (a task of lane 1
/// started before would miss 2.x's line and conflict too).
fn hot_pair(rounds: usize, extra: &[&str]) -> (Fixture, std::process::Output) {
    let per = 2 * rounds - 1;
    let ids: Vec<(String, String)> = (1..=2)
        .flat_map(|k| (1..=per).map(move |t| (format!("{k}.{t}"), format!("Lane {k}"))))
        .collect();
    let tasks: Vec<(&str, &str, &str)> = ids
        .iter()
        .map(|(id, section)| (id.as_str(), section.as_str(), "pending"))
        .collect();
    let fx = Fixture::new(&tasks_v1(&tasks));
    std::fs::write(fx.root.join("NOTES.md"), "# Notes\n").unwrap();
    git(&fx.root, &["add", "NOTES.md"]);
    git(&fx.root, &["commit", "-qm", "notes"]);
    let mut script = serde_json::Map::new();
    for (id, _) in &ids {
        let (k, t) = id.split_once('.').unwrap();
        let t: usize = t.parse().unwrap();
        let mut steps = Vec::new();
        let racing = t % 2 == 1;
        match (k, racing) {
            ("1", true) => steps.push(format!("wait_for:{}:30", sync(&fx, &format!("s{t}")))),
            ("1", false) => {
                let merged = fx.root.join(format!("out/2.{}.txt", t - 1));
                steps.push(format!("wait_for:{}:30", merged.display()));
            }
            (_, true) => {
                let merged = fx.root.join(format!("out/1.{t}.txt"));
                steps.push(format!("touch:{}", sync(&fx, &format!("s{t}"))));
                steps.push(format!("wait_for:{}:30", merged.display()));
            }
            _ => {}
        }
        steps.push(format!("write:out/{id}.txt=work of {id}"));
        if racing {
            steps.push(format!("append:NOTES.md=- note from task {id}"));
        }
        steps.extend(["mark:completed".into(), "complete".into()]);
        let resolve = ["resolve:NOTES.md", "mark:completed", "complete"];
        script.insert(id.clone(), json!([steps, resolve]));
    }
    fx.script(Value::Object(script));
    let mut args = vec!["--jobs", "2", "--max-retries", "0"];
    args.extend(extra);
    let out = fx.run(&args);
    (fx, out)
}

const HOT_NOTICE: &str = "NOTES.md: 3 conflicts between tasks 1.x and 2.x.";

#[test]
fn a_file_that_keeps_two_lanes_in_conflict_is_named_once_and_in_the_summary() {
    // Twice: below the threshold, neither said nor listed.
    let (_fx, out) = hot_pair(2, &["--json"]);
    let ev = events(&out);
    assert_eq!(out.status.code(), Some(0), "{ev:#?}");
    let summary = &of_kind(&ev, "summary")[0];
    assert_eq!(summary["totals"]["conflicts"], 2, "{ev:#?}");
    let hot: Vec<Value> = of_kind(&ev, "notice")
        .into_iter()
        .filter(|n| {
            n["message"]
                .as_str()
                .unwrap_or("")
                .contains("conflicts between tasks")
        })
        .collect();
    assert!(hot.is_empty(), "{hot:#?}");
    assert!(summary.get("hot_files").is_none(), "{summary}");

    // Three times: said once, and the summary lists that pair.
    let (fx, out) = hot_pair(3, &["--json"]);
    let ev = events(&out);
    assert_eq!(out.status.code(), Some(0), "{ev:#?}");
    let summary = &of_kind(&ev, "summary")[0];
    assert_eq!(summary["totals"]["conflicts"], 3, "{ev:#?}");
    let hot: Vec<Value> = of_kind(&ev, "notice")
        .into_iter()
        .filter(|n| {
            n["message"]
                .as_str()
                .unwrap_or("")
                .contains("conflicts between tasks")
        })
        .collect();
    assert_eq!(hot.len(), 1, "{hot:#?}");
    assert!(
        hot[0]["message"].as_str().unwrap().starts_with(HOT_NOTICE),
        "{hot:#?}"
    );
    assert_eq!(
        summary["hot_files"],
        json!([{"file": "NOTES.md", "lanes": ["1", "2"], "conflicts": 3}])
    );
    assert!(all_completed(&fx), "{}", fx.tasks_text());

    // The human summary names it too.
    let (_fx, out) = hot_pair(3, &[]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert_eq!(text.matches(HOT_NOTICE).count(), 1, "{text}");
    let summary_line = text
        .lines()
        .find(|l| l.starts_with("NOTES.md: 3 conflicts between tasks 1.x and 2.x ("))
        .unwrap_or_else(|| panic!("no summary line for NOTES.md:\n{text}"));
    assert!(summary_line.contains("merge=union"), "{summary_line}");
    assert!(
        text.contains(" · 3 merge conflicts (3 resolve attempts) · "),
        "{text}"
    );
}

#[test]
fn the_human_summary_counts_merge_conflicts_and_resolve_attempts_apart_from_failures() {
    let fx = line_two_conflict_with(|_| {
        vec![json!(["resolve:shared.txt", "mark:completed", "complete"])]
    });
    let out = fx.run(&["--jobs", "2", "--max-retries", "0"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{text}");
    let summary = text
        .lines()
        .find(|l| l.starts_with("Summary: "))
        .unwrap_or_else(|| panic!("no summary:\n{text}"));
    assert!(
        summary.starts_with(
            "Summary: 2 completed · 0 failed · 0 skipped · 0 remaining · 3 attempts · 1 merge conflict (1 resolve attempt) · "
        ),
        "{summary}"
    );
    assert!(
        text.lines().any(
            |l| l == "Tasks 2.x: ran 2.1 in your tree; merge conflicts in 2.1 (resolved by another attempt)"
        ),
        "{text}"
    );
    assert!(
        text.contains("⇄ [2.1] its previous work is applied again, with conflict markers in shared.txt for the agent to resolve"),
        "{text}"
    );
}

/// Past `--max-conflicts` a conflicted task goes to `--on-exhaust`, as one
/// out of retries does, and the skip says which limit it was.
#[test]
fn past_max_conflicts_a_task_goes_to_on_exhaust_skip() {
    let fx = line_two_conflict_with(|_| {
        vec![json!(["resolve:shared.txt", "mark:completed", "complete"])]
    });
    let out = fx.run(&[
        "--json",
        "--jobs",
        "2",
        "--max-retries",
        "3",
        "--max-conflicts",
        "0",
        "--on-exhaust",
        "skip",
    ]);
    let ev = events(&out);
    assert_eq!(out.status.code(), Some(1), "tasks were skipped: {ev:#?}");
    let mut got = started(&ev);
    got.sort();
    assert_eq!(got, ["1.1#1", "2.1#1"], "no resolve attempt");
    assert!(of_kind(&ev, "resolving").is_empty());
    let skipped = of_kind(&ev, "task_skipped");
    assert_eq!(skipped.len(), 1, "{ev:#?}");
    assert_eq!(skipped[0]["task"], "2.1");
    let reason = skipped[0]["reason"].as_str().unwrap();
    assert_eq!(
        reason,
        "resolve attempts exhausted (--max-conflicts 0): merge conflict in shared.txt"
    );
    let summary = &of_kind(&ev, "summary")[0];
    assert_eq!(summary["end"], "incomplete");
    let totals = &summary["totals"];
    assert_eq!(
        (
            &totals["skipped"],
            &totals["conflicts"],
            &totals["resolve_attempts"],
            &totals["failed"]
        ),
        (&json!(1), &json!(1), &json!(0), &json!(0)),
        "{summary}"
    );
    assert_eq!(
        std::fs::read_to_string(fx.root.join("shared.txt")).unwrap(),
        "l1\nONE\nl3\nl4\nl5\nl6\nl7\nl8\nl9\n",
        "only 1.1's work merged"
    );
    assert_eq!(fx.status("2.1"), "pending");
}

/// A `merge=binary` file both lanes changed: the resolve attempt finds the
/// project's version (no markers), and its prompt does not claim markers
/// there but says where its previous version is.
#[test]
fn a_binary_file_in_a_resolve_attempt_is_not_said_to_hold_markers() {
    let fx = two_lanes();
    std::fs::write(fx.root.join("data.bin"), "d1\nd2\nd3\nd4\nd5\nd6\n").unwrap();
    std::fs::write(fx.root.join(".gitattributes"), "data.bin merge=binary\n").unwrap();
    git(&fx.root, &["add", "data.bin", ".gitattributes"]);
    git(&fx.root, &["commit", "-qm", "data"]);
    let marker = fx.root.join("marker.txt").display().to_string();
    fx.script(json!({
        "1.1": [
            format!("touch:{}", sync(&fx, "one")),
            "edit_line:data.bin:1=ONE",
            "write:marker.txt=1.1 merged",
            "mark:completed",
            "complete"
        ],
        "2.1": [
            [
                format!("wait_for:{}:30", sync(&fx, "one")),
                format!("wait_for:{marker}:30"),
                "edit_line:data.bin:6=TWO",
                "mark:completed",
                "complete"
            ],
            ["edit_line:data.bin:6=TWO", "mark:completed", "complete"]
        ]
    }));
    let out = fx.run(&["--json", "--jobs", "2", "--max-retries", "0"]);
    let ev = events(&out);
    assert_eq!(out.status.code(), Some(0), "{ev:#?}");
    let failed = of_kind(&ev, "task_failed");
    assert_eq!(failed.len(), 1, "{failed:#?}");
    assert_eq!(failed[0]["outcome"]["files"], json!(["data.bin"]));
    let resolving = of_kind(&ev, "resolving");
    assert_eq!(resolving.len(), 1, "{ev:#?}");
    assert_eq!(resolving[0]["files"], json!([]), "no file holds markers");
    assert_eq!(resolving[0]["unmarked"], json!(["data.bin"]));
    let prompt = fx.prompt("2.1", 2).expect("a resolve attempt");
    assert!(
        !prompt.contains("hold conflict markers") && !prompt.contains("applied cleanly"),
        "{prompt}"
    );
    // It names the file and where both versions are.
    let show = |side: &str| {
        let at = prompt
            .find(&format!("{side}: `git show "))
            .unwrap_or_else(|| panic!("no {side} version in:\n{prompt}"));
        let rest = &prompt[at + side.len() + ": `git show ".len()..];
        rest[..rest.find('`').unwrap()].to_string()
    };
    assert_eq!(
        git(&fx.root, &["show", &show("your previous version")]),
        "d1\nd2\nd3\nd4\nd5\nTWO\n"
    );
    assert_eq!(
        git(&fx.root, &["show", &show("the project's")]),
        "ONE\nd2\nd3\nd4\nd5\nd6\n"
    );
    assert_eq!(
        std::fs::read_to_string(fx.root.join("data.bin")).unwrap(),
        "ONE\nd2\nd3\nd4\nd5\nTWO\n"
    );
    assert!(all_completed(&fx), "{}", fx.tasks_text());
}

/// A lane attempt killed by kill -9 and completed by the resume elsewhere
/// (here in the user's tree) leaves none of its checkpoint refs once the
/// run completes.
#[test]
fn a_killed_lane_attempt_completed_by_the_resume_leaves_no_checkpoint_ref() {
    let fx = Fixture::new(&tasks_v1(&[
        ("1.1", "Core", "pending"),
        ("2.1", "Docs", "pending"),
    ]));
    fx.script(json!({
        "1.1": [["write:core.txt=core", "mark:completed", "complete"]],
        "2.1": [["write:docs.txt=draft", "hang"], ["write:docs.txt=docs", "mark:completed", "complete"]],
    }));
    let mut cmd = fx.ralph();
    cmd.args(["--json", "--yes", "--jobs", "2"]);
    let mut run = JsonRun::spawn(cmd);
    run.until("2.1 checkpointed in a lane", |seen| {
        seen.iter()
            .any(|e| e["event"] == "checkpoint" && e["task"] == "2.1")
    });
    fx.wait_for("2.1's agent", || fx.prompt("2.1", 1).is_some());
    let lane_refs = git(
        &fx.root,
        &["for-each-ref", "--format=%(refname)", "refs/spectr/"],
    );
    assert!(
        lane_refs
            .lines()
            .any(|r| r.contains("@lane-") && r.ends_with("/2.1/1/checkpoint")),
        "{lane_refs}"
    );
    run.kill_9();
    let out = fx.run(&["--json", "--resume", "--yes", "--jobs", "1"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_text(&out));
    let refs = git(
        &fx.root,
        &["for-each-ref", "--format=%(refname)", "refs/spectr/"],
    );
    let left: Vec<&str> = refs
        .lines()
        .filter(|r| {
            r.ends_with("/checkpoint")
                || r.ends_with("/checkpoint-index")
                || r.contains("/checkpoint-stash/")
        })
        .collect();
    assert!(left.is_empty(), "checkpoint refs left: {left:?}\n{refs}");
}

/// With lanes, a task's completion is written to its tasks file before the
/// run says it completed: a kill right after `task_completed` never leaves
/// it `in_progress` with its work merged.
#[test]
fn a_lane_task_is_recorded_completed_before_it_is_said() {
    let fx = Fixture::new(&tasks_v1(&[
        ("1.1", "Core", "pending"),
        ("1.2", "Core", "pending"),
        ("2.1", "Docs", "pending"),
        ("2.2", "Docs", "pending"),
    ]));
    fx.script(json!({"default": ["write:out/{task}.txt=work", "mark:in_progress", "complete"]}));
    let mut cmd = fx.ralph();
    cmd.args(["--json", "--yes", "--jobs", "2"]);
    let mut run = JsonRun::spawn(cmd);
    let mut checked = 0;
    while checked < 4 {
        let seen = run.seen.len();
        run.until("the next event", |events| events.len() > seen);
        let event = &run.seen[seen];
        if event["event"] == "task_completed" {
            let id = event["task"].as_str().unwrap().to_string();
            assert_eq!(
                fx.status(&id),
                "completed",
                "{id} said completed before it was recorded"
            );
            checked += 1;
        }
    }
    assert_eq!(run.run.wait().code(), Some(0));
}
