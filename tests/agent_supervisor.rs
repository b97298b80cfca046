//! The supervisor against the scripted fake agent: stops, timeouts, hangs,
//! floods, stray children, false signals and immediate failures.

mod common;

use common::alive;
use spectr::agent::provider::{AgentConfig, build_command};
use spectr::agent::supervisor::{REASON_AFTER_RESULT, start};
use spectr::agent::{
    AgentEvent, AgentExit, AgentKind, CommandSpec, CompletionSignal, Ending, Receipt,
    SuperviseOptions, SupervisorEvent,
};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

const FAKE: &str = env!("CARGO_BIN_EXE_spectr-fake-agent");
/// Only a guard against a hung test: nothing here should take more than a few seconds.
const HANG_GUARD: Duration = Duration::from_secs(120);

const PROMPT: &str = "You are working on change add-x.\n\
Task ID: 1.1\n\
Tasks file: tasks.jsonc\n\
When the task is done and verified, end your answer with <promise>COMPLETE</promise>.\n\
If you cannot finish, end with <promise>FAILED: reason</promise>.\n";

struct Fixture {
    dir: tempfile::TempDir,
}

impl Fixture {
    fn new() -> Fixture {
        Fixture {
            dir: tempfile::tempdir().unwrap(),
        }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn state(&self) -> PathBuf {
        self.path("state")
    }

    /// A command running the fake with `steps` for every attempt of task 1.1.
    fn spec(&self, steps: &[&str], args: &[&str]) -> CommandSpec {
        let script = serde_json::json!({ "1.1": steps });
        let script_path = self.path("script.json");
        std::fs::write(&script_path, script.to_string()).unwrap();
        let work = self.path("work");
        std::fs::create_dir_all(&work).unwrap();
        CommandSpec {
            program: PathBuf::from(FAKE),
            args: args.iter().map(|a| a.to_string()).collect(),
            env: vec![
                (
                    "SPECTR_FAKE_SCRIPT".into(),
                    script_path.display().to_string(),
                ),
                (
                    "SPECTR_FAKE_STATE".into(),
                    self.state().display().to_string(),
                ),
            ],
            cwd: work,
            stdin: Some(PROMPT.to_string()),
            prompt: PROMPT.to_string(),
            session_id: None,
            usage_file: None,
        }
    }

    fn opts(&self) -> SuperviseOptions {
        SuperviseOptions {
            attempt_timeout: Some(Duration::from_secs(90)),
            idle_timeout: None,
            result_grace: Duration::from_secs(30),
            kill_grace: Duration::from_millis(300),
            transcript: self.path("logs/attempt-1.log"),
        }
    }

    fn child_pids(&self) -> Vec<i32> {
        std::fs::read_to_string(self.state().join("children.pid"))
            .unwrap_or_default()
            .lines()
            .map(|l| l.trim().parse().unwrap())
            .collect()
    }
}

/// Runs to the end: every agent event, then the exit; checks that exactly one
/// exit comes last and the channel then closes.
fn run_with(
    spec: CommandSpec,
    kind: AgentKind,
    opts: SuperviseOptions,
    mut on_event: impl FnMut(&AgentEvent, &spectr::agent::AgentHandle),
) -> (Vec<AgentEvent>, AgentExit) {
    let running = start(spec, kind, opts).unwrap();
    let deadline = Instant::now() + HANG_GUARD;
    let mut events = Vec::new();
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match running.events.recv_timeout(left) {
            Ok(SupervisorEvent::Agents(batch)) => {
                for e in batch {
                    on_event(&e, &running.handle);
                    events.push(e);
                }
            }
            Ok(SupervisorEvent::Exited(exit)) => {
                assert!(
                    running
                        .events
                        .recv_timeout(Duration::from_secs(10))
                        .is_err(),
                    "channel must close after Exited"
                );
                return (events, exit);
            }
            Err(e) => panic!("no exit within the hang guard: {e}"),
        }
    }
}

fn run(spec: CommandSpec, kind: AgentKind, opts: SuperviseOptions) -> (Vec<AgentEvent>, AgentExit) {
    run_with(spec, kind, opts, |_, _| {})
}

