//! Issue 20, item 1: every question spectr asks on a terminal, left every
//! way a person (or the system) can leave it, leaves the terminal usable:
//! the cursor the question hid is shown again, the question's line is
//! ended (the shell's next prompt starts a line of its own), and the exit
//! code is the documented one. Table-driven: one test per question, each
//! trying every way out on a terminal of its own and reporting every case
//! that went wrong.

mod common;

use common::pty::*;
use common::*;
use nix::sys::signal::Signal;
use serde_json::json;

/// The questions.
#[derive(Clone, Copy, Debug)]
enum Question {
    /// `Start? [Y/n]` after the plan.
    Start,
    /// `Resume previous session? [Y/n]`.
    Resume,
    /// The change picker (no change id, two active changes).
    Picker,
    /// `--interactive`'s task list.
    Select,
    /// Retry / skip / abort, once a task's retries run out.
    Retry,
}

/// The ways out of a question.
#[derive(Clone, Copy, Debug)]
enum Way {
    /// The question answered (`n`, `y`, enter, or abort at the retry question).
    Answer,
    CtrlC,
    Esc,
    /// The terminal closed (its master's last descriptor goes).
    HangUp,
    Term,
    /// SIGHUP sent with the terminal still open, so what was written is seen.
    Hup,
    /// A panic while the question is open (the test hook turns the next
    /// signal at a question into a panic).
    Panic,
}

const WAYS: [Way; 7] = [
    Way::Answer,
    Way::CtrlC,
    Way::Esc,
    Way::HangUp,
    Way::Term,
    Way::Hup,
    Way::Panic,
];

/// What a way out at a question exits with (README "Exit codes").
fn expected_code(q: Question, way: Way) -> i32 {
    match (q, way) {
        // The abort answer: a failed run.
        (Question::Retry, Way::Answer) => 1,
        // Leaving the retry question stops the run, as `q` does.
        (Question::Retry, _) => 130,
        // Answered, or cancelled before anything ran.
        (_, Way::Answer | Way::Esc) => 0,
        // Rust's exit code for a panic.
        (_, Way::Panic) => 101,
        _ => 130,
    }
}

/// The fixture, the command and text the question shows once it is asked.
fn setup(q: Question) -> (Fixture, std::process::Command, &'static str) {
    let fx = Fixture::new(&tasks_v1(&[("1.1", "Core", "pending")]));
    fx.script(json!({"default": ["mark:completed", "complete"]}));
    let mut cmd = fx.spectr();
    cmd.env("TERM", "xterm");
    let shows = match q {
        Question::Start => {
            cmd.args(Fixture::RALPH_ARGS);
            "Start? [Y/n]"
        }
        Question::Resume => {
            fx.script(json!({"1.1": [["fail:first"], ["mark:completed", "complete"]]}));
            let out = fx.run(&["--json", "--max-retries", "0"]);
            assert_eq!(out.status.code(), Some(1), "the run that leaves a session");
            cmd.args(Fixture::RALPH_ARGS).arg("--yes");
            "Resume previous session? [Y/n]"
        }
        Question::Picker => {
            let other = fx.root.join("spectr/changes/aaa-other");
            std::fs::create_dir_all(&other).unwrap();
            std::fs::write(other.join("proposal.md"), "# Other\n").unwrap();
            std::fs::write(
                other.join("tasks.jsonc"),
                tasks_v1(&[("1.1", "A", "pending")]),
            )
            .unwrap();
            cmd.args(["ralph", "--agent", "claude", "--completion-grace", "1s"])
                .arg("--yes");
            "Change to run"
        }
        Question::Select => {
            cmd.args(Fixture::RALPH_ARGS)
                .args(["--yes", "--interactive"]);
            "Tasks to run"
        }
        Question::Retry => {
            fx.script(json!({"1.1": [["fail:never works"]]}));
            cmd.args(Fixture::RALPH_ARGS)
                .args(["--yes", "--max-retries", "0"]);
            "retry, skip"
        }
    };
    (fx, cmd, shows)
}

