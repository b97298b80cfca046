//! Lanes on other machines (issue 25): `--lane-exec` runs each attempt
//! through a command that starts `spectr lane-worker` elsewhere, with the
//! work going by way of a git remote.
//!
//! Two engines here: the exec template run directly (`{cmd}`: the worker on
//! this machine, through a bare repository as the remote), and real `ssh`
//! to 127.0.0.1 (an sshd the test starts on a port of its own, with a key
//! made for it). The ssh tests need openssh-server: `.ci/run` installs it;
//! without it they fail under CI (`SPECTR_REQUIRE_SSH` or `CI`) and say so
//! loudly elsewhere.

mod common;

use common::*;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};

/// A bare repository beside the project: the lanes' remote.
fn bare_remote(fx: &Fixture) -> PathBuf {
    let remote = fx.root.parent().unwrap().join("remote.git");
    git(fx.root.parent().unwrap(), &["init", "-q", "--bare", remote.to_str().unwrap()]);
    remote
}

/// Every ref of the remote, sorted.
fn remote_refs(remote: &Path) -> Vec<String> {
    let out = git(remote, &["for-each-ref", "--format=%(refname)"]);
    let mut refs: Vec<String> = out.lines().map(str::to_string).collect();
    refs.sort();
    refs
}

/// Where the workers make their clones: must be empty once they end.
fn clones_dir(fx: &Fixture) -> PathBuf {
    let dir = fx.root.parent().unwrap().join("worker-tmp");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn four_lanes() -> String {
    tasks_v1(&[
        ("1.1", "Core", "pending"),
        ("1.2", "Core", "pending"),
        ("2.1", "Docs", "pending"),
        ("3.1", "Api", "pending"),
        ("4.1", "Cli", "pending"),
    ])
}

fn four_lane_script(fx: &Fixture) {
    fx.script(json!({
        "1.1": [
            ["write:wip/1.1.txt=failed work of 1.1", "fail:tests red"],
            ["write:src/core.rs=core", "mark:completed", "complete"],
        ],
        "1.2": [["append:src/core.rs=more core", "git_commit:task 1.2", "mark:completed", "complete"]],
        "2.1": [["write:docs/guide.md=guide", "mark:completed", "complete"]],
        "3.1": [["write:api/routes.txt=routes", "mark:completed", "complete"]],
        "4.1": [["write:cli/main.txt=main", "mark:completed", "complete"]],
    }));
}

/// What every remote run of the four-lane change must leave.
fn assert_four_lanes_done(fx: &Fixture, remote: &Path, ev: &[Value]) {
    for id in ["1.1", "1.2", "2.1", "3.1", "4.1"] {
        assert_eq!(fx.status(id), "completed", "{id}: {}", fx.tasks_text());
    }
    assert_eq!(
        std::fs::read_to_string(fx.root.join("src/core.rs")).unwrap(),
        "coremore core\n"
    );
    for (path, text) in [
        ("docs/guide.md", "guide"),
        ("api/routes.txt", "routes"),
        ("cli/main.txt", "main"),
    ] {
        assert_eq!(
            std::fs::read_to_string(fx.root.join(path)).unwrap(),
            text,
            "{path}"
        );
    }
    assert!(!fx.root.join("wip").exists(), "the failed attempt's work is not merged");
    // The failed attempt was reverted on its lane; its work is kept under
    // refs there and here.
    let failed = of_kind(ev, "reverted");
    assert_eq!(failed.len(), 1, "{failed:#?}");
    assert_eq!(failed[0]["task"], "1.1");
    let local = failed[0]["failed_ref"].as_str().unwrap();
    assert_eq!(
        git(&fx.root, &["show", &format!("{local}:wip/1.1.txt")]),
        "failed work of 1.1"
    );
    let refs = remote_refs(remote);
    assert!(
        refs.iter()
            .any(|r| r.starts_with("refs/spectr/ralph/remote/") && r.ends_with("/1.1/1/failed")),
        "{refs:#?}"
    );
    // Each attempt's refs, and nothing else, on the remote.
    assert!(
        refs.iter().all(|r| r.starts_with("refs/spectr/ralph/remote/")),
        "{refs:#?}"
    );
    assert_eq!(
        refs.iter().filter(|r| r.ends_with("/result")).count(),
        6,
        "one result per attempt: {refs:#?}"
    );
    // The user's branch did not move; the agent's commit stays under refs.
    let subjects = git(&fx.root, &["log", "--format=%s", "HEAD"]);
    assert!(!subjects.contains("task 1.2"), "{subjects}");
}

#[test]
fn four_remote_lanes_run_every_task_and_merge_back() {
    let fx = Fixture::new(&four_lanes());
    with_spectr_on_path(&fx);
    four_lane_script(&fx);
    let remote = bare_remote(&fx);
    let clones = clones_dir(&fx);
    let exec = format!("TMPDIR='{}' {{cmd}}", clones.display());
    let mut cmd = fx.ralph();
    cmd.args(["--json", "--jobs", "4", "--max-retries", "1"])
        .args(["--lane-exec", &exec, "--lane-remote", remote.to_str().unwrap()]);
    let out = output_shown(cmd);
    let ev = events(&out);
    assert_eq!(out.status.code(), Some(0), "{}\n{ev:#?}", stderr_text(&out));
    assert_four_lanes_done(&fx, &remote, &ev);
    // The agents' stream came home.
    assert!(
        ev.iter()
            .any(|e| e["event"] == "agent_event" && e["task"] == "2.1"),
        "{ev:#?}"
    );
    let merged = of_kind(&ev, "merged");
    assert_eq!(merged.len(), 5, "{merged:#?}");
    assert!(
        std::fs::read_dir(&clones).unwrap().next().is_none(),
        "a worker left its clone behind"
    );
}
