//! `spectr report [<change>] [--html FILE]`: the change's last run, from its
//! journal (`<change>/.ralph/runs/<started>.jsonl`): Markdown on stdout,
//! and with `--html` one self-contained page too.

use crate::checkpoint::Checkpointer;
use crate::cli::args::ReportArgs;
use crate::cli::{CmdResult, target};
use crate::model::Project;
use crate::ralph::report::{After, RunReport};
use crate::ralph::run_journal;
use miette::{IntoDiagnostic, WrapErr, miette};
use std::process::ExitCode;
use std::time::Duration;

/// Each git command of the report, at most.
const GIT_TIMEOUT: Duration = Duration::from_secs(30);

pub fn run(args: &ReportArgs) -> CmdResult {
    let cwd = std::env::current_dir()
        .into_diagnostic()
        .wrap_err("could not read the current folder")?;
    let project = Project::discover(&cwd)?;
    let change = target::change(
        &project,
        args.change.as_deref(),
        target::Named::Argument("spectr report"),
    )?;
    let Some(journal) = run_journal::latest(&change.dir) else {
        let help = format!(
            "run `spectr ralph {}` first: each run keeps its events there",
            change.id
        );
        return Err(miette!(
            help = help,
            "no run of {} to report: {} holds no journal",
            change.id,
            run_journal::runs_dir(&change.dir).display()
        ));
    };
    let (entries, torn) = run_journal::read(&journal)
        .into_diagnostic()
        .wrap_err_with(|| format!("could not read {}", journal.display()))?;
    if torn > 0 {
        crate::cli::print_err(format_args!(
            "{}: {} could not be read (cut off by a kill, or from a newer spectr) and {} left out",
            journal.display(),
            crate::text::count(torn as u64, "line", "lines"),
            if torn == 1 { "is" } else { "are" }
        ));
    }
    let mut report = RunReport::build(&entries);
    if report.change.is_empty() {
        report.change.clone_from(&change.id);
    }
    // Files changed: a committed task's from its commit; the others' from
    // the checkpoints, read as checkpoints read the tree (spectr's own
    // files left out, no filter or hook run).
    match Checkpointer::discover(&project.root, GIT_TIMEOUT)
        .ok()
        .flatten()
    {
        Some(cp) => {
            let cp = cp.with_excludes(vec![
                crate::ralph::paths::state_dir(&change.dir),
                crate::ralph::paths::session_path(&change.dir),
            ]);
            // The status edits in the change's tasks files are spectr's
            // bookkeeping, not the attempt's work (merges leave them out too).
            let change_rel = change
                .dir
                .canonicalize()
                .ok()
                .and_then(|d| d.strip_prefix(cp.repo_root()).ok().map(|p| p.to_path_buf()));
            let is_tasks_file = |path: &str| {
                let path = std::path::Path::new(path);
                let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
                let tasks_name =
                    name == "tasks.md" || (name.starts_with("tasks") && name.ends_with(".jsonc"));
                tasks_name
                    && change_rel
                        .as_deref()
                        .is_some_and(|c| path.parent() == Some(c))
            };
            let mut diff = |base: &str, after: After<'_>| {
                let ours = match after {
                    After::Rev(r) => Some(r),
                    After::WorkTree => None,
                };
                cp.changed_paths(base, ours)
                    .map(|files| files.into_iter().filter(|f| !is_tasks_file(f)).collect())
                    .map_err(|e| format!("not known: {e}"))
            };
            let mut commit_files = |commit: &str| match cp.commit_files(commit) {
                Ok(Some(files)) => Ok(files.into_iter().filter(|f| !is_tasks_file(f)).collect()),
                Ok(None) => Err("not in the repository".to_string()),
                Err(e) => Err(e.to_string()),
            };
            report.fill_files(&mut diff, &mut commit_files);
        }
        None => {
            let why = || "not known: no git repository".to_string();
            report.fill_files(&mut |_, _| Err(why()), &mut |_| Err(why()));
        }
    }
    let markdown = crate::ui::report::markdown(&report);
    crate::cli::print_out(format!("{markdown}\n"))?;
    if let Some(path) = &args.html {
        let page = crate::ui::report::html(&report).map_err(|e| miette!("{e}"))?;
        crate::model::atomic::replace_atomic(path, page.as_bytes())
            .into_diagnostic()
            .wrap_err_with(|| format!("could not write {}", path.display()))?;
        crate::cli::print_err(format_args!("Wrote {}", path.display()));
    }
    Ok(ExitCode::SUCCESS)
}
