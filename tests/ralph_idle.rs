//! No busy loop: while the agent is silent, `spectr ralph` sleeps. A loop that
//! woke itself (its own reads of the tasks files reported as changes) burned a
//! whole core; this compares the CPU it uses with that, not with a clock.

mod common;
use common::*;
use serde_json::json;
use std::time::Duration;

/// CPU ticks (user + system; USER_HZ, 100 per second on Linux) of a process.
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("process alive");
    let rest = &stat[stat.rfind(')').expect("stat format") + 1..];
    let fields: Vec<u64> = rest
        .split_whitespace()
        .map(|f| f.parse().unwrap_or(0))
        .collect();
    fields[11] + fields[12]
}

#[test]
fn a_silent_agent_costs_no_cpu() {
    let fx = Fixture::new(&tasks_v1(&[
        ("1.1", "Core", "pending"),
        ("2.1", "Other", "pending"),
    ]));
    fx.script(json!({"default": ["sleep:60000", "complete"]}));
    let run = fx.spawn_quiet();
    fx.wait_for("the agent to start", || {
        fx.status("1.1") == "in_progress"
            && std::fs::read_dir(fx.change_dir.join(".ralph/transcripts"))
                .map(|mut d| d.next().is_some())
                .unwrap_or(false)
    });
    std::thread::sleep(Duration::from_millis(500));
    let before = cpu_ticks(run.id());
    std::thread::sleep(Duration::from_secs(3));
    let used = cpu_ticks(run.id()) - before;
    // A spinning loop uses ~300 ticks here (100 on a machine busy enough to
    // give it a third of a core); a sleeping one 0 or 1.
    assert!(
        used < 30,
        "spectr used {used} CPU ticks in 3 s of agent silence"
    );
}
