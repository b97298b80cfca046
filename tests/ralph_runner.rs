//! Issue 19's behaviours 1-4, end to end in a pseudo-terminal: a question
//! never stalls the other lanes, a hang-up or SIGTERM during a question ends
//! the run, an open `Quit? [y/N]` holds new starts, and a restart is never
//! announced without happening. Only what a person sees is asserted: the
//! terminal's lines, exit codes, files, and the fake agent's notes (its
//! prompts, one per started attempt, and its pids).

mod common;

use common::pty::*;
use common::*;
use expectrl::Regex;
use nix::sys::signal::Signal;
use serde_json::{Value, json};
use std::path::PathBuf;
use std::time::Duration;

/// How long a run may take to end after a hang-up or SIGTERM: generous, so
/// only a run that hangs fails.
const EXIT_BOUND: Duration = Duration::from_secs(30);

/// How long lane 2 gets to finish while lane 1's question waits: a stall
/// fails after it (today's stall is endless), a slow machine has plenty.
const STALL_GUARD: Duration = Duration::from_secs(30);

/// How long nothing may start while `Quit?` is open before the answer: the
/// bug starts the next task within milliseconds of the previous one's end.
const HOLD_WINDOW: Duration = Duration::from_secs(3);

/// The line that says a restart has nothing to act on (wording agreed with
/// the lead: "nothing to restart", "no task is running", "... no longer
/// running").
/// The gap between the words is plain text only: a progress bar drawn on
/// the same terminal line ("nothing to merge ... 2 running") must not match.
const NOTHING_TO_RESTART: &str =
    r"(?i)((nothing|no task)[\w ,.'-]{0,40}?(running|to restart)|no longer running|not running)";

/// Tasks 1.1, 1.2 (lane 1) and 2.1, 2.2, 2.3 (lane 2): the issue's repro.
fn two_lanes() -> Fixture {
    Fixture::new(&tasks_v1(&[
        ("1.1", "Core", "pending"),
        ("1.2", "Core", "pending"),
        ("2.1", "Docs", "pending"),
        ("2.2", "Docs", "pending"),
        ("2.3", "Docs", "pending"),
    ]))
}

/// Steps that write `out-<task>.txt` (so a merge-back has a file to bring
/// home) and complete the task, after `before`.
fn completes(task: &str, before: &[&str]) -> Value {
    let mut steps: Vec<String> = before.iter().map(|s| s.to_string()).collect();
    steps.push(format!("write:out-{task}.txt={task}"));
    steps.push("mark:completed".into());
    steps.push("complete".into());
    json!(steps)
}

/// A `wait_for` step on `path` (the agent waits until the test creates it).
fn wait_step(path: &std::path::Path) -> String {
    format!("wait_for:{}", path.display())
}

/// `out-<task>.txt` is in the person's work tree and the task is completed
/// in the main tasks file: it ran, and (with lanes) was merged back.
fn done_home(fx: &Fixture, task: &str) -> bool {
    fx.root.join(format!("out-{task}.txt")).exists() && fx.status(task) == "completed"
}

/// The pids of the agents started so far.
fn agent_pids(fx: &Fixture) -> Vec<i32> {
    pids(&fx.state, "agents.pid")
}

// ---------------------------------------------------------------------------
// 1. A question does not stall other lanes.

#[test]
fn exhaustion_question_does_not_stall_the_other_lane() {
    let fx = two_lanes();
    let release = fx.state.join("release-2.1");
    fx.script(json!({
        "1.1": [["fail:never works"]],
        // 2.1 is still to do when the question comes, whatever the speed.
        "2.1": [completes("2.1", &[&wait_step(&release)])],
        "2.2": [completes("2.2", &["sleep:300"])],
        "2.3": [completes("2.3", &["sleep:300"])],
        "default": ["mark:completed", "complete"],
    }));
    let mut s = spawn(
        &fx,
        &[
            "--jobs",
            "2",
            "--max-retries",
            "0",
            "--on-exhaust",
            "prompt",
        ],
    );
    s.expect("retry, skip").unwrap();
    std::fs::write(&release, "").unwrap();
    // Not answered: lane 2 must go on to its end, merged back home.
    wait_reading_within(
        &mut s,
        "lane 2's tasks 2.1-2.3 to complete and merge while lane 1's question waits",
        STALL_GUARD,
        || ["2.1", "2.2", "2.3"].iter().all(|t| done_home(&fx, t)),
    );
    assert!(fx.prompt("1.2", 1).is_none(), "1.2 waits behind 1.1");
    assert!(fx.prompt("1.1", 2).is_none(), "nothing retried 1.1 unasked");
    // Skip.
    s.send(DOWN).unwrap();
    s.send("\r").unwrap();
    s.expect("also skipping its dependents: 1.2").unwrap();
    s.expect("Summary:").unwrap();
    assert_eq!(exit_code(&mut s), Some(1), "some tasks skipped: exit 1");
    assert!(fx.prompt("1.2", 1).is_none());
    assert_eq!(fx.status("1.1"), "pending");
    assert_eq!(fx.status("1.2"), "pending");
    for t in ["2.1", "2.2", "2.3"] {
        assert_eq!(fx.status(t), "completed", "{t}");
    }
}

