//! `spectr lane-worker` (hidden): the far end of a remote lane. Reads one
//! work order on stdin, clones the tree it names, settles the run's
//! configuration from the order's options and the project's spectr.yaml as
//! `spectr ralph` does, runs the attempt, pushes its work back, and prints
//! the run's NDJSON events with one `lane_result` line last. Needs only
//! this binary, git, the agent CLI and the remote's URL.
//!
//! Also here: which of `spectr ralph`'s options a worker is handed.

use crate::agent::provider;
use crate::checkpoint::Checkpointer;
use crate::cli::args::{Cli, Command, LaneWorkerArgs};
use crate::cli::ralph_config::{self, Facts};
use crate::cli::{CmdResult, exit};
use crate::model::{Project, spectr_yaml};
use crate::ralph::control::Control;
use crate::ralph::event::{LoopEvent, Reporter};
use crate::ralph::lanes::remote::order::{ControlLine, LaneResult, ORDER_VERSION, Order};
use crate::ralph::lanes::remote::{TRANSFER_TIMEOUT, worker};
use crate::ui::json::JsonReporter;
use clap::{CommandFactory, Parser};
use std::io::{BufRead, Write};
use std::process::ExitCode;
use std::time::Duration;

/// `spectr ralph`'s options that are the coordinator's alone: which tasks,
/// how many at once, retries, questions, output, sessions, lanes, budget.
const COORDINATOR_ONLY: &[&str] = &[
    "change_id",
    "jobs",
    "max_retries",
    "max_conflicts",
    "on_exhaust",
    "wait_for_answer",
    "max_rate_wait",
    "serve",
    "dry_run",
    "json",
    "verbose",
    "interactive",
    "resume",
    "fresh",
    "rewind",
    "yes",
    "lane_exec",
    "lane_remote",
    "lane_setup",
    "lane_setup_timeout",
    "notify",
    "budget_usd",
    "budget_tokens",
];

/// The options given to this `spectr ralph` that a worker settles its run
/// from, as `--name=value` words (empty when they cannot be read again).
pub fn worker_args() -> Vec<String> {
    worker_args_from(std::env::args_os())
}

fn worker_args_from(argv: impl IntoIterator<Item = std::ffi::OsString>) -> Vec<String> {
    let command = Cli::command();
    let Ok(matches) = command.clone().try_get_matches_from(argv) else {
        return Vec::new();
    };
    let (Some(("ralph", ralph)), Some(sub)) =
        (matches.subcommand(), command.find_subcommand("ralph"))
    else {
        return Vec::new();
    };
    let mut words = Vec::new();
    for arg in sub.get_arguments() {
        let id = arg.get_id().as_str();
        if COORDINATOR_ONLY.contains(&id)
            || ralph.value_source(id) != Some(clap::parser::ValueSource::CommandLine)
        {
            continue;
        }
        let Some(long) = arg.get_long() else {
            continue;
        };
        if matches!(
            arg.get_action(),
            clap::ArgAction::SetTrue | clap::ArgAction::SetFalse
        ) {
            words.push(format!("--{long}"));
            continue;
        }
        for value in ralph.get_raw(id).into_iter().flatten() {
            words.push(format!("--{long}={}", value.to_string_lossy()));
        }
    }
    words
}

