//! What `--sandbox` adds to an attempt's start: starting a process directly
//! vs through bubblewrap with the arguments a run's own profile builds
//! (`SandboxProfile::probe` and `args`: root read-only, fresh /dev and
//! /proc, a private /tmp, the agent's state folder and the work tree
//! writable, the repository's config, hooks, info, modules, worktrees,
//! spectr's refs and files read-only again), built per start as an attempt
//! does. Prints the figures; asserts nothing about speed (this is not a
//! test).
//!
//! `cargo bench --bench sandbox` (a few seconds). `SPECTR_BENCH_STARTS=N`
//! sets the starts measured per figure (default 200).

use spectr::ralph::sandbox::{SandboxProfile, SandboxSettings};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn starts() -> usize {
    std::env::var("SPECTR_BENCH_STARTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200)
}

/// Median and mean of `n` runs of `cmd` to its end.
fn measure(n: usize, cmd: &mut dyn FnMut() -> Command) -> (Duration, Duration) {
    let mut times: Vec<Duration> = (0..n)
        .map(|_| {
            let t = Instant::now();
            let status = cmd()
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .expect("starts");
            assert!(status.success());
            t.elapsed()
        })
        .collect();
    times.sort();
    let mean = times.iter().sum::<Duration>() / n as u32;
    (times[n / 2], mean)
}

fn main() {
    let dir = tempfile::tempdir_in(env!("CARGO_MANIFEST_DIR")).expect("tempdir");
    let work = dir.path().join("project");
    let state = dir.path().join("state");
    let change = Path::new("spectr/changes/c");
    std::fs::create_dir_all(work.join(change).join(".ralph")).unwrap();
    std::fs::create_dir_all(&state).unwrap();
    let ok = Command::new("git")
        .args(["init", "-q"])
        .current_dir(&work)
        .status()
        .unwrap();
    assert!(ok.success());
    // The run's own profile, found and tried as `--sandbox` does: the
    // agent's state folder writable, spectr's state and session read-only.
    let settings = SandboxSettings {
        enabled: true,
        writable: Vec::new(),
        network: true,
    };
    let own = vec![change.join(".ralph"), change.join(".ralph-session.json")];
    let profile = match SandboxProfile::probe(&settings, vec![state.clone()], own) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("bubblewrap cannot start a sandbox here ({e}): nothing to measure");
            return;
        }
    };
    let attempt_dir = work.join(change).join(".ralph/transcripts/1.1-attempt-1");
    std::fs::create_dir_all(&attempt_dir).unwrap();
    let n = starts();
    let (direct_med, direct_mean) = measure(n, &mut || Command::new("true"));
    // The arguments built per start, as an attempt does (it reads the work
    // tree's git folders and makes the folders bound read-only).
    let (sandbox_med, sandbox_mean) = measure(n, &mut || {
        let mut c = Command::new(&profile.bwrap);
        c.args(profile.args(&work, std::slice::from_ref(&attempt_dir)))
            .arg("true");
        c
    });
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    println!("process start to exit, {n} starts each (median / mean):");
    println!(
        "  direct:        {:.2} ms / {:.2} ms",
        ms(direct_med),
        ms(direct_mean)
    );
    println!(
        "  bubblewrap:    {:.2} ms / {:.2} ms",
        ms(sandbox_med),
        ms(sandbox_mean)
    );
    println!(
        "  the sandbox adds {:.2} ms per start (median; goal: under 20 ms)",
        ms(sandbox_med) - ms(direct_med)
    );
}
