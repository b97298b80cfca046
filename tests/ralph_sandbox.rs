//! Issue 21: spectr's own git never runs what an agent planted (always), and
//! `--sandbox` confines each agent to its task's work tree (bubblewrap). The
//! escape suite: a scripted agent does its task, commits, and tries to write
//! where it must not; the report it leaves says what succeeded.

mod common;

use common::*;
use serde_json::json;
use std::path::Path;

/// Tasks 1.1 and 2.1: two lanes with `--jobs 2`.
fn two_lanes() -> String {
    tasks_v1(&[("1.1", "Core", "pending"), ("2.1", "Other", "pending")])
}

/// The planted commands that ran, apart from those the agents' own git ran.
fn planted_ran(marker: &Path) -> String {
    std::fs::read_to_string(marker)
        .unwrap_or_default()
        .lines()
        .filter(|l| !l.ends_with("(by the agent)"))
        .map(|l| format!("{l}\n"))
        .collect()
}

/// An agent plants every command git could run later, then fails: spectr
/// reverts (checkout of the checkpoint), retries, snapshots, and with lanes
/// adds work trees and merges. None of the planted commands may run.
fn planted_commands_never_run(jobs: &str) {
    let fx = Fixture::new(&two_lanes());
    let marker = fx.state.join("planted-ran.txt");
    let plant = format!("plant:{}", marker.display());
    fx.script(json!({
        "default": [
            [
                "write:work-{task}.txt=first try",
                "git_commit:first try {task}",
                plant,
                "write:more-{task}.txt=x",
                "fail:planted"
            ],
            ["write:work-{task}.txt=done", "mark:completed", "complete"]
        ]
    }));
    let out = fx.run(&["--jobs", jobs, "--on-exhaust", "abort"]);
    assert!(out.status.success(), "{}", stderr_text(&out));
    assert!(
        fx.root.join(".git/planted.sh").exists(),
        "the agent could not plant: {}",
        stdout_text(&out)
    );
    assert_eq!(
        fx.status("1.1"),
        "completed",
        "{}",
        stdout_text(&out) + &stderr_text(&out)
    );
    assert_eq!(
        planted_ran(&marker),
        "",
        "spectr's git ran planted commands"
    );
}

#[test]
fn planted_git_commands_never_run_in_the_users_tree() {
    planted_commands_never_run("1");
}

#[test]
fn planted_git_commands_never_run_with_lanes() {
    planted_commands_never_run("2");
}
