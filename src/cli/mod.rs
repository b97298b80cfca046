//! The CLI layer: parses arguments and dispatches. Errors are rendered here, once,
//! with miette (file, line, the offending text, and what to do next).

pub(crate) mod accept;
pub(crate) mod args;
pub mod completions;
pub(crate) mod context;
pub(crate) mod lane_worker;
pub(crate) mod learn;
pub mod list;
pub(crate) mod man;
pub(crate) mod ralph;
pub(crate) mod ralph_config;
pub(crate) mod ralph_setup;
pub(crate) mod report;
pub(crate) mod serve;
pub(crate) mod status;
pub(crate) mod steer;
pub(crate) mod target;
pub(crate) mod task;
pub(crate) mod watch;

use clap::Parser;
use std::process::ExitCode;

pub use args::{Cli, Command};

/// Exit codes, documented in `--help` and README.
pub mod exit {
    pub const SUCCESS: u8 = 0;
    pub const RUN_FAILED: u8 = 1;
    pub const USAGE: u8 = 2;
    /// The run's budget (`--budget-usd`, `--budget-tokens`) was reached.
    pub const BUDGET: u8 = 3;
    pub const INTERRUPTED: u8 = 130;
}

pub fn main() -> ExitCode {
    // A TAB in a shell that registered `spectr completions <shell>`.
    completions::answer_if_asked();
    // Never wrap: a path or command broken across lines can't be copied.
    let _ = miette::set_hook(Box::new(|_| {
        Box::new(miette::MietteHandlerOpts::new().wrap_lines(false).build())
    }));
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return match e.kind() {
                clap::error::ErrorKind::DisplayHelp | clap::error::ErrorKind::DisplayVersion => {
                    ExitCode::SUCCESS
                }
                _ => ExitCode::from(exit::USAGE),
            };
        }
    };
    let result = match cli.command {
        Command::List(args) => list::run(&args),
        Command::Accept(args) => accept::run(&args),
        Command::Completions(args) => completions::run(&args),
        Command::Task(args) => task::run(&args),
        Command::Learn(args) => learn::run(&args),
        Command::Status(mut args) => {
            args.merge_change();
            status::run(&args)
        }
        Command::Context(mut args) => {
            args.merge_change();
            context::run(&args)
        }
        Command::Report(args) => report::run(&args),
        Command::Watch(args) => watch::run(&args),
        Command::Serve(args) => serve::run(&args),
        Command::Man(args) => man::run(&args),
        Command::LaneWorker(args) => lane_worker::run(&args),
        Command::Ralph(args) if args.steer.is_some() => match &args.steer {
            Some(command) => steer::run(command),
            None => Ok(ExitCode::from(exit::USAGE)),
        },
        Command::Ralph(args) => {
            let json = args.json;
            let result = ralph::run(*args);
            if json && let Err(report) = &result {
                // Machine readers get the refusal on stdout too, as an event.
                crate::ui::json::print_error(&report.to_string());
            }
            result
        }
    };
    match result {
        Ok(code) => code,
        Err(report) => {
            // Not eprintln: a closed terminal must not turn this into a panic.
            use std::io::Write;
            let _ = writeln!(std::io::stderr(), "{}", render_report(&report));
            ExitCode::from(exit::USAGE)
        }
    }
}

/// What a command returns: an exit code, or an input error to render (exit 2).
pub type CmdResult = Result<ExitCode, miette::Report>;

/// A report as miette renders it, with anything a quoted file could use to
/// drive the terminal removed (miette prints source text as it is). Colour is
/// kept when stderr shows it.
pub fn render_report(report: &miette::Report) -> String {
    use std::io::IsTerminal;
    let color = std::io::stderr().is_terminal() && console::colors_enabled_stderr();
    crate::ui::ansi::clean_block(&format!("{report:?}"), color).into_owned()
}

/// A command's output on stdout. A reader that closed early (`spectr report
/// | head`) is not an error: the rest is dropped quietly, as cargo and
/// ripgrep do.
pub(crate) fn print_out(text: impl AsRef<[u8]>) -> Result<(), miette::Report> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_ref()).and_then(|()| out.flush()) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        Err(e) => Err(miette::miette!("cannot write to stdout: {e}")),
    }
}

/// A line on stderr; a closed stderr is not a panic (`eprintln!` would be).
pub(crate) fn print_err(line: impl std::fmt::Display) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr().lock(), "{line}");
}

/// Prints on stderr what keeping the change's tasks.md in step had to say.
pub fn print_tasks_md_warnings(tasks: &mut crate::model::TaskSet) {
    for message in tasks.take_tasks_md_warnings() {
        print_err(format_args!(
            "warning: {}",
            crate::ui::ansi::clean(&message)
        ));
    }
}

/// What `list` and `status` say when tasks.md's boxes lag tasks.jsonc (or
/// cannot be matched to it): they read, they never tick a tracked file.
pub(crate) fn tasks_md_lag_note(change: &str, tasks: &crate::model::TaskSet) -> Option<String> {
    match tasks.tasks_md_lagging() {
        Ok(ids) if ids.is_empty() => None,
        Ok(ids) => Some(lag_words(change, &ids)),
        Err(why) => Some(why),
    }
}

/// tasks.md's boxes that lag tasks.jsonc, and what brings them up to date.
fn lag_words(change: &str, ids: &[crate::model::TaskId]) -> String {
    const SHOWN: usize = 5;
    let mut named: Vec<String> = ids.iter().take(SHOWN).map(ToString::to_string).collect();
    if ids.len() > SHOWN {
        named.push(format!("and {} more", ids.len() - SHOWN));
    }
    format!(
        "tasks.md lags tasks.jsonc: {} box{} say{} otherwise than the task's status ({}); `spectr task sync --change {change}` ticks them (a run of the change, or `spectr task done`, keeps them in step too)",
        ids.len(),
        if ids.len() == 1 { "" } else { "es" },
        if ids.len() == 1 { "s" } else { "" },
        named.join(", ")
    )
}
