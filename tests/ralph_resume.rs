//! Resume after kill -9, and the safety of what it touches: the user's
//! commits, the tasks files, process ids read from the session file, and
//! spectr's own files (issue 8: items 2, 3, 5, 6, 8, 14, 15).

mod common;

use common::*;
use serde_json::json;
use std::collections::BTreeSet;
use std::os::unix::fs::PermissionsExt;
use std::process::{Command, Stdio};

const TASKS_FILE: &str = "spectr/changes/add-widget/tasks.jsonc";

fn sigkill(pid: u32) {
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid as i32),
        nix::sys::signal::Signal::SIGKILL,
    );
}

/// Waits until the session records a running agent for `task`, then
/// kill -9s spectr. Returns the agent's pid.
fn kill_9_while(fx: &Fixture, run: &mut Background, task: &str, also: impl Fn() -> bool) -> u64 {
    let mut pid = 0;
    fx.wait_for("the agent to be recorded", || {
        let Some(s) = fx.session_now() else {
            return false;
        };
        let attempts = &s["tasks"][task]["attempts"];
        let last = attempts
            .as_array()
            .and_then(|a| a.last())
            .cloned()
            .unwrap_or_default();
        pid = last["agent_pid"].as_u64().unwrap_or(0);
        // The scripted agent notes its pid after its prompt: killed before
        // that, the next run's agent would count itself as the first.
        let noted = std::fs::read_to_string(fx.state.join("agents.pid"))
            .unwrap_or_default()
            .split_whitespace()
            .any(|p| p == pid.to_string());
        pid > 0 && noted && last["outcome"].is_null() && also()
    });
    sigkill(run.id());
    run.wait();
    pid
}

/// A run killed with -9 while task 1.1's agent had written half its work,
/// then the person commits their own work (`mine.txt`, "my own work").
fn crashed_then_committed() -> Fixture {
    let fx = Fixture::new(&two_tasks());
    fx.script(json!({
        "1.1": [["write:wip.txt=half", "hang"], ["mark:completed", "complete"]],
        "default": ["mark:completed", "complete"]
    }));
    let mut run = fx.spawn_quiet();
    kill_9_while(&fx, &mut run, "1.1", || fx.root.join("wip.txt").exists());
    std::fs::write(fx.root.join("mine.txt"), "my work\n").unwrap();
    git(&fx.root, &["add", "mine.txt"]);
    git(&fx.root, &["commit", "-qm", "my own work"]);
    fx
}

#[test]
fn resume_refuses_to_reset_over_commits_made_after_a_crash() {
    let fx = crashed_then_committed();
    let mine = head(&fx);
    let short = git(&fx.root, &["rev-parse", "--short", "HEAD"])
        .trim()
        .to_string();

    let session_before = std::fs::read(fx.session_path()).unwrap();
    let out = fx.run(&["--json", "--resume"]);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        std::fs::read(fx.session_path()).unwrap(),
        session_before,
        "a refusal changes nothing, the session included"
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("my own work") && err.contains(&short) && err.contains("--rewind"),
        "names the commit and the way on: {err}"
    );
    assert_eq!(head(&fx), mine, "HEAD was not touched");
    assert!(fx.root.join("mine.txt").exists());
    assert!(
        fx.root.join("wip.txt").exists(),
        "nothing was reverted either"
    );
    assert!(started(&events(&out)).is_empty());

    // Asked for explicitly, the revert goes ahead and keeps the commit reachable.
    let out = fx.run(&["--json", "--resume", "--rewind"]);
    assert_eq!(out.status.code(), Some(0));
    let ev = events(&out);
    let failed_ref = of_kind(&ev, "reverted")[0]["failed_ref"]
        .as_str()
        .unwrap()
        .to_string();
    let reachable = Command::new("git")
        .args(["merge-base", "--is-ancestor", &mine, &failed_ref])
        .current_dir(&fx.root)
        .status()
        .unwrap();
    assert!(reachable.success(), "the user's commit stays reachable");
    assert_eq!(started(&ev), ["1.1#2", "1.2#1"]);
}

