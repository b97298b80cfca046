//! `spectr ralph <change-id>`: wires the model, the agent, the loop and the UI.

use crate::agent::{AgentKind, provider};
use crate::cli::args::RalphArgs;
use crate::cli::ralph_config::{self, Facts};
use crate::cli::ralph_setup as setup;
use crate::cli::{CmdResult, exit};
use crate::model::{Change, ModelError, Project, TaskId, TaskSet, spectr_yaml};
use crate::ralph::event::{LoopEvent, NoticeLevel, Reporter, RunEnd};
use crate::ralph::plan;
use crate::ralph::session::Session;
use crate::ralph::start::{StartOptions, Started, Unanswered};
use crate::ui::human::HumanReporter;
use crate::ui::json::JsonReporter;
use crate::ui::terminal::TerminalUi;
use miette::{IntoDiagnostic, WrapErr, miette};
use std::collections::BTreeSet;
use std::io::IsTerminal;
use std::process::ExitCode;

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

pub fn run(args: RalphArgs) -> CmdResult {
    let cwd = std::env::current_dir()
        .into_diagnostic()
        .wrap_err("could not read the current folder")?;
    let project = Project::discover(&cwd)?;
    // Before the first question: a signal then ends spectr with the
    // terminal put back (the cursor a question hid, its line ended), never
    // where it stands.
    crate::ralph::interrupt::set_restorer(crate::ui::screen::restore);
    crate::ralph::interrupt::install_handler()
        .into_diagnostic()
        .wrap_err("could not install the signal handler")?;
    // Questions are drawn on stderr and answered on stdin: both must be a terminal.
    let stdin_terminal = std::io::stdin().is_terminal() && std::io::stderr().is_terminal();
    // Without a terminal to choose on, a missing change id is the usage
    // error to report (with the changes to pick from), before any agent is
    // looked for.
    let chosen = match args.change_id {
        None if !stdin_terminal => Some(setup::choose_change(&project, false)?),
        _ => None,
    };
    let file = spectr_yaml::read(&project.root)?;
    let facts = Facts {
        terminal: stdin_terminal,
        detected_agent: provider::detect().map(|(kind, _)| kind),
    };
    let settings = ralph_config::settle(&args, file.as_ref(), facts)?;
    let typed = match &args.change_id {
        Some(id) => id.clone(),
        // On stderr, where the picker was: stdout may be --json's.
        None => match chosen.map_or_else(|| setup::choose_change(&project, stdin_terminal), Ok)? {
            Ok(id) => id,
            Err(Unanswered::Cancelled) => {
                crate::ralph::interrupt::say("No change chosen; nothing was run.");
                return Ok(ExitCode::SUCCESS);
            }
            Err(Unanswered::Interrupted) => {
                crate::ralph::interrupt::say("Interrupted; nothing was run.");
                return Ok(ExitCode::from(exit::INTERRUPTED));
            }
        },
    };
    let resolved = resolve_change(&project, &typed)?;
    if let Some(typed) = &resolved.typed {
        crate::cli::print_err(format_args!(
            "Resolved '{typed}' -> '{}'",
            resolved.change.id
        ));
    }
    let change = resolved.change;
    // So `spectr task done` / `learn` / `status` inside the agent find it.
    crate::cli::target::tell_agents(&change);
    let stdout_terminal = std::io::stdout().is_terminal();
    // Lines said during the run (`Quit?`, `Stopping:`) go above the progress rows.
    crate::ralph::interrupt::set_sayer(crate::ui::progress::say);
    let mut reporter: Box<dyn Reporter> = if args.json {
        Box::new(JsonReporter::new())
    } else {
        Box::new(HumanReporter::new(stdout_terminal, stdin_terminal).verbose(args.verbose))
    };
    // Before anything is written (no session, no refs): a sandbox that
    // cannot start is refused. Remote lanes' agents are sandboxed on their
    // machines (`--sandbox` is handed to each worker), not here.
    let sandbox = match settings.lane_exec {
        Some(_) => None,
        None => setup::sandbox_profile(&settings, &project, &change)?,
    };
    // Likewise an agent that cannot start (in the sandbox, when there is
    // one) is a usage error, and the header names the version in use. A dry
    // run checks the same, so its plan never promises a run that cannot start.
    // Remote lanes run the agent elsewhere: each worker checks its own.
    let agent_label = if settings.lane_exec.is_some() {
        settings.agent_label.clone()
    } else {
        let found = setup::preflight_agent(&settings, sandbox.as_ref(), &project.root)?;
        settings.label_with(found.version.as_deref())
    };
    let mut settings = settings;
    // Each routed agent is checked as the run's is, and named with its
    // version: a route to an agent that cannot start stops the run here.
    if settings.lane_exec.is_none() {
        for route in &mut settings.routes {
            let found = setup::preflight_route(&route.agent, sandbox.as_ref(), &project.root)
                .map_err(|e| miette!("ralph.routes ({}): {e}", route.takes.describe()))?;
            if let Some(version) = found.version {
                route.label = match route.label.split_once(" · ") {
                    Some((agent, model)) => format!("{agent} {version} · {model}"),
                    None => format!("{} {version}", route.label),
                };
            }
        }
    }
    if settings.lane_exec.is_none() {
        for fallback in &mut settings.fallback {
            let found = setup::preflight_route(&fallback.agent, sandbox.as_ref(), &project.root)
                .map_err(|e| miette!("ralph.fallback ({}): {e}", fallback.label))?;
            if let Some(version) = found.version {
                fallback.label = format!("{} {version}", fallback.label);
            }
        }
    }
    let fallback_line = (!settings.fallback.is_empty()).then(|| {
        let each: Vec<&str> = settings.fallback.iter().map(|f| f.label.as_str()).collect();
        format!(
            "Fallback: a limit further away than {} moves a task on to {}",
            humantime::format_duration(settings.max_rate_wait),
            each.join(", then ")
        )
    });
    let routes_line = (!settings.routes.is_empty()).then(|| {
        let each: Vec<String> = settings
            .routes
            .iter()
            .map(|r| format!("{} -> {}", r.takes.describe(), r.label))
            .collect();
        format!("Routes: {}; other tasks -> {agent_label}", each.join("; "))
    });
    let sandbox_line = match &settings.lane_exec {
        Some((exec, remote)) => format!(
            "Remote lanes: each attempt runs through `{exec}`, its work by way of {remote}{}",
            if settings.sandbox_settings.enabled {
                "; each worker sandboxes its agent (bubblewrap on the lanes' machines)"
            } else {
                ""
            }
        ),
        None => setup::sandbox_line(sandbox.as_ref()),
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
        let settings_line = setup::settings_line(
            &agent_label,
            settings.max_retries,
            settings.checkpoints,
            settings.verify.as_deref(),
            settings.jobs,
            settings.lane_setup.as_deref(),
        );
        for message in [Some(settings_line), Some(sandbox_line), routes_line]
            .into_iter()
            .flatten()
        {
            reporter.report(&LoopEvent::Notice {
                level: NoticeLevel::Info,
                message,
            });
        }
        let mut planned = plan::plan(&tasks, selection.as_ref(), &skipped);
        if let LoopEvent::Plan { lanes } = &mut planned {
            for t in lanes.iter_mut().flat_map(|l| l.tasks.iter_mut()) {
                t.agent = tasks
                    .task(&t.task)
                    .and_then(|task| crate::ralph::routes::route_for(&settings.routes, task))
                    .map(|r| r.label.clone());
            }
        }
        reporter.report(&planned);
        return Ok(ExitCode::SUCCESS);
    }

    let agent_detected = settings.agent_detected;
    let claude_limits = settings.has_claude_limits();
    let remote_lanes = settings.lane_exec.clone();
    let mut cfg = settings.into_run_config(project, change, agent_label);
    cfg.remote_lanes =
        remote_lanes.map(|(exec, remote)| crate::ralph::lanes::remote::RemoteLanes {
            exec,
            remote,
            args: crate::cli::lane_worker::worker_args(),
            worker: "spectr lane-worker".into(),
        });
    if let Some(sandbox) = sandbox {
        sandbox.prepare();
        cfg.sandbox = Some(std::sync::Arc::new(sandbox));
    }

    if agent_detected {
        reporter.report(&LoopEvent::Notice {
            level: NoticeLevel::Info,
            message: format!("Using agent: {}", cfg.agent_label),
        });
    }
    // A model for an ACP agent has no flag to go by: said, not dropped
    // silently (the agent's own configuration picks it).
    let modelled = std::iter::once(&cfg.agent)
        .chain(cfg.routes.iter().map(|r| &r.agent))
        .filter(|a| a.kind.is_acp() && a.model.is_some());
    let mut said_model = std::collections::BTreeSet::new();
    for agent in modelled {
        let name = crate::agent::kind::display_name(agent.kind);
        if said_model.insert(name) {
            reporter.report(&LoopEvent::Notice {
                level: NoticeLevel::Warn,
                message: format!(
                    "{name} gets its model from its own configuration: over ACP spectr has no way to pass --model {} (set it there)",
                    agent.model.as_deref().unwrap_or_default()
                ),
            });
        }
    }
    // What of `ralph: permissions:` each agent of the run carries.
    if let Some(policy) = cfg.command_rules.native() {
        let mut kinds = vec![cfg.agent.kind];
        kinds.extend(cfg.routes.iter().map(|r| r.agent.kind));
        kinds.extend(cfg.fallback.iter().map(|f| f.agent.kind));
        let mut said = std::collections::BTreeSet::new();
        for kind in kinds {
            for message in crate::agent::provider::permissions::notices(kind, &policy, &cfg.workdir)
            {
                if said.insert(message.clone()) {
                    reporter.report(&LoopEvent::Notice {
                        level: NoticeLevel::Warn,
                        message,
                    });
                }
            }
        }
    }
    for message in [routes_line, fallback_line].into_iter().flatten() {
        reporter.report(&LoopEvent::Notice {
            level: NoticeLevel::Info,
            message,
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

    let opts = StartOptions {
        fresh: args.fresh,
        resume: args.resume,
        rewind: args.rewind,
        interactive: args.interactive,
        yes: args.yes,
        ask: stdin_terminal,
        settings_line: format!(
            "{}\n{sandbox_line}",
            setup::settings_line(
                &cfg.agent_label,
                cfg.max_retries,
                cfg.checkpoints,
                cfg.verify.as_deref(),
                cfg.jobs,
                cfg.lane_setup.as_deref(),
            )
        ),
    };
    if let Some(addr) = &args.serve {
        serve_page(addr, &cfg)?;
    }
    // What ACP agents may run, when they ask.
    crate::agent::acp::set_command_rules(cfg.command_rules.clone());
    // And the CLIs whose own flags carry them.
    crate::agent::provider::set_native_policy(cfg.command_rules.native());
    let mut ui = TerminalUi::default();
    let started = crate::ralph::run(cfg, opts, reporter.as_mut(), &mut ui);
    // A question the run's end left open (its thread waits on a terminal
    // nobody answers) gives the terminal back too.
    crate::ui::screen::restore();
    Ok(ExitCode::from(match started? {
        Started::NotRun | Started::Ran(RunEnd::Complete) => exit::SUCCESS,
        Started::Ran(RunEnd::Incomplete | RunEnd::Aborted) => exit::RUN_FAILED,
        Started::Interrupted | Started::Ran(RunEnd::Interrupted) => exit::INTERRUPTED,
        Started::Ran(RunEnd::Budget) => exit::BUDGET,
    }))
}

/// `--serve`: the live page, up before the run starts (its events come once
/// the run listens; the page waits for it). Its URL is said on stderr, not
/// stdout (`--json`'s), and kept where `spectr status` and people find it.
fn serve_page(addr: &str, cfg: &crate::ralph::config::RunConfig) -> Result<(), miette::Report> {
    let runs = crate::serve::Runs::One {
        change: cfg.change.id.clone(),
        change_dir: cfg.change.dir.clone(),
    };
    let server = crate::serve::Server::start(addr, runs).map_err(|why| {
        miette!(
            help = "give another address, e.g. --serve=127.0.0.1:8080, or none for a free port",
            "--serve: {why}"
        )
    })?;
    crate::cli::print_err(format_args!(
        "Live page: {} (the token in it is its password: share it as you would this terminal)",
        server.url
    ));
    let kept = cfg.state_dir().join("page-url");
    let written = std::fs::create_dir_all(cfg.state_dir())
        .and_then(|()| write_private(&kept, format!("{}\n", server.url).as_bytes()));
    if let Err(e) = written {
        crate::cli::print_err(format_args!(
            "could not keep the page's URL in {}: {e}",
            kept.display()
        ));
    }
    Ok(())
}

/// Replaces `path` with `bytes` readable by the user alone from its first
/// byte (a token is in it), atomically.
fn write_private(path: &std::path::Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let tmp = path.with_extension("tmp");
    let _ = std::fs::remove_file(&tmp);
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&tmp)?;
    file.write_all(bytes)?;
    std::fs::rename(&tmp, path)
}
