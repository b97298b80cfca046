//! Questions asked of the person at the terminal (dialoguer, on stderr).

use crate::model::{Task, TaskId};
use crate::ralph::control::{ExhaustChoice, Interaction};
use crate::ralph::event::Outcome;
use crate::ralph::interrupt::QuestionSignals;
use crate::ui::checklist;
use crate::ui::keys::KeyPauser;
use crate::ui::progress;
use crate::ui::screen::{self, Shape};
use dialoguer::theme::{ColorfulTheme, SimpleTheme, Theme};
use dialoguer::{Confirm, FuzzySelect, Select};
use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

fn theme() -> ColorfulTheme {
    ColorfulTheme::default()
}

/// How a question ended.
#[derive(Debug, PartialEq, Eq)]
pub enum Asked<T> {
    Answer(T),
    /// Esc: the person backed out.
    Cancelled,
    /// Ctrl+C, a signal, or the terminal could not be read (closed).
    Interrupted,
}

/// Asks `question` (a dialoguer prompt answering None on Esc) with the
/// terminal guarded: whichever way it ends, the cursor is shown and the line
/// ended ([`screen`]). It waits on a thread of its own so that a signal
/// (SIGTERM, SIGHUP) ends the wait even though nothing wakes dialoguer's
/// read; that thread is left blocked, and goes with the process.
fn ask<T: Send + 'static>(
    shape: Shape,
    question: impl FnOnce() -> Result<Option<T>, dialoguer::Error> + Send + 'static,
) -> Asked<T> {
    let signals = QuestionSignals::open();
    let guard = screen::question(shape);
    let (tx, rx) = crossbeam_channel::bounded(1);
    let asked = std::thread::Builder::new()
        .name("spectr-question".into())
        .spawn(move || {
            let _ = tx.send(question());
        });
    if asked.is_err() {
        return Asked::Interrupted;
    }
    crossbeam_channel::select! {
        recv(rx) -> answer => {
            // A signal that came with the answer still wins: it was meant
            // to end the question, not to be lost once it is gone.
            if signals.receiver().try_recv().is_ok() {
                return Asked::Interrupted;
            }
            match answer {
                Ok(Ok(Some(answer))) => {
                    guard.answered();
                    Asked::Answer(answer)
                }
                Ok(Ok(None)) => {
                    guard.answered();
                    Asked::Cancelled
                }
                Ok(Err(dialoguer::Error::IO(e))) if e.kind() == std::io::ErrorKind::Interrupted => {
                    // Ctrl+C: dialoguer's read also raised SIGINT at us.
                    // It is on its way to this question: taken here, it
                    // cannot end spectr while this question's end is told.
                    let _ = signals.receiver().recv_timeout(RAISED_SIGNAL_WAIT);
                    Asked::Interrupted
                }
                // A closed or unreadable terminal.
                Ok(Err(dialoguer::Error::IO(e))) => read_failed(guard, &e),
                // A panic while asking: the guard puts the terminal back.
                Err(_) => Asked::Interrupted,
            }
        }
        recv(signals.receiver()) -> _ => {
            test_panic();
            if test_hook("SPECTR_TEST_FAIL_AT") {
                let e = std::io::Error::other("SPECTR_TEST_FAIL_AT=question");
                return read_failed(guard, &e);
            }
            Asked::Interrupted
        }
    }
}

/// The question could not read the terminal: it is put back (the line
/// ended) before the reason is told, on a line of its own.
fn read_failed<T>(guard: screen::QuestionGuard, e: &std::io::Error) -> Asked<T> {
    drop(guard);
    crate::ralph::interrupt::say(&format!("Could not read the terminal: {e}"));
    Asked::Interrupted
}

/// How long the SIGINT that dialoguer raises on Ctrl+C may take to reach
/// the signal handler's thread (it is already sent: this bounds a thread
/// switch, not a wait for anything outside).
const RAISED_SIGNAL_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

/// Tests check that a panic while a question is open puts the terminal
/// back: `SPECTR_TEST_PANIC_AT=question` turns a signal at a question into
/// a panic.
fn test_panic() {
    if test_hook("SPECTR_TEST_PANIC_AT") {
        panic!("SPECTR_TEST_PANIC_AT=question: a panic while a question is open");
    }
}

/// Whether the test hook `name` is set for questions. No terminal fails a
/// read on demand while still there to show the result, so tests set
/// `SPECTR_TEST_FAIL_AT=question` to turn a signal at a question into a
/// failed read.
fn test_hook(name: &str) -> bool {
    std::env::var_os(name).is_some_and(|p| p == "question")
}

