//! `spectr watch [CHANGE_ID]`: the run of a change as its own terminal shows
//! it, from any other terminal of the user's (over ssh too), through the
//! run's control socket. Detaching (`q`, Ctrl+C, a closed terminal) never
//! affects the run; its keys steer it as the run's own do, and its open
//! question can be answered here.

use super::args::WatchArgs;
use super::target::{self, Named};
use super::{CmdResult, exit, print_err};
use crate::model::{Project, TaskId};
use crate::ralph::control::{ExhaustChoice, RunningTasks};
use crate::ralph::event::{LoopEvent, NoticeLevel, Reporter, RunEnd};
use crate::ralph::steer::client::{self, NotTaken};
use crate::ralph::steer::proto::{Answer, Request};
use crate::ui::human::HumanReporter;
use crate::ui::keys::{KeyReader, WatchKey};
use miette::{IntoDiagnostic, WrapErr, miette};
use std::io::{BufRead, IsTerminal};
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// What the watcher's threads tell its loop.
enum Seen {
    Line(String),
    /// The run closed the stream (its end, or it died).
    Closed,
    Key(WatchKey),
    Answered(TaskId, Option<ExhaustChoice>),
}

pub fn run(args: &WatchArgs) -> CmdResult {
    let cwd = std::env::current_dir()
        .into_diagnostic()
        .wrap_err("could not read the current folder")?;
    let project = Project::discover(&cwd)?;
    let change = match args.change_id.as_deref() {
        Some(typed) => target::change(&project, Some(typed), Named::Argument("spectr watch"))?,
        None => match listening(&project)? {
            Some(change) => change,
            None => target::change(&project, None, Named::Argument("spectr watch"))?,
        },
    };
    let state_dir = crate::ralph::paths::state_dir(&change.dir);
    let id = change.id.clone();
    let (hello, reader) = match client::subscribe(&state_dir, "spectr watch", 0, None) {
        Ok(ok) => ok,
        Err(NotTaken::NoRun(why)) => {
            return Err(miette!(
                help = format!("start one with: spectr ralph {id}"),
                "no run of {id} is listening at {} ({why})",
                state_dir.join(crate::ralph::steer::SOCKET).display()
            ));
        }
        Err(NotTaken::Refused { message, .. }) => {
            print_err(format_args!(
                "the run of {id} refused to be watched: {message}"
            ));
            return Ok(ExitCode::from(exit::RUN_FAILED));
        }
        Err(NotTaken::Broken(why)) => {
            print_err(format_args!("the run of {id} did not answer: {why}"));
            return Ok(ExitCode::from(exit::RUN_FAILED));
        }
    };
    let terminal = std::io::stdout().is_terminal();
    let (tx, rx) = crossbeam_channel::unbounded::<Seen>();
    let lines = tx.clone();
    // The stream is read on a thread of its own: keys and answers are
    // handled while the run says nothing.
    std::thread::Builder::new()
        .name("spectr-watch".into())
        .spawn(move || {
            for line in reader.lines() {
                let Ok(line) = line else { break };
                if lines.send(Seen::Line(line)).is_err() {
                    return;
                }
            }
            let _ = lines.send(Seen::Closed);
        })
        .into_diagnostic()
        .wrap_err("could not start reading the run's events")?;
    let running = RunningTasks::default();
    let key_tx = tx.clone();
    let (keys_in, keys_out) = crossbeam_channel::unbounded::<WatchKey>();
    let keys = KeyReader::start_watch(keys_in, running.clone());
    if keys.is_some() {
        std::thread::spawn(move || {
            for key in keys_out.iter() {
                if key_tx.send(Seen::Key(key)).is_err() {
                    return;
                }
            }
        });
    }
    let mut reporter = HumanReporter::new(terminal, false).watch_legend(keys.is_some());
    say(&format!(
        "Watching the run of {id} (pid {}){}",
        hello.pid,
        if keys.is_some() {
            "; q detaches, the run goes on"
        } else {
            ""
        }
    ));
    let mut watch = Watch {
        id: id.clone(),
        state_dir: state_dir.clone(),
        running,
        paused: false,
        question: None,
        asker: keys.as_ref().map(|k| start_asker(k.pauser(), tx.clone())),
    };
    let end = loop {
        let Ok(seen) = rx.recv() else {
            break None;
        };
        match seen {
            Seen::Line(line) => {
                if let Some(end) = watch.on_line(&line, &mut reporter) {
                    break Some(end);
                }
            }
            Seen::Closed => break None,
            Seen::Key(WatchKey::Detach) => {
                drop(keys);
                crate::ui::progress::take_down();
                say(&format!(
                    "Detached; the run of {id} goes on (spectr watch {id} to see it again)."
                ));
                return Ok(ExitCode::SUCCESS);
            }
            Seen::Key(key) => watch.on_key(key),
            Seen::Answered(task, choice) => watch.send_answer(&task, choice),
        }
    };
    drop(keys);
    crate::ui::progress::take_down();
    crate::ui::screen::restore();
    Ok(ExitCode::from(match end {
        Some(RunEnd::Complete) => exit::SUCCESS,
        Some(RunEnd::Incomplete | RunEnd::Aborted) => exit::RUN_FAILED,
        Some(RunEnd::Interrupted) => exit::INTERRUPTED,
        Some(RunEnd::Budget) => exit::BUDGET,
        None => {
            say(&format!(
                "The run of {id} ended without its summary (killed?): `spectr status {id}` says where it stands."
            ));
            exit::RUN_FAILED
        }
    }))
}

