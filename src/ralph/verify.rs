//! `--verify CMD`: a command the loop itself runs after an agent reports a task
//! complete. It must pass before the task counts as completed.

use crate::ralph::control::ActiveAgents;
use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// How many trailing lines of output become the failure reason.
const TAIL_LINES: usize = 40;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VerifyResult {
    Passed,
    /// The reason, with the tail of the command's output.
    Failed(String),
}

fn tail(text: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    let start = lines.len().saturating_sub(TAIL_LINES);
    lines[start..].join("\n")
}

/// Runs `cmd` with `sh -c` in `cwd`. Stops early (as a failure) when a quit is
/// requested; its process group is registered so a force-quit kills it too.
pub fn run(cmd: &str, cwd: &Path, timeout: Duration, active: &ActiveAgents) -> VerifyResult {
    let mut command = Command::new("sh");
    crate::agent::process::work_in(&mut command, cwd);
    let mut child = match command
        .arg("-c")
        .arg(cmd)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        // Its own group, so a timeout can stop everything it started.
        .process_group(0)
        .spawn()
    {
        Ok(c) => c,
        Err(e) => return VerifyResult::Failed(format!("`{cmd}` could not start: {e}")),
    };
    // Drain both pipes on threads so a chatty command never blocks on a full pipe.
    let group_id = child.id();
    // Its identity is taken now, before it is reaped: every kill checks it.
    let mut tree = crate::agent::process::ProcessTree::new(group_id);
    active.add_group(group_id);
    let (tx, rx) = crossbeam_channel::unbounded::<Vec<u8>>();
    let readers = [
        child
            .stdout
            .take()
            .map(|s| Box::new(s) as Box<dyn Read + Send>),
        child
            .stderr
            .take()
            .map(|s| Box::new(s) as Box<dyn Read + Send>),
    ]
    .into_iter()
    .flatten()
    .map(|mut r| {
        let tx = tx.clone();
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            let _ = r.read_to_end(&mut buf);
            let _ = tx.send(buf);
        })
    })
    .count();
    drop(tx);
    let started = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Some(status),
            Ok(None) if started.elapsed() >= timeout || active.quit_requested() => break None,
            Ok(None) => std::thread::sleep(Duration::from_millis(20)),
            Err(_) => break None,
        }
    };
    // Always stop the group: a background child left holding the pipes would
    // keep the readers (and the loop) waiting forever.
    tree.signal(nix::sys::signal::Signal::SIGKILL);
    if status.is_none() {
        let _ = child.wait();
    }
    active.remove_group(group_id);
    // A daemon that left our group could hold the pipes open forever: read
    // what arrives within a short deadline and move on.
    let mut output = String::new();
    let deadline = Instant::now() + Duration::from_secs(2);
    for _ in 0..readers {
        match rx.recv_deadline(deadline) {
            Ok(bytes) => output.push_str(&String::from_utf8_lossy(&bytes)),
            Err(_) => break,
        }
    }
    match status {
        Some(s) if s.success() => VerifyResult::Passed,
        Some(s) => VerifyResult::Failed(format!("`{cmd}` failed ({s}):\n{}", tail(&output))),
        None if active.quit_requested() => {
            VerifyResult::Failed(format!("`{cmd}` stopped: quit requested"))
        }
        None => VerifyResult::Failed(format!(
            "`{cmd}` timed out after {}:\n{}",
            humantime::format_duration(timeout),
            tail(&output)
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passing_and_failing_commands() {
        let dir = std::env::temp_dir();
        assert_eq!(
            run(
                "true",
                &dir,
                Duration::from_secs(30),
                &ActiveAgents::default()
            ),
            VerifyResult::Passed
        );
        match run(
            "echo boom; exit 3",
            &dir,
            Duration::from_secs(30),
            &ActiveAgents::default(),
        ) {
            VerifyResult::Failed(r) => assert!(r.contains("boom") && r.contains('3'), "{r}"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_hanging_command_is_stopped() {
        let dir = std::env::temp_dir();
        match run(
            "sleep 30",
            &dir,
            Duration::from_millis(200),
            &ActiveAgents::default(),
        ) {
            VerifyResult::Failed(r) => assert!(r.contains("timed out"), "{r}"),
            other => panic!("{other:?}"),
        }
    }
}
