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
fn one_lane_more_than_the_node_has_cpus_queues_one_and_all_complete() {
    let Some(cluster) = Cluster::start() else {
        return;
    };
    // A lane of one CPU more than the node has: one job waits for a CPU.
    let lanes = cluster.cpus + 1;
    let mut tasks: Vec<(String, String)> = (1..=lanes)
        .map(|l| (format!("{l}.1"), format!("Lane {l}")))
        .collect();
    tasks.push(("1.2".into(), "Lane 1".into()));
    let list: Vec<(&str, &str, &str)> = tasks
        .iter()
        .map(|(id, section)| (id.as_str(), section.as_str(), "pending"))
        .collect();
    let fx = Fixture::new(&tasks_v1(&list));
    with_spectr_on_path(&fx);
    // Each first task takes a while, so the last job waits for a CPU.
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
            &lanes.to_string(),
            "--lane-exec",
            "srun --quiet --ntasks=1 --cpus-per-task=1 --job-name=spectr-lane-{lane} {cmd}",
            "--lane-remote",
            remote.to_str().unwrap(),
        ]);
    let out = output_shown(cmd);
    let ev = events(&out);
    assert_eq!(out.status.code(), Some(0), "{}\n{ev:#?}", stderr_text(&out));
    for (t, _) in &tasks {
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