// ---------------------------------------------------------------------------
// 2. A hang-up (or SIGTERM) during that question ends the run.

#[derive(Clone, Copy, Debug)]
enum Ending {
    /// The terminal closes (its master's last descriptor goes).
    HangUp,
    /// `kill -TERM <pid>`, the terminal still open.
    Term,
}

/// What lane 2 is doing when lane 1's question comes (`--jobs 2`).
#[derive(Clone, Copy, Debug)]
enum Lane2 {
    /// 2.1's agent is still at work.
    Running,
    /// 2.1's agent has finished; the task waits to be merged back.
    Finished,
}

/// The repro's run on a terminal of its own, at the exhaustion question
/// (`lane2`: what lane 2 does meanwhile; with `--jobs 1` nothing else
/// runs), ended by `ending`: spectr exits by itself, keeps the session,
/// leaves no agent, and the next run is not refused.
fn question_then(jobs: &str, lane2: Lane2, ending: Ending) {
    let fx = two_lanes();
    // Never created: 2.1's agent runs until it is stopped (or, as a last
    // resort, gives up by itself after 40 s).
    let never = fx.state.join("never");
    let first = match lane2 {
        Lane2::Running => completes("2.1", &[&format!("{}:40", wait_step(&never))]),
        Lane2::Finished => completes("2.1", &[]),
    };
    fx.script(json!({
        "1.1": [["fail:never works"]],
        "2.1": [first],
        "default": ["mark:completed", "complete"],
    }));
    let mut cmd = fx.spectr();
    cmd.env("TERM", "xterm")
        .args(Fixture::RALPH_ARGS)
        .args(["--yes", "--jobs", jobs, "--max-retries", "0"])
        .args(["--on-exhaust", "prompt"]);
    let mut pty = HangUpPty::spawn(cmd);
    pty.expect("retry, skip");
    if jobs != "1" {
        pty.wait_for("2.1's agent to start beside the question", || {
            fx.prompt("2.1", 1).is_some() && agent_pids(&fx).len() >= 2
        });
        if let Lane2::Finished = lane2 {
            pty.wait_for("2.1's agent to finish", || {
                live_agents(&fx.state).is_empty()
            });
        }
    }
    let what = format!("--jobs {jobs}, lane 2 {lane2:?}, {ending:?}");
    match ending {
        Ending::HangUp => pty.hang_up(),
        Ending::Term => pty.signal(Signal::SIGTERM),
    }
    let status = pty.exit_within(EXIT_BOUND);
    let left = live_agents(&fx.state);
    if status.is_none() {
        let shown = tail(&pty.seen, 3000).to_string();
        drop(pty);
        kill_leftover_agents(&fx.state);
        panic!(
            "{what}: spectr still running {EXIT_BOUND:?} after the signal at the retry/skip/abort question (agents alive: {left:?}); the terminal showed:\n{shown}"
        );
    }
    let status = status.unwrap();
    assert!(
        matches!(status.code(), Some(1 | 130)),
        "{what}: the run ends itself, as an abort (1) or an interruption (130), not killed by a signal: {status:?}"
    );
    assert!(
        fx.session_path().exists(),
        "the session file is kept for a resume"
    );
    fx.wait_for("the run's agents to be gone", || {
        live_agents(&fx.state).is_empty()
    });
    // The next run is not refused: the lock went with the run.
    fx.script(json!({"default": ["mark:completed", "complete"]}));
    let out = fx.run(&["--json", "--max-retries", "1"]);
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!text.contains("already running"), "{text}");
    assert_eq!(out.status.code(), Some(0), "the next run finishes: {text}");
    for t in ["1.1", "1.2", "2.1", "2.2", "2.3"] {
        assert_eq!(fx.status(t), "completed", "{t}");
    }
}

