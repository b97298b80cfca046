//! Every command that prints ends quietly when its reader is gone
//! (`spectr report | head`), as cargo and ripgrep do: no panic, no exit 101.

mod common;

use common::{Fixture, tasks_v1};
use std::process::{Command, Stdio};

/// Runs `cmd` with the reader of `stream` ("stdout" or "stderr") closed
/// before the command writes a byte, so every write meets a closed pipe.
fn closed(mut cmd: Command, stream: &str) -> (Option<i32>, String) {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    use std::io::Read;
    let mut said = String::new();
    if stream == "stdout" {
        drop(child.stdout.take());
        let _ = child.stderr.take().unwrap().read_to_string(&mut said);
    } else {
        drop(child.stderr.take());
        let _ = child.stdout.take().unwrap().read_to_string(&mut said);
    }
    let status = child.wait().unwrap();
    (status.code(), said)
}

/// A change whose run completed, so each command has something to print:
/// 150 tasks, a report larger than a pipe's buffer.
fn completed_run() -> Fixture {
    let tasks: Vec<(String, String)> = (1..=150)
        .map(|n| (format!("1.{n}"), "Core".to_string()))
        .collect();
    let refs: Vec<(&str, &str, &str)> = tasks
        .iter()
        .map(|(id, s)| (id.as_str(), s.as_str(), "pending"))
        .collect();
    let fx = Fixture::new(&tasks_v1(&refs));
    fx.script(serde_json::json!({"default": ["write:notes.txt:x", "mark:completed", "complete"]}));
    let out = fx.run(&["--yes"]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    fx
}

#[test]
fn every_printing_command_ends_quietly_on_a_closed_pipe() {
    let fx = completed_run();
    let id = common::CHANGE;
    let commands: &[&[&str]] = &[
        &["list"],
        &["list", "--json"],
        &["list", "--long"],
        &["report"],
        &["report", id],
        &["status", "--change", id],
        &["status", "--change", id, "--json"],
        &["context", "--change", id, "--task", "1.1"],
        &["task", "done", "1.1", "--change", id],
        &["learn", "--change", id, "closed pipes end quietly"],
        &["completions", "bash"],
        &["ralph", id, "--agent", "claude", "--dry-run"],
        &["ralph", id, "--agent", "claude", "--dry-run", "--json"],
        &["ralph", "--help"],
        &["--version"],
    ];
    let mut failures = Vec::new();
    for args in commands {
        for stream in ["stdout", "stderr"] {
            let mut cmd = fx.spectr();
            cmd.args(*args).env("NO_COLOR", "1");
            let (code, said) = closed(cmd, stream);
            if code == Some(101) || code.is_none() || said.contains("panicked") {
                failures.push(format!(
                    "spectr {} (closed {stream}): exit {code:?}\n{said}",
                    args.join(" ")
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n---\n"));
}
