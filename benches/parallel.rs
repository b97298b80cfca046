//! Parallel lanes (`spectr ralph --jobs N`, issue 9): figures beside a
//! reference measured in the same run. It prints figures and asserts nothing
//! about speed (this is not a test).
//!
//! - Makespan: 4 lanes x 3 tasks whose agent sleeps a fixed time, at
//!   `--jobs 4`, against the longest lane run alone (`--jobs 1` on a one-lane
//!   change of 3 tasks: 3 x sleep + the loop's own per-task cost). Goal: at
//!   most 1.05x.
//! - Merge-back: per task of a lane on a 10,000-file repository, the time
//!   from the agent's result to its work merged in the user's tree, and
//!   what a lane adds per task over `--jobs 1` (refresh, checkpoint, merge).
//!   Goal: at most 100 ms.
//!
//! - Convergence (issue 23): N lanes x 5 tasks that each append a line to
//!   one shared file (and write one of their own), for N = 2, 4, 8: agent
//!   attempts per task, merge conflicts, and the makespan against the same
//!   change at `--jobs 1` (in seconds, and in attempts one after another
//!   from the events' order), with a resolve attempt as long as a task's
//!   and a fifth of it. Goal: at most 1.5 attempts per task, and no slower
//!   than `--jobs 1`.
//!
//! `cargo bench --bench parallel` (a few minutes). `SPECTR_BENCH_SLEEP_MS`
//! sets the agent's sleep (default 1000; the convergence runs use a fifth);
//! `SPECTR_BENCH_ONLY_CONVERGE=1` runs the convergence part only.

mod support;
use support::{cycle, git, lane_project as project, secs, timed, watched};

use std::time::{Duration, Instant};

fn min_of(runs: usize, mut f: impl FnMut() -> Duration) -> Duration {
    (0..runs).map(|_| f()).min().unwrap_or_default()
}

fn makespan(sleep_ms: u64) {
    let steps = format!("[\"sleep:{sleep_ms}\", \"mark:completed\", \"complete\"]");
    let one_lane = project(&[3], 0);
    one_lane.script(&steps);
    let reference = min_of(2, || {
        let d = timed(one_lane.lane_run(&["--jobs", "1"]));
        one_lane.lane_reset();
        d
    });
    let four = project(&[3, 3, 3, 3], 0);
    four.script(&steps);
    let parallel = min_of(2, || {
        let d = timed(four.lane_run(&["--jobs", "4"]));
        four.lane_reset();
        d
    });
    let sequential = timed(four.lane_run(&["--jobs", "1"]));
    four.lane_reset();
    let sleep = Duration::from_millis(sleep_ms);
    println!(
        "makespan, 4 lanes x 3 tasks, agent sleeps {sleep_ms} ms: --jobs 4 {:.2} s; longest lane alone (--jobs 1, 3 tasks) {:.2} s (per-task overhead {:.0} ms); ratio {:.3} (goal <= 1.05); all 12 at --jobs 1 {:.2} s ({:.2}x faster)",
        secs(parallel),
        secs(reference),
        (secs(reference) / 3.0 - secs(sleep)) * 1e3,
        secs(parallel) / secs(reference),
        secs(sequential),
        secs(sequential) / secs(parallel),
    );
}

fn merge_back(files: usize) {
    let n = 10;
    // Lane 2's one task makes the run parallel; lane 1 is measured.
    let p = project(&[n, 1], files);
    p.script("[\"write:out/x.txt=x\", \"edit_line:src/m0/f0.rs:1=// edited\", \"mark:completed\", \"complete\"]");
    let samples = |args: &[&str]| {
        let mut best: Option<(Duration, Duration)> = None;
        for _ in 0..2 {
            let ev = watched(p.lane_run(args));
            p.lane_reset();
            let c = cycle(&ev, n);
            best = Some(best.map_or(c, |b| (b.0.min(c.0), b.1.min(c.1))));
        }
        best.unwrap_or_default()
    };
    let (lane_tail, lane_cycle) = samples(&["--jobs", "2"]);
    let (direct_tail, direct_cycle) = samples(&["--jobs", "1"]);
    println!(
        "merge-back, {files} files: agent result -> task completed {:.0} ms in a lane vs {:.0} ms at --jobs 1 (merge-back {:.0} ms, goal <= 100); task cycle {:.0} ms vs {:.0} ms (a lane adds {:.0} ms per task: refresh, checkpoint, merge)",
        secs(lane_tail) * 1e3,
        secs(direct_tail) * 1e3,
        secs(lane_tail.saturating_sub(direct_tail)) * 1e3,
        secs(lane_cycle) * 1e3,
        secs(direct_cycle) * 1e3,
        (secs(lane_cycle) - secs(direct_cycle)) * 1e3,
    );
}