#[test]
fn hang_up_at_the_question_ends_a_two_lane_run() {
    question_then("2", Lane2::Running, Ending::HangUp);
}

#[test]
fn hang_up_at_the_question_ends_a_two_lane_run_with_a_task_to_merge() {
    question_then("2", Lane2::Finished, Ending::HangUp);
}

#[test]
fn sigterm_at_the_question_ends_a_two_lane_run() {
    question_then("2", Lane2::Running, Ending::Term);
}

#[test]
fn sigterm_at_the_question_ends_a_two_lane_run_with_a_task_to_merge() {
    question_then("2", Lane2::Finished, Ending::Term);
}

#[test]
fn hang_up_at_the_question_ends_a_one_lane_run() {
    question_then("1", Lane2::Running, Ending::HangUp);
}

#[test]
fn sigterm_at_the_question_ends_a_one_lane_run() {
    question_then("1", Lane2::Running, Ending::Term);
}

// ---------------------------------------------------------------------------
// 3. `Quit? [y/N]` holds new starts, opened by `q` or by Ctrl+C.

/// `key` (`q` or Ctrl+C) pressed while the first task of each lane runs
/// (they wait for a file the test creates); they end while `Quit?` is open,
/// and nothing new starts before the answer. Returns the session.
fn quit_question_open(fx: &Fixture, key: &str, jobs: &str, firsts: &[&str]) -> expectrl::Session {
    let release = fx.state.join("release");
    let mut script = serde_json::Map::new();
    for t in firsts {
        script.insert(
            t.to_string(),
            json!([completes(t, &[&wait_step(&release)])]),
        );
    }
    script.insert("default".into(), json!(["mark:completed", "complete"]));
    fx.script(Value::Object(script));
    let mut s = spawn(fx, &["--jobs", jobs]);
    wait_reading(&mut s, "the first tasks' agents", || {
        firsts.iter().all(|t| fx.prompt(t, 1).is_some()) && agent_pids(fx).len() == firsts.len()
    });
    let running = agent_pids(fx);
    s.send(key).unwrap();
    s.expect("Quit?").unwrap();
    std::fs::write(&release, "").unwrap();
    wait_reading(&mut s, "the running agents to end", || {
        running.iter().all(|p| !alive(*p))
    });
    // Every started task ended; today the next ones start at once.
    let shown = read_for(&mut s, HOLD_WINDOW);
    let started: Vec<i32> = agent_pids(fx)
        .into_iter()
        .filter(|p| !running.contains(p))
        .collect();
    assert!(
        started.is_empty(),
        "{} agent(s) started while `Quit?` was open (prompts: {:?}); the terminal showed:\n{}",
        started.len(),
        std::fs::read_dir(fx.state.join("prompts"))
            .map(|d| d
                .flatten()
                .map(|e| e.file_name().to_string_lossy().to_string())
                .collect::<std::collections::BTreeSet<_>>())
            .unwrap_or_default(),
        tail(&shown, 3000)
    );
    s
}

#[test]
fn quit_question_holds_new_starts_and_n_goes_on() {
    let fx = Fixture::new(&tasks_v1(&[
        ("1.1", "Core", "pending"),
        ("1.2", "Core", "pending"),
        ("1.3", "Core", "pending"),
    ]));
    let mut s = quit_question_open(&fx, "q", "1", &["1.1"]);
    s.send("n").unwrap();
    s.expect("All selected tasks completed.").unwrap();
    assert_eq!(exit_code(&mut s), Some(0));
    for t in ["1.1", "1.2", "1.3"] {
        assert_eq!(fx.status(t), "completed", "{t}");
    }
}

#[test]
fn quit_question_holds_new_starts_and_y_stops() {
    let fx = Fixture::new(&tasks_v1(&[
        ("1.1", "Core", "pending"),
        ("1.2", "Core", "pending"),
        ("1.3", "Core", "pending"),
    ]));
    let mut s = quit_question_open(&fx, "q", "1", &["1.1"]);
    s.send("y").unwrap();
    assert_eq!(exit_code(&mut s), Some(130));
    assert!(fx.prompt("1.2", 1).is_none() && fx.prompt("1.3", 1).is_none());
    assert_eq!(fx.status("1.1"), "completed");
    assert_eq!(fx.status("1.2"), "pending");
    assert!(fx.session_path().exists(), "the session is kept");
}

