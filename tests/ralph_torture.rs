//! The kill -9 torture test (issue 8's standing check).
//!
//! A two-lane change whose scripted agent writes, deletes, commits, leaves a
//! child behind and sometimes fails is run with `spectr ralph --json`, and
//! spectr is killed with SIGKILL at random moments: after a random delay, or
//! a moment after a chosen event of the `--json` stream. It is then resumed
//! (`--resume`, no terminal) until the run completes. Each trial checks:
//!
//! - no completed task lost (every task completed, its work in the tree) or
//!   redone (a task completed in the tasks file or the session when spectr
//!   died never gets another prompt, nor does one whose merge-back had
//!   started);
//! - the tasks file always loads and differs from the original only in
//!   status strings;
//! - no orphans: every agent and every child it started is gone;
//! - the final tree is exactly what the completed tasks wrote;
//! - HEAD is on `main` with exactly one commit per task (`--commit task`,
//!   spectr's, the agents' own kept under refs), linear, nothing is staged,
//!   the user's stash is untouched;
//! - every failed attempt's work is recoverable from its ref;
//! - a lane's task said completed (`task_completed`) when spectr died is
//!   completed in the tasks file;
//! - once a run completed, no checkpoint ref (a lane's included) and no
//!   temporary file or folder of a killed run is left.
//!
//! Resumes run without `--rewind`: the commits an interrupted agent made
//! were seen and recorded, so the resume reverts them by itself. Only a
//! kill in the few milliseconds between an agent's commit and its record
//! leaves a move it did not see: that resume stops (exit 2) as it must for
//! a person's commit, is counted ("blocked resumes", a figure, not a
//! failure) and is answered with `--rewind`.
//!
//! The same trials run with `--jobs 2` (each lane in a git work tree of its
//! own, merged back task by task). Either way the agents' commits are kept
//! under refs and the user's branch gets spectr's one commit per task.
//!
//! A third set runs `--jobs 2` with every completing attempt also appending
//! its line to one file: the lanes conflict, resolve, take turns, and run
//! tasks and resolves in the user's tree (whose agents' commits must be put
//! back off the user's branch), killed anywhere in that too; the file must
//! end with every task's line once.
//!
//! A fourth runs `--jobs 2` as remote lanes on a private Slurm cluster
//! (each attempt a job through `srun`, skipped where Slurm cannot start):
//! after each kill the run's jobs are cancelled (`scancel`), as a person
//! would, before the resume; a fifth, the same with the lanes' work
//! conflicting (resolve attempts run as jobs too).
//! `SPECTR_TORTURE_SLURM_TRIALS` sets how many.
//!
//! CI runs a few seeded trials. More: `SPECTR_TORTURE_TRIALS=300 cargo test
//! --release --test ralph_torture -- --nocapture` (`SPECTR_TORTURE_SEED`
//! picks the first seed; a failure prints the seed that reproduces it).

mod common;

use common::*;
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};
use std::io::BufRead;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const DEFAULT_TRIALS: u64 = 3;
/// Kills per trial at most; the run after the last one goes to the end.
const MAX_KILLS: u64 = 4;
const EVENT_KINDS: [&str; 8] = [
    "task_started",
    "checkpoint",
    "agent_started",
    "agent_event",
    "status_changed",
    "task_completed",
    "task_failed",
    "reverted",
];

/// With `--jobs 2`, also around a merge-back.
const LANE_EVENT_KINDS: [&str; 2] = ["merge_started", "merged"];

/// With lanes taking turns, also around a resolve attempt and an attempt in
/// the user's tree (a notice says the first one starts).
const HOT_EVENT_KINDS: [&str; 3] = ["resolving", "notice", "head_moved"];

/// xorshift64*: small, seeded, good enough to pick moments.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// Steps with a short pause between them, so kills land inside attempts.
fn paced(steps: &[&str]) -> Vec<String> {
    let mut out = Vec::new();
    for s in steps {
        out.push((*s).to_string());
        out.push("sleep:25".to_string());
    }
    out.pop();
    out
}