#[test]
fn a_normal_claude_run_reports_everything() {
    let f = Fixture::new();
    std::fs::create_dir_all(f.path("work")).unwrap();
    std::fs::write(
        f.path("work/tasks.jsonc"),
        "{\"version\": 1, \"tasks\": [{\"id\": \"1.1\", \"description\": \"d\", \"status\": \"pending\"}]}",
    )
    .unwrap();
    let spec = f.spec(
        &[
            "mark:in_progress",
            "say:Working.",
            "tool:Bash:cargo test",
            "cost:0.084",
            "mark:completed",
            "complete",
        ],
        &[],
    );
    let (events, exit) = run(spec, AgentKind::Claude, f.opts());

    assert!(matches!(events[0], AgentEvent::Init { .. }));
    assert!(events.contains(&AgentEvent::Text {
        text: "Working.".into()
    }));
    assert!(events.contains(&AgentEvent::ToolUse {
        name: "Bash".into(),
        summary: "cargo test".into()
    }));
    assert_eq!(exit.ending, Ending::Exited { code: 0 });
    assert_eq!(exit.signal, Some(CompletionSignal::Complete));
    assert_eq!(exit.rate_limited, None);
    let result = exit.result.clone().unwrap();
    assert_eq!(result.cost_usd, Some(0.084));
    assert!(result.turns.unwrap() >= 3);
    assert!(
        std::fs::read_to_string(f.path("work/tasks.jsonc"))
            .unwrap()
            .contains("\"status\": \"completed\"")
    );

    let transcript = std::fs::read_to_string(f.path("logs/attempt-1.log")).unwrap();
    assert!(
        transcript
            .lines()
            .last()
            .unwrap()
            .contains("\"type\":\"result\"")
    );
    let receipt = Receipt::from_exit(&exit);
    assert_eq!(receipt.cost_usd, Some(0.084));
    assert_eq!(receipt.signal, Some(CompletionSignal::Complete));
    assert!(
        serde_json::to_string(&receipt)
            .unwrap()
            .contains("\"how\":\"exited\"")
    );
}

#[test]
fn stop_ends_the_attempt_with_the_first_reason() {
    let f = Fixture::new();
    let spec = f.spec(&["say:started", "hang"], &[]);
    let (_, exit) = run_with(spec, AgentKind::Claude, f.opts(), |e, handle| {
        if matches!(e, AgentEvent::Text { .. }) {
            let h = handle.clone();
            std::thread::spawn(move || h.stop("user pressed q"))
                .join()
                .unwrap();
            handle.stop("second request");
        }
    });
    assert_eq!(
        exit.ending,
        Ending::Stopped {
            reason: "user pressed q".into()
        }
    );
    assert_eq!(exit.signal, None);
}

#[test]
fn attempt_timeout_stops_a_silent_agent() {
    let f = Fixture::new();
    let mut opts = f.opts();
    opts.attempt_timeout = Some(Duration::from_millis(800));
    let (_, exit) = run(f.spec(&["hang"], &[]), AgentKind::Claude, opts);
    assert_eq!(exit.ending, Ending::AttemptTimeout);
}

#[test]
fn idle_timeout_stops_an_agent_that_went_quiet() {
    let f = Fixture::new();
    let mut opts = f.opts();
    opts.idle_timeout = Some(Duration::from_millis(800));
    let (events, exit) = run(
        f.spec(&["say:one", "sleep:100", "say:two", "hang"], &[]),
        AgentKind::Claude,
        opts,
    );
    assert_eq!(exit.ending, Ending::IdleTimeout);
    assert!(events.contains(&AgentEvent::Text { text: "two".into() }));
}

#[test]
fn an_agent_hanging_after_its_result_is_stopped_and_keeps_its_result() {
    let f = Fixture::new();
    let mut opts = f.opts();
    opts.result_grace = Duration::from_millis(500);
    let (_, exit) = run(
        f.spec(&["say:done", "complete", "hang_after_result"], &[]),
        AgentKind::Claude,
        opts,
    );
    assert_eq!(
        exit.ending,
        Ending::Stopped {
            reason: REASON_AFTER_RESULT.into()
        }
    );
    assert_eq!(exit.signal, Some(CompletionSignal::Complete));
    assert!(exit.result.is_some());
}

