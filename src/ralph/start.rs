//! A run from its settled configuration to its end: lock, resume or start
//! fresh, put back what an interrupted run left, preview, then hand the
//! tasks to the state machine's shell ([`crate::ralph::driver`]). What it
//! asks a person goes through [`RunUi`]; what it says, through the
//! reporter. The command line's side is `cli/ralph.rs`.

use crate::checkpoint::Checkpointer;
use crate::model::spectr_yaml::CommitMode;
use crate::model::{Task, TaskGraph, TaskId, TaskSet, TaskStatus};
use crate::ralph::config::{ExhaustPolicy, RunConfig};
use crate::ralph::control::{ActiveAgents, Control, Interaction, RunningTasks};
use crate::ralph::driver::{self, RunSetup};
use crate::ralph::event::{LoopEvent, NoticeLevel, Reporter, RunEnd};
use crate::ralph::interrupt::Interrupts;
use crate::ralph::lock::RunLock;
use crate::ralph::outbox::Outbox;
use crate::ralph::plan;
use crate::ralph::preflight;
use crate::ralph::recover;
use crate::ralph::session::{RunTaskState, Session, SessionError, SessionOptions};
use crate::ralph::watch::TasksWatcher;
use crossbeam_channel::Sender;
use miette::{IntoDiagnostic, WrapErr, miette};
use std::collections::BTreeSet;

/// How the run was asked to start.
#[derive(Debug, Clone, Default)]
pub struct StartOptions {
    /// `--fresh`: discard a saved session.
    pub fresh: bool,
    /// `--resume`: resume a saved session without asking.
    pub resume: bool,
    /// `--rewind`: revert an interrupted attempt over commits made since.
    pub rewind: bool,
    /// `--interactive`: choose the tasks first.
    pub interactive: bool,
    /// `--yes`: no preview question.
    pub yes: bool,
    /// A person can be asked (a terminal on stdin and stderr).
    pub ask: bool,
    /// The settings, and the sandbox's line below them (one notice a line).
    pub settings_line: String,
}

/// How it went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Started {
    Ran(RunEnd),
    /// Nothing was run: nothing to do, or the person said no (or backed
    /// out of a question with Esc).
    NotRun,
    /// A question before the run was interrupted (Ctrl+C, a signal, the
    /// terminal closed): nothing was run.
    Interrupted,
}

/// A question left without an answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unanswered {
    /// Esc: the person backed out; nothing is done.
    Cancelled,
    /// Ctrl+C, a signal, or the terminal closed or unreadable.
    Interrupted,
}

/// What the run asks of a person, and the keys it reads while it runs:
/// the UI's side, so this module knows no terminal.
pub trait RunUi {
    fn confirm_resume(&mut self, summary: &str) -> Result<bool, Unanswered>;
    /// The session file cannot be read (`problem`): start over?
    fn confirm_start_fresh(&mut self, problem: &str) -> Result<bool, Unanswered>;
    fn moved_head(&mut self, moved: &recover::MovedHead) -> recover::MovedChoice;
    fn select_tasks(&mut self, tasks: &[&Task]) -> Result<BTreeSet<TaskId>, Unanswered>;
    /// `Start? [Y/n]` after the preview.
    fn confirm_start(&mut self) -> Result<bool, Unanswered>;
    /// Starts reading keys (q r s p) for the run; they stop when the
    /// returned guard drops.
    fn read_keys(
        &mut self,
        controls: Sender<Control>,
        interrupts: Interrupts,
        running: RunningTasks,
    ) -> Box<dyn std::any::Any>;
    /// Asks retry / skip / abort, on the run's question thread; None when
    /// nobody can be asked here.
    fn asker(&mut self) -> Option<Box<dyn Interaction + Send>>;
    /// Puts the terminal back and writes out buffered output before a
    /// forced exit.
    fn before_exit(&self) -> Box<dyn Fn() + Send + Sync>;
}

