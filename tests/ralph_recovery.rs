//! What a revert, a lane and a resume put right by themselves (issue 18,
//! section 7): the interrupted agent's own commits, other branches and
//! tags, the stash all work trees share, and a merge-back cut short.

mod common;

use common::*;
use serde_json::{Value, json};
use std::process::Command;

fn is_ancestor(fx: &Fixture, commit: &str, of: &str) -> bool {
    Command::new("git")
        .args(["merge-base", "--is-ancestor", commit, of])
        .current_dir(&fx.root)
        .status()
        .is_ok_and(|s| s.success())
}

/// The last attempt of `task` in the session file (null while unreadable).
fn last_attempt(fx: &Fixture, task: &str) -> Value {
    fx.session_now()
        .and_then(|s| s["tasks"][task]["attempts"].as_array()?.last().cloned())
        .unwrap_or_default()
}

/// Task 1.1's first attempt commits and hangs; spectr is killed once the
/// session records the commit (HEAD as the attempt saw it move). Returns
/// the agent's commit.
fn killed_after_the_agent_committed(fx: &Fixture) -> String {
    fx.script(json!({
        "1.1": [
            ["write:wip.txt=agent work", "git_commit:agent work", "hang"],
            ["mark:completed", "complete"]
        ],
        "default": ["mark:completed", "complete"]
    }));
    let initial = head(fx);
    let mut run = fx.spawn_quiet();
    fx.wait_for("the session to record the agent's commit", || {
        let now = head(fx);
        now != initial
            && last_attempt(fx, "1.1")["head_moves"]
                .as_array()
                .is_some_and(|m| m.iter().any(|s| s["head"] == now.as_str()))
    });
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(run.id() as i32),
        nix::sys::signal::Signal::SIGKILL,
    );
    run.wait();
    head(fx)
}

#[test]
fn an_agent_commit_seen_during_the_attempt_is_reverted_by_an_unattended_resume() {
    // The subject is the revert: no task commit moves the branch after it.
    let fx = Fixture::new(&two_tasks());
    commits_off(&fx);
    let initial = head(&fx);
    let agent = killed_after_the_agent_committed(&fx);
    assert_ne!(agent, initial);

    // No terminal, no --rewind: the run resumes by itself.
    let out = fx.run(&["--json"]);
    assert_eq!(out.status.code(), Some(0));
    let ev = events(&out);
    let reverted = of_kind(&ev, "reverted");
    assert_eq!(reverted.len(), 1, "{ev:#?}");
    let failed_ref = reverted[0]["failed_ref"].as_str().unwrap();
    assert!(
        is_ancestor(&fx, &agent, failed_ref),
        "the agent's commit stays reachable from {failed_ref}"
    );
    assert_eq!(head(&fx), initial, "the branch is back at the checkpoint");
    assert_eq!(
        git(&fx.root, &["symbolic-ref", "HEAD"]).trim(),
        "refs/heads/main"
    );
    assert!(!fx.root.join("wip.txt").exists());
    assert_eq!(started(&ev), ["1.1#2", "1.2#1"]);
}

