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
        .filter(|l| !l.ends_with("(by the agent)") && !l.ends_with("(while the agent ran)"))
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
                // Alive a moment after planting: a planted command that runs
                // meanwhile is told apart (see `planted_ran`).
                "sleep:300",
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
    // A second run over the planted repository: new checkpoints and, with
    // lanes, `git worktree add` again (it runs post-checkout unless told not
    // to). The tasks file is reset by hand, uncommitted.
    std::fs::write(fx.change_dir.join("tasks.jsonc"), two_lanes()).unwrap();
    let out = fx.run(&["--jobs", jobs, "--fresh", "--on-exhaust", "abort"]);
    assert!(out.status.success(), "{}", stderr_text(&out));
    assert_eq!(fx.status("2.1"), "completed");
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

/// bubblewrap can start a sandbox here; otherwise says why, loudly (past
/// the test harness's capture), and fails where a sandbox was promised:
/// `SPECTR_REQUIRE_SANDBOX` set (`.ci/run` sets it where bubblewrap can
/// start one).
fn sandbox_works() -> bool {
    let tried = std::process::Command::new("bwrap")
        .args(["--ro-bind", "/", "/", "--dev", "/dev", "--", "true"])
        .output();
    let why = match tried {
        Ok(out) if out.status.success() => return true,
        Ok(out) => format!(
            "bwrap cannot start a sandbox (user namespaces off?): {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ),
        Err(e) => format!("bwrap is not installed ({e}): apt-get install bubblewrap"),
    };
    assert!(
        !sandbox_required(|k| std::env::var(k).ok()),
        "a sandbox is required here (SPECTR_REQUIRE_SANDBOX) and {why}"
    );
    // `eprintln!` is captured for a passing test; stderr's own handle is not.
    use std::io::Write;
    let _ = writeln!(
        std::io::stderr(),
        "\n*** SANDBOX TEST SKIPPED ({}): {why} ***\n",
        std::thread::current().name().unwrap_or("?")
    );
    false
}

/// Whether the environment promises a working sandbox, so that a sandbox
/// test must fail rather than skip.
fn sandbox_required(var: impl Fn(&str) -> Option<String>) -> bool {
    var("SPECTR_REQUIRE_SANDBOX").is_some_and(|v| !v.is_empty())
}

#[test]
fn spectr_require_sandbox_makes_a_missing_sandbox_fail() {
    let env = |pairs: &'static [(&'static str, &'static str)]| {
        move |k: &str| {
            pairs
                .iter()
                .find(|(name, _)| *name == k)
                .map(|(_, v)| v.to_string())
        }
    };
    assert!(sandbox_required(env(&[("SPECTR_REQUIRE_SANDBOX", "1")])));
    assert!(!sandbox_required(env(&[])));
    assert!(!sandbox_required(env(&[("CI", "true")])));
    assert!(!sandbox_required(env(&[("SPECTR_REQUIRE_SANDBOX", "")])));
}

/// A project outside /tmp whose runs use `--sandbox` as `args` say, with the
/// fake agent's state folder writable (`sandbox_writable`) and `$HOME` a
/// folder of the fixture's.
struct Escape {
    fx: Fixture,
    home: std::path::PathBuf,
}

impl Escape {
    fn new() -> Escape {
        let fx = Fixture::outside_tmp(&two_lanes());
        let home = fx.root.parent().unwrap().join("home");
        std::fs::create_dir_all(&home).unwrap();
        std::fs::write(
            fx.root.join("spectr.yaml"),
            format!("ralph:\n  sandbox_writable: [{}]\n", fx.state.display()),
        )
        .unwrap();
        git(&fx.root, &["add", "spectr.yaml"]);
        git(&fx.root, &["commit", "-qm", "spectr.yaml"]);
        fx.script(json!({
            "default": [
                "write:work-{task}.txt=done {task}",
                "git_commit:work {task}",
                "escape:escape-{task}.txt",
                "mark:completed",
                "complete"
            ]
        }));
        Escape { fx, home }
    }