/// Runs the change `cfg` names until it ends (see the README's loop).
pub fn run(
    cfg: RunConfig,
    opts: StartOptions,
    reporter: &mut dyn Reporter,
    ui: &mut dyn RunUi,
) -> Result<Started, miette::Report> {
    let mut cfg = cfg;
    // Order matters from here: lock, read the session, stop leftover agents,
    // put back what interrupted attempts left, and only then read the tasks
    // (an interrupted attempt may have broken or deleted them).
    // A run cancelled before it starts removes the folder again.
    let made_state_dir = !cfg.state_dir().exists();
    preflight::prepare_state_dir(&cfg)?;
    let lock = RunLock::acquire(&cfg.state_dir(), &cfg.change.id)?;
    if let Some(pid) = &lock.took_over_from {
        reporter.report(&LoopEvent::Notice {
            level: NoticeLevel::Info,
            message: format!(
                "took over a stale lock left by process {pid}, which is no longer running"
            ),
        });
    }
    if let Some(old) = Session::migrate_legacy(&cfg.change.dir)? {
        reporter.report(&LoopEvent::Notice {
            level: NoticeLevel::Info,
            message: format!(
                "moved the session file {} to {}, where spectr keeps it",
                old.display(),
                cfg.session_path().display()
            ),
        });
    }

    // The repository is looked up even without checkpoints: every run in a
    // work tree takes its lock, so a checkpointed run can never revert the
    // work of a --no-checkpoint one (and a resume can still revert what a
    // checkpointed run left in flight).
    let repo = match Checkpointer::discover(&cfg.workdir, cfg.command_timeout) {
        Ok(Some(c)) => Some(c.with_excludes(cfg.owned_paths())),
        Ok(None) => {
            if cfg.checkpoints {
                reporter.report(&LoopEvent::Notice {
                    level: NoticeLevel::Warn,
                    message: format!(
                        "{} is not in a git repository: running without checkpoints (a failed attempt's changes are not reverted)",
                        cfg.workdir.display()
                    ),
                });
            }
            None
        }
        Err(e) if cfg.checkpoints => {
            return Err(miette!(
                help = "fix git, or pass --no-checkpoint to run without checkpoints",
                "could not set up checkpoints: {e}"
            ));
        }
        Err(e) => {
            reporter.report(&LoopEvent::Notice {
                level: NoticeLevel::Warn,
                message: format!(
                    "could not look up the git repository ({e}); this run takes no work-tree lock"
                ),
            });
            None
        }
    };
    // What a killed run left in the git folder (its temporary index
    // folders), whether or not this run takes a checkpoint.
    if let Some(cp) = &repo {
        for message in cp.remove_stale_temporaries() {
            reporter.report(&LoopEvent::Notice {
                level: NoticeLevel::Info,
                message,
            });
        }
    }
    // The session file sits beside the change's files, where users and
    // upstream's tooling look for it: git must never see it.
    if let Some(cp) = &repo {
        let why = "spectr ralph: an interrupted run's state, never committed (see spectr's README)";
        if let Err(e) = cp.ignore_everywhere(crate::ralph::session::SESSION_FILE, why) {
            reporter.report(&LoopEvent::Notice {
                level: NoticeLevel::Warn,
                message: format!(
                    "{e}: `git status` may show {} (checkpoints still leave it out)",
                    cfg.session_path().display()
                ),
            });
        }
    }
    // A revert restores the whole work tree: one run per tree, not just per change.
    let _tree_lock = match &repo {
        Some(cp) => Some(RunLock::acquire_tree(cp.git_dir(), &cfg.change.id)?),
        None => None,
    };

    // `--commit task` needs a branch and an identity: refused before
    // anything runs. Without checkpoints (or a repository) there is no
    // task's change to tell apart, so no commit.
    let commits = repo
        .as_ref()
        .filter(|_| cfg.commit == CommitMode::Task && cfg.checkpoints);
    // `--branch NAME`: the run's commits go to a branch of their own, made
    // from HEAD; the user's branch stays where it is.
    let mut left_branch = None;
    if let (Some(cp), Some(name)) = (commits, &cfg.branch) {
        match cp.start_branch(name) {
            Ok(None) => {}
            Ok(Some(from)) => {
                reporter.report(&LoopEvent::Notice {
                    level: NoticeLevel::Info,
                    message: format!(
                        "made branch {name} from HEAD and switched to it ({} stays where it is); the run's commits go there",
                        from.as_deref()
                            .map_or("the detached HEAD".to_string(), |b| b
                                .strip_prefix("refs/heads/")
                                .unwrap_or(b)
                                .to_string())
                    ),
                });
                left_branch = from;
            }
            Err(why) => {
                return Err(miette!(
                    help = "pick another name with --branch, or run without it",
                    "--branch {name}: {why}"
                ));
            }
        }
    }
    let commit_branch = match commits {
        Some(cp) => Some(preflight::check_commits(cp)?),
        None => None,
    };
    let (session, resumed) = match choose_session(&opts, &cfg, ui, reporter)? {
        SessionChoice::Left(how) => {
            let said = Said {
                cancelled: "Nothing was run; the saved session is kept.",
                interrupted: "Interrupted; nothing was run (the saved session is kept).",
            };
            return Ok(left(how, said, reporter, &cfg, made_state_dir));
        }
        SessionChoice::Resume(s) => (s, true),
        SessionChoice::Fresh => (
            Session::new(
                &cfg.change.id,
                SessionOptions {
                    agent: format!("{:?}", cfg.agent.kind).to_lowercase(),
                    max_retries: cfg.max_retries,
                    checkpoints: cfg.checkpoints,
                    verify: cfg.verify.clone(),
                    commit_base: commit_branch
                        .as_ref()
                        .zip(repo.as_ref())
                        .and_then(|(b, cp)| cp.commit_of(b).ok().flatten()),
                    commit_branch: commit_branch.clone(),
                },
                None,
            ),
            false,
        ),
    };
    cfg.run_id = session.started_at.replace(':', "-");
    let session_path = cfg.session_path();
    let mut out = Outbox::new(session, session_path, reporter);
    if resumed {
        out.loaded_from_disk();
    }
    let journal = crate::ralph::run_journal::RunJournal::new(
        crate::ralph::run_journal::journal_path(&cfg.change.dir, &cfg.run_id),
    );
    let notifier = cfg.notify.clone().and_then(|cmd| {
        crate::ralph::notify::Notifier::start(
            cfg.change.id.clone(),
            cmd,
            cfg.workdir.clone(),
            cfg.transcripts_dir().join("notify.log"),
        )
    });
    // What watchers from elsewhere see: the run from here on.
    let hub = crate::ralph::hub::Hub::new();
    out.rec.attach(journal, notifier, hub.clone());
    // What `spectr context` tells an agent: this run's verification.
    out.session.options.verify = cfg.verify.clone();

    if resumed {
        for message in recover::stop_leftover_agents(&out.session) {
            out.emit(LoopEvent::Notice {
                level: NoticeLevel::Warn,
                message,
            });
        }
        let (rewind, ask) = (opts.rewind, opts.ask);
        let mut decide = |moved: &recover::MovedHead| {
            if rewind {
                recover::MovedChoice::Rewind
            } else if ask {
                ui.moved_head(moved)
            } else {
                recover::MovedChoice::Refuse
            }
        };
        match recover::settle(
            &mut out,
            &cfg.change.dir,
            repo.as_ref(),
            cfg.verify.is_some(),
            &mut decide,
        ) {
            Ok(()) => {}
            Err(recover::SettleError::Refused(message)) => {
                return Err(miette!(
                    help = "the tree, HEAD and the session were left as they are. Keep these commits: run with --fresh (the tree stays as it is; the session starts over). Put HEAD back to the checkpoint anyway: run with --resume --rewind (the commits stay reachable from the attempt's failed ref)",
                    "{message}"
                ));
            }
            Err(recover::SettleError::Failed(message)) => {
                return Err(miette!(
                    help = "fix the cause, then run the same command again: the session still holds the checkpoint",
                    "{message}"
                ));
            }
        }
    }

    if let Some(cp) = &repo {
        preflight::remove_stale_lanes(cp, &cfg, out.rec.reporter);
    }
    let mut tasks = TaskSet::load(&cfg.change.dir)?;
    if resumed && let Err(message) = recover::write_judged_statuses(&mut out, &mut tasks) {
        return Err(miette!(
            help = "make the tasks file writable, then run the same command again",
            "{message}"
        ));
    }
    preflight::check_writable(&tasks)?;

    let graph = TaskGraph::new(&tasks);
    if opts.interactive {
        let pending: Vec<&crate::model::Task> = graph
            .lanes()
            .iter()
            .flat_map(|l| l.tasks.iter())
            .filter_map(|id| tasks.task(id))
            .filter(|t| t.status != TaskStatus::Completed)
            .collect();
        if pending.is_empty() {
            out.rec.reporter.report(&LoopEvent::Notice {
                level: NoticeLevel::Info,
                message: format!(
                    "nothing to choose: every task of '{}' is completed",
                    cfg.change.id
                ),
            });
            return Ok(Started::NotRun);
        }
        let chosen = match ui.select_tasks(&pending) {
            Ok(chosen) => chosen,
            Err(how) => {
                return Ok(left(
                    how,
                    NOT_STARTED,
                    out.rec.reporter,
                    &cfg,
                    made_state_dir,
                ));
            }
        };
        if chosen.is_empty() {
            out.rec.reporter.report(&LoopEvent::Notice {
                level: NoticeLevel::Info,
                message: "no task selected; nothing to do".into(),
            });
            if made_state_dir {
                preflight::remove_unused_state_dir(&cfg);
            }
            return Ok(Started::NotRun);
        }
        out.session.selection = Some(chosen.iter().cloned().collect());
    }
    cfg.selection = out
        .session
        .selection
        .as_ref()
        .map(|v| v.iter().cloned().collect::<BTreeSet<TaskId>>());

    let to_run = plan::tasks_to_run(&tasks, &graph, cfg.selection.as_ref());
    // A task completed before a kill but not yet committed: the run goes on
    // to commit it, though nothing is left to run.
    let commits_pending =
        commit_branch.is_some() && !crate::ralph::commit::pending(&out.session).is_empty();
    if to_run.is_empty() && !commits_pending {
        out.rec.reporter.report(&LoopEvent::Notice {
            level: NoticeLevel::Info,
            message: format!(
                "Nothing to do: every selected task of '{}' is already completed.",
                cfg.change.id
            ),
        });
        let known = out.session.checkpoint_refnames();
        if let Some(cp) = &repo
            && let Err(e) = cp
                .clean(&cfg.change.id, crate::checkpoint::CleanScope::Checkpoints)
                .and_then(|_| cp.drop_checkpoints_of(&known))
        {
            out.rec.reporter.report(&LoopEvent::Notice {
                level: NoticeLevel::Warn,
                message: format!("could not remove the run's checkpoint refs: {e}"),
            });
        }
        Session::delete(&cfg.session_path())?;
        return Ok(Started::NotRun);
    }

    // The preview: a fresh run on a terminal shows the plan and asks first.
    if !resumed && opts.ask && !opts.yes {
        // The settings, then the sandbox's line: one notice each.
        for line in opts.settings_line.lines() {
            out.rec.reporter.report(&LoopEvent::Notice {
                level: NoticeLevel::Info,
                message: line.to_owned(),
            });
        }
        out.rec.reporter.report(&plan::plan(
            &tasks,
            cfg.selection.as_ref(),
            &BTreeSet::new(),
        ));
        match ui.confirm_start() {
            Ok(true) => {}
            Ok(false) => {
                return Ok(left(
                    Unanswered::Cancelled,
                    NOT_STARTED,
                    out.rec.reporter,
                    &cfg,
                    made_state_dir,
                ));
            }
            Err(how) => {
                return Ok(left(
                    how,
                    NOT_STARTED,
                    out.rec.reporter,
                    &cfg,
                    made_state_dir,
                ));
            }
        }
    }

    let lane_count = graph.lanes().len();
    let cpus = std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get);
    let slots = crate::ralph::decide::slots_for(cfg.jobs, lane_count, cpus);
    let lanes = slots > 1 || cfg.remote_lanes.is_some();
    if lanes {
        preflight::check_lanes_possible(repo.as_ref(), &cfg)?;
        let message = match &cfg.remote_lanes {
            Some(remote) => format!(
                "{}: each attempt runs through `{}`; work goes by way of {}",
                crate::text::count(slots as u64, "remote lane", "remote lanes"),
                remote.exec,
                remote.remote
            ),
            None => preflight::lanes_notice(slots, repo.as_ref(), &cfg),
        };
        out.rec.reporter.report(&LoopEvent::Notice {
            level: NoticeLevel::Info,
            message,
        });
    }
    // Lanes work in git work trees whatever --no-checkpoint says: the
    // user's tree is only ever changed by a merge, checkpointed first.
    let checkpointer = if cfg.checkpoints || lanes { repo } else { None };
    cfg.checkpoints = cfg.checkpoints && checkpointer.is_some();

    let (tx, rx) = crossbeam_channel::unbounded::<Control>();
    let active = ActiveAgents::default();
    let interrupts = Interrupts::new(tx.clone(), active.clone(), ui.before_exit());
    // SIGINT, SIGTERM and SIGHUP all stop the run gracefully from here on
    // (on a terminal Ctrl+C is read as a key and asks first).
    crate::ralph::interrupt::install_handler()
        .into_diagnostic()
        .wrap_err("could not install the signal handler")?;
    crate::ralph::interrupt::route_to(&interrupts);
    let running = RunningTasks::default();
    let question = crate::ralph::control::OpenQuestion::default();
    // `spectr ralph pause|resume|stop <change>` from another shell.
    let steering = crate::ralph::steer::Steering {
        change: cfg.change.id.clone(),
        learnings: crate::ralph::learnings::path(&cfg.change.dir),
        controls: tx.clone(),
        interrupts: interrupts.clone(),
        running: running.clone(),
        question: question.clone(),
        agents: active.clone(),
        hub: hub.clone(),
    };
    let control_socket = match crate::ralph::steer::ControlSocket::start(&cfg.state_dir(), steering)
    {
        Ok(socket) => Some(socket),
        Err(why) => {
            out.rec.reporter.report(&LoopEvent::Notice {
                level: NoticeLevel::Warn,
                message: format!(
                    "no control socket in {}: `spectr ralph pause|resume|stop` cannot reach this run ({why})",
                    cfg.state_dir().display()
                ),
            });
            None
        }
    };
    let keys = ui.read_keys(tx, interrupts.clone(), running.clone());

    let watch_dirs = vec![cfg.change.dir.clone()];
    let watcher = TasksWatcher::start(&watch_dirs);
    if let Some(why) = &watcher.unavailable {
        out.rec.reporter.report(&LoopEvent::Notice {
            level: NoticeLevel::Info,
            message: format!(
                "file notifications unavailable ({why}); polling the tasks files every 2 s"
            ),
        });
    }

    let asker = (cfg.on_exhaust == ExhaustPolicy::Prompt)
        .then(|| ui.asker())
        .flatten();

    let tasks_total = tasks.leaves().count();
    out.emit(LoopEvent::RunStarted {
        change: cfg.change.id.clone(),
        agent: cfg.agent_label.clone(),
        tasks_total,
        tasks_to_run: to_run,
        max_retries: cfg.max_retries,
        checkpoints: cfg.checkpoints,
        resumed,
        state_dir: cfg.state_dir().display().to_string(),
        session_file: cfg.session_path().display().to_string(),
        budget: cfg
            .budget
            .is_set()
            .then(|| crate::ralph::budget::BudgetUse {
                budget: cfg.budget,
                spent: out.session.spent(),
            }),
        sandbox: cfg.sandbox.as_ref().map(|s| s.summary()),
        stories: tasks.format == crate::model::TasksFormat::OpenSpecMarkdown,
    });
    let committer = match (&checkpointer, &commit_branch) {
        (Some(cp), Some(now)) => {
            let options = &out.session.options;
            // A session from before --commit task (or one run with it off)
            // has no branch of its own: this run's start stands for it.
            let branch = options.commit_branch.clone().unwrap_or_else(|| now.clone());
            let base = match &options.commit_branch {
                Some(_) => options.commit_base.clone(),
                None => cp.commit_of(now).ok().flatten(),
            };
            let made = crate::ralph::commit::Committer::new(
                cp.clone(),
                &out.session,
                branch,
                base,
                cfg.change.id.clone(),
                cfg.agent_label.clone(),
            );
            let made = made.map_err(|e| miette!("--commit task: cannot read the branch: {e}"))?;
            Some(made.pushing_to(cfg.push.clone()).keeping_snapshots(!lanes))
        }
        _ => None,
    };
    let setup = RunSetup {
        checkpointer,
        controls: rx,
        watcher,
        active,
        running,
        question,
        slots,
        asker,
        committer,
    };
    let end = driver::run(tasks, out, &cfg, setup);
    // Watchers get what is left, then nothing steers a run that ended.
    hub.end();
    drop(control_socket);
    if let Some(name) = cfg.branch.as_ref().filter(|_| commit_branch.is_some()) {
        let message = match left_branch
            .as_deref()
            .map(|b| b.strip_prefix("refs/heads/").unwrap_or(b))
        {
            Some(from) => format!(
                "The run's commits are on {name}: review them with git log --oneline {from}..{name}; take them with git switch {from} && git merge --ff-only {name}"
            ),
            None => format!(
                "The run's commits are on {name}: review them with git log --oneline --first-parent {name}; take them into your branch with git merge {name}"
            ),
        };
        reporter.report(&LoopEvent::Notice {
            level: NoticeLevel::Info,
            message,
        });
    }
    interrupts.finished();
    drop(keys);
    drop(lock);
    Ok(Started::Ran(end))
}