#[test]
fn a_no_checkpoint_run_holds_the_work_tree_lock() {
    let fx = Fixture::new(&tasks_v1(&[("1.1", "Core", "pending")]));
    let other = fx.root.join("spectr/changes/add-other");
    std::fs::create_dir_all(&other).unwrap();
    std::fs::copy(fx.change_dir.join("proposal.md"), other.join("proposal.md")).unwrap();
    std::fs::copy(fx.change_dir.join("tasks.jsonc"), other.join("tasks.jsonc")).unwrap();
    fx.script(json!({"1.1": [["hang"]]}));
    let mut cmd = fx.ralph();
    cmd.args(["--json", "--no-checkpoint"])
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let _first = Background::spawn(cmd);
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
}

#[test]
fn resume_repairs_a_tasks_file_or_proposal_the_crashed_attempt_broke() {
    for (what, step) in [
        ("deleted tasks file", format!("delete:{TASKS_FILE}")),
        ("broken tasks file", format!("write:{TASKS_FILE}={{ broken")),
        (
            "deleted proposal",
            "delete:spectr/changes/add-widget/proposal.md".to_string(),
        ),
    ] {
        let fx = Fixture::new(&tasks_v1(&[("1.1", "Core", "pending")]));
        let original = fx.tasks_text();
        fx.script(json!({
            "1.1": [[step.clone(), "write:marker.txt=x", "hang"], ["mark:completed", "complete"]]
        }));
        let mut run = fx.spawn_quiet();
        kill_9_while(&fx, &mut run, "1.1", || fx.root.join("marker.txt").exists());
        let out = fx.run(&["--json"]);
        assert_eq!(out.status.code(), Some(0), "{what}");
        assert_eq!(started(&events(&out)), ["1.1#2"], "{what}");
        assert!(fx.change_dir.join("proposal.md").exists(), "{what}");
        assert_eq!(
            fx.tasks_text(),
            original.replace("\"pending\"", "\"completed\""),
            "{what}"
        );
        assert!(!fx.root.join("marker.txt").exists(), "{what}");
    }
}

#[test]
fn an_attempt_killed_after_the_task_was_marked_completed_is_not_run_again() {
    let fx = Fixture::new(&two_tasks());
    fx.script(json!({
        "1.1": [["write:done.txt=1", "mark:completed", "hang"]],
        "default": ["mark:completed", "complete"]
    }));
    // A long completion grace holds the window between the agent's edit and
    // the judgement open.
    let mut cmd = fx.spectr();
    cmd.args([
        "ralph",
        CHANGE,
        "--agent",
        "claude",
        "--completion-grace",
        "60s",
        "--json",
    ])
    .env("NO_COLOR", "1")
    .stdin(Stdio::null())
    .stdout(Stdio::null())
    .stderr(Stdio::null());
    let mut run = Background::spawn(cmd);
    kill_9_while(&fx, &mut run, "1.1", || fx.status("1.1") == "completed");

    let out = fx.run(&["--json"]);
    assert_eq!(out.status.code(), Some(0));
    let ev = events(&out);
    assert_eq!(started(&ev), ["1.2#1"], "1.1 is not run again");
    assert!(of_kind(&ev, "reverted").is_empty());
    assert!(
        fx.root.join("done.txt").exists(),
        "its work was not reverted"
    );
    assert!(fx.prompt("1.1", 2).is_none());
}

#[test]
fn a_judged_completion_missing_from_the_tasks_file_is_written_on_resume() {
    let fx = Fixture::new(&two_tasks());
    fx.script(json!({
        "1.1": [["mark:completed", "complete"]],
        "1.2": [["hang"], ["mark:completed", "complete"]]
    }));
    let mut run = fx.spawn_quiet();
    kill_9_while(&fx, &mut run, "1.2", || true);
    // As if the run had died between judging 1.1 and writing its status.
    let text = fx.tasks_text();
    let at = text.find("\"completed\"").unwrap();
    let edited = format!(
        "{}\"in_progress\"{}",
        &text[..at],
        &text[at + "\"completed\"".len()..]
    );
    std::fs::write(fx.change_dir.join("tasks.jsonc"), edited).unwrap();
    assert_eq!(fx.status("1.1"), "in_progress");

    let out = fx.run(&["--json"]);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(started(&events(&out)), ["1.2#2"]);
    assert_eq!(fx.status("1.1"), "completed");
    assert!(fx.prompt("1.1", 2).is_none());
}