/// `text` without escape sequences, each line as the terminal shows it
/// (what follows its last carriage return).
fn screen_lines(text: &str) -> Vec<String> {
    let mut plain = String::new();
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\x1b' {
            if chars.peek() == Some(&'[') {
                chars.next();
                for d in chars.by_ref() {
                    if d.is_ascii_alphabetic() || d == '~' {
                        break;
                    }
                }
            }
            continue;
        }
        plain.push(c);
    }
    plain
        .split('\n')
        .map(|l| l.rsplit('\r').next().unwrap_or("").to_string())
        .collect()
}

/// One question left one way: what went wrong, if anything.
fn leave(q: Question, way: Way) -> Option<String> {
    let (fx, mut cmd, shows) = setup(q);
    if let Way::Panic = way {
        cmd.env("SPECTR_TEST_PANIC_AT", "question");
    }
    let mut pty = HangUpPty::spawn(cmd);
    pty.expect(shows);
    match way {
        Way::Answer => match q {
            Question::Start => pty.send("n"),
            Question::Resume => pty.send("y"),
            Question::Picker | Question::Select => pty.send("\r"),
            Question::Retry => pty.send(&format!("{DOWN}{DOWN}\r")),
        },
        Way::CtrlC => pty.send("\x03"),
        Way::Esc => pty.send("\x1b"),
        Way::HangUp => pty.hang_up(),
        Way::Term | Way::Panic => pty.signal(Signal::SIGTERM),
        Way::Hup => pty.signal(Signal::SIGHUP),
    }
    let code = pty.finish();
    kill_leftover_agents(&fx.state);
    let seen = &pty.seen;
    let mut wrong = Vec::new();
    let want = expected_code(q, way);
    if code != Some(want) {
        wrong.push(format!("exit code {code:?}, not {want}"));
    }
    if !matches!(way, Way::HangUp) {
        if let Some(hid) = seen.rfind("\x1b[?25l")
            && seen.rfind("\x1b[?25h").is_none_or(|shown| shown < hid)
        {
            wrong.push("the cursor is left hidden".into());
        }
        if !seen.ends_with('\n') {
            wrong.push("the last line is not ended".into());
        }
        let lines = screen_lines(seen);
        let last = lines.iter().rev().find(|l| !l.trim().is_empty());
        let marker = shows.split(' ').next().unwrap_or(shows);
        if last.is_some_and(|l| l.contains(marker)) {
            wrong.push(format!("the last line is the question's: {last:?}"));
        }
    }
    if let (Question::Start | Question::Select | Question::Picker, Way::Esc | Way::CtrlC) = (q, way)
        && fx.change_dir.join(".ralph").exists()
    {
        wrong.push("a cancelled start left .ralph/ behind".into());
    }
    if let (Question::Resume, Way::Esc | Way::CtrlC | Way::Term) = (q, way)
        && !fx.session_path().exists()
    {
        wrong.push("leaving the resume question deleted the saved session".into());
    }
    (!wrong.is_empty()).then(|| {
        format!(
            "{q:?} × {way:?}: {}; the terminal showed:\n{:?}",
            wrong.join("; "),
            tail(seen, 600)
        )
    })
}

fn every_way_out(q: Question) {
    let failures: Vec<String> = WAYS.iter().filter_map(|w| leave(q, *w)).collect();
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn every_way_out_of_start_restores_the_terminal() {
    every_way_out(Question::Start);
}

#[test]
fn every_way_out_of_the_resume_question_restores_the_terminal() {
    every_way_out(Question::Resume);
}

#[test]
fn every_way_out_of_the_change_picker_restores_the_terminal() {
    every_way_out(Question::Picker);
}

#[test]
fn every_way_out_of_the_task_list_restores_the_terminal() {
    every_way_out(Question::Select);
}

#[test]
fn every_way_out_of_retry_skip_abort_restores_the_terminal() {
    every_way_out(Question::Retry);
}
