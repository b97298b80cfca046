//! A scratch spectr project in a git repository, and `spectr ralph` driven with
//! the fake agent standing in for `claude` (a PATH shim), so the loop reads real
//! Claude stream-json.
#![allow(dead_code)]

// Helpers of one kind of test each; shared ones live here, at the root.
pub mod browser;
pub mod checkpoint;
pub mod cli;
pub mod model;
pub mod pty;
pub mod screen;
pub mod slurm;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

pub const CHANGE: &str = "add-widget";

pub fn spectr_bin() -> &'static str {
    env!("CARGO_BIN_EXE_spectr")
}

pub fn fake_agent_bin() -> &'static str {
    env!("CARGO_BIN_EXE_spectr-fake-agent")
}

/// A v1 tasks file with the given (id, section, status) tasks.
pub fn tasks_v1(tasks: &[(&str, &str, &str)]) -> String {
    let entries: Vec<String> = tasks
        .iter()
        .map(|(id, section, status)| {
            format!(
                "    {{\n      \"id\": \"{id}\",\n      \"section\": \"{section}\",\n      \"description\": \"Do task {id}\",\n      \"status\": \"{status}\"\n    }}"
            )
        })
        .collect();
    format!(
        "// Spectr Tasks File (JSONC)\n{{\n  \"version\": 1,\n  \"tasks\": [\n{}\n  ]\n}}\n",
        entries.join(",\n")
    )
}

pub struct Fixture {
    _dir: tempfile::TempDir,
    pub root: PathBuf,
    pub change_dir: PathBuf,
    pub state: PathBuf,
    pub bin: PathBuf,
}

impl Fixture {
    pub fn new(tasks_jsonc: &str) -> Fixture {
        Fixture::with_files(&[("tasks.jsonc", tasks_jsonc)], true)
    }

    /// `files` are written into the change folder; `git` makes it a committed repo.
    pub fn with_files(files: &[(&str, &str)], git_repo: bool) -> Fixture {
        Fixture::in_dir(tempfile::tempdir().expect("tempdir"), files, git_repo)
    }

    /// A committed project outside `/tmp`, as a user's project is: a
    /// sandbox's private `/tmp` would hide it. Under cargo's target folder,
    /// unless that is itself under `/tmp` (a clone there): then `/var/tmp`,
    /// else the home folder's cache.
    pub fn outside_tmp(tasks_jsonc: &str) -> Fixture {
        let dir = tempfile::tempdir_in(outside_tmp_base()).expect("tempdir");
        Fixture::in_dir(dir, &[("tasks.jsonc", tasks_jsonc)], true)
    }

