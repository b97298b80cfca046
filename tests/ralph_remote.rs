//! Lanes on other machines (issue 25): `--lane-exec` runs each attempt
//! through a command that starts `spectr lane-worker` elsewhere, with the
//! work going by way of a git remote.
//!
//! Two engines here: the exec template run directly (`{cmd}`: the worker on
//! this machine, through a bare repository as the remote), and real `ssh`
//! to 127.0.0.1 (an sshd the test starts on a port of its own, with a key
//! made for it). The ssh tests need openssh-server: `.ci/run` installs it
//! and then requires them (`SPECTR_REQUIRE_SSH`); without it they say so
//! loudly and skip.

mod common;

use common::*;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};

/// The run's `lane lost:` lines.
fn lost_lanes(ev: &[Value]) -> Vec<String> {
    of_kind(ev, "notice")
        .iter()
        .filter_map(|n| n["message"].as_str())
        .filter(|m| m.starts_with("lane lost:"))
        .map(str::to_string)
        .collect()
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
        "2.1": [["write:docs/guide.md=guide", "learn:docs live in docs/", "mark:completed", "complete"]],
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
    assert!(
        !fx.root.join("wip").exists(),
        "the failed attempt's work is not merged"
    );
    // A remote agent's learning comes home once, into the change's file.
    let learned = of_kind(ev, "learning");
    assert_eq!(learned.len(), 1, "{learned:#?}");
    assert_eq!(learned[0]["task"], "2.1");
    let file = std::fs::read_to_string(fx.change_dir.join(".ralph/learnings.md")).unwrap();
    assert_eq!(file.matches("docs live in docs/").count(), 1, "{file}");
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
        refs.iter()
            .all(|r| r.starts_with("refs/spectr/ralph/remote/")),
        "{refs:#?}"
    );
    assert_eq!(
        refs.iter().filter(|r| r.ends_with("/result")).count(),
        6,
        "one result per attempt: {refs:#?}"
    );
    // One commit of spectr's per task on the user's branch (`--commit
    // task`, the default); the agent's own commit stays under refs.
    let subjects = git(&fx.root, &["log", "--format=%s", "HEAD"]);
    assert!(!subjects.lines().any(|s| s == "task 1.2"), "{subjects}");
    for id in ["1.1", "1.2", "2.1", "3.1", "4.1"] {
        let want = format!("{id} Do task {id}");
        assert_eq!(
            subjects.lines().filter(|s| *s == want).count(),
            1,
            "{subjects}"
        );
    }
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
        .args([
            "--lane-exec",
            &exec,
            "--lane-remote",
            remote.to_str().unwrap(),
        ])
        // A credential in spectr's environment: the engine's to pass on
        // (here the worker inherits it), never spectr's to write down.
        .env("ANTHROPIC_API_KEY", "sk-ant-test-secret-4711");
    let out = output_shown(cmd);
    let ev = events(&out);
    assert_eq!(out.status.code(), Some(0), "{}\n{ev:#?}", stderr_text(&out));
    assert_four_lanes_done(&fx, &remote, &ev);
    let secret = "sk-ant-test-secret-4711";
    assert!(!stdout_text(&out).contains(secret) && !stderr_text(&out).contains(secret));
    for file in files_under(&fx.change_dir.join(".ralph")) {
        let text = String::from_utf8_lossy(&std::fs::read(&file).unwrap()).into_owned();
        assert!(
            !text.contains(secret),
            "{} holds the credential",
            file.display()
        );
    }
    let objects = git(&remote, &["log", "--all", "-p", "--format=%B"]);
    assert!(!objects.contains(secret), "the remote holds the credential");
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

/// An sshd on 127.0.0.1 for one test: its own port, host key and client
/// key; stopped when dropped.
struct Sshd {
    child: std::process::Child,
    port: u16,
    key: PathBuf,
    _dir: tempfile::TempDir,
}