pub fn run(args: &LaneWorkerArgs) -> CmdResult {
    // The coordinator's questions and keys are not ours: a signal stops the
    // agent (its work is kept and pushed), nothing is asked.
    let stdin = std::io::stdin();
    let mut first = String::new();
    if let Err(e) = stdin.lock().read_line(&mut first) {
        crate::cli::print_err(format_args!(
            "spectr lane-worker: cannot read the work order on stdin: {e}"
        ));
        return Ok(ExitCode::from(exit::USAGE));
    }
    let order: Order = match serde_json::from_str(first.trim()) {
        Ok(o) => o,
        Err(e) => {
            crate::cli::print_err(format_args!(
                "spectr lane-worker: stdin does not start with a work order ({e}); it is started by `spectr ralph --lane-exec`"
            ));
            return Ok(ExitCode::from(exit::USAGE));
        }
    };
    // First: the coordinator counts the attempt's limits from here.
    if let Ok(line) =
        serde_json::to_string(&crate::ralph::lanes::remote::order::WorkerStarted::now())
    {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{line}");
        let _ = out.flush();
    }
    if order.version != ORDER_VERSION {
        let why = format!(
            "this spectr reads work orders of version {ORDER_VERSION}, not {}: install the coordinator's version on the lanes",
            order.version
        );
        print_result(&worker::worker_failed(&order, why));
        return Ok(ExitCode::from(exit::RUN_FAILED));
    }
    let base = args.dir.clone().unwrap_or_else(std::env::temp_dir);
    let dir = match tempfile::Builder::new()
        .prefix("spectr-lane-")
        .tempdir_in(&base)
    {
        Ok(d) => d,
        Err(e) => {
            let why = format!(
                "cannot make a folder for the clone in {}: {e}",
                base.display()
            );
            print_result(&worker::worker_failed(&order, why));
            return Ok(ExitCode::from(exit::RUN_FAILED));
        }
    };
    let result = attempt(&order, dir.path());
    print_result(&result);
    // The clone goes with `dir`: nothing stays here but what was pushed.
    drop(dir);
    Ok(ExitCode::from(if result.worker_error.is_some() {
        exit::RUN_FAILED
    } else {
        exit::SUCCESS
    }))
}

/// Clones, settles and runs; every failure before the agent is the
/// worker's own (`worker_error`).
fn attempt(order: &Order, dir: &std::path::Path) -> LaneResult {
    let failed = |why: String| worker::worker_failed(order, why);
    let git_timeout = Duration::from_secs(30);
    let clone = match Checkpointer::clone_base(dir, &order.remote, &order.prefix, TRANSFER_TIMEOUT)
    {
        Ok(c) => c.with_timeout(git_timeout),
        Err(e) => {
            return failed(format!(
                "cannot clone {} from {}: {e}",
                order.prefix, order.remote
            ));
        }
    };
    let change_dir = clone.repo_root().join(&order.change_dir);
    let project = match Project::discover(&change_dir) {
        Ok(p) => p,
        Err(e) => return failed(format!("the clone holds no spectr project: {e}")),
    };
    let resolved = match project.resolve_change(&order.change) {
        Ok(r) => r,
        Err(e) => return failed(format!("the clone holds no change {}: {e}", order.change)),
    };
    let mut words = vec![
        "spectr".to_string(),
        "ralph".to_string(),
        order.change.clone(),
    ];
    words.extend(order.args.iter().cloned());
    let ralph_args = match Cli::try_parse_from(&words) {
        Ok(Cli {
            command: Command::Ralph(a),
        }) => a,
        Ok(_) => return failed("the order's options are not spectr ralph's".into()),
        Err(e) => return failed(format!("the order's options do not parse: {e}")),
    };
    let file = match spectr_yaml::read(&project.root) {
        Ok(f) => f,
        Err(e) => return failed(format!("spectr.yaml: {e}")),
    };
    let facts = Facts {
        terminal: false,
        detected_agent: provider::detect().map(|(kind, _)| kind),
    };
    let settings = match ralph_config::settle(&ralph_args, file.as_ref(), facts) {
        Ok(s) => s,
        Err(e) => return failed(format!("the run's options: {e}")),
    };
    crate::agent::acp::set_command_rules(settings.command_rules.clone());
    crate::agent::provider::set_native_policy(settings.command_rules.native());
    // `--sandbox` confines the agent here as it would on the coordinator's
    // machine: bubblewrap found and tried on this one.
    let sandbox =
        match crate::cli::ralph_setup::sandbox_profile(&settings, &project, &resolved.change) {
            Ok(s) => s,
            Err(e) => return failed(format!("--sandbox cannot run on this machine: {e}")),
        };
    if let Some(s) = &sandbox {
        s.prepare();
    }
    let found = match crate::cli::ralph_setup::preflight_agent(
        &settings,
        sandbox.as_ref(),
        &project.root,
    ) {
        Ok(f) => f,
        Err(e) => return failed(format!("the agent cannot start on this machine: {e}")),
    };
    let label = settings.label_with(found.version.as_deref());
    let change = resolved.change;
    crate::cli::target::tell_agents(&change);
    let mut cfg = settings.into_run_config(project, change, label);
    cfg.sandbox = sandbox.map(std::sync::Arc::new);
    cfg.run_id = format!("lane-{}", order.attempt);
    let controls = read_controls(order);
    let mut reporter = JsonReporter::new();
    worker::run_attempt(
        &cfg,
        &clone,
        order,
        controls,
        TRANSFER_TIMEOUT,
        &mut |event: LoopEvent| reporter.report(&event),
    )
}