#[test]
fn a_commit_made_after_the_crash_still_stops_an_unattended_resume() {
    let fx = Fixture::new(&two_tasks());
    killed_after_the_agent_committed(&fx);
    std::fs::write(fx.root.join("mine.txt"), "my work\n").unwrap();
    git(&fx.root, &["add", "mine.txt"]);
    git(&fx.root, &["commit", "-qm", "my own work"]);
    let mine = head(&fx);

    let out = fx.run(&["--json"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("my own work") && !err.contains("agent work"),
        "asks only about the commit it did not see: {err}"
    );
    assert_eq!(head(&fx), mine, "HEAD was not touched");
    assert!(started(&events(&out)).is_empty());
}

/// `refs/heads/*` and `refs/tags/*` with what they point at.
fn branches_and_tags(fx: &Fixture) -> String {
    git(
        &fx.root,
        &[
            "for-each-ref",
            "--format=%(objectname) %(refname)",
            "refs/heads/",
            "refs/tags/",
        ],
    )
}

#[test]
fn a_failed_attempt_that_deleted_or_moved_branches_and_tags_gets_them_back() {
    let fx = Fixture::new(&two_tasks());
    commits_off(&fx);
    git(&fx.root, &["branch", "other"]);
    git(&fx.root, &["branch", "side"]);
    git(&fx.root, &["tag", "v1"]);
    git(&fx.root, &["tag", "-a", "v2", "-m", "release two"]);
    // A branch another work tree has checked out: its work is there.
    let wt = fx.root.parent().unwrap().join("elsewhere");
    git(
        &fx.root,
        &[
            "worktree",
            "add",
            "-q",
            "-b",
            "elsewhere",
            wt.to_str().unwrap(),
        ],
    );
    let before = branches_and_tags(&fx);
    fx.script(json!({
        "1.1": [
            [
                "git:branch -D other",
                "git:tag -d v1",
                "git:tag -d v2",
                "write:a.txt=agent",
                "git_commit:agent work",
                "git:branch -f side HEAD",
                "git:branch made-by-agent",
                "git:update-ref refs/heads/elsewhere HEAD",
                "fail:gave up"
            ],
            ["mark:completed", "complete"]
        ],
        "default": ["mark:completed", "complete"]
    }));
    let out = fx.run(&["--json"]);
    assert_eq!(out.status.code(), Some(0));
    let without = |refs: String| -> String {
        refs.lines()
            .filter(|l| !l.ends_with("refs/heads/elsewhere"))
            .map(|l| format!("{l}\n"))
            .collect()
    };
    assert_eq!(
        without(branches_and_tags(&fx)),
        without(before.clone()),
        "every branch and tag as it was"
    );
    assert_ne!(
        git(&fx.root, &["rev-parse", "refs/heads/elsewhere"]),
        git(&fx.root, &["rev-parse", "main"]),
        "a branch checked out in another work tree is left as it is"
    );

    // What the attempt made or moved is kept under its failed ref.
    let kept = git(
        &fx.root,
        &[
            "for-each-ref",
            "--format=%(refname)",
            "refs/spectr/ralph/@main/add-widget/1.1/1/",
        ],
    );
    for name in ["failed-refs/heads/made-by-agent", "failed-refs/heads/side"] {
        assert!(kept.contains(name), "{name} kept: {kept}");
    }
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("made-by-agent") && text.contains("other"),
        "the output names what was put back and kept: {text}"
    );
}

/// The user's stash: refs/stash and its reflog, byte for byte.
fn stash_state(fx: &Fixture) -> (String, Vec<u8>) {
    (
        git(&fx.root, &["rev-parse", "refs/stash"]),
        std::fs::read(fx.root.join(".git/logs/refs/stash")).unwrap_or_default(),
    )
}

#[test]
fn an_agent_stash_in_a_lane_never_reaches_the_users_stash_list() {
    let fx = Fixture::new(&tasks_v1(&[
        ("1.1", "Core", "pending"),
        ("2.1", "Docs", "pending"),
    ]));
    std::fs::write(fx.root.join("keep.txt"), "stashed edit\n").unwrap();
    git(&fx.root, &["stash", "-q"]);
    let before = stash_state(&fx);
    fx.script(json!({
        "1.1": [[
            "write:scratch-1.txt=one",
            "git:stash push -u -m agent-one",
            "write:out/1.txt=1",
            "mark:completed",
            "complete"
        ]],
        "2.1": [
            ["write:scratch-2.txt=two", "git:stash push -u", "fail:not yet"],
            ["write:out/2.txt=2", "mark:completed", "complete"]
        ]
    }));
    let out = fx.run(&["--json", "--jobs", "2"]);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(stash_state(&fx), before, "the user's stash list as it was");

    let kept: Vec<String> = git(&fx.root, &["for-each-ref", "--format=%(refname)"])
        .lines()
        .filter(|r| r.contains("/agent-stash/"))
        .map(str::to_string)
        .collect();
    assert_eq!(kept.len(), 2, "both agents' entries are kept: {kept:?}");
    let subjects: Vec<String> = kept
        .iter()
        .map(|r| git(&fx.root, &["log", "-1", "--format=%s", r]))
        .collect();
    assert!(
        subjects.iter().any(|s| s.contains("agent-one")),
        "{subjects:?}"
    );
    let text = String::from_utf8_lossy(&out.stdout);
    for r in &kept {
        assert!(text.contains(r.as_str()), "the output names {r}: {text}");
    }
}

