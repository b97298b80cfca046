//! The runner's own guarantees: output collected, a deadline that kills the
//! whole group (grandchildren too), a grace period, reaping, and no signal
//! to a process that is not provably ours.

use super::procfs::read_proc;
use super::*;
use nix::sys::signal::Signal;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::time::{Duration, Instant};

const LONG: Duration = Duration::from_secs(60);

/// Waits (up to a generous bound, not a speed assumption) until `done`.
fn eventually(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !done() {
        assert!(Instant::now() < deadline, "never happened: {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn gone(pid: i32) -> bool {
    read_proc(pid).is_none_or(|p| p.is_dead())
}

/// Not a zombie of ours: reaped (or never ours).
fn reaped(pid: u32) -> bool {
    let me = std::process::id() as i32;
    read_proc(pid as i32).is_none_or(|p| p.ppid != me)
}

/// The pid a script wrote to `file`, once it has.
fn pid_in(file: &Path) -> i32 {
    let mut pid = None;
    eventually("the script wrote a pid", || {
        pid = std::fs::read_to_string(file)
            .ok()
            .and_then(|t| t.trim().parse::<i32>().ok());
        pid.is_some()
    });
    pid.unwrap_or(0)
}

#[test]
fn output_and_status_are_collected() {
    let out = Cmd::new("sh")
        .args(["-c", "echo out; echo err >&2; exit 3"])
        .output(LONG)
        .unwrap();
    assert_eq!(out.stdout, b"out\n");
    assert_eq!(out.stderr, b"err\n");
    assert_eq!(out.status().and_then(|s| s.code()), Some(3));
    assert!(!out.success());
}

#[test]
fn input_is_fed_and_closed() {
    let out = Cmd::new("cat")
        .input(b"hello\n".to_vec())
        .output(LONG)
        .unwrap();
    assert!(out.success());
    assert_eq!(out.stdout, b"hello\n");
}

#[test]
fn a_program_that_cannot_start_is_an_error_naming_it() {
    let err = Cmd::new("/no/such/program").spawn().unwrap_err();
    assert!(matches!(err, ProcessError::Spawn { .. }), "{err:?}");
    assert!(err.to_string().contains("/no/such/program"), "{err}");
}

#[test]
fn a_timeout_kills_the_whole_group_grandchild_included_and_reaps() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("grandchild");
    let script = format!("sleep 1000 & echo $! > '{}'; wait", file.display());
    let child = Cmd::new("sh").args(["-c", &script]).spawn().unwrap();
    let leader = child.pid();
    // The grandchild exists before the deadline starts counting.
    let grandchild = pid_in(&file);
    assert!(!gone(grandchild));
    let out = child
        .collect(&Collect::new(Duration::from_millis(100)))
        .unwrap();
    assert_eq!(out.end, End::TimedOut);
    assert!(reaped(leader), "the leader was reaped");
    eventually("the grandchild is gone", || gone(grandchild));
}

#[test]
fn stopping_the_rest_ends_when_the_leader_exits() {
    // The leader exits at once; a background child keeps its stdout open.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("daemon");
    let script = format!("echo hi; sleep 1000 & echo $! > '{}'", file.display());
    let out = Cmd::new("sh")
        .args(["-c", &script])
        .spawn()
        .unwrap()
        .collect(&Collect::new(LONG).after_exit(AfterExit::StopTheRest))
        .unwrap();
    assert!(out.success(), "{:?}", out.end);
    assert_eq!(out.stdout, b"hi\n");
    let daemon = pid_in(&file);
    eventually("the background child is gone", || gone(daemon));

    // Awaiting the pipes instead, the same script runs into the deadline
    // (and its leftover is killed then).
    let file = dir.path().join("daemon2");
    let script = format!("sleep 1000 & echo $! > '{}'", file.display());
    let child = Cmd::new("sh").args(["-c", &script]).spawn().unwrap();
    let daemon = pid_in(&file);
    let out = child
        .collect(&Collect::new(Duration::from_millis(100)))
        .unwrap();
    assert_eq!(out.end, End::TimedOut);
    eventually("the background child is gone", || gone(daemon));
}

#[test]
fn a_cancel_stops_it() {
    let child = Cmd::new("sleep").arg("1000").spawn().unwrap();
    let pid = child.pid();
    let cancel = || true;
    let out = child
        .collect(&Collect::new(LONG).cancel_when(&cancel))
        .unwrap();
    assert_eq!(out.end, End::Cancelled);
    assert!(reaped(pid));
}

#[test]
fn a_tail_bounds_what_is_kept() {
    let out = Cmd::new("sh")
        .args([
            "-c",
            "i=0; while [ $i -lt 20000 ]; do i=$((i+1)); echo line $i; done",
        ])
        .spawn()
        .unwrap()
        .collect(&Collect::new(LONG).tail(100))
        .unwrap();
    assert!(out.success());
    assert_eq!(out.stdout.len(), 100);
    assert!(out.stdout.ends_with(b"line 20000\n"), "{:?}", out.stdout);
}

#[test]
fn stop_terms_then_kills_after_the_grace() {
    // Cooperative: TERM ends it within the grace.
    let mut child = Cmd::new("sleep").arg("1000").spawn().unwrap();
    let status = child.stop(LONG).unwrap();
    assert_eq!(status.signal(), Some(Signal::SIGTERM as i32));
    // TERM ignored (by sh and, inherited, its sleep): KILL after the grace.
    let dir = tempfile::tempdir().unwrap();
    let ready = dir.path().join("ready");
    let script = format!(
        "trap '' TERM; echo $$ > '{}'; sleep 1000; :",
        ready.display()
    );
    let mut child = Cmd::new("sh").args(["-c", &script]).spawn().unwrap();
    // TERM is sent only once it is ignored.
    pid_in(&ready);
    let status = child.stop(Duration::from_millis(100)).unwrap();
    assert_eq!(status.signal(), Some(Signal::SIGKILL as i32));
}

#[test]
fn dropping_an_unreaped_child_kills_and_reaps_it() {
    let child = Cmd::new("sleep").arg("1000").spawn().unwrap();
    let pid = child.pid();
    drop(child);
    assert!(reaped(pid));
    assert!(gone(pid as i32));
}

#[test]
fn groups_and_sessions_of_its_own() {
    let me = read_proc(std::process::id() as i32).unwrap();
    let child = Cmd::new("sleep").arg("1000").spawn().unwrap();
    let p = read_proc(child.pid() as i32).unwrap();
    assert_eq!(p.pgrp, p.pid, "leads its own group");
    assert_eq!(p.session, me.session, "in our session");
    drop(child);
    let child = Cmd::new("sleep").arg("1000").own_session().spawn().unwrap();
    let p = read_proc(child.pid() as i32).unwrap();
    assert_eq!((p.pgrp, p.session), (p.pid, p.pid), "leads its own session");
}

#[test]
fn a_reaped_child_never_signals_what_took_its_pid() {
    // `victim` stands for whatever process was given the pid after ours
    // was reaped: same pid, another start time.
    let mut victim = Cmd::new("sleep").arg("1000").spawn().unwrap();
    let (pid, start) = (victim.pid(), start_time(victim.pid()).unwrap());
    let mut ours = Cmd::new("true").spawn().unwrap();
    ours.wait().unwrap();
    ours.pretend_tree(ProcessTree::adopt(pid, Some(start + 1)).unwrap());
    ours.kill();
    assert_eq!(
        ours.stop(Duration::from_millis(50)).unwrap().code(),
        Some(0)
    );
    drop(ours);
    assert!(victim.try_wait().unwrap().is_none(), "never signalled");
    assert_eq!(victim.stop(LONG).unwrap().signal(), Some(15));
}

#[cfg(target_os = "linux")]
#[test]
fn stop_with_spectr_fires_when_the_spawning_thread_ends() {
    // Why agents are spawned from long-lived threads: the kernel's parent
    // is the thread, and its end counts as spectr's death.
    let mut child = std::thread::spawn(|| {
        Cmd::new("sleep")
            .arg("1000")
            .own_session()
            .stop_with_spectr()
            .spawn()
            .unwrap()
    })
    .join()
    .unwrap();
    let status = child.wait().unwrap();
    assert_eq!(status.signal(), Some(Signal::SIGTERM as i32));
}

/// Nothing outside this module starts a process (the scripted agent in
/// `src/bin/` stands in for an agent CLI and starts its own children).
#[test]
fn the_runner_is_the_only_place_that_starts_a_process() {
    fn scan(path: &Path, found: &mut Vec<String>) {
        if path.is_dir() {
            let mut entries: Vec<_> = std::fs::read_dir(path)
                .unwrap()
                .map(|e| e.unwrap().path())
                .collect();
            entries.sort();
            for entry in entries {
                scan(&entry, found);
            }
        } else if path.extension().is_some_and(|e| e == "rs") {
            let text = std::fs::read_to_string(path).unwrap();
            for (n, line) in text.lines().enumerate() {
                if ["Command::new", "process::Command", "CommandExt"]
                    .iter()
                    .any(|w| line.contains(w))
                {
                    found.push(format!("{}:{}: {}", path.display(), n + 1, line.trim()));
                }
            }
        }
    }
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut found = Vec::new();
    let mut entries: Vec<_> = std::fs::read_dir(&src)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| !p.ends_with("process") && !p.ends_with("bin"))
        .collect();
    entries.sort();
    for entry in entries {
        scan(&entry, &mut found);
    }
    assert!(
        found.is_empty(),
        "processes started outside src/process/:\n{}",
        found.join("\n")
    );
}
