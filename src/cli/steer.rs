//! `spectr ralph pause|resume|stop|skip|restart|answer <CHANGE_ID>`: steer
//! a run of that change from another shell, through its control socket.

use super::args::{AnswerArg, SteerCommand};
use super::target::{self, Named};
use super::{CmdResult, exit, print_err};
use crate::model::Project;
use crate::ralph::steer::client::{self, NotTaken};
use crate::ralph::steer::proto::{Answer, Request};
use miette::{IntoDiagnostic, WrapErr, miette};
use std::process::ExitCode;

pub fn run(command: &SteerCommand) -> CmdResult {
    let (verb, typed, request) = match command {
        SteerCommand::Pause { change_id } => ("pause", change_id, Request::Pause),
        SteerCommand::Resume { change_id } => ("resume", change_id, Request::Resume),
        SteerCommand::Stop { change_id } => ("stop", change_id, Request::Stop),
        SteerCommand::Skip { change_id, task } => {
            ("skip", change_id, Request::Skip { task: task.clone() })
        }
        SteerCommand::Restart { change_id, task } => (
            "restart",
            change_id,
            Request::Restart { task: task.clone() },
        ),
        SteerCommand::Answer {
            change_id,
            answer,
            task,
        } => (
            "answer",
            change_id,
            Request::Answer {
                answer: match answer {
                    AnswerArg::Retry => Answer::Retry,
                    AnswerArg::Skip => Answer::Skip,
                    AnswerArg::Abort => Answer::Abort,
                },
                task: task.clone(),
            },
        ),
    };
    let cwd = std::env::current_dir()
        .into_diagnostic()
        .wrap_err("could not read the current folder")?;
    let project = Project::discover(&cwd)?;
    let change = target::change(&project, Some(typed), Named::Argument("spectr ralph"))?;
    let state_dir = crate::ralph::paths::state_dir(&change.dir);
    let id = &change.id;
    match client::send(&state_dir, &format!("spectr ralph {verb}"), &request) {
        Ok(hello) => {
            let run = format!("the run of {id} (pid {})", hello.pid);
            let task = |t: &Option<String>| t.clone().unwrap_or_else(|| "its running task".into());
            let said = match &request {
                Request::Pause => format!(
                    "{run} pauses once its running tasks end; resume it with: spectr ralph resume {id}"
                ),
                Request::Resume => format!("{run} resumes"),
                Request::Stop => format!(
                    "{run} is stopping: its agents are being stopped and its session saved; go on later with: spectr ralph {id}"
                ),
                Request::Skip { task: t } => format!("{run} skips {}", task(t)),
                Request::Restart { task: t } => format!("{run} restarts {}", task(t)),
                Request::Answer { answer, task: t } => {
                    let about = t
                        .clone()
                        .map_or_else(String::new, |t| format!(" about {t}"));
                    format!(
                        "{run} takes `{}` for its open question{about}",
                        answer.word()
                    )
                }
                Request::Learn { .. } => format!("{run} tells its next tasks that"),
                Request::Hello { .. } | Request::Subscribe { .. } => run,
            };
            print_out(&said);
            Ok(ExitCode::SUCCESS)
        }
        Err(NotTaken::NoRun(why)) => Err(miette!(
            help = format!("start one with: spectr ralph {id}"),
            "no run of {id} is listening at {} ({why})",
            state_dir.join(crate::ralph::steer::SOCKET).display()
        )),
        Err(NotTaken::Refused { message, .. }) => {
            print_err(format_args!("the run of {id} refused to {verb}: {message}"));
            Ok(ExitCode::from(exit::RUN_FAILED))
        }
        Err(NotTaken::Broken(why)) => {
            print_err(format_args!("the run of {id} did not answer: {why}"));
            Ok(ExitCode::from(exit::RUN_FAILED))
        }
    }
}

/// A line on stdout; a closed stdout is not a panic.
fn print_out(line: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stdout().lock(), "{line}");
}