/// `Resume previous session? [Y/n]`.
pub fn confirm_resume(summary: &str) -> Asked<bool> {
    // The summary quotes the session file.
    crate::ralph::interrupt::say(&crate::ui::ansi::clean(summary));
    // The plain theme shows the default the way the question is documented:
    // `Resume previous session? [Y/n]`.
    confirm("Resume previous session?", true)
}

fn confirm(prompt: &'static str, default: bool) -> Asked<bool> {
    ask(Shape::Line, move || {
        Confirm::with_theme(&SimpleTheme)
            .with_prompt(prompt)
            .default(default)
            .interact_opt()
    })
}

/// `spectr ralph` without a change id: type to filter, arrows move, enter
/// runs. `items` are the lines shown; the answer is an index into them.
pub fn choose_change(items: &[String]) -> Asked<usize> {
    let items = items.to_vec();
    ask(Shape::Block, move || {
        FuzzySelect::with_theme(&theme())
            .with_prompt("Change to run (type to filter)")
            .items(&items)
            .default(0)
            .interact_opt()
    })
}

/// `Start? [Y/n]`, after the plan is shown.
pub fn confirm_start() -> Asked<bool> {
    confirm("Start?", true)
}

/// Asked when the session file cannot be read.
pub fn confirm_start_fresh() -> Asked<bool> {
    confirm(
        "Start a fresh session (the unreadable file is replaced)?",
        false,
    )
}

/// A choice among `items` (plain theme); the answer is an index.
pub fn choose(prompt: String, items: Vec<String>, default: usize) -> Asked<usize> {
    ask(Shape::Block, move || {
        Select::with_theme(&SimpleTheme)
            .with_prompt(prompt)
            .items(&items)
            .default(default)
            .interact_opt()
    })
}

/// The task selector for `--interactive`: space toggles, enter starts.
/// Drawn by [`checklist`](crate::ui::checklist), which fits its rows to the
/// window at every draw.
pub fn select_tasks(tasks: &[&Task]) -> Asked<BTreeSet<TaskId>> {
    let items: Vec<String> = tasks
        .iter()
        .map(|t| {
            format!(
                "{:<8} {}",
                t.id,
                crate::text::task_what(&t.section, &t.description)
            )
        })
        .collect();
    let ids: Vec<TaskId> = tasks.iter().map(|t| t.id.clone()).collect();
    let labels = ids.iter().map(ToString::to_string).collect();
    // Set once the question is over whichever way, so a list left by a
    // signal draws nothing more while spectr ends.
    let abandoned = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flag = abandoned.clone();
    let asked = ask(Shape::Block, move || {
        let chosen = checklist::ask(
            "Tasks to run (space toggles, enter starts)",
            items,
            labels,
            &flag,
        )?;
        Ok(chosen.map(|chosen| {
            chosen
                .into_iter()
                .filter_map(|i| ids.get(i).cloned())
                .collect()
        }))
    });
    abandoned.store(true, std::sync::atomic::Ordering::SeqCst);
    asked
}

/// Asks retry / skip / abort when a task's retries run out. Lives on the
/// run's question thread. On a terminal with progress rows the question is
/// pinned under them (see `progress::pin`): the other lanes' output goes on
/// above it and never scrolls it away. Answered elsewhere (`spectr ralph
/// answer`), it is taken off the screen within [`WITHDRAW_POLL`].
pub struct TerminalInteraction {
    pub keys: Option<KeyPauser>,
}

/// How often a question waiting for a key looks whether it was answered
/// elsewhere.
const WITHDRAW_POLL: std::time::Duration = std::time::Duration::from_millis(100);

impl Interaction for TerminalInteraction {
    fn on_exhausted(
        &mut self,
        task: &Task,
        last: &Outcome,
        withdrawn: &Arc<AtomicBool>,
    ) -> Option<ExhaustChoice> {
        ask_out_of_retries(&task.id, &last.describe(), withdrawn, self.keys.as_ref())
    }
}