impl Drop for Sshd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// sshd, or why not: a test that cannot run says so, and fails where it
/// must run (CI, or `SPECTR_REQUIRE_SSH=1`).
fn sshd() -> Option<Sshd> {
    let sshd = Path::new("/usr/sbin/sshd");
    let have = sshd.exists() && which("ssh").is_some() && which("ssh-keygen").is_some();
    if !have {
        // `.ci/run` sets it once it installed them.
        let required = std::env::var_os("SPECTR_REQUIRE_SSH").is_some();
        let why = "SKIPPED: no sshd/ssh/ssh-keygen here (Debian: apt-get install openssh-server openssh-client)";
        assert!(!required, "{why}");
        eprintln!("\n*** {why} ***\n");
        return None;
    }
    let dir = tempfile::tempdir().unwrap();
    let keygen = |path: &Path| {
        let ok = std::process::Command::new("ssh-keygen")
            .args(["-q", "-t", "ed25519", "-N", "", "-f"])
            .arg(path)
            .status()
            .unwrap()
            .success();
        assert!(ok, "ssh-keygen");
    };
    let host = dir.path().join("host_key");
    let key = dir.path().join("id");
    keygen(&host);
    keygen(&key);
    let authorized = dir.path().join("authorized_keys");
    std::fs::copy(dir.path().join("id.pub"), &authorized).unwrap();
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let config = dir.path().join("sshd_config");
    std::fs::write(
        &config,
        format!(
            "Port {port}\nListenAddress 127.0.0.1\nHostKey {}\nAuthorizedKeysFile {}\nPidFile {}\nStrictModes no\nUsePAM no\nPasswordAuthentication no\nKbdInteractiveAuthentication no\nPubkeyAuthentication yes\nPermitRootLogin prohibit-password\nLogLevel ERROR\n",
            host.display(),
            authorized.display(),
            dir.path().join("sshd.pid").display()
        ),
    )
    .unwrap();
    // Its privilege separation needs this folder when it runs as root (a
    // user who is not cannot make it, and sshd does not need it then).
    let _ = std::fs::create_dir_all("/run/sshd");
    let child = std::process::Command::new(sshd)
        .args(["-D", "-e", "-f"])
        .arg(&config)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(std::time::Instant::now() < deadline, "sshd never listened");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    Some(Sshd {
        child,
        port,
        key,
        _dir: dir,
    })
}

fn which(program: &str) -> Option<PathBuf> {
    std::env::var_os("PATH")?
        .to_str()?
        .split(':')
        .map(|d| Path::new(d).join(program))
        .find(|p| p.is_file())
}

impl Sshd {
    /// The lanes' exec template: ssh to 127.0.0.1, the worker in the
    /// fixture's environment (a real host would have spectr and the agent
    /// on its PATH, and the agent's credentials from ssh's environment).
    fn exec(&self, fx: &Fixture, clones: &Path) -> String {
        format!(
            "ssh -o BatchMode=yes -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR -i {} -p {} 127.0.0.1 \"cd /tmp && PATH='{}' SPECTR_FAKE_SCRIPT='{}' SPECTR_FAKE_STATE='{}' TMPDIR='{}' {{cmd}}\"",
            self.key.display(),
            self.port,
            fx.path_env(),
            fx.state.join("script.json").display(),
            fx.state.display(),
            clones.display()
        )
    }

    /// The sshd processes serving connections now (children of the
    /// listener): killing one cuts that connection.
    fn connections(&self) -> Vec<i32> {
        let me = self.child.id() as i32;
        std::fs::read_dir("/proc")
            .unwrap()
            .flatten()
            .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
            .filter(|pid| {
                std::fs::read_to_string(format!("/proc/{pid}/stat"))
                    .ok()
                    .and_then(|s| {
                        let after = s.rsplit_once(')')?.1;
                        after.split_whitespace().nth(1)?.parse::<i32>().ok()
                    })
                    == Some(me)
            })
            .collect()
    }
}

fn remote_run(fx: &Fixture, exec: &str, remote: &Path, extra: &[&str]) -> std::process::Command {
    let mut cmd = fx.ralph();
    cmd.args(["--json", "--jobs", "4"])
        .args([
            "--lane-exec",
            exec,
            "--lane-remote",
            remote.to_str().unwrap(),
        ])
        .args(extra);
    cmd
}

#[test]
fn four_lanes_over_ssh_run_every_task_and_leave_only_refs_behind() {
    let Some(sshd) = sshd() else { return };
    let fx = Fixture::new(&four_lanes());
    with_spectr_on_path(&fx);
    four_lane_script(&fx);
    let remote = bare_remote(&fx);
    let clones = clones_dir(&fx);
    let out = output_shown(remote_run(
        &fx,
        &sshd.exec(&fx, &clones),
        &remote,
        &["--max-retries", "1"],
    ));
    let ev = events(&out);
    assert_eq!(out.status.code(), Some(0), "{}\n{ev:#?}", stderr_text(&out));
    assert_four_lanes_done(&fx, &remote, &ev);
    assert!(
        std::fs::read_dir(&clones).unwrap().next().is_none(),
        "a worker left its clone behind"
    );
}