/// Deletes a saved session, first stopping any agent its crashed run left
/// running (it would keep editing the tree under the new run).
fn discard(
    path: &std::path::Path,
    change: &str,
    say: &mut dyn Reporter,
) -> Result<(), miette::Report> {
    if let Ok(Some(old)) = Session::load(path, change) {
        for message in recover::stop_leftover_agents(&old) {
            say.report(&LoopEvent::Notice {
                level: NoticeLevel::Warn,
                message,
            });
        }
    }
    Session::delete(path)?;
    Ok(())
}

enum SessionChoice {
    Fresh,
    Resume(Session),
    /// The question was left unanswered: nothing is run or changed.
    Left(Unanswered),
}

/// What leaving a question says, by how it was left.
#[derive(Clone, Copy)]
struct Said {
    cancelled: &'static str,
    interrupted: &'static str,
}

/// Leaving `Start?` or the task list.
const NOT_STARTED: Said = Said {
    cancelled: "Not started; nothing was changed.",
    interrupted: "Interrupted; nothing was run.",
};

/// A question before the run was left (`how`), or answered no: says so,
/// removes the state folder this run made, and ends the run before it
/// starts.
fn left(
    how: Unanswered,
    said: Said,
    reporter: &mut dyn Reporter,
    cfg: &RunConfig,
    made_state_dir: bool,
) -> Started {
    let message = match how {
        Unanswered::Cancelled => said.cancelled,
        Unanswered::Interrupted => said.interrupted,
    };
    reporter.report(&LoopEvent::Notice {
        level: NoticeLevel::Info,
        message: message.into(),
    });
    if made_state_dir {
        preflight::remove_unused_state_dir(cfg);
    }
    match how {
        Unanswered::Cancelled => Started::NotRun,
        Unanswered::Interrupted => Started::Interrupted,
    }
}