/// Asks retry / skip / abort about `task`, whose last attempt ended as
/// `last` says, until answered, or `withdrawn` (answered elsewhere: None).
/// Keys read by `keys` are suspended meanwhile. Also `spectr watch`'s.
pub fn ask_out_of_retries(
    task: &TaskId,
    last: &str,
    withdrawn: &Arc<AtomicBool>,
    keys: Option<&KeyPauser>,
) -> Option<ExhaustChoice> {
    // What led here must be on screen before the question.
    crate::ui::out::flush();
    let _paused_keys = keys.map(KeyPauser::suspend);
    crate::ralph::interrupt::say(&format!(
        "Task {task} ran out of retries; last attempt {}",
        crate::ui::ansi::clean(last)
    ));
    let prompt = format!("Task {task}: retry, skip (and its dependents), or abort the run?");
    let choice = Choice::show(&prompt, &EXHAUST_CHOICES);
    let board = choice.board.clone();
    // Set once the question is over whichever way: its reader stops.
    let over = Arc::new(AtomicBool::new(false));
    let (withdrawn, stop) = (withdrawn.clone(), over.clone());
    let answer = ask(Shape::Block, move || choice.interact(&withdrawn, &stop));
    over.store(true, Ordering::SeqCst);
    // Left unanswered (a signal, a closed terminal): taken off the screen
    // all the same. Answered, it is gone already.
    board.remove(None);
    match answer {
        Asked::Answer(0) => Some(ExhaustChoice::Retry),
        Asked::Answer(1) => Some(ExhaustChoice::Skip),
        Asked::Answer(_) => Some(ExhaustChoice::Abort),
        // Esc, Ctrl+C, a closed terminal: the run stops as for `q` (the
        // session is kept; a resume asks again). Answered elsewhere: the
        // asker drops this.
        Asked::Cancelled | Asked::Interrupted => None,
    }
}

/// The answers to a task out of retries, in the order of `ExhaustChoice`;
/// each is also answered by its first letter.
const EXHAUST_CHOICES: [&str; 3] = ["retry", "skip", "abort"];

/// Where a choice is drawn: pinned under the progress rows, or on stderr
/// when there are none (stdout is not a terminal).
#[derive(Clone)]
enum Board {
    Pinned(progress::Pinned),
    Plain(Arc<std::sync::Mutex<usize>>),
}

impl Board {
    fn set(&self, rows: Vec<String>) {
        match self {
            Board::Pinned(p) => p.set(rows),
            Board::Plain(drawn) => {
                let term = console::Term::stderr();
                let mut drawn = drawn.lock().unwrap_or_else(|e| e.into_inner());
                let _ = term.clear_last_lines(*drawn);
                for row in &rows {
                    let _ = term.write_line(row);
                }
                *drawn = rows.len();
            }
        }
    }

    /// Takes the rows off, leaving `record` (what was answered) in their
    /// place; a second call changes nothing.
    fn remove(&self, record: Option<&str>) {
        match self {
            Board::Pinned(p) => p.remove(record),
            Board::Plain(drawn) => {
                let term = console::Term::stderr();
                let mut drawn = drawn.lock().unwrap_or_else(|e| e.into_inner());
                if *drawn == 0 {
                    return;
                }
                let _ = term.clear_last_lines(*drawn);
                *drawn = 0;
                if let Some(record) = record {
                    let _ = term.write_line(record);
                }
            }
        }
    }
}

/// A choice on the screen: the prompt, then one row per choice (the
/// cursor's marked), as dialoguer's list looks. Arrows (or j/k, Tab) move
/// and enter answers; a choice's first letter answers it at once; Esc or
/// `q` answers nothing.
struct Choice {
    /// The question, as the line that records the answer says it.
    question: String,
    /// The question with the keys that answer it, as it waits.
    prompt: String,
    items: &'static [&'static str],
    sel: usize,
    board: Board,
}

impl Choice {
    /// Shows the question: pinned under the progress rows when there are
    /// some, else on stderr.
    fn show(prompt: &str, items: &'static [&'static str]) -> Choice {
        let keys: Vec<String> = items
            .iter()
            .filter_map(|i| i.chars().next())
            .map(String::from)
            .collect();
        let question = prompt.to_string();
        let prompt = format!("{prompt} [{}]", keys.join("/"));
        let rows = choice_rows(&prompt, items, 0);
        let board = match progress::pin(rows.clone(), true) {
            Some(pinned) => Board::Pinned(pinned),
            None => {
                let board = Board::Plain(Arc::default());
                board.set(rows);
                board
            }
        };
        Choice {
            question,
            prompt,
            items,
            sel: 0,
            board,
        }
    }

    /// Reads keys until answered, withdrawn (answered elsewhere: `None`)
    /// or `over`. The question is taken off the screen, and what answered
    /// it recorded in its place, before this returns.
    fn interact(
        mut self,
        withdrawn: &AtomicBool,
        over: &AtomicBool,
    ) -> Result<Option<usize>, dialoguer::Error> {
        let term = console::Term::stderr();
        if !term.is_term() {
            return Err(
                std::io::Error::new(std::io::ErrorKind::NotConnected, "not a terminal").into(),
            );
        }
        // Keys reach `poll` one by one, so waiting can look up now and then.
        let _one_by_one = crate::ui::keys::keys_one_by_one();
        loop {
            if over.load(Ordering::SeqCst) {
                return Ok(None);
            }
            if withdrawn.load(Ordering::SeqCst) {
                self.board.remove(Some(&self.record("answered elsewhere")));
                return Ok(None);
            }
            if !crate::ui::keys::key_within(WITHDRAW_POLL) {
                continue;
            }
            // Ctrl+C is an error here (console raises SIGINT too: see `ask`).
            match choice_key(term.read_key()?, self.sel, self.items) {
                Step::Move(sel) => {
                    self.sel = sel;
                    self.board
                        .set(choice_rows(&self.prompt, self.items, self.sel));
                }
                Step::Answer(i) => {
                    self.board.remove(Some(&self.record(self.items[i])));
                    return Ok(Some(i));
                }
                Step::Cancel => {
                    self.board.remove(None);
                    return Ok(None);
                }
            }
        }
    }

    /// The line that says how the question was answered.
    fn record(&self, answer: &str) -> String {
        let mut line = String::new();
        let _ = theme().format_select_prompt_selection(&mut line, &self.question, answer);
        line
    }
}