/// The ssh connection of a running attempt is cut (its sshd process
/// killed): the lane is lost, not the attempt. It runs there again without
/// using a retry, and the run completes with nothing lost.
#[test]
fn a_cut_ssh_connection_loses_the_lane_and_the_attempt_runs_again() {
    let Some(sshd) = sshd() else { return };
    let fx = Fixture::new(&four_lanes());
    with_spectr_on_path(&fx);
    let sync = fx.state.join("sync");
    std::fs::create_dir_all(&sync).unwrap();
    let (waiting, go) = (sync.join("waiting"), sync.join("go"));
    fx.script(json!({
        "1.1": [["write:src/core.rs=core", "mark:completed", "complete"]],
        "1.2": [["append:src/core.rs=more core", "mark:completed", "complete"]],
        "2.1": [
            [format!("touch:{}", waiting.display()), format!("wait_for:{}:60", go.display()),
             "write:docs/guide.md=from the lost lane".to_string(), "mark:completed".to_string(), "complete".to_string()],
            ["write:docs/guide.md=guide", "mark:completed", "complete"],
        ],
        "3.1": [["write:api/routes.txt=routes", "mark:completed", "complete"]],
        "4.1": [["write:cli/main.txt=main", "mark:completed", "complete"]],
    }));
    let remote = bare_remote(&fx);
    let clones = clones_dir(&fx);
    let mut cmd = remote_run(
        &fx,
        &sshd.exec(&fx, &clones),
        &remote,
        &["--max-retries", "0"],
    );
    cmd.stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let run = cmd.spawn().unwrap();
    fx.wait_for("task 2.1's agent to start", || waiting.exists());
    // Every connection open now is cut; 2.1's is one of them (the others'
    // tasks are quick: they may be lost and run again too, or be done).
    let cut = sshd.connections();
    assert!(!cut.is_empty(), "no ssh connection to cut");
    for pid in cut {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
    let out = run.wait_with_output().unwrap();
    let ev = events(&out);
    assert_eq!(out.status.code(), Some(0), "{}\n{ev:#?}", stderr_text(&out));
    let lost = lost_lanes(&ev);
    assert!(
        lost.iter().any(|m| m.contains("attempt 1 of task 2.1")),
        "{lost:#?}"
    );
    // No retry used: one attempt, completed.
    let done = of_kind(&ev, "task_completed");
    let of_21: Vec<&Value> = done.iter().filter(|e| e["task"] == "2.1").collect();
    assert_eq!(of_21.len(), 1, "{done:#?}");
    assert_eq!(of_21[0]["attempt"], 1);
    assert_eq!(
        std::fs::read_to_string(fx.root.join("docs/guide.md")).unwrap(),
        "guide"
    );
    for id in ["1.1", "1.2", "2.1", "3.1", "4.1"] {
        assert_eq!(fx.status(id), "completed", "{id}");
    }
    // The cut worker goes on to its end and pushes its work under refs of
    // its own try: nothing is lost, and it leaves no clone behind.
    std::fs::write(&go, "").unwrap();
    fx.wait_for("the cut worker to push its work and end", || {
        std::fs::read_dir(&clones).unwrap().next().is_none()
            && remote_refs(&remote)
                .iter()
                .filter(|r| r.contains("/2.1/1") && r.ends_with("/result"))
                .count()
                == 2
    });
}

/// spectr dies while a remote attempt runs; its worker goes on and pushes
/// its work. The resume fetches that work and merges it: the agent does
/// not run again.
#[test]
fn a_resume_fetches_work_a_remote_lane_finished_after_the_coordinator_died() {
    let Some(sshd) = sshd() else { return };
    let fx = Fixture::new(&tasks_v1(&[
        ("1.1", "Core", "pending"),
        ("2.1", "Docs", "pending"),
    ]));
    with_spectr_on_path(&fx);
    let sync = fx.state.join("sync");
    std::fs::create_dir_all(&sync).unwrap();
    let (waiting, go) = (sync.join("waiting"), sync.join("go"));
    fx.script(json!({
        "1.1": [["write:src/core.rs=core", "mark:completed", "complete"]],
        "2.1": [[format!("touch:{}", waiting.display()), format!("wait_for:{}:60", go.display()),
                 "write:docs/guide.md=guide".to_string(), "mark:completed".to_string(), "complete".to_string()]],
    }));
    let remote = bare_remote(&fx);
    let clones = clones_dir(&fx);
    let exec = sshd.exec(&fx, &clones);
    let mut cmd = remote_run(&fx, &exec, &remote, &[]);
    cmd.stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    let mut run = cmd.spawn().unwrap();
    fx.wait_for("task 2.1's agent to start", || waiting.exists());
    fx.wait_for("task 1.1 to be merged", || {
        fx.root.join("src/core.rs").exists()
    });
    let _ = run.kill();
    let _ = run.wait();
    std::fs::write(&go, "").unwrap();
    fx.wait_for("the worker to push its work", || {
        remote_refs(&remote)
            .iter()
            .any(|r| r.contains("/2.1/1") && r.ends_with("/result"))
            && std::fs::read_dir(&clones).unwrap().next().is_none()
    });
    let out = output_shown(remote_run(&fx, &exec, &remote, &["--resume"]));
    let ev = events(&out);
    assert_eq!(out.status.code(), Some(0), "{}\n{ev:#?}", stderr_text(&out));
    assert!(
        of_kind(&ev, "notice").iter().any(|n| n["message"]
            .as_str()
            .is_some_and(|m| m.contains("went on in its remote lane"))),
        "{ev:#?}"
    );
    assert!(fx.prompt("2.1", 2).is_none(), "the agent ran again");
    assert_eq!(
        std::fs::read_to_string(fx.root.join("docs/guide.md")).unwrap(),
        "guide"
    );
    assert_eq!(fx.status("2.1"), "completed");
    assert_eq!(fx.status("1.1"), "completed");
}

#[test]
fn remote_lanes_are_refused_before_anything_starts_when_they_cannot_work() {
    let fx = Fixture::new(&four_lanes());
    with_spectr_on_path(&fx);
    let run = |args: &[&str]| {
        let mut cmd = fx.ralph();
        cmd.args(["--yes"]).args(args);
        output_shown(cmd)
    };
    let out = run(&["--lane-exec", "ssh b{lane} {cmd}"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr_text(&out).contains("--lane-exec (ralph: lanes: exec) needs --lane-remote"));
    let out = run(&[
        "--lane-exec",
        "ssh b{lane}",
        "--lane-remote",
        "/nowhere.git",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr_text(&out).contains("has no {cmd}"),
        "{}",
        stderr_text(&out)
    );
    let gone = fx.root.parent().unwrap().join("no-such-remote.git");
    let out = run(&[
        "--lane-exec",
        "{cmd}",
        "--lane-remote",
        gone.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr_text(&out));
    let err = stderr_text(&out);
    assert!(
        err.contains(&format!(
            "the lanes' remote {} cannot be reached from here",
            gone.display()
        )),
        "{err}"
    );
    assert!(fx.prompt("1.1", 1).is_none(), "nothing started");
    // From spectr.yaml, and told in the plan.
    let remote = bare_remote(&fx);
    std::fs::write(
        fx.root.join("spectr.yaml"),
        format!(
            "ralph:\n  lanes:\n    exec: \"{{cmd}}\"\n    remote: {}\n",
            remote.display()
        ),
    )
    .unwrap();
    let out = run(&["--dry-run"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_text(&out));
    let text = stdout_text(&out);
    assert!(
        text.contains(&format!(
            "Remote lanes: each attempt runs through `{{cmd}}`, its work by way of {}",
            remote.display()
        )),
        "{text}"
    );
}

/// A worker started by hand with no work order says what it is for.
#[test]
fn the_lane_worker_without_an_order_says_who_starts_it() {
    let fx = Fixture::new(&four_lanes());
    let out = spectr(&fx, &["lane-worker"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr_text(&out).contains("it is started by `spectr ralph --lane-exec`"),
        "{}",
        stderr_text(&out)
    );
    // Hidden from the help.
    let help = stdout_text(&spectr(&fx, &["--help"]));
    assert!(!help.contains("lane-worker"), "{help}");
}

/// An engine that loses every attempt (here: a template whose command is
/// missing) stops the run after three losses of one attempt, saying why,
/// with the session kept; no retry was used.
#[test]
fn an_engine_that_loses_every_attempt_stops_the_run() {
    let fx = Fixture::new(&tasks_v1(&[("1.1", "Core", "pending")]));
    fx.script(json!({"1.1": [["mark:completed", "complete"]]}));
    let remote = bare_remote(&fx);
    let out = output_shown(remote_run(
        &fx,
        "no-such-engine-here {cmd}",
        &remote,
        &["--max-retries", "5"],
    ));
    let ev = events(&out);
    assert_eq!(out.status.code(), Some(1), "{ev:#?}");
    let lost = lost_lanes(&ev);
    assert_eq!(lost.len(), 2, "{ev:#?}");
    for m in lost {
        assert!(
            m.contains("exit 127") && m.contains("no-such-engine-here"),
            "{m}"
        );
    }
    let failed = of_kind(&ev, "task_failed");
    assert_eq!(failed.len(), 1, "one attempt, no retry: {failed:#?}");
    let detail = failed[0]["outcome"]["detail"].as_str().unwrap();
    assert!(detail.contains("was lost 3 times"), "{detail}");
    assert!(fx.session_path().is_file(), "the session is kept");
}

/// One remote lane at a time (`--jobs 1`): the tasks run there in order and
/// their statuses are written here.
#[test]
fn one_remote_lane_runs_the_tasks_in_order() {
    let fx = Fixture::new(&tasks_v1(&[
        ("1.1", "Core", "pending"),
        ("1.2", "Core", "pending"),
    ]));
    with_spectr_on_path(&fx);
    fx.script(json!({
        "1.1": [["write:src/core.rs=core", "complete"]],
        "1.2": [["append:src/core.rs=more", "mark:completed", "complete"]],
    }));
    let remote = bare_remote(&fx);
    let mut cmd = fx.ralph();
    cmd.args([
        "--json",
        "--lane-exec",
        "{cmd}",
        "--lane-remote",
        remote.to_str().unwrap(),
    ]);
    let out = output_shown(cmd);
    let ev = events(&out);
    assert_eq!(out.status.code(), Some(0), "{}\n{ev:#?}", stderr_text(&out));
    assert_eq!(fx.status("1.1"), "completed");
    assert_eq!(fx.status("1.2"), "completed");
    assert_eq!(
        std::fs::read_to_string(fx.root.join("src/core.rs")).unwrap(),
        "coremore\n"
    );
    assert_eq!(started(&ev), ["1.1#1", "1.2#1"]);
}

/// Two remote lanes append to one file from the same start: one merges,
/// the other conflicts, and its resolve attempt runs remotely with its
/// previous work applied again and the markers labelled in words.
#[test]
fn a_conflict_between_remote_lanes_is_resolved_remotely() {
    let fx = Fixture::new(&tasks_v1(&[
        ("1.1", "Core", "pending"),
        ("2.1", "Docs", "pending"),
    ]));
    with_spectr_on_path(&fx);
    std::fs::write(fx.root.join("NOTES.md"), "# Notes\n").unwrap();
    git(&fx.root, &["add", "NOTES.md"]);
    git(&fx.root, &["commit", "-qm", "notes"]);
    let sync = fx.state.join("sync");
    std::fs::create_dir_all(&sync).unwrap();
    let steps = |me: &str, other: &str| {
        json!([
            [
                format!("touch:{}", sync.join(me).display()),
                format!("wait_for:{}:30", sync.join(other).display()),
                format!("append:NOTES.md=- note from {me}"),
                "mark:completed",
                "complete"
            ],
            ["resolve:NOTES.md", "mark:completed", "complete"]
        ])
    };
    fx.script(json!({"1.1": steps("one", "two"), "2.1": steps("two", "one")}));
    let remote = bare_remote(&fx);
    let out = output_shown(remote_run(&fx, "{cmd}", &remote, &["--max-retries", "0"]));
    let ev = events(&out);
    assert_eq!(out.status.code(), Some(0), "{}\n{ev:#?}", stderr_text(&out));
    let failed = of_kind(&ev, "task_failed");
    assert_eq!(failed.len(), 1, "{failed:#?}");
    assert_eq!(failed[0]["outcome"]["kind"], "conflict");
    let loser = failed[0]["task"].as_str().unwrap();
    let prompt = fx.prompt(loser, 2).expect("a resolve attempt");
    assert!(
        prompt.contains("<<<<<<< the project now")
            && prompt.contains(&format!(">>>>>>> your previous work on task {loser}")),
        "{prompt}"
    );
    let notes = std::fs::read_to_string(fx.root.join("NOTES.md")).unwrap();
    assert!(
        !notes.contains("<<<<<<<") && !notes.contains(">>>>>>>"),
        "{notes}"
    );
    for me in ["one", "two"] {
        assert_eq!(
            notes.matches(&format!("- note from {me}")).count(),
            1,
            "{notes}"
        );
    }
    assert_eq!(fx.status("1.1"), "completed");
    assert_eq!(fx.status("2.1"), "completed");
}

/// Every file below `dir`.
fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                todo.push(p);
            } else {
                out.push(p);
            }
        }
    }
    out
}

/// SIGTERM to spectr while a remote attempt runs: the worker is told to
/// stop (a control line), stops its agent, keeps its work under refs and
/// pushes it; the run ends as any stopped run (exit 130, session kept), and
/// no worker is left running.
#[test]
fn stopping_the_run_stops_the_remote_attempt_and_keeps_its_work() {
    let fx = Fixture::new(&tasks_v1(&[("1.1", "Core", "pending")]));
    with_spectr_on_path(&fx);
    let sync = fx.state.join("sync");
    std::fs::create_dir_all(&sync).unwrap();
    let waiting = sync.join("waiting");
    fx.script(json!({"1.1": [[
        "write:src/half.rs=half done",
        format!("touch:{}", waiting.display()),
        format!("wait_for:{}:60", sync.join("never").display()),
        "complete".to_string()
    ]]}));
    let remote = bare_remote(&fx);
    let clones = clones_dir(&fx);
    let exec = format!("TMPDIR='{}' {{cmd}}", clones.display());
    let mut cmd = remote_run(&fx, &exec, &remote, &[]);
    cmd.stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let run = cmd.spawn().unwrap();
    fx.wait_for("the agent to start", || waiting.exists());
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(run.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let out = run.wait_with_output().unwrap();
    let ev = events(&out);
    assert_eq!(
        out.status.code(),
        Some(130),
        "{}\n{ev:#?}",
        stderr_text(&out)
    );
    let failed = of_kind(&ev, "task_failed");
    assert_eq!(failed.len(), 1, "{failed:#?}");
    assert_eq!(failed[0]["outcome"]["kind"], "stopped");
    let kept = of_kind(&ev, "reverted");
    assert_eq!(kept.len(), 1, "{ev:#?}");
    let local = kept[0]["failed_ref"].as_str().unwrap();
    assert_eq!(
        git(&fx.root, &["show", &format!("{local}:src/half.rs")]),
        "half done"
    );
    assert!(!fx.root.join("src/half.rs").exists());
    assert!(fx.session_path().is_file());
    assert!(
        std::fs::read_dir(&clones).unwrap().next().is_none(),
        "the worker left its clone behind"
    );
}

/// An engine that goes silent (a command that never ends and never speaks,
/// as a connection held open across a network partition) is not waited for
/// forever: past the attempt's limit its command is stopped and the lane
/// counts as lost.
#[test]
fn a_silent_engine_is_stopped_and_its_lane_lost() {
    let fx = Fixture::new(&tasks_v1(&[("1.1", "Core", "pending")]));
    fx.script(json!({"1.1": [["mark:completed", "complete"]]}));
    let remote = bare_remote(&fx);
    let marker = fx.state.join("engine-pids");
    let exec = format!("echo $$ >> '{}'; sleep 600; {{cmd}}", marker.display());
    let mut cmd = remote_run(&fx, &exec, &remote, &[]);
    // Its worker never starts: queued forever, as far as the run knows.
    cmd.env("SPECTR_TEST_REMOTE_QUEUE_MS", "700");
    let out = output_shown(cmd);
    let ev = events(&out);
    assert_eq!(out.status.code(), Some(1), "{ev:#?}");
    let lost = lost_lanes(&ev);
    assert_eq!(lost.len(), 2, "{lost:#?}");
    assert!(
        lost[0].contains("its worker did not start within"),
        "{lost:#?}"
    );
    // Every engine command it started is gone.
    let pids = std::fs::read_to_string(&marker).unwrap();
    for pid in pids.lines() {
        let pid: i32 = pid.trim().parse().unwrap();
        assert!(
            !std::path::Path::new(&format!("/proc/{pid}")).exists()
                || std::fs::read_to_string(format!("/proc/{pid}/stat"))
                    .is_ok_and(|s| s.contains(") Z ")),
            "engine command {pid} is still running"
        );
    }
}

/// An engine that holds the attempt in its queue (here: a `sleep` before
/// the worker starts) longer than the attempt's own limits: the wait is
/// said and counts against none of them; the lane is not lost.
#[test]
fn queue_time_is_not_work_time() {
    let fx = Fixture::new(&tasks_v1(&[("1.1", "Core", "pending")]));
    with_spectr_on_path(&fx);
    fx.script(json!({"1.1": [["write:src/core.rs=core", "mark:completed", "complete"]]}));
    let remote = bare_remote(&fx);
    let mut cmd = remote_run(&fx, "sleep 5; {cmd}", &remote, &[]);
    // Without the queue apart, 4 s from the start would lose the lane.
    cmd.env("SPECTR_TEST_REMOTE_LIMIT_MS", "4000")
        .env("SPECTR_TEST_REMOTE_QUEUED_AFTER_MS", "300");
    let out = output_shown(cmd);
    let ev = events(&out);
    assert_eq!(out.status.code(), Some(0), "{ev:#?}");
    assert!(lost_lanes(&ev).is_empty(), "{ev:#?}");
    let queued = ev
        .iter()
        .position(|e| e["event"] == "attempt_queued" && e["task"] == "1.1")
        .expect("said queued");
    let running = ev
        .iter()
        .position(|e| e["event"] == "attempt_running" && e["task"] == "1.1")
        .expect("said running");
    assert!(queued < running);
    assert!(
        ev[running]["queued_ms"].as_u64().unwrap() >= 300,
        "{:?}",
        ev[running]
    );
    assert!(ev[running]["host"].is_string(), "{:?}", ev[running]);
    assert_eq!(fx.status("1.1"), "completed");
    // The report tells the queue apart.
    let report = spectr(&fx, &["report", CHANGE]);
    assert!(
        stdout_text(&report).contains("in its engine's queue"),
        "{}",
        stdout_text(&report)
    );
}

/// While its engine holds the attempt, `spectr status` says so (human and
/// `--json`); once its worker starts, the attempt is at work again there.
#[test]
fn status_shows_an_attempt_queued_by_its_engine() {
    let fx = Fixture::new(&tasks_v1(&[("1.1", "Core", "pending")]));
    with_spectr_on_path(&fx);
    fx.script(json!({"1.1": [["write:src/core.rs=core", "mark:completed", "complete"]]}));
    let remote = bare_remote(&fx);
    let go = fx.state.join("go");
    let exec = format!(
        "while [ ! -e '{}' ]; do sleep 0.05; done; {{cmd}}",
        go.display()
    );
    let mut cmd = remote_run(&fx, &exec, &remote, &[]);
    cmd.env("SPECTR_TEST_REMOTE_QUEUED_AFTER_MS", "100");
    let mut run = JsonRun::spawn(cmd);
    run.until("the attempt said queued", |seen| {
        seen.iter().any(|e| e["event"] == "attempt_queued")
    });
    let json = spectr(&fx, &["status", CHANGE, "--json"]);
    let st: Value = serde_json::from_str(stdout_text(&json).trim()).unwrap();
    assert_eq!(st["running"], json!([["1.1", 1]]), "{st}");
    assert!(st["queued"]["1.1"].is_string(), "{st}");
    let human = stdout_text(&spectr(&fx, &["status", CHANGE]));
    assert!(
        human.contains("Working on: 1.1 (attempt 1, queued by its lane's engine since"),
        "{human}"
    );
    std::fs::write(&go, "").unwrap();
    run.until("the worker's start", |seen| {
        seen.iter().any(|e| e["event"] == "attempt_running")
    });
    let json = spectr(&fx, &["status", CHANGE, "--json"]);
    let st: Value = serde_json::from_str(stdout_text(&json).trim()).unwrap();
    assert_eq!(st["queued"], json!({}), "{st}");
    run.until("the summary", |seen| {
        seen.iter().any(|e| e["event"] == "summary")
    });
    assert_eq!(run.run.wait().code(), Some(0), "{:#?}", run.seen);
    assert_eq!(fx.status("1.1"), "completed");
}