/// A process in a group of its own, standing in for someone else's program.
fn bystander() -> std::process::Child {
    use std::os::unix::process::CommandExt;
    Command::new("sleep")
        .arg("1000")
        .process_group(0)
        .spawn()
        .unwrap()
}

#[test]
fn pids_from_the_session_file_are_never_signalled_unverified() {
    let fx = Fixture::new(&two_tasks());
    fx.script(json!({
        "1.1": [["hang"], ["mark:completed", "complete"]],
        "default": ["mark:completed", "complete"]
    }));
    let mut run = fx.spawn_quiet();
    kill_9_while(&fx, &mut run, "1.1", || true);
    let saved = fx.session().to_string();
    let mut other = bystander();
    let other_pid = other.id() as u64;
    let cases = [json!(other_pid), json!(other_pid), json!(0), json!(1)];
    let starts = [json!(null), json!(12345), json!(null), json!(null)];
    for (pid, start) in cases.iter().zip(starts.iter()) {
        let mut s: serde_json::Value = serde_json::from_str(&saved).unwrap();
        let a = &mut s["tasks"]["1.1"]["attempts"][0];
        a["agent_pid"] = pid.clone();
        a["agent_started"] = start.clone();
        std::fs::write(fx.session_path(), s.to_string()).unwrap();
        let out = fx
            .ralph()
            .args([
                "--json",
                "--resume",
                "--max-retries",
                "0",
                "--task-timeout",
                "1s",
            ])
            .output()
            .unwrap();
        assert!(
            !String::from_utf8_lossy(&out.stderr).contains("panicked"),
            "pid {pid} start {start}"
        );
        assert!(
            alive(other_pid as i32),
            "a process that is not our agent was signalled (pid {pid}, start {start})"
        );
        // Put the tree and the tasks back for the next case.
        std::fs::write(fx.session_path(), &saved).unwrap();
    }
    let _ = other.kill();
    let _ = other.wait();
}

#[test]
fn an_agent_that_cannot_start_records_no_pid() {
    let fx = Fixture::new(&tasks_v1(&[("1.1", "Core", "pending")]));
    // Executable, but its interpreter does not exist: exec fails.
    let agent = fx.bin.join("broken-agent");
    std::fs::write(&agent, "#!/nonexistent/interpreter\n").unwrap();
    std::fs::set_permissions(&agent, std::fs::Permissions::from_mode(0o755)).unwrap();
    let out = fx
        .spectr()
        .args([
            "ralph",
            CHANGE,
            "--json",
            "--max-retries",
            "0",
            "--agent-cmd",
        ])
        .arg(&agent)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(of_kind(&events(&out), "agent_started").is_empty());
    let s = fx.session();
    assert!(
        s["tasks"]["1.1"]["attempts"][0]["agent_pid"].is_null(),
        "{s}"
    );
}

#[test]
fn a_read_only_tasks_file_is_refused_before_anything_runs() {
    let fx = Fixture::new(&tasks_v1(&[("1.1", "Core", "pending")]));
    let path = fx.change_dir.join("tasks.jsonc");
    let before = fx.tasks_text();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o444)).unwrap();
    let out = fx.run(&["--json"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("read-only") && err.contains("tasks.jsonc") && err.contains("chmod u+w"),
        "{err}"
    );
    assert_eq!(fx.tasks_text(), before);
    let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o444, "the file was not replaced");
    assert!(fx.prompt("1.1", 1).is_none(), "no agent ran");
}