/// What a key does at a [`Choice`] whose cursor is on `sel`.
#[derive(Debug, PartialEq, Eq)]
enum Step {
    Move(usize),
    Answer(usize),
    Cancel,
}

fn choice_key(key: console::Key, sel: usize, items: &[&str]) -> Step {
    use console::Key;
    let last = items.len().saturating_sub(1);
    match key {
        Key::ArrowDown | Key::Tab | Key::Char('j') => {
            Step::Move(if sel >= last { 0 } else { sel + 1 })
        }
        Key::ArrowUp | Key::BackTab | Key::Char('k') => {
            Step::Move(if sel == 0 { last } else { sel - 1 })
        }
        Key::Home => Step::Move(0),
        Key::End => Step::Move(last),
        Key::Enter => Step::Answer(sel),
        Key::Escape | Key::Char('q') => Step::Cancel,
        Key::Char(c) => match items
            .iter()
            .position(|i| i.starts_with(c.to_ascii_lowercase()))
        {
            Some(i) => Step::Answer(i),
            None => Step::Move(sel),
        },
        _ => Step::Move(sel),
    }
}

/// The question's rows: the prompt, then each choice, the cursor's marked
/// (not only coloured: NO_COLOR shows it too).
fn choice_rows(prompt: &str, items: &[&str], sel: usize) -> Vec<String> {
    let theme = theme();
    let mut head = String::new();
    let _ = theme.format_select_prompt(&mut head, prompt);
    let mut rows = vec![head];
    for (i, item) in items.iter().enumerate() {
        let mut row = String::new();
        let _ = theme.format_select_prompt_item(&mut row, item, i == sel);
        rows.push(row);
    }
    rows
}

#[cfg(test)]
mod tests {
    use super::*;
    use console::Key;

    #[test]
    fn keys_move_the_cursor_and_letters_answer_at_once() {
        let items = EXHAUST_CHOICES;
        assert_eq!(choice_key(Key::ArrowDown, 0, &items), Step::Move(1));
        assert_eq!(choice_key(Key::ArrowDown, 2, &items), Step::Move(0));
        assert_eq!(choice_key(Key::ArrowUp, 0, &items), Step::Move(2));
        assert_eq!(choice_key(Key::Enter, 1, &items), Step::Answer(1));
        assert_eq!(choice_key(Key::Char('s'), 0, &items), Step::Answer(1));
        assert_eq!(choice_key(Key::Char('A'), 0, &items), Step::Answer(2));
        assert_eq!(choice_key(Key::Char('x'), 1, &items), Step::Move(1));
        assert_eq!(choice_key(Key::Escape, 1, &items), Step::Cancel);
        assert_eq!(choice_key(Key::Char('q'), 1, &items), Step::Cancel);
    }

    #[test]
    fn the_rows_are_the_prompt_and_each_choice_with_the_cursor_marked() {
        let rows: Vec<String> = choice_rows("Task 1.1: retry? [r/s/a]", &EXHAUST_CHOICES, 1)
            .iter()
            .map(|r| console::strip_ansi_codes(r).into_owned())
            .collect();
        assert_eq!(rows.len(), 4, "{rows:?}");
        assert!(rows[0].contains("Task 1.1: retry? [r/s/a]"), "{rows:?}");
        assert!(
            rows[2].starts_with('❯') && rows[2].ends_with("skip"),
            "{rows:?}"
        );
        assert!(!rows[1].starts_with('❯'), "{rows:?}");
    }
}
