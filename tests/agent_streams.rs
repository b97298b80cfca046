//! The real output of codex 0.169.0, gemini-cli 0.61.0, opencode 1.18.33,
//! copilot 1.0.102, pi 0.73.1 and qwen-code 0.24.4
//! (`tests/fixtures/agent-streams/`), run through the real supervisor: a
//! shell prints the stream (and the scenario's stderr) and exits with the
//! code the real program exited with. Every stream must end as the scenario
//! did: complete, failed with its reason, rate limited, or abnormal with the
//! agent's own error text.

use spectr::agent::supervisor::start;
use spectr::agent::{
    AgentEvent, AgentExit, AgentKind, CommandSpec, CompletionSignal, Ending, Receipt,
    SuperviseOptions, SupervisorEvent,
};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Only a guard against a hung test.
const HANG_GUARD: Duration = Duration::from_secs(120);

/// The prompt the streams were recorded with (the agents echo parts of it).
const PROMPT: &str = "Task 1.1: create mock-note.txt, then mark task 1.1 completed in spectr/changes/add-greeting-cli/tasks.jsonc.\n\
End with <promise>COMPLETE</promise> or <promise>FAILED: reason</promise>.\n";

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/agent-streams")
}

#[derive(Debug, Clone, Copy)]
enum Expect {
    /// `<promise>COMPLETE</promise>` in the final answer, a clean exit.
    Complete,
    /// `<promise>FAILED: …</promise>` with this reason.
    Failed(&'static str),
    /// The task was marked completed in the file (the loop sees that); the
    /// stream itself carries no signal and no error.
    StatusEdit,
    /// Rejected rate limit: the loop waits instead of counting an attempt.
    RateLimited,
    /// No signal, no limit, a non-zero exit, and the agent's own error text
    /// contains this.
    Abnormal(&'static str),
    /// Its tools were all denied or withheld (it still exits 0 and claims
    /// success): a failed run, with a reason holding this.
    Denied(&'static str),
}

/// Every stream of the fixture folder with its program, exit code and outcome.
const CASES: &[(&str, AgentKind, i32, Expect)] = &[
    ("codex.jsonl", AgentKind::Codex, 0, Expect::Complete),
    ("codex-failcmd.jsonl", AgentKind::Codex, 0, Expect::Complete),
    (
        "codex-failed.jsonl",
        AgentKind::Codex,
        0,
        Expect::Failed("tests do not pass"),
    ),
    (
        "codex-flaky429.jsonl",
        AgentKind::Codex,
        0,
        Expect::Complete,
    ),
    (
        "codex-flaky500.jsonl",
        AgentKind::Codex,
        0,
        Expect::Complete,
    ),
    (
        "codex-http400.jsonl",
        AgentKind::Codex,
        1,
        Expect::Abnormal("Invalid request: mock says no."),
    ),
    (
        "codex-http429.jsonl",
        AgentKind::Codex,
        1,
        Expect::RateLimited,
    ),
    (
        "codex-http500.jsonl",
        AgentKind::Codex,
        1,
        Expect::Abnormal("currently experiencing high demand"),
    ),
    ("codex-patch.jsonl", AgentKind::Codex, 0, Expect::Complete),
    ("codex-reason.jsonl", AgentKind::Codex, 0, Expect::Complete),
    (
        "codex-status.jsonl",
        AgentKind::Codex,
        0,
        Expect::StatusEdit,
    ),
    ("gemini.jsonl", AgentKind::Gemini, 0, Expect::Complete),
    (
        "gemini-failcmd.jsonl",
        AgentKind::Gemini,
        0,
        Expect::Complete,
    ),
    (
        "gemini-failed.jsonl",
        AgentKind::Gemini,
        0,
        Expect::Failed("tests do not pass"),
    ),
    (
        "gemini-flaky429.jsonl",
        AgentKind::Gemini,
        0,
        Expect::Complete,
    ),
    (
        "gemini-http400.jsonl",
        AgentKind::Gemini,
        144,
        Expect::Abnormal("Request contains an invalid argument. (HTTP 400)"),
    ),
    (
        "gemini-http429.jsonl",
        AgentKind::Gemini,
        173,
        Expect::RateLimited,
    ),
    (
        "gemini-readmissing.jsonl",
        AgentKind::Gemini,
        0,
        Expect::Complete,
    ),
    (
        "gemini-reason.jsonl",
        AgentKind::Gemini,
        0,
        Expect::Complete,
    ),
    (
        "gemini-status.jsonl",
        AgentKind::Gemini,
        0,
        Expect::StatusEdit,
    ),
    (
        "gemini-untrusted.jsonl",
        AgentKind::Gemini,
        55,
        Expect::Abnormal("Gemini CLI is not running in a trusted directory."),
    ),
    ("opencode.jsonl", AgentKind::Opencode, 0, Expect::Complete),
    (
        "opencode-failcmd.jsonl",
        AgentKind::Opencode,
        0,
        Expect::Complete,
    ),
    (
        "opencode-failed.jsonl",
        AgentKind::Opencode,
        0,
        Expect::Failed("tests do not pass"),
    ),
    (
        "opencode-file.jsonl",
        AgentKind::Opencode,
        1,
        Expect::Abnormal("File not found: Read the attached file"),
    ),
    (
        "opencode-http400.jsonl",
        AgentKind::Opencode,
        1,
        Expect::Abnormal("Invalid request: mock says no. (HTTP 400)"),
    ),
    (
        "opencode-http429.jsonl",
        AgentKind::Opencode,
        1,
        Expect::RateLimited,
    ),
    (
        "opencode-http500.jsonl",
        AgentKind::Opencode,
        1,
        Expect::Abnormal("The server had an error while processing your request. (HTTP 500)"),
    ),
    (
        "opencode-outside.jsonl",
        AgentKind::Opencode,
        0,
        Expect::Complete,
    ),
    (
        "opencode-reason.jsonl",
        AgentKind::Opencode,
        0,
        Expect::Complete,
    ),
    (
        "opencode-status.jsonl",
        AgentKind::Opencode,
        0,
        Expect::StatusEdit,
    ),
    (
        "opencode-thinking.jsonl",
        AgentKind::Opencode,
        0,
        Expect::Complete,
    ),
    ("copilot.jsonl", AgentKind::Copilot, 0, Expect::Complete),
    (
        "copilot-flaky429.jsonl",
        AgentKind::Copilot,
        0,
        Expect::Complete,
    ),
    (
        "copilot-http429.jsonl",
        AgentKind::Copilot,
        1,
        Expect::RateLimited,
    ),
    (
        "copilot-noallow.jsonl",
        AgentKind::Copilot,
        0,
        Expect::Denied("copilot denied every tool call (1 of 1): Permission denied"),
    ),
    ("pi.jsonl", AgentKind::Pi, 0, Expect::Complete),
    ("pi-flaky429.jsonl", AgentKind::Pi, 0, Expect::Complete),
    // pi exits 0 when every call failed.
    ("pi-http429.jsonl", AgentKind::Pi, 0, Expect::RateLimited),
    ("qwen.jsonl", AgentKind::Qwen, 0, Expect::Complete),
    ("qwen-flaky429.jsonl", AgentKind::Qwen, 0, Expect::Complete),
    (
        "qwen-noyolo.jsonl",
        AgentKind::Qwen,
        0,
        Expect::Denied("no tool that writes files or runs commands (permission mode auto"),
    ),
];

/// Runs one stream through the supervisor: its events and its exit.
fn replay(file: &str, kind: AgentKind, code: i32) -> (Vec<AgentEvent>, AgentExit) {
    let dir = tempfile::tempdir().unwrap();
    let stream = fixtures().join(file);
    let stderr = stream.with_extension("stderr");
    let spec = CommandSpec {
        program: PathBuf::from("/bin/sh"),
        args: vec![
            "-c".into(),
            r#"cat "$1"; if [ -f "$2" ]; then cat "$2" >&2; fi; exit "$3""#.into(),
            "sh".into(),
            stream.display().to_string(),
            stderr.display().to_string(),
            code.to_string(),
        ],
        env: vec![],
        cwd: dir.path().to_path_buf(),
        stdin: None,
        prompt: PROMPT.to_string(),
        session_id: None,
        usage_file: None,
    };
    let opts = SuperviseOptions {
        attempt_timeout: Some(HANG_GUARD),
        idle_timeout: None,
        result_grace: Duration::from_secs(30),
        kill_grace: Duration::from_millis(300),
        transcript: dir.path().join("transcript.log"),
    };
    let running = start(spec, kind, opts).expect("supervisor starts");
    let mut events = Vec::new();
    loop {
        match running.events.recv_timeout(HANG_GUARD) {
            Ok(SupervisorEvent::Agents(batch)) => events.extend(batch),
            Ok(SupervisorEvent::Exited(exit)) => return (events, exit),
            Err(e) => panic!("{file}: no exit: {e}"),
        }
    }
}

fn check(file: &str, kind: AgentKind, code: i32, expect: Expect) -> Result<(), String> {
    let (events, exit) = replay(file, kind, code);
    let fail = |why: &str| {
        Err(format!(
            "{file}: {why}\n  signal {:?}\n  rate_limited {:?}\n  ending {:?}\n  agent_error {:?}\n  events {events:#?}",
            exit.signal,
            exit.rate_limited,
            exit.ending,
            exit.agent_error()
        ))
    };
    if exit.ending != (Ending::Exited { code }) {
        return fail("wrong ending");
    }
    // Unknown lines are raw, never errors: nothing here may panic or vanish.
    let clean_success = exit.rate_limited.is_none()
        && exit.result.as_ref().is_none_or(|r| !r.is_error)
        && code == 0;
    match expect {
        Expect::Complete => {
            if exit.signal != Some(CompletionSignal::Complete) || !clean_success {
                return fail("expected a clean COMPLETE");
            }
        }
        Expect::Failed(reason) => {
            if exit.signal != Some(CompletionSignal::Failed(reason.into())) || !clean_success {
                return fail("expected FAILED with its reason");
            }
        }
        Expect::StatusEdit => {
            if exit.signal.is_some() || !clean_success {
                return fail("expected no signal and no error");
            }
        }
        Expect::RateLimited => {
            let rejected = exit
                .rate_limited
                .as_ref()
                .is_some_and(|l| l.status == "rejected");
            if !rejected || exit.signal.is_some() {
                return fail("expected a rejected rate limit");
            }
        }
        Expect::Denied(words) => {
            let why = exit.result.as_ref().and_then(|r| r.tools_denied());
            if exit.signal.is_some()
                || exit.rate_limited.is_some()
                || !why.is_some_and(|w| w.contains(words))
            {
                return fail(&format!("expected tools denied: {words:?}"));
            }
        }
        Expect::Abnormal(words) => {
            let said = exit.agent_error().unwrap_or_default();
            if exit.signal.is_some() || exit.rate_limited.is_some() || !said.contains(words) {
                return fail(&format!("expected the agent's words {words:?}"));
            }
            if said.contains('\u{1b}') || said.contains("[31m") || said.contains("[0m") {
                return fail("colour fragments in the error text");
            }
        }
    }
    Ok(())
}

#[test]
fn every_recorded_stream_ends_as_its_scenario_did() {
    // One case per fixture file, and every file has its case.
    let mut files: Vec<String> = std::fs::read_dir(fixtures())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
        .filter(|n| n.ends_with(".jsonl"))
        .collect();
    files.sort();
    let mut listed: Vec<String> = CASES.iter().map(|c| c.0.to_string()).collect();
    listed.sort();
    assert_eq!(files, listed, "every fixture needs its expected outcome");

    let failures: Vec<String> = CASES
        .iter()
        .filter_map(|(file, kind, code, expect)| check(file, *kind, *code, *expect).err())
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

fn tool_results(events: &[AgentEvent]) -> Vec<(bool, String)> {
    events
        .iter()
        .filter_map(|e| match e {
            AgentEvent::ToolResult { is_error, summary } => Some((*is_error, summary.clone())),
            _ => None,
        })
        .collect()
}

#[test]
fn failed_shell_commands_are_tool_errors_with_command_and_exit_code() {
    let (events, _) = replay("codex-failcmd.jsonl", AgentKind::Codex, 0);
    assert_eq!(
        tool_results(&events),
        [(true, "exit 2 · ls /nonexistent-mock-dir".to_string())],
        "the command and its code, not the shell's start-up noise"
    );
    let (events, _) = replay("codex.jsonl", AgentKind::Codex, 0);
    assert_eq!(
        tool_results(&events),
        [(
            false,
            "exit 0 · echo hello from mock > mock-note.txt && echo wrote mock-note.txt".to_string()
        )]
    );
    let (events, _) = replay("opencode-failcmd.jsonl", AgentKind::Opencode, 0);
    let results = tool_results(&events);
    assert_eq!(results.len(), 1);
    assert!(results[0].0, "metadata.exit 2 is a failure: {results:?}");
    assert!(results[0].1.starts_with("exit 2 · ls: cannot access"));
    let (events, _) = replay("gemini-readmissing.jsonl", AgentKind::Gemini, 0);
    let results = tool_results(&events);
    assert!(results[0].0 && results[0].1.contains("File not found"));
}

#[test]
fn codex_retries_are_shown_once_as_retries_and_failures_once_as_errors() {
    let (events, exit) = replay("codex-flaky429.jsonl", AgentKind::Codex, 0);
    assert!(events.iter().any(|e| matches!(
        e,
        AgentEvent::ApiRetry {
            attempt: Some(1),
            max_retries: Some(3),
            ..
        }
    )));
    assert!(
        !events
            .iter()
            .any(|e| matches!(e, AgentEvent::RateLimit { .. })),
        "a recovered 429 is no rate limit"
    );
    let receipt = Receipt::from_exit(&exit);
    assert_eq!(receipt.is_error, Some(false));
    assert_eq!(receipt.rate_limited, None);

    let (events, _) = replay("codex-http500.jsonl", AgentKind::Codex, 1);
    let errors: Vec<&String> = events
        .iter()
        .filter_map(|e| match e {
            AgentEvent::Raw { line } if line.starts_with("error:") => Some(line),
            _ => None,
        })
        .collect();
    assert_eq!(errors.len(), 1, "the error line is not doubled: {errors:?}");
}

#[test]
fn tokens_mean_the_same_for_every_agent() {
    // codex: input_tokens 2400 includes 400 cached.
    let (_, exit) = replay("codex.jsonl", AgentKind::Codex, 0);
    let t = Receipt::from_exit(&exit).tokens.unwrap();
    assert_eq!(
        (t.input, t.output, t.cache_read, t.cache_creation),
        (2000, 60, 400, 0)
    );
    // gemini: input_tokens 4500 = `input` 3600 uncached + `cached` 900.
    let (_, exit) = replay("gemini.jsonl", AgentKind::Gemini, 0);
    let t = Receipt::from_exit(&exit).tokens.unwrap();
    assert_eq!((t.input, t.output, t.cache_read), (3600, 120, 900));
    // opencode: `input` is already uncached; two steps summed.
    let (_, exit) = replay("opencode.jsonl", AgentKind::Opencode, 0);
    let r = Receipt::from_exit(&exit);
    let t = r.tokens.unwrap();
    assert_eq!((t.input, t.output, t.cache_read), (1600, 50, 200));
    assert_eq!(r.turns, Some(2), "opencode's steps are its round trips");
}

#[test]
fn receipts_name_session_model_and_only_turns_the_stream_shows() {
    let (_, exit) = replay("gemini-failcmd.jsonl", AgentKind::Gemini, 0);
    let r = Receipt::from_exit(&exit);
    assert_eq!(
        r.session_id.as_deref(),
        Some("a9df1798-2733-42de-a1e3-7b3f569e7ee7")
    );
    assert_eq!(r.model.as_deref(), Some("gemini-2.5-pro"));
    assert_eq!(r.turns, None);
    // "auto" routing: the model that did most of the work.
    let (_, exit) = replay("gemini.jsonl", AgentKind::Gemini, 0);
    assert_eq!(
        Receipt::from_exit(&exit).model.as_deref(),
        Some("gemini-3.8-flash")
    );
    let (_, exit) = replay("codex.jsonl", AgentKind::Codex, 0);
    let r = Receipt::from_exit(&exit);
    assert_eq!(r.turns, None, "codex does not show round trips");
    assert_eq!(
        r.session_id.as_deref(),
        Some("01a206ff-7037-76e3-8c7c-860ba4198354")
    );
}

#[test]
fn rate_limits_carry_the_retry_delay_the_agent_gives() {
    let before = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    // "Please try again in 20s." with a retry-after header of 1: the longer.
    let (_, exit) = replay("opencode-http429.jsonl", AgentKind::Opencode, 1);
    let at = exit.rate_limited.unwrap().resets_at.unwrap();
    assert!(at >= before + 20, "{at} vs {before}");
    // Gemini's "Resource has been exhausted" names no delay.
    let (_, exit) = replay("gemini-http429.jsonl", AgentKind::Gemini, 173);
    assert_eq!(exit.rate_limited.unwrap().resets_at, None);
}

#[test]
fn a_gemini_stopped_before_its_result_keeps_its_session_id() {
    // The stream cut after the tool call: no `result` line.
    let dir = tempfile::tempdir().unwrap();
    let full = std::fs::read_to_string(fixtures().join("gemini.jsonl")).unwrap();
    let cut: String = full.lines().take(4).map(|l| format!("{l}\n")).collect();
    std::fs::write(dir.path().join("cut.jsonl"), cut).unwrap();
    let name = dir.path().join("cut.jsonl").display().to_string();
    let (_, exit) = replay(&name, AgentKind::Gemini, 1);
    assert!(exit.result.is_none());
    assert_eq!(
        Receipt::from_exit(&exit).session_id.as_deref(),
        Some("5cf3891b-45e4-4ad7-ade9-3d96b66a390d")
    );
}

/// An `ApiRetry`: attempt, max retries, delay (ms) and message.
type Retry = (Option<u64>, Option<u64>, Option<u64>, String);

fn retries(events: &[AgentEvent]) -> Vec<Retry> {
    events
        .iter()
        .filter_map(|e| match e {
            AgentEvent::ApiRetry {
                attempt,
                max_retries,
                delay_ms,
                message,
            } => Some((
                *attempt,
                *max_retries,
                *delay_ms,
                message.clone().unwrap_or_default(),
            )),
            _ => None,
        })
        .collect()
}

#[test]
fn copilot_pi_and_qwen_receipts_show_what_each_reports() {
    // pi: tokens and dollars on every assistant message, summed.
    let (_, exit) = replay("pi.jsonl", AgentKind::Pi, 0);
    let r = Receipt::from_exit(&exit);
    let t = r.tokens.unwrap();
    assert_eq!((t.input, t.output, t.cache_read), (246, 90, 0));
    assert!(
        (r.cost_usd.unwrap() - 0.002088).abs() < 1e-9,
        "{:?}",
        r.cost_usd
    );
    assert_eq!(r.turns, Some(2));
    assert_eq!(r.model.as_deref(), Some("mock-model"));
    assert_eq!(
        r.session_id.as_deref(),
        Some("01a211ab-a8af-75ea-b51d-7ec57d9687df")
    );
    // qwen: tokens in `result.usage`, no cost.
    let (_, exit) = replay("qwen.jsonl", AgentKind::Qwen, 0);
    let r = Receipt::from_exit(&exit);
    let t = r.tokens.unwrap();
    assert_eq!((t.input, t.output, t.cache_read), (246, 90, 0));
    assert_eq!(r.cost_usd, None);
    assert_eq!(r.turns, Some(2));
    assert_eq!(r.model.as_deref(), Some("mock-model"));
    // copilot: nothing on stdout (its usage file is read where one was asked for).
    let (_, exit) = replay("copilot.jsonl", AgentKind::Copilot, 0);
    let r = Receipt::from_exit(&exit);
    assert_eq!((r.tokens, r.cost_usd), (None, None));
    assert_eq!(r.turns, Some(2));
    assert_eq!(r.model.as_deref(), Some("mock-model"));
    assert_eq!(
        r.session_id.as_deref(),
        Some("527ff918-45fa-4496-a29e-f7c998b4a5be")
    );
    assert_eq!(r.duration_ms, exit.duration.as_millis() as u64);
}

#[test]
fn copilot_and_pi_retries_are_shown_and_only_giving_up_is_a_limit() {
    let (events, exit) = replay("copilot-flaky429.jsonl", AgentKind::Copilot, 0);
    let seen = retries(&events);
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert_eq!(seen[0].0, Some(1));
    assert!(seen[0].3.contains("rate_limit") && seen[0].3.contains("(HTTP 429)"));
    assert_eq!(exit.rate_limited, None);

    let (events, exit) = replay("copilot-http429.jsonl", AgentKind::Copilot, 1);
    assert_eq!(retries(&events).len(), 5);
    let result = exit.result.as_ref().unwrap();
    assert!(result.is_error && result.api_error_status == Some(429));
    assert!(exit.agent_error().unwrap().contains("retried 5 times"));

    let (events, exit) = replay("pi-http429.jsonl", AgentKind::Pi, 0);
    let delays: Vec<Option<u64>> = retries(&events).iter().map(|r| r.2).collect();
    assert_eq!(delays, [Some(2000), Some(4000), Some(8000)]);
    let result = exit.result.as_ref().unwrap();
    assert!(result.is_error, "exit 0, but every call failed");
    assert_eq!(result.api_error_status, Some(429));
    assert_eq!(exit.agent_error().as_deref(), Some("429 mock rate limit"));
}

#[test]
fn qwen_waiting_out_a_429_on_stderr_is_a_rate_limit_when_the_attempt_ends() {
    // qwen printed these and kept waiting (it had not exited after 400 s):
    // the attempt ends at its time limit, rate limited, not failed.
    let dir = tempfile::tempdir().unwrap();
    let spec = CommandSpec {
        program: PathBuf::from("/bin/sh"),
        args: vec![
            "-c".into(),
            r#"cat "$1" >&2; exec sleep 600"#.into(),
            "sh".into(),
            fixtures().join("qwen-http429.stderr").display().to_string(),
        ],
        env: vec![],
        cwd: dir.path().to_path_buf(),
        stdin: None,
        prompt: PROMPT.to_string(),
        session_id: None,
        usage_file: None,
    };
    let opts = SuperviseOptions {
        attempt_timeout: Some(Duration::from_millis(1500)),
        idle_timeout: None,
        result_grace: Duration::from_secs(30),
        kill_grace: Duration::from_millis(300),
        transcript: dir.path().join("transcript.log"),
    };
    let running = start(spec, AgentKind::Qwen, opts).expect("supervisor starts");
    let mut events = Vec::new();
    let exit = loop {
        match running.events.recv_timeout(HANG_GUARD) {
            Ok(SupervisorEvent::Agents(batch)) => events.extend(batch),
            Ok(SupervisorEvent::Exited(exit)) => break exit,
            Err(e) => panic!("no exit: {e}"),
        }
    };
    assert_eq!(exit.ending, Ending::AttemptTimeout);
    let limits = events
        .iter()
        .filter(|e| matches!(e, AgentEvent::RateLimit { .. }))
        .count();
    assert_eq!(limits, 3, "one per announced wait: {events:?}");
    let limit = exit.rate_limited.expect("rate limited");
    assert_eq!(limit.status, "rejected");
    assert!(limit.resets_at.is_some(), "when qwen meant to try again");
}