/// N lanes x 5 tasks appending to one file: attempts, conflicts and
/// makespan, beside the same change at `--jobs 1`.
fn converge(lanes: usize, sleep_ms: u64, resolve_ms: u64) {
    let per = 5;
    let p = project(&vec![per; lanes], 0);
    std::fs::write(p.root.join("NOTES.md"), "# Notes\n").expect("write");
    git(&p.root, &["add", "NOTES.md"]);
    git(&p.root, &["commit", "-qm", "notes"]);
    p.script(&format!(
        "[[\"sleep:{sleep_ms}\", \"write:out/{{task}}.txt=x\", \"append:NOTES.md=- note from task {{task}}\", \"mark:completed\", \"complete\"], [\"sleep:{resolve_ms}\", \"resolve:NOTES.md\", \"mark:completed\", \"complete\"]]"
    ));
    let run = |jobs: &str| {
        // The fake agent counts attempts in its state folder (a resolve
        // attempt runs its second script).
        let state = tempfile::tempdir().expect("state dir");
        let mut cmd = p.lane_run(&["--jobs", jobs]);
        cmd.env("SPECTR_FAKE_STATE", state.path());
        let started = Instant::now();
        let ev = watched(cmd);
        let took = started.elapsed();
        git(&p.root, &["checkout", "-q", "--", "NOTES.md"]);
        p.lane_reset();
        let count = |kind: &str| ev.iter().filter(|(_, v)| v["event"] == kind).count();
        // Started in the user's tree while the lanes took turns.
        let in_place = ev
            .iter()
            .filter(|(_, v)| {
                v["event"] == "task_started" && v["lane"].is_string() && v["worktree"].is_null()
            })
            .count();
        (
            took,
            count("task_started"),
            count("resolving"),
            attempts_in_a_row(&ev),
            in_place,
        )
    };
    // Best of three, each side: the figures are noisy on a shared machine.
    let best = |jobs: &str| {
        (0..3)
            .map(|_| run(jobs))
            .min_by_key(|r| r.0)
            .expect("three runs")
    };
    let (one, one_attempts, ..) = best("1");
    let (par, attempts, resolves, chain, in_place) = best(&lanes.to_string());
    let tasks = lanes * per;
    println!(
        "convergence, {lanes} lanes x {per} tasks appending to one file, agent sleeps {sleep_ms} ms ({resolve_ms} ms to resolve): --jobs {lanes} {:.2} s with {attempts} attempts ({:.2} per task, {resolves} resolve attempts, {in_place} in your tree; goal <= 1.5), the longest chain of attempts {chain}; --jobs 1 {:.2} s with {one_attempts} attempts; makespan ratio {:.2} (goal <= 1.0)",
        secs(par),
        attempts as f64 / tasks as f64,
        secs(one),
        secs(par) / secs(one),
    );
}

/// The makespan in attempts, without the clock: an attempt starts at 1 +
/// the latest end among those that ended before it started (event order).
fn attempts_in_a_row(events: &[(Instant, serde_json::Value)]) -> u32 {
    let mut ends = std::collections::BTreeMap::new();
    let (mut latest, mut longest) = (0, 0);
    for (_, v) in events {
        let key = (v["task"].to_string(), v["attempt"].to_string());
        match v["event"].as_str() {
            Some("task_started") => {
                ends.insert(key, latest + 1);
                longest = longest.max(latest + 1);
            }
            Some("task_completed" | "task_failed") => {
                latest = latest.max(ends.get(&key).copied().unwrap_or(0));
            }
            _ => {}
        }
    }
    longest
}

fn main() {
    // `cargo bench` passes `--bench`; no filters are supported.
    let sleep_ms = std::env::var("SPECTR_BENCH_SLEEP_MS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1000);
    if std::env::var_os("SPECTR_BENCH_ONLY_CONVERGE").is_none() {
        makespan(sleep_ms);
    }
    // A resolve as long as the task (the worst case), then a fifth of it
    // (closer to a real agent fixing a few marked lines).
    for lanes in [2, 4, 8] {
        converge(lanes, sleep_ms / 5, sleep_ms / 5);
    }
    for lanes in [4, 8] {
        converge(lanes, sleep_ms / 5, sleep_ms / 25);
    }
    if std::env::var_os("SPECTR_BENCH_ONLY_CONVERGE").is_some() {
        return;
    }
    for files in [1_000, 10_000] {
        merge_back(files);
    }
}