fn choose_session(
    opts: &StartOptions,
    cfg: &RunConfig,
    ui: &mut dyn RunUi,
    say: &mut dyn Reporter,
) -> Result<SessionChoice, miette::Report> {
    let terminal = opts.ask;
    let path = cfg.session_path();
    if opts.fresh {
        discard(&path, &cfg.change.id, say)?;
        return Ok(SessionChoice::Fresh);
    }
    match Session::load(&path, &cfg.change.id) {
        Ok(None) => Ok(SessionChoice::Fresh),
        Ok(Some(session)) => {
            if opts.resume {
                return Ok(SessionChoice::Resume(session));
            }
            if !terminal {
                say.report(&LoopEvent::Notice {
                    level: NoticeLevel::Info,
                    message: format!(
                        "resuming the saved session {} (no terminal to ask; --fresh starts over)",
                        path.display()
                    ),
                });
                return Ok(SessionChoice::Resume(session));
            }
            let done = session
                .tasks
                .values()
                .filter(|r| r.state == RunTaskState::Completed)
                .count();
            let summary = format!(
                "A saved session from {} exists for '{}' ({} completed in it, last update {}).",
                session.started_at,
                session.change,
                crate::text::count(done as u64, "task", "tasks"),
                session.updated_at
            );
            match ui.confirm_resume(&summary) {
                Ok(true) => Ok(SessionChoice::Resume(session)),
                Ok(false) => {
                    discard(&path, &cfg.change.id, say)?;
                    Ok(SessionChoice::Fresh)
                }
                Err(how) => Ok(SessionChoice::Left(how)),
            }
        }
        Err(
            e @ (SessionError::Corrupt { .. }
            | SessionError::UnknownVersion { .. }
            | SessionError::WrongChange { .. }),
        ) => {
            if !terminal {
                return Err(e.into());
            }
            match ui.confirm_start_fresh(&e.to_string()) {
                Ok(true) => {
                    Session::delete(&path)?;
                    Ok(SessionChoice::Fresh)
                }
                // No, or Esc: the unreadable file is reported, unchanged.
                Ok(false) | Err(Unanswered::Cancelled) => Err(e.into()),
                Err(Unanswered::Interrupted) => Ok(SessionChoice::Left(Unanswered::Interrupted)),
            }
        }
        Err(e) => Err(e.into()),
    }
}