fn prompts_of(fx: &Fixture, task: &str) -> usize {
    (1..).take_while(|n| fx.prompt(task, *n).is_some()).count()
}

/// A `--jobs 2` run of 1.1 and 2.1 held (a test-only pause) right after its
/// first merge-back was recorded, before any file was written, then killed.
/// Returns the task whose merge was cut short.
fn killed_at_merge_started(fx: &Fixture) -> String {
    fx.script(json!({
        "1.1": ["write:out/1.txt=one", "write:out/1-b.txt=one b", "mark:completed", "complete"],
        "2.1": ["write:out/2.txt=two", "write:out/2-b.txt=two b", "mark:completed", "complete"]
    }));
    let mut cmd = fx.ralph();
    cmd.args(["--json", "--jobs", "2"])
        .env("SPECTR_TEST_PAUSE_AT", "merge_started");
    let mut run = JsonRun::spawn(cmd);
    run.until("a merge to start", |ev| {
        ev.iter().any(|e| e["event"] == "merge_started")
    });
    // Held after the merge is recorded (the session is saved before an
    // event is shown).
    run.kill_9();
    let merging = run
        .seen
        .iter()
        .find(|e| e["event"] == "merge_started")
        .and_then(|e| e["task"].as_str())
        .unwrap()
        .to_string();
    assert!(
        !run.seen.iter().any(|e| e["event"] == "merged"),
        "killed before the merge was written"
    );
    merging
}

#[test]
fn a_merge_cut_short_by_kill_9_is_finished_on_resume_without_another_agent_run() {
    let fx = Fixture::new(&tasks_v1(&[
        ("1.1", "Core", "pending"),
        ("2.1", "Docs", "pending"),
    ]));
    let merging = killed_at_merge_started(&fx);
    // As a crash leaves a merge half written: one file written, the next
    // one's temporary file left beside it.
    let n = &merging[..1];
    let text = if n == "1" { "one" } else { "two" };
    std::fs::create_dir_all(fx.root.join("out")).unwrap();
    std::fs::write(fx.root.join(format!("out/{n}.txt")), text).unwrap();
    let tmp = fx.root.join(format!(
        "out/.{n}-b.txt.spectr-tmp-0123456789abcdef0123456789abcdef"
    ));
    std::fs::write(&tmp, "half").unwrap();

    let out = fx.run(&["--json", "--jobs", "2"]);
    assert_eq!(out.status.code(), Some(0));
    let ev = events(&out);
    assert_eq!(prompts_of(&fx, &merging), 1, "{merging}'s agent ran once");
    assert!(!tmp.exists(), "the cut-short write's leftover is gone");
    assert!(
        !started(&ev)
            .iter()
            .any(|s| s.starts_with(&format!("{merging}#"))),
        "{:?}",
        started(&ev)
    );
    let merged: Vec<Value> = of_kind(&ev, "merged")
        .into_iter()
        .filter(|e| e["task"] == merging.as_str())
        .collect();
    assert_eq!(merged.len(), 1, "the resume merged it: {ev:#?}");
    assert_eq!(
        merged[0]["files"],
        json!([format!("out/{n}-b.txt"), format!("out/{n}.txt")])
    );
    let files = work_tree_files(&fx.root, &|rel| rel.ends_with(".ralph"));
    let out_files: Vec<(&str, &str)> = files
        .iter()
        .filter(|(p, _)| p.starts_with("out/"))
        .map(|(p, c)| (p.as_str(), c.as_str()))
        .collect();
    assert_eq!(
        out_files,
        [
            ("out/1-b.txt", "one b"),
            ("out/1.txt", "one"),
            ("out/2-b.txt", "two b"),
            ("out/2.txt", "two"),
        ]
    );
    assert_eq!(fx.status("1.1"), "completed");
    assert_eq!(fx.status("2.1"), "completed");
}

