//! `spectr list`. STUB.

use crate::cli::CmdResult;

pub fn run(_args: &crate::cli::args::ListArgs) -> CmdResult {
    Err(miette::miette!("`spectr list` is not implemented yet"))
}
