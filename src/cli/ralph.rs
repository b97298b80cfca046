//! `spectr ralph <change-id>`: wires the model, the agent, the loop and the UI.

use crate::agent::{AgentKind, provider};
use crate::checkpoint::Checkpointer;
use crate::cli::args::RalphArgs;
use crate::cli::ralph_config::{self, Facts};
use crate::cli::ralph_setup as setup;
use crate::cli::{CmdResult, exit};
use crate::model::{
    Change, ModelError, Project, TaskGraph, TaskId, TaskSet, TaskStatus, spectr_yaml,
};
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
use crate::ui::human::HumanReporter;
use crate::ui::json::JsonReporter;
use crate::ui::keys::{self, KeyReader};
use crate::ui::prompts::{self, TerminalInteraction};
use miette::{IntoDiagnostic, WrapErr, miette};
use std::collections::BTreeSet;
use std::io::IsTerminal;
use std::process::ExitCode;

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
}

fn choose_session(
    args: &RalphArgs,
    cfg: &RunConfig,
    terminal: bool,
    say: &mut dyn Reporter,
) -> Result<SessionChoice, miette::Report> {
    let path = cfg.session_path();
    if args.fresh {
        discard(&path, &cfg.change.id, say)?;
        return Ok(SessionChoice::Fresh);
    }
    match Session::load(&path, &cfg.change.id) {
        Ok(None) => Ok(SessionChoice::Fresh),
        Ok(Some(session)) => {
            if args.resume {
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
                "A saved session from {} exists for '{}' ({done} tasks completed in it, last update {}).",
                session.started_at, session.change, session.updated_at
            );
            if prompts::confirm_resume(&summary).into_diagnostic()? {
                Ok(SessionChoice::Resume(session))
            } else {
                discard(&path, &cfg.change.id, say)?;
                Ok(SessionChoice::Fresh)
            }
        }
        Err(
            e @ (SessionError::Corrupt { .. }
            | SessionError::UnknownVersion { .. }
            | SessionError::WrongChange { .. }),
        ) => {
            if terminal {
                eprintln!("{}", crate::ui::ansi::clean(&e.to_string()));
                if prompts::confirm_start_fresh().into_diagnostic()? {
                    Session::delete(&path)?;
                    return Ok(SessionChoice::Fresh);
                }
            }
            Err(e.into())
        }
        Err(e) => Err(e.into()),
    }
}

/// The change to run. A change whose `proposal.md` an interrupted attempt
/// deleted is still found when it holds a saved session: the resume puts
/// the file back.
fn resolve_change(
    project: &Project,
    typed: &str,
) -> Result<crate::model::ResolvedChange, miette::Report> {
    match project.resolve_change(typed) {
        Ok(r) => Ok(r),
        Err(ModelError::NotAChange { id, dir }) if Session::existing_path(&dir).is_file() => {
            Ok(crate::model::ResolvedChange {
                change: Change { id, dir },
                typed: None,
            })
        }
        Err(e) => Err(e.into()),
    }
}

/// With a terminal: what to do about commits made since an interrupted
/// attempt's checkpoint. Without one (or when the question fails): refuse.
fn ask_about_moved_head(moved: &recover::MovedHead) -> recover::MovedChoice {
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
        Ok(0) => recover::MovedChoice::Rewind,
        Ok(1) => recover::MovedChoice::Keep,
        _ => recover::MovedChoice::Refuse,
    }
}