#[test]
fn a_merge_cut_short_that_now_conflicts_is_retried_as_a_conflict() {
    let fx = Fixture::new(&tasks_v1(&[
        ("1.1", "Core", "pending"),
        ("2.1", "Docs", "pending"),
    ]));
    let merging = killed_at_merge_started(&fx);
    let file = if merging == "1.1" {
        "out/1.txt"
    } else {
        "out/2.txt"
    };
    // The person writes the same file before resuming.
    std::fs::create_dir_all(fx.root.join("out")).unwrap();
    std::fs::write(fx.root.join(file), "mine").unwrap();

    let out = fx.run(&["--json", "--jobs", "2"]);
    let ev = events(&out);
    let failed: Vec<Value> = of_kind(&ev, "task_failed")
        .into_iter()
        .filter(|e| e["task"] == merging.as_str())
        .collect();
    assert_eq!(failed.len(), 1, "{ev:#?}");
    assert_eq!(failed[0]["outcome"]["kind"], "conflict", "{:#?}", failed[0]);
    let retry = fx.prompt(&merging, 2).expect("retried");
    assert!(retry.contains("could not be merged"), "{retry}");
}

#[test]
fn taking_an_agents_stash_entries_keeps_the_persons_and_brings_back_what_it_dropped() {
    let fx = Fixture::new(&two_tasks());
    std::fs::write(fx.root.join("keep.txt"), "the person's first\n").unwrap();
    git(&fx.root, &["stash", "push", "-q", "-m", "first"]);
    let cp =
        spectr::checkpoint::Checkpointer::discover(&fx.root, std::time::Duration::from_secs(30))
            .unwrap()
            .unwrap();
    let checkpoint = cp.create(&cp.ref_name(CHANGE, "2.1", 1)).unwrap();

    // An agent in a detached work tree pushes an entry and drops the person's.
    let lane = fx.root.parent().unwrap().join("lane");
    git(
        &fx.root,
        &["worktree", "add", "-q", "--detach", lane.to_str().unwrap()],
    );
    std::fs::write(lane.join("scratch.txt"), "agent\n").unwrap();
    git(&lane, &["stash", "push", "-q", "-u", "-m", "agent's"]);
    git(&lane, &["stash", "drop", "-q", "stash@{1}"]);
    // Meanwhile the person stashes in their tree, on their branch.
    std::fs::write(fx.root.join("keep.txt"), "the person's second\n").unwrap();
    git(&fx.root, &["stash", "push", "-q", "-m", "second"]);

    let kept = cp
        .claim_agent_stash(&checkpoint, Some("refs/heads/main"))
        .unwrap();
    assert_eq!(kept.len(), 1, "{kept:?}");
    assert!(
        kept[0].refname.ends_with("/2.1/1/agent-stash/0"),
        "{kept:?}"
    );
    assert_eq!(kept[0].message, "On (no branch): agent's");
    assert_eq!(
        git(&fx.root, &["stash", "list", "--format=%gs"]),
        "On main: second\nOn main: first\n",
        "the person's entries, the dropped one back, the agent's gone"
    );
    assert_eq!(
        git(
            &fx.root,
            &["show", &format!("{}^3:scratch.txt", kept[0].refname)]
        ),
        "agent\n"
    );
    // Nothing more to take the second time.
    assert!(
        cp.claim_agent_stash(&checkpoint, Some("refs/heads/main"))
            .unwrap()
            .is_empty()
    );
}

