//! Issue 20, item 1: every question spectr asks on a terminal, left every
//! way a person (or the system) can leave it, leaves the terminal usable:
//! the cursor the question hid is shown again, the question's line is
//! ended (the shell's next prompt starts a line of its own), and the exit
//! code is the documented one. The questions spectr's key reader asks
//! during a run (`Quit?`, `Restart which task?`) are lines it prints and a
//! key it reads: they are left every way but a panic or a failed read,
//! which only a drawn question has. Table-driven: one test per question, each
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
    /// `Start a fresh session (the unreadable file is replaced)?`.
    StartFresh,
    /// `Quit? … [y/N]`, opened by `q` while a task runs.
    Quit,
    /// `Restart which task?`, opened by `r` with two tasks running.
    RestartWhich,
}

impl Question {
    /// Asked by the key reader during a run, as a line of its own: no
    /// question is drawn (nothing hides the cursor), so a panic or a failed
    /// read while it is open is no way out of it.
    fn is_key_question(self) -> bool {
        matches!(self, Question::Quit | Question::RestartWhich)
    }
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
    /// Reading the terminal fails while the question is open, the terminal
    /// still there (the test hook turns the next signal at a question into
    /// a failed read).
    Error,
}

const WAYS: [Way; 8] = [
    Way::Answer,
    Way::CtrlC,
    Way::Esc,
    Way::HangUp,
    Way::Term,
    Way::Hup,
    Way::Panic,
    Way::Error,
];

/// What a way out at a question exits with (README "Exit codes").
fn expected_code(q: Question, way: Way) -> i32 {
    match (q, way) {
        // `y` quits; Esc answers no and the run goes on to its end.
        (Question::Quit, Way::Answer | Way::CtrlC) => 130,
        (Question::Quit, Way::Esc) => 0,
        // A digit restarts that task, any other key (Ctrl+C too) cancels:
        // the run goes on to its end either way.
        (Question::RestartWhich, Way::Answer | Way::CtrlC | Way::Esc) => 0,
        // No, or Esc: the unreadable file is reported (an input error).
        (Question::StartFresh, Way::Esc) => 2,
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

/// A question set up to be asked.
struct Case {
    fx: Fixture,
    cmd: std::process::Command,
    /// What the terminal shows once the question is asked.
    shows: &'static str,
    /// For a question asked during a run: the keys that open it, once every
    /// task named here has its agent running.
    opened_by: Option<(&'static str, &'static [&'static str])>,
}

fn setup(q: Question) -> Case {
    let tasks: &[_] = match q {
        // Two lanes, so that two tasks run.
        Question::RestartWhich => &[("1.1", "Core", "pending"), ("2.1", "Docs", "pending")],
        _ => &[("1.1", "Core", "pending")],
    };
    let fx = Fixture::new(&tasks_v1(tasks));
    fx.script(json!({"default": ["mark:completed", "complete"]}));
    let mut cmd = fx.spectr();
    cmd.env("TERM", "xterm");
    let mut opened_by = None;
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
        Question::StartFresh => {
            std::fs::write(fx.session_path(), "{ not a session").unwrap();
            cmd.args(Fixture::RALPH_ARGS).arg("--yes");
            "Start a fresh session (the unreadable file is replaced)?"
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
        Question::Quit | Question::RestartWhich => {
            // The agents complete once the test writes `release`.
            let wait = format!("wait_for:{}", fx.state.join("release").display());
            fx.script(json!({"default": [wait, "mark:completed", "complete"]}));
            cmd.args(Fixture::RALPH_ARGS).arg("--yes");
            if let Question::Quit = q {
                opened_by = Some(("q", &["1.1"][..]));
                "Quit? The running agent"
            } else {
                cmd.args(["--jobs", "2"]);
                opened_by = Some(("r", &["1.1", "2.1"][..]));
                "Restart which task? 1 1.1 · 2 2.1"
            }
        }
    };
    Case {
        fx,
        cmd,
        shows,
        opened_by,
    }
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
        // A line ended by `\r\n` is what precedes that `\r`.
        .map(|l| {
            let l = l.strip_suffix('\r').unwrap_or(l);
            l.rsplit('\r').next().unwrap_or("").to_string()
        })
        .collect()
}

/// One question left one way: what went wrong, if anything.
fn leave(q: Question, way: Way) -> Option<String> {
    let Case {
        fx,
        mut cmd,
        shows,
        opened_by,
    } = setup(q);
    let release = fx.state.join("release");
    match way {
        Way::Panic => {
            cmd.env("SPECTR_TEST_PANIC_AT", "question");
        }
        Way::Error => {
            cmd.env("SPECTR_TEST_FAIL_AT", "question");
        }
        _ => {}
    }
    let mut pty = HangUpPty::spawn(cmd);
    if let Some((keys, running)) = opened_by {
        pty.wait_for("the agents", || {
            running.iter().all(|id| fx.prompt(id, 1).is_some())
        });
        pty.send(keys);
    }
    pty.expect(shows);
    match way {
        Way::Answer => match q {
            Question::Start => pty.send("n"),
            Question::Resume | Question::StartFresh | Question::Quit => pty.send("y"),
            Question::Picker | Question::Select => pty.send("\r"),
            Question::Retry => pty.send(&format!("{DOWN}{DOWN}\r")),
            Question::RestartWhich => pty.send("2"),
        },
        Way::CtrlC => pty.send("\x03"),
        Way::Esc => pty.send("\x1b"),
        Way::HangUp => pty.hang_up(),
        Way::Term | Way::Panic | Way::Error => pty.signal(Signal::SIGTERM),
        Way::Hup => pty.signal(Signal::SIGHUP),
    }
    let want = expected_code(q, way);
    if q.is_key_question() && want == 0 {
        // The run goes on: once the answer is taken, its agents may end.
        pty.expect(match (q, way) {
            (Question::Quit, _) => "Not quitting.",
            (_, Way::Answer) => "restarting task 2.1",
            _ => "Cancelled.",
        });
        std::fs::write(&release, "").unwrap();
    }
    let code = pty.finish();
    kill_leftover_agents(&fx.state);
    let seen = &pty.seen;
    let mut wrong = Vec::new();
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
        if let Way::Error = way
            && !lines
                .iter()
                .any(|l| l.starts_with("Could not read the terminal: "))
        {
            wrong.push("the failed read is not told on a line of its own".into());
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
    let failures: Vec<String> = WAYS
        .iter()
        .filter(|w| !(q.is_key_question() && matches!(w, Way::Panic | Way::Error)))
        .filter_map(|w| leave(q, *w))
        .collect();
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

#[test]
fn every_way_out_of_the_start_fresh_question_restores_the_terminal() {
    every_way_out(Question::StartFresh);
}

#[test]
fn every_way_out_of_quit_restores_the_terminal() {
    every_way_out(Question::Quit);
}

#[test]
fn every_way_out_of_restart_which_task_restores_the_terminal() {
    every_way_out(Question::RestartWhich);
}
