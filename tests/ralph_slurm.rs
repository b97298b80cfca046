//! Remote lanes on a real (private, single-node) Slurm cluster (issue 36):
//! each attempt's worker runs as a job through `srun`, and a job the
//! cluster holds in its queue is told apart from one at work.

mod common;

use common::slurm::{Cluster, processes_of, wait_for_none_of};
use common::*;
use serde_json::{Value, json};

fn events(out: &std::process::Output) -> Vec<Value> {
    stdout_text(out)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

#[test]
fn more_lanes_than_the_node_has_cpus_queue_and_all_complete() {
    let Some(cluster) = Cluster::start() else {
        return;
    };
    // Eight lanes (or one more than the node has CPUs, where it has eight
    // or more): the jobs that do not fit wait for a CPU.
    let lanes = (cluster.cpus + 1).max(8);
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
    let remote = bare_remote(&fx);
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
    // Each attempt said queued started later, its queue time said apart.
    for q in &queued {
        assert!(
            ev.iter()
                .any(|e| e["event"] == "attempt_running" && e["task"] == q["task"]),
            "{q}"
        );
    }
    // Nothing left in the cluster, nor of the run anywhere.
    assert!(cluster.jobs().is_empty(), "{:?}", cluster.jobs());
    assert!(wait_for_none_of(&fx.state).is_empty());
}

#[test]
fn a_job_cancelled_by_scancel_loses_its_lane_and_the_attempt_runs_again() {
    let Some(mut cluster) = Cluster::start() else {
        return;
    };
    // Its agent is at work: the engine takes the job away.
    a_fault_mid_attempt(
        &mut cluster,
        "",
        60,
        |c| {
            let cancelled = std::process::Command::new("scancel")
                .args(["--name", "spectr-lane-1"])
                .env("SLURM_CONF", &c.conf)
                .status()
                .unwrap();
            assert!(cancelled.success());
        },
        |_| {},
    );
}

/// A one-task run through `srun` (with `srun_args` too) whose first
/// attempt's agent works for `work_secs`; once it has started, `fault` is done
/// to the cluster, and once the lane is lost, `mend`. The run must lose the
/// lane (not the attempt), run it again, and complete, nothing left behind.
/// The lost lane's words, for the caller to check.
fn a_fault_mid_attempt(
    cluster: &mut Cluster,
    srun_args: &str,
    work_secs: u64,
    fault: impl FnOnce(&mut Cluster),
    mend: impl FnOnce(&mut Cluster),
) -> String {
    let fx = Fixture::new(&tasks_v1(&[("1.1", "Core", "pending")]));
    with_spectr_on_path(&fx);
    let started = fx.state.join("started");
    fx.script(json!({
        "1.1": [
            [format!("write:{}=x", started.display()), "write:src/half.rs=half done".to_string(), format!("sleep:{}", work_secs * 1000), "mark:completed".to_string(), "complete".to_string()],
            ["write:src/core.rs=core", "mark:completed", "complete"]
        ],
    }));
    let remote = bare_remote(&fx);
    let mut cmd = fx.ralph();
    cmd.env("SLURM_CONF", &cluster.conf).args([
        "--json",
        "--lane-exec",
        &format!("srun --quiet --ntasks=1 {srun_args} --job-name=spectr-lane-{{lane}} {{cmd}}"),
        "--lane-remote",
        remote.to_str().unwrap(),
    ]);
    let mut run = JsonRun::spawn(cmd);
    fx.wait_for("the first attempt's agent", || started.exists());
    fault(cluster);
    let lost = |seen: &[Value]| {
        seen.iter()
            .find_map(|e| {
                e["message"]
                    .as_str()
                    .filter(|m| m.starts_with("lane lost:"))
            })
            .map(str::to_owned)
    };
    // A time limit is enforced within about a minute and a half.
    run.until_within(
        "the lane lost",
        std::time::Duration::from_secs(150),
        |seen| lost(seen).is_some(),
    );
    mend(cluster);
    run.until("the summary", |seen| {
        seen.iter().any(|e| e["event"] == "summary")
    });
    assert_eq!(run.run.wait().code(), Some(0), "{:#?}", run.seen);
    assert_eq!(fx.status("1.1"), "completed");
    assert_eq!(
        std::fs::read_to_string(fx.root.join("src/core.rs")).unwrap(),
        "core"
    );
    // The lost attempt's half-done work is not merged.
    assert!(!fx.root.join("src/half.rs").exists());
    // The second attempt ran where the first was lost: no retry used.
    let failed = run
        .seen
        .iter()
        .filter(|e| e["event"] == "task_failed")
        .count();
    assert_eq!(failed, 0, "{:#?}", run.seen);
    assert!(cluster.jobs().is_empty(), "{:?}", cluster.jobs());
    let left = wait_for_none_of(&fx.state);
    assert!(left.is_empty(), "processes of the run left: {left:?}");
    lost(&run.seen).unwrap_or_default()
}

#[test]
fn a_node_taken_down_mid_attempt_loses_its_lane_and_the_attempt_runs_again() {
    let Some(mut cluster) = Cluster::start() else {
        return;
    };
    let node = cluster.node();
    let words = a_fault_mid_attempt(
        &mut cluster,
        "",
        60,
        |c| {
            c.scontrol(&[
                "update",
                &format!("nodename={node}"),
                "state=down",
                "reason=spectr-test",
            ])
        },
        |c| {
            // Back in service (it may be already, or be on its way:
            // ReturnToService=2 brings it back as its slurmd answers, so a
            // resume of ours may come too late and be refused).
            if c.node_state().starts_with("down") {
                c.scontrol_ok(&["update", &format!("nodename={}", c.node()), "state=resume"]);
            }
        },
    );
    assert!(words.contains("Node failure"), "{words}");
}

#[test]
fn a_nodes_slurmd_killed_mid_attempt_loses_its_lane_and_nothing_is_left() {
    let Some(mut cluster) = Cluster::start() else {
        return;
    };
    // The controller gives the node up after SlurmdTimeout (10 s here);
    // the restarted slurmd ends the step it left running.
    let words = a_fault_mid_attempt(
        &mut cluster,
        "",
        60,
        Cluster::kill_slurmd,
        Cluster::restart_slurmd,
    );
    assert!(words.contains("Node failure"), "{words}");
}

#[test]
fn a_job_past_its_time_limit_loses_its_lane_and_the_attempt_runs_again() {
    let Some(mut cluster) = Cluster::start() else {
        return;
    };
    // Slurm's smallest limit is a minute (its check comes within 30 s more);
    // the agent would work for three. Slurm's SIGTERM reaches the worker,
    // which keeps the attempt's work on the remote before it goes.
    let words = a_fault_mid_attempt(&mut cluster, "--time=1", 180, |_| {}, |_| {});
    assert!(words.contains("stopped on its machine"), "{words}");
    assert!(
        words.contains("its work is kept at refs/spectr/"),
        "{words}"
    );
    assert!(words.contains("TIME LIMIT"), "the engine's words: {words}");
}

/// The finder the tests above rely on to say nothing is left does find a
/// fixture's process (a check that cannot fail would prove nothing).
#[test]
fn the_process_finder_finds_a_process_of_the_fixture() {
    let fx = Fixture::new(&tasks_v1(&[("1.1", "Core", "pending")]));
    let mut child = std::process::Command::new("sleep")
        .arg("30")
        .env("SPECTR_FAKE_STATE", &fx.state)
        .spawn()
        .unwrap();
    let found = processes_of(&fx.state);
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(found, [child.id() as i32]);
    assert!(processes_of(&fx.state).is_empty());
}

/// The README's sample change (the demo's scripted agent, one planned
/// failure) with its two lanes as Slurm jobs: every task completed, the
/// failed attempt reverted and retried, one commit per task.
#[test]
fn the_sample_change_runs_its_lanes_through_srun() {
    let Some(cluster) = Cluster::start() else {
        return;
    };
    let fx = sample_project();
    with_spectr_on_path(&fx);
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/demo-agent.json");
    std::fs::copy(script, fx.state.join("script.json")).unwrap();
    let remote = bare_remote(&fx);
    let mut cmd = fx.spectr();
    cmd.env("SLURM_CONF", &cluster.conf)
        .args([
            "ralph",
            "add-greeting-cli",
            "--agent",
            "claude",
            "--json",
            "--jobs",
            "2",
            "--lane-exec",
            "srun --quiet --ntasks=1 --job-name=spectr-lane-{lane} {cmd}",
            "--lane-remote",
            remote.to_str().unwrap(),
        ])
        .stdin(std::process::Stdio::null());
    let out = output_shown(cmd);
    let ev = events(&out);
    assert_eq!(out.status.code(), Some(0), "{}\n{ev:#?}", stderr_text(&out));
    let started: Vec<String> = ev
        .iter()
        .filter(|e| e["event"] == "task_started")
        .map(|e| format!("{}#{}", e["task"].as_str().unwrap(), e["attempt"]))
        .collect();
    assert!(started.contains(&"1.2#2".to_string()), "{started:?}");
    assert!(
        ev.iter()
            .any(|e| e["event"] == "task_failed" && e["task"] == "1.2"),
        "the planned failure"
    );
    let greet = std::fs::read_to_string(fx.root.join("examples/greet.rs")).unwrap();
    assert!(greet.contains("Hello, {name}!"), "{greet}");
    let subjects = git(&fx.root, &["log", "--format=%s", "main"]);
    let commits = subjects.lines().count();
    assert_eq!(
        commits, 6,
        "the sample's commit and one per task:\n{subjects}"
    );
    assert!(cluster.jobs().is_empty(), "{:?}", cluster.jobs());
    assert!(wait_for_none_of(&fx.state).is_empty());
}