/// Control lines on stdin, as the attempt's controls. At the end of stdin
/// (the coordinator is gone) the attempt goes on: its work is pushed, and
/// a resume fetches it.
fn read_controls(order: &Order) -> crossbeam_channel::Receiver<Control> {
    let (tx, rx) = crossbeam_channel::unbounded();
    stop_on_signal(tx.clone());
    let task = order.task.clone();
    let _ = std::thread::Builder::new()
        .name("spectr-lane-controls".into())
        .spawn(move || {
            for line in std::io::stdin().lock().lines() {
                let Ok(line) = line else { break };
                if let Ok(control) = serde_json::from_str::<ControlLine>(line.trim())
                    && tx.send(worker::control_for(control, &task)).is_err()
                {
                    break;
                }
            }
            // Keep the channel open: a closed one reads as "stop".
            std::mem::forget(tx);
        });
    rx
}

/// SIGTERM, SIGINT or SIGHUP (a pod evicted, a terminal closed): the
/// attempt stops as for `q`, its work reverted and kept, and pushed.
fn stop_on_signal(controls: crossbeam_channel::Sender<Control>) {
    let handler = ctrlc::set_handler(move || {
        let _ = controls.send(Control::Quit);
    });
    if let Err(e) = handler {
        crate::cli::print_err(format_args!(
            "spectr lane-worker: signals will end it at once: {e}"
        ));
    }
}

fn print_result(result: &LaneResult) {
    let mut out = std::io::stdout().lock();
    // A coordinator gone leaves nobody to read it: the refs tell instead.
    if let Ok(line) = serde_json::to_string(result) {
        let _ = writeln!(out, "{line}");
        let _ = out.flush();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn forwarded(args: &[&str]) -> Vec<String> {
        let mut argv = vec!["spectr", "ralph", "my-change"];
        argv.extend(args);
        worker_args_from(argv.into_iter().map(std::ffi::OsString::from))
    }

    #[test]
    fn a_worker_gets_the_attempts_options_and_none_of_the_coordinators() {
        let got = forwarded(&[
            "--agent",
            "claude",
            "--model=opus",
            "--agent-arg",
            "--x",
            "--agent-arg=-y",
            "--task-timeout",
            "20m",
            "--verify",
            "cargo test",
            "--sandbox",
            "--json",
            "--jobs",
            "4",
            "--max-retries",
            "2",
            "--lane-exec",
            "ssh b{lane} {cmd}",
            "--lane-remote",
            "/srv/x.git",
            "--notify",
            "cat",
            "--budget-usd",
            "3",
            "--yes",
            "--resume",
        ]);
        assert_eq!(
            got,
            [
                "--agent=claude",
                "--agent-arg=--x",
                "--agent-arg=-y",
                "--model=opus",
                "--task-timeout=20m",
                "--verify=cargo test",
                "--sandbox",
            ]
        );
        // What the worker is handed parses back as spectr ralph's options.
        let mut words = vec!["spectr".to_string(), "ralph".into(), "c".into()];
        words.extend(got);
        assert!(Cli::try_parse_from(words).is_ok());
    }

    #[test]
    fn defaults_are_not_handed_on() {
        assert!(forwarded(&[]).is_empty());
    }
}
