//! The cost of one session save as the run goes on: a session that already
//! records `done` finished tasks (each with one attempt: checkpoint, agent,
//! receipt, as a real run writes them) saves after each of the next tasks'
//! four state changes (started, checkpoint, agent started, completed), as the
//! loop does. It prints figures and asserts nothing about speed.
//!
//! `cargo bench --bench session` (`SPECTR_BENCH_SAVE_DONE=100,10000` sets the
//! sizes, `SPECTR_BENCH_SAVE_SECS` the time spent on each, 3 s by default).
//! The files are written where `tempfile` puts them (the disk, not memory),
//! without waiting for the disk, as the loop saves.

use serde_json::json;
use spectr::ralph::event::LoopEvent;
use spectr::ralph::session::{Session, SessionOptions};
use std::time::{Duration, Instant};

fn event(v: serde_json::Value) -> LoopEvent {
    serde_json::from_value(v).expect("a loop event")
}

/// Task `i`'s four state changes, as `--json` shows them in a real run.
fn task_events(i: usize) -> [LoopEvent; 4] {
    let task = format!("1.{i}");
    let commit = format!("{i:040x}");
    [
        event(json!({
            "event": "task_started", "task": task, "section": "S", "description": "d",
            "attempt": 1, "max_attempts": 4, "index": i, "count": i,
            "transcript": format!("/home/someone/project/spectr/changes/c/.ralph/transcripts/2026-11-25T11-45-01Z/{task}-attempt-1.log"),
        })),
        event(json!({
            "event": "checkpoint", "task": task, "attempt": 1,
            "checkpoint": {
                "refname": format!("refs/spectr/ralph/@main/c/{task}/1/checkpoint"),
                "commit": commit, "head": commit, "branch": "refs/heads/main", "index": commit,
            },
        })),
        event(json!({
            "event": "agent_started", "task": task, "attempt": 1, "pid": std::process::id(),
        })),
        event(json!({
            "event": "task_completed", "task": task, "attempt": 1,
            "outcome": {"kind": "completed", "via": "signal"},
            "receipt": {
                "duration_ms": 36, "turns": 1,
                "tokens": {"input": 1000, "output": 200, "cache_read": 500, "cache_creation": 0},
                "cost_usd": 0.0123, "ending": {"how": "exited", "code": 0},
                "signal": {"signal": "complete"}, "is_error": false, "rate_limited": null,
                "session_id": "b94b42fb-1e43-48bb-af4e-554c447439af", "model": "fake-model",
            },
        })),
    ]
}

fn bench(done: usize, budget: Duration) {
    let dir = tempfile::tempdir().expect("tempdir");
    let change = dir.path().join("c");
    std::fs::create_dir_all(change.join(".ralph")).expect("mkdir");
    let path = Session::path(&change);
    let options = SessionOptions {
        agent: "claude".into(),
        max_retries: 3,
        checkpoints: true,
        verify: None,
        commit_branch: None,
        commit_base: None,
    };
    let mut s = Session::new("c", options, None);
    for i in 1..=done {
        for e in task_events(i) {
            s.apply(&e);
        }
    }
    let mut buffer = String::new();
    let t0 = Instant::now();
    s.save_changes(&path, &mut buffer).expect("first save");
    let first = t0.elapsed();
    let size = std::fs::metadata(&path).map_or(0, |m| m.len());

    let mut saves = Vec::new();
    let started = Instant::now();
    let mut i = done;
    while started.elapsed() < budget && saves.len() < 200_000 {
        i += 1;
        for e in task_events(i) {
            s.apply(&e);
            let t = Instant::now();
            s.save_changes(&path, &mut buffer).expect("save");
            saves.push(t.elapsed());
        }
    }
    let total: Duration = saves.iter().sum();
    let mean = total / saves.len().max(1) as u32;
    saves.sort();
    let pick = |p: f64| saves[((saves.len() - 1) as f64 * p) as usize];
    println!(
        "session save, {done} finished tasks ({:.1} MB file, first save {:.1} ms): {} saves over {} more tasks, mean {:.1} µs, median {:.1} µs, p99 {:.1} µs, max {:.1} ms",
        size as f64 / 1e6,
        first.as_secs_f64() * 1e3,
        saves.len(),
        i - done,
        mean.as_secs_f64() * 1e6,
        pick(0.5).as_secs_f64() * 1e6,
        pick(0.99).as_secs_f64() * 1e6,
        saves.last().map_or(0.0, |d| d.as_secs_f64() * 1e3),
    );
}

fn main() {
    let sizes: Vec<usize> = std::env::var("SPECTR_BENCH_SAVE_DONE")
        .ok()
        .map(|s| s.split(',').filter_map(|n| n.trim().parse().ok()).collect())
        .unwrap_or_else(|| vec![100, 10_000]);
    let secs = std::env::var("SPECTR_BENCH_SAVE_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(3.0);
    for done in sizes {
        bench(done, Duration::from_secs_f64(secs));
    }
}
