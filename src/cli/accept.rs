//! `spectr accept <change-id>`: writes tasks.jsonc (and split files) from the
//! change's tasks.md; the rules are in [`crate::model::accept`].

use crate::cli::CmdResult;
use crate::cli::args::AcceptArgs;
use crate::cli::list::write_stdout;
use crate::model::accept::{self, AcceptPlan};
use crate::model::{Project, spectr_yaml};
use std::path::Path;
use std::process::ExitCode;

pub fn run(args: &AcceptArgs) -> CmdResult {
    let cwd = std::env::current_dir()
        .map_err(|e| miette::miette!("cannot read the current folder: {e}"))?;
    let project = Project::discover(&cwd)?;
    let resolved = project.resolve_change(&args.change_id)?;
    let change = resolved.change;
    if let Some(typed) = &resolved.typed {
        eprintln!("Resolved '{typed}' -> '{}'", change.id);
    }
    let (_, config) = spectr_yaml::load(&project.root)?;
    let plan = accept::plan(&change, &config)?;
    let text = if args.dry_run {
        dry_run_report(&plan, &cwd)
    } else {
        plan.write()?;
        report(&plan, &cwd)
    };
    write_stdout(text.as_bytes())?;
    Ok(ExitCode::SUCCESS)
}

/// `p` relative to `cwd` when it is inside it (shorter, and what the user
/// would type), else as is.
fn shown(p: &Path, cwd: &Path) -> String {
    p.strip_prefix(cwd).unwrap_or(p).display().to_string()
}

fn wrote_line(plan: &AcceptPlan) -> String {
    match plan.sections {
        Some(k) => format!("{} tasks across {k} sections", plan.task_count),
        None => format!("{} tasks", plan.task_count),
    }
}

fn report(plan: &AcceptPlan, cwd: &Path) -> String {
    let mut out = format!(
        "Converted {} -> {}\nPreserved {}\n",
        shown(&plan.tasks_md, cwd),
        shown(&plan.tasks_jsonc, cwd),
        shown(&plan.tasks_md, cwd)
    );
    if plan.kept_statuses > 0 {
        out.push_str(&format!(
            "Kept the status of {} started or completed tasks\n",
            plan.kept_statuses
        ));
    }
    for t in &plan.dropped {
        out.push_str(&format!("Dropped task {t}\n"));
    }
    for p in &plan.stale {
        out.push_str(&format!("Removed stale {}\n", shown(p, cwd)));
    }
    out.push_str(&format!("Wrote {}\n", wrote_line(plan)));
    out
}

fn dry_run_report(plan: &AcceptPlan, cwd: &Path) -> String {
    let mut out = format!(
        "Dry run: nothing is written.\nWould convert {} -> {}\nWould preserve {}\n",
        shown(&plan.tasks_md, cwd),
        shown(&plan.tasks_jsonc, cwd),
        shown(&plan.tasks_md, cwd)
    );
    if plan.kept_statuses > 0 {
        out.push_str(&format!(
            "Would keep the status of {} started or completed tasks\n",
            plan.kept_statuses
        ));
    }
    for t in &plan.dropped {
        out.push_str(&format!("Would drop task {t}\n"));
    }
    for p in &plan.stale {
        out.push_str(&format!("Would remove stale {}\n", shown(p, cwd)));
    }
    out.push_str(&format!("Would write {}\n", wrote_line(plan)));
    for f in &plan.files {
        out.push_str(&format!("\n--- {} ---\n{}", shown(&f.path, cwd), f.content));
    }
    out
}