/// Attempt 1 of some tasks fails (a FAILED answer, or an abnormal exit);
/// every later attempt succeeds. Tasks that commit do it before marking
/// completed, so a commit always belongs to a completed task.
fn script(hot: bool) -> Value {
    let mut script = base_script();
    if hot {
        // Every completing attempt also appends its task's line to one file
        // (its resolve attempt finds it back with the other lane's line:
        // the markers dropped, the line not added twice). The lanes
        // conflict on it, then take turns, tasks running in the user's tree.
        for (task, attempts) in script.as_object_mut().into_iter().flatten() {
            for attempt in attempts.as_array_mut().into_iter().flatten() {
                let Some(steps) = attempt.as_array_mut() else {
                    continue;
                };
                let Some(at) = steps.iter().position(|s| {
                    let s = s.as_str().unwrap_or("");
                    s.starts_with("git_commit")
                        || s.starts_with("mark:completed")
                        || s == "complete"
                }) else {
                    continue;
                };
                if steps.iter().any(|s| {
                    s.as_str()
                        .is_some_and(|s| s.starts_with("fail") || s.starts_with("exit"))
                }) {
                    continue;
                }
                let line = format!("append_once:NOTES.md=- note from task {task}");
                steps.splice(at..at, [json!("resolve:NOTES.md"), json!(line)]);
            }
        }
    }
    script
}

fn base_script() -> Value {
    json!({
        "1.1": [
            paced(&["write:wip/1.1.txt=failed work of 1.1", "fail:not yet"]),
            paced(&["write:out/a.txt=A", "git_commit:task 1.1", "mark:completed", "complete"]),
        ],
        "1.2": [
            paced(&["write:wip/1.2.txt=failed work of 1.2", "spawn_child", "fail:stuck"]),
            paced(&["delete:keep.txt", "write:out/b.txt=B", "mark:completed", "complete"]),
        ],
        "1.3": [
            paced(&["write:out/c.txt=C", "write:out/tmp.txt=scratch", "delete:out/tmp.txt", "complete"]),
        ],
        "2.1": [
            paced(&["write:wip/2.1.txt=failed work of 2.1", "exit:3"]),
            paced(&["write:out/d.txt=D", "mark:in_progress", "git_commit:task 2.1", "mark:completed", "complete"]),
        ],
        "2.2": [
            paced(&["write:out/e.txt=E", "delete:README.txt", "git_commit:task 2.2", "mark:completed", "complete"]),
        ],
    })
}

const TASKS: [&str; 5] = ["1.1", "1.2", "1.3", "2.1", "2.2"];

/// The ignore rule a trial's repository commits, if any: real projects
/// ignore spectr's folder in their own `.gitignore`.
fn ignore_rule(seed: u64) -> Option<&'static str> {
    match seed % 4 {
        1 => Some(".ralph/\n"),
        3 => Some(".ralph*\n"),
        _ => None,
    }
}

fn expected_tree(seed: u64) -> BTreeMap<String, String> {
    let change = format!("spectr/changes/{CHANGE}");
    let mut t = BTreeMap::new();
    if let Some(rule) = ignore_rule(seed) {
        t.insert(".gitignore".into(), rule.into());
    }
    t.insert("spectr/project.md".into(), "# Project\n".into());
    t.insert(
        format!("{change}/proposal.md"),
        "# Change: Add widget\n\nPROPOSAL-MARKER\n".into(),
    );
    t.insert(format!("{change}/design.md"), "DESIGN-MARKER\n".into());
    t.insert(
        format!("{change}/specs/widgets/spec.md"),
        "## ADDED Requirements\n\n### Requirement: Widget\nSPEC-MARKER\n".into(),
    );
    for (f, c) in [("a", "A"), ("b", "B"), ("c", "C"), ("d", "D"), ("e", "E")] {
        t.insert(format!("out/{f}.txt"), c.into());
    }
    t
}

/// Every file of the work tree but `.git` and the change's `.ralph/` (the
/// tasks file is checked on its own).
fn tree(root: &Path) -> BTreeMap<String, String> {
    work_tree_files(root, &|rel| {
        rel.ends_with("/.ralph") || rel.ends_with("tasks.jsonc")
    })
}

fn prompts_of(state: &Path, task: &str) -> usize {
    (1..)
        .take_while(|n| {
            state
                .join("prompts")
                .join(format!("{task}-{n}.txt"))
                .exists()
        })
        .count()
}

