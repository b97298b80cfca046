//! The person at the terminal, as a run sees them ([`RunUi`]): the
//! questions before a run, the keys during it, the question when a task's
//! retries run out.

use crate::model::{Task, TaskId};
use crate::ralph::control::{Control, Interaction, RunningTasks};
use crate::ralph::interrupt::Interrupts;
use crate::ralph::recover::{MovedChoice, MovedHead};
use crate::ralph::start::{RunUi, Unanswered};
use crate::ui::keys::{KeyPauser, KeyReader};
use crate::ui::prompts::{self, TerminalInteraction};
use crossbeam_channel::Sender;
use std::collections::BTreeSet;

#[derive(Default)]
pub struct TerminalUi {
    /// Set once keys are read: the retry / skip / abort question pauses them.
    keys: Option<KeyPauser>,
}

/// A question's end as the run sees it.
fn answer<T>(asked: prompts::Asked<T>) -> Result<T, Unanswered> {
    match asked {
        prompts::Asked::Answer(a) => Ok(a),
        prompts::Asked::Cancelled => Err(Unanswered::Cancelled),
        prompts::Asked::Interrupted => Err(Unanswered::Interrupted),
    }
}

impl RunUi for TerminalUi {
    fn confirm_resume(&mut self, summary: &str) -> Result<bool, Unanswered> {
        answer(prompts::confirm_resume(summary))
    }

    fn confirm_start_fresh(&mut self, problem: &str) -> Result<bool, Unanswered> {
        crate::ralph::interrupt::say(&crate::ui::ansi::clean(problem));
        answer(prompts::confirm_start_fresh())
    }

    fn moved_head(&mut self, moved: &MovedHead) -> MovedChoice {
        crate::ralph::interrupt::say(&moved.describe());
        let items = vec![
            format!(
                "Revert anyway: HEAD goes back to the checkpoint (these commits stay reachable from {})",
                moved.failed_ref
            ),
            "Keep them: leave the tree and HEAD as they are and go on from here".to_string(),
            "Stop: change nothing".to_string(),
        ];
        match prompts::choose(
            "The interrupted attempt would be reverted over these commits".into(),
            items,
            2,
        ) {
            prompts::Asked::Answer(0) => MovedChoice::Rewind,
            prompts::Asked::Answer(1) => MovedChoice::Keep,
            _ => MovedChoice::Refuse,
        }
    }

    fn select_tasks(&mut self, tasks: &[&Task]) -> Result<BTreeSet<TaskId>, Unanswered> {
        answer(prompts::select_tasks(tasks))
    }

    fn confirm_start(&mut self) -> Result<bool, Unanswered> {
        answer(prompts::confirm_start())
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

    fn asker(&mut self) -> Option<Box<dyn Interaction + Send>> {
        // Nobody to ask (`--wait-for-answer` without a terminal): the
        // question waits for an answer from elsewhere.
        use std::io::IsTerminal;
        if !(std::io::stdin().is_terminal() && std::io::stderr().is_terminal()) {
            return None;
        }
        Some(Box::new(TerminalInteraction {
            keys: self.keys.clone(),
        }))
    }

    fn before_exit(&self) -> Box<dyn Fn() + Send + Sync> {
        Box::new(|| {
            crate::ui::progress::take_down();
            crate::ui::screen::restore();
            crate::ui::out::flush_within(std::time::Duration::from_millis(200));
        })
    }
}
