//! Issue 18, items 3 and 4: what a real project's tools see in a lane.
//! An agent whose runtime trusts `$PWD` (a Python script, not started
//! through a shell), ignored files a lane needs (`.worktreeinclude`) and a
//! lane setup command.

mod common;

use common::*;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};

/// A stand-in agent that is not started through a shell and trusts `$PWD`,
/// as Node and Python tools do: it writes its work relative to `$PWD` and
/// fails its first attempt at each task. It records `$PWD` and its real
/// working folder per attempt in `$PWD_AGENT_STATE`.
const PWD_AGENT: &str = r#"
import os, re, sys
prompt = sys.stdin.read()
task = re.search(r"^Task ID: (\S+)", prompt, re.M).group(1)
pwd = os.environ["PWD"]
state = os.environ["PWD_AGENT_STATE"]
count = os.path.join(state, "count-" + task)
n = int(open(count).read()) + 1 if os.path.exists(count) else 1
open(count, "w").write(str(n))
open(os.path.join(state, "seen-%s-%d" % (task, n)), "w").write(pwd + "\n" + os.getcwd() + "\n")
print("PWD=" + pwd, flush=True)
open(os.path.join(pwd, "work-%s-%d.txt" % (task, n)), "w").write("attempt %d of %s\n" % (n, task))
if n == 1:
    print("<promise>FAILED: the first attempt fails</promise>")
else:
    print("<promise>COMPLETE</promise>")
"#;

/// The Python interpreter itself: `python3` on PATH may be a shell script
/// (pyenv's shim), and a shell puts `PWD` right before Python starts.
fn python() -> String {
    let out = std::process::Command::new("python3")
        .args(["-c", "import sys; print(sys.executable)"])
        .output()
        .expect("python3 is installed (the stand-in agent is a Python script)");
    assert!(out.status.success());
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

/// Installs [`PWD_AGENT`] on the fixture's PATH; returns its state folder.
fn install_pwd_agent(fx: &Fixture) -> PathBuf {
    let path = fx.bin.join("pwd-agent");
    std::fs::write(&path, format!("#!{}{PWD_AGENT}", python())).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    let state = fx.state.join("pwd-agent");
    std::fs::create_dir_all(&state).unwrap();
    state
}

/// `spectr ralph` with the PWD agent, started in `dir` the way a shell
/// starts it (`PWD` names `dir`).
fn pwd_agent_run(fx: &Fixture, dir: &Path, state: &Path, extra: &[&str]) -> std::process::Output {
    let mut cmd = fx.spectr();
    cmd.current_dir(dir)
        .env("PWD", dir)
        .env("PWD_AGENT_STATE", state)
        .env("NO_COLOR", "1")
        .args(["ralph", CHANGE, "--agent-cmd", "pwd-agent", "--json"])
        .args(["--max-retries", "1"])
        .args(extra)
        .stdin(std::process::Stdio::null());
    output_shown(cmd)
}

/// (`$PWD`, real working folder) the agent saw at `task`'s attempt `n`.
fn seen(state: &Path, task: &str, n: u32) -> (String, String) {
    let text = std::fs::read_to_string(state.join(format!("seen-{task}-{n}")))
        .unwrap_or_else(|e| panic!("attempt {n} of {task} ran: {e}"));
    let mut lines = text.lines().map(str::to_string);
    (lines.next().unwrap(), lines.next().unwrap())
}

fn canonical(p: &Path) -> String {
    p.canonicalize().unwrap().display().to_string()
}

#[test]
fn an_agent_trusting_pwd_works_in_its_lane_and_a_failed_attempt_never_reaches_the_user() {
    let fx = Fixture::new(&tasks_v1(&[
        ("1.1", "Core", "pending"),
        ("2.1", "Docs", "pending"),
    ]));
    let state = install_pwd_agent(&fx);
    let out = pwd_agent_run(&fx, &fx.root, &state, &["--jobs", "2"]);
    assert_eq!(out.status.code(), Some(0));
    let ev = events(&out);
    let mut got = started(&ev);
    got.sort();
    assert_eq!(got, ["1.1#1", "1.1#2", "2.1#1", "2.1#2"]);
    for task in ["1.1", "2.1"] {
        assert!(
            !fx.root.join(format!("work-{task}-1.txt")).exists(),
            "the failed attempt's file of {task} is not in the user's tree"
        );
        assert_eq!(
            std::fs::read_to_string(fx.root.join(format!("work-{task}-2.txt"))).unwrap(),
            format!("attempt 2 of {task}\n"),
            "the second attempt's work was merged"
        );
        for e in of_kind(&ev, "task_started")
            .into_iter()
            .filter(|e| e["task"] == task)
        {
            let n = e["attempt"].as_u64().unwrap() as u32;
            let lane = e["worktree"].as_str().unwrap();
            let (pwd, cwd) = seen(&state, task, n);
            assert_eq!(pwd, lane, "$PWD of {task}#{n} is its lane");
            assert_eq!(cwd, lane, "its working folder too (lanes have real paths)");
            let printed: Vec<String> = of_kind(&ev, "agent_event")
                .into_iter()
                .filter(|a| a["task"] == task && a["attempt"] == n)
                .filter_map(|a| a["agent"]["line"].as_str().map(str::to_string))
                .filter(|l| l.starts_with("PWD="))
                .collect();
            assert_eq!(printed, [format!("PWD={lane}")]);
        }
    }
}

#[test]
fn an_agent_in_the_user_tree_gets_pwd_set_to_its_working_folder() {
    let fx = Fixture::new(&tasks_v1(&[("1.1", "Core", "pending")]));
    let state = install_pwd_agent(&fx);
    // Started from a subfolder: the agent works at the project root.
    let sub = fx.root.join("spectr");
    let out = pwd_agent_run(&fx, &sub, &state, &[]);
    assert_eq!(out.status.code(), Some(0));
    for n in [1, 2] {
        let (pwd, cwd) = seen(&state, "1.1", n);
        assert_eq!(pwd, canonical(&fx.root), "$PWD of attempt {n}");
        assert_eq!(cwd, canonical(&fx.root));
    }
    assert!(!fx.root.join("work-1.1-1.txt").exists(), "reverted");
    assert!(!sub.join("work-1.1-1.txt").exists(), "never written there");
    assert!(fx.root.join("work-1.1-2.txt").exists());
}