    fn run(&self, extra: &[&str]) -> std::process::Output {
        let mut cmd = self.fx.ralph();
        cmd.env("HOME", &self.home).args(extra);
        output_shown(cmd)
    }

    /// The agent's report for `task`: attempt name to "written"/"blocked".
    fn report(&self, task: &str) -> std::collections::BTreeMap<String, String> {
        let text = std::fs::read_to_string(self.fx.root.join(format!("escape-{task}.txt")))
            .unwrap_or_else(|e| panic!("no escape report for {task}: {e}"));
        text.lines()
            .filter_map(|l| l.split_once(": "))
            .map(|(k, v)| (k.to_owned(), v.split(' ').next().unwrap_or("").to_owned()))
            .collect()
    }

    /// Files named `spectr-escape-*` in `dir` (what an escape left there).
    fn left_in(dir: &Path) -> Vec<String> {
        let mut found: Vec<String> = std::fs::read_dir(dir)
            .map(|d| {
                d.filter_map(Result::ok)
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .filter(|n| n.starts_with("spectr-escape-"))
                    .collect()
            })
            .unwrap_or_default();
        found.sort();
        found
    }

    fn cleanup_etc() {
        for name in Escape::left_in(Path::new("/etc")) {
            let _ = std::fs::remove_file(Path::new("/etc").join(name));
        }
    }
}

fn sandboxed_escapes_all_fail(jobs: &str) {
    if !sandbox_works() {
        return;
    }
    let e = Escape::new();
    let out = e.run(&["--sandbox", "--jobs", jobs]);
    Escape::cleanup_etc();
    let said = stdout_text(&out) + &stderr_text(&out);
    assert!(out.status.success(), "{said}");
    let mut other_lane_tried = false;
    for task in ["1.1", "2.1"] {
        assert_eq!(e.fx.status(task), "completed", "{said}");
        // The task's real work landed, and the agent's commit worked.
        assert_eq!(
            std::fs::read_to_string(e.fx.root.join(format!("work-{task}.txt"))).unwrap(),
            format!("done {task}")
        );
        let mut report = e.report(task);
        // The one write a writable git folder allows in the user's tree: a
        // `commondir` (nothing can stand in its place: git fails on an empty
        // one, or a folder). spectr removes it while the agent still runs,
        // and says so.
        if jobs == "1" {
            assert_eq!(report.remove("git_commondir").as_deref(), Some("written"));
            assert_eq!(
                report.remove("commondir_removed").as_deref(),
                Some("while-running")
            );
            assert!(said.contains("commondir"), "{said}");
        }
        let written: Vec<_> = report.iter().filter(|(_, v)| *v != "blocked").collect();
        assert!(written.is_empty(), "{task} escaped: {report:?}\n{said}");
        for attempt in [
            "home",
            "beside",
            "etc",
            "git_config",
            "git_hook",
            "git_modules",
            "git_rename",
            "checkpoint_ref",
            "refs_rename",
            "session",
            "lock",
            "control_socket",
            "change_rename",
        ] {
            assert!(
                report.contains_key(attempt),
                "{attempt} not tried: {report:?}"
            );
        }
        if jobs != "1" {
            assert!(report.contains_key("main_tree"), "{report:?}");
            other_lane_tried |= report.contains_key("other_lane");
        }
    }
    // Each lane lives from before its agent starts to the run's end, so the
    // agent that tries last finds the other's lane.
    assert_eq!(other_lane_tried, jobs != "1", "another lane was not tried");
    // The agents' own commits happened (in a lane too: its HEAD and index
    // are writable), and are in the history the run leaves.
    let log = git(&e.fx.root, &["log", "--format=%s", "--all"]);
    for task in ["1.1", "2.1"] {
        assert!(
            log.contains(&format!("work {task}")),
            "the agent's commit for {task}: {log}\n{said}"
        );
    }
    // And on disk: nothing outside the work trees changed.
    assert_eq!(Escape::left_in(&e.home), Vec::<String>::new());
    assert_eq!(
        Escape::left_in(e.fx.root.parent().unwrap()),
        Vec::<String>::new()
    );
    assert_eq!(Escape::left_in(&e.fx.root), Vec::<String>::new());
    let config = std::fs::read_to_string(e.fx.root.join(".git/config")).unwrap();
    assert!(!config.contains("spectr-escape"), "{config}");
    assert!(!e.fx.root.join(".git/hooks/post-checkout").exists());
    assert!(!e.fx.root.join(".git/modules/spectr-escape").exists());
    assert!(!e.fx.root.join(".git/commondir").exists());
    // The user's next git command runs nothing planted.
    git(&e.fx.root, &["status", "--short"]);
    assert!(!e.fx.root.join("spectr-escape-fsmonitor").exists());
}