#[test]
fn an_unwritable_tasks_file_is_refused_before_anything_runs() {
    let fx = Fixture::new(&tasks_v1(&[("1.1", "Core", "pending")]));
    let path = fx.change_dir.join("tasks.jsonc");
    // Root writes anywhere, except into an immutable file; others are
    // stopped by a read-only folder. Use whichever this machine offers.
    let immutable = Command::new("chattr")
        .arg("+i")
        .arg(&path)
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    let root = {
        use std::os::unix::fs::MetadataExt;
        std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0)
    };
    let read_only_dir = !immutable && !root;
    if read_only_dir {
        // spectr's own folder stays writable: only the tasks file's is not.
        std::fs::create_dir_all(fx.change_dir.join(".ralph/transcripts")).unwrap();
        std::fs::write(fx.change_dir.join(".ralph/.gitignore"), "*\n").unwrap();
        std::fs::set_permissions(&fx.change_dir, std::fs::Permissions::from_mode(0o555)).unwrap();
    }
    if !immutable && !read_only_dir {
        eprintln!("skipped: running as root on a filesystem without chattr +i");
        return;
    }
    let out = fx.run(&["--json"]);
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    if immutable {
        let _ = Command::new("chattr").arg("-i").arg(&path).status();
    } else {
        std::fs::set_permissions(&fx.change_dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("tasks.jsonc") && err.contains("cannot be"),
        "{err}"
    );
    assert!(fx.prompt("1.1", 1).is_none(), "no agent ran");
}

#[test]
fn a_status_that_cannot_be_written_stops_the_run_and_the_task_is_not_redone() {
    let fx = Fixture::new(&two_tasks());
    fx.script(json!({
        "1.1": [[format!("chmod:444:{TASKS_FILE}"), "complete"]],
        "default": ["mark:completed", "complete"]
    }));
    let out = fx.run(&["--json"]);
    assert_eq!(out.status.code(), Some(1));
    let ev = events(&out);
    assert_eq!(started(&ev), ["1.1#1"], "never re-run");
    let errors = of_kind(&ev, "error");
    let message = errors[0]["message"].as_str().unwrap();
    assert!(
        message.contains("could not be written") && message.contains("read-only"),
        "{message}"
    );
    // Counted once, and the end says what a resume does with it.
    let summary = &of_kind(&ev, "summary")[0];
    assert_eq!(summary["totals"]["completed"], 1);
    assert_eq!(summary["totals"]["remaining"], 1);
    assert_eq!(summary["session"]["saved"], true);
    assert_eq!(summary["session"]["status_to_write"], json!(["1.1"]));
    // Made writable again, the resume records it without running it again.
    let path = fx.change_dir.join("tasks.jsonc");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
    let out = fx.run(&["--json"]);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(started(&events(&out)), ["1.2#1"]);
    assert_eq!(fx.status("1.1"), "completed");
}

#[test]
fn an_agent_committing_everything_never_commits_spectrs_files() {
    let fx = Fixture::new(&tasks_v1(&[
        ("1.1", "Core", "pending"),
        ("1.2", "Core", "pending"),
        ("1.3", "Core", "pending"),
    ]));
    // Status changes of other tasks make spectr save its session while the
    // agent commits; 1.2 fails once, so a revert happens in between.
    fx.script(json!({
        "1.1": [["write:a.txt=1", "git_commit:one", "mark:completed", "git_commit:one-done", "complete"]],
        "1.2": [["write:b.txt=1", "git_commit:two", "fail:no"], ["write:b.txt=2", "mark:completed", "git_commit:two-done", "complete"]],
        "1.3": [["write:c.txt=1", "mark:completed", "git_commit:three", "complete"]]
    }));
    let out = fx.run(&["--json"]);
    assert_eq!(out.status.code(), Some(0));
    let names = git(&fx.root, &["log", "--all", "--name-only", "--format="]);
    for name in names.lines().filter(|l| !l.is_empty()) {
        assert!(
            !name.contains(".ralph") && !name.contains(".spectr-tmp") && !name.contains("session"),
            "an agent's commit picked up spectr's own file {name}"
        );
    }
}