/// What a spectr killed mid-write leaves (a tasks file's temporary in
/// `.ralph/`, a temporary index folder in the git folder, killed before
/// anything was written into it) is gone once a resume runs; another
/// live process's temporaries are left alone.
#[test]
fn a_killed_runs_temporaries_are_removed_by_the_next_run() {
    let fx = Fixture::new(&tasks_v1(&[("1.1", "Core", "pending")]));
    fx.script(json!({"default": ["mark:completed", "complete"]}));
    let (pid, start) = dead_owner();
    let state = fx.change_dir.join(".ralph");
    std::fs::create_dir_all(&state).unwrap();
    let dead_temp = state.join(format!(".spectr-tmp-{pid}-{start}-Xy12Ab"));
    std::fs::write(&dead_temp, "half a tasks file").unwrap();
    let dead_index = fx
        .root
        .join(format!(".git/spectr-ralph-{pid}-{start}-Qw34Er"));
    std::fs::create_dir(&dead_index).unwrap();
    // Ours (this test process is alive): kept.
    let live = state.join(format!(
        ".spectr-tmp-{}-{}-Zz99Zz",
        std::process::id(),
        own_start()
    ));
    std::fs::write(&live, "live").unwrap();
    let out = fx.run(&["--yes"]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert!(!dead_temp.exists(), "the killed write's temporary is left");
    assert!(
        !dead_index.exists(),
        "the killed run's index folder is left"
    );
    assert!(live.exists(), "a live process's temporary was removed");
}

/// A process that has ended: its pid and start time name a dead owner.
fn dead_owner() -> (u32, u64) {
    let mut gone = Command::new("true").spawn().unwrap();
    let pid = gone.id();
    gone.wait().unwrap();
    let start: u64 = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            s.rsplit(')')
                .next()
                .and_then(|r| r.split_whitespace().nth(19)?.parse().ok())
        })
        .unwrap_or(1);
    (pid, start)
}

fn own_start() -> u64 {
    std::fs::read_to_string("/proc/self/stat")
        .ok()
        .and_then(|s| {
            s.rsplit(')')
                .next()
                .and_then(|r| r.split_whitespace().nth(19)?.parse().ok())
        })
        .unwrap_or(0)
}

/// A run killed after its agent started but before the session recorded
/// it: the resume still stops what that agent left running, found through
/// the members the supervisor saved at its start (each verified by its
/// start time).
#[test]
fn an_agent_the_session_never_recorded_is_stopped_by_the_resume() {
    let fx = Fixture::new(&tasks_v1(&[("1.1", "Core", "pending")]));
    fx.script(json!({"1.1": [["hang"], ["mark:completed", "complete"]]}));
    let mut run = fx.spawn_quiet();
    fx.wait_for("the agent recorded", || {
        fx.session_now().is_some_and(|s| {
            s["tasks"]["1.1"]["attempts"][0]["agent_pid"]
                .as_u64()
                .is_some_and(|p| p > 0)
        })
    });
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(run.id() as i32),
        nix::sys::signal::Signal::SIGKILL,
    );
    run.wait();
    // As if the kill had come before the record: no pid in the session.
    let mut session = fx.session();
    let attempt = &mut session["tasks"]["1.1"]["attempts"][0];
    let transcript = attempt["transcript"].as_str().unwrap().to_string();
    attempt["agent_pid"] = Value::Null;
    attempt["agent_started"] = Value::Null;
    std::fs::write(fx.session_path(), session.to_string()).unwrap();
    // A process of that attempt's tree still running, named in its members
    // file (it outlived the agent, as an escaped child does).
    // Detached (its parent gone at once), as an escaped child is.
    let spawned = std::process::Command::new("sh")
        .args(["-c", "setsid sleep 300 >/dev/null 2>&1 & echo $!"])
        .output()
        .unwrap();
    let pid: u32 = String::from_utf8_lossy(&spawned.stdout)
        .trim()
        .parse()
        .unwrap();
    let start: u64 = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .unwrap()
        .rsplit(')')
        .next()
        .and_then(|r| r.split_whitespace().nth(19)?.parse().ok())
        .unwrap();
    std::fs::write(format!("{transcript}.pids"), format!("{pid} {start}\n")).unwrap();
    let mut cmd = fx.ralph();
    cmd.args(["--json", "--resume"]);
    let out = output_within(&mut cmd, std::time::Duration::from_secs(60));
    let alive = alive(pid as i32);
    if alive {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid as i32),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
    assert_eq!(out.status.code(), Some(0), "{}", stderr_text(&out));
    assert!(!alive, "the leftover was not stopped");
    assert!(
        stdout_text(&out).contains("left running by the interrupted attempt 1 of task 1.1"),
        "{}",
        stdout_text(&out)
    );
}