#[test]
fn quit_question_holds_new_starts_in_every_lane_and_n_goes_on() {
    let fx = Fixture::new(&tasks_v1(&[
        ("1.1", "Core", "pending"),
        ("1.2", "Core", "pending"),
        ("2.1", "Docs", "pending"),
        ("2.2", "Docs", "pending"),
    ]));
    let mut s = quit_question_open(&fx, "q", "2", &["1.1", "2.1"]);
    s.send("n").unwrap();
    s.expect("All selected tasks completed.").unwrap();
    assert_eq!(exit_code(&mut s), Some(0));
    for t in ["1.1", "1.2", "2.1", "2.2"] {
        assert_eq!(fx.status(t), "completed", "{t}");
    }
}

#[test]
fn quit_question_holds_new_starts_in_every_lane_and_y_stops() {
    let fx = Fixture::new(&tasks_v1(&[
        ("1.1", "Core", "pending"),
        ("1.2", "Core", "pending"),
        ("2.1", "Docs", "pending"),
        ("2.2", "Docs", "pending"),
    ]));
    let mut s = quit_question_open(&fx, "q", "2", &["1.1", "2.1"]);
    s.send("y").unwrap();
    assert_eq!(exit_code(&mut s), Some(130));
    assert!(fx.prompt("1.2", 1).is_none() && fx.prompt("2.2", 1).is_none());
    assert!(fx.session_path().exists(), "the session is kept");
}

#[test]
fn quit_question_opened_by_ctrl_c_holds_new_starts_and_n_goes_on() {
    let fx = Fixture::new(&tasks_v1(&[
        ("1.1", "Core", "pending"),
        ("1.2", "Core", "pending"),
        ("2.1", "Docs", "pending"),
        ("2.2", "Docs", "pending"),
    ]));
    let mut s = quit_question_open(&fx, "\x03", "2", &["1.1", "2.1"]);
    s.send("n").unwrap();
    s.expect("All selected tasks completed.").unwrap();
    assert_eq!(exit_code(&mut s), Some(0));
    for t in ["1.1", "1.2", "2.1", "2.2"] {
        assert_eq!(fx.status(t), "completed", "{t}");
    }
}

#[test]
fn quit_question_opened_by_ctrl_c_holds_new_starts_and_ctrl_c_again_stops() {
    let fx = Fixture::new(&tasks_v1(&[
        ("1.1", "Core", "pending"),
        ("1.2", "Core", "pending"),
        ("1.3", "Core", "pending"),
    ]));
    let mut s = quit_question_open(&fx, "\x03", "1", &["1.1"]);
    s.send("\x03").unwrap();
    assert_eq!(exit_code(&mut s), Some(130));
    assert!(fx.prompt("1.2", 1).is_none() && fx.prompt("1.3", 1).is_none());
    assert_eq!(fx.status("1.1"), "completed");
    assert_eq!(fx.status("1.2"), "pending");
    assert!(fx.session_path().exists(), "the session is kept");
}

// ---------------------------------------------------------------------------
// 4. A restart is never lost, and never announced when it cannot happen.

#[test]
fn r_restarts_the_running_task_without_using_a_try() {
    let fx = Fixture::new(&tasks_v1(&[
        ("1.1", "Core", "pending"),
        ("1.2", "Core", "pending"),
    ]));
    // One retry: had the restart used it, attempt 2's failure would exhaust
    // 1.1 and (--on-exhaust abort) end the run with exit 1.
    fx.script(json!({
        "1.1": [["hang"], ["fail:once"], completes("1.1", &[])],
        "default": ["mark:completed", "complete"],
    }));
    let mut s = spawn(&fx, &["--max-retries", "1", "--on-exhaust", "abort"]);
    wait_reading(&mut s, "1.1's first attempt", || {
        fx.prompt("1.1", 1).is_some()
    });
    s.send("r").unwrap();
    let seen = wait_reading(&mut s, "1.1 restarted", || fx.prompt("1.1", 2).is_some());
    // Named for what it is, the attempt numbers counting agent runs; the
    // last try says so. (The header may have been read while waiting.)
    let header = "(attempt 2 · restarted)";
    if !seen.contains(header) {
        s.expect(header).unwrap();
    }
    s.expect("(attempt 3 · last try)").unwrap();
    s.expect("All selected tasks completed.").unwrap();
    assert_eq!(exit_code(&mut s), Some(0));
    assert!(fx.prompt("1.1", 3).is_some(), "the retry after attempt 2");
    assert!(fx.prompt("1.1", 4).is_none());
    assert_eq!(fx.status("1.1"), "completed");
    assert_eq!(fx.status("1.2"), "completed");
}

