//! Interruptions: session file, resume, lock, signals (no terminal needed).

mod common;

use common::*;
use serde_json::json;
use std::process::Stdio;

fn kill(pid: u32, sig: nix::sys::signal::Signal) {
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid as i32), sig).unwrap();
}

#[test]
fn kill_9_mid_attempt_then_resume_loses_nothing_and_leaves_no_orphans() {
    let fx = Fixture::new(&two_tasks());
    fx.script(json!({
        "1.1": [["mark:completed", "complete"]],
        "1.2": [["write:wip.txt=half", "spawn_child", "hang"], ["mark:completed", "complete"]]
    }));
    let mut run = fx.spawn_quiet();
    fx.wait_for("the agent's work in progress", || {
        fx.root.join("wip.txt").exists() && !child_pids(&fx.state).is_empty()
    });
    fx.wait_for("the session to record the agent", || {
        fx.session_now()
            .is_some_and(|s| s["tasks"]["1.2"]["attempts"][0]["agent_pid"].is_u64())
    });
    kill(run.id(), nix::sys::signal::Signal::SIGKILL);
    run.wait();
    assert_eq!(fx.status("1.1"), "completed");

    let out = fx.run(&["--json"]);
    assert_eq!(out.status.code(), Some(0));
    let ev = events(&out);
    assert_eq!(
        started(&ev),
        ["1.2#2"],
        "1.1 is not run again; 1.2 goes on from attempt 2"
    );
    assert!(
        ev.iter()
            .any(|e| e["event"] == "run_started" && e["resumed"] == true)
    );
    let failed = of_kind(&ev, "task_failed");
    assert_eq!(failed[0]["attempt"], 1);
    assert_eq!(failed[0]["outcome"]["kind"], "abnormal");
    assert!(
        !fx.root.join("wip.txt").exists(),
        "the tree went back to the checkpoint"
    );
    let failed_ref = of_kind(&ev, "reverted")[0]["failed_ref"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(
        git(&fx.root, &["show", &format!("{failed_ref}:wip.txt")]),
        "half"
    );
    for pid in child_pids(&fx.state) {
        assert!(
            !alive(pid),
            "agent child {pid} outlived the crash and the resume"
        );
    }
    assert!(!fx.session_path().exists());
}

#[test]
fn retry_counts_survive_a_resume() {
    let fx = Fixture::new(&tasks_v1(&[("1.1", "Core", "pending")]));
    fx.script(json!({"1.1": [["fail:first"], ["fail:second"], ["mark:completed", "complete"]]}));
    let out = fx.run(&["--json", "--max-retries", "1"]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(fx.session()["tasks"]["1.1"]["counted_attempts"], 2);
    // With the budget spent, a resumed run asks again at once: no terminal, so abort.
    let out = fx.run(&["--json", "--max-retries", "1"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        started(&events(&out)).is_empty(),
        "retry budget was kept, not reset"
    );
    // --fresh starts over.
    let out = fx.run(&["--json", "--fresh", "--max-retries", "1"]);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(started(&events(&out)), ["1.1#1"]);
}

#[test]
fn a_corrupt_session_file_is_reported_plainly_and_fresh_starts_over() {
    let fx = Fixture::new(&tasks_v1(&[("1.1", "Core", "pending")]));
    fx.script(json!({"default": ["mark:completed", "complete"]}));
    std::fs::create_dir_all(fx.change_dir.join(".ralph")).unwrap();
    std::fs::write(fx.session_path(), "{ not json").unwrap();
    let out = fx.run(&["--json"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(".ralph-session.json") && err.contains("corrupt") && err.contains("--fresh"),
        "{err}"
    );
    assert!(!err.contains("panicked"));

    std::fs::write(fx.session_path(), r#"{"version": 99}"#).unwrap();
    let out = fx.run(&["--json"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("version 99"));

    let out = fx.run(&["--json", "--fresh"]);
    assert_eq!(out.status.code(), Some(0));
    assert!(!fx.session_path().exists());
}

#[test]
fn a_second_run_is_refused_and_a_stale_lock_is_taken_over() {
    let fx = Fixture::new(&tasks_v1(&[("1.1", "Core", "pending")]));
    fx.script(json!({"1.1": [["hang"]]}));
    let mut first = fx.spawn_quiet();
    fx.wait_for("the first run's agent", || fx.prompt("1.1", 1).is_some());
    let out = fx.run(&["--json"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("already running") && err.contains(&format!("pid {}", first.id())),
        "{err}"
    );
    kill(first.id(), nix::sys::signal::Signal::SIGTERM);
    let status = first.wait();
    assert_eq!(status.code(), Some(130));

    // A run that ended cleanly leaves no pid behind: no takeover to report.
    fx.script(json!({"default": ["mark:completed", "complete"]}));
    let out = fx.run(&["--json", "--fresh"]);
    assert_eq!(out.status.code(), Some(0));
    assert!(!String::from_utf8_lossy(&out.stdout).contains("stale lock"));
    let fx = Fixture::new(&tasks_v1(&[("1.1", "Core", "pending")]));
    std::fs::create_dir_all(fx.change_dir.join(".ralph")).unwrap();
    // A lock file left by a dead process does not block.
    std::fs::write(
        fx.change_dir.join(".ralph/lock"),
        "pid=999999\nstarted=then\n",
    )
    .unwrap();
    fx.script(json!({"default": ["mark:completed", "complete"]}));
    let out = fx.run(&["--json", "--resume"]);
    assert_eq!(out.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&out.stdout).contains("stale lock"));
}

#[test]
fn sigterm_stops_the_agent_saves_the_session_and_exits_130() {
    let fx = Fixture::new(&two_tasks());
    fx.script(json!({"1.1": [["write:wip.txt=x", "spawn_child", "hang"], ["mark:completed", "complete"]], "default": ["mark:completed", "complete"]}));
    let mut cmd = fx.ralph();
    cmd.arg("--json")
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    let run = Background::spawn(cmd);
    fx.wait_for("the agent", || !child_pids(&fx.state).is_empty());
    kill(run.id(), nix::sys::signal::Signal::SIGTERM);
    let out = run.wait_with_output();
    assert_eq!(out.status.code(), Some(130));
    let ev = events(&out);
    assert_eq!(of_kind(&ev, "summary")[0]["end"], "interrupted");
    for pid in child_pids(&fx.state) {
        assert!(!alive(pid), "agent child {pid} outlived the stop");
    }
    let s = fx.session();
    assert_eq!(
        s["tasks"]["1.1"]["attempts"][0]["outcome"]["kind"],
        "stopped"
    );
    // A quit is not the agent's fault: it does not use up a try.
    assert_eq!(s["tasks"]["1.1"]["counted_attempts"], 0);
    assert!(
        !fx.root.join("wip.txt").exists(),
        "the interrupted attempt was set aside under its ref"
    );

    let out = fx.run(&["--json"]);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(started(&events(&out)), ["1.1#2", "1.2#1"]);
}

#[test]
fn interactive_without_a_terminal_is_an_error_that_says_why() {
    let fx = Fixture::new(&tasks_v1(&[("1.1", "Core", "pending")]));
    let out = fx.run(&["--interactive"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("needs a terminal"));
}

#[test]
fn sighup_stops_gracefully_like_a_closed_terminal() {
    let fx = Fixture::new(&tasks_v1(&[("1.1", "Core", "pending")]));
    fx.script(json!({"1.1": [["spawn_child", "hang"]]}));
    let mut run = fx.spawn_quiet();
    fx.wait_for("the agent", || !child_pids(&fx.state).is_empty());
    kill(run.id(), nix::sys::signal::Signal::SIGHUP);
    assert_eq!(run.wait().code(), Some(130));
    assert!(fx.session_path().exists(), "session saved for a resume");
    for pid in child_pids(&fx.state) {
        assert!(!alive(pid), "agent child {pid} outlived the hangup");
    }
}

#[test]
fn three_interrupts_force_quit_at_once_and_kill_the_agent() {
    let fx = Fixture::new(&tasks_v1(&[("1.1", "Core", "pending")]));
    // The child ignores TERM, so a graceful stop has to wait out the kill grace:
    // the second and third Ctrl+C arrive while it is still under way.
    fx.script(json!({"1.1": [["spawn_child", "hang"]]}));
    let mut cmd = fx.ralph();
    cmd.arg("--json")
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let run = Background::spawn(cmd);
    fx.wait_for("the agent", || !child_pids(&fx.state).is_empty());
    for _ in 0..3 {
        kill(run.id(), nix::sys::signal::Signal::SIGINT);
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let out = run.wait_with_output();
    assert_eq!(out.status.code(), Some(130));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("Force quit"), "{err}");
    let kids = child_pids(&fx.state);
    fx.wait_for("the killed agent's children to go", || {
        kids.iter().all(|p| !alive(*p))
    });
}

#[test]
fn a_second_change_in_the_same_work_tree_is_refused() {
    let fx = Fixture::new(&tasks_v1(&[("1.1", "Core", "pending")]));
    let other = fx.root.join("spectr/changes/add-other");
    std::fs::create_dir_all(&other).unwrap();
    std::fs::copy(fx.change_dir.join("proposal.md"), other.join("proposal.md")).unwrap();
    std::fs::copy(fx.change_dir.join("tasks.jsonc"), other.join("tasks.jsonc")).unwrap();
    fx.script(json!({"1.1": [["hang"]]}));
    let _first = fx.spawn_quiet();
    fx.wait_for("the first run's agent", || fx.prompt("1.1", 1).is_some());
    let out = fx
        .spectr()
        .args(["ralph", "add-other", "--agent", "claude", "--json"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("work tree") && err.contains(CHANGE), "{err}");
    let ev = events(&out);
    assert_eq!(ev.len(), 1, "one error event on stdout with --json");
    assert_eq!(ev[0]["event"], "error");
    assert!(ev[0]["message"].as_str().unwrap().contains("work tree"));
}