/// The one active change whose run listens, if exactly one does.
fn listening(project: &Project) -> Result<Option<crate::model::Change>, miette::Report> {
    let mut found: Vec<crate::model::Change> = project
        .active_changes()?
        .into_iter()
        .filter(|c| crate::ralph::steer::listens_in(&c.dir))
        .collect();
    Ok((found.len() == 1).then(|| found.remove(0)))
}

struct Watch {
    id: String,
    state_dir: std::path::PathBuf,
    running: RunningTasks,
    paused: bool,
    /// The open question, and the flag that withdraws it here.
    question: Option<(TaskId, Arc<AtomicBool>)>,
    asker: Option<crossbeam_channel::Sender<(TaskId, String, Arc<AtomicBool>)>>,
}

impl Watch {
    /// Shows one line of the stream; the run's end when it is its summary.
    fn on_line(&mut self, line: &str, reporter: &mut HumanReporter) -> Option<RunEnd> {
        let Ok(value) = serde_json::from_str::<serde_json::Value>(line) else {
            return None;
        };
        if value["event"] == "gap" {
            let missed = value["missed"].as_u64().unwrap_or(0);
            reporter.report(&LoopEvent::Notice {
                level: NoticeLevel::Warn,
                message: format!(
                    "{missed} line{} of the run not shown here (this watcher fell behind)",
                    if missed == 1 { "" } else { "s" }
                ),
            });
            return None;
        }
        let Ok(event) = serde_json::from_value::<LoopEvent>(value) else {
            return None;
        };
        self.follow(&event);
        reporter.report(&event);
        match event {
            LoopEvent::Summary { end, .. } => Some(end),
            _ => None,
        }
    }

    /// Keeps what the keys need: the running tasks, the pause, the question.
    fn follow(&mut self, event: &LoopEvent) {
        match event {
            LoopEvent::TaskStarted { task, .. } => {
                let mut now = self.running.get();
                if !now.contains(task) {
                    now.push(task.clone());
                }
                self.running.set(now);
            }
            LoopEvent::TaskCompleted { task, .. }
            | LoopEvent::TaskFailed { task, .. }
            | LoopEvent::TaskSkipped { task, .. } => {
                let mut now = self.running.get();
                now.retain(|t| t != task);
                self.running.set(now);
            }
            LoopEvent::Paused => self.paused = true,
            LoopEvent::Resumed => self.paused = false,
            LoopEvent::Question { task, reason } => {
                if let Some(asker) = &self.asker {
                    let withdrawn = Arc::new(AtomicBool::new(false));
                    if asker
                        .send((task.clone(), reason.clone(), withdrawn.clone()))
                        .is_ok()
                    {
                        self.question = Some((task.clone(), withdrawn));
                    }
                } else {
                    say(&format!(
                        "answer it with: spectr ralph answer {} retry|skip|abort --task {task}",
                        self.id
                    ));
                }
            }
            LoopEvent::Answered { task, .. } => {
                if let Some((asked, withdrawn)) = &self.question
                    && asked == task
                {
                    withdrawn.store(true, Ordering::SeqCst);
                    self.question = None;
                }
            }
            _ => {}
        }
    }

    fn on_key(&mut self, key: WatchKey) {
        let request = match key {
            WatchKey::Detach => return,
            WatchKey::TogglePause if self.paused => Request::Resume,
            WatchKey::TogglePause => Request::Pause,
            WatchKey::Skip(task) => Request::Skip {
                task: task.map(|t| t.to_string()),
            },
            WatchKey::Restart(task) => Request::Restart {
                task: task.map(|t| t.to_string()),
            },
            WatchKey::StopRun => Request::Stop,
        };
        self.send(&request);
    }

    fn send_answer(&mut self, task: &TaskId, choice: Option<ExhaustChoice>) {
        let answer = match choice {
            Some(ExhaustChoice::Retry) => Answer::Retry,
            Some(ExhaustChoice::Skip) => Answer::Skip,
            Some(ExhaustChoice::Abort) => Answer::Abort,
            // Backed out here: the question stays open at the run.
            None => {
                say(&format!(
                    "Task {task}'s question stays open (spectr ralph answer {} retry|skip|abort --task {task})",
                    self.id
                ));
                return;
            }
        };
        self.send(&Request::Answer {
            answer,
            task: Some(task.to_string()),
        });
    }

    /// Asks the run; the run shows what it did (in the stream), a refusal
    /// is said here.
    fn send(&self, request: &Request) {
        if let Err(e) = client::send(&self.state_dir, "spectr watch", request) {
            let why = match e {
                NotTaken::Refused { message, .. } => message,
                NotTaken::NoRun(why) | NotTaken::Broken(why) => why,
            };
            say(&format!(
                "The run did not take `{}`: {why}",
                request.words()
            ));
        }
    }
}

/// Asks the run's questions here, one at a time, on a thread of its own.
fn start_asker(
    keys: crate::ui::keys::KeyPauser,
    seen: crossbeam_channel::Sender<Seen>,
) -> crossbeam_channel::Sender<(TaskId, String, Arc<AtomicBool>)> {
    let (tx, rx) = crossbeam_channel::unbounded::<(TaskId, String, Arc<AtomicBool>)>();
    let _ = std::thread::Builder::new()
        .name("spectr-watch-questions".into())
        .spawn(move || {
            for (task, last, withdrawn) in rx.iter() {
                let choice =
                    crate::ui::prompts::ask_out_of_retries(&task, &last, &withdrawn, Some(&keys));
                if withdrawn.load(Ordering::SeqCst) {
                    continue;
                }
                if seen.send(Seen::Answered(task, choice)).is_err() {
                    return;
                }
            }
        });
    tx
}

fn say(line: &str) {
    crate::ralph::interrupt::say(line);
}
