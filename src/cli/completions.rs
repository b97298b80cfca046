//! Shell completion. `spectr completions <shell>` prints a small script
//! that registers `spectr` with the shell; on each TAB the shell runs
//! `spectr` again with `SPECTR_COMPLETE=<shell>` and the words typed, and
//! clap_complete's engine answers from the clap definition, so flags,
//! subcommands and values always match the binary in use, and change and
//! task ids come from the project in the current folder. The copies in
//! `completions/` are checked against this by `tests/cli_completions.rs`
//! (set `SPECTR_UPDATE_COMPLETIONS=1` to refresh them).

use crate::cli::CmdResult;
use crate::cli::args::{Cli, CompletionsArgs};
use crate::model::{Project, TaskSet, TaskStatus};
use clap::CommandFactory;
use clap_complete::engine::CompletionCandidate;
use clap_complete::env::EnvCompleter;
use clap_complete::{Generator, Shell};
use std::process::ExitCode;

/// The binary name the scripts complete.
pub const BIN_NAME: &str = "spectr";

/// Set by the registered script when it asks `spectr` for completions (a
/// name of spectr's own, so a `COMPLETE` set for another tool is ignored).
pub const COMPLETE_ENV: &str = "SPECTR_COMPLETE";

/// Answers a completion request and exits, when this run is one (see the
/// module doc); returns at once otherwise.
pub fn answer_if_asked() {
    clap_complete::CompleteEnv::with_factory(Cli::command)
        .var(COMPLETE_ENV)
        .bin(BIN_NAME)
        // The script runs `spectr` from PATH: a script saved to a file
        // keeps working when the binary moves or is rebuilt.
        .completer(BIN_NAME)
        .complete();
}

/// The registration script for `shell`.
pub fn script(shell: Shell) -> Vec<u8> {
    use clap_complete::env::{Bash, Elvish, Fish, Powershell, Zsh};
    let completer: &dyn EnvCompleter = match shell {
        Shell::Bash => &Bash,
        Shell::Zsh => &Zsh,
        Shell::Fish => &Fish,
        Shell::Elvish => &Elvish,
        Shell::PowerShell => &Powershell,
        // A shell clap_complete adds later: its static script, which knows
        // the flags but not the ids.
        _ => {
            let mut buf = Vec::new();
            clap_complete::generate(shell, &mut Cli::command(), BIN_NAME, &mut buf);
            return buf;
        }
    };
    let mut buf = Vec::new();
    // Writing into a Vec cannot fail.
    let _ = completer.write_registration(COMPLETE_ENV, BIN_NAME, BIN_NAME, BIN_NAME, &mut buf);
    buf
}

/// The conventional file name for `shell`'s script (`spectr.bash`, `_spectr`,
/// `spectr.fish`, `spectr.elv`, `_spectr.ps1`).
pub fn file_name(shell: Shell) -> String {
    shell.file_name(BIN_NAME)
}

pub fn run(args: &CompletionsArgs) -> CmdResult {
    crate::cli::print_out(script(args.shell))?;
    Ok(ExitCode::SUCCESS)
}

/// The project of the current folder; completion offers nothing without one.
fn project() -> Option<Project> {
    Project::discover(&std::env::current_dir().ok()?).ok()
}

/// The active changes' ids, each with its proposal's title: `spectr ralph
/// <TAB>`, `spectr accept <TAB>`, `--change <TAB>`.
pub fn change_candidates() -> Vec<CompletionCandidate> {
    let Some(changes) = project().and_then(|p| p.active_changes().ok()) else {
        return Vec::new();
    };
    changes
        .into_iter()
        .map(|c| {
            let title = c.title().map(|t| crate::text::clean(&t).into_owned());
            CompletionCandidate::new(c.id).help(title.map(Into::into))
        })
        .collect()
}

/// The ids of the tasks of the change the command is about (`--change` on
/// the line being completed, else as `spectr task done` picks it), each
/// with its description's first line: those not completed, or all when
/// every task is.
pub fn task_candidates() -> Vec<CompletionCandidate> {
    let Some(project) = project() else {
        return Vec::new();
    };
    let typed = typed_change(std::env::args());
    let Ok(change) =
        crate::cli::target::change(&project, typed.as_deref(), crate::cli::target::Named::Flag)
    else {
        return Vec::new();
    };
    let Ok(set) = TaskSet::load(&change.dir) else {
        return Vec::new();
    };
    let open: Vec<_> = set
        .tasks
        .iter()
        .filter(|t| t.children.is_empty() && t.status != TaskStatus::Completed)
        .collect();
    let shown = if open.is_empty() {
        set.tasks.iter().filter(|t| t.children.is_empty()).collect()
    } else {
        open
    };
    shown
        .into_iter()
        .map(|t| {
            let what = crate::text::task_title(&t.section, &t.description);
            CompletionCandidate::new(t.id.to_string()).help(Some(what.into()))
        })
        .collect()
}

/// The value of `--change` among the words being completed (after `--`),
/// if given: the candidates' callbacks see no parsed arguments.
fn typed_change(args: impl Iterator<Item = String>) -> Option<String> {
    let words: Vec<String> = args.skip_while(|a| a != "--").skip(1).collect();
    let mut found = None;
    for (i, w) in words.iter().enumerate() {
        if let Some(v) = w.strip_prefix("--change=") {
            found = Some(v.to_string());
        } else if w == "--change" {
            found = words.get(i + 1).cloned();
        }
    }
    found.filter(|v| !v.is_empty() && !v.starts_with('-'))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(v: &[&str]) -> impl Iterator<Item = String> {
        v.iter()
            .map(|s| s.to_string())
            .collect::<Vec<_>>()
            .into_iter()
    }

    #[test]
    fn the_change_typed_on_the_line_is_found() {
        let t = |v: &[&str]| typed_change(words(v));
        assert_eq!(
            t(&[
                "spectr", "--", "spectr", "task", "done", "--change", "c1", ""
            ]),
            Some("c1".into())
        );
        assert_eq!(
            t(&["spectr", "--", "spectr", "task", "done", "--change=c2", ""]),
            Some("c2".into())
        );
        assert_eq!(t(&["spectr", "--", "spectr", "task", "done", ""]), None);
        // `--change` still being typed: no value yet.
        assert_eq!(
            t(&["spectr", "--", "spectr", "task", "done", "--change"]),
            None
        );
        // Words before `--` are the completer's own.
        assert_eq!(t(&["spectr", "--change", "x", "--", "spectr", ""]), None);
    }
}