/// A consumer that stops reading holds the agent back (it blocks on its own
/// writes) instead of spectr buffering the flood: what the supervisor has read
/// but not handed over stays a few reads' worth, whatever the agent writes.
#[test]
fn a_flood_nobody_reads_is_held_back_not_buffered() {
    let f = Fixture::new();
    let running = start(
        f.spec(&["flood:96", "complete"], &[]),
        AgentKind::Claude,
        f.opts(),
    )
    .unwrap();
    let transcript = f.path("logs/attempt-1.log");
    let size = || std::fs::metadata(&transcript).map_or(0, |m| m.len());
    // Wait until the reading has stopped: the size stays the same for a
    // while (or everything was read, which the assertion below rejects).
    let deadline = Instant::now() + HANG_GUARD;
    let mut last = (size(), Instant::now());
    while Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
        let now = size();
        if now != last.0 {
            last = (now, Instant::now());
        } else if now > 0 && last.1.elapsed() > Duration::from_millis(500) {
            break;
        }
    }
    let held = size();
    assert!(
        held < 32 * 1024 * 1024,
        "{held} bytes were read while nobody took them: the flood was buffered"
    );
    // Reading again lets the agent finish, and nothing was lost.
    let mut texts = 0;
    loop {
        match running.events.recv_timeout(HANG_GUARD) {
            Ok(SupervisorEvent::Agents(batch)) => {
                texts += batch
                    .iter()
                    .filter(|e| matches!(e, AgentEvent::Text { .. }))
                    .count();
            }
            Ok(SupervisorEvent::Exited(exit)) => {
                assert_eq!(exit.signal, Some(CompletionSignal::Complete));
                break;
            }
            Err(e) => panic!("no exit within the hang guard: {e}"),
        }
    }
    assert!(
        size() >= 96 * 1024 * 1024,
        "transcript has {} bytes",
        size()
    );
    // One text per assistant line of the flood (about 1.4 KiB each), plus the final one.
    assert!(texts > 60_000, "only {texts} texts arrived");
}

#[test]
fn a_flood_is_drained_completely() {
    let f = Fixture::new();
    let (events, exit) = run(
        f.spec(&["flood:20", "complete"], &[]),
        AgentKind::Claude,
        f.opts(),
    );
    assert_eq!(exit.ending, Ending::Exited { code: 0 });
    assert_eq!(exit.signal, Some(CompletionSignal::Complete));
    let texts = events
        .iter()
        .filter(|e| matches!(e, AgentEvent::Text { .. }))
        .count();
    let transcript = std::fs::read(f.path("logs/attempt-1.log")).unwrap();
    assert!(
        transcript.len() >= 20 * 1024 * 1024,
        "transcript has {} bytes",
        transcript.len()
    );
    let pat: &[u8] = b"\"type\":\"assistant\"";
    let assistant_lines = transcript
        .split(|b| *b == b'\n')
        .filter(|l| l.windows(pat.len()).any(|w| w == pat))
        .count();
    assert_eq!(texts, assistant_lines);
    assert!(texts > 1000);
}

#[test]
fn children_that_ignore_term_are_gone_after_a_stop() {
    let f = Fixture::new();
    let spec = f.spec(&["spawn_child", "spawn_child", "say:spawned", "hang"], &[]);
    let (_, exit) = run_with(spec, AgentKind::Claude, f.opts(), |e, handle| {
        if matches!(e, AgentEvent::Text { .. }) {
            handle.stop("test");
        }
    });
    assert_eq!(
        exit.ending,
        Ending::Stopped {
            reason: "test".into()
        }
    );
    let pids = f.child_pids();
    assert_eq!(pids.len(), 2);
    for pid in pids {
        assert!(!alive(pid), "child {pid} survived the stop");
    }
}

#[test]
fn children_left_behind_by_an_agent_that_exited_are_killed() {
    let f = Fixture::new();
    let (_, exit) = run(
        f.spec(&["spawn_child", "complete"], &[]),
        AgentKind::Claude,
        f.opts(),
    );
    // The agent's own exit is what is reported…
    assert_eq!(exit.ending, Ending::Exited { code: 0 });
    assert_eq!(exit.signal, Some(CompletionSignal::Complete));
    // …and what it left behind (holding our stdout) is gone.
    let pids = f.child_pids();
    assert_eq!(pids.len(), 1);
    assert!(!alive(pids[0]));
}

#[test]
fn children_are_gone_after_a_timeout() {
    let f = Fixture::new();
    let mut opts = f.opts();
    opts.attempt_timeout = Some(Duration::from_millis(800));
    let (_, exit) = run(
        f.spec(&["spawn_child", "hang"], &[]),
        AgentKind::Claude,
        opts,
    );
    assert_eq!(exit.ending, Ending::AttemptTimeout);
    assert!(f.child_pids().iter().all(|p| !alive(*p)));
}

