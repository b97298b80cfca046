//! Remote lanes on a real (private, single-node) Slurm cluster (issue 36):
//! each attempt's worker runs as a job through `srun`, and a job the
//! cluster holds in its queue is told apart from one at work.

mod common;

use common::slurm::Cluster;
use common::*;
use serde_json::{Value, json};

fn events(out: &std::process::Output) -> Vec<Value> {
    stdout_text(out)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

#[test]
fn three_lanes_through_srun_on_two_cpus_queue_one_and_complete() {
    let Some(cluster) = Cluster::start() else {
        return;
    };
    let fx = Fixture::new(&tasks_v1(&[
        ("1.1", "Core", "pending"),
        ("1.2", "Core", "pending"),
        ("2.1", "Docs", "pending"),
        ("3.1", "Api", "pending"),
    ]));
    with_spectr_on_path(&fx);
    // Each first task takes a while: three jobs of one CPU each on two
    // CPUs, so one waits in the queue.
    fx.script(json!({
        "default": ["sleep:2500", "write:src/{task}.txt=done {task}", "mark:completed", "complete"],
    }));
    let remote = fx.root.parent().unwrap().join("remote.git");
    git(
        fx.root.parent().unwrap(),
        &["init", "-q", "--bare", remote.to_str().unwrap()],
    );
    let mut cmd = fx.ralph();
    cmd.env("SLURM_CONF", &cluster.conf)
        .env("SPECTR_TEST_REMOTE_QUEUED_AFTER_MS", "800")
        .args([
            "--json",
            "--jobs",
            "3",
            "--lane-exec",
            "srun --quiet --ntasks=1 --cpus-per-task=1 --job-name=spectr-lane-{lane} {cmd}",
            "--lane-remote",
            remote.to_str().unwrap(),
        ]);
    let out = output_shown(cmd);
    let ev = events(&out);
    assert_eq!(out.status.code(), Some(0), "{}\n{ev:#?}", stderr_text(&out));
    for t in ["1.1", "1.2", "2.1", "3.1"] {
        assert_eq!(fx.status(t), "completed", "{t}");
        assert_eq!(
            std::fs::read_to_string(fx.root.join(format!("src/{t}.txt"))).unwrap(),
            format!("done {t}")
        );
    }
    let queued: Vec<&Value> = ev
        .iter()
        .filter(|e| e["event"] == "attempt_queued")
        .collect();
    assert!(!queued.is_empty(), "a job waited for a CPU: {ev:#?}");
    let running = ev
        .iter()
        .find(|e| e["event"] == "attempt_running" && e["task"] == queued[0]["task"])
        .expect("the queued attempt started");
    assert!(running["queued_ms"].as_u64().unwrap() >= 800, "{running}");
    assert!(
        !ev.iter().any(|e| e["message"]
            .as_str()
            .is_some_and(|m| m.starts_with("lane lost:"))),
        "no lane lost"
    );
    // Nothing left in the cluster.
    assert!(cluster.jobs().is_empty(), "{:?}", cluster.jobs());
}

#[test]
fn a_job_cancelled_by_scancel_loses_its_lane_and_the_attempt_runs_again() {
    let Some(cluster) = Cluster::start() else {
        return;
    };
    let fx = Fixture::new(&tasks_v1(&[("1.1", "Core", "pending")]));
    with_spectr_on_path(&fx);
    let started = fx.state.join("started");
    fx.script(json!({
        "1.1": [
            [format!("write:{}=x", started.display()), "sleep:60000", "mark:completed", "complete"],
            ["write:src/core.rs=core", "mark:completed", "complete"]
        ],
    }));
    let remote = fx.root.parent().unwrap().join("remote.git");
    git(
        fx.root.parent().unwrap(),
        &["init", "-q", "--bare", remote.to_str().unwrap()],
    );
    let mut cmd = fx.ralph();
    cmd.env("SLURM_CONF", &cluster.conf).args([
        "--json",
        "--lane-exec",
        "srun --quiet --ntasks=1 --job-name=spectr-lane-{lane} {cmd}",
        "--lane-remote",
        remote.to_str().unwrap(),
    ]);
    let mut run = JsonRun::spawn(cmd);
    // Its agent is at work: the engine takes the job away.
    fx.wait_for("the first attempt's agent", || started.exists());
    let cancelled = std::process::Command::new("scancel")
        .args(["--name", "spectr-lane-1"])
        .env("SLURM_CONF", &cluster.conf)
        .status()
        .unwrap();
    assert!(cancelled.success());
    run.until("the summary", |seen| {
        seen.iter().any(|e| e["event"] == "summary")
    });
    assert_eq!(run.run.wait().code(), Some(0), "{:#?}", run.seen);
    assert!(
        run.seen.iter().any(|e| e["message"]
            .as_str()
            .is_some_and(|m| m.starts_with("lane lost:"))),
        "{:#?}",
        run.seen
    );
    assert_eq!(fx.status("1.1"), "completed");
    assert_eq!(
        std::fs::read_to_string(fx.root.join("src/core.rs")).unwrap(),
        "core"
    );
    assert!(cluster.jobs().is_empty(), "{:?}", cluster.jobs());
}
