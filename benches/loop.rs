//! Whole-loop figures of `spectr ralph`, each beside a reference measured in
//! the same run: idle cost while the agent is silent, how fast a status edit
//! is seen, per-task overhead, stream throughput, planning time. It prints
//! figures and asserts nothing about speed (this is not a test).
//!
//! `cargo bench --bench loop` (a few minutes: long_run is two runs of 2,000
//! tasks). `SPECTR_BENCH_IDLE_SECS=30` sets the idle window (default 10 s);
//! `SPECTR_BENCH_50K=1` adds a 50,000-file repository to the checkpoint
//! figures.

mod support;
use support::{FAKE, Project, git, timed, write_v1_tasks};

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// The loop benches' projects and runs.
impl Project {
    fn small(n: usize) -> Project {
        Project::new(
            &|dir| {
                let tasks: Vec<(String, String)> =
                    (1..=n).map(|i| (format!("1.{i}"), "S".into())).collect();
                write_v1_tasks(dir, &tasks);
            },
            0,
        )
    }

    /// 10,000 tasks in 100 files; only the first `pending` leaves are pending.
    fn big(sections: usize, pending: usize) -> Project {
        Project::new(
            &|dir| {
                support::generate_with(dir, sections, 100, &|s, t| {
                    if s == 1 && t <= pending {
                        "pending"
                    } else {
                        "completed"
                    }
                })
            },
            0,
        )
    }

    fn ralph(&self, args: &[&str], stdout: Stdio) -> Command {
        let mut cmd = self.ralph_command();
        cmd.args(args).stdout(stdout);
        cmd
    }

    fn reset(&self) {
        // The task commits a run made go too.
        git(&self.root, &["reset", "-q", "--hard", "bench-base"]);
        // Files the tasks wrote and no commit holds: else the next run
        // starts with them as the user's own uncommitted work.
        git(&self.root, &["clean", "-q", "-fd"]);
        let _ = std::fs::remove_dir_all(self.change.join(".ralph"));
        let _ = std::fs::remove_file(self.change.join(".ralph-session.json"));
    }
}

/// A `--json` run whose events arrive on a channel with their arrival time.
struct Watched {
    child: Child,
    events: mpsc::Receiver<(Instant, serde_json::Value)>,
}

impl Watched {
    fn start(mut cmd: Command) -> Watched {
        let mut child = cmd.arg("--json").spawn().expect("spawn spectr");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, events) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if let Ok(v) = serde_json::from_str(&line) {
                    let _ = tx.send((Instant::now(), v));
                }
            }
        });
        Watched { child, events }
    }

    fn wait_for(&self, event: &str, task: Option<&str>) -> Instant {
        loop {
            let (at, v) = self
                .events
                .recv_timeout(Duration::from_secs(120))
                .expect("event in time");
            if v["event"] == event && task.is_none_or(|t| v["task"] == t) {
                return at;
            }
        }
    }

    fn stop(mut self) {
        let _ = Command::new("kill")
            .arg(self.child.id().to_string())
            .status();
        let _ = self.child.wait();
    }
}

/// CPU ticks (user + system) a process has used.
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let rest = stat.rfind(')').map_or("", |i| &stat[i + 1..]);
    let f: Vec<u64> = rest
        .split_whitespace()
        .map(|x| x.parse().unwrap_or(0))
        .collect();
    f.get(11).copied().unwrap_or(0) + f.get(12).copied().unwrap_or(0)
}

