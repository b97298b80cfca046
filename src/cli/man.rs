//! `spectr man [COMMAND]`: the manual page (roff) generated from the same
//! clap definitions as `--help`, so the two never disagree. `spectr man`
//! is spectr(1); `spectr man ralph` is spectr-ralph(1), as cargo names its
//! pages. Read it with `spectr man ralph | man -l -`, or install it:
//! `spectr man ralph > ~/.local/share/man/man1/spectr-ralph.1`.

use crate::cli::CmdResult;
use crate::cli::args::{Cli, ManArgs};
use clap::CommandFactory;
use std::process::ExitCode;

pub fn run(args: &ManArgs) -> CmdResult {
    let top = Cli::command();
    let (page, title) = match &args.command {
        None => (top, "spectr".to_string()),
        Some(name) => {
            let Some(sub) = top
                .get_subcommands()
                .find(|c| c.get_name() == name && !c.is_hide_set())
                .cloned()
            else {
                let names: Vec<&str> = top
                    .get_subcommands()
                    .filter(|c| !c.is_hide_set())
                    .map(|c| c.get_name())
                    .collect();
                return Err(miette::miette!(
                    help = format!("one of: {}", names.join(", ")),
                    "spectr has no command `{name}` to print a manual page for"
                ));
            };
            let title = format!("spectr-{}", sub.get_name());
            let bin = format!("spectr {}", sub.get_name());
            let sub = sub
                .bin_name(bin)
                .display_name(title.clone())
                .version(env!("CARGO_PKG_VERSION"));
            (sub, title)
        }
    };
    let mut roff = Vec::new();
    clap_mangen::Man::new(page)
        .title(title)
        .render(&mut roff)
        .map_err(|e| miette::miette!("could not render the manual page: {e}"))?;
    crate::cli::print_out(roff)?;
    Ok(ExitCode::SUCCESS)
}
