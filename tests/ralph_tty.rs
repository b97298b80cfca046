//! The person at the keyboard, through a real pseudo-terminal: the change
//! chooser, the preview, the resume prompt, the task selector, the exhaustion
//! prompt and the keys q r s p.

mod common;

use common::pty::*;
use common::*;
use expectrl::{Eof, Session};
use serde_json::json;
use std::time::Duration;

#[test]
fn resume_prompt_no_starts_fresh() {
    let fx = Fixture::new(&tasks_v1(&[("1.1", "Core", "pending")]));
    fx.script(json!({"1.1": [["fail:first"], ["mark:completed", "complete"]]}));
    let out = fx.run(&["--json", "--max-retries", "0"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(fx.session_path().exists());

    let mut s = spawn(&fx, &[]);
    s.expect("Resume previous session? [Y/n]").unwrap();
    s.send("n").unwrap();
    s.expect("(attempt 1)").unwrap();
    s.expect("All selected tasks completed.").unwrap();
    assert_eq!(exit_code(&mut s), Some(0));
    assert!(!fx.session_path().exists());
    assert_eq!(fx.status("1.1"), "completed");
}

#[test]
fn resume_prompt_yes_keeps_the_record() {
    let fx = Fixture::new(&tasks_v1(&[("1.1", "Core", "pending")]));
    fx.script(json!({"1.1": [["fail:first"], ["mark:completed", "complete"]]}));
    assert_eq!(
        fx.run(&["--json", "--max-retries", "0"]).status.code(),
        Some(1)
    );
    let mut s = spawn(&fx, &["--max-retries", "1"]);
    s.expect("Resume previous session? [Y/n]").unwrap();
    s.send("y").unwrap();
    s.expect("(attempt 2 · last try)").unwrap();
    s.expect("All selected tasks completed.").unwrap();
    assert_eq!(exit_code(&mut s), Some(0));
    assert!(
        fx.prompt("1.1", 2).unwrap().contains("first"),
        "the saved reason reached the retry"
    );
}

#[test]
fn task_selector_runs_only_the_chosen_tasks() {
    let fx = Fixture::new(&tasks_v1(&[
        ("1.1", "Core", "pending"),
        ("1.2", "Core", "pending"),
        ("2.1", "Docs", "pending"),
    ]));
    fx.script(json!({"default": ["mark:completed", "complete"]}));
    let mut s = spawn(&fx, &["--interactive"]);
    s.expect("Tasks to run").unwrap();
    // All are ticked; untick the first (1.1), then start.
    s.send(" ").unwrap();
    s.send("\r").unwrap();
    s.expect("All selected tasks completed.").unwrap();
    assert_eq!(exit_code(&mut s), Some(0));
    assert!(fx.prompt("1.1", 1).is_none());
    assert!(fx.prompt("1.2", 1).is_some() && fx.prompt("2.1", 1).is_some());
    assert_eq!(fx.status("1.1"), "pending");
}

#[test]
fn exhaustion_prompt_skip_goes_on_with_independent_tasks() {
    let fx = Fixture::new(&tasks_v1(&[
        ("1.1", "Core", "pending"),
        ("1.2", "Core", "pending"),
        ("2.1", "Docs", "pending"),
    ]));
    fx.script(json!({"1.1": [["fail:never works"]], "default": ["mark:completed", "complete"]}));
    let mut s = spawn(&fx, &["--max-retries", "0"]);
    s.expect("retry, skip").unwrap();
    s.send(DOWN).unwrap();
    s.send("\r").unwrap();
    s.expect("also skipping its dependents: 1.2").unwrap();
    s.expect("Summary:").unwrap();
    assert_eq!(exit_code(&mut s), Some(1), "some tasks skipped: exit 1");
    assert!(fx.prompt("2.1", 1).is_some() && fx.prompt("1.2", 1).is_none());
}

#[test]
fn a_question_answered_from_another_shell_leaves_the_terminal_and_keys_work_on() {
    let fx = Fixture::new(&tasks_v1(&[
        ("1.1", "Core", "pending"),
        ("1.2", "Core", "pending"),
        ("2.1", "Docs", "pending"),
    ]));
    let go = fx.state.join("go");
    fx.script(json!({
        "1.1": [["fail:never works"]],
        "2.1": [[format!("wait_for:{}:60", go.display()), "mark:completed", "complete"]],
        "default": ["mark:completed", "complete"],
    }));
    let mut s = spawn(&fx, &["--max-retries", "0"]);
    s.expect("retry, skip").unwrap();
    let answered = spectr(&fx, &["ralph", "answer", CHANGE, "skip", "--task", "1.1"]);
    assert_eq!(
        answered.status.code(),
        Some(0),
        "{}",
        stderr_text(&answered)
    );
    // The skip itself is said at once, the question taken off within
    // 100 ms: either may come first.
    s.expect("answered elsewhere").unwrap();
    // The terminal is the run's again: a key reaches the key reader (the
    // question's reader is gone, it would have taken the key).
    s.send("p").unwrap();
    s.expect("will pause").unwrap();
    s.send("p").unwrap();
    s.expect("pause cancelled").unwrap();
    std::fs::write(&go, "").unwrap();
    s.expect("Summary:").unwrap();
    assert_eq!(exit_code(&mut s), Some(1), "a task skipped: exit 1");
    assert_eq!(fx.status("2.1"), "completed");
    assert_eq!(fx.status("1.2"), "pending", "skipped with 1.1");
}

#[test]
fn exhaustion_prompt_abort_saves_and_exits_1() {
    let fx = Fixture::new(&tasks_v1(&[("1.1", "Core", "pending")]));
    fx.script(json!({"1.1": [["fail:never works"]]}));
    let mut s = spawn(&fx, &["--max-retries", "0"]);
    s.expect("retry, skip").unwrap();
    s.send(DOWN).unwrap();
    s.send(DOWN).unwrap();
    s.send("\r").unwrap();
    s.expect("Run aborted.").unwrap();
    assert_eq!(exit_code(&mut s), Some(1));
    assert!(fx.session_path().exists());
}

#[test]
fn keys_restart_skip_and_pause_steer_the_run() {
    let fx = Fixture::new(&tasks_v1(&[
        ("1.1", "Core", "pending"),
        ("1.2", "Core", "pending"),
        ("2.1", "Docs", "pending"),
        ("3.1", "Tests", "pending"),
    ]));
    fx.script(json!({"1.1": [["hang"]], "2.1": [["sleep:1500", "mark:completed", "complete"]], "default": ["mark:completed", "complete"]}));
    let mut s = spawn(&fx, &[]);
    s.expect("keys: q/Ctrl+C quit").unwrap();
    fx.wait_for("attempt 1", || fx.prompt("1.1", 1).is_some());
    s.send("r").unwrap();
    fx.wait_for("the restarted attempt", || fx.prompt("1.1", 2).is_some());
    s.send("s").unwrap();
    s.expect("also skipping its dependents: 1.2").unwrap();
    fx.wait_for("task 2.1", || fx.prompt("2.1", 1).is_some());
    s.send("p").unwrap();
    s.expect("Paused - press 'p' to resume").unwrap();
    // 2.1 has finished; 3.1 would start at once if the pause did nothing.
    std::thread::sleep(Duration::from_millis(500));
    assert!(fx.prompt("3.1", 1).is_none(), "nothing starts while paused");
    s.send("p").unwrap();
    s.expect("Resumed").unwrap();
    s.expect("Summary:").unwrap();
    assert_eq!(exit_code(&mut s), Some(1), "1.1 and 1.2 were skipped");
    assert!(fx.prompt("3.1", 1).is_some());
    assert_eq!(fx.status("2.1"), "completed");
    assert_eq!(fx.status("3.1"), "completed");
    assert_eq!(fx.status("1.1"), "pending");
    // r and s stopped 1.1 twice; neither used up a try.
    let session = fx.session();
    let rec = &session["tasks"]["1.1"];
    assert_eq!(rec["counted_attempts"], 0);
    assert_eq!(rec["attempts"][0]["outcome"]["action"], "restart");
    assert_eq!(rec["attempts"][1]["outcome"]["action"], "skip");
    assert!(
        rec["attempts"][0]["failed_ref"].is_string(),
        "the restarted attempt was reverted"
    );
}

#[test]
fn q_asks_then_stops_and_saves() {
    let fx = Fixture::new(&tasks_v1(&[("1.1", "Core", "pending")]));
    fx.script(json!({"1.1": [["spawn_child", "hang"]]}));
    let mut s = spawn(&fx, &[]);
    fx.wait_for("the agent", || !child_pids(&fx.state).is_empty());
    s.send("q").unwrap();
    s.expect("Quit?").unwrap();
    s.send("y").unwrap();
    s.expect("Run interrupted.").unwrap();
    assert_eq!(exit_code(&mut s), Some(130));
    assert!(fx.session_path().exists());
    for pid in child_pids(&fx.state) {
        assert!(!alive(pid));
    }
}

/// An agent that outlives a graceful stop: a child ignoring TERM, and a long
/// kill grace, so only a force-quit ends the run quickly.
fn stubborn(fx: &Fixture) -> Session {
    fx.script(json!({"1.1": [["spawn_child", "hang"]]}));
    let s = spawn(fx, &["--kill-grace", "300s"]);
    fx.wait_for("the agent", || !child_pids(&fx.state).is_empty());
    s
}

#[test]
fn three_q_force_quit_counting_the_one_that_asks() {
    let fx = Fixture::new(&tasks_v1(&[("1.1", "Core", "pending")]));
    let mut s = stubborn(&fx);
    s.send("q").unwrap();
    s.expect("Quit?").unwrap();
    s.send("q").unwrap();
    s.expect("Stopping:").unwrap();
    s.send("q").unwrap();
    s.expect("Force quit").unwrap();
    assert_eq!(exit_code(&mut s), Some(130));
    assert!(fx.session_path().exists(), "the session stays for a resume");
    let pids = child_pids(&fx.state);
    fx.wait_for("the agent's child to die", || {
        pids.iter().all(|p| !alive(*p))
    });
}

#[test]
fn three_ctrl_c_force_quit_counting_the_one_that_asks() {
    let fx = Fixture::new(&tasks_v1(&[("1.1", "Core", "pending")]));
    let mut s = stubborn(&fx);
    s.send("\x03").unwrap();
    s.expect("Quit?").unwrap();
    s.send("\x03").unwrap();
    s.expect("Stopping:").unwrap();
    s.send("\x03").unwrap();
    s.expect("Force quit").unwrap();
    assert_eq!(exit_code(&mut s), Some(130));
    assert!(fx.session_path().exists(), "the session stays for a resume");
    let pids = child_pids(&fx.state);
    fx.wait_for("the agent's child to die", || {
        pids.iter().all(|p| !alive(*p))
    });
}

#[test]
fn slow_stop_says_so_and_ctrl_c_then_q_force_quits() {
    let fx = Fixture::new(&tasks_v1(&[("1.1", "Core", "pending")]));
    let mut s = stubborn(&fx);
    // Ctrl+C asks as q does; a second one at the question means yes.
    s.send("\x03").unwrap();
    s.expect("Quit?").unwrap();
    s.send("\x03").unwrap();
    s.expect("Stopping:").unwrap();
    s.expect("Still stopping after 5s").unwrap();
    // The hint's old presses have expired: three new ones are needed.
    s.send("q").unwrap();
    s.send("q").unwrap();
    s.send("q").unwrap();
    s.expect("Force quit").unwrap();
    assert_eq!(exit_code(&mut s), Some(130));
}

#[test]
fn ctrl_c_while_a_task_runs_asks_and_n_lets_the_run_finish() {
    let fx = Fixture::new(&tasks_v1(&[("1.1", "Core", "pending")]));
    let release = fx.state.join("release");
    let wait = format!("wait_for:{}", release.display());
    fx.script(json!({"1.1": [[wait, "mark:completed", "complete"]]}));
    let mut s = spawn(&fx, &[]);
    fx.wait_for("the agent", || fx.prompt("1.1", 1).is_some());
    s.send("\x03").unwrap();
    s.expect("Quit? The running agent will be stopped and the session saved. [y/N]")
        .unwrap();
    s.send("n").unwrap();
    s.expect("Not quitting.").unwrap();
    std::fs::write(&release, "").unwrap();
    s.expect("All selected tasks completed.").unwrap();
    assert_eq!(exit_code(&mut s), Some(0));
    assert_eq!(fx.status("1.1"), "completed");
}

#[test]
fn ctrl_c_twice_while_a_task_runs_stops_gracefully() {
    let fx = Fixture::new(&tasks_v1(&[("1.1", "Core", "pending")]));
    fx.script(json!({"1.1": [["spawn_child", "hang"]]}));
    let mut s = spawn(&fx, &[]);
    fx.wait_for("the agent", || !child_pids(&fx.state).is_empty());
    s.send("\x03").unwrap();
    s.expect("Quit?").unwrap();
    s.send("\x03").unwrap();
    s.expect("Stopping:").unwrap();
    s.expect("Run interrupted.").unwrap();
    assert_eq!(exit_code(&mut s), Some(130));
    assert!(
        fx.session_path().exists(),
        "the session is kept for a resume"
    );
    for pid in child_pids(&fx.state) {
        assert!(!alive(pid), "agent child {pid} outlived the stop");
    }
}

#[test]
fn sigint_without_a_terminal_stops_gracefully_without_asking() {
    let fx = Fixture::new(&tasks_v1(&[("1.1", "Core", "pending")]));
    fx.script(json!({"1.1": [["spawn_child", "hang"]]}));
    // stdin is not a terminal: a script's or CI's SIGINT.
    let mut cmd = fx.ralph();
    cmd.stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let run = Background::spawn(cmd);
    fx.wait_for("the agent", || !child_pids(&fx.state).is_empty());
    run.signal(nix::sys::signal::Signal::SIGINT);
    let out = run.wait_with_output();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(out.status.code(), Some(130), "{text}");
    assert!(
        !text.contains("Quit?"),
        "nothing asks without a terminal: {text}"
    );
    assert!(text.contains("Run interrupted."), "{text}");
    assert!(
        fx.session_path().exists(),
        "the session is kept for a resume"
    );
    for pid in child_pids(&fx.state) {
        assert!(!alive(pid), "agent child {pid} outlived the stop");
    }
}

#[test]
fn ctrl_c_at_the_exhaustion_prompt_stops_the_run_as_q_does() {
    let fx = Fixture::new(&tasks_v1(&[("1.1", "Core", "pending")]));
    fx.script(json!({"1.1": [["fail:never works"]]}));
    let mut s = spawn(&fx, &["--max-retries", "0"]);
    s.expect("retry, skip").unwrap();
    s.send("\x03").unwrap();
    let rest = s.expect(Eof).unwrap();
    let rest = String::from_utf8_lossy(rest.as_bytes()).to_string();
    assert!(rest.contains("Run interrupted."), "{rest}");
    assert!(
        rest.contains("\x1b[?25h"),
        "the cursor the question hid is shown again: {rest}"
    );
    assert_eq!(exit_code(&mut s), Some(130));
    assert!(fx.session_path().exists());
}

#[test]
fn preview_shows_the_plan_and_no_starts_nothing() {
    let fx = Fixture::new(&tasks_v1(&[
        ("1.1", "Core", "completed"),
        ("1.2", "Core", "pending"),
        ("2.1", "Docs", "pending"),
    ]));
    fx.script(json!({"default": ["mark:completed", "complete"]}));
    let mut s = spawn_args(&fx, &Fixture::RALPH_ARGS, &["--verify", "true"]);
    s.expect("Agent Claude Code").unwrap();
    s.expect("max retries 3 · checkpoints on · verify `true`")
        .unwrap();
    s.expect("Plan (2 independent groups of tasks):").unwrap();
    s.expect("completed    1.1").unwrap();
    s.expect("run          1.2").unwrap();
    s.expect("Start? [Y/n]").unwrap();
    s.send("n").unwrap();
    s.expect("Not started").unwrap();
    assert_eq!(exit_code(&mut s), Some(0));
    assert!(fx.prompt("1.2", 1).is_none(), "no agent ran");
    assert_eq!(fx.status("1.2"), "pending");
    assert!(!fx.session_path().exists());
}

#[test]
fn without_an_id_the_change_is_chosen_by_typing_then_previewed_and_run() {
    let fx = Fixture::new(&tasks_v1(&[("1.1", "Core", "pending")]));
    let other = fx.root.join("spectr/changes/aaa-other");
    std::fs::create_dir_all(&other).unwrap();
    std::fs::write(other.join("proposal.md"), "# Other\n").unwrap();
    std::fs::write(
        other.join("tasks.jsonc"),
        tasks_v1(&[("1.1", "A", "completed"), ("1.2", "A", "pending")]),
    )
    .unwrap();
    fx.script(json!({"default": ["mark:completed", "complete"]}));
    let mut s = spawn_args(
        &fx,
        &["ralph", "--agent", "claude", "--completion-grace", "1s"],
        &[],
    );
    s.expect("Change to run").unwrap();
    // The second line is plain (the first is styled letter by letter).
    s.expect("add-widget  0 of 1 task done").unwrap();
    // aaa-other is listed first; typing narrows the list to add-widget.
    s.send("widg").unwrap();
    s.send("\r").unwrap();
    s.expect("Start? [Y/n]").unwrap();
    s.send("\r").unwrap();
    s.expect("All selected tasks completed.").unwrap();
    assert_eq!(exit_code(&mut s), Some(0));
    assert_eq!(fx.status("1.1"), "completed");
}

#[test]
fn with_two_tasks_running_r_and_s_ask_which_and_q_stops_both() {
    let fx = Fixture::new(&tasks_v1(&[
        ("1.1", "Core", "pending"),
        ("1.2", "Core", "pending"),
        ("2.1", "Docs", "pending"),
        ("2.2", "Docs", "pending"),
    ]));
    fx.script(json!({"1.1": [["hang"]], "2.1": [["spawn_child", "hang"]], "default": ["mark:completed", "complete"]}));
    let mut s = spawn(&fx, &["--jobs", "2"]);
    wait_reading(&mut s, "both agents", || {
        fx.prompt("1.1", 1).is_some() && fx.prompt("2.1", 1).is_some()
    });
    s.send("r").unwrap();
    s.expect("Restart which task? 1 1.1 · 2 2.1").unwrap();
    s.send("2").unwrap();
    s.expect("restarting task 2.1").unwrap();
    wait_reading(&mut s, "2.1 restarted", || fx.prompt("2.1", 2).is_some());
    assert!(
        fx.prompt("1.1", 2).is_none(),
        "only the chosen task restarted"
    );
    s.send("s").unwrap();
    s.expect("Skip which task?").unwrap();
    s.send("x").unwrap();
    s.expect("Cancelled.").unwrap();
    s.send("s").unwrap();
    s.expect("Skip which task?").unwrap();
    s.send("1").unwrap();
    s.expect("also skipping its dependents: 1.2").unwrap();
    s.send("q").unwrap();
    s.expect("Quit?").unwrap();
    s.send("y").unwrap();
    s.expect("Run interrupted.").unwrap();
    assert_eq!(exit_code(&mut s), Some(130));
    for pid in child_pids(&fx.state) {
        assert!(!alive(pid), "agent child {pid} outlived the quit");
    }
    let lanes = fx.change_dir.join(".ralph/lanes");
    assert!(
        !lanes.exists() || std::fs::read_dir(&lanes).unwrap().next().is_none(),
        "lane work trees are removed at the end"
    );
    assert!(fx.prompt("1.2", 1).is_none());
    assert!(fx.prompt("2.2", 1).is_none());
    assert_eq!(fx.status("1.1"), "pending");
}

#[test]
fn with_two_tasks_running_p_lets_them_finish_and_starts_nothing() {
    let fx = Fixture::new(&tasks_v1(&[
        ("1.1", "Core", "pending"),
        ("1.2", "Core", "pending"),
        ("2.1", "Docs", "pending"),
    ]));
    let release = fx.state.join("release");
    let wait = format!("wait_for:{}", release.display());
    fx.script(json!({"1.1": [[wait.clone(), "mark:completed", "complete"]], "2.1": [[wait, "mark:completed", "complete"]], "default": ["mark:completed", "complete"]}));
    let mut s = spawn(&fx, &["--jobs", "2"]);
    wait_reading(&mut s, "both agents", || {
        fx.prompt("1.1", 1).is_some() && fx.prompt("2.1", 1).is_some()
    });
    s.send("p").unwrap();
    s.expect("will pause once the running tasks finish")
        .unwrap();
    std::fs::write(&release, "").unwrap();
    s.expect("Paused - press 'p' to resume").unwrap();
    assert_eq!(fx.status("1.1"), "completed");
    assert_eq!(fx.status("2.1"), "completed");
    assert!(fx.prompt("1.2", 1).is_none(), "nothing starts while paused");
    s.send("p").unwrap();
    s.expect("Resumed").unwrap();
    s.expect("All selected tasks completed.").unwrap();
    assert_eq!(exit_code(&mut s), Some(0));
    assert_eq!(fx.status("1.2"), "completed");
}

/// `text` without its colour codes (SGR), the bytes otherwise as written.
fn without_sgr(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("\x1b[") {
        out.push_str(&rest[..at]);
        let after = &rest[at + 2..];
        match after.find(|c: char| !(c.is_ascii_digit() || c == ';')) {
            Some(end) if after[end..].starts_with('m') => rest = &after[end + 1..],
            _ => {
                out.push_str("\x1b[");
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

#[test]
fn every_line_ends_with_a_newline_and_carries_no_padding() {
    let fx = Fixture::new(&tasks_v1(&[
        ("1.1", "Core", "pending"),
        ("2.1", "Docs", "pending"),
    ]));
    fx.script(json!({"default": ["say:working on it", "mark:completed", "complete"]}));
    let mut s = spawn(&fx, &[]);
    let all = s.expect(Eof).unwrap();
    let all = without_sgr(&String::from_utf8_lossy(all.as_bytes()));
    assert_eq!(exit_code(&mut s), Some(0));
    assert!(
        all.contains("All selected tasks completed.\r\n"),
        "the verdict ends its line: {:?}",
        tail(&all, 1500)
    );
    assert!(
        all.contains("\nSummary: ") && all.contains("\nTranscripts: "),
        "the summary starts a line: {:?}",
        tail(&all, 1500)
    );
    for line in all.split('\n') {
        let line = line.trim_end_matches('\r');
        assert!(!line.ends_with("  "), "a line padded with spaces: {line:?}");
    }
}

#[test]
fn no_at_start_leaves_no_ralph_folder_behind() {
    let fx = Fixture::new(&tasks_v1(&[("1.1", "Core", "pending")]));
    fx.script(json!({"default": ["mark:completed", "complete"]}));
    let state_dir = fx.change_dir.join(".ralph");
    assert!(!state_dir.exists(), "the fixture starts without one");
    let mut s = spawn_args(&fx, &Fixture::RALPH_ARGS, &[]);
    s.expect("Start? [Y/n]").unwrap();
    s.send("n").unwrap();
    s.expect("Not started").unwrap();
    assert_eq!(exit_code(&mut s), Some(0));
    assert!(
        !state_dir.exists(),
        "cancelling wrote nothing: {:?}",
        std::fs::read_dir(&state_dir)
            .map(|d| d.flatten().map(|e| e.file_name()).collect::<Vec<_>>())
    );
    assert_eq!(fx.status("1.1"), "pending");
}

#[test]
fn esc_in_the_change_picker_cancels_and_exits_0() {
    let fx = Fixture::new(&tasks_v1(&[("1.1", "Core", "pending")]));
    fx.script(json!({"default": ["mark:completed", "complete"]}));
    let mut s = spawn_args(
        &fx,
        &["ralph", "--agent", "claude", "--completion-grace", "1s"],
        &[],
    );
    s.expect("Change to run").unwrap();
    s.send("\x1b").unwrap();
    let rest = s.expect(Eof).unwrap();
    let rest = String::from_utf8_lossy(rest.as_bytes()).to_string();
    assert!(
        rest.contains("No change chosen; nothing was run."),
        "{rest:?}"
    );
    assert!(
        !rest.contains("Error"),
        "a cancel is not an error: {rest:?}"
    );
    assert_eq!(exit_code(&mut s), Some(0));
    assert!(fx.prompt("1.1", 1).is_none(), "no agent ran");
    assert!(
        !fx.change_dir.join(".ralph").exists(),
        "nothing was written"
    );
}

#[test]
fn a_question_during_the_run_starts_its_own_line_under_the_progress_row() {
    let fx = Fixture::new(&tasks_v1(&[("1.1", "Core", "pending")]));
    fx.script(json!({"1.1": [["hang"]]}));
    let mut s = spawn(&fx, &[]);
    fx.wait_for("the agent", || fx.prompt("1.1", 1).is_some());
    // The progress row is on the screen, the cursor at its end.
    s.expect("[0/1]").unwrap();
    s.expect("(attempt 1)").unwrap();
    s.send("q").unwrap();
    let asked = s.expect("Quit?").unwrap();
    let before = without_sgr(&String::from_utf8_lossy(asked.before()));
    assert!(
        before.ends_with('\n') || before.ends_with("\r\x1b[J"),
        "the question is glued to the progress row: {:?}",
        tail(&before, 300)
    );
    s.send("y").unwrap();
    s.expect("Run interrupted.").unwrap();
    assert_eq!(exit_code(&mut s), Some(130));
}

#[test]
fn the_task_selector_cuts_long_rows_to_the_terminals_width() {
    let long = format!("Do a very long thing {} END", "word ".repeat(40));
    let tasks = tasks_v1(&[("1.1", "Core", "pending"), ("2.1", "Docs", "pending")])
        .replace("Do task 1.1", &long);
    let fx = Fixture::new(&tasks);
    fx.script(json!({"default": ["mark:completed", "complete"]}));
    let mut s = spawn_sized(
        &fx,
        60,
        20,
        &format!("ralph {CHANGE} --agent claude --completion-grace 1s --yes --interactive"),
    );
    let shown = s.expect("2.1").unwrap();
    let text = String::from_utf8_lossy(shown.before()).into_owned();
    let plain = strip_escapes(&text);
    let row = plain
        .lines()
        .rfind(|l| l.contains("1.1"))
        .unwrap_or_else(|| panic!("no row for 1.1:\n{plain}"));
    let row = row.trim_end_matches('\r');
    assert!(row.ends_with('…'), "cut with …: {row:?}");
    assert!(!row.contains("END"), "{row:?}");
    assert!(row.chars().count() <= 60, "fits 60 columns: {row:?}");
    s.send("\r").unwrap();
    s.expect("All selected tasks completed.").unwrap();
    assert_eq!(exit_code(&mut s), Some(0));
}

/// `text` without its terminal escape sequences.
fn strip_escapes(text: &str) -> String {
    let mut out = String::new();
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\x1b' {
            if chars.peek() == Some(&'[') {
                chars.next();
                for d in chars.by_ref() {
                    if d.is_ascii_alphabetic() {
                        break;
                    }
                }
            }
            continue;
        }
        out.push(c);
    }
    out
}

/// `--interactive`'s list on a terminal `cols` wide, drawn with three long
/// rows; the window is then narrowed to `narrow` between two of spectr's
/// writes, and space unticks the first task; the list on the screen is
/// checked after each. Returns the session, the list still open.
fn task_list_narrowed(cols: u16, narrow: u16) -> (Fixture, Session) {
    use common::screen::Screen;
    let long =
        |id: &str| format!("{id} teach the widget to greet in every language its users speak");
    let tasks = tasks_v1(&[
        ("1.1", "Core", "pending"),
        ("1.2", "Core", "pending"),
        ("2.1", "Docs", "pending"),
    ]);
    let tasks = ["1.1", "1.2", "2.1"].iter().fold(tasks, |t, id| {
        t.replace(&format!("Do task {id}\""), &format!("{}\"", long(id)))
    });
    let fx = Fixture::new(&tasks);
    fx.script(json!({"default": ["mark:completed", "complete"]}));
    let mut s = spawn_sized(
        &fx,
        cols,
        24,
        &format!("ralph {CHANGE} --agent claude --completion-grace 1s --yes --interactive"),
    );
    let mut seen = read_until(&mut s, "the list", |seen| {
        seen.find("Tasks to run")
            .is_some_and(|at| seen[at..].contains("2.1 teach"))
    });
    // Narrowed between two writes (spectr stopped meanwhile).
    pause(&s);
    seen.push_str(&drain(&mut s));
    let mut screen = Screen::new(usize::from(cols));
    screen.feed(&seen);
    s.set_window_size(narrow, 24).expect("resize the pty");
    screen.resize(usize::from(narrow));
    resume(&s);
    // The resize alone redraws the list, fitted to the new width.
    let redrawn = read_until(&mut s, "the list redrawn after the resize", |after| {
        after
            .rfind("\x1b[J")
            .is_some_and(|at| after[at..].contains("2.1") && after.ends_with('\n'))
    });
    screen.feed(&redrawn);
    assert_one_fitting_list(&screen, usize::from(narrow), 0);
    // Space unticks 1.1: the list is drawn again, still fitted.
    s.send(" ").unwrap();
    let after = read_until(&mut s, "the list drawn again", |after| {
        after
            .find('⬚')
            .is_some_and(|at| after[at..].contains("2.1"))
    });
    screen.feed(&after);
    assert_one_fitting_list(&screen, usize::from(narrow), 1);
    (fx, s)
}

/// The list as the screen shows it: every line of it fits the width (none
/// wraps), and each task and the question show once (no stale row left).
fn assert_one_fitting_list(screen: &common::screen::Screen, width: usize, unticked: usize) {
    let lines = screen.lines();
    let text = lines.join("\n");
    for line in &lines {
        assert!(
            line.chars().count() < width,
            "a row wraps at {width} columns: {line:?}\n{text}"
        );
    }
    let count = |what: &str| lines.iter().filter(|l| l.contains(what)).count();
    assert_eq!(count("Tasks to"), 1, "the question shows once:\n{text}");
    for id in ["1.1", "1.2", "2.1"] {
        assert_eq!(count(id), 1, "task {id} shows once:\n{text}");
    }
    assert_eq!(count("⬚"), unticked, "unticked rows:\n{text}");
}

#[test]
fn narrowing_the_window_while_the_task_list_is_open_leaves_no_stale_rows() {
    let (fx, mut s) = task_list_narrowed(100, 40);
    s.send("\r").unwrap();
    s.expect("All selected tasks completed.").unwrap();
    assert_eq!(exit_code(&mut s), Some(0));
    assert!(fx.prompt("1.1", 1).is_none(), "1.1 was unticked");
    assert!(fx.prompt("1.2", 1).is_some());
}

#[test]
fn the_task_list_fits_a_terminal_narrower_than_26_columns() {
    let (_fx, mut s) = task_list_narrowed(80, 16);
    s.send("\x1b").unwrap();
    assert_eq!(exit_code(&mut s), Some(0));
}

/// Reads the terminal until what it showed (from now on) satisfies `done`.
fn read_until(s: &mut Session, what: &str, done: impl Fn(&str) -> bool) -> String {
    let mut seen = String::new();
    let deadline = std::time::Instant::now() + HANG_GUARD;
    while !done(&seen) {
        seen.push_str(&drain(s));
        assert!(
            std::time::Instant::now() < deadline,
            "timed out waiting for {what}; the terminal showed:\n{}",
            tail(&seen, 3000)
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    seen
}

// ---------------------------------------------------------------------------
// Issue 20, items 6, 7 and 9, as the terminal receives them.

/// `spectr <args>` on an 80-column terminal (no colour) to its end: every
/// byte it wrote, and its exit code.
fn whole_run(fx: &Fixture, args: &str) -> (String, Option<i32>) {
    let mut s = spawn_sized(fx, 80, 24, args);
    let all = s.expect(Eof).expect("the run ends");
    let all = String::from_utf8_lossy(all.as_bytes()).into_owned();
    (all, exit_code(&mut s))
}

/// The line of `all` (bytes, lines ended by `\r\n`) that starts with
/// `start`, as written after the progress rows were taken off (`\x1b[J`).
fn line_starting<'a>(all: &'a str, start: &str) -> &'a str {
    all.split("\r\n")
        .map(|l| l.rsplit("\x1b[J").next().unwrap_or(l))
        .find(|l| l.starts_with(start))
        .unwrap_or_else(|| panic!("no line starts with {start:?}:\n{all:?}"))
}

#[test]
fn a_verify_failures_verdict_on_a_terminal_says_verify_failed() {
    let fx = Fixture::new(&tasks_v1(&[("1.1", "Core", "pending")]));
    fx.script(json!({"1.1": [
        ["mark:completed", "complete"],
        ["write:ok.flag=1", "mark:completed", "complete"]
    ]}));
    let (all, code) = whole_run(
        &fx,
        &format!(
            "{} --yes --verify 'test -f ok.flag'",
            Fixture::RALPH_ARGS.join(" ")
        ),
    );
    assert_eq!(code, Some(0), "{all:?}");
    let verdict = line_starting(&all, "✗ [1.1] attempt 1 · ");
    assert!(
        verdict.ends_with(
            " · verify failed: `test -f ok.flag` failed (exit status: 1) (the agent said COMPLETE)"
        ) && !verdict.contains("· COMPLETE"),
        "{verdict:?}"
    );
}

#[test]
fn one_task_is_one_task_on_a_terminal() {
    let fx = Fixture::new(&tasks_v1(&[("1.1", "Core", "pending")]));
    fx.script(json!({"1.1": [["mark:completed", "complete"]]}));
    let (all, code) = whole_run(&fx, &format!("{} --yes", Fixture::RALPH_ARGS.join(" ")));
    assert_eq!(code, Some(0), "{all:?}");
    let header = line_starting(&all, "spectr ralph add-widget: ");
    assert!(
        header.starts_with("spectr ralph add-widget: 1 of 1 task to run · "),
        "{header:?}"
    );
    let summary = line_starting(&all, "Summary: ");
    assert!(summary.contains(" · 1 attempt · "), "{summary:?}");
    for plural in ["1 tasks", "1 attempts", "1 files", "1 turns"] {
        assert!(!all.contains(plural), "{plural:?} in {all:?}");
    }
}

#[test]
fn a_duration_that_is_no_duration_is_told_in_plain_words_on_a_terminal() {
    let fx = Fixture::new(&tasks_v1(&[("1.1", "Core", "pending")]));
    let (all, code) = whole_run(
        &fx,
        &format!("{} --idle-timeout banana", Fixture::RALPH_ARGS.join(" ")),
    );
    assert_eq!(code, Some(2), "{all:?}");
    assert!(
        all.contains(
            "`banana` is not a duration: write a number and a unit, such as 90s, 30m or 1h"
        ),
        "{all:?}"
    );
    assert!(all.contains("--idle-timeout"), "{all:?}");
    assert!(!all.contains("expected number"), "{all:?}");
    assert!(all.ends_with('\n'), "the error ends its line: {all:?}");
    assert!(!fx.change_dir.join(".ralph").exists(), "nothing was run");
}

/// A force quit leaves no progress row behind and ends its line: the
/// shell's prompt starts a line of its own (seen in tmux: the last row
/// stayed on screen with `EXIT=130` glued to it).
#[test]
fn a_force_quit_takes_the_progress_rows_down_and_ends_its_line() {
    use common::screen::Screen;
    let fx = Fixture::new(&tasks_v1(&[("1.1", "Core", "pending")]));
    fx.script(json!({"1.1": [["spawn_child", "hang"]]}));
    let args = format!("{} --yes --kill-grace 300s", Fixture::RALPH_ARGS.join(" "));
    let mut s = spawn_sized(&fx, 100, 30, &args);
    let mut seen = wait_reading(&mut s, "the agent", || !child_pids(&fx.state).is_empty());
    seen.push_str(&wait_reading(&mut s, "the progress row", || true));
    for _ in 0..3 {
        s.send("\x03").unwrap();
        seen.push_str(&read_for(&mut s, Duration::from_millis(300)));
    }
    let rest = s.expect(Eof).expect("spectr ends");
    seen.push_str(&String::from_utf8_lossy(rest.as_bytes()));
    assert_eq!(exit_code(&mut s), Some(130));
    let mut screen = Screen::new(100);
    screen.feed(&seen);
    let lines = screen.lines();
    let text = lines.join("\n");
    assert!(
        !lines.iter().any(|l| l.contains("[0/1]")),
        "a progress row is left on the screen:\n{text}"
    );
    let last = lines.iter().rev().find(|l| !l.trim().is_empty()).unwrap();
    assert!(last.starts_with("Force quit: "), "{text}");
    assert!(
        seen.trim_end_matches("\x1b[?25h").ends_with('\n'),
        "the last line is not ended: {:?}",
        tail(&seen, 200)
    );
}

/// `n` at `Quit?` puts the count of quit presses back to zero: after it,
/// Ctrl+C asks and a second one means yes (a graceful stop), not the
/// force quit three presses in all would make.
#[test]
fn a_declined_quit_starts_the_count_of_presses_again() {
    let fx = Fixture::new(&tasks_v1(&[("1.1", "Core", "pending")]));
    let release = fx.state.join("release");
    fx.script(json!({"1.1": [[format!("wait_for:{}", release.display()), "mark:completed".to_string(), "complete".to_string()]]}));
    let mut s = spawn(&fx, &[]);
    fx.wait_for("the agent", || fx.prompt("1.1", 1).is_some());
    s.send("q").unwrap();
    s.expect("Quit?").unwrap();
    s.send("n").unwrap();
    s.expect("Not quitting.").unwrap();
    s.send("\x03").unwrap();
    s.expect("(Ctrl+C again = yes").unwrap();
    s.send("\x03").unwrap();
    s.expect("Stopping:").unwrap();
    let rest = s.expect(Eof).expect("spectr ends");
    let rest = String::from_utf8_lossy(rest.as_bytes()).into_owned();
    assert!(!rest.contains("Force quit"), "{rest}");
    assert_eq!(exit_code(&mut s), Some(130));
}

// ---------------------------------------------------------------------------
// Issue 33, item 5: a question stays in view. While it waits it is pinned
// under the progress rows, and the other lane's output goes on above it.

/// How long the other lane's output gets to show while a question waits:
/// held back (the bug this guards against) it never shows.
const FLOW_GUARD: Duration = Duration::from_secs(20);

/// Steps for lane 2's task: once `go` exists it says `chatter 1` to
/// `chatter <n>`, then waits for `done` and completes.
fn chatter(fx: &Fixture, n: usize) -> serde_json::Value {
    let wait = |name: &str| format!("wait_for:{}", fx.state.join(name).display());
    let mut steps = vec![wait("go")];
    for i in 1..=n {
        steps.push(format!("say:chatter {i}"));
        steps.push("sleep:20".into());
    }
    steps.extend([wait("done"), "mark:completed".into(), "complete".into()]);
    json!(steps)
}

/// Reads the terminal into `screen` until `cond` holds for it, spectr
/// stopped (SIGSTOP) at each look so that no redraw is half read. Fails
/// after `limit`, showing the screen.
fn screen_until(
    s: &mut Session,
    screen: &mut common::screen::Screen,
    what: &str,
    limit: Duration,
    cond: impl Fn(&[String]) -> bool,
) {
    let deadline = std::time::Instant::now() + limit;
    loop {
        pause(s);
        screen.feed(&drain(s));
        let lines = screen.lines();
        resume(s);
        if cond(&lines) {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "timed out after {limit:?} waiting for {what}; the screen shows:\n{}",
            lines.join("\n")
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The screen's last `n` lines, joined (a question wraps on a narrow one).
fn bottom(lines: &[String], n: usize) -> String {
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// Lane 1's task runs out of retries and asks retry / skip / abort while
/// lane 2's prints 30 lines: the question stays at the bottom of the
/// screen under them; `s` skips, and the question leaves the screen for
/// one line that records the answer.
fn retry_question_stays_in_view(cols: u16) {
    use common::screen::Screen;
    let fx = Fixture::new(&tasks_v1(&[
        ("1.1", "Core", "pending"),
        ("1.2", "Core", "pending"),
        ("2.1", "Docs", "pending"),
    ]));
    fx.script(json!({"1.1": [["fail:never works"]], "2.1": [chatter(&fx, 30)], "default": ["mark:completed", "complete"]}));
    let args = format!(
        "{} --yes --jobs 2 --max-retries 0 --on-exhaust prompt",
        Fixture::RALPH_ARGS.join(" ")
    );
    let mut s = spawn_sized(&fx, cols, 24, &args);
    let mut screen = Screen::new(usize::from(cols));
    screen.feed(&read_until(&mut s, "the question", |seen| {
        seen.contains("retry, skip")
    }));
    std::fs::write(fx.state.join("go"), "").unwrap();
    let question = "Task 1.1: retry, skip (and its dependents), or abort the run?";
    screen_until(
        &mut s,
        &mut screen,
        "lane 2's 30 lines above the question, still at the bottom",
        FLOW_GUARD,
        |lines| {
            let last = bottom(lines, 4);
            lines.iter().any(|l| l.ends_with("chatter 30"))
                && last.starts_with(&format!("? {question}"))
                && last.ends_with("❯ retry\n  skip\n  abort")
        },
    );
    s.send("s").unwrap();
    screen_until(
        &mut s,
        &mut screen,
        "the answer recorded and the question gone",
        HANG_GUARD,
        |lines| {
            lines
                .iter()
                .any(|l| l.contains("also skipping its dependents: 1.2"))
                && lines
                    .iter()
                    .any(|l| l.starts_with(&format!("✔ {question}")) && l.ends_with("· skip"))
        },
    );
    let lines = screen.lines();
    let text = lines.join("\n");
    assert!(
        !lines
            .iter()
            .any(|l| l.starts_with("? Task 1.1") || l.ends_with("❯ retry") || l == "  abort"),
        "the question is left on the screen:\n{text}"
    );
    std::fs::write(fx.state.join("done"), "").unwrap();
    s.expect("Summary:").unwrap();
    assert_eq!(exit_code(&mut s), Some(1), "some tasks skipped: exit 1");
    assert_eq!(fx.status("2.1"), "completed");
    assert!(fx.prompt("1.2", 1).is_none());
}

#[test]
fn the_retry_question_stays_in_view_while_another_lane_prints_at_80_columns() {
    retry_question_stays_in_view(80);
}

#[test]
fn the_retry_question_stays_in_view_while_another_lane_prints_at_200_columns() {
    retry_question_stays_in_view(200);
}

/// `q` while two lanes run: `Quit? [y/N]` stays at the bottom of the screen
/// while lane 2 prints 30 lines; `n` takes it off the screen and says
/// `Not quitting.`, and the run goes on to its end.
fn quit_question_stays_in_view(cols: u16) {
    use common::screen::Screen;
    let fx = Fixture::new(&tasks_v1(&[
        ("1.1", "Core", "pending"),
        ("2.1", "Docs", "pending"),
    ]));
    let done = format!("wait_for:{}", fx.state.join("done").display());
    fx.script(json!({"1.1": [[done, "mark:completed", "complete"]], "2.1": [chatter(&fx, 30)]}));
    let args = format!("{} --yes --jobs 2", Fixture::RALPH_ARGS.join(" "));
    let mut s = spawn_sized(&fx, cols, 24, &args);
    let mut screen = Screen::new(usize::from(cols));
    screen.feed(&wait_reading(&mut s, "both agents", || {
        fx.prompt("1.1", 1).is_some() && fx.prompt("2.1", 1).is_some()
    }));
    s.send("q").unwrap();
    screen.feed(&read_until(&mut s, "the question", |seen| {
        seen.contains("[y/N]")
    }));
    std::fs::write(fx.state.join("go"), "").unwrap();
    let question = "Quit? The running agents will be stopped and the session saved. [y/N]";
    screen_until(
        &mut s,
        &mut screen,
        "lane 2's 30 lines above the question, still at the bottom",
        FLOW_GUARD,
        |lines| {
            // Wrapped between words on a narrow screen.
            let last = bottom(lines, 2).replace('\n', " ");
            lines.iter().any(|l| l.ends_with("chatter 30"))
                && last.contains(question)
                && last.ends_with("(q again = yes; 3 x q = force quit)")
        },
    );
    s.send("n").unwrap();
    screen_until(
        &mut s,
        &mut screen,
        "the answer said and the question gone",
        HANG_GUARD,
        |lines| lines.iter().any(|l| l == "Not quitting."),
    );
    let text = screen.text();
    assert!(
        !text.contains("Quit?"),
        "the question is left on the screen:\n{text}"
    );
    std::fs::write(fx.state.join("done"), "").unwrap();
    s.expect("All selected tasks completed.").unwrap();
    assert_eq!(exit_code(&mut s), Some(0));
}

#[test]
fn the_quit_question_stays_in_view_while_another_lane_prints_at_80_columns() {
    quit_question_stays_in_view(80);
}

#[test]
fn the_quit_question_stays_in_view_while_another_lane_prints_at_200_columns() {
    quit_question_stays_in_view(200);
}

#[test]
fn spectr_watch_answers_the_question_with_a_key_and_q_detaches() {
    let fx = Fixture::new(&tasks_v1(&[
        ("1.1", "Core", "pending"),
        ("1.2", "Core", "pending"),
        ("2.1", "Docs", "pending"),
    ]));
    // The run has no terminal; the watcher has one.
    let (mut run, go) = question_with_a_busy_lane(&fx, &["--wait-for-answer"]);
    let mut w = spawn_args(&fx, &["watch", CHANGE], &[]);
    w.expect("q/Ctrl+C detach").unwrap();
    w.expect("retry, skip").unwrap();
    w.send("s").unwrap();
    run.until("the answer", |seen| {
        seen.iter()
            .any(|e| e["event"] == "answered" && e["task"] == "1.1" && e["answer"] == "skip")
    });
    w.expect("spectr watch (pid").unwrap();
    // Detached: the run goes on without it.
    w.send("q").unwrap();
    w.expect("Detached; the run of add-widget goes on").unwrap();
    assert_eq!(exit_code(&mut w), Some(0));
    std::fs::write(&go, "").unwrap();
    assert_eq!(run.run.wait().code(), Some(1), "1.1 skipped: exit 1");
    assert_eq!(fx.status("2.1"), "completed");
    assert_eq!(fx.status("1.2"), "pending");
}
