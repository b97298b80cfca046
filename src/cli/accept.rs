//! `spectr accept`. STUB.

use crate::cli::CmdResult;

pub fn run(_args: &crate::cli::args::AcceptArgs) -> CmdResult {
    Err(miette::miette!("`spectr accept` is not implemented yet"))
}