    fn in_dir(dir: tempfile::TempDir, files: &[(&str, &str)], git_repo: bool) -> Fixture {
        let root = dir.path().join("project");
        let change_dir = root.join("spectr/changes").join(CHANGE);
        std::fs::create_dir_all(change_dir.join("specs/widgets")).unwrap();
        std::fs::write(root.join("spectr/project.md"), "# Project\n").unwrap();
        std::fs::write(
            change_dir.join("proposal.md"),
            "# Change: Add widget\n\nPROPOSAL-MARKER\n",
        )
        .unwrap();
        std::fs::write(change_dir.join("design.md"), "DESIGN-MARKER\n").unwrap();
        std::fs::write(
            change_dir.join("specs/widgets/spec.md"),
            "## ADDED Requirements\n\n### Requirement: Widget\nSPEC-MARKER\n",
        )
        .unwrap();
        for (name, text) in files {
            let p = change_dir.join(name);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, text).unwrap();
        }
        std::fs::write(root.join("README.txt"), "hello\n").unwrap();
        std::fs::write(root.join("keep.txt"), "tracked\n").unwrap();
        if git_repo {
            git(&root, &["init", "-q", "-b", "main"]);
            // The identity a task's commit is made as (`--commit task`),
            // whatever the machine's own config holds.
            git(&root, &["config", "user.name", "Spectr Tests"]);
            git(&root, &["config", "user.email", "tests@spectr.invalid"]);
            git(&root, &["add", "-A"]);
            git(&root, &["commit", "-qm", "initial"]);
        }
        let state = dir.path().join("fake-state");
        std::fs::create_dir_all(&state).unwrap();
        let bin = dir.path().join("bin");
        std::fs::create_dir_all(&bin).unwrap();
        std::os::unix::fs::symlink(fake_agent_bin(), bin.join("claude")).unwrap();
        Fixture {
            _dir: dir,
            root,
            change_dir,
            state,
            bin,
        }
    }

    /// The fake agent's behaviour: {"default": [...], "<task>": [[attempt 1], [attempt 2], ...]}.
    pub fn script(&self, script: serde_json::Value) {
        std::fs::write(self.state.join("script.json"), script.to_string()).unwrap();
    }

    pub fn path_env(&self) -> String {
        format!(
            "{}:{}",
            self.bin.display(),
            std::env::var("PATH").unwrap_or_default()
        )
    }

    /// `spectr` in the project, with the fake agent first on PATH as `claude`
    /// and its script and state set; no arguments yet.
    pub fn spectr(&self) -> Command {
        self.spectr_at(Path::new(spectr_bin()))
    }

    /// [`Fixture::spectr`] with the `spectr` binary at `program` (a copy).
    pub fn spectr_at(&self, program: &Path) -> Command {
        let mut cmd = Command::new(program);
        cmd.current_dir(&self.root)
            .env("PATH", self.path_env())
            .env("SPECTR_FAKE_SCRIPT", self.state.join("script.json"))
            .env("SPECTR_FAKE_STATE", &self.state)
            .env("XDG_CACHE_HOME", self.cache_home())
            .env_remove("SPECTR_ROOT");
        cmd
    }

    /// The `XDG_CACHE_HOME` every run of the fixture gets (lane work trees
    /// live under it), inside the fixture's temporary folder.
    pub fn cache_home(&self) -> PathBuf {
        self.root.parent().expect("root has a parent").join("cache")
    }

    /// Where the fixture's runs keep their lane work trees: every lane is
    /// somewhere below this folder.
    pub fn lanes_home(&self) -> PathBuf {
        self.cache_home().join("spectr/lanes")
    }

    /// The work tree of the fixture's lane `name` (`lane-1`, ...) while a
    /// run has it: `<lanes home>/<work tree key>/<change>/<name>`.
    pub fn lane_path(&self, name: &str) -> PathBuf {
        let key = std::fs::read_dir(self.lanes_home())
            .ok()
            .and_then(|mut d| d.next())
            .and_then(Result::ok)
            .map(|e| e.path());
        key.unwrap_or_else(|| self.lanes_home().join("(none yet)"))
            .join(CHANGE)
            .join(name)
    }

    /// The arguments every test run of the fixture's change starts with.
    pub const RALPH_ARGS: [&'static str; 6] = [
        "ralph",
        CHANGE,
        "--agent",
        "claude",
        "--completion-grace",
        "1s",
    ];

    /// `spectr ralph <change> --agent claude`, no terminal, no colour.
    pub fn ralph(&self) -> Command {
        self.ralph_at(Path::new(spectr_bin()))
    }

    /// [`Fixture::ralph`] with the `spectr` binary at `program` (a copy).
    pub fn ralph_at(&self, program: &Path) -> Command {
        let mut cmd = self.spectr_at(program);
        cmd.env("NO_COLOR", "1")
            .args(Self::RALPH_ARGS)
            .stdin(std::process::Stdio::null());
        cmd
    }

    pub fn run(&self, extra: &[&str]) -> Output {
        let mut cmd = self.ralph();
        cmd.args(extra);
        output_shown(cmd)
    }

    /// A `--json` run in the background with its output discarded.
    pub fn spawn_quiet(&self) -> Background {
        let mut cmd = self.ralph();
        cmd.arg("--json")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null());
        Background::spawn(cmd)
    }

    pub fn tasks_text(&self) -> String {
        std::fs::read_to_string(self.change_dir.join("tasks.jsonc")).unwrap()
    }

    /// The status of `id` in tasks.jsonc, read with spectr's own model.
    pub fn status(&self, id: &str) -> String {
        let set = spectr::model::TaskSet::load(&self.change_dir).expect("tasks load");
        set.task(&spectr::model::TaskId::from(id))
            .expect("task exists")
            .status
            .to_string()
    }

    pub fn prompt(&self, task: &str, attempt: u32) -> Option<String> {
        std::fs::read_to_string(
            self.state
                .join("prompts")
                .join(format!("{task}-{attempt}.txt")),
        )
        .ok()
    }

    /// The fake agent on PATH as `name` too (`copilot`, `pi`, `qwen`: it
    /// then speaks that CLI's output format).
    pub fn install_fake_as(&self, name: &str) {
        std::os::unix::fs::symlink(fake_agent_bin(), self.bin.join(name)).unwrap();
    }

    /// The arguments the fake agent got for `task`'s attempt `attempt`.
    pub fn agent_args(&self, task: &str, attempt: u32) -> Vec<String> {
        std::fs::read_to_string(
            self.state
                .join("args")
                .join(format!("{task}-{attempt}.txt")),
        )
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
    }

    pub fn session_path(&self) -> PathBuf {
        self.change_dir.join(".ralph-session.json")
    }

    /// The run's journal (`.ralph/runs/<started>.jsonl`, what `spectr
    /// report` reads): the first there.
    pub fn run_journal(&self) -> PathBuf {
        let runs = self.change_dir.join(".ralph/runs");
        std::fs::read_dir(&runs)
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .find(|p| p.extension().is_some_and(|e| e == "jsonl"))
            .unwrap_or_else(|| panic!("no journal in {}", runs.display()))
    }

    /// The session as a resume reads it (the file and its journal), as JSON.
    /// Written back to the session file, it is read as it is (no journal
    /// is read with a file that has no mark).
    pub fn session(&self) -> serde_json::Value {
        let change = self.change_dir.file_name().unwrap().to_str().unwrap();
        let s = spectr::ralph::session::Session::load(&self.session_path(), change)
            .expect("session file loads")
            .expect("session file exists");
        serde_json::to_value(&s).unwrap()
    }

    /// [`Fixture::session`], or None while there is none or it does not load.
    pub fn session_now(&self) -> Option<serde_json::Value> {
        let change = self.change_dir.file_name()?.to_str()?;
        let s = spectr::ralph::session::Session::load(&self.session_path(), change).ok()??;
        serde_json::to_value(&s).ok()
    }

    pub fn wait_for(&self, what: &str, mut cond: impl FnMut() -> bool) {
        // A hang guard only; nothing asserts on how long it took.
        let deadline = Instant::now() + Duration::from_secs(60);
        while !cond() {
            assert!(Instant::now() < deadline, "timed out waiting for {what}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// Runs `cmd` to its end and shows what it printed (in a failing test's log).
pub fn output_shown(mut cmd: Command) -> Output {
    let out = output_within(&mut cmd, RUN_HANG_GUARD);
    eprintln!(
        "--- stdout\n{}\n--- stderr\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// The longest a test's run may take before it counts as hung: a guard so a
/// broken run fails its test instead of hanging CI, not a speed assertion.
pub const RUN_HANG_GUARD: Duration = Duration::from_secs(300);

/// Like `Command::output`, but a run still going after `limit` is stopped
/// (TERM, so it stops its agents, then KILL) and the test fails.
pub fn output_within(cmd: &mut Command, limit: Duration) -> Output {
    use std::io::Read;
    let mut child = cmd
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spectr runs");
    let drain = |pipe: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            if let Some(mut p) = pipe {
                let _ = p.read_to_end(&mut bytes);
            }
            bytes
        })
    };
    let stdout = drain(
        child
            .stdout
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let stderr = drain(
        child
            .stderr
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let deadline = Instant::now() + limit;
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        if Instant::now() > deadline {
            // Background's drop stops it: TERM (it stops its agents), then KILL.
            drop(Background::from_child(child));
            panic!("the run hung: still going after {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    Output {
        status,
        stdout: stdout.join().unwrap_or_default(),
        stderr: stderr.join().unwrap_or_default(),
    }
}

/// NDJSON events from `--json` output.
pub fn events(out: &Output) -> Vec<serde_json::Value> {
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str(l).expect("each line is JSON"))
        .collect()
}

pub fn of_kind(events: &[serde_json::Value], kind: &str) -> Vec<serde_json::Value> {
    events
        .iter()
        .filter(|e| e["event"] == kind)
        .cloned()
        .collect()
}

/// Ids of started tasks with attempt numbers, in order.
pub fn started(events: &[serde_json::Value]) -> Vec<String> {
    of_kind(events, "task_started")
        .iter()
        .map(|e| format!("{}#{}", e["task"].as_str().unwrap_or(""), e["attempt"]))
        .collect()
}

/// Pids the fake agent recorded in `state/file` (none if it is missing).
pub fn pids(state: &Path, file: &str) -> Vec<i32> {
    std::fs::read_to_string(state.join(file))
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|s| s.parse().ok())
        .collect()
}

/// Pids the fake agent's `spawn_child` step recorded.
pub fn child_pids(state: &Path) -> Vec<i32> {
    pids(state, "children.pid")
}

/// Every file below `root` with its content (unreadable ones empty), but
/// `.git` and the paths (relative to `root`) that `skip` names.
pub fn work_tree_files(root: &Path, skip: &dyn Fn(&str) -> bool) -> BTreeMap<String, String> {
    fn walk(
        root: &Path,
        dir: &Path,
        skip: &dyn Fn(&str) -> bool,
        out: &mut BTreeMap<String, String>,
    ) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for e in entries.flatten() {
            let p = e.path();
            let rel = p.strip_prefix(root).unwrap().to_string_lossy().to_string();
            if rel == ".git" || skip(&rel) {
                continue;
            }
            if p.is_dir() {
                walk(root, &p, skip, out);
            } else {
                out.insert(rel, std::fs::read_to_string(&p).unwrap_or_default());
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(root, root, skip, &mut out);
    out
}

/// A `spectr ralph` started in the background. Stopped on drop, so a failing
/// test never leaves a run (and its agent) behind: SIGTERM first, which stops
/// the agent's process group too, then SIGKILL.
pub struct Background(Option<std::process::Child>);

impl Background {
    pub fn spawn(mut cmd: Command) -> Background {
        Background(Some(cmd.spawn().expect("spectr starts")))
    }

    /// Takes charge of a run already started (its pipes taken, say).
    pub fn from_child(child: std::process::Child) -> Background {
        Background(Some(child))
    }

    pub fn id(&self) -> u32 {
        self.0.as_ref().map_or(0, std::process::Child::id)
    }

    /// Sends `sig` to the run (while it has not been waited for).
    pub fn signal(&self, sig: nix::sys::signal::Signal) {
        if let Some(child) = &self.0 {
            let pid = nix::unistd::Pid::from_raw(child.id() as i32);
            let _ = nix::sys::signal::kill(pid, sig);
        }
    }

    pub fn wait(&mut self) -> std::process::ExitStatus {
        let mut child = self.0.take().expect("not waited yet");
        child.wait().expect("wait")
    }

    pub fn wait_with_output(mut self) -> Output {
        let child = self.0.take().expect("not waited yet");
        child.wait_with_output().expect("wait")
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        let Some(mut child) = self.0.take() else {
            return;
        };
        let pid = nix::unistd::Pid::from_raw(child.id() as i32);
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if matches!(child.try_wait(), Ok(Some(_))) {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = child.kill();
        let _ = child.wait();
    }
}

/// A `spectr` run in the background whose `--json` events arrive as they
/// are printed (stderr is kept for the end), e.g. to kill it at an event.
pub struct JsonRun {
    pub run: Background,
    events: crossbeam_channel::Receiver<serde_json::Value>,
    pub seen: Vec<serde_json::Value>,
}

impl JsonRun {
    /// Starts `cmd` (give it `--json`) with its stdout read line by line.
    pub fn spawn(mut cmd: Command) -> JsonRun {
        use std::io::BufRead;
        cmd.stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null());
        let mut child = cmd.spawn().expect("spectr starts");
        let stdout = child.stdout.take().expect("piped");
        let (tx, rx) = crossbeam_channel::unbounded();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if let Ok(v) = serde_json::from_str::<serde_json::Value>(&line) {
                    let _ = tx.send(v);
                }
            }
        });
        JsonRun {
            run: Background::from_child(child),
            events: rx,
            seen: Vec::new(),
        }
    }

    /// Waits (a hang guard of 60 s, nothing timed) until `cond` holds for
    /// the events seen so far.
    pub fn until(&mut self, what: &str, cond: impl Fn(&[serde_json::Value]) -> bool) {
        self.until_within(what, Duration::from_secs(60), cond);
    }

    /// [`JsonRun::until`] with a hang guard of `guard`.
    pub fn until_within(
        &mut self,
        what: &str,
        guard: Duration,
        cond: impl Fn(&[serde_json::Value]) -> bool,
    ) {
        let deadline = Instant::now() + guard;
        while !cond(&self.seen) {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.events.recv_timeout(left) {
                Ok(v) => self.seen.push(v),
                Err(_) => panic!("timed out waiting for {what}; saw {:#?}", self.seen),
            }
        }
    }

    /// kill -9 of spectr itself (its agents die with it), then waits for it.
    pub fn kill_9(&mut self) {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(self.run.id() as i32),
            nix::sys::signal::Signal::SIGKILL,
        );
        self.run.wait();
    }
}

/// git with the tests' identity, isolated from the developer's config and
/// from any repository the caller's environment names.
pub fn git_cmd(dir: &Path, args: &[&str]) -> Command {
    let mut cmd = Command::new("git");
    cmd.args([
        "-c",
        "user.name=Test",
        "-c",
        "user.email=test@example.invalid",
        "-c",
        "commit.gpgsign=false",
    ])
    .args(args)
    .current_dir(dir)
    .env("GIT_CONFIG_GLOBAL", "/dev/null")
    .env("GIT_CONFIG_NOSYSTEM", "1");
    for var in ["GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE"] {
        cmd.env_remove(var);
    }
    cmd
}

/// [`git_cmd`] run to success; its stdout.
/// A shell script body standing in for git 2.39 (Debian 12's): it says
/// so, refuses `--merge-base` as 2.39 does, and runs `real` for the rest.
#[allow(dead_code)]
pub fn git_2_39_script(real: &Path) -> String {
    format!(
        "case \"$*\" in\n  version|*\\ version|--version) echo 'git version 2.39.5'; exit 0;;\n  *--merge-base=*) echo \"error: unknown option 'merge-base'\" >&2; exit 129;;\nesac\nexec {} \"$@\"\n",
        real.display()
    )
}

pub fn git(dir: &Path, args: &[&str]) -> String {
    let out = git_cmd(dir, args).output().expect("git runs");
    assert!(
        out.status.success(),
        "git {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A process is gone when /proc has no entry for it or it is a zombie
/// (dead, waiting only for its parent, perhaps an init that never reaps).
pub fn alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => {
            let state = stat[stat.rfind(')').unwrap() + 1..]
                .split_whitespace()
                .next()
                .unwrap()
                .to_string();
            state != "Z" && state != "X"
        }
        Err(_) => false,
    }
}

/// A finished command's stdout, as text.
pub fn stdout_text(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A finished command's stderr, as text, as written (`cli::stderr` undoes
/// miette's wrapping).
pub fn stderr_text(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Copies the folder `src` to `dst`, recursively.
pub fn copy_dir(src: &Path, dst: &Path) {
    std::fs::create_dir_all(dst).unwrap();
    for entry in std::fs::read_dir(src).unwrap() {
        let entry = entry.unwrap();
        let to = dst.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &to);
        } else {
            std::fs::copy(entry.path(), &to).unwrap();
        }
    }
}

/// A file's permission bits (of the link itself for a symlink).
pub fn mode(path: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::symlink_metadata(path)
        .unwrap()
        .permissions()
        .mode()
        & 0o7777
}

/// Tasks 1.1 and 1.2, pending.
pub fn two_tasks() -> String {
    tasks_v1(&[("1.1", "Core", "pending"), ("1.2", "Core", "pending")])
}

/// The fixture's HEAD commit.
pub fn head(fx: &Fixture) -> String {
    git(&fx.root, &["rev-parse", "HEAD"]).trim().to_string()
}

/// `spectr` on the agent's PATH, as after `cargo install`.
pub fn with_spectr_on_path(fx: &Fixture) {
    std::os::unix::fs::symlink(spectr_bin(), fx.bin.join("spectr")).unwrap();
}

/// `spectr` run by hand in the fixture's project, outside any run.
pub fn spectr(fx: &Fixture, args: &[&str]) -> Output {
    let mut cmd = fx.spectr();
    cmd.env("NO_COLOR", "1")
        .env_remove("SPECTR_RALPH_CHANGE")
        .args(args);
    output_shown(cmd)
}

/// A folder for test projects that is not under `/tmp`.
pub fn outside_tmp_base() -> PathBuf {
    let under_tmp = |p: &Path| p.starts_with("/tmp");
    let target = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    if !under_tmp(&target) {
        return target;
    }
    let var_tmp = PathBuf::from("/var/tmp");
    if tempfile::tempdir_in(&var_tmp).is_ok() {
        return var_tmp;
    }
    let home = std::env::var_os("HOME").map(PathBuf::from);
    match home.filter(|h| !under_tmp(h)) {
        Some(h) => {
            let cache = h.join(".cache/spectr-tests");
            std::fs::create_dir_all(&cache).expect("create the tests' cache folder");
            cache
        }
        None => target,
    }
}

/// The project's runs leave the branch alone (`ralph: commit: off`,
/// committed): for tests whose subject is what a revert, a merge or a
/// resume leaves of git's state, not the task commits (tests/ralph_commit.rs).
pub fn commits_off(fx: &Fixture) {
    std::fs::write(fx.root.join("spectr.yaml"), "ralph:\n  commit: off\n").unwrap();
    git(&fx.root, &["add", "spectr.yaml"]);
    git(&fx.root, &["commit", "-qm", "no task commits"]);
}

/// A `--jobs 2 --max-retries 0` run of `fx` (give it tasks 1.1 and 2.1 in
/// two sections) in the background, no terminal, `extra` options added
/// (`--wait-for-answer`, `--serve`): task 1.1 runs out of retries at once,
/// 2.1 waits for the file returned, so lane 2 is busy while 1.1's question
/// is open. Returned once the question is asked.
pub fn question_with_a_busy_lane(fx: &Fixture, extra: &[&str]) -> (JsonRun, PathBuf) {
    let go = fx.state.join("go");
    fx.script(serde_json::json!({
        "1.1": [["fail:never works"]],
        "2.1": [[format!("wait_for:{}:60", go.display()), "mark:completed", "complete"]],
        "default": ["mark:completed", "complete"],
    }));
    let mut cmd = fx.ralph();
    cmd.args(["--json", "--yes", "--jobs", "2", "--max-retries", "0"])
        .args(extra);
    let mut run = JsonRun::spawn(cmd);
    run.until("the question about 1.1", |seen| {
        seen.iter()
            .any(|e| e["event"] == "question" && e["task"] == "1.1")
    });
    (run, go)
}

/// Copies this repository's sample change into a fixture project.
pub fn sample_project() -> Fixture {
    let sample =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("spectr/changes/add-greeting-cli");
    let fx = Fixture::with_files(&[], false);
    let dest = fx.root.join("spectr/changes/add-greeting-cli");
    std::fs::create_dir_all(dest.join("specs")).unwrap();
    for entry in walk(&sample) {
        let rel = entry.strip_prefix(&sample).unwrap();
        let to = dest.join(rel);
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::fs::copy(&entry, &to).unwrap();
    }
    git(&fx.root, &["init", "-q", "-b", "main"]);
    git(&fx.root, &["config", "user.name", "Spectr Tests"]);
    git(&fx.root, &["config", "user.email", "tests@spectr.invalid"]);
    git(&fx.root, &["add", "-A"]);
    git(&fx.root, &["commit", "-qm", "sample"]);
    fx
}

pub fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out.sort();
    out
}

/// A bare repository beside the project: remote lanes' remote.
pub fn bare_remote(fx: &Fixture) -> PathBuf {
    let remote = fx.root.parent().unwrap().join("remote.git");
    git(
        fx.root.parent().unwrap(),
        &["init", "-q", "--bare", remote.to_str().unwrap()],
    );
    remote
}