/// A `/proc/<pid>/status` figure in kB (`VmHWM`: peak RSS).
fn status_kb(pid: u32, field: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

fn idle(name: &str, p: &Project, secs: u64) {
    p.script(&format!("[\"sleep:{}\", \"complete\"]", (secs + 60) * 1000));
    let run = Watched::start(p.ralph(&[], Stdio::piped()));
    run.wait_for("agent_started", None);
    std::thread::sleep(Duration::from_secs(1));
    let pid = run.child.id();
    let before = cpu_ticks(pid);
    std::thread::sleep(Duration::from_secs(secs));
    let used = cpu_ticks(pid) - before;
    let hz = 100.0; // USER_HZ on Linux
    let mb = |field| status_kb(pid, field) as f64 / 1024.0;
    println!(
        "idle, {name}: {:.3} % of a core over {secs} s (reference: 0), peak RSS {:.1} MB (now: {:.1} MB heap and stacks, {:.1} MB mapped files)",
        used as f64 / hz / secs as f64 * 100.0,
        mb("VmHWM"),
        mb("RssAnon"),
        mb("RssFile")
    );
    run.stop();
    p.reset();
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

fn status_latency(name: &str, p: &Project, file: &str, task: &str) {
    p.script("[\"sleep:600000\", \"complete\"]");
    let run = Watched::start(p.ralph(&[], Stdio::piped()));
    run.wait_for("agent_started", None);
    let path = p.change.join(file);
    let mut samples = Vec::new();
    let mut status = "pending";
    for _ in 0..20 {
        std::thread::sleep(Duration::from_millis(200));
        let text = std::fs::read_to_string(&path).expect("read");
        let next = if status == "pending" {
            "in_progress"
        } else {
            "pending"
        };
        let needle = format!("\"id\": \"{task}\"");
        let at = text.find(&needle).expect("task in file");
        let from = at + text[at..].find(&format!("\"{status}\"")).expect("status");
        let edited = format!(
            "{}\"{next}\"{}",
            &text[..from],
            &text[from + status.len() + 2..]
        );
        let tmp = path.with_extension("bench-tmp");
        std::fs::write(&tmp, edited).expect("write");
        let t0 = Instant::now();
        std::fs::rename(&tmp, &path).expect("rename");
        let seen = run.wait_for("status_changed", Some(task));
        samples.push(seen.saturating_duration_since(t0));
        status = next;
    }
    samples.sort();
    println!(
        "status edit -> status_changed, {name}: p50 {:.1} ms, p95 {:.1} ms (20 edits; poll floor 2000 ms)",
        percentile(&samples, 0.5).as_secs_f64() * 1e3,
        percentile(&samples, 0.95).as_secs_f64() * 1e3
    );
    run.stop();
    p.reset();
}

/// The fake agent alone on one prompt, as the loop would start it.
fn agent_alone(p: &Project, stdout: Stdio) -> Duration {
    let mut cmd = Command::new(FAKE);
    cmd.args(["-p", "--output-format", "stream-json"])
        .current_dir(&p.root)
        .env("SPECTR_FAKE_SCRIPT", &p.script)
        .stdin(Stdio::null())
        .stdout(stdout)
        .stderr(Stdio::null());
    timed(cmd)
}

/// The cost of one more task: runs of `few` and `many` pending tasks on the
/// same change (medians of `PER_TASK_RUNS`, interleaved), their difference
/// per extra task, less the agent alone. What is left of the shorter run is
/// the run's fixed cost (start: agent check, reading the change, git; end),
/// shown apart: it is paid once per run, not per task.
fn per_task(name: &str, few: (&Project, u32), many: (&Project, u32), args: &[&str]) {
    const PER_TASK_RUNS: usize = 5;
    let mut times: [Vec<Duration>; 3] = Default::default();
    for _ in 0..PER_TASK_RUNS {
        for (i, (p, _)) in [few, many].iter().enumerate() {
            p.script("[\"complete\"]");
            times[i].push(timed(p.ralph(args, Stdio::null())));
            p.reset();
        }
        times[2].push(agent_alone(few.0, Stdio::null()));
    }
    let [few_t, many_t, agent] = times.map(|mut v| {
        v.sort();
        v[v.len() / 2]
    });
    let per = many_t.saturating_sub(few_t) / (many.1 - few.1);
    let fixed = few_t.saturating_sub(per * few.1);
    println!(
        "per task, {name}: {:.1} ms, of which the agent alone {:.1} ms: overhead {:.1} ms per task; fixed cost of a run {:.0} ms ({} tasks {:.0} ms, {} tasks {:.0} ms; medians of {PER_TASK_RUNS})",
        per.as_secs_f64() * 1e3,
        agent.as_secs_f64() * 1e3,
        per.saturating_sub(agent).as_secs_f64() * 1e3,
        fixed.as_secs_f64() * 1e3,
        few.1,
        few_t.as_secs_f64() * 1e3,
        many.1,
        many_t.as_secs_f64() * 1e3,
    );
}

/// Whether a task's cost depends on how many ran before it: one run of `n`
/// instant tasks on one lane (the agent marks its task and completes at
/// once), in memory where `/dev/shm` exists; each task's end is taken from
/// the `--json` events as they arrive. Prints ms per task over the first
/// hundred, the hundred before task 1,000 and the last hundred, and the last
/// over the first (flat means 1.0; the goal is at most 1.3).
fn long_run(name: &str, n: usize, args: &[&str]) {
    let p = Project::in_memory(
        &|dir| {
            let tasks: Vec<(String, String)> =
                (1..=n).map(|i| (format!("1.{i}"), "S".into())).collect();
            write_v1_tasks(dir, &tasks);
        },
        0,
    );
    p.script("[\"complete\"]");
    let run = Watched::start(p.ralph(args, Stdio::piped()));
    let mut ends = Vec::with_capacity(n);
    while let Ok((at, v)) = run.events.recv_timeout(Duration::from_secs(600)) {
        if v["event"] == "task_completed" {
            ends.push(at);
        }
    }
    run.stop();
    if ends.len() < n.min(201) {
        println!(
            "long run, {name}: only {} of {n} tasks completed",
            ends.len()
        );
        return;
    }
    // Tasks `from` (1-based, its end) to `to`: ms per task.
    let per = |from: usize, to: usize| {
        ends[to - 1].duration_since(ends[from - 1]).as_secs_f64() * 1e3 / (to - from) as f64
    };
    let last = ends.len();
    let first = per(1, 101);
    let middle = if last >= 1_000 {
        format!(", around task 1,000 {:.1} ms", per(900, 1_000))
    } else {
        String::new()
    };
    let end = per(last - 100, last);
    println!(
        "long run, {name}, {last} tasks: first hundred {first:.1} ms per task{middle}, last hundred {end:.1} ms; last / first {:.2} (goal <= 1.3)",
        end / first
    );
}

/// `git stash push -u` + `git stash pop` after an edit and a new file, as a
/// careful user would do by hand around an attempt.
fn stash_round_trip(p: &Project) -> Duration {
    std::fs::write(p.root.join("src/m0/f0.rs"), "changed\n").expect("write");
    std::fs::write(p.root.join("untracked.txt"), "new\n").expect("write");
    let t0 = Instant::now();
    git(&p.root, &["stash", "push", "-u", "-q"]);
    git(&p.root, &["stash", "pop", "-q"]);
    let took = t0.elapsed();
    git(&p.root, &["checkout", "-q", "--", "."]);
    let _ = std::fs::remove_file(p.root.join("untracked.txt"));
    took
}

/// What the loop does around each attempt, timed in-process: an edit, then
/// `Checkpointer::create` and, once the attempt succeeded, `drop`; `tasks`
/// times in a row with one Checkpointer (its caches live for a run, too).
fn create_and_drop(p: &Project, tasks: u32) -> Duration {
    use spectr::checkpoint::Checkpointer;
    let cp = Checkpointer::discover(&p.root, Duration::from_secs(120))
        .expect("discover")
        .expect("a repository")
        .with_excludes(vec![
            p.change.join(".ralph"),
            p.change.join(".ralph-session.json"),
        ]);
    let mut took = Duration::ZERO;
    for i in 1..=tasks {
        std::fs::write(p.root.join("src/m0/f0.rs"), format!("edit {i}\n")).expect("write");
        let t0 = Instant::now();
        let c = cp
            .create(&cp.ref_name("bench", &format!("1.{i}"), 1))
            .expect("create");
        cp.drop(&c).expect("drop");
        took += t0.elapsed();
    }
    git(&p.root, &["checkout", "-q", "--", "."]);
    took / tasks
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

/// A 10-task change (one tasks file) in a project of `files` files.
fn ten_tasks(files: usize) -> Project {
    Project::new(
        &|dir| {
            let list: Vec<String> = (1..=10)
                .map(|i| format!("{{ \"id\": \"1.{i}\", \"section\": \"S\", \"description\": \"d\", \"status\": \"pending\" }}"))
                .collect();
            let text = format!(
                "{{ \"version\": 1, \"tasks\": [\n{}\n] }}\n",
                list.join(",\n")
            );
            std::fs::write(dir.join("tasks.jsonc"), text).expect("write");
        },
        files,
    )
}

/// The loop's per-task checkpoint cost: a 10-task change run with and
/// without `--no-checkpoint`, the difference per task. This VM's noise is
/// large, so each figure is the median of `ROUNDS` rounds, each round running
/// everything once in turn (a burst of load hits all alike); the difference
/// is taken within each round. Also timed directly: create + drop alone.
fn checkpoint_cost(files: usize) {
    const ROUNDS: usize = 5;
    let tasks = 10;
    let p = ten_tasks(files);
    p.script("[\"complete\"]");
    // The user's index as a user's would be (stat cache settled).
    git(&p.root, &["status", "-s"]);
    let mut loop_per = Vec::new();
    let mut stash = Vec::new();
    let mut alone = Vec::new();
    for _ in 0..ROUNDS {
        let without = timed(p.ralph(&["--no-checkpoint"], Stdio::null()));
        p.reset();
        // The checkpoint alone: no task commit (see `commit_cost`).
        let with = timed(p.ralph(&["--commit", "off"], Stdio::null()));
        p.reset();
        loop_per.push(with.saturating_sub(without) / tasks);
        stash.push(stash_round_trip(&p));
        alone.push(create_and_drop(&p, tasks));
    }
    let (per, stash, alone) = (median(loop_per), median(stash), median(alone));
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    println!(
        "checkpoint per task, {files} files (median of {ROUNDS}): in the loop {:.1} ms, create + drop alone {:.1} ms; git stash push -u + pop {:.1} ms; ratio {:.2} (alone {:.2})",
        ms(per),
        ms(alone),
        ms(stash),
        ms(per) / ms(stash),
        ms(alone) / ms(stash)
    );
}

/// What `--commit task` adds per task: a 20-task change run with
/// `--commit off` and with `--commit task` (checkpoints on in both), the
/// difference in the task cycle, beside the checkpoint's own cost
/// (`--no-checkpoint` against `--commit off`) and, when
/// `SPECTR_BENCH_BASELINE` names an older spectr, that one's checkpoint
/// alone; medians of `ROUNDS` interleaved rounds. A run's whole time would
/// put its start and end (preflight, the first commit's questions to git)
/// on a few tasks, and that time moves by tens of milliseconds here.
fn commit_cost(files: usize) {
    const ROUNDS: usize = 7;
    let p = twenty_tasks(files);
    // Each task writes a file of its own: a commit with the task's work.
    p.script("[\"write:out/{task}.txt=done\", \"complete\"]");
    git(&p.root, &["status", "-s"]);
    // The pre-issue binary (no `--commit`: its checkpoint alone), when given.
    let baseline = std::env::var_os("SPECTR_BENCH_BASELINE").map(std::path::PathBuf::from);
    let mut runs: [Vec<Duration>; 5] = Default::default();
    for _ in 0..ROUNDS {
        let cycle = |program: &std::path::Path, args: &[&str]| {
            let mut cmd = p.ralph(args, Stdio::piped());
            cmd.arg("--json");
            let mut cmd = retarget(cmd, program);
            let took = task_cycle(&mut cmd);
            p.reset();
            took
        };
        let ours = std::path::Path::new(support::SPECTR);
        runs[0].push(cycle(ours, &["--no-checkpoint"]));
        runs[1].push(cycle(ours, &["--commit", "off"]));
        runs[2].push(cycle(ours, &["--commit", "task"]));
        if let Some(old) = &baseline {
            runs[3].push(cycle(old, &["--no-checkpoint"]));
            runs[4].push(cycle(old, &[]));
        }
    }
    // Differences within each round (a burst of load hits a round's runs
    // alike), then their medians.
    let ms = |d: &Duration| d.as_secs_f64() * 1e3;
    let within = |f: &dyn Fn(usize) -> f64| {
        let mut v: Vec<f64> = (0..ROUNDS).map(f).collect();
        v.sort_by(f64::total_cmp);
        v[ROUNDS / 2]
    };
    let at = |i: usize, r: usize| runs[i].get(r).map_or(f64::NAN, ms);
    print!(
        "commit per task, {files} files (task cycle, runs of 20, medians of {ROUNDS} rounds): the commit {:.1} ms over --commit off; the checkpoint {:.1} ms over --no-checkpoint; together {:.1} ms",
        within(&|r| at(2, r) - at(1, r)),
        within(&|r| at(1, r) - at(0, r)),
        within(&|r| at(2, r) - at(0, r)),
    );
    match baseline {
        Some(_) => println!(
            "; the baseline's checkpoint alone {:.1} ms (together / it: {:.2})",
            within(&|r| at(4, r) - at(3, r)),
            within(&|r| (at(2, r) - at(0, r)) / (at(4, r) - at(3, r)))
        ),
        None => println!(" (SPECTR_BENCH_BASELINE=<an older spectr> to time its checkpoint too)"),
    }
}

/// `cmd` with another program, the same arguments, directory and
/// environment.
fn retarget(cmd: Command, program: &std::path::Path) -> Command {
    let mut other = Command::new(program);
    other.args(cmd.get_args());
    if let Some(dir) = cmd.get_current_dir() {
        other.current_dir(dir);
    }
    for (key, value) in cmd.get_envs() {
        match value {
            Some(v) => other.env(key, v),
            None => other.env_remove(key),
        };
    }
    other
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    other
}

/// The median time from one task's agent start to the next in a `--json`
/// run (each `agent_started` event as it arrives: an older spectr's events
/// carry no time): a task's whole cost in the run's steady state, with the
/// run's start and end left out.
fn task_cycle(cmd: &mut Command) -> Duration {
    let mut child = cmd.spawn().expect("run spectr");
    let stdout = child.stdout.take().expect("stdout");
    let starts: Vec<Instant> = BufReader::new(stdout)
        .lines()
        .map_while(Result::ok)
        .filter(|l| l.contains("\"event\":\"agent_started\""))
        .map(|_| Instant::now())
        .collect();
    let status = child.wait().expect("wait for spectr");
    assert!(status.success(), "the run failed: {status}");
    let gaps: Vec<Duration> = starts.windows(2).map(|w| w[1] - w[0]).collect();
    assert!(gaps.len() >= 10, "too few tasks ran: {}", starts.len());
    median(gaps)
}

fn twenty_tasks(files: usize) -> Project {
    Project::new(
        &|dir| {
            let list: Vec<(String, String)> = (1..=20)
                .map(|i| (format!("1.{i}"), "S".to_string()))
                .collect();
            support::write_v1_tasks(dir, &list);
        },
        files,
    )
}

/// The agent into a pipe read by `cat`, which writes to `to`: what any
/// reader of the agent's output costs at the least (the agent's own writes
/// into a pipe cost it more than writes to /dev/null), and with a file, what
/// keeping a transcript costs at the least.
fn agent_into_cat(p: &Project, to: &std::path::Path) -> Duration {
    let mut agent = Command::new(FAKE)
        .args(["-p", "--output-format", "stream-json"])
        .current_dir(&p.root)
        .env("SPECTR_FAKE_SCRIPT", &p.script)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn agent");
    let pipe = agent.stdout.take().expect("stdout");
    let out = std::fs::File::create(to).expect("create");
    let t0 = Instant::now();
    let ok = Command::new("cat")
        .stdin(pipe)
        .stdout(out)
        .status()
        .is_ok_and(|s| s.success());
    let _ = agent.wait();
    let took = t0.elapsed();
    assert!(ok, "cat failed");
    took
}

/// One task, so the run carries exactly the references' stream. Each figure
/// is the median of `STREAM_RUNS` runs, interleaved so a burst of load on
/// the machine hits all of them alike. A run with a 1 MiB stream gives the
/// fixed cost of a run (agent check, git discovery, start and end of the
/// attempt), shown apart so the streaming rate itself is visible too.
fn stream(p: &Project, mb: u32) {
    const STREAM_RUNS: usize = 7;
    let flood = format!("[\"flood:{mb}\", \"complete\"]");
    let small = "[\"flood:1\", \"complete\"]";
    let copy = p._tmp.path().join("copy.log");
    let mut times: [Vec<Duration>; 6] = Default::default();
    for _ in 0..STREAM_RUNS {
        p.script(&flood);
        times[0].push(agent_alone(p, Stdio::null()));
        times[1].push(agent_into_cat(p, std::path::Path::new("/dev/null")));
        times[2].push(agent_into_cat(p, &copy));
        let _ = std::fs::remove_file(&copy);
        times[3].push(timed(p.ralph(&["--no-checkpoint"], Stdio::null())));
        p.reset();
        times[4].push(timed(
            p.ralph(&["--no-checkpoint", "--json"], Stdio::null()),
        ));
        p.reset();
        p.script(small);
        times[5].push(timed(p.ralph(&["--no-checkpoint"], Stdio::null())));
        p.reset();
    }
    let [alone, cat, cat_file, human, json, fixed] = times.map(|mut v| {
        v.sort();
        v[v.len() / 2]
    });
    let rate = |d: Duration| mb as f64 * 1.048_576 / d.as_secs_f64();
    let ratio = |d: Duration, to: Duration| d.as_secs_f64() / to.as_secs_f64();
    println!(
        "stream of {mb} MiB (medians of {STREAM_RUNS}): agent to /dev/null {:.0} MB/s; agent | cat {:.0} MB/s; agent | cat > file {:.0} MB/s",
        rate(alone),
        rate(cat),
        rate(cat_file),
    );
    for (mode, d) in [("human", human), ("--json", json)] {
        println!(
            "  {mode}: {:.0} MB/s, {:.2}x the agent to /dev/null, {:.2}x agent | cat, {:.2}x agent | cat > file",
            rate(d),
            ratio(d, alone),
            ratio(d, cat),
            ratio(d, cat_file),
        );
    }
    println!(
        "  fixed cost of a run {:.0} ms; without it human {:.0} MB/s, --json {:.0} MB/s",
        fixed.as_secs_f64() * 1e3,
        rate(human.saturating_sub(fixed)),
        rate(json.saturating_sub(fixed)),
    );
}

fn plan(sections: usize) {
    let p = Project::big(sections, 100);
    let took = timed(p.ralph(&["--dry-run"], Stdio::null()));
    println!(
        "plan (--dry-run), {} tasks: {:.0} ms",
        sections * 100,
        took.as_secs_f64() * 1e3
    );
}

fn main() {
    // `cargo bench` passes `--bench`. `SPECTR_BENCH_ONLY=idle,stream` runs
    // only the named groups (idle, latency, per_task, long_run, checkpoint,
    // stream, plan). `SPECTR_BENCH_LONG_TASKS` sets long_run's size (2,000).
    let idle_secs = std::env::var("SPECTR_BENCH_IDLE_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(10);
    let only = std::env::var("SPECTR_BENCH_ONLY").unwrap_or_default();
    let on = |group: &str| only.is_empty() || only.split(',').any(|g| g.trim() == group);
    if on("idle") || on("latency") {
        let small = Project::small(2);
        let big = Project::big(100, 100);
        if on("idle") {
            idle("small change", &small, idle_secs);
            idle("10k-task change", &big, idle_secs);
        }
        if on("latency") {
            status_latency("small change", &small, "tasks.jsonc", "1.2");
            status_latency("10k-task change", &big, "tasks-1.jsonc", "1.2");
        }
    }
    if on("per_task") {
        per_task(
            "small change, no checkpoint",
            (&Project::small(10), 10),
            (&Project::small(40), 40),
            &["--no-checkpoint"],
        );
        per_task(
            "10k-task change, no checkpoint",
            (&Project::big(100, 10), 10),
            (&Project::big(100, 40), 40),
            &["--no-checkpoint"],
        );
    }
    if on("long_run") {
        let n = std::env::var("SPECTR_BENCH_LONG_TASKS")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(2_000);
        long_run("with checkpoints", n, &["--commit", "off"]);
        long_run("no checkpoint", n, &["--no-checkpoint"]);
    }
    if on("checkpoint") {
        for files in support::sizes(&[1_000, 10_000]) {
            checkpoint_cost(files);
        }
    }
    if on("commit") {
        for files in support::sizes(&[1_000, 10_000]) {
            commit_cost(files);
        }
    }
    if on("stream") {
        stream(&Project::small(1), 200);
    }
    if on("plan") {
        plan(100);
        plan(400);
    }
}