#[test]
fn a_session_file_in_the_old_place_is_moved_and_resumed() {
    let fx = Fixture::new(&two_tasks());
    fx.script(json!({
        "1.1": [["mark:completed", "complete"]],
        "1.2": [["hang"], ["mark:completed", "complete"]]
    }));
    let mut run = fx.spawn_quiet();
    kill_9_while(&fx, &mut run, "1.2", || true);
    // Where versions 0.2 to 0.4 kept it.
    let legacy = fx.change_dir.join(".ralph/session.json");
    std::fs::rename(fx.session_path(), &legacy).unwrap();
    let out = fx.run(&["--json"]);
    assert_eq!(out.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&out.stdout).contains("moved the session file"));
    assert_eq!(started(&events(&out)), ["1.2#2"]);
    assert!(!legacy.exists());
    assert!(
        !fx.session_path().exists(),
        "deleted once every task completed"
    );
}

#[test]
fn the_session_file_sits_beside_the_change_and_git_never_sees_it() {
    let fx = Fixture::new(&two_tasks());
    // Killed mid-attempt: the session file is on disk.
    fx.script(json!({
        "1.1": [["mark:completed", "complete"]],
        "1.2": [["hang"], ["mark:completed", "complete"]]
    }));
    let mut run = fx.spawn_quiet();
    kill_9_while(&fx, &mut run, "1.2", || true);
    let session = fx.change_dir.join(".ralph-session.json");
    assert!(
        session.is_file(),
        "the session is at <change>/.ralph-session.json"
    );
    assert!(!fx.change_dir.join(".ralph/session.json").exists());
    let status = git(&fx.root, &["status", "--porcelain", "--ignored=no"]);
    assert!(!status.contains("ralph"), "{status}");
    git(&fx.root, &["add", "-A"]);
    let staged = git(&fx.root, &["diff", "--cached", "--name-only"]);
    assert!(!staged.contains("ralph"), "{staged}");
    // The user's .gitignore is untouched; info/exclude has the entry once,
    // however many runs there were.
    assert!(!fx.root.join(".gitignore").exists());
    let out = fx.run(&["--json"]);
    assert_eq!(out.status.code(), Some(0));
    let exclude = std::fs::read_to_string(fx.root.join(".git/info/exclude")).unwrap();
    assert_eq!(
        exclude.matches("\n.ralph-session.json\n").count(),
        1,
        "{exclude}"
    );
}

#[test]
fn git_add_all_in_a_loop_never_sees_a_temp_file_of_an_atomic_write() {
    let fx = Fixture::new(&tasks_v1(&[("1.1", "Core", "pending")]));
    std::fs::create_dir_all(fx.change_dir.join(".ralph")).unwrap();
    std::fs::write(fx.change_dir.join(".ralph/.gitignore"), "*\n").unwrap();
    // What a run does first: the session file goes into info/exclude.
    spectr::checkpoint::Checkpointer::discover(&fx.root, std::time::Duration::from_secs(30))
        .unwrap()
        .unwrap()
        .ignore_everywhere(".ralph-session.json", "spectr")
        .unwrap();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writer = {
        let stop = stop.clone();
        let tasks = fx.change_dir.join("tasks.jsonc");
        let session = fx.session_path();
        let text = fx.tasks_text();
        std::thread::spawn(move || {
            let mut n = 0u64;
            while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                spectr::model::atomic::write_atomic(&tasks, text.as_bytes()).unwrap();
                spectr::model::atomic::write_atomic(&session, format!("{n}").as_bytes()).unwrap();
                n += 1;
            }
            n
        })
    };
    let mut staged = BTreeSet::new();
    for _ in 0..60 {
        let out = Command::new("git")
            .args(["add", "-A"])
            .current_dir(&fx.root)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "git add -A failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        for name in git(&fx.root, &["diff", "--cached", "--name-only"]).lines() {
            staged.insert(name.to_string());
        }
    }
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    assert!(writer.join().unwrap() > 0);
    assert!(
        staged
            .iter()
            .all(|n| !n.contains(".spectr-tmp") && !n.contains(".ralph")),
        "{staged:?}"
    );
}

