//! `spectr completions <shell>`: prints a completion script generated from the
//! clap definition. The copies in `completions/` are checked against this by
//! `tests/cli_completions.rs` (set `SPECTR_UPDATE_COMPLETIONS=1` to refresh
//! them after changing the CLI).

use crate::cli::CmdResult;
use crate::cli::args::{Cli, CompletionsArgs};
use crate::cli::list::write_stdout;
use clap::CommandFactory;
use clap_complete::{Generator, Shell};
use std::process::ExitCode;

/// The binary name the scripts complete.
pub const BIN_NAME: &str = "spectr";

/// The completion script for `shell`.
pub fn script(shell: Shell) -> Vec<u8> {
    let mut cmd = Cli::command();
    let mut buf = Vec::new();
    clap_complete::generate(shell, &mut cmd, BIN_NAME, &mut buf);
    buf
}

/// The conventional file name for `shell`'s script (`spectr.bash`, `_spectr`,
/// `spectr.fish`, `spectr.elv`, `_spectr.ps1`).
pub fn file_name(shell: Shell) -> String {
    shell.file_name(BIN_NAME)
}

pub fn run(args: &CompletionsArgs) -> CmdResult {
    write_stdout(&script(args.shell))?;
    Ok(ExitCode::SUCCESS)
}