#[test]
fn sandboxed_agent_escapes_all_fail_in_the_users_tree() {
    sandboxed_escapes_all_fail("1");
}

#[test]
fn sandboxed_agent_escapes_all_fail_in_lanes() {
    sandboxed_escapes_all_fail("2");
}

/// Without `--sandbox` the same agent reaches what its user can: what the
/// README's table says for "no sandbox".
#[test]
fn without_the_sandbox_the_escapes_succeed() {
    let e = Escape::new();
    let out = e.run(&["--jobs", "1"]);
    Escape::cleanup_etc();
    assert!(out.status.success(), "{}", stderr_text(&out));
    let report = e.report("1.1");
    for attempt in [
        "home",
        "beside",
        "git_config",
        "git_hook",
        "git_modules",
        "git_rename",
        "checkpoint_ref",
        "refs_rename",
        "session",
        "lock",
        "change_rename",
        "git_commondir",
    ] {
        assert_eq!(report[attempt], "written", "{report:?}");
    }
    // spectr removes a planted `commondir` while the agent runs, sandbox
    // or not.
    assert_eq!(report["commondir_removed"], "while-running", "{report:?}");
    assert!(!e.fx.root.join(".git/commondir").exists());
    // The planted fsmonitor runs at the user's next `git status`.
    git(&e.fx.root, &["status", "--short"]);
    assert!(e.fx.root.join("spectr-escape-fsmonitor").exists());
}

#[test]
fn no_bubblewrap_is_refused_before_anything_starts() {
    let fx = Fixture::new(&two_lanes());
    let mut cmd = fx.ralph();
    // Only the agent on PATH: no bwrap to find.
    cmd.env("PATH", &fx.bin).arg("--sandbox");
    let out = output_shown(cmd);
    assert_eq!(out.status.code(), Some(2), "{}", stderr_text(&out));
    let err = stderr_text(&out);
    assert!(err.contains("bubblewrap"), "{err}");
    assert!(err.contains("apt-get install bubblewrap"), "{err}");
    assert!(!fx.session_path().exists(), "nothing may start");
    assert_eq!(fx.status("1.1"), "pending");
}

