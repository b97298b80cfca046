//! Questions asked of the person at the terminal (dialoguer, on stderr).

use crate::model::{Task, TaskId};
use crate::ralph::control::{ExhaustChoice, Interaction};
use crate::ralph::event::Outcome;
use crate::ui::ansi::headline;
use crate::ui::keys::KeyPauser;
use dialoguer::theme::{ColorfulTheme, SimpleTheme};
use dialoguer::{Confirm, FuzzySelect, MultiSelect, Select};
use std::collections::BTreeSet;

fn theme() -> ColorfulTheme {
    ColorfulTheme::default()
}

/// `Resume previous session? [Y/n]`. An interrupted prompt (Ctrl+C, closed
/// terminal) is an error: the caller stops without touching the session.
pub fn confirm_resume(summary: &str) -> Result<bool, dialoguer::Error> {
    // The summary quotes the session file.
    crate::ralph::interrupt::say(&crate::ui::ansi::clean(summary));
    // The plain theme shows the default the way the question is documented:
    // `Resume previous session? [Y/n]`.
    Confirm::with_theme(&SimpleTheme)
        .with_prompt("Resume previous session?")
        .default(true)
        .interact()
}

/// `spectr ralph` without a change id: type to filter, arrows move, enter
/// runs. `items` are the lines shown; the answer is an index into them. Esc
/// answers None.
pub fn choose_change(items: &[String]) -> Result<Option<usize>, dialoguer::Error> {
    FuzzySelect::with_theme(&theme())
        .with_prompt("Change to run (type to filter)")
        .items(items)
        .default(0)
        .interact_opt()
}

/// `Start? [Y/n]`, after the plan is shown.
pub fn confirm_start() -> Result<bool, dialoguer::Error> {
    Confirm::with_theme(&SimpleTheme)
        .with_prompt("Start?")
        .default(true)
        .interact()
}

/// Asked when the session file cannot be read.
pub fn confirm_start_fresh() -> Result<bool, dialoguer::Error> {
    Confirm::with_theme(&SimpleTheme)
        .with_prompt("Start a fresh session (the unreadable file is replaced)?")
        .default(false)
        .interact()
}

/// The task selector for `--interactive`: space toggles, enter starts.
pub fn select_tasks(tasks: &[&Task]) -> Result<BTreeSet<TaskId>, dialoguer::Error> {
    let items: Vec<String> = tasks
        .iter()
        .map(|t| {
            let (section, what) = (headline(&t.section), headline(&t.description));
            // One screen row each: a row that wraps leaves stale rows
            // behind when the list is redrawn.
            fit_row(&format!("{:<8} {section}: {what}", t.id))
        })
        .collect();
    let defaults = vec![true; items.len()];
    let chosen = MultiSelect::with_theme(&theme())
        .with_prompt("Tasks to run (space toggles, enter starts)")
        .items(&items)
        .defaults(&defaults)
        .interact()?;
    Ok(chosen
        .into_iter()
        .filter_map(|i| tasks.get(i).map(|t| t.id.clone()))
        .collect())
}

/// Asks retry / skip / abort when a task's retries run out. Lives on the
/// run's question thread; the reporter holds its output meanwhile (see
/// `LoopEvent::Question`).
pub struct TerminalInteraction {
    pub keys: Option<KeyPauser>,
}

impl Interaction for TerminalInteraction {
    fn on_exhausted(&mut self, task: &Task, last: &Outcome) -> Option<ExhaustChoice> {
        // What led here must be on screen before the question.
        crate::ui::out::flush();
        let _paused_keys = self.keys.as_ref().map(KeyPauser::suspend);
        crate::ralph::interrupt::say(&format!(
            "Task {} ran out of retries; last attempt {}",
            task.id,
            crate::ui::ansi::clean(&last.describe())
        ));
        let answer = Select::with_theme(&theme())
            .with_prompt(format!(
                "Task {}: retry, skip (and its dependents), or abort the run?",
                task.id
            ))
            .items(["retry", "skip", "abort"])
            .default(0)
            .interact();
        match answer {
            Ok(0) => Some(ExhaustChoice::Retry),
            Ok(1) => Some(ExhaustChoice::Skip),
            Ok(_) => Some(ExhaustChoice::Abort),
            // Ctrl+C, a closed terminal.
            Err(_) => None,
        }
    }
}

/// `row` cut with `…` to the width of the terminal the questions are drawn
/// on (stderr), less the selector's own marks.
fn fit_row(row: &str) -> String {
    match console::Term::stderr().size_checked() {
        Some((_, cols)) => {
            console::truncate_str(row, usize::from(cols).saturating_sub(6).max(20), "…")
                .into_owned()
        }
        None => row.to_string(),
    }
}