/// The tasks file with every status put back to pending: must equal the original.
fn statuses_reset(text: &str) -> String {
    text.replace("\"in_progress\"", "\"pending\"")
        .replace("\"completed\"", "\"pending\"")
}

/// Tasks completed as far as anyone can tell right after a kill: in the
/// tasks file or in the session.
fn completed_now(fx: &Fixture) -> BTreeSet<String> {
    let mut done = BTreeSet::new();
    if let Ok(set) = spectr::model::TaskSet::load(&fx.change_dir) {
        for t in &set.tasks {
            if t.status == spectr::model::TaskStatus::Completed {
                done.insert(t.id.to_string());
            }
        }
    }
    if let Some(s) = fx.session_now()
        && let Some(tasks) = s["tasks"].as_object()
    {
        for (id, rec) in tasks {
            let last = rec["attempts"].as_array().and_then(|a| a.last());
            if last.is_some_and(|a| a["outcome"]["kind"] == "completed") {
                done.insert(id.clone());
            }
        }
    }
    done
}

/// Tasks whose merge-back had started in a killed run and not ended (no
/// `merged`, no judgement after it).
fn merging_when_killed(events: &[Value]) -> BTreeSet<String> {
    let mut merging = BTreeSet::new();
    for e in events {
        let task = e["task"].as_str().unwrap_or("").to_string();
        match e["event"].as_str() {
            Some("merge_started") => {
                merging.insert(task);
            }
            Some("merged" | "task_completed" | "task_failed") => {
                merging.remove(&task);
            }
            _ => {}
        }
    }
    merging
}

#[derive(Default)]
struct Tally {
    trials: u64,
    kills: u64,
    /// Attempts started in the user's tree while the lanes took turns, and
    /// resolve attempts.
    in_place: u64,
    resolves: u64,
    tasks_lost: u64,
    tasks_redone: u64,
    merges_redone: u64,
    blocked_resumes: u64,
    wrong_trees: u64,
    bad_tasks_files: u64,
    orphans: u64,
    git_state: u64,
    unrecoverable: u64,
    run_errors: u64,
    said_before_recorded: u64,
    litter: u64,
    commits_wrong: u64,
    failures: Vec<String>,
}

/// How a run is to be killed.
enum KillAt {
    Delay(u64),
    /// The n-th event of a kind, then a short delay.
    Event(&'static str, u64, u64),
    Never,
}

struct RunResult {
    killed: bool,
    code: Option<i32>,
    events: Vec<Value>,
    stderr: String,
}

/// Tasks a run said completed in a lane's work tree (not in the user's
/// tree, where the attempt writes its own status).
fn said_completed_in_lanes(events: &[Value]) -> BTreeSet<String> {
    let mut in_lane: BTreeMap<String, bool> = BTreeMap::new();
    let mut said = BTreeSet::new();
    for e in events {
        let task = e["task"].as_str().unwrap_or("").to_string();
        if e["event"] == "task_started" {
            in_lane.insert(task, e["worktree"].is_string());
        } else if e["event"] == "task_completed" && in_lane.get(&task) == Some(&true) {
            said.insert(task);
        }
    }
    said
}

/// Remote lanes on a private Slurm cluster: every attempt a job through
/// `srun`, its work by way of a bare repository beside the project.
struct Slurm<'a> {
    cluster: &'a common::slurm::Cluster,
}

