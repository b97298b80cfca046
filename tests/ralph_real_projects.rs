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

/// Tasks 1.1 and 2.1 (two lanes) in a project whose ignored `.env` and
/// `node_modules/` are named by `.worktreeinclude`; `build.log` is ignored
/// but not named. `.gitignore` and `.worktreeinclude` are committed.
fn project_with_worktreeinclude() -> Fixture {
    let fx = Fixture::new(&tasks_v1(&[
        ("1.1", "Core", "pending"),
        ("2.1", "Docs", "pending"),
    ]));
    std::fs::write(fx.root.join(".gitignore"), ".env\nnode_modules/\n*.log\n").unwrap();
    std::fs::write(
        fx.root.join(".worktreeinclude"),
        "# for every lane\n.env\nnode_modules/\n",
    )
    .unwrap();
    git(&fx.root, &["add", ".gitignore", ".worktreeinclude"]);
    git(&fx.root, &["commit", "-qm", "ignore rules"]);
    std::fs::write(fx.root.join(".env"), "SECRET=1\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(fx.root.join(".env"), std::fs::Permissions::from_mode(0o600)).unwrap();
    std::fs::create_dir_all(fx.root.join("node_modules/x")).unwrap();
    std::fs::create_dir_all(fx.root.join("node_modules/.bin")).unwrap();
    std::fs::write(
        fx.root.join("node_modules/x/index.js"),
        "module.exports = 1;\n",
    )
    .unwrap();
    std::os::unix::fs::symlink("../x/index.js", fx.root.join("node_modules/.bin/x")).unwrap();
    std::fs::write(fx.root.join("build.log"), "user's log\n").unwrap();
    fx
}

/// Every path in every ref spectr keeps (checkpoints, failed attempts,
/// lanes' commits).
fn paths_in_spectr_refs(root: &Path) -> Vec<String> {
    let refs = git(
        root,
        &["for-each-ref", "--format=%(refname)", "refs/spectr/"],
    );
    refs.lines()
        .flat_map(|r| {
            git(root, &["ls-tree", "-r", "--name-only", r])
                .lines()
                .map(str::to_string)
                .collect::<Vec<_>>()
        })
        .collect()
}

/// The lines the agent events of `task` show (agent output and setup output).
fn lines_of(ev: &[Value], task: &str) -> Vec<String> {
    of_kind(ev, "agent_event")
        .into_iter()
        .filter(|a| a["task"] == task)
        .filter_map(|a| a["agent"]["line"].as_str().map(str::to_string))
        .collect()
}

fn notices(ev: &[Value]) -> Vec<String> {
    of_kind(ev, "notice")
        .into_iter()
        .map(|n| n["message"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn a_lane_gets_what_worktreeinclude_names_and_its_setup_runs_first_and_none_of_it_comes_back() {
    let fx = project_with_worktreeinclude();
    std::fs::write(
        fx.root.join("spectr.yaml"),
        "ralph:\n  lane_setup: \"echo setup in $(basename \\\"$PWD\\\"); cat .env; test -L node_modules/.bin/x && echo link kept; test -e build.log && echo log brought || echo no log\"\n",
    )
    .unwrap();
    fx.script(json!({
        // The agent edits the copied files and fails; its retry proves the
        // lane's copy is its own, then completes.
        "1.1": [
            ["write:.env=LANE EDIT\n", "write:node_modules/x/index.js=lane edit\n", "write:out/first.txt=1", "fail:first try"],
            ["copy:.env=out/lane-env-1.txt", "write:out/one.txt=one", "complete"]
        ],
        "2.1": [["copy:.env=out/lane-env-2.txt", "copy:node_modules/x/index.js=out/module-2.txt", "write:.env=LANE TWO\n", "complete"]]
    }));
    let out = fx.run(&["--json", "--jobs", "2", "--max-retries", "1"]);
    assert_eq!(out.status.code(), Some(0));
    let ev = events(&out);
    let mut got = started(&ev);
    got.sort();
    assert_eq!(got, ["1.1#1", "1.1#2", "2.1#1"]);

    // Each lane had the files, and the setup ran in it before its first task.
    for task in ["1.1", "2.1"] {
        let lines = lines_of(&ev, task);
        let setup: Vec<&str> = lines.iter().map(String::as_str).take(4).collect();
        assert_eq!(setup[1..], ["SECRET=1", "link kept", "no log"], "{lines:?}");
        assert!(setup[0].starts_with("setup in lane-"), "{lines:?}");
    }
    let brought: Vec<String> = notices(&ev)
        .into_iter()
        .filter(|n| n.contains("from .worktreeinclude"))
        .collect();
    assert_eq!(brought.len(), 2, "one notice per new lane: {brought:?}");
    for n in &brought {
        assert!(
            n.contains("brought .env, node_modules/ from .worktreeinclude (2 files")
                && n.contains("1 symlink"),
            "{n}"
        );
    }
    assert_eq!(
        notices(&ev)
            .iter()
            .filter(|n| n.contains("lane setup done"))
            .count(),
        2
    );
    // The setup ran before the task's agent: its notice comes first.
    let setup_at = ev
        .iter()
        .position(|e| {
            e["event"] == "notice" && e["message"].as_str().unwrap().contains("lane setup `")
        })
        .unwrap();
    let first_start = ev
        .iter()
        .position(|e| e["event"] == "task_started")
        .unwrap();
    assert!(setup_at < first_start);

    // The lanes' copies were their own: the user's files are untouched.
    assert_eq!(
        std::fs::read_to_string(fx.root.join(".env")).unwrap(),
        "SECRET=1\n"
    );
    assert_eq!(mode(&fx.root.join(".env")), 0o600);
    assert_eq!(
        std::fs::read_to_string(fx.root.join("node_modules/x/index.js")).unwrap(),
        "module.exports = 1;\n"
    );
    assert_eq!(
        std::fs::read_to_string(fx.root.join("out/lane-env-2.txt")).unwrap(),
        "SECRET=1\n"
    );
    assert_eq!(
        std::fs::read_to_string(fx.root.join("out/module-2.txt")).unwrap(),
        "module.exports = 1;\n"
    );
    // Within its lane the edit stayed (a revert leaves ignored files alone).
    assert_eq!(
        std::fs::read_to_string(fx.root.join("out/lane-env-1.txt")).unwrap(),
        "LANE EDIT\n"
    );
    assert!(
        !fx.root.join("out/first.txt").exists(),
        "the failed attempt was reverted"
    );

    // Never merged back, never in a checkpoint or a failed attempt's ref.
    for m in of_kind(&ev, "merged") {
        for f in m["files"].as_array().unwrap() {
            let f = f.as_str().unwrap();
            assert!(
                !f.starts_with(".env") && !f.starts_with("node_modules"),
                "{f} merged"
            );
        }
    }
    let kept = paths_in_spectr_refs(&fx.root);
    assert!(
        kept.iter().any(|p| p == "out/first.txt"),
        "the failed attempt is kept: {kept:?}"
    );
    assert!(
        !kept
            .iter()
            .any(|p| p.starts_with(".env") || p.starts_with("node_modules") || p.ends_with(".log")),
        "{kept:?}"
    );
    // And the agents were told about their lanes' learnings file.
    let prompt = fx.prompt("2.1", 1).unwrap();
    let lane = of_kind(&ev, "task_started")
        .into_iter()
        .find(|e| e["task"] == "2.1")
        .unwrap()["worktree"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        prompt.contains(&format!(
            "{lane}/spectr/changes/{CHANGE}/.ralph/learnings.md"
        )),
        "{prompt}"
    );
}

#[test]
fn a_failing_lane_setup_stops_the_run_with_its_output_and_burns_no_attempt() {
    let fx = project_with_worktreeinclude();
    fx.script(json!({"default": ["complete"]}));
    let out = fx.run(&[
        "--json",
        "--jobs",
        "2",
        "--lane-setup",
        "echo preparing; echo 'npm ERR! missing package-lock.json' >&2; exit 3",
    ]);
    assert_eq!(out.status.code(), Some(1), "spectr's own failure: exit 1");
    let ev = events(&out);
    assert!(started(&ev).is_empty(), "no agent ran");
    let errors: Vec<String> = of_kind(&ev, "error")
        .into_iter()
        .map(|e| e["message"].as_str().unwrap().to_string())
        .collect();
    assert!(
        errors
            .iter()
            .any(|e| e.contains("the lane setup `echo preparing;")
                && e.contains("exited with code 3")
                // Its stdout and stderr are two pipes: their lines may come
                // in either order.
                && e.contains("its last output:\n")
                && e.lines().any(|l| l == "preparing")
                && e.lines().any(|l| l == "npm ERR! missing package-lock.json")),
        "{errors:#?}"
    );
    assert!(
        lines_of(&ev, "1.1").contains(&"preparing".to_string()),
        "its output was shown"
    );
    assert_eq!(fx.status("1.1"), "pending");
    assert_eq!(fx.status("2.1"), "pending");
    let session = fx.session();
    for task in ["1.1", "2.1"] {
        let attempts = session["tasks"][task]["attempts"]
            .as_array()
            .map_or(0, Vec::len);
        assert_eq!(attempts, 0, "no attempt of {task} recorded: {session:#}");
    }

    // Fixed, the same run resumes with every task at its first attempt.
    let out = fx.run(&["--json", "--jobs", "2", "--lane-setup", "true"]);
    assert_eq!(out.status.code(), Some(0));
    let mut got = started(&events(&out));
    got.sort();
    assert_eq!(got, ["1.1#1", "2.1#1"], "the tasks were not burned");
}

#[test]
fn a_lane_setup_past_its_timeout_is_stopped_with_what_it_started() {
    let fx = Fixture::new(&tasks_v1(&[
        ("1.1", "Core", "pending"),
        ("2.1", "Docs", "pending"),
    ]));
    fx.script(json!({"default": ["complete"]}));
    let pids = fx.state.join("setup-pids");
    let cmd = format!(
        "echo waiting; sleep 300 & echo $! >> {}; wait",
        pids.display()
    );
    let out = fx.run(&[
        "--json",
        "--jobs",
        "2",
        "--lane-setup",
        &cmd,
        "--lane-setup-timeout",
        "1s",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let ev = events(&out);
    assert!(started(&ev).is_empty());
    let errors: Vec<String> = of_kind(&ev, "error")
        .into_iter()
        .map(|e| e["message"].as_str().unwrap().to_string())
        .collect();
    assert!(
        errors.iter().any(
            |e| e.contains("did not finish within --lane-setup-timeout 1s")
                && e.contains("waiting")
        ),
        "{errors:#?}"
    );
    let pids = pids_in(&pids);
    assert!(!pids.is_empty());
    for pid in pids {
        assert!(!alive(pid), "the setup's child {pid} was stopped");
    }
}

fn pids_in(file: &Path) -> Vec<i32> {
    std::fs::read_to_string(file)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect()
}

#[test]
fn the_lane_setup_is_in_the_dry_run_plan() {
    let fx = two_lane_fixture();
    std::fs::write(
        fx.root.join("spectr.yaml"),
        "ralph:\n  lane_setup: npm ci\n",
    )
    .unwrap();
    let out = fx.run(&["--dry-run", "--jobs", "2"]);
    assert_eq!(out.status.code(), Some(0));
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(text.contains("lane setup `npm ci`"), "{text}");
    // One job: no lanes, no lane setup.
    let out = fx.run(&["--dry-run"]);
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(!text.contains("lane setup"), "{text}");
}

fn two_lane_fixture() -> Fixture {
    Fixture::new(&tasks_v1(&[
        ("1.1", "Core", "pending"),
        ("2.1", "Docs", "pending"),
    ]))
}

#[test]
fn a_quit_during_the_lane_setup_stops_it_like_an_agent_and_the_resume_sets_the_lane_up_again() {
    let fx = two_lane_fixture();
    fx.script(json!({"default": ["complete"]}));
    let pids = fx.state.join("setup-pids");
    let ready = fx.state.join("setup-ready");
    let cmd = format!(
        "echo $$ >> {p}; sleep 300 & echo $! >> {p}; [ -e {r} ] || touch {r}; wait",
        p = pids.display(),
        r = ready.display()
    );
    let mut ralph = fx.ralph();
    ralph
        .args(["--json", "--jobs", "2", "--lane-setup", &cmd])
        .stdout(std::process::Stdio::piped());
    let run = Background::spawn(ralph);
    fx.wait_for("the lane setup to run", || ready.exists());
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(run.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let out = run.wait_with_output();
    assert_eq!(out.status.code(), Some(130));
    assert!(started(&events(&out)).is_empty(), "no agent started");
    let pids = pids_in(&pids);
    assert!(pids.len() >= 2, "{pids:?}");
    for pid in pids {
        assert!(!alive(pid), "{pid} of the setup was stopped");
    }
    // Resumed: the lanes are new again, so the setup runs again first.
    let out = fx.run(&["--json", "--jobs", "2", "--lane-setup", "echo set up again"]);
    assert_eq!(out.status.code(), Some(0));
    let ev = events(&out);
    let mut got = started(&ev);
    got.sort();
    assert_eq!(got, ["1.1#1", "2.1#1"]);
    assert!(lines_of(&ev, "1.1").contains(&"set up again".to_string()));
}
