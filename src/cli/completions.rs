//! `spectr completions`. STUB.

use crate::cli::CmdResult;

pub fn run(_args: &crate::cli::args::CompletionsArgs) -> CmdResult {
    Err(miette::miette!(
        "`spectr completions` is not implemented yet"
    ))
}