impl Slurm<'_> {
    fn args(&self, fx: &Fixture) -> Vec<String> {
        let remote = fx.root.parent().unwrap().join("remote.git");
        if !remote.exists() {
            git(
                fx.root.parent().unwrap(),
                &["init", "-q", "--bare", remote.to_str().unwrap()],
            );
        }
        vec![
            "--lane-exec".into(),
            "srun --quiet --ntasks=1 --job-name=spectr-torture {cmd}".into(),
            "--lane-remote".into(),
            remote.display().to_string(),
        ]
    }

    /// What a person does after killing the run: cancels its jobs, and
    /// waits for them to be gone.
    fn cancel_jobs(&self) {
        let _ = Command::new("scancel")
            .args(["--name", "spectr-torture"])
            .env("SLURM_CONF", &self.cluster.conf)
            .status();
        let guard = Instant::now() + Duration::from_secs(30);
        while !self.cluster.jobs().is_empty() && Instant::now() < guard {
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

fn run_once(
    fx: &Fixture,
    resume: bool,
    rewind: bool,
    kill: KillAt,
    jobs: u32,
    slurm: Option<&Slurm<'_>>,
) -> RunResult {
    let mut cmd = fx.ralph();
    cmd.args(["--json", "--max-retries", "2", "--on-exhaust", "retry"]);
    cmd.args(["--jobs", &jobs.to_string()]);
    if let Some(engine) = slurm {
        cmd.args(engine.args(fx))
            .env("SLURM_CONF", &engine.cluster.conf);
    }
    if resume {
        cmd.arg("--resume");
    }
    if rewind {
        cmd.arg("--rewind");
    }
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("spectr starts");
    let pid = child.id();
    let stdout = child.stdout.take().unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let (tx, rx) = crossbeam_channel::unbounded::<Value>();
    let reader = std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if let Ok(v) = serde_json::from_str::<Value>(&line) {
                let _ = tx.send(v);
            }
        }
    });
    let err_reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = std::io::Read::read_to_string(&mut stderr, &mut s);
        s
    });
    let started = Instant::now();
    // A hang guard only.
    let deadline = started + Duration::from_secs(120);
    let mut events = Vec::new();
    let mut seen: BTreeMap<String, u64> = BTreeMap::new();
    let mut kill_at: Option<Instant> = match kill {
        KillAt::Delay(ms) => Some(started + Duration::from_millis(ms)),
        _ => None,
    };
    let mut killed = false;
    loop {
        if let Ok(Some(_)) = child.try_wait() {
            break;
        }
        let now = Instant::now();
        if kill_at.is_some_and(|at| now >= at) || now >= deadline {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid as i32),
                nix::sys::signal::Signal::SIGKILL,
            );
            killed = now < deadline;
            let _ = child.wait();
            break;
        }
        match rx.recv_timeout(Duration::from_millis(5)) {
            Ok(ev) => {
                let kind = ev["event"].as_str().unwrap_or("").to_string();
                let n = seen.entry(kind.clone()).or_default();
                *n += 1;
                if let KillAt::Event(k, nth, delay) = kill
                    && kind == k
                    && *n == nth
                    && kill_at.is_none()
                {
                    kill_at = Some(Instant::now() + Duration::from_millis(delay));
                }
                events.push(ev);
            }
            Err(_) => continue,
        }
    }
    let status = child.wait().ok();
    let _ = reader.join();
    events.extend(rx.try_iter());
    let stderr = err_reader.join().unwrap_or_default();
    if Instant::now() >= deadline {
        panic!("spectr ralph hung for 120 s:\n{stderr}");
    }
    RunResult {
        killed,
        code: if killed {
            None
        } else {
            status.and_then(|s| s.code())
        },
        events,
        stderr,
    }
}