#[test]
fn r_with_nothing_running_says_so() {
    let fx = Fixture::new(&tasks_v1(&[
        ("1.1", "Core", "pending"),
        ("1.2", "Core", "pending"),
    ]));
    let release = fx.state.join("release");
    fx.script(json!({
        "1.1": [completes("1.1", &[&wait_step(&release)])],
        "default": ["mark:completed", "complete"],
    }));
    let mut s = spawn(&fx, &[]);
    wait_reading(&mut s, "1.1's agent", || fx.prompt("1.1", 1).is_some());
    s.send("p").unwrap();
    // Taken before 1.1 ends, so the pause comes right after it.
    s.expect("will pause").unwrap();
    std::fs::write(&release, "").unwrap();
    s.expect("Paused - press 'p' to resume").unwrap();
    s.send("r").unwrap();
    s.set_expect_timeout(Some(Duration::from_secs(15)));
    let said = s.expect(Regex(NOTHING_TO_RESTART));
    let said = said.unwrap_or_else(|e| {
        panic!(
            "`r` while paused with nothing running: no line matching {NOTHING_TO_RESTART:?} ({e})"
        )
    });
    let before = String::from_utf8_lossy(said.before()).to_string();
    assert!(
        !before.contains("Restarting"),
        "a restart was announced with nothing running: {before}"
    );
    s.set_expect_timeout(Some(HANG_GUARD));
    s.send("p").unwrap();
    s.expect("All selected tasks completed.").unwrap();
    assert_eq!(exit_code(&mut s), Some(0));
    assert!(
        fx.prompt("1.1", 2).is_none(),
        "the ended task was not run again"
    );
    assert!(
        fx.prompt("1.2", 2).is_none(),
        "the next task was not restarted"
    );
}

#[test]
fn r_for_a_task_that_just_ended_says_so() {
    let fx = Fixture::new(&tasks_v1(&[
        ("1.1", "Core", "pending"),
        ("1.2", "Core", "pending"),
        ("2.1", "Docs", "pending"),
    ]));
    let release: Vec<PathBuf> = ["1.1", "2.1"]
        .iter()
        .map(|t| fx.state.join(format!("release-{t}")))
        .collect();
    fx.script(json!({
        "1.1": [completes("1.1", &[&wait_step(&release[0])])],
        "2.1": [completes("2.1", &[&wait_step(&release[1])])],
        "default": ["mark:completed", "complete"],
    }));
    let mut s = spawn(&fx, &["--jobs", "2"]);
    wait_reading(&mut s, "both agents", || {
        fx.prompt("1.1", 1).is_some() && fx.prompt("2.1", 1).is_some()
    });
    s.send("r").unwrap();
    s.expect("Restart which task? 1 1.1 · 2 2.1").unwrap();
    // While the person picks, 1.1 ends and is merged back.
    std::fs::write(&release[0], "").unwrap();
    wait_reading(&mut s, "1.1 to complete and merge", || {
        done_home(&fx, "1.1")
    });
    s.send("1").unwrap();
    s.set_expect_timeout(Some(Duration::from_secs(15)));
    let said = s.expect(Regex(NOTHING_TO_RESTART));
    let said = said.unwrap_or_else(|e| {
        panic!("`r` for 1.1 after it ended: no line matching {NOTHING_TO_RESTART:?} ({e})")
    });
    let before = String::from_utf8_lossy(said.before()).to_string();
    assert!(
        !before.contains("Restarting task 1.1"),
        "a restart of the ended 1.1 was announced: {before}"
    );
    s.set_expect_timeout(Some(HANG_GUARD));
    std::fs::write(&release[1], "").unwrap();
    s.expect("All selected tasks completed.").unwrap();
    assert_eq!(exit_code(&mut s), Some(0));
    assert!(fx.prompt("1.1", 2).is_none(), "1.1 was not run again");
    assert!(fx.prompt("2.1", 2).is_none(), "2.1 was not restarted");
    assert!(fx.prompt("1.2", 2).is_none(), "1.2 was not restarted");
}