#[test]
fn an_echo_of_the_prompt_is_not_a_signal() {
    let f = Fixture::new();
    let (_, exit) = run(f.spec(&["echo_prompt"], &[]), AgentKind::Claude, f.opts());
    assert!(
        exit.final_answer
            .unwrap()
            .contains("<promise>COMPLETE</promise>")
    );
    assert_eq!(exit.signal, None);

    // A text agent printing the prompt back, with and without its own marker after it.
    let f = Fixture::new();
    let (_, exit) = run(
        f.spec(&["echo_prompt"], &["--format", "text"]),
        AgentKind::Custom,
        f.opts(),
    );
    assert_eq!(exit.signal, None);
    let f = Fixture::new();
    let (_, exit) = run(
        f.spec(&["echo_prompt", "complete"], &["--format", "text"]),
        AgentKind::Custom,
        f.opts(),
    );
    assert_eq!(exit.signal, Some(CompletionSignal::Complete));
}

#[test]
fn a_marker_in_tool_output_is_not_a_signal() {
    let f = Fixture::new();
    let spec = f.spec(
        &[
            "tool_output:grep says <promise>COMPLETE</promise>",
            "say:Still working on it.",
        ],
        &[],
    );
    let (events, exit) = run(spec, AgentKind::Claude, f.opts());
    assert!(events.iter().any(|e| matches!(e, AgentEvent::ToolResult { summary, .. } if summary.contains("<promise>COMPLETE"))));
    assert_eq!(exit.final_answer.as_deref(), Some("Still working on it."));
    assert_eq!(exit.signal, None);
}

#[test]
fn failed_signal_carries_its_reason() {
    let f = Fixture::new();
    let (_, exit) = run(
        f.spec(&["fail:the tests need a database"], &[]),
        AgentKind::Claude,
        f.opts(),
    );
    assert_eq!(
        exit.signal,
        Some(CompletionSignal::Failed("the tests need a database".into()))
    );
}

#[test]
fn an_immediate_exit_shows_its_stderr() {
    let f = Fixture::new();
    let spec = f.spec(
        &["stderr:--dangerously-skip-permissions cannot be used with root/sudo privileges for security reasons", "exit:1"],
        &[],
    );
    let (events, exit) = run(spec, AgentKind::Claude, f.opts());
    assert_eq!(exit.ending, Ending::Exited { code: 1 });
    assert!(
        exit.stderr_tail.contains("cannot be used with root/sudo"),
        "{:?}",
        exit.stderr_tail
    );
    assert!(
        events
            .iter()
            .any(|e| matches!(e, AgentEvent::Stderr { .. }))
    );
    assert!(exit.result.is_none());
}

#[test]
fn a_missing_program_is_a_spawn_failure() {
    let f = Fixture::new();
    let mut spec = f.spec(&[], &[]);
    spec.program = PathBuf::from("/nonexistent/agent-cli");
    let running = start(spec, AgentKind::Claude, f.opts()).unwrap();
    assert_eq!(running.handle.pid(), 0);
    running.handle.stop("harmless");
    let mut events = Vec::new();
    let exit = loop {
        match running.events.recv_timeout(HANG_GUARD).unwrap() {
            SupervisorEvent::Agents(batch) => events.extend(batch),
            SupervisorEvent::Exited(exit) => break exit,
        }
    };
    assert!(running.events.recv_timeout(Duration::from_secs(5)).is_err());
    assert!(events.is_empty());
    let Ending::SpawnFailed { error } = &exit.ending else {
        panic!("{:?}", exit.ending)
    };
    assert!(error.contains("/nonexistent/agent-cli"), "{error}");
    assert!(exit.stderr_tail.contains("not found"));
}

#[test]
fn a_rejected_rate_limit_is_reported_with_its_reset() {
    let f = Fixture::new();
    let before = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let (_, exit) = run(
        f.spec(&["rate_limit:3600"], &[]),
        AgentKind::Claude,
        f.opts(),
    );
    let limit = exit.rate_limited.expect("rate limit");
    assert_eq!(limit.status, "rejected");
    let resets = limit.resets_at.unwrap();
    assert!(resets >= before + 3600 && resets <= before + 3600 + 600);
    assert_eq!(exit.ending, Ending::Exited { code: 1 });
}

