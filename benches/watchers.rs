//! What watchers cost a run (issue 34): 8 lanes whose agents flood 200 MiB
//! of output in all, run with no watcher, and with the live page connected
//! (an event stream read to its end) plus a control-socket subscriber that
//! reads nothing. Prints the wall times, their ratio, and spectr's peak
//! memory in each; asserts nothing about speed (this is not a test).
//!
//! `cargo bench --bench watchers` (a few minutes). `SPECTR_BENCH_ROUNDS=N`
//! sets the interleaved rounds (default 3).

mod support;
use support::{Project, lane_project};

use std::io::{BufRead, BufReader, Write};
use std::process::Stdio;
use std::time::{Duration, Instant};

const LANES: usize = 8;
const MIB_PER_LANE: u32 = 25;

/// Peak RSS (`VmHWM`, kB) of `pid`, polled until it exits: the last value
/// read is the peak.
fn peak_kb(pid: u32) -> std::thread::JoinHandle<u64> {
    std::thread::spawn(move || {
        let mut peak = 0;
        while let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status")) {
            if let Some(kb) = status
                .lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches(" kB").trim().parse().ok())
            {
                peak = kb;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        peak
    })
}

/// The page's event stream, read to its end; the lines read.
fn page_reader(url: &str) -> std::thread::JoinHandle<u64> {
    let rest = url.trim().trim_start_matches("http://").to_owned();
    std::thread::spawn(move || {
        let (addr, path) = rest.split_once('/').expect("url");
        let mut c = std::net::TcpStream::connect(addr).expect("connect");
        write!(
            c,
            "GET /{path}events HTTP/1.1\r\nHost: {addr}\r\nAccept: text/event-stream\r\n\r\n"
        )
        .expect("request");
        // As a browser reads: whole buffers, the events counted.
        let mut reader = BufReader::with_capacity(1 << 16, c);
        let mut line = Vec::new();
        let mut lines = 0;
        loop {
            line.clear();
            match reader.read_until(b'\n', &mut line) {
                Ok(0) | Err(_) => break,
                Ok(_) if line.starts_with(b"data: ") => lines += 1,
                Ok(_) => {}
            }
        }
        lines
    })
}

/// A control-socket subscriber that never reads: held open until dropped.
fn stalled_subscriber(state_dir: &std::path::Path) -> std::os::unix::net::UnixStream {
    let path = state_dir.join("control.sock");
    let mut s = std::os::unix::net::UnixStream::connect(path).expect("socket");
    s.write_all(
        b"{\"op\":\"hello\",\"proto\":1,\"client\":\"bench\"}\n{\"op\":\"subscribe\",\"from\":0}\n",
    )
    .expect("subscribe");
    s
}

/// One run; its wall time and peak memory (kB), with watchers or not.
fn run(p: &Project, watched: bool) -> (Duration, u64, u64) {
    let mut cmd = p.ralph_command();
    cmd.args(["--yes", "--jobs", &LANES.to_string(), "--commit", "off"])
        .stdout(Stdio::null());
    if watched {
        cmd.arg("--serve");
    }
    let state = p.change.join(".ralph");
    let url_file = state.join("page-url");
    let _ = std::fs::remove_file(&url_file);
    let t0 = Instant::now();
    let mut child = cmd.spawn().expect("spectr");
    let peak = peak_kb(child.id());
    let mut page = None;
    let mut stalled = None;
    if watched {
        while !url_file.exists() || !state.join("control.sock").exists() {
            std::thread::sleep(Duration::from_millis(2));
        }
        // `SPECTR_BENCH_WATCHERS=page` or `stalled`: only that one (to
        // tell their costs apart); `none`: `--serve` with nobody connected.
        let which = std::env::var("SPECTR_BENCH_WATCHERS").unwrap_or_default();
        if which.is_empty() || which == "page" {
            page = Some(page_reader(
                &std::fs::read_to_string(&url_file).expect("url"),
            ));
        }
        if which.is_empty() || which == "stalled" {
            stalled = Some(stalled_subscriber(&state));
        }
    }
    let ok = child.wait().is_ok_and(|s| s.success());
    let wall = t0.elapsed();
    assert!(ok, "the run failed");
    drop(stalled);
    let lines = page.map_or(0, |t| t.join().unwrap_or(0));
    let peak = peak.join().unwrap_or(0);
    (wall, peak, lines)
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let rounds: usize = std::env::var("SPECTR_BENCH_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3);
    let p = lane_project(&[1; LANES], 0);
    p.script(&format!("[\"flood:{MIB_PER_LANE}\", \"complete\"]"));
    let (mut bare, mut watched) = (Vec::new(), Vec::new());
    for _ in 0..rounds {
        bare.push(run(&p, false));
        p.lane_reset();
        watched.push(run(&p, true));
        p.lane_reset();
    }
    let median = |v: &mut Vec<(Duration, u64, u64)>| {
        v.sort_by_key(|r| r.0);
        v[v.len() / 2]
    };
    let (b, w) = (median(&mut bare), median(&mut watched));
    let peak_of = |v: &[(Duration, u64, u64)]| v.iter().map(|r| r.1).max().unwrap_or(0);
    println!(
        "watchers, {LANES} lanes flooding {} MiB in all (medians of {rounds} interleaved rounds): no watcher {:.2} s, peak {} MiB; the page reading ({} lines) and a subscriber reading nothing {:.2} s, peak {} MiB; ratio {:.3}",
        LANES as u32 * MIB_PER_LANE,
        b.0.as_secs_f64(),
        peak_of(&bare) / 1024,
        w.2,
        w.0.as_secs_f64(),
        peak_of(&watched) / 1024,
        w.0.as_secs_f64() / b.0.as_secs_f64()
    );
}
