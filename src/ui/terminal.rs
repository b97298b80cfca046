//! The person at the terminal, as a run sees them ([`RunUi`]): the
//! questions before a run, the keys during it, the question when a task's
//! retries run out.

use crate::model::{Task, TaskId};
use crate::ralph::control::{Control, Interaction, RunningTasks};
use crate::ralph::interrupt::Interrupts;
use crate::ralph::recover::{MovedChoice, MovedHead};
use crate::ralph::start::RunUi;
use crate::ui::keys::{self, KeyPauser, KeyReader};
use crate::ui::prompts::{self, TerminalInteraction};
use crossbeam_channel::Sender;
use std::collections::BTreeSet;

#[derive(Default)]
pub struct TerminalUi {
    /// Set once keys are read: the retry / skip / abort question pauses them.
    keys: Option<KeyPauser>,
}

fn io(e: dialoguer::Error) -> std::io::Error {
    match e {
        dialoguer::Error::IO(e) => e,
    }
}

impl RunUi for TerminalUi {
    fn confirm_resume(&mut self, summary: &str) -> std::io::Result<bool> {
        prompts::confirm_resume(summary).map_err(io)
    }

    fn confirm_start_fresh(&mut self, problem: &str) -> std::io::Result<bool> {
        crate::ralph::interrupt::say(&crate::ui::ansi::clean(problem));
        prompts::confirm_start_fresh().map_err(io)
    }

    fn moved_head(&mut self, moved: &MovedHead) -> MovedChoice {
        crate::ralph::interrupt::say(&moved.describe());
        let items = [
            format!(
                "Revert anyway: HEAD goes back to the checkpoint (these commits stay reachable from {})",
                moved.failed_ref
            ),
            "Keep them: leave the tree and HEAD as they are and go on from here".to_string(),
            "Stop: change nothing".to_string(),
        ];
        match dialoguer::Select::with_theme(&dialoguer::theme::SimpleTheme)
            .with_prompt("The interrupted attempt would be reverted over these commits")
            .items(&items)
            .default(2)
            .interact()
        {
            Ok(0) => MovedChoice::Rewind,
            Ok(1) => MovedChoice::Keep,
            _ => MovedChoice::Refuse,
        }
    }

    fn select_tasks(&mut self, tasks: &[&Task]) -> std::io::Result<BTreeSet<TaskId>> {
        prompts::select_tasks(tasks).map_err(io)
    }

    fn confirm_start(&mut self) -> std::io::Result<bool> {
        prompts::confirm_start().map_err(io)
    }

    fn read_keys(
        &mut self,
        controls: Sender<Control>,
        interrupts: Interrupts,
        running: RunningTasks,
    ) -> Box<dyn std::any::Any> {
        let reader = KeyReader::start(controls, interrupts, running);
        self.keys = reader.as_ref().map(KeyReader::pauser);
        Box::new(reader)
    }

    fn asker(&mut self) -> Box<dyn Interaction + Send> {
        Box::new(TerminalInteraction {
            keys: self.keys.clone(),
        })
    }

    fn before_exit(&self) -> Box<dyn Fn() + Send + Sync> {
        Box::new(|| {
            keys::restore_terminal();
            crate::ui::out::flush_within(std::time::Duration::from_millis(200));
        })
    }
}
