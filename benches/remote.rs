//! Remote lanes (`--lane-exec`, issue 25): what the remote path adds per
//! attempt over a local lane: the base pushed, a fresh clone fetched by the
//! worker, its work pushed and fetched back, before the same merge. The
//! engine is the template `{cmd}` (the worker started here, the remote a
//! bare repository beside the project), so the figure is git's and spectr's
//! own, without a network or ssh's handshake. It prints figures and asserts
//! nothing about speed (this is not a test).
//!
//! With a private single-node Slurm cluster (started here where Debian's
//! `slurm-wlm` and `munge` can run), the same attempt as a job through
//! `srun`: what the engine adds on top (its scheduling, a step's start).
//!
//! `cargo bench --bench remote` (a few minutes).

#[path = "../tests/common/slurm.rs"]
mod slurm;
mod support;
use support::{SPECTR, cycle, git, lane_project, secs, watched};

use std::time::Duration;

/// Lane 1's tasks; lane 2's one task makes the run parallel.
const TASKS: usize = 5;

fn per_task(files: usize, cluster: Option<&slurm::Cluster>) {
    let p = lane_project(&[TASKS, 1], files);
    p.script("[\"write:out/x.txt=x\", \"edit_line:src/m0/f0.rs:1=// edited\", \"mark:completed\", \"complete\"]");
    let remote = p.root.parent().expect("parent").join("remote.git");
    git(
        p.root.parent().expect("parent"),
        &["init", "-q", "--bare", remote.to_str().expect("utf-8")],
    );
    let clones = tempfile::tempdir().expect("tempdir");
    let bin_dir = std::path::Path::new(SPECTR).parent().expect("bin dir");
    let exec = format!(
        "PATH='{}':\"$PATH\" TMPDIR='{}' {{cmd}}",
        bin_dir.display(),
        clones.path().display()
    );
    let best = |args: &[&str]| {
        let mut best: Option<Duration> = None;
        for _ in 0..2 {
            let ev = watched(p.lane_run(args));
            p.lane_reset();
            let (_, c) = cycle(&ev, TASKS);
            best = Some(best.map_or(c, |b| b.min(c)));
        }
        best.unwrap_or_default()
    };
    let local = best(&["--jobs", "2"]);
    let remote_url = remote.to_str().expect("utf-8");
    let far = best(&[
        "--jobs",
        "2",
        "--lane-exec",
        &exec,
        "--lane-remote",
        remote_url,
    ]);
    println!(
        "remote lanes, {files} files: task cycle {:.0} ms through a remote lane vs {:.0} ms in a local lane: the remote path adds {:.0} ms per attempt (push, clone, push back, fetch)",
        secs(far) * 1e3,
        secs(local) * 1e3,
        (secs(far) - secs(local)) * 1e3,
    );
    let Some(cluster) = cluster else {
        println!("remote lanes through srun, {files} files: no Slurm cluster here (see above)");
        return;
    };
    // SLURM_CONF reaches srun through the run's environment.
    let srun = format!("srun --quiet --ntasks=1 --job-name=spectr-bench env {exec}");
    let mut best_srun: Option<Duration> = None;
    for _ in 0..2 {
        let mut cmd = p.lane_run(&[
            "--jobs",
            "2",
            "--lane-exec",
            &srun,
            "--lane-remote",
            remote_url,
        ]);
        cmd.env("SLURM_CONF", &cluster.conf);
        let ev = watched(cmd);
        p.lane_reset();
        let (_, c) = cycle(&ev, TASKS);
        best_srun = Some(best_srun.map_or(c, |b| b.min(c)));
    }
    let through = best_srun.unwrap_or_default();
    println!(
        "remote lanes through srun, {files} files: task cycle {:.0} ms vs {:.0} ms through the plain remote lane and {:.0} ms in a local lane: srun adds {:.0} ms per attempt, the whole remote path {:.0} ms",
        secs(through) * 1e3,
        secs(far) * 1e3,
        secs(local) * 1e3,
        (secs(through) - secs(far)) * 1e3,
        (secs(through) - secs(local)) * 1e3,
    );
}

fn main() {
    let cluster = slurm::Cluster::start();
    for files in [1_000, 10_000] {
        per_task(files, cluster.as_ref());
    }
}