#[test]
fn attempts_are_counted_and_prompts_kept() {
    let f = Fixture::new();
    let script = serde_json::json!({ "1.1": [["fail:first try"], ["complete"]] });
    let make = || {
        let mut spec = f.spec(&[], &[]);
        std::fs::write(f.path("script.json"), script.to_string()).unwrap();
        spec.env[0].1 = f.path("script.json").display().to_string();
        spec
    };
    let (_, first) = run(make(), AgentKind::Claude, f.opts());
    let (_, second) = run(make(), AgentKind::Claude, f.opts());
    let (_, third) = run(make(), AgentKind::Claude, f.opts());
    assert_eq!(
        first.signal,
        Some(CompletionSignal::Failed("first try".into()))
    );
    assert_eq!(second.signal, Some(CompletionSignal::Complete));
    assert_eq!(third.signal, Some(CompletionSignal::Complete));
    for n in 1..=3 {
        assert_eq!(
            std::fs::read_to_string(f.state().join(format!("prompts/1.1-{n}.txt"))).unwrap(),
            PROMPT
        );
    }
}

#[test]
fn a_custom_command_reads_its_prompt_file() {
    let f = Fixture::new();
    std::fs::write(
        f.path("script.json"),
        serde_json::json!({"1.1": ["say:from file", "complete"]}).to_string(),
    )
    .unwrap();
    let cfg = AgentConfig {
        kind: AgentKind::Custom,
        custom_cmd: Some(format!(
            "'{FAKE}' --format text --prompt-file {{prompt_file}}"
        )),
        extra_args: vec![],
        model: None,
        max_turns: None,
        max_budget_usd: None,
        time_limit: None,
    };
    let work = f.path("work");
    std::fs::create_dir_all(&work).unwrap();
    let mut spec = build_command(&cfg, PROMPT, &work, &f.path("session")).unwrap();
    assert_eq!(spec.stdin, None);
    spec.env.push((
        "SPECTR_FAKE_SCRIPT".into(),
        f.path("script.json").display().to_string(),
    ));
    spec.env
        .push(("SPECTR_FAKE_STATE".into(), f.state().display().to_string()));
    let (events, exit) = run(spec, AgentKind::Custom, f.opts());
    assert!(events.contains(&AgentEvent::Raw {
        line: "from file".into()
    }));
    assert_eq!(exit.signal, Some(CompletionSignal::Complete));
    assert_eq!(exit.ending, Ending::Exited { code: 0 });
    assert_eq!(
        std::fs::read_to_string(f.state().join("prompts/1.1-1.txt")).unwrap(),
        PROMPT
    );
}

#[test]
fn the_transcript_folder_is_created() {
    let f = Fixture::new();
    let mut opts = f.opts();
    opts.transcript = f.path("deep/er/folder/t.log");
    let (_, exit) = run(f.spec(&["say:x"], &[]), AgentKind::Claude, opts);
    assert_eq!(exit.ending, Ending::Exited { code: 0 });
    assert!(Path::new(&f.path("deep/er/folder/t.log")).is_file());
}

#[test]
fn an_agent_that_ignores_term_is_killed_after_the_grace() {
    let f = Fixture::new();
    let mut spec = f.spec(&[], &[]);
    spec.program = PathBuf::from("sh");
    spec.args = vec![
        "-c".into(),
        "trap '' TERM; echo ready; sleep 1000; echo never".into(),
    ];
    let mut pid = 0;
    let (events, exit) = run_with(spec, AgentKind::Custom, f.opts(), |e, handle| {
        if matches!(e, AgentEvent::Raw { .. }) {
            pid = handle.pid() as i32;
            handle.stop("shutdown");
        }
    });
    assert_eq!(
        exit.ending,
        Ending::Stopped {
            reason: "shutdown".into()
        }
    );
    assert_eq!(
        events,
        [AgentEvent::Raw {
            line: "ready".into()
        }]
    );
    assert!(pid > 0 && !alive(pid));
}

#[test]
fn a_child_that_left_the_session_is_stopped_too() {
    let f = Fixture::new();
    let pid_file = f.path("escaped.pid");
    let mut spec = f.spec(&[], &[]);
    spec.program = PathBuf::from("sh");
    // The grandchild starts a session of its own (like a `detached` Node
    // child), ignores TERM and keeps our stdout open.
    let script = format!(
        "setsid sh -c 'echo $$ > {}; echo started; trap \"\" TERM; sleep 1000; :' & sleep 1000",
        pid_file.display()
    );
    spec.args = vec!["-c".into(), script];
    let (_, exit) = run_with(spec, AgentKind::Custom, f.opts(), |e, handle| {
        if matches!(e, AgentEvent::Raw { line } if line == "started") {
            handle.stop("test");
        }
    });
    assert_eq!(
        exit.ending,
        Ending::Stopped {
            reason: "test".into()
        }
    );
    let escaped: i32 = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(!alive(escaped), "the process in its own session survived");
}