fn trial(seed: u64, jobs: u32, hot: bool, slurm: Option<&Slurm<'_>>, tally: &mut Tally) {
    let mut rng = Rng::new(seed);
    let tasks = tasks_v1(&[
        ("1.1", "Lane one", "pending"),
        ("1.2", "Lane one", "pending"),
        ("1.3", "Lane one", "pending"),
        ("2.1", "Lane two", "pending"),
        ("2.2", "Lane two", "pending"),
    ]);
    let fx = Fixture::new(&tasks);
    if slurm.is_some() {
        // The workers run `spectr lane-worker` from PATH.
        with_spectr_on_path(&fx);
    }
    fx.script(script(hot));
    if hot {
        std::fs::write(fx.root.join("NOTES.md"), "# Notes\n").unwrap();
        git(&fx.root, &["add", "NOTES.md"]);
        git(&fx.root, &["commit", "-qm", "notes"]);
    }
    if let Some(rule) = ignore_rule(seed) {
        std::fs::write(fx.root.join(".gitignore"), rule).unwrap();
        git(&fx.root, &["add", ".gitignore"]);
        git(&fx.root, &["commit", "-qm", "ignore spectr's folder"]);
    }
    // The user's stash, which nothing may touch.
    std::fs::write(fx.root.join("keep.txt"), "stashed edit\n").unwrap();
    git(&fx.root, &["stash", "-q"]);
    let stash = git(&fx.root, &["rev-parse", "refs/stash"]);
    let original = fx.tasks_text();

    let fail = |what: &str, detail: String, counter: &mut u64| {
        *counter += 1;
        let _ = &what;
        let shape = if hot { ", lanes taking turns" } else { "" };
        format!("seed {seed} (--jobs {jobs}{shape}): {what}: {detail}")
    };
    let mut messages = Vec::new();
    let mut all_events = Vec::new();
    // Prompt counts frozen for tasks completed when spectr died.
    let mut frozen: BTreeMap<String, usize> = BTreeMap::new();
    // The same for tasks whose merge-back had started when spectr died.
    let mut frozen_merges: BTreeMap<String, usize> = BTreeMap::new();
    let kills = 1 + rng.below(MAX_KILLS);
    let mut runs = 0;
    let mut rewind = false;
    let mut done = false;
    while !done {
        let kill = if runs < kills {
            if rng.below(3) == 0 {
                KillAt::Delay(rng.below(1500))
            } else {
                let kinds: Vec<&'static str> = if jobs > 1 {
                    let hot_kinds: &[&str] = if hot { &HOT_EVENT_KINDS } else { &[] };
                    EVENT_KINDS
                        .iter()
                        .chain(&LANE_EVENT_KINDS)
                        .chain(hot_kinds)
                        .copied()
                        .collect()
                } else {
                    EVENT_KINDS.to_vec()
                };
                let kind = kinds[rng.below(kinds.len() as u64) as usize];
                KillAt::Event(kind, 1 + rng.below(3), rng.below(60))
            }
        } else {
            KillAt::Never
        };
        let r = run_once(&fx, runs > 0, rewind, kill, jobs, slurm);
        rewind = false;
        if r.code == Some(2) && r.stderr.contains("HEAD moved since") && !r.killed {
            // A commit the attempt made but spectr died before recording:
            // answered as a person would, and counted.
            tally.blocked_resumes += 1;
            eprintln!("seed {seed} (--jobs {jobs}): resume blocked:\n{}", r.stderr);
            rewind = true;
            continue;
        }
        runs += 1;
        all_events.extend(r.events.iter().cloned());
        if r.killed {
            tally.kills += 1;
            if let Some(engine) = slurm {
                engine.cancel_jobs();
            }
            for t in completed_now(&fx) {
                frozen
                    .entry(t.clone())
                    .or_insert_with(|| prompts_of(&fx.state, &t));
            }
            for t in merging_when_killed(&r.events) {
                if !frozen.contains_key(&t) {
                    frozen_merges
                        .entry(t.clone())
                        .or_insert_with(|| prompts_of(&fx.state, &t));
                }
            }
            // A lane's task said completed is recorded completed already.
            for t in said_completed_in_lanes(&r.events) {
                if let Ok(set) = spectr::model::TaskSet::load(&fx.change_dir)
                    && let Some(task) = set.task(&spectr::model::TaskId::from(t.as_str()))
                    && task.status != spectr::model::TaskStatus::Completed
                {
                    messages.push(fail(
                        "a lane's task said completed before its tasks file recorded it",
                        format!("{t} is {}", task.status),
                        &mut tally.said_before_recorded,
                    ));
                }
            }
            match std::fs::read_to_string(fx.change_dir.join("tasks.jsonc")) {
                Ok(text) if statuses_reset(&text) == original => {}
                Ok(text) => messages.push(fail(
                    "tasks file changed beyond statuses after a kill",
                    text,
                    &mut tally.bad_tasks_files,
                )),
                // A crashed attempt may delete it; the resume restores it.
                Err(_) => {}
            }
            continue;
        }
        match r.code {
            Some(0) => done = true,
            other => {
                let mut diag = String::new();
                if let Ok(m) = std::fs::metadata(fx.change_dir.join(".ralph/lock")) {
                    use std::os::unix::fs::MetadataExt;
                    let ino = m.ino();
                    for l in std::fs::read_to_string("/proc/locks")
                        .unwrap_or_default()
                        .lines()
                    {
                        if l.contains(&format!(":{ino} ")) {
                            let pid = l.split_whitespace().nth(4).unwrap_or("");
                            let cmd = std::fs::read_to_string(format!("/proc/{pid}/cmdline"))
                                .unwrap_or_default();
                            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))
                                .unwrap_or_default();
                            diag.push_str(&format!("LOCK {l} CMD {cmd:?} STAT {stat}\n"));
                        }
                    }
                }
                // With --json, its errors are events.
                let said: Vec<&str> = r
                    .events
                    .iter()
                    .filter(|e| e["event"] == "error")
                    .filter_map(|e| e["message"].as_str())
                    .collect();
                messages.push(fail(
                    "a run failed",
                    format!("exit {other:?}\n{}\n{said:?}\n{diag}", r.stderr),
                    &mut tally.run_errors,
                ));
                if runs > kills + 3 {
                    break;
                }
            }
        }
        if runs > kills + 5 {
            break;
        }
    }

    // Orphans: every agent and child is gone (zombies waiting for init count
    // as gone; a moment is allowed for that).
    let mut procs = pids(&fx.state, "agents.pid");
    procs.extend(pids(&fx.state, "children.pid"));
    let guard = Instant::now() + Duration::from_secs(5);
    while procs.iter().any(|p| alive(*p)) && Instant::now() < guard {
        std::thread::sleep(Duration::from_millis(50));
    }
    let living: Vec<i32> = procs.iter().copied().filter(|p| alive(*p)).collect();
    for p in &living {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(*p),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
    if !living.is_empty() {
        messages.push(fail("orphans", format!("{living:?}"), &mut tally.orphans));
    }

    // Tasks: all completed, none redone.
    let text = fx.tasks_text();
    if text != original.replace("\"pending\"", "\"completed\"") {
        messages.push(fail("final tasks file", text, &mut tally.tasks_lost));
    }
    for (task, prompts) in &frozen {
        let now = prompts_of(&fx.state, task);
        if now != *prompts {
            messages.push(fail(
                "completed task redone",
                format!("{task}: {prompts} prompts when it was completed, {now} at the end"),
                &mut tally.tasks_redone,
            ));
        }
    }
    for (task, prompts) in &frozen_merges {
        let now = prompts_of(&fx.state, task);
        if now != *prompts {
            messages.push(fail(
                "task whose merge-back had started redone",
                format!("{task}: {prompts} prompts when its merge started, {now} at the end"),
                &mut tally.merges_redone,
            ));
        }
    }
    for task in TASKS {
        if prompts_of(&fx.state, task) == 0 {
            messages.push(fail(
                "task never ran",
                task.to_string(),
                &mut tally.tasks_lost,
            ));
        }
    }

    // The tree.
    let mut got = tree(&fx.root);
    let mut want = expected_tree(seed);
    if hot {
        // Every task's line once, in the order the lanes merged them.
        let notes = got.remove("NOTES.md").unwrap_or_default();
        let mut lines: Vec<&str> = notes.lines().collect();
        let header = lines.first() == Some(&"# Notes");
        lines.sort();
        let want_lines: Vec<String> = TASKS
            .iter()
            .map(|t| format!("- note from task {t}"))
            .chain(["# Notes".to_string()])
            .collect();
        let mut want_sorted: Vec<&str> = want_lines.iter().map(String::as_str).collect();
        want_sorted.sort();
        if !header || lines != want_sorted || !notes.ends_with('\n') {
            messages.push(fail("wrong NOTES.md", notes, &mut tally.wrong_trees));
        }
        want.remove("NOTES.md");
    }
    if got != want {
        messages.push(fail(
            "wrong tree",
            format!("got {:?}\nwant {:?}", got.keys(), want.keys()),
            &mut tally.wrong_trees,
        ));
    }

    // Git: branch, commits, index, stash.
    let branch = git(&fx.root, &["symbolic-ref", "HEAD"]);
    let subjects: Vec<String> = git(&fx.root, &["log", "--first-parent", "--format=%s", "HEAD"])
        .lines()
        .map(str::to_string)
        .collect();
    // The agents' own commits never reach the user's branch (kept under
    // refs); spectr's `--commit task` makes exactly one per task there.
    let mut want_subjects: Vec<String> = TASKS.iter().map(|t| format!("{t} Do task {t}")).collect();
    for t in TASKS {
        let n = subjects
            .iter()
            .filter(|s| s.starts_with(&format!("{t} ")))
            .count();
        if n != 1 {
            messages.push(fail(
                "not exactly one commit for a completed task",
                format!("{t}: {n} commits; {subjects:?}"),
                &mut tally.commits_wrong,
            ));
        }
    }
    want_subjects.push("initial".into());
    if hot {
        want_subjects.push("notes".into());
    }
    if ignore_rule(seed).is_some() {
        want_subjects.push("ignore spectr's folder".into());
    }
    let mut sorted = subjects.clone();
    sorted.sort();
    want_subjects.sort();
    let staged = Command::new("git")
        .args(["diff", "--cached", "--quiet"])
        .current_dir(&fx.root)
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    let staged_files = git(&fx.root, &["diff", "--cached", "--name-status"]);
    let stash_now = git(&fx.root, &["rev-parse", "refs/stash"]);
    let stash_list = git(&fx.root, &["stash", "list"]);
    if branch.trim() != "refs/heads/main"
        || sorted != want_subjects
        || !staged
        || stash_now != stash
        || stash_list.lines().count() != 1
    {
        // How it came to be: every move of the branch, and of HEAD.
        let moves = git(
            &fx.root,
            &["reflog", "show", "--format=%h %gs", "refs/heads/main"],
        );
        let heads = git(&fx.root, &["reflog", "show", "--format=%h %gs", "HEAD"]);
        messages.push(fail(
            "git state",
            format!(
                "branch {branch:?}, commits {subjects:?}, nothing staged: {staged} {staged_files:?}, stash {stash_now:?} (was {stash:?}), {stash_list:?}\nmain moved:\n{moves}HEAD moved:\n{heads}"
            ),
            &mut tally.git_state,
        ));
    }

    // Nothing of the killed runs is left once one completed: no checkpoint
    // ref (a lane's included), no temporary file or folder.
    let refs = git(
        &fx.root,
        &["for-each-ref", "--format=%(refname)", "refs/spectr/"],
    );
    let mut litter: Vec<String> = refs
        .lines()
        .filter(|r| {
            r.ends_with("/checkpoint")
                || r.ends_with("/checkpoint-index")
                || r.contains("/checkpoint-stash/")
        })
        .map(str::to_string)
        .collect();
    for dir in [fx.change_dir.join(".ralph"), fx.change_dir.clone()] {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            if entry
                .file_name()
                .to_string_lossy()
                .starts_with(".spectr-tmp-")
            {
                litter.push(entry.path().display().to_string());
            }
        }
    }
    for entry in std::fs::read_dir(fx.root.join(".git"))
        .into_iter()
        .flatten()
        .flatten()
    {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with("spectr-ralph-") && entry.path().is_dir() {
            litter.push(entry.path().display().to_string());
        }
    }
    if !litter.is_empty() {
        messages.push(fail(
            "left after the completed resume",
            format!("{litter:?}"),
            &mut tally.litter,
        ));
    }

    // Every attempt that failed by itself left its work under its ref.
    let failed: BTreeSet<(String, u64)> = all_events
        .iter()
        .filter(|e| e["event"] == "task_failed" && e["outcome"]["kind"] == "failed")
        .map(|e| {
            (
                e["task"].as_str().unwrap_or("").to_string(),
                e["attempt"].as_u64().unwrap_or(0),
            )
        })
        .collect();
    for e in all_events.iter().filter(|e| e["event"] == "reverted") {
        let key = (
            e["task"].as_str().unwrap_or("").to_string(),
            e["attempt"].as_u64().unwrap_or(0),
        );
        if !failed.contains(&key) {
            continue;
        }
        let refname = e["failed_ref"].as_str().unwrap_or("");
        let path = format!("wip/{}.txt", key.0);
        let commits = git(&fx.root, &["rev-list", "-n", "20", refname]);
        let kept = commits.lines().any(|c| {
            Command::new("git")
                .args(["cat-file", "-e", &format!("{c}:{path}")])
                .current_dir(&fx.root)
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success())
        });
        if !kept {
            messages.push(fail(
                "failed attempt's work not recoverable",
                format!("{refname} has no {path}"),
                &mut tally.unrecoverable,
            ));
        }
    }
    tally.trials += 1;
    tally.in_place += all_events
        .iter()
        .filter(|e| {
            e["event"] == "task_started" && e["lane"].is_string() && e["worktree"].is_null()
        })
        .count() as u64;
    tally.resolves += all_events
        .iter()
        .filter(|e| e["event"] == "resolving")
        .count() as u64;
    tally.failures.extend(messages);
}

