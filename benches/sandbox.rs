//! What `--sandbox` adds to an attempt's start: starting a process directly
//! vs through bubblewrap with the mounts a run's profile uses (root
//! read-only, fresh /dev and /proc, a private /tmp, the agent's state
//! folders and the work tree writable, the repository's config, hooks,
//! info and spectr's files read-only again). Prints the figures; asserts
//! nothing about speed (this is not a test).
//!
//! `cargo bench --bench sandbox` (a few seconds). `SPECTR_BENCH_STARTS=N`
//! sets the starts measured per figure (default 200).

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

fn profile_args(work: &Path, state: &Path) -> Vec<String> {
    let w = work.display().to_string();
    let g = work.join(".git");
    let mut a: Vec<String> = [
        "--ro-bind",
        "/",
        "/",
        "--dev",
        "/dev",
        "--proc",
        "/proc",
        "--tmpfs",
        "/tmp",
    ]
    .map(String::from)
    .to_vec();
    let mut mount = |how: &str, p: String| {
        a.extend([how.to_string(), p.clone(), p]);
    };
    mount("--bind-try", state.display().to_string());
    mount("--bind", w.clone());
    for name in [
        "config",
        "hooks",
        "info",
        "modules",
        "worktrees",
        "spectr-ralph.lock",
    ] {
        mount("--ro-bind-try", g.join(name).display().to_string());
    }
    mount(
        "--ro-bind-try",
        work.join("spectr/changes/c/.ralph").display().to_string(),
    );
    a.extend(["--die-with-parent".into(), "--chdir".into(), w, "--".into()]);
    a
}

fn main() {
    if Command::new("bwrap")
        .args(["--ro-bind", "/", "/", "--", "true"])
        .status()
        .map(|s| !s.success())
        .unwrap_or(true)
    {
        eprintln!("bubblewrap cannot start a sandbox here: nothing to measure");
        return;
    }
    let dir = tempfile::tempdir_in(env!("CARGO_MANIFEST_DIR")).expect("tempdir");
    let work = dir.path().join("project");
    let state = dir.path().join("state");
    std::fs::create_dir_all(work.join("spectr/changes/c/.ralph")).unwrap();
    std::fs::create_dir_all(&state).unwrap();
    let ok = Command::new("git")
        .args(["init", "-q"])
        .current_dir(&work)
        .status()
        .unwrap();
    assert!(ok.success());
    let args = profile_args(&work, &state);
    let n = starts();
    let (direct_med, direct_mean) = measure(n, &mut || Command::new("true"));
    let (sandbox_med, sandbox_mean) = measure(n, &mut || {
        let mut c = Command::new("bwrap");
        c.args(&args).arg("true");
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