/// bubblewrap installed but unable to start a sandbox (a kernel without
/// unprivileged user namespaces): refused before anything starts, naming
/// the settings to check. A stand-in `bwrap` fails as bubblewrap does there.
#[test]
fn user_namespaces_off_is_refused_before_anything_starts() {
    let fx = Fixture::new(&two_lanes());
    let bwrap = fx.bin.join("bwrap");
    std::fs::write(
        &bwrap,
        "#!/bin/sh
         [ \"$1\" = --version ] && { echo 'bubblewrap 0.8.0'; exit 0; }
         echo \"bwrap: No permissions to creating new namespace, likely because the kernel          does not allow non-privileged user namespaces. On e.g. debian this can be enabled          with 'sysctl kernel.unprivileged_userns_clone=1'.\" >&2
         exit 1
",
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&bwrap, std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut cmd = fx.ralph();
    // The stand-in first on PATH, ahead of any real bubblewrap.
    let path = format!(
        "{}:{}",
        fx.bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    cmd.env("PATH", path).arg("--sandbox");
    let out = output_shown(cmd);
    let err = stderr_text(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("cannot start a sandbox here"), "{err}");
    assert!(
        err.contains("No permissions to creating new namespace"),
        "{err}"
    );
    assert!(err.contains("kernel.unprivileged_userns_clone"), "{err}");
    assert!(err.contains("user.max_user_namespaces"), "{err}");
    assert!(!fx.session_path().exists(), "nothing may start");
    assert_eq!(fx.status("1.1"), "pending");
}

#[test]
fn the_plan_says_whether_the_sandbox_is_on() {
    let fx = Fixture::new(&two_lanes());
    let out = fx.run(&["--dry-run"]);
    let text = stdout_text(&out) + &stderr_text(&out);
    assert!(text.contains("Sandbox: off"), "{text}");
    assert!(text.contains("--sandbox"), "{text}");
    if !sandbox_works() {
        return;
    }
    let mut cmd = fx.ralph();
    cmd.env("HOME", &fx.state).args(["--dry-run", "--sandbox"]);
    let out = output_shown(cmd);
    let text = stdout_text(&out) + &stderr_text(&out);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("Sandbox: on (bubblewrap "), "{text}");
    assert!(
        text.contains(&format!("{}/.claude", fx.state.display())),
        "the agent's own folder is writable: {text}"
    );
}

#[test]
fn json_run_started_carries_the_sandbox() {
    if !sandbox_works() {
        return;
    }
    let e = Escape::new();
    e.fx.script(json!({"default": ["mark:completed", "complete"]}));
    let out = e.run(&["--sandbox", "--json"]);
    assert!(out.status.success(), "{}", stderr_text(&out));
    let events = events(&out);
    let started = of_kind(&events, "run_started");
    let sandbox = &started[0]["sandbox"];
    assert_eq!(sandbox["tool"], "bubblewrap", "{started:?}");
    assert!(sandbox["version"].as_str().is_some_and(|v| !v.is_empty()));
    assert_eq!(sandbox["network"], true);
    let writable = sandbox["writable"].to_string();
    assert!(
        writable.contains(&e.fx.state.display().to_string()),
        "{writable}"
    );
}

/// `--verify` and `--lane-setup` run in the sandbox too: each tries to
/// write beside its work tree (a run whose setup could would stop), and with
/// `sandbox_network: false` sees no network but loopback.
#[test]
fn verify_and_lane_setup_are_sandboxed_and_the_network_can_be_cut() {
    if !sandbox_works() {
        return;
    }
    let e = Escape::new();
    std::fs::write(
        e.fx.root.join("spectr.yaml"),
        format!(
            "ralph:\n  sandbox_writable: [{}]\n  sandbox_network: false\n",
            e.fx.state.display()
        ),
    )
    .unwrap();
    git(&e.fx.root, &["commit", "-qam", "no network"]);
    e.fx.script(json!({"default": ["write:work-{task}.txt=x", "mark:completed", "complete"]}));
    let only_loopback = "[ \"$(grep -c : /proc/net/dev)\" -eq 1 ]";
    let setup = format!("! touch ../spectr-escape-setup 2>/dev/null && {only_loopback}");
    let verify = format!(
        "! touch ../spectr-escape-verify 2>/dev/null && {only_loopback} && touch verified-here"
    );
    let out = e.run(&[
        "--sandbox",
        "--jobs",
        "2",
        "--lane-setup",
        &setup,
        "--verify",
        &verify,
        "--max-retries",
        "0",
    ]);
    let said = stdout_text(&out) + &stderr_text(&out);
    assert!(out.status.success(), "{said}");
    assert_eq!(e.fx.status("1.1"), "completed", "{said}");
    assert_eq!(e.fx.status("2.1"), "completed", "{said}");
    // Verify wrote its own work tree (merged back with the task's work).
    assert!(e.fx.root.join("verified-here").exists(), "{said}");
    assert_eq!(
        Escape::left_in(e.fx.root.parent().unwrap()),
        Vec::<String>::new()
    );
    assert_eq!(Escape::left_in(&e.fx.lanes_home()), Vec::<String>::new());
}

/// A project and an agent under /tmp still run: the private /tmp shows the
/// work tree (writable) and the agent's folder (read-only).
#[test]
fn a_project_under_tmp_runs_sandboxed() {
    if !sandbox_works() {
        return;
    }
    let fx = Fixture::new(&two_lanes());
    std::fs::write(
        fx.root.join("spectr.yaml"),
        format!("ralph:\n  sandbox_writable: [{}]\n", fx.state.display()),
    )
    .unwrap();
    fx.script(json!({"default": ["write:work-{task}.txt=x", "mark:completed", "complete"]}));
    let mut cmd = fx.ralph();
    cmd.env("HOME", &fx.state).arg("--sandbox");
    let out = output_shown(cmd);
    assert!(out.status.success(), "{}", stderr_text(&out));
    assert_eq!(fx.status("2.1"), "completed");
    assert!(fx.root.join("work-2.1.txt").exists());
}

/// A sandboxed agent that hangs is stopped at its timeout like any other:
/// bubblewrap and the agent inside it are gone when the run ends.
#[test]
fn a_hanging_sandboxed_agent_is_stopped() {
    if !sandbox_works() {
        return;
    }
    let e = Escape::new();
    e.fx.script(json!({"1.1": ["hang"], "default": ["mark:completed", "complete"]}));
    let out = e.run(&[
        "--sandbox",
        "--task-timeout",
        "2s",
        "--kill-grace",
        "1s",
        "--max-retries",
        "0",
        "--on-exhaust",
        "skip",
    ]);
    let said = stdout_text(&out) + &stderr_text(&out);
    assert!(said.contains("timed out"), "{said}");
    let agents = pids(&e.fx.state, "agents.pid");
    assert!(!agents.is_empty(), "the agent recorded its pid: {said}");
    for pid in agents {
        assert!(!alive(pid), "agent {pid} outlived the run");
    }
}

/// The commands for agents work inside the sandbox: `spectr task done`
/// writes the tasks file (in the work tree), `spectr context` reads.
#[test]
fn spectr_commands_work_inside_the_sandbox() {
    if !sandbox_works() {
        return;
    }
    let e = Escape::new();
    with_spectr_on_path(&e.fx);
    // No completion signal: the status written by `spectr task done` completes it.
    e.fx.script(json!({"default": ["context", "task_done", "result:done"]}));
    let out = e.run(&["--sandbox"]);
    let said = stdout_text(&out) + &stderr_text(&out);
    assert!(out.status.success(), "{said}");
    assert_eq!(e.fx.status("1.1"), "completed", "{said}");
    assert_eq!(e.fx.status("2.1"), "completed", "{said}");
    let context = std::fs::read_to_string(e.fx.state.join("context/1.1-1.txt")).unwrap();
    assert!(context.contains("1.1"), "{context}");
}

/// `spectr learn` works inside the sandbox, where spectr's learnings file is
/// read-only: the learning reaches the file and the later tasks' prompts.
fn spectr_learn_works_sandboxed(jobs: &str) {
    if !sandbox_works() {
        return;
    }
    let e = Escape::new();
    with_spectr_on_path(&e.fx);
    e.fx.script(json!({
        "1.1": ["learn:run make gen first", "mark:completed", "complete"],
        "default": ["mark:completed", "complete"]
    }));
    let out = e.run(&["--sandbox", "--jobs", jobs, "--json"]);
    let said = stdout_text(&out) + &stderr_text(&out);
    assert!(out.status.success(), "{said}");
    let learned: Vec<String> = of_kind(&events(&out), "learning")
        .iter()
        .map(|l| format!("{} {}", l["task"], l["text"]))
        .collect();
    assert_eq!(learned, ["\"1.1\" \"run make gen first\""], "{said}");
    let file =
        std::fs::read_to_string(e.fx.change_dir.join(".ralph/learnings.md")).unwrap_or_default();
    assert!(
        file.contains("- [1.1] run make gen first"),
        "{file}\n{said}"
    );
    if jobs == "1" {
        // 2.1 runs after 1.1 and is told.
        let prompt = e.fx.prompt("2.1", 1).unwrap();
        assert!(prompt.contains("run make gen first"), "{prompt}");
    }
}

#[test]
fn spectr_learn_works_sandboxed_in_the_users_tree() {
    spectr_learn_works_sandboxed("1");
}

#[test]
fn spectr_learn_works_sandboxed_in_lanes() {
    spectr_learn_works_sandboxed("2");
}

// Issue 31: what a run needs from the real /tmp, which the sandbox's private
// /tmp hides: the agent's installation, spectr itself, the files the agent's
// variables name, and a TMPDIR.

/// A folder right under the real `/tmp` (not `$TMPDIR`, which may be
/// elsewhere), removed when dropped.
fn in_real_tmp() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("spectr-issue31-")
        .tempdir_in("/tmp")
        .unwrap()
}

fn executable(path: &Path, text: &str) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

fn symlink(target: impl AsRef<Path>, link: &Path) {
    std::fs::create_dir_all(link.parent().unwrap()).unwrap();
    std::os::unix::fs::symlink(target, link).unwrap();
}

/// An npm-like package `fake-agent` whose launcher (`bin/claude.js`, a shell
/// script) finds its platform package `fake-agent-linux-x64` as Node would
/// (a `node_modules` folder above it) and runs the fake agent from there;
/// each real attempt first makes a file in `$TMPDIR` (codex's own sandbox
/// panics when it cannot). `package` is the package's folder.
fn fake_npm_package(package: &Path, platform_in: &Path) {
    executable(
        &package.join("bin/claude.js"),
        r#"#!/bin/sh
here=$(dirname "$(readlink -f "$0")")
d=$here
while [ "$d" != / ]; do
  platform="$d/node_modules/fake-agent-linux-x64/bin/claude"
  if [ -x "$platform" ]; then
    if [ "$1" != --version ]; then
      mktemp -p "$TMPDIR" >/dev/null || { echo "TMPDIR $TMPDIR is missing" >&2; exit 101; }
    fi
    exec "$platform" "$@"
  fi
  d=$(dirname "$d")
done
echo "Missing optional dependency fake-agent-linux-x64" >&2
exit 1
"#,
    );
    std::fs::write(package.join("package.json"), "{\"name\": \"fake-agent\"}\n").unwrap();
    // A copy, as npm installs one: a link to cargo's target folder would
    // lead out of the installation (and be hidden when that folder is
    // itself under /tmp, a clone there).
    let platform = platform_in.join("fake-agent-linux-x64/bin/claude");
    std::fs::create_dir_all(platform.parent().unwrap()).unwrap();
    std::fs::copy(fake_agent_bin(), &platform).unwrap();
}

/// The agent installed under a /tmp folder as `layout` says, its TMPDIR
/// there too (pam_tmpdir's `/tmp/user/<uid>`): the run completes, and the
/// agent's TMPDIR is its own (nothing reaches the real one).
fn an_agent_under_tmp_runs_sandboxed(layout: &str) {
    if !sandbox_works() {
        return;
    }
    let e = Escape::new();
    e.fx.script(json!({"default": ["write:work-{task}.txt=x", "mark:completed", "complete"]}));
    let tmp = in_real_tmp();
    let t = tmp.path();
    let bin = match layout {
        // `npm install` in a folder: `node_modules/.bin/claude` links to the
        // package, its platform package a sibling.
        "local" => {
            let modules = t.join("node_modules");
            fake_npm_package(&modules.join("fake-agent"), &modules);
            symlink("../fake-agent/bin/claude.js", &modules.join(".bin/claude"));
            modules.join(".bin")
        }
        // `npm install -g --prefix`: `prefix/bin/claude` links to
        // `../lib/node_modules/fake-agent/bin/claude.js`, the platform
        // package inside the package's own `node_modules`.
        _ => {
            let package = t.join("prefix/lib/node_modules/fake-agent");
            fake_npm_package(&package, &package.join("node_modules"));
            symlink(
                "../lib/node_modules/fake-agent/bin/claude.js",
                &t.join("prefix/bin/claude"),
            );
            t.join("prefix/bin")
        }
    };
    let tmpdir = t.join("user/0");
    std::fs::create_dir_all(&tmpdir).unwrap();
    let mut cmd = e.fx.ralph();
    cmd.env("HOME", &e.home)
        .env("PATH", format!("{}:{}", bin.display(), e.fx.path_env()))
        .env("TMPDIR", &tmpdir)
        .args(["--sandbox", "--max-retries", "0"]);
    let out = output_shown(cmd);
    let said = stdout_text(&out) + &stderr_text(&out);
    assert!(out.status.success(), "{said}");
    assert_eq!(e.fx.status("1.1"), "completed", "{said}");
    assert_eq!(e.fx.status("2.1"), "completed", "{said}");
    let left: Vec<_> = std::fs::read_dir(&tmpdir).unwrap().collect();
    assert!(left.is_empty(), "the agent's TMPDIR is its own: {left:?}");
}

#[test]
fn an_agent_installed_under_tmp_runs_sandboxed() {
    an_agent_under_tmp_runs_sandboxed("local");
}

#[test]
fn an_agent_installed_with_an_npm_prefix_under_tmp_runs_sandboxed() {
    an_agent_under_tmp_runs_sandboxed("prefix");
}

/// spectr itself under /tmp (a copy, reached through a link on PATH): the
/// agent inside the sandbox runs `spectr task done`.
#[test]
fn spectr_under_tmp_is_seen_by_the_agent() {
    if !sandbox_works() {
        return;
    }
    let e = Escape::new();
    e.fx.script(json!({"default": ["task_done", "result:done"]}));
    let tmp = in_real_tmp();
    let real = tmp.path().join("spectr-1.0/spectr");
    std::fs::create_dir_all(real.parent().unwrap()).unwrap();
    // A hard link where /tmp is on the same file system, else a copy.
    if std::fs::hard_link(spectr_bin(), &real).is_err() {
        std::fs::copy(spectr_bin(), &real).unwrap();
    }
    let on_path = tmp.path().join("bin");
    symlink("../spectr-1.0/spectr", &on_path.join("spectr"));
    let mut cmd = e.fx.ralph_at(&on_path.join("spectr"));
    cmd.env("HOME", &e.home)
        .env("PATH", format!("{}:{}", on_path.display(), e.fx.path_env()))
        .args(["--sandbox", "--max-retries", "0"]);
    let out = output_shown(cmd);
    let said = stdout_text(&out) + &stderr_text(&out);
    assert!(out.status.success(), "{said}");
    assert_eq!(e.fx.status("1.1"), "completed", "{said}");
    assert_eq!(e.fx.status("2.1"), "completed", "{said}");
}

/// A config file the agent's variable names under /tmp (`OPENCODE_CONFIG`,
/// how opencode finds its provider) is seen inside the sandbox, read-only.
#[test]
fn a_config_file_an_agent_variable_names_under_tmp_is_seen_read_only() {
    if !sandbox_works() {
        return;
    }
    let e = Escape::new();
    with_spectr_on_path(&e.fx);
    // An opencode that needs its config, marks its task done and says so
    // as opencode does.
    executable(
        &e.fx.bin.join("opencode"),
        r#"#!/bin/sh
[ "$1" = --version ] && { echo 1.18.33; exit 0; }
cat "$OPENCODE_CONFIG" >/dev/null || exit 1
if (echo >>"$OPENCODE_CONFIG") 2>/dev/null; then echo "$OPENCODE_CONFIG is writable" >&2; exit 3; fi
spectr task done "$SPECTR_RALPH_TASK" >&2 || exit 4
echo '{"type":"text","sessionID":"s","part":{"type":"text","text":"done <promise>COMPLETE</promise>"}}'
"#,
    );
    let tmp = in_real_tmp();
    let config = tmp.path().join("opencode.json");
    std::fs::write(&config, "{\"provider\": {}}\n").unwrap();
    let mut cmd = e.fx.spectr();
    cmd.env("HOME", &e.home)
        .env("NO_COLOR", "1")
        .env("OPENCODE_CONFIG", &config)
        .args(["ralph", common::CHANGE, "--agent", "opencode"])
        .args([
            "--completion-grace",
            "1s",
            "--sandbox",
            "--max-retries",
            "0",
        ]);
    let out = output_shown(cmd);
    let said = stdout_text(&out) + &stderr_text(&out);
    assert!(out.status.success(), "{said}");
    assert_eq!(e.fx.status("1.1"), "completed", "{said}");
    assert_eq!(e.fx.status("2.1"), "completed", "{said}");
    assert_eq!(
        std::fs::read_to_string(&config).unwrap(),
        "{\"provider\": {}}\n"
    );
}

/// The preflight asks the agent's version inside the sandbox: an agent that
/// works outside but not inside (its launcher runs a program from another
/// /tmp folder, which the sandbox does not show) stops the run before any
/// attempt, saying what to do (exit 2).
#[test]
fn a_setup_the_sandbox_breaks_stops_the_run_before_any_attempt() {
    if !sandbox_works() {
        return;
    }
    let e = Escape::new();
    e.fx.script(json!({"default": ["mark:completed", "complete"]}));
    let tmp = in_real_tmp();
    let elsewhere = in_real_tmp();
    let real = elsewhere.path().join("lib/claude");
    symlink(fake_agent_bin(), &real);
    let bin = tmp.path().join("bin");
    executable(
        &bin.join("claude"),
        &format!("#!/bin/sh\nexec {} \"$@\"\n", real.display()),
    );
    let mut cmd = e.fx.ralph();
    cmd.env("HOME", &e.home)
        .env("PATH", format!("{}:{}", bin.display(), e.fx.path_env()))
        .args(["--sandbox", "--max-retries", "0"]);
    let out = output_shown(cmd);
    let err = stderr_text(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("inside the sandbox"), "{err}");
    assert!(
        err.contains(&bin.join("claude").display().to_string()),
        "{err}"
    );
    assert!(err.contains("outside /tmp"), "{err}");
    assert!(!e.fx.session_path().exists(), "nothing may start");
    assert_eq!(e.fx.prompt("1.1", 1), None, "no attempt may run");
    assert_eq!(e.fx.status("1.1"), "pending");
}

/// A remote lane's worker (here run on this machine through `{cmd}`)
/// sandboxes its agent as the coordinator would: a write outside the
/// attempt's work tree fails, one inside it lands.
#[test]
fn a_remote_lanes_agent_is_sandboxed_by_its_worker() {
    if !sandbox_works() {
        return;
    }
    let fx = Fixture::outside_tmp(&tasks_v1(&[("1.1", "Core", "pending")]));
    with_spectr_on_path(&fx);
    let outside = fx.root.parent().unwrap().join("escaped.txt");
    fx.script(json!({"1.1": [[
        format!("write:{}=escaped", outside.display()),
        "write:src/core.rs=core",
        "complete"
    ]]}));
    // The worker reads the project's settings from its clone: committed.
    std::fs::write(
        fx.root.join("spectr.yaml"),
        format!("ralph:\n  sandbox_writable: [{}]\n", fx.state.display()),
    )
    .unwrap();
    git(&fx.root, &["add", "spectr.yaml"]);
    git(&fx.root, &["commit", "-qm", "settings"]);
    let remote = fx.root.parent().unwrap().join("remote.git");
    git(
        fx.root.parent().unwrap(),
        &["init", "-q", "--bare", remote.to_str().unwrap()],
    );
    let mut cmd = fx.ralph();
    cmd.args([
        "--json",
        "--sandbox",
        "--lane-exec",
        "{cmd}",
        "--lane-remote",
        remote.to_str().unwrap(),
    ]);
    let out = output_shown(cmd);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_text(&out));
    assert!(
        !outside.exists(),
        "the remote lane's agent wrote outside its work tree"
    );
    assert_eq!(
        std::fs::read_to_string(fx.root.join("src/core.rs")).unwrap(),
        "core"
    );
}