#[test]
fn kill_9_at_random_moments_then_resume_loses_nothing() {
    torture(1, false);
}

#[test]
fn kill_9_at_random_moments_with_two_lanes_then_resume_loses_nothing() {
    torture(2, false);
}

/// Two lanes whose every task appends to one file: conflicts, resolve
/// attempts, lanes taking turns, tasks and resolves run in the user's tree
/// (their agents' commits put back off the user's branch), killed anywhere.
#[test]
fn kill_9_while_lanes_take_turns_in_the_users_tree_then_resume_loses_nothing() {
    torture(2, true);
}

/// Two lanes, each attempt a Slurm job: killed anywhere, its jobs
/// cancelled, resumed. Fewer trials by default (a job costs more than a
/// local lane); `SPECTR_TORTURE_SLURM_TRIALS` for more.
#[test]
fn kill_9_with_lanes_on_slurm_then_cancel_and_resume_loses_nothing() {
    let Some(cluster) = common::slurm::Cluster::start() else {
        return;
    };
    let trials = slurm_trials();
    torture_with(2, false, Some(&Slurm { cluster: &cluster }), trials);
}

/// The contention shape on Slurm: two remote lanes whose every task appends
/// to one file, so their work conflicts and resolve attempts run as jobs
/// too (remote lanes never take turns in the user's tree).
#[test]
fn kill_9_while_slurm_lanes_conflict_then_cancel_and_resume_loses_nothing() {
    let Some(cluster) = common::slurm::Cluster::start() else {
        return;
    };
    let trials = slurm_trials();
    torture_with(2, true, Some(&Slurm { cluster: &cluster }), trials);
}

