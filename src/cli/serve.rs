//! `spectr serve [ADDR]`: the live page for whichever change of the project
//! has a run listening, until Ctrl+C (see `crate::serve`).

use super::CmdResult;
use super::args::ServeArgs;
use crate::model::Project;
use miette::{IntoDiagnostic, WrapErr, miette};

pub fn run(args: &ServeArgs) -> CmdResult {
    let cwd = std::env::current_dir()
        .into_diagnostic()
        .wrap_err("could not read the current folder")?;
    let project = Project::discover(&cwd)?;
    let addr = args.addr.as_deref().unwrap_or("127.0.0.1:0");
    let runs = crate::serve::Runs::Project {
        root: project.root.clone(),
    };
    let server = crate::serve::Server::start(addr, runs).map_err(|why| {
        miette!(
            help =
                "give another address, e.g. spectr serve 127.0.0.1:8080, or none for a free port",
            "{why}"
        )
    })?;
    super::print_out(format!(
        "Live page of {}'s runs: {}\n(the token in it is its password; Ctrl+C stops serving, never a run)\n",
        project.root.display(),
        server.url
    ))?;
    loop {
        std::thread::park();
    }
}