pub fn run(args: RalphArgs) -> CmdResult {
    let cwd = std::env::current_dir()
        .into_diagnostic()
        .wrap_err("could not read the current folder")?;
    let project = Project::discover(&cwd)?;
    // Questions are drawn on stderr and answered on stdin: both must be a terminal.
    let stdin_terminal = std::io::stdin().is_terminal() && std::io::stderr().is_terminal();
    let file = spectr_yaml::read(&project.root)?;
    let facts = Facts {
        terminal: stdin_terminal,
        detected_agent: provider::detect().map(|(kind, _)| kind),
    };
    let settings = ralph_config::settle(&args, file.as_ref(), facts)?;
    let typed = match &args.change_id {
        Some(id) => id.clone(),
        None => setup::choose_change(&project, stdin_terminal)?,
    };
    let resolved = resolve_change(&project, &typed)?;
    if let Some(typed) = &resolved.typed {
        eprintln!("Resolved '{typed}' -> '{}'", resolved.change.id);
    }
    let change = resolved.change;
    // So `spectr task done` / `learn` / `status` inside the agent find it.
    provider::set_agent_env(vec![
        (
            crate::cli::target::CHANGE_ENV.to_string(),
            change.id.clone(),
        ),
        (
            crate::cli::target::CHANGE_DIR_ENV.to_string(),
            change.dir.display().to_string(),
        ),
    ]);
    let stdout_terminal = std::io::stdout().is_terminal();
    let mut reporter: Box<dyn Reporter> = if args.json {
        Box::new(JsonReporter::new())
    } else {
        Box::new(HumanReporter::new(stdout_terminal, stdin_terminal))
    };
    // Before anything is written (no session, no refs): an agent that cannot
    // start is a usage error, and the header names the version in use. A dry
    // run checks the same, so its plan never promises a run that cannot start.
    let found = provider::preflight(&settings.agent)?;
    let agent_label = match &found.version {
        Some(version) => format!("{} {version}", settings.agent_label),
        None => settings.agent_label.clone(),
    };
    if args.dry_run {
        // The plan a resume would follow: the saved session's selection and
        // skips count, and nothing is changed.
        let tasks = TaskSet::load(&change.dir)?;
        let saved = Session::load(&Session::existing_path(&change.dir), &change.id)
            .ok()
            .flatten();
        let selection: Option<BTreeSet<TaskId>> = saved
            .as_ref()
            .and_then(|s| s.selection.as_ref())
            .map(|v| v.iter().cloned().collect());
        let skipped = saved.as_ref().map(Session::skipped).unwrap_or_default();
        reporter.report(&LoopEvent::Notice {
            level: NoticeLevel::Info,
            message: setup::settings_line(
                &agent_label,
                settings.max_retries,
                settings.checkpoints,
                settings.verify.as_deref(),
                settings.jobs,
                settings.lane_setup.as_deref(),
            ),
        });
        reporter.report(&plan::plan(&tasks, selection.as_ref(), &skipped));
        return Ok(ExitCode::SUCCESS);
    }

    let agent_detected = settings.agent_detected;
    let claude_limits = settings.has_claude_limits();
    let mut cfg = settings.into_run_config(project, change, agent_label);

    if agent_detected {
        reporter.report(&LoopEvent::Notice {
            level: NoticeLevel::Info,
            message: format!("Using agent: {}", cfg.agent_label),
        });
    }
    if claude_limits && cfg.agent.kind != AgentKind::Claude {
        reporter.report(&LoopEvent::Notice {
            level: NoticeLevel::Warn,
            message: format!(
                "--max-turns and --max-budget-usd apply to Claude Code only; {} has no such limit",
                cfg.agent_label
            ),
        });
    }
    if args.interactive && !stdin_terminal {
        return Err(miette!(
            help = "run it from a terminal, or drop --interactive to run every pending task",
            "--interactive needs a terminal to show the task selector, and stdin is not one"
        ));
    }

    // Order matters from here: lock, read the session, stop leftover agents,
    // put back what interrupted attempts left, and only then read the tasks
    // (an interrupted attempt may have broken or deleted them).
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

    let choice = choose_session(&args, &cfg, stdin_terminal, reporter.as_mut())?;
    let resumed = matches!(choice, SessionChoice::Resume(_));
    let session = match choice {
        SessionChoice::Resume(s) => s,
        SessionChoice::Fresh => Session::new(
            &cfg.change.id,
            SessionOptions {
                agent: format!("{:?}", cfg.agent.kind).to_lowercase(),
                max_retries: cfg.max_retries,
                checkpoints: cfg.checkpoints,
                verify: cfg.verify.clone(),
            },
            None,
        ),
    };
    cfg.run_id = session.started_at.replace(':', "-");
    let session_path = cfg.session_path();
    let mut out = Outbox::new(session, session_path, reporter.as_mut());
    if resumed {
        out.loaded_from_disk();
    }
    // What `spectr context` tells an agent: this run's verification.
    out.session.options.verify = cfg.verify.clone();

    if resumed {
        for message in recover::stop_leftover_agents(&out.session) {
            out.emit(LoopEvent::Notice {
                level: NoticeLevel::Warn,
                message,
            });
        }
        let rewind = args.rewind;
        let mut decide = |moved: &recover::MovedHead| {
            if rewind {
                recover::MovedChoice::Rewind
            } else if stdin_terminal {
                ask_about_moved_head(moved)
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
    if args.interactive {
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
            return Ok(ExitCode::SUCCESS);
        }
        let chosen = prompts::select_tasks(&pending).into_diagnostic()?;
        if chosen.is_empty() {
            out.rec.reporter.report(&LoopEvent::Notice {
                level: NoticeLevel::Info,
                message: "no task selected; nothing to do".into(),
            });
            return Ok(ExitCode::SUCCESS);
        }
        out.session.selection = Some(chosen.iter().cloned().collect());
    }
    cfg.selection = out
        .session
        .selection
        .as_ref()
        .map(|v| v.iter().cloned().collect::<BTreeSet<TaskId>>());

    let to_run = plan::tasks_to_run(&tasks, &graph, cfg.selection.as_ref());
    if to_run.is_empty() {
        out.rec.reporter.report(&LoopEvent::Notice {
            level: NoticeLevel::Info,
            message: format!(
                "Nothing to do: every selected task of '{}' is already completed.",
                cfg.change.id
            ),
        });
        if let Some(cp) = &repo
            && let Err(e) = cp.clean(&cfg.change.id, crate::checkpoint::CleanScope::Checkpoints)
        {
            out.rec.reporter.report(&LoopEvent::Notice {
                level: NoticeLevel::Warn,
                message: format!("could not remove the run's checkpoint refs: {e}"),
            });
        }
        Session::delete(&cfg.session_path())?;
        return Ok(ExitCode::SUCCESS);
    }

    // The preview: a fresh run on a terminal shows the plan and asks first.
    if !resumed && stdin_terminal && !args.yes {
        out.rec.reporter.report(&LoopEvent::Notice {
            level: NoticeLevel::Info,
            message: setup::settings_line(
                &cfg.agent_label,
                cfg.max_retries,
                cfg.checkpoints,
                cfg.verify.as_deref(),
                cfg.jobs,
                cfg.lane_setup.as_deref(),
            ),
        });
        out.rec.reporter.report(&plan::plan(
            &tasks,
            cfg.selection.as_ref(),
            &BTreeSet::new(),
        ));
        if !prompts::confirm_start().into_diagnostic()? {
            out.rec.reporter.report(&LoopEvent::Notice {
                level: NoticeLevel::Info,
                message: "Not started; nothing was changed.".into(),
            });
            return Ok(ExitCode::SUCCESS);
        }
    }

    let lane_count = graph.lanes().len();
    let cpus = std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get);
    let slots = crate::ralph::decide::slots_for(cfg.jobs, lane_count, cpus);
    if slots > 1 {
        preflight::check_lanes_possible(repo.as_ref(), &cfg)?;
        out.rec.reporter.report(&LoopEvent::Notice {
            level: NoticeLevel::Info,
            message: preflight::lanes_notice(slots, repo.as_ref(), &cfg),
        });
    }
    // Lanes work in git work trees whatever --no-checkpoint says: the
    // user's tree is only ever changed by a merge, checkpointed first.
    let checkpointer = if cfg.checkpoints || slots > 1 {
        repo
    } else {
        None
    };
    cfg.checkpoints = cfg.checkpoints && checkpointer.is_some();

    let (tx, rx) = crossbeam_channel::unbounded::<Control>();
    let active = ActiveAgents::default();
    let interrupts = Interrupts::new(
        tx.clone(),
        active.clone(),
        Box::new(|| {
            keys::restore_terminal();
            crate::ui::out::flush_within(std::time::Duration::from_millis(200));
        }),
    );
    {
        let i = interrupts.clone();
        // SIGINT, SIGTERM and SIGHUP (the `termination` feature) all stop gracefully.
        ctrlc::set_handler(move || i.quit())
            .into_diagnostic()
            .wrap_err("could not install the signal handler")?;
    }
    let running = RunningTasks::default();
    let key_reader = KeyReader::start(tx, interrupts.clone(), running.clone());

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

    let asker: Option<Box<dyn Interaction + Send>> = (cfg.on_exhaust == ExhaustPolicy::Prompt)
        .then(|| {
            Box::new(TerminalInteraction {
                keys: key_reader.as_ref().map(KeyReader::pauser),
            }) as Box<dyn Interaction + Send>
        });

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
    });
    let setup = RunSetup {
        checkpointer,
        controls: rx,
        watcher,
        active,
        running,
        slots,
        asker,
    };
    let end = driver::run(tasks, out, &cfg, setup);
    interrupts.finished();
    drop(key_reader);
    drop(lock);
    Ok(ExitCode::from(match end {
        RunEnd::Complete => exit::SUCCESS,
        RunEnd::Incomplete | RunEnd::Aborted => exit::RUN_FAILED,
        RunEnd::Interrupted => exit::INTERRUPTED,
    }))
}