/// An attempt the run stopped under (kill -9 here; a force quit and a crash
/// alike) is said as interrupted on resume, one of the task's tries, not as
/// the agent's abnormal end.
#[test]
fn an_attempt_the_run_stopped_under_is_said_as_interrupted() {
    let fx = Fixture::new(&tasks_v1(&[("1.1", "Core", "pending")]));
    fx.script(json!({"1.1": [["hang"], ["mark:completed", "complete"]]}));
    let mut cmd = fx.ralph();
    cmd.args(["--json", "--yes"]);
    let mut run = JsonRun::spawn(cmd);
    fx.wait_for("1.1's agent", || fx.prompt("1.1", 1).is_some());
    run.kill_9();
    let out = fx.run(&["--resume", "--yes"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_text(&out));
    let said = format!("{}{}", stdout_text(&out), stderr_text(&out));
    assert!(
        said.contains("(a force quit, a kill or a crash); it counts as interrupted"),
        "{said}"
    );
    assert!(!said.contains("ended abnormally"), "{said}");
    assert!(fx.prompt("1.1", 2).is_some());
}

/// A run killed while it held the index lock to restore the index (its
/// owner marker names a dead process) left `.git/index.lock`: the next run
/// removes it first thing, whether or not it reverts anything, so neither
/// its agents' git nor its own task commits find the index locked (the
/// torture's rare "index left staged": every later commit's index update
/// failed on that lock).
#[test]
fn an_index_lock_a_killed_run_left_is_removed_before_anything_runs() {
    let fx = Fixture::new(&tasks_v1(&[("1.1", "Core", "pending")]));
    git(&fx.root, &["config", "user.name", "Ada"]);
    git(&fx.root, &["config", "user.email", "ada@example.com"]);
    fx.script(json!({"default": [[
        "write:out/a.txt=A",
        "git_commit:agent did it",
        "mark:completed",
        "complete"
    ]]}));
    let (pid, start) = dead_owner();
    std::fs::write(
        fx.root.join(".git/spectr-ralph-index.lock.owner"),
        format!("{pid} {start}"),
    )
    .unwrap();
    std::fs::write(fx.root.join(".git/index.lock"), "half an index").unwrap();
    let out = fx.run(&["--yes", "--commit", "task"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_text(&out));
    assert!(
        !fx.root.join(".git/index.lock").exists(),
        "the lock is left"
    );
    let said = format!("{}{}", stdout_text(&out), stderr_text(&out));
    assert!(
        said.contains("index.lock, left by a spectr run killed"),
        "{said}"
    );
    // The agent's commit worked (kept under refs), and the task's commit's
    // index update too: nothing staged, nothing left.
    assert_eq!(git(&fx.root, &["status", "--porcelain=v1", "-uall"]), "");
    assert!(
        git(&fx.root, &["log", "--format=%s", "-1"]).starts_with("1.1 "),
        "{said}"
    );
}