#[test]
fn with_a_terminal_commits_made_after_a_crash_can_be_kept() {
    use expectrl::{Eof, Session};
    let fx = crashed_then_committed();
    let mine = head(&fx);

    let mut cmd = fx.spectr();
    cmd.env("TERM", "xterm")
        .args(Fixture::RALPH_ARGS)
        .arg("--resume");
    let mut s = Session::spawn(cmd).expect("spawn in a pty");
    // A hang guard, not a speed assertion.
    s.set_expect_timeout(Some(std::time::Duration::from_secs(60)));
    s.expect("my own work").unwrap();
    s.expect("reverted over these commits").unwrap();
    // The default is to stop; one up is "Keep them".
    s.send("\x1b[A").unwrap();
    s.send("\r").unwrap();
    s.expect("All selected tasks completed.").unwrap();
    let _ = s.expect(Eof);
    let _ = s.wait();
    assert!(fx.root.join("mine.txt").exists());
    let reachable = Command::new("git")
        .args(["merge-base", "--is-ancestor", &mine, "HEAD"])
        .current_dir(&fx.root)
        .status()
        .unwrap();
    assert!(
        reachable.success(),
        "the user's commit is still on the branch"
    );
    assert_eq!(fx.status("1.1"), "completed");
    assert_eq!(fx.status("1.2"), "completed");
}

/// A full disk, simulated without one: once task 1.3's agent is running, the
/// session file cannot be replaced (a folder stands where it goes), then the
/// agent makes the tasks file read-only, so 1.3's status cannot be written
/// either and the run stops. The end of the output says what is on disk and
/// what a resume will do, and counts every task once; the resume then does
/// what it said.
#[test]
fn a_session_that_cannot_be_saved_is_said_plainly_and_each_task_counts_once() {
    let fx = Fixture::new(&tasks_v1(&[
        ("1.1", "Core", "pending"),
        ("1.2", "Core", "pending"),
        ("1.3", "Core", "pending"),
        ("1.4", "Core", "pending"),
        ("1.5", "Core", "pending"),
    ]));
    let ready = fx.state.join("sync/ready");
    let go = fx.state.join("sync/go");
    fx.script(json!({
        "1.3": [[
            format!("touch:{}", ready.display()),
            format!("wait_for:{}:60", go.display()),
            format!("chmod:444:{TASKS_FILE}"),
            "complete"
        ]],
        "default": ["mark:completed", "complete"]
    }));
    let mut cmd = fx.ralph();
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    let run = Background::spawn(cmd);
    // Once the session records 1.3's agent, nothing saves it again until
    // that agent has ended.
    fx.wait_for("1.3's agent recorded in the session", || {
        fx.session_now().is_some_and(|s| {
            s["tasks"]["1.3"]["attempts"]
                .as_array()
                .and_then(|a| a.last())
                .is_some_and(|a| a["agent_pid"].as_u64().is_some_and(|p| p > 0))
        })
    });
    fx.wait_for("1.3's agent to be ready", || ready.exists());
    let path = fx.session_path();
    let on_disk = std::fs::read(&path).unwrap();
    std::fs::remove_file(&path).unwrap();
    std::fs::create_dir(&path).unwrap();
    std::fs::write(&go, "").unwrap();
    let out = run.wait_with_output();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(
        text.contains("Summary: 3 completed · 0 failed · 0 skipped · 2 remaining"),
        "each task counted once: {text}"
    );
    assert!(!text.contains("The session is saved"), "{text}");
    let end = text.rsplit("Summary:").next().unwrap();
    assert!(
        end.contains("The session file could not be written (Is a directory")
            && end.contains("still holds the run as it was at")
            && end.contains("run the same command again: 1.3 will run again"),
        "{text}"
    );

    // The disk has room again; the session file was whole all along.
    std::fs::remove_dir(&path).unwrap();
    std::fs::write(&path, on_disk).unwrap();
    let tasks = fx.change_dir.join("tasks.jsonc");
    std::fs::set_permissions(&tasks, std::fs::Permissions::from_mode(0o644)).unwrap();
    fx.script(json!({"default": ["mark:completed", "complete"]}));
    let out = fx.run(&["--json"]);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(started(&events(&out)), ["1.3#2", "1.4#1", "1.5#1"]);
}
