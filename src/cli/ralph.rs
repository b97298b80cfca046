//! `spectr ralph`. STUB.

use crate::cli::CmdResult;

pub fn run(_args: crate::cli::args::RalphArgs) -> CmdResult {
    Err(miette::miette!("`spectr ralph` is not implemented yet"))
}