/// `SPECTR_TORTURE_SLURM_TRIALS`, else 2.
fn slurm_trials() -> u64 {
    std::env::var("SPECTR_TORTURE_SLURM_TRIALS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(2)
}

fn torture(jobs: u32, hot: bool) {
    let trials: u64 = std::env::var("SPECTR_TORTURE_TRIALS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(DEFAULT_TRIALS);
    torture_with(jobs, hot, None, trials);
}

fn torture_with(jobs: u32, hot: bool, slurm: Option<&Slurm<'_>>, trials: u64) {
    let first: u64 = std::env::var("SPECTR_TORTURE_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1);
    let mut tally = Tally::default();
    for seed in first..first + trials {
        trial(seed, jobs, hot, slurm, &mut tally);
    }
    eprintln!(
        "torture (--jobs {jobs}{}{}): {} trials, {} kills, {} attempts in the user's tree, {} resolve attempts; tasks lost {}, redone {}, redone after their merge started {}, resumes blocked by an unrecorded agent commit {}, wrong trees {}, bad tasks files {}, orphans {}, git state {}, unrecoverable failed attempts {}, failed runs {}, said completed before recorded {}, left behind {}, tasks not committed exactly once {}",
        match (hot, slurm.is_some()) {
            (true, true) => ", lanes conflicting",
            (true, false) => ", lanes taking turns",
            _ => "",
        },
        if slurm.is_some() {
            ", lanes on Slurm"
        } else {
            ""
        },
        tally.trials,
        tally.kills,
        tally.in_place,
        tally.resolves,
        tally.tasks_lost,
        tally.tasks_redone,
        tally.merges_redone,
        tally.blocked_resumes,
        tally.wrong_trees,
        tally.bad_tasks_files,
        tally.orphans,
        tally.git_state,
        tally.unrecoverable,
        tally.run_errors,
        tally.said_before_recorded,
        tally.litter,
        tally.commits_wrong
    );
    assert!(
        tally.failures.is_empty(),
        "{} problems:\n{}",
        tally.failures.len(),
        tally.failures.join("\n\n")
    );
    if hot && slurm.is_some() {
        assert!(
            tally.resolves > 0,
            "the remote lanes never resolved a conflict: the trials tested nothing new"
        );
    } else if hot {
        assert!(
            tally.in_place > 0 && tally.resolves > 0,
            "the lanes never took turns in the user's tree: the trials tested nothing new"
        );
    }
}
